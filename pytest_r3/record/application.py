"""Recording the application itself: real launches of declared kernels in any Python
program, saved as timing workloads.

``pytest-r3 record -- python app.py`` sets ``PYTEST_R3_RECORD`` to the r3 folder and runs
the command; ``import pytest_r3`` in that program (and in its child processes, which inherit
the environment) then counts every launch and captures a sample (see :mod:`.workloads`),
and saves them when the process exits. Without the variable nothing is installed: a plain
run pays nothing. While recording, kernels run their baseline (as under ``--r3-record``),
so what is recorded is the answer the replay checks against.
"""

from __future__ import annotations

import atexit
import os
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

from ..errors import R3Error
from ..outputs import write_json_atomic
from .store import DEFAULT_WORKLOAD_CAP_BYTES, SPEC_FILE, CorruptRecording, RecordingStore
from .workloads import DEFAULT_EVERY, DEFAULT_FIRST, WorkloadSampler

ENV = "PYTEST_R3_RECORD"              # the r3 folder; recordings go to <it>/recordings
ENV_FIRST = "PYTEST_R3_RECORD_FIRST"  # launches captured per shape before sampling
ENV_EVERY = "PYTEST_R3_RECORD_EVERY"  # then every k-th; 0: no more
ENV_CAP = "PYTEST_R3_RECORD_CAP"      # MiB held per process, and kept per kernel
ENV_ORIGIN = "PYTEST_R3_RECORD_ORIGIN"  # what the workloads are named after
ENV_RUN = "PYTEST_R3_RECORD_RUN"      # one recording session (shared by child processes)


class ApplicationRecorder:
    """The interceptor installed in a recorded program, and its save at exit."""

    def __init__(self, r3_dir: str | Path, origin: str, sampler: WorkloadSampler,
                 spec_of: Callable[[object], dict]) -> None:
        self.store = RecordingStore(Path(r3_dir) / "recordings")
        self.origin = origin
        self.sampler = sampler
        self.spec_of = spec_of
        self.saved = False

    def intercept(self, kernel, args: tuple, proceed: Callable[[], object]) -> object:
        return self.sampler.launch(kernel, args, proceed, self.origin)

    def save(self) -> dict[str, dict]:
        """Write the sampled launches (once); each kernel's index, by name."""
        if self.saved:
            return {}
        self.saved = True
        indexes = {}
        for name, recordings in sorted(self.sampler.recordings().items()):
            indexes[name] = self.store.save(name, recordings, self.sampler.cap_bytes,
                                            self.sampler.cap_bytes)
            self._write_spec(name, self.sampler.kernels[name])
        return indexes

    def _write_spec(self, name: str, kernel) -> None:
        """The kernel's spec beside its recordings (what `pytest-r3 replay` rebuilds it
        from); what a test run wrote there about oracle tests is kept."""
        try:
            saved = self.store.spec(name) or {}
        except CorruptRecording:
            saved = {}
        write_json_atomic(self.store.kernel_dir(name) / SPEC_FILE, {
            "oracle_tests": [], "observed_tests": [], "recorded_from": "application",
            **saved, "spec": self.spec_of(kernel)})

    def save_at_exit(self) -> None:
        try:
            indexes = self.save()
        except R3Error as exc:  # a read-only or full disk: one line, the program's exit stays
            print(f"pytest-r3: could not save the recorded launches: {exc}", file=sys.stderr)
            return
        if indexes and os.environ.get(ENV_ORIGIN) is None:  # `pytest-r3 record` says it
            launches = self.sampler.launches()
            print(f"pytest-r3: recorded {sum(launches.values())} launch(es) of "
                  f"{', '.join(sorted(launches))} as workloads under {self.store.root}",
                  file=sys.stderr)


def _number(environ, name: str, default: float, convert=int):
    text = environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = convert(text)
    except ValueError:
        raise R3Error(f"{name}={text!r} is not a number; unset it or give e.g. "
                      f"{name}={default}") from None
    if value < 0:
        raise R3Error(f"{name}={text!r} is negative")
    return value


def from_environment(environ, spec_of: Callable[[object], dict]) -> ApplicationRecorder | None:
    """The recorder ``PYTEST_R3_RECORD`` asks for, or None when it is unset."""
    r3_dir = environ.get(ENV, "").strip()
    if not r3_dir:
        return None
    run = environ.get(ENV_RUN) or uuid.uuid4().hex
    environ[ENV_RUN] = run  # child processes count into the same session
    origin = environ.get(ENV_ORIGIN) or "application: " + " ".join(
        [Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python", *sys.argv[1:]])
    sampler = WorkloadSampler(
        run=run, first=_number(environ, ENV_FIRST, DEFAULT_FIRST),
        every=_number(environ, ENV_EVERY, DEFAULT_EVERY),
        cap_bytes=int(_number(environ, ENV_CAP, DEFAULT_WORKLOAD_CAP_BYTES / 2**20, float) * 2**20))
    return ApplicationRecorder(r3_dir, origin, sampler, spec_of)


def install(recorder: ApplicationRecorder, add_interceptor, use_lock_file) -> None:
    """Count and sample every launch from now on; save when the process exits."""
    use_lock_file(False)
    add_interceptor(recorder.intercept)
    atexit.register(recorder.save_at_exit)
