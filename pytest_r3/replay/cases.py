"""The input sets a candidate is judged on, built from recordings: the buffers as they were
passed (aliased parameters share one, partly overlapping ones one spanning both), perturbed
values, and nearby problem sizes. Inputs the recordings never hold are in ``derived``."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..model.bounds import bound_value
from ..record.store import Recording
from . import verify


@dataclass
class Slot:
    """One buffer of a launch and the parameters it was passed as (several if they aliased
    or overlapped). ``views``: parameters that start inside the buffer rather than at its
    start, as ``name: (element offset, shape)``; the others are the whole buffer."""

    params: list[str]
    written: bool
    values: np.ndarray
    views: dict[str, tuple[int, tuple[int, ...]]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return "/".join(self.params)

    def view_of(self, array: np.ndarray, name: str) -> np.ndarray:
        """What parameter ``name`` is passed of ``array`` (this slot's buffer, or its data)."""
        if name not in self.views:
            return array
        offset, shape = self.views[name]
        return array.reshape(-1)[offset: offset + math.prod(shape)].reshape(shape)

    def layout(self) -> dict:
        described: dict = {"params": self.params, "written": self.written}
        if self.views:
            described["views"] = {name: [offset, list(shape)]
                                  for name, (offset, shape) in self.views.items()}
        return described

    @staticmethod
    def from_layout(described: dict, values: np.ndarray) -> Slot:
        views = {str(name): (int(offset), tuple(int(n) for n in shape))
                 for name, (offset, shape) in (described.get("views") or {}).items()}
        for name, (offset, shape) in views.items():
            if offset < 0 or offset + math.prod(shape) > values.size:
                raise ValueError(f"view {name!r} lies outside its buffer")
        return Slot(list(described["params"]), bool(described["written"]), values, views)


@dataclass
class Derived:
    """An input set no recording holds (see derived and edges), before the judge runs the
    baseline on it."""

    label: str
    scalars: dict
    slots: list[Slot]
    in_place: tuple[str, str] | None = None  # (read-only input, written buffer) made one
    twin: Derived | None = None              # an in-place case's out-of-place twin
    origin: str = "derived"                  # "twin": learnt, compared, then dropped
    offset: int = 0          # in place: elements between the two parameters' starts
    specials: bool = False   # NaN or Inf put in: kept only where the baseline's outputs
                             # hold some (it propagates them)
    empty: bool = False      # negative sizes: kept only where the baseline writes nothing
    alone: str = ""          # verified in a batch of its own with the others of this
                             # name: a crash there names them


def slots_of(recording: Recording, params: list[dict]) -> list[Slot]:
    """The recording's buffers: one per group of parameters that were the same array, and
    one spanning each group that partly overlapped (when the recording kept the offsets)."""
    groups = [list(g) for g in getattr(recording, "aliases", None) or []]
    grouped = {name for group in groups for name in group}
    pointers = [p["name"] for p in params if p["is_pointer"]]
    groups += [[name] for name in pointers if name not in grouped]
    groups.sort(key=lambda g: pointers.index(g[0]))
    written = {p["name"] for p in params if p["written"]}
    slots = [Slot(group, bool(written.intersection(group)), recording.inputs[group[0]])
             for group in groups]
    offsets = getattr(recording, "overlap_offsets", None) or []
    for (first, second), offset in zip(recording.overlaps, offsets, strict=False):
        slots = _merged(slots, first, second, offset)
    return slots


def sharing(slots: list[Slot]) -> str:
    """How a launch's parameters shared buffers, for a case's label ("" when they did not)."""
    parts = [f"{' and '.join(s.params)} "
             + ("overlapping" if any(s.views[n][0] for n in s.views) else "the same buffer")
             for s in slots if len(s.params) > 1]
    return f", {', '.join(parts)} as recorded" if parts else ""


def _merged(slots: list[Slot], first: str, second: str, offset: int) -> list[Slot]:
    """``slots`` with the buffers of ``first`` and ``second`` (``second`` starting
    ``offset`` bytes after ``first``) made one, as the launch passed them; unchanged where
    the two cannot share one typed buffer (other dtypes, an offset between elements)."""
    a = next(s for s in slots if first in s.params)
    b = next(s for s in slots if second in s.params)
    itemsize = a.values.dtype.itemsize
    if a is b or a.values.dtype != b.values.dtype or offset % itemsize:
        return slots
    placed = {name: (a.views.get(name, (0, a.values.shape))[0], a.view_of(a.values, name))
              for name in a.params}
    start_b = offset // itemsize
    placed.update({name: (start_b + b.views.get(name, (0, b.values.shape))[0],
                          b.view_of(b.values, name)) for name in b.params})
    low = min(start for start, _ in placed.values())
    high = max(start + part.size for start, part in placed.values())
    values = np.empty(high - low, dtype=a.values.dtype)
    for start, part in placed.values():
        values[start - low: start - low + part.size] = part.reshape(-1)
    views = {name: (start - low, part.shape) for name, (start, part) in placed.items()}
    merged = Slot(a.params + b.params, a.written or b.written, values, views)
    return [merged if s is a else s for s in slots if s is not b]


def perturb(scalars: dict, slots: list[Slot], params: list[dict],
            rng: np.random.Generator) -> tuple[dict, list[Slot]]:
    """New values of the same shape and scale: float and integer data, float scalars."""
    fresh_scalars = verify.perturbed_scalars(params, scalars, rng)
    fresh_slots = [Slot(s.params, s.written, verify.perturbed(s.values, rng, integers=True),
                        s.views) for s in slots]
    return fresh_scalars, fresh_slots


def resized(slots: list[Slot], params: list[dict], scalars: dict) -> list[Slot]:
    """``slots`` for a case with other sizes: a C array parameter (``double C[ni][nj]``)
    takes the shape its bounds give with ``scalars``; its values are the recorded ones where
    the shapes overlap, the recorded ones repeated elsewhere."""
    integers = {name: int(value) for name, value in scalars.items()
                if isinstance(value, (int, np.integer)) and not isinstance(value, bool)}
    dims = {p["name"]: p.get("dims") for p in params if p.get("dims")}
    result = []
    for slot in slots:
        bounds = next((dims[name] for name in slot.params if name in dims), None)
        shape = None if bounds is None or len(bounds) != slot.values.ndim else \
            tuple(bound_value(b, integers) for b in bounds)
        if shape is None or None in shape or shape == slot.values.shape or min(shape) < 1 \
                or slot.views:
            result.append(slot)
            continue
        fresh = np.resize(slot.values, shape)
        overlap = tuple(slice(0, min(a, b)) for a, b in zip(shape, slot.values.shape))
        fresh[overlap] = slot.values[overlap]
        result.append(Slot(slot.params, slot.written, np.ascontiguousarray(fresh)))
    return result


def derived_sizes(scalars: dict, slots: list[Slot], params: list[dict]) -> list[dict]:
    """The scalars at nearby problem sizes (n-1, n-3, n+3 within the buffers)."""
    inputs = {slot.params[0]: slot.values for slot in slots}
    named = [p for p in params if not p["is_pointer"] or p["name"] in inputs]
    return verify.derived_sizes(named, scalars, inputs)
