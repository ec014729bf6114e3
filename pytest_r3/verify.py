"""Deciding whether a candidate's outputs are right: tolerances, poison, guards, fresh inputs.

A candidate is compared with what the baseline produced, buffer by buffer:
integers exactly, floats within a relative/absolute (or norm) tolerance, and NaN or Inf
only where the reference has them. Output buffers are filled with poison before each run
and surrounded by guard regions, so code that skips work or writes out of bounds shows.

A candidate is assumed to cheat, so nothing it could recognise is fixed: poison and guard
bytes are random, drawn from seeds (``poison_bytes``, ``guard_bytes``) so that a process
that never runs candidate code can regenerate them and judge what came back
(``check_guards``, ``write_mask``, ``compare_masked``). New problems derived from a
recording change float data, integer data (``perturbed_integers``), float scalars
(``perturbed_scalars``) and problem sizes (``derived_sizes``), so memorised answers,
hard-coded constants and missing remainder loops fail.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from .errors import DeclarationError

GUARD_BYTES = 4096
_GUARD_BYTE = 0xA5  # the old fixed guard byte; GuardedBuffer(guard_bytes=_GUARD_BYTE) still works
# fixed byte patterns, kept for callers that poison with a pattern; new code uses random
# poison from ``poison_bytes`` (a candidate can recognise a fixed pattern)
POISON_PATTERNS = (0xFF, 0x7B)

Seed = int | Sequence[int]  # anything np.random.default_rng accepts as a seed


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


# -- random poison and guard bytes ----------------------------------------------------------
#
# Poison and guards are random bytes from numpy's default generator seeded with ``seed``:
# ``np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)``. The same seed gives
# the same bytes in every process (and on every platform numpy supports), so the process
# that judges a run can regenerate exactly what the process that ran the kernel used.


def _random_bytes(rng: np.random.Generator, count: int) -> np.ndarray:
    return rng.integers(0, 256, count, dtype=np.uint8)


def _generator(rng: np.random.Generator | Seed | None) -> np.random.Generator:
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def poison_bytes(nbytes: int, seed: Seed) -> np.ndarray:
    """The random poison (``nbytes`` uint8 values) a buffer holds in a run with ``seed``."""
    return _random_bytes(np.random.default_rng(seed), int(nbytes))


def poison_array(like: np.ndarray, seed: Seed) -> np.ndarray:
    """``poison_bytes`` for a buffer shaped like ``like``, as an array of its dtype and shape:
    what the elements a kernel does not write still hold after a run poisoned with ``seed``."""
    return poison_bytes(like.nbytes, seed).view(like.dtype).reshape(like.shape)


def guard_length(dtype: np.dtype | str | type) -> int:
    """Bytes in each guard region: at least GUARD_BYTES, a whole number of elements."""
    itemsize = max(np.dtype(dtype).itemsize, 1)
    return -(-GUARD_BYTES // itemsize) * itemsize


def guard_bytes(guard_len: int, seed: Seed) -> tuple[np.ndarray, np.ndarray]:
    """The random bytes (before, after) of a buffer's two guards, each ``guard_len`` long.

    ``GuardedBuffer(like, rng=seed)`` (an int or sequence seed, not a Generator) uses exactly
    these, with ``guard_len = guard_length(like.dtype)``.
    """
    both = _random_bytes(np.random.default_rng(seed), 2 * int(guard_len))
    return both[:guard_len], both[guard_len:]


def _guard_part(value: object, guard_len: int, which: str) -> np.ndarray:
    if isinstance(value, (int, np.integer)):
        if not 0 <= int(value) <= 255:
            raise ValueError(f"guard byte {value!r} is not in 0..255")
        return np.full(guard_len, int(value), dtype=np.uint8)
    part = np.frombuffer(value, dtype=np.uint8) if isinstance(value, (bytes, bytearray)) \
        else np.asarray(value).reshape(-1).view(np.uint8)
    if part.size != guard_len:
        raise ValueError(f"the {which} guard has {part.size} byte(s); this buffer's guards "
                         f"have {guard_len}")
    return part


def _guard_pair(guard_len: int, rng, explicit) -> tuple[np.ndarray, np.ndarray]:
    if explicit is None:
        both = _random_bytes(_generator(rng), 2 * guard_len)
        before, after = both[:guard_len], both[guard_len:]
    elif isinstance(explicit, (int, np.integer)):
        before = after = _guard_part(explicit, guard_len, "")
    else:
        first, second = explicit
        before = _guard_part(first, guard_len, "leading")
        after = _guard_part(second, guard_len, "trailing")
    before, after = before.copy(), after.copy()
    before.flags.writeable = after.flags.writeable = False
    return before, after


def check_guards(raw: np.ndarray, guard_len: int, guard_before: np.ndarray | int,
                 guard_after: np.ndarray | int) -> str | None:
    """None if a guarded storage's guards still hold their bytes, else what was overwritten.

    ``raw`` is the whole storage as bytes, ``guard | data | guard`` (what
    ``GuardedBuffer.storage_bytes()`` returns, e.g. sent back by the process that ran the
    kernel); ``guard_before``/``guard_after`` are the guard bytes it was given (arrays of
    ``guard_len`` uint8, or one byte value each).
    """
    raw = np.ascontiguousarray(raw).reshape(-1).view(np.uint8)
    if raw.size < 2 * guard_len:
        return (f"came back with {raw.size} byte(s), fewer than its two guards' "
                f"{2 * guard_len}")
    before = raw[:guard_len] != _guard_part(guard_before, guard_len, "leading")
    after = raw[raw.size - guard_len:] != _guard_part(guard_after, guard_len, "trailing")
    if before.any():
        return f"wrote {guard_len - int(np.argmax(before))} byte(s) before the start of the buffer"
    if after.any():
        offset = int(np.flatnonzero(after)[-1]) + 1
        return f"wrote up to {offset} byte(s) past the end of the buffer"
    return None


def storage_data(raw: np.ndarray, guard_len: int, like: np.ndarray) -> np.ndarray:
    """The data part of a returned guarded storage, as an array of ``like``'s dtype and
    shape (a view of ``raw``)."""
    raw = np.ascontiguousarray(raw).reshape(-1).view(np.uint8)
    if raw.size != like.nbytes + 2 * guard_len:
        raise ValueError(f"a guarded storage of {raw.size} byte(s) cannot hold {like.nbytes} "
                         f"data byte(s) and two {guard_len}-byte guards")
    return raw[guard_len: guard_len + like.nbytes].view(like.dtype).reshape(like.shape)


class GuardedBuffer:
    """An array with random guard bytes before and after it, to catch out-of-bounds writes.

    The guard bytes are drawn for each buffer: from ``rng`` (a numpy Generator, or a seed:
    then they equal ``guard_bytes(guard_length(like.dtype), seed)``), or given as
    ``guard_bytes`` (one byte value, or a pair of ``guard_len``-byte arrays). With neither,
    they come from fresh OS entropy. A candidate therefore cannot tell guard memory from
    anything else, nor write back what it found there unnoticed, other than by chance.
    """

    def __init__(self, like: np.ndarray, rng: np.random.Generator | Seed | None = None,
                 guard_bytes: int | tuple | None = None) -> None:
        itemsize = like.dtype.itemsize
        guard = -(-GUARD_BYTES // itemsize)
        self._storage = np.empty(like.size + 2 * guard, dtype=like.dtype)
        self._guard = guard
        self.guard_len = guard * itemsize
        self.guard_before, self.guard_after = _guard_pair(self.guard_len, rng, guard_bytes)
        raw = self._storage.view(np.uint8)
        raw[: self.guard_len] = self.guard_before
        raw[self.guard_len + like.nbytes:] = self.guard_after
        self.array = self._storage[guard: guard + like.size].reshape(like.shape)

    def fill_from(self, values: np.ndarray) -> None:
        np.copyto(self.array, values)

    def poison(self, source: int | np.random.Generator | np.ndarray) -> None:
        """Overwrite every element: with one byte ``pattern`` (an int, as before), random
        bytes drawn from a Generator, or exactly the given bytes (``poison_bytes(...)``, or an
        array of this buffer's dtype and shape)."""
        data = self.array.reshape(-1).view(np.uint8)
        if isinstance(source, (int, np.integer)):
            data[...] = source
        elif isinstance(source, np.random.Generator):
            data[...] = _random_bytes(source, data.size)
        else:
            values = np.asarray(source)
            if values.shape == self.array.shape and values.dtype == self.array.dtype:
                values = np.ascontiguousarray(values).reshape(-1).view(np.uint8)
            elif values.dtype != np.uint8 or values.size != data.size:
                raise ValueError(f"poison of {values.dtype} {values.shape} does not fit a "
                                 f"buffer of {self.array.dtype} {self.array.shape}")
            data[...] = values.reshape(-1)

    def poison_from_seed(self, seed: Seed) -> np.ndarray:
        """Poison with ``poison_bytes(nbytes, seed)``; returns that poison as an array like
        ``self.array`` (what ``poison_array(self.array, seed)`` gives in another process)."""
        self.poison(poison_bytes(self.array.nbytes, seed))
        return self.array.copy()

    def storage_bytes(self) -> np.ndarray:
        """A copy of the whole storage, ``guard | data | guard``, as uint8: what a worker
        sends back so that another process can run ``check_guards`` and ``storage_data``."""
        return self._storage.view(np.uint8).copy()

    def guards_intact(self) -> str | None:
        return check_guards(self._storage.view(np.uint8), self.guard_len, self.guard_before,
                            self.guard_after)


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
    buffer. Deterministic. Elements a smaller problem leaves alone are the point of
    ``write_mask``/``compare_masked``; the caller runs the baseline on each case and drops
    those where it misbehaves (a scalar that only looked like a size).
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


# -- which elements the baseline writes -------------------------------------------------------


def _element_bytes(array: np.ndarray) -> np.ndarray:
    """Each element's bytes as one unsigned integer (or a row of bytes), for bitwise tests."""
    flat = np.ascontiguousarray(array).reshape(-1)
    itemsize = flat.dtype.itemsize
    if itemsize in (1, 2, 4, 8):
        return flat.view(f"u{itemsize}")
    return flat.view(np.uint8).reshape(flat.size, itemsize)


def same_bits(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise: do ``a`` and ``b`` hold exactly the same bytes (NaN payloads included)?

    ``b`` may also be raw bytes (uint8, ``a.nbytes`` of them), e.g. ``poison_bytes(...)``.
    """
    a = np.asarray(a)
    b = np.asarray(b)
    if b.dtype != a.dtype:
        if b.dtype == np.uint8 and b.size == a.nbytes:
            b = np.ascontiguousarray(b).reshape(-1).view(a.dtype)
        else:
            raise ValueError(f"cannot compare {a.dtype} {a.shape} with {b.dtype} {b.shape} "
                             "bit for bit")
    if b.size != a.size:
        raise ValueError(f"cannot compare {a.shape} with {b.shape} bit for bit")
    equal = _element_bytes(a) == _element_bytes(b)
    if equal.ndim == 2:
        equal = equal.all(axis=1)
    return equal.reshape(a.shape)


def _typed(values: np.ndarray, like: np.ndarray) -> np.ndarray:
    """``values`` as an array of ``like``'s dtype and shape (raw bytes are reinterpreted)."""
    values = np.asarray(values)
    if values.dtype == like.dtype and values.shape == like.shape:
        return values
    if values.dtype == np.uint8 and values.size == like.nbytes:
        return np.ascontiguousarray(values).reshape(-1).view(like.dtype).reshape(like.shape)
    raise ValueError(f"{values.dtype} {values.shape} does not fit a buffer of {like.dtype} "
                     f"{like.shape}")


@dataclass(frozen=True)
class WriteMask:
    """Which elements of one output-only buffer the baseline writes, from two poisoned runs.

    Every element is in exactly one of: ``written`` (same value in both runs),
    ``untouched`` (still each run's poison), ``undetermined`` (both poisons happen to
    coincide there and the baseline left or wrote that value: neither check applies) and
    ``inconsistent`` (the result depends on the poison: the baseline reads the buffer
    before writing it, or is not deterministic).
    """

    written: np.ndarray
    untouched: np.ndarray
    undetermined: np.ndarray
    inconsistent: np.ndarray

    @property
    def complete(self) -> bool:
        """Whether the baseline writes every element (then plain ``compare`` suffices)."""
        return bool(self.written.all())

    def problem(self, name: str) -> str | None:
        """None, or why this buffer cannot be treated as output-only."""
        if not self.inconsistent.any():
            return None
        count = int(self.inconsistent.sum())
        first = np.unravel_index(int(np.argmax(self.inconsistent)), self.inconsistent.shape) \
            if self.inconsistent.ndim else ()
        return (f"{name}: {count} of {self.inconsistent.size} element(s) depend on the "
                f"buffer's content before the launch (first at [{', '.join(map(str, first))}]):"
                " the baseline reads it, or is not deterministic; treat it as an input")


def write_mask(out_a: np.ndarray, poison_a: np.ndarray, out_b: np.ndarray,
               poison_b: np.ndarray) -> WriteMask:
    """Which elements the baseline writes, from its outputs under two different poisons.

    ``out_a`` is the buffer after a baseline run that started from ``poison_a`` (for
    example ``poison_array(like, seed_a)``), ``out_b`` likewise with ``poison_b``. All
    comparisons are bit for bit, so NaN poison and NaN results are handled exactly. See
    ``WriteMask`` for the four classes.
    """
    if out_a.shape != out_b.shape or out_a.dtype != out_b.dtype:
        raise ValueError(f"the two runs' outputs differ in kind: {out_a.dtype} {out_a.shape} "
                         f"and {out_b.dtype} {out_b.shape}")
    poison_a, poison_b = _typed(poison_a, out_a), _typed(poison_b, out_b)
    same = same_bits(out_a, out_b)
    kept_a = same_bits(out_a, poison_a)
    kept_b = same_bits(out_b, poison_b)
    coincide = same_bits(poison_a, poison_b)
    untouched = kept_a & kept_b & ~coincide
    undetermined = same & kept_a & coincide
    written = same & ~undetermined
    inconsistent = ~(written | untouched | undetermined)
    return WriteMask(written, untouched, undetermined, inconsistent)


def compare_masked(name: str, expected: np.ndarray, actual: np.ndarray,
                   written_mask: WriteMask | np.ndarray, poison_of_actual_run: np.ndarray,
                   tolerance: Tolerance) -> str | None:
    """Compare an output-only buffer of which the baseline writes only some elements.

    Elements in ``written_mask`` (a ``WriteMask``, or a bool array of the written elements)
    must match ``expected`` (the baseline's output; what it holds elsewhere is ignored)
    within ``tolerance``, as ``compare`` judges them; the norm mode covers written
    elements only. Elements the baseline leaves untouched must still hold
    ``poison_of_actual_run`` (the poison ``actual`` started from, as an array like
    ``actual`` or its raw bytes) bit for bit: anything else is a write outside the
    problem the baseline solves. With a bool array every element not written counts as
    untouched; a ``WriteMask``'s undetermined and inconsistent elements are not checked.
    Returns None, or a short explanation.
    """
    if expected.shape != actual.shape:
        return f"{name}: shape {actual.shape} differs from the expected {expected.shape}"
    if isinstance(written_mask, WriteMask):
        written, untouched = written_mask.written, written_mask.untouched
    else:
        written = np.asarray(written_mask, dtype=bool)
        untouched = ~written
    if written.shape != actual.shape:
        raise ValueError(f"{name}: a mask of shape {written.shape} for a buffer of shape "
                         f"{actual.shape}")
    kept = same_bits(actual, _typed(poison_of_actual_run, actual))
    if written.all():
        problem = compare(name, expected, actual, tolerance)
    else:
        zero = np.zeros((), dtype=expected.dtype)
        problem = compare(name, np.where(written, expected, zero),
                          np.where(written, actual, zero), tolerance)
    if problem:
        skipped = int((written & kept).sum())
        if skipped:
            problem += (f"; {skipped} element(s) the baseline writes still hold the poison "
                        "(never written)")
        return problem
    stray = untouched & ~kept
    if stray.any():
        count = int(stray.sum())
        first = np.unravel_index(int(np.argmax(stray)), stray.shape) if stray.ndim else ()
        index = ", ".join(map(str, first))
        return (f"{name}: wrote element [{index}] that the baseline leaves untouched "
                f"({count} such element(s); the baseline writes {int(written.sum())} of "
                f"{written.size} for this problem)")
    return None
