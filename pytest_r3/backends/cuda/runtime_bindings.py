"""The cuda-bindings runtime: :class:`~pytest_r3.backends.cuda.runtime.Driver` over NVIDIA's
``cuda.bindings.driver``, the default.

cuda-bindings ships binary wheels, imports without a GPU and needs no toolkit
(``pip install "pytest-r3[cuda]"``). Its functions return ``(CUresult, values...)``; each
call goes through :meth:`BindingsDriver._call`, which turns a failure into a DriverError
naming the call and the driver's code. Pointers handed to the driver are plain ints:
parameter buffers and host arrays are kept alive by the caller for the call's length.
"""

from __future__ import annotations

import atexit
import ctypes
import importlib.util

import numpy as np

from .runtime import (
    DEVICE_ENV,
    Driver,
    DriverError,
    Event,
    host_address,
    no_gpu_error,
    parameter_pointers,
)

PACKAGE = "cuda-bindings"


def importable() -> bool:
    try:
        return importlib.util.find_spec("cuda.bindings") is not None
    except ImportError:  # no ``cuda`` namespace at all
        return False


def start(index: int) -> BindingsDriver:
    from cuda.bindings import driver

    return BindingsDriver.start(driver, index)


def error_text(cu, result) -> str:
    """``CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)``."""
    try:
        name = cu.cuGetErrorName(result)[1].decode()
        text = cu.cuGetErrorString(result)[1].decode()
        return f"{name} ({text})"
    except Exception:  # the driver could not even describe it
        return getattr(result, "name", str(result))


class BindingsDriver(Driver):
    """One device and context reached through the ``cuda.bindings.driver`` module ``cu``."""

    name = "cuda-bindings"

    def __init__(self, cu, device, context) -> None:
        self.cu = cu
        self.device = device
        self.context = context
        attribute = cu.CUdevice_attribute
        major = self._call("cuDeviceGetAttribute", cu.cuDeviceGetAttribute,
                           attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device)
        minor = self._call("cuDeviceGetAttribute", cu.cuDeviceGetAttribute,
                           attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device)
        self.arch = f"sm_{major}{minor}"
        name = self._call("cuDeviceGetName", cu.cuDeviceGetName, 256, device)
        self.device_name = bytes(name).split(b"\0")[0].decode(errors="replace").strip()
        self.multiprocessors = int(self._call(
            "cuDeviceGetAttribute", cu.cuDeviceGetAttribute,
            attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device))

    @classmethod
    def start(cls, cu, index: int) -> BindingsDriver:
        """Initialise the driver and take the current context, else the device's primary
        context (made current here). One-line BackendError where that cannot be done."""
        try:
            result = cu.cuInit(0)[0]
        except Exception as exc:  # cuda-bindings raises when libcuda.so cannot be loaded
            raise no_gpu_error("the NVIDIA driver library (libcuda.so.1) could not be "
                               f"loaded ({' '.join(str(exc).split())})") from exc
        if result != cu.CUresult.CUDA_SUCCESS:
            raise no_gpu_error(f"cuInit returned {error_text(cu, result)}")
        try:
            count = _checked(cu, "cuDeviceGetCount", cu.cuDeviceGetCount())
            if index >= count:
                raise no_gpu_error(f"{DEVICE_ENV}={index} but the CUDA driver sees {count} "
                                   "GPU(s)")
            context = _checked(cu, "cuCtxGetCurrent", cu.cuCtxGetCurrent())
            if int(context) == 0:
                device = _checked(cu, "cuDeviceGet", cu.cuDeviceGet(index))
                context = _checked(cu, "cuDevicePrimaryCtxRetain",
                                   cu.cuDevicePrimaryCtxRetain(device))
                _checked(cu, "cuCtxSetCurrent", cu.cuCtxSetCurrent(context))
                atexit.register(cu.cuDevicePrimaryCtxRelease, device)
            else:
                device = _checked(cu, "cuCtxGetDevice", cu.cuCtxGetDevice())
        except DriverError as exc:
            raise no_gpu_error(f"the CUDA driver could not start ({exc})") from exc
        return cls(cu, device, context)

    def _call(self, what: str, function, *args):
        return _checked(self.cu, what, function(*args))

    def ensure_current(self) -> None:
        if int(self._call("cuCtxGetCurrent", self.cu.cuCtxGetCurrent)) == 0:
            self._call("cuCtxSetCurrent", self.cu.cuCtxSetCurrent, self.context)

    def load_module(self, ptx: str | bytes):
        image = np.frombuffer(ptx if isinstance(ptx, bytes) else ptx.encode() + b"\0",
                              dtype=np.uint8)
        return self._call("cuModuleLoadData", self.cu.cuModuleLoadData, image.ctypes.data)

    def get_function(self, module, symbol: str):
        return self._call("cuModuleGetFunction", self.cu.cuModuleGetFunction, module,
                          symbol.encode())

    def function_attribute(self, function, name: str) -> int:
        attribute = {"max_threads": "CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK",
                     "registers": "CU_FUNC_ATTRIBUTE_NUM_REGS"}[name]
        return int(self._call("cuFuncGetAttribute", self.cu.cuFuncGetAttribute,
                              getattr(self.cu.CUfunction_attribute, attribute), function))

    def set_dynamic_shared(self, function, nbytes: int) -> None:
        self._call("cuFuncSetAttribute", self.cu.cuFuncSetAttribute, function,
                   self.cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                   nbytes)

    def alloc(self, nbytes: int) -> int:
        return int(self._call("cuMemAlloc", self.cu.cuMemAlloc, nbytes))

    def free(self, pointer: int) -> None:
        self._call("cuMemFree", self.cu.cuMemFree, pointer)

    def copy_to_device(self, pointer: int, host: np.ndarray) -> None:
        self._call("cuMemcpyHtoD", self.cu.cuMemcpyHtoD, pointer, host_address(host), host.nbytes)

    def copy_to_host(self, host: np.ndarray, pointer: int) -> None:
        self._call("cuMemcpyDtoH", self.cu.cuMemcpyDtoH, host_address(host), pointer, host.nbytes)

    def copy_on_device(self, target: int, source: int, nbytes: int) -> None:
        self._call("cuMemcpyDtoD", self.cu.cuMemcpyDtoD, target, source, nbytes)

    def launch(self, function, launch, layout: str, values) -> None:
        _, pointers = parameter_pointers(layout, values)
        self._call("cuLaunchKernel", self.cu.cuLaunchKernel, function, *launch.grid,
                   *launch.block, launch.shared, 0, ctypes.addressof(pointers), 0)

    def synchronize(self) -> None:
        self._call("cuCtxSynchronize", self.cu.cuCtxSynchronize)

    def new_event(self):
        event = self._call("cuEventCreate", self.cu.cuEventCreate,
                           self.cu.CUevent_flags.CU_EVENT_DEFAULT)
        return Event(event, self.cu.cuEventDestroy)

    def record(self, event) -> None:
        self._call("cuEventRecord", self.cu.cuEventRecord, event.handle, 0)

    def wait(self, event) -> None:
        self._call("cuEventSynchronize", self.cu.cuEventSynchronize, event.handle)

    def elapsed(self, start, end) -> float:
        return float(self._call("cuEventElapsedTime", self.cu.cuEventElapsedTime,
                                start.handle, end.handle)) * 1e-3

    def device_attribute(self, name: str) -> int:
        attribute = getattr(self.cu.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{name.upper()}",
                            None)
        if attribute is None:  # removed from this version of the bindings
            raise DriverError(f"cuDeviceGetAttribute: no attribute {name} here")
        return int(self._call("cuDeviceGetAttribute", self.cu.cuDeviceGetAttribute, attribute,
                              self.device))

    def pci_bus_id(self) -> str:
        text = self._call("cuDeviceGetPCIBusId", self.cu.cuDeviceGetPCIBusId, 64, self.device)
        return bytes(text).split(b"\0")[0].decode()

    def memset(self, pointer: int, nbytes: int) -> None:
        self._call("cuMemsetD8Async", self.cu.cuMemsetD8Async, pointer, 0, nbytes, 0)


def _checked(cu, what: str, returned):
    """The value(s) after a cuda-bindings call's CUresult, or DriverError when it failed."""
    result, *values = returned
    if result != cu.CUresult.CUDA_SUCCESS:
        raise DriverError(f"{what} failed: {error_text(cu, result)}")
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)
