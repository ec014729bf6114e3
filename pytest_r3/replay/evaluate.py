"""Evaluating one candidate on a kernel's recordings: build, check, run, verify, time.

This runs inside the replay worker process. It holds the baseline and the recordings in
memory, so a candidate costs one clang run at most (none if only the pipeline changed),
one LLVM optimisation and the runs themselves.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from .. import sandbox
from ..backends import get_backend
from ..errors import CompileError, KernelFault, LaunchError, R3Error
from ..launch import LaunchConfig
from ..pipeline import Pipeline
from ..record import Recording
from ..signature import Param, Signature
from ..source import KernelSource
from ..verify import POISON_PATTERNS, GuardedBuffer, Tolerance, compare, parse_tolerances, perturbed
from . import protocol
from .protocol import Candidate, KernelSpec, Result
from .timing import interleaved_speedup


@dataclass
class ReplaySettings:
    """Limits and verification strength; all plain data so they cross the process boundary."""

    run_timeout: float = 10.0          # seconds for one kernel run (SIGALRM in the worker)
    compile_timeout: float = 60.0      # seconds for clang + LLVM on one candidate
    fresh_inputs: int = 1              # perturbed input sets per recording
    sanity_bound: float = 10.0         # speedups above this are re-verified and flagged
    timing_rounds: int = 15            # at most; fewer once the ratio is steady
    min_timing_rounds: int = 5
    warmup_rounds: int = 2
    min_sample_seconds: float = 2e-3   # each timed sample repeats launches up to this long
    timing_recordings: int = 2         # the largest N recordings are timed
    seed: int = 0

    @classmethod
    def from_dict(cls, data: dict) -> ReplaySettings:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


@dataclass
class Case:
    """A recording prepared for replay: which outputs to poison, what to expect."""

    recording: Recording
    output_only: set[str] = field(default_factory=set)
    expected: dict[str, np.ndarray] = field(default_factory=dict)
    returned: object = None
    label: str = ""
    weak: bool = False


class Rejected(Exception):
    """A candidate failed a check; carries the status and the explanation."""

    def __init__(self, status: str, message: str, **details: object) -> None:
        super().__init__(message)
        self.status = status
        self.details = details


class Evaluator:
    def __init__(self, spec: KernelSpec, recordings: list[Recording],
                 settings: ReplaySettings | None = None) -> None:
        self.spec = spec
        self.settings = settings or ReplaySettings()
        self.backend = get_backend(spec.backend)
        self.signature = Signature(spec.entry, tuple(
            Param(p["name"], p["ctype"], p["dtype"], p["is_pointer"], p["written"])
            for p in spec.params), spec.return_dtype)
        self.source = KernelSource(spec.source_text, spec.filename,
                                   include_dirs=tuple(spec.include_dirs))
        self.tolerances = parse_tolerances(spec.tolerance, self.signature.names,
                                           f"kernel {spec.name!r}")
        # a GPU kernel's grid and block, rebuilt from plain data (see pytest_r3.launch)
        self.launch = (LaunchConfig.from_portable(spec.launch, f"kernel {spec.name!r}")
                       if spec.launch else None)
        self.baseline_candidate = Candidate(macros={}, pipeline=spec.pipeline, label="baseline")
        self.baseline, _ = self._build(self.baseline_candidate)
        self.rng = np.random.default_rng(self.settings.seed)
        self.cases = [self._prepare(r) for r in recordings]
        self.strong = [c for c in self.cases if not c.weak]
        # weak recordings only count alongside a strong one
        self.verifying = self.cases if self.strong else []
        self.fresh = [self._fresh_case(c, i) for c in self.cases
                      for i in range(self.settings.fresh_inputs)]
        by_size = sorted(self.cases, key=lambda c: c.recording.nbytes, reverse=True)
        self.timed = by_size[: self.settings.timing_recordings]

    # -- building -------------------------------------------------------------------
    def _build(self, candidate: Candidate):
        """Compile under a time limit: some pipelines (unroll x vector width x unroll-and-jam)
        make LLVM run for minutes; the alarm ends the worker and the result is a timeout."""
        signal.setitimer(signal.ITIMER_REAL, self.settings.compile_timeout)
        try:
            return self._build_unlimited(candidate)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)

    def _build_unlimited(self, candidate: Candidate):
        macros = {**self.spec.default_macros, **candidate.macros}
        pipeline = Pipeline.from_mapping({**self.spec.pipeline, **candidate.pipeline})
        source = (self.source if candidate.source_text is None
                  else self.source.with_text(candidate.source_text))
        started = time.perf_counter()
        try:
            ir = self.backend.compile(source, macros)
        except CompileError as exc:
            raise Rejected(protocol.COMPILE_ERROR, exc.diagnostics or str(exc)) from None
        clang_seconds = time.perf_counter() - started
        started = time.perf_counter()
        try:
            module = self.backend.parse(ir, f"kernel {self.spec.name!r}")
            violations = sandbox.check_module(module)
            if violations:
                raise Rejected(protocol.SANDBOX_VIOLATION, sandbox.advice(violations),
                               symbols=sorted({v.symbol for v in violations}))
            options = {} if self.launch is None else {
                "launch": self.launch, "tunables": {**macros, **candidate.launch}}
            launcher = self.backend.load(ir, self.spec.entry, self.signature, pipeline,
                                         self.spec.name, **options)
        except R3Error as exc:
            raise Rejected(protocol.COMPILE_ERROR, str(exc)) from None
        llvm_seconds = time.perf_counter() - started
        return launcher, {"clang": clang_seconds, "llvm": llvm_seconds}

    # -- preparing recordings --------------------------------------------------------
    def _prepare(self, recording: Recording) -> Case:
        case = Case(recording, label=f"recording {recording.key} ({', '.join(recording.tests)})")
        # A written buffer whose prior content the baseline ignores is output-only: it gets
        # poison before every run. In-out buffers get their recorded input.
        written = [p.name for p in self.signature.params if p.written]
        reference, _ = self._run(self.baseline, case, poison=None)
        for name in written:
            problem = compare(name, recording.outputs[name], reference[name],
                              self.tolerances.get(name, Tolerance()))
            if problem:
                raise Rejected(protocol.WRONG_OUTPUT,
                               f"the baseline does not reproduce {case.label}: {problem}; the "
                               "recording is stale or the kernel is not deterministic. "
                               "Record again with `pytest --r3-record`.")
        for name in written:
            probe = Case(recording, output_only={name})
            outputs, _ = self._run(self.baseline, probe, poison=POISON_PATTERNS[0])
            # an empty buffer proves nothing: poisoning it changes nothing
            if reference[name].size and np.array_equal(
                    outputs[name], reference[name], equal_nan=reference[name].dtype.kind == "f"):
                case.output_only.add(name)
        case.expected = recording.outputs
        case.returned = recording.returned
        in_out = [n for n in written if n not in case.output_only]
        case.weak = bool(written) and all(n in recording.weak_outputs() for n in in_out) \
            and not case.output_only
        return case

    def _fresh_case(self, case: Case, index: int) -> Case:
        rng = np.random.default_rng([self.settings.seed, index, int(case.recording.key[:8], 16)])
        inputs = {n: perturbed(a, rng) for n, a in case.recording.inputs.items()}
        recording = Recording(case.recording.kernel, case.recording.params,
                              case.recording.scalars, inputs, {}, None, case.recording.tests)
        fresh = Case(recording, output_only=set(case.output_only),
                     label=f"fresh inputs #{index + 1} derived from {case.label}")
        fresh.expected, fresh.returned = self._run(self.baseline, fresh, poison=POISON_PATTERNS[0])
        return fresh

    # -- running ----------------------------------------------------------------------
    def _arguments(self, case: Case, poison: int | None) -> tuple[list, dict[str, GuardedBuffer]]:
        buffers: dict[str, GuardedBuffer] = {}
        args: list[object] = []
        for param in self.signature.params:
            if not param.is_pointer:
                args.append(case.recording.scalars[param.name])
                continue
            buffer = GuardedBuffer(case.recording.inputs[param.name])
            if poison is not None and param.name in case.output_only:
                buffer.poison(poison)
            else:
                buffer.fill_from(case.recording.inputs[param.name])
            buffers[param.name] = buffer
            args.append(buffer.array)
        return args, buffers

    def _run(self, launcher, case: Case, poison: int | None):
        args, buffers = self._arguments(case, poison)
        signal.setitimer(signal.ITIMER_REAL, self.settings.run_timeout)
        try:
            returned = launcher(*args)
        except KernelFault as fault:
            _end_worker(fault)
        except LaunchError as exc:  # e.g. a GPU block the device refuses
            raise Rejected(protocol.COMPILE_ERROR, f"{case.label}: {exc}") from None
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        for name, buffer in buffers.items():
            problem = buffer.guards_intact()
            if problem:
                raise Rejected(protocol.WRONG_OUTPUT,
                               f"out-of-bounds write on {case.label}: buffer '{name}' {problem}",
                               kind="out_of_bounds", buffer=name)
        for param in self.signature.params:
            if param.is_pointer and not param.written and not np.array_equal(
                    buffers[param.name].array, case.recording.inputs[param.name],
                    equal_nan=True):
                raise Rejected(protocol.WRONG_OUTPUT,
                               f"modified the read-only input '{param.name}' on {case.label}",
                               kind="modified_input", buffer=param.name)
        outputs = {p.name: buffers[p.name].array.copy() for p in self.signature.params
                   if p.written}
        return outputs, returned

    def _check(self, launcher, case: Case) -> None:
        first, returned = self._run(launcher, case, POISON_PATTERNS[0])
        for name, expected in case.expected.items():
            problem = compare(name, expected, first[name], self.tolerances.get(name, Tolerance()))
            if problem:
                hint = (" (the output was pre-filled with poison: the candidate must write every"
                        " element)") if name in case.output_only else ""
                raise Rejected(protocol.WRONG_OUTPUT, f"{case.label}: {problem}{hint}",
                               kind="mismatch", buffer=name)
        if case.returned is not None and returned is not None:
            problem = compare("return value", np.asarray(case.returned),
                              np.asarray(returned), Tolerance())
            if problem:
                raise Rejected(protocol.WRONG_OUTPUT, f"{case.label}: {problem}",
                               kind="mismatch", buffer="return")
        second, _ = self._run(launcher, case, POISON_PATTERNS[1])
        for name in first:
            if not np.array_equal(first[name], second[name], equal_nan=True):
                raise Rejected(
                    protocol.WRONG_OUTPUT,
                    f"{case.label}: two runs on fresh buffers gave different '{name}' "
                    "(the candidate reads memory it never wrote, or is not deterministic)",
                    kind="nondeterministic", buffer=name)

    def _verify(self, launcher, extra_fresh: int = 0) -> None:
        for case in self.verifying:
            self._check(launcher, case)
        for case in self.fresh:
            self._check(launcher, case)
        for index in range(extra_fresh):
            for case in self.cases:
                self._check(launcher, self._fresh_case(case, self.settings.fresh_inputs + index))

    # -- the request -------------------------------------------------------------------
    def evaluate(self, candidate: Candidate) -> Result:
        result = Result(status=protocol.OK, candidate_key=candidate.key(), label=candidate.label)
        if not self.strong:
            result.diagnostics.append(
                "every recording is too weak to verify with (a do-nothing kernel would pass "
                "it): only fresh derived inputs were checked; add a test whose outputs differ "
                "from its inputs")
        try:
            launcher, result.compile_seconds = self._build(candidate)
            self._verify(launcher)
            try:
                result.timing = interleaved_speedup(
                    self.backend, self.baseline, launcher, self.timed, self._arguments,
                    self.settings)
            except KernelFault as fault:
                _end_worker(fault)
            if result.timing["speedup"] > self.settings.sanity_bound:
                self._verify(launcher, extra_fresh=3)
                result.review = True
                result.diagnostics.append(
                    f"speedup {result.timing['speedup']:.1f}x is above the sanity bound of "
                    f"{self.settings.sanity_bound:g}x: verified again on 3 more fresh input "
                    "sets; review it before trusting it")
        except Rejected as rejected:
            result.status = rejected.status
            result.diagnostics.append(str(rejected))
            result.details.update(rejected.details)
        except (MemoryError, RuntimeError, OSError) as exc:  # e.g. LLVM failing to JIT
            result.status = protocol.CRASH
            result.diagnostics.append(f"the candidate broke the worker: {type(exc).__name__}: "
                                      f"{exc}")
        return result

    def describe(self) -> dict:
        return {
            "recordings": len(self.cases),
            "weak": [c.recording.key for c in self.cases if c.weak],
            "output_only": sorted({n for c in self.cases for n in c.output_only}),
            "timed": [c.recording.key for c in self.timed],
        }


def _end_worker(fault: KernelFault) -> None:
    """A fault on a GPU leaves its context unusable: end this worker the way a crash would,
    so the client reports a crash for this candidate and starts a fresh worker."""
    print(f"pytest-r3 replay worker: {fault}", file=sys.stderr, flush=True)
    os._exit(protocol.DEVICE_FAULT_EXIT)
