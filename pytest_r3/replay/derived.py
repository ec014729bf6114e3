"""Input sets the recordings never hold, derived so that a verdict covers the kernel's
contract rather than its tests' habits.

Each rule answers one way a rewrite was accepted and then wrong in production:

- float scalars negated, and a float scalar recorded as 0 made nonzero (a rewrite that
  uses ``|a|``, or drops ``b * y`` because ``b`` was always 0);
- an integer scalar recorded as 0 or 1 set to 1 or 2, sizes halved so a stride stays
  inside the buffers (a loop that assumes a stride of 1);
- integer data drawn over its type's range, scaled so that a sum over the whole array
  stays defined (int arithmetic done in float is exact only below 2^24);
- small sizes (1, 2, 3, 5, 8, 17), each size argument also small alone beside the largest
  recorded values of the others (a rewrite wrong on every two-row grid wider than 17
  columns), one size above the largest recording and one between
  two recorded sizes, where the extent of every buffer is known as a function of the
  integer arguments: C array bounds, or a linear relation the recordings agree on (a
  rewrite that always processes a 16-element head, stops at the largest size it was
  shown, or is wrong only for 40 <= n <= 120 when the tests record n = 33 and n = 128);
- each read-only input and written buffer of the same shape passed as one buffer (in
  place), beside an out-of-place twin holding the same values: where the baseline gives the
  same result both ways, callers may call it in place and a candidate must too.

Every case is run on the baseline first; one it cannot run (a crash, out of bounds, not
deterministic) is dropped, so a rule that guesses wrong costs a case, never a verdict.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..model.bounds import bound_value
from . import edges, shared_inputs, specials, verify
from .cases import Derived, Slot

SMALL_SIZES = (1, 2, 3, 5, 8, 17)
ABOVE_MARGIN = 17        # the size above the recordings: at least this much above the largest
ABOVE_COST = 4           # ...and its buffers at most this many times the largest recording's
NEAR = 3                 # a size between recordings: more than this from every recorded one


@dataclass(frozen=True)
class Extent:
    """A buffer's shape as integer expressions of the arguments, one per axis: its C array
    bounds (``("ni", "nj")``), or relations inferred from the recordings (``("2 * n + 3",)``)."""

    dims: tuple[str, ...]

    def shape(self, integers: dict[str, int]) -> tuple[int, ...] | None:
        shape = tuple(bound_value(b, integers) for b in self.dims)
        return None if None in shape else shape  # type: ignore[return-value]

    @property
    def scalars(self) -> set[str]:
        return {word for bound in self.dims for word in re.findall(r"[A-Za-z_]\w*", bound)}


def plan(recorded: list, params: list[dict], rng: np.random.Generator,
         no_alias: bool = False, sizes_rng: np.random.Generator | None = None
         ) -> list[Derived]:
    """Derived cases from the oracle recordings ``recorded`` (objects with ``label``,
    ``scalars``, ``slots``). ``sizes_rng`` draws the sizes above and between the
    recordings and where edge cases put special values (the judge seeds it per server, so
    a rewrite cannot learn them); ``rng`` by default."""
    sizes_rng = rng if sizes_rng is None else sizes_rng
    if not recorded:
        return []
    by_size = sorted(recorded, key=lambda c: sum(s.values.nbytes for s in c.slots))
    extents = infer_extents(recorded, params)
    base = _base(by_size, params, extents)
    sizes = _size_scalars(base, params, extents)
    derived = _scalar_cases(base, params, rng, sizes)
    derived += _integer_range_cases(base, params, rng)
    derived += _small_sizes(base, params, extents, sizes)
    derived += _one_small(by_size[-1], base, params, extents, sizes)
    derived += _above(recorded, by_size[-1], params, extents, sizes_rng)
    derived += _between(recorded, params, extents, sizes_rng)
    if not no_alias:
        derived += _in_place(base, rng)
    derived += edges.plan(base, params, rng, sizes, no_alias, sizes_rng)
    if by_size[-1] is not base:  # a rewrite that drops them only above some size
        derived += specials.plan(by_size[-1], sizes_rng)
    return derived + shared_inputs.plan(base, rng)  # read-only: no_alias does not forbid it


def _base(by_size: list, params: list[dict], extents: dict[str, Extent]):
    """The recording the derived cases start from: the smallest whose sizes are all at
    least the largest of SMALL_SIZES (so every small size is below it, and an in-place
    result says something), else the largest."""
    for case in by_size:
        sizes = _size_scalars(case, params, extents)
        if all(s.values.size for s in case.slots) and \
                all(int(case.scalars[n]) >= SMALL_SIZES[-1] for n in sizes):
            return case
    return by_size[-1]


# -- scalars ----------------------------------------------------------------------------------

def _scalar_cases(case, params: list[dict], rng: np.random.Generator,
                  sizes: set[str]) -> list[Derived]:
    floats = [p for p in params if not p["is_pointer"] and p["name"] in case.scalars
              and np.dtype(p["dtype"]).kind == "f"]
    found: list[Derived] = []
    values = [abs(float(case.scalars[p["name"]])) for p in floats]
    scale = float(np.mean([v for v in values if 0 < v < np.inf] or [1.0]))
    negated = dict(case.scalars)
    for p in floats:
        value = float(case.scalars[p["name"]])
        if value != 0 and np.isfinite(value):
            negated[p["name"]] = _as(p, -verify.perturbed_scalar(value, p["dtype"], rng))
    if negated != case.scalars:
        found.append(Derived(f"{case.label} with its float scalars negated "
                             f"({_changes(case.scalars, negated)})", negated, case.slots))
    nonzero = dict(case.scalars)
    for p in floats:
        if float(case.scalars[p["name"]]) == 0:
            draw = scale * rng.uniform(0.5, 1.5) * (1 if rng.random() < 0.5 else -1)
            nonzero[p["name"]] = _as(p, draw)
    if nonzero != case.scalars:
        found.append(Derived(f"{case.label} with its float scalars recorded as zero made "
                             f"nonzero ({_changes(case.scalars, nonzero)})", nonzero,
                             case.slots))
    for p in params:
        name = p["name"]
        if p["is_pointer"] or name not in case.scalars or name in sizes or \
                np.dtype(p["dtype"]).kind not in "iu" or case.scalars[name] not in (0, 1):
            continue
        changed = dict(case.scalars, **{name: int(case.scalars[name]) + 1})
        for size in sizes:  # a stride of 2 over half the elements stays inside the buffers
            changed[size] = max(1, -(-int(case.scalars[size]) // 2))
        found.append(Derived(f"{case.label} with the integer scalar {name} recorded as "
                             f"{case.scalars[name]} changed ({_changes(case.scalars, changed)})",
                             changed, case.slots))
    return found


def _as(param: dict, value: float) -> float:
    return float(np.dtype(param["dtype"]).type(value))


def _changes(before: dict, after: dict) -> str:
    return ", ".join(f"{name}={value!r}" for name, value in after.items()
                     if before.get(name) != value)


# -- integer data -----------------------------------------------------------------------------

def _integer_range_cases(case, params: list[dict], rng: np.random.Generator) -> list[Derived]:
    """The read-only integer data of ``case`` drawn over its type's range, divided by its
    length (a sum over the whole array stays in range). Arrays that look like indices or
    offsets (sorted, or all within [0, the largest buffer's length]) keep their values."""
    largest = max((s.values.size for s in case.slots), default=0)
    slots, widened = [], []
    for slot in case.slots:
        values = slot.values
        if slot.written or slot.views or values.dtype.kind not in "iu" or values.size < 2 \
                or _index_like(values, largest):
            slots.append(slot)
            continue
        info = np.iinfo(values.dtype)
        top = int(info.max) // values.size
        low = 0 if values.dtype.kind == "u" else -top
        recorded = int(np.abs(values.astype(np.int64)).max()) if values.size else 0
        if top <= recorded:
            slots.append(slot)
            continue
        fresh = rng.integers(low, top, size=values.shape, endpoint=True, dtype=np.int64)
        slots.append(Slot(slot.params, slot.written, fresh.astype(values.dtype), slot.views))
        widened.append(f"{slot.name} in [{low}, {top}]")
    if not widened:
        return []
    return [Derived(f"{case.label} with its integer data over its type's range "
                    f"({', '.join(widened)})", dict(case.scalars), slots)]


def _index_like(values: np.ndarray, largest: int) -> bool:
    flat = values.reshape(-1).astype(np.int64)
    rising = bool((flat[1:] >= flat[:-1]).all())
    return rising or bool((flat[1:] <= flat[:-1]).all()) or \
        bool(((flat >= 0) & (flat <= largest)).all())


# -- sizes ------------------------------------------------------------------------------------

def infer_extents(recorded: list, params: list[dict]) -> dict[str, Extent]:
    """Each pointer parameter's extent where it is known: its C array bounds, or per axis
    a linear relation ``scale * n + offset`` with one integer argument that every
    recording agrees on (with recordings at one size only: the axis equal to an argument)."""
    integer_names = [p["name"] for p in params if not p["is_pointer"]
                     and np.dtype(p["dtype"]).kind in "iu"]
    extents: dict[str, Extent] = {}
    for param in params:
        if not param["is_pointer"]:
            continue
        name = param["name"]
        shapes = [_shape_of(c, name) for c in recorded]
        if any(s is None or len(s) != len(shapes[0]) for s in shapes) or not shapes[0]:
            continue
        candidates = [Extent(tuple(param.get("dims") or ()))]
        axes = [_axis(recorded, [s[k] for s in shapes], integer_names)
                for k in range(len(shapes[0]))]
        if None not in axes:
            candidates.append(Extent(tuple(axes)))
        for extent in candidates:
            if len(extent.dims) == len(shapes[0]) and all(
                    extent.shape(_integers(c)) == s for c, s in zip(recorded, shapes)):
                extents[name] = extent
                break
    return extents


def _axis(recorded: list, lengths: list[int], integer_names: list[str]) -> str | None:
    """An expression of one integer argument giving ``lengths`` in every recording: the
    argument itself where one fits, else the relation with the smallest scale and offset
    (two recordings fit a line through any argument that differs between them: matmul's
    ``a`` was read as ``5 * n - 64`` columns wide instead of ``k``, and a case with ``n``
    alone made small gave it 21 columns where the kernel reads 56)."""
    fits = []
    for scalar in integer_names:
        points = sorted({(int(c.scalars[scalar]), n) for c, n in zip(recorded, lengths)})
        if len({v for v, _ in points}) != len(points):
            continue  # one value of the argument, several lengths: not this one
        if len(points) == 1:
            scale, offset = (1, 0) if points[0][0] == points[0][1] else (0, 0)
        else:
            (v1, n1), (v2, n2) = points[0], points[-1]
            scale, rest = divmod(n2 - n1, v2 - v1)
            offset = n1 - scale * v1
            if rest or any(scale * v + offset != n for v, n in points):
                scale = 0
        if scale >= 1:
            fits.append((scale != 1 or offset != 0, abs(offset), scale, scalar, offset))
    if not fits:
        return None
    _, _, scale, scalar, offset = min(fits)
    text = scalar if scale == 1 else f"{scale} * {scalar}"
    return text if not offset else f"{text} {'+' if offset > 0 else '-'} {abs(offset)}"


def _shape_of(case, name: str) -> tuple[int, ...] | None:
    slot = next((s for s in case.slots if name in s.params), None)
    if slot is None:
        return None
    return slot.views[name][1] if name in slot.views else slot.values.shape


def _integers(case) -> dict[str, int]:
    return {n: int(v) for n, v in case.scalars.items()
            if isinstance(v, (int, np.integer)) and not isinstance(v, bool)}


def _size_scalars(case, params: list[dict], extents: dict[str, Extent]) -> set[str]:
    """The integer arguments that set sizes: those the extents name, else (no extent known)
    those between 2 and the largest buffer's length."""
    named = {s for extent in extents.values() for s in extent.scalars} & set(_integers(case))
    if named:
        return named
    largest = max((s.values.size for s in case.slots), default=0)
    return {p["name"] for p in params if not p["is_pointer"] and p["name"] in case.scalars
            and np.dtype(p["dtype"]).kind in "iu" and 1 < int(case.scalars[p["name"]]) <= largest}


def _small_sizes(case, params: list[dict], extents: dict[str, Extent],
                 sizes: set[str]) -> list[Derived]:
    """``case`` at each of SMALL_SIZES (no size larger than recorded), buffers cut to their
    extents where known so that a write past the end lands in the guards."""
    found: list[Derived] = []
    seen = [dict(case.scalars)]
    for small in SMALL_SIZES:
        scalars = dict(case.scalars)
        for name in sizes:
            scalars[name] = min(int(case.scalars[name]), small)
        if scalars in seen:
            continue
        seen.append(scalars)
        slots = [_refit(slot, extents, scalars, None) for slot in case.slots]
        found.append(Derived(f"{case.label} at a small size ({_changes(case.scalars, scalars)})",
                             scalars, slots))
    return found


def _one_small(largest, base, params: list[dict], extents: dict[str, Extent],
               sizes: set[str]) -> list[Derived]:
    """With two size arguments or more, each one alone at each of SMALL_SIZES while the
    others keep the largest recording's values (a two-row grid a thousand columns wide:
    small sizes set together never pair one small size with a large other). The buffers
    are cut to their extents from the largest recording (one small side: cheap), or are
    ``base``'s as they are where an extent is unknown."""
    pointers = [p["name"] for p in params if p["is_pointer"]]
    known = bool(pointers) and all(name in extents for name in pointers) and \
        not any(slot.views for slot in largest.slots) and \
        all(isinstance(largest.scalars.get(n), (int, np.integer)) for n in sizes)
    source = largest if known else base
    found: list[Derived] = []
    seen = [dict(source.scalars)]
    for name in sorted(sizes) if len(sizes) > 1 else ():
        for small in SMALL_SIZES:
            scalars = dict(source.scalars, **{name: min(int(source.scalars[name]), small)})
            if scalars in seen or all(int(scalars[n]) <= SMALL_SIZES[-1] for n in sizes):
                continue  # (all small together: _small_sizes has it)
            seen.append(scalars)
            slots = [_refit(slot, extents, scalars, None) for slot in source.slots]
            found.append(Derived(f"{source.label} with one size small beside large others "
                                 f"({_changes(source.scalars, scalars)})", scalars, slots))
    return found


def _above(recorded: list, largest, params: list[dict], extents: dict[str, Extent],
           rng: np.random.Generator) -> list[Derived]:
    """The largest recording at sizes above every recording, its data drawn from its own
    values, when every buffer's extent is known."""
    pointers = [p["name"] for p in params if p["is_pointer"]]
    if not pointers or any(name not in extents for name in pointers) or \
            any(slot.views or not slot.values.size for slot in largest.slots):
        return []  # (nothing to draw inputs from in an empty launch)
    scalars = dict(largest.scalars)
    for size in sorted({s for name in pointers for s in extents[name].scalars}):
        if size not in scalars:
            return []
        top = max(int(c.scalars[size]) for c in recorded)
        scalars[size] = top + int(rng.integers(ABOVE_MARGIN, ABOVE_MARGIN + 1 + max(top, 4) // 4))
    slots = [_refit(slot, extents, scalars, rng) for slot in largest.slots]
    recorded_bytes = sum(s.values.nbytes for s in largest.slots)
    if sum(s.values.nbytes for s in slots) > ABOVE_COST * max(recorded_bytes, 1):
        return []
    return [Derived(f"{largest.label} at a size above the largest recording "
                    f"({_changes(largest.scalars, scalars)})", scalars, slots)]


def _between(recorded: list, params: list[dict], extents: dict[str, Extent],
              rng: np.random.Generator) -> list[Derived]:
    """One case at sizes drawn between two recorded ones, more than NEAR from every
    recording (uniformly over those sizes, so a wide gap is likely drawn in), when every
    buffer's extent is known; its inputs are cut from the smallest recording that holds
    them."""
    pointers = [p["name"] for p in params if p["is_pointer"]]
    if not pointers or any(name not in extents for name in pointers):
        return []
    names = sorted({s for name in pointers for s in extents[name].scalars})
    usable = [c for c in recorded if all(isinstance(c.scalars.get(n), (int, np.integer))
                                         for n in names)
              and all(s.values.size and not s.views for s in c.slots)]
    drawn: dict[str, int] = {}
    for name in names:
        values = sorted({int(c.scalars[name]) for c in usable})
        gaps = [(low + NEAR + 1, high - NEAR - 1) for low, high in zip(values, values[1:])
                if high - low > 2 * NEAR + 1]
        if gaps:
            pick = int(rng.integers(sum(high - low + 1 for low, high in gaps)))
            for low, high in gaps:
                if pick <= high - low:
                    drawn[name] = low + pick
                    break
                pick -= high - low + 1
    holding = [c for c in usable if all(int(c.scalars[n]) >= v for n, v in drawn.items())]
    if not drawn or not holding:
        return []
    base = min(holding, key=lambda c: sum(s.values.nbytes for s in c.slots))
    scalars = dict(base.scalars, **drawn)
    slots = [_refit(slot, extents, scalars, rng) for slot in base.slots]
    return [Derived(f"{base.label} at a size between recordings "
                    f"({_changes(base.scalars, scalars)})", scalars, slots)]


def _refit(slot: Slot, extents: dict[str, Extent], scalars: dict,
           rng: np.random.Generator | None) -> Slot:
    """``slot`` with the shape its extent gives at ``scalars``: the recorded values where
    they reach, elsewhere drawn from them (``rng``); unchanged where no extent is known."""
    extent = next((extents[n] for n in slot.params if n in extents), None)
    if extent is None or slot.views:
        return slot
    shape = extent.shape(_integers_of(scalars))
    if shape is None or min(shape, default=1) < 1 or len(shape) != slot.values.ndim \
            or shape == slot.values.shape:
        return slot
    if rng is None:
        fresh = np.resize(slot.values, shape)
    else:
        drawn = rng.choice(slot.values.reshape(-1), size=int(np.prod(shape)))
        fresh = verify.perturbed(drawn.reshape(shape), rng)
    overlap = tuple(slice(0, min(a, b)) for a, b in zip(shape, slot.values.shape))
    fresh[overlap] = slot.values[overlap]
    return Slot(slot.params, slot.written, np.ascontiguousarray(fresh))


def _integers_of(scalars: dict) -> dict[str, int]:
    return {n: int(v) for n, v in scalars.items()
            if isinstance(v, (int, np.integer)) and not isinstance(v, bool)}


# -- in place ---------------------------------------------------------------------------------

def _in_place(case, rng: np.random.Generator) -> list[Derived]:
    """Each read-only input and written buffer of the same dtype and shape passed as one
    buffer, with its out-of-place twin (the same values in two buffers): the judge keeps
    the first only where the baseline gives the same result. The values are the input's,
    perturbed: on a recorded constant field a stencil gives the same result both ways."""
    found: list[Derived] = []
    single = [s for s in case.slots if len(s.params) == 1 and not s.views]
    for source in (s for s in single if not s.written):
        for target in (s for s in single if s.written):
            if source.values.dtype != target.values.dtype or \
                    source.values.shape != target.values.shape:
                continue
            pair = (source.params[0], target.params[0])
            values = verify.perturbed(source.values, rng, integers=True)
            shared = Slot([pair[1], pair[0]], True, values)
            together = [shared if s is source else s for s in case.slots if s is not target]
            apart = [Slot(s.params, s.written, values.copy()) if s is source else
                     Slot(s.params, s.written, values.copy()) if s is target else s
                     for s in case.slots]
            twin = Derived(f"{case.label} out of place, {pair[1]} holding {pair[0]}'s values",
                           dict(case.scalars), apart, origin="twin")
            found += [twin, Derived(f"{case.label} called in place ({pair[0]} and {pair[1]} "
                                    "the same buffer)", dict(case.scalars), together, pair,
                                    twin)]
    return found
