"""A locked variant is built in the application's own process, where nothing can stop LLVM:
before that, it is built once in a forked child with a time limit (and an address-space
cap), and only a variant that builds there in time is used.

r3.lock is read from the project (anyone who can open a pull request can edit it): its
entries are checked against bounds when loaded (:func:`~pytest_r3.model.pipeline.
bounds_problem`), and this limit is the second layer, for settings within bounds that still
make the optimiser or code generator run away. A fork shares what this process has already
imported and initialised, so the probe costs about one more build of the variant, once per
process, on its first call; baselines are never probed. A child that cannot build (a lock
another thread held at the fork, a crash) counts as a failure: the baseline runs.
"""

from __future__ import annotations

import os
import resource
import signal
import time
import warnings

TIMEOUT_ENV = "PYTEST_R3_LOCKED_BUILD_TIMEOUT"
DEFAULT_TIMEOUT = 60.0       # seconds; tuning itself gives a candidate's compile as long
EXTRA_ADDRESS_SPACE = 4 * 1024**3  # the child's cap, beyond what it inherits
_verdicts: dict[tuple, str | None] = {}  # (kernel, variant key) -> problem, once per process


def limit() -> float:
    """The time limit in seconds (``$PYTEST_R3_LOCKED_BUILD_TIMEOUT``, else 60)."""
    try:
        return float(os.environ.get(TIMEOUT_ENV, "") or DEFAULT_TIMEOUT)
    except ValueError:
        return DEFAULT_TIMEOUT


def build_problem(kernel, variant) -> str | None:
    """Why ``variant`` of ``kernel`` must not be built in this process (it did not build
    within the time limit in a child), or None; decided once per process and variant."""
    key = (kernel.name, variant.key())
    if key not in _verdicts:
        _verdicts[key] = _probe(kernel, variant, limit()) if hasattr(os, "fork") else None
    return _verdicts[key]


def _build(kernel, variant, ir: str) -> None:
    """What the child does: the in-process build's optimisation and code generation."""
    backend = kernel.backend
    if not getattr(backend, "address_space_cap", True):  # a GPU: code generation only,
        backend.compile_ptx(ir, kernel.entry, variant.pipeline, kernel.name)  # no driver
        return
    options = {} if kernel.launch is None else {"launch": kernel.launch,
                                                "tunables": variant.macro_dict}
    backend.load(ir, kernel.entry, kernel.signature, variant.pipeline, kernel.name, **options)


def _probe(kernel, variant, seconds: float) -> str | None:
    ir = kernel.backend.compile(kernel.source_for(variant), variant.macro_dict)  # clang only
    kernel.signature  # noqa: B018 - read here, not in the child
    read, write = os.pipe()
    with warnings.catch_warnings():  # forking with threads: the child touches none of them
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: build, say why not, and leave without running any cleanup
        os.close(read)
        code = 0
        try:
            _cap_address_space()
            _build(kernel, variant, ir)
        except BaseException as exc:  # noqa: BLE001 - everything is a reason to refuse
            os.write(write, f"{type(exc).__name__}: {exc}".encode()[:300])
            code = 1
        finally:
            os._exit(code)
    os.close(write)
    try:
        status = _wait(pid, seconds)
        why = os.read(read, 300).decode(errors="replace").splitlines()
    finally:
        os.close(read)
    if status is None:
        return f"it did not compile within {seconds:g} s (${TIMEOUT_ENV})"
    if status != 0:
        return "it failed to compile in a child process (" + (
            why[0] if why else f"wait status {status}") + ")"
    return None


def _wait(pid: int, seconds: float) -> int | None:
    """The child's wait status, or None when it ran past ``seconds`` (it is killed)."""
    deadline = time.monotonic() + seconds
    pause = 0.001
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        left = deadline - time.monotonic()
        if left <= 0:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None
        time.sleep(min(pause, left))
        pause = min(pause * 2, 0.05)


def _cap_address_space() -> None:
    try:
        with open("/proc/self/statm") as statm:
            inherited = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    cap = inherited + EXTRA_ADDRESS_SPACE
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
