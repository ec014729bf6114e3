"""Launching an emulated CUDA kernel (see emulation.py): its arguments copied into
guarded buffers, the launch described to the runtime, failures and out-of-bounds writes
turned into KernelFault."""

from __future__ import annotations

import ctypes
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from ...errors import DeclarationError, KernelFault, LaunchError
from ...model.arguments import GUARD_BYTES, converters
from ...model.launch import Launch, LaunchConfig
from ...model.signature import Signature
from ..base import Launcher

STACK_ENV = "PYTEST_R3_CUDA_EMULATION_STACK"
DEFAULT_STACK = 128 * 1024
_ERROR_SIZE = 1024
_CTYPES = {
    "float32": ctypes.c_float, "float64": ctypes.c_double, "bool": ctypes.c_bool,
    **{f"int{b}": getattr(ctypes, f"c_int{b}") for b in (8, 16, 32, 64)},
    **{f"uint{b}": getattr(ctypes, f"c_uint{b}") for b in (8, 16, 32, 64)},
}
# guard bytes around every copied argument; a write into them is an out-of-bounds write
_GUARD = np.random.default_rng(0x5233).integers(0, 256, 2 * GUARD_BYTES, dtype=np.uint8)


class LaunchStruct(ctypes.Structure):
    """``r3_launch_t`` of the runtime (keep the two in step)."""

    _fields_ = [
        ("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3),
        ("shared_bytes", ctypes.c_ulonglong), ("fibers", ctypes.c_int),
        ("stack_bytes", ctypes.c_int), ("kernel", ctypes.c_char_p),
        ("args", ctypes.POINTER(ctypes.c_void_p)), ("error", ctypes.c_char_p),
        ("error_size", ctypes.c_int), ("racecheck", ctypes.c_int),
        ("ranges", ctypes.POINTER(ctypes.c_ulonglong)),
        ("range_names", ctypes.POINTER(ctypes.c_char_p)), ("range_count", ctypes.c_int),
    ]


def _stack_bytes() -> int:
    raw = os.environ.get(STACK_ENV, "").strip()
    if not raw:
        return DEFAULT_STACK
    try:
        value = int(raw)
    except ValueError:
        raise LaunchError(f"{STACK_ENV}={raw!r} is not a number of bytes") from None
    return max(16 * 1024, min(value, 64 * 1024 * 1024)) // 4096 * 4096


class _Copies:
    """One launch's arguments: guarded host copies of the arrays, ctypes scalars."""

    def __init__(self, staging: dict[int, np.ndarray]) -> None:
        self.keep: list[object] = []
        self.copies: list[tuple[int, np.ndarray, np.ndarray, bool]] = []
        self.by_buffer: dict[tuple[int, int], np.ndarray] = {}
        # the launcher's buffers from earlier calls, reused: fresh memory costs page faults
        self.staging = staging

    def array(self, index: int, value: np.ndarray, written: bool) -> int:
        """Where the kernel's pointer to a guarded copy of ``value`` lies."""
        key = (value.__array_interface__["data"][0], value.nbytes)
        storage = self.by_buffer.get(key)
        if storage is None:
            storage = self.staging.get(index)
            if storage is None or storage.size != value.nbytes + 2 * GUARD_BYTES:
                storage = self.staging[index] = np.empty(value.nbytes + 2 * GUARD_BYTES,
                                                         np.uint8)
            storage[:GUARD_BYTES] = _GUARD[:GUARD_BYTES]
            storage[GUARD_BYTES + value.nbytes:] = _GUARD[GUARD_BYTES:]
            storage[GUARD_BYTES:GUARD_BYTES + value.nbytes] = value.reshape(-1).view(np.uint8)
            self.by_buffer[key] = storage
        self.copies.append((index, value, storage, written))
        box = ctypes.c_void_p(storage.ctypes.data + GUARD_BYTES)
        self.keep.append(box)
        return ctypes.addressof(box)

    def scalar(self, value: object, dtype: str) -> int:
        """Where the value lies (the kernel's arguments are passed by address)."""
        box = _CTYPES[dtype](value)
        self.keep.append(box)
        return ctypes.addressof(box)

    def overrun(self) -> tuple[int, str] | None:
        """(argument index, what happened) for the first argument whose guards changed."""
        for index, value, storage, _ in self.copies:
            before = storage[:GUARD_BYTES] != _GUARD[:GUARD_BYTES]
            after = storage[GUARD_BYTES + value.nbytes:] != _GUARD[GUARD_BYTES:]
            if before.any():
                return index, (f"wrote {GUARD_BYTES - int(np.argmax(before))} byte(s) before "
                               "its start")
            if after.any():
                last = len(after) - int(np.argmax(after[::-1]))
                return index, f"wrote up to {last} byte(s) past its end"
        return None

    def copy_back(self) -> None:
        for _, value, storage, written in self.copies:
            if written and value.nbytes:
                value.reshape(-1).view(np.uint8)[:] = \
                    storage[GUARD_BYTES:GUARD_BYTES + value.nbytes]


class EmulatedLauncher(Launcher):
    """A kernel variant compiled for the host: calling it runs the whole grid, then returns."""

    emulated = True

    def __init__(self, engine, run, release, signature: Signature, launch: LaunchConfig,
                 tunables: Mapping[str, object], backend,
                 kernel_name: str, fibers: bool, optimised_ir: str | Callable[[], str],
                 shared_ranges: list[tuple[int, int, str]] | None = None) -> None:
        self.engine = engine  # keeps the code alive
        self._run = run
        self._release = release
        self.signature = signature
        self.launch_config = launch
        self.tunables = dict(tunables)
        self.limits = backend.launch_limits
        self.language = backend.vocabulary.vendor  # "CUDA" or "HIP", for its messages
        self.kernel_name = kernel_name
        self.fibers = fibers
        self._optimised_ir = optimised_ir  # made when asked for, if loaded from the cache
        self.diagnostics = {"emulation": "fibers" if fibers else "loop"}
        # racecheck: the kernel's __shared__ arrays (address, bytes) and their names
        self.racecheck = shared_ranges is not None
        ranges = shared_ranges or []
        self._ranges = (ctypes.c_ulonglong * max(2 * len(ranges), 1))(
            *[number for address, size, _ in ranges for number in (address, size)])
        self._range_names = (ctypes.c_char_p * max(len(ranges), 1))(
            *[name.encode() for _, _, name in ranges])
        self._range_count = len(ranges)
        unsupported = [p.describe() for p in signature.params
                       if not p.is_pointer and p.dtype not in _CTYPES]
        if unsupported:
            raise DeclarationError(f"kernel {kernel_name!r}: scalar parameter(s) "
                                   f"{', '.join(unsupported)} cannot be passed to a "
                                   f"{self.language} kernel here; pass them through an array")
        self._converters = converters(kernel_name, signature, arrays_by_object=True)
        self._lock = threading.Lock()  # the runtime's state is the module's: one launch at once
        self._staging: dict[int, np.ndarray] = {}

    @property
    def optimised_ir(self) -> str:
        """The optimised host IR (made again on first use for code loaded from the cache)."""
        if callable(self._optimised_ir):
            self._optimised_ir = self._optimised_ir()
        return self._optimised_ir

    def configure(self, args: Sequence[object]) -> Launch:
        named = dict(zip(self.signature.names, args))
        return self.launch_config.resolve(named, self.tunables, self.limits, self.kernel_name)

    def _bind(self, args: Sequence[object]) -> tuple[_Copies, ctypes.Array]:
        if len(args) != len(self._converters):
            raise LaunchError(f"kernel {self.kernel_name!r} takes {len(self._converters)} "
                              f"argument(s) ({self.signature.describe()}), got {len(args)}")
        copies = _Copies(self._staging)
        pointers = (ctypes.c_void_p * max(len(args), 1))()
        for index, (param, convert, value) in enumerate(
                zip(self.signature.params, self._converters, args)):
            if param.is_pointer and not isinstance(value, np.ndarray) and (
                    hasattr(value, "__cuda_array_interface__") or hasattr(value, "gpudata")):
                raise LaunchError(
                    f"kernel {self.kernel_name!r} argument {index + 1} ({param.describe()}): "
                    f"{self.language} runs in emulation on this machine, which takes numpy "
                    "arrays, not device arrays")
            converted = convert(value)
            pointers[index] = copies.array(index, converted, param.written) \
                if param.is_pointer else copies.scalar(converted, param.dtype)
        return copies, pointers

    def __call__(self, *args: object) -> None:
        with self._lock:  # one launch at once: the staging buffers and the runtime's state
            return self._call(args)

    def _call(self, args: Sequence[object]) -> None:
        copies, pointers = self._bind(args)
        launch = self.configure(args)
        if not launch.threads:
            return None
        error = ctypes.create_string_buffer(_ERROR_SIZE)
        spec = LaunchStruct(
            (ctypes.c_uint * 3)(*launch.grid), (ctypes.c_uint * 3)(*launch.block),
            launch.shared, int(self.fibers), _stack_bytes(), self.kernel_name.encode(),
            ctypes.cast(pointers, ctypes.POINTER(ctypes.c_void_p)),
            ctypes.cast(error, ctypes.c_char_p), _ERROR_SIZE, int(self.racecheck),
            self._ranges, self._range_names, self._range_count)
        failed = self._run(ctypes.byref(spec))
        shape = f"grid {launch.grid}, block {launch.block}"
        if failed:
            raise KernelFault(f"{error.value.decode(errors='replace')} ({shape}, emulated on "
                              "the CPU)")
        overrun = copies.overrun()
        if overrun is not None:
            index, what = overrun
            param = self.signature.params[index]
            raise KernelFault(
                f"kernel {self.kernel_name!r} ({shape}, emulated on the CPU) wrote out of "
                f"bounds: argument {index + 1} ({param.describe()}) {what}. Check the "
                "kernel's bounds tests against the sizes and the launch grid.")
        copies.copy_back()
        return None

    def __del__(self) -> None:
        """Unmap the fiber stacks before the code that owns them goes (a replay worker
        loads and drops many variants)."""
        release = getattr(self, "_release", None)
        if release is not None:
            release()
            self._release = None

    def time(self, args: Sequence[object], repeat: int) -> list[float]:
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            self(*args)
            times.append(time.perf_counter() - started)
        return times
