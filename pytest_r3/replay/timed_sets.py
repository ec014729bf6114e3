"""The input values timed launches work on: new for every timing, several per case.

Timing used to launch the recorded values again and again, onto the outputs the previous
launch wrote. A candidate could skip its work there and nowhere else: a product kept from
one launch to the next in stack memory far below its frame, keyed on a hash of the
inputs, or a test "does c already hold a @ b?" (O(n^2) against O(n^3)) was timed 2-4x
faster and was no faster, or several times slower, in production, where each call brings
new inputs. So each timed case is launched on ``SETS`` value sets in turn (fewer for very
large cases, two at least), drawn anew for every timing from a seed the judge draws
then, and a candidate's outputs on one set are compared with the baseline's on the same
values (see judge.check_timed). Both variants are timed on the same sets.

Every set changes each floating-point buffer the kernel reads (read-only inputs and
buffers updated in place) in ways that keep the work the same:

- a power of two, 1/2, 1 or 2, drawn per set and per buffer, multiplies its normal
  elements: exact (mantissas, signs, order and ratios are kept), unless it would turn
  one of them infinite or subnormal, in which case that buffer is not scaled in that set;
- then, by the set's kind (``KINDS``, taken in turn from a drawn start, so a timing has
  sets of two kinds at least): nothing more (``scaled``); the normal elements redrawn
  from the buffer's own normal values, with replacement, at the same places
  (``resampled``: positions, sign patterns, the order of magnitudes and any exact
  statistic of the recorded data no longer hold); or the signs of the normal elements
  shuffled among them, magnitudes in place (``signs``: as many negatives as recorded).
  Scaling and one-ulp flips alone kept every sign, so a kernel fast only when a's sign
  pattern matched the benchmark's was timed 6x faster and was 2-2.7x slower on any other
  data;
- the lowest mantissa bit of a random half of its normal elements is flipped: a change of
  one unit in the last place, which makes every set distinct (a kept result never
  matches).

Zeros, infinities, NaNs and subnormal values are left where they are: a kernel with a
slow path for one of them (subnormal arithmetic, an early exit on zeros or NaN, a sparse
pattern) meets it as often and in the same places as on the recorded values. Integer data
is never changed: sizes, indices and offsets must keep their values (a permuted parent
array or row pointer can send a kernel round a cycle for ever).

Output-only buffers (written, never read: ``outputs``) start each launch with contents
drawn per set (``OUTPUT_KINDS``, in turn from another drawn start): the recorded contents
(often a fresh, zeroed mapping: a large ``np.empty``), the baseline's own result on another
set (a buffer reused from an earlier call, as a loop or a ping-pong stencil hands it), or
finite non-zero values of the dtype (recycled heap memory). With the recorded contents
alone, a kernel fast only when its output arrives zeroed was timed 6x faster and was
1.9-2.9x slower in production (28x for a ping-pong stencil). They are put back before
every launch, so no launch starts holding its own inputs' answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

SETS = 8  # value sets per timed case: more than a small kept-result table holds
SCALES = (-1, 0, 1)  # powers of two a set's buffer is multiplied by
KINDS = ("scaled", "resampled", "signs")  # what else a set does to the float inputs
OUTPUT_KINDS = ("recorded", "earlier", "garbage")  # what output-only buffers start with


def seed(guard_seed: int, case_index: int) -> list[int]:
    """The value sets' seed for one case of one timing (the same for both layouts)."""
    return [int(guard_seed), int(case_index), 0x7173]


@dataclass
class Drawn:
    """A timing's value sets for one case (in slot order), and which of them wait for the
    baseline's result on set ``source`` in their output-only buffers (see ``hold``)."""

    sets: list[list[np.ndarray]]
    kinds: list[str]
    output_kinds: list[str]
    outputs: list[int] = field(default_factory=list)
    source: int = 0

    @property
    def earlier(self) -> list[int]:
        """The sets whose output-only buffers hold the baseline's result on ``source``."""
        return [k for k, kind in enumerate(self.output_kinds)
                if kind == "earlier" and self.outputs and k != self.source]

    def hold(self, results: dict[int, np.ndarray]) -> None:
        """Put ``results`` (the baseline's output-only buffers after a launch on set
        ``source``, by slot number) in the sets that wait for them."""
        for k in self.earlier:
            for number in self.outputs:
                self.sets[k][number] = results[number]


def draw(values: Sequence[np.ndarray], read: set[int], seed_of: list[int],
         count: int, outputs: Sequence[int] = ()) -> Drawn:
    """``count`` sets of the buffers ``values`` (in slot order): those numbered in
    ``read`` changed as the module says, the output-only ones numbered in ``outputs``
    given their set's starting contents (the baseline's result waits for ``hold``), the
    others as they are."""
    rng = np.random.default_rng(seed_of)
    start, output_start = (int(v) for v in rng.integers(0, 3, 2))
    kinds = [KINDS[(start + k) % len(KINDS)] for k in range(count)]
    output_kinds = [OUTPUT_KINDS[(output_start + k) % len(OUTPUT_KINDS)]
                    for k in range(count)]
    sets = []
    for kind, output_kind in zip(kinds, output_kinds, strict=True):
        made = []
        for number, array in enumerate(values):
            if number in read:
                made.append(_varied(array, rng, kind))
            elif number in outputs and output_kind == "garbage":
                made.append(garbage(array, rng))
            else:  # recorded contents (an earlier result is put in by hold)
                made.append(array)
        sets.append(made)
    # the set whose result the others hold: one that does not wait for it itself
    source = next((k for k, kind in enumerate(output_kinds) if kind != "earlier"), 0)
    return Drawn(sets, kinds, output_kinds, [n for n in outputs if values[n].size], source)


def garbage(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Finite, non-zero values of ``values``' dtype and shape (normal ones for floats), as
    a buffer recycled from the heap may hold; other dtypes as they are."""
    kind = values.dtype.kind
    if kind == "f":
        drawn = rng.standard_normal(values.shape) * 4.0 ** rng.integers(-4, 5, values.shape)
        made = drawn.astype(values.dtype)
        tiny = np.finfo(values.dtype).tiny
        return np.where(np.abs(made) >= tiny, made, values.dtype.type(1.0))
    if kind == "c":
        made = (rng.standard_normal(values.shape)
                + 1j * rng.standard_normal(values.shape)).astype(values.dtype)
        return np.where(made != 0, made, values.dtype.type(1.0))
    if kind in "iu":
        info = np.iinfo(values.dtype)
        made = rng.integers(info.min, info.max, values.shape, dtype=values.dtype,
                            endpoint=True)
        return np.where(made != 0, made, values.dtype.type(1))
    if kind == "b":
        return np.ones(values.shape, dtype=values.dtype)
    return values


def _varied(values: np.ndarray, rng: np.random.Generator, kind: str = "scaled"
            ) -> np.ndarray:
    """``values`` times 2, 1 or 1/2, changed as the set's ``kind`` says, with one ulp
    flipped in a random half of its normal elements; integer data unchanged."""
    if values.dtype.kind != "f" or not values.size:
        return values
    with np.errstate(all="ignore"):
        finite = np.isfinite(values)
        tiny = np.finfo(values.dtype).tiny
        normal = finite & (np.abs(values) >= tiny)
        exponent = int(rng.choice(SCALES))
        scaled = values * values.dtype.type(2.0 ** exponent)
        # normal values only (halving a subnormal one would round), and only where every
        # one stays finite and normal
        stays = np.isfinite(scaled) & (np.abs(scaled) >= tiny)
        varied = np.where(normal, scaled, values) if stays[normal].all() else values.copy()
    picked = varied[normal]
    if kind == "resampled" and picked.size:
        varied[normal] = picked[rng.integers(0, picked.size, picked.size)]
    elif kind == "signs" and picked.size:
        varied[normal] = np.where(rng.permutation(np.signbit(picked)),
                                  -np.abs(picked), np.abs(picked))
    unsigned = {2: np.uint16, 4: np.uint32, 8: np.uint64}.get(values.dtype.itemsize)
    if unsigned is not None:
        flip = normal & (rng.random(values.shape) < 0.5)
        bits = varied.view(unsigned)
        bits[flip] ^= unsigned(1)
    return varied
