"""``.r3/runs/<kernel>/``: every prompt, answer, diagnostic and result of the outer loop.

``events.jsonl`` is the audit trail, one JSON object per line, appended as things happen.
``answers.jsonl`` maps a hash of each prompt to the model's answer, so a resumed run gets
the same answers without asking (and paying for) them again. The hash covers what decides
an answer besides the messages (endpoint, model, temperature): a run with another model or
endpoint asks again instead of replaying the old model's answers.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from pathlib import Path


def prompt_key(messages: list[dict], identity: dict | None = None) -> str:
    """The cache key of an answer: ``identity`` is the client's (endpoint, model,
    temperature)."""
    payload = {"identity": identity or {}, "messages": messages}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:24]


class RunLog:
    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.answers: dict[str, str] = {}
        path = self.folder / "answers.jsonl"
        if path.exists():
            for line in path.read_text().splitlines():
                try:
                    item = json.loads(line)
                    self.answers[item["key"]] = item["answer"]
                except (ValueError, KeyError, TypeError):
                    continue  # a line torn by a kill

    def _append(self, name: str, payload: dict) -> None:
        line = json.dumps(payload, sort_keys=True, default=str) + "\n"
        with self._lock, open(self.folder / name, "a") as stream:
            stream.write(line)
            stream.flush()
            os.fsync(stream.fileno())

    def event(self, kind: str, **data: object) -> None:
        self._append("events.jsonl", {"event": kind, "time": time.time(), **data})

    def remember_answer(self, key: str, answer: str, **about: object) -> None:
        """Keep ``answer`` under ``key``; ``about`` (model, endpoint) is for the reader."""
        self.answers[key] = answer
        self._append("answers.jsonl", {**about, "key": key, "answer": answer})
