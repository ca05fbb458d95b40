"""Drive a server serving this project (its semantic index: `store.index` over embeddings.py) with
the official SDK and record every answer, scores rounded to 4 places (the official server keeps
vectors in double precision, mostrador in single) and times masked.

    python drive.py --url http://127.0.0.1:2024 --out answers.json
"""

import argparse
import asyncio
import json
from typing import Any

import httpx
from langgraph_sdk import get_client

DOCS = [
    ("cat", {"text": "the cat sat on the mat", "tag": "pets"}, None),
    ("dog", {"text": "a dog barked at the mailman", "tag": "pets"}, None),
    ("tea", {"text": "green tea in the morning", "tag": "food"}, None),
    ("bread", {"text": "fresh bread from the bakery", "tag": "food"}, None),
    # Its own fields: the tag is embedded, not the text.
    ("tagged", {"text": "nothing about animals", "tag": "cat mat"}, ["tag"]),
    # Kept out of the index: found by no query.
    ("hidden", {"text": "the cat on the mat again", "tag": "pets"}, False),
]


def item(found: dict) -> dict:
    score = found.get("score")
    return {
        "namespace": found["namespace"],
        "key": found["key"],
        "value": found["value"],
        "score": None if score is None else round(score, 4),
    }


def items(answer: dict) -> list[dict]:
    return [item(found) for found in answer["items"]]


async def drive(url: str, rust: bool) -> dict[str, Any]:
    client = get_client(url=url, api_key=None)
    answers: dict[str, Any] = {}

    async def record(key: str, call: Any) -> Any:
        for _ in range(120):
            try:
                answers[key] = await call()
                return answers[key]
            except httpx.HTTPStatusError as exc:
                if exc.response.status_code == 503:
                    await asyncio.sleep(0.5)
                    continue
                answers[key] = {"error": exc.response.status_code}
                return None
        raise RuntimeError(f"{key}: still 503 after a minute")

    for key, value, index in DOCS:
        await client.store.put_item(["docs"], key, value, index=index)
    search = client.store.search_items
    answers["search/cat"] = items(await search(["docs"], query="a cat on a mat"))
    answers["search/bakery"] = items(await search(["docs"], query="the bakery bread", limit=3))
    answers["search/filtered"] = items(await search(["docs"], query="a cat on a mat", filter={"tag": "food"}))
    answers["search/pages"] = [
        items(await search(["docs"], query="the morning tea", limit=2, offset=offset)) for offset in (0, 2, 4)
    ]
    answers["search/past-the-scored"] = items(await search(["docs"], query="the morning tea", limit=2, offset=6))
    answers["search/no-words"] = items(await search(["docs"], query="1234", limit=3))
    # Without a query: unscored (sorted here: the two servers order them differently).
    plain = items(await search(["docs"], limit=20))
    answers["search/plain"] = sorted(plain, key=lambda found: found["key"])
    # A new value is embedded anew; a deleted item is found no more.
    await client.store.put_item(["docs"], "tea", {"text": "a cat asleep on a mat", "tag": "pets"})
    await client.store.delete_item(["docs"], "dog")
    answers["search/cat/after"] = items(await search(["docs"], query="a cat on a mat"))

    # The graph keeps memories (embedded in its run) and recalls them by meaning.
    thread = await client.threads.create()
    for said in ("remember the sky is blue", "remember my dog is called Rex", "what colour is the sky?"):
        state = await record(
            f"run/{said}",
            lambda said=said: client.runs.wait(
                thread["thread_id"], "memory", input={"messages": [{"role": "human", "content": said}]}
            ),
        )
        answers[f"run/{said}"] = [m["content"] for m in (state or {}).get("messages", [])[-2:]]
    answers["search/memories"] = items(await search(["memories"], query="what is my dog called"))
    if rust:
        # mostrador's Rust nodes (`e2e_recall`): their puts embedded, their searches ranked, by
        # the same function.
        thread = await client.threads.create()
        await client.runs.wait(thread["thread_id"], "e2e_recall", input={"remember": "rust likes the blue sea"})
        answers["rust/search"] = items(await search(["memories", "rust"], query="the blue sea"))
        # A thread of its own: the first's state still holds what it remembered.
        thread = await client.threads.create()
        recalled = await client.runs.wait(thread["thread_id"], "e2e_recall", input={"recall": "is the sky blue"})
        answers["rust/recalled"] = [
            {"text": found["text"], "score": round(found["score"], 4)} for found in recalled["recalled"]
        ]
        answers["rust/client"] = [
            {"text": found["value"]["text"], "score": found["score"]}
            for found in items(await search(["memories"], query="is the sky blue", limit=3))
        ]
    return answers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--rust", action="store_true", help="drive mostrador's Rust test graph too")
    args = parser.parse_args()
    answers = asyncio.run(drive(args.url, args.rust))
    with open(args.out, "w") as out:
        json.dump(answers, out, indent=2, sort_keys=True)


if __name__ == "__main__":
    main()
