"""A project's own embedding function, as LangGraph's semantic-search documentation writes one
(`"embed": "./embeddings.py:aembed_texts"`): here deterministic and local, each word hashed into
one of 64 dimensions, so texts sharing words are near."""

import hashlib
import re

DIMS = 64


def _vector(text: str) -> list[float]:
    vector = [0.0] * DIMS
    for word in re.findall(r"[a-z]+", text.lower()):
        vector[hashlib.sha256(word.encode()).digest()[0] % DIMS] += 1.0
    return vector


async def aembed_texts(texts: list[str]) -> list[list[float]]:
    return [_vector(text) for text in texts]
