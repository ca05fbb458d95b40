"""A project's semantic index (`store.index` of its langgraph.json): its embedding function,
loaded as the official server loads it, and the texts of an item it embeds, chosen as LangGraph's
stores choose them (`fields`, or a put's own `index`). The api's helper processes embed what
clients put and search for; a runner embeds what its graph puts and searches for. Postgres keeps
the vectors and the worker or the api ranks them (`queue/src/data/store/similar.rs`)."""

from collections.abc import Mapping
from typing import Any

from langchain_core.embeddings import Embeddings
from langgraph.store.base import ensure_embeddings, get_text_at_path, tokenize_path

from .auth import load_object
from .protocol import Embedded


def _embeddings(config: dict, embed: Any) -> Embeddings:
    """What `embed` names, as the official server resolves it: `path.py:name` (or
    `module.py:name`) a function or an `Embeddings`, anything else a `provider:model` for
    LangChain's `init_embeddings`."""
    if not isinstance(embed, str):
        raise ValueError(f"store.index.embed must be a string, not {type(embed).__name__}")
    if ".py:" in embed:
        found = load_object(config, "store.index.embed", embed)
        if isinstance(found, Embeddings):
            return found
        if not callable(found):
            raise TypeError(f"store.index.embed: {embed} is {type(found).__name__}, not a function or Embeddings")
        return ensure_embeddings(found)
    try:
        from langchain.embeddings import init_embeddings
    except ImportError as e:
        raise ImportError(
            f"store.index.embed {embed!r} names a provider's model, which LangChain's init_embeddings "
            "loads: install 'langchain>=0.3.9' and the provider's package beside the graphs, or name "
            "a function ('./embeddings.py:embed')"
        ) from e
    return init_embeddings(embed)


class Index:
    """The index of a project's store: what to embed of an item, and its embedding function."""

    def __init__(self, config: dict, index: dict) -> None:
        if not isinstance(index, dict) or "embed" not in index:
            raise ValueError("store.index must be an object with 'embed' (and 'dims', 'fields')")
        self.dims: int | None = index.get("dims")
        self.embeddings = _embeddings(config, index["embed"])
        self.fields = _tokenized(index.get("fields") or ["$"])

    def texts(self, value: Mapping[str, Any], index: Any) -> tuple[list[str], list[str]]:
        """The fields of `value` to embed and their texts: the index's fields, or the put's own
        (`index`: a list of paths; `False` for none); a path matching several texts gives one
        field each (`path.0`, `path.1`, ...)."""
        if index is False:
            return [], []
        # A put's own paths are all tokenized, `$` too (which then names no field), as
        # LangGraph's stores read them.
        paths = self.fields if index is None else _tokenized(index, whole="")
        fields: list[str] = []
        texts: list[str] = []
        for path, tokens in paths:
            found = get_text_at_path(value, tokens)
            if len(found) > 1:
                fields += [f"{path}.{i}" for i in range(len(found))]
                texts += found
            elif found:
                fields.append(path)
                texts.append(found[0])
        return fields, texts

    def embedded(self, fields: list[str], vectors: list[list[float]]) -> list[Embedded]:
        """`{"field", "vector"}` of each field, as the store keeps them."""
        if len(vectors) != len(fields):
            raise ValueError(f"the embedding function gave {len(vectors)} vectors for {len(fields)} texts")
        return [Embedded(field=field, vector=self.checked(vector)) for field, vector in zip(fields, vectors, strict=True)]

    def checked(self, vector: Any) -> list[float]:
        """`vector` as floats, of the index's `dims` when it says."""
        floats = [float(x) for x in vector]
        if self.dims is not None and len(floats) != self.dims:
            raise ValueError(f"the embedding function gave {len(floats)} dimensions, store.index.dims says {self.dims}")
        return floats

    async def aembed(self, value: Mapping[str, Any], index: Any) -> list[Embedded]:
        fields, texts = self.texts(value, index)
        if not texts:
            return []
        return self.embedded(fields, await self.embeddings.aembed_documents(texts))

    async def aquery(self, query: str) -> list[float]:
        return self.checked(await self.embeddings.aembed_query(query))


def _tokenized(paths: Any, whole: str = "$") -> list[tuple[str, Any]]:
    """Each path and its tokens; `whole` (`$`) stands for the whole value."""
    if not isinstance(paths, list) or not all(isinstance(path, str) for path in paths):
        raise ValueError(f"an index's fields are a list of paths, not {paths!r}")
    return [(path, path if path == whole else tokenize_path(path)) for path in paths]


def load_index(config: dict) -> Index | None:
    """The project's index, if its langgraph.json has one."""
    index = (config.get("store") or {}).get("index")
    return Index(config, index) if index else None
