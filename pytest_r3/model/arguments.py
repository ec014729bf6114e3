"""Checking a call's arguments against a kernel signature and converting them for C.

The checks run on every launch, so each parameter gets a small prebuilt converter: the hot
path is a loop over closures, with clear errors built only when something is wrong.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence

import numpy as np

from ..errors import LaunchError
from .bounds import bound_value
from .signature import Param, Signature

Converter = Callable[[object], object]

# Bytes of guard zone the replay puts before and after every buffer it passes a kernel (a
# GPU backend copies them to the device along with the buffer, so overruns show).
GUARD_BYTES = 4096


def _array_converter(kernel: str, index: int, param: Param, by_object: bool) -> Converter:
    """Checks an array argument; passes the array itself (``by_object``) or its address.

    Passing the object lets a JIT-compiled thunk read the data pointer from the array
    struct, which is several times cheaper than asking numpy for the address.
    """
    dtype = np.dtype(param.dtype)
    written = param.written
    rank = len(param.dims)
    components = param.components

    def convert(value: object) -> object:
        if ((
            type(value) is np.ndarray
            and value.dtype == dtype
            and value.flags.c_contiguous
            and (not written or value.flags.writeable)
        ) or _usable_subclass(value, dtype, written)) and (not rank or value.ndim == rank) \
                and (components == 1 or value.size % components == 0) \
                or components > 1 and _packed_records(value, dtype, components, written):
            return value if by_object else value.__array_interface__["data"][0]
        raise LaunchError(_array_problem(kernel, index, param, dtype, value))

    return convert


def _packed_records(value: object, dtype: np.dtype, components: int, written: bool) -> bool:
    """A structured array whose records are ``components`` fields of ``dtype`` and nothing
    else: the same bytes as the C struct (``np.dtype([("x", "f4"), ("y", "f4")])`` for
    ``struct { float x, y; } *``)."""
    kind = getattr(value, "dtype", None)
    return (
        isinstance(value, np.ndarray) and kind.names is not None
        and len(kind.names) == components and kind.itemsize == components * dtype.itemsize
        and all(kind.fields[name][0] == dtype for name in kind.names)
        and value.flags.c_contiguous and (not written or value.flags.writeable)
    )


def _usable_subclass(value: object, dtype: np.dtype, written: bool) -> bool:
    """An ndarray subclass (np.memmap...) shares the array struct, so it is launched as is."""
    return (
        isinstance(value, np.ndarray)
        and value.dtype == dtype
        and value.flags.c_contiguous
        and (not written or value.flags.writeable)
    )


def _array_problem(kernel: str, index: int, param: Param, dtype: np.dtype, value: object) -> str:
    head = f"kernel {kernel!r} argument {index + 1} ({param.describe()})"
    if not isinstance(value, np.ndarray):
        return (
            f"{head}: expected a numpy array of {dtype}, got {type(value).__name__}; "
            f"pass np.asarray(value, dtype=np.{dtype})"
        )
    if value.dtype != dtype:
        return (
            f"{head}: expected dtype {dtype}, got {value.dtype}; convert with "
            f"arr.astype(np.{dtype})"
        )
    if not value.flags.c_contiguous:
        return (
            f"{head}: the array is not C-contiguous (strides {value.strides}); pass "
            "np.ascontiguousarray(arr)"
        )
    if param.dims and value.ndim != len(param.dims):
        return (f"{head}: expected a {len(param.dims)}-D array, got shape {value.shape}; "
                f"pass an array of shape ({', '.join(d or '?' for d in param.dims)})")
    if value.size % param.components:
        return (f"{head}: each element is {param.components} {dtype} values, but the array "
                f"has {value.size}, not a multiple of {param.components}")
    return f"{head}: the kernel writes this array but it is read-only; pass a writeable copy"


def _int_converter(kernel: str, index: int, param: Param) -> Converter:
    if param.dtype == "bool":
        low, high = 0, 1
    else:
        info = np.iinfo(param.dtype)
        low, high = int(info.min), int(info.max)

    def convert(value: object) -> int:
        try:
            number = operator.index(value)  # type: ignore[arg-type]
        except TypeError:
            raise LaunchError(
                f"kernel {kernel!r} argument {index + 1} ({param.describe()}): expected an "
                f"integer, got {type(value).__name__} {value!r}"
            ) from None
        if not low <= number <= high:
            raise LaunchError(
                f"kernel {kernel!r} argument {index + 1} ({param.describe()}): {number} does "
                f"not fit in {param.dtype} [{low}, {high}]"
            )
        return number

    return convert


def _float_converter(kernel: str, index: int, param: Param) -> Converter:
    def convert(value: object) -> float:
        if isinstance(value, (np.ndarray, np.complexfloating)) or not isinstance(
            value, (int, float, np.number)
        ):
            raise LaunchError(
                f"kernel {kernel!r} argument {index + 1} ({param.describe()}): expected a "
                f"number, got {type(value).__name__}"
            )
        return float(value)

    return convert


def converters(kernel: str, signature: Signature, arrays_by_object: bool) -> list[Converter]:
    result = []
    for index, param in enumerate(signature.params):
        if param.is_pointer:
            result.append(_array_converter(kernel, index, param, arrays_by_object))
        elif np.dtype(param.dtype).kind in "iub":
            result.append(_int_converter(kernel, index, param))
        else:
            result.append(_float_converter(kernel, index, param))
    return result


def shape_check(kernel: str, signature: Signature) -> Callable[[Sequence[object]], None] | None:
    """Checks the shapes of C array arguments against the bounds their parameters declare
    (``double C[ni][nj]`` called with ni=3, nj=4 takes a (3, 4) array), or None when no
    bound can be checked."""
    integers = [(i, p.name) for i, p in enumerate(signature.params)
                if not p.is_pointer and np.dtype(p.dtype).kind in "iu"]
    arrays = [(i, p) for i, p in enumerate(signature.params) if p.dims and any(p.dims)]
    if not arrays:
        return None

    def check(args: Sequence[object]) -> None:
        values = {name: int(args[i]) for i, name in integers}  # type: ignore[call-overload]
        for index, param in arrays:
            actual = np.shape(args[index])
            expected = tuple(bound_value(d, values) for d in param.dims)
            if any(e is not None and e != a for e, a in zip(expected, actual, strict=True)):
                given = ", ".join(f"{n}={v}" for n, v in values.items())
                wanted = ", ".join("?" if e is None else str(e) for e in expected)
                raise LaunchError(
                    f"kernel {kernel!r} argument {index + 1} ({param.describe()}): shape "
                    f"{actual} does not match the declared bounds, which give ({wanted}) "
                    f"with {given}")

    return check


class ArgumentBinder:
    """Turns ``kernel(*args)`` into C-ready values, or raises a LaunchError naming the problem."""

    def __init__(self, kernel: str, signature: Signature, arrays_by_object: bool = False) -> None:
        self.kernel = kernel
        self.signature = signature
        self._converters = converters(kernel, signature, arrays_by_object)
        self._count = len(self._converters)
        self._shapes = shape_check(kernel, signature)

    def __call__(self, args: Sequence[object]) -> list[object]:
        if len(args) != self._count:
            raise LaunchError(
                f"kernel {self.kernel!r} takes {self._count} argument(s) "
                f"({self.signature.describe()}), got {len(args)}"
            )
        converted = [convert(value) for convert, value in zip(self._converters, args)]
        if self._shapes is not None:
            self._shapes(args)
        return converted
