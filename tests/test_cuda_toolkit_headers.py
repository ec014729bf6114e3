"""The CUDA device build against an installed toolkit's headers (CUB, full cooperative groups).

Where a CUDA toolkit is installed (nvcc on PATH, or under $CUDA_HOME), the device build adds
its headers to pytest-r3's own, so kernels using CUB's block primitives and the cooperative
groups beyond block tiles build, and ptxas accepts them. ``PYTEST_R3_CUDA_HEADERS=bundled``
(``--r3-cuda-headers bundled``) keeps pytest-r3's headers alone; emulation always does.
Tests that need a toolkit skip cleanly without one; the others run everywhere.
"""

from __future__ import annotations

import platform
import textwrap
from pathlib import Path

import numpy as np
import pytest

import pytest_r3 as r3
from pytest_r3 import Pipeline
from pytest_r3.backends import compile_cache, forget_backend
from pytest_r3.backends.cuda import CUDABackend, toolchain
from pytest_r3.backends.cuda import emulation as cuda_emulation
from pytest_r3.errors import CompileError, ToolchainError

TOOLKIT = toolchain.find_toolkit()
needs_toolkit = pytest.mark.skipif(TOOLKIT is None, reason="no CUDA toolkit installed (nvcc "
                                   "on PATH or under $CUDA_HOME)")
needs_ptxas = pytest.mark.skipif(toolchain.find_tool("ptxas") is None,
                                 reason="ptxas (CUDA toolkit) is not installed")
X86 = platform.machine().lower() in ("x86_64", "amd64")

LIBRARIES = """\
    #include <cub/block/block_reduce.cuh>
    #include <cooperative_groups.h>
    #include <cooperative_groups/reduce.h>
    namespace cg = cooperative_groups;

    /* one sum per block of 128, by CUB */
    __global__ void block_sums(const float *x, float *sums, int n) {
      typedef cub::BlockReduce<float, 128> Reduce;
      __shared__ typename Reduce::TempStorage storage;
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      float total = Reduce(storage).Sum(i < n ? x[i] : 0.0f);
      if (threadIdx.x == 0) sums[blockIdx.x] = total;
    }

    /* per label, the sum of its values: the active threads, partitioned by label */
    __global__ void label_sums(const int *x, const int *label, int *sums, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i >= n) return;
      cg::coalesced_group active = cg::coalesced_threads();
      cg::coalesced_group same = cg::labeled_partition(active, label[i]);
      int total = cg::reduce(same, x[i], cg::plus<int>());
      if (same.thread_rank() == 0) atomicAdd(&sums[label[i]], total);
    }
    """


@pytest.fixture
def headers(monkeypatch):
    """Sets PYTEST_R3_CUDA_HEADERS for one test."""
    def choose(value: str) -> None:
        monkeypatch.setenv(toolchain.HEADERS_ENV, value)
    return choose


@pytest.fixture
def no_toolkit(monkeypatch, tmp_path):
    """A machine without a CUDA toolkit: no nvcc on PATH, no CUDA_HOME or CUDA_PATH."""
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def build(path: Path, entry: str, backend: CUDABackend | None = None):
    backend = backend or CUDABackend("sm_90")
    kernel = r3.kernel(path, entry=entry, backend="cuda", name=f"tk_{entry}_{id(path)}")
    source = kernel.source_for(kernel.baseline)
    return backend.compile_ptx(backend.compile(source, {}), entry, Pipeline())


@needs_toolkit
@needs_ptxas
@pytest.mark.parametrize("entry", ["block_sums", "label_sums"])
def test_cub_and_full_cooperative_groups_build_against_the_toolkit(tmp_path, headers, entry):
    headers("auto")
    path = write(tmp_path, "libraries.cu", LIBRARIES)
    result = build(path, entry)
    assert result.diagnostics["ptxas"] == "ok" and result.diagnostics["registers"] > 0
    assert result.diagnostics.get("spill_store_bytes", 0) == 0
    # the instructions nvcc -O3 gives the same file (CUDA 13.0, sm_90)
    if entry == "block_sums":  # partial sums through shared memory, one barrier
        assert "bar.sync" in result.ptx and "st.shared.b32" in result.ptx
        assert result.diagnostics["shared_bytes"] == 24
    else:  # labeled_partition: lanes with equal labels; the group's sum in one instruction
        assert "match.any.sync.b32" in result.ptx and "redux.sync.add.s32" in result.ptx


@needs_toolkit
def test_forcing_the_bundled_headers_refuses_cub_in_one_line(tmp_path, headers):
    headers("bundled")
    path = write(tmp_path, "libraries.cu", LIBRARIES)
    with pytest.raises(CompileError) as error:
        build(path, "block_sums")
    first = str(error.value).splitlines()[0]
    assert first.startswith(f"{path}:1: CUB (<cub/block/block_reduce.cuh>) is not supported")
    assert CUDABackend("sm_90").headers().startswith("bundled")
    headers("toolkit")  # and back: the toolkit's, by name
    assert CUDABackend("sm_90").headers().startswith(f"CUDA {TOOLKIT.release} toolkit")


HOST_SIDE = {
    "cub/cub.cuh": """\
        #include <cub/cub.cuh>
        __global__ void scale(int n, float a, float *x) {
          int i = blockIdx.x * blockDim.x + threadIdx.x;
          if (i < n) x[i] *= a;
        }
        void total(const float *in, float *out, int n, void *scratch, size_t bytes) {
          cub::DeviceReduce::Sum(scratch, bytes, in, out, n);
        }
        """,
    "thrust/device_vector.h": """\
        #include <thrust/device_vector.h>
        #include <thrust/reduce.h>
        __global__ void scale(int n, float a, float *x) {
          int i = blockIdx.x * blockDim.x + threadIdx.x;
          if (i < n) x[i] *= a;
        }
        float total(const thrust::device_vector<float> &v) {
          return thrust::reduce(v.begin(), v.end());
        }
        """,
}


@needs_toolkit
@pytest.mark.parametrize("header", HOST_SIDE)
def test_device_wide_cub_and_thrust_are_one_line_naming_the_include(tmp_path, headers, header):
    """Their host side needs CUDA's whole runtime API: clang's first error is deep in the
    library (a runtime enumerator), so the line names the file's own #include instead, and
    what to do."""
    headers("auto")
    path = write(tmp_path, "host_side.cu", HOST_SIDE[header])
    with pytest.raises(CompileError) as error:
        build(path, "scale")
    first = str(error.value).splitlines()[0]
    assert first.startswith(f"{path}:1: <{header}> (")
    assert "needs CUDA's runtime API" in first and "<cub/block/...>" in first
    assert first.endswith("see docs/cuda.md (section 'With an installed CUDA toolkit')")


@needs_toolkit
def test_the_headers_are_part_of_the_builds_identity(tmp_path, headers, monkeypatch):
    """A build cached with the toolkit's headers is never what a bundled build gets."""
    monkeypatch.setenv(compile_cache.DIR_ENV, str(tmp_path / "cache"))
    path = write(tmp_path, "libraries.cu", LIBRARIES)
    headers("auto")
    with compile_cache.trusted_build():
        assert ".entry" in build(path, "block_sums").ptx
    headers("bundled")
    with compile_cache.trusted_build(), pytest.raises(CompileError, match="CUB"):
        build(path, "block_sums")


def test_without_a_toolkit_auto_means_the_bundled_headers(tmp_path, headers, no_toolkit):
    headers("auto")
    assert toolchain.find_toolkit() is None
    assert CUDABackend("sm_90").headers().startswith("bundled")
    path = write(tmp_path, "libraries.cu", LIBRARIES)
    with pytest.raises(CompileError, match=r"CUB \(<cub/block/block_reduce.cuh>\) is not "):
        build(path, "block_sums")


def test_asking_for_the_toolkit_without_one_is_one_clear_line(tmp_path, headers, no_toolkit):
    headers("toolkit")
    path = write(tmp_path, "libraries.cu", LIBRARIES)
    with pytest.raises(ToolchainError) as error:
        build(path, "block_sums")
    assert str(error.value) == (
        "PYTEST_R3_CUDA_HEADERS=toolkit, but no CUDA toolkit is installed (no nvcc on PATH nor "
        "under $CUDA_HOME/bin); install it, set CUDA_HOME, or use auto or bundled")


def test_an_unknown_choice_is_refused(headers):
    headers("system")
    with pytest.raises(ToolchainError, match="'system' is not understood; use auto"):
        CUDABackend("sm_90").headers()
    with pytest.raises(ToolchainError, match="use one of auto, toolkit, bundled"):
        CUDABackend("sm_90", headers="newest")


@needs_toolkit
def test_cuda_home_finds_a_toolkit_that_is_not_on_path(headers, no_toolkit, monkeypatch):
    monkeypatch.setenv("CUDA_HOME", str(TOOLKIT.root))
    assert toolchain.find_toolkit() == TOOLKIT


@pytest.mark.skipif(not X86, reason="CUDA emulation is written for x86-64")
def test_emulation_keeps_the_bundled_headers(tmp_path, headers, monkeypatch):
    """Emulation runs the bundled subset whatever is installed: CUB stays one line, and the
    bundled tile groups run."""
    headers("auto")
    monkeypatch.setenv(cuda_emulation.EMULATION_ENV, "1")
    forget_backend("cuda")
    try:
        path = write(tmp_path, "libraries.cu", LIBRARIES)
        kernel = r3.kernel(path, entry="block_sums", backend="cuda", name="emu_block_sums",
                           launch={"grid": 1, "block": 128})
        with pytest.raises(CompileError, match="CUB"):
            kernel(np.ones(128, np.float32), np.zeros(1, np.float32), 128)
        tiles = write(tmp_path, "tiles.cu", """\
            #include <cooperative_groups.h>
            #include <cooperative_groups/reduce.h>
            namespace cg = cooperative_groups;
            __global__ void warp_sums(const int *x, int *sums) {
              auto warp = cg::tiled_partition<32>(cg::this_thread_block());
              int total = cg::reduce(warp, x[threadIdx.x], cg::plus<int>());
              if (warp.thread_rank() == 0) sums[threadIdx.x / 32] = total;
            }
            """)
        warp_sums = r3.kernel(tiles, entry="warp_sums", backend="cuda", name="emu_warp_sums",
                              launch={"grid": 1, "block": 64})
        x, sums = np.arange(64, dtype=np.int32), np.zeros(2, np.int32)
        warp_sums(x, sums)
        np.testing.assert_array_equal(sums, x.reshape(2, 32).sum(axis=1))
    finally:
        forget_backend("cuda")


def test_the_ini_setting_chooses_the_headers_for_the_run(pytester, monkeypatch):
    monkeypatch.delenv(toolchain.HEADERS_ENV, raising=False)
    pytester.makeini("[pytest]\nr3_cuda_headers = bundled\n")
    pytester.makepyfile(test_choice="""
        import os
        from pytest_r3.backends.cuda import CUDABackend

        def test_choice():
            assert os.environ["PYTEST_R3_CUDA_HEADERS"] == "bundled"
            assert CUDABackend("sm_90").headers().startswith("bundled")
    """)
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_the_option_refuses_unknown_values(pytester):
    pytester.makepyfile(test_nothing="def test_nothing():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--r3-cuda-headers", "mine")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--r3-cuda-headers / r3_cuda_headers: 'mine' is not auto, toolkit or bundled*"])
