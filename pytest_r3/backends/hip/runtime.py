"""Running code objects on an AMD GPU through hip-python (``pip install "pytest-r3[hip]"``).

The HIP runtime is one more :class:`~pytest_r3.backends.cuda.runtime.Driver`: loading a
code object (``hipModuleLoadData``), memory, copies, ``hipModuleLaunchKernel`` and HIP
events. Everything else (argument checks and copies, launch configuration, timing,
errors) is the CUDA runtime's shared launcher, so a HIP kernel is called, timed and
contained in the replay worker exactly as a CUDA one. Imported only when a HIP kernel runs
on a GPU. ``PYTEST_R3_HIP_DEVICE`` picks the device (default 0).
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import threading

import numpy as np

from ...errors import BackendError, MissingExtraError
from ..cuda.runtime import (
    Driver,
    DriverError,
    Event,
    Runtime,
    host_address,
)

PACKAGE = "hip-python"
DEVICE_ENV = "PYTEST_R3_HIP_DEVICE"
NO_GPU_HINT = "HIP kernels need an AMD GPU (or the emulation mode, see docs/hip.md)"
# ctypes of the parameter layout's struct codes (cuda.runtime.FORMAT; "P": a device pointer)
_CTYPES = {"P": ctypes.c_void_p, "?": ctypes.c_bool, "b": ctypes.c_int8, "B": ctypes.c_uint8,
           "h": ctypes.c_int16, "H": ctypes.c_uint16, "i": ctypes.c_int32,
           "I": ctypes.c_uint32, "q": ctypes.c_int64, "Q": ctypes.c_uint64,
           "e": ctypes.c_uint16, "f": ctypes.c_float, "d": ctypes.c_double}

_lock = threading.Lock()
_started: list[Runtime] = []
_failure: list[Exception] = []  # a missing package or GPU stays missing: asked once


def importable() -> bool:
    try:
        return importlib.util.find_spec("hip") is not None
    except ImportError:
        return False


def runtime() -> Runtime:
    """The process's HIP runtime, started once. MissingExtraError without hip-python,
    BackendError without a driver or an AMD GPU."""
    with _lock:
        if _failure:
            raise _failure[0].with_traceback(None)
        if not _started:
            try:
                _started.append(Runtime(_start()))
            except (MissingExtraError, BackendError) as exc:
                _failure.append(exc)
                raise
        return _started[0]


def unavailable_reason() -> str | None:
    """Why HIP kernels cannot run on an AMD GPU in this process, else None."""
    try:
        runtime()
    except (MissingExtraError, BackendError) as exc:
        return str(exc)
    return None


def _start() -> HIPDriver:
    if not importable():
        raise MissingExtraError(
            f"running HIP kernels on an AMD GPU needs the {PACKAGE} package, which is not "
            'importable. Install it with `pip install "pytest-r3[hip]"`. Building code objects '
            "and emulation on the CPU work without it.")
    text = os.environ.get(DEVICE_ENV, "0").strip() or "0"
    if not text.isdigit():
        raise BackendError(f"{DEVICE_ENV}={text!r} is not a GPU index (0, 1, ...)")
    try:
        from hip import hip
    except Exception as exc:  # hip-python is there but ROCm's libamdhip64 is not
        raise BackendError(f"no usable AMD GPU: hip-python could not load the HIP runtime "
                           f"({' '.join(str(exc).split())}); {NO_GPU_HINT}") from exc
    return HIPDriver.start(hip, int(text))


def launch_argument(code: str, value: object):
    """One kernel argument as the ctypes value hip-python packs: ``code`` is its struct code
    in the parameter layout (a half scalar travels as its 16 bits)."""
    if code == "e":
        return ctypes.c_uint16(int(np.array(value, np.float16).view(np.uint16)))
    return _CTYPES[code](value)


class HIPDriver(Driver):
    """One AMD GPU reached through hip-python's ``hip`` module."""

    name = "hip-python"

    def __init__(self, hip, index: int) -> None:
        self.hip = hip
        self.index = index
        properties = hip.hipDeviceProp_t()
        self._call("hipGetDeviceProperties", hip.hipGetDeviceProperties, properties, index)
        self.arch = _text(properties.gcnArchName).split(":")[0]  # "gfx942:sramecc+:xnack-"
        self.device_name = _text(properties.name).strip()
        self.multiprocessors = int(properties.multiProcessorCount)
        self._bus_id = (f"{int(properties.pciDomainID):04x}:{int(properties.pciBusID):02x}:"
                        f"{int(properties.pciDeviceID):02x}.0")

    @classmethod
    def start(cls, hip, index: int) -> HIPDriver:
        try:
            count = _checked(hip, "hipGetDeviceCount", hip.hipGetDeviceCount())
            if index >= count:
                raise BackendError(f"no usable AMD GPU: {DEVICE_ENV}={index} but the HIP "
                                   f"runtime sees {count} GPU(s); {NO_GPU_HINT}")
            _checked(hip, "hipSetDevice", hip.hipSetDevice(index))
        except DriverError as exc:
            raise BackendError(f"no usable AMD GPU: {exc}; {NO_GPU_HINT}") from exc
        return cls(hip, index)

    def _call(self, what: str, function, *args, **keywords):
        return _checked(self.hip, what, function(*args, **keywords))

    def ensure_current(self) -> None:
        self._call("hipSetDevice", self.hip.hipSetDevice, self.index)

    def load_module(self, code_object: bytes):
        image = np.frombuffer(bytes(code_object), dtype=np.uint8)
        self._image = image  # the runtime may read it lazily
        return self._call("hipModuleLoadData", self.hip.hipModuleLoadData, image.ctypes.data)

    def get_function(self, module, symbol: str):
        return self._call("hipModuleGetFunction", self.hip.hipModuleGetFunction, module,
                          symbol.encode())

    def function_attribute(self, function, name: str) -> int:
        attribute = {"max_threads": "HIP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK",
                     "registers": "HIP_FUNC_ATTRIBUTE_NUM_REGS"}[name]
        return int(self._call("hipFuncGetAttribute", self.hip.hipFuncGetAttribute,
                              getattr(self.hip.hipFunction_attribute, attribute), function))

    def set_dynamic_shared(self, function, nbytes: int) -> None:
        """Nothing to ask: an AMD kernel may use all 64 KiB of LDS without opting in."""

    def alloc(self, nbytes: int) -> int:
        return int(self._call("hipMalloc", self.hip.hipMalloc, nbytes))

    def free(self, pointer: int) -> None:
        self._call("hipFree", self.hip.hipFree, pointer)

    def copy_to_device(self, pointer: int, host: np.ndarray) -> None:
        self._call("hipMemcpyHtoD", self.hip.hipMemcpyHtoD, pointer, host_address(host),
                   host.nbytes)

    def copy_to_host(self, host: np.ndarray, pointer: int) -> None:
        self._call("hipMemcpyDtoH", self.hip.hipMemcpyDtoH, host_address(host), pointer,
                   host.nbytes)

    def copy_on_device(self, target: int, source: int, nbytes: int) -> None:
        self._call("hipMemcpyDtoD", self.hip.hipMemcpyDtoD, target, source, nbytes)

    def launch(self, function, launch, layout: str, values) -> None:
        """Arguments go through ``extra`` as ctypes values, which hip-python packs with the
        kernel's alignment (the form its documentation gives; HIP long documented
        ``kernelParams`` as not implemented)."""
        arguments = tuple(launch_argument(code, value) for code, value in zip(layout, values))
        self._call("hipModuleLaunchKernel", self.hip.hipModuleLaunchKernel, function,
                   *launch.grid, *launch.block, launch.shared, None, None, arguments)

    def synchronize(self) -> None:
        self._call("hipDeviceSynchronize", self.hip.hipDeviceSynchronize)

    def new_event(self):
        return Event(self._call("hipEventCreate", self.hip.hipEventCreate),
                     self.hip.hipEventDestroy)

    def record(self, event) -> None:
        self._call("hipEventRecord", self.hip.hipEventRecord, event.handle, None)

    def wait(self, event) -> None:
        self._call("hipEventSynchronize", self.hip.hipEventSynchronize, event.handle)

    def elapsed(self, start, end) -> float:
        return float(self._call("hipEventElapsedTime", self.hip.hipEventElapsedTime,
                                start.handle, end.handle)) * 1e-3

    def device_attribute(self, name: str) -> int:
        attribute = {"l2_cache_size": "hipDeviceAttributeL2CacheSize",
                     "memory_clock_rate": "hipDeviceAttributeMemoryClockRate",
                     "global_memory_bus_width": "hipDeviceAttributeMemoryBusWidth"}.get(name)
        if attribute is None or not hasattr(self.hip.hipDeviceAttribute_t, attribute):
            raise DriverError(f"hipDeviceGetAttribute: no attribute {name} here")
        return int(self._call("hipDeviceGetAttribute", self.hip.hipDeviceGetAttribute,
                              getattr(self.hip.hipDeviceAttribute_t, attribute), self.index))

    def pci_bus_id(self) -> str:
        """From the device properties read at start (domain:bus:device.0)."""
        return self._bus_id

    def memset(self, pointer: int, nbytes: int) -> None:
        self._call("hipMemsetD8Async", self.hip.hipMemsetD8Async, pointer, 0, nbytes, None)


def _text(value) -> str:
    raw = bytes(value) if not isinstance(value, str) else value.encode()
    return raw.split(b"\0")[0].decode(errors="replace")


def _checked(hip, what: str, returned):
    """The value(s) after a hip-python call's hipError_t, or DriverError when it failed."""
    result, *values = returned if isinstance(returned, tuple) else (returned,)
    if result != hip.hipError_t.hipSuccess:
        try:
            text = _text(hip.hipGetErrorString(result))
        except Exception:  # the runtime could not even describe it
            text = ""
        raise DriverError(f"{what} failed: {getattr(result, 'name', result)} ({text})")
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)
