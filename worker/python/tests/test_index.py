"""A project's semantic index embeds what LangGraph's own stores embed, loaded as the official
server loads it."""

import asyncio
import importlib.util
from pathlib import Path

import pytest
from langgraph.store.base import PutOp
from langgraph.store.memory import InMemoryStore

from mostrador_runner.index import Index


def _project(tmp_path: Path) -> dict:
    (tmp_path / "embeddings.py").write_text("def embed(texts):\n    return [[float(len(t)), float(t.count('a')), 1.0] for t in texts]\n")
    return {"_base": str(tmp_path)}


def test_an_items_fields_are_those_langgraphs_store_embeds(tmp_path: Path) -> None:
    value = {"text": "a cat", "tags": ["x", "yy"], "deep": {"note": "aa"}, "n": 3}
    cases = [None, False, ["tags[*]"], ["deep.note", "text", "missing"], ["$"]]
    for fields in (None, ["text", "tags[*]"]):
        index = Index(_project(tmp_path), {"dims": 3, "embed": "./embeddings.py:embed", "fields": fields})
        store = InMemoryStore(index={"dims": 3, "embed": index.embeddings, "fields": fields})
        for asked in cases:
            ours = asyncio.run(index.aembed(value, asked))
            op = PutOp(("n",), "k", value, index=asked)
            theirs = store._extract_texts({(("n",), "k"): op})
            expected = sorted(
                (path, vector)
                for text, places in theirs.items()
                for (_, _, path), vector in zip(places, index.embeddings.embed_documents([text] * len(places)), strict=True)
            )
            assert sorted((e["field"], e["vector"]) for e in ours) == expected, (fields, asked)


def test_an_embedding_of_other_dimensions_than_the_index_says_is_refused(tmp_path: Path) -> None:
    index = Index(_project(tmp_path), {"dims": 4, "embed": "./embeddings.py:embed"})
    with pytest.raises(ValueError, match=r"3 dimensions, store\.index\.dims says 4"):
        asyncio.run(index.aquery("a query"))


def test_a_provider_model_is_loaded_by_langchains_init_embeddings(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-unused")
    if importlib.util.find_spec("langchain") and importlib.util.find_spec("langchain_openai"):
        index = Index({"_base": str(tmp_path)}, {"embed": "openai:text-embedding-3-small"})
        assert type(index.embeddings).__name__ == "OpenAIEmbeddings"
        assert index.embeddings.model == "text-embedding-3-small"
    elif not importlib.util.find_spec("langchain"):
        with pytest.raises(ImportError, match=r"langchain>=0\.3\.9"):
            Index({"_base": str(tmp_path)}, {"embed": "openai:text-embedding-3-small"})
