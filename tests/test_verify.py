"""Deciding whether outputs match: tolerances, NaN/Inf rules, norm mode, guards, fresh inputs."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from pytest_r3.errors import DeclarationError
from pytest_r3.verify import (
    GUARD_BYTES,
    GuardedBuffer,
    Tolerance,
    compare,
    parse_tolerances,
    perturbed,
)

# -- compare: integers --------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint64, np.bool_])
def test_integers_must_match_exactly(dtype):
    expected = np.arange(20).astype(dtype)
    assert compare("k", expected, expected.copy(), Tolerance()) is None

    actual = expected.copy()
    actual[13] = not actual[13] if dtype is np.bool_ else actual[13] + 1
    problem = compare("k", expected, actual, Tolerance())
    assert problem is not None
    assert problem.startswith("k: 1 of 20 element(s)")
    assert "exact match required" in problem
    assert "[13]" in problem


def test_integers_ignore_a_generous_float_tolerance():
    expected = np.array([1000, 2000], dtype=np.int64)
    actual = np.array([1000, 2001], dtype=np.int64)
    assert compare("n", expected, actual, Tolerance(rtol=0.5, atol=10)) is not None


def test_shape_mismatch_is_reported():
    problem = compare("c", np.zeros((4, 4)), np.zeros(16), Tolerance())
    assert problem == "c: shape (16,) differs from the expected (4, 4)"


# -- compare: floats ------------------------------------------------------------------------


def test_float32_default_tolerance_accepts_rounding_and_rejects_real_errors():
    expected = np.linspace(1, 2, 100, dtype=np.float32)
    rounding = expected * np.float32(1 + 2e-7)  # a couple of ulps
    assert compare("y", expected, rounding, Tolerance()) is None

    wrong = expected.copy()
    wrong[42] += np.float32(1e-3)
    problem = compare("y", expected, wrong, Tolerance())
    assert problem is not None
    assert "1 of 100 element(s)" in problem and "[42]" in problem
    assert "rtol=1e-05, atol=1e-06" in problem
    assert "max abs error" in problem


def test_float64_default_tolerance_is_tighter_than_float32():
    expected = np.ones(8)
    actual = expected * (1 + 1e-7)
    assert compare("y", expected, actual, Tolerance()) is not None
    assert compare("y", expected.astype(np.float32), actual.astype(np.float32),
                   Tolerance()) is None


def test_explicit_rtol_and_atol_are_used():
    expected = np.array([100.0, 0.0])
    actual = np.array([101.0, 0.05])
    assert compare("y", expected, actual, Tolerance()) is not None
    assert compare("y", expected, actual, Tolerance(rtol=0.02, atol=0.1)) is None
    # rtol alone does not cover the zero element; atol falls back to the dtype default
    assert compare("y", expected, actual, Tolerance(rtol=0.02)) is not None


def test_2d_mismatch_names_the_multi_dimensional_index():
    expected = np.zeros((3, 5), dtype=np.float32)
    actual = expected.copy()
    actual[2, 4] = 1
    problem = compare("grid", expected, actual, Tolerance())
    assert "[2, 4]" in problem


# -- compare: NaN and Inf -------------------------------------------------------------------


def test_nan_where_the_reference_is_finite_is_rejected():
    expected = np.ones(10, dtype=np.float32)
    actual = expected.copy()
    actual[3] = np.nan
    problem = compare("y", expected, actual, Tolerance(rtol=1.0, atol=1.0))
    assert problem is not None
    assert "NaN or Inf where the reference is not" in problem
    assert "[3]" in problem


def test_inf_where_the_reference_is_finite_is_rejected():
    expected = np.ones(4)
    actual = np.array([1.0, np.inf, 1.0, 1.0])
    assert "NaN or Inf" in compare("y", expected, actual, Tolerance(rtol=1.0))


def test_nan_and_inf_matching_the_reference_are_accepted():
    expected = np.array([1.0, np.nan, np.inf, -np.inf])
    assert compare("y", expected, expected.copy(), Tolerance()) is None


def test_wrong_sign_of_infinity_is_rejected():
    expected = np.array([np.inf, 1.0])
    actual = np.array([-np.inf, 1.0])
    assert compare("y", expected, actual, Tolerance()) is not None


def test_finite_value_where_the_reference_is_nan_is_rejected():
    expected = np.array([1.0, np.nan])
    actual = np.array([1.0, 2.0])
    assert compare("y", expected, actual, Tolerance()) is not None


# -- compare: norm mode -------------------------------------------------------------------


def test_norm_mode_bounds_the_relative_l2_error():
    rng = np.random.default_rng(0)
    expected = rng.standard_normal(1000)
    noisy = expected + 1e-9 * rng.standard_normal(1000)
    # elementwise, some entries near zero fail the default float64 tolerance ...
    assert compare("c", expected, noisy, Tolerance()) is not None
    # ... but the relative L2 error is ~1e-9
    assert compare("c", expected, noisy, Tolerance(norm=1e-6)) is None
    problem = compare("c", expected, noisy, Tolerance(norm=1e-12))
    assert problem is not None and "relative L2 error" in problem and "1e-12" in problem


def test_norm_mode_still_rejects_nan():
    expected = np.ones(100)
    actual = expected.copy()
    actual[0] = np.nan
    assert "NaN" in compare("c", expected, actual, Tolerance(norm=1.0))


def test_norm_mode_rejects_a_finite_value_where_the_reference_is_not_finite():
    expected = np.array([1.0, np.nan, np.inf, 3.0])
    actual = np.array([1.0, 2.0, 5.0, 3.0])
    problem = compare("c", expected, actual, Tolerance(norm=1e-6))
    assert problem is not None
    assert "2 of 4" in problem
    assert compare("c", expected, expected.copy(), Tolerance(norm=1e-6)) is None


# -- tolerances -------------------------------------------------------------------------------


def test_default_tolerances_by_dtype():
    assert Tolerance.default_for(np.dtype(np.int32)) == Tolerance(0.0, 0.0)
    assert Tolerance.default_for(np.dtype(np.float16)) == Tolerance(1e-2, 1e-3)
    assert Tolerance.default_for(np.dtype(np.float32)) == Tolerance(1e-5, 1e-6)
    assert Tolerance.default_for(np.dtype(np.float64)) == Tolerance(1e-10, 1e-12)
    assert Tolerance(rtol=0.5).filled(np.dtype(np.float32)) == Tolerance(0.5, 1e-6)
    assert Tolerance(norm=1e-3).filled(np.dtype(np.float64)).norm == 1e-3


def test_parse_tolerances_applies_per_argument_overrides():
    tolerances = parse_tolerances(
        {"rtol": 1e-3, "per_argument": {"c": {"atol": 0.5}, "d": {"norm": 1e-4}}},
        ("a", "b", "c", "d"), "kernel 'k'")
    assert tolerances["a"] == tolerances["b"] == Tolerance(rtol=1e-3)
    assert tolerances["c"] == Tolerance(rtol=1e-3, atol=0.5)
    assert tolerances["d"] == Tolerance(rtol=1e-3, norm=1e-4)

    expected = np.array([10.0, 20.0])
    actual = np.array([10.3, 20.0])
    assert compare("b", expected, actual, tolerances["b"]) is not None
    assert compare("c", expected, actual, tolerances["c"]) is None


def test_parse_tolerances_does_not_modify_its_input():
    spec = {"rtol": 1e-3, "per_argument": {"c": {"atol": 0.5}}}
    parse_tolerances(spec, ("c",), "k")
    assert spec == {"rtol": 1e-3, "per_argument": {"c": {"atol": 0.5}}}


def test_parse_tolerances_empty_gives_defaults():
    assert parse_tolerances(None, ("x", "y"), "k") == {"x": Tolerance(), "y": Tolerance()}


@pytest.mark.parametrize("spec, fragment", [
    ({"rtoll": 1e-3}, "unknown tolerance key 'rtoll'"),
    ({"per_argument": {"zz": {"rtol": 1}}}, "unknown argument 'zz'"),
    ({"per_argument": {"c": {"relative": 1}}}, "unknown tolerance key(s) ['relative']"),
])
def test_parse_tolerances_refuses_mistakes_with_the_location(spec, fragment):
    with pytest.raises(DeclarationError) as info:
        parse_tolerances(spec, ("a", "c"), "kernel 'mm'")
    assert fragment in str(info.value)
    assert str(info.value).startswith("kernel 'mm'")


# -- guarded buffers ------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int16])
def test_guarded_buffer_looks_like_the_original(dtype):
    like = np.arange(12, dtype=dtype).reshape(3, 4)
    buffer = GuardedBuffer(like)
    assert buffer.array.shape == (3, 4) and buffer.array.dtype == like.dtype
    assert buffer.array.flags.c_contiguous and buffer.array.flags.writeable
    buffer.fill_from(like)
    np.testing.assert_array_equal(buffer.array, like)
    buffer.array[...] = 7  # writing every element in bounds is fine
    assert buffer.guards_intact() is None


def _poke(buffer: GuardedBuffer, index: int, ctype) -> None:
    """Write through a raw pointer like a kernel would: element ``index``, maybe outside."""
    address = buffer.array.ctypes.data + index * ctypes.sizeof(ctype)
    ctype.from_address(address).value = 1


def test_guarded_buffer_detects_a_write_past_the_end():
    buffer = GuardedBuffer(np.zeros(10, dtype=np.float32))
    _poke(buffer, 10, ctypes.c_float)  # out[n]
    problem = buffer.guards_intact()
    assert problem == "wrote up to 4 byte(s) past the end of the buffer"


def test_guarded_buffer_detects_a_write_before_the_start():
    buffer = GuardedBuffer(np.zeros(10, dtype=np.float64))
    _poke(buffer, -2, ctypes.c_double)  # out[-2]
    problem = buffer.guards_intact()
    assert problem == "wrote 16 byte(s) before the start of the buffer"


def test_guarded_buffer_detects_a_far_write_inside_the_guard():
    buffer = GuardedBuffer(np.zeros(10, dtype=np.float32))
    _poke(buffer, 10 + GUARD_BYTES // 4 - 1, ctypes.c_float)
    assert "past the end" in buffer.guards_intact()


def test_poison_overwrites_every_byte_and_nothing_else():
    buffer = GuardedBuffer(np.zeros(6, dtype=np.float32))
    buffer.poison(0xFF)
    assert np.isnan(buffer.array).all()
    buffer.poison(0x7B)
    assert np.isfinite(buffer.array).all() and (buffer.array != 0).all()
    assert buffer.guards_intact() is None


# -- fresh inputs ---------------------------------------------------------------------------


def test_perturbed_floats_are_new_values_of_the_same_kind():
    values = np.random.default_rng(1).standard_normal((20, 30)).astype(np.float32)
    fresh = perturbed(values, np.random.default_rng(2))
    assert fresh.dtype == values.dtype and fresh.shape == values.shape
    assert np.isfinite(fresh).all()
    assert (fresh != values).mean() > 0.99
    # same scale: a memorised answer fails, a correct kernel's error bounds still apply
    assert 0.3 < fresh.std() / values.std() < 3
    again = perturbed(values, np.random.default_rng(2))
    np.testing.assert_array_equal(fresh, again)


def test_perturbed_keeps_integers_and_empty_arrays():
    indices = np.array([3, 1, 2], dtype=np.int64)
    np.testing.assert_array_equal(perturbed(indices, np.random.default_rng(0)), indices)
    empty = np.zeros(0, dtype=np.float64)
    assert perturbed(empty, np.random.default_rng(0)).shape == (0,)


def test_perturbed_constant_field_is_no_longer_constant():
    values = np.full(50, 3.0)
    fresh = perturbed(values, np.random.default_rng(0))
    assert np.unique(fresh).size > 1
