"""The HIP backend as a user meets it: declaring, building for a gfx target, the errors,
64-lane wavefronts in emulation, `pytest-r3 build` figures and `--r3-tune` on a machine
without an AMD GPU. The kernels of many kinds are in test_hip_suite.py."""

from __future__ import annotations

import platform
from pathlib import Path

import numpy as np
import pytest
from conftest import record_matmul_launches

import pytest_r3 as r3
from pytest_r3 import Pipeline
from pytest_r3.backends import forget_backend, get_backend
from pytest_r3.backends.hip import HIPBackend
from pytest_r3.backends.hip import runtime as hip_runtime
from pytest_r3.backends.hip.emulation import EmulatedHIPBackend
from pytest_r3.backends.hip.selection import unavailable_reason
from pytest_r3.errors import BackendError, CompileError, MissingExtraError, ToolchainError
from pytest_r3.model.source import KernelSource
from pytest_r3.tuning.build import build

SUITE = Path(__file__).resolve().parent / "hip_suite"
needs_hip_runs = pytest.mark.skipif(unavailable_reason() is not None,
                                    reason=f"HIP kernels cannot run here: {unavailable_reason()}")
needs_no_amd_gpu = pytest.mark.skipif(hip_runtime.unavailable_reason() is None,
                                      reason="an AMD GPU is usable here")

BROADCAST = """
#include <hip/hip_runtime.h>
extern "C" __global__ void broadcast(const int *x, int *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = __shfl(x[i], 0) * 1000 + (int)(__ballot(x[i] % 2 == 1) >> 32 & 0xff);
}
"""

MASK32 = """
#include <hip/hip_runtime.h>
extern "C" __global__ void warp_sum(const float *x, float *out) {
  float v = x[threadIdx.x];
  for (int offset = 16; offset > 0; offset /= 2)
    v += __shfl_down_sync(0xffffffff, v, offset);
  if (threadIdx.x % 32 == 0) out[threadIdx.x / 32] = v;
}
"""


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def device_build(path: str, entry: str, arch: str = "gfx942"):
    backend = HIPBackend(arch)
    source = KernelSource(Path(path).read_text(), path, Path(path), entry=entry)
    return backend.compile_code_object(backend.compile(source, {}), entry, Pipeline(), entry)


# -- wavefronts of 64 lanes ------------------------------------------------------------------
@needs_hip_runs
def test_a_broadcast_and_a_ballot_span_64_lanes_as_on_an_amd_gpu(tmp_path, unique_name):
    kernel = r3.kernel(write(tmp_path, "broadcast.hip", BROADCAST), entry="broadcast",
                       backend="hip", name=unique_name("broadcast"),
                       launch=lambda a, t: {"grid": (2,), "block": (128,)})
    x = np.arange(256, dtype=np.int32) * 3 + 1
    out = np.zeros(256, np.int32)
    kernel(x, out)
    expected = []
    for wave in x.reshape(-1, 64):  # 64-lane wavefronts: lane 0 of each, bits 32-39
        bits = sum(1 << lane for lane, value in enumerate(wave) if value % 2 == 1)
        expected += [wave[0] * 1000 + (bits >> 32 & 0xFF)] * 64
    np.testing.assert_array_equal(out, expected)


def test_a_32_bit_warp_mask_is_refused_where_it_is_written(tmp_path):
    path = write(tmp_path, "warp_sum.hip", MASK32)
    with pytest.raises(CompileError) as caught:
        device_build(path, "warp_sum")
    first = str(caught.value).splitlines()[0]
    assert "warp_sum.hip:6" in first
    assert "HIP wavefronts have 64 lanes" in first and "64-bit integer" in first


@needs_hip_runs
def test_a_32_bit_warp_mask_is_refused_in_emulation_too(tmp_path, unique_name):
    kernel = r3.kernel(write(tmp_path, "warp_sum.hip", MASK32), entry="warp_sum",
                       backend="hip", name=unique_name("warp_sum"),
                       launch=lambda a, t: {"grid": (1,), "block": (64,)})
    with pytest.raises(CompileError, match=r"warp_sum.hip:6.*HIP wavefronts have 64 lanes"):
        kernel(np.ones(64, np.float32), np.zeros(2, np.float32))


# -- what the device build refuses, in one line ------------------------------------------
def test_double_transcendental_math_is_refused_at_the_call(tmp_path):
    path = write(tmp_path, "decay.hip", 'extern "C" __global__ void decay(double *x) {\n'
                                        "  x[threadIdx.x] = exp(-x[threadIdx.x]);\n}\n")
    with pytest.raises(CompileError) as caught:
        device_build(path, "decay")
    first = str(caught.value).splitlines()[0]
    assert "decay.hip:2" in first and "double-precision exp is not provided" in first


def test_a_device_function_nobody_defines_is_named_at_link(tmp_path):
    path = write(tmp_path, "lost.hip", 'extern "C" __device__ float helper(float);\n'
                                       'extern "C" __global__ void lost(float *x) {\n'
                                       "  x[threadIdx.x] = helper(x[threadIdx.x]);\n}\n")
    with pytest.raises(CompileError, match=r"kernel 'lost': the kernel calls helper, which "
                                           r"pytest-r3's HIP build does not provide"):
        device_build(path, "lost")


HIP_MISTAKES = {
    "hipcub": ("#include <hipcub/hipcub.hpp>\n"
               'extern "C" __global__ void k(float *x) { x[threadIdx.x] = 1.0f; }\n',
               "k.hip:1: hipCUB (<hipcub/hipcub.hpp>) is not supported by pytest-r3's HIP "
               "build; see docs/hip.md (section 'What HIP is supported')"),
    "half": ('extern "C" __global__ void k(float *x) {\n'
             "  __half h = __float2half(x[threadIdx.x]);\n  x[threadIdx.x] = 2.0f;\n}\n",
             "k.hip:2: '__half' (half precision without #include <hip/hip_fp16.h>) is not "
             "supported by pytest-r3's HIP build"),
    "host_api": ('extern "C" __global__ void k(float *x) {\n  float *copy;\n'
                 "  hipMalloc(&copy, 4);\n}\n",
                 "k.hip:3: 'hipMalloc' (the HIP host API) in device code or with these "
                 "arguments is not supported by pytest-r3's HIP build"),
}


@pytest.mark.parametrize("mistake", sorted(HIP_MISTAKES))
@pytest.mark.parametrize("emulated", [False, pytest.param(True, marks=pytest.mark.skipif(
    platform.machine().lower() not in ("x86_64", "amd64"), reason="emulation is x86-64 only"))],
    ids=["gfx942", "emulation"])
def test_what_the_hip_build_lacks_is_said_in_hips_words(tmp_path, mistake, emulated):
    text, expected = HIP_MISTAKES[mistake]
    path = write(tmp_path, "k.hip", text)
    backend = EmulatedHIPBackend() if emulated else HIPBackend("gfx942")
    with pytest.raises(CompileError) as caught:
        backend.compile(KernelSource(text, path, Path(path), entry="k"), {})
    first = str(caught.value).splitlines()[0]
    assert expected in first
    assert "cuda" not in first.lower()  # not docs/cuda.md, <cuda_fp16.h> or the CUDA host API


@needs_hip_runs
def test_a_hip_kernel_without_launch_is_refused_in_hips_words(tmp_path, unique_name):
    kernel = r3.kernel(write(tmp_path, "broadcast.hip", BROADCAST), entry="broadcast",
                       backend="hip", name=unique_name("no_launch"))
    with pytest.raises(r3.DeclarationError, match=r"declared without launch=: its signature "
                                                  r"and code object can be .*docs/hip\.md"):
        kernel(np.zeros(64, np.int32), np.zeros(64, np.int32))


def test_an_unknown_gfx_target_is_refused_with_the_known_ones():
    with pytest.raises(ToolchainError, match=r"'gfx1100' is not one pytest-r3 builds for; "
                                             r"use one of gfx90a, gfx942"):
        HIPBackend("gfx1100")


def test_the_emulation_setting_is_checked(monkeypatch):
    from pytest_r3.backends.hip.selection import hip_backend

    monkeypatch.setenv("PYTEST_R3_HIP_EMULATION", "maybe")
    with pytest.raises(BackendError, match=r"PYTEST_R3_HIP_EMULATION='maybe' is not "
                                           r"understood"):
        hip_backend()


# -- pytest-r3 build ---------------------------------------------------------------------
def test_build_for_gfx942_shows_registers_lds_and_occupancy(tmp_path, unique_name):
    kernel = r3.kernel(str(SUITE / "matmul_tiled.hip"), entry="matmul_tiled", backend="hip",
                       tune={"TILE": [16, 8]}, name=unique_name("matmul"))
    result = build(kernel, kernel.baseline, tmp_path, "gfx942")
    lines = "\n".join(result.lines())
    assert lines.splitlines()[0].startswith(f"{kernel.name} [hip gfx942]  TILE=16")
    for label in ("VGPRs", "SGPRs", "LDS (bytes)", "occupancy (waves/SIMD)"):
        assert label in lines
    assert result.figures["ours"]["lds_bytes"] == 2 * 16 * 16 * 4
    assert "hipcc is not installed" in lines or "hipcc is installed" in lines
    assert Path(result.files["code object"]).read_bytes()[:4] == b"\x7fELF"
    assert ".amdgcn_target" in Path(result.files["assembly"]).read_text()
    small = build(kernel, kernel.variant(TILE=8), tmp_path, "gfx90a")
    assert small.figures["ours"]["lds_bytes"] == 2 * 8 * 8 * 4
    assert small.target == "gfx90a"


# -- the runtime -------------------------------------------------------------------------
@needs_no_amd_gpu
def test_without_an_amd_gpu_the_runtime_says_why_in_one_line():
    reason = hip_runtime.unavailable_reason()
    assert reason is not None and "\n" not in reason
    assert 'pip install "pytest-r3[hip]"' in reason or "no usable AMD GPU" in reason


@needs_no_amd_gpu
def test_with_emulation_off_a_call_names_what_is_missing(tmp_path, monkeypatch, unique_name):
    monkeypatch.setenv("PYTEST_R3_HIP_EMULATION", "0")
    forget_backend("hip")
    try:
        kernel = r3.kernel(str(SUITE / "vector_add.hip"), entry="vector_add", backend="hip",
                           name=unique_name("vadd"),
                           launch=lambda a, t: {"grid": (1,), "block": (64,)})
        assert kernel.signature.describe() == (
            "void vector_add(const float *a, const float *b, float *c, int n)")
        with pytest.raises((MissingExtraError, BackendError)) as caught:
            kernel(*[np.zeros(8, np.float32)] * 3, 8)
        assert "\n" not in str(caught.value)
    finally:
        forget_backend("hip")


@needs_no_amd_gpu
def test_without_an_amd_gpu_hip_kernels_are_emulated_under_their_own_target():
    backend = get_backend("hip")
    assert backend.emulated
    assert backend.target_name().startswith("hip-emulation-")


# -- tuning ------------------------------------------------------------------------------
@needs_no_amd_gpu
@pytest.mark.timeout(300)
def test_tune_says_in_one_line_that_a_hip_kernel_is_emulated_and_not_tuned(pytester):
    pytester.path.joinpath("wave_reduce.hip").write_text(
        (SUITE / "wave_reduce.hip").read_text())
    pytester.makepyfile(test_reduce="""
        import numpy as np
        import pytest
        import pytest_r3 as r3

        reduce = r3.kernel("wave_reduce.hip", entry="wave_reduce", backend="hip",
                           tune={"BLOCK": [128, 256]},
                           launch=lambda a, t: {"grid": ((a["n"] + t["BLOCK"] - 1)
                                                         // t["BLOCK"],),
                                                "block": (t["BLOCK"],)})

        @pytest.mark.r3_oracle(reduce)
        def test_reduce():
            x = np.arange(1000, dtype=np.float32)
            total = np.zeros(1, np.float32)
            reduce(x, total, 1000)
            assert total[0] == pytest.approx(x.sum())
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--r3-tune",
                                           "--r3-budget", "4", timeout=280)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        "pytest-r3: wave_reduce: not tuned: HIP runs in emulation on the CPU here: its timings say "
        "nothing about a GPU, so nothing is ranked and no lock entry is written"])
    assert (pytester.path / ".r3" / "recordings" / "wave_reduce" / "index.json").is_file()
    lock = pytester.path / "r3.lock"
    assert not lock.exists() or "wave_reduce" not in lock.read_text()


# -- recordings and replay: verification runs anywhere -----------------------------------
@needs_no_amd_gpu
@pytest.mark.timeout(300)
def test_replay_verifies_hip_candidates_in_emulation_untimed(tmp_path, unique_name):
    """A tunable change and a correct rewrite of the tiled matmul verify against recorded
    launches in a contained worker; a wrong rewrite and one calling outside the kernel are
    refused; nothing is timed."""
    from pytest_r3.replay import Candidate, ReplayServer, ReplaySettings

    kernel = r3.kernel(str(SUITE / "matmul_tiled.hip"), entry="matmul_tiled", backend="hip",
                       tune={"TILE": [16, 8]}, name=unique_name("matmul"),
                       launch=lambda a, t: {"grid": (r3.cdiv(a["n"], t["TILE"]),
                                                     r3.cdiv(a["m"], t["TILE"])),
                                            "block": (t["TILE"], t["TILE"])})
    spec, store, keys = record_matmul_launches(kernel, tmp_path)
    source = (SUITE / "matmul_tiled.hip").read_text()
    swapped = source.replace("sum += a_tile[threadIdx.y][j] * b_tile[j][threadIdx.x];",
                             "sum = fmaf(a_tile[threadIdx.y][j], b_tile[j][threadIdx.x], sum);")
    wrong = source.replace("for (int t = 0; t < k; t += TILE)",
                           "for (int t = TILE; t < k; t += TILE)")
    escape = source.replace("float sum = 0.0f;", "float sum = (float)getpid();").replace(
        "#ifndef TILE", "extern \"C\" int getpid(void);\n#ifndef TILE")
    assert swapped != source and wrong != source and escape != source
    settings = ReplaySettings(run_timeout=20.0, timing_rounds=3, warmup_rounds=1)
    with ReplayServer(spec, store.root, keys, settings, request_timeout=120) as server:
        for candidate in (Candidate(macros={"TILE": 8}), Candidate(source_text=swapped)):
            result = server.evaluate(candidate)
            assert result.status == "ok", result.summary()
            assert not result.timing
        assert server.evaluate(Candidate(source_text=wrong)).status == "wrong_output"
        refused = server.evaluate(Candidate(source_text=escape))
        assert refused.status == "sandbox_violation", refused.summary()


VOCABULARY = """
#include <hip/hip_runtime.h>
extern "C" __global__ void vocab(int *out, unsigned int *counter, double *total) {
  dim3 t = threadIdx; uint3 b = blockIdx;
  int c = __syncthreads_count(t.x % 3 == 0) + __syncthreads_or(b.x) + __syncthreads_and(1);
  int x = __shfl_xor(c, 1) + __shfl_up(c, 2) + __any(c > 1) + __all(c > 0) + __popc(c);
  unsigned long long m = __activemask() & __ballot_sync(~0ull, x > 0);
  atomicInc(counter, 1000u);
  atomicMax(out, x);
  atomicAdd(total, 0.5);
  __threadfence();
  __syncwarp();
  out[1 + blockIdx.x * blockDim.x + threadIdx.x] =
      (int)__popcll(m) + __shfl_sync(0xffffffffffffffffull, x, 0) + min(x, 3)
      + (int)(rsqrtf(4.0f) * 4.0f + 0.5f) + (int)(powf(2.0f, 3.0f) + 0.5f);
}
"""


@needs_hip_runs
def test_the_documented_vocabulary_builds_for_the_gpu_and_runs(tmp_path, unique_name):
    path = write(tmp_path, "vocab.hip", VOCABULARY)
    build = device_build(path, "vocab", "gfx90a")
    assert build.figures["lds_bytes"] > 0  # __syncthreads_count meets in LDS
    kernel = r3.kernel(path, entry="vocab", backend="hip", name=unique_name("vocab"),
                       launch=lambda a, t: {"grid": (2,), "block": (96,)})
    out, counter, total = np.zeros(193, np.int32), np.zeros(1, np.uint32), np.zeros(1)
    kernel(out, counter, total)
    assert counter[0] == 192 and total[0] == 96.0
    # c: 32 threads of 96 have x % 3 == 0, + __syncthreads_or(blockIdx.x) + 1 = 33, 34;
    # x = c + c + 1 + 1 + popc(c) = 70, 72 (all lanes alike)
    assert out[0] == 72
    # popcll of the lanes active and voting: 64 in the first wavefront, 32 in the second
    # (a block of 96 threads), + lane 0's x + min(x, 3) + 2 + 8
    expected = [[64 + x + 13] * 64 + [32 + x + 13] * 32 for x in (70, 72)]
    np.testing.assert_array_equal(out[1:], np.ravel(expected))


SHARED_HELPERS = """
#include <hip/hip_runtime.h>
extern "C" __global__ void helpers(const int *a, const unsigned int *b, unsigned int *out) {
  int i = threadIdx.x;
  out[5 * i] = __hadd(a[i], 7) + __sad(a[i], 3, 1u);
  out[5 * i + 1] = __funnelshift_l(b[i], 0x80000001u, 4);
  out[5 * i + 2] = __vmaxu4(b[i], 0x10203040u);
  out[5 * i + 3] = min(a[i], 100u);  /* int with unsigned: compared as unsigned, as in CUDA */
  out[5 * i + 4] = __ldcg(&b[i]) + (signbit((float)a[i]) ? 1000u : 0u) + __double2hiint(2.0);
}
"""


@needs_hip_runs
def test_the_cuda_builds_integer_helpers_serve_hip_kernels_too(tmp_path, unique_name):
    """One header holds what both GPU builds share, so HIP has the CUDA build's helpers."""
    path = write(tmp_path, "helpers.hip", SHARED_HELPERS)
    assert device_build(path, "helpers").figures  # builds for gfx942
    kernel = r3.kernel(path, entry="helpers", backend="hip", name=unique_name("helpers"),
                       launch=lambda a, t: {"grid": (1,), "block": (64,)})
    a = np.arange(-32, 32, dtype=np.int32) * 37
    b = np.random.default_rng(3).integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
    out = np.zeros(320, np.uint32)
    kernel(a, b, out)
    wide, bw = a.astype(np.int64), b.astype(np.int64)
    bytes_max = np.maximum(b.view(np.uint8).reshape(-1, 4),
                           np.frombuffer(np.uint32(0x10203040).tobytes(), np.uint8))
    expected = np.stack([
        ((wide + 7) >> 1) + np.abs(wide - 3) + 1,
        ((0x80000001 << 4) | (bw >> 28)) & 0xFFFFFFFF,
        bytes_max.copy().view(np.uint32).ravel().astype(np.int64),
        np.where(a < 0, 100, np.minimum(wide, 100)),
        bw + np.where(a < 0, 1000, 0) + 0x40000000,
    ], axis=1) & 0xFFFFFFFF
    np.testing.assert_array_equal(out.reshape(64, 5), expected.astype(np.uint32))


def test_r3_hip_emulation_is_checked_and_sets_the_variable(pytester, monkeypatch):
    monkeypatch.delenv("PYTEST_R3_HIP_EMULATION", raising=False)
    pytester.makepyfile(test_setting="""
        import os

        def test_setting():
            assert os.environ["PYTEST_R3_HIP_EMULATION"] == "1"
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--r3-hip-emulation=on")
    result.assert_outcomes(passed=1)
    wrong = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--r3-hip-emulation=maybe")
    assert wrong.ret == pytest.ExitCode.USAGE_ERROR
    wrong.stderr.fnmatch_lines(["*--r3-hip-emulation / r3_hip_emulation: 'maybe' is not auto, "
                                "on or off*"])
