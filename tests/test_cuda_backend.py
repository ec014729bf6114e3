"""The CUDA backend: .cu -> NVPTX IR -> PTX without a GPU, ptxas checks where installed,
launch configurations, and launchers driven through a stand-in for pycuda's driver (the
runtimes themselves: tests/test_cuda_runtime.py).

Runs without a GPU. The tests that launch on a real GPU skip, saying why, unless a CUDA
runtime and a GPU are usable; ptxas and nvcc checks skip unless those tools are installed.
"""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import pytest_r3 as r3
from pytest_r3 import Pipeline
from pytest_r3.backends import forget_backend, get_backend
from pytest_r3.backends.cuda import CUDABackend, ptx_version
from pytest_r3.backends.cuda import runtime as cuda_runtime
from pytest_r3.backends.cuda import toolchain as cuda_tools
from pytest_r3.backends.cuda.runtime_pycuda import PycudaDriver
from pytest_r3.errors import KernelFault
from pytest_r3.model.launch import LaunchConfig, LaunchLimits, cdiv
from pytest_r3.replay import sandbox

REPO = Path(__file__).resolve().parent.parent
CUDA_DIR = REPO / "example_project" / "exampleproj" / "cuda"
NO_PTXAS = cuda_tools.find_tool("ptxas") is None
NO_NVCC = cuda_tools.find_tool("nvcc") is None
GPU_MISSING = cuda_runtime.unavailable_reason()
needs_ptxas = pytest.mark.skipif(NO_PTXAS, reason="ptxas (CUDA toolkit) is not installed")
needs_gpu = pytest.mark.skipif(GPU_MISSING is not None, reason=f"needs a GPU: {GPU_MISSING}")

# (entry, source, tunables, expected parameters: name, dtype, written)
EXAMPLES = {
    "saxpy": ("saxpy.cu", {"BLOCK": 256, "ITEMS": 1},
              [("n", "int32", False), ("a", "float32", False), ("x", "float32", False),
               ("y", "float32", True)]),
    "stencil2d": ("stencil2d.cu", {"BLOCK_X": 32, "BLOCK_Y": 8},
                  [("rows", "int32", False), ("cols", "int32", False),
                   ("in", "float32", False), ("out", "float32", True)]),
    "matmul_tiled": ("matmul.cu", {"TILE": 16},
                     [("m", "int32", False), ("n", "int32", False), ("k", "int32", False),
                      ("a", "float32", False), ("b", "float32", False),
                      ("c", "float32", True)]),
}
PIPELINES = {
    "default": Pipeline(),
    "level0": Pipeline(level=0),
    "loop-hints": Pipeline(unroll_count=4, vector_width=2, interleave_count=2),
    "no-vector-no-unroll": Pipeline(loop_vectorize=False, slp_vectorize=False,
                                    loop_unroll=False),
}


def source_of(entry: str):
    return r3.kernel(CUDA_DIR / EXAMPLES[entry][0], entry=entry, backend="cuda",
                     name=f"test_{entry}", launch={"grid": 1, "block": 1}).source


@pytest.fixture(scope="module", params=["sm_80", "sm_90"])
def backend(request):
    return CUDABackend(request.param)


# -- compiling ---------------------------------------------------------------------------------
@pytest.mark.parametrize("entry", EXAMPLES)
def test_examples_compile_to_ptx_under_several_pipelines(backend, entry):
    source = source_of(entry)
    ir = backend.compile(source, EXAMPLES[entry][1])
    assert 'target triple = "nvptx64-nvidia-cuda"' in ir
    for label, pipeline in PIPELINES.items():
        build = backend.compile_ptx(ir, entry, pipeline, entry)
        assert f".target {backend.arch}" in build.ptx, label
        assert f".entry {build.symbol}(" in build.ptx, label
        assert cuda_tools.ptx_entries(build.ptx) == [build.symbol], label
        assert "call" not in build.ptx or "__nv_" not in build.ptx, label


@pytest.mark.parametrize("entry", EXAMPLES)
def test_signature_is_read_from_the_ir(entry):
    signature = CUDABackend("sm_90").inspect(source_of(entry), entry, EXAMPLES[entry][1])
    assert signature.entry == entry and signature.return_dtype is None
    assert [(p.name, p.dtype, p.written) for p in signature.params] == EXAMPLES[entry][2]


def test_architectures_and_ptx_versions():
    assert [ptx_version(a) for a in ("sm_75", "sm_80", "sm_90", "sm_90a", "sm_100", "sm_120")] \
        == [78, 78, 78, 80, 86, 87]
    with pytest.raises(r3.ToolchainError, match="not of the form sm_80"):
        CUDABackend("compute_90")
    assert CUDABackend("sm_86").target_name().startswith("cuda-sm_86")


def test_mangled_kernels_are_found_by_name_and_overloads_refused():
    backend = CUDABackend("sm_80")
    source = source_of("saxpy")
    ir = backend.compile(source, {})
    assert backend.compile_ptx(ir, "saxpy", Pipeline()).symbol == "_Z5saxpyifPKfPf"
    overloaded = source.with_text("__global__ void f(float *p) { p[0] = 1; }\n"
                                  "__global__ void f(int *p) { p[0] = 1; }\n")
    with pytest.raises(r3.EntryNotFoundError, match=r"matches several kernels.*extern \"C\""):
        backend.inspect(overloaded, "f", {})
    with pytest.raises(r3.EntryNotFoundError, match=r"no __global__ function 'g'.*f, f"):
        backend.inspect(overloaded, "g", {})


def test_compile_errors_quote_the_file_and_line():
    source = source_of("saxpy").with_text("__global__ void k(float *p) {\n  p[0] = q;\n}\n")
    with pytest.raises(r3.CompileError, match=r"saxpy\.cu:2:\d+: error: use of undeclared"):
        CUDABackend("sm_80").compile(source, {})


def test_header_math_and_atomics_compile():
    text = """
    extern "C" __global__ void k(float *f, int *i, double *d, unsigned int *u) {
      int t = blockIdx.x * blockDim.x + threadIdx.x;
      f[t] = sqrtf(f[t]) + fmaf(f[t], 2.0f, 1.0f) + fabsf(f[t]) + fminf(f[t], 1.0f)
           + expf(f[t]) + logf(f[t] + 2.0f) + __shfl_down_sync(0xffffffffu, f[t], 1);
      d[t] = sqrt(d[t]) + fma(d[t], 2.0, 1.0) + floor(d[t]);
      atomicAdd(f, 1.0f); atomicAdd(i, 1); atomicMax(i, t); atomicCAS(i, 0, t);
      atomicAdd(d, 1.0); atomicOr(u, 1u); atomicExch(f + 1, 2.0f);
      __syncthreads(); __syncwarp(); __threadfence();
      i[t + 1] = min(t, 3) + gridDim.x + warpSize + __popc(u[0]);
    }
    """
    backend = CUDABackend("sm_90")
    source = source_of("saxpy").with_text(text)
    ir = backend.compile(source, {})
    assert sandbox.check_module(backend.parse(ir, "k")) == []
    build = backend.compile_ptx(ir, "k", Pipeline())
    assert "atom.global.add.f32" in build.ptx or "red.global.add.f32" in build.ptx
    assert "bar.sync" in build.ptx or "barrier.sync" in build.ptx


def test_libdevice_is_linked_when_installed(monkeypatch):
    if cuda_tools.find_libdevice() is None:
        pytest.skip("CUDA's libdevice is not installed")
    backend = CUDABackend("sm_90")
    source = source_of("saxpy").with_text(
        'extern "C" __global__ void k(float *x, double *y) {\n'
        "  x[threadIdx.x] = expf(x[threadIdx.x]); y[0] = exp(y[0]); }\n")
    ir = backend.compile(source, {})
    assert "declare" in ir and "@__nv_expf" in ir
    for pipeline in (Pipeline(), Pipeline(level=0)):
        build = backend.compile_ptx(ir, "k", pipeline)
        assert build.libdevice and "__nv_" not in build.ptx.replace("// ", "")
        assert ".extern .func" not in build.ptx


def test_without_libdevice_fast_math_is_used_and_double_exp_refused(monkeypatch):
    monkeypatch.setenv(cuda_tools.LIBDEVICE_ENV, "0")
    cuda_tools.find_libdevice.cache_clear()
    try:
        backend = CUDABackend("sm_80")
        source = source_of("saxpy").with_text(
            'extern "C" __global__ void k(float *x) { x[0] = expf(x[0]); }\n')
        build = backend.compile_ptx(backend.compile(source, {}), "k", Pipeline())
        assert "ex2.approx" in build.ptx and not build.libdevice
        double = source.with_text('extern "C" __global__ void k(double *x) { x[0] = exp(x[0]); }')
        with pytest.raises(r3.CompileError, match="needs CUDA's libdevice"):
            backend.compile(double, {})
    finally:
        cuda_tools.find_libdevice.cache_clear()


def test_sandbox_refuses_external_calls_but_not_shared_memory_or_libdevice():
    backend = CUDABackend("sm_80")
    source = source_of("saxpy").with_text(
        'extern "C" __device__ int system(const char *);\n'
        'extern "C" __device__ float __nv_expf(float);\n'
        "extern __shared__ float dynamic[];\n"
        'extern "C" __global__ void k(float *x) {\n'
        '  dynamic[threadIdx.x] = __nv_expf(x[0]); x[1] = system("true") + dynamic[0]; }\n')
    violations = sandbox.check_module(backend.parse(backend.compile(source, {}), "k"))
    assert [v.symbol for v in violations] == ["system"]


# -- ptxas and nvcc -------------------------------------------------------------------------
def test_ptxas_output_is_parsed():
    text = ("ptxas info    : 0 bytes gmem\n"
            "ptxas info    : Compiling entry function 'mm' for 'sm_90'\n"
            "ptxas info    : Function properties for mm\n"
            "    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n"
            "ptxas info    : Used 40 registers, used 1 barriers, 8192 bytes smem, "
            "400 bytes cmem[0]\n")
    assert cuda_tools.parse_ptxas_info(text) == {"mm": {
        "stack_bytes": 8, "spill_store_bytes": 4, "spill_load_bytes": 12, "registers": 40,
        "barriers": 1, "shared_bytes": 8192, "constant_bytes": 400}}


@needs_ptxas
@pytest.mark.parametrize("entry", EXAMPLES)
def test_ptxas_reports_registers_and_shared_memory(backend, entry):
    ir = backend.compile(source_of(entry), EXAMPLES[entry][1])
    info = backend.compile_ptx(ir, entry, Pipeline()).diagnostics
    assert info["ptxas"] == "ok"
    assert 0 < info["registers"] <= 255 and info["spill_store_bytes"] == 0
    assert info.get("shared_bytes", 0) == (2 * 16 * 16 * 4 if entry == "matmul_tiled" else 0)


@needs_ptxas
def test_shared_memory_follows_the_tile_macro():
    backend = CUDABackend("sm_90")
    ir = backend.compile(source_of("matmul_tiled"), {"TILE": 32})
    assert backend.compile_ptx(ir, "matmul_tiled", Pipeline()).diagnostics["shared_bytes"] \
        == 2 * 32 * 32 * 4


@needs_ptxas
def test_ptxas_rejecting_ptx_is_a_compile_error():
    with pytest.raises(r3.CompileError, match="ptxas rejected the PTX for sm_90"):
        cuda_tools.ptxas_info(".version 7.8\n.target sm_90\n.address_size 64\nnonsense;\n",
                              "sm_90")


@pytest.mark.skipif(NO_NVCC, reason="nvcc (CUDA toolkit) is not installed")
@pytest.mark.parametrize("entry", EXAMPLES)
def test_the_same_sources_build_with_nvcc(entry):
    source = source_of(entry)
    ptx = cuda_tools.nvcc_ptx(source, EXAMPLES[entry][1], "sm_90")
    symbols = cuda_tools.ptx_entries(ptx)
    assert cuda_tools.match_symbol(symbols, entry, entry) in symbols
    cubin = cuda_tools.nvcc_cubin(source, EXAMPLES[entry][1], "sm_90")
    assert cubin.startswith(b"\x7fELF") and cuda_tools.match_symbol(
        symbols, entry, entry).encode() in cubin  # the same kernel, assembled for sm_90


# -- declaring and launch configurations ------------------------------------------------------
def test_launch_is_needed_only_to_launch_and_refused_for_cpu():
    kernel = r3.kernel(CUDA_DIR / "saxpy.cu", entry="saxpy", backend="cuda", name="no_launch")
    assert [p.name for p in kernel.signature.params]  # read without launch=
    device = getattr(kernel.backend, "device", kernel.backend)  # also under emulation
    assert device.compile_ptx(device.compile(kernel.source, {}), "saxpy",
                              kernel.pipeline).ptx.startswith("//")
    x = np.zeros(4, np.float32)
    with pytest.raises(r3.DeclarationError, match="declared without launch=: its signature "
                       "and PTX can be read"):
        kernel(*[x if p.is_pointer else 1 for p in kernel.signature.params])
    with pytest.raises(r3.DeclarationError, match="takes no launch="):
        r3.kernel("int f(int n) { return n; }\n", entry="f", name="cpu_launch",
                  launch={"grid": 1})


@pytest.mark.parametrize("launch, message", [
    (42, "launch= must be a callable"),
    ({"grid": 1, "blocks": 2}, "unknown key.*'blocks'"),
    ({"block": 32}, "needs a 'grid' entry"),
    ({"grid": (1, 2, 3, 4), "block": 1}, "1 to 3 dimensions"),
    ({"grid": 1}, "gives no 'block' and no tunable is named BLOCK_X"),
])
def test_bad_launch_declarations_are_refused(launch, message):
    with pytest.raises(r3.DeclarationError, match=message):
        r3.kernel(CUDA_DIR / "saxpy.cu", entry="saxpy", backend="cuda", name="bad_launch",
                  tune={"ITEMS": [1, 2]}, launch=launch)


def test_blocks_beyond_the_device_limits_are_excluded_from_the_space():
    stencil = r3.kernel(CUDA_DIR / "stencil2d.cu", entry="stencil2d", backend="cuda",
                        name="limits", tune={"BLOCK_X": [32, 64, 1024], "BLOCK_Y": [1, 32, 128]},
                        launch={"grid": lambda args, t: (1,)})
    valid = list(stencil.space.iter_valid())
    assert {(v["BLOCK_X"], v["BLOCK_Y"]) for v in valid} == {(32, 1), (32, 32), (64, 1), (1024, 1)}
    with pytest.raises(r3.DeclarationError, match="violate constraint 'device limits: at most "
                       "1024 threads per block"):
        r3.kernel(CUDA_DIR / "saxpy.cu", entry="saxpy", backend="cuda", name="too_big",
                  tune={"BLOCK": [2048, 256]}, launch=lambda args, t: {"grid": 1})
    with pytest.raises(r3.DeclarationError, match=r"\{.TILE.: 64\} violate constraint .device"):
        r3.kernel(CUDA_DIR / "matmul.cu", entry="matmul_tiled", backend="cuda", name="tile",
                  tune={"TILE": [16, 64]}, launch={"grid": 1, "block": lambda t: (t["TILE"],) * 2}
                  ).variant(TILE=64)


def test_launch_resolution_errors_name_the_problem():
    limits = LaunchLimits()
    config = LaunchConfig(lambda args, t: {"grid": cdiv(args["n"], t["BLOCK"]),
                                           "block": t["BLOCK"] * 8}, "k")
    assert config.resolve({"n": 1000}, {"BLOCK": 128}, limits, "k").grid == (8, 1, 1)
    with pytest.raises(r3.LaunchError, match=r"block \(2048, 1, 1\) \(2048 threads\) exceeds"):
        config.resolve({"n": 1000}, {"BLOCK": 256}, limits, "k")
    with pytest.raises(r3.LaunchError, match="KeyError: 'n'"):
        config.resolve({"m": 1}, {"BLOCK": 1}, limits, "k")
    wrong = LaunchConfig(lambda args, t: (1, 1), "k")
    with pytest.raises(r3.LaunchError, match="must return a mapping"):
        wrong.resolve({}, {}, limits, "k")
    keys = LaunchConfig(lambda args, t: {"grid": 1, "threads": 1}, "k")
    with pytest.raises(r3.LaunchError, match="returned keys"):
        keys.resolve({}, {}, limits, "k")
    huge = LaunchConfig({"grid": lambda args, t: (1, 70000), "block": 32}, "k")
    with pytest.raises(r3.LaunchError, match="grid .* exceeds"):
        huge.resolve({}, {}, limits, "k")
    no_block = LaunchConfig(lambda args, t: {"grid": 1}, "k")
    with pytest.raises(r3.LaunchError, match="no block size"):
        no_block.resolve({}, {}, limits, "k")


SCALE = 3


def _helper(n, block):
    return cdiv(n, block) * SCALE // 3


def test_launch_callables_travel_to_the_worker_as_data():
    offset = 1
    config = LaunchConfig(lambda args, t: {"grid": (_helper(args["n"], t["B"]) + offset - 1,
                                                    int(np.ceil(2.5))),
                                           "block": (t["B"],), "shared": 64}, "k")
    data = json.loads(json.dumps(config.portable()))
    again = LaunchConfig.from_portable(data)
    launch = again.resolve({"n": 1000}, {"B": 128}, LaunchLimits(), "k")
    assert (launch.grid, launch.block, launch.shared) == ((8, 3, 1), (128, 1, 1), 64)
    thing = object()
    with pytest.raises(r3.DeclarationError, match="refers to 'thing' .*cannot be sent"):
        r3.kernel(CUDA_DIR / "saxpy.cu", entry="saxpy", backend="cuda", name="closure",
                  tune={"BLOCK": [64]}, launch=lambda args, t: {"grid": thing})


def test_declaring_cuda_kernels_imports_no_cuda_runtime_nor_llvmlite():
    code = (
        "import sys\n"
        "seen = set()\n"
        "class Watch:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        seen.add(name.split('.')[0])\n"
        "sys.meta_path.insert(0, Watch())\n"
        f"sys.path.insert(0, {str(REPO / 'example_project')!r})\n"
        "import exampleproj.cuda\n"
        "print(sorted(seen & {'pycuda', 'llvmlite', 'cuda'}))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"


# -- launchers, through a stand-in for pycuda's driver -----------------------------------------
class FakeDriver:
    """Enough of ``pycuda.driver`` to drive launchers without a GPU: device memory is a set
    of bytearrays, and a kernel is a Python function over that memory."""

    class Error(Exception):
        pass

    function_attribute = SimpleNamespace(MAX_THREADS_PER_BLOCK="max_threads",
                                         NUM_REGS="registers",
                                         MAX_DYNAMIC_SHARED_SIZE_BYTES="dynamic_shared")
    device_attribute = SimpleNamespace(MULTIPROCESSOR_COUNT="sms", L2_CACHE_SIZE="l2",
                                       MEMORY_CLOCK_RATE="memory_khz",
                                       GLOBAL_MEMORY_BUS_WIDTH="bus")
    # an A100 40GB's: 40 MiB of L2, HBM2 at 1215 MHz over 5120 bits (1.56 TB/s)
    ATTRIBUTES = {"sms": 108, "l2": 40 << 20, "memory_khz": 1_215_000, "bus": 5120}

    def __init__(self, kernels, max_threads=1024):
        self.kernels = kernels
        self.max_threads = max_threads
        self.memory: dict[int, bytearray] = {}
        self.next_address = 0x10000
        self.launches: list[tuple] = []
        self.copies = 0
        self.flushes: list[int] = []  # bytes written by each L2 flush
        self.images: list[str] = []  # "ptx" or "cubin", per module loaded
        context = SimpleNamespace(push=lambda: None)
        self.Context = SimpleNamespace(get_current=lambda: context, synchronize=lambda: None)
        driver = self

        class Event:
            def record(self, stream=None):
                driver.now = getattr(driver, "now", 0.0) + 0.5

            def synchronize(self):
                pass

            def time_since(self, other):
                return 0.5

        self.Event = Event

    def mem_alloc(self, nbytes):
        address = self.next_address
        self.memory[address] = bytearray(nbytes)
        self.next_address += nbytes + 4096
        driver = self

        class Allocation(int):
            def free(self):
                driver.memory.pop(int(self))

        return Allocation(address)

    def array(self, address, dtype, count):
        base = max(a for a in self.memory if a <= address)
        offset = address - base
        size = np.dtype(dtype).itemsize * count
        if offset + size > len(self.memory[base]):
            raise self.Error("an illegal memory access was encountered")
        return np.frombuffer(memoryview(self.memory[base])[offset:offset + size], dtype)

    def memcpy_htod(self, device, host):
        self.copies += 1
        self.array(int(device), np.uint8, host.nbytes)[:] = host.reshape(-1).view(np.uint8)

    def memset_d8_async(self, device, value, count, stream=None):
        self.array(int(device), np.uint8, count)[:] = value
        self.flushes.append(count)

    def memcpy_dtoh(self, host, device):
        self.copies += 1
        host.reshape(-1).view(np.uint8)[:] = self.array(int(device), np.uint8, host.nbytes)

    def module_from_buffer(self, data):
        if data.startswith(b"\x7fELF"):  # a cubin: ptxas's, loaded only for an sm_80 GPU
            flags, = struct.unpack_from("<I", data, 48)
            if (flags >> 8) & 0xFF != 80:
                raise self.Error("no kernel image is available for execution on the device")
        else:
            assert data.endswith(b"\0") and b".entry" in data
        self.images.append("cubin" if data.startswith(b"\x7fELF") else "ptx")
        return SimpleNamespace(get_function=lambda name: FakeFunction(self, name))


class FakeFunction:
    def __init__(self, driver, name):
        self.driver, self.name = driver, name

    def prepare(self, format):
        self.format = format

    def get_attribute(self, attribute):
        return {"max_threads": self.driver.max_threads, "registers": 12}[attribute]

    def prepared_call(self, grid, block, *values, shared_size=0):
        struct.pack(self.format, *values)  # the values fit the declared parameter types
        self.driver.launches.append((self.name, grid, block, shared_size))
        self.driver.kernels[self.name](self.driver, grid, block, *values)


def fake_saxpy(driver, grid, block, n, a, x, y):
    xs, ys = driver.array(x, np.float32, n), driver.array(y, np.float32, n)
    ys[:] = np.float32(a) * xs + ys


def fake_matmul(driver, grid, block, m, n, k, a, b, c):
    result = driver.array(a, np.float32, m * k).reshape(m, k) \
        @ driver.array(b, np.float32, k * n).reshape(k, n)
    driver.array(c, np.float32, m * n)[:] = result.reshape(-1)


@pytest.fixture
def fake_gpu(monkeypatch):
    """CUDA kernels run on FakeDriver: compiled for real, 'executed' by numpy."""
    kernels = {"_Z5saxpyifPKfPf": fake_saxpy, "matmul_tiled": fake_matmul}
    driver = FakeDriver(kernels)
    device = SimpleNamespace(compute_capability=lambda: (8, 0), name=lambda: "Fake GPU",
                             get_attribute=FakeDriver.ATTRIBUTES.__getitem__,
                             pci_bus_id=lambda: "0000:07:00.0")
    runtime = cuda_runtime.Runtime(PycudaDriver(driver, device, driver.Context.get_current()))
    monkeypatch.setattr(cuda_runtime, "runtime", lambda name=None: runtime)
    monkeypatch.delenv("PYTEST_R3_CUDA_EMULATION", raising=False)
    # an in-process worker's load forbids toolkit programs in this process: undone after
    monkeypatch.setattr(cuda_tools, "_programs_allowed", True)
    forget_backend("cuda")  # chosen anew: the GPU backend, on the fake GPU
    monkeypatch.setattr(get_backend("cuda").chosen, "_arch", "sm_80")
    yield driver
    forget_backend("cuda")


def declare(entry, **options):
    options.setdefault("tune", {"BLOCK": [256, 128], "ITEMS": [1, 4]} if entry == "saxpy"
                       else {"TILE": [16, 32]})
    options.setdefault("launch", (lambda args, t: {"grid": cdiv(args["n"],
                                                                t["BLOCK"] * t["ITEMS"])})
                       if entry == "saxpy" else
                       {"grid": lambda args, t: (cdiv(args["n"], t["TILE"]),
                                                 cdiv(args["m"], t["TILE"])),
                        "block": lambda t: (t["TILE"], t["TILE"])})
    options.setdefault("name", f"fake_{entry}")
    return r3.kernel(CUDA_DIR / EXAMPLES[entry][0], entry=entry, backend="cuda", **options)


def test_numpy_arguments_are_copied_in_and_written_ones_back(fake_gpu):
    saxpy = declare("saxpy")
    x, y = np.arange(1000, dtype=np.float32), np.ones(1000, np.float32)
    x_before = x.copy()
    assert saxpy(1000, 2.0, x, y) is None
    np.testing.assert_array_equal(y, 2 * x_before + 1)
    np.testing.assert_array_equal(x, x_before)
    assert fake_gpu.launches[-1] == ("_Z5saxpyifPKfPf", (4, 1, 1), (256, 1, 1), 0)
    assert fake_gpu.copies == 3 and fake_gpu.memory == {}  # x in, y in and out; all freed
    assert fake_gpu.images == ["ptx" if NO_PTXAS else "cubin"]  # ptxas's, for this GPU
    launcher = saxpy.configure(BLOCK=128, ITEMS=4)
    launcher(1000, 1.0, x, y)
    assert fake_gpu.launches[-1][1:3] == ((2, 1, 1), (128, 1, 1))
    assert launcher.format == "ifPP" and launcher.diagnostics["registers"] > 0
    launches = len(fake_gpu.launches)
    saxpy(0, 2.0, x[:0], y[:0])  # an empty grid launches nothing
    assert len(fake_gpu.launches) == launches and fake_gpu.memory == {}


def test_two_dimensional_launches_and_tunable_blocks(fake_gpu):
    matmul = declare("matmul_tiled")
    a = np.random.default_rng(0).standard_normal((40, 30), dtype=np.float32)
    b = np.random.default_rng(1).standard_normal((30, 50), dtype=np.float32)
    c = np.zeros((40, 50), np.float32)
    matmul.configure(TILE=32)(40, 50, 30, a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)
    assert fake_gpu.launches[-1][1:3] == ((2, 2, 1), (32, 32, 1))


def test_device_arrays_are_passed_through_without_copies(fake_gpu):
    saxpy = declare("saxpy")
    x, y = fake_gpu.mem_alloc(400), fake_gpu.mem_alloc(400)
    fake_gpu.array(x, np.float32, 100)[:] = 3
    fake_gpu.array(y, np.float32, 100)[:] = 1

    class DeviceArray:
        def __init__(self, address, readonly=False):
            self.__cuda_array_interface__ = {"shape": (100,), "typestr": "<f4",
                                             "data": (int(address), readonly), "version": 3}

    saxpy(100, 2.0, DeviceArray(x), DeviceArray(y))
    assert fake_gpu.copies == 0
    np.testing.assert_array_equal(fake_gpu.array(y, np.float32, 100), 7)
    host = get_backend("cuda").to_host(DeviceArray(y))
    assert host.dtype == np.float32 and host.shape == (100,) and (host == 7).all()
    with pytest.raises(r3.LaunchError, match=r"argument 4 \(float \*y\).*read-only"):
        saxpy(100, 2.0, DeviceArray(x), DeviceArray(y, readonly=True))
    doubles = DeviceArray(y)
    doubles.__cuda_array_interface__["typestr"] = "<f8"
    with pytest.raises(r3.LaunchError, match="expected dtype float32, got a device array of "
                       "float64"):
        saxpy(100, 2.0, DeviceArray(x), doubles)


def test_bad_arguments_and_launches_are_clear_errors(fake_gpu):
    saxpy = declare("saxpy")
    x = np.ones(10, np.float32)
    with pytest.raises(r3.LaunchError, match="takes 4 argument"):
        saxpy(10, 1.0, x)
    with pytest.raises(r3.LaunchError, match="expected dtype float32, got float64"):
        saxpy(10, 1.0, x, np.ones(10))
    with pytest.raises(r3.LaunchError, match="expected a numpy array of float32, got list"):
        saxpy(10, 1.0, x, [1.0])
    fake_gpu.max_threads = 128  # as if the kernel used too many registers for 256 threads
    with pytest.raises(r3.LaunchError, match=r"256 threads but this build allows at most 128"):
        declare("saxpy", name="fake_saxpy_regs")(10, 1.0, x, x.copy())
    assert fake_gpu.memory == {}


def test_faults_and_refusals_from_the_driver_are_translated(fake_gpu):
    saxpy = declare("saxpy")
    x = np.ones(10, np.float32)

    def raising(message):
        def run(*args):
            raise fake_gpu.Error(message)
        return run

    fake_gpu.kernels["_Z5saxpyifPKfPf"] = raising("cuCtxSynchronize failed: an illegal memory "
                                                  "access was encountered")
    with pytest.raises(KernelFault, match=r"grid \(1, 1, 1\), block \(256, 1, 1\)\) faulted "
                       "on the GPU.*out-of-bounds"):
        saxpy(10, 1.0, x, x.copy())
    fake_gpu.kernels["_Z5saxpyifPKfPf"] = raising("cuLaunchKernel failed: too many resources "
                                                  "requested for launch")
    with pytest.raises(r3.LaunchError, match=r"registers per thread: \d+"):
        saxpy(10, 1.0, x, x.copy())
    assert fake_gpu.memory == {}


def test_guard_regions_travel_with_the_buffer(fake_gpu):
    """A write past the end on the device lands in the replay's guard bytes on the host."""
    from pytest_r3.replay.buffers import GuardedBuffer, check_guards

    def overrun(driver, grid, block, n, a, x, y):
        driver.array(y, np.float32, n + 1)[n] = 1.0

    fake_gpu.kernels["_Z5saxpyifPKfPf"] = overrun
    saxpy = declare("saxpy")
    ones = np.ones(10, np.float32)
    x, y = GuardedBuffer(ones, 1), GuardedBuffer(ones, 2)
    x.fill(ones, None)
    y.fill(ones, None)
    saxpy(10, 1.0, x.array, y.array)
    assert check_guards(y.storage, ones, 2) == "wrote up to 4 byte(s) past the end of the buffer"
    with pytest.raises(KernelFault):  # a plain array has no slack to write into
        saxpy(10, 1.0, np.ones(10, np.float32), np.ones(10, np.float32))


def test_timing_uses_events(fake_gpu):
    launcher = declare("saxpy").build()
    x = np.ones(64, np.float32)
    assert launcher.time([64, 1.0, x, x.copy()], 5) == [5e-4] * 5
    assert get_backend("cuda").time(launcher, [64, 1.0, x, x.copy()], 2) == [5e-4] * 2
    # an L2 flush (twice the device's 40 MiB) before each timed launch; warm-up launches once
    assert fake_gpu.flushes == [80 << 20] * 7
    assert len(fake_gpu.launches) == 3 + 7
    facts = cuda_runtime.runtime().facts()
    assert facts.peak_bandwidth == pytest.approx(1.5552e12)


class InProcessWorker:
    """The replay worker's handlers called in this process, where the fake GPU lives (never
    for candidate code: only the fake driver's numpy 'kernels' run). Not sealed."""

    def __init__(self) -> None:
        from pytest_r3.replay.containment import Containment
        from pytest_r3.replay.worker import Worker

        self.outbox: list[bytes] = []
        self.handler = Worker(SimpleNamespace(send_bytes=lambda b: self.outbox.append(bytes(b))),
                              Containment())
        self.running = False
        self.pid = None

    def spawn(self) -> None:
        self.running = True

    def ask(self, event, data, timeout, arrays=None):
        from pytest_r3.replay import protocol

        if event == "seal":
            return "sealed", {"containment": "in process (test)"}, {}
        inbox: list[bytes] = []
        protocol.send(SimpleNamespace(send_bytes=lambda b: inbox.append(bytes(b))), event, data,
                      protocol.CLIENT_EVENTS, arrays)
        _, received, received_arrays = protocol.receive(
            SimpleNamespace(recv_bytes=lambda: inbox.pop(0)), protocol.CLIENT_EVENTS)
        getattr(self.handler, f"on_{event}")(received, received_arrays)
        answer, reply, returned = protocol.receive(
            SimpleNamespace(recv_bytes=lambda: self.outbox.pop(0)), protocol.WORKER_EVENTS)
        if answer == "rejected":
            raise protocol.Rejected(reply["status"], reply["kind"], reply["message"])
        return answer, reply, returned

    def close(self) -> None:
        pass

    kill = close


def test_replay_evaluates_cuda_candidates(fake_gpu, tmp_path):
    """The replay server's judge and the worker's runner, the worker in process: the spec
    (launch= included) crosses as JSON, candidates with other tunables build, verify and
    time, and a candidate that skips its work is caught."""
    from pytest_r3.record.store import RecordingStore, capture
    from pytest_r3.replay import Candidate, KernelSpec, ReplayServer, ReplaySettings

    saxpy = declare("saxpy")
    x = np.linspace(0, 1, 3000, dtype=np.float32)
    y = np.ones(3000, np.float32)
    args = (3000, 2.0, x, y)
    _, recording = capture(saxpy, args, lambda: saxpy(*args), "test_saxpy")
    RecordingStore(tmp_path).write(recording)
    spec = KernelSpec.from_dict(json.loads(json.dumps(KernelSpec.from_kernel(saxpy).as_dict())))
    assert spec.launch
    settings = ReplaySettings(timing_rounds=3, min_timing_rounds=2, warmup_rounds=1,
                              timing_recordings=1, derived_sizes=False)
    server = ReplayServer(spec, tmp_path, [recording.key], settings)
    server.worker = InProcessWorker()
    server.start()
    result = server.evaluate(Candidate(macros={"BLOCK": 128, "ITEMS": 4},
                                       pipeline={"unroll_count": 1}))
    assert result.ok, result.summary()
    assert ("_Z5saxpyifPKfPf", (6, 1, 1), (128, 1, 1), 0) in fake_gpu.launches
    # timed by the device: no CPU-time check, and the GPU's conditions come with the figures
    timing = result.timing
    assert timing.clock == "none" and timing.taken == timing.dropped == 0
    assert timing.device.facts.l2_bytes == 40 << 20 and timing.device.suspect == ""
    assert timing.device.flush_bytes == 80 << 20 and timing.device.bytes_moved == (24_000,)
    assert not timing.device.clocks.read  # NVML knows no GPU at the fake's bus id
    # a launch timed faster than 24 kB at 1.56 TB/s (15 ns) is suspect, never ok
    fake_gpu.Event.time_since = lambda self, other: 1e-6  # milliseconds: 1 ns
    suspect = server.evaluate(Candidate(macros={"BLOCK": 128, "ITEMS": 1}))
    assert suspect.status == "suspect", suspect.summary()
    assert "speed of light: the candidate on timed case 1" in suspect.reason()
    fake_gpu.Event.time_since = lambda self, other: 0.5
    fake_gpu.kernels["_Z5saxpyifPKfPf"] = lambda driver, grid, block, n, a, x, y: None
    lazy = server.evaluate(Candidate(macros={"BLOCK": 256, "ITEMS": 4}))
    assert lazy.status == "wrong_output"


# -- on a real GPU -----------------------------------------------------------------------------
def real(entry, **options):
    """An example kernel declared afresh (its launchers are not shared with other tests)."""
    return declare(entry, name=f"gpu_{entry}_{len(r3.registry())}", **options)


@needs_gpu
def test_examples_match_numpy_on_the_gpu_for_every_tunable_choice():
    rng = np.random.default_rng(0)
    saxpy = real("saxpy", tune={"BLOCK": [256, 64, 1024], "ITEMS": [1, 3, 8]})
    for values in saxpy.space.iter_valid():
        for n in (1, 999, 100_003):
            x = rng.standard_normal(n, dtype=np.float32)
            y = rng.standard_normal(n, dtype=np.float32)
            expected = np.float32(1.5) * x + y
            saxpy.configure(**values)(n, 1.5, x, y)
            np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-6, err_msg=str(values))
    matmul = real("matmul_tiled", tune={"TILE": [16, 8, 32]})
    for values in matmul.space.iter_valid():
        for m, n, k in ((1, 1, 1), (33, 65, 17), (128, 96, 200)):
            a = rng.standard_normal((m, k), dtype=np.float32)
            b = rng.standard_normal((k, n), dtype=np.float32)
            c = np.full((m, n), np.nan, np.float32)
            matmul.configure(**values)(m, n, k, a, b, c)
            np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    stencil = r3.kernel(CUDA_DIR / "stencil2d.cu", entry="stencil2d", backend="cuda",
                        name="gpu_stencil2d", tune={"BLOCK_X": [32, 16, 128], "BLOCK_Y": [8, 1]},
                        launch={"grid": lambda args, t: (cdiv(args["cols"], t["BLOCK_X"]),
                                                         cdiv(args["rows"], t["BLOCK_Y"]))})
    grid = rng.random((70, 300), dtype=np.float32)
    expected = grid.copy()
    expected[1:-1, 1:-1] = 0.25 * (grid[:-2, 1:-1] + grid[2:, 1:-1] + grid[1:-1, :-2]
                                   + grid[1:-1, 2:])
    for values in stencil.space.iter_valid():
        out = np.full_like(grid, np.nan)
        stencil.configure(**values)(70, 300, grid, out)
        np.testing.assert_allclose(out, expected, rtol=1e-6, err_msg=str(values))


@needs_gpu
@pytest.mark.skipif(NO_NVCC, reason="nvcc (CUDA toolkit) is not installed")
def test_the_vendor_build_gives_the_same_results():
    matmul = real("matmul_tiled")
    a = np.random.default_rng(1).standard_normal((64, 48), dtype=np.float32)
    b = np.random.default_rng(2).standard_normal((48, 80), dtype=np.float32)
    ours, theirs = np.zeros((64, 80), np.float32), np.zeros((64, 80), np.float32)
    matmul(64, 80, 48, a, b, ours)
    get_backend("cuda").vendor_launcher(matmul)(64, 80, 48, a, b, theirs)
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)
    assembled = np.zeros((64, 80), np.float32)  # nvcc's cubin, loaded the same way
    get_backend("cuda").vendor_launcher(matmul, cubin=True)(64, 80, 48, a, b, assembled)
    np.testing.assert_allclose(ours, assembled, rtol=1e-5, atol=1e-5)


@needs_gpu
def test_replay_workers_run_cuda_candidates(tmp_path):
    """A real replay server: the spec crosses to a worker that lifts its address-space cap,
    builds candidates, checks and times them; a faulting rewrite is a crash, not an error."""
    from pytest_r3.record.store import RecordingStore, capture
    from pytest_r3.replay import Candidate, KernelSpec, ReplayServer, ReplaySettings

    saxpy = real("saxpy")
    x, y = np.linspace(0, 1, 50_000, dtype=np.float32), np.ones(50_000, np.float32)
    args = (50_000, 2.0, x, y)
    _, recording = capture(saxpy, args, lambda: saxpy(*args), "test_saxpy")
    store = RecordingStore(tmp_path)
    store.write(recording)
    settings = ReplaySettings(timing_rounds=5, warmup_rounds=1)
    with ReplayServer(KernelSpec.from_kernel(saxpy), tmp_path, [recording.key],
                      settings) as server:
        good = server.evaluate(Candidate(macros={"BLOCK": 128, "ITEMS": 4}))
        assert good.ok, good.summary()
        broken = saxpy.source.text.replace("if (i < n)", "if (i < n + (1 << 28))")
        crash = server.evaluate(Candidate(source_text=broken, label="overrun"))
        assert crash.status in ("crash", "wrong_output"), crash.summary()
        assert server.evaluate(Candidate(macros={"BLOCK": 256, "ITEMS": 1})).ok


def test_a_contained_replay_worker_starts_no_ptxas(tmp_path):
    """On a GPU machine with ptxas installed, the replay worker (contained: no file writes,
    no programs once sealed) ran ptxas to load the baseline, and every kernel was 'rejected'.
    After the backend's enter_worker hook, its PTX goes to the driver as text."""
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "ptxas").write_text("#!/bin/sh\n[ \"$1\" = --version ] && echo stand-in && "
                                 "exit 0\necho 'ptxas info : Used 8 registers' >&2\n"
                                 "for a; do out=$a; done\n: > \"$out\"\n")
    (tools / "ptxas").chmod(0o755)
    (tmp_path / "saxpy.ll").write_text(CUDABackend("sm_90").compile(source_of("saxpy"),
                                                                     EXAMPLES["saxpy"][1]))
    code = (
        "import sys\n"
        "from pytest_r3 import Pipeline\n"
        "from pytest_r3.backends.cuda import CUDABackend\n"
        "from pytest_r3.replay import containment\n"
        "backend = CUDABackend('sm_90')\n"
        f"ir = open({str(tmp_path / 'saxpy.ll')!r}).read()\n"
        "if sys.argv[1] == 'hook':\n"
        "    backend.enter_worker()\n"
        "containment.enter()\n"
        "build = backend.compile_ptx(ir, 'saxpy', Pipeline())\n"
        "print('PTXAS', build.diagnostics['ptxas'], build.cubin is None)\n")
    env = {**os.environ, "PATH": f"{tools}:{os.environ['PATH']}"}
    env.pop("PYTEST_R3_CACHE_DIR", None)
    env["PYTEST_R3_CACHE"] = "off"
    without = subprocess.run([sys.executable, "-c", code, "plain"], capture_output=True,
                             text=True, env=env, timeout=300, cwd=REPO)
    hooked = subprocess.run([sys.executable, "-c", code, "hook"], capture_output=True,
                            text=True, env=env, timeout=300, cwd=REPO)
    assert "PTXAS not installed" in hooked.stdout and "True" in hooked.stdout, hooked.stderr
    if "Landlock" not in without.stderr and without.returncode == 0:
        pytest.skip("this kernel lets a contained process write files (no Landlock)")
    assert without.returncode != 0 and ("PermissionError" in without.stderr
                                        or "temporary directory" in without.stderr)


def test_the_auto_backend_forwards_enter_worker(monkeypatch):
    """The "cuda" backend a worker gets is chosen on first use; its enter_worker must be the
    chosen backend's (the base class's no-op let a GPU worker run ptxas after sealing)."""
    from pytest_r3.backends.cuda.selection import AutoCUDABackend

    calls = []
    auto = AutoCUDABackend()
    monkeypatch.setattr(AutoCUDABackend, "choose",
                        lambda self: SimpleNamespace(enter_worker=lambda: calls.append(1)))
    auto.enter_worker()
    assert calls == [1]


# -- code generation settings ------------------------------------------------------------
ROWS_CU = """\
extern "C" __global__ void scale_rows(float *out, const float *x, const float *w,
                                      const float *b, int C) {
  const float *row = x + blockIdx.x * C;
  float *o = out + blockIdx.x * C;
  for (int i = threadIdx.x; i < C; i += 32)
    o[i] = row[i] * w[i] + b[i];
}
"""
POINTER_STEP = re.compile(r"add\.s64\s+(%rd\d+), \1, 128;")  # a pointer advanced per trip


def test_loop_strength_reduction_is_a_setting_of_one_build_alone(tmp_path):
    """With LSR, the four arrays become four 64-bit pointers stepped by 128 bytes, which
    can cost registers; codegen_lsr=False keeps one index. LLVM's option for it is
    process-wide: the next build must not inherit it."""
    path = tmp_path / "rows.cu"
    path.write_text(ROWS_CU)
    kernel = r3.kernel(path, entry="scale_rows", backend="cuda", name=f"rows_{id(path)}")
    backend = CUDABackend("sm_90")
    ir = backend.compile(kernel.source, {})
    before = backend.compile_ptx(ir, "scale_rows", Pipeline())
    without = backend.compile_ptx(ir, "scale_rows", Pipeline(codegen_lsr=False))
    after = backend.compile_ptx(ir, "scale_rows", Pipeline())
    assert len(POINTER_STEP.findall(before.ptx)) == 4
    assert POINTER_STEP.findall(without.ptx) == []
    assert after.ptx == before.ptx
    assert "codegen_lsr" in CUDABackend.codegen_settings
    assert get_backend("cpu").codegen_settings == ()


def test_a_build_without_strength_reduction_never_reaches_another_thread(tmp_path):
    """Two threads emit PTX at once, one with codegen_lsr=False: the other's PTX must stay
    its own (LLVM's option is process-wide; without the lock, about a third of them came
    out without strength reduction)."""
    path = tmp_path / "rows.cu"
    path.write_text(ROWS_CU)
    kernel = r3.kernel(path, entry="scale_rows", backend="cuda", name=f"rows_{id(path)}")
    backend = CUDABackend("sm_90")
    ir = backend.compile(kernel.source, {})
    expected = backend.compile_ptx(ir, "scale_rows", Pipeline()).ptx
    seen: list[str] = []

    def build(pipeline: Pipeline, keep: bool) -> None:
        for _ in range(30):
            ptx = backend.compile_ptx(ir, "scale_rows", pipeline).ptx
            if keep:
                seen.append(ptx)

    threads = [threading.Thread(target=build, args=(Pipeline(codegen_lsr=False), False)),
               threading.Thread(target=build, args=(Pipeline(), True))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(seen) == 30 and all(ptx == expected for ptx in seen)


ROWS_C = """\
void rows(int n, int c, const float *x, float *out) {
  for (int r = 0; r < n; r++) {
    const float *xr = x + r * c;
    float *o = out + r * c;
    for (int i = 0; i < c; i++)
      o[i] = xr[i] * 2.0f + (float)i;
  }
}
"""


def test_flat_addresses_compute_the_same_addresses(tmp_path):
    """The rewrite behind flat_addresses (p[row + i] from p, not through p + row), checked
    where it can run without a GPU: on the CPU's IR, JIT-compiled and called."""
    import ctypes

    from pytest_r3.backends.cpu import jit_kept
    from pytest_r3.backends.cuda.addressing import flat_addresses

    path = tmp_path / "rows.c"
    path.write_text(ROWS_C)
    kernel = r3.kernel(path, entry="rows", name=f"rows_{id(path)}")
    backend = get_backend("cpu")
    module = backend.parse(backend.compile(kernel.source, {}), "rows")
    Pipeline(loop_vectorize=False, slp_vectorize=False, loop_unroll=False).run(
        module, backend.target_machine())
    text = str(module)
    flat = flat_addresses(text)
    assert re.search(r"getelementptr inbounds float, ptr %x, i64 %r3\.flat\.\d+", flat)
    assert re.search(r"getelementptr inbounds float, ptr %out, i64 %r3\.flat\.\d+", flat)
    x = np.random.default_rng(0).standard_normal((5, 7)).astype(np.float32)
    results = []
    for ir in (text, flat):
        engine = jit_kept(backend.parse(ir, "rows"), backend.target_machine(), None, None, {})
        rows = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                                ctypes.c_void_p)(engine.get_function_address("rows"))
        out = np.zeros_like(x)
        rows(5, 7, x.ctypes.data, out.ctypes.data)
        results.append(out)
    np.testing.assert_array_equal(results[1], x * 2 + np.arange(7, dtype=np.float32))
    np.testing.assert_array_equal(results[0], results[1])
    # AMD GPU code addresses global memory in address space 1: the same rewrite there, and
    # none between two address spaces or two element types
    global_ir = ("  %row = getelementptr inbounds nuw float, ptr addrspace(1) %x, i64 %r\n"
                 "  %a = getelementptr inbounds float, ptr addrspace(1) %row, i64 %i\n"
                 "  %b = getelementptr inbounds i32, ptr addrspace(1) %row, i64 %i\n")
    assert flat_addresses(global_ir).splitlines()[1:] == [
        "  %r3.flat.1 = add nsw i64 %r, %i",
        "  %a = getelementptr inbounds float, ptr addrspace(1) %x, i64 %r3.flat.1",
        "  %b = getelementptr inbounds i32, ptr addrspace(1) %row, i64 %i"]


@needs_ptxas
def test_flat_addresses_can_save_registers_and_are_searched_for_cuda(tmp_path):
    """llm.c's softmax_forward_kernel3 (tests/cuda_thirdparty): 24 registers through row
    pointers, 18 (nvcc's count) with flat_addresses; a CUDA kernel's search offers it."""
    folder = REPO / "tests" / "cuda_thirdparty" / "llm.c" / "dev" / "cuda"
    kernel = r3.kernel(folder / "softmax_forward.cu", entry="softmax_forward_kernel3",
                       backend="cuda", name=f"softmax3_{id(tmp_path)}")
    backend = CUDABackend("sm_90")
    backend.inspect(kernel.source, kernel.entry, {})
    ir = backend.compile(kernel.source, {})
    rows = backend.compile_ptx(ir, kernel.entry, Pipeline())
    flat = backend.compile_ptx(ir, kernel.entry, Pipeline(flat_addresses=True))
    assert flat.diagnostics["registers"] < rows.diagnostics["registers"]
    assert "r3.flat" in flat.optimised_ir and "r3.flat" not in rows.optimised_ir
    assert CUDABackend.codegen_settings == ("codegen_lsr", "flat_addresses")
