"""The template-style graphs' answers on both servers, compared: every answer the official server
gives must be mostrador's too (ids and times masked), but for the differences KNOWN lists with
their reasons. Also checks that the answers are the ones the graphs were written to give, so the
comparison cannot pass on two equal failures. Exits 1 naming each answer that differs.

    python check.py official.json mostrador.json
"""

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from check import renumber  # noqa: E402

# Answers that still differ, each with its reason (docs/wire-protocol.md). Reported, not failed.
KNOWN: dict[str, str] = {}

# What the graphs must have answered (on both servers): proof that the context, the store and
# the factory's runtime reached the graph.
EXPECTED = {
    "agent/wait/default/answer": "[fake-small|You are a helpful",
    "agent/wait/context/answer": "[fake-large|You are terse and",
    "agent/wait/configurable/answer": "[fake-large|You are a helpful",
    "agent/wait/unknown-context-key/answer": "[fake-large|",
    "agent/assistant/wait/answer": "[fake-large|You are a helpful",
    "agent/assistant/wait/context/answer": "[fake-large|Merged prompt here.]",
    "module/wait/context/answer": "[fake-large|You are terse and",
    "memory/recall/answer": "(I remember: I like green tea)",
    "prebuilt/wait/answer": "It is always sunny in Paris",
    "mcp/tools/call/answer": "It is always sunny in Paris",
    "factory/wait/default/answer": "hello (open for None)",
    "factory/wait/context/answer": "hola (open for hola)",
    "factory/wait/headers/answer": "{'x-user-tier': 'gold'}",
}


# Keys of run and checkpoint metadata that are each server's own bookkeeping (docs/wire-protocol.md
# §11): the official server's host, plan, versions, request id and user; mostrador's attempt.
BOOKKEEPING = {
    "langgraph_api_url", "langgraph_api_version", "langgraph_host", "langgraph_plan",
    "langgraph_request_id", "langgraph_auth_user", "langgraph_auth_user_id",
    "langgraph_auth_permissions", "run_attempt", "user_id",
}


def comparable(answer: Any) -> Any:
    """An answer without what each server keeps for itself: the stream's `metadata` event carries
    the run's id and attempt (and mostrador's trace id, documented), a message chunk's and a
    checkpoint's metadata each server's bookkeeping. Masked ids are numbered again after."""
    if isinstance(answer, list) and answer and isinstance(answer[0], list):
        events = []
        for name, data in answer:
            if name == "metadata" and isinstance(data, dict):
                data = {k: data.get(k) for k in ("attempt",)}
            elif name.startswith("messages") and isinstance(data, list) and len(data) == 2:
                data = [data[0], {k: v for k, v in data[1].items() if k not in BOOKKEEPING}]
            events.append([name, data])
        return renumber(events)
    if isinstance(answer, list) and answer and all(isinstance(item, dict) for item in answer):
        return renumber([comparable(item) for item in answer])
    if isinstance(answer, dict) and isinstance(answer.get("metadata"), dict) and "values" in answer:
        metadata = {k: v for k, v in answer["metadata"].items() if k not in BOOKKEEPING}
        return renumber({**answer, "metadata": metadata})
    return answer


def differences(official: dict, mostrador: dict) -> list[str]:
    out = []
    for key in sorted(official):
        if key in KNOWN:
            continue
        theirs, ours = comparable(official[key]), comparable(mostrador.get(key, "<missing>"))
        if theirs != ours:
            out.append(f"{key}:\n    official:  {json.dumps(theirs, sort_keys=True)[:600]}\n"
                       f"    mostrador: {json.dumps(ours, sort_keys=True)[:600]}")
    return out


def unexpected(answers: dict, server: str) -> list[str]:
    out = []
    for key, text in EXPECTED.items():
        answer: Any = answers.get(key)
        if text not in json.dumps(answer):
            out.append(f"{server} {key}: expected {text!r} in {json.dumps(answer)[:400]}")
    return out


def main() -> int:
    official = json.load(open(sys.argv[1]))
    mostrador = json.load(open(sys.argv[2]))
    failures = unexpected(official, "official") + unexpected(mostrador, "mostrador")
    failures += differences(official, mostrador)
    same = sum(1 for key in official if comparable(official[key]) == comparable(mostrador.get(key)))
    print(f"{same} of {len(official)} answers the same")
    for key, reason in KNOWN.items():
        state = "now the same" if official.get(key) == mostrador.get(key) else "differs"
        print(f"known ({state}): {key}: {reason}")
    for failure in failures:
        print(f"FAIL {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
