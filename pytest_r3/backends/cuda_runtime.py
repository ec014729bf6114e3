"""Running PTX on the GPU through pycuda: context, modules, argument copies, launches, timing.

Imported only when a CUDA kernel runs, so CPU-only users never import pycuda. Arguments may
be numpy arrays (copied to the device before the launch and, if the kernel writes them,
back after it) or device arrays (anything with ``__cuda_array_interface__``, such as pycuda
GPUArrays, CuPy or PyTorch tensors; passed through without copies). A call returns when the
kernel has finished, so a fault is raised by the call that caused it.

The kernel runs in the current CUDA context of the calling thread; if there is none, in the
device's primary context (the one the CUDA runtime, CuPy and PyTorch share), made current
on first use. ``PYTEST_R3_CUDA_DEVICE`` picks the device (default 0).

One module for the driver's whole life cycle (context, module, copies, launch, events,
errors) because each step needs the others' state; it is longer than most for that reason.
"""

from __future__ import annotations

import atexit
import functools
import os
from collections.abc import Mapping, Sequence

import numpy as np

from ..errors import (
    BackendError,
    CompileError,
    DeclarationError,
    KernelFault,
    LaunchError,
    MissingExtraError,
)
from ..model.arguments import GUARD_BYTES, converters
from ..model.launch import Launch, LaunchConfig, LaunchLimits
from ..model.signature import Param, Signature
from .base import Launcher

DEVICE_ENV = "PYTEST_R3_CUDA_DEVICE"
INSTALL_HINT = 'pip install "pytest-r3[cuda]"'
DEFAULT_SHARED_LIMIT = 48 * 1024  # more dynamic shared memory must be asked for explicitly
_FORMAT = {"bool": "?", "int8": "b", "uint8": "B", "int16": "h", "uint16": "H", "int32": "i",
           "uint32": "I", "int64": "q", "uint64": "Q", "float32": "f", "float64": "d"}
# driver messages after which the context is unusable (sticky errors)
_FAULTS = ("illegal memory access", "illegal address", "misaligned address", "launch failed",
           "unspecified launch failure", "illegal instruction", "hardware stack error",
           "device-side assert", "exception", "trap", "program counter")


@functools.lru_cache(maxsize=1)
def runtime() -> Runtime:
    """The process's CUDA runtime (started once); MissingExtraError without pycuda."""
    try:
        import pycuda.driver as driver
    except ImportError as exc:
        raise MissingExtraError(
            f"running CUDA kernels needs pycuda, which is not importable ({exc}). Install it "
            f"with `{INSTALL_HINT}`; it builds from source against your CUDA toolkit, so "
            "nvcc and the CUDA headers must be installed (see docs/cuda.md). Compiling to "
            "PTX works without it.") from exc
    return Runtime.start(driver)


def unavailable_reason() -> str | None:
    """Why CUDA kernels cannot run in this process (no pycuda, driver or GPU), else None:
    the one place tests decide to skip GPU runs."""
    try:
        runtime()
    except MissingExtraError as exc:
        return f"pycuda is not importable ({exc.__cause__}; `{INSTALL_HINT}`)"
    except BackendError as exc:
        return str(exc)
    return None


class Runtime:
    """One device and context, and the pycuda driver module used to reach them."""

    def __init__(self, driver, device, context) -> None:
        self.driver = driver
        self.device = device
        self.context = context
        major, minor = device.compute_capability()
        self.arch = f"sm_{major}{minor}"
        self.device_name = device.name()

    @classmethod
    def start(cls, driver) -> Runtime:
        index = int(os.environ.get(DEVICE_ENV, "0") or 0)
        try:
            driver.init()
            count = driver.Device.count()
            if index >= count:
                raise BackendError(f"{DEVICE_ENV}={index} but the CUDA driver sees {count} "
                                   "GPU(s)")
            device = driver.Device(index)
            context = driver.Context.get_current()
            if context is None:
                context = device.retain_primary_context()
                context.push()
                atexit.register(_release, driver)
            else:
                device = context.get_device()
        except driver.Error as exc:
            raise BackendError(f"the CUDA driver could not start ({exc}); is there a GPU and "
                               "a working NVIDIA driver? (nvidia-smi should list the GPU)"
                               ) from exc
        return cls(driver, device, context)

    def ensure_current(self) -> None:
        """Make our context current on this thread if no context is (a new thread)."""
        if self.driver.Context.get_current() is None:
            self.context.push()

    def launcher(self, ptx: str, symbol: str, signature: Signature, launch: LaunchConfig,
                 tunables: Mapping[str, object], limits: LaunchLimits, kernel_name: str,
                 build=None) -> CUDALauncher:
        self.ensure_current()
        try:
            module = self.driver.module_from_buffer(ptx.encode() + b"\0")
            function = module.get_function(symbol)
        except self.driver.Error as exc:
            raise CompileError(
                f"kernel {kernel_name!r}: the CUDA driver would not load the PTX ({exc}). "
                "A PTX version newer than the driver supports, or an architecture other than "
                f"this GPU's ({self.arch}), cause this; set PYTEST_R3_CUDA_ARCH={self.arch}",
                str(exc)) from exc
        return CUDALauncher(self, module, function, signature, launch, tunables, limits,
                            kernel_name, ptx, build)

    def to_host(self, value: object) -> np.ndarray:
        """A host copy of a device array."""
        get = getattr(value, "get", None)
        if callable(get):
            return np.array(get(), copy=True)
        pointer, dtype, shape = _device_array(value, "value")
        host = np.empty(shape, dtype)
        if host.nbytes:
            self.ensure_current()
            self.driver.memcpy_dtoh(host, pointer)
        return host


def _release(driver) -> None:
    try:
        driver.Context.pop()
    except Exception:  # the interpreter is ending: nothing left to do
        pass


def _device_array(value: object, head: str) -> tuple[int, np.dtype, tuple[int, ...]]:
    """Pointer, dtype and shape of a C-contiguous device array (CUDA array interface)."""
    cai = getattr(value, "__cuda_array_interface__", None)
    if cai is None:  # an older pycuda GPUArray
        array = value
        if not getattr(getattr(array, "flags", None), "c_contiguous", True):
            raise LaunchError(f"{head}: the device array is not C-contiguous")
        return int(array.gpudata), np.dtype(array.dtype), tuple(array.shape)
    dtype = np.dtype(cai["typestr"])
    shape = tuple(cai["shape"])
    strides = cai.get("strides")
    if strides is not None and tuple(strides) != _c_strides(shape, dtype.itemsize):
        raise LaunchError(f"{head}: the device array is not C-contiguous (strides {strides})")
    return int(cai["data"][0]), dtype, shape


def _c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    strides, step = [], itemsize
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


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

    def __init__(self, driver) -> None:
        self.driver = driver
        self.values: list[object] = []
        self.copies: list[tuple[np.ndarray, object, bool]] = []  # host, device, copy back

    def upload(self, array: np.ndarray, written: bool) -> int:
        host, offset = _host_extent(array)
        device = self.driver.mem_alloc(max(host.nbytes, 1))
        self.copies.append((host, device, written))
        if host.nbytes:
            self.driver.memcpy_htod(device, host)
        return int(device) + offset

    def download(self) -> None:
        for host, device, written in self.copies:
            if written and host.nbytes:
                self.driver.memcpy_dtoh(host, device)

    def free(self) -> None:
        for _, device, _ in self.copies:
            try:
                device.free()
            except Exception:  # a faulted context refuses even this; the process must end
                pass
        self.copies = []


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
        unsupported = [p.describe() for p in signature.params
                       if not p.is_pointer and p.dtype not in _FORMAT]
        if unsupported:
            raise DeclarationError(f"kernel {kernel_name!r}: scalar parameter(s) "
                                   f"{', '.join(unsupported)} cannot be passed to a CUDA "
                                   "kernel here; pass them through an array")
        self.format = "".join("P" if p.is_pointer else _FORMAT[p.dtype]
                              for p in signature.params)
        function.prepare(self.format)
        self._converters = converters(kernel_name, signature, arrays_by_object=True)
        self.max_threads = self._attribute("MAX_THREADS_PER_BLOCK")
        registers = self._attribute("NUM_REGS")
        if registers is not None:
            self.diagnostics.setdefault("registers", registers)
        self._shared_limit = DEFAULT_SHARED_LIMIT

    def _attribute(self, name: str) -> int | None:
        try:
            return int(self.function.get_attribute(getattr(self.driver.function_attribute,
                                                           name)))
        except Exception:  # an old pycuda or driver: the launch itself will tell
            return None

    # -- arguments and configuration -----------------------------------------------------
    def _bind(self, args: Sequence[object]) -> _Bound:
        if len(args) != len(self._converters):
            raise LaunchError(f"kernel {self.kernel_name!r} takes {len(self._converters)} "
                              f"argument(s) ({self.signature.describe()}), got {len(args)}")
        bound = _Bound(self.driver)
        try:
            for index, (param, convert, value) in enumerate(
                    zip(self.signature.params, self._converters, args)):
                if not param.is_pointer:
                    bound.values.append(convert(value))
                elif isinstance(value, np.ndarray):
                    bound.values.append(bound.upload(convert(value), param.written))
                elif hasattr(value, "__cuda_array_interface__") or hasattr(value, "gpudata"):
                    bound.values.append(self._device_pointer(index, param, value))
                else:
                    convert(value)  # raises the LaunchError that names what was expected
        except BaseException:
            bound.free()
            raise
        return bound

    def _device_pointer(self, index: int, param: Param, value: object) -> int:
        head = f"kernel {self.kernel_name!r} argument {index + 1} ({param.describe()})"
        pointer, dtype, _ = _device_array(value, head)
        if dtype != np.dtype(param.dtype):
            raise LaunchError(f"{head}: expected dtype {param.dtype}, got a device array of "
                              f"{dtype}")
        cai = getattr(value, "__cuda_array_interface__", None) or {}
        if param.written and cai.get("data", (0, False))[1]:
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
            self.function.set_attribute(
                self.driver.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes)
            self._shared_limit = nbytes
        except Exception as exc:
            raise LaunchError(f"kernel {self.kernel_name!r}: {nbytes} bytes of dynamic shared "
                              f"memory were refused by the device ({exc})") from exc

    # -- launching -------------------------------------------------------------------------
    def _launch(self, launch: Launch, values: list[object]) -> None:
        self.function.prepared_call(launch.grid, launch.block, *values,
                                    shared_size=launch.shared)

    def __call__(self, *args: object) -> None:
        self.runtime.ensure_current()
        bound = self._bind(args)
        launch = None
        try:
            launch = self.configure(args)
            if not launch.threads:  # an empty grid: nothing to do
                return None
            self._launch(launch, bound.values)
            self.driver.Context.synchronize()
            bound.download()
        except self.driver.Error as exc:
            raise self._translate(exc, launch) from exc
        finally:
            bound.free()
        return None

    def time(self, args: Sequence[object], repeat: int) -> list[float]:
        """Seconds per launch, ``repeat`` launches back to back, timed with CUDA events;
        arguments are copied in once and results are not copied back."""
        self.runtime.ensure_current()
        bound = self._bind(args)
        launch = None
        try:
            launch = self.configure(args)
            if not launch.threads:
                return [0.0] * repeat
            events = [self.driver.Event() for _ in range(repeat + 1)]
            events[0].record()
            for index in range(repeat):
                self._launch(launch, bound.values)
                events[index + 1].record()
            events[-1].synchronize()
            return [events[i + 1].time_since(events[i]) * 1e-3 for i in range(repeat)]
        except self.driver.Error as exc:
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
