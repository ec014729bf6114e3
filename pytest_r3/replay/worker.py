"""Entry point of a replay worker process:
``python -m pytest_r3.replay.worker R W [ADDRESS_SPACE [cpu|gpu [HEARTBEAT]]]``.

The only process where candidate code runs. It enters its containment first (no new
privileges, its own user and network namespace, Landlock), loads the baseline and the cases,
and is sealed (seccomp) before the first candidate arrives. Then it loads variants from IR
the parent compiled, runs them, and sends back raw buffers; verdicts are not made here.

Reads ``(event, data, arrays)`` messages from file descriptor R and answers on W. Limits
apply to the whole process: an address-space cap (RLIMIT_AS; lifted for a GPU backend,
whose driver needs the space) and, around every build and run, a SIGALRM timer whose default
action kills the process, so a hung candidate ends here and the client reports a timeout.
A candidate can disarm that timer: the parent also watches the worker's progress through
the shared counter HEARTBEAT (see heartbeat.py) and ends a worker that stops making any.
"""

from __future__ import annotations

import glob
import os
import resource
import signal
import sys
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path

from . import containment, fault_site, protocol
from .heartbeat import Heartbeat, quiet


class Worker:
    def __init__(self, connection, contained: containment.Containment,
                 beat: Callable[[], None] = quiet) -> None:
        self.connection = connection
        self.contained = contained
        self.beat = beat  # progress the parent's watchdog sees (see heartbeat)
        self.runner = None
        self.running = True

    def send(self, event: str, data: dict, arrays: dict | None = None) -> None:
        self.beat()
        protocol.send(self.connection, event, data, protocol.WORKER_EVENTS, arrays)

    def on_load(self, data: dict, arrays: dict) -> None:
        from ..backends import compile_cache
        from ..backends.compile_cache import trusted_build
        from .protocol import KernelSpec, ReplaySettings
        from .runner import Runner

        spec = KernelSpec.from_dict(data["spec"])
        _fit_address_space(spec.backend)
        _enter_backend(spec.backend)
        self.runner = Runner(spec, ReplaySettings.from_dict(data["settings"]), self.beat)
        # a contained launcher loads the variant it forwards calls to in the baseline's place.
        # Before any candidate has run here, the baseline may come from the compiled-code
        # cache (an entry is named by the hash of its IR); a worker never writes it.
        with trusted_build(write=False, folder=data.get("compile_cache")):
            self.runner.build("baseline", data["ir"], data.get("pipeline", spec.pipeline),
                              data.get("tunables", spec.default_macros))
        _default_fp_mode("after loading the backend")
        loaded: dict = {"compile_cache_hits": compile_cache.hits()}
        if self.runner.device_facts is not None:
            loaded["device"] = self.runner.device_facts
        self.send("loaded", loaded)

    def on_cases(self, data: dict, arrays: dict) -> None:
        self.runner.set_cases(data["layout"], arrays)
        self.send("ready", {})

    def on_seal(self, data: dict, arrays: dict) -> None:
        self.runner.warm_up()
        _default_fp_mode("before sealing")
        self.contained = containment.seal(self.contained, allow_ioctl=bool(data.get("ioctl")))
        self.send("sealed", {"containment": self.contained.describe()})

    def on_build(self, data: dict, arrays: dict) -> None:
        seconds = self.runner.build(data["name"], data["ir"], data["pipeline"],
                                    data["tunables"])
        self.send("built", {"seconds": seconds})

    def on_run(self, data: dict, arrays: dict) -> None:
        # a batch of runs, one answer: a round trip per run would cost more than a run
        returned, buffers = [], {}
        for index, run in enumerate(data["runs"]):
            reply, storages = self.runner.run(data["variant"], int(run["case"]), run["fills"],
                                              int(run["guard_seed"]),
                                              [int(c) for c in run.get("after", ())],
                                              bool(run.get("plain", False)),
                                              bool(run.get("thread", False)),
                                              bool(run.get("flush", False)))
            returned.append(reply["returned"])
            buffers.update({f"{index}.{number}": s for number, s in storages.items()})
        self.send("outputs", {"returned": returned}, buffers)

    def on_time(self, data: dict, arrays: dict) -> None:
        weights = data.get("weights")
        reply, buffers = self.runner.time(data["variant"], list(data["cases"]),
                                          int(data["guard_seed"]), data["checks"],
                                          None if weights is None else
                                          [float(w) for w in weights],
                                          _number_or_none(data.get("race_against")),
                                          str(data.get("reference", "baseline")),
                                          data.get("restore"),
                                          _number_or_none(data.get("budget")),
                                          _number_or_none(data.get("rounds")),
                                          _number_or_none(data.get("clear_of")),
                                          _number_or_none(data.get("warmup")),
                                          bool(data.get("thread", False)))
        self.send("timed", reply, buffers)

    def on_call(self, data: dict, arrays: dict) -> None:
        reply, buffers = self.runner.call(data["layout"], arrays, int(data.get("repeats", 1)))
        self.send("outputs", reply, buffers)

    def on_drop(self, data: dict, arrays: dict) -> None:
        self.runner.drop(data["name"])
        self.send("dropped", {})

    def on_ping(self, data: dict, arrays: dict) -> None:
        self.send("pong", data)

    def on_shutdown(self, data: dict, arrays: dict) -> None:
        self.running = False

    def serve(self) -> None:
        while self.running:
            try:
                event, data, arrays = protocol.receive(self.connection, protocol.CLIENT_EVENTS)
            except EOFError:
                return
            except protocol.ProtocolError as exc:
                self.send("error", {"message": f"ProtocolError: {exc}", "traceback": ""})
                continue
            self.beat()
            try:
                if self.runner is None and event not in ("load", "ping", "shutdown"):
                    raise protocol.ProtocolError(f"{event} before load")
                getattr(self, f"on_{event}")(data, arrays)
            except protocol.Rejected as rejected:  # the backend refused the variant
                self.send("rejected", {"status": rejected.status, "kind": rejected.kind,
                                       "message": str(rejected)})
            except Exception as exc:  # reported to the client, which decides what to do
                self.send("error", {"message": f"{type(exc).__name__}: {exc}",
                                    "traceback": _frames(exc)})


def _frames(exc: BaseException) -> str:
    """Where an error happened, without reading source files (a sealed worker may open
    none: traceback's source lines would end it)."""
    return "".join(f"  {frame.f_code.co_filename}:{line} in {frame.f_code.co_name}\n"
                   for frame, line in traceback.walk_tb(exc.__traceback__))


def _enter_backend(backend_name: str) -> None:
    """Let the backend read what it needs before the worker is contained (a backend that
    is not a subclass of Backend may lack the hook)."""
    from ..backends import get_backend

    enter = getattr(get_backend(backend_name), "enter_worker", None)
    if callable(enter):
        enter()


def _fit_address_space(backend_name: str) -> None:
    """Lift the address-space cap for a backend that cannot live under one (the CUDA
    driver reserves virtual address ranges far beyond any useful cap)."""
    from ..backends import get_backend

    if getattr(get_backend(backend_name), "address_space_cap", True):
        return
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (hard, hard))


# the device files GPU runtimes open read-write: NVIDIA's driver, and AMD's (ROCm's kernel
# fusion driver and the render nodes)
GPU_DEVICE_FILES = ("/dev/nvidia*", "/dev/kfd", "/dev/dri/renderD*")


def writable_paths(gpu: bool) -> list[str]:
    """What a worker may still write once contained: nothing, or for a GPU worker its
    driver's device files (opened read-write when the context is created) and its own
    threads' names (the NVIDIA driver names its threads at cuInit, writing
    /proc/self/task/TID/comm, and fails with CUDA_ERROR_OPERATING_SYSTEM if refused). Any
    open after sealing ends the worker, whatever Landlock allows."""
    if not gpu:
        return []
    return [path for pattern in GPU_DEVICE_FILES for path in glob.glob(pattern)] + \
        ["/proc/self/task"]


def main(argv: list[str]) -> None:
    read_fd, write_fd = int(argv[0]), int(argv[1])
    address_space = int(argv[2]) if len(argv) > 2 else 0
    beat = Heartbeat.attach(int(argv[4])).beat if len(argv) > 4 else quiet
    gpu = argv[3:4] == ["gpu"]
    contained = containment.enter(writable_dirs=writable_paths(gpu))
    _die_with_parent()
    print(f"pytest-r3 replay worker {os.getpid()}: {contained.describe()}", file=sys.stderr,
          flush=True)
    # no cap for a GPU worker: under one the CUDA driver cannot start, and the backend
    # chosen in this process would then be the CPU emulation, not the parent's GPU backend
    if address_space > 0 and not gpu:
        hard = resource.getrlimit(resource.RLIMIT_AS)[1]
        if hard != resource.RLIM_INFINITY:
            address_space = min(address_space, hard)
        resource.setrlimit(resource.RLIMIT_AS, (address_space, hard))
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the client's to handle
    sys.path.insert(0, str(Path.cwd()))
    with Connection(read_fd, writable=False) as reader, \
            Connection(write_fd, readable=False) as writer:
        worker = Worker(_Duplex(reader, writer), contained, beat)
        # a fault below a floored buffer (host memory only) is answered as a crash naming
        # its argument; a GPU worker's driver keeps the signals as they are
        if not gpu:
            fault_site.install(lambda hint: worker.send("rejected", {
                "status": protocol.CRASH, "kind": "signal", "message": hint}))
        worker.serve()


def _default_fp_mode(when: str) -> None:
    """Launch in the default floating-point mode on the main thread (fresh threads inherit
    it): a library the worker loaded may have set flush-to-zero (see fpmode)."""
    from . import fpmode

    if fpmode.reset():
        print(f"pytest-r3 replay worker {os.getpid()}: flush-to-zero or denormals-are-zero "
              f"was set {when} (a library built with -ffast-math?); cleared",
              file=sys.stderr, flush=True)


def _die_with_parent() -> None:
    """Ask Linux to kill this worker when the thread that started it ends (the client
    starts every worker from one long-lived thread, see client.py)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: the worker still exits when its pipe closes


class _Duplex:
    """One reading and one writing pipe end, used as one connection."""

    def __init__(self, reader: Connection, writer: Connection) -> None:
        self.recv_bytes = reader.recv_bytes
        self.send_bytes = writer.send_bytes


def _number_or_none(value: object) -> float | None:
    return None if value is None else float(value)


if __name__ == "__main__":
    main(sys.argv[1:])
