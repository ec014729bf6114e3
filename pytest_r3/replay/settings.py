"""How hard a replay server checks and times candidates: plain data, so it crosses from the
judge to the worker unchanged."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ReplaySettings:
    """Limits and verification strength."""

    run_timeout: float = 10.0          # seconds for one kernel run (SIGALRM in the worker)
    compile_timeout: float = 60.0      # seconds for clang, and for LLVM, on one candidate
    fresh_inputs: int = 1              # perturbed input sets per recording
    derived_sizes: bool = True         # replay the smallest recording at nearby sizes too
    sanity_bound: float = 10.0         # speedups above this are re-verified and flagged
    reserve_inputs: int = 3            # extra perturbed sets kept for that re-verification
    timing_rounds: int = 15            # at most; fewer once the ratio is steady
    min_timing_rounds: int = 5
    warmup_rounds: int = 2
    min_sample_seconds: float = 2e-3   # each timed sample repeats launches up to this long
    timing_recordings: int = 2         # the largest N recordings are timed
    seed: int = 0
    # Each layer of the trust model can be tested alone; these exist for that, never for use.
    static_check: bool = True

    @classmethod
    def from_dict(cls, data: dict) -> ReplaySettings:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)
