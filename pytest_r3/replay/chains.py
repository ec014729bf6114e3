"""Kept-output chains: launches run one after another on the same buffers, the read-only
inputs changed in between, so that each launch meets the outputs the one before it left.

A rewrite may read its output before writing it and return early when it already looks
computed for the inputs (a stateless cache: every other check refills the outputs, and the
timed runs would reward it). A chain shows it a stale output:

- from a recording, its read-only inputs changed in a random half of their elements, then
  in the other half; and, from the recording again, in one random element: a check that
  samples the output (or the inputs) misses one of them;
- from a recording, one read-only input with two of its elements swapped, once at distance
  1 (neighbours within a row) and once at the distance of a recorded dimension (within a
  column): an output that holds *almost* the right answer, the product of the same values
  in another order, keeps every invariant that ignores order (row sums, column sums, a
  checksum), so a cheap "is it already computed" test passes there and is wrong. On the
  smallest and the largest recording, and one drawn among the others (see swapping).

The judge runs each chain once per verification (half of them, drawn, with flush-to-zero
set), and again in the production-layout pass (half of them, drawn, on buffers as numpy
lays them out): a rewrite that skips work only in one mode or only next to an allocator's
header meets a stale output there too.
"""

from __future__ import annotations

import numpy as np

from . import cases as planning
from .verify import perturbed

SWAP_TRIES = 16  # places drawn for a swap before giving up (all candidates held equal values)


def steps(case, make, rng: np.random.Generator, swaps: bool = True) -> list:
    """The chains from ``case`` (a planned recording: ``label``, ``scalars``, ``slots``),
    each of its steps made by ``make(label, scalars, slots, after)``: a judge's Case;
    ``swaps``: the swapped-element chains too (see swapping)."""
    changing = [n for n, slot in enumerate(case.slots)
                if not slot.written and slot.values.size > 1]
    if not changing or not any(slot.written for slot in case.slots):
        return []
    return _halves(case, make, rng, changing) + (
        _swaps(case, make, rng, changing) if swaps else [])


def swapping(planned: list, draw: int) -> set[int]:
    """The ``id`` of the recordings that get swapped-element chains: the smallest and the
    largest, and one more drawn by ``draw`` (per server) among the others: two launches
    per input and distance each, so not on every recording of a kernel with many."""
    by_size = sorted(planned, key=lambda c: sum(s.values.nbytes for s in c.slots))
    chosen = by_size[:1] + by_size[-1:]
    middle = by_size[1:-1]
    if middle:
        chosen.append(middle[draw % len(middle)])
    return {id(case) for case in chosen}


def _again(case, words: str) -> str:
    return f"{case.label} run again on the outputs it left, its read-only inputs {words}"


def _halves(case, make, rng: np.random.Generator, changing: list[int]) -> list:
    """A random half, then the other half, then (from ``case``) one random element."""
    halves, single = {}, {}
    for number in changing:
        shape = case.slots[number].values.shape
        half = rng.random(shape) < 0.5
        inside, outside = rng.choice(half.size, 2, replace=False)
        half.flat[inside], half.flat[outside] = True, False  # both halves hold an element
        halves[number] = half
        single[number] = np.zeros(shape, dtype=bool)
        single[number].flat[rng.integers(half.size)] = True

    def changed(slots: list, where: dict) -> list:
        return [planning.Slot(slot.params, slot.written, np.where(
                    where[number], perturbed(slot.values, rng, integers=True), slot.values)
                    if number in where else slot.values, slot.views)
                for number, slot in enumerate(slots)]

    made: list = []
    slots = case.slots
    for part, which in ((True, "one random half"), (False, "the other half")):
        slots = changed(slots, {n: half == part for n, half in halves.items()})
        made.append(make(_again(case, f"changed in {which}"), dict(case.scalars), slots,
                         [case, *made]))
    made.append(make(_again(case, "changed in one random element"), dict(case.scalars),
                     changed(case.slots, single), [case]))
    return made


def swap_distances(values: np.ndarray, scalars: dict) -> list[tuple[int, str]]:
    """The distances (in elements) of the two swaps of one input, with their words: 1, and
    the length of a row (a 2-D input's last dimension, else the first integer argument
    between 2 and the size: a flat buffer the kernel walks as rows of that many)."""
    size = values.size
    row = values.shape[-1] if values.ndim > 1 and 1 < values.shape[-1] < size else next(
        (int(v) for v in scalars.values() if isinstance(v, (int, np.integer))
         and not isinstance(v, bool) and 1 < int(v) < size), 0)
    found = [(1, "neighbours within a row" if row else "neighbours")]
    if row:
        found.append((row, f"{row} apart, within a column"))
    return found


def swapped(values: np.ndarray, distance: int, row: int, rng: np.random.Generator
            ) -> np.ndarray | None:
    """``values`` with two unequal elements ``distance`` apart swapped (at distance 1 both in
    one row of ``row`` elements, when ``row``); None where no such pair was found."""
    flat = values.reshape(-1)
    for _ in range(SWAP_TRIES):
        first = int(rng.integers(flat.size - distance))
        if distance == 1 and row and first % row == row - 1:
            continue  # the pair would straddle two rows
        second = first + distance
        if flat[first].tobytes() == flat[second].tobytes():
            continue
        fresh = flat.copy()
        fresh[first], fresh[second] = flat[second], flat[first]
        return fresh.reshape(values.shape)
    return None


def _swaps(case, make, rng: np.random.Generator, changing: list[int]) -> list:
    """From ``case``, each read-only input alone with two elements swapped, at each
    distance of :func:`swap_distances`: the earlier output holds the same values' result
    in another order."""
    made = []
    for number in changing:
        slot = case.slots[number]
        distances = swap_distances(slot.values, case.scalars)
        row = next((d for d, _ in distances if d > 1), 0)
        for distance, words in distances:
            values = swapped(slot.values, distance, row, rng)
            if values is None:
                continue
            slots = [planning.Slot(s.params, s.written, values, s.views) if n == number
                     else s for n, s in enumerate(case.slots)]
            made.append(make(_again(case, f"the same but two elements of {slot.name} "
                                    f"swapped ({words})"), dict(case.scalars), slots, [case]))
    return made
