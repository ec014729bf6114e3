"""The parent's limits on one request to a worker, enforced from outside the worker.

The worker stops a hung candidate itself (SIGALRM), but a candidate can ignore or disarm
that timer. While the parent waits for an answer, a :class:`Watch` kills the worker's
process group when either limit passes:

* ``stall``: the worker's heartbeat (see :mod:`.heartbeat`) stood still that long. For a
  kernel run it is the run limit plus :data:`MARGIN`, so a hang costs about the run limit.
* ``timeout``: no answer at all (the request timeout), which also bounds a compromised
  worker that keeps its heartbeat moving, or stalls halfway through a message.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Literal

MARGIN = 5.0  # seconds beyond a step's own limit: buffers filled, replies sent, a busy machine
Fired = Literal["stall", "timeout"]


class Watch:
    """One request being watched, from creation until :meth:`stop`."""

    def __init__(self, pid: int, timeout: float, stall: float | None,
                 beats: Callable[[], int] | None) -> None:
        self.pid = pid
        self.timeout = timeout
        self.stall = stall if beats is not None else None
        self.beats = beats
        self.fired: Fired | None = None
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._watch, daemon=True,
                                        name=f"r3-watch-{pid}")
        self._thread.start()

    def stop(self) -> Fired | None:
        """End the watch; which limit ended the worker, if one did."""
        with self._lock:
            self._done.set()
            return self.fired

    def _read(self) -> int | None:
        try:
            return self.beats() if self.beats is not None else None
        except (ValueError, OSError):  # the worker's counter is gone: no news
            return None

    def _watch(self) -> None:
        moved = time.monotonic()
        deadline = moved + self.timeout
        last = self._read()
        while True:
            wait = deadline - time.monotonic()
            if self.stall is not None:  # look often enough to see the counter move
                wait = min(wait, self.stall / 4)
            if self._done.wait(max(wait, 0.0)):
                return
            now = time.monotonic()
            beat = self._read()
            if beat != last:
                last, moved = beat, now
            if now >= deadline:
                fired: Fired = "timeout"
            elif self.stall is not None and now - moved >= self.stall:
                fired = "stall"
            else:
                continue
            with self._lock:
                if not self._done.is_set():
                    self.fired = fired
                    kill_group(self.pid)
            return


def kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)  # the worker leads its own session and group
    except OSError:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
