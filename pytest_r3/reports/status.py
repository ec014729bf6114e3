"""What became of a kernel in a run: one closed set of outcomes, each shown with an
optional detail (``FAIL: slower``, ``tuned 2 of 3 bucket(s)``).

Every layer that decides or shows a row's status uses this value, never free text compared
by prefix: a misspelt outcome is refused where it is made, and what counts as tuned or
failed is said once, here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

Outcome = Literal[
    # --r3-tune
    "tuned",                   # a claim confirmed in a fresh worker process and locked
    "tuned (source rewrite)",  # the same, for a rewrite (its patch carries the code)
    "tuned buckets",           # a specialised kernel: some buckets tuned (detail: how many)
    "baseline kept",           # nothing faster beyond the noise band, or not reproduced
    "not tuned",               # nothing to tune, or a kernel that cannot be timed here
    "rejected by oracles",     # the winner failed the kernel's own tests
    "FAILED",                  # the run could not tune it (detail: why)
    "suspect",                 # a GPU timing faster than the device's memory allows:
                               # no claim, nothing locked, no --r3-check verdict
    # --r3-check
    "ok",                      # the locked variant still fits, verifies and is not slower
    "patch not applied",       # a rewrite locked, its patch not applied yet
    "not exercised",           # no oracle test launched it in this session
    "FAIL",                    # the check fails the build (detail: stale, slower, ...)
]
OUTCOMES: tuple[str, ...] = get_args(Outcome)
TUNED: frozenset[str] = frozenset({"tuned", "tuned (source rewrite)", "tuned buckets"})
FAILED: frozenset[str] = frozenset({"FAILED", "FAIL"})


@dataclass(frozen=True)
class Status:
    """An outcome and its detail (``FAIL`` with ``slower`` shows as ``FAIL: slower``)."""

    outcome: Outcome
    detail: str = ""

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"unknown report status {self.outcome!r}: use one of "
                             f"{', '.join(OUTCOMES)}")

    def __str__(self) -> str:
        if not self.detail:
            return self.outcome
        if self.outcome == "tuned buckets":
            return f"tuned {self.detail}"
        return f"{self.outcome}: {self.detail}"

    @property
    def tuned(self) -> bool:
        return self.outcome in TUNED

    @property
    def failed(self) -> bool:
        """The run or the check failed on this kernel (shown red; fails --r3-check)."""
        return self.outcome in FAILED

    def as_dict(self) -> dict:
        return {"outcome": self.outcome, "detail": self.detail}

    @classmethod
    def from_data(cls, data: object) -> Status:
        """A status as :meth:`as_dict` wrote it, or the text a report of an earlier version
        holds (``FAIL: slower``, ``tuned 2 of 3 bucket(s)``)."""
        if isinstance(data, dict):
            return cls(data.get("outcome", ""), str(data.get("detail", "")))
        text = str(data)
        if text in OUTCOMES:
            return cls(text)
        head, _, detail = text.partition(": ")
        if detail and head in OUTCOMES:
            return cls(head, detail)
        if text.startswith("tuned ") and text.endswith(" bucket(s)"):
            return cls("tuned buckets", text.removeprefix("tuned "))
        return cls("FAILED", f"unknown status {text!r} in an earlier report")
