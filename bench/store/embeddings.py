"""A stand-in for a model's embeddings, of their size (1,536 dimensions, as OpenAI's
text-embedding-3-small) and density: each word a fixed pseudo-random direction, a text the sum of
its words'. Deterministic and local, so both servers rank the same items alike."""

import hashlib
import random

DIMS = 1536
_WORDS: dict[str, list[float]] = {}


def _word(word: str) -> list[float]:
    if word not in _WORDS:
        seeded = random.Random(hashlib.sha256(word.encode()).digest())
        _WORDS[word] = [seeded.gauss(0.0, 1.0) for _ in range(DIMS)]
    return _WORDS[word]


def _vector(text: str) -> list[float]:
    vector = [0.0] * DIMS
    for word in text.lower().split():
        for i, x in enumerate(_word(word)):
            vector[i] += x
    return vector


async def aembed_texts(texts: list[str]) -> list[list[float]]:
    return [_vector(text) for text in texts]
