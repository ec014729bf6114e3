"""The CUDA C people write compiles unchanged through pytest-r3's clang path.

The kernels in tests/cuda_suite/ (reductions with shuffles, atomics, a padded transpose,
float4 and half2 loads, templates, __ldg, dynamic shared memory, printf, assert, constant
memory...) compile to PTX, which ptxas accepts where it is installed; the intrinsics that
matter for speed give the instructions nvcc gives; what is not provided (cooperative groups,
CUB) fails with one line saying so. No GPU needed; ptxas and nvcc checks skip without them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import pytest_r3 as r3
from pytest_r3 import Pipeline
from pytest_r3.backends.cuda import CUDABackend, parse_entry
from pytest_r3.backends.cuda import toolchain as cuda_tools
from pytest_r3.errors import CompileError, DeclarationError, EntryNotFoundError
from pytest_r3.model.source import KernelSource
from pytest_r3.replay import sandbox

SUITE = Path(__file__).resolve().parent / "cuda_suite"
KERNELS = json.loads((SUITE / "kernels.json").read_text())
NO_PTXAS = cuda_tools.find_tool("ptxas") is None
NO_NVCC = cuda_tools.find_tool("nvcc") is None
needs_ptxas = pytest.mark.skipif(NO_PTXAS, reason="ptxas (CUDA toolkit) is not installed")
needs_nvcc = pytest.mark.skipif(NO_NVCC, reason="nvcc (CUDA toolkit) is not installed")


@pytest.fixture(scope="module")
def backend():
    return CUDABackend("sm_90")


@pytest.fixture(scope="module")
def bundled():
    """The device build with pytest-r3's own headers alone, as where no CUDA toolkit is
    installed (what a toolkit adds is checked in test_cuda_toolkit_headers.py)."""
    return CUDABackend("sm_90", headers="bundled")


def suite_source(name: str) -> KernelSource:
    path = SUITE / name
    return KernelSource(path.read_text(), str(path), path, (str(path.parent),))


def inline(text: str, name: str = "kernel.cu") -> KernelSource:
    return KernelSource(text, name)


def build(backend: CUDABackend, source: KernelSource, entry: str, macros=None):
    if parse_entry(entry).arguments is not None:
        backend.inspect(source, entry, macros or {})  # declares the instance to build
    ir = backend.compile(source, macros or {})
    return backend.compile_ptx(ir, entry, Pipeline(), entry)


# -- the suite -------------------------------------------------------------------------------
def test_suite_has_twenty_realistic_kernels_each_described():
    assert len({row["file"] for row in KERNELS}) >= 20
    for path in SUITE.glob("*.cu"):
        assert path.read_text().startswith("// "), f"{path.name}: say what it computes on top"
        assert any(row["file"] == path.name for row in KERNELS), path.name


@pytest.mark.parametrize("row", KERNELS, ids=[row["entry"] for row in KERNELS])
def test_suite_kernel_compiles_to_ptx_that_ptxas_accepts(backend, row):
    source = suite_source(row["file"])
    result = build(backend, source, row["entry"], row.get("macros"))
    assert cuda_tools.ptx_entries(result.ptx) == [result.symbol]
    assert cuda_tools.kernel_name(result.symbol).split("<")[0] == \
        parse_entry(row["entry"]).name
    if NO_PTXAS:
        pytest.skip("ptxas (CUDA toolkit) is not installed: PTX produced, not assembled")
    assert result.diagnostics["ptxas"] == "ok"
    assert result.diagnostics["registers"] > 0
    assert result.diagnostics.get("spill_store_bytes", 0) == 0


@pytest.mark.parametrize("row", KERNELS, ids=[row["entry"] for row in KERNELS])
def test_suite_kernel_is_declared_as_written(row, cuda_device_backend):
    """Every suite kernel, vector, half and bf16 pointers included, declares with r3.kernel
    and has a signature numpy arrays can meet."""
    declared = r3.kernel(SUITE / row["file"], entry=row["entry"], backend="cuda")
    dtypes = {p.name: p.dtype for p in declared.signature.params}
    assert dtypes and all(np.dtype(d) for d in dtypes.values())
    if row["entry"] in ("half_bias_relu", "haxpy_half2"):
        assert "float16" in dtypes.values()  # __half is its _Float16
    if row["entry"] == "gelu_bf16":
        assert dtypes["x"] == "uint16"  # bf16 travels as its bits


def test_suite_never_edits_the_kernel_files(backend):
    before = {p.name: p.read_bytes() for p in SUITE.glob("*.cu")}
    build(backend, suite_source("scale_tiles_template.cu"), "scale_tiles<8, float>")
    assert {p.name: p.read_bytes() for p in SUITE.glob("*.cu")} == before


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_every_documented_function_compiles(arch):
    """api/everything.cu calls each function docs/cuda.md lists once."""
    backend = CUDABackend(arch)
    source = suite_source("api/everything.cu")
    for entry in ["everything", "with_grid_constant", "aligned_tile", "bf16_everything"]:
        result = build(backend, source, entry)
        if not NO_PTXAS:
            assert result.diagnostics["ptxas"] == "ok", entry


@needs_nvcc
def test_nvcc_accepts_the_same_functions():
    """The header offers CUDA's names with CUDA's signatures: what compiles here compiles
    with nvcc too, so the vendor baseline builds the same file."""
    ptx = cuda_tools.nvcc_ptx(suite_source("api/everything.cu"), {}, "sm_90")
    assert len(cuda_tools.ptx_entries(ptx)) == 4


# -- the instructions nvcc gives -------------------------------------------------------------
def test_fast_math_intrinsics_give_nvcc_instructions(backend):
    source = inline("""
__global__ void k(const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = rsqrtf(x[i]) + __expf(x[i]) + __ldg(x + n + i) + __sinf(x[i])
                    + __logf(x[i]) + __fdividef(x[i], 3.0f) + __saturatef(x[i]);
}""")
    ptx = build(backend, source, "k").ptx
    assert "rsqrt.approx.f32" in ptx and "sqrt.rn" not in ptx
    assert "ex2.approx" in ptx
    assert re.search(r"ld\.global\.nc\.\w+", ptx)  # no __restrict__ needed
    assert "sin.approx.f32" in ptx and "lg2.approx.f32" in ptx
    assert "div.approx.f32" in ptx and "cvt.sat.f32.f32" in ptx


@pytest.mark.parametrize("libdevice", ["installed", "0"])
def test_math_of_float_arguments_stays_in_float(monkeypatch, libdevice):
    """CUDA's C++ overloads: fma(float, float, float) is fmaf, as under nvcc; promoted to the
    double functions, it cost llm.c's adamw_kernel2 7 registers and FP64 arithmetic."""
    if libdevice == "0":
        monkeypatch.setenv(cuda_tools.LIBDEVICE_ENV, "0")
    cuda_tools.find_libdevice.cache_clear()
    try:
        source = inline("""
__global__ void k(const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float a = x[i], b = x[n + i];
  if (i < n) y[i] = fma(a, b, a) + sqrt(a) + fabs(b) + floor(a) + fmin(a, b) + fmax(a, b)
                    + copysign(a, b) + ldexp(a, 2) + exp(a) + log(b) + sin(a) + pow(a, b)
                    + tanh(b);
}""")
        ptx = build(CUDABackend("sm_90"), source, "k").ptx
    finally:
        cuda_tools.find_libdevice.cache_clear()
    # no float promoted to double (libdevice's sinf has double arithmetic of its own)
    assert "cvt.f64.f32" not in ptx and "fma.rn.f64" not in ptx and "sqrt.rn.f64" not in ptx
    assert "fma.rn.f32" in ptx and "sqrt.rn.f32" in ptx


def test_vector_ldg_is_one_wide_read_only_load(backend):
    source = inline("""
__global__ void k(const float4 *a, float4 *b, const int2 *c, int2 *d) {
  int i = threadIdx.x;
  float4 v = __ldg(a + i);
  b[i] = make_float4(v.x * 2.0f, v.y, v.z, v.w);
  d[i] = __ldg(c + i);
}""")
    ptx = build(backend, source, "k").ptx
    assert re.search(r"ld\.global\.nc\.v4\.(?:b|f)32", ptx)
    assert re.search(r"ld\.global\.nc\.v2\.(?:b|s)32", ptx)
    assert re.search(r"st\.global\.v4\.(?:b|f)32", ptx)


def test_vector_types_have_cuda_sizes_and_alignment(backend):
    checks = ";".join(
        f"static_assert(sizeof({t}) == {s} && alignof({t}) == {a}, \"{t}\")"
        for t, s, a in [("float2", 8, 8), ("float3", 12, 4), ("float4", 16, 16),
                        ("int2", 8, 8), ("int4", 16, 16), ("uint4", 16, 16),
                        ("double2", 16, 16), ("char4", 4, 4), ("uchar4", 4, 4),
                        ("short2", 4, 4), ("ushort4", 8, 8), ("longlong2", 16, 16),
                        ("dim3", 12, 4)])
    source = inline(checks + ";\n__global__ void k(int *x) { x[0] = make_int2(1, 2).y; }")
    build(backend, source, "k")


def test_half_precision_arithmetic_is_native(backend):
    ptx = build(backend, suite_source("haxpy_half2.cu"), "haxpy_half2").ptx
    assert "fma.rn.f16x2" in ptx
    ptx = build(backend, suite_source("half_bias_relu.cu"), "half_bias_relu").ptx
    assert "add.f16" in ptx and "cvt.f32.f16" in ptx
    ptx = build(backend, suite_source("api/everything.cu"), "bf16_everything").ptx
    assert "fma.rn.bf16x2" in ptx and "cvt.f32.bf16" in ptx


def test_printf_and_assert_become_cuda_system_calls(backend):
    ptx = build(backend, suite_source("printf_debug.cu"), "double_and_report").ptx
    assert "call.uni (retval0), vprintf" in ptx
    ptx = build(backend, suite_source("checked_gather.cu"), "checked_gather").ptx
    assert "__assertfail" in ptx
    no_debug = inline("#define NDEBUG\n#include <cassert>\n"
                      "__global__ void k(int *x) { assert(x[0] == 1); x[1] = 2; }")
    assert "__assertfail" not in build(backend, no_debug, "k").ptx


def test_the_intrinsics_nvcc_accepts_without_includes(backend):
    source = inline("""
__global__ void k(float *f, int *i, unsigned *u, long long *l) {
  dim3 t = threadIdx;
  float s, c;
  sincosf(f[0], &s, &c);
  f[1] = s + c + __int_as_float(i[0]) + __frcp_rn(f[2]) + __fmul_rn(f[3], f[4])
         + (isnan(f[5]) ? 1.0f : 0.0f) + (isinf(f[6]) ? 2.0f : 0.0f) + fminf(f[7], f[8]);
  i[1] = __float_as_int(f[0]) + __ffs(i[2]) + __popc(u[0]) + __clz(i[3]) + __float2int_rn(f[9])
         + (int)t.x + __mul24(i[4], i[5]);
  u[1] = __brev(u[2]) + __activemask() + atomicInc(u + 3, 9u) + __umulhi(u[4], u[5]);
  atomicAdd_block(i + 6, 1);
  l[0] = clock64();
  l[1] = (long long)atomicCAS((unsigned long long *)l + 2, 1ull, 2ull);
  i[7] = __all_sync(0xffffffffu, i[8] > 0) + __any_sync(0xffffffffu, i[9] > 0)
         + __syncthreads_count(i[10] > 0) + __shfl_xor_sync(0xffffffffu, i[11], 1);
  __threadfence();
  __syncwarp();
}""")
    ptx = build(backend, source, "k").ptx
    for instruction in ["brev.b32", "activemask.b32", "atom.global.inc.u32", "atom.cta.add",
                        "%clock64", "cvt.rni.s32.f32", "rcp.rn.f32", "mul.rn.f32",
                        "mul.hi.u32", "popc.b32", "clz.b32", "shfl.sync.bfly.b32",
                        "vote.sync.all.pred", "bar.red.popc.u32", "membar.gl",
                        "atom.relaxed.sys.global.cas.b64"]:
        assert instruction in ptx, instruction


def test_cpp_and_cuda_headers_device_code_includes(backend):
    headers = ["cstdio", "cstddef", "cfloat", "cmath", "cstdint", "cassert", "climits",
               "cstdlib", "cstring", "cuda_runtime.h", "cuda.h", "cuda_fp16.h",
               "math_constants.h", "device_launch_parameters.h", "vector_types.h",
               "stdio.h", "math.h", "stdint.h", "limits"]
    source = inline("".join(f"#include <{h}>\n" for h in headers) + """
__global__ void k(float *x, std::int32_t *q, std::size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i >= n) return;
  x[i] = std::sqrt(x[i]) + FLT_EPSILON + CUDART_PI_F + std::fabs(x[i]);
  q[i] = INT_MAX - abs(q[i]) + (int32_t)min(i, n) + std::numeric_limits<int8_t>::max();
  x[i] = fmaxf(x[i], std::numeric_limits<float>::lowest());
  assert(n > 0);
  if (i == 0) printf("%d\\n", (int)n);
}""")
    build(backend, source, "k")


def test_cuda_sections_of_shared_headers_are_compiled(backend):
    source = inline("""
#ifdef __CUDACC__
#define HOST_DEVICE __host__ __device__
#else
#error __CUDACC__ should be defined, as under nvcc
#endif
HOST_DEVICE inline float square(float v) { return v * v; }
__global__ void k(float *x) { x[0] = square(x[1]); }""")
    build(backend, source, "k")


def test_math_without_libdevice_uses_the_hardware_approximations(backend, monkeypatch):
    monkeypatch.setenv(cuda_tools.LIBDEVICE_ENV, "0")
    cuda_tools.find_libdevice.cache_clear()
    try:
        result = build(backend, suite_source("math_mix.cu"), "math_mix")
        assert not result.libdevice and "ex2.approx" in result.ptx
        build(backend, suite_source("rotate_points.cu"), "rotate_points")
        with pytest.raises(CompileError, match="erf needs CUDA's libdevice"):
            build(backend, inline("__global__ void k(double *x) { x[0] = erf(x[1]); }"), "k")
    finally:
        cuda_tools.find_libdevice.cache_clear()


def test_a_rewrite_may_use_the_device_headers(backend):
    """Candidates compile in a file system showing only the kernel's and the toolchain's
    headers: the forwarding headers are part of the toolchain's."""
    source = suite_source("haxpy_half2.cu")
    ir = backend.compile(source.candidate(source.text.replace("__hfma2", " __hfma2")), {})
    assert "haxpy_half2" in ir


def test_device_printf_and_assert_pass_the_static_check(backend):
    for name in ["printf_debug.cu", "checked_gather.cu"]:
        module = backend.parse(backend.compile(suite_source(name), {}), name)
        assert sandbox.check_module(module) == [], name
    import llvmlite.binding as llvm  # on the CPU, vprintf is just another external symbol

    cpu = llvm.parse_assembly('target triple = "x86_64-unknown-linux-gnu"\n'
                              "declare i32 @vprintf(ptr, ptr)\n"
                              "define void @k(ptr %f) {\n"
                              "  %r = call i32 @vprintf(ptr %f, ptr null)\n  ret void\n}\n")
    assert [v.symbol for v in sandbox.check_module(cpu)] == ["vprintf"]


def test_a_candidate_reading_the_clock_is_told_why(backend):
    source = inline("__global__ void k(long long *t) { t[0] = clock64(); }")
    module = backend.parse(backend.compile(source, {}), "k")
    [violation] = sandbox.check_module(module)
    assert violation.symbol == "llvm.nvvm.read.ptx.sreg.clock64"
    assert "it reads a clock, so results could depend on timing" in violation.reason


# -- templates ---------------------------------------------------------------------------------
def test_template_instance_in_the_file_is_found(backend):
    result = build(backend, suite_source("scale_tiles_template.cu"), "scale_tiles<4, double>")
    assert result.symbol == "_Z11scale_tilesILi4EdEvPT0_S0_i"


def test_template_instance_not_in_the_file_is_instantiated(backend):
    source = suite_source("scale_tiles_template.cu")
    signature = backend.inspect(source, "scale_tiles<32, unsigned>", {})
    assert [p.dtype for p in signature.params] == ["uint32", "uint32", "int32"]
    result = build(backend, source, "scale_tiles<32, unsigned>")
    assert cuda_tools.kernel_name(result.symbol) == "scale_tiles<32, unsigned int>"


def test_template_entries_through_r3_kernel():
    declared = r3.kernel(SUITE / "scale_tiles_template.cu", entry="scale_tiles<16, float>",
                         backend="cuda", launch={"grid": 1, "block": 32})
    assert [p.name for p in declared.signature.params] == ["data", "factor", "n"]
    assert declared.name == "scale_tiles_16_float"  # its recordings folder: no <, > or space
    with pytest.raises(DeclarationError, match="entry must be a C function name"):
        r3.kernel(SUITE / "scale_tiles_template.cu", entry="scale_tiles<16; float>",
                  backend="cuda", launch={"grid": 1, "block": 32})
    with pytest.raises(DeclarationError, match="entry must be a C function name"):
        r3.kernel("void k(int *x) {}\n", entry="k<1>")  # C kernels have no templates


def test_template_name_alone_is_ambiguous_with_several_instances(backend):
    with pytest.raises(EntryNotFoundError, match=r"scale_tiles<16, float>.*scale_tiles<4, "
                                                 r"double>|scale_tiles<4, double>.*scale_"):
        build(backend, suite_source("scale_tiles_template.cu"), "scale_tiles")


def test_template_instance_that_cannot_exist_says_so(backend):
    with pytest.raises(CompileError) as caught:
        build(backend, suite_source("scale_tiles_template.cu"), "scale_tiles<16, flaot>")
    message = str(caught.value)
    assert "entry 'scale_tiles<16, flaot>' is not a template instance" in message
    assert "flaot" in message and "\n" not in message


@pytest.mark.parametrize("entry, expected", [
    ("saxpy", ("saxpy", None)),
    ("ns::saxpy", ("ns::saxpy", None)),
    ("scale_tiles<16, float>", ("scale_tiles", "16, float")),
    ("tile< 8 , Vec<float, 4> >", ("tile", "8 , Vec<float, 4>")),
])
def test_parse_entry(entry, expected):
    parsed = parse_entry(entry)
    assert (parsed.name, parsed.arguments) == expected


def test_default_name_of_an_entry_is_a_safe_file_name():
    assert cuda_tools.default_name("scale_tiles<16, float>") == "scale_tiles_16_float"
    assert cuda_tools.default_name("ns::tile< 8 , Vec<float, 4> >") == "ns_tile_8_Vec_float_4"
    assert cuda_tools.default_name("saxpy") == "saxpy"


@pytest.mark.parametrize("entry", ["", "1k", "k<", "k<>", "k<1>>", "k<1; x>", "k<\"a\">",
                                   "k<1>(int)", "k<1>\n"])
def test_parse_entry_refuses(entry):
    with pytest.raises(DeclarationError, match="is not a kernel name"):
        parse_entry(entry)


@needs_nvcc
def test_nvcc_builds_the_same_instance():
    source = suite_source("scale_tiles_template.cu")
    ptx = cuda_tools.nvcc_ptx(source, {}, "sm_90", entry="scale_tiles<32, float>")
    symbol = cuda_tools.match_symbol(cuda_tools.ptx_entries(ptx), "scale_tiles<32, float>",
                                     "nvcc")
    assert cuda_tools.kernel_name(symbol) == "scale_tiles<32, float>"


# -- what is not provided ------------------------------------------------------------------------
UNSUPPORTED = {
    "grid-wide cooperative groups": (
        "#include <cooperative_groups.h>\nnamespace cg = cooperative_groups;\n"
        "__global__ void k(float *x) { cg::this_grid().sync(); }",
        "'this_grid' (grid-wide and multi-grid cooperative groups) is not supported"),
    "cooperative groups beyond tiles": (
        "#include <cooperative_groups.h>\nnamespace cg = cooperative_groups;\n"
        "__global__ void k(float *x) { x[0] = cg::coalesced_threads().size(); }",
        "'coalesced_threads' (cooperative groups beyond block tiles"),
    "cooperative groups names": (
        "__global__ void k(float *x) { cg::thread_block b = cg::this_thread_block(); }",
        "'cg' (cooperative groups) is not supported"),
    "CUB": ("#include <cub/cub.cuh>\n__global__ void k(float *x) {}",
            "CUB (<cub/cub.cuh>) is not supported"),
    "texture objects": (
        "__global__ void k(float *x, cudaTextureObject_t t) { x[0] = tex1Dfetch<float>(t, 0); }",
        "'cudaTextureObject_t' (textures and surfaces) is not supported"),
    "a missing intrinsic": ("__global__ void k(float *x) { x[0] = __fsqrt_rx(x[1]); }",
                            "the CUDA intrinsic '__fsqrt_rx' is not supported"),
    "C++ library in device code": (
        "#include <vector>\n__global__ void k(float *x) { std::vector<float> v; }",
        "'std::vector' (host code: the C++ standard library's host side or the CUDA host API) "
        "in device code is not supported"),
    "a C++ header nothing provides": ("#include <regex>\n__global__ void k(float *x) {}",
                                      "the C++ standard library header <regex> is not supported"),
    "std beyond the C library": (
        "#include <cmath>\n__global__ void k(float *x) { x[0] = std::lerp(1.f, 2.f, x[1]); }",
        "std::lerp"),
    "an atomic CUDA lacks too": (
        "__global__ void k(float *x) { atomicMax(x, 1.0f); }",
        "atomicMax with these argument types is not supported"),
    "half without its header": (
        "__global__ void k(__half *x) { x[0] = __float2half(1.0f); }",
        "'__half' (half precision without #include <cuda_fp16.h>) is not supported"),
    "host API in a kernel": (
        "__global__ void k(float *x) { cudaMalloc(&x, 4); }",
        "'cudaMalloc' (the CUDA host API) in device code or with these arguments is not "
        "supported"),
}


@pytest.mark.parametrize("case", UNSUPPORTED)
def test_what_is_not_provided_gets_one_line(bundled, case):
    text, expected = UNSUPPORTED[case]
    with pytest.raises(CompileError) as caught:
        bundled.compile(inline(text, "/work/kernels/k.cu"), {})
    message = str(caught.value)
    assert expected in message
    assert message.startswith("/work/kernels/k.cu:")
    assert "not supported by pytest-r3's CUDA build; see docs/cuda.md" in message
    assert "\n" not in message and "-nocudainc" not in message  # no clang command
    assert caught.value.diagnostics  # clang's own words stay available


def test_a_rewrite_reaching_for_a_missing_library_gets_the_same_line(bundled):
    """Candidates' diagnostics name their file by base name only; so does the one line."""
    original = inline("__global__ void k(float *x) { x[0] = 1.0f; }", "/work/kernels/k.cu")
    rewrite = original.candidate("#include <cub/cub.cuh>\n" + original.text)
    with pytest.raises(CompileError) as caught:
        bundled.compile(rewrite, {})
    assert str(caught.value).startswith("k.cu:1: CUB (<cub/cub.cuh>) is not supported")
    assert "/work/kernels" not in str(caught.value) + caught.value.diagnostics


def test_other_errors_keep_clang_first_line_without_the_command(backend):
    with pytest.raises(CompileError) as caught:
        backend.compile(inline("__global__ void k(float *x) { x[0] = y; }", "k.cu"), {})
    message = str(caught.value)
    assert message.splitlines()[0] == ("clang could not compile k.cu: k.cu:1:38: error: use of "
                                       "undeclared identifier 'y'")
    assert "-nocudainc" not in message and caught.value.command
