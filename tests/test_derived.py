"""Inputs the recordings never hold (replay/derived.py), partial overlaps replayed as
recorded (replay/cases.py), and what a rewrite assumes of its callers (replay/contract.py).
The adversarial suite (test_adversarial.py) shows each against a real replay server."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

import numpy as np
import pytest

import pytest_r3 as r3
from pytest_r3.backends import get_backend
from pytest_r3.errors import DeclarationError
from pytest_r3.llm.patch import write_patch
from pytest_r3.record.store import RecordingStore, capture
from pytest_r3.replay import Candidate, KernelSpec, ReplayServer, ReplaySettings
from pytest_r3.replay.cases import Slot, slots_of
from pytest_r3.replay.compile import CandidateCompiler
from pytest_r3.replay.contract import assumptions, parameters
from pytest_r3.replay.derived import NEAR, SMALL_SIZES, Extent, infer_extents, plan


@dataclass
class Planned:
    label: str
    scalars: dict
    slots: list[Slot]


AXPY = [{"name": "n", "dtype": "int64", "is_pointer": False, "written": False},
        {"name": "a", "dtype": "float32", "is_pointer": False, "written": False},
        {"name": "x", "dtype": "float32", "is_pointer": True, "written": False},
        {"name": "y", "dtype": "float32", "is_pointer": True, "written": True}]


def _axpy(n: int, a: float = 2.0, extra: int = 0) -> Planned:
    rng = np.random.default_rng(n)
    return Planned(f"recording n={n}", {"n": n, "a": a}, [
        Slot(["x"], False, rng.standard_normal(n + extra).astype(np.float32)),
        Slot(["y"], True, rng.standard_normal(n + extra).astype(np.float32))])


def _labelled(derived, words: str):
    return [d for d in derived if words in d.label]


# -- extents and sizes ------------------------------------------------------------------------


def test_a_linear_extent_is_inferred_from_several_recordings():
    assert infer_extents([_axpy(1000), _axpy(37)], AXPY)["x"] == Extent(("n",))
    assert infer_extents([_axpy(1000, extra=1), _axpy(37, extra=1)], AXPY)["y"] == \
        Extent(("n + 1",))
    doubled = [Planned(c.label, c.scalars, [Slot(["x"], False, np.zeros(2 * c.scalars["n"] + 3,
                                                                     np.float32)), c.slots[1]])
               for c in (_axpy(100), _axpy(10))]
    assert infer_extents(doubled, AXPY)["x"] == Extent(("2 * n + 3",))
    assert Extent(("2 * n + 3",)).shape({"n": 5}) == (13,)


def test_no_extent_where_the_recordings_disagree_with_any_relation():
    odd = Planned("odd", {"n": 50, "a": 1.0}, [Slot(["x"], False, np.zeros(77, np.float32)),
                                               Slot(["y"], True, np.zeros(50, np.float32))])
    extents = infer_extents([_axpy(1000), _axpy(37), odd], AXPY)
    assert "x" not in extents and extents["y"] == Extent(("n",))


def test_each_axis_of_a_matrix_follows_its_own_argument():
    params = [{"name": "rows", "dtype": "int32", "is_pointer": False, "written": False},
              {"name": "cols", "dtype": "int32", "is_pointer": False, "written": False},
              {"name": "grid", "dtype": "float32", "is_pointer": True, "written": True}]
    cases = [Planned(f"{r}x{c}", {"rows": r, "cols": c}, [Slot(["grid"], True,
                                                             np.zeros((r, c), np.float32))])
             for r, c in ((256, 300), (10, 37))]
    assert infer_extents(cases, params)["grid"] == Extent(("rows", "cols"))


def test_an_axis_equal_to_an_argument_is_read_as_that_argument():
    """matmul's ``a`` (m x k) recorded at (40, 24, 56) and (16, 16, 16): ``5 * n - 64`` fits
    its columns too (n comes first), and a case with n alone made small (17) then gave
    ``a`` 21 columns where the kernel reads 56: a correct rewrite was refused."""
    params = [{"name": name, "dtype": "int32", "is_pointer": False, "written": False}
              for name in ("m", "n", "k")]
    params.append({"name": "a", "dtype": "float32", "is_pointer": True, "written": False})
    cases = [Planned(f"{m}x{k}", {"m": m, "n": n, "k": k},
                     [Slot(["a"], False, np.zeros((m, k), np.float32))])
             for m, n, k in ((40, 24, 56), (16, 16, 16))]
    assert infer_extents(cases, params)["a"] == Extent(("m", "k"))


def test_c_array_bounds_give_the_extent_of_a_matrix():
    """Small sizes cut the matrix; a size above it is planned only where its buffers stay
    within ABOVE_COST times the largest recording's (4 columns grown by 17: too many)."""
    params = [{"name": "ni", "dtype": "int32", "is_pointer": False, "written": False},
              {"name": "nj", "dtype": "int32", "is_pointer": False, "written": False},
              {"name": "C", "dtype": "float64", "is_pointer": True, "written": True,
               "dims": ["ni", "nj"]}]
    case = Planned("c", {"ni": 200, "nj": 4}, [Slot(["C"], True, np.ones((200, 4)))])
    extents = infer_extents([case], params)
    assert extents["C"].shape({"ni": 2, "nj": 3}) == (2, 3)
    small = _labelled(plan([case], params, np.random.default_rng(0)), "small size")
    assert [d.slots[0].values.shape for d in small] == [
        (1, 1), (2, 2), (3, 3), (5, 4), (8, 4), (17, 4)]
    assert not _labelled(plan([case], params, np.random.default_rng(0)), "above the largest")
    case = Planned("c", {"ni": 200, "nj": 100}, [Slot(["C"], True, np.ones((200, 100)))])
    above = _labelled(plan([case], params, np.random.default_rng(0)), "above the largest")
    (ni, nj), = [(d.scalars["ni"], d.scalars["nj"]) for d in above]
    assert ni > 200 + 16 and nj > 100 + 16 and above[0].slots[0].values.shape == (ni, nj)


def test_small_sizes_cut_the_buffers_to_their_extents():
    small = _labelled(plan([_axpy(1000), _axpy(37)], AXPY, np.random.default_rng(0)),
                      "small size")
    assert [d.scalars["n"] for d in small] == [s for s in SMALL_SIZES if s <= 37]
    for case in small:
        n = case.scalars["n"]
        assert [s.values.size for s in case.slots] == [n, n]
        assert np.array_equal(case.slots[0].values, _axpy(37).slots[0].values[:n])


def test_a_size_above_the_largest_recording_has_inputs_drawn_like_the_recorded():
    cases = [_axpy(1000), _axpy(37)]
    above, = _labelled(plan(cases, AXPY, np.random.default_rng(0)), "above the largest")
    n = above.scalars["n"]
    assert 1000 + 17 <= n <= 1000 + 17 + 250 and above.scalars["a"] == 2.0
    x = above.slots[0].values
    assert x.size == n and np.array_equal(x[:1000], cases[0].slots[0].values)
    assert abs(float(x[1000:].std()) - float(cases[0].slots[0].values.std())) < 0.3
    again, = _labelled(plan(cases, AXPY, np.random.default_rng(0)), "above the largest")
    assert again.scalars == above.scalars  # the same seed plans the same cases


def test_a_size_between_two_recordings_is_drawn_away_from_both():
    """Uniformly over the sizes more than NEAR from every recording, inputs cut from the
    smallest recording that holds them; drawn by the generator it is given (the judge's
    is seeded per server)."""
    cases = [_axpy(1000), _axpy(37)]
    drawn = set()
    for seed in range(40):
        between, = _labelled(plan(cases, AXPY, np.random.default_rng(0),
                                  sizes_rng=np.random.default_rng(seed)), "between recordings")
        n = between.scalars["n"]
        assert 37 + NEAR < n < 1000 - NEAR and between.scalars["a"] == 2.0
        x, y = (slot.values for slot in between.slots)
        assert x.size == y.size == n and np.array_equal(x, cases[0].slots[0].values[:n])
        drawn.add(n)
    assert len(drawn) > 30 and max(drawn) - min(drawn) > 500  # spread over the whole gap


def test_no_size_between_recordings_without_a_gap_or_an_extent():
    assert not _labelled(plan([_axpy(37)], AXPY, np.random.default_rng(0)), "between")
    assert not _labelled(plan([_axpy(40), _axpy(37)], AXPY, np.random.default_rng(0)),
                         "between")  # nothing more than NEAR from both
    odd = Planned("odd", {"n": 500, "a": 1.0}, [Slot(["x"], False, np.zeros(77, np.float32)),
                                                Slot(["y"], True, np.zeros(500, np.float32))])
    assert not _labelled(plan([_axpy(1000), _axpy(37), odd], AXPY, np.random.default_rng(0)),
                         "between")


def test_c_array_bounds_give_a_size_between_recordings_per_argument():
    params = [{"name": "ni", "dtype": "int32", "is_pointer": False, "written": False},
              {"name": "nj", "dtype": "int32", "is_pointer": False, "written": False},
              {"name": "C", "dtype": "float64", "is_pointer": True, "written": True,
               "dims": ["ni", "nj"]}]
    cases = [Planned(f"{ni}x{nj}", {"ni": ni, "nj": nj}, [Slot(["C"], True, np.ones((ni, nj)))])
             for ni, nj in ((128, 9), (33, 9))]
    between, = _labelled(plan(cases, params, np.random.default_rng(0)), "between recordings")
    ni = between.scalars["ni"]
    assert 33 + NEAR < ni < 128 - NEAR and between.scalars["nj"] == 9
    assert between.slots[0].values.shape == (ni, 9)


def test_an_empty_launch_alone_derives_nothing_from_nothing():
    derived = plan([_axpy(0)], AXPY, np.random.default_rng(0))
    assert not _labelled(derived, "above the largest") and not _labelled(derived, "small")
    scalars_only = [p for p in AXPY if not p["is_pointer"]]
    derived = plan([Planned("no buffers", {"n": 3, "a": 2.0}, [])], scalars_only,
                   np.random.default_rng(0))
    assert [d.label for d in derived] == [
        f"no buffers with its float scalars negated (a={derived[0].scalars['a']!r})",
        "no buffers with the float scalar a NaN", "no buffers with the float scalar a infinite",
        "no buffers with the float scalar a made -0.0",
        f"no buffers with the float scalar a made subnormal ({derived[-1].scalars['a']:.3g})"]


def test_no_size_above_the_recordings_where_an_extent_is_unknown():
    odd = Planned("odd", {"n": 50, "a": 1.0}, [Slot(["x"], False, np.zeros(77, np.float32)),
                                               Slot(["y"], True, np.zeros(50, np.float32))])
    derived = plan([_axpy(1000), _axpy(37), odd], AXPY, np.random.default_rng(0))
    assert not _labelled(derived, "above the largest")
    assert _labelled(derived, "small size")  # x keeps its recorded buffer there


# -- scalars and integer data -----------------------------------------------------------------


def test_float_scalars_are_negated_and_a_recorded_zero_made_nonzero():
    params = AXPY[:2] + [{"name": "b", "dtype": "float32", "is_pointer": False,
                          "written": False}] + AXPY[2:]
    case = _axpy(37, a=1.5)
    case.scalars["b"] = 0.0
    derived = plan([case], params, np.random.default_rng(0))
    negated, = _labelled(derived, "negated")
    assert negated.scalars["a"] < 0 and negated.scalars["b"] == 0.0
    nonzero, = _labelled(derived, "zero made nonzero")
    assert nonzero.scalars["a"] == 1.5 and nonzero.scalars["b"] != 0.0
    assert np.float32(nonzero.scalars["b"]) == nonzero.scalars["b"]  # a float32 value


def test_an_integer_scalar_of_one_is_changed_with_the_sizes_halved():
    params = AXPY[:1] + [{"name": "inc", "dtype": "int64", "is_pointer": False,
                          "written": False}] + AXPY[2:]
    cases = [Planned(c.label, {"n": c.scalars["n"], "inc": 1}, c.slots)
             for c in (_axpy(500), _axpy(61))]
    changed, = _labelled(plan(cases, params, np.random.default_rng(0)), "integer scalar inc")
    assert changed.scalars == {"n": 31, "inc": 2}


def test_integer_data_is_drawn_over_its_range_but_indices_keep_theirs():
    params = [{"name": "n", "dtype": "int64", "is_pointer": False, "written": False},
              {"name": "x", "dtype": "int32", "is_pointer": True, "written": False},
              {"name": "index", "dtype": "int32", "is_pointer": True, "written": False},
              {"name": "out", "dtype": "int32", "is_pointer": True, "written": True}]
    rng = np.random.default_rng(1)
    case = Planned("ints", {"n": 37}, [
        Slot(["x"], False, rng.integers(-50, 51, 37).astype(np.int32)),
        Slot(["index"], False, rng.integers(0, 37, 37).astype(np.int32)),
        Slot(["out"], True, np.zeros(37, np.int32))])
    wide, = _labelled(plan([case], params, np.random.default_rng(0)), "integer data over")
    x = wide.slots[0].values.astype(np.int64)
    assert np.abs(x).max() > 2 ** 24 and np.abs(x).max() <= (2 ** 31 - 1) // 37
    assert np.abs(x.sum()) < 2 ** 31  # a sum over the whole array stays defined
    assert wide.slots[1] is case.slots[1]  # looks like indices: kept


# -- in place and overlaps -------------------------------------------------------------------


def test_each_input_and_output_of_one_shape_are_tried_in_place_beside_a_twin():
    derived = plan([_axpy(37)], AXPY, np.random.default_rng(0))
    in_place, = [d for d in derived if d.in_place and not d.offset]
    assert in_place.in_place == ("x", "y") and in_place.twin.origin == "twin"
    shared, = in_place.slots
    assert shared.params == ["y", "x"] and shared.written
    x, y = in_place.twin.slots
    assert np.array_equal(x.values, y.values) and x.values is not y.values
    assert np.array_equal(shared.values, x.values)
    assert not np.array_equal(x.values, _axpy(37).slots[0].values)  # perturbed
    assert not [d for d in plan([_axpy(37)], AXPY, np.random.default_rng(0), no_alias=True)
                if d.in_place or d.origin == "twin"]


def test_in_place_calls_at_offsets_are_two_views_of_one_buffer_beside_a_twin():
    """x and y as views of one buffer, y starting 1 (then a drawn 2..16) elements before x,
    then after it: the twin holds exactly what each view holds, apart."""
    derived = plan([_axpy(37)], AXPY, np.random.default_rng(0))
    shifted = [d for d in derived if d.offset]
    assert {d.offset for d in shifted} >= {1} and len(shifted) == 4
    for case in shifted:
        shared, = case.slots
        assert shared.values.size == 37 + case.offset
        x, y = case.twin.slots
        for name, apart in (("x", x), ("y", y)):
            assert np.array_equal(shared.view_of(shared.values, name), apart.values)
        assert sorted(offset for offset, _ in shared.views.values()) == [0, case.offset]


def test_negative_zeros_and_subnormals_in_float_scalars_and_inputs():
    """Each float scalar made -0.0, then a subnormal; every read-only float input with
    both; kept like any derived case (not only where the baseline propagates them)."""
    derived = plan([_axpy(37)], AXPY, np.random.default_rng(0))
    zero, = _labelled(derived, "scalar a made -0.0")
    assert zero.scalars["a"] == 0 and np.signbit(zero.scalars["a"]) and not zero.specials
    tiny, = _labelled(derived, "scalar a made subnormal")
    normal = float(np.finfo(np.float32).smallest_normal)
    assert 0 < tiny.scalars["a"] < normal and np.float32(tiny.scalars["a"]) == tiny.scalars["a"]
    data, = _labelled(derived, "negative zeros and subnormal values in x")
    x, y = (slot.values for slot in data.slots)
    assert ((x == 0) & np.signbit(x)).sum() >= 1
    subnormal = (x != 0) & (np.abs(x) < normal)
    assert subnormal.sum() >= 1 and np.array_equal(y, _axpy(37).slots[1].values)
    kept = ~((x == 0) | subnormal)
    assert np.array_equal(x[kept], _axpy(37).slots[0].values[kept]) and not data.specials


def test_special_values_and_sizes_below_one_are_derived():
    """NaN and infinite float scalars, zeros beside infinities (then NaNs) in the float
    inputs, a negative and a zero size: each marked so the judge keeps a special-value
    case only where the baseline propagates it."""
    derived = plan([_axpy(37)], AXPY, np.random.default_rng(0))
    nan, inf = (_labelled(derived, f"scalar a {word}")[0] for word in ("NaN", "infinite"))
    assert np.isnan(nan.scalars["a"]) and np.isinf(inf.scalars["a"]) and nan.specials
    data = _labelled(derived, "zeros and infinities")[0]
    x = data.slots[0].values
    assert data.specials and np.isinf(x).sum() >= 1 and (x == 0).sum() >= 1
    assert np.isnan(_labelled(derived, "zeros and NaNs")[0].slots[0].values).sum() >= 1
    assert _labelled(derived, "negative size")[0].scalars["n"] == -37
    assert _labelled(derived, "size zero")[0].scalars["n"] == 0


def test_nans_then_infinities_are_put_in_every_written_float_buffer():
    """The accumulator y of an axpy holds NaNs, or infinities of both signs, alternating up
    a ladder of densities; x stays as recorded; the judge keeps each only where the
    baseline carries them on (``specials``). Every other rung has them at y's first and
    last element too, the others keep y's ends finite: a rewrite that resets them only
    while y's ends are finite is wrong on one of them."""
    recorded = _axpy(200)
    for seed in range(12):
        derived = plan([recorded], AXPY, np.random.default_rng(seed))
        cases = _labelled(derived, "in y, which it writes")
        words = {"NaNs" in case.label for case in cases}
        assert len(cases) >= 2 and words == {True, False}, "NaNs and infinities both"
        ends = []
        for case in cases:
            special = np.isnan if "NaNs" in case.label else np.isinf
            x, y = (slot.values for slot in case.slots)
            assert case.specials and np.array_equal(x, recorded.slots[0].values)
            assert 1 <= special(y).sum() <= y.size // 2 + 2
            kept = ~special(y)
            assert np.array_equal(y[kept], recorded.slots[1].values[kept])
            ends.append(bool(special(y[0]) and special(y[-1])))
            if not ends[-1]:
                assert not special(y[0]) and not special(y[-1])
        assert set(ends) == {False, True}, "cases with special ends, and without"


def test_special_value_densities_leave_no_band_unseen():
    """The counts of special values climb from about one element to half of them, each
    rung at most RATIO above the one below, at a phase drawn per server: a rewrite that
    drops NaNs only when 2 to 8% of y holds them (a band as wide as RATIO) meets a rung
    there on every draw; the lowest rungs differ between draws."""
    from pytest_r3.replay import specials

    lowest = set()
    for seed in range(40):
        counts = specials.ladder(1000, np.random.default_rng(seed))
        assert counts[0] <= specials.RATIO and counts[-1] <= 500 < counts[-1] * specials.RATIO
        assert all(b <= a * specials.RATIO + 1 for a, b in zip(counts, counts[1:]))
        assert any(20 <= count <= 20 * specials.RATIO for count in counts)
        lowest.add(counts[1])
    assert len(lowest) > 3, "the ladder's phase is drawn"
    derived = plan([_axpy(100), _axpy(1000)], AXPY, np.random.default_rng(1))
    large = [c for c in _labelled(derived, "in y, which it writes") if "n=1000" in c.label]
    assert large, "the largest recording gets special values too (a rewrite gated on size)"


def test_a_zero_scalar_is_combined_with_infinities_and_nans_in_the_inputs():
    """``if (a == 0) return;`` agrees with ``0 * x + y`` wherever x is finite: a case sets a
    to 0 or -0 with infinities and NaNs in x, kept where the baseline carries them on."""
    recorded = _axpy(200)
    signs = set()
    for seed in range(8):
        derived = plan([recorded], AXPY, np.random.default_rng(seed))
        case, = _labelled(derived, "infinities and NaNs in x and the float scalar a at")
        x, y = (slot.values for slot in case.slots)
        assert case.specials and case.scalars["a"] == 0
        assert np.isnan(x).sum() == 1 and (x == np.inf).sum() == 1 and (x == -np.inf).sum() == 1
        assert np.array_equal(y, recorded.slots[1].values)
        signs.add(bool(np.signbit(case.scalars["a"])))
    assert signs == {False, True}


BORDER = """
#ifndef BLOCK
#define BLOCK 0
#endif
void border(int rows, int cols, const float *in, float *out)
{
    for (int j = 0; j < cols; ++j) {  /* first and last rows, indexed from rows and cols */
        out[j] = in[j];
        out[(rows - 1) * cols + j] = in[(rows - 1) * cols + j];
    }
    const int step = BLOCK ? BLOCK : rows;
    for (int b = 1; b < rows - 1; b += step)
        for (int i = b; i < rows - 1 && i < b + step; ++i)
            for (int j = 0; j < cols; ++j)
                out[i * cols + j] = 0.5f * in[i * cols + j];
}
"""


def test_a_kernel_sized_by_two_arguments_is_judged_right_at_derived_sizes(tmp_path):
    """Negating one of two sizes makes the baseline itself index before its buffers
    (``(rows - 1) * cols`` with rows < 0): that case must be dropped, not kept to crash or
    fail the baseline and every correct variant (the example project's jacobi2d did).
    Sizes below one are kept only where the baseline writes nothing there."""
    kernel = r3.kernel(BORDER, entry="border", name="derived_border", tune={"BLOCK": [0, 8]})
    store = RecordingStore(tmp_path / "recordings")
    rng = np.random.default_rng(3)
    recordings = []
    for rows, cols in ((64, 64), (10, 37), (120, 90)):
        args = (rows, cols, rng.standard_normal((rows, cols)).astype(np.float32),
                np.zeros((rows, cols), np.float32))
        recordings.append(capture(kernel, args, lambda a=args: kernel(*a), "test::b")[1])
    keys = store.save(kernel.name, recordings, cap_bytes=1 << 26)["kept"]
    settings = ReplaySettings(run_timeout=2.0, timing_rounds=3, warmup_rounds=1,
                              min_sample_seconds=1e-4)
    with ReplayServer(KernelSpec.from_kernel(kernel), store.root, keys, settings) as server:
        for macros in ({}, {"BLOCK": 8}):
            result = server.evaluate(Candidate(macros=macros))
            assert result.status in ("ok", "too_busy"), result.summary()


def test_several_size_arguments_are_negated_together_and_kept_only_if_nothing_is_written():
    params = [{"name": "rows", "dtype": "int32", "is_pointer": False, "written": False},
              {"name": "cols", "dtype": "int32", "is_pointer": False, "written": False},
              {"name": "grid", "dtype": "float32", "is_pointer": True, "written": True}]
    case = Planned("g", {"rows": 20, "cols": 30}, [Slot(["grid"], True,
                                                        np.ones((20, 30), np.float32))])
    negative, = _labelled(plan([case], params, np.random.default_rng(0)), "negative size")
    assert negative.scalars == {"rows": -20, "cols": -30} and negative.empty
    zero, = _labelled(plan([case], params, np.random.default_rng(0)), "size zero")
    assert zero.scalars == {"rows": 0, "cols": 0} and not zero.empty


SHIFT = "void shift(long n, const float *src, float *dst)\n" \
        "{ for (long i = 0; i < n; ++i) dst[i] = src[i]; }\n"


def test_a_partial_overlap_is_recorded_with_its_offset_and_replayed_as_one_buffer(tmp_path):
    kernel = r3.kernel(SHIFT, entry="shift", name="overlap_shift")
    buffer = np.arange(11, dtype=np.float32)
    args = (10, buffer[1:], buffer[:-1])
    _, recording = capture(kernel, args, lambda: kernel(*args), "test::shift")
    assert recording.overlaps == [["src", "dst"]] and recording.overlap_offsets == [-4]
    store = RecordingStore(tmp_path)
    store.save(kernel.name, [recording], cap_bytes=1 << 20)
    again = store.read(kernel.name, recording.key)
    assert again.overlap_offsets == [-4] and again.key == recording.key
    slot, = slots_of(again, recording.params)
    assert slot.params == ["src", "dst"] and slot.written
    assert np.array_equal(slot.values, np.arange(11, dtype=np.float32))
    assert slot.views == {"src": (1, (10,)), "dst": (0, (10,))}
    run = slot.values.copy()  # what a replay passes: views of one buffer
    kernel(10, slot.view_of(run, "src"), slot.view_of(run, "dst"))
    assert np.array_equal(slot.view_of(run, "dst"), recording.outputs["dst"])


def test_recordings_without_offsets_replay_overlaps_on_separate_buffers(tmp_path):
    kernel = r3.kernel(SHIFT, entry="shift", name="overlap_old")
    buffer = np.arange(11, dtype=np.float32)
    args = (10, buffer[1:], buffer[:-1])
    _, recording = capture(kernel, args, lambda: kernel(*args), "test::shift")
    recording.overlap_offsets = []  # as written before offsets were kept
    assert [s.params for s in slots_of(recording, recording.params)] == [["src"], ["dst"]]


# -- what a rewrite assumes -------------------------------------------------------------------

AXPY_C = "void axpy(long n, float a, const float *x, float *y)\n" \
         "{ for (long i = 0; i < n; ++i) y[i] = a * x[i] + y[i]; }\n"


@pytest.fixture(scope="module")
def compiler():
    kernel = r3.kernel(AXPY_C, entry="axpy", name="contract_axpy")
    spec = KernelSpec.from_kernel(kernel)
    return spec, CandidateCompiler(spec, get_backend("cpu"))


def _assumes(compiler, text: str, shared=(), no_alias=False) -> list[str]:
    spec, built = compiler
    ir = built.compile(Candidate(source_text=text)).ir
    return assumptions(built.baseline_ir, ir, spec.entry, spec.params,
                       {frozenset(p) for p in shared}, no_alias)


def test_restrict_the_baseline_lacks_is_an_assumption(compiler):
    restricted = AXPY_C.replace("const float *x, float *y",
                                "const float *restrict x, float *restrict y")
    assert parameters(compiler[1].baseline_ir, "axpy")["x"].count("noalias") == 0
    assert _assumes(compiler, restricted) == ["x and y do not overlap"]
    assert _assumes(compiler, restricted, shared=[("x", "y")]) == []  # verified in place
    assert _assumes(compiler, restricted, no_alias=True) == []        # declared
    assert _assumes(compiler, AXPY_C) == []


def test_alignment_and_conditions_the_baseline_lacks_are_assumptions(compiler):
    text = ("void axpy(long n, float a, const float *x, float *y)\n"
            "{ const float *ax = __builtin_assume_aligned(x, 32); __builtin_assume(n % 8 == 0);"
            "  for (long i = 0; i < n; ++i) y[i] = a * ax[i] + y[i]; }\n")
    assert _assumes(compiler, text) == ["a pointer is 32-byte aligned "
                                        "(__builtin_assume_aligned)",
                                        "a condition of its own holds (__builtin_assume)"]


def test_no_alias_must_be_a_bool():
    with pytest.raises(DeclarationError, match="no_alias must be True or False"):
        r3.kernel(AXPY_C, entry="axpy", name="contract_bad", no_alias="yes")
    assert KernelSpec.from_kernel(r3.kernel(AXPY_C, entry="axpy", name="contract_ok",
                                            no_alias=True)).no_alias


def test_the_patch_says_what_the_rewrite_assumes_and_still_applies(tmp_path):
    def git(*args):
        return subprocess.run(["git", *args], cwd=tmp_path, capture_output=True, text=True)

    if git("init", "-q").returncode != 0:
        pytest.skip("git is not available")
    path = tmp_path / "axpy.c"
    path.write_text(AXPY_C)
    restricted = AXPY_C.replace("const float *x, float *y",
                                "const float *restrict x, float *restrict y")
    patch = write_patch(tmp_path / ".r3" / "patches", "axpy", path, tmp_path, restricted,
                        ["x and y do not overlap"])
    assert patch.read_text().splitlines()[0] == (
        "pytest-r3: this rewrite assumes: x and y do not overlap (review your callers)")
    applied = git("apply", str(patch))
    assert applied.returncode == 0, applied.stderr
    assert path.read_text() == restricted


def test_derived_cases_start_from_a_recording_with_room_for_every_small_size():
    """Not an empty launch, nor one smaller than 17 (its in-place result says little)."""
    derived = plan([_axpy(0), _axpy(5), _axpy(100), _axpy(1000)], AXPY,
                   np.random.default_rng(0))
    assert [d.scalars["n"] for d in _labelled(derived, "small size")] == list(SMALL_SIZES)
    assert all(d.label.startswith("recording n=100 ") for d in derived
               if "above the largest" not in d.label and "between" not in d.label
               and not (d.specials and d.label.startswith("recording n=1000 ")))


def test_every_misalignment_a_numpy_view_can_have_is_derived():
    """float32: views 4, 8 and 12 bytes into their allocation (a[1:], a[2:] or a row of a
    (rows, 1002) array, a[3:]); float64: 8 bytes. Each view ends where its buffer ends."""
    derived = _labelled(plan([_axpy(37)], AXPY, np.random.default_rng(0)),
                        "into its allocation")
    assert [d.slots[0].views["x"][0] for d in derived] == [1, 2, 3]
    assert all(d.alone for d in derived)
    for case, elements in zip(derived, (1, 2, 3), strict=True):
        for slot in case.slots:
            start, shape = slot.views[slot.params[0]]
            assert start == elements and slot.values.size == start + 37 and shape == (37,)
            assert np.array_equal(slot.values[start:], _axpy(37).slots[
                slot.params[0] == "y"].values)
    doubles = [{**p, "dtype": "float64"} for p in AXPY]
    case = Planned("d", {"n": 37, "a": 2.0}, [Slot([s.params[0]], s.written,
                                                   s.values.astype(np.float64))
                                              for s in _axpy(37).slots])
    derived = _labelled(plan([case], doubles, np.random.default_rng(0)), "into its allocation")
    assert [d.label.split("every buffer ")[1][:7] for d in derived] == ["8 bytes"]


def test_each_size_is_made_small_beside_the_largest_recorded_other():
    """A two-row grid as wide as the widest recording (and its transpose), cut from that
    recording: small sizes set together never pair a small size with a large one."""
    params = [{"name": "rows", "dtype": "int32", "is_pointer": False, "written": False},
              {"name": "cols", "dtype": "int32", "is_pointer": False, "written": False},
              {"name": "grid", "dtype": "float32", "is_pointer": True, "written": False},
              {"name": "out", "dtype": "float32", "is_pointer": True, "written": True}]
    rng = np.random.default_rng(4)
    cases = [Planned(f"{r}x{c}", {"rows": r, "cols": c}, [
        Slot(["grid"], False, rng.standard_normal((r, c)).astype(np.float32)),
        Slot(["out"], True, np.zeros((r, c), np.float32))])
        for r, c in ((64, 64), (256, 300), (10, 37))]
    beside = _labelled(plan(cases, params, np.random.default_rng(0)), "small beside large")
    shapes = {(d.scalars["rows"], d.scalars["cols"]) for d in beside}
    assert {(2, 300), (256, 2), (17, 300), (1, 300)} <= shapes
    assert len(beside) == 2 * len(SMALL_SIZES)
    two_rows = next(d for d in beside if (d.scalars["rows"], d.scalars["cols"]) == (2, 300))
    assert two_rows.slots[0].values.shape == (2, 300)
    assert np.array_equal(two_rows.slots[0].values, cases[1].slots[0].values[:2])
    assert not _labelled(plan([_axpy(1000), _axpy(37)], AXPY, np.random.default_rng(0)),
                         "small beside large")  # one size argument: nothing to pair
