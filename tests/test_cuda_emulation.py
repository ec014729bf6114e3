"""CUDA kernels run on the CPU with CUDA semantics (backends/cuda/emulation.py), against numpy.

Every kernel here is real CUDA source compiled by clang for the host against r3_cuda_host.h
and run by the fiber runtime; emulation is forced on, so these run the same on machines with
and without a GPU. Errors a GPU would hide (a divergent barrier, a write out of bounds) must
come back as clear failures, never as a hang or a pass.
"""

from __future__ import annotations

import platform
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from conftest import record_matmul_launches

import pytest_r3 as r3
from pytest_r3 import cdiv
from pytest_r3.backends import forget_backend, get_backend
from pytest_r3.backends.cuda import emulation as cuda_emulation
from pytest_r3.backends.cuda import selection
from pytest_r3.errors import BackendError, KernelFault

pytestmark = pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                                reason="CUDA emulation is written for x86-64")

EXAMPLE = Path(__file__).resolve().parent.parent / "example_project"


@pytest.fixture(autouse=True)
def emulated(monkeypatch):
    """CUDA kernels in emulation for each test, whatever the machine has."""
    monkeypatch.setenv(cuda_emulation.EMULATION_ENV, "1")
    forget_backend("cuda")
    yield
    forget_backend("cuda")


def cuda_kernel(tmp_path: Path, text: str, entry: str, **options) -> r3.Kernel:
    path = tmp_path / f"{entry}.cu"
    path.write_text(textwrap.dedent(text))
    return r3.kernel(path, entry=entry, backend="cuda", name=f"emulated_{entry}_{id(path)}",
                     **options)


# -- the example project's kernels --------------------------------------------------------------

def example_matmul(tile_values=(16, 8, 32)) -> r3.Kernel:
    return r3.kernel(
        EXAMPLE / "exampleproj" / "cuda" / "matmul.cu", entry="matmul_tiled", backend="cuda",
        name=f"emulated_matmul_{len(tile_values)}", tune={"TILE": list(tile_values)},
        launch={"grid": lambda args, t: (cdiv(args["n"], t["TILE"]), cdiv(args["m"], t["TILE"])),
                "block": lambda t: (t["TILE"], t["TILE"])})


@pytest.mark.parametrize("tile", [8, 16, 32])
@pytest.mark.parametrize("m, n, k", [(1, 1, 1), (17, 33, 5), (64, 48, 80)])
def test_tiled_matmul_with_barriers_matches_numpy(tile, m, n, k):
    kernel = example_matmul()
    rng = np.random.default_rng(m * n * k + tile)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    c = np.full((m, n), np.nan, dtype=np.float32)
    launcher = kernel.configure(TILE=tile)
    launcher(m, n, k, a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    assert launcher.fibers  # __syncthreads: one fiber per thread


def test_a_kernel_without_barriers_runs_its_threads_as_a_loop():
    sys.path.insert(0, str(EXAMPLE))
    try:
        from exampleproj.cuda import saxpy
    finally:
        sys.path.remove(str(EXAMPLE))
    x = np.arange(3000, dtype=np.float32)
    y = np.ones(3000, dtype=np.float32)
    launcher = saxpy.configure(BLOCK=128, ITEMS=4)
    launcher(3000, 0.5, x, y)
    np.testing.assert_array_equal(y, 0.5 * np.arange(3000, dtype=np.float32) + 1)
    assert not launcher.fibers


# -- warps ----------------------------------------------------------------------------------

REDUCE_CU = """\
    /* out[block] = sum of the block's inputs: warp shuffles, then shared partial sums */
    extern "C" __global__ void block_sum(int n, const float *x, float *out)
    {
        __shared__ float partial[32];
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        float v = i < n ? x[i] : 0.0f;
        for (int offset = 16; offset > 0; offset /= 2)
            v += __shfl_down_sync(0xffffffff, v, offset);
        int lane = threadIdx.x % warpSize, warp = threadIdx.x / warpSize;
        if (lane == 0)
            partial[warp] = v;
        __syncthreads();
        if (warp == 0) {
            v = lane < (blockDim.x + 31) / 32 ? partial[lane] : 0.0f;
            for (int offset = 16; offset > 0; offset /= 2)
                v += __shfl_xor_sync(0xffffffff, v, offset);
            if (lane == 0)
                out[blockIdx.x] = v;
        }
    }
"""


@pytest.mark.parametrize("n, block", [(1000, 256), (4096, 1024), (77, 64), (5, 32)])
def test_shuffle_reduction_matches_numpy(tmp_path, n, block):
    kernel = cuda_kernel(tmp_path, REDUCE_CU, "block_sum",
                         launch={"grid": lambda args, t: cdiv(args["n"], block),
                                 "block": block})
    x = np.random.default_rng(n).standard_normal(n, dtype=np.float32)
    out = np.zeros(cdiv(n, block), dtype=np.float32)
    kernel(n, x, out)
    expected = np.add.reduceat(x.astype(np.float64), np.arange(0, n, block))
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-4)


WARP_CU = """\
    /* per thread: an inclusive scan of its warp (shfl_up), the warp's lane 3 value (shfl),
     * and the warp's ballot/all/any of x > 0 */
    extern "C" __global__ void warp_ops(const int *x, int *scan, int *third,
                                        unsigned *ballot, int *all, int *any)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        int lane = threadIdx.x % 32;
        int v = x[i];
        for (int d = 1; d < 32; d *= 2) {
            int up = __shfl_up_sync(0xffffffff, v, d);
            if (lane >= d)
                v += up;
        }
        scan[i] = v;
        third[i] = __shfl_sync(0xffffffff, x[i], 3);
        ballot[i] = __ballot_sync(0xffffffff, x[i] > 0);
        all[i] = __all_sync(0xffffffff, x[i] > 0);
        any[i] = __any_sync(0xffffffff, x[i] > 0);
    }
"""


def test_warp_scan_broadcast_and_votes_match_numpy(tmp_path):
    kernel = cuda_kernel(tmp_path, WARP_CU, "warp_ops", launch={"grid": 2, "block": 128})
    rng = np.random.default_rng(3)
    x = rng.integers(-5, 6, 256, dtype=np.int32)
    x[32:64] = np.abs(x[32:64]) + 1  # one warp all positive
    x[64:96] = -np.abs(x[64:96])     # one warp none positive
    scan, third, all_, any_ = (np.zeros(256, np.int32) for _ in range(4))
    ballot = np.zeros(256, np.uint32)
    kernel(x, scan, third, ballot, all_, any_)
    warps = x.reshape(-1, 32)
    np.testing.assert_array_equal(scan, np.cumsum(warps, axis=1).reshape(-1))
    np.testing.assert_array_equal(third, np.repeat(warps[:, 3], 32))
    bits = (warps > 0).astype(np.uint64) << np.arange(32, dtype=np.uint64)
    np.testing.assert_array_equal(ballot, np.repeat(bits.sum(axis=1), 32).astype(np.uint32))
    np.testing.assert_array_equal(all_, np.repeat((warps > 0).all(axis=1), 32))
    np.testing.assert_array_equal(any_, np.repeat((warps > 0).any(axis=1), 32))
    assert all_[32] == 1 and any_[64] == 0


SYNC_COUNT_CU = """\
    extern "C" __global__ void count_positive(const float *x, int *count, int *every, int *some)
    {
        float v = x[blockIdx.x * blockDim.x + threadIdx.x];
        int c = __syncthreads_count(v > 0.0f);
        int a = __syncthreads_and(v > 0.0f);
        int o = __syncthreads_or(v > 0.0f);
        if (threadIdx.x == 0) {
            count[blockIdx.x] = c;
            every[blockIdx.x] = a;
            some[blockIdx.x] = o;
        }
    }
"""


def test_syncthreads_count_and_or_match_numpy(tmp_path):
    kernel = cuda_kernel(tmp_path, SYNC_COUNT_CU, "count_positive",
                         launch={"grid": 3, "block": 96})
    x = np.random.default_rng(5).standard_normal(288).astype(np.float32)
    x[96:192] = np.abs(x[96:192]) + 0.5
    count, every, some = (np.zeros(3, np.int32) for _ in range(3))
    kernel(x, count, every, some)
    blocks = x.reshape(3, 96) > 0
    np.testing.assert_array_equal(count, blocks.sum(axis=1))
    np.testing.assert_array_equal(every, blocks.all(axis=1))
    np.testing.assert_array_equal(some, blocks.any(axis=1))


# -- memory -----------------------------------------------------------------------------------

HISTOGRAM_CU = """\
    /* bins[v] += 1 for every value: a shared histogram per block, then global atomics */
    extern "C" __global__ void histogram(int n, const int *values, unsigned int *bins)
    {
        __shared__ unsigned int local[64];
        for (int b = threadIdx.x; b < 64; b += blockDim.x)
            local[b] = 0;
        __syncthreads();
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
            atomicAdd(&local[values[i]], 1u);
        __syncthreads();
        for (int b = threadIdx.x; b < 64; b += blockDim.x)
            atomicAdd(&bins[b], local[b]);
    }
"""


def test_atomic_histogram_matches_bincount(tmp_path):
    kernel = cuda_kernel(tmp_path, HISTOGRAM_CU, "histogram", launch={"grid": 7, "block": 128})
    values = np.random.default_rng(9).integers(0, 64, 10_000, dtype=np.int32)
    bins = np.zeros(64, np.uint32)
    kernel(values.size, values, bins)
    np.testing.assert_array_equal(bins, np.bincount(values, minlength=64))


REVERSE_CU = """\
    /* reverses each block's slice through dynamic shared memory */
    extern "C" __global__ void reverse_blocks(const double *x, double *out)
    {
        extern __shared__ double slice[];
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        slice[threadIdx.x] = x[i];
        __syncthreads();
        out[i] = slice[blockDim.x - 1 - threadIdx.x];
    }
"""


def test_dynamic_shared_memory_has_the_launch_size(tmp_path):
    kernel = cuda_kernel(tmp_path, REVERSE_CU, "reverse_blocks",
                         tune={"BLOCK": [160, 256]},
                         launch={"grid": lambda args, t: args["x"].size // t["BLOCK"],
                                 "shared": lambda args, t: 8 * t["BLOCK"]})
    x = np.arange(2560, dtype=np.float64)
    for block in (160, 256):
        out = np.zeros_like(x)
        kernel.configure(BLOCK=block)(x, out)
        np.testing.assert_array_equal(out, x.reshape(-1, block)[:, ::-1].reshape(-1))


UNINITIALISED_CU = """\
    extern "C" __global__ void read_unwritten(float *out)
    {
        __shared__ float never_written[32];
        out[threadIdx.x] = never_written[threadIdx.x];
    }
"""


def test_shared_memory_starts_as_nan_not_zero(tmp_path):
    """On a GPU shared memory starts with whatever was there: here it is NaN, so a kernel
    that reads it before writing it fails its test instead of passing by luck on zeros."""
    kernel = cuda_kernel(tmp_path, UNINITIALISED_CU, "read_unwritten",
                         launch={"grid": 1, "block": 32})
    out = np.zeros(32, np.float32)
    kernel(out)
    assert np.isnan(out).all()


INDEX_CU = """\
    /* every thread of a 3-D grid of 3-D blocks writes its global linear index */
    extern "C" __global__ void index3d(int nx, int ny, int nz, int *out)
    {
        int x = blockIdx.x * blockDim.x + threadIdx.x;
        int y = blockIdx.y * blockDim.y + threadIdx.y;
        int z = blockIdx.z * blockDim.z + threadIdx.z;
        if (x < nx && y < ny && z < nz)
            out[(z * ny + y) * nx + x] = x + 1000 * y + 1000000 * z
                + (gridDim.x * gridDim.y * gridDim.z == 0) * 7;
    }
"""


def test_three_dimensional_grid_and_block(tmp_path):
    kernel = cuda_kernel(tmp_path, INDEX_CU, "index3d",
                         launch={"grid": lambda args, t: (cdiv(args["nx"], 4),
                                                          cdiv(args["ny"], 3),
                                                          cdiv(args["nz"], 2)),
                                 "block": (4, 3, 2)})
    nx, ny, nz = 9, 7, 5
    out = np.full((nz, ny, nx), -1, np.int32)
    kernel(nx, ny, nz, out)
    z, y, x = np.meshgrid(np.arange(nz), np.arange(ny), np.arange(nx), indexing="ij")
    np.testing.assert_array_equal(out, x + 1000 * y + 1000000 * z)


CONSTANT_CU = """\
    __constant__ float taps[5] = {0.1f, 0.2f, 0.4f, 0.2f, 0.1f};

    extern "C" __global__ void smooth(int n, const float *x, float *out)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < 2 || i >= n - 2)
            return;
        float sum = 0.0f;
        for (int t = 0; t < 5; ++t)
            sum += taps[t] * x[i + t - 2];
        out[i] = sum;
    }
"""


def test_constant_memory(tmp_path):
    kernel = cuda_kernel(tmp_path, CONSTANT_CU, "smooth",
                         launch={"grid": lambda args, t: cdiv(args["n"], 64), "block": 64})
    x = np.random.default_rng(2).random(500).astype(np.float32)
    out = np.zeros_like(x)
    kernel(x.size, x, out)
    expected = np.convolve(x, np.array([0.1, 0.2, 0.4, 0.2, 0.1], np.float32), "same")
    np.testing.assert_allclose(out[2:-2], expected[2:-2], rtol=1e-5)


PRINTF_CU = """\
    extern "C" __global__ void hello(const int *x)
    {
        if (threadIdx.x % 8 == 0)
            printf("block %d thread %d sees %d\\n", blockIdx.x, threadIdx.x, x[threadIdx.x]);
    }
"""


def test_device_printf_reaches_stdout(tmp_path, capfd):
    kernel = cuda_kernel(tmp_path, PRINTF_CU, "hello", launch={"grid": 2, "block": 16})
    kernel(np.arange(16, dtype=np.int32) * 10)
    lines = capfd.readouterr().out.splitlines()
    assert sorted(lines) == sorted(f"block {b} thread {t} sees {t * 10}"
                                   for b in (0, 1) for t in (0, 8))


PRINTF_FLOOD_CU = """\
    extern "C" __global__ void flood(const int *x)
    {
        printf("%20000000d\\n", x[threadIdx.x]);
    }
"""


def test_device_printf_output_is_capped_per_launch(tmp_path, capfd):
    """Four threads asking for 20 MB each: a launch prints at most the CUDA printf buffer's
    default size (1 MiB), then says its output was cut; the next launch prints again."""
    kernel = cuda_kernel(tmp_path, PRINTF_FLOOD_CU, "flood", launch={"grid": 1, "block": 4})
    for _ in range(2):
        kernel(np.arange(4, dtype=np.int32))
    out = capfd.readouterr().out
    assert len(out) < 2 * (1 << 20) + 4096, f"{len(out)} bytes printed"
    notes = [line for line in out.splitlines() if "device printf output" in line]
    assert len(notes) == 2 and "cut at 1048576 bytes" in notes[0], notes
    assert len(out) > 1 << 20  # what fits is printed


MATH_CU = """\
    extern "C" __global__ void math(const float *x, float *out)
    {
        int i = threadIdx.x;
        out[i] = sqrtf(x[i]) + expf(-x[i]) + __sinf(x[i]) + rsqrtf(x[i] + 1.0f)
            + max(x[i], 0.5f) + (float)min(i, 3) + tanhf(x[i]) + powf(x[i], 1.5f);
    }
"""


def test_math_functions_are_the_hosts_libm(tmp_path):
    kernel = cuda_kernel(tmp_path, MATH_CU, "math", launch={"grid": 1, "block": 64})
    x = np.linspace(0.0, 4.0, 64, dtype=np.float32)
    out = np.zeros_like(x)
    kernel(x, out)
    d = x.astype(np.float64)
    expected = (np.sqrt(d) + np.exp(-d) + np.sin(d) + 1 / np.sqrt(d + 1) + np.maximum(d, 0.5)
                + np.minimum(np.arange(64), 3) + np.tanh(d) + d ** 1.5)
    np.testing.assert_allclose(out, expected, rtol=2e-6)


SAD_CU = """\
    extern "C" __global__ void sad(const int *a, const int *b, const unsigned int *c,
                                   unsigned int *out, unsigned int *high)
    {
        int i = threadIdx.x;
        out[i] = __sad(a[i], b[i], c[i]);
        high[i] = __sad(a[i], b[i], 0u) > 0x7fffffffu;  /* |a - b| of 2^31 or more */
        out[i + blockDim.x] = __usad((unsigned int)a[i], (unsigned int)b[i], c[i]);
    }
"""


def test_sad_is_defined_for_every_pair_of_ints(tmp_path):
    """CUDA's __sad(x, y, z) is |x - y| + z for all ints, |x - y| taken without overflow
    (up to 2^32 - 1) and the sum modulo 2^32; __usad the same on unsigned ints."""
    kernel = cuda_kernel(tmp_path, SAD_CU, "sad", launch={"grid": 1, "block": 16})
    low, high = np.iinfo(np.int32).min, np.iinfo(np.int32).max
    a = np.array([high, low, 0, low, -1, high, 5, -7, low, high, 1, 0, low + 1, -2, 3, high],
                 np.int32)
    b = np.array([low, high, low, 0, high, -1, 5, 9, low, high, low, high, -1, high, -4, 0],
                 np.int32)
    c = np.array([0, 0, 0, 7, 1, 0xFFFFFFFF, 0, 3, 2, 0, 5, 0, 0, 9, 0, 1], np.uint32)
    out, above = np.zeros(32, np.uint32), np.zeros(16, np.uint32)
    kernel(a, b, c, out, above)
    distance = np.abs(a.astype(np.int64) - b.astype(np.int64))
    np.testing.assert_array_equal(out[:16], ((distance + c) % 2 ** 32).astype(np.uint32))
    np.testing.assert_array_equal(above, (distance > 0x7FFFFFFF).astype(np.uint32))
    ua, ub = a.view(np.uint32).astype(np.int64), b.view(np.uint32).astype(np.int64)
    np.testing.assert_array_equal(out[16:], ((np.abs(ua - ub) + c) % 2 ** 32).astype(np.uint32))


# -- errors a GPU hides --------------------------------------------------------------------

DIVERGENT_CU = """\
    /* wrong: threads past n return before the barrier the others wait at */
    extern "C" __global__ void shift_left(int n, const float *x, float *out)
    {
        __shared__ float tile[64];
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i >= n)
            return;
        tile[threadIdx.x] = x[i];
        __syncthreads();
        out[i] = threadIdx.x + 1 < blockDim.x ? tile[threadIdx.x + 1] : x[i];
    }
"""


@pytest.mark.timeout(120)
def test_divergent_barrier_fails_the_users_test_with_a_clear_message(pytester):
    """Run as a user would: their test fails, naming the kernel, the block, the line and what
    to do; it neither passes nor hangs."""
    pytester.path.joinpath("shift.cu").write_text(textwrap.dedent(DIVERGENT_CU))
    pytester.makepyfile(test_shift="""
        import numpy as np
        import pytest_r3 as r3

        shift_left = r3.kernel("shift.cu", entry="shift_left", backend="cuda",
                               launch={"grid": lambda args, t: (args["n"] + 63) // 64,
                                        "block": 64})

        def test_shift():
            x = np.arange(100, dtype=np.float32)
            out = np.zeros_like(x)
            shift_left(100, x, out)
            assert out[0] == 1.0
    """)
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", timeout=110)
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    assert "KernelFault" in text
    assert "kernel 'shift_left' block (1, 0, 0): divergent __syncthreads" in text
    assert "barrier on line 9" in text
    assert "(36 returned" not in text and "thread (36, 0, 0) returned" in text


MISMATCHED_CU = """\
    extern "C" __global__ void two_barriers(float *out)
    {
        if (threadIdx.x < 8) {
            __syncthreads();
        } else {
            __syncthreads();
        }
        out[threadIdx.x] = 1.0f;
    }
"""


def test_threads_at_different_barriers_are_an_error(tmp_path):
    kernel = cuda_kernel(tmp_path, MISMATCHED_CU, "two_barriers", launch={"grid": 1,
                                                                          "block": 16})
    with pytest.raises(KernelFault, match=r"different __syncthreads calls .*line 4.*line 6"):
        kernel(np.zeros(16, np.float32))


OVERRUN_CU = """\
    /* wrong: the bounds test lets the last block write past the end of out */
    extern "C" __global__ void fill(int n, float *out)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i <= n + 3)
            out[i] = 1.0f;
    }
"""


def test_out_of_bounds_write_is_caught_by_the_guard_zone(tmp_path):
    kernel = cuda_kernel(tmp_path, OVERRUN_CU, "fill", launch={"grid": 4, "block": 32})
    out = np.zeros(100, np.float32)
    with pytest.raises(KernelFault, match=r"kernel 'emulated_fill_\d+' .*wrote out of bounds: "
                       r"argument 2 \(float \*out\) wrote up to 16 byte\(s\) past its end"):
        kernel(100, out)
    assert not out.any()  # nothing copied back from a faulted launch


# -- selection ------------------------------------------------------------------------------

def test_environment_variable_forces_and_refuses_emulation(monkeypatch):
    assert isinstance(get_backend("cuda"), cuda_emulation.EmulatedCUDABackend)
    assert get_backend("cuda").target_name().startswith("cuda-emulation-x86_64")
    monkeypatch.setenv(cuda_emulation.EMULATION_ENV, "0")
    forget_backend("cuda")
    assert not getattr(get_backend("cuda"), "emulated", False)
    monkeypatch.setenv(cuda_emulation.EMULATION_ENV, "maybe")
    forget_backend("cuda")
    with pytest.raises(BackendError, match="PYTEST_R3_CUDA_EMULATION='maybe' is not understood"):
        get_backend("cuda")


def test_device_arrays_are_refused_with_a_message(tmp_path):
    kernel = cuda_kernel(tmp_path, OVERRUN_CU, "fill", launch={"grid": 1, "block": 32})

    class DeviceArray:
        __cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (0, False)}

    with pytest.raises(Exception, match="emulation on this machine, which takes numpy arrays"):
        kernel(4, DeviceArray())


# -- recordings, replay and tuning ----------------------------------------------------------

@pytest.fixture
def recorded_matmul(tmp_path):
    return record_matmul_launches(example_matmul(tile_values=(16, 8)), tmp_path)


@pytest.mark.timeout(300)
def test_replay_verifies_emulated_candidates_untimed(recorded_matmul):
    """A tunable change and a correct rewrite verify against the recordings; a wrong
    rewrite and one calling outside the kernel are refused; nothing is timed."""
    from pytest_r3.replay import Candidate, ReplayServer, ReplaySettings

    spec, store, keys = recorded_matmul
    source = (EXAMPLE / "exampleproj" / "cuda" / "matmul.cu").read_text()
    swapped = source.replace("sum += a_tile[ty][q] * b_tile[q][tx];",
                             "sum = fmaf(a_tile[ty][q], b_tile[q][tx], sum);")
    wrong = source.replace("for (int base = 0; base < k; base += TILE)",
                           "for (int base = TILE; base < k; base += TILE)")
    escape = source.replace("float sum = 0.0f;", "float sum = (float)getpid();").replace(
        "#ifndef TILE", "extern \"C\" int getpid(void);\n#ifndef TILE")
    settings = ReplaySettings(run_timeout=20.0, timing_rounds=3, warmup_rounds=1)
    with ReplayServer(spec, store.root, keys, settings, request_timeout=120) as server:
        for candidate in (Candidate(macros={"TILE": 8}), Candidate(source_text=swapped)):
            result = server.evaluate(candidate)
            assert result.status == "ok", result.summary()
            assert not result.timing
            assert any("not timed" in d for d in result.diagnostics)
        assert server.evaluate(Candidate(source_text=wrong)).status == "wrong_output"
        refused = server.evaluate(Candidate(source_text=escape))
        assert refused.status == "sandbox_violation", refused.summary()
        assert "getpid" in refused.summary()


@pytest.mark.timeout(300)
def test_record_then_tune_skips_emulated_kernels_in_one_line(pytester):
    pytester.path.joinpath("saxpy.cu").write_text(
        (EXAMPLE / "exampleproj" / "cuda" / "saxpy.cu").read_text())
    pytester.makepyfile(test_saxpy="""
        import numpy as np
        import pytest
        import pytest_r3 as r3

        saxpy = r3.kernel("saxpy.cu", entry="saxpy", backend="cuda",
                          tune={"BLOCK": [128, 256]},
                          launch=lambda args, t: {"grid": ((args["n"] + t["BLOCK"] - 1)
                                                           // t["BLOCK"],)})

        @pytest.mark.r3_oracle(saxpy)
        def test_saxpy():
            x = np.arange(1000, dtype=np.float32)
            y = np.ones(1000, dtype=np.float32)
            saxpy(1000, 2.0, x, y)
            np.testing.assert_array_equal(y, 2 * np.arange(1000, dtype=np.float32) + 1)
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--r3-tune",
                                           "--r3-budget", "4", timeout=280)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        "pytest-r3: saxpy: not tuned: CUDA runs in emulation on the CPU here: its timings say "
        "nothing about a GPU, so nothing is ranked and no lock entry is written"])
    assert "saxpy: no workload recorded" not in result.stdout.str()  # nothing is timed
    assert (pytester.path / ".r3" / "recordings" / "saxpy" / "index.json").is_file()
    lock = pytester.path / "r3.lock"
    assert not lock.exists() or "saxpy" not in lock.read_text()


@pytest.mark.timeout(300)
def test_example_project_runs_every_cuda_test_in_emulation(pytester):
    result = pytester.runpytest_subprocess(
        str(EXAMPLE / "tests" / "test_cuda_kernels.py"), "-p", "no:cacheprovider",
        "--rootdir", str(EXAMPLE), "-c", str(EXAMPLE / "pytest.ini"), timeout=280)
    result.assert_outcomes(passed=9)


@pytest.mark.parametrize("value, emulated", [("on", True), ("off", False)])
def test_ini_setting_chooses_emulation_for_the_run(pytester, monkeypatch, value, emulated):
    monkeypatch.delenv(cuda_emulation.EMULATION_ENV, raising=False)
    pytester.makeini(f"[pytest]\nr3_cuda_emulation = {value}\n")
    pytester.makepyfile(test_choice=f"""
        import os
        from pytest_r3.backends import get_backend

        def test_choice():
            assert os.environ["PYTEST_R3_CUDA_EMULATION"] == "{int(emulated)}"
            assert getattr(get_backend("cuda"), "emulated", False) is {emulated}
    """)
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_ini_setting_refuses_unknown_values(pytester):
    pytester.makeini("[pytest]\nr3_cuda_emulation = sometimes\n")
    pytester.makepyfile(test_nothing="def test_nothing():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*r3_cuda_emulation: 'sometimes' is not auto, on or off*"])


TRAP_CU = """\
    extern "C" __global__ void checked(int n, float *out)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i == 70)
            __trap();
        if (i < n)
            out[i] = 2.0f;
    }
"""


def test_trap_is_a_fault_naming_the_line_and_thread(tmp_path):
    kernel = cuda_kernel(tmp_path, TRAP_CU, "checked", launch={"grid": 3, "block": 32})
    with pytest.raises(KernelFault, match=r"block \(2, 0, 0\): __trap\(\) called on line 5 by "
                       r"thread \(6, 0, 0\)"):
        kernel(96, np.zeros(96, np.float32))


# -- the CUDA coverage suite (tests/cuda_suite), run emulated against numpy -----------------------
SUITE = Path(__file__).resolve().parent / "cuda_suite"
RNG = np.random.default_rng(2024)


def suite_kernel(file: str, entry: str, launch, **options) -> r3.Kernel:
    return r3.kernel(SUITE / file, entry=entry, backend="cuda", launch=launch,
                     name=f"suite_{entry}_{id(launch)}", **options)


def grid_1d(block: int, size: str = "n"):
    return {"grid": lambda args, t: max(1, cdiv(int(args[size]), block)), "block": block}


def case_scale_tiles_in_the_file():
    """A template kernel's instance that the file instantiates, by its C++ name."""
    k = suite_kernel("scale_tiles_template.cu", "scale_tiles<16, float>",
                     {"grid": lambda args, t: max(1, cdiv(int(args["n"]), 16 * 32)),
                      "block": 32})
    x = RNG.standard_normal(1000).astype(np.float32)
    y = x.copy()
    k(y, np.float32(3.0), x.size)
    np.testing.assert_array_equal(y, x * np.float32(3.0))


def case_scale_tiles_instantiated_for_the_run():
    """An instance the file never instantiates: the build instantiates it, not the file."""
    k = suite_kernel("scale_tiles_template.cu", "scale_tiles<2, double>",
                     {"grid": lambda args, t: max(1, cdiv(int(args["n"]), 2 * 64)),
                      "block": 64})
    x = RNG.standard_normal(777)
    y = x.copy()
    k(y, 0.5, x.size)
    np.testing.assert_array_equal(y, x * 0.5)


def case_reduce_blocks_template():
    """A block-size template with dynamic shared memory behind a helper struct."""
    k = suite_kernel("reduce_template_blocksize.cu", "reduce_blocks<float, 256, true>",
                     {"grid": 4, "block": 256, "shared": 256 * 4})
    x = RNG.standard_normal(4096).astype(np.float32)
    partial = np.zeros(4, np.float32)
    k(x, partial, x.size)
    np.testing.assert_allclose(partial.sum(), x.astype(np.float64).sum(), rtol=1e-5, atol=1e-4)


def case_half_bias_relu():
    rows, cols = 37, 24
    k = suite_kernel("half_bias_relu.cu", "half_bias_relu",
                     {"grid": lambda args, t: cdiv(int(args["rows"]) * int(args["cols"]), 128),
                      "block": 128})
    x = RNG.standard_normal(rows * cols).astype(np.float16)
    bias = RNG.standard_normal(cols).astype(np.float16)
    y, y_float = np.zeros_like(x), np.zeros(x.size, np.float32)
    k(x, bias, y, y_float, rows, cols)
    expected = np.maximum(x + np.tile(bias, rows), np.float16(0))  # numpy rounds to half too
    np.testing.assert_array_equal(y, expected)
    np.testing.assert_array_equal(y_float, expected.astype(np.float32))


def case_haxpy_half2():
    k = suite_kernel("haxpy_half2.cu", "haxpy_half2", {"grid": 3, "block": 64})
    n = 1001  # odd: the last element alone
    x = RNG.standard_normal(n).astype(np.float16)
    y = RNG.standard_normal(n).astype(np.float16)
    expected = (np.float32(np.float16(0.75)) * x.astype(np.float32)
                + y.astype(np.float32)).astype(np.float16)  # one rounding: a fused multiply-add
    k(n, np.float32(0.75), x, y)
    np.testing.assert_array_equal(y, expected)


def _bf16(values: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits, rounded to nearest even."""
    bits = values.astype(np.float32).view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def case_gelu_bf16():
    k = suite_kernel("bf16_gelu.cu", "gelu_bf16",
                     {"grid": lambda args, t: cdiv(int(args["n"]) // 2, 64), "block": 64})
    n = 512
    x = _bf16(RNG.standard_normal(n).astype(np.float32) * 2)
    y = np.zeros(n, np.uint16)
    k(x, y, n)
    v = (x.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    gelu = 0.5 * v * (1 + np.tanh(0.7978845608 * (v + 0.044715 * v ** 3)))
    got = (y.astype(np.uint32) << 16).view(np.float32)
    np.testing.assert_allclose(got, gelu, rtol=2 ** -7, atol=1e-6)  # bfloat16: 8 bits


def case_max_and_sum():
    k = suite_kernel("atomic_cas_float.cu", "max_and_sum", grid_1d(128))
    x = RNG.standard_normal(3000).astype(np.float32)
    top, total = np.array([-np.inf], np.float32), np.zeros(1)
    k(x, top, total, x.size)
    assert top[0] == x.max()
    np.testing.assert_allclose(total[0], x.astype(np.float64).sum(), rtol=1e-9)


def case_compact_above():
    k = suite_kernel("ballot_compact.cu", "compact_above", grid_1d(128))
    x = RNG.standard_normal(1000).astype(np.float32)
    out, count = np.zeros_like(x), np.zeros(1, np.uint32)
    k(x, out, count, np.float32(0.5), x.size)
    kept = x[x > 0.5]
    assert count[0] == kept.size
    np.testing.assert_array_equal(np.sort(out[:kept.size]), np.sort(kept))


def case_bit_tricks():
    k = suite_kernel("bit_tricks.cu", "bit_tricks", grid_1d(64))
    w = RNG.integers(0, 2**32, 500, dtype=np.uint64).astype(np.uint32)
    w[:3] = [0, 1, 0x80000000]
    outs = [np.zeros_like(w) for _ in range(4)]
    k(w, *outs, w.size)
    bits = [[int(b) for b in f"{int(v):032b}"] for v in w]
    popc = np.array([sum(b) for b in bits])
    clz = np.array([32 if v == 0 else 32 - int(v).bit_length() for v in w])
    ffs = np.array([0 if v == 0 else (int(v) & -int(v)).bit_length() for v in w])
    np.testing.assert_array_equal(outs[0], popc + (clz << 8) + (ffs << 16))
    np.testing.assert_array_equal(outs[1], [int(f"{int(v):032b}"[::-1], 2) for v in w])
    np.testing.assert_array_equal(outs[2], w.byteswap())
    shift = np.arange(w.size) % 32
    rotated = [((int(v) << int(s)) | (int(v) >> (32 - int(s)))) & 0xFFFFFFFF
               for v, s in zip(w, shift)]
    np.testing.assert_array_equal(outs[3], rotated)


def case_block_scan():
    k = suite_kernel("block_scan.cu", "block_inclusive_scan", grid_1d(256))
    x = RNG.integers(-50, 50, 1000, dtype=np.int32)
    out = np.zeros_like(x)
    k(x, out, x.size)
    padded = np.concatenate([x, np.zeros(24, np.int32)]).reshape(-1, 256)
    np.testing.assert_array_equal(out, np.cumsum(padded, axis=1).reshape(-1)[:1000])


def case_checked_gather():
    k = suite_kernel("checked_gather.cu", "checked_gather", grid_1d(64))
    src = RNG.standard_normal(100).astype(np.float32)
    idx = RNG.integers(0, 100, 300, dtype=np.int32)
    out = np.zeros(300, np.float32)
    k(src, idx, out, 300, 100)
    np.testing.assert_array_equal(out, src[idx])
    idx[123] = 100
    with pytest.raises(KernelFault, match=r"assertion `.*` failed at .*checked_gather.cu"):
        k(src, idx, out, 300, 100)


def case_conv1d_gauss():
    k = suite_kernel("conv1d_constant.cu", "conv1d_gauss", grid_1d(128))
    x = RNG.standard_normal(700).astype(np.float32)
    out = np.zeros_like(x)
    k(x, out, x.size)
    w = np.array([0.0162162162, 0.0540540541, 0.1216216216, 0.1945945946, 0.2270270270,
                  0.1945945946, 0.1216216216, 0.0540540541, 0.0162162162], np.float32)
    np.testing.assert_allclose(out, np.convolve(x, w, "same"), rtol=1e-5, atol=1e-6)


def case_ddot():
    k = suite_kernel("ddot_shfl.cu", "ddot", {"grid": 4, "block": 128})
    a, b = RNG.standard_normal(5000), RNG.standard_normal(5000)
    result = np.zeros(1)
    k(a, b, result, a.size)
    np.testing.assert_allclose(result[0], a @ b, rtol=1e-12)


def case_tone_map():
    k = suite_kernel("device_helpers.cu", "tone_map", grid_1d(128))
    x = RNG.random(1000).astype(np.float32)
    out = np.zeros_like(x)
    k(x, out, np.float32(-0.2), np.float32(1.3), np.float32(1.1), x.size)
    v = np.clip((-0.2 + x * 1.5) * 1.1, 0, 1)
    np.testing.assert_allclose(out, v * v * (3 - 2 * v), rtol=1e-5, atol=1e-6)


def case_histogram256():
    k = suite_kernel("histogram256.cu", "histogram256", {"grid": 5, "block": 96})
    data = RNG.integers(0, 256, 20000, dtype=np.uint8)
    counts = np.zeros(256, np.uint32)
    k(data, counts, data.size)
    np.testing.assert_array_equal(counts, np.bincount(data, minlength=256))


def case_int_div_round():
    k = suite_kernel("int_div_round.cu", "int_div_round", grid_1d(64))
    n = 400
    a = RNG.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    b = RNG.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    x = RNG.uniform(-100, 100, n).astype(np.float32)
    y = RNG.uniform(0.5, 10, n).astype(np.float32)
    hi, avg, q, r = (np.zeros(n, np.uint32), np.zeros(n, np.int32), np.zeros(n, np.int32),
                     np.zeros(n, np.float32))
    k(a, b, x, y, hi, avg, q, r, n)
    np.testing.assert_array_equal(hi, (a.astype(np.uint64) * b) >> np.uint64(32))
    np.testing.assert_array_equal(avg, (a.view(np.int32).astype(np.int64)
                                        + b.view(np.int32)) >> 1)
    np.testing.assert_array_equal(q, np.rint(x / y).astype(np.int32))
    np.testing.assert_allclose(r, 1 / y + x * y, rtol=1e-6)


def case_layernorm_rows():
    k = suite_kernel("layernorm.cu", "layernorm_rows",
                     {"grid": lambda args, t: cdiv(args["rows"], 4), "block": (32, 4)})
    rows, cols = 37, 100
    x = RNG.standard_normal((rows, cols)).astype(np.float32)
    gamma, beta = RNG.standard_normal(cols).astype(np.float32), RNG.standard_normal(
        cols).astype(np.float32)
    out = np.zeros_like(x)
    k(x, gamma, beta, out, rows, cols, np.float32(1e-5))
    d = x.astype(np.float64)
    expected = (d - d.mean(1, keepdims=True)) / np.sqrt(d.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(out, expected * gamma + beta, rtol=1e-4, atol=1e-4)


def case_ldg_gather():
    k = suite_kernel("ldg_gather.cu", "ldg_gather", grid_1d(128))
    table = RNG.standard_normal(50).astype(np.float32)
    index = RNG.integers(0, 50, 600, dtype=np.int32)
    weight = RNG.standard_normal(600).astype(np.float32)
    out = np.zeros(600, np.float32)
    k(table, index, weight, out, 600)
    np.testing.assert_array_equal(out, table[index] * weight)


def case_leaky_relu():
    k = suite_kernel("leaky_relu_grid_stride.cu", "leaky_relu", {"grid": 3, "block": 64})
    x = RNG.standard_normal(1001).astype(np.float32)
    expected = np.where(x > 0, x, np.float32(0.1) * x)
    k(x, np.float32(0.1), x.size)
    np.testing.assert_array_equal(x, expected)


def case_math_mix():
    k = suite_kernel("math_mix.cu", "math_mix", grid_1d(128))
    x = RNG.uniform(0.1, 5.0, 500).astype(np.float32)
    out = np.zeros_like(x)
    k(x, out, x.size)
    d = x.astype(np.float64)
    expected = (np.sqrt(d) + 1 / np.sqrt(d) + np.exp(-d) + np.log(d) + np.sin(d) * np.cos(d)
                + d ** 0.75 + np.tanh(d - 1) + np.abs(np.floor(d) - d) + np.exp(-d) * np.sin(d))
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def case_nan_filter():
    k = suite_kernel("nan_filter.cu", "nan_filter", grid_1d(128))
    x = RNG.standard_normal(900).astype(np.float32)
    x[::7], x[3::11], x[5::13] = np.nan, np.inf, -np.inf
    out, replaced = np.zeros_like(x), np.zeros(1, np.uint32)
    k(x, out, np.float32(0.0), np.float32(1e30), replaced, x.size)
    expected = np.where(np.isnan(x), 0.0, np.where(np.isinf(x), np.copysign(1e30, x), x))
    np.testing.assert_array_equal(out, expected.astype(np.float32))
    assert replaced[0] == (~np.isfinite(x)).sum()


def case_double_and_report():
    k = suite_kernel("printf_debug.cu", "double_and_report", grid_1d(64))
    x = np.arange(100, dtype=np.float32)
    out = np.zeros_like(x)
    k(x, out, x.size, 0)
    np.testing.assert_array_equal(out, 2 * x)


def case_reduce_sum():
    k = suite_kernel("reduce_sum_shfl.cu", "reduce_sum", {"grid": 3, "block": 256})
    x = RNG.standard_normal(10000).astype(np.float32)
    total = np.zeros(1, np.float32)
    k(x, total, x.size)
    np.testing.assert_allclose(total[0], x.astype(np.float64).sum(), rtol=1e-4, atol=1e-3)


def case_reverse_segments():
    k = suite_kernel("reverse_dynamic_smem.cu", "reverse_segments",
                     {**grid_1d(64), "shared": 64 * 4})
    data = np.arange(150, dtype=np.int32)
    k(data, data.size)
    expected = np.concatenate([np.arange(64)[::-1], np.arange(64, 128)[::-1],
                               np.arange(128, 150)[::-1]])
    np.testing.assert_array_equal(data, expected)


def case_assign_slots():
    k = suite_kernel("ring_counter_inc.cu", "assign_slots", grid_1d(32))
    cursor, high = np.zeros(1, np.uint32), np.zeros(1, np.uint32)
    slot = np.zeros(100, np.uint32)
    k(cursor, slot, high, 7, slot.size)
    np.testing.assert_array_equal(np.sort(slot), np.sort(np.arange(100) % 7))
    assert high[0] == 6


def case_saxpy_float4():
    k = suite_kernel("saxpy_float4.cu", "saxpy_float4", {"grid": 2, "block": 64})
    x = RNG.standard_normal(1003).astype(np.float32)
    y = RNG.standard_normal(1003).astype(np.float32)
    expected = np.float32(1.5) * x + y
    k(x.size, np.float32(1.5), x, y)
    np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-6)


def case_sgemm_tiled():
    k = suite_kernel("sgemm_tiled.cu", "sgemm_tiled",
                     {"grid": lambda args, t: (cdiv(args["n"], 16), cdiv(args["m"], 16)),
                      "block": (16, 16)})
    m, n, kk = 45, 30, 70
    a = RNG.standard_normal((m, kk)).astype(np.float32)
    b = RNG.standard_normal((kk, n)).astype(np.float32)
    c = np.zeros((m, n), np.float32)
    k(m, n, kk, a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def case_softmax_rows():
    k = suite_kernel("softmax_rows.cu", "softmax_rows",
                     {"grid": lambda args, t: args["rows"], "block": 128})
    x = RNG.standard_normal((20, 300)).astype(np.float32)
    out = np.zeros_like(x)
    k(x, out, 20, 300)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)


def case_laplacian5():
    k = suite_kernel("stencil5_2d.cu", "laplacian5",
                     {"grid": lambda args, t: (cdiv(args["cols"], 16), cdiv(args["rows"], 8)),
                      "block": (16, 8)})
    g = RNG.standard_normal((30, 41)).astype(np.float32)
    out = np.full_like(g, 7.0)
    k(g, out, 30, 41)
    expected = out.copy()
    expected[1:-1, 1:-1] = g[:-2, 1:-1] + g[2:, 1:-1] + g[1:-1, :-2] + g[1:-1, 2:] \
        - 4 * g[1:-1, 1:-1]
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def case_transpose_padded():
    k = suite_kernel("transpose_padded.cu", "transpose_padded",
                     {"grid": lambda args, t: (cdiv(args["cols"], 32), cdiv(args["rows"], 32)),
                      "block": (32, 8)})
    x = RNG.standard_normal((70, 45)).astype(np.float32)
    out = np.zeros((45, 70), np.float32)
    k(x, out, 70, 45)
    np.testing.assert_array_equal(out, x.T)


def case_fill_volume():
    k = suite_kernel("volume_index3d.cu", "fill_volume",
                     {"grid": lambda args, t: (cdiv(args["nx"], 8), cdiv(args["ny"], 4),
                                               cdiv(args["nz"], 2)), "block": (8, 4, 2)})
    vol = np.zeros((5, 9, 13), np.int32)
    k(vol, 13, 9, 5)
    z, y, x = np.meshgrid(np.arange(5), np.arange(9), np.arange(13), indexing="ij")
    np.testing.assert_array_equal(vol, x + 1000 * y + 1000000 * z)


def case_count_keys():
    k = suite_kernel("warp_histogram_match.cu", "count_keys", grid_1d(128))
    keys = RNG.integers(0, 1000, 3000, dtype=np.uint32)
    counts = np.zeros(17, np.uint32)
    k(keys, counts, 17, keys.size)
    np.testing.assert_array_equal(counts, np.bincount(keys % 17, minlength=17))


def case_rgba_to_gray():
    k = suite_kernel("rgba_to_gray.cu", "rgba_to_gray", grid_1d(64))
    rgba = RNG.integers(0, 256, (300, 4), dtype=np.uint8)
    gray, out = np.zeros(300, np.uint8), np.zeros((300, 4), np.uint8)
    k(rgba, gray, out, 300)
    luma = np.clip(np.rint(rgba[:, :3].astype(np.float64) @ [0.299, 0.587, 0.114]), 0, 255)
    np.testing.assert_allclose(gray, luma, atol=1)


def case_rotate_points():
    k = suite_kernel("rotate_points.cu", "rotate_points", grid_1d(64))
    pts = RNG.standard_normal((200, 2)).astype(np.float32)
    angle = RNG.uniform(-3, 3, 200).astype(np.float32)
    out = np.zeros_like(pts)
    k(pts, angle, out, 200)
    c, s = np.cos(angle), np.sin(angle)
    np.testing.assert_allclose(out[:, 0], c * pts[:, 0] - s * pts[:, 1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out[:, 1], s * pts[:, 0] + c * pts[:, 1], rtol=1e-5, atol=1e-6)


SUITE_CASES = {name.removeprefix("case_"): case for name, case in dict(globals()).items()
               if name.startswith("case_")}


@pytest.mark.skipif(not SUITE.is_dir(), reason="the CUDA coverage suite (tests/cuda_suite) "
                    "is not in this checkout")
@pytest.mark.parametrize("name", sorted(SUITE_CASES))
def test_coverage_suite_kernel_matches_numpy_in_emulation(name):
    SUITE_CASES[name]()


# -- the shared-memory race check (PYTEST_R3_CUDA_RACECHECK=1) ------------------------------

RACY_CU = """\
    /* wrong: thread 0 sums buf before the other threads are known to have filled it */
    extern "C" __global__ void racy_sum(const float *x, float *out)
    {
        __shared__ float buf[64];
        buf[threadIdx.x] = x[blockIdx.x * 64 + threadIdx.x];
        if (threadIdx.x == 0) {
            float sum = 0.0f;
            for (int i = 0; i < 64; ++i)
                sum += buf[i];
            out[blockIdx.x] = sum;
        }
    }
"""


def test_racecheck_names_the_two_threads_and_the_array(tmp_path, monkeypatch):
    monkeypatch.setenv(cuda_emulation.RACECHECK_ENV, "1")
    kernel = cuda_kernel(tmp_path, RACY_CU, "racy_sum", launch={"grid": 2, "block": 64})
    with pytest.raises(KernelFault, match=r"kernel 'emulated_racy_sum_\d+' block \(0, 0, 0\): "
                       r"shared-memory race on buf \(byte 4\): thread \(1, 0, 0\) writes it "
                       r"after thread \(0, 0, 0\) read it, with no __syncthreads between them"):
        kernel(np.ones(128, np.float32), np.zeros(2, np.float32))


@pytest.mark.parametrize("case", ["matmul", "reduce", "scan", "histogram", "reverse"])
def test_racecheck_passes_correct_kernels(tmp_path, monkeypatch, case):
    """Barriers and warp operations order accesses: no race is reported where none is."""
    monkeypatch.setenv(cuda_emulation.RACECHECK_ENV, "1")
    if case == "matmul":
        test_tiled_matmul_with_barriers_matches_numpy(16, 40, 24, 56)
    elif case == "reduce":
        test_shuffle_reduction_matches_numpy(tmp_path, 4096, 1024)
    elif case == "scan":
        test_warp_scan_broadcast_and_votes_match_numpy(tmp_path)
    elif case == "histogram":
        test_atomic_histogram_matches_bincount(tmp_path)
    else:
        test_dynamic_shared_memory_has_the_launch_size(tmp_path)


def test_racecheck_catches_the_missing_second_barrier_of_a_tiled_matmul(tmp_path, monkeypatch):
    """The classic bug: without the barrier at the end of the loop, fast threads overwrite
    a tile that slower ones still read. With inputs of ones every tile holds the same
    values, so the result is right anyway; the race check still fails it."""
    source = (EXAMPLE / "exampleproj" / "cuda" / "matmul.cu").read_text()
    head, tail = source.rsplit("        __syncthreads();\n", 1)
    path = tmp_path / "matmul_one_barrier.cu"
    path.write_text(head + tail)
    launch = {"grid": lambda args, t: (cdiv(args["n"], 16), cdiv(args["m"], 16)),
              "block": (16, 16)}
    kernel = r3.kernel(path, entry="matmul_tiled", backend="cuda", launch=launch,
                       name="one_barrier_matmul")
    a = np.ones((32, 48), np.float32)
    b = np.ones((48, 32), np.float32)
    c = np.zeros((32, 32), np.float32)
    kernel(32, 32, 48, a, b, c)
    np.testing.assert_array_equal(c, 48)  # passes without the check
    monkeypatch.setenv(cuda_emulation.RACECHECK_ENV, "1")
    checked = r3.kernel(path, entry="matmul_tiled", backend="cuda", launch=launch,
                        name="one_barrier_matmul_checked")
    with pytest.raises(KernelFault, match=r"shared-memory race on (a|b)_tile \(byte \d+\): "
                       r"thread \(\d+, \d+, 0\) (reads|writes) it after thread "
                       r"\(\d+, \d+, 0\) (read|wrote) it"):
        checked(32, 32, 48, a, b, c)


def test_racecheck_setting_reaches_the_environment(pytester, monkeypatch):
    monkeypatch.delenv(cuda_emulation.RACECHECK_ENV, raising=False)
    pytester.makeini("[pytest]\nr3_cuda_racecheck = true\n")
    pytester.makepyfile(test_env="""
        import os

        def test_env():
            assert os.environ["PYTEST_R3_CUDA_RACECHECK"] == "1"
    """)
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_other_architectures_are_refused_in_one_line(tmp_path, monkeypatch):
    kernel = cuda_kernel(tmp_path, OVERRUN_CU, "fill", launch={"grid": 1, "block": 32})
    monkeypatch.setattr(cuda_emulation.platform, "machine", lambda: "aarch64")
    with pytest.raises(BackendError, match=r"CUDA emulation runs on x86-64 only \(this machine "
                       r"is aarch64\).*PYTEST_R3_CUDA_EMULATION=0"):
        kernel(32, np.zeros(32, np.float32))
    assert "x86-64 only" in selection.unavailable_reason()


PRINTF_N_CU = """\
    extern "C" __global__ void sneaky(int *out)
    {
        printf("%d%n\\n", 1, out);
    }
"""


def test_printf_with_percent_n_is_refused(tmp_path):
    kernel = cuda_kernel(tmp_path, PRINTF_N_CU, "sneaky", launch={"grid": 1, "block": 1})
    with pytest.raises(KernelFault, match="printf with %n is not supported on the device"):
        kernel(np.zeros(1, np.int32))


def test_ptx_is_still_available_through_the_device_backend():
    backend = get_backend("cuda")
    source = example_matmul().source
    with pytest.raises(r3.CompileError, match="host IR of CUDA emulation"):
        backend.compile_ptx(backend.compile(source, {"TILE": 16}), "matmul_tiled",
                            r3.Pipeline())
    build = backend.compile_ptx(backend.device.compile(source, {"TILE": 16}), "matmul_tiled",
                                r3.Pipeline())
    assert ".entry matmul_tiled" in build.ptx


PARTIAL_MASK_CU = """\
    /* the first half of each warp sums its 16 values with a 16-lane mask; the other half
     * skips the shuffles; everyone then meets at a barrier */
    extern "C" __global__ void half_warp_sums(const int *x, int *out)
    {
        __shared__ int sums[4];
        int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
        int v = x[threadIdx.x];
        if (lane < 16) {
            for (int offset = 8; offset > 0; offset /= 2)
                v += __shfl_down_sync(0x0000ffffu, v, offset, 16);
            if (lane == 0)
                sums[warp] = v;
        }
        __syncthreads();
        out[threadIdx.x] = sums[warp];
    }
"""


def test_a_mask_forms_a_smaller_group_of_lanes(tmp_path):
    kernel = cuda_kernel(tmp_path, PARTIAL_MASK_CU, "half_warp_sums",
                         launch={"grid": 1, "block": 128})
    x = np.arange(128, dtype=np.int32)
    out = np.zeros(128, np.int32)
    kernel(x, out)
    halves = x.reshape(4, 2, 16)[:, 0].sum(axis=1)
    np.testing.assert_array_equal(out, np.repeat(halves, 32))


def test_a_device_function_nothing_defines_is_named_not_a_crash(tmp_path):
    """The JIT would end the whole process on an unresolved symbol; the loader names it."""
    source = tmp_path / "unresolved.cu"
    source.write_text('extern "C" __device__ float mystery(float);\n'
                      "__global__ void apply(float *x) { x[threadIdx.x] = "
                      "mystery(x[threadIdx.x]); }\n")
    kernel = r3.kernel(source, entry="apply", backend="cuda", launch={"grid": 1, "block": 4})
    with pytest.raises(r3.CompileError, match="uses 'mystery', defined neither in its source"):
        kernel(np.ones(4, np.float32))
