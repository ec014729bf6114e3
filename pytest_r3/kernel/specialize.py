"""Shape-specialised variants: ``r3.kernel(..., specialize=["n"])`` gives each bucket of sizes
its own tuned variant, as Triton's autotuner re-tunes per value of its ``key=``.

A bucket is computed from a launch's scalar arguments, the same way for a recording (its
stored scalars) and for a plain call (its arguments):

- ``specialize=["n"]`` or ``("m", "n")``: each named integer argument falls into the bucket of
  the next power of two at or above it (n=1000 and n=1024 are in bucket 1024, n=1025 in 2048;
  zero and negative values in bucket 0). The bucket's label in r3.lock is ``"n=1024"`` or
  ``"m=64,n=1024"``.
- ``specialize=lambda args: key``: ``args`` maps each scalar argument's name to its value; the
  returned key (a number, string, boolean or tuple of them) is the bucket, labelled by its
  JSON text.

A call in a bucket with no tuned variant runs the nearest tuned bucket's variant: nearest by
the sum over the key's numbers of their distance in log2 (ties go to the larger bucket);
keys that are not numbers have no nearest bucket and run the baseline.
"""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Callable, Mapping, Sequence

from ..errors import DeclarationError


def power_of_two_bucket(value: int) -> int:
    """The smallest power of two at or above ``value`` (0 for zero and negative values)."""
    value = int(value)
    return 1 << (value - 1).bit_length() if value > 0 else 0


class Specialization:
    """Which bucket a launch falls into, and the label r3.lock keeps it under."""

    def __init__(self, spec: object, where: str) -> None:
        self.function: Callable[[Mapping[str, object]], object] | None = None
        self.names: tuple[str, ...] = ()
        if callable(spec):
            self.function = spec
            name = getattr(spec, "__qualname__", type(spec).__name__)
            self.description = f"function {name}"
            return
        names = (spec,) if isinstance(spec, str) else spec
        if not isinstance(names, Sequence) or not names or not all(
                isinstance(n, str) and n.isidentifier() for n in names):
            raise DeclarationError(
                f"{where}: specialize= takes the names of integer scalar arguments "
                f"(specialize=['n'] or ('m', 'n')) or a function of the scalar arguments "
                f"returning a bucket key (specialize=lambda args: ...), got {spec!r}")
        if len(set(names)) != len(names):
            raise DeclarationError(f"{where}: specialize= names an argument twice: {spec!r}")
        self.names = tuple(names)
        self.description = ",".join(self.names)

    # -- checking against the signature ------------------------------------------------------
    def positions(self, signature, where: str) -> tuple[tuple[str, int], ...]:
        """(name, position) of the arguments the key is computed from: the named integer
        scalars, or every scalar for a function. Raises DeclarationError for a name that is
        not an integer scalar argument."""
        scalars = {p.name: (i, p.dtype) for i, p in enumerate(signature.params)
                   if not p.is_pointer}
        if self.function is not None:
            return tuple((name, i) for name, (i, _) in scalars.items())
        found = []
        for name in self.names:
            if name not in scalars or scalars[name][1][:1] not in ("i", "u"):
                integers = [n for n, (_, dtype) in scalars.items() if dtype[:1] in ("i", "u")]
                raise DeclarationError(
                    f"{where}: specialize= names {name!r}, which is not an integer scalar "
                    f"argument of {signature.entry}; its integer scalars are: "
                    f"{', '.join(integers) or 'none'}")
            found.append((name, scalars[name][0]))
        return tuple(found)

    # -- keys and labels -------------------------------------------------------------------
    def key(self, scalars: Mapping[str, object]) -> object:
        """The bucket key of a launch whose scalar arguments are ``scalars`` (by name):
        an int for one name, a tuple for several, the function's value otherwise."""
        if self.function is not None:
            return self.function(dict(scalars))
        if len(self.names) == 1:
            return power_of_two_bucket(scalars[self.names[0]])
        return tuple(power_of_two_bucket(scalars[name]) for name in self.names)

    def label(self, key: object) -> str:
        """The key as r3.lock names it: ``n=1024``, ``m=64,n=1024`` or the function's key
        as JSON. Raises DeclarationError for a function key that is not plain data."""
        if self.function is None:
            values = (key,) if len(self.names) == 1 else key
            return ",".join(f"{n}={v}" for n, v in zip(self.names, values, strict=True))
        if not _plain(key):
            raise DeclarationError(
                f"specialize= {self.description} returned {key!r}: a bucket key must be a "
                "number, string, boolean or a tuple of them")
        return json.dumps(key)

    def vector(self, label: str) -> tuple[float, ...] | None:
        """The numbers of a label, for the nearest-bucket rule; None when it has others."""
        if self.function is None:
            try:
                return tuple(float(part.split("=", 1)[1]) for part in label.split(","))
            except (IndexError, ValueError):
                return None
        try:
            value = json.loads(label)
        except ValueError:
            return None
        values = value if isinstance(value, list) else [value]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            return tuple(float(v) for v in values)
        return None

    def nearest(self, label: str, labels: Sequence[str]) -> str | None:
        """``label`` itself if tuned, else the nearest of ``labels`` (see the module's doc),
        or None."""
        if label in labels:
            return label
        wanted = self.vector(label)
        if wanted is None:
            return None
        best: tuple[float, float, str] | None = None
        for other in labels:
            vector = self.vector(other)
            if vector is None or len(vector) != len(wanted):
                continue
            distance = sum(abs(_log2(a) - _log2(b)) for a, b in zip(vector, wanted,
                                                                    strict=True))
            rank = (distance, -sum(vector), other)  # ties: the larger bucket
            if best is None or rank < best:
                best = rank
        return None if best is None else best[2]

    # -- the call path ---------------------------------------------------------------------
    def dispatcher(self, positions: tuple[tuple[str, int], ...], table: dict,
                   miss: Callable[[object], object],
                   unbucketed: Callable[..., object]) -> Callable[..., object]:
        """A launcher that finds the call's bucket from its arguments and runs the launcher
        ``table`` holds for it; ``miss(key)`` finds (and caches) one for a new bucket.
        Arguments that have no bucket (too few, not integers) go to ``unbucketed``, whose
        launcher says what is wrong with them. Kept to a few operations: it runs on every
        call."""
        if self.function is not None:
            function = self.function

            def by_function(*args):
                try:
                    scalars = {name: args[i] for name, i in positions}
                except IndexError:
                    return unbucketed(*args)
                key = function(scalars)
                launcher = table.get(key)
                if launcher is None:
                    launcher = miss(key)
                return launcher(*args)
            return by_function
        if len(positions) == 1:
            ((_, index),) = positions

            def by_one(*args):
                try:
                    value = int(args[index])
                except (IndexError, TypeError, ValueError):
                    return unbucketed(*args)
                key = 1 << (value - 1).bit_length() if value > 0 else 0
                launcher = table.get(key)
                if launcher is None:
                    launcher = miss(key)
                return launcher(*args)
            return by_one
        if len(positions) == 2:
            ((_, first), (_, second)) = positions

            def by_two(*args):
                try:
                    a, b = int(args[first]), int(args[second])
                except (IndexError, TypeError, ValueError):
                    return unbucketed(*args)
                key = (1 << (a - 1).bit_length() if a > 0 else 0,
                       1 << (b - 1).bit_length() if b > 0 else 0)
                launcher = table.get(key)
                if launcher is None:
                    launcher = miss(key)
                return launcher(*args)
            return by_two
        values = operator.itemgetter(*(i for _, i in positions))

        def by_several(*args):
            try:
                key = tuple([1 << (v - 1).bit_length() if v > 0 else 0
                             for v in map(int, values(args))])
            except (IndexError, TypeError, ValueError):
                return unbucketed(*args)
            launcher = table.get(key)
            if launcher is None:
                launcher = miss(key)
            return launcher(*args)
        return by_several


def _log2(value: float) -> float:
    return math.log2(max(abs(value), 1.0))


def _plain(key: object) -> bool:
    if isinstance(key, tuple):
        return all(isinstance(v, (int, float, str, bool)) for v in key)
    return isinstance(key, (int, float, str, bool))
