"""A local OpenAI-compatible chat model for the token benchmark.

POST /v1/chat/completions with "stream": true answers with TOKENS chunks, INTERVAL seconds
apart; each chunk's content is "@<unix time it was written>;" so whoever receives it downstream
can tell how long that token took to reach them. Without "stream" it answers one message with
one such stamp.

usage: fake_model.py PORT        env: TOKENS=50 INTERVAL=0.02
"""
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOKENS = int(os.environ.get("TOKENS", "50"))
INTERVAL = float(os.environ.get("INTERVAL", "0.02"))


def stamp() -> str:
    return "@%.6f;" % time.time()


class Model(BaseHTTPRequestHandler):
    # Each token leaves at once (TCP_NODELAY), as a model provider's server sends it: with Nagle's
    # algorithm, a token written while the previous write waits for its ACK waits for the
    # client's delayed ACK (up to 40 ms), on a kept-alive connection above all.
    disable_nagle_algorithm = True
    protocol_version = "HTTP/1.1"

    def log_message(self, *_):
        pass

    def do_GET(self):  # /v1/models, for clients that look before they ask
        self._json({"object": "list", "data": [{"id": "m", "object": "model", "owned_by": "bench"}]})

    def do_POST(self):
        length = int(self.headers.get("content-length") or 0)
        request = json.loads(self.rfile.read(length) or b"{}")
        if not request.get("stream"):
            self._json({
                "id": "bench", "object": "chat.completion", "created": int(time.time()), "model": "m",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": stamp()}}],
            })
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for i in range(TOKENS):
            delta = {"content": stamp()}
            if i == 0:
                delta["role"] = "assistant"
            self._event(self._chunk(delta, None))
            time.sleep(INTERVAL)
        self._event(self._chunk({}, "stop"))
        self._event("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    @staticmethod
    def _chunk(delta, finish):
        return {"id": "bench", "object": "chat.completion.chunk", "created": 0, "model": "m",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    def _event(self, payload):
        body = payload if isinstance(payload, str) else json.dumps(payload)
        line = ("data: %s\n\n" % body).encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))  # one HTTP chunk per event
        self.wfile.flush()

    def _json(self, obj):
        data = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256


if __name__ == "__main__":
    Server(("127.0.0.1", int(sys.argv[1])), Model).serve_forever()
