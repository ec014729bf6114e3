"""Ctrl-C during a run that waits on replay workers.

Python raises KeyboardInterrupt in the main thread only, while the evaluations it waits for
run in other threads, each blocked on a worker process that ignores SIGINT (it leads its own
session). Unwinding would wait for every evaluation in flight to finish, minutes on a slow
kernel. So while :func:`stop_on_ctrl_c` is active, Ctrl-C first marks the run as stopping and
kills every live worker (and cancels remote tasks, for Dask); the threads waiting on them
then see :class:`~pytest_r3.errors.Interrupted`, never a crash, so nothing they were
measuring is stored as a result of the candidate, and the next run resumes from what was
stored before.
"""

from __future__ import annotations

import itertools
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ..errors import Interrupted

_stopping = threading.Event()
_stoppers: dict[int, Callable[[], None]] = {}
_ids = itertools.count()
_lock = threading.Lock()


def stopping() -> bool:
    """True from a Ctrl-C until the run that caught it has unwound."""
    return _stopping.is_set()


def check() -> None:
    """Interrupted when the run is stopping: a worker started or answered meanwhile does
    not count."""
    if _stopping.is_set():
        raise Interrupted()


def register(stop: Callable[[], None]) -> int:
    """``stop`` is called (from the main thread, at once) on Ctrl-C; it must not block.
    The returned number unregisters it."""
    with _lock:
        number = next(_ids)
        _stoppers[number] = stop
    return number


def unregister(number: int) -> None:
    with _lock:
        _stoppers.pop(number, None)


def stop_all() -> None:
    """Mark the run as stopping and call every registered stopper (each one's failure
    ignored: a worker already gone is stopped)."""
    _stopping.set()
    with _lock:
        stoppers = list(_stoppers.values())
    for stop in stoppers:
        try:
            stop()
        except Exception:
            pass


@contextmanager
def stop_on_ctrl_c() -> Iterator[None]:
    """Within the block, Ctrl-C kills the workers, then raises KeyboardInterrupt as usual.

    Only where Python's own handler is in place (the main thread, SIGINT not ignored nor
    taken by someone else); elsewhere the block runs unchanged.
    """
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return

    def on_interrupt(signum, frame) -> None:
        stop_all()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        _stopping.clear()
