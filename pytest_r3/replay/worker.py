"""Entry point of a replay worker process: ``python -m pytest_r3.replay.worker R W``.

Reads ``(event, data)`` messages from file descriptor R, answers on W, dispatching each to
an ``on_<event>`` handler. Limits apply to the whole process: an address-space cap
(RLIMIT_AS; lifted for a GPU backend, whose driver needs the space) and, around every
kernel run, a SIGALRM timer whose default action kills the process, so a hung candidate
ends here and the client reports a timeout.
"""

from __future__ import annotations

import resource
import signal
import sys
import traceback
from multiprocessing.connection import Connection
from pathlib import Path

from . import protocol


class Worker:
    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.evaluator = None
        self.running = True

    def send(self, event: str, data: dict) -> None:
        self.connection.send_bytes(protocol.encode(event, data, protocol.WORKER_EVENTS))

    def on_load(self, data: dict) -> None:
        from ..record import RecordingStore
        from .evaluate import Evaluator, ReplaySettings
        from .protocol import KernelSpec

        spec = KernelSpec.from_dict(data["spec"])
        _fit_address_space(spec.backend)
        store = RecordingStore(data["recordings_root"])
        recordings = [store.read(spec.name, key) for key in data["keys"]]
        self.evaluator = Evaluator(spec, recordings, ReplaySettings.from_dict(data["settings"]))
        self.send("loaded", self.evaluator.describe())

    def on_evaluate(self, data: dict) -> None:
        from .protocol import Candidate

        if self.evaluator is None:
            raise protocol.ProtocolError("evaluate before load")
        result = self.evaluator.evaluate(Candidate.from_dict(data))
        self.send("result", result.as_dict())

    def on_ping(self, data: dict) -> None:
        self.send("pong", data)

    def on_shutdown(self, data: dict) -> None:
        self.running = False

    def serve(self) -> None:
        while self.running:
            try:
                message = self.connection.recv_bytes()
            except EOFError:
                return
            try:
                event, data = protocol.decode(message, protocol.CLIENT_EVENTS)
                getattr(self, f"on_{event}")(data)
            except Exception as exc:  # reported to the client, which decides what to do
                self.send("error", {"message": f"{type(exc).__name__}: {exc}",
                                    "traceback": traceback.format_exc()})


def _fit_address_space(backend_name: str) -> None:
    """Lift the address-space cap for a backend that cannot live under one (the CUDA
    driver reserves virtual address ranges far beyond any useful cap)."""
    from ..backends import get_backend

    if getattr(get_backend(backend_name), "address_space_cap", True):
        return
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (hard, hard))


def main(argv: list[str]) -> None:
    read_fd, write_fd = int(argv[0]), int(argv[1])
    address_space = int(argv[2]) if len(argv) > 2 else 0
    if address_space > 0:  # soft limit: a GPU backend lifts it (see on_load)
        hard = resource.getrlimit(resource.RLIMIT_AS)[1]
        if hard != resource.RLIM_INFINITY:
            address_space = min(address_space, hard)
        resource.setrlimit(resource.RLIMIT_AS, (address_space, hard))
    _die_with_parent()
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the client's to handle
    sys.path.insert(0, str(Path.cwd()))
    with Connection(read_fd, writable=False) as reader, \
            Connection(write_fd, readable=False) as writer:
        worker = Worker(_Duplex(reader, writer))
        worker.serve()


def _die_with_parent() -> None:
    """Ask Linux to kill this worker if the process that started it dies (no orphans)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: the worker still exits when its pipe closes


class _Duplex:
    """One reading and one writing pipe end, used as one connection."""

    def __init__(self, reader: Connection, writer: Connection) -> None:
        self.recv_bytes = reader.recv_bytes
        self.send_bytes = writer.send_bytes


if __name__ == "__main__":
    main(sys.argv[1:])
