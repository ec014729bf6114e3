"""A real chat-completions HTTP server on loopback that answers from a script.

For tests, benchmarks and offline demos: the openai client talks to it over HTTP exactly as
to a hosted API. A script is a callable taking the request's JSON body and returning what
to send: a string (the assistant's answer), or a ``Scripted`` response with a status code,
extra headers (``Retry-After``), an error message and parameter, a ``finish_reason``, a
delay, a body trickled a byte at a time, or a raw (possibly malformed) body.

The server keeps every request's body (``requests``), headers (``headers``, names in lower
case) and arrival
time (``times``, ``time.monotonic()``).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Scripted:
    content: str = ""
    status: int = 200
    delay: float = 0.0                  # seconds before the status line
    raw_body: str | None = None
    headers: dict = field(default_factory=dict)  # e.g. {"Retry-After": "2"}
    finish_reason: str = "stop"
    error: str = "scripted failure"     # the error's message, for a status other than 200
    param: str | None = None            # the error's parameter (OpenAI's error format)
    code: str | None = None             # the error's code, e.g. "insufficient_quota"
    trickle: float = 0.0                # seconds between the body's bytes


def completion_body(content: str, model: str = "scripted", finish_reason: str = "stop") -> dict:
    return {
        "id": "chatcmpl-scripted", "object": "chat.completion", "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "finish_reason": finish_reason,
                     "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 100, "completion_tokens": max(1, len(content) // 4),
                  "total_tokens": 100 + max(1, len(content) // 4)},
    }


class ScriptedChatServer:
    def __init__(self, script: Callable[[dict], str | Scripted], port: int = 0) -> None:
        self.script = script
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self.times: list[float] = []
        self._closing = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                server.requests.append(body)
                server.headers.append({k.lower(): v for k, v in self.headers.items()})
                server.times.append(time.monotonic())
                answer = server.script(body)
                if isinstance(answer, str):
                    answer = Scripted(answer)
                if answer.delay:
                    time.sleep(answer.delay)
                try:
                    self._send(answer, server._payload(answer, body))
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout): nothing to do

            def _send(self, answer: Scripted, payload: bytes) -> None:
                self.send_response(answer.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in answer.headers.items():
                    self.send_header(name, str(value))
                self.end_headers()
                if not answer.trickle:
                    self.wfile.write(payload)
                    return
                for index in range(len(payload)):
                    if server._closing.wait(answer.trickle):
                        return
                    self.wfile.write(payload[index:index + 1])
                    self.wfile.flush()

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @staticmethod
    def _payload(answer: Scripted, body: dict) -> bytes:
        if answer.raw_body is not None:
            return answer.raw_body.encode()
        if answer.status == 200:
            return json.dumps(completion_body(answer.content, body.get("model", ""),
                                              answer.finish_reason)).encode()
        return json.dumps({"error": {"message": answer.error, "type": "invalid_request_error"
                                     if answer.status < 500 else "server_error",
                                     "param": answer.param, "code": answer.code}}).encode()

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> ScriptedChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()
