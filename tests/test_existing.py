"""Kernels as they are in real codebases, declared without editing their files: static
kernels, files with main() and driver code, C99 array parameters, -D configuration and
include directories, CUDA files with host code."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import pytest_r3 as r3

EXISTING = Path(__file__).resolve().parent.parent / "example_project" / "exampleproj" / "existing"
GEMM = EXISTING / "gemm" / "gemm.c"

DRIVER_WITH_UNDEFINED_HELPER = """\
#include <stdio.h>
extern void *polybench_alloc_data(unsigned long long n, int size);

void scale(int n, float *x) { for (int i = 0; i < n; i++) x[i] *= 2.0f; }

int main(void)
{
    float *x = polybench_alloc_data(10, sizeof(float));
    scale(10, x);
    printf("%f\\n", x[0]);
    return 0;
}
"""


def _run_python(code: str, tmp_path: Path) -> subprocess.CompletedProcess:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(code))
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)


def test_main_using_an_undefined_function_never_runs_or_blocks(tmp_path):
    (tmp_path / "bench.c").write_text(DRIVER_WITH_UNDEFINED_HELPER)
    result = _run_python("""
        import numpy as np
        import pytest_r3 as r3
        scale = r3.kernel("bench.c", entry="scale")
        x = np.arange(4, dtype=np.float32)
        scale(4, x)
        print("result", x.tolist())
    """, tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "result [0.0, 2.0, 4.0, 6.0]" in result.stdout


def test_an_unresolved_symbol_the_entry_reaches_is_named(tmp_path):
    """Once a segfault of the whole process in the CPU loader (the JIT linked a call to
    address 0); run in a child process so a crash fails this test, not the run."""
    (tmp_path / "uses.c").write_text(
        "extern double table_lookup(int);\n"
        "static double helper(int i) { return table_lookup(i) + 1.0; }\n"
        "void fill(int n, double *x) { for (int i = 0; i < n; i++) x[i] = helper(i); }\n"
        "int main(void) { return 0; }\n")
    result = _run_python("""
        import numpy as np
        import pytest_r3 as r3
        fill = r3.kernel("uses.c", entry="fill")
        try:
            fill(3, np.zeros(3))
        except r3.CompileError as exc:
            print("refused:", exc)
    """, tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "refused:" in result.stdout
    assert "'table_lookup'" in result.stdout
    assert "the entry 'fill' uses" in result.stdout


def test_static_kernel_is_an_entry(tmp_path, unique_name):
    (tmp_path / "k.c").write_text(
        "static void twice(int n, float *x) { for (int i = 0; i < n; i++) x[i] *= 2; }\n")
    kernel = r3.kernel(tmp_path / "k.c", entry="twice", name=unique_name())
    x = np.ones(3, np.float32)
    kernel(3, x)
    assert x.tolist() == [2.0, 2.0, 2.0]
    assert kernel.signature.describe() == "void twice(int n, float *x)"


def test_pointers_to_structs_of_one_number_type_take_flat_arrays(unique_name):
    kernel = r3.kernel(
        "struct point { float x, y, z; };\n"
        "typedef float vec2 __attribute__((ext_vector_type(2)));\n"
        "void shift(int n, struct point *p, const vec2 *d) {\n"
        "  for (int i = 0; i < n; i++) { p[i].x += d[i].x; p[i].z += d[i].y; }\n}\n",
        entry="shift", name=unique_name())
    params = kernel.signature.params
    assert [(p.dtype, p.components) for p in params[1:]] == [("float32", 3), ("float32", 2)]
    assert params[1].describe() == "struct point *p"
    points = np.zeros((2, 3), np.float32)
    kernel(2, points, np.array([1, 2, 3, 4], np.float32))
    assert points.tolist() == [[1, 0, 2], [3, 0, 4]]
    with pytest.raises(r3.LaunchError, match="each element is 3 float32 values, but the "
                       "array has 4, not a multiple of 3"):
        kernel(1, np.zeros(4, np.float32), np.zeros(2, np.float32))


def test_array_parameters_take_arrays_of_their_rank_and_shape(unique_name):
    kernel = r3.kernel(
        "void add(int n, int m, double out[n][m], const double a[n][m], const float w[4][m])"
        " {\n  for (int i = 0; i < n; i++) for (int j = 0; j < m; j++)\n"
        "    out[i][j] += a[i][j] * w[i % 4][j];\n}\n", entry="add", name=unique_name())
    assert kernel.signature.describe() == (
        "void add(int n, int m, double out[n][m], const double a[n][m], const float w[4][m])")
    out, a, w = np.zeros((3, 2)), np.ones((3, 2)), np.full((4, 2), 2, np.float32)
    kernel(3, 2, out, a, w)
    assert out.tolist() == [[2.0, 2.0]] * 3
    with pytest.raises(r3.LaunchError) as excinfo:
        kernel(3, 2, out, np.ones((2, 3)), w)
    assert str(excinfo.value) == (
        f"kernel {kernel.name!r} argument 4 (const double a[n][m]): shape (2, 3) does not "
        "match the declared bounds, which give (3, 2) with n=3, m=2")
    with pytest.raises(r3.LaunchError, match=r"argument 5 \(const float w\[4\]\[m\]\): "
                       r"expected a 2-D array, got shape \(8,\)"):
        kernel(3, 2, out, a, np.zeros(8, np.float32))


POLYBENCH_MODULE = """\
import pytest_r3 as r3

# gemm.c as a benchmark suite ships it: a static kernel, a main, a utility header elsewhere
gemm = r3.kernel("existing/gemm/gemm.c", entry="kernel_gemm",
                 defines={"DATA_TYPE_IS_FLOAT": 1, "POLYBENCH_USE_C99_PROTO": None,
                          "POLYBENCH_USE_RESTRICT": None, "MINI_DATASET": None},
                 include_dirs=["existing/utilities"])
"""

POLYBENCH_TEST = """\
import numpy as np
import pytest

from gemmmod import gemm


@pytest.mark.r3_oracle(gemm)
@pytest.mark.parametrize("ni, nj, nk", [(20, 25, 30), (33, 17, 9)])
def test_gemm(ni, nj, nk):
    rng = np.random.default_rng(ni)
    c = rng.random((ni, nj), dtype=np.float32)
    a = rng.random((ni, nk), dtype=np.float32)
    b = rng.random((nk, nj), dtype=np.float32)
    expected = 1.5 * a @ b + 1.2 * c
    gemm(ni, nj, nk, 1.5, 1.2, c, a, b)
    np.testing.assert_allclose(c, expected, rtol=1e-5)
"""


def _run_pytest(project: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                          cwd=project, capture_output=True, text=True, timeout=600)


@pytest.fixture
def polybench_project(tmp_path: Path) -> Path:
    import shutil

    shutil.copytree(EXISTING, tmp_path / "existing")
    (tmp_path / "gemmmod.py").write_text(POLYBENCH_MODULE)
    (tmp_path / "test_gemm.py").write_text(POLYBENCH_TEST)
    (tmp_path / "pytest.ini").write_text("[pytest]\nr3_workers = 1\nr3_budget = 6\n")
    return tmp_path


def test_polybench_style_file_is_recorded_tuned_and_checked_unchanged(polybench_project):
    before = (polybench_project / "existing" / "gemm" / "gemm.c").read_bytes()
    plain = _run_pytest(polybench_project)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert "2 passed" in plain.stdout
    recorded = _run_pytest(polybench_project, "--r3-record")
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    tuned = _run_pytest(polybench_project, "--r3-tune")
    assert tuned.returncode == 0, tuned.stdout + tuned.stderr
    (results,) = (polybench_project / ".r3" / "results" / "kernel_gemm").glob("*.jsonl")
    lines = [line for line in results.read_text().splitlines() if line.strip()]
    statuses = [json.loads(line)["result"]["status"] for line in lines]
    # every candidate built, passed the static check and verification: main's printf,
    # stderr, strcmp and polybench_alloc_data count against none of them
    assert statuses == ["ok"] * 6, tuned.stdout
    assert "kernel_gemm      tuned" in tuned.stdout or "baseline kept" in tuned.stdout
    checked = _run_pytest(polybench_project, "--r3-check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert (polybench_project / "existing" / "gemm" / "gemm.c").read_bytes() == before


def test_cases_at_derived_sizes_reshape_c_arrays():
    from pytest_r3.replay.cases import Slot, resized

    params = [{"name": "n", "is_pointer": False}, {"name": "m", "is_pointer": False},
              {"name": "c", "is_pointer": True, "dims": ["n", "m"]},
              {"name": "flat", "is_pointer": True}]
    c = np.arange(12.0).reshape(3, 4)
    flat = np.arange(5.0)
    smaller, flat_again = resized([Slot(["c"], True, c), Slot(["flat"], False, flat)], params,
                                  {"n": 2, "m": 3})
    assert smaller.values.tolist() == [[0, 1, 2], [4, 5, 6]]
    assert flat_again.values is flat
    (larger,) = resized([Slot(["c"], True, c)], params, {"n": 4, "m": 4})
    assert larger.values.shape == (4, 4)
    assert (larger.values[:3] == c).all()


GEMM_CU = EXISTING / "gemm_cuda" / "gemm.cu"
SIZES = {"NI": 64, "NJ": 48, "NK": 32}


def _cuda_gemm(name: str, **options):
    return r3.kernel(GEMM_CU, entry="gemm_kernel", backend="cuda", name=name,
                     include_dirs=[EXISTING / "utilities"], **options)


def test_cuda_file_with_host_code_builds_for_the_device_unchanged(unique_name,
                                                                  cuda_device_backend):
    from pytest_r3.backends.cuda import toolchain as cuda_tools

    before = GEMM_CU.read_bytes()
    kernel = _cuda_gemm(unique_name(), defines={**SIZES, "DATA_TYPE_IS_DOUBLE": None})
    assert kernel.signature.describe() == \
        "void gemm_kernel(DATA_TYPE *a, DATA_TYPE *b, DATA_TYPE *c)"
    assert {p.dtype for p in kernel.signature.params} == {"float64"}
    assert [p.name for p in kernel.signature.written] == ["c"]
    backend = kernel.backend
    build = backend.compile_ptx(backend.compile(kernel.source, {}), kernel.entry,
                                kernel.pipeline, kernel.name)
    assert f".entry {build.symbol}(" in build.ptx
    assert "main" not in build.ptx and "rtclock" not in build.ptx
    if cuda_tools.find_tool("ptxas") is not None:
        assert build.diagnostics["ptxas"] == "ok", build.diagnostics
    assert GEMM_CU.read_bytes() == before


@pytest.mark.skipif(__import__("shutil").which("nvcc") is None, reason="nvcc not installed")
def test_nvcc_builds_the_same_cuda_file_with_its_defines_and_include_dirs(unique_name):
    from pytest_r3.backends.cuda import toolchain as cuda_tools

    kernel = _cuda_gemm(unique_name(), defines=SIZES)
    ptx = cuda_tools.nvcc_ptx(kernel.source, {}, "sm_80")
    assert cuda_tools.match_symbol(cuda_tools.ptx_entries(ptx), "gemm_kernel", "gemm")


def test_cuda_file_with_host_code_launches_where_a_gpu_is(unique_name):
    from pytest_r3.backends.cuda.runtime import unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"CUDA kernels cannot run here: {reason}")
    kernel = _cuda_gemm(unique_name(), defines=SIZES, launch={
        "grid": lambda args, t: (SIZES["NJ"] // 32, SIZES["NI"] // 8), "block": (32, 8)})
    rng = np.random.default_rng(0)
    a = rng.random((SIZES["NI"], SIZES["NK"]), dtype=np.float32)
    b = rng.random((SIZES["NK"], SIZES["NJ"]), dtype=np.float32)
    c = rng.random((SIZES["NI"], SIZES["NJ"]), dtype=np.float32)
    expected = 32412.0 * a.astype(np.float64) @ b + 2123.0 * c
    kernel(a, b, c)
    np.testing.assert_allclose(c, expected, rtol=1e-4)


def _declared_gemm(name: str, **defines):
    return r3.kernel(GEMM, entry="kernel_gemm", name=name, include_dirs=[EXISTING / "utilities"],
                     defines={"POLYBENCH_USE_C99_PROTO": None, "MINI_DATASET": None, **defines})


def test_a_rewrite_sees_the_declared_include_dirs_and_defines(unique_name):
    """A candidate compiles like the baseline: the suite's utility header is visible in its
    restricted file system, the -D configuration applies, and its main still never counts."""
    from pytest_r3.backends import get_backend
    from pytest_r3.replay.compile import CandidateCompiler
    from pytest_r3.replay.protocol import Candidate, KernelSpec, Rejected

    kernel = _declared_gemm(unique_name(), DATA_TYPE_IS_FLOAT=1)
    compiler = CandidateCompiler(KernelSpec.from_kernel(kernel), get_backend("cpu"))
    rewrite = GEMM.read_text().replace("C[i][j] *= beta;", "C[i][j] = C[i][j] * beta;")
    compiled = compiler.compile(Candidate(source_text=rewrite))
    assert re.search(r"^define [^\n]*void @kernel_gemm\([^\n]*float", compiled.ir, re.M)
    assert "@main" not in compiled.ir and "polybench_alloc_data" not in compiled.ir
    with pytest.raises(Rejected) as excinfo:  # what the entry reaches is still checked
        compiler.compile(Candidate(source_text=GEMM.read_text().replace(
            "C[i][j] *= beta;", "C[i][j] *= beta; if (i == 0) printf(\"x\");")))
    assert "printf" in str(excinfo.value.__dict__)


def test_defines_and_include_dirs_are_part_of_the_source_fingerprint(unique_name, tmp_path):
    from pytest_r3.kernel.lock import source_fingerprint

    as_float = _declared_gemm(unique_name(), DATA_TYPE_IS_FLOAT=1)
    as_double = _declared_gemm(unique_name(), DATA_TYPE_IS_DOUBLE=1)
    assert source_fingerprint(as_float) != source_fingerprint(as_double)
    assert source_fingerprint(as_float) == \
        source_fingerprint(_declared_gemm(unique_name(), DATA_TYPE_IS_FLOAT=1))
    assert as_float.signature.params[3].dtype == "float32"
    assert as_double.signature.params[3].dtype == "float64"


def test_bad_configuration_is_refused_at_declaration(unique_name):
    with pytest.raises(r3.DeclarationError, match="include_dirs: folder 'nowhere' not found"):
        r3.kernel(GEMM, entry="kernel_gemm", name=unique_name(), include_dirs=["nowhere"])
    with pytest.raises(r3.DeclarationError, match="include_dirs must be a list of folders"):
        r3.kernel(GEMM, entry="kernel_gemm", name=unique_name(), include_dirs="utilities")
    with pytest.raises(r3.DeclarationError, match="'1X' is not a C macro name"):
        r3.kernel(GEMM, entry="kernel_gemm", name=unique_name(), defines={"1X": 1})
    with pytest.raises(r3.DeclarationError, match="NI is both in defines= .* and in tune="):
        r3.kernel(GEMM, entry="kernel_gemm", name=unique_name(), defines={"NI": 8},
                  tune={"NI": [8, 16]})


def test_the_prompt_shows_the_call_and_the_configuration():
    from pytest_r3.llm.prompts import stable_context

    context = stable_context("gemm", "kernel_gemm", "int x;\n", ["C(20, 25)"], "cpu-x",
                             signature="void kernel_gemm(int ni, int nj, float C[ni][nj])",
                             flags=("-DDATA_TYPE_IS_FLOAT=1",))
    assert "Called as `void kernel_gemm(int ni, int nj, float C[ni][nj])`" in context
    assert "Compiled with `-DDATA_TYPE_IS_FLOAT=1`" in context


def test_struct_pointers_take_structured_arrays_too(unique_name):
    kernel = r3.kernel("struct point { float x, y; };\n"
                       "void swap(int n, struct point *p) {\n"
                       "  for (int i = 0; i < n; i++) { float t = p[i].x; p[i].x = p[i].y;"
                       " p[i].y = t; }\n}\n", entry="swap", name=unique_name())
    points = np.array([(1, 2), (3, 4)], dtype=[("x", np.float32), ("y", np.float32)])
    kernel(2, points)
    assert points.tolist() == [(2.0, 1.0), (4.0, 3.0)]
    from pytest_r3.record.store import capture

    _, recording = capture(kernel, (2, points), lambda: kernel(2, points), "test_x")
    assert recording.inputs["p"].dtype == np.float32  # recorded as the numbers it holds
    assert recording.outputs["p"].tolist() == [1.0, 2.0, 3.0, 4.0]
    padded = np.zeros(2, dtype=[("x", np.float32), ("y", np.float64)])
    with pytest.raises(r3.LaunchError, match="expected dtype float32"):
        kernel(2, padded)


def test_cuda_pointers_to_vector_structs_read_as_arrays_of_numbers(unique_name):
    kernel = r3.kernel(
        "struct __attribute__((aligned(16))) vec4 { float x, y, z, w; };\n"
        "__global__ void norms(int n, const vec4 *v, float *out) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (i < n) out[i] = v[i].x * v[i].x + v[i].y * v[i].y + v[i].z * v[i].z;\n}\n",
        entry="norms", backend="cuda", name=unique_name())
    v = kernel.signature.params[1]
    assert (v.dtype, v.components, v.written) == ("float32", 4, False)
    assert v.describe() == "const vec4 *v"


def test_a_static_cuda_kernel_is_an_entry_and_unreached_kernels_are_not_built(
        unique_name, cuda_device_backend):
    kernel = r3.kernel(
        "static __global__ void twice(int n, float *x)\n"
        "{ int i = threadIdx.x; if (i < n) x[i] *= 2; }\n"
        "__global__ void other(float *y) { y[0] = expf(y[0]); }\n",
        entry="twice", backend="cuda", name=unique_name())
    assert kernel.signature.describe() == "void twice(int n, float *x)"
    backend = kernel.backend
    build = backend.compile_ptx(backend.compile(kernel.source, {}), kernel.entry,
                                kernel.pipeline, kernel.name)
    assert build.ptx.count(".entry") == 1 and f".visible .entry {build.symbol}(" in build.ptx
    assert not build.libdevice  # only the unreached kernel needed libdevice's expf


def test_one_and_three_dimensional_array_parameters(unique_name):
    kernel = r3.kernel(
        "void sum3(int nr, int nq, int np_, double A[nr][nq][np_], double s[nr], const int w[3])"
        " {\n  for (int r = 0; r < nr; r++) { s[r] = 0;\n"
        "    for (int q = 0; q < nq; q++) for (int p = 0; p < np_; p++)"
        " s[r] += A[r][q][p] * w[p % 3]; }\n}\n", entry="sum3", name=unique_name())
    params = {p.name: p for p in kernel.signature.params}
    assert params["A"].dims == ("nr", "nq", "np_")
    assert params["s"].dims == ("nr",) and params["w"].dims == ("3",)
    a = np.arange(24.0).reshape(2, 3, 4)
    s = np.zeros(2)
    kernel(2, 3, 4, a, s, np.array([1, 0, 0], np.int32))
    assert s.tolist() == [a[0][:, [0, 3]].sum(), a[1][:, [0, 3]].sum()]
    with pytest.raises(r3.LaunchError, match=r"argument 5 \(double s\[nr\]\): shape \(3,\)"):
        kernel(2, 3, 4, a, np.zeros(3), np.zeros(3, np.int32))


def test_bounds_are_read_from_the_definition_and_evaluated_as_integer_arithmetic():
    from pytest_r3.model.bounds import bound_value, declared_bounds

    text = ("void k(int n, double x[n]);\n"
            "static void k(int ni, int nj, double C[ restrict ni + 0][nj + 0],\n"
            "              double A[ 1000 + 0][1100UL], float w[2 * ni])\n{ }\n"
            "int main(void) { k(ni, nj, *C, &A[0], w); k(3, 4, C[1], A, &w[2]); }\n")
    assert declared_bounds(text, "k") == {"C": ("ni", "nj"), "A": ("1000", "1100"),
                                          "w": ("2 * ni",)}
    assert bound_value("2 * ni", {"ni": 5}) == 10
    assert bound_value("(n + 7) / 8", {"n": 9}) == 2
    assert bound_value("n", {}) is None  # unknown name: not checked
    for hostile in ("__import__('os').system('x')", "n.real", "[n][0]", "2.5", "n ** 99"):
        assert bound_value(hostile, {"n": 3}) is None, hostile
