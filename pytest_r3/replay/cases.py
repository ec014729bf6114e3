"""The input sets a candidate is judged on, built from recordings: the buffers as they were
passed (aliased parameters share one), perturbed values, and nearby problem sizes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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


def derived_sizes(scalars: dict, slots: list[Slot], params: list[dict]) -> list[dict]:
    """The scalars at nearby problem sizes (n-1, n-3, n+3 within the buffers)."""
    inputs = {slot.params[0]: slot.values for slot in slots}
    named = [p for p in params if not p["is_pointer"] or p["name"] in inputs]
    return verify.derived_sizes(named, scalars, inputs)
