"""``r3.lock``: the tuned settings of each kernel per target, committed with the code.

JSON with sorted keys and one setting per line, so a change shows as a small diff. A kernel
uses its entry only when the entry's source hash equals the current source's and the entry
was made for this machine's target; otherwise it runs its baseline and says why once, at
debug level (logger ``pytest_r3``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
from pathlib import Path

from ..outputs import write_json_atomic

LOCK_NAME = "r3.lock"
LOCK_ENV = "PYTEST_R3_LOCK"
VERSION = 1
log = logging.getLogger("pytest_r3")


def features_hash(features: str) -> str:
    return hashlib.sha256(features.encode()).hexdigest()[:12]


class LockFile:
    def __init__(self, path: str | Path, data: dict | None = None) -> None:
        self.path = Path(path)
        self.data = data or {"version": VERSION, "kernels": {}}

    @classmethod
    def load(cls, path: str | Path) -> LockFile:
        path = Path(path)
        if not path.exists():
            return cls(path)
        try:
            data = json.loads(path.read_text())
        except ValueError as exc:
            from ..errors import R3Error

            raise R3Error(f"{path} is not valid JSON ({exc}); restore it from version control "
                          "or delete it and tune again") from None
        return cls(path, data)

    def entry(self, kernel: str, target: str) -> dict | None:
        return self.data["kernels"].get(kernel, {}).get(target)

    def entries(self) -> list[tuple[str, str, dict]]:
        return [(k, t, e) for k, targets in sorted(self.data["kernels"].items())
                for t, e in sorted(targets.items())]

    def set_entry(self, kernel: str, target: str, entry: dict) -> None:
        self.data["kernels"].setdefault(kernel, {})[target] = entry

    def remove_entry(self, kernel: str, target: str) -> None:
        targets = self.data["kernels"].get(kernel, {})
        targets.pop(target, None)
        if not targets:
            self.data["kernels"].pop(kernel, None)

    def save(self) -> Path:
        return write_json_atomic(self.path, self.data)


def find_lock(start: str | Path | None) -> Path | None:
    """``$PYTEST_R3_LOCK``, else the nearest ``r3.lock`` in ``start`` or a parent folder."""
    override = os.environ.get(LOCK_ENV)
    if override:
        return Path(override)
    if start is None:
        return None
    folder = Path(start).resolve()
    for candidate in (folder, *folder.parents):
        if (candidate / LOCK_NAME).is_file():
            return candidate / LOCK_NAME
    return None


@functools.lru_cache(maxsize=32)
def _read(path: str, mtime: float) -> LockFile:
    return LockFile.load(path)


def locked_variant(kernel):
    """The variant ``kernel`` should run per the lock file, or None (with the reason logged)."""
    from ..backends.clang import host_target

    start = Path(kernel.declared_at.rsplit(":", 1)[0]).parent
    path = find_lock(start)
    if path is None or not path.exists():
        log.debug("kernel %r: no %s found from %s; using the baseline", kernel.name,
                  LOCK_NAME, start)
        return None
    lock = _read(str(path), path.stat().st_mtime)
    target = kernel.backend.target_name()
    entry = lock.entry(kernel.name, target)
    if entry is None:
        log.debug("kernel %r: %s has no entry for target %s; using the baseline",
                  kernel.name, path, target)
        return None
    if entry.get("rewrite_hash"):
        # r3.lock holds settings, never code: a rewrite applies once its patch is applied
        if entry["rewrite_hash"] != kernel.source.hash:
            log.debug("kernel %r: %s entry needs its source rewrite applied (git apply "
                      ".r3/patches/%s.patch); using the baseline", kernel.name, path,
                      kernel.name)
            return None
    elif entry.get("source_hash") != kernel.source.hash:
        log.debug("kernel %r: %s entry is stale (source hash %s, now %s); using the baseline",
                  kernel.name, path, entry.get("source_hash"), kernel.source.hash)
        return None
    if kernel.backend_name == "cpu" and entry.get("features_hash") not in (
            None, features_hash(host_target().features)):
        log.debug("kernel %r: %s entry was tuned on other CPU features; using the baseline",
                  kernel.name, path)
        return None
    try:
        return variant_from_entry(kernel, entry)
    except Exception as exc:  # e.g. a tunable value no longer declared
        log.debug("kernel %r: %s entry no longer fits the declaration (%s); using the "
                  "baseline", kernel.name, path, exc)
        return None


def variant_from_entry(kernel, entry: dict):
    """The entry's settings applied to the kernel's own source: text found in a lock file is
    never compiled (a lock may be edited by anyone who can open a pull request)."""
    pipeline = {**kernel.pipeline.as_dict(), **entry.get("pipeline", {})}
    return kernel.variant(pipeline=pipeline, **entry.get("macros", {}))
