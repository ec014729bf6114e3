"""The persistent store of evaluation results: ``.r3/results/<kernel>/<target>.jsonl``.

One JSON line per evaluated configuration, keyed by a hash of the kernel's source and the
configuration's values (not of the search space), so adding a tunable value keeps every
earlier result, and an interrupted run resumes without evaluating anything twice. Lines are
appended and flushed one at a time; a torn last line (killed mid-write) is ignored.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from pathlib import Path


def configuration_key(source_hash: str, candidate_key: str) -> str:
    return hashlib.sha256(f"{source_hash}:{candidate_key}".encode()).hexdigest()[:20]


class ResultStore:
    def __init__(self, root: str | Path, kernel: str, target: str) -> None:
        self.path = Path(root) / kernel / f"{target}.jsonl"
        self._lock = threading.Lock()
        self._entries: dict[str, dict] = {}
        if self.path.exists():
            for line in self.path.read_text().splitlines():
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue  # a line torn by a kill: that evaluation simply runs again
                self._entries[entry["key"]] = entry

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def get(self, key: str) -> dict | None:
        return self._entries.get(key)

    def entries(self) -> list[dict]:
        return list(self._entries.values())

    def add(self, key: str, candidate: dict, result: dict) -> dict:
        entry = {"key": key, "candidate": candidate, "result": result, "time": time.time()}
        line = json.dumps(entry, sort_keys=True) + "\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a") as stream:
                stream.write(line)
                stream.flush()
                os.fsync(stream.fileno())
            self._entries[key] = entry
        return entry
