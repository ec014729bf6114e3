"""The replay server's messages: ``(event, data)`` pairs of plain JSON data.

Client -> worker: ``load`` (kernel spec, recordings, settings), ``evaluate`` (a candidate),
``ping``, ``shutdown``. Worker -> client: ``loaded``, ``result``, ``pong``, ``error``.
JSON rather than pickle: the worker runs untrusted code, so nothing it sends back may
execute anything when decoded. Arrays travel as raw frames after the JSON header, described
by dtype and shape and checked on arrival (numbers only: nothing is unpickled).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, replace
from typing import Literal, get_args

import numpy as np

from ..model.configuration import Configuration
from .measurement import Timing
from .probes import ProbeTiming

CLIENT_EVENTS = ("load", "cases", "seal", "build", "run", "time", "drop", "call", "ping",
                 "shutdown")
WORKER_EVENTS = ("loaded", "ready", "sealed", "built", "outputs", "timed", "dropped", "pong",
                 "rejected", "error")

# dtypes an array frame may carry: plain numbers, never objects
ARRAY_KINDS = "biuf"
MAX_ARRAYS = 4096

# Every status an evaluation can end with. ``invalid``: a point the search space refuses
# (never run); ``too_busy``: the machine took the core away from too many samples to
# measure anything (see docs/record-and-replay.md); ``suspect``: a GPU timing faster than
# the device's memory could move the launch's bytes (see device_timing).
Status = Literal["ok", "compile_error", "sandbox_violation", "crash", "timeout",
                 "wrong_output", "too_busy", "invalid", "suspect"]
STATUSES: tuple[Status, ...] = get_args(Status)
OK: Status = "ok"
COMPILE_ERROR: Status = "compile_error"
SANDBOX_VIOLATION: Status = "sandbox_violation"
CRASH: Status = "crash"
TIMEOUT: Status = "timeout"
WRONG_OUTPUT: Status = "wrong_output"
TOO_BUSY: Status = "too_busy"
INVALID: Status = "invalid"
SUSPECT: Status = "suspect"
# what a worker may say a variant it refused has: the rest are the parent's to decide
REJECTIONS: tuple[Status, ...] = (COMPILE_ERROR, SANDBOX_VIOLATION, CRASH, TIMEOUT,
                                  WRONG_OUTPUT)
# exit status of a worker that ended itself after a kernel faulted on a GPU
DEVICE_FAULT_EXIT = 75


class ProtocolError(RuntimeError):
    """A message that is not an ``(event, data)`` pair of a known event."""


class Rejected(Exception):
    """A candidate failed a check: its status, the class of failure (``kind``) and why."""

    def __init__(self, status: Status, kind: str, message: str, *, explanation: str = "",
                 **details: object) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.explanation = explanation  # more lines (a compiler's full output)
        self.details = {"kind": kind, **details}

    def result(self) -> Result:
        diagnostics = [str(self)] + ([self.explanation] if self.explanation else [])
        return Result(self.status, diagnostics=diagnostics, details=dict(self.details))


def encode(event: str, data: dict, allowed: tuple[str, ...]) -> bytes:
    if event not in allowed:
        raise ProtocolError(f"unknown event {event!r}; expected one of {', '.join(allowed)}")
    return json.dumps([event, data]).encode()


def decode(message: bytes, allowed: tuple[str, ...]) -> tuple[str, dict]:
    try:
        event, data = json.loads(message)
    except (ValueError, TypeError) as exc:
        raise ProtocolError(f"malformed message: {exc}") from None
    if event not in allowed or not isinstance(data, dict):
        raise ProtocolError(f"unknown event {event!r}; expected one of {', '.join(allowed)}")
    return event, data


def send(connection, event: str, data: dict, allowed: tuple[str, ...],
         arrays: dict[str, np.ndarray] | None = None) -> None:
    """One message: a JSON header naming each array's dtype and shape, then one raw frame
    per array."""
    arrays = arrays or {}
    header = {**data, "arrays": [[name, a.dtype.str, list(a.shape)]
                                 for name, a in arrays.items()]} if arrays else data
    connection.send_bytes(encode(event, header, allowed))
    for array in arrays.values():
        connection.send_bytes(np.ascontiguousarray(array).data.cast("B"))


def receive(connection, allowed: tuple[str, ...]) -> tuple[str, dict, dict[str, np.ndarray]]:
    """The counterpart of :func:`send`; anything malformed is a ProtocolError (a worker that
    sends one is treated as crashed)."""
    event, data = decode(connection.recv_bytes(), allowed)
    described = data.pop("arrays", [])
    if not isinstance(described, list) or len(described) > MAX_ARRAYS:
        raise ProtocolError("malformed array list")
    arrays: dict[str, np.ndarray] = {}
    for item in described:
        name, dtype, shape = _array_header(item)
        frame = connection.recv_bytes()
        if len(frame) != dtype.itemsize * math.prod(shape):
            raise ProtocolError(f"array {name!r}: {len(frame)} bytes for {dtype} {shape}")
        arrays[name] = np.frombuffer(frame, dtype=dtype).reshape(shape)
    return event, data, arrays


def _array_header(item: object) -> tuple[str, np.dtype, tuple[int, ...]]:
    try:
        name, dtype_text, shape = item
        dtype = np.dtype(str(dtype_text))
        shape = tuple(int(n) for n in shape)
    except (TypeError, ValueError) as exc:
        raise ProtocolError(f"malformed array header {item!r}: {exc}") from None
    if not isinstance(name, str) or dtype.kind not in ARRAY_KINDS or dtype.hasobject \
            or any(n < 0 for n in shape) or len(shape) > 32:
        raise ProtocolError(f"refused array header {item!r}")
    return name, dtype, shape


@dataclass
class ReplaySettings:
    """Limits and verification strength."""

    run_timeout: float = 10.0          # seconds for one kernel run (SIGALRM in the worker)
    compile_timeout: float = 60.0      # seconds for clang, and for LLVM, on one candidate
    fresh_inputs: int = 1              # perturbed input sets per recording
    derived_sizes: bool = True         # replay the smallest recording at nearby sizes too
    derived_inputs: bool = True        # inputs the recordings never hold (replay/derived.py)
    sanity_bound: float = 10.0         # speedups above this are re-verified and flagged
    reserve_inputs: int = 3            # extra perturbed sets kept for that re-verification
    # rounds of eight samples (see replay/timing.py; a warm-up round has four)
    timing_rounds: int = 12            # at most; fewer once the ratio is steady
    min_timing_rounds: int = 3
    warmup_rounds: int = 2
    race_warmup_rounds: int = 1     # for a racing candidate (the finalists get the full warm-up)
    min_sample_seconds: float = 2e-3   # each timed sample repeats launches up to this long
    timing_recordings: int = 2         # the largest N recordings are timed
    race_rounds: int = 2               # rounds before a clearly slower candidate may stop
    # racing, half-rounds (four samples) before a clearly slower candidate stops: 0 decides
    # on whole rounds (race_rounds) instead, as before half-rounds (see replay/timing.py)
    race_halves: int = 3
    # rounds taken again after a sample lost its core, per round planned, before the timing
    # gives up as too busy (8: fewer than one clean round in nine attempts)
    retakes_per_round: float = 8.0
    # a slice with this much thread CPU time that lost its core is timed by that CPU time
    # instead of dropped (see sampling)
    long_slice_seconds: float = 5e-3
    timed_keys: tuple = ()             # time only these recordings (one bucket's), if any
    production_calls: int = 64         # launches in a row on production-layout buffers
    # the order of timing's heap buffer set: "parameter" in the search, "reverse" where a
    # claim is confirmed (pool.fresh), so each common heap order is timed before a lock
    timed_heap_order: Literal["parameter", "reverse"] = "parameter"
    # where a claim is confirmed: also timed on the slow-path probes (see probes)
    probes: bool = False
    seed: int = 0
    # Each layer of the trust model can be tested alone; these exist for that, never for use.
    static_check: bool = True

    def confirming(self) -> ReplaySettings:
        """These settings for a server that confirms a claim: its heap set timed in reverse
        allocation order (the search's is in parameter order), and the slow-path probes
        timed too."""
        return replace(self, timed_heap_order="reverse", probes=True)

    @classmethod
    def from_dict(cls, data: dict) -> ReplaySettings:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        if "timed_keys" in known:  # JSON carries the tuple as a list
            known["timed_keys"] = tuple(known["timed_keys"])
        return cls(**known)


@dataclass(frozen=True)
class KernelSpec:
    """Everything a worker needs to rebuild a kernel without importing the user's code."""

    name: str
    entry: str
    backend: str
    source_text: str
    filename: str
    include_dirs: list[str]
    default_macros: dict
    pipeline: dict
    params: list[dict]
    return_dtype: str | None = None
    tolerance: dict = field(default_factory=dict)
    launch: dict = field(default_factory=dict)  # a GPU kernel's launch=, as plain data
    defines: list = field(default_factory=list)  # the declared defines=, [name, value] pairs
    no_alias: bool = False  # declared: callers never pass overlapping buffers

    @classmethod
    def from_kernel(cls, kernel) -> KernelSpec:
        signature = kernel.signature
        return cls(
            name=kernel.name,
            entry=kernel.entry,
            backend=kernel.backend_name,
            source_text=kernel.source.text,
            filename=kernel.source.filename,
            include_dirs=list(kernel.source.include_dirs),
            default_macros=dict(kernel.space.default),
            pipeline=kernel.pipeline.as_dict(),
            params=[p.as_dict() for p in signature.params],
            return_dtype=signature.return_dtype,
            tolerance=dict(getattr(kernel, "tolerance", None) or {}),
            launch=kernel.launch.portable() if getattr(kernel, "launch", None) else {},
            defines=[list(d) for d in kernel.source.defines],
            no_alias=bool(getattr(kernel, "no_alias", False)),
        )

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> KernelSpec:
        return cls(**data)


@dataclass(frozen=True)
class Candidate(Configuration):
    """A configuration to evaluate, with a label for logs and reports. ``race_against``: the
    best speedup found so far; timing stops early once this one is clearly slower.
    ``race_with``: the configuration that reached it (a dict of Configuration's fields,
    and ``case_speedups``: its own speedup on each timed case),
    timed side by side in the baseline's place, its speedup scaling the ratio: cheaper
    rounds where the best is much faster than the baseline. Neither is part of the key:
    they change how a candidate is timed, not what it is."""

    label: str = ""
    race_against: float | None = None
    race_with: dict | None = None

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Candidate:
        return cls(**data)

    def configuration(self) -> Configuration:
        return Configuration(self.macros, self.pipeline, self.source_text, self.launch)

    def unraced(self) -> Candidate:
        """The same candidate, evaluated in full against the baseline."""
        return replace(self, race_against=None, race_with=None)


@dataclass
class Result:
    """What evaluating a candidate gave; a failure is a result, never an exception.
    ``timing``: the measurement, None when nothing was timed; ``probes``: its timings on
    the slow-path probes (a claim's confirmation only, see probes)."""

    status: Status
    candidate_key: str = ""
    label: str = ""
    diagnostics: list[str] = field(default_factory=list)
    timing: Timing | None = None
    compile_seconds: dict = field(default_factory=dict)
    review: bool = False
    details: dict = field(default_factory=dict)
    probes: tuple[ProbeTiming, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status == OK

    @property
    def speedup(self) -> float | None:
        return None if self.timing is None else self.timing.speedup

    @property
    def kind(self) -> str | None:
        """The class of failure (mismatch, out_of_bounds, syscall...), None when ok."""
        return self.details.get("kind")

    def reason(self) -> str:
        """One line: status, class and the first line of the explanation."""
        first = self.diagnostics[0].splitlines()[0] if self.diagnostics else ""
        kind = f" ({self.kind})" if self.kind and self.kind != self.status else ""
        return f"{self.status}{kind}" + (f": {first}" if first else "")

    def as_dict(self) -> dict:
        return {**{name: getattr(self, name) for name in self.__dataclass_fields__},
                "timing": None if self.timing is None else self.timing.as_dict(),
                "probes": [probe.as_dict() for probe in self.probes]}

    @classmethod
    def from_dict(cls, data: dict) -> Result:
        """The result ``data`` describes (this version's shape or the one stored before
        timings were typed); MalformedTiming or ValueError when it cannot be read."""
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        if known.get("status") not in STATUSES:
            raise ValueError(f"unknown status {known.get('status')!r}")
        timing = known.pop("timing", None)
        probes = known.pop("probes", None) or ()
        if not isinstance(probes, (list, tuple)):
            raise ValueError(f"malformed probes {probes!r:.80}")
        return cls(**known, timing=Timing.from_dict(timing) if timing else None,
                   probes=tuple(ProbeTiming.from_dict(p) for p in probes))

    def summary(self) -> str:
        text = self.status
        if self.ok and self.timing is not None:
            t = self.timing
            low, high = t.interval
            text += (f": speedup {t.speedup:.3f}x (95% CI {low:.3f}-{high:.3f}), candidate "
                     f"{t.candidate_median * 1e6:.1f} us vs baseline "
                     f"{t.baseline_median * 1e6:.1f} us")
            if t.dropped:
                text += f", {t.dropped} of {t.taken} timed slices dropped (descheduled)"
            if t.cpu_timed:
                text += (f", {t.cpu_timed} long slice(s) that lost the CPU timed by its CPU "
                         "time")
            if t.within_noise:
                text += " (within noise)"
        if self.review:
            text += " [marked for review: speedup above the sanity bound]"
        if self.diagnostics:
            text += "\n  " + "\n  ".join(self.diagnostics)
        return text
