"""NaN and infinities in float buffers, at densities drawn from a ladder.

A rewrite may drop special values (``y[i] = a*x[i] + (v == v ? v : 0)``) only when their
count lies in some band: two to a few percent of the elements, say, which "missing values"
in real data often are. Cases drawn at one density (5%, or one element) leave every other
band unseen. So each buffer gets them at several densities, a geometric ladder from one
element to MAX_SHARE of them, the rungs at most a factor RATIO apart, its place on the
log scale (its phase) drawn per server: every band as wide as RATIO holds a rung on every
run, and a narrower one is met with a chance in proportion to its width.

- Read-only float inputs: zeros (a share ZEROS) beside infinities of either sign, or NaNs,
  the two alternating up the ladder (``if (x[i] == 0) continue;`` skips ``0 * inf``).
- Written float buffers the kernel may read (the ``y`` of an axpy, an accumulator): NaNs,
  or infinities of either sign, alternating; the first and last element hold one on every
  other rung, so a rewrite that drops them only while ``y[0]`` and ``y[n-1]`` are finite
  meets both.

The derived cases' recording gets the ladder, and so does the largest oracle recording (a
rewrite may act only above some size).

Each case is marked ``specials``: the judge keeps it only where the baseline's outputs then
hold NaN or an infinity (it reads the buffer and carries them on).
"""

from __future__ import annotations

import math

import numpy as np

from .cases import Derived, Slot

ZEROS = 0.15       # share of a read-only float input's elements made zero beside them
MAX_SHARE = 0.5    # the top of the ladder: half of the elements
RATIO = 4.0        # rungs at most this factor apart...
MAX_RUNGS = 6      # ...up to this many rungs (then closer apart on larger buffers)


def ladder(size: int, rng: np.random.Generator) -> list[int]:
    """How many elements of a buffer of ``size`` get a special value, rung by rung, from
    about one to ``MAX_SHARE * size``, the rungs a factor of at most RATIO apart (fewer
    than that where MAX_RUNGS is reached), at a phase drawn from ``rng``."""
    if size < 1:
        return []
    span = max(math.log(MAX_SHARE * size), 0.0)
    rungs = max(1, min(MAX_RUNGS, math.ceil(span / math.log(RATIO))))
    step = span / rungs if span else 0.0
    phase = float(rng.random())
    return [max(1, min(size, round(math.exp(step * (k + phase))))) for k in range(rungs)]


def plan(case, rng: np.random.Generator) -> list[Derived]:
    """The special-value cases of ``case`` (``label``, ``scalars``, ``slots``)."""
    return _read_only(case, rng) + _written(case, rng)


def _changed(case, pick, change) -> tuple[list[Slot], list[str]]:
    """``case``'s slots with each one ``pick(slot)`` accepts copied (flat) and changed in
    place by ``change(flat copy)``; and the names of those changed."""
    slots, names = [], []
    for slot in case.slots:
        values = slot.values
        if slot.views or values.dtype.kind != "f" or not values.size or not pick(slot):
            slots.append(slot)
            continue
        fresh = values.copy().reshape(-1)
        change(fresh)
        slots.append(Slot(slot.params, slot.written, fresh.reshape(values.shape)))
        names.append(slot.name)
    return slots, names


def _read_only(case, rng: np.random.Generator) -> list[Derived]:
    """Zeros beside infinities (then NaNs, alternating up the ladder) in every read-only
    float input of two elements or more."""
    inputs = [s for s in case.slots if not s.written and not s.views
              and s.values.dtype.kind == "f" and s.values.size > 1]
    if not inputs:
        return []
    size = max(s.values.size for s in inputs)
    first = int(rng.integers(2))
    found = []
    for rung, count in enumerate(ladder(size, rng)):
        value, word = ((np.inf, "infinities"), (np.nan, "NaNs"))[(rung + first) % 2]

        def change(fresh: np.ndarray, count: int = count, value: float = value) -> None:
            places = rng.choice(fresh.size, size=min(count, fresh.size - 1), replace=False)
            zeros = rng.random(fresh.size) < ZEROS
            zeros[places] = False
            if not zeros.any():  # one zero at least, however short the input
                zeros[np.flatnonzero(np.isin(np.arange(fresh.size), places,
                                             invert=True))[0]] = True
            fresh[zeros] = 0.0
            fresh[places] = rng.choice([-1.0, 1.0], size=places.size) * value
        slots, names = _changed(case, lambda s: not s.written and s.values.size > 1, change)
        found.append(Derived(f"{case.label} with zeros and {word} in {', '.join(names)} "
                             f"({_share(count, size)})", dict(case.scalars), slots,
                             specials=True))
    return found


def _written(case, rng: np.random.Generator) -> list[Derived]:
    """NaNs, then infinities of either sign (alternating up the ladder), in every written
    float buffer; at both ends on every other rung, inside only on the others."""
    outputs = [s for s in case.slots if s.written and not s.views
               and s.values.dtype.kind == "f" and s.values.size]
    if not outputs:
        return []
    size = max(s.values.size for s in outputs)
    first, ends_first = int(rng.integers(2)), int(rng.integers(2))
    found = []
    for rung, count in enumerate(ladder(size, rng)):
        value, word = ((np.nan, "NaNs"), (np.inf, "infinities"))[(rung + first) % 2]
        ends = (rung + ends_first) % 2 == 0

        def change(fresh: np.ndarray, count: int = count, value: float = value,
                   ends: bool = ends) -> None:
            places = _places(fresh.size, count, ends, rng)
            fresh[places] = rng.choice([-1.0, 1.0], size=places.size) * value
        slots, names = _changed(case, lambda s: s.written, change)
        found.append(Derived(f"{case.label} with {word} in {', '.join(names)}, which it "
                             f"writes (and may read) ({_share(count, size)}"
                             f"{', both ends among them' if ends else ''})",
                             dict(case.scalars), slots, specials=True))
    return found


def _places(size: int, count: int, ends: bool, rng: np.random.Generator) -> np.ndarray:
    """``count`` element numbers of ``size``: the first and last among them (``ends``),
    or (where there is an inside) none of the two."""
    count = min(count, size)
    if ends or size < 3:
        inside = rng.choice(size, size=count, replace=False)
        return np.unique(np.concatenate([inside, [0, size - 1]]))
    return 1 + rng.choice(size - 2, size=min(count, size - 2), replace=False)


def _share(count: int, size: int) -> str:
    return f"{count} of {size} elements" if count > 1 else f"one of {size} elements"
