"""The pycuda runtime: :class:`~pytest_r3.backends.cuda.runtime.Driver` over ``pycuda.driver``.

pycuda builds from source against a CUDA toolkit (``pip install "pytest-r3[pycuda]"``);
choose it with ``PYTEST_R3_CUDA_RUNTIME=pycuda`` where it is installed.
"""

from __future__ import annotations

import atexit
import importlib.util

import numpy as np

from .runtime import DEVICE_ENV, Driver, DriverError, no_gpu_error

PACKAGE = "pycuda"
_ATTRIBUTES = {"max_threads": "MAX_THREADS_PER_BLOCK", "registers": "NUM_REGS"}


def importable() -> bool:
    return importlib.util.find_spec("pycuda") is not None


def start(index: int) -> PycudaDriver:
    try:
        import pycuda.driver as driver
    except ImportError as exc:  # installed but broken (built against another CUDA)
        raise no_gpu_error(f"pycuda does not import ({exc})") from exc
    except Exception as exc:  # pycuda's import fails on machines without a driver
        raise no_gpu_error(f"pycuda could not load the CUDA driver ({exc})") from exc
    return PycudaDriver.start(driver, index)


class PycudaDriver(Driver):
    """One device and context, reached through the pycuda driver module ``driver``."""

    name = "pycuda"

    def __init__(self, driver, device, context) -> None:
        self.driver = driver
        self.device = device
        self.context = context
        major, minor = device.compute_capability()
        self.arch = f"sm_{major}{minor}"
        self.device_name = device.name()
        try:
            self.multiprocessors = int(device.get_attribute(
                driver.device_attribute.MULTIPROCESSOR_COUNT))
        except Exception:  # an old pycuda: only the benchmark asks
            self.multiprocessors = 0
        self._allocations: dict[int, object] = {}  # pointer -> pycuda's allocation

    @classmethod
    def start(cls, driver, index: int) -> PycudaDriver:
        try:
            driver.init()
            count = driver.Device.count()
            if index >= count:
                raise no_gpu_error(f"{DEVICE_ENV}={index} but the CUDA driver sees {count} "
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
            raise no_gpu_error(f"the CUDA driver could not start ({exc})") from exc
        return cls(driver, device, context)

    def _call(self, what: str, action, *args):
        try:
            return action(*args)
        except self.driver.Error as exc:
            raise DriverError(f"{what} failed: {exc}") from exc

    def ensure_current(self) -> None:
        if self.driver.Context.get_current() is None:
            self.context.push()

    def load_module(self, ptx: str | bytes):
        return self._call("loading the module", self.driver.module_from_buffer,
                          ptx if isinstance(ptx, bytes) else ptx.encode() + b"\0")

    def get_function(self, module, symbol: str):
        function = self._call(f"finding {symbol}", module.get_function, symbol)
        function.layout = None
        return function

    def function_attribute(self, function, name: str) -> int:
        return int(function.get_attribute(getattr(self.driver.function_attribute,
                                                  _ATTRIBUTES[name])))

    def set_dynamic_shared(self, function, nbytes: int) -> None:
        self._call("allowing dynamic shared memory", function.set_attribute,
                   self.driver.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes)

    def alloc(self, nbytes: int) -> int:
        allocation = self._call("cuMemAlloc", self.driver.mem_alloc, nbytes)
        pointer = int(allocation)
        self._allocations[pointer] = allocation
        return pointer

    def free(self, pointer: int) -> None:
        allocation = self._allocations.pop(pointer, None)
        if allocation is not None:
            self._call("cuMemFree", allocation.free)

    def copy_to_device(self, pointer: int, host: np.ndarray) -> None:
        self._call("cuMemcpyHtoD", self.driver.memcpy_htod, pointer, host)

    def copy_to_host(self, host: np.ndarray, pointer: int) -> None:
        self._call("cuMemcpyDtoH", self.driver.memcpy_dtoh, host, pointer)

    def copy_on_device(self, target: int, source: int, nbytes: int) -> None:
        self._call("cuMemcpyDtoD", self.driver.memcpy_dtod, target, source, nbytes)

    def launch(self, function, launch, layout: str, values) -> None:
        if function.layout != layout:
            function.prepare(layout)
            function.layout = layout
        self._call("cuLaunchKernel", lambda: function.prepared_call(
            launch.grid, launch.block, *values, shared_size=launch.shared))

    def synchronize(self) -> None:
        self._call("cuCtxSynchronize", self.driver.Context.synchronize)

    def new_event(self):
        return self._call("cuEventCreate", self.driver.Event)

    def record(self, event) -> None:
        self._call("cuEventRecord", event.record)

    def wait(self, event) -> None:
        self._call("cuEventSynchronize", event.synchronize)

    def elapsed(self, start, end) -> float:
        return self._call("cuEventElapsedTime", end.time_since, start) * 1e-3

    def device_attribute(self, name: str) -> int:
        attribute = getattr(self.driver.device_attribute, name.upper(), None)
        if attribute is None:  # removed from this version of pycuda
            raise DriverError(f"cuDeviceGetAttribute: no attribute {name} here")
        return int(self._call("cuDeviceGetAttribute", self.device.get_attribute, attribute))

    def pci_bus_id(self) -> str:
        return str(self._call("cuDeviceGetPCIBusId", self.device.pci_bus_id))

    def memset(self, pointer: int, nbytes: int) -> None:
        self._call("cuMemsetD8Async", self.driver.memset_d8_async, pointer, 0, nbytes)


def _release(driver) -> None:
    try:
        driver.Context.pop()
    except Exception:  # the interpreter is ending: nothing left to do
        pass
