""".cu files as codebases have them: host code, library headers, other kernels beside the entry.

Each file here is built for the device (PTX, no GPU needed) and run in emulation against
numpy, unchanged: nvcc takes such files, so pytest-r3 must too. Only what the declared
entry reaches is held to what pytest-r3 supports.
"""

from __future__ import annotations

import platform
import textwrap
from pathlib import Path

import numpy as np
import pytest

import pytest_r3 as r3
from pytest_r3 import Pipeline
from pytest_r3.backends import forget_backend
from pytest_r3.backends.cuda import CUDABackend, toolchain
from pytest_r3.backends.cuda import emulation as cuda_emulation
from pytest_r3.errors import CompileError

X86 = platform.machine().lower() in ("x86_64", "amd64")
needs_emulation = pytest.mark.skipif(not X86, reason="CUDA emulation is written for x86-64")


@pytest.fixture
def emulated(monkeypatch):
    monkeypatch.setenv(cuda_emulation.EMULATION_ENV, "1")
    forget_backend("cuda")
    yield
    forget_backend("cuda")


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def ptx_of(path: Path, entry: str, arch: str = "sm_80") -> str:
    """The PTX of ``entry`` in ``path``, built as a declared kernel's device build is."""
    backend = CUDABackend(arch)
    kernel = r3.kernel(path, entry=entry, backend="cuda", name=f"ptx_{entry}_{id(path)}")
    source = kernel.source_for(kernel.baseline)
    return backend.compile_ptx(backend.compile(source, {}), entry, Pipeline()).ptx


def declare(path: Path, entry: str, **options) -> r3.Kernel:
    return r3.kernel(path, entry=entry, backend="cuda", name=f"file_{entry}_{id(path)}",
                     **options)


# -- the reproducers of what stopped real files ---------------------------------------------------

@needs_emulation
def test_stdlib_h_works_in_emulation(tmp_path, emulated):
    """Two lines were enough: r3_cuda_host.h's own abs() clashed with <stdlib.h>'s."""
    path = write(tmp_path, "twice.cu", """\
        #include <stdlib.h>
        __global__ void twice(float *x, int n) { int i = threadIdx.x; if (i < n) x[i] = 2 * x[i]; }
        """)
    kernel = declare(path, "twice", launch={"grid": 1, "block": 32})
    x = np.arange(8, dtype=np.float32)
    kernel(x, 8)
    np.testing.assert_array_equal(x, 2 * np.arange(8, dtype=np.float32))


@needs_emulation
def test_cstdlib_gives_std_abs_in_emulation_and_on_the_device(tmp_path, emulated):
    path = write(tmp_path, "absolute.cu", """\
        #include <cstdlib>
        __global__ void absolute(int *x, long long *y) {
          x[threadIdx.x] = abs(x[threadIdx.x]) + std::abs(-1);
          y[threadIdx.x] = llabs(y[threadIdx.x]);
        }
        """)
    kernel = declare(path, "absolute", launch={"grid": 1, "block": 4})
    x = np.array([-3, 4, -5, 6], dtype=np.int32)
    y = np.array([-3, 4, -5, 6], dtype=np.int64)
    kernel(x, y)
    np.testing.assert_array_equal(x, np.abs([-3, 4, -5, 6]) + 1)
    np.testing.assert_array_equal(y, np.abs([-3, 4, -5, 6]))
    assert ".entry" in ptx_of(path, "absolute")


HOST_ASSERT_UTILITIES = """\
    #include <assert.h>
    #include <stdio.h>
    /* the suite's host utilities: they check their arguments with assert */
    static void print_vector(const float *v, int n) {
      assert(v != NULL && n > 0);
      for (int i = 0; i < n; i++) printf("%f\\n", v[i]);
    }
    """


@needs_emulation
def test_a_host_functions_assert_does_not_stop_the_kernel(tmp_path, emulated):
    write(tmp_path, "utilities.h", HOST_ASSERT_UTILITIES)
    path = write(tmp_path, "negate.cu", """\
        #include <assert.h>
        __global__ void negate(float *x, int n) {
          int i = blockIdx.x * blockDim.x + threadIdx.x;
          assert(n > 0);
          if (i < n) x[i] = -x[i];
        }
        #include "utilities.h"
        """)
    ptx = ptx_of(path, "negate")
    assert "__assertfail" in ptx  # the kernel's own assert stays a device assert
    kernel = declare(path, "negate", launch={"grid": 1, "block": 64})
    x = np.arange(5, dtype=np.float32)
    kernel(x, 5)
    np.testing.assert_array_equal(x, -np.arange(5, dtype=np.float32))


GRID_SYNC_BESIDE_A_PLAIN_KERNEL = """\
    #include <cooperative_groups.h>
    namespace cg = cooperative_groups;

    __global__ void add_one(float *x, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) x[i] += 1.0f;
    }

    __global__ void two_phases(float *x, int n) {
      cg::grid_group grid = cg::this_grid();
      int i = grid.thread_rank();
      if (i < n) x[i] *= 2.0f;
      grid.sync();
      if (i < n) x[i] += x[(i + 1) % n];
    }
    """


@needs_emulation
def test_cooperative_groups_in_another_kernel_does_not_stop_this_one(tmp_path, emulated):
    path = write(tmp_path, "phases.cu", GRID_SYNC_BESIDE_A_PLAIN_KERNEL)
    assert ".entry" in ptx_of(path, "add_one")
    kernel = declare(path, "add_one", launch={"grid": 1, "block": 32})
    x = np.arange(6, dtype=np.float32)
    kernel(x, 6)
    np.testing.assert_array_equal(x, np.arange(6, dtype=np.float32) + 1)


@pytest.mark.parametrize("headers", ["bundled", "auto"])
def test_grid_wide_sync_itself_is_refused_in_one_line(tmp_path, monkeypatch, headers):
    # a toolkit's <cooperative_groups.h> declares this_grid (auto, where one is installed),
    # but a grid-wide sync needs a cooperative launch, which pytest-r3 never makes
    monkeypatch.setenv(toolchain.HEADERS_ENV, headers)
    path = write(tmp_path, "phases.cu", GRID_SYNC_BESIDE_A_PLAIN_KERNEL)
    with pytest.raises(CompileError) as error:
        ptx_of(path, "two_phases")
    first = str(error.value).splitlines()[0]
    assert "phases.cu:10" in first and "grid" in first and "not supported" in first


# -- cooperative groups: the device-side subset ----------------------------------------------------

TILE_REDUCTIONS = """\
    #include <cooperative_groups.h>
    #include <cooperative_groups/reduce.h>
    namespace cg = cooperative_groups;

    /* per tile of 8 and per warp: sums, minima, maxima; per thread, its tile's neighbours */
    __global__ void tiles(const float *x, const int *k, float *sums, int *minima, int *maxima,
                          float *neighbours, unsigned *votes, int n) {
      cg::thread_block block = cg::this_thread_block();
      cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
      cg::thread_block_tile<8> tile = cg::tiled_partition<8>(block);
      int i = blockIdx.x * block.size() + block.thread_rank();
      float v = i < n ? x[i] : 0.0f;
      int w = i < n ? k[i] : 0;
      float tile_sum = cg::reduce(tile, v, cg::plus<float>());
      float warp_sum = cg::reduce(warp, v, cg::plus<float>());
      int smallest = cg::reduce(warp, w, cg::less<int>());
      int largest = cg::reduce(tile, w, cg::greater<int>());
      float down = tile.shfl_down(v, 1), up = tile.shfl_up(v, 1);
      float across = tile.shfl_xor(v, 4 % tile.size()), first = tile.shfl(v, 0);
      block.sync();
      tile.sync();
      if (i < n) {
        sums[2 * i] = tile_sum;
        sums[2 * i + 1] = warp_sum;
        minima[i] = smallest;
        maxima[i] = largest;
        neighbours[4 * i] = down;
        neighbours[4 * i + 1] = up;
        neighbours[4 * i + 2] = across;
        neighbours[4 * i + 3] = first;
        votes[4 * i] = tile.ballot(v > 0.0f);
        votes[4 * i + 1] = tile.any(v > 0.0f);
        votes[4 * i + 2] = warp.all(v > -100.0f);
        votes[4 * i + 3] = tile.meta_group_rank() * 100 + tile.meta_group_size() * 10000
                           + tile.thread_rank();
      }
    }
    """


def tiles_reference(x: np.ndarray, k: np.ndarray, block: int):
    n = len(x)
    padded = np.zeros(-(-n // block) * block, np.float32)
    padded[:n] = x
    ints = np.zeros(len(padded), np.int64)
    ints[:n] = k
    by8, by32 = padded.reshape(-1, 8), padded.reshape(-1, 32)
    sums = np.stack([np.repeat(by8.sum(1), 8), np.repeat(by32.sum(1), 32)], 1)[:n]
    minima = np.repeat(ints.reshape(-1, 32).min(1), 32)[:n]
    maxima = np.repeat(ints.reshape(-1, 8).max(1), 8)[:n]
    lane = np.arange(len(padded)) % 8
    base = np.arange(len(padded)) - lane
    down = np.where(lane + 1 < 8, padded[np.minimum(base + lane + 1, len(padded) - 1)], padded)
    up = np.where(lane >= 1, padded[base + np.maximum(lane - 1, 0)], padded)
    across = padded[base + (lane ^ 4)]
    first = padded[base]
    neighbours = np.stack([down, up, across, first], 1)[:n]
    positive = (by8 > 0)
    ballot = np.repeat((positive * (1 << np.arange(8))).sum(1), 8)
    rank = np.arange(len(padded)) % block
    meta = (rank // 8) * 100 + (block // 8) * 10000 + lane
    votes = np.stack([ballot, np.repeat(positive.any(1), 8), np.ones(len(padded)), meta],
                     1)[:n]
    return sums, minima, maxima, neighbours, votes


def test_tile_reductions_build_to_the_instructions_nvccs_groups_use(tmp_path, monkeypatch):
    # pytest-r3's own groups (a toolkit's are checked in test_cuda_toolkit_headers.py)
    monkeypatch.setenv(toolchain.HEADERS_ENV, "bundled")
    path = write(tmp_path, "tiles.cu", TILE_REDUCTIONS)
    ptx = ptx_of(path, "tiles", "sm_80")
    # butterflies: float sums over the tile (3 steps) and the warp (5), the int maximum
    # over the tile (3), and the tile's own shfl_xor (1)
    assert ptx.count("shfl.sync.bfly.b32") == 3 + 5 + 3 + 1
    assert ptx.count("redux.sync.min.s32") == 1  # int minimum over the warp: one redux
    assert "redux.sync.max" not in ptx
    assert "shfl.sync.down.b32" in ptx and "shfl.sync.up.b32" in ptx
    assert "shfl.sync.idx.b32" in ptx
    assert "vote.sync.ballot.b32" in ptx and "bar.warp.sync" in ptx
    assert "bar.sync" in ptx
    older = ptx_of(path, "tiles", "sm_75")      # before sm_80 there is no redux.sync
    assert "redux.sync" not in older and older.count("shfl.sync.bfly.b32") == 3 + 5 + 5 + 3 + 1


@needs_emulation
def test_tile_reductions_match_numpy_in_emulation(tmp_path, emulated):
    path = write(tmp_path, "tiles.cu", TILE_REDUCTIONS)
    block = 64
    kernel = declare(path, "tiles", launch={
        "grid": lambda args, t: (-(-args["n"] // block),), "block": block})
    rng = np.random.default_rng(7)
    n = 100
    x = rng.standard_normal(n).astype(np.float32)
    k = rng.integers(-1000, 1000, n).astype(np.int32)
    sums = np.zeros(2 * n, np.float32)
    minima, maxima = np.zeros(n, np.int32), np.zeros(n, np.int32)
    neighbours = np.zeros(4 * n, np.float32)
    votes = np.zeros(4 * n, np.uint32)
    kernel(x, k, sums, minima, maxima, neighbours, votes, n)
    want = tiles_reference(x, k, block)
    np.testing.assert_allclose(sums.reshape(-1, 2), want[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(minima, want[1])
    np.testing.assert_array_equal(maxima, want[2])
    np.testing.assert_array_equal(neighbours.reshape(-1, 4), want[3])
    np.testing.assert_array_equal(votes.reshape(-1, 4), want[4])


# -- host code beside the kernels ---------------------------------------------------------------

HOST_PROGRAM = """\
    // no #include <cuda_runtime.h>: nvcc includes it itself
    #include <stdio.h>
    #include <stdlib.h>
    #include <cstdlib>
    #include <assert.h>
    #include <iostream>
    #include <fstream>
    #include <vector>
    #include <string>
    #include <chrono>
    #include <algorithm>
    #include "common.h"

    __device__ float square(float v) { return v * v; }

    __global__ void squares(float *out, const float *in, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) out[i] = square(in[i]) + OFFSET;
    }

    void run_on_gpu(const std::vector<float> &host, std::vector<float> &result) {
      float *d_in, *d_out;
      int n = (int)host.size();
      cudaCheck(cudaMalloc(&d_in, n * sizeof(float)));
      cudaCheck(cudaMalloc(&d_out, n * sizeof(float)));
      cudaMemcpy(d_in, host.data(), n * sizeof(float), cudaMemcpyHostToDevice);
      squares<<<(n + 255) / 256, 256>>>(d_out, d_in, n);
      cudaThreadSynchronize();
      cudaMemcpy(result.data(), d_out, n * sizeof(float), cudaMemcpyDeviceToHost);
      cudaFree(d_in);
      cudaFree(d_out);
    }

    int main(int argc, char **argv) {
      cudaDeviceProp prop;
      cudaGetDeviceProperties(&prop, 0);
      printf("%s with %d SMs\\n", prop.name, prop.multiProcessorCount);
      std::vector<float> host(1000), result(1000);
      for (size_t i = 0; i < host.size(); i++) host[i] = rand() / (float)RAND_MAX;
      auto start = std::chrono::high_resolution_clock::now();
      run_on_gpu(host, result);
      auto seconds = std::chrono::duration<double>(
          std::chrono::high_resolution_clock::now() - start).count();
      std::cout << "took " << seconds << " s" << std::endl;
      assert(result[0] >= 0.0f);
      std::ofstream("result.txt") << result[0];
      std::sort(result.begin(), result.end());
      return EXIT_SUCCESS;
    }
    """

COMMON_HEADER = """\
    // a project's common header: the host libraries it uses, error checks, helpers
    #pragma once
    #include <cuda_runtime.h>
    #include <cublas_v2.h>
    #include <cublasLt.h>
    #include <curand.h>
    #include <nvtx3/nvToolsExt.h>
    #include <cuda_profiler_api.h>
    #include <string>
    #define OFFSET 0.5f
    extern cudaDeviceProp deviceProp;
    inline void cuda_check(cudaError_t error, const char *file, int line) {
      if (error != cudaSuccess) {
        printf("[CUDA ERROR] at %s:%d: %s\\n", file, line, cudaGetErrorString(error));
        exit(EXIT_FAILURE);
      }
    }
    #define cudaCheck(err) (cuda_check(err, __FILE__, __LINE__))
    static cublasHandle_t cublas_handle;
    static cublasLtHandle_t cublaslt_handle;
    inline void setup(std::string name) {
      nvtxRangePush(name.c_str());
      cublasCreate(&cublas_handle);
      cublasLtCreate(&cublaslt_handle);
      cublasSetMathMode(cublas_handle, CUBLAS_TF32_TENSOR_OP_MATH);
      curandGenerator_t generator;
      curandCreateGenerator(&generator, CURAND_RNG_PSEUDO_DEFAULT);
      cudaProfilerStart();
      nvtxRangePop();
    }
    """


def test_a_program_with_host_code_builds_its_kernel(tmp_path):
    write(tmp_path, "common.h", COMMON_HEADER)
    path = write(tmp_path, "program.cu", HOST_PROGRAM)
    ptx = ptx_of(path, "squares")
    assert ".entry" in ptx and "main" not in ptx and "run_on_gpu" not in ptx


@needs_emulation
def test_a_program_with_host_code_runs_its_kernel_in_emulation(tmp_path, emulated):
    write(tmp_path, "common.h", COMMON_HEADER)
    path = write(tmp_path, "program.cu", HOST_PROGRAM)
    kernel = declare(path, "squares", launch={
        "grid": lambda args, t: ((args["n"] + 127) // 128,), "block": 128})
    x = np.linspace(-2, 2, 300, dtype=np.float32)
    out = np.zeros_like(x)
    kernel(out, x, 300)
    np.testing.assert_allclose(out, x * x + 0.5, rtol=1e-6)


TWO_TEMPLATES = """\
    template <class T> __global__ void scale(T *x, int n) {
      int i = threadIdx.x; if (i < n) x[i] = 2 * x[i];
    }
    template <class T> __global__ void shift(T *x, int n) {
      int i = threadIdx.x; if (i < n) x[i] = x[i] + 1;
    }
    template __global__ void scale<float>(float *, int);
    """


@needs_emulation
def test_two_template_kernels_of_one_file_in_one_process(tmp_path, emulated):
    """The build instantiates every declared instance of the file; cutting the text down
    to one entry must keep the others it instantiates."""
    path = write(tmp_path, "two.cu", TWO_TEMPLATES)
    backend = CUDABackend("sm_80")
    for entry in ["scale<float>", "shift<float>", "scale<float>"]:
        kernel = declare(path, entry, launch={"grid": 1, "block": 32})
        source = kernel.source_for(kernel.baseline)
        backend.inspect(source, entry, {})
        assert ".entry" in backend.compile_ptx(backend.compile(source, {}), entry,
                                               Pipeline()).ptx
        x = np.arange(4, dtype=np.float32)
        kernel(x, 4)
        want = 2 * np.arange(4) if entry.startswith("scale") else np.arange(4) + 1
        np.testing.assert_array_equal(x, want)
