"""HIP kernels of the kinds real codes have build to AMD code objects and match numpy.

Each kernel of tests/hip_suite/ (wavefront shuffle reductions, shared-memory tiling,
atomics, a ballot, a wavefront scan, half precision, a template, dynamic shared memory,
float math, and one single-source CUDA/HIP file) is built for gfx90a and gfx942 (the
linked code object holds the kernel and its 64-byte descriptor, with register counts in
its metadata) and run through ``r3.kernel(..., backend="hip")`` against a numpy oracle: in
emulation on the CPU here, on the GPU where an AMD GPU is usable. No GPU or ROCm needed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import pytest_r3 as r3
from pytest_r3 import Pipeline
from pytest_r3.backends.hip import HIPBackend
from pytest_r3.backends.hip import toolchain as hip_tools
from pytest_r3.backends.hip.selection import unavailable_reason
from pytest_r3.model.source import KernelSource

SUITE = Path(__file__).resolve().parent / "hip_suite"
needs_hip_runs = pytest.mark.skipif(unavailable_reason() is not None,
                                    reason=f"HIP kernels cannot run here: {unavailable_reason()}")


@dataclass
class Case:
    """A suite kernel: how it launches, its arguments and what numpy says it computes."""

    file: str
    entry: str
    launch: Callable
    arguments: Callable          # rng -> list of arguments
    expected: Callable           # arguments -> {index: array}
    shared: bool = False         # allocates LDS (statically)
    tolerance: float = 1e-5


def blocks(n: int, size: int = 256) -> dict:
    return {"grid": (r3.cdiv(n, size),), "block": (size,)}


def _matmul_args(rng):
    a = rng.standard_normal((70, 45)).astype(np.float32)
    b = rng.standard_normal((45, 33)).astype(np.float32)
    return [70, 33, 45, a, b, np.zeros((70, 33), np.float32)]


def _histogram_args(rng):
    return [rng.integers(0, 256, 5000).astype(np.uint8), np.zeros(64, np.uint32), 5000]


def _positive_args(rng):
    return [rng.standard_normal(1000).astype(np.float32), np.zeros(1, np.int32), 1000]


def _wave_scan_expected(a):
    x, n = a[0], a[2]
    padded = np.zeros(r3.cdiv(n, 64) * 64, np.int64)
    padded[:n] = x
    return {1: np.cumsum(padded.reshape(-1, 64), axis=1).reshape(-1)[:n].astype(np.int32)}


CASES = [
    Case("vector_add.hip", "vector_add", lambda a, t: blocks(a["n"]),
         lambda rng: [rng.random(1000, np.float32), rng.random(1000, np.float32),
                      np.zeros(1000, np.float32), 1000],
         lambda a: {2: a[0] + a[1]}),
    Case("saxpy_grid_stride.hip", "saxpy", lambda a, t: {"grid": (3,), "block": (128,)},
         lambda rng: [5000, 2.5, rng.random(5000, np.float32), rng.random(5000, np.float32)],
         lambda a: {3: np.float32(2.5) * a[2] + a[3]}),
    Case("wave_reduce.hip", "wave_reduce", lambda a, t: blocks(a["n"]),
         lambda rng: [rng.random(3000, np.float32), np.zeros(1, np.float32), 3000],
         lambda a: {1: np.array([a[0].sum()], np.float32)}, tolerance=1e-4),
    Case("block_reduce_shared.hip", "block_reduce", lambda a, t: blocks(a["n"]),
         lambda rng: [rng.random(2000), np.zeros(8), 2000],
         lambda a: {1: np.add.reduceat(a[0], np.arange(0, 2000, 256))}, shared=True),
    Case("matmul_tiled.hip", "matmul_tiled",
         lambda a, t: {"grid": (r3.cdiv(a["n"], 16), r3.cdiv(a["m"], 16)), "block": (16, 16)},
         _matmul_args, lambda a: {5: a[3] @ a[4]}, shared=True, tolerance=1e-4),
    Case("transpose_padded.hip", "transpose",
         lambda a, t: {"grid": (r3.cdiv(a["cols"], 32), r3.cdiv(a["rows"], 32)),
                       "block": (32, 8)},
         lambda rng: [50, 70, rng.random((50, 70), np.float32), np.zeros((70, 50), np.float32)],
         lambda a: {3: a[2].T}, shared=True),
    Case("histogram_atomic.hip", "histogram", lambda a, t: {"grid": (4,), "block": (128,)},
         _histogram_args,
         lambda a: {1: np.bincount(a[0] % 64, minlength=64).astype(np.uint32)}, shared=True),
    Case("ballot_count.hip", "count_positive", lambda a, t: blocks(a["n"], 128),
         _positive_args, lambda a: {1: np.array([(a[0] > 0).sum()], np.int32)}),
    Case("scan_wave.hip", "wave_scan", lambda a, t: blocks(a["n"], 128),
         lambda rng: [rng.integers(-50, 50, 300).astype(np.int32), np.zeros(300, np.int32),
                      300],
         _wave_scan_expected),
    Case("half_axpy.hip", "half_axpy", lambda a, t: blocks(a["n"]),
         lambda rng: [700, 0.5, rng.random(700).astype(np.float16),
                      rng.random(700).astype(np.float16)],
         lambda a: {3: (np.float32(0.5) * a[2].astype(np.float32)
                        + a[3].astype(np.float32)).astype(np.float16)}, tolerance=2e-3),
    Case("template_scale.hip", "scale_items<4, float>",
         lambda a, t: blocks(r3.cdiv(a["n"], 4), 64),
         lambda rng: [rng.random(1001, np.float32), np.zeros(1001, np.float32), 3.0, 1001],
         lambda a: {1: a[0] * np.float32(3.0)}),
    Case("gelu_math.hip", "gelu", lambda a, t: blocks(a["n"]),
         lambda rng: [rng.standard_normal(900).astype(np.float32), np.zeros(900, np.float32),
                      900],
         lambda a: {1: 0.5 * a[0] * (1 + np.tanh(np.sqrt(2 / np.pi)
                                                   * (a[0] + 0.044715 * a[0] ** 3)))},
         tolerance=1e-4),
    Case("dynamic_shared_reverse.hip", "reverse_blocks",
         lambda a, t: {"grid": (4,), "block": (64,), "shared": 64 * 4},
         lambda rng: [np.arange(256, dtype=np.int32), np.zeros(256, np.int32)],
         lambda a: {1: a[0].reshape(4, 64)[:, ::-1].reshape(-1)}),
    Case("portable_dot.cu", "dot", lambda a, t: {"grid": (4,), "block": (128,)},
         lambda rng: [rng.random(3000, np.float32), rng.random(3000, np.float32),
                      np.zeros(1, np.float32), 3000],
         lambda a: {2: np.array([np.dot(a[0].astype(np.float64), a[1])], np.float32)},
         tolerance=1e-4),
]
IDS = [case.file.split(".")[0] for case in CASES]


def test_suite_holds_at_least_twelve_kernels_each_described():
    assert len(CASES) >= 12
    kernels = {p.name for p in SUITE.iterdir()} - {"kernels.json"}
    assert {case.file for case in CASES} == kernels
    for name in kernels:
        text = (SUITE / name).read_text()
        assert text.startswith("// "), f"{name}: say what it computes on top"
    listed = json.loads((SUITE / "kernels.json").read_text())  # what the benchmark builds
    assert [(row["file"], row["entry"]) for row in listed] == [(c.file, c.entry) for c in CASES]


@pytest.mark.parametrize("arch", ["gfx90a", "gfx942"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_suite_kernel_builds_to_a_code_object(case, arch):
    backend = HIPBackend(arch)
    path = SUITE / case.file
    source = KernelSource(path.read_text(), str(path), path, (str(path.parent),), entry=case.entry)
    backend.inspect(source, case.entry, {})  # a template instance is declared by inspecting
    build = backend.compile_code_object(backend.compile(source, {}), case.entry, Pipeline(),
                                        case.entry)
    symbols = hip_tools.code_object_symbols(build.code_object)
    assert symbols.get(f"{build.symbol}.kd") == 64, sorted(symbols)  # the kernel descriptor
    assert symbols.get(build.symbol, 0) > 0  # and its code
    figures = build.figures
    assert figures["wavefront"] == 64
    assert 0 < figures["vgprs"] <= 512 and 0 < figures["sgprs"] <= 112
    assert (figures["lds_bytes"] > 0) == case.shared
    assert 1 <= figures["waves_per_simd"] <= 8
    assert f".amdgcn_target \"amdgcn-amd-amdhsa--{arch}" in build.assembly


@pytest.mark.skipif(shutil.which("llvm-readobj") is None, reason="llvm-readobj not installed")
def test_llvm_readobj_sees_the_kernel_descriptor_and_register_counts():
    backend = HIPBackend("gfx942")
    path = SUITE / "wave_reduce.hip"
    source = KernelSource(path.read_text(), str(path), path)
    build = backend.compile_code_object(backend.compile(source, {}), "wave_reduce",
                                        Pipeline(), "wave_reduce")
    folder = Path(__import__("tempfile").mkdtemp())
    (folder / "k.hsaco").write_bytes(build.code_object)
    shown = subprocess.run(["llvm-readobj", "--symbols", "--notes", str(folder / "k.hsaco")],
                           capture_output=True, text=True, check=True).stdout
    assert "Name: wave_reduce.kd" in shown
    assert f".vgpr_count:     {build.figures['vgprs']}" in shown
    assert f".sgpr_count:     {build.figures['sgprs']}" in shown


@needs_hip_runs
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_suite_kernel_matches_numpy(case, unique_name):
    kernel = r3.kernel(str(SUITE / case.file), entry=case.entry, backend="hip",
                       launch=case.launch, name=unique_name(IDS[CASES.index(case)]))
    arguments = case.arguments(np.random.default_rng(7))
    expected = case.expected(arguments)
    kernel(*arguments)
    for index, value in expected.items():
        np.testing.assert_allclose(np.asarray(arguments[index], np.float64),
                                   np.asarray(value, np.float64), rtol=case.tolerance,
                                   atol=case.tolerance, err_msg=f"argument {index}")


@needs_hip_runs
def test_the_single_source_file_gives_the_same_dot_as_cuda(unique_name):
    """portable_dot.cu built as CUDA (32-lane warps) and as HIP (64-lane wavefronts)."""
    rng = np.random.default_rng(3)
    x, y = rng.random(4000, np.float32), rng.random(4000, np.float32)
    results = {}
    for backend in ("cuda", "hip"):
        kernel = r3.kernel(str(SUITE / "portable_dot.cu"), entry="dot", backend=backend,
                           launch=lambda a, t: {"grid": (4,), "block": (128,)},
                           name=unique_name(f"dot_{backend}"))
        out = np.zeros(1, np.float32)
        kernel(x, y, out, 4000)
        results[backend] = out[0]
    assert results["cuda"] == pytest.approx(results["hip"], rel=1e-4)  # another sum order
    assert results["hip"] == pytest.approx(float(np.dot(x.astype(np.float64), y)), rel=1e-4)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_suite_kernel_passes_the_static_check_of_candidates(case):
    """A rewrite of any suite kernel that keeps its vocabulary is not refused on an AMD GPU:
    thread ids, barriers, cross-lane operations, LDS and the dispatch packet are allowed."""
    from pytest_r3.backends.clang import without_linker_keep
    from pytest_r3.replay import sandbox

    backend = HIPBackend("gfx942")
    path = SUITE / case.file
    source = KernelSource(path.read_text(), str(path), path, (str(path.parent),), entry=case.entry)
    backend.inspect(source, case.entry, {})
    module = backend.parse(without_linker_keep(backend.compile(source, {})), case.entry)
    backend.reachable(module, case.entry, case.entry)
    assert sandbox.check_module(module) == []


def test_a_candidate_reading_the_gpu_clock_is_refused():
    from pytest_r3.backends.clang import without_linker_keep
    from pytest_r3.replay import sandbox

    backend = HIPBackend("gfx942")
    text = ('extern "C" __global__ void stamp(long *t) {\n'
            "  t[threadIdx.x] = __builtin_amdgcn_s_memtime();\n}\n")
    module = backend.parse(without_linker_keep(backend.compile(
        KernelSource(text, "stamp.hip", entry="stamp"), {})), "stamp")
    backend.reachable(module, "stamp", "stamp")
    violations = sandbox.check_module(module)
    assert [v.symbol for v in violations] == ["llvm.amdgcn.s.memtime"]
    assert "reads a clock" in violations[0].reason
