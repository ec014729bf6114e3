"""The replay server's messages: ``(event, data)`` pairs of plain JSON data.

Client -> worker: ``load`` (kernel spec, recordings, settings), ``evaluate`` (a candidate),
``ping``, ``shutdown``. Worker -> client: ``loaded``, ``result``, ``pong``, ``error``.
JSON rather than pickle: the worker runs untrusted code, so nothing it sends back may
execute anything when decoded.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field

CLIENT_EVENTS = ("load", "evaluate", "ping", "shutdown")
WORKER_EVENTS = ("loaded", "result", "pong", "error")

OK = "ok"
COMPILE_ERROR = "compile_error"
SANDBOX_VIOLATION = "sandbox_violation"
CRASH = "crash"
TIMEOUT = "timeout"
WRONG_OUTPUT = "wrong_output"
STATUSES = (OK, COMPILE_ERROR, SANDBOX_VIOLATION, CRASH, TIMEOUT, WRONG_OUTPUT)
# exit status of a worker that ended itself after a kernel faulted on a GPU
DEVICE_FAULT_EXIT = 75


class ProtocolError(RuntimeError):
    """A message that is not an ``(event, data)`` pair of a known event."""


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
            params=[{"name": p.name, "ctype": p.ctype, "dtype": p.dtype,
                     "is_pointer": p.is_pointer, "written": p.written}
                    for p in signature.params],
            return_dtype=signature.return_dtype,
            tolerance=dict(getattr(kernel, "tolerance", None) or {}),
            launch=kernel.launch.portable() if getattr(kernel, "launch", None) else {},
        )

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> KernelSpec:
        return cls(**data)


@dataclass(frozen=True)
class Candidate:
    """One variant to evaluate: new source (or None for the declared one), macros, pipeline."""

    macros: dict = field(default_factory=dict)
    pipeline: dict = field(default_factory=dict)
    source_text: str | None = None
    launch: dict = field(default_factory=dict)
    label: str = ""

    def key(self) -> str:
        payload = json.dumps({"macros": self.macros, "pipeline": self.pipeline,
                              "launch": self.launch,
                              "source": None if self.source_text is None else
                              hashlib.sha256(self.source_text.encode()).hexdigest()},
                             sort_keys=True, default=str)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Candidate:
        return cls(**data)


@dataclass
class Result:
    """What evaluating a candidate gave; a failure is a result, never an exception."""

    status: str
    candidate_key: str = ""
    label: str = ""
    diagnostics: list[str] = field(default_factory=list)
    timing: dict = field(default_factory=dict)
    compile_seconds: dict = field(default_factory=dict)
    review: bool = False
    details: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == OK

    @property
    def speedup(self) -> float | None:
        return self.timing.get("speedup")

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Result:
        return cls(**data)

    def summary(self) -> str:
        text = self.status
        if self.ok and self.timing:
            t = self.timing
            text += (f": speedup {t['speedup']:.3f}x (IQR {t['speedup_q1']:.3f}-"
                     f"{t['speedup_q3']:.3f}), candidate {t['candidate_median'] * 1e6:.1f} us"
                     f" vs baseline {t['baseline_median'] * 1e6:.1f} us")
            if t.get("within_noise"):
                text += " (within noise)"
        if self.review:
            text += " [marked for review: speedup above the sanity bound]"
        if self.diagnostics:
            text += "\n  " + "\n  ".join(self.diagnostics)
        return text
