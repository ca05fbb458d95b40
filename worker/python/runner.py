"""Starts mostrador's Python runner (the `mostrador_runner` package beside this file) for a worker:
`python runner.py <langgraph.json>`."""

import sys

from mostrador_runner.protocol import take_streams

# Before anything else is imported: what user code prints must not reach the protocol.
streams = take_streams()

from mostrador_runner.main import start  # noqa: E402

start(streams, sys.argv[1])
