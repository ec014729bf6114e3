"""Running PTX on the GPU: the runtime chooser, device arrays, argument packing and launches.

Two runtimes reach the CUDA driver: ``cuda-bindings`` (NVIDIA's ``cuda.bindings.driver``,
binary wheels, no toolkit needed; the default) and ``pycuda``. Each is a small
:class:`Driver` (``runtime_bindings``, ``runtime_pycuda``); everything else (the
argument checks and copies, launch configuration, timing with events, error translation) is
here, shared, so both behave the same. ``PYTEST_R3_CUDA_RUNTIME`` picks one; unset, the first
importable of cuda-bindings and pycuda. Imported only when a CUDA kernel runs, so CPU-only
users import neither.

Arguments may be numpy arrays (copied to the device before the launch and, if the kernel
writes them, back after it) or device arrays (anything with ``__cuda_array_interface__``:
CuPy, PyTorch, Numba, pycuda GPUArrays, :class:`DeviceArray`; passed as pointers, no copies).
A call returns when the kernel has finished, so a fault is raised by the call that caused it.

The kernel runs in the current CUDA context of the calling thread; if there is none, in the
device's primary context (the one the CUDA runtime, CuPy and PyTorch share), made current
on first use. ``PYTEST_R3_CUDA_DEVICE`` picks the device (default 0).
"""

from __future__ import annotations

import abc
import importlib
import os
import struct
import threading
from collections.abc import Mapping, Sequence

import numpy as np

from ...errors import (
    BackendError,
    CompileError,
    DeclarationError,
    KernelFault,
    LaunchError,
    MissingExtraError,
)
from ...model.arguments import GUARD_BYTES, converters, shape_check
from ...model.launch import Launch, LaunchConfig, LaunchLimits
from ...model.signature import Param, Signature
from ..base import Launcher
from .gpu_timing import WARMUP_LAUNCHES, Clocks, DeviceFacts, Nvml

DEVICE_ENV = "PYTEST_R3_CUDA_DEVICE"
RUNTIME_ENV = "PYTEST_R3_CUDA_RUNTIME"
# runtime name -> (module of its Driver, the pip extra that installs it)
RUNTIMES = {
    "cuda-bindings": ("pytest_r3.backends.cuda.runtime_bindings", "cuda"),
    "pycuda": ("pytest_r3.backends.cuda.runtime_pycuda", "pycuda"),
}
NO_GPU_HINT = "CUDA kernels need a GPU (or the emulation mode, see docs/cuda.md)"
DEFAULT_SHARED_LIMIT = 48 * 1024  # more dynamic shared memory must be asked for explicitly
# struct codes of the scalar parameter dtypes; "P" is a device pointer
FORMAT = {"bool": "?", "int8": "b", "uint8": "B", "int16": "h", "uint16": "H", "int32": "i",
          "uint32": "I", "int64": "q", "uint64": "Q", "float16": "e", "float32": "f",
          "float64": "d"}
# driver messages after which the context is unusable (sticky errors)
_FAULTS = ("illegal memory access", "illegal address", "misaligned address", "launch failed",
           "unspecified launch failure", "illegal instruction", "hardware stack error",
           "device-side assert", "exception", "trap", "program counter",
           "address space")


class DriverError(Exception):
    """A CUDA driver call failed; the message holds the call, the code's name and text."""


class Driver(abc.ABC):
    """What a runtime provides: one device and context, memory, modules, launches, events.

    Pointers are plain ints; ``module``, ``function`` and ``event`` are the runtime's own
    handles. Every method raises :class:`DriverError` when the driver refuses.
    """

    name: str = ""
    device_name: str = ""
    arch: str = ""              # "sm_90"
    multiprocessors: int = 0

    @abc.abstractmethod
    def ensure_current(self) -> None:
        """Make the runtime's context current on this thread if no context is."""

    @abc.abstractmethod
    def load_module(self, ptx: str | bytes):
        """A module from PTX text, or from a cubin's bytes (nvcc's, for the vendor
        baseline)."""

    @abc.abstractmethod
    def get_function(self, module, symbol: str): ...

    @abc.abstractmethod
    def function_attribute(self, function, name: str) -> int:
        """``name``: "max_threads" or "registers"."""

    @abc.abstractmethod
    def set_dynamic_shared(self, function, nbytes: int) -> None: ...

    @abc.abstractmethod
    def alloc(self, nbytes: int) -> int: ...

    @abc.abstractmethod
    def free(self, pointer: int) -> None: ...

    @abc.abstractmethod
    def copy_to_device(self, pointer: int, host: np.ndarray) -> None: ...

    @abc.abstractmethod
    def copy_to_host(self, host: np.ndarray, pointer: int) -> None: ...

    @abc.abstractmethod
    def copy_on_device(self, target: int, source: int, nbytes: int) -> None: ...

    @abc.abstractmethod
    def launch(self, function, launch: Launch, layout: str, values: Sequence[object]) -> None:
        """Launch ``function`` with ``values`` laid out as the struct format ``layout``."""

    @abc.abstractmethod
    def synchronize(self) -> None: ...

    @abc.abstractmethod
    def new_event(self): ...

    @abc.abstractmethod
    def record(self, event) -> None: ...

    @abc.abstractmethod
    def wait(self, event) -> None: ...

    @abc.abstractmethod
    def elapsed(self, start, end) -> float:
        """Seconds between two recorded events."""

    @abc.abstractmethod
    def device_attribute(self, name: str) -> int:
        """``name``: "l2_cache_size" (bytes), "memory_clock_rate" (kHz) or
        "global_memory_bus_width" (bits)."""

    @abc.abstractmethod
    def pci_bus_id(self) -> str:
        """The device's PCI bus id (``0000:41:00.0``), which NVML finds it by."""

    @abc.abstractmethod
    def memset(self, pointer: int, nbytes: int) -> None:
        """Write zeros over ``nbytes`` at ``pointer`` on the launch stream (no wait)."""


# -- choosing a runtime ------------------------------------------------------------------------
def selected_name() -> str:
    """The runtime ``$PYTEST_R3_CUDA_RUNTIME`` names, else the first importable one."""
    name = os.environ.get(RUNTIME_ENV, "").strip().lower()
    if name:
        if name not in RUNTIMES:
            raise BackendError(f"{RUNTIME_ENV}={name!r} is not a CUDA runtime; use one of "
                               f"{', '.join(RUNTIMES)} (or leave it unset)")
        return name
    for candidate, (module_name, _) in RUNTIMES.items():
        if importlib.import_module(module_name).importable():
            return candidate
    return next(iter(RUNTIMES))  # none importable: the default names its extra


_lock = threading.Lock()
_runtimes: dict[str, Runtime] = {}
_failures: dict[str, Exception] = {}  # a missing package or GPU stays missing: asked once


def runtime(name: str | None = None) -> Runtime:
    """The process's runtime called ``name`` (default: :func:`selected_name`), started once.
    MissingExtraError when its package is missing, BackendError without a driver or GPU."""
    name = name or selected_name()
    if name not in RUNTIMES:
        raise BackendError(f"no CUDA runtime named {name!r}; use one of {', '.join(RUNTIMES)}")
    with _lock:
        if name in _failures:
            raise _failures[name].with_traceback(None)
        if name not in _runtimes:
            try:
                _runtimes[name] = _start(name)
            except (MissingExtraError, BackendError) as exc:
                _failures[name] = exc
                raise
        return _runtimes[name]


def _start(name: str) -> Runtime:
    module_name, extra = RUNTIMES[name]
    module = importlib.import_module(module_name)
    if not module.importable():
        raise MissingExtraError(
            f"running CUDA kernels through {name} needs the {module.PACKAGE} package, which "
            f'is not importable. Install it with `pip install "pytest-r3[{extra}]"` or choose '
            f"another runtime with {RUNTIME_ENV}. Compiling to PTX works without it.")
    return Runtime(module.start(_device_index()))


def unavailable_reason(name: str | None = None) -> str | None:
    """Why CUDA kernels cannot run in this process (no runtime package, driver or GPU),
    else None: the one place tests decide to skip GPU runs."""
    try:
        runtime(name)
    except (MissingExtraError, BackendError) as exc:
        return str(exc)
    return None


def no_gpu_error(what: str) -> BackendError:
    """The one-line error for a machine where the driver cannot start."""
    return BackendError(f"no usable CUDA GPU: {what}; {NO_GPU_HINT}")


def _device_index() -> int:
    text = os.environ.get(DEVICE_ENV, "0").strip() or "0"
    if not text.isdigit():
        raise BackendError(f"{DEVICE_ENV}={text!r} is not a GPU index (0, 1, ...)")
    return int(text)


# -- argument layout ---------------------------------------------------------------------------
def parameter_layout(signature: Signature, kernel_name: str) -> str:
    """The struct format of the kernel's parameters: "P" for pointers, FORMAT for scalars."""
    unsupported = [p.describe() for p in signature.params
                   if not p.is_pointer and p.dtype not in FORMAT]
    if unsupported:
        raise DeclarationError(f"kernel {kernel_name!r}: scalar parameter(s) "
                               f"{', '.join(unsupported)} cannot be passed to a CUDA kernel "
                               "here; pass them through an array")
    return "".join("P" if p.is_pointer else FORMAT[p.dtype] for p in signature.params)


def parameter_offsets(layout: str) -> tuple[list[int], int]:
    """Each parameter's byte offset in the packed buffer, and the buffer's size: natural
    alignment, as the kernel's parameter space (and a C struct) lays them out."""
    offsets, end = [], 0
    for code in layout:
        size = struct.calcsize(code)
        end = -(-end // size) * size
        offsets.append(end)
        end += size
    return offsets, end


def pack_parameters(layout: str, values: Sequence[object]) -> bytes:
    """The parameter buffer: ``values`` at :func:`parameter_offsets`, native byte order."""
    if len(layout) != len(values):
        raise LaunchError(f"{len(values)} value(s) for {len(layout)} parameter(s)")
    offsets, size = parameter_offsets(layout)
    buffer = bytearray(size)
    for code, offset, value in zip(layout, offsets, values):
        struct.pack_into(code, buffer, offset, value)
    return bytes(buffer)


def parameter_pointers(layout: str, values: Sequence[object]):
    """(buffer, pointers): the packed parameters and the array of pointers to each of them,
    as cuLaunchKernel and hipModuleLaunchKernel take them (``kernelParams``); keep both
    alive until the launch returns."""
    import ctypes

    data = pack_parameters(layout, values)
    buffer = ctypes.create_string_buffer(data, max(len(data), 1))
    base = ctypes.addressof(buffer)
    offsets, _ = parameter_offsets(layout)
    pointers = (ctypes.c_void_p * max(len(offsets), 1))(*[base + o for o in offsets])
    return buffer, pointers


def host_address(host: np.ndarray) -> int:
    """Where a host array's data starts, for a copy; DriverError unless it is contiguous."""
    if not host.flags.c_contiguous:
        raise DriverError("a host array to copy is not C-contiguous")
    return host.__array_interface__["data"][0]


class Event:
    """A driver's event handle, released (``release(handle)``) with its last reference."""

    def __init__(self, handle, release) -> None:
        self.handle, self._release = handle, release

    def __del__(self) -> None:
        try:
            self._release(self.handle)
        except Exception:  # the interpreter or the context is going away
            pass


# -- device arrays -----------------------------------------------------------------------------
def device_array_info(value: object, head: str) -> tuple[int, np.dtype, tuple[int, ...], bool]:
    """Pointer, dtype, shape and read-only flag of a C-contiguous device array."""
    cai = getattr(value, "__cuda_array_interface__", None)
    if cai is None:  # an older pycuda GPUArray
        if not getattr(getattr(value, "flags", None), "c_contiguous", True):
            raise LaunchError(f"{head}: the device array is not C-contiguous")
        return int(value.gpudata), np.dtype(value.dtype), tuple(value.shape), False
    dtype = np.dtype(cai["typestr"])
    shape = tuple(int(size) for size in cai["shape"])
    strides = cai.get("strides")
    if strides is not None and tuple(strides) != _c_strides(shape, dtype.itemsize) \
            and 0 not in shape:
        raise LaunchError(f"{head}: the device array is not C-contiguous (strides {strides}); "
                          "pass a contiguous copy")
    pointer, readonly = cai["data"]
    return int(pointer or 0), dtype, shape, bool(readonly)


def is_device_array(value: object) -> bool:
    return hasattr(value, "__cuda_array_interface__") or hasattr(value, "gpudata")


def _c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    strides, step = [], itemsize
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


class DeviceArray:
    """Device memory holding an array, for callers without CuPy or PyTorch: it has the
    CUDA array interface, ``get()`` copies it to the host, ``free()`` (or the garbage
    collector) releases it."""

    def __init__(self, runtime: Runtime, shape, dtype) -> None:
        self.runtime = runtime
        self.dtype = np.dtype(dtype)
        self.shape = tuple(int(size) for size in np.atleast_1d(shape))
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize
        self.pointer = runtime.driver.alloc(max(self.nbytes, 1))

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": self.shape, "typestr": self.dtype.str, "strides": None,
                "data": (self.pointer, False), "version": 3}

    def get(self) -> np.ndarray:
        host = np.empty(self.shape, self.dtype)
        if self.nbytes:
            self.runtime.driver.ensure_current()
            self.runtime.driver.copy_to_host(host, self.pointer)
        return host

    def copy(self) -> DeviceArray:
        twin = DeviceArray(self.runtime, self.shape, self.dtype)
        if self.nbytes:
            self.runtime.driver.copy_on_device(twin.pointer, self.pointer, self.nbytes)
        return twin

    def free(self) -> None:
        if self.pointer:
            pointer, self.pointer = self.pointer, 0
            self.runtime.driver.free(pointer)

    def __del__(self) -> None:
        try:
            self.free()
        except Exception:  # a faulted context or an ending interpreter: nothing to do
            pass


# -- the runtime and its launchers --------------------------------------------------------------
class Runtime:
    """One device and context reached through a :class:`Driver`."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver
        self.name = driver.name
        self.arch = driver.arch
        self.device_name = driver.device_name
        self._facts: DeviceFacts | None = None
        self._nvml: Nvml | None = None
        self._flush: DeviceArray | None = None

    def ensure_current(self) -> None:
        self.driver.ensure_current()

    # -- what a timing needs besides events (see gpu_timing) -------------------------------
    def facts(self) -> DeviceFacts:
        """The device's L2 size and memory clock and width, read once; opens NVML (which
        fills in a memory clock the attributes no longer give)."""
        if self._facts is None:
            values = {}
            for name in ("l2_cache_size", "memory_clock_rate", "global_memory_bus_width"):
                try:
                    values[name] = int(self.driver.device_attribute(name))
                except DriverError:
                    values[name] = 0
            try:
                self._nvml = Nvml(self.driver.pci_bus_id())
            except DriverError as exc:
                self._nvml = Nvml.unavailable(f"the device's PCI bus id is unknown ({exc})")
            clock, width = values["memory_clock_rate"], values["global_memory_bus_width"]
            source = "device attributes"
            if clock <= 0 or width <= 0:
                clock, width = self._nvml.memory()
                source = "NVML"
            self._facts = DeviceFacts(self.device_name, self.arch, values["l2_cache_size"],
                                      clock, width, source)
        return self._facts

    def clocks(self) -> Clocks:
        """SM and memory clocks, temperature, power and throttle reasons, now."""
        self.facts()
        return self._nvml.clocks()

    def flush_l2(self) -> None:
        """A write over a buffer twice the L2's size, queued on the launch stream: the next
        launch finds none of its data in L2."""
        if self._flush is None:
            self.ensure_current()
            self._flush = DeviceArray(self, self.facts().flush_bytes, np.uint8)
        self.driver.memset(self._flush.pointer, self._flush.nbytes)

    def launcher(self, ptx: str, symbol: str, signature: Signature, launch: LaunchConfig,
                 tunables: Mapping[str, object], limits: LaunchLimits, kernel_name: str,
                 build=None) -> CUDALauncher:
        self.ensure_current()
        loaded = self._load_cubin(build, symbol)
        try:
            module, function = loaded or self._load(ptx, symbol)
        except DriverError as exc:
            raise CompileError(
                f"kernel {kernel_name!r}: the CUDA driver would not load the PTX ({exc}). "
                "A PTX version newer than the driver supports, or an architecture other than "
                f"this GPU's ({self.arch}), cause this; set PYTEST_R3_CUDA_ARCH={self.arch}",
                str(exc)) from exc
        launcher = CUDALauncher(self, module, function, signature, launch, tunables, limits,
                                kernel_name, ptx, build)
        launcher.diagnostics["loaded"] = "ptx" if loaded is None else "cubin"
        return launcher

    def _load(self, image: str | bytes, symbol: str):
        module = self.driver.load_module(image)
        return module, self.driver.get_function(module, symbol)

    def _load_cubin(self, build, symbol: str):
        """(module, function) from the cubin ptxas made of ``build`` (kept in the
        compiled-code cache) when it is for this GPU's architecture, so the driver compiles
        nothing; None when there is none, or the driver refuses it (a ptxas newer than the
        driver): the PTX is loaded then."""
        if build is None or build.cubin is None or not _runs_on(build.arch, self.arch):
            return None
        try:
            return self._load(build.cubin, symbol)
        except DriverError:
            return None

    def to_device(self, host: np.ndarray) -> DeviceArray:
        """A device copy of a host array."""
        host = np.ascontiguousarray(host)
        array = DeviceArray(self, host.shape, host.dtype)
        if host.nbytes:
            self.ensure_current()
            self.driver.copy_to_device(array.pointer, host)
        return array

    def empty(self, shape, dtype) -> DeviceArray:
        self.ensure_current()
        return DeviceArray(self, shape, dtype)

    def to_host(self, value: object) -> np.ndarray:
        """A host copy of a device array."""
        pointer, dtype, shape, _ = device_array_info(value, "value")
        host = np.empty(shape, dtype)
        if host.nbytes:
            self.ensure_current()
            self.driver.copy_to_host(host, pointer)
        return host


def _host_extent(array: np.ndarray) -> tuple[np.ndarray, int]:
    """The buffer to copy for ``array`` and the array's byte offset in it.

    A view a little inside a larger buffer (the guard regions the replay puts around
    buffers) is copied with that buffer, so a write past the array's ends reaches the host
    copy and shows there.
    """
    base = array.base
    if isinstance(base, np.ndarray) and base.flags.c_contiguous and base.dtype == array.dtype:
        offset = array.__array_interface__["data"][0] - base.__array_interface__["data"][0]
        slack = base.nbytes - array.nbytes
        if 0 <= offset <= slack <= 2 * (GUARD_BYTES + array.itemsize) and slack > 0:
            return base, offset
    return array, 0


class _Bound:
    """One call's kernel arguments: device pointers and scalars, plus the copies made."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver
        self.values: list[object] = []
        self.copies: list[tuple[np.ndarray, int, bool]] = []  # host, device, copy back

    def upload(self, array: np.ndarray, written: bool) -> int:
        host, offset = _host_extent(array)
        device = self.driver.alloc(max(host.nbytes, 1))
        self.copies.append((host, device, written))
        if host.nbytes:
            self.driver.copy_to_device(device, host)
        return device + offset

    def download(self) -> None:
        for host, device, written in self.copies:
            if written and host.nbytes:
                self.driver.copy_to_host(host, device)

    def free(self) -> None:
        for _, device, _ in self.copies:
            try:
                self.driver.free(device)
            except Exception:  # a faulted context refuses even this; the process must end
                pass
        self.copies = []


def _runs_on(built_for: str, device: str) -> bool:
    """Whether a cubin for ``built_for`` runs on a GPU of architecture ``device``: the same
    one, or its arch-specific form (sm_90a code on an sm_90 GPU)."""
    return bool(device) and built_for.rstrip("af") == device


class CUDALauncher(Launcher):
    """A loaded kernel variant: calling it resolves the launch, copies, launches, waits."""

    def __init__(self, runtime: Runtime, module, function, signature: Signature,
                 launch: LaunchConfig, tunables: Mapping[str, object], limits: LaunchLimits,
                 kernel_name: str, ptx: str, build=None) -> None:
        self.runtime = runtime
        self.driver = runtime.driver
        self.module = module  # keeps the function's code loaded
        self.function = function
        self.signature = signature
        self.launch_config = launch
        self.tunables = dict(tunables)
        self.limits = limits
        self.kernel_name = kernel_name
        self.ptx = ptx
        self.build = build
        self.diagnostics = dict(build.diagnostics) if build is not None else {}
        self.format = parameter_layout(signature, kernel_name)
        self._converters = converters(kernel_name, signature, arrays_by_object=True)
        self._shapes = shape_check(kernel_name, signature)  # C array parameters' bounds
        self.max_threads = self._attribute("max_threads")
        registers = self._attribute("registers")
        if registers is not None:
            self.diagnostics.setdefault("registers", registers)
        self._shared_limit = DEFAULT_SHARED_LIMIT
        self._warm = False  # warm-up launches made (before the first timed one)

    def _attribute(self, name: str) -> int | None:
        try:
            return int(self.driver.function_attribute(self.function, name))
        except Exception:  # an old driver: the launch itself will tell
            return None

    # -- arguments and configuration -----------------------------------------------------
    def _bind(self, args: Sequence[object]) -> _Bound:
        if len(args) != len(self._converters):
            raise LaunchError(f"kernel {self.kernel_name!r} takes {len(self._converters)} "
                              f"argument(s) ({self.signature.describe()}), got {len(args)}")
        if self._shapes is not None:
            self._shapes(args)
        bound = _Bound(self.driver)
        try:
            for index, (param, convert, value) in enumerate(
                    zip(self.signature.params, self._converters, args)):
                if not param.is_pointer:
                    bound.values.append(convert(value))
                elif isinstance(value, np.ndarray):
                    bound.values.append(bound.upload(convert(value), param.written))
                elif is_device_array(value):
                    bound.values.append(self._device_pointer(index, param, value))
                else:
                    convert(value)  # raises the LaunchError that names what was expected
        except BaseException:
            bound.free()
            raise
        return bound

    def _device_pointer(self, index: int, param: Param, value: object) -> int:
        head = f"kernel {self.kernel_name!r} argument {index + 1} ({param.describe()})"
        pointer, dtype, _, readonly = device_array_info(value, head)
        if dtype != np.dtype(param.dtype):
            raise LaunchError(f"{head}: expected dtype {param.dtype}, got a device array of "
                              f"{dtype}")
        if param.written and readonly:
            raise LaunchError(f"{head}: the kernel writes this array but it is read-only")
        return pointer

    def configure(self, args: Sequence[object]) -> Launch:
        """The grid, block and shared memory ``args`` launch with."""
        named = dict(zip(self.signature.names, args))
        launch = self.launch_config.resolve(named, self.tunables, self.limits,
                                            self.kernel_name)
        threads = launch.block[0] * launch.block[1] * launch.block[2]
        if self.max_threads is not None and threads > self.max_threads:
            raise LaunchError(
                f"kernel {self.kernel_name!r}: block {launch.block} has {threads} threads but "
                f"this build allows at most {self.max_threads} per block (it uses "
                f"{self.diagnostics.get('registers', '?')} registers per thread); use a "
                "smaller block")
        if launch.shared > self._shared_limit:
            self._allow_shared(launch.shared)
        return launch

    def _allow_shared(self, nbytes: int) -> None:
        try:
            self.driver.set_dynamic_shared(self.function, nbytes)
            self._shared_limit = nbytes
        except DriverError as exc:
            raise LaunchError(f"kernel {self.kernel_name!r}: {nbytes} bytes of dynamic shared "
                              f"memory were refused by the device ({exc})") from exc

    # -- launching -------------------------------------------------------------------------
    def __call__(self, *args: object) -> None:
        self.driver.ensure_current()
        bound = self._bind(args)
        launch = None
        try:
            launch = self.configure(args)
            if not launch.threads:  # an empty grid: nothing to do
                return None
            self.driver.launch(self.function, launch, self.format, bound.values)
            self.driver.synchronize()
            bound.download()
        except DriverError as exc:
            raise self._translate(exc, launch) from exc
        finally:
            bound.free()
        return None

    def time(self, args: Sequence[object], repeat: int) -> list[float]:
        """Seconds per launch of ``repeat`` launches, each timed alone by a pair of CUDA
        events on the launch stream, after a write over twice the L2's size (outside the
        events: no launch finds its data cached by the one before). The first call on a
        loaded variant launches it WARMUP_LAUNCHES times untimed first. Arguments are
        copied in once and results are not copied back."""
        self.driver.ensure_current()
        bound = self._bind(args)
        launch = None
        try:
            launch = self.configure(args)
            if not launch.threads:
                return [0.0] * repeat
            for _ in range(0 if self._warm else WARMUP_LAUNCHES):
                self.driver.launch(self.function, launch, self.format, bound.values)
            self._warm = True
            events = [(self.driver.new_event(), self.driver.new_event())
                      for _ in range(repeat)]
            for start, end in events:
                self.runtime.flush_l2()
                self.driver.record(start)
                self.driver.launch(self.function, launch, self.format, bound.values)
                self.driver.record(end)
            self.driver.wait(events[-1][1])
            return [self.driver.elapsed(start, end) for start, end in events]
        except DriverError as exc:
            raise self._translate(exc, launch) from exc
        finally:
            bound.free()

    def _translate(self, exc: Exception, launch: Launch | None) -> Exception:
        message = str(exc)
        shape = f"grid {launch.grid}, block {launch.block}" if launch else "before launching"
        head = f"kernel {self.kernel_name!r} ({shape})"
        lowered = message.lower()
        if any(marker in lowered for marker in _FAULTS):
            return KernelFault(
                f"{head} faulted on the GPU: {message}. Usually an out-of-bounds access: check "
                "the kernel's bounds tests against the sizes and the launch grid. The CUDA "
                "context cannot be used again in this process.")
        if "resources" in lowered:
            return LaunchError(
                f"{head}: {message}; the block needs more registers or shared memory than a "
                f"multiprocessor has (registers per thread: "
                f"{self.diagnostics.get('registers', '?')}); use a smaller block")
        if "out of memory" in lowered:
            return LaunchError(f"{head}: the GPU is out of memory ({message})")
        return LaunchError(f"{head}: the launch failed: {message}")
