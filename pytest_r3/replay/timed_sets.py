"""The input values timed launches work on: new for every timing, several per case.

Timing used to launch the recorded values again and again, onto the outputs the previous
launch wrote. A candidate could skip its work there and nowhere else: a product kept from
one launch to the next in stack memory far below its frame, keyed on a hash of the
inputs, or a test "does c already hold a @ b?" (O(n^2) against O(n^3)) was timed 2-4x
faster and was no faster, or several times slower, in production, where each call brings
new inputs. So each timed case is launched on ``SETS`` value sets in turn (fewer for very
large cases, two at least), drawn anew for every timing from a seed the judge draws
then, and a candidate's outputs on one set are compared with the baseline's on the same
values (see judge.check_timed).

Each set changes every floating-point buffer the kernel reads (read-only inputs and
buffers updated in place) in two ways that keep the work the same:

- a power of two, 1/2, 1 or 2, drawn per set and per buffer, multiplies its normal
  elements: exact (mantissas, signs, order and ratios are kept), unless it would turn
  one of them infinite or subnormal, in which case that buffer is not scaled in that set;
- the lowest mantissa bit of a random half of its normal elements is flipped: a change of
  one unit in the last place, which makes every set distinct (a kept result never
  matches) and moves no value across a threshold a kernel could test, short of one
  placed at that exact ulp.

Zeros, infinities, NaNs and subnormal values are left as they are: a kernel with a slow
path for one of them (subnormal arithmetic, an early exit on zeros or NaN) meets it as
often as on the recorded values, and a stencil's or an early exit's work, which follows
the values' magnitudes and signs, changes by at most the factor of two. Integer data is
never changed: sizes, indices and offsets must keep their values. Output-only buffers are
put back to their recorded contents before every launch, so none starts holding the
previous launch's answer for its inputs (production's caller rarely hands a kernel the
answer it is about to compute; where it does, nothing is lost but the skipped work).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

SETS = 8  # value sets per timed case: more than a small kept-result table holds
SCALES = (-1, 0, 1)  # powers of two a set's buffer is multiplied by


def seed(guard_seed: int, case_index: int) -> list[int]:
    """The value sets' seed for one case of one timing (the same for both layouts)."""
    return [int(guard_seed), int(case_index), 0x7173]


def draw(values: Sequence[np.ndarray], read: set[int], seed_of: list[int],
         count: int) -> list[list[np.ndarray]]:
    """``count`` sets of the buffers ``values`` (in slot order): those numbered in
    ``read`` changed as the module says, the others as they are."""
    rng = np.random.default_rng(seed_of)
    return [[_varied(array, rng) if number in read else array
             for number, array in enumerate(values)] for _ in range(count)]


def _varied(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``values`` times 2, 1 or 1/2, with one ulp flipped in a random half of its normal
    elements; integer data unchanged."""
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
    unsigned = {2: np.uint16, 4: np.uint32, 8: np.uint64}.get(values.dtype.itemsize)
    if unsigned is not None:
        flip = normal & (rng.random(values.shape) < 0.5)
        bits = varied.view(unsigned)
        bits[flip] ^= unsigned(1)
    return varied
