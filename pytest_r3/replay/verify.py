"""Deciding whether a candidate's outputs are right, and deriving new problems to judge it on.

Comparison: a candidate is compared with what the baseline produced, buffer by buffer
(``compare``): integers exactly, floats within a relative/absolute (or norm) tolerance
(``Tolerance``, ``parse_tolerances``), and NaN or Inf only where the reference has them.

Fresh inputs: new problems derived from a recording change float data (``perturbed``),
integer data (``perturbed_integers``), float scalars (``perturbed_scalars``) and problem
sizes (``derived_sizes``), so memorised answers, hard-coded constants and missing remainder
loops fail.

Guard regions and poison around the buffers a candidate writes live in
``replay/buffers.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from ..errors import DeclarationError


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
    if expected.shape == actual.shape and expected.dtype == actual.dtype \
            and expected.tobytes() == actual.tobytes():
        return None  # the same bits: the usual case, and the cheapest to see
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


# -- fresh inputs -----------------------------------------------------------------------------


def perturbed(values: np.ndarray, rng: np.random.Generator, *,
              integers: bool = False) -> np.ndarray:
    """New inputs of the same shape and scale, so memorised answers fail.

    Floats are scaled and shifted randomly. Integer and bool arrays are kept unless
    ``integers`` is true: then ``perturbed_integers`` rebuilds them from their own values.
    """
    if integers and values.dtype.kind in "iub":
        return perturbed_integers(values, rng)
    if values.dtype.kind != "f" or values.size == 0:
        return values.copy()
    with np.errstate(over="ignore", invalid="ignore"):  # garbage (np.empty) is left alone
        return _perturbed_floats(values, rng)


def _perturbed_floats(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
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


def perturbed_integers(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """New integer (or bool) data of the same shape, built only from values the array holds.

    Integer arrays are often indices, offsets or codes, so no new value is invented: every
    element of the result is a value the recorded array already held, and an index that
    was in range for the recorded launch is still in range. Within that rule, the array's
    structure picks what changes:

    * fewer than two elements, or all equal: returned unchanged (nothing to rebuild from);
    * sorted (non-decreasing or non-increasing, three or more elements, e.g. CSR row
      pointers or segment offsets): the first and last elements are kept and the interior
      is redrawn from the array's values and sorted the same way, so it stays a valid
      offset array over the same range with different segment lengths;
    * all values distinct (a permutation, scatter targets): a random permutation of the
      elements, so they stay distinct and every value is still used once;
    * otherwise (data, histogram input, gather indices with repeats, bool masks): each
      element redrawn from the array's values with replacement, so sums, counts and
      histograms change as well as the order.

    Structure beyond that (two arrays that must agree, a permutation that must be sorted
    by key) can break: the caller runs the baseline on the result and drops the case if
    the baseline misbehaves (out of bounds, or different output on a second run).
    Deterministic for a given ``rng`` state; the result differs from ``values`` wherever
    that is possible.
    """
    flat = np.ascontiguousarray(values).reshape(-1)
    if flat.size < 2:
        return values.copy()
    as_int = flat.astype(np.int64) if flat.dtype.kind == "b" else flat
    if (as_int == as_int[0]).all():
        return values.copy()
    fresh = None
    if flat.dtype.kind != "b" and flat.size >= 3:
        rising = bool((flat[1:] >= flat[:-1]).all())  # comparisons: no overflow, unlike diff
        if rising or (flat[1:] <= flat[:-1]).all():
            interior = np.sort(rng.choice(flat, size=flat.size - 2, replace=True))
            fresh = np.concatenate([flat[:1], interior if rising else interior[::-1],
                                    flat[-1:]])
    if fresh is None:
        if np.unique(flat).size == flat.size:
            fresh = rng.permutation(flat)
        else:
            fresh = rng.choice(flat, size=flat.size, replace=True)
    if np.array_equal(fresh, flat):  # a tiny array can come out the same: move every element
        fresh = np.roll(flat, 1)
        if np.array_equal(fresh, flat):
            fresh = flat[::-1].copy()
    return fresh.astype(values.dtype, copy=False).reshape(values.shape)


def perturbed_scalar(value: int | float, dtype: str | np.dtype, rng: np.random.Generator
                     ) -> int | float:
    """A floating-point scalar (``alpha``, ``beta``...) scaled by uniform(0.5, 1.5).

    The result keeps the sign, is exactly representable in ``dtype`` (a float32 scalar stays
    a float32 value), is finite and nonzero, and differs from ``value``. 0, NaN and Inf
    are returned unchanged, and so is every integer or bool scalar (often a size: see
    ``derived_sizes`` for those).
    """
    kind = np.dtype(dtype)
    if kind.kind != "f":
        return value
    value = float(value)
    if value == 0 or not np.isfinite(value):
        return value
    info = np.finfo(kind)
    for _ in range(16):
        fresh = float(kind.type(np.clip(value * rng.uniform(0.5, 1.5), -float(info.max),
                                        float(info.max))))
        if fresh != value and fresh != 0 and np.isfinite(fresh):
            return fresh
    # rounding kept it (a tiny dtype, or a subnormal): one step toward zero, same sign
    return float(np.nextafter(kind.type(value), kind.type(0)))


def _field(param: Mapping | object, name: str):
    return param[name] if isinstance(param, Mapping) else getattr(param, name)


def perturbed_scalars(params: Sequence[Mapping | object], scalars: Mapping[str, int | float],
                      rng: np.random.Generator) -> dict[str, int | float]:
    """A copy of ``scalars`` with every floating-point scalar perturbed (``perturbed_scalar``).

    ``params`` are ``Recording.params`` dicts (or ``Param`` objects): name, dtype, is_pointer.
    Draws from ``rng`` once per float scalar, in parameter order.
    """
    fresh = dict(scalars)
    for param in params:
        name = _field(param, "name")
        if not _field(param, "is_pointer") and name in fresh:
            fresh[name] = perturbed_scalar(fresh[name], _field(param, "dtype"), rng)
    return fresh


SIZE_DELTAS = (-1, -3, 3)


def derived_sizes(params: Sequence[Mapping | object], scalars: Mapping[str, int | float],
                  inputs: Mapping[str, np.ndarray]) -> list[dict[str, int | float]]:
    """New problem sizes from a recording: full scalar assignments, at most three.

    A size-like scalar is an integer (not bool) scalar greater than 1 and no larger than
    the largest buffer's element count. All of them change together, once by each of -1,
    -3 and +3, so a rewrite that handles only multiples of 2, 4 or 8 (no remainder loop)
    meets a size it gets wrong:

    * -1 and -3 apply to each size-like scalar whose result is still >= 1 (the others keep
      their value); smaller sizes stay inside the recorded buffers;
    * +3 applies only if the product of all the new size-like values is at most the
      smallest buffer's element count, so a kernel indexing up to the product of its sizes
      (rows * cols) stays inside every buffer; otherwise there is no +3 case.

    Returns copies of ``scalars`` with the changes, in the order -1, -3, +3, without
    duplicates or cases that change nothing; [] if there is no size-like scalar or no
    buffer. Deterministic. The caller runs the baseline on each case and drops those
    where it misbehaves (a scalar that only looked like a size); which elements a smaller
    problem leaves alone the judge learns from two runs with different poison.
    """
    sizes = [int(np.asarray(inputs[_field(p, "name")]).size) for p in params
             if _field(p, "is_pointer") and _field(p, "name") in inputs]
    if not sizes:
        return []
    largest, smallest = max(sizes), min(sizes)
    size_like = []
    for param in params:
        name = _field(param, "name")
        if _field(param, "is_pointer") or name not in scalars:
            continue
        kind = np.dtype(_field(param, "dtype"))
        value = scalars[name]
        if kind.kind in "iu" and isinstance(value, (int, np.integer)) \
                and 1 < int(value) <= largest:
            size_like.append((name, int(value), int(np.iinfo(kind).max)))
    cases: list[dict[str, int | float]] = []
    for delta in SIZE_DELTAS:
        fresh = dict(scalars)
        changed = {}
        for name, value, top in size_like:
            if 1 <= value + delta <= top:
                changed[name] = value + delta
        if delta > 0:
            product = 1
            for name, value, _ in size_like:
                product *= changed.get(name, value)
            if len(changed) < len(size_like) or product > smallest:
                continue
        if not changed:
            continue
        fresh.update(changed)
        if fresh not in cases:
            cases.append(fresh)
    return cases
