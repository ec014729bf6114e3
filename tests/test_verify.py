"""Deciding whether outputs match: tolerances, NaN/Inf rules, norm mode, guards, fresh inputs,
derived problems (integer data, float scalars, sizes) and partial writes."""

from __future__ import annotations

import ctypes
import hashlib
import subprocess
import sys

import numpy as np
import pytest

import pytest_r3 as r3
from pytest_r3.errors import DeclarationError
from pytest_r3.verify import (
    GUARD_BYTES,
    GuardedBuffer,
    Tolerance,
    WriteMask,
    check_guards,
    compare,
    compare_masked,
    derived_sizes,
    guard_bytes,
    guard_length,
    parse_tolerances,
    perturbed,
    perturbed_integers,
    perturbed_scalar,
    perturbed_scalars,
    poison_array,
    poison_bytes,
    same_bits,
    storage_data,
    write_mask,
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
    buffer = GuardedBuffer(np.zeros(10, dtype=np.float32), rng=np.random.default_rng(1))
    _poke(buffer, 10, ctypes.c_float)  # out[n]
    problem = buffer.guards_intact()
    assert problem == "wrote up to 4 byte(s) past the end of the buffer"


def test_guarded_buffer_detects_a_write_before_the_start():
    buffer = GuardedBuffer(np.zeros(10, dtype=np.float64), rng=np.random.default_rng(2))
    _poke(buffer, -2, ctypes.c_double)  # out[-2]
    problem = buffer.guards_intact()
    assert problem == "wrote 16 byte(s) before the start of the buffer"


def test_guarded_buffer_detects_a_far_write_inside_the_guard():
    buffer = GuardedBuffer(np.zeros(10, dtype=np.float32), rng=np.random.default_rng(3))
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


# -- random guards ----------------------------------------------------------------------------


def test_guard_bytes_are_random_per_buffer_and_reproducible_from_a_seed():
    rng = np.random.default_rng(5)
    first, second = GuardedBuffer(np.zeros(8, np.float32), rng), GuardedBuffer(
        np.zeros(8, np.float32), rng)
    assert first.guard_len == guard_length(np.float32) == GUARD_BYTES
    # not a fixed byte a candidate could recognise, and different for every buffer
    assert np.unique(first.guard_before).size > 200
    assert not np.array_equal(first.guard_before, first.guard_after)
    assert not np.array_equal(first.guard_before, second.guard_before)
    # with a seed, another process regenerates them from the seed alone
    seeded = GuardedBuffer(np.zeros(3, np.float64), rng=1234)
    before, after = guard_bytes(guard_length(np.float64), 1234)
    np.testing.assert_array_equal(seeded.guard_before, before)
    np.testing.assert_array_equal(seeded.guard_after, after)
    # two unseeded buffers differ too (fresh entropy)
    assert not np.array_equal(GuardedBuffer(np.zeros(1)).guard_before,
                              GuardedBuffer(np.zeros(1)).guard_before)


def test_guard_length_is_a_whole_number_of_elements():
    assert guard_length(np.float64) == GUARD_BYTES
    assert guard_length(np.dtype("V12")) % 12 == 0 and guard_length(np.dtype("V12")) >= 4096


def test_explicit_guard_bytes_are_used():
    buffer = GuardedBuffer(np.zeros(4, np.int16), guard_bytes=0xA5)
    assert (buffer.storage_bytes()[: buffer.guard_len] == 0xA5).all()
    before, after = guard_bytes(buffer.guard_len, 9)
    buffer = GuardedBuffer(np.zeros(4, np.int16), guard_bytes=(before, after))
    raw = buffer.storage_bytes()
    np.testing.assert_array_equal(raw[: buffer.guard_len], before)
    np.testing.assert_array_equal(raw[-buffer.guard_len:], after)
    with pytest.raises(ValueError, match="guard has 3 byte"):
        GuardedBuffer(np.zeros(4, np.int16), guard_bytes=(b"abc", after))


def test_a_write_of_the_old_fixed_guard_byte_is_caught():
    """A candidate that writes 0xA5 past the end (the old guard) is no longer invisible."""
    buffer = GuardedBuffer(np.zeros(10, dtype=np.uint8), rng=np.random.default_rng(7))
    storage_end = buffer.array.ctypes.data + 10
    ctypes.memset(storage_end, 0xA5, 64)
    assert buffer.guards_intact() is not None


def test_guards_are_checked_from_a_returned_copy_of_the_storage():
    """The judging process sees only the raw bytes sent back and the seed it chose."""
    like = np.zeros((2, 5), dtype=np.float32)
    seed = 31337
    buffer = GuardedBuffer(like, rng=seed)  # the worker's side
    buffer.array[...] = 1
    clean = buffer.storage_bytes()
    _poke(buffer, 10, ctypes.c_float)
    dirty = buffer.storage_bytes()
    _poke(buffer, -1, ctypes.c_float)
    before_start = buffer.storage_bytes()

    guard_len = guard_length(like.dtype)  # the judge's side: only the seed and the storage
    before, after = guard_bytes(guard_len, seed)
    assert check_guards(clean, guard_len, before, after) is None
    assert check_guards(dirty, guard_len, before, after) == \
        "wrote up to 4 byte(s) past the end of the buffer"
    assert check_guards(before_start, guard_len, before, after) == \
        "wrote 4 byte(s) before the start of the buffer"
    assert "fewer than its two guards" in check_guards(clean[:100], guard_len, before, after)
    np.testing.assert_array_equal(storage_data(clean, guard_len, like), np.ones((2, 5)))
    with pytest.raises(ValueError):
        storage_data(clean[:-4], guard_len, like)


# -- random poison ----------------------------------------------------------------------------


def test_poison_from_a_generator_is_random_and_leaves_the_guards_alone():
    buffer = GuardedBuffer(np.zeros(1000, dtype=np.float32), rng=0)
    buffer.poison(np.random.default_rng(1))
    first = buffer.array.copy()
    buffer.poison(np.random.default_rng(2))
    assert same_bits(first, buffer.array).mean() < 0.01
    assert np.unique(first.view(np.uint8)).size > 200  # not a pattern
    assert buffer.guards_intact() is None


def test_poison_is_regenerated_exactly_from_its_seed():
    like = np.zeros((3, 7), dtype=np.float64)
    buffer = GuardedBuffer(like, rng=0)
    used = buffer.poison_from_seed(99)
    assert same_bits(used, buffer.array).all()
    assert same_bits(poison_array(like, 99), buffer.array).all()  # NaN payloads too
    assert same_bits(buffer.array, poison_bytes(like.nbytes, 99)).all()
    assert not same_bits(poison_array(like, 98), buffer.array).all()
    buffer.poison(poison_bytes(like.nbytes, 5))  # raw bytes
    assert same_bits(buffer.array, poison_array(like, 5)).all()
    buffer.poison(poison_array(like, 6))  # typed
    assert same_bits(buffer.array, poison_array(like, 6)).all()
    with pytest.raises(ValueError, match="does not fit"):
        buffer.poison(np.zeros(5, np.uint8))


def test_poison_and_guards_are_the_same_in_another_process():
    script = ("import hashlib, numpy as np; from pytest_r3.verify import poison_bytes, "
              "guard_bytes; b, a = guard_bytes(4096, [3, 1]); print(hashlib.sha256("
              "poison_bytes(1000, 77).tobytes() + b.tobytes() + a.tobytes()).hexdigest())")
    child = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           check=True)
    before, after = guard_bytes(4096, [3, 1])
    here = hashlib.sha256(poison_bytes(1000, 77).tobytes() + before.tobytes()
                          + after.tobytes()).hexdigest()
    assert child.stdout.strip() == here


# -- integer data -----------------------------------------------------------------------------


def test_perturbed_integers_redraw_data_from_its_own_values():
    values = np.random.default_rng(0).integers(0, 10, 500).astype(np.int32)
    fresh = perturbed(values, np.random.default_rng(1), integers=True)
    assert fresh.dtype == values.dtype and fresh.shape == values.shape
    assert set(np.unique(fresh)) <= set(np.unique(values))  # indices stay in range
    assert (fresh != values).mean() > 0.5
    # order-blind answers change too: a memorised sum or histogram fails
    assert fresh.sum() != values.sum()
    assert not np.array_equal(np.bincount(fresh, minlength=10), np.bincount(values, minlength=10))
    again = perturbed_integers(values, np.random.default_rng(1))
    np.testing.assert_array_equal(fresh, again)


def test_perturbed_permutation_stays_a_permutation():
    order = np.random.default_rng(3).permutation(50).astype(np.int64)
    fresh = perturbed_integers(order, np.random.default_rng(4))
    assert sorted(fresh.tolist()) == list(range(50))
    assert not np.array_equal(fresh, order)
    pair = np.array([7, 2], dtype=np.uint16)
    np.testing.assert_array_equal(perturbed_integers(pair, np.random.default_rng(0)), [2, 7])


def test_perturbed_offsets_stay_valid_offsets():
    """CSR row pointers: sorted, same first and last entry, inside the same range."""
    row_ptr = np.array([0, 3, 3, 7, 12, 15, 20, 26], dtype=np.int32)
    fresh = perturbed_integers(row_ptr, np.random.default_rng(5))
    assert fresh[0] == 0 and fresh[-1] == 26
    assert (np.diff(fresh) >= 0).all()
    assert set(fresh.tolist()) <= set(row_ptr.tolist())
    assert not np.array_equal(fresh, row_ptr)
    falling = row_ptr[::-1].copy()
    fresh = perturbed_integers(falling, np.random.default_rng(5))
    assert fresh[0] == 26 and fresh[-1] == 0 and (np.diff(fresh) <= 0).all()
    extreme = np.array([np.iinfo(np.int64).min, 0, np.iinfo(np.int64).max], dtype=np.int64)
    fresh = perturbed_integers(extreme, np.random.default_rng(0))
    assert (fresh[1:] >= fresh[:-1]).all()  # compared, not subtracted: no overflow


def test_perturbed_integers_keep_what_cannot_change():
    rng = np.random.default_rng(0)
    for values in (np.array([4], np.int32), np.full((3, 3), 2, np.int8), np.zeros(0, np.int64)):
        np.testing.assert_array_equal(perturbed_integers(values, rng), values)
        assert perturbed_integers(values, rng).dtype == values.dtype
    mask = np.array([True, False, False, True, True, False, True, True])
    fresh = perturbed_integers(mask, rng)
    assert fresh.dtype == np.bool_ and not np.array_equal(fresh, mask)
    grid = np.arange(12, dtype=np.uint8).reshape(3, 4)[:, ::-1]
    assert perturbed_integers(grid, rng).shape == (3, 4)


def test_perturbed_leaves_integers_alone_unless_asked():
    values = np.array([5, 1, 5, 2, 2], dtype=np.int32)
    np.testing.assert_array_equal(perturbed(values, np.random.default_rng(0)), values)
    assert not np.array_equal(perturbed(values, np.random.default_rng(0), integers=True),
                              values)


HISTOGRAM_C = """\
void histogram(int n, const int *x, int *bins)
{
    for (int b = 0; b < 8; ++b)
        bins[b] = 0;
    for (int i = 0; i < n; ++i)
        bins[x[i]] += 1;
}
"""


def test_a_memorised_integer_answer_fails_on_perturbed_integers(write_c, unique_name):
    """The cheat writes the recorded histogram without looking at the data."""
    x = np.random.default_rng(0).integers(0, 8, 200).astype(np.int32)
    baseline = r3.kernel(write_c("hist.c", HISTOGRAM_C), entry="histogram",
                         name=unique_name("hist")).build()
    recorded = np.zeros(8, np.int32)
    baseline(200, x, recorded)
    memorised = ", ".join(map(str, recorded))
    cheat = r3.kernel(write_c("cheat.c", f"""\
        void histogram(int n, const int *x, int *bins)
        {{
            static const int answer[8] = {{{memorised}}};
            for (int b = 0; b < 8; ++b)
                bins[b] = answer[b];
        }}
        """), entry="histogram", name=unique_name("cheat")).build()
    out = np.zeros(8, np.int32)
    cheat(200, x, out)
    assert compare("bins", recorded, out, Tolerance()) is None  # passes on the recording

    fresh_x = perturbed(x, np.random.default_rng(1), integers=True)
    guarded = GuardedBuffer(recorded, rng=2)  # the baseline still stays in bounds
    baseline(200, fresh_x, guarded.array)
    assert guarded.guards_intact() is None
    cheat(200, fresh_x, out)
    assert "exact match required" in compare("bins", guarded.array, out, Tolerance())


# -- float scalars -------------------------------------------------------------------------


def test_perturbed_scalar_keeps_sign_dtype_and_scale():
    rng = np.random.default_rng(0)
    for value in (1.5, -2.25, 1e-3, 3e38):
        for _ in range(50):
            fresh = perturbed_scalar(value, "float32", rng)
            assert type(fresh) is float and fresh != value
            assert float(np.float32(fresh)) == fresh  # representable in float32
            assert np.sign(fresh) == np.sign(value) and np.isfinite(fresh)
            assert 0.5 * abs(value) * (1 - 1e-6) <= abs(fresh) <= min(
                1.5 * abs(value) * (1 + 1e-6), float(np.finfo(np.float32).max))
    assert perturbed_scalar(1e-320, "float64", rng) != 1e-320
    assert perturbed_scalar(1.0, "float64", np.random.default_rng(9)) == perturbed_scalar(
        1.0, "float64", np.random.default_rng(9))
    fresh16 = perturbed_scalar(0.1, "float16", rng)
    assert float(np.float16(fresh16)) == fresh16 and fresh16 != 0.1


@pytest.mark.parametrize("value", [0.0, -0.0, float("nan"), float("inf"), -float("inf")])
def test_perturbed_scalar_leaves_special_values(value):
    fresh = perturbed_scalar(value, "float64", np.random.default_rng(0))
    assert fresh == value or (np.isnan(fresh) and np.isnan(value))


def test_perturbed_scalars_change_floats_only():
    params = [{"name": "n", "dtype": "int64", "is_pointer": False, "written": False},
              {"name": "alpha", "dtype": "float32", "is_pointer": False, "written": False},
              {"name": "flag", "dtype": "bool", "is_pointer": False, "written": False},
              {"name": "x", "dtype": "float32", "is_pointer": True, "written": False},
              {"name": "beta", "dtype": "float64", "is_pointer": False, "written": False}]
    scalars = {"n": 100, "alpha": 2.0, "flag": 1, "beta": 0.0}
    fresh = perturbed_scalars(params, scalars, np.random.default_rng(0))
    assert fresh["n"] == 100 and fresh["flag"] == 1 and fresh["beta"] == 0.0
    assert fresh["alpha"] != 2.0 and 1.0 <= fresh["alpha"] <= 3.0
    assert scalars["alpha"] == 2.0  # a copy
    assert fresh == perturbed_scalars(params, scalars, np.random.default_rng(0))


SCALE_C = """\
void scale(long n, float alpha, const float *x, float *y)
{
    for (long i = 0; i < n; ++i)
        y[i] = ALPHA * x[i];
}
"""


def test_a_hard_coded_scalar_fails_on_a_perturbed_scalar(write_c, unique_name):
    baseline = r3.kernel(write_c("scale.c", SCALE_C.replace("ALPHA", "alpha")),
                         entry="scale", name=unique_name("scale")).build()
    cheat = r3.kernel(write_c("cheat.c", SCALE_C.replace("ALPHA", "1.5f")),
                      entry="scale", name=unique_name("cheat")).build()
    params = [{"name": "n", "dtype": "int64", "is_pointer": False, "written": False},
              {"name": "alpha", "dtype": "float32", "is_pointer": False, "written": False}]
    x = np.random.default_rng(0).standard_normal(64).astype(np.float32)
    expected, actual = np.zeros(64, np.float32), np.zeros(64, np.float32)
    baseline(64, 1.5, x, expected)
    cheat(64, 1.5, x, actual)
    assert compare("y", expected, actual, Tolerance()) is None  # passes on the recording

    fresh = perturbed_scalars(params, {"n": 64, "alpha": 1.5}, np.random.default_rng(1))
    assert fresh["n"] == 64
    baseline(64, fresh["alpha"], x, expected)
    cheat(64, fresh["alpha"], x, actual)
    assert "differs beyond" in compare("y", expected, actual, Tolerance())


# -- derived sizes ------------------------------------------------------------------------------


def _params(*specs):
    return [{"name": n, "dtype": d, "is_pointer": p, "written": False, "ctype": ""}
            for n, d, p in specs]


def test_derived_sizes_shrink_sizes_within_the_buffers():
    params = _params(("n", "int64", False), ("a", "float32", False), ("x", "float32", True),
                     ("y", "float32", True))
    inputs = {"x": np.zeros(100, np.float32), "y": np.zeros(100, np.float32)}
    cases = derived_sizes(params, {"n": 100, "a": 2.0}, inputs)
    assert cases == [{"n": 99, "a": 2.0}, {"n": 97, "a": 2.0}]  # n + 3 does not fit
    # buffers larger than the problem: n + 3 too
    inputs = {"x": np.zeros(128, np.float32), "y": np.zeros(200, np.float32)}
    assert [c["n"] for c in derived_sizes(params, {"n": 100, "a": 2.0}, inputs)] == [99, 97, 103]


def test_derived_sizes_vary_every_size_together():
    params = _params(("m", "int32", False), ("n", "int32", False), ("lda", "int32", False),
                     ("a", "float64", True), ("out", "float64", True))
    inputs = {"a": np.zeros((6, 40)), "out": np.zeros(6)}
    cases = derived_sizes(params, {"m": 6, "n": 40, "lda": 40}, inputs)
    assert cases == [{"m": 5, "n": 39, "lda": 39}, {"m": 3, "n": 37, "lda": 37}]
    # 2 - 3 < 1: m keeps its value in that case
    cases = derived_sizes(params, {"m": 2, "n": 40, "lda": 40},
                          {"a": np.zeros((2, 40)), "out": np.zeros(2)})
    assert cases == [{"m": 1, "n": 39, "lda": 39}, {"m": 2, "n": 37, "lda": 37}]
    # +3 only when the product of the new sizes fits the smallest buffer
    cases = derived_sizes(params[:2] + params[3:], {"m": 4, "n": 5},
                          {"a": np.zeros(100), "out": np.zeros(40)})
    assert cases == [{"m": 3, "n": 4}, {"m": 1, "n": 2}]  # 7 * 8 > 40: no +3
    cases = derived_sizes(params[:2] + params[3:], {"m": 4, "n": 5},
                          {"a": np.zeros(100), "out": np.zeros(60)})
    assert cases[-1] == {"m": 7, "n": 8}


def test_derived_sizes_leave_non_sizes_alone():
    params = _params(("n", "int32", False), ("seed", "uint64", False), ("one", "int32", False),
                     ("flag", "bool", False), ("t", "float32", False), ("x", "int8", True))
    scalars = {"n": 2, "seed": 123456789, "one": 1, "flag": 1, "t": 50.0}
    cases = derived_sizes(params, scalars, {"x": np.zeros(16, np.int8)})
    assert cases == [{**scalars, "n": 1}, {**scalars, "n": 5}]
    assert derived_sizes(params, {**scalars, "n": 1}, {"x": np.zeros(16, np.int8)}) == []
    assert derived_sizes(params[:1], {"n": 5}, {}) == []  # no buffer to judge sizes by
    assert derived_sizes(params, scalars, {"x": np.zeros(16, np.int8)}) == cases


TWICE_C = """\
void twice(long n, const float *x, float *out)
{
    for (long i = 0; i < n; ++i)
        out[i] = 2.0f * x[i];
}
"""

# blocks of 8 and no remainder loop: LOOP_TEST rounds n down (i + 8 <= n) or up (i < n)
NO_REMAINDER_C = """\
void twice(long n, const float *x, float *out)
{
    for (long i = 0; LOOP_TEST; i += 8)
        for (int j = 0; j < 8; ++j)
            out[i + j] = 2.0f * x[i + j];
}
"""


def _run(launcher, n, x, like, poison_seed, guard_seed):
    buffer = GuardedBuffer(like, rng=guard_seed)
    poison = buffer.poison_from_seed(poison_seed)
    launcher(n, x, buffer.array)
    return buffer.array.copy(), poison, buffer.guards_intact()


def test_a_kernel_without_a_remainder_loop_fails_at_derived_sizes(write_c, unique_name):
    """Recorded at n = 64, a multiple of 8; the derived sizes expose both shortcuts."""
    baseline = r3.kernel(write_c("twice.c", TWICE_C), entry="twice",
                         name=unique_name("twice")).build()
    rounds_down = r3.kernel(write_c("down.c", NO_REMAINDER_C.replace("LOOP_TEST", "i + 8 <= n")),
                            entry="twice", name=unique_name("down")).build()
    rounds_up = r3.kernel(write_c("up.c", NO_REMAINDER_C.replace("LOOP_TEST", "i < n")),
                          entry="twice", name=unique_name("up")).build()
    x = np.random.default_rng(0).standard_normal(64).astype(np.float32)
    like = np.zeros(64, np.float32)
    params = [{"name": "n", "dtype": "int64", "is_pointer": False, "written": False},
              {"name": "x", "dtype": "float32", "is_pointer": True, "written": False},
              {"name": "out", "dtype": "float32", "is_pointer": True, "written": True}]
    cases = derived_sizes(params, {"n": 64}, {"x": x, "out": like})
    assert [c["n"] for c in cases] == [63, 61]

    problems = {"down": [], "up": []}
    for scalars in [{"n": 64}] + cases:
        n = scalars["n"]
        out_a, poison_a, _ = _run(baseline, n, x, like, 1, 10)
        out_b, poison_b, _ = _run(baseline, n, x, like, 2, 11)
        mask = write_mask(out_a, poison_a, out_b, poison_b)
        assert mask.problem("out") is None
        assert int(mask.written.sum()) == n and mask.complete == (n == 64)
        for name, cheat in (("down", rounds_down), ("up", rounds_up)):
            actual, poison, guards = _run(cheat, n, x, like, 3, 12)
            assert guards is None  # the writes stay inside the 64-element buffer
            problems[name].append(compare_masked("out", out_a, actual, mask, poison,
                                                 Tolerance()))
    assert problems["down"][0] is None and problems["up"][0] is None  # fine when recorded
    for problem in problems["down"][1:]:
        assert "differs beyond" in problem and "still hold the poison (never written)" in problem
    assert problems["up"][1].startswith("out: wrote element [63] that the baseline leaves "
                                        "untouched")
    assert "wrote element [61] that the baseline leaves untouched" in problems["up"][2]


# -- element masks ------------------------------------------------------------------------------


def _two_runs(written_values, written, like, seeds=(1, 2)):
    """What a baseline writing ``written_values`` at ``written`` leaves under two poisons."""
    outs, poisons = [], []
    for seed in seeds:
        poison = poison_array(like, seed)
        out = poison.copy()
        out[written] = written_values[written]
        outs.append(out)
        poisons.append(poison)
    return outs[0], poisons[0], outs[1], poisons[1]


def test_write_mask_tells_written_from_untouched():
    values = np.arange(10, dtype=np.float64)
    written = np.zeros(10, bool)
    written[:7] = True
    mask = write_mask(*_two_runs(values, written, values))
    assert isinstance(mask, WriteMask)
    np.testing.assert_array_equal(mask.written, written)
    np.testing.assert_array_equal(mask.untouched, ~written)
    assert not mask.undetermined.any() and not mask.inconsistent.any()
    assert mask.problem("c") is None and not mask.complete
    # raw poison bytes work as well as typed poison
    out_a, poison_a, out_b, poison_b = _two_runs(values, written, values)
    again = write_mask(out_a, poison_a.view(np.uint8).reshape(-1), out_b,
                       poison_b.view(np.uint8).reshape(-1))
    np.testing.assert_array_equal(again.written, written)


def test_write_mask_handles_nan_results_and_coinciding_poison():
    values = np.array([np.nan, 1.0, 2.0, 3.0], dtype=np.float32)
    like = values
    out_a, poison_a, out_b, poison_b = _two_runs(values, np.array([True, True, False, False]),
                                                 like)
    poison_b[3] = poison_a[3]  # the poisons happen to agree on element 3
    out_b[3] = poison_b[3]
    mask = write_mask(out_a, poison_a, out_b, poison_b)
    assert mask.written.tolist() == [True, True, False, False]  # NaN written in both runs
    assert mask.untouched.tolist() == [False, False, True, False]
    assert mask.undetermined.tolist() == [False, False, False, True]


def test_write_mask_flags_a_baseline_that_reads_its_output():
    like = np.zeros(6, np.int32)
    poison_a, poison_b = poison_array(like, 1), poison_array(like, 2)
    out_a, out_b = poison_a + 1, poison_b + 1  # accumulates into the poisoned buffer
    mask = write_mask(out_a, poison_a, out_b, poison_b)
    assert mask.inconsistent.all()
    assert "depend on the buffer's content before the launch" in mask.problem("acc")


def test_compare_masked_checks_both_parts():
    expected_values = np.linspace(1, 2, 12, dtype=np.float32)
    written = np.arange(12) < 9
    out_a, poison_a, out_b, poison_b = _two_runs(expected_values, written, expected_values)
    mask = write_mask(out_a, poison_a, out_b, poison_b)
    poison = poison_array(expected_values, 3)
    good = poison.copy()
    good[:9] = expected_values[:9] * np.float32(1 + 1e-7)
    assert compare_masked("y", out_a, good, mask, poison, Tolerance()) is None
    assert compare_masked("y", out_a, good, written, poison, Tolerance()) is None
    assert compare_masked("y", out_a, good, mask, poison.view(np.uint8), Tolerance()) is None
    # a norm bound covers only the written part, not the baseline's leftover poison
    assert compare_masked("y", out_a, good, mask, poison, Tolerance(norm=1e-6)) is None

    skipped = good.copy()
    skipped[8] = poison[8]
    problem = compare_masked("y", out_a, skipped, mask, poison, Tolerance())
    assert problem.startswith("y: 1 of 12 element(s)") and "[8]" in problem
    assert "1 element(s) the baseline writes still hold the poison" in problem

    stray = good.copy()
    stray[10] = 0.0
    assert compare_masked("y", out_a, stray, mask, poison, Tolerance()) == (
        "y: wrote element [10] that the baseline leaves untouched (1 such element(s); the "
        "baseline writes 9 of 12 for this problem)")
    # writing back the value the baseline's own poison held does not help
    stray[10] = out_a[10]
    assert "wrote element [10]" in compare_masked("y", out_a, stray, mask, poison, Tolerance())
    assert "shape" in compare_masked("y", out_a, good[:4], mask, poison, Tolerance())


def test_compare_masked_with_everything_written_is_compare():
    expected = np.arange(6, dtype=np.int64).reshape(2, 3)
    mask = write_mask(expected, poison_array(expected, 1), expected, poison_array(expected, 2))
    assert mask.complete
    actual = expected.copy()
    actual[1, 2] += 1
    assert compare_masked("k", expected, actual, mask, poison_array(expected, 3),
                          Tolerance()) == compare("k", expected, actual, Tolerance())


def test_compare_masked_skips_undetermined_elements():
    expected = np.array([5, 6, 7, 8], dtype=np.uint8)
    mask = WriteMask(np.array([True, True, False, False]), np.array([False, False, True, False]),
                     np.array([False, False, False, True]), np.zeros(4, bool))
    poison = np.array([1, 2, 3, 4], dtype=np.uint8)
    actual = np.array([5, 6, 3, 99], dtype=np.uint8)
    assert compare_masked("b", expected, actual, mask, poison, Tolerance()) is None
