"""The runner's side of the protocol's contract: every example message of
`protocol-examples.json` (which the worker's contract test reads too) is one of the runner's
types, field for field, and the messages the runner builds are too."""

import asyncio
import json
import os
import types
import typing
from pathlib import Path
from typing import Any, Literal, NotRequired, Union, get_args, get_origin, get_type_hints

import pytest

from mostrador_runner import protocol
from mostrador_runner.protocol import FromRunner, ToRunner

EXAMPLES = json.loads((Path(__file__).parent.parent / "protocol-examples.json").read_text())


def mismatch(value: Any, kind: Any, where: str = "$") -> str | None:
    """Why `value` is not a `kind`, or None: a TypedDict has exactly its keys (no field the
    other side would drop), each of its type."""
    origin = get_origin(kind)
    if kind is Any:
        return None
    if origin in (Union, types.UnionType):
        reasons = [mismatch(value, option, where) for option in get_args(kind)]
        return None if None in reasons else f"{where}: none of {kind}: {reasons}"
    if origin is Literal:
        return None if value in get_args(kind) else f"{where}: {value!r} is not one of {get_args(kind)}"
    if origin is NotRequired:
        return mismatch(value, get_args(kind)[0], where)
    if typing.is_typeddict(kind):
        if not isinstance(value, dict):
            return f"{where}: not an object"
        hints = get_type_hints(kind)
        unknown = set(value) - set(hints)
        missing = kind.__required_keys__ - set(value)
        if unknown or missing:
            return f"{where}: {kind.__name__} has no {sorted(unknown)}, needs {sorted(missing)}"
        for key, item in value.items():
            reason = mismatch(item, hints[key], f"{where}.{key}")
            if reason:
                return reason
        return None
    if origin is list:
        if not isinstance(value, list):
            return f"{where}: not a list"
        (item,) = get_args(kind)
        return next((r for i, v in enumerate(value) if (r := mismatch(v, item, f"{where}[{i}]"))), None)
    if origin is dict:
        return None if isinstance(value, dict) else f"{where}: not an object"
    if kind is type(None):
        return None if value is None else f"{where}: not null"
    if kind is float:
        return None if isinstance(value, (int, float)) and not isinstance(value, bool) else f"{where}: not a number"
    if kind is int:
        return None if isinstance(value, int) and not isinstance(value, bool) else f"{where}: not an integer"
    return None if isinstance(value, kind) else f"{where}: {value!r} is not a {kind}"


@pytest.mark.parametrize("message", EXAMPLES["to_runner"], ids=lambda m: m["t"])
def test_every_message_to_the_runner_is_one_of_its_types(message: dict) -> None:
    assert mismatch(message, ToRunner) is None, mismatch(message, ToRunner)


@pytest.mark.parametrize("message", EXAMPLES["from_runner"], ids=lambda m: m["t"])
def test_every_message_from_the_runner_is_one_of_its_types(message: dict) -> None:
    assert mismatch(message, FromRunner) is None, mismatch(message, FromRunner)


def test_a_field_the_runner_does_not_know_is_refused() -> None:
    assert mismatch({"t": "cancel", "run": 1, "why": "x"}, ToRunner) is not None
    assert mismatch({"t": "call", "run": 1, "id": 1, "call": {"op": "get", "ns": ""}}, FromRunner) is not None


def test_the_messages_the_runner_builds_are_of_the_protocol() -> None:
    """The channel's calls and casts, and a run's ending, as the runner writes them."""
    read_fd, write_fd = os.pipe()
    in_read, in_write = os.pipe()

    async def build() -> None:
        channel = protocol.Channel(os.fdopen(write_fd, "wb", buffering=0), in_read)
        run = protocol.RunChannel(channel, 3)
        run.cast("subagent_done", slot=2)
        run.cast("describe", checkpoint_id="1f0d2c3e-4a5b-6c7d-8e9f-0a1b2c3d4e5f", snapshot={"values": {}})
        run.send({"t": "event", "event": "values", "data": {"a": 1}})
        calling = asyncio.ensure_future(run.call("get", ns="", checkpoint_id=None))
        await asyncio.sleep(0)
        calling.cancel()
        from mostrador_runner.run import failure

        run.send({"t": "done", "outcome": failure("ValueError", "bad", retryable=False)})
        channel.send({"t": "ready", "protocol": protocol.VERSION, "pid": os.getpid(), "graphs": ["g"]})
        channel.flush()
        channel.out.close()

    asyncio.run(build())
    os.close(in_write)
    with os.fdopen(read_fd, "rb") as lines:
        written = [json.loads(line) for line in lines]
    assert [m["t"] for m in written] == ["cast", "cast", "event", "call", "done", "ready"]
    for message in written:
        assert mismatch(message, FromRunner) is None, mismatch(message, FromRunner)
