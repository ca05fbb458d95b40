"""Starts mostrador's Python runner (the `mostrador_runner` package beside this file) for a worker:
`python runner.py <langgraph.json>` serves runs on its standard input and output;
`python runner.py <langgraph.json> --template` is a warm template that forks runners
(`mostrador_runner.main.template`); `python runner.py <langgraph.json> --api` serves the
project's auth handlers and HTTP app to the api (`mostrador_runner.api`)."""

import sys

from mostrador_runner.streams import take_streams

# Before anything else is imported: what user code prints must not reach the protocol.
streams = take_streams()

if sys.argv[2:] == ["--api"]:
    from mostrador_runner import api

    api.start(streams, sys.argv[1])

from mostrador_runner.main import load, start, template  # noqa: E402

if sys.argv[2:] == ["--template"]:
    template(streams, sys.argv[1])
else:
    start(streams, load(sys.argv[1]))
