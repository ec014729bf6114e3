"""A worker's sign of progress, shared with its parent: one counter in shared memory.

The worker counts each step of a request (a launch begun or ended, a timed sample, a build
done, a message received or sent); the parent's watchdog (see :mod:`.process`) ends a worker
whose counter stands still for longer than the current step may take. So the run limit holds
even when a candidate ignores or disarms the worker's own timer (SIGALRM and setitimer are
allowed after sealing), and a hang costs about the run limit instead of the request
timeout. A compromised worker can keep the counter moving from a thread of its own; the
request timeout still bounds it.
"""

from __future__ import annotations

import mmap
import os

_SIZE = 8  # one unsigned 64-bit counter


class Heartbeat:
    def __init__(self, fd: int) -> None:
        self._map = mmap.mmap(fd, _SIZE)
        self._counter = memoryview(self._map).cast("Q")

    @classmethod
    def create(cls) -> tuple[Heartbeat, int]:
        """A new counter and the descriptor to hand to the worker (the caller closes it)."""
        fd = os.memfd_create("r3-heartbeat", os.MFD_CLOEXEC)
        os.ftruncate(fd, _SIZE)
        return cls(fd), fd

    @classmethod
    def attach(cls, fd: int) -> Heartbeat:
        """The worker's side: the counter behind ``fd``, which is closed (only the mapping
        stays, so no file is left to write to or grow)."""
        try:
            return cls(fd)
        finally:
            os.close(fd)

    def beat(self) -> None:
        self._counter[0] = (self._counter[0] + 1) & 0xFFFFFFFFFFFFFFFF

    def read(self) -> int:
        return self._counter[0]

    def close(self) -> None:
        self._counter.release()
        self._map.close()


def quiet() -> None:
    """The beat of a runner without a parent watching (in-process use, tests)."""
