"""A contained worker process seen from the parent: start it, ask it things, and turn its
death, a hang or a malformed answer into a result instead of an exception in pytest."""

from __future__ import annotations

import concurrent.futures
import os
import signal
import subprocess
import sys
import threading
from multiprocessing.connection import Connection
from pathlib import Path

from . import containment, interrupt, protocol
from .heartbeat import Heartbeat
from .protocol import Rejected, ReplaySettings, Result
from .watchdog import MARGIN, Watch, kill_group
from .worker_log import WorkerLog

DEFAULT_ADDRESS_SPACE = 8 * 1024**3
# Workers die with the thread that started them (PR_SET_PDEATHSIG): start them all from one
# thread that lives as long as this process, whichever thread asks for a restart.
_spawner = concurrent.futures.ThreadPoolExecutor(max_workers=1,
                                                 thread_name_prefix="r3-worker-spawner")
# one thread per worker is plenty for the libraries it imports; no threads before containment.
# The CUDA driver's JIT cache is off: a sealed worker opens no file (and the cache would
# carry state from one candidate's build to the next)
_WORKER_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
               "CUDA_CACHE_DISABLE": "1"}


# the one answer each request may get (besides "error" and "rejected")
ANSWERS = {"load": "loaded", "cases": "ready", "seal": "sealed", "build": "built",
           "run": "outputs", "call": "outputs", "time": "timed", "drop": "dropped",
           "ping": "pong"}


class WorkerDied(Exception):
    """The worker died, hung or broke the protocol; ``result`` says how."""

    def __init__(self, result: Result) -> None:
        super().__init__(result.reason())
        self.result = result


class WorkerProcess:
    """One ``python -m pytest_r3.replay.worker`` process and its two pipes."""

    def __init__(self, settings: ReplaySettings, address_space: int = DEFAULT_ADDRESS_SPACE,
                 log_path: str | Path | None = None, gpu: bool = False) -> None:
        self.settings = settings
        self.address_space = address_space
        self.log_path = log_path
        self.log = WorkerLog(log_path) if log_path else None
        self.gpu = gpu  # the worker then keeps its GPU device files writable
        self._process: subprocess.Popen | None = None
        self._output: threading.Thread | None = None  # copies the worker's output to the log
        self._heartbeat: Heartbeat | None = None  # the worker's progress (see watchdog)
        self._writer: Connection | None = None
        self._reader: Connection | None = None
        self._stopper: int | None = None  # its entry in interrupt's registry (Ctrl-C)

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    @property
    def running(self) -> bool:
        return self._process is not None

    def spawn(self) -> None:
        interrupt.check()  # no new worker once the run is stopping
        parent_read, child_write = os.pipe()
        child_read, parent_write = os.pipe()
        # the worker's output goes to a pipe this process copies into the log (worker_log)
        output_read, output = os.pipe() if self.log else (None, subprocess.DEVNULL)
        try:
            self._heartbeat, beat_fd = Heartbeat.create()
            passed, beat_args = (child_read, child_write, beat_fd), [str(beat_fd)]
        except (AttributeError, OSError):  # no memfd (not Linux): only the request timeout
            self._heartbeat, beat_fd = None, None
            passed, beat_args = (child_read, child_write), []
        try:
            self._process = _spawner.submit(
                subprocess.Popen,
                [sys.executable, "-m", "pytest_r3.replay.worker", str(child_read),
                 str(child_write), str(self.address_space), "gpu" if self.gpu else "cpu",
                 *beat_args],
                pass_fds=passed, env={**os.environ, **_WORKER_ENV},
                stdin=subprocess.DEVNULL, stdout=output, stderr=output,
                start_new_session=True,
            ).result()
        except BaseException:
            if output_read is not None:
                os.close(output_read)
            raise
        finally:
            os.close(child_read)
            os.close(child_write)
            if beat_fd is not None:
                os.close(beat_fd)
            if output_read is not None:
                os.close(output)
        if self.log is not None and output_read is not None:
            self._output = self.log.follow(output_read, self._process.pid)
        self._reader = Connection(parent_read, writable=False)
        self._writer = Connection(parent_write, readable=False)
        pid = self._process.pid
        self._stopper = interrupt.register(lambda: kill_group(pid))
        if interrupt.stopping():  # Ctrl-C came while it started: it goes too
            self.kill()
            interrupt.check()

    def ask(self, event: str, data: dict, timeout: float, arrays: dict | None = None):
        """The worker's answer ``(event, data, arrays)``; WorkerDied if it died, hung or
        answered with anything but a well-formed message, Rejected if it refused."""
        if self._writer is None or self._reader is None or self._process is None:
            raise WorkerDied(Result(protocol.CRASH, diagnostics=["the worker is not running"],
                                    details={"kind": "signal"}))
        beats = self._heartbeat.read if self._heartbeat is not None else None
        watch = Watch(self._process.pid, timeout, self._step_limit(event), beats)
        try:
            protocol.send(self._writer, event, data, protocol.CLIENT_EVENTS, arrays)
            answer, reply, returned = protocol.receive(self._reader, protocol.WORKER_EVENTS)
        except (EOFError, OSError):
            fired = watch.stop()
            if interrupt.stopping():  # killed by Ctrl-C: nothing to say of the candidate
                self.kill()
                interrupt.check()
            raise WorkerDied(self._stopped(event, fired, timeout) if fired
                             else self._death()) from None
        except protocol.ProtocolError as exc:
            watch.stop()
            self.kill()
            raise WorkerDied(Result(protocol.CRASH, diagnostics=[
                f"the worker broke the protocol ({exc}); it was killed"],
                details={"kind": "protocol"})) from None
        fired = watch.stop()
        if fired:  # it answered as it was being killed: still a request past its limit
            raise WorkerDied(self._stopped(event, fired, timeout))
        if answer == "error":
            self.kill()
            raise WorkerDied(Result(protocol.CRASH, diagnostics=[
                f"the worker failed: {reply.get('message')}"],
                details={"kind": "worker_error", "traceback": reply.get("traceback", "")}))
        if answer == "rejected" and event == "load":  # the baseline itself: say why
            self.kill()
            raise WorkerDied(Result(protocol.CRASH, diagnostics=[
                f"the worker could not build the baseline: {reply.get('message')}"],
                details={"kind": str(reply.get("kind", "compile_error"))}))
        if answer == "rejected" and event in ("build", "run", "time", "call"):
            claimed = str(reply.get("status"))
            status = next((s for s in protocol.REJECTIONS if s == claimed),
                          protocol.COMPILE_ERROR)
            raise Rejected(status, str(reply.get("kind", "compile_error")),
                           str(reply.get("message")))
        if answer != ANSWERS.get(event):
            self.kill()
            raise WorkerDied(Result(protocol.CRASH, diagnostics=[
                f"the worker answered {answer!r} to {event!r}; it was killed"],
                details={"kind": "protocol"}))
        if event == "seal":  # said before any candidate ran in it: the log's account
            self.note(f"worker {self.pid} sealed, {reply.get('containment')}")
        return answer, reply, returned

    def _step_limit(self, event: str) -> float | None:
        """How long the worker may go without progress while answering ``event``: its run
        or compile limit plus a margin; None before a candidate can have run (loading)."""
        limit = {"build": self.settings.compile_timeout, "run": self.settings.run_timeout,
                 "call": self.settings.run_timeout, "time": self.settings.run_timeout,
                 "drop": 0.0, "ping": 0.0}.get(event)
        return None if limit is None else limit + MARGIN

    def _stopped(self, event: str, fired: str, timeout: float) -> Result:
        """The result for a worker the watchdog killed (``fired``: which limit)."""
        self.kill()
        if fired == "timeout":
            text = f"no answer within {timeout:g} s; the worker was killed"
        else:
            what, name, limit = (("compiling", "compile limit", self.settings.compile_timeout)
                                 if event == "build" else
                                 ("a kernel run", "run limit", self.settings.run_timeout))
            text = (f"{what} went past its {name} of {limit:g} s: no progress for "
                    f"{limit + MARGIN:g} s and the worker's own timer did not end it "
                    "(ignored or disarmed?); the replay server killed the worker")
        return Result(protocol.TIMEOUT, diagnostics=[text], details={"kind": "timeout"})

    def _death(self) -> Result:
        assert self._process is not None
        try:
            code = self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = None
        self.kill()
        return death_result(code, self.settings)

    def note(self, text: str) -> None:
        """A line in the worker log from the parent's side (why a worker was replaced)."""
        if self.log is not None:
            self.log.note(text)

    def close(self) -> None:
        """Ask the worker to stop, then make sure it has."""
        if self._process is None:
            return
        try:
            if self._process.poll() is None and self._writer is not None:
                self._writer.send_bytes(protocol.encode("shutdown", {}, protocol.CLIENT_EVENTS))
                self._process.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()

    def kill(self) -> None:
        if self._stopper is not None:
            interrupt.unregister(self._stopper)
            self._stopper = None
        if self._process is not None and self._process.poll() is None:
            try:
                os.killpg(self._process.pid, signal.SIGKILL)
            except OSError:
                self._process.kill()
        if self._process is not None:
            self._process.wait()
        if self._output is not None:  # its last words before the parent's next note
            self._output.join(timeout=5)
            self._output = None
        self._heartbeat = None
        for connection in (self._reader, self._writer):
            if connection is not None:
                connection.close()
        self._process = self._reader = self._writer = None


def death_result(code: int | None, settings: ReplaySettings) -> Result:
    """What a worker's exit status says about the candidate that was running."""
    if code is not None and code < 0 and -code == signal.SIGALRM:
        return Result(protocol.TIMEOUT, diagnostics=[
            f"a kernel run exceeded its limit of {settings.run_timeout:g} s (infinite loop?) or "
            f"compiling exceeded {settings.compile_timeout:g} s (code explosion from "
            "unrolling?); the worker was stopped"], details={"kind": "timeout"})
    if code is not None and containment.is_sandbox_violation(code):
        return Result(protocol.SANDBOX_VIOLATION, diagnostics=[containment.VIOLATION_MESSAGE],
                      details={"kind": "syscall", "signal": "SIGSYS"})
    if code is not None and code < 0:
        name = signal.Signals(-code).name
        hint = {"SIGSEGV": "invalid memory access (out of bounds, null pointer, stack "
                           "overflow, or an allocation that failed under the "
                           "address-space limit)",
                "SIGBUS": "misaligned or invalid memory access",
                "SIGFPE": "arithmetic fault (integer division by zero?)",
                "SIGILL": "illegal instruction",
                "SIGKILL": "killed (out of memory?)"}.get(name, "")
        return Result(protocol.CRASH, diagnostics=[
            f"the worker died with {name}" + (f": {hint}" if hint else "")],
            details={"kind": "signal", "signal": name})
    if code == protocol.DEVICE_FAULT_EXIT:
        return Result(protocol.CRASH, diagnostics=[
            "the kernel faulted on the GPU (illegal or misaligned address, trap...); the "
            "worker ended because its CUDA context was unusable (driver message in the "
            "worker log)"], details={"exit_code": code, "kind": "device_fault"})
    return Result(protocol.CRASH, diagnostics=[f"the worker exited with code {code}"],
                  details={"exit_code": code, "kind": "exit"})
