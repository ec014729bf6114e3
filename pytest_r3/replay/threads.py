"""Launches made from a thread other than the worker's main thread.

Users call kernels from thread pools (the launcher releases the GIL), and a kernel can tell
which thread calls it without touching a buffer: the main thread's stack lies at the top of
the address space, a thread's stack is an ordinary mapping below, among the others. A
rewrite exact (or fast) on the main thread and wrong (or slow) on any other would pass a
judge that only ever calls it from its main thread. So a share of the judged launches is
made on a fresh thread (see judge.Judge.verify and client's thread probe), and whatever
runs there runs exactly as on the main thread: the same code, buffers and limits.

A fresh thread starts in its creator's floating-point mode (MXCSR), the main thread's
default one (see fpmode); a run with flush-to-zero sets it on the launching thread itself.

The worker's run limit is a process-wide ITIMER_REAL whose SIGALRM kills the process
(worker.py), so it holds whichever thread launches; a fault ends the process either way.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# what the reasons say about a launch made this way
OTHER_THREAD = "called from another thread"


def on_fresh_thread(function: Callable[..., T], *args: object) -> T:
    """``function(*args)`` run on a new thread, waited for; its result, or its exception
    raised again here (a Rejected from a launch stays a Rejected)."""
    outcome: dict[str, object] = {}

    def body() -> None:
        try:
            outcome["value"] = function(*args)
        except BaseException as exc:  # noqa: BLE001 - carried to the caller as it was
            outcome["error"] = exc

    thread = threading.Thread(target=body, name="r3-launch", daemon=True)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]
