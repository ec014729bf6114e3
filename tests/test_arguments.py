"""Every launch checks its arguments against the signature and says what is wrong."""

from __future__ import annotations

import numpy as np
import pytest

import pytest_r3 as r3
from pytest_r3.model.arguments import ArgumentBinder
from pytest_r3.model.signature import Param, Signature

AXPY = "kernel '{name}' argument {index} ({param})"


@pytest.fixture(scope="module")
def narrow(tmp_path_factory):
    """Scalars of every narrow integer type (what they fit is checked on launch)."""
    path = tmp_path_factory.mktemp("arguments") / "narrow.c"
    path.write_text(
        "#include <stdint.h>\n"
        "double narrow(uint8_t u8, int8_t i8, uint16_t u16, short i16, unsigned u32, _Bool flag,\n"
        "              unsigned long long u64) {\n"
        "  return u8 + i8 + u16 + i16 + (double)u32 + flag + (double)u64;\n}\n")
    return r3.kernel(path, entry="narrow", name="arguments_narrow")


@pytest.fixture
def arrays():
    return np.arange(8, dtype=np.float32), np.ones(8, dtype=np.float32)


def _problem(axpy, index, param):
    return AXPY.format(name=axpy.name, index=index, param=param)


def test_correct_call_updates_the_written_array(axpy, arrays):
    x, y = arrays
    assert axpy(8, 2.0, x, y) is None
    np.testing.assert_array_equal(y, 2.0 * np.arange(8) + 1)
    np.testing.assert_array_equal(x, np.arange(8))


@pytest.mark.parametrize("count", [0, 3, 5])
def test_wrong_number_of_arguments(axpy, arrays, count):
    x, y = arrays
    args = (8, 2.0, x, y, y)[:count]
    with pytest.raises(r3.LaunchError) as excinfo:
        axpy(*args)
    assert str(excinfo.value) == (
        f"kernel {axpy.name!r} takes 4 argument(s) "
        f"(void axpy(long n, float a, const float *x, float *y)), got {count}")


def test_wrong_dtype(axpy, arrays):
    x, _ = arrays
    with pytest.raises(r3.LaunchError) as excinfo:
        axpy(8, 2.0, x, np.ones(8))
    assert str(excinfo.value) == (
        f"{_problem(axpy, 4, 'float *y')}: expected dtype float32, got float64; convert with "
        "arr.astype(np.float32)")


def test_non_contiguous_array(axpy, arrays):
    _, y = arrays
    strided = np.arange(16, dtype=np.float32)[::2]
    with pytest.raises(r3.LaunchError) as excinfo:
        axpy(8, 2.0, strided, y)
    assert str(excinfo.value) == (
        f"{_problem(axpy, 3, 'const float *x')}: the array is not C-contiguous (strides (8,)); "
        "pass np.ascontiguousarray(arr)")
    fortran = np.asfortranarray(np.ones((2, 4), dtype=np.float32))
    with pytest.raises(r3.LaunchError, match="not C-contiguous"):
        axpy(8, 2.0, fortran, y)
    # the suggested fix works
    axpy(8, 2.0, np.ascontiguousarray(strided), y)
    np.testing.assert_array_equal(y, 2.0 * np.arange(0, 16, 2) + 1)


def test_read_only_array_for_a_written_pointer(axpy, arrays):
    x, y = arrays
    y.flags.writeable = False
    with pytest.raises(r3.LaunchError) as excinfo:
        axpy(8, 2.0, x, y)
    assert str(excinfo.value) == (
        f"{_problem(axpy, 4, 'float *y')}: the kernel writes this array but it is read-only; "
        "pass a writeable copy")
    np.testing.assert_array_equal(y, 1.0)  # untouched


def test_read_only_array_is_fine_for_a_const_pointer(axpy, arrays):
    x, y = arrays
    x.flags.writeable = False
    axpy(8, 1.0, x, y)
    np.testing.assert_array_equal(y, np.arange(8) + 1)


def test_array_expected_but_something_else_given(axpy, arrays):
    _, y = arrays
    with pytest.raises(r3.LaunchError) as excinfo:
        axpy(8, 2.0, [1.0] * 8, y)
    assert str(excinfo.value) == (
        f"{_problem(axpy, 3, 'const float *x')}: expected a numpy array of float32, got list; "
        "pass np.asarray(value, dtype=np.float32)")
    with pytest.raises(r3.LaunchError, match="got NoneType"):
        axpy(8, 2.0, None, y)


def test_integer_argument_checks(axpy, arrays):
    x, y = arrays
    with pytest.raises(r3.LaunchError) as excinfo:
        axpy(2**63, 2.0, x, y)
    assert str(excinfo.value) == (
        f"{_problem(axpy, 1, 'long n')}: 9223372036854775808 does not fit in int64 "
        "[-9223372036854775808, 9223372036854775807]")
    with pytest.raises(r3.LaunchError) as excinfo:
        axpy(8.0, 2.0, x, y)
    assert str(excinfo.value) == (
        f"{_problem(axpy, 1, 'long n')}: expected an integer, got float 8.0")
    # numpy integers are integers
    axpy(np.int32(8), 2.0, x, y)
    np.testing.assert_array_equal(y, 2.0 * np.arange(8) + 1)


def test_float_argument_checks(axpy, arrays):
    x, y = arrays
    for bad in ("2", x, np.complex128(2 + 1j), None):
        with pytest.raises(r3.LaunchError, match=r"argument 2 \(float a\): expected a number"):
            axpy(8, bad, x, y)
    np.testing.assert_array_equal(y, 1.0)
    axpy(8, np.float64(0.5), x, y)  # ints and numpy floats are numbers
    axpy(8, 2, x, y)
    np.testing.assert_array_equal(y, 2.5 * np.arange(8) + 1)


@pytest.mark.parametrize(
    ("index", "value", "param", "bounds"),
    [
        (0, 256, "uint8_t u8", "uint8 [0, 255]"),
        (0, -1, "uint8_t u8", "uint8 [0, 255]"),
        (1, 128, "int8_t i8", "int8 [-128, 127]"),
        (2, 65536, "uint16_t u16", "uint16 [0, 65535]"),
        (3, -32769, "short i16", "int16 [-32768, 32767]"),
        (4, 2**32, "unsigned int u32", "uint32 [0, 4294967295]"),
        (5, 2, "_Bool flag", "bool [0, 1]"),
        (6, -1, "unsigned long long u64", "uint64 [0, 18446744073709551615]"),
    ],
)
def test_integers_out_of_range_for_narrow_types(narrow, index, value, param, bounds):
    args = [1, 1, 1, 1, 1, True, 1]
    args[index] = value
    with pytest.raises(r3.LaunchError) as excinfo:
        narrow(*args)
    assert str(excinfo.value) == (
        f"kernel 'arguments_narrow' argument {index + 1} ({param}): {value} does not fit in "
        f"{bounds}")


def test_narrow_types_at_their_limits_arrive_intact(narrow):
    assert narrow(255, -128, 65535, -32768, 2**32 - 1, True, 2**64 - 1) == pytest.approx(
        255 - 128 + 65535 - 32768 + (2**32 - 1) + 1 + float(2**64 - 1))


def test_ndarray_subclasses_are_launched(axpy, tmp_path):
    x = np.arange(8, dtype=np.float32)
    y = np.memmap(tmp_path / "y.bin", dtype=np.float32, mode="w+", shape=(8,))
    y[:] = 1.0
    axpy(8, 2.0, x, y)
    np.testing.assert_array_equal(y, 2.0 * np.arange(8) + 1)
    y.flush()
    del y
    on_disk = np.fromfile(tmp_path / "y.bin", dtype=np.float32)
    np.testing.assert_array_equal(on_disk, 2.0 * np.arange(8) + 1)


def test_multidimensional_contiguous_arrays_are_flat_memory(axpy):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    y = np.zeros((3, 4), dtype=np.float32)
    axpy(12, 1.0, x, y)
    np.testing.assert_array_equal(y, x)


def test_binder_passes_addresses_or_objects():
    signature = Signature("f", (Param("n", "int", "int32", False),
                                Param("x", "double *", "float64", True, written=True)), None)
    x = np.zeros(3)
    assert ArgumentBinder("f", signature)([3, x]) == [3, x.ctypes.data]
    converted = ArgumentBinder("f", signature, arrays_by_object=True)([3, x])
    assert converted[0] == 3 and converted[1] is x
