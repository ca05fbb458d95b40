"""Deep agents (PyPI `deepagents`) served by mostrador: their files, their sandbox, their
subagents' limit.

* `ThreadFiles`: deepagents' backend protocol over the run's thread's files, which the worker keeps
  in Postgres beside the thread's checkpoints and never in them. Copying, deleting and retention
  of the thread carry them; its owner reads them through the api (`GET /threads/{id}/files`).
* `ThreadSandbox`: the same files, and `execute`: a command in a sandbox of its own (bubblewrap,
  no network, limits of time, CPU and memory, all set by the worker's operator) over a copy of
  the thread's files, whose changes are written back to the thread when it ends.
* `backend()`: a sandbox (or the files alone), with `/memories/` routed to the Store: the
  memories of the thread's owner, which their other threads share and no one else reads.
* `SubagentLimit`: a middleware that holds each delegation (the `task` tool) until the worker
  gives it a slot, under the limits per run and per worker the operator set.

    from deepagents import create_deep_agent
    from mostrador.deepagents import SubagentLimit, backend

    agent = create_deep_agent(model=..., backend=backend(), middleware=[SubagentLimit()])
"""

import asyncio
import base64
from typing import Any

from deepagents.backends import CompositeBackend, StoreBackend
from deepagents.backends.protocol import (
    BackendProtocol,
    DeleteResult,
    EditResult,
    ExecuteResponse,
    FileDownloadResponse,
    FileInfo,
    FileUploadResponse,
    GlobResult,
    GrepResult,
    LsResult,
    ReadResult,
    SandboxBackendProtocol,
    WriteResult,
)
from deepagents.backends.utils import (
    InvalidGlobPatternError,
    _get_backend_read_file_type,
    _glob_search_files,
    grep_matches_from_files,
    perform_string_replacement,
    slice_read_response,
)
from langchain.agents.middleware import AgentMiddleware
from langchain_core.runnables.config import ensure_config

import mostrador


async def _files(action: str, **args: Any) -> Any:
    return await mostrador.current().call("files", action=action, **args)


def _sync(coroutine_function: Any, *args: Any, **kwargs: Any) -> Any:
    """A call from deepagents' synchronous paths, which run outside the run's event loop."""
    run = mostrador.current()
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run_coroutine_threadsafe(coroutine_function(*args, **kwargs), run.loop).result()
    raise RuntimeError("call the async method (`a...`) inside the event loop")


def _file_data(found: dict) -> dict:
    return {
        "content": found["content"],
        "encoding": found["encoding"],
        "created_at": found["created_at"],
        "modified_at": found["modified_at"],
    }


def _info(found: dict) -> FileInfo:
    return {"path": found["path"], "is_dir": False, "size": found["size"], "modified_at": found["modified_at"]}


def _children(directory: str, listed: list[dict]) -> list[FileInfo]:
    """The entries directly in `directory`: its files, and its subfolders (`is_dir`, a trailing `/`)."""
    prefix = directory if directory.endswith("/") else directory + "/"
    infos: list[FileInfo] = []
    folders: set[str] = set()
    for found in listed:
        relative = found["path"][len(prefix) :]
        if not found["path"].startswith(prefix) or not relative:
            continue
        if "/" in relative:
            folders.add(prefix + relative.split("/")[0] + "/")
        else:
            infos.append(_info(found))
    infos.extend({"path": folder, "is_dir": True, "size": 0, "modified_at": ""} for folder in folders)
    infos.sort(key=lambda info: info["path"])
    return infos


def _failed(result: Any) -> str | None:
    """The reason the worker gave for refusing a write (over the thread's limit, a bad path)."""
    return result.get("error") if isinstance(result, dict) else None


class ThreadFiles(BackendProtocol):
    """The run's thread's files, kept by mostrador in Postgres (never in the checkpoint)."""

    async def als(self, path: str) -> LsResult:
        return LsResult(entries=_children(path, await _files("list", path=path)))

    async def aread(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        found = await _files("read", path=file_path)
        if found is None:
            return ReadResult(error=f"File '{file_path}' not found")
        data = _file_data(found)
        if found["encoding"] != "utf-8" or _get_backend_read_file_type(file_path) != "text":
            return ReadResult(file_data=data)
        return slice_read_response(data, offset, limit)

    async def awrite(self, file_path: str, content: str) -> WriteResult:
        written = await _files("write", files=[{"path": file_path, "content": content, "encoding": "utf-8"}])
        if error := _failed(written):
            return WriteResult(error=error)
        return WriteResult(path=file_path)

    async def aedit(self, file_path: str, old_string: str, new_string: str, replace_all: bool = False) -> EditResult:
        found = await _files("read", path=file_path)
        if found is None:
            return EditResult(error=f"Error: File '{file_path}' not found")
        if found["encoding"] != "utf-8":
            return EditResult(error="Error: Cannot edit binary files with text replacements.")
        replaced = perform_string_replacement(found["content"], old_string, new_string, replace_all)
        if isinstance(replaced, str):
            return EditResult(error=replaced)
        content, occurrences = replaced
        written = await _files("write", files=[{"path": file_path, "content": content, "encoding": "utf-8"}])
        if error := _failed(written):
            return EditResult(error=error)
        return EditResult(path=file_path, occurrences=int(occurrences))

    async def adelete(self, file_path: str) -> DeleteResult:
        done = await _files("write", deleted=[file_path.rstrip("/") or "/"])
        if error := _failed(done):
            return DeleteResult(error=error)
        if not done["deleted"]:
            return DeleteResult(error=f"Error: File '{file_path}' not found")
        return DeleteResult(path=file_path)

    async def _all(self, path: str | None) -> dict[str, dict]:
        return {found["path"]: _file_data(found) for found in await _files("read_under", path=path or "/")}

    async def agrep(self, pattern: str, path: str | None = None, glob: str | None = None, *, max_count: int | None = None) -> GrepResult:
        files = await self._all(path)
        return grep_matches_from_files(files, pattern, path if path is not None else "/", glob, max_count=max_count)

    async def aglob(self, pattern: str, path: str | None = None) -> GlobResult:
        files = await self._all(path)
        try:
            found = _glob_search_files(files, pattern, path)
        except InvalidGlobPatternError as err:
            return GlobResult(error=str(err))
        if found == "No files found":
            return GlobResult(matches=[])
        listed = {f["path"]: f for f in await _files("list", path=path or "/")}
        return GlobResult(matches=[_info(listed[p]) for p in found.split("\n") if p in listed])

    async def aupload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        answers = []
        for path, content in files:
            try:
                entry = {"path": path, "content": content.decode("utf-8"), "encoding": "utf-8"}
            except UnicodeDecodeError:
                entry = {"path": path, "content": base64.b64encode(content).decode(), "encoding": "base64"}
            written = await _files("write", files=[entry])
            answers.append(FileUploadResponse(path=path, error=_failed(written)))
        return answers

    async def adownload_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        answers = []
        for path in paths:
            found = await _files("read", path=path)
            if found is None:
                answers.append(FileDownloadResponse(path=path, error="file_not_found"))
            elif found["encoding"] == "base64":
                answers.append(FileDownloadResponse(path=path, content=base64.b64decode(found["content"])))
            else:
                answers.append(FileDownloadResponse(path=path, content=found["content"].encode("utf-8")))
        return answers

    # deepagents' synchronous paths (a sync tool, run in a thread).
    def ls(self, path: str) -> LsResult:
        return _sync(self.als, path)

    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        return _sync(self.aread, file_path, offset, limit)

    def write(self, file_path: str, content: str) -> WriteResult:
        return _sync(self.awrite, file_path, content)

    def edit(self, file_path: str, old_string: str, new_string: str, replace_all: bool = False) -> EditResult:
        return _sync(self.aedit, file_path, old_string, new_string, replace_all)

    def delete(self, file_path: str) -> DeleteResult:
        return _sync(self.adelete, file_path)

    def grep(self, pattern: str, path: str | None = None, glob: str | None = None, *, max_count: int | None = None) -> GrepResult:
        return _sync(self.agrep, pattern, path, glob, max_count=max_count)

    def glob(self, pattern: str, path: str | None = None) -> GlobResult:
        return _sync(self.aglob, pattern, path)

    def upload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        return _sync(self.aupload_files, files)

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        return _sync(self.adownload_files, paths)


def _calling_tool() -> str | None:
    """The run id of the tool call this code runs in (its span's id), if any."""
    manager = ensure_config().get("callbacks")
    parent = getattr(manager, "parent_run_id", None)
    return str(parent) if parent else None


class ThreadSandbox(ThreadFiles, SandboxBackendProtocol):
    """The thread's files, and commands run by the worker in a sandbox over them."""

    @property
    def id(self) -> str:
        return f"mostrador-thread-{mostrador.current().thread_id}"

    async def aexecute(self, command: str, *, timeout: int | None = None) -> ExecuteResponse:  # noqa: ASYNC109
        done = await mostrador.current().call("execute", command=command, timeout=timeout, span_parent=_calling_tool())
        if error := _failed(done):
            return ExecuteResponse(output=error, exit_code=None)
        output = done["output"]
        if done.get("files_error"):
            output += f"\n[the command's changes to the files were not kept: {done['files_error']}]"
        return ExecuteResponse(output=output, exit_code=done["exit_code"], truncated=done["truncated"])

    def execute(self, command: str, *, timeout: int | None = None) -> ExecuteResponse:
        return _sync(self.aexecute, command, timeout=timeout)


def backend(*, sandbox: bool = True, memories: str | None = "/memories/") -> BackendProtocol:
    """The thread's files (and a sandbox, unless `sandbox=False`); `memories`, a folder routed to
    the Store under the namespace `("memories",)` of the thread's owner (`None`: no such folder)."""
    files = ThreadSandbox() if sandbox else ThreadFiles()
    if memories is None:
        return files
    return CompositeBackend(default=files, routes={memories: StoreBackend(namespace=lambda _runtime: ("memories",))})


class SubagentLimit(AgentMiddleware):
    """Holds each subagent delegation (deepagents' `task` tool) until the worker gives it a slot:
    at most `--subagents-per-run` at once in a run and `--subagents-per-worker` in all the
    worker's runs."""

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        if request.tool_call.get("name") != "task":
            return await handler(request)
        run = mostrador.current()
        slot = (await run.call("subagent"))["slot"]
        try:
            return await handler(request)
        finally:
            run.cast("subagent_done", slot=slot)
