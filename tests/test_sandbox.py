"""The static sandbox check: real C through clang, checked as LLVM IR before anything runs."""

from __future__ import annotations

import textwrap
from pathlib import Path

import llvmlite.binding as llvm
import pytest
from conftest import AXPY_C, SAXPY_C, SUM_C

from pytest_r3.backends import clang as toolchain
from pytest_r3.backends import get_backend
from pytest_r3.backends.cuda import CUDABackend
from pytest_r3.model.source import KernelSource
from pytest_r3.replay import sandbox

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "example_project" / "exampleproj"


def module_of(c_source: str, entry: str = "k"):
    """A candidate's module as tuning checks it: cut down to what the entry reaches."""
    backend = get_backend("cpu")
    source = KernelSource(textwrap.dedent(c_source), "/virtual/candidate.c")
    return backend.reachable(backend.parse(backend.compile(source, {}), "candidate"), entry,
                             "candidate")


def violations_of(c_source: str, baseline=None) -> list[sandbox.Violation]:
    return sandbox.check_module(module_of(c_source), baseline)


def cuda_module_of(path: Path, text: str | None = None, arch: str = "sm_80"):
    backend = CUDABackend(arch)
    source = KernelSource(path.read_text() if text is None else text, str(path),
                          include_dirs=(str(path.parent),))
    return backend.parse(backend.compile(source, {}), path.name)


ALLOWED = {
    "plain loop": """
        void k(long n, const float *x, float *out)
        { for (long i = 0; i < n; ++i) out[i] = 2.0f * x[i]; }
    """,
    "libm": """
        #include <math.h>
        void k(long n, const float *x, float *out)
        {
            for (long i = 0; i < n; ++i)
                out[i] = sqrtf(fabsf(x[i])) + expf(x[i]) + fmaf(x[i], 2.0f, 1.0f)
                         + (float)pow(x[i], 3.0);
        }
    """,
    "memory primitives": """
        #include <string.h>
        void k(long n, const float *x, float *out)
        {
            float tmp[64];
            long m = n < 64 ? n : 64;
            memcpy(tmp, x, m * sizeof *tmp);
            memset(out, 0, n * sizeof *out);
            memmove(out, tmp, m * sizeof *out);
        }
    """,
    "calls between functions of the kernel": """
        static float twice(float v) { return 2.0f * v; }
        float helper(float v) { return twice(v) + 1.0f; }
        void k(long n, const float *x, float *out)
        { for (long i = 0; i < n; ++i) out[i] = helper(x[i]); }
    """,
    "loop pragmas and builtins": """
        void k(long n, const float *restrict x, float *restrict out)
        {
            #pragma clang loop vectorize_width(8) unroll_count(4)
            for (long i = 0; i < n; ++i) out[i] = __builtin_fabsf(x[i]);
        }
    """,
}


@pytest.mark.parametrize("source", ALLOWED.values(), ids=ALLOWED.keys())
def test_ordinary_kernels_pass(source):
    assert violations_of(source) == []


FORBIDDEN = {
    "system": ("""
        #include <stdlib.h>
        void k(long n, float *out) { out[0] = system("touch /tmp/pwned"); }
    """, "system", "call to external function 'system'"),
    "fopen": ("""
        #include <stdio.h>
        void k(long n, float *out) { FILE *f = fopen("/etc/passwd", "r"); out[0] = f != 0; }
    """, "fopen", "call to external function 'fopen'"),
    "syscall": ("""
        extern long syscall(long number, ...);
        void k(long n, float *out) { out[0] = (float)syscall(39); }
    """, "syscall", "call to external function 'syscall'"),
    "dlopen": ("""
        extern void *dlopen(const char *file, int mode);
        void k(long n, float *out) { out[0] = dlopen("libc.so.6", 1) != 0; }
    """, "dlopen", "call to external function 'dlopen'"),
    "renamed with an asm label": ("""
        extern int innocent(const char *) __asm__("system");
        void k(long n, float *out) { out[0] = innocent("true"); }
    """, "system", "call to external function 'system'"),
    "inline asm": ("""
        void k(long n, float *out) { __asm__ volatile("nop"); out[0] = 1.0f; }
    """, "asm", "inline assembly"),
    "module-level asm defining an allowed name": ("""
        __asm__(".text\\n.globl fmaf\\nfmaf:\\n mov $39, %eax\\n syscall\\n ret\\n");
        extern float fmaf(float, float, float);
        void k(long n, float *out) { out[0] = fmaf(1.0f, 2.0f, 3.0f); }
    """, "asm", "module-level inline assembly"),
    "function pointer": ("""
        void k(long n, float *out) { void (*f)(void) = (void (*)(void))n; f(); }
    """, "<indirect>", "call through a computed address"),
    "external variable": ("""
        extern char **environ;
        void k(long n, float *out) { out[0] = environ[0][0]; }
    """, "environ", "reference to external variable 'environ'"),
    "in a branch the tests never take": ("""
        #include <stdlib.h>
        void k(long n, float *out) { if (n < 0) abort(); out[0] = 1.0f; }
    """, "abort", "call to external function 'abort'"),
}


@pytest.mark.parametrize("source, symbol, reason", FORBIDDEN.values(), ids=FORBIDDEN.keys())
def test_forbidden_constructs_are_found(source, symbol, reason):
    violations = violations_of(source)
    assert symbol in {v.symbol for v in violations}
    assert any(reason in v.reason for v in violations)


def test_violation_names_the_function_it_is_in():
    violations = violations_of("""
        #include <stdlib.h>
        static void helper(void) { exit(3); }
        void k(long n, float *out) { helper(); out[0] = 1.0f; }
    """)
    assert [(v.symbol, v.function) for v in violations] == [("exit", "helper")]
    assert violations[0].describe() == "call to external function 'exit' in function 'helper'"


def test_advice_names_every_forbidden_symbol_and_what_is_allowed():
    violations = violations_of("""
        #include <stdio.h>
        #include <stdlib.h>
        void k(long n, float *out)
        { FILE *f = fopen("x", "w"); fclose(f); out[0] = system("true"); }
    """)
    assert {v.symbol for v in violations} == {"fopen", "fclose", "system"}
    text = sandbox.advice(violations)
    assert text.startswith("forbidden: ")
    assert "remove fclose, fopen, system" in text
    assert "libm" in text and "memcpy" in text


def test_allowlist_covers_float_double_and_long_double_libm():
    for name in ("sqrt", "sqrtf", "sqrtl", "expf", "fmaf", "sincosf"):
        assert name in sandbox.ALLOWED_SYMBOLS
    for name in ("system", "fopen", "syscall", "dlopen", "printf", "mmap", "exit"):
        assert name not in sandbox.ALLOWED_SYMBOLS


# -- what got through the call-only check -----------------------------------------------------
ATTACKS = {
    "setjmp/longjmp reaching &system": ("""
        #include <stdlib.h>
        void k(long n, float *out)
        {
            void *buffer[5];
            void *volatile target = (void *)&system;
            if (__builtin_setjmp(buffer) == 0) {
                if (target == 0) return;
                __builtin_longjmp(buffer, 1);
            }
            out[0] = 1.0f;
        }
    """, {"llvm.eh.sjlj.setjmp": "forbidden_intrinsic", "llvm.eh.sjlj.longjmp":
          "forbidden_intrinsic", "system": "symbol_reference"}),
    "pointer to system stored in memory": ("""
        #include <stdlib.h>
        void k(long n, float *out) { *(int (**)(const char *))out = system; }
    """, {"system": "symbol_reference"}),
    "frame address": ("""
        void k(long n, float *out)
        { void *volatile frame = __builtin_frame_address(0); out[0] = frame != 0; }
    """, {"llvm.frameaddress.p0": "forbidden_intrinsic"}),
    "return address": ("""
        void k(long n, float *out) { out[0] = __builtin_return_address(0) != 0; }
    """, {"llvm.returnaddress": "forbidden_intrinsic"}),
    "eh_return (jump to any address)": ("""
        void k(long n, float *out) { if (n < 0) __builtin_eh_return(0L, (void *)n); out[0] = 1; }
    """, {"llvm.eh.return.i64": "forbidden_intrinsic"}),
    "cycle counter": ("""
        void k(long n, float *out) { out[0] = (float)(__builtin_readcyclecounter() % 7); }
    """, {"llvm.readcyclecounter": "forbidden_intrinsic"}),
    "MXCSR (rounding mode of the whole process)": ("""
        #include <immintrin.h>
        void k(long n, float *out) { _mm_setcsr(0x7f80); out[0] = 1; }
    """, {"llvm.x86.sse.ldmxcsr": "forbidden_intrinsic"}),
    "static call counter": ("""
        void k(long n, float *out) { static long calls; out[0] = ++calls > 100 ? 0.5f : 0.0f; }
    """, {"k.calls": "mutable_state"}),
    "file-scope mutable global": ("""
        float bias = 0.0f;
        void k(long n, float *out) { out[0] = bias; bias += 1.0f; }
    """, {"bias": "mutable_state"}),
    "static table that could change": ("""
        static float table[2] = {1, 2};
        void k(long n, float *out) { out[0] = table[n & 1]; }
    """, {"table": "mutable_state"}),
    "thread_local": ("""
        _Thread_local int seen;
        void k(long n, float *out) { out[0] = seen++; }
    """, {"seen": "mutable_state"}),
    "global initialised with system": ("""
        #include <stdlib.h>
        int (*const launcher)(const char *) = system;
        void k(long n, float *out) { out[0] = (&launcher)[n] != 0; }
    """, {"system": "symbol_reference"}),
    "table of function pointers": ("""
        #include <stdlib.h>
        void *const table[] = {(void *)exit, (void *)abort};
        void k(long n, float *out) { out[0] = table[n] != 0; }
    """, {"exit": "symbol_reference", "abort": "symbol_reference"}),
    "asm-labelled constant global": ("""
        int counter __asm__("c = constant");
        void k(long n, float *out) { out[0] = ++counter; }
    """, {"c = constant": "mutable_state"}),
    "computed goto": ("""
        void k(long n, float *out)
        { void *where = n ? &&one : &&two; goto *where; one: out[0] = 1; two: out[1] = 2; }
    """, {"<indirect>": "indirect_call"}),
    "constructor": ("""
        __attribute__((constructor)) static void at_load(void) {}
        void k(long n, float *out) { out[0] = 1; }
    """, {"llvm.global_ctors": "static_constructor"}),
    "section": ("""
        static void f(void) {}
        __attribute__((section(".init_array"), used)) static void (*const run)(void) = f;
        void k(long n, float *out) { out[0] = 1; }
    """, {"run": "section"}),
}


@pytest.mark.parametrize("source, expected", ATTACKS.values(), ids=ATTACKS.keys())
def test_attacks_are_refused_with_their_kind(source, expected):
    found = {v.symbol: v.kind for v in violations_of(source)}
    for symbol, kind in expected.items():
        assert found.get(symbol) == kind, f"{symbol}: {found}"
    assert set(found.values()) <= set(sandbox.KINDS)


def test_the_kinds_of_existing_checks():
    kinds = {name: {v.kind for v in violations_of(source)}
             for name, (source, _, _) in FORBIDDEN.items()}
    assert kinds["system"] == {"forbidden_symbol"}
    assert kinds["inline asm"] == {"inline_asm"}
    assert kinds["module-level asm defining an allowed name"] >= {"inline_asm"}
    assert kinds["function pointer"] == {"indirect_call"}
    assert kinds["external variable"] == {"external_variable"}


def test_reference_is_reported_once_and_a_call_only_as_a_call():
    violations = violations_of("""
        #include <stdlib.h>
        void k(long n, float *out)
        { int (*f)(const char *) = system; out[0] = system("true") + (f != 0); }
    """)
    assert [(v.symbol, v.kind) for v in violations] == [("system", "forbidden_symbol")]


def test_references_are_attributed_to_their_function_or_initializer():
    violations = violations_of("""
        #include <stdlib.h>
        void *const holder = (void *)exit;
        static void helper(float *out) { *(void **)out = (void *)abort; }
        void k(long n, float *out) { helper(out); out[1] = (&holder)[n] != 0; }
    """)
    described = {v.describe() for v in violations}
    assert "reference to external function 'exit' (its address is taken) in the " \
        "initializer of 'holder'" in described
    assert "reference to external function 'abort' (its address is taken) in function " \
        "'helper'" in described


def test_what_the_entry_never_reaches_is_not_checked():
    """A file's main and drivers use printf, stderr, strcmp: tuning judges only the code the
    entry can run, as plain calls load it."""
    assert violations_of("""
        #include <stdio.h>
        #include <string.h>
        void *const holder = (void *)fopen;
        static void report(float x) { fprintf(stderr, "%f", x); }
        void k(long n, float *out) { out[0] = 2.0f * n; }
        int main(int argc, char **argv) { report(1); return strcmp(argv[0], ""); }
    """) == []
    assert {v.symbol for v in violations_of("""
        #include <stdio.h>
        static void report(float x) { printf("%f", x); }
        void k(long n, float *out) { report(out[0]); }
    """)} == {"printf"}


def test_patchpoint_and_stackmap_in_ir_are_refused():
    """Intrinsics no C builtin reaches are refused by name too (IR written by hand)."""
    toolchain.initialize_llvm()
    module = llvm.parse_assembly("""
        declare void @llvm.experimental.patchpoint.void(i64, i32, ptr, i32, ...)
        declare void @llvm.experimental.stackmap(i64, i32, ...)
        define void @k(ptr %target) {
          call void (i64, i32, ptr, i32, ...) @llvm.experimental.patchpoint.void(
              i64 1, i32 15, ptr %target, i32 0)
          call void (i64, i32, ...) @llvm.experimental.stackmap(i64 2, i32 0)
          ret void
        }
    """)
    violations = sandbox.check_module(module)
    assert {(v.symbol, v.kind) for v in violations} == {
        ("llvm.experimental.patchpoint.void", "forbidden_intrinsic"),
        ("llvm.experimental.stackmap", "forbidden_intrinsic")}
    assert "patches arbitrary addresses" in violations[0].reason


def test_stackrestore_only_of_a_saved_stack_pointer():
    toolchain.initialize_llvm()
    module = llvm.parse_assembly("""
        declare ptr @llvm.stacksave.p0()
        declare void @llvm.stackrestore.p0(ptr)
        define void @k(ptr %anywhere) {
          call void @llvm.stackrestore.p0(ptr %anywhere)
          ret void
        }
    """)
    assert [(v.symbol, v.kind) for v in sandbox.check_module(module)] == [
        ("llvm.stackrestore.p0", "forbidden_intrinsic")]
    # the slot clang keeps the saved pointer in, written with something else
    module = llvm.parse_assembly("""
        declare ptr @llvm.stacksave.p0()
        declare void @llvm.stackrestore.p0(ptr)
        define void @k(ptr %anywhere) {
          %slot = alloca ptr
          %saved = call ptr @llvm.stacksave.p0()
          store ptr %saved, ptr %slot
          store ptr %anywhere, ptr %slot
          %back = load ptr, ptr %slot
          call void @llvm.stackrestore.p0(ptr %back)
          ret void
        }
    """)
    assert [v.kind for v in sandbox.check_module(module)] == ["forbidden_intrinsic"]


def test_variable_length_arrays_pass_where_the_baseline_has_them():
    """clang frees a VLA with stackrestore of the pointer stacksave gave it: no intrinsic
    is refused; the VLA itself only where the baseline has none (stack sized by the
    arguments, see test_stack_sized_by_the_arguments_is_refused_unless_the_baseline_has_it)."""
    source = """
        void k(long n, float *out)
        {
            for (int j = 0; j < 3; ++j) {
                float scratch[n];
                for (long i = 0; i < n; ++i) scratch[i] = (float)i;
                out[j] = scratch[n - 1];
            }
        }
    """
    assert "llvm.stackrestore" in str(module_of(source))
    assert [v.kind for v in violations_of(source)] == ["stack_allocation"]
    assert violations_of(source, sandbox.BaselineState.of(module_of(source))) == []


MORE_ALLOWED = {
    "read-only tables and strings": """
        static const float weights[4] = {0.1f, 0.2f, 0.3f, 0.4f};
        void k(long n, float *out)
        {
            const char *s = "abc";
            static const int lut[2] = {1, 2};
            out[0] = weights[n & 3] + s[1] + lut[n & 1];
        }
    """,
    "builtins and vector extensions": """
        typedef float v8 __attribute__((ext_vector_type(8)));
        typedef int v8i __attribute__((ext_vector_type(8)));
        void k(long n, float *restrict out, const float *restrict x, const v8 *v, const v8i *w)
        {
            __builtin_assume(n > 0);
            __builtin_prefetch(x);
            if (__builtin_expect(n > 3, 1)) out[0] = 1;
            out[1] = __builtin_reduce_add(*w) + __builtin_reduce_max(*v)
                     + __builtin_elementwise_sqrt(*v)[0];
            int r;
            if (__builtin_smul_overflow((int)n, 3, &r)) out[2] = r;
            out[3] = __builtin_popcount(n) + __builtin_clzl(n) + __builtin_ctzl(n)
                     + __builtin_bswap32(n) + __builtin_bitreverse32(n);
            __builtin_memcpy(out + 5, x, 8);
            if (n < 0) __builtin_trap();
        }
    """,
    "AVX intrinsics": """
        #include <immintrin.h>
        void k(long n, float *out, const float *x)
        {
            __m256 a = _mm256_loadu_ps(x), b = _mm256_loadu_ps(x + 8);
            __m256 c = _mm256_hadd_ps(_mm256_fmadd_ps(a, b, a), a);
            c = _mm256_max_ps(_mm256_rsqrt_ps(c), _mm256_round_ps(c, 0));
            _mm256_storeu_ps(out, _mm256_blendv_ps(a, b, c));
            _mm256_zeroupper();
        }
    """,
    "alloca": """
        void k(long n, float *out) { float *t = __builtin_alloca(64 * 4); t[0] = 1; out[0] = t[0]; }
    """,
}


@pytest.mark.parametrize("source", MORE_ALLOWED.values(), ids=MORE_ALLOWED.keys())
def test_more_ordinary_kernels_pass(source):
    assert violations_of(source) == []


@pytest.mark.parametrize("source", [AXPY_C, SUM_C, SAXPY_C], ids=["axpy", "total", "saxpy"])
def test_the_test_suites_kernels_pass(source):
    assert violations_of(source) == []


@pytest.mark.parametrize("path", sorted((EXAMPLES / "kernels").glob("*.c")), ids=lambda p: p.name)
def test_example_kernels_pass(path):
    backend = get_backend("cpu")
    source = KernelSource(path.read_text(), str(path), include_dirs=(str(path.parent),))
    for macros in ({}, {"UNROLL": 4, "VECTOR_WIDTH": 8, "BLOCK_ROWS": 16, "TILE_I": 8}):
        module = backend.parse(backend.compile(source, macros), path.name)
        assert sandbox.check_module(module) == []


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("path", sorted((EXAMPLES / "cuda").glob("*.cu")), ids=lambda p: p.name)
def test_cuda_examples_pass(path, arch):
    assert sandbox.check_module(cuda_module_of(path, arch=arch)) == []


def test_cuda_shared_and_constant_memory_pass_but_device_globals_are_state():
    path = EXAMPLES / "cuda" / "saxpy.cu"
    module = cuda_module_of(path, """
        extern __shared__ float dynamic[];
        __constant__ float coefficients[4] = {1, 2, 3, 4};
        __device__ const int three = 3;
        __device__ int counter;
        extern "C" __global__ void k(float *x)
        {
            __shared__ float tile[32];
            tile[threadIdx.x] = x[threadIdx.x];
            __syncthreads();
            dynamic[threadIdx.x] = tile[31 - threadIdx.x] * coefficients[1] + three;
            x[threadIdx.x] = dynamic[threadIdx.x] + atomicAdd(&counter, 1);
        }
    """)
    assert [(v.symbol, v.kind) for v in sandbox.check_module(module)] == [
        ("counter", "mutable_state")]


def test_cuda_clocks_are_refused():
    module = cuda_module_of(EXAMPLES / "cuda" / "saxpy.cu", """
        extern "C" __global__ void k(long long *x) { x[0] = __nvvm_read_ptx_sreg_clock64(); }
    """)
    assert [(v.symbol, v.kind) for v in sandbox.check_module(module)] == [
        ("llvm.nvvm.read.ptx.sreg.clock64", "forbidden_intrinsic")]


def test_libdevice_is_allowed_on_the_gpu_only():
    assert violations_of("""
        extern float __nv_expf(float);
        void k(long n, float *out) { out[0] = __nv_expf(out[0]); }
    """)[0].symbol == "__nv_expf"


# -- the baseline's own state --------------------------------------------------------------------
BASELINE_WITH_COUNTER = """
    static long calls;
    long calls_so_far(void) { return calls; }
    void k(long n, float *out) { calls++; for (long i = 0; i < n; ++i) out[i] *= 2.0f; }
"""


def test_candidate_keeping_the_baselines_global_passes():
    baseline = module_of(BASELINE_WITH_COUNTER)
    assert sandbox.writable_globals(baseline) == frozenset({("calls", "i64")})
    candidate = """
        static long calls;
        long calls_so_far(void) { return calls; }
        void k(long n, float *out)
        { calls++; long i = 0; for (; i + 2 <= n; i += 2) { out[i] *= 2; out[i + 1] *= 2; }
          for (; i < n; ++i) out[i] *= 2.0f; }
    """
    assert violations_of(candidate, baseline=baseline) == []
    assert violations_of(candidate, baseline=sandbox.writable_globals(baseline)) == []
    assert [v.kind for v in violations_of(candidate)] == ["mutable_state"]  # no baseline


def test_candidate_changing_the_baselines_global_or_adding_one_is_refused():
    summary = sandbox.writable_globals(module_of(BASELINE_WITH_COUNTER))
    other_type = violations_of("""
        static int calls;
        void k(long n, float *out) { calls++; out[0] = 1; }
    """, baseline=summary)
    assert [(v.symbol, v.kind) for v in other_type] == [("calls", "mutable_state")]
    added = violations_of("""
        static long calls;
        static long extra;
        void k(long n, float *out) { calls++; extra++; out[0] = extra > 3; }
    """, baseline=summary)
    assert [(v.symbol, v.kind) for v in added] == [("extra", "mutable_state")]


# -- functions that keep state between calls ----------------------------------------------
HEAP_SCRATCH = """
    #include <stdlib.h>
    #include <string.h>
    void k(long n, const float *x, float *out)
    {
        float *tmp = malloc(n * sizeof *tmp);
        memcpy(tmp, x, n * sizeof *tmp);
        memmove(out, tmp, n * sizeof *out);
        free(tmp);
    }
"""


def test_heap_and_errno_are_refused_unless_the_baseline_uses_them():
    refused = violations_of(HEAP_SCRATCH)
    assert sorted((v.symbol, v.kind) for v in refused) == [
        ("free", "stateful_symbol"), ("malloc", "stateful_symbol")]
    assert "stateful function 'malloc'" in refused[0].describe() or \
        "stateful function 'malloc'" in refused[1].describe()
    errno_counter = violations_of("""
        #include <errno.h>
        void k(long n, float *out) { errno += 256; out[0] = errno > (1 << 28); }
    """)
    assert [(v.symbol, v.kind) for v in errno_counter] == [
        ("__errno_location", "stateful_symbol")]
    # a baseline that allocates lends the same functions to its candidates, and no others
    baseline = module_of(HEAP_SCRATCH)
    assert sandbox.stateful_symbols(baseline) == frozenset({"malloc", "free"})
    assert violations_of(HEAP_SCRATCH, baseline=baseline) == []
    assert violations_of(HEAP_SCRATCH, baseline=sandbox.BaselineState.of(baseline)) == []
    calloc = violations_of(HEAP_SCRATCH.replace("malloc(n * sizeof *tmp)",
                                                "calloc(n, sizeof *tmp)"), baseline=baseline)
    assert [(v.symbol, v.kind) for v in calloc] == [("calloc", "stateful_symbol")]


def test_taking_the_address_of_a_stateful_function_is_refused_too():
    violations = violations_of("""
        #include <stdlib.h>
        void k(long n, float *out) { void *(*const f)(unsigned long) = malloc; out[0] = f != 0; }
    """)
    assert ("malloc", "stateful_symbol") in [(v.symbol, v.kind) for v in violations]


# -- advice ----------------------------------------------------------------------------------
def test_advice_explains_each_kind_and_how_to_fix_it():
    violations = violations_of("""
        #include <stdlib.h>
        void k(long n, float *out)
        {
            static int calls;
            void *volatile target = (void *)&system;
            out[0] = ++calls + (target != 0) + (__builtin_frame_address(0) != 0);
        }
    """)
    assert {v.kind for v in violations} == {"mutable_state", "symbol_reference",
                                            "forbidden_intrinsic"}
    text = sandbox.advice(violations)
    assert text.startswith("forbidden: ")
    assert "writable global or static variable 'k.calls'" in text
    assert "keep state in the arguments" in text.lower()
    assert "remove system" in text and "address of library functions" in text
    assert "'llvm.frameaddress.p0' (it exposes return/frame addresses)" in text
    assert "setjmp/longjmp" in text


def test_intrinsic_allowlist_by_exact_name_or_family():
    for name in ("llvm.fmuladd.f32", "llvm.memcpy.p0.p0.i64", "llvm.lifetime.start.p0",
                 "llvm.vector.reduce.fadd.v8f32", "llvm.umul.with.overflow.i64",
                 "llvm.masked.gather.v8f32.v8p0", "llvm.experimental.noalias.scope.decl",
                 "llvm.dbg.value", "llvm.trap", "llvm.x86.avx.hadd.ps.256"):
        assert sandbox.intrinsic_allowed(name), name
    for name in ("llvm.nvvm.read.ptx.sreg.tid.x", "llvm.nvvm.barrier.cta.sync.aligned.all",
                 "llvm.nvvm.shfl.sync.down.f32", "llvm.nvvm.vote.ballot.sync",
                 "llvm.nvvm.membar.gl", "llvm.nvvm.fence.sc.cta", "llvm.nvvm.sqrt.rn.f",
                 "llvm.nvvm.ex2.approx.f32", "llvm.nvvm.fma.rn.f", "llvm.nvvm.rsqrt.approx.f"):
        assert sandbox.intrinsic_allowed(name, "nvptx64-nvidia-cuda"), name
        assert not sandbox.intrinsic_allowed(name, "x86_64-unknown-linux-gnu"), name
    for name in ("llvm.eh.sjlj.setjmp", "llvm.eh.sjlj.longjmp", "llvm.frameaddress.p0",
                 "llvm.returnaddress", "llvm.addressofreturnaddress.p0", "llvm.sponentry.p0",
                 "llvm.stackrestore.p0", "llvm.experimental.patchpoint.void",
                 "llvm.experimental.stackmap", "llvm.experimental.gc.statepoint.p0",
                 "llvm.read_register.i64", "llvm.write_register.i64", "llvm.clear_cache",
                 "llvm.localescape", "llvm.localrecover", "llvm.icall.branch.funnel",
                 "llvm.init.trampoline", "llvm.adjust.trampoline", "llvm.x86.sse.ldmxcsr",
                 "llvm.x86.rdtsc", "llvm.x86.wrfsbase.64", "llvm.readcyclecounter",
                 "llvm.sqrtx", "llvm.memcpy.element.unordered.atomic.p0.p0.i32"):
        assert not sandbox.intrinsic_allowed(name), name
        assert not sandbox.intrinsic_allowed(name, "nvptx64-nvidia-cuda"), name


VLA = """
    void k(long n, const double *x, double *out)
    {
        double copy[n * n];
        for (long i = 0; i < n * n; ++i) copy[i] = x[i];
        for (long i = 0; i < n * n; ++i) out[i] = 2.0 * copy[i];
    }
"""


def test_stack_sized_by_the_arguments_is_refused_unless_the_baseline_has_it():
    """A VLA or alloca(n): stack use that grows with the sizes, a crash at one no
    recording reaches (a 1024 x 1024 copy on an 8 MiB stack); kept where the original
    itself allocates so."""
    found = violations_of(VLA)
    assert [v.kind for v in found] == ["stack_allocation"]
    assert "the arguments set" in found[0].describe()
    assert "Use fixed-size local arrays" in sandbox.advice(found)
    alloca = VLA.replace("double copy[n * n];",
                         "double *copy = __builtin_alloca(n * n * sizeof(double));")
    assert [v.kind for v in violations_of(alloca)] == ["stack_allocation"]
    baseline = sandbox.BaselineState.of(module_of(VLA))
    assert violations_of(VLA, baseline) == []


def test_a_large_fixed_stack_frame_is_refused_a_tile_is_not():
    """Fixed arrays over 64 KiB in one function fault on a thread with a small stack (musl's
    128 KiB); a tile of a few KiB, or no more than the baseline's own, passes."""
    large = VLA.replace("double copy[n * n];", "double copy[100000];")
    found = violations_of(large)
    assert [v.kind for v in found] == ["stack_allocation"] and "8000" in \
        found[0].describe()
    assert violations_of(VLA.replace("double copy[n * n];", "double copy[1024];")) == []
    assert violations_of(large, sandbox.BaselineState.of(module_of(large))) == []
