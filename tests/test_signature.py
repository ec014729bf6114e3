"""Reading a kernel's parameters (names, dtypes, const-ness, written pointers) from its IR."""

from __future__ import annotations

import numpy as np
import pytest

import pytest_r3 as r3
from pytest_r3.backends import clang as toolchain
from pytest_r3.model.signature import read_signature

MIXED_C = """\
#include <stdint.h>

typedef float real_t;
typedef int32_t index_t;

/* a scalar of every flavour, pointers written and read, typedefs and qualifiers */
void mixed(int n, float a, double *out, const float *restrict in, int64_t offset,
           unsigned char *flags, real_t scale, const real_t *weights, index_t stride,
           float *scratch_read_only)
{
    for (int i = 0; i < n; ++i) {
        out[i] = a * in[i] + scale * weights[i] + (double)offset + scratch_read_only[i];
        flags[i] = (unsigned char)(i * stride);
    }
}

float dot(long n, const float *x, const float *y)
{
    float s = 0.0f;
    for (long i = 0; i < n; ++i)
        s += x[i] * y[i];
    return s;
}

static void hidden(int n) { (void)n; }
void calls_hidden(int n) { hidden(n); }
"""


@pytest.fixture(scope="module")
def mixed_source(tmp_path_factory):
    path = tmp_path_factory.mktemp("signature") / "mixed.c"
    path.write_text(MIXED_C)
    return path


@pytest.fixture(scope="module")
def mixed(mixed_source):
    return r3.kernel(mixed_source, entry="mixed", name="signature_mixed")


@pytest.fixture(scope="module")
def dot(mixed_source):
    return r3.kernel(mixed_source, entry="dot", name="signature_dot")


def test_names_and_dtypes_of_mixed_parameters(mixed):
    signature = mixed.signature
    assert signature.entry == "mixed"
    assert signature.names == ("n", "a", "out", "in", "offset", "flags", "scale", "weights",
                               "stride", "scratch_read_only")
    assert [p.dtype for p in signature.params] == [
        "int32", "float32", "float64", "float32", "int64", "uint8", "float32", "float32",
        "int32", "float32"]
    assert [p.is_pointer for p in signature.params] == [
        False, False, True, True, False, True, False, True, False, True]
    assert signature.return_dtype is None


def test_c_spelling_keeps_typedefs_and_const(mixed):
    ctypes = {p.name: p.ctype for p in mixed.signature.params}
    assert ctypes["in"] == "const float *"
    assert ctypes["out"] == "double *"
    assert ctypes["offset"] == "int64_t"
    assert ctypes["scale"] == "real_t"
    assert ctypes["weights"] == "const real_t *"
    assert ctypes["stride"] == "index_t"
    assert ctypes["flags"] == "unsigned char *"
    assert mixed.signature.describe() == (
        "void mixed(int n, float a, double *out, const float *in, int64_t offset, "
        "unsigned char *flags, real_t scale, const real_t *weights, index_t stride, "
        "float *scratch_read_only)")


def test_written_flags_come_from_what_the_code_does(mixed):
    written = {p.name: p.written for p in mixed.signature.params}
    assert written == {
        "n": False, "a": False, "out": True, "in": False, "offset": False, "flags": True,
        "scale": False, "weights": False, "stride": False,
        # not const, but the optimiser proves the kernel only reads it
        "scratch_read_only": False,
    }
    assert [p.name for p in mixed.signature.written] == ["out", "flags"]


def test_pointer_the_kernel_only_reads_accepts_a_read_only_array(mixed):
    n = 4
    out = np.zeros(n)
    inputs = np.arange(n, dtype=np.float32)
    weights = np.ones(n, dtype=np.float32)
    scratch = np.full(n, 0.5, dtype=np.float32)
    scratch.flags.writeable = False
    flags = np.zeros(n, dtype=np.uint8)
    mixed(n, 2.0, out, inputs, 10, flags, 3.0, weights, 5, scratch)
    np.testing.assert_allclose(out, 2.0 * inputs + 3.0 + 10 + 0.5)
    np.testing.assert_array_equal(flags, [0, 5, 10, 15])


def test_without_the_optimised_function_non_const_pointers_count_as_written():
    ir = toolchain.compile_to_ir(MIXED_C, filename="mixed.c", debug_info=True)
    signature = read_signature(ir, "mixed")
    written = {p.name for p in signature.params if p.written}
    assert written == {"out", "flags", "scratch_read_only"}


def test_kernel_returning_a_float(dot):
    assert dot.signature.return_dtype == "float32"
    assert dot.signature.describe() == "float32 dot(long n, const float *x, const float *y)"
    x = np.arange(5, dtype=np.float32)
    result = dot(5, x, np.full(5, 2.0, dtype=np.float32))
    assert result == pytest.approx(20.0)
    assert isinstance(result, float)


def test_static_function_is_an_entry_and_unknown_entries_list_static_ones(mixed_source):
    kernel = r3.kernel(mixed_source, entry="hidden", name="signature_hidden")
    assert kernel.signature.describe() == "void hidden(int n)"
    kernel(3)
    unknown = r3.kernel(mixed_source, entry="nowhere", name="signature_nowhere")
    with pytest.raises(r3.EntryNotFoundError) as excinfo:
        _ = unknown.signature
    message = str(excinfo.value)
    assert "'nowhere' is not defined" in message
    assert "mixed, dot, hidden, calls_hidden" in message


@pytest.mark.parametrize(
    ("source", "parameter", "problem"),
    [
        ("void f(int n, float **rows) { rows[0][0] = 1; }", "rows", "pointers to pointers"),
        ("void f(int n, void *data) { (void)data; }", "data", "'void *' has no element type"),
        ("void f(const void *data) { (void)data; }", "data", "'void *' has no element type"),
        ("struct p { float x, y; };\nvoid f(struct p where, float *out) { out[0] = where.x; }",
         "where", "unsupported parameter type (DW_TAG_structure_type)"),
        ("struct p { float x; int tag; };\nvoid f(int n, struct p *points) { points->x = n; }",
         "points", "struct 'p' mixes member types"),
        ("void f(long double x, double *out) { out[0] = x; }", "x", "'long double'"),
        ("enum mode { A, B };\nvoid f(enum mode m, float *out) { out[0] = m; }", "m",
         "unsupported parameter type (DW_TAG_enumeration_type)"),
    ],
    ids=["pointer-to-pointer", "void-pointer", "const-void-pointer", "struct",
         "mixed-struct-pointer", "long-double", "enum"],
)
def test_unsupported_parameter_types_name_the_parameter(source, parameter, problem, unique_name):
    kernel = r3.kernel(source + "\n", entry="f", name=unique_name())
    with pytest.raises(r3.DeclarationError) as excinfo:
        _ = kernel.signature
    message = str(excinfo.value)
    assert f"parameter {parameter!r}" in message
    assert problem in message
    assert repr(kernel.name) in message


def test_variadic_kernel_is_refused(unique_name):
    kernel = r3.kernel("void f(int n, ...) { (void)n; }\n", entry="f", name=unique_name())
    with pytest.raises(r3.DeclarationError, match=r"variadic kernels \('\.\.\.'\)"):
        _ = kernel.signature


def test_kernel_returning_a_pointer_is_refused(unique_name):
    kernel = r3.kernel("float *f(float *x) { return x; }\n", entry="f", name=unique_name())
    with pytest.raises(r3.DeclarationError, match="may return a number, not a pointer"):
        _ = kernel.signature


def test_bool_and_half_precision_arrays(unique_name):
    kernel = r3.kernel(
        "_Bool any_negative(int n, const _Float16 *x, _Bool *mask) {\n"
        "  _Bool any = 0;\n"
        "  for (int i = 0; i < n; ++i) { mask[i] = x[i] < 0; any |= mask[i]; }\n"
        "  return any;\n}\n",
        entry="any_negative", name=unique_name())
    assert [(p.dtype, p.written) for p in kernel.signature.params] == [
        ("int32", False), ("float16", False), ("bool", True)]
    assert kernel.signature.return_dtype == "bool"
    mask = np.zeros(3, dtype=bool)
    assert kernel(3, np.array([1.0, -2.0, 3.0], dtype=np.float16), mask) is True
    np.testing.assert_array_equal(mask, [False, True, False])
    assert kernel(1, np.ones(1, dtype=np.float16), mask) is False


ALIGNMENT_TESTS = """
#include <stdint.h>
void pick(long n, const float *x, float *y)
{
    if (((uintptr_t)x & 15) == 0) {
        for (long i = 0; i < n; ++i) y[i] = 2.0f * x[i];
    } else {
        for (long i = 0; i < n; ++i) y[i] = x[i] + x[i];
    }
}
void leak(long n, const float *x, float *y)
{
    float *p = y + ((intptr_t)x - (intptr_t)y) / 4;  /* x's address made an index of y */
    for (long i = 0; i < n; ++i) { float v = p[i]; p[i] = v; y[i] = 2.0f * v; }
}
"""


def test_an_input_whose_address_is_only_tested_stays_read_only(tmp_path):
    """``(uintptr_t)x & 15`` makes LLVM give up on x's readonly attribute; the launcher
    still takes x as read-only (a read-only array is accepted), while an address that
    becomes an index into a written array keeps x written."""
    path = tmp_path / "alignment.c"
    path.write_text(ALIGNMENT_TESTS)
    pick = r3.kernel(path, entry="pick", name="signature_pick")
    assert [p.name for p in pick.signature.written] == ["y"]
    x = np.arange(8, dtype=np.float32)[1:]
    x.flags.writeable = False
    y = np.zeros(7, dtype=np.float32)
    pick(7, x, y)
    np.testing.assert_array_equal(y, 2 * x)
    leak = r3.kernel(path, entry="leak", name="signature_leak")
    assert [p.name for p in leak.signature.written] == ["x", "y"]


PEEL_ON_INPUT = """
#include <stdint.h>
void peel(long n, const float *x, float *y)
{
    long head = ((16 - ((uintptr_t)x & 15)) & 15) / 4;  /* to x's next 16-byte boundary */
    long i = 0;
    for (; i < head && i < n; ++i) y[i] = 2.0f * x[i];
    for (; i < n; ++i) y[i] = 2.0f * x[i];
}
"""


def test_an_input_peeled_to_its_alignment_stays_read_only(tmp_path):
    """A peel count made from x's low address bits indexes y and x: still only reads x."""
    path = tmp_path / "peel.c"
    path.write_text(PEEL_ON_INPUT)
    peel = r3.kernel(path, entry="peel", name="signature_peel")
    assert [p.name for p in peel.signature.written] == ["y"]


def test_an_overlap_test_on_an_input_keeps_it_read_only():
    """benchmarks/variants/scaled_add_fifth_twice.c compares x's address with y's to pick a
    loop bound (``xs < ys + bytes && ys < xs + bytes``): the comparison's result reaches a
    ``select`` of the bound and then indexes, but it is one bit, not x's address."""
    from pathlib import Path

    path = Path(__file__).parent.parent / "benchmarks" / "variants" / "scaled_add_fifth_twice.c"
    fifth = r3.kernel(path, entry="scaled_add", name="signature_fifth_twice")
    assert [p.name for p in fifth.signature.written] == ["y"]


BITS_OF_AN_ADDRESS = """
#include <stdint.h>
void rebuild(long n, const float *x, float *y)
{
    volatile unsigned long bits[64];
    for (int b = 0; b < 64; ++b)
        bits[b] = ((uintptr_t)x >> SHIFT_OF(b)) & MASK;  /* one bit of x's address */
    unsigned long address = 0;
    for (int b = 0; b < 64; ++b)
        address |= (bits[b] & 1) << b;
    volatile float *p = y + (long)(address - (uintptr_t)y) / 4;  /* x, reached from y */
    for (long i = 0; i < n; ++i) { p[i] = p[i]; y[i] = 2.0f * x[i]; }
}
"""


@pytest.mark.parametrize("shift, mask", [("(b)", "1"), ("(b)", "4095"), ("(b / 2 * 2)", "3")],
                         ids=["shift-and-1", "shift-and-4095", "shift-and-3"])
def test_an_input_whose_address_is_rebuilt_from_shifted_bits_is_written(tmp_path, shift,
                                                                        mask):
    """``((uintptr_t)x >> b) & 1`` keeps one low bit of a value, but of x's address shifted
    down: 64 of them rebuild the address, which then leads a pointer to x from y and
    writes x back with its own values. A mask keeps low address bits only on a value no
    right shift has touched (or not shifted past the page)."""
    path = tmp_path / "rebuild.c"
    path.write_text(BITS_OF_AN_ADDRESS.replace("SHIFT_OF(b)", shift).replace("MASK", mask))
    rebuild = r3.kernel(path, entry="rebuild", name="signature_rebuild")
    assert [p.name for p in rebuild.signature.written] == ["x", "y"]


PAGE_OFFSET_SHIFTED = """
#include <stdint.h>
void quarter(long n, const float *x, float *y)
{
    long head = ((uintptr_t)x >> 2) & 3;  /* x's offset in 16 bytes, in floats */
    for (long i = 0; i < n; ++i) y[i] = x[i] * (float)(head + 1);
}
"""


def test_an_input_shifted_within_its_page_offset_stays_read_only(tmp_path):
    """``(x >> 2) & 3`` is LLVM's own form of ``(x & 15) / 4``: the bits it keeps are below
    the page, so x stays read-only."""
    path = tmp_path / "quarter.c"
    path.write_text(PAGE_OFFSET_SHIFTED)
    quarter = r3.kernel(path, entry="quarter", name="signature_quarter")
    assert [p.name for p in quarter.signature.written] == ["y"]
