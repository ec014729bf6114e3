"""The persistent store of evaluation results: ``.r3/results/<kernel>/<target>.jsonl``.

One JSON line per evaluated configuration, keyed by a hash of the kernel's source and the
configuration's values (not of the search space), so adding a tunable value keeps every
earlier result, and an interrupted run resumes without evaluating anything twice.

A result is reused only in the same *context*: everything else that changes it, hashed by
:func:`result_context` (the source with its headers, the recordings, the tolerance, the
toolchain, the target). Each line carries its context; a store opened for another context
does not see it (the line stays, for when that context comes back).

Lines are appended under the file's lock, one write each, flushed; a line torn by a kill
is ignored, and the next line starts on a line of its own. A stored result that cannot be
read as a :class:`~pytest_r3.replay.protocol.Result` (a shape no version wrote), or that
says the machine was too busy to measure, is measured again, as if it were not there.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from ..outputs import append_line, state_write_error
from ..replay.protocol import Result


def configuration_key(source_hash: str, candidate_key: str) -> str:
    return hashlib.sha256(f"{source_hash}:{candidate_key}".encode()).hexdigest()[:20]


def toolchain_version() -> str:
    """clang's and llvmlite's versions (with LLVM's): the IR and the code built from it."""
    import llvmlite
    import llvmlite.binding as llvm

    from ..backends.clang import find_clang

    llvm_version = ".".join(str(part) for part in llvm.llvm_version_info)
    return f"clang {find_clang().version}; llvmlite {llvmlite.__version__} (LLVM {llvm_version})"


def result_context(*, source_fingerprint: str, target: str, recordings: Iterable[str],
                   tolerance: Mapping | None = None, toolchain: str | None = None,
                   extra: Mapping | None = None) -> str:
    """A short hash of everything besides the configuration that changes an evaluation.

    ``source_fingerprint`` is ``kernel.lock.source_fingerprint(kernel)`` (text and local
    headers), ``recordings`` the keys replayed (order does not matter), ``tolerance`` the
    kernel's, ``toolchain`` defaults to :func:`toolchain_version`, and ``extra`` anything
    else worth keying on (CPU features, verification settings), as JSON-able values.
    """
    payload = {
        "source": source_fingerprint,
        "target": target,
        "recordings": sorted(set(recordings)),
        "tolerance": dict(tolerance or {}),
        "toolchain": toolchain if toolchain is not None else toolchain_version(),
        "extra": dict(extra or {}),
    }
    text = json.dumps(payload, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class ResultStore:
    """``context`` (from :func:`result_context`) selects the results this store sees; None
    sees only lines written without one (stores from before contexts existed)."""

    def __init__(self, root: str | Path, kernel: str, target: str,
                 context: str | None = None) -> None:
        self.path = Path(root) / kernel / f"{target}.jsonl"
        self._trusted = Path(root).parent  # no link from there down (see outputs)
        self.context = context
        self._lock = threading.Lock()
        self._entries: dict[str, dict] = {}
        try:
            text = self.path.read_text(errors="replace")
        except FileNotFoundError:
            text = ""
        except OSError as exc:  # a file where a folder should be, no permission...
            raise state_write_error(self.path, exc) from None  # where the run writes next
        for line in text.splitlines():
            try:
                entry = json.loads(line)
                key = entry["key"]
            except (ValueError, KeyError, TypeError):
                continue  # a line torn by a kill, or not ours: that evaluation runs again
            if isinstance(key, str) and entry.get("context") == context \
                    and isinstance(entry.get("result"), dict):
                self._entries[key] = entry

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def get(self, key: str) -> dict | None:
        return self._entries.get(key)

    def result(self, key: str) -> Result | None:
        """The stored result for ``key`` as a typed value; None when there is none or it
        cannot be read (it is then measured again)."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        try:
            result = Result.from_dict(entry["result"])
        except (TypeError, ValueError):
            return None
        return None if result.status == "too_busy" else result  # no measurement to reuse

    def reusable(self, key: str, seed: int) -> Result | None:
        """The stored result for ``key`` if it can stand for a new measurement (see
        :func:`remeasure_reason`), else None: it is measured again."""
        result = self.result(key)
        if result is None or remeasure_reason(self._entries[key], result, seed):
            return None
        return result

    def entries(self) -> list[dict]:
        return list(self._entries.values())

    def add(self, key: str, candidate: dict, result: dict, seed: int | None = None) -> dict:
        """Store one result (measured under ``seed``); a file system failure raises
        StateWriteError naming the file."""
        entry = {"key": key, "candidate": candidate, "result": result, "time": time.time(),
                 "seed": seed}
        if self.context is not None:
            entry["context"] = self.context
        line = json.dumps(entry, sort_keys=True)
        with self._lock:
            append_line(self.path, line, root=self._trusted)
            self._entries[key] = entry
        return entry


# A stored timing that dropped more than this share of its slices (the worker kept losing
# its core to other processes) was measured under contention: measured again, not reused.
# Measured (benchmarks/bench_timing_trust.py, scaled_add, 4 busy processes on 2 cores at
# load 21): 74% of slices dropped overall and 85% in the worst evaluation, yet A/A stayed
# within 5% of 1.00x and the A/B median within 1% of the figure taken at the start; so
# only a share beyond anything seen there makes a result suspect.
CONTENDED_SHARE = 0.9


def remeasure_reason(entry: Mapping, result: Result, seed: int) -> str | None:
    """Why a stored result cannot stand for a new measurement, or None.

    Another seed asks for a fresh search (and draws other perturbed inputs to verify on),
    so results measured under another seed are measured again; so is a timing taken under
    contention, many of its samples dropped or given up as too busy, however long ago."""
    if entry.get("seed") != seed:
        return "measured under another seed"
    timing = result.timing
    if timing is None:
        return None
    if timing.stopped == "too_busy":
        return "the machine was too busy to measure"
    if timing.dropped_share > CONTENDED_SHARE:
        return f"measured under contention ({timing.dropped} of {timing.taken} samples dropped)"
    return None
