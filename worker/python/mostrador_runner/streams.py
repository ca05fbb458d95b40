"""The process's protocol streams, taken before any other import (none of LangGraph's here)."""

import os
import sys
from typing import BinaryIO


def take_streams() -> tuple[BinaryIO, int]:
    """The protocol's streams, the process's original stdout and stdin, taken before any user
    code runs: what it prints goes to stderr, and it reads nothing."""
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    in_fd = os.dup(0)
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    sys.stdout = sys.stderr
    return out, in_fd
