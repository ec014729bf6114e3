"""The log of a replay server's workers, written by the parent process only.

A worker is assumed compromised once a candidate has run in it, so it never holds its log
open for writing: its stdout and stderr are a pipe that the parent reads and copies into the
log, each line prefixed ``worker <pid>| `` with control characters escaped. A worker can
neither rewrite the log (clearing ``O_APPEND`` and seeking back, as a file descriptor would
allow) nor forge a line of the parent's, whose lines start ``pytest-r3 replay server:``
(among them each worker's containment as it reported it *before* any candidate ran). What
workers write is kept up to :data:`OUTPUT_CAP` bytes per server, the rest read and dropped,
so output cannot fill the disk or stall a worker on a full pipe.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from ..outputs import open_append

OUTPUT_CAP = 1 << 20  # bytes of workers' own output kept per log, over all their restarts
LINE_CAP = 4096       # a longer line is cut (and said so)
PARENT = "pytest-r3 replay server: "
_ESCAPES = {code: f"\\x{code:02x}" for code in (*range(32), 127) if code != 9}


def worker_prefix(pid: int) -> str:
    return f"worker {pid}| "


def escaped(raw: bytes) -> str:
    """A worker's line as text that cannot end the line or move a terminal's cursor."""
    return raw.decode("utf-8", "backslashreplace").translate(_ESCAPES)


class WorkerLog:
    """One log file shared by the successive worker processes of one server."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.kept = 0          # bytes of worker output written so far
        self.dropped = 0       # bytes read and not written (beyond OUTPUT_CAP)
        self._lock = threading.Lock()

    def note(self, text: str) -> None:
        """A line of the parent's own (why a worker was replaced, what containment it got)."""
        self._write(PARENT + escaped(text.encode()) + "\n")

    def _write(self, text: str) -> None:
        handle = open_append(self.path)
        try:
            data = memoryview(text.encode())
            while data:
                data = data[os.write(handle, data):]
        finally:
            os.close(handle)

    def follow(self, pipe: int, pid: int) -> threading.Thread:
        """Copy what the worker ``pid`` writes to ``pipe`` (its read end, now owned here)
        into the log, until the worker and every copy of its write end are gone."""
        thread = threading.Thread(target=self._copy, args=(pipe, pid), daemon=True,
                                  name=f"r3-worker-log-{pid}")
        thread.start()
        return thread

    def _copy(self, pipe: int, pid: int) -> None:
        pending = b""
        with open(pipe, "rb", buffering=0) as stream:
            while chunk := stream.read(1 << 16):
                lines = (pending + chunk).split(b"\n")
                pending = lines.pop()
                if len(pending) > LINE_CAP:
                    lines.append(pending)
                    pending = b""
                self._keep(pid, lines)
        if pending:
            self._keep(pid, [pending])

    def _keep(self, pid: int, lines: list[bytes]) -> None:
        out = []
        with self._lock:
            for line in lines:
                size = len(line) + 1
                if self.kept + size > OUTPUT_CAP:
                    if not self.dropped:
                        out.append(f"{PARENT}worker output beyond {OUTPUT_CAP} bytes is not "
                                   "kept (read and dropped from here on)\n")
                    self.dropped += size
                    continue
                self.kept += size
                cut = " [line cut]" if len(line) > LINE_CAP else ""
                out.append(worker_prefix(pid) + escaped(line[:LINE_CAP]) + cut + "\n")
        if out:
            self._write("".join(out))
