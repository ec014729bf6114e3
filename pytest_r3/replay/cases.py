"""The input sets a candidate is judged on, built from recordings: the buffers as they were
passed (aliased parameters share one), perturbed values, and nearby problem sizes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model.bounds import bound_value
from ..record.store import Recording
from . import verify


@dataclass
class Slot:
    """One buffer of a launch and the parameters it was passed as (several if they aliased)."""

    params: list[str]
    written: bool
    values: np.ndarray

    @property
    def name(self) -> str:
        return "/".join(self.params)


def slots_of(recording: Recording, params: list[dict]) -> list[Slot]:
    """The recording's buffers, one per group of parameters that were the same array."""
    groups = [list(g) for g in getattr(recording, "aliases", None) or []]
    grouped = {name for group in groups for name in group}
    pointers = [p["name"] for p in params if p["is_pointer"]]
    groups += [[name] for name in pointers if name not in grouped]
    groups.sort(key=lambda g: pointers.index(g[0]))
    written = {p["name"] for p in params if p["written"]}
    return [Slot(group, bool(written.intersection(group)), recording.inputs[group[0]])
            for group in groups]


def perturb(scalars: dict, slots: list[Slot], params: list[dict],
            rng: np.random.Generator) -> tuple[dict, list[Slot]]:
    """New values of the same shape and scale: float and integer data, float scalars."""
    fresh_scalars = verify.perturbed_scalars(params, scalars, rng)
    fresh_slots = [Slot(s.params, s.written, verify.perturbed(s.values, rng, integers=True))
                   for s in slots]
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
        if shape is None or None in shape or shape == slot.values.shape or min(shape) < 1:
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
