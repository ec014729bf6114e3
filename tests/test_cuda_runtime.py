"""The CUDA runtimes (cuda-bindings and pycuda): choosing one, the one-line error without a
GPU, argument packing, device arrays, and launches.

Without a GPU, launchers run on a stand-in for ``cuda.bindings.driver`` whose "device
memory" is host memory: the kernels are compiled for real, and the stand-in's kernels read
their parameters through the very pointer array the runtime hands to ``cuLaunchKernel``.
The tests under "on a real GPU" run once per runtime and skip, saying which is missing
("needs a GPU ..." or "needs pycuda ..."), where a GPU or that runtime is absent.
"""

from __future__ import annotations

import ctypes
import enum
import importlib.util
import os
import struct
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import pytest_r3 as r3
from pytest_r3.backends import forget_backend, get_backend
from pytest_r3.backends.cuda import CUDABackend, toolchain
from pytest_r3.backends.cuda import runtime as cuda_runtime
from pytest_r3.backends.cuda.gpu_timing import WARMUP_LAUNCHES
from pytest_r3.backends.cuda.runtime_bindings import BindingsDriver
from pytest_r3.errors import BackendError, KernelFault, MissingExtraError
from pytest_r3.model.launch import cdiv
from pytest_r3.model.signature import Param, Signature

REPO = Path(__file__).resolve().parent.parent
CUDA_DIR = REPO / "example_project" / "exampleproj" / "cuda"


# -- choosing a runtime ------------------------------------------------------------------------
def test_the_runtime_is_chosen_by_the_environment(monkeypatch):
    monkeypatch.setenv(cuda_runtime.RUNTIME_ENV, "pycuda")
    assert cuda_runtime.selected_name() == "pycuda"
    monkeypatch.setenv(cuda_runtime.RUNTIME_ENV, " CUDA-Bindings ")
    assert cuda_runtime.selected_name() == "cuda-bindings"
    monkeypatch.setenv(cuda_runtime.RUNTIME_ENV, "numba")
    with pytest.raises(BackendError, match=r"PYTEST_R3_CUDA_RUNTIME='numba' is not a CUDA "
                       "runtime; use one of cuda-bindings, pycuda"):
        cuda_runtime.selected_name()
    assert "is not a CUDA runtime" in cuda_runtime.unavailable_reason()
    assert cuda_runtime.unavailable_reason("numba") == ("no CUDA runtime named 'numba'; use one "
                                                        "of cuda-bindings, pycuda")


def test_unset_the_first_importable_runtime_is_chosen(monkeypatch):
    from pytest_r3.backends.cuda import runtime_bindings as cuda_runtime_bindings
    from pytest_r3.backends.cuda import runtime_pycuda as cuda_runtime_pycuda

    monkeypatch.delenv(cuda_runtime.RUNTIME_ENV, raising=False)
    monkeypatch.setattr(cuda_runtime_bindings, "importable", lambda: False)
    monkeypatch.setattr(cuda_runtime_pycuda, "importable", lambda: True)
    assert cuda_runtime.selected_name() == "pycuda"
    monkeypatch.setattr(cuda_runtime_pycuda, "importable", lambda: False)
    assert cuda_runtime.selected_name() == "cuda-bindings"  # names the default's extra
    monkeypatch.setattr(cuda_runtime_bindings, "importable", lambda: True)
    monkeypatch.setattr(cuda_runtime_pycuda, "importable", lambda: True)
    assert cuda_runtime.selected_name() == "cuda-bindings"


@pytest.mark.skipif(importlib.util.find_spec("pycuda") is not None,
                    reason="pycuda is installed here: its absence cannot be shown")
def test_a_missing_runtime_package_names_its_extra(monkeypatch, request):
    monkeypatch.setenv(cuda_runtime.RUNTIME_ENV, "pycuda")
    monkeypatch.setenv("PYTEST_R3_CUDA_EMULATION", "0")  # else it runs in emulation
    forget_backend("cuda")
    request.addfinalizer(lambda: forget_backend("cuda"))
    kernel = r3.kernel(CUDA_DIR / "saxpy.cu", entry="saxpy", backend="cuda", name="nopycuda",
                       tune={"BLOCK": [64]}, launch=lambda args, t: {"grid": 1})
    x = np.ones(4, np.float32)
    with pytest.raises(MissingExtraError, match=r'through pycuda needs the pycuda package.*'
                       r'pip install "pytest-r3\[pycuda\]"'):
        kernel(4, 1.0, x, x.copy())
    assert isinstance(MissingExtraError("x"), ImportError)


@pytest.mark.skipif(importlib.util.find_spec("cuda.bindings") is None,
                    reason="cuda-bindings is not installed")
def test_cuda_bindings_imports_and_says_in_one_line_that_there_is_no_gpu():
    """In a child process (the runtime is started once per process): the real package, the
    real driver (or its absence)."""
    code = ("import pytest_r3 as r3, numpy as np\n"
            "from pytest_r3.backends.cuda import runtime as cuda_runtime\n"
            "reason = cuda_runtime.unavailable_reason('cuda-bindings')\n"
            "print('REASON', reason)\n"
            "if reason:\n"
            "    k = r3.kernel('extern \"C\" __global__ void f(float *p) { p[0] = 1; }',"
            " entry='f', backend='cuda', launch={'grid': 1, 'block': 1})\n"
            "    try:\n"
            "        k(np.zeros(1, np.float32))\n"
            "    except r3.R3Error as exc:\n"
            "        print('ERROR', type(exc).__name__, exc)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=300, cwd=REPO,
                            env={**os.environ, "PYTEST_R3_CUDA_EMULATION": "0",
                                 cuda_runtime.RUNTIME_ENV: "cuda-bindings"})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    if "REASON None" in lines:
        pytest.skip("a GPU is usable here: the no-GPU error cannot be shown")
    reason = next(line for line in lines if line.startswith("REASON "))
    error = next(line for line in lines if line.startswith("ERROR "))
    assert reason.startswith("REASON no usable CUDA GPU: ")
    assert reason.endswith("CUDA kernels need a GPU (or the emulation mode, see docs/cuda.md)")
    assert ("libcuda.so.1" in reason) or ("cuInit returned CUDA_ERROR_" in reason)
    assert error == "ERROR BackendError " + reason[len("REASON "):]


# -- packing and device arrays -----------------------------------------------------------------
CTYPES = {"int32": "int", "float32": "float", "float16": "__half", "float128": "long double"}


def signature(*params):
    return Signature("k", [Param(name, CTYPES[dtype] + (" *" if pointer else ""), dtype, pointer,
                                 pointer and written)
                           for name, dtype, pointer, written in params], None)


def test_parameters_are_packed_at_their_natural_alignment():
    saxpy = signature(("n", "int32", False, False), ("a", "float32", False, False),
                      ("x", "float32", True, False), ("y", "float32", True, True))
    layout = cuda_runtime.parameter_layout(saxpy, "saxpy")
    assert layout == "ifPP"
    assert cuda_runtime.parameter_offsets(layout) == ([0, 4, 8, 16], 24)
    # a pointer after a 4-byte scalar starts at 8; a double after a bool at 8; a short at 2
    assert cuda_runtime.parameter_offsets("iP") == ([0, 8], 16)
    assert cuda_runtime.parameter_offsets("?d") == ([0, 8], 16)
    assert cuda_runtime.parameter_offsets("BhBq") == ([0, 2, 4, 8], 16)
    packed = cuda_runtime.pack_parameters("ifPP", [7, 1.5, 0x1000, 0xFFFF_0000_1000])
    assert len(packed) == 24
    assert struct.unpack_from("=i", packed, 0)[0] == 7
    assert struct.unpack_from("=f", packed, 4)[0] == 1.5
    assert struct.unpack_from("=QQ", packed, 8) == (0x1000, 0xFFFF_0000_1000)
    with pytest.raises(r3.LaunchError, match="3 value"):
        cuda_runtime.pack_parameters("ifPP", [1, 2.0, 3])
    half = signature(("h", "float16", False, False), ("n", "int32", False, False))
    assert cuda_runtime.parameter_offsets(cuda_runtime.parameter_layout(half, "k")) == ([0, 4], 8)
    assert cuda_runtime.pack_parameters("ei", [1.5, 3])[:2] == np.float16(1.5).tobytes()
    with pytest.raises(r3.DeclarationError, match=r"scalar parameter\(s\) long double q cannot "
                       "be passed to a CUDA kernel here; pass them through an array"):
        cuda_runtime.parameter_layout(signature(("q", "float128", False, False)), "k")


class CupyLike:
    """What CuPy, PyTorch and Numba arrays show: the CUDA array interface (version 3)."""

    def __init__(self, address, shape, typestr="<f4", strides=None, readonly=False):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "version": 3,
                                         "data": (address, readonly), "strides": strides}


def test_device_arrays_are_read_through_the_cuda_array_interface():
    info = cuda_runtime.device_array_info
    assert info(CupyLike(0x7000, (4, 5)), "x") == (0x7000, np.dtype(np.float32), (4, 5), False)
    assert info(CupyLike(0x7000, (4, 5), strides=(20, 4)), "x")[2] == (4, 5)  # explicit C
    assert info(CupyLike(0, (0,), readonly=True), "x") == (0, np.dtype(np.float32), (0,), True)
    with pytest.raises(r3.LaunchError, match=r"x: the device array is not C-contiguous "
                       r"\(strides \(4, 16\)\)"):
        info(CupyLike(0x7000, (4, 5), strides=(4, 16)), "x")
    gpuarray = SimpleNamespace(gpudata=0x9000, dtype=np.float64, shape=(3,),
                               flags=SimpleNamespace(c_contiguous=True))
    assert info(gpuarray, "y") == (0x9000, np.dtype(np.float64), (3,), False)
    assert cuda_runtime.is_device_array(gpuarray) and not cuda_runtime.is_device_array(
        np.zeros(1))


# -- launchers on a stand-in for cuda.bindings.driver ----------------------------------------
class CUresult(enum.IntEnum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_INVALID_VALUE = 1
    CUDA_ERROR_NO_DEVICE = 100
    CUDA_ERROR_NO_BINARY_FOR_GPU = 209
    CUDA_ERROR_ILLEGAL_ADDRESS = 700
    CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701


ERROR_TEXT = {CUresult.CUDA_ERROR_NO_DEVICE: "no CUDA-capable device is detected",
              CUresult.CUDA_ERROR_ILLEGAL_ADDRESS: "an illegal memory access was encountered",
              CUresult.CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: "too many resources requested for "
                                                           "launch",
              CUresult.CUDA_ERROR_INVALID_VALUE: "invalid argument",
              CUresult.CUDA_ERROR_NO_BINARY_FOR_GPU: "no kernel image is available for "
                                                     "execution on the device"}
OK = CUresult.CUDA_SUCCESS


class FakeCU:
    """The part of ``cuda.bindings.driver`` the runtime calls: every function returns
    ``(CUresult, values...)``. Device memory is host memory (numpy buffers, addressed by
    their real addresses), so copies are memmoves; a kernel is a Python function given the
    launch and the parameter-pointer array's address, as cuLaunchKernel is."""

    CUresult = CUresult
    CUdevice_attribute = SimpleNamespace(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR="major",
                                         CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR="minor",
                                         CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT="sms",
                                         CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE="l2",
                                         CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE="memory_khz",
                                         CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH="bus")
    # an H100 SXM's: 50 MiB of L2, HBM3 at 2619 MHz over 5120 bits (3.35 TB/s)
    ATTRIBUTES = {"major": 9, "minor": 0, "sms": 132, "l2": 50 << 20, "memory_khz": 2_619_000,
                  "bus": 5120}
    CUfunction_attribute = SimpleNamespace(
        CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK="max_threads",
        CU_FUNC_ATTRIBUTE_NUM_REGS="registers",
        CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES="dynamic_shared")
    CUevent_flags = SimpleNamespace(CU_EVENT_DEFAULT=0)

    def __init__(self, kernels, devices=1):
        self.kernels = kernels
        self.devices = devices
        self.memory: dict[int, np.ndarray] = {}
        self.context = 0
        self.launches: list[tuple] = []
        self.shared_allowed: dict[str, int] = {}
        self.copies = 0
        self.sticky = OK
        self.clock = 0.0
        self.events: set[int] = set()
        self.ops: list[tuple] = []  # memsets, event records and launches, in stream order
        self.images: list[str] = []  # "ptx" or "cubin", per module loaded

    # errors, device, context
    def cuGetErrorName(self, result):
        return OK, CUresult(result).name.encode()

    def cuGetErrorString(self, result):
        return OK, ERROR_TEXT[CUresult(result)].encode()

    def cuInit(self, flags):
        return (OK,) if self.devices else (CUresult.CUDA_ERROR_NO_DEVICE,)

    def cuDeviceGetCount(self):
        return OK, self.devices

    def cuDeviceGet(self, index):
        return OK, index

    def cuCtxGetCurrent(self):
        return OK, self.context

    def cuDevicePrimaryCtxRetain(self, device):
        return OK, 0xC0

    def cuDevicePrimaryCtxRelease(self, device):
        return (OK,)

    def cuCtxSetCurrent(self, context):
        self.context = context
        return (OK,)

    def cuCtxGetDevice(self):
        return OK, 0

    def cuDeviceGetAttribute(self, attribute, device):
        return OK, self.ATTRIBUTES[attribute]

    def cuDeviceGetPCIBusId(self, length, device):
        return OK, b"0000:41:00.0\0"

    def cuDeviceGetName(self, length, device):
        return OK, b"Fake H100\0\0\0"

    # modules and functions
    def cuModuleLoadData(self, address):
        if ctypes.string_at(address, 4) == b"\x7fELF":  # a cubin: an ELF file with no NULs
            header = ctypes.string_at(address, 64)  # to end it; its header gives its size
            section_table, = struct.unpack_from("<Q", header, 40)
            entry_size, count = struct.unpack_from("<HH", header, 58)
            image = ctypes.string_at(address, section_table + entry_size * count)
            flags, = struct.unpack_from("<I", header, 48)
            if (flags >> 8) & 0xFF != self.ATTRIBUTES["major"] * 10 + self.ATTRIBUTES["minor"]:
                return (CUresult.CUDA_ERROR_NO_BINARY_FOR_GPU, None)  # another GPU's code
            self.images.append("cubin")
            return OK, image.decode("latin-1")
        text = ctypes.string_at(address).decode()
        assert ".entry" in text
        self.images.append("ptx")
        return OK, text

    def cuModuleGetFunction(self, module, name):
        if f".entry {name.decode()}(" not in module \
                and f".text.{name.decode()}\0" not in module:  # the cubin's code section
            return (CUresult.CUDA_ERROR_INVALID_VALUE, None)
        return OK, name.decode()

    def cuFuncGetAttribute(self, attribute, function):
        return OK, {"max_threads": 1024, "registers": 16}[attribute]

    def cuFuncSetAttribute(self, function, attribute, value):
        assert attribute == "dynamic_shared"
        self.shared_allowed[function] = value
        return (OK,)

    # memory
    def cuMemAlloc(self, nbytes):
        buffer = np.zeros(nbytes, np.uint8)
        address = buffer.ctypes.data
        self.memory[address] = buffer
        return OK, address

    def cuMemFree(self, address):
        self.memory.pop(int(address))
        return (OK,)

    def _check(self, address, nbytes):
        base = max((a for a in self.memory if a <= address), default=None)
        return base is not None and address + nbytes <= base + self.memory[base].nbytes

    def cuMemcpyHtoD(self, target, source, nbytes):
        assert self._check(target, nbytes)
        self.copies += 1
        ctypes.memmove(target, source, nbytes)
        return (OK,)

    def cuMemcpyDtoH(self, target, source, nbytes):
        assert self._check(source, nbytes)
        self.copies += 1
        ctypes.memmove(target, source, nbytes)
        return (OK,) if self.sticky == OK else (self.sticky,)

    def cuMemsetD8Async(self, target, value, nbytes, stream):
        assert self._check(target, nbytes) and stream == 0
        ctypes.memset(target, value, nbytes)
        self.ops.append(("memset", nbytes))
        return (OK,)

    def cuMemcpyDtoD(self, target, source, nbytes):
        assert self._check(target, nbytes) and self._check(source, nbytes)
        ctypes.memmove(target, source, nbytes)
        return (OK,)

    # launches and events
    def cuLaunchKernel(self, function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        assert self.context and extra == 0 and stream == 0
        if shared > self.shared_allowed.get(function, 48 * 1024):
            return (CUresult.CUDA_ERROR_INVALID_VALUE,)
        self.launches.append((function, (gx, gy, gz), (bx, by, bz), shared))
        self.ops.append(("launch",))
        pointers = ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p))
        result = self.kernels[function](self, pointers)
        if result is not None:
            self.sticky = result
        self.clock += 0.25
        return (OK,)

    def cuCtxSynchronize(self):
        return (self.sticky,)

    def cuEventCreate(self, flags):
        handle = len(self.events) + 1
        self.events.add(handle)
        return OK, handle

    def cuEventDestroy(self, handle):
        self.events.discard(handle)
        return (OK,)

    def cuEventRecord(self, handle, stream):
        assert stream == 0  # the launch stream
        setattr(self, f"event{handle}", self.clock)
        self.ops.append(("record", handle))
        return (OK,)

    def cuEventSynchronize(self, handle):
        return (OK,)

    def cuEventElapsedTime(self, start, end):
        return OK, (getattr(self, f"event{end}") - getattr(self, f"event{start}")) * 1e3

    # helpers for the fake kernels
    def view(self, address, dtype, count):
        if not self._check(address, np.dtype(dtype).itemsize * count):
            return None
        return np.ctypeslib.as_array((ctypes.c_char * (np.dtype(dtype).itemsize * count))
                                     .from_address(address)).view(dtype)


def param(pointers, index, ctype):
    return ctype.from_address(pointers[index]).value


def fake_saxpy(cu, pointers):
    """saxpy(int n, float a, const float *x, float *y), read through the pointer array."""
    n = param(pointers, 0, ctypes.c_int)
    a = np.float32(param(pointers, 1, ctypes.c_float))
    x = cu.view(param(pointers, 2, ctypes.c_void_p), np.float32, n)
    y = cu.view(param(pointers, 3, ctypes.c_void_p), np.float32, n)
    if x is None or y is None:
        return CUresult.CUDA_ERROR_ILLEGAL_ADDRESS
    y[:] = a * x + y
    return None


@pytest.fixture
def fake_cu(monkeypatch):
    """CUDA kernels run through the cuda-bindings runtime on FakeCU."""
    cu = FakeCU({"_Z5saxpyifPKfPf": fake_saxpy})
    runtime = cuda_runtime.Runtime(BindingsDriver.start(cu, 0))
    monkeypatch.setattr(cuda_runtime, "runtime", lambda name=None: runtime)
    monkeypatch.delenv("PYTEST_R3_CUDA_EMULATION", raising=False)
    forget_backend("cuda")  # chosen anew: the GPU backend, on the stand-in GPU
    monkeypatch.setattr(get_backend("cuda").chosen, "_arch", "sm_90")
    yield cu
    forget_backend("cuda")


def declare_saxpy(name, **options):
    options.setdefault("tune", {"BLOCK": [256, 128], "ITEMS": [1, 4]})
    options.setdefault("launch", lambda args, t: {"grid": cdiv(args["n"],
                                                               t["BLOCK"] * t["ITEMS"])})
    return r3.kernel(CUDA_DIR / "saxpy.cu", entry="saxpy", backend="cuda", name=name,
                     **options)


def test_the_primary_context_is_taken_and_the_device_described(fake_cu):
    driver = cuda_runtime.runtime().driver
    assert (driver.arch, driver.device_name, driver.multiprocessors) == ("sm_90", "Fake H100",
                                                                         132)
    assert fake_cu.context == 0xC0
    fake_cu.context = 0  # a new thread: no context current
    driver.ensure_current()
    assert fake_cu.context == 0xC0


def test_no_device_and_a_bad_device_index_are_one_line_errors():
    with pytest.raises(BackendError) as caught:
        BindingsDriver.start(FakeCU({}, devices=0), 0)
    assert str(caught.value) == (
        "no usable CUDA GPU: cuInit returned CUDA_ERROR_NO_DEVICE (no CUDA-capable device is "
        "detected); CUDA kernels need a GPU (or the emulation mode, see docs/cuda.md)")
    with pytest.raises(BackendError, match="PYTEST_R3_CUDA_DEVICE=3 but the CUDA driver sees 1"):
        BindingsDriver.start(FakeCU({}), 3)


def test_numpy_arguments_go_through_the_parameter_pointers(fake_cu):
    saxpy = declare_saxpy("bindings_saxpy")
    x, y = np.arange(1000, dtype=np.float32), np.ones(1000, np.float32)
    saxpy(1000, 2.0, x, y)
    np.testing.assert_array_equal(y, 2 * np.arange(1000, dtype=np.float32) + 1)
    assert fake_cu.launches[-1] == ("_Z5saxpyifPKfPf", (4, 1, 1), (256, 1, 1), 0)
    assert fake_cu.copies == 3 and fake_cu.memory == {}  # x in, y in and out; all freed
    saxpy.configure(BLOCK=128, ITEMS=4)(1000, 0.5, x, y)
    assert fake_cu.launches[-1][1:3] == ((2, 1, 1), (128, 1, 1))


def test_c_array_parameters_are_checked_against_their_bounds_before_launch(fake_cu,
                                                                           tmp_path):
    source = tmp_path / "scale2d.cu"
    source.write_text("__global__ void scale2d(int ni, int nj, float a[ni][nj]) {\n"
                      "  int i = blockIdx.x, j = threadIdx.x;\n"
                      "  if (i < ni && j < nj) a[i][j] *= 2.0f;\n}\n")
    kernel = r3.kernel(source, entry="scale2d", backend="cuda",
                       launch=lambda args, t: {"grid": args["ni"], "block": args["nj"]})
    with pytest.raises(r3.LaunchError, match=r"shape \(4, 5\) does not match the declared "
                                          r"bounds, which give \(3, 5\)"):
        kernel(3, 5, np.ones((4, 5), np.float32))
    assert fake_cu.launches == []  # refused before anything reached the device


def test_device_arrays_pass_as_pointers_without_copies(fake_cu):
    runtime = cuda_runtime.runtime()
    saxpy = declare_saxpy("bindings_device")
    x = runtime.to_device(np.full(100, 3, np.float32))
    y = runtime.to_device(np.ones(100, np.float32))
    copies = fake_cu.copies
    saxpy(100, 2.0, x, CupyLike(y.pointer, (100,)))
    assert fake_cu.copies == copies
    assert (y.get() == 7).all() and (get_backend("cuda").to_host(y) == 7).all()
    twin = y.copy()
    assert twin.pointer != y.pointer and (twin.get() == 7).all()
    with pytest.raises(r3.LaunchError, match=r"argument 4 \(float \*y\).*read-only"):
        saxpy(100, 2.0, x, CupyLike(y.pointer, (100,), readonly=True))
    with pytest.raises(r3.LaunchError, match="expected dtype float32, got a device array of "
                       "float64"):
        saxpy(100, 2.0, x, CupyLike(y.pointer, (50,), typestr="<f8"))
    for array in (x, y, twin):
        array.free()
    assert fake_cu.memory == {}


def test_more_than_48_kib_of_dynamic_shared_memory_is_asked_for(fake_cu):
    saxpy = declare_saxpy("bindings_shared", launch={"grid": 1, "block": 32,
                                                     "shared": lambda args, t: 100 * 1024})
    x = np.ones(32, np.float32)
    saxpy(32, 1.0, x, x.copy())
    assert fake_cu.shared_allowed == {"_Z5saxpyifPKfPf": 100 * 1024}
    assert fake_cu.launches[-1][3] == 100 * 1024


def test_timing_uses_events_and_faults_are_kernel_faults(fake_cu):
    launcher = declare_saxpy("bindings_time").build()
    x = np.ones(64, np.float32)
    assert launcher.time([64, 1.0, x, x.copy()], 4) == [0.25] * 4
    flush = cuda_runtime.runtime()._flush
    assert list(fake_cu.memory) == [flush.pointer]  # only the L2 flush buffer stays
    fake_cu.kernels["_Z5saxpyifPKfPf"] = lambda cu, pointers: \
        CUresult.CUDA_ERROR_ILLEGAL_ADDRESS
    with pytest.raises(KernelFault, match=r"\(grid \(1, 1, 1\), block \(256, 1, 1\)\) faulted "
                       r"on the GPU: cuCtxSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS \(an "
                       "illegal memory access was encountered\\)"):
        launcher(64, 1.0, x, x.copy())
    assert list(fake_cu.memory) == [flush.pointer]


def test_each_timed_launch_is_flushed_warmed_and_timed_alone_on_the_launch_stream(fake_cu):
    """Warm-up launches first (once per loaded variant), then per launch: a write over
    twice the L2 (from the device's attribute), a start event, the launch, an end event."""
    launcher = declare_saxpy("bindings_flush").build()
    x = np.ones(64, np.float32)
    assert launcher.time([64, 1.0, x, x.copy()], 2) == [0.25, 0.25]
    flushed = 2 * FakeCU.ATTRIBUTES["l2"]
    ops = [op[0] for op in fake_cu.ops]
    assert ops == ["launch"] * WARMUP_LAUNCHES + ["memset", "record", "launch", "record"] * 2
    assert {op for op in fake_cu.ops if op[0] == "memset"} == {("memset", flushed)}
    fake_cu.ops.clear()
    launcher.time([64, 1.0, x, x.copy()], 1)  # warm already: no more warm-up launches
    assert [op[0] for op in fake_cu.ops] == ["memset", "record", "launch", "record"]


def test_the_device_facts_give_l2_size_and_peak_bandwidth(fake_cu):
    facts = cuda_runtime.runtime().facts()
    assert (facts.l2_bytes, facts.memory_clock_khz, facts.bus_width_bits) == (
        50 << 20, 2_619_000, 5120)
    assert facts.peak_bandwidth == pytest.approx(3.352e12, rel=1e-3)
    assert facts.flush_bytes == 100 << 20 and facts.source == "device attributes"
    clocks = cuda_runtime.runtime().clocks()  # NVML finds no such GPU here
    assert not clocks.read and clocks.reason


def test_ptx_the_driver_refuses_is_a_compile_error(fake_cu):
    runtime = cuda_runtime.runtime()
    with pytest.raises(r3.CompileError, match=r"would not load the PTX \(cuModuleGetFunction "
                       r"failed: CUDA_ERROR_INVALID_VALUE.*PYTEST_R3_CUDA_ARCH=sm_90"):
        runtime.launcher(".version 7.8\n.target sm_90\n.entry other(\n", "saxpy",
                         signature(("n", "int32", False, False)), None, {}, None, "k")


@pytest.mark.skipif(toolchain.find_tool("ptxas") is None,
                    reason="ptxas (CUDA toolkit) is not installed: no cubin to load")
def test_the_cubin_ptxas_made_is_loaded_when_it_is_for_this_gpu(fake_cu):
    """The driver then compiles nothing: the code launched is the code ptxas reported on
    (and the compiled-code cache kept). A cubin for another GPU, which the driver refuses,
    leaves the PTX to be loaded."""
    saxpy = declare_saxpy("cubin_saxpy")
    x, y = np.arange(1000, dtype=np.float32), np.ones(1000, np.float32)
    saxpy(1000, 2.0, x, y)
    np.testing.assert_array_equal(y, 2 * x + 1)
    assert fake_cu.images == ["cubin"]
    assert saxpy.build().diagnostics["loaded"] == "cubin"

    backend = get_backend("cuda")
    ir = backend.compile(saxpy.source, saxpy.baseline.macro_dict)
    for arch, image in (("sm_90", "cubin"), ("sm_80", "ptx")):
        build = CUDABackend(arch).compile_ptx(ir, "saxpy", r3.Pipeline())
        assert build.cubin is not None
        launcher = backend.load_ptx(build.ptx, build.symbol, saxpy.signature, saxpy.launch,
                                    {"BLOCK": 256, "ITEMS": 1}, "k", build)
        assert fake_cu.images[-1] == image and launcher.diagnostics["loaded"] == image


# -- on a real GPU, under each runtime -----------------------------------------------------
@pytest.fixture(params=list(cuda_runtime.RUNTIMES))
def gpu(request, monkeypatch):
    """The runtime named by the parameter, selected for this test; skips naming what is
    missing: "needs <package>" or "needs a GPU"."""
    from importlib import import_module

    name = request.param
    module = import_module(cuda_runtime.RUNTIMES[name][0])
    if not module.importable():
        pytest.skip(f"needs {module.PACKAGE} (runtime {name}): not installed")
    reason = cuda_runtime.unavailable_reason(name)
    if reason is not None:
        pytest.skip(f"needs a GPU (runtime {name}): {reason}")
    monkeypatch.setenv(cuda_runtime.RUNTIME_ENV, name)
    return cuda_runtime.runtime(name)


_count = iter(range(1_000_000))


def fresh(entry, **options):
    """An example kernel declared afresh, so its launchers come from the runtime under test."""
    index = next(_count)
    if entry == "saxpy":
        return declare_saxpy(f"gpu_saxpy_{index}", **options)
    return r3.kernel(CUDA_DIR / "matmul.cu", entry="matmul_tiled", backend="cuda",
                     name=f"gpu_matmul_{index}", tune={"TILE": [16, 8, 32]},
                     launch={"grid": lambda args, t: (cdiv(args["n"], t["TILE"]),
                                                      cdiv(args["m"], t["TILE"])),
                             "block": lambda t: (t["TILE"], t["TILE"])}, **options)


def test_gpu_numpy_arguments_match_numpy(gpu):
    rng = np.random.default_rng(0)
    saxpy = fresh("saxpy")
    for n in (1, 1000, 100_003):
        x, y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
        expected = np.float32(1.5) * x + y
        saxpy(n, 1.5, x, y)
        np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-6)
    matmul = fresh("matmul")
    a = rng.standard_normal((33, 17), dtype=np.float32)
    b = rng.standard_normal((17, 65), dtype=np.float32)
    c = np.full((33, 65), np.nan, np.float32)
    matmul(33, 65, 17, a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    assert get_backend("cuda").target_name().startswith(f"cuda-{gpu.arch}-")


def test_gpu_device_arrays_and_timing(gpu):
    saxpy = fresh("saxpy")
    x = gpu.to_device(np.arange(4096, dtype=np.float32))
    y = gpu.to_device(np.ones(4096, np.float32))
    saxpy(4096, 2.0, x, y)
    np.testing.assert_array_equal(y.get(), 2 * np.arange(4096, dtype=np.float32) + 1)
    times = get_backend("cuda").time(saxpy.build(), [4096, 2.0, x, y], 3)
    assert len(times) == 3 and all(0 < t < 1 for t in times)
    x.free()
    y.free()


def test_gpu_timing_is_bounded_by_the_speed_of_light_and_clocks_are_read(gpu):
    """A saxpy over 64 MiB per array cannot beat its bytes / peak bandwidth; the L2 flush
    buffer is at least the L2's size; NVML reads the clocks where nvidia-ml-py is here."""
    facts = gpu.facts()
    assert facts.l2_bytes > 0 and facts.flush_bytes >= facts.l2_bytes
    assert facts.peak_bandwidth > 1e11, facts
    n = 16 << 20
    x = gpu.to_device(np.ones(n, np.float32))
    y = gpu.to_device(np.ones(n, np.float32))
    times = get_backend("cuda").time(fresh("saxpy").build(), [n, 2.0, x, y], 5)
    assert min(times) >= 3 * 4 * n / facts.peak_bandwidth, (times, facts)
    clocks = gpu.clocks()
    if importlib.util.find_spec("pynvml") is not None:
        assert clocks.read and clocks.sm_mhz > 0 and clocks.memory_mhz > 0, clocks
    else:
        assert "nvidia-ml-py is not installed" in clocks.reason
    x.free()
    y.free()


def test_gpu_cupy_arrays_pass_through(gpu):
    cupy = pytest.importorskip("cupy", reason="needs CuPy: not installed")
    saxpy = fresh("saxpy")
    x = cupy.arange(5000, dtype=cupy.float32)
    y = cupy.ones(5000, dtype=cupy.float32)
    saxpy(5000, 3.0, x, y)
    np.testing.assert_array_equal(cupy.asnumpy(y), 3 * np.arange(5000, dtype=np.float32) + 1)
    with pytest.raises(r3.LaunchError, match="not C-contiguous"):
        saxpy(2500, 3.0, x[::2], y[::2])
    with pytest.raises(r3.LaunchError, match="expected dtype float32"):
        saxpy(10, 3.0, x, cupy.ones(10, dtype=cupy.float64))


def test_gpu_torch_tensors_pass_through(gpu):
    torch = pytest.importorskip("torch", reason="needs PyTorch: not installed")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch was built without CUDA")
    saxpy = fresh("saxpy")
    x = torch.arange(3000, dtype=torch.float32, device="cuda")
    y = torch.ones(3000, dtype=torch.float32, device="cuda")
    saxpy(3000, 2.0, x, y)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(y.cpu().numpy(), 2 * np.arange(3000, dtype=np.float32) + 1)


def test_gpu_dynamic_shared_memory_beyond_48_kib(gpu):
    source = ('extern "C" __global__ void rev(int n, const float *in, float *out) {\n'
              "  extern __shared__ float buffer[];\n"
              "  for (int i = threadIdx.x; i < n; i += blockDim.x) buffer[i] = in[i];\n"
              "  __syncthreads();\n"
              "  for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = buffer[n - 1 - i];\n"
              "}\n")
    n = 20_000  # 80 000 bytes of shared memory
    kernel = r3.kernel(source, entry="rev", backend="cuda", name=f"gpu_rev_{next(_count)}",
                       launch={"grid": 1, "block": 256, "shared": lambda args, t: 4 * args["n"]})
    data = np.random.default_rng(3).standard_normal(n, dtype=np.float32)
    out = np.zeros(n, np.float32)
    kernel(n, data, out)
    np.testing.assert_array_equal(out, data[::-1])


def test_gpu_an_illegal_address_is_a_kernel_fault(gpu):
    """In a child process: a fault leaves the CUDA context unusable."""
    code = (
        "import numpy as np, pytest_r3 as r3\n"
        "from pytest_r3.errors import KernelFault\n"
        "k = r3.kernel('extern \"C\" __global__ void f(float *p) { p[1 << 30] = 1.0f; }\\n',"
        " entry='f', backend='cuda', launch={'grid': 1, 'block': 1})\n"
        "try:\n"
        "    k(np.zeros(4, np.float32))\n"
        "except KernelFault as exc:\n"
        "    print('fault:', exc)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=300, cwd=REPO,
                            env={**os.environ,
                                 cuda_runtime.RUNTIME_ENV: gpu.name})
    assert "fault: kernel 'f' (grid (1, 1, 1), block (1, 1, 1)) faulted" in result.stdout, \
        result.stdout + result.stderr
