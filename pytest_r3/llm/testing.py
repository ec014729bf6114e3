"""A real chat-completions HTTP server on loopback that answers from a script.

For tests, benchmarks and offline demos: the openai client talks to it over HTTP exactly as
to a hosted API. A script is a callable taking the request's JSON body and returning what
to send: a string (the assistant's answer), or a ``Scripted`` response with a status code,
a delay or a raw (possibly malformed) body.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Scripted:
    content: str = ""
    status: int = 200
    delay: float = 0.0
    raw_body: str | None = None


def completion_body(content: str, model: str = "scripted") -> dict:
    return {
        "id": "chatcmpl-scripted", "object": "chat.completion", "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 100, "completion_tokens": max(1, len(content) // 4),
                  "total_tokens": 100 + max(1, len(content) // 4)},
    }


class ScriptedChatServer:
    def __init__(self, script: Callable[[dict], str | Scripted]) -> None:
        self.script = script
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                server.requests.append(body)
                answer = server.script(body)
                if isinstance(answer, str):
                    answer = Scripted(answer)
                if answer.delay:
                    time.sleep(answer.delay)
                if answer.raw_body is not None:
                    payload = answer.raw_body.encode()
                elif answer.status == 200:
                    payload = json.dumps(completion_body(answer.content,
                                                         body.get("model", ""))).encode()
                else:
                    payload = json.dumps({"error": {"message": "scripted failure",
                                                    "type": "server_error"}}).encode()
                try:
                    self.send_response(answer.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout): nothing to do

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> ScriptedChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
