"""A fake OpenAI-compatible chat model server for the template graphs: deterministic, local, no
network. It answers `POST /v1/chat/completions`, streamed or not, as the real API does.

What it answers tells the test what reached the model: every answer names the model asked for
(`[fake-large]`) and the first words of the system prompt, so a run whose runtime context did not
reach LangGraph answers visibly differently; memories in the system prompt (the memory template's
`<memories>`) are named too. With tools offered, a user turn that asks about the
weather or to remember something calls the matching tool once; a tool's result is then answered
in words.

    python fake_openai.py PORT        # or, from a test: start(port) in a thread
"""

import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def _text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def reply(body: dict) -> dict:
    """The assistant message for a request: `{"content": str, "tool_calls": [...]}`."""
    model = body.get("model", "?")
    messages = body.get("messages", [])
    system = next((_text(m.get("content")) for m in messages if m.get("role") == "system"), "")
    prefix = f"[{model}|{' '.join(system.split()[:4])}]"
    remembered = re.findall(r"'content': '([^']*)'", system)
    if remembered:
        prefix += f" (I remember: {'; '.join(sorted(remembered))})"
    tools = {t["function"]["name"] for t in body.get("tools", []) if t.get("type") == "function"}
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        return {"content": f"{prefix} The tool said: {_text(last.get('content'))}", "tool_calls": []}
    asked = _text(last.get("content"))
    turn = sum(1 for m in messages if m.get("role") == "user")
    if "weather" in asked.lower():
        for name in ("get_weather", "search"):
            if name in tools:
                arguments = {"city": "Paris"} if name == "get_weather" else {"query": "weather in Paris"}
                return {"content": "", "tool_calls": [_call(name, arguments, turn)]}
    if asked.lower().startswith("remember") and "upsert_memory" in tools:
        arguments = {"content": asked[len("remember"):].strip(" :,."), "context": "the user asked"}
        return {"content": "", "tool_calls": [_call("upsert_memory", arguments, turn)]}
    return {"content": f"{prefix} You said: {asked}", "tool_calls": []}


def _call(name: str, arguments: dict, turn: int) -> dict:
    return {
        "id": f"call_{name}_{turn}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments, sort_keys=True)},
    }


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._json(404, {"error": {"message": f"no route {self.path}"}})
            return
        message = reply(body)
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        common = {"id": "chatcmpl-fake", "created": 0, "model": body.get("model", "?")}
        if not body.get("stream"):
            choice = {
                "index": 0,
                "message": {"role": "assistant", "content": message["content"] or None,
                            **({"tool_calls": message["tool_calls"]} if message["tool_calls"] else {})},
                "finish_reason": "tool_calls" if message["tool_calls"] else "stop",
            }
            self._json(200, {**common, "object": "chat.completion", "choices": [choice], "usage": usage})
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        chunk = {**common, "object": "chat.completion.chunk"}
        self._event({**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]})
        for index, call in enumerate(message["tool_calls"]):
            delta = {"tool_calls": [{"index": index, **call}]}
            self._event({**chunk, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
        for word in message["content"].split(" ") if message["content"] else ():
            self._event({**chunk, "choices": [{"index": 0, "delta": {"content": word + " "}, "finish_reason": None}]})
        finish = "tool_calls" if message["tool_calls"] else "stop"
        self._event({**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        if (body.get("stream_options") or {}).get("include_usage"):
            self._event({**chunk, "choices": [], "usage": usage})
        self._send_chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _json(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _event(self, payload: dict) -> None:
        self._send_chunk(b"data: " + json.dumps(payload).encode() + b"\n\n")

    def _send_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()


def start(port: int = 0) -> ThreadingHTTPServer:
    """Serves on 127.0.0.1:`port` (0: a free one) in a daemon thread."""
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


if __name__ == "__main__":
    server = start(int(sys.argv[1]))
    print(f"fake OpenAI model on http://127.0.0.1:{server.server_port}/v1", flush=True)
    while True:
        time.sleep(3600)
