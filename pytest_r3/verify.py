"""Deciding whether a candidate's outputs are right: tolerances, poison, guards, fresh inputs.

A candidate is compared with what the baseline produced, buffer by buffer:
integers exactly, floats within a relative/absolute (or norm) tolerance, and NaN or Inf
only where the reference has them. Output buffers are filled with poison before each run
and surrounded by guard regions, so code that skips work or writes out of bounds shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass

import numpy as np

from .errors import DeclarationError

GUARD_BYTES = 4096
_GUARD_BYTE = 0xA5
POISON_PATTERNS = (0xFF, 0x7B)  # two different byte patterns: NaN-ish, then a finite value


@dataclass(frozen=True)
class Tolerance:
    """How close a float output must be: elementwise ``rtol``/``atol``, or a relative norm."""

    rtol: float | None = None
    atol: float | None = None
    norm: float | None = None  # relative L2 error bound, replaces the elementwise check

    @staticmethod
    def default_for(dtype: np.dtype) -> Tolerance:
        if dtype.kind != "f":
            return Tolerance(0.0, 0.0)
        if dtype.itemsize <= 2:
            return Tolerance(1e-2, 1e-3)
        if dtype.itemsize == 4:
            return Tolerance(1e-5, 1e-6)
        return Tolerance(1e-10, 1e-12)

    def filled(self, dtype: np.dtype) -> Tolerance:
        default = Tolerance.default_for(dtype)
        return Tolerance(
            default.rtol if self.rtol is None else self.rtol,
            default.atol if self.atol is None else self.atol,
            self.norm,
        )

    def as_dict(self) -> dict[str, float | None]:
        return asdict(self)


def parse_tolerances(spec: Mapping[str, object] | None, param_names: tuple[str, ...],
                     where: str) -> dict[str, Tolerance]:
    """``{"rtol": .., "atol": .., "norm": .., "per_argument": {"c": {...}}}`` -> per-name."""
    spec = dict(spec or {})
    per_argument = spec.pop("per_argument", {}) or {}
    allowed = {"rtol", "atol", "norm"}
    for key in set(spec) - allowed:
        raise DeclarationError(f"{where}: unknown tolerance key {key!r}; use {sorted(allowed)} "
                               "or per_argument={name: {...}}")
    base = Tolerance(**spec)
    result = {name: base for name in param_names}
    for name, override in per_argument.items():
        if name not in param_names:
            raise DeclarationError(f"{where}: tolerance for unknown argument {name!r}; "
                                   f"arguments: {', '.join(param_names)}")
        unknown = set(override) - allowed
        if unknown:
            raise DeclarationError(f"{where}: unknown tolerance key(s) {sorted(unknown)} for "
                                   f"argument {name!r}")
        result[name] = Tolerance(**{**asdict(base), **override})
    return result


def compare(name: str, expected: np.ndarray, actual: np.ndarray,
            tolerance: Tolerance) -> str | None:
    """None if ``actual`` matches ``expected``, else a short explanation of the difference."""
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf is handled, not a warning
        return _compare(name, expected, actual, tolerance)


def _compare(name: str, expected: np.ndarray, actual: np.ndarray,
             tolerance: Tolerance) -> str | None:
    if expected.shape != actual.shape:
        return f"{name}: shape {actual.shape} differs from the expected {expected.shape}"
    if expected.dtype.kind != "f":
        wrong = expected != actual
        if not wrong.any():
            return None
        return _describe(name, expected, actual, wrong, "differs (exact match required)")
    tol = tolerance.filled(expected.dtype)
    exp64 = expected.astype(np.float64)
    act64 = actual.astype(np.float64)
    bad_special = ~np.isfinite(act64) & ~((np.isnan(exp64) & np.isnan(act64)) | (exp64 == act64))
    if bad_special.any():
        return _describe(name, expected, actual, bad_special,
                         "is NaN or Inf where the reference is not")
    finite = np.isfinite(exp64)
    if tol.norm is not None:
        # the norm covers finite elements only: NaN/Inf in the reference must be matched
        unmatched = ~finite & ~((np.isnan(exp64) & np.isnan(act64)) | (exp64 == act64))
        if unmatched.any():
            return _describe(name, expected, actual, unmatched,
                             "differs where the reference is NaN or Inf")
        reference = np.linalg.norm(exp64[finite])
        error = np.linalg.norm((act64 - exp64)[finite])
        if error <= tol.norm * max(reference, np.finfo(np.float64).tiny):
            return None
        return (f"{name}: relative L2 error {error / max(reference, 1e-300):.3g} exceeds "
                f"the bound {tol.norm:g}")
    wrong = finite & ~(np.abs(act64 - exp64) <= tol.atol + tol.rtol * np.abs(exp64))
    wrong |= ~finite & ~((np.isnan(exp64) & np.isnan(act64)) | (exp64 == act64))
    if not wrong.any():
        return None
    return _describe(name, expected, actual, wrong,
                     f"differs beyond rtol={tol.rtol:g}, atol={tol.atol:g}")


def _describe(name: str, expected: np.ndarray, actual: np.ndarray, wrong: np.ndarray,
              what: str) -> str:
    count = int(wrong.sum())
    first = np.unravel_index(int(np.argmax(wrong)), wrong.shape) if wrong.ndim else ()
    index = ", ".join(map(str, first))
    message = (f"{name}: {count} of {wrong.size} element(s) {what}; first at [{index}]: "
               f"expected {expected[first]!r}, got {actual[first]!r}")
    if expected.dtype.kind == "f":
        diff = np.abs(actual.astype(np.float64) - expected.astype(np.float64))[wrong]
        finite = diff[np.isfinite(diff)]
        if finite.size:
            message += f"; max abs error {finite.max():.3g}"
    return message


class GuardedBuffer:
    """An array with guard bytes before and after it, to catch out-of-bounds writes."""

    def __init__(self, like: np.ndarray) -> None:
        itemsize = like.dtype.itemsize
        guard = -(-GUARD_BYTES // itemsize)
        self._storage = np.empty(like.size + 2 * guard, dtype=like.dtype)
        self._guard = guard
        raw = self._storage.view(np.uint8)
        raw[: guard * itemsize] = _GUARD_BYTE
        raw[(guard + like.size) * itemsize:] = _GUARD_BYTE
        self.array = self._storage[guard: guard + like.size].reshape(like.shape)

    def fill_from(self, values: np.ndarray) -> None:
        np.copyto(self.array, values)

    def poison(self, pattern: int) -> None:
        self.array.view(np.uint8)[...] = pattern

    def guards_intact(self) -> str | None:
        itemsize = self._storage.dtype.itemsize
        raw = self._storage.view(np.uint8)
        before = raw[: self._guard * itemsize]
        after = raw[(self._guard + self.array.size) * itemsize:]
        if (before != _GUARD_BYTE).any():
            offset = self._guard * itemsize - int(np.argmax(before != _GUARD_BYTE))
            return f"wrote {offset} byte(s) before the start of the buffer"
        if (after != _GUARD_BYTE).any():
            offset = int(np.flatnonzero(after != _GUARD_BYTE)[-1]) + 1
            return f"wrote up to {offset} byte(s) past the end of the buffer"
        return None


def perturbed(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """New inputs of the same shape and scale, so memorised answers fail.

    Floats are scaled and shifted randomly; integers (often sizes or indices) are kept.
    """
    if values.dtype.kind != "f" or values.size == 0:
        return values.copy()
    data = values.astype(np.float64)
    limit = np.finfo(values.dtype).max / 4
    usable = np.isfinite(data) & (np.abs(data) < limit)  # leave NaN, Inf and garbage alone
    finite = data[usable]
    spread = float(np.std(finite)) if finite.size else 1.0
    if not np.isfinite(spread) or spread == 0:
        spread = float(np.abs(finite).mean()) if finite.size else 1.0
    spread = spread if np.isfinite(spread) and spread > 0 else 1.0
    noise = rng.normal(0, 0.1 * spread, size=data.shape)
    fresh = np.where(usable, data * rng.uniform(0.5, 1.5, size=data.shape) + noise, data)
    return np.clip(fresh, -limit, limit, where=usable, out=fresh).astype(values.dtype)
