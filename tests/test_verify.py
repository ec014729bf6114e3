"""Deciding whether outputs match: tolerances, NaN/Inf rules, norm mode, fresh inputs and
derived problems (integer data, float scalars, sizes). Guards and poison: test_buffers.py."""

from __future__ import annotations

import numpy as np
import pytest

import pytest_r3 as r3
from pytest_r3.errors import DeclarationError
from pytest_r3.replay.buffers import GuardedBuffer, check_guards, poison_for
from pytest_r3.replay.verify import (
    Tolerance,
    compare,
    derived_sizes,
    parse_tolerances,
    perturbed,
    perturbed_integers,
    perturbed_scalar,
    perturbed_scalars,
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
    guarded = GuardedBuffer(recorded, 2)  # the baseline still stays in bounds
    baseline(200, fresh_x, guarded.array)
    assert check_guards(guarded.storage, recorded, 2) is None
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
    """One run as the replay makes it: the output in a guarded buffer filled with poison."""
    buffer = GuardedBuffer(like, guard_seed)
    buffer.fill(None, poison_seed)
    launcher(n, x, buffer.array)
    return buffer.array.copy(), check_guards(buffer.storage, like, guard_seed)


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
        # what the baseline writes shows from two runs with different poison (as the judge does)
        out_a, guards_a = _run(baseline, n, x, like, 1, 10)
        out_b, guards_b = _run(baseline, n, x, like, 2, 11)
        assert guards_a is None and guards_b is None
        written = out_a.view(np.uint32) == out_b.view(np.uint32)
        assert int(written.sum()) == n and written[:n].all()
        for name, cheat in (("down", rounds_down), ("up", rounds_up)):
            actual, guards = _run(cheat, n, x, like, 3, 12)
            assert guards is None  # the writes stay inside the 64-element buffer
            expected = np.where(written, out_a, poison_for(like, 3))  # elsewhere: its poison
            problems[name].append(compare("out", expected, actual, Tolerance()))
    assert problems["down"][0] is None and problems["up"][0] is None  # fine when recorded
    for problem in problems["down"][1:]:  # elements 56.. never written: still poison
        assert problem is not None and "first at [56]" in problem
    # elements past n written: they should still hold the poison
    assert problems["up"][1].startswith("out: 1 of 64 element(s)")
    assert "first at [63]" in problems["up"][1]
    assert problems["up"][2].startswith("out: 3 of 64 element(s)")
    assert "first at [61]" in problems["up"][2]


def test_perturbing_garbage_values_prints_no_numpy_warning():
    """An output buffer a test allocated with np.empty records whatever bytes it held
    (1e200 as float64): perturbing them must not print "overflow encountered in square"
    (numpy's variance of them overflows) in the middle of a tuning run."""
    import warnings

    from pytest_r3.replay.verify import perturbed

    garbage = np.array([1e200, -3e250, 1.0, np.nan, 2.0] * 20)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fresh = perturbed(garbage, np.random.default_rng(0))
    assert fresh.shape == garbage.shape and np.isnan(fresh[3])

