"""The client side of a replay server: starts the worker process, sends candidates, and
turns a dead or hung worker into a ``crash`` or ``timeout`` result, then restarts it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from multiprocessing.connection import Connection
from pathlib import Path

from ..errors import R3Error
from . import protocol
from .evaluate import ReplaySettings
from .protocol import Candidate, KernelSpec, Result

DEFAULT_ADDRESS_SPACE = 8 * 1024**3


class ReplayError(R3Error):
    """The replay server itself cannot go on (its baseline fails, or it crashes in a loop)."""


class ReplayServer:
    """A long-lived worker process holding one kernel's baseline and recordings in memory."""

    def __init__(
        self,
        spec: KernelSpec,
        recordings_root: str | Path,
        keys: list[str],
        settings: ReplaySettings | None = None,
        *,
        request_timeout: float = 300.0,
        load_timeout: float = 300.0,
        address_space: int = DEFAULT_ADDRESS_SPACE,
        max_consecutive_crashes: int = 10,
        log_path: str | Path | None = None,
    ) -> None:
        self.spec = spec
        self.recordings_root = str(recordings_root)
        self.keys = list(keys)
        self.settings = settings or ReplaySettings()
        self.request_timeout = request_timeout
        self.load_timeout = load_timeout
        self.address_space = address_space
        self.max_consecutive_crashes = max_consecutive_crashes
        self.log_path = log_path
        self.restarts = 0
        self.consecutive_crashes = 0
        self.description: dict = {}
        self._process: subprocess.Popen | None = None
        self._writer: Connection | None = None
        self._reader: Connection | None = None

    # -- process management --------------------------------------------------------------
    def start(self) -> ReplayServer:
        parent_read, child_write = os.pipe()
        child_read, parent_write = os.pipe()
        log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "pytest_r3.replay.worker", str(child_read),
                 str(child_write), str(self.address_space)],
                pass_fds=(child_read, child_write),
                stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                start_new_session=True,
            )
        finally:
            os.close(child_read)
            os.close(child_write)
            if log is not subprocess.DEVNULL:
                log.close()
        self._reader = Connection(parent_read, writable=False)
        self._writer = Connection(parent_write, readable=False)
        payload = {"spec": self.spec.as_dict(), "recordings_root": self.recordings_root,
                   "keys": self.keys, "settings": asdict(self.settings)}
        reply = self._request("load", payload, self.load_timeout)
        if isinstance(reply, Result):
            self.close()
            raise ReplayError(
                f"replay worker for kernel {self.spec.name!r} could not load its baseline: "
                f"{reply.status}: {'; '.join(reply.diagnostics)}")
        event, data = reply
        if event != "loaded":
            self.close()
            raise ReplayError(f"replay worker for kernel {self.spec.name!r} failed to load: "
                              f"{data.get('message')}\n{data.get('traceback', '')}")
        self.description = data
        return self

    def close(self) -> None:
        if self._process is None:
            return
        try:
            if self._process.poll() is None and self._writer is not None:
                self._writer.send_bytes(protocol.encode("shutdown", {}, protocol.CLIENT_EVENTS))
                self._process.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self._kill()

    def _kill(self) -> None:
        if self._process is not None and self._process.poll() is None:
            try:
                os.killpg(self._process.pid, signal.SIGKILL)
            except OSError:
                self._process.kill()
            self._process.wait()
        for connection in (self._reader, self._writer):
            if connection is not None:
                connection.close()
        self._process = self._reader = self._writer = None

    def __enter__(self) -> ReplayServer:
        return self.start() if self._process is None else self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    # -- requests ------------------------------------------------------------------------
    def _request(self, event: str, data: dict, timeout: float):
        """``(event, data)`` from the worker, or a crash/timeout Result if it died or hung."""
        assert self._writer is not None and self._reader is not None and self._process
        try:
            self._writer.send_bytes(protocol.encode(event, data, protocol.CLIENT_EVENTS))
            if not self._reader.poll(timeout):
                self._kill()
                return Result(protocol.TIMEOUT, diagnostics=[
                    f"no answer within {timeout:g} s; the worker was killed"])
            return protocol.decode(self._reader.recv_bytes(), protocol.WORKER_EVENTS)
        except (EOFError, OSError):
            return self._death()

    def _death(self) -> Result:
        assert self._process is not None
        try:
            code = self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = None
        self._kill()
        if code is not None and code < 0 and -code == signal.SIGALRM:
            return Result(protocol.TIMEOUT, diagnostics=[
                f"a kernel run exceeded its limit of {self.settings.run_timeout:g} s (infinite "
                f"loop?) or compiling exceeded {self.settings.compile_timeout:g} s (code "
                "explosion from unrolling?); the worker was stopped"])
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
                details={"signal": name})
        if code == protocol.DEVICE_FAULT_EXIT:
            return Result(protocol.CRASH, diagnostics=[
                "the kernel faulted on the GPU (illegal or misaligned address, trap...); the "
                "worker ended because its CUDA context was unusable (driver message in the "
                "worker log)"], details={"exit_code": code, "kind": "device_fault"})
        return Result(protocol.CRASH, diagnostics=[f"the worker exited with code {code}"],
                      details={"exit_code": code})

    def evaluate(self, candidate: Candidate) -> Result:
        """Evaluate ``candidate``; a crash or hang restarts the worker and is the result."""
        if self._process is None:
            self.start()
        started = time.perf_counter()
        reply = self._request("evaluate", candidate.as_dict(), self.request_timeout)
        if isinstance(reply, Result):
            reply.candidate_key = candidate.key()
            reply.label = candidate.label
            reply.details["seconds"] = time.perf_counter() - started
            self.consecutive_crashes += 1
            if self.consecutive_crashes > self.max_consecutive_crashes:
                raise ReplayError(
                    f"the replay worker of kernel {self.spec.name!r} died "
                    f"{self.consecutive_crashes} times in a row; giving up (last: "
                    f"{reply.diagnostics})")
            self.restarts += 1
            self.start()
            return reply
        event, data = reply
        if event == "error":
            raise ReplayError(f"replay worker error: {data.get('message')}\n"
                              f"{data.get('traceback', '')}")
        self.consecutive_crashes = 0
        result = Result.from_dict(data)
        result.details["seconds"] = time.perf_counter() - started
        return result

    def ping(self) -> bool:
        reply = self._request("ping", {}, 30)
        return not isinstance(reply, Result) and reply[0] == "pong"
