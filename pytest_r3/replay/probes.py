"""Slow-path probes: inputs a claim is timed on before it is locked, beside the recorded ones.

Timing sees the recorded values on whole, 16-byte aligned buffers. A rewrite can be fast
there and slow on what production also passes: a vector loop only for an aligned ``y`` (a
scalar fallback for ``arr[1:]``), a branch that skips zero entries (ReLU outputs, masked
updates, a cold grid), an overlap test that takes two rows of one array for overlapping.
Each probe is the largest timed case with one such change, and a claim's confirmation
(``ReplaySettings.probes``, see ``pool.fresh``) times the candidate against the baseline
there too, with the same interleaved timing; a candidate slower than the original on any
probe beyond the noise band (and a margin, twice: see ``tuning.claims``) is not locked.
Not in the search: the probes cost a timing each, paid once per claim.

The probes:

- every written buffer misaligned by 4, then by 8 bytes (a view one or two float32
  elements, or one float64 element, into a larger allocation: ``arr[1:]``, ``arr[2:]``;
  an offset that is not a whole number of elements is left out);
- zeros in 10%, then in all, of the elements of every read-only floating-point input
  (never integer data: sizes and indices must keep their values);
- a read-only input and a written buffer of one dtype as consecutive parts of one
  allocation, the written one right after the input (two rows of one 2-D array);
- two read-only inputs of one dtype and shape passed as one array (``matmul(n, a, a, c)``
  squares a matrix: the example project's application does). Verification already runs
  that case (see shared_inputs); timing did not, and a rewrite with a slow path for
  ``a == b`` was timed 6.4x faster and was 2-2.7x slower in that application.

The buffers are allocated as timing allocates every buffer, as numpy allocates the user's
(see layout), so a probe looks like any production call. The layout probes are for a host
backend only: a GPU backend copies each argument to a device buffer of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .cases import Slot
from .measurement import MalformedTiming, Timing

MISALIGNMENTS = (4, 8)      # bytes a written buffer is moved off its allocation's start
ZERO_SHARES = (0.1, 1.0)    # shares of a read-only float input's elements made zero
# The smallest slowdown on a slow-path probe that refuses a claim, whatever the band: a
# probe is one timing of the largest case, and the baseline timed against itself on the
# example project's 14 probes, 10 times each (bench_probes.py --aa-runs 10; 48 MiB
# scaled_add, 1024 x 1024 jacobi2d, 256 x 256 matmul; load 1.3-11 on 2 cores), read as
# low as 0.86x, and the top of its interval, which decides, as low as 0.935 (jacobi2d, in
# all zeros): 15% is twice that (with rounds of four samples, 25%: an interval of
# 0.74-0.90 was read). The slow paths the probes are for cost 1.5x to 70x.
PROBE_MARGIN = 0.15


# Warm-up rounds before a probe's timed rounds: none. The probe's question is whether the
# candidate is far slower, and a round still cold (the first launches on the probe's fresh
# buffers fault their pages in, the candidate's first, as it runs first on its set) reads
# the candidate slower: that only keeps the probe going to a warm round, as "slower" needs
# every round (see clear_of). The baseline's sizing launch runs before any round.
WARMUP_ROUNDS = 0


def clear_of() -> float:
    """The speedup a probe's timing may stop at once a round reads it (timing's
    ``clear_of``): no band a claim uses (``PROBE_MARGIN`` at least) counts it slower."""
    return 1.0 / (1.0 + PROBE_MARGIN)


@dataclass(frozen=True)
class Probe:
    """One probe input: the largest timed case changed as ``label`` says."""

    label: str
    scalars: dict
    slots: list[Slot]


@dataclass(frozen=True)
class ProbeTiming:
    """A candidate timed against the baseline on one probe."""

    label: str
    timing: Timing

    def slower(self, band: float) -> bool:
        """Slower than the baseline beyond the noise band ``band`` (the A/A one)."""
        return self.timing.verdict(band) == "slower"

    def describe(self) -> str:
        """"2.7x slower than the original on y misaligned by 8 bytes (...)"."""
        low, high = self.timing.interval
        return (f"{1 / self.timing.speedup:.1f}x slower than the original on {self.label} "
                f"(speedup {self.timing.speedup:.2f}x, 95% interval {low:.2f}-{high:.2f})")

    def as_dict(self) -> dict:
        return {"label": self.label, "timing": self.timing.as_dict()}

    @classmethod
    def from_dict(cls, data: object) -> ProbeTiming:
        if not isinstance(data, Mapping) or not isinstance(data.get("label"), str):
            raise MalformedTiming(f"a malformed probe timing {data!r:.80}")
        return cls(data["label"], Timing.from_dict(data.get("timing")))


def plan(scalars: dict, slots: list[Slot], seed: int = 0, host: bool = True) -> list[Probe]:
    """The probes of one case (its ``scalars`` and ``slots``); ``host``: the buffers are the
    kernel's own memory (a CPU backend), so their layout can be probed."""
    rng = np.random.default_rng([seed, 31])
    found = []
    if host:
        found += [p for offset in MISALIGNMENTS if (p := _misaligned(scalars, slots, offset))]
    found += [p for share in ZERO_SHARES if (p := _zeros(scalars, slots, share, rng))]
    if host and (rows := _rows(scalars, slots)):
        found.append(rows)
    if shared := _shared_inputs(scalars, slots):
        found.append(shared)
    return found


def _single(slot: Slot) -> bool:
    """A buffer passed as one whole parameter (not shared, not a view)."""
    return len(slot.params) == 1 and not slot.views and slot.values.size > 0


def _misaligned(scalars: dict, slots: list[Slot], offset: int) -> Probe | None:
    """Every written buffer as a view ``offset`` bytes into a larger allocation, the
    elements before it copies of its first ones."""
    changed, made = [], []
    for slot in slots:
        itemsize = slot.values.dtype.itemsize
        if not slot.written or not _single(slot) or offset % itemsize:
            made.append(slot)
            continue
        skip = offset // itemsize
        flat = slot.values.reshape(-1)
        grown = np.concatenate([np.resize(flat, skip), flat])
        made.append(Slot(slot.params, True, grown, {slot.params[0]: (skip, slot.values.shape)}))
        changed.append(slot.params[0])
    if not changed:
        return None
    return Probe(f"{', '.join(changed)} misaligned by {offset} bytes", dict(scalars), made)


def _zeros(scalars: dict, slots: list[Slot], share: float, rng: np.random.Generator
           ) -> Probe | None:
    """A share of the elements (at least one) of every read-only float input made zero."""
    changed, made = [], []
    for slot in slots:
        if slot.written or not _single(slot) or slot.values.dtype.kind not in "fc":
            made.append(slot)
            continue
        fresh = slot.values.copy()
        flat = fresh.reshape(-1)
        if share >= 1.0:
            flat[:] = 0
        else:
            chosen = rng.random(flat.size) < share
            chosen[rng.integers(flat.size)] = True
            flat[chosen] = 0
        made.append(Slot(slot.params, False, fresh))
        changed.append(slot.params[0])
    if not changed:
        return None
    names = ", ".join(changed)
    label = f"{names} all zeros" if share >= 1.0 else f"zeros in {share:.0%} of {names}"
    return Probe(label, dict(scalars), made)


def _rows(scalars: dict, slots: list[Slot]) -> Probe | None:
    """The first read-only input and written buffer of one dtype as consecutive parts of
    one allocation, the written one right after the input (as rows ``M[0]``, ``M[1]``)."""
    single = [s for s in slots if _single(s)]
    pair = next(((source, target) for source in single if not source.written
                 for target in single if target.written
                 and target.values.dtype == source.values.dtype), None)
    if pair is None:
        return None
    source, target = pair
    values = np.concatenate([source.values.reshape(-1), target.values.reshape(-1)])
    views = {source.params[0]: (0, source.values.shape),
             target.params[0]: (source.values.size, target.values.shape)}
    shared = Slot([source.params[0], target.params[0]], True, values, views)
    made = [shared if s is source else s for s in slots if s is not target]
    return Probe(f"{source.params[0]} and {target.params[0]} as consecutive rows of one "
                 f"array ({target.params[0]} right after {source.params[0]})",
                 dict(scalars), made)


def _shared_inputs(scalars: dict, slots: list[Slot]) -> Probe | None:
    """The first two read-only inputs of one dtype and shape passed as one array, holding
    the first one's values."""
    inputs = [s for s in slots if _single(s) and not s.written]
    pair = next(((first, second) for number, first in enumerate(inputs)
                 for second in inputs[number + 1:]
                 if first.values.dtype == second.values.dtype
                 and first.values.shape == second.values.shape), None)
    if pair is None:
        return None
    first, second = pair
    shared = Slot([first.params[0], second.params[0]], False, first.values.copy())
    made = [shared if s is first else s for s in slots if s is not second]
    return Probe(f"{first.params[0]} and {second.params[0]} as one array", dict(scalars),
                 made)
