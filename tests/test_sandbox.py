"""The static sandbox check: real C through clang, checked as LLVM IR before anything runs."""

from __future__ import annotations

import textwrap

import pytest

from pytest_r3 import sandbox
from pytest_r3.backends import get_backend
from pytest_r3.source import KernelSource


def violations_of(c_source: str) -> list[sandbox.Violation]:
    backend = get_backend("cpu")
    source = KernelSource(textwrap.dedent(c_source), "/virtual/candidate.c")
    module = backend.parse(backend.compile(source, {}), "candidate")
    return sandbox.check_module(module)


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
        #include <stdlib.h>
        #include <string.h>
        void k(long n, const float *x, float *out)
        {
            float *tmp = malloc(n * sizeof *tmp);
            memcpy(tmp, x, n * sizeof *tmp);
            memset(out, 0, n * sizeof *out);
            memmove(out, tmp, n * sizeof *out);
            free(tmp);
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
