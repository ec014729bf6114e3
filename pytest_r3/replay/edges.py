"""Derived inputs at the edges of a kernel's contract, which tests seldom reach and rewrites
like to cut: special float values, sizes of zero and below, in-place calls at an offset.

Each rule answers a rewrite that was accepted and then wrong in production:

- a float scalar made NaN, then infinite (``if (alpha != alpha) return;`` is a "fast
  exit" that leaves ``y`` as it was where the original makes it NaN);
- float inputs holding zeros beside infinities, then NaNs, and NaNs or infinities in
  every float buffer the kernel writes and may also read, at densities drawn per server
  from a ladder (see specials: a rewrite that drops them only at some density passes
  nowhere);
- a float scalar made 0 or -0 beside infinities and NaNs in the read-only float inputs
  (``if (a == 0) return;`` is right wherever ``x`` is finite, but ``0 * inf`` is NaN);
- a float scalar made ``-0.0``, then subnormal, and float inputs holding negative zeros
  and subnormal values (``if (a == 0) return;``, or a loop that stops at the first
  denormal, is right on every value a test draws);
- the signed size arguments negated, and every size zero (``if (n < 0) n = -n;``
  computes where the original does nothing);
- every buffer one, two, three... elements into its allocation, at each misalignment
  below 16 bytes its dtype allows (an aligned vector store through a vector type,
  ``*(float4 *)y = ...``, faults on ``a[1:]`` of a numpy array; a peel to a 16-byte
  boundary that forgets ``y % 16 == 8`` faults on ``a[2:]`` or a row of a 2-D array);
- a read-only input and a written buffer passed as two views of one buffer, one starting
  1 or a few elements after the other (a loop walked backwards is wrong for the in-place
  shift ``f(n, a, buf + 1, buf)`` that a forward loop gets right).

Like every derived case, each one is run on the baseline first and dropped where the
baseline cannot run it (crash, out of bounds, not deterministic); the judge also drops an
in-place case where the baseline gives another result than out of place, a special
value case where the baseline's outputs hold no NaN or infinity (it does not propagate
them, so there is nothing to keep), and a negative size where the baseline writes
anything (it is then not an empty call; told on poisoned buffers, see judge.learn). A
rewrite must then do what the baseline does there.
"""

from __future__ import annotations

import re

import numpy as np

from . import layout, specials, verify
from .cases import Derived, Slot

SPECIALS = 2      # special values placed in each float input beside a zero scalar
TINY = 0.15       # share of a float input's elements made -0.0, and share made subnormal
OFFSET_MAX = 16   # the in-place offsets: 1, and one drawn up to this many elements


def plan(case, params: list[dict], rng: np.random.Generator, sizes: set[str],
         no_alias: bool = False, places: np.random.Generator | None = None
         ) -> list[Derived]:
    """The edge cases of ``case`` (a recording with ``label``, ``scalars``, ``slots``);
    ``sizes``: the integer arguments that set sizes; ``places`` draws where special values
    go in written buffers and beside a zero scalar (seeded per server: ``rng`` by default)."""
    places = rng if places is None else places
    found = _special_scalars(case, params) + specials.plan(case, places)
    found += _zero_scalar_specials(case, params, places)
    found += _tiny_scalars(case, params, rng) + _tiny_data(case, rng)
    found += _sizes_below_one(case, params, sizes) + _misaligned(case)
    if not no_alias:
        found += _shifted_in_place(case, rng)
    return found


def _floats(params: list[dict], scalars: dict) -> list[dict]:
    return [p for p in params if not p["is_pointer"] and p["name"] in scalars
            and np.dtype(p["dtype"]).kind == "f"]


def _special_scalars(case, params: list[dict]) -> list[Derived]:
    found = []
    for p in _floats(params, case.scalars):
        for value, word in ((float("nan"), "NaN"), (float("inf"), "infinite")):
            scalars = dict(case.scalars, **{p["name"]: float(np.dtype(p["dtype"]).type(value))})
            found.append(Derived(f"{case.label} with the float scalar {p['name']} {word}",
                              scalars, case.slots, specials=True))
    return found


def _zero_scalar_specials(case, params: list[dict], rng: np.random.Generator) -> list[Derived]:
    """Each float scalar made 0 or -0 (drawn), with infinities of either sign and NaNs in
    every read-only float input: ``if (a == 0) return;`` agrees with ``a * x + y`` wherever
    ``x`` is finite, and every other case that zeroes a scalar keeps ``x`` finite. Marked
    ``specials``: kept only where the baseline's outputs then hold NaN or infinity (where a
    skipped call would leave them finite)."""
    floats = _floats(params, case.scalars)
    if not floats:
        return []

    def change(fresh: np.ndarray) -> None:
        count = min(SPECIALS + 1, fresh.size)
        where = rng.choice(fresh.size, size=count, replace=False)
        fresh[where] = rng.permutation([np.nan, np.inf, -np.inf])[:count]
    slots, changed = _float_inputs_changed(case, change)
    if not changed:
        return []
    found = []
    for p in floats:
        zero = float(np.dtype(p["dtype"]).type(rng.choice([0.0, -0.0])))
        scalars = dict(case.scalars, **{p["name"]: zero})
        found.append(Derived(f"{case.label} with infinities and NaNs in {', '.join(changed)} "
                             f"and the float scalar {p['name']} at {zero}",
                             scalars, slots, specials=True))
    return found


def _float_inputs_changed(case, change) -> tuple[list[Slot], list[str]]:
    """``case``'s slots with every read-only float input (two elements at least) copied
    and changed in place by ``change(flat copy)``; and the names of those changed."""
    slots, changed = [], []
    for slot in case.slots:
        values = slot.values
        if slot.written or slot.views or values.dtype.kind != "f" or values.size < 2:
            slots.append(slot)
            continue
        fresh = values.copy().reshape(-1)
        change(fresh)
        slots.append(Slot(slot.params, slot.written, fresh.reshape(values.shape)))
        changed.append(slot.name)
    return slots, changed


def _subnormal(dtype: np.dtype, rng: np.random.Generator, size: int | None = None):
    """Subnormal magnitudes of ``dtype`` (strictly between 0 and its smallest normal)."""
    tiny = float(np.finfo(dtype).smallest_normal)
    drawn = np.asarray(rng.uniform(0.01, 0.99, size) * tiny).astype(dtype)
    return np.where(drawn == 0, np.finfo(dtype).smallest_subnormal, drawn)


def _tiny_scalars(case, params: list[dict], rng: np.random.Generator) -> list[Derived]:
    """Each float scalar made -0.0, then a subnormal of its recorded sign."""
    found = []
    for p in _floats(params, case.scalars):
        dtype = np.dtype(p["dtype"])
        sign = -1.0 if np.signbit(float(case.scalars[p["name"]])) else 1.0
        tiny = sign * float(_subnormal(dtype, rng))
        for value, word in ((-0.0, "made -0.0"), (tiny, f"made subnormal ({tiny:.3g})")):
            scalars = dict(case.scalars, **{p["name"]: float(dtype.type(value))})
            found.append(Derived(f"{case.label} with the float scalar {p['name']} {word}",
                                 scalars, case.slots))
    return found


def _tiny_data(case, rng: np.random.Generator) -> list[Derived]:
    """Negative zeros and subnormal values of either sign in every read-only float input
    (a share TINY of its elements each)."""
    def change(fresh: np.ndarray) -> None:
        draw = rng.random(fresh.size)
        zeros, tiny = draw < TINY, (draw >= TINY) & (draw < 2 * TINY)
        zeros[0], tiny[-1] = True, True  # both kinds, however short the input
        fresh[zeros] = -0.0
        signs = rng.choice([-1.0, 1.0], size=int(tiny.sum()))
        fresh[tiny] = signs * _subnormal(fresh.dtype, rng, int(tiny.sum()))
    slots, changed = _float_inputs_changed(case, change)
    if not changed:
        return []
    return [Derived(f"{case.label} with negative zeros and subnormal values in "
                    f"{', '.join(changed)}", dict(case.scalars), slots)]


def _sizes_below_one(case, params: list[dict], sizes: set[str]) -> list[Derived]:
    """Each signed size argument negated (the buffers as recorded), then every size 0;
    not the arguments of C array bounds (``float C[ni][nj]``), whose buffers must match
    them. Several size arguments are negated together: one negative among positive ones
    has the original itself index before its buffers (``out[(rows - 1) * cols + j]``).
    The negative case is marked ``empty``: kept only where the baseline writes nothing
    there (an empty call; anything else a negative size does is seldom defined)."""
    bounded = {word for p in params for bound in p.get("dims") or ()
               for word in re.findall(r"[A-Za-z_]\w*", str(bound))}
    sizes = {name for name in sizes if name not in bounded}
    signed = sorted(p["name"] for p in params if p["name"] in sizes
                    and np.dtype(p["dtype"]).kind == "i" and int(case.scalars[p["name"]]) > 0)
    found = []
    if signed:
        negative = dict(case.scalars, **{name: -int(case.scalars[name]) for name in signed})
        found.append(Derived(f"{case.label} at a negative size ({_listed(negative, signed)})",
                             negative, case.slots, empty=True))
    if sizes:
        zero = dict(case.scalars, **{name: 0 for name in sizes})
        found.append(Derived(f"{case.label} at size zero ({_listed(zero, sorted(sizes))})",
                             zero, case.slots))
    return found


def _listed(scalars: dict, names: list[str]) -> str:
    return ", ".join(f"{name}={scalars[name]}" for name in names)


def _misaligned(case) -> list[Derived]:
    """Every buffer passed as a view starting inside its own allocation, once per
    misalignment a numpy view can have against the allocator's 16 bytes: 4, 8 and 12
    bytes for float32 (``a[1:]``, ``a[2:]``, ``a[3:]``, or any row of a 2-D array whose
    width is 2 mod 4), 8 for float64. A rewrite that peels to a 16-byte boundary and
    forgets one of them faults there (an aligned store through a vector type) or writes
    before its buffer, and every other layout drawn is 16-byte aligned. A buffer whose
    element size does not divide a misalignment is shifted by the largest whole number of
    elements below it. The elements before each view repeat its first values."""
    if any(len(slot.params) != 1 or slot.views or not slot.values.size
           for slot in case.slots) or not case.slots:
        return []
    shifts = sorted({k * size for size in {slot.values.dtype.itemsize for slot in case.slots}
                     if layout.ALIGNMENT % size == 0 for k in range(1, layout.ALIGNMENT // size)})
    if not shifts:  # 16-byte elements: every view is aligned
        return []
    size = min(slot.values.dtype.itemsize for slot in case.slots)
    slices = [f"a[{shift // size}:]" for shift in shifts]
    together = (f"{case.label} with every buffer {_either(shifts)} bytes into its "
                f"allocation (misaligned, as numpy slices {_either(slices)} of {size}-byte "
                "elements are)")  # one batch of their own: a fault names them
    found = []
    for shift, sliced in zip(shifts, slices, strict=True):
        slots = []
        for slot in case.slots:
            itemsize = slot.values.dtype.itemsize
            elements = shift // itemsize if layout.ALIGNMENT % itemsize == 0 else 0
            flat = slot.values.reshape(-1)
            grown = np.concatenate([np.resize(flat, elements), flat])
            slots.append(Slot(slot.params, slot.written, grown,
                              {slot.params[0]: (elements, slot.values.shape)}))
        found.append(Derived(
            f"{case.label} with every buffer {shift} bytes into its allocation "
            f"(misaligned, as a numpy slice {sliced} of {size}-byte elements is)",
            dict(case.scalars), slots, alone=together))
    return found


def _either(items: list) -> str:
    words = [str(item) for item in items]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


def _shifted_in_place(case, rng: np.random.Generator) -> list[Derived]:
    """Each read-only input and written buffer of one dtype and length (one-dimensional)
    as two views of one buffer, the written one starting ``offset`` elements before the
    input, then after it, beside an out-of-place twin holding the same values."""
    found: list[Derived] = []
    single = [s for s in case.slots if len(s.params) == 1 and not s.views
              and s.values.ndim == 1 and s.values.size > 1]
    for source in (s for s in single if not s.written):
        for target in (s for s in single if s.written):
            if source.values.dtype != target.values.dtype or \
                    source.values.shape != target.values.shape:
                continue
            n = source.values.size
            offsets = sorted({1, int(rng.integers(2, max(3, min(OFFSET_MAX, n - 1) + 1)))})
            for offset in (o for o in offsets if o < n):
                for target_first in (True, False):
                    found += _shifted_pair(case, source, target, offset, target_first, rng)
    return found


def _shifted_pair(case, source: Slot, target: Slot, offset: int, target_first: bool,
                  rng: np.random.Generator) -> list[Derived]:
    n = source.values.size
    pair = (source.params[0], target.params[0])
    grown = np.concatenate([source.values, source.values[:offset]])
    values = verify.perturbed(grown, rng, integers=True)
    starts = {pair[1]: 0, pair[0]: offset} if target_first else {pair[0]: 0, pair[1]: offset}
    views = {name: (start, (n,)) for name, start in starts.items()}
    shared = Slot([pair[1], pair[0]], True, values, views)
    together = [shared if s is source else s for s in case.slots if s is not target]
    apart = [Slot(s.params, s.written, values[starts[s.params[0]]:][:n].copy())
             if s is source or s is target else s for s in case.slots]
    where = f"{pair[1]} = {pair[0]} - {offset}" if target_first else \
        f"{pair[1]} = {pair[0]} + {offset}"
    twin = Derived(f"{case.label} out of place, with the values of {where}",
                dict(case.scalars), apart, origin="twin")
    return [twin, Derived(f"{case.label} called in place at an offset ({where}, elements)",
                       dict(case.scalars), together, pair, twin, offset=offset)]
