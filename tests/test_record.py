"""Recording launches: capture, the on-disk store, dedup, the size cap, and ``--r3-record``."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest

import pytest_r3 as r3
from pytest_r3.errors import CorruptStateWarning, R3Error
from pytest_r3.record.store import (
    CorruptRecording,
    Recording,
    RecordingStore,
    capture,
    find_aliases,
    select,
)

SCALE_C = """\
/* out = alpha * grid, nonzero marks the non-zero cells; returns how many there are */
long scale(int rows, int cols, float alpha, const float *grid, double *out, int *nonzero)
{
    long count = 0;
    for (int i = 0; i < rows * cols; ++i) {
        out[i] = (double)alpha * grid[i];
        nonzero[i] = grid[i] != 0.0f;
        count += nonzero[i];
    }
    return count;
}
"""

AXPY_C = """\
/* y = a * x + y, in place */
void axpy_inplace(long n, float a, const float *x, float *y)
{
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + y[i];
}
"""


@pytest.fixture(scope="module")
def scale(tmp_path_factory):
    folder = tmp_path_factory.mktemp("record_kernels")
    (folder / "scale.c").write_text(SCALE_C)
    return r3.kernel(folder / "scale.c", entry="scale", name="record_scale")


@pytest.fixture(scope="module")
def axpy(tmp_path_factory):
    folder = tmp_path_factory.mktemp("record_axpy")
    (folder / "axpy.c").write_text(AXPY_C)
    return r3.kernel(folder / "axpy.c", entry="axpy_inplace", name="record_axpy")


def launch(kernel, *args, test="tests/test_x.py::test_x"):
    """Launch through capture, as the recording plugin does; (result, recording)."""
    launcher = kernel.build()
    return capture(kernel, args, lambda: launcher(*args), test)


def scale_args(rows=3, cols=5, alpha=1.5, seed=0):
    grid = np.random.default_rng(seed).standard_normal((rows, cols)).astype(np.float32)
    grid[0, 0] = 0.0
    grid[1, 2] = np.nan  # NaN must survive the trip bit for bit
    return (rows, cols, alpha, grid, np.full((rows, cols), -1.0), np.zeros((rows, cols),
                                                                          dtype=np.int32))


def axpy_recording(axpy, n, a=2.0, seed=0, test="t::axpy"):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    return launch(axpy, n, a, x, y, test=test)[1]


def bits(array: np.ndarray) -> tuple:
    return array.dtype.str, array.shape, array.tobytes()


# -- capture ------------------------------------------------------------------------------


def test_capture_changes_nothing_the_caller_sees(scale):
    recorded_args = scale_args()
    plain_args = scale_args()
    plain_result = scale.build()(*plain_args)
    result, recording = launch(scale, *recorded_args)
    assert result == plain_result == 14  # 15 cells, one zero; NaN != 0 counts
    assert type(result) is type(plain_result)
    for recorded, plain in zip(recorded_args[3:], plain_args[3:], strict=True):
        assert bits(recorded) == bits(plain)
    assert recording.returned == 14


def test_capture_keeps_inputs_from_before_and_outputs_from_after_the_launch(scale):
    args = scale_args()
    before = [a.copy() for a in args[3:]]
    _, recording = launch(scale, *args)
    assert set(recording.inputs) == {"grid", "out", "nonzero"}
    assert set(recording.outputs) == {"out", "nonzero"}  # grid is const: not written
    assert bits(recording.inputs["out"]) == bits(before[1])  # the -1.0 fill, before
    assert bits(recording.inputs["nonzero"]) == bits(before[2])
    assert bits(recording.outputs["out"]) == bits(args[4])  # after the launch
    assert bits(recording.outputs["nonzero"]) == bits(args[5])
    # later changes by the test do not reach the recording
    args[4][...] = 0
    assert recording.outputs["out"][0, 1] != 0
    assert recording.scalars == {"rows": 3, "cols": 5, "alpha": 1.5}
    assert type(recording.scalars["rows"]) is int and type(recording.scalars["alpha"]) is float
    assert recording.source_hash == scale.source.hash
    assert [p["name"] for p in recording.params] == ["rows", "cols", "alpha", "grid", "out",
                                                     "nonzero"]


def test_capture_does_not_record_a_launch_that_fails(scale):
    with pytest.raises(r3.LaunchError):
        launch(scale, 3, 5, 1.5, np.zeros((3, 5)), np.zeros((3, 5)), np.zeros((3, 5)))


# -- the store ------------------------------------------------------------------------------


def test_recording_round_trips_exactly(scale, tmp_path):
    _, recording = launch(scale, *scale_args(), test="tests/test_s.py::test_a[1]")
    store = RecordingStore(tmp_path / "recordings")
    store.write(recording)
    folder = tmp_path / "recordings" / "record_scale"
    assert sorted(p.name for p in folder.iterdir()) == [f"{recording.key}.json",
                                                        f"{recording.key}.npz"]
    again = store.read("record_scale", recording.key)
    assert again.key == recording.key
    assert again.kernel == "record_scale"
    assert again.params == recording.params
    assert again.scalars == recording.scalars
    assert {k: type(v) for k, v in again.scalars.items()} == {"rows": int, "cols": int,
                                                              "alpha": float}
    assert again.returned == 14 and type(again.returned) is int
    assert again.tests == ["tests/test_s.py::test_a[1]"]
    assert again.source_hash == scale.source.hash
    for name in recording.inputs:
        assert bits(again.inputs[name]) == bits(recording.inputs[name])
    for name in recording.outputs:
        assert bits(again.outputs[name]) == bits(recording.outputs[name])
    assert again.inputs["grid"].dtype == np.float32 and again.inputs["grid"].shape == (3, 5)
    assert again.outputs["nonzero"].dtype == np.int32
    # the launch arguments rebuilt from the file give the recorded outputs again
    args = again.arguments()
    assert scale.build()(*args) == 14
    assert bits(args[4]) == bits(recording.outputs["out"])


def test_metadata_describes_the_recording(scale, tmp_path):
    _, recording = launch(scale, *scale_args(), test="t::b")
    store = RecordingStore(tmp_path)
    path = store.write(recording)
    meta = json.loads(path.read_text())
    assert meta["kernel"] == "record_scale" and meta["key"] == recording.key
    assert meta["arrays"]["grid"] == {"dtype": "<f4", "shape": [3, 5]}
    assert meta["nbytes"] == recording.nbytes == 3 * 5 * (4 + 8 + 4) + 3 * 5 * (8 + 4)
    assert meta["returned"] == 14 and meta["tests"] == ["t::b"]


def test_key_depends_on_the_launch_not_on_the_test(axpy):
    first = axpy_recording(axpy, 50, seed=1, test="t::one")
    same = axpy_recording(axpy, 50, seed=1, test="t::two")
    assert first.key == same.key  # another test, same launch
    assert axpy_recording(axpy, 50, seed=2).key != first.key  # other values
    assert axpy_recording(axpy, 50, a=3.0, seed=1).key != first.key  # other scalar
    assert axpy_recording(axpy, 49, seed=1).key != first.key  # other size
    changed = Recording(first.kernel, first.params, first.scalars,
                        {**first.inputs, "x": first.inputs["x"].copy()}, first.outputs)
    changed.inputs["x"][17] = np.nextafter(changed.inputs["x"][17], np.float32(np.inf))
    assert changed.key != first.key  # one ulp in one element
    assert len(first.key) == 20 and first.key == axpy_recording(axpy, 50, seed=1).key


def test_same_launch_twice_is_stored_once_with_both_tests(axpy, tmp_path):
    store = RecordingStore(tmp_path)
    a = axpy_recording(axpy, 64, seed=3, test="tests/test_a.py::test_one")
    b = axpy_recording(axpy, 64, seed=3, test="tests/test_a.py::test_two")
    other = axpy_recording(axpy, 64, seed=4, test="tests/test_a.py::test_two")
    index = store.save("record_axpy", [a, b, other], cap_bytes=1 << 20)
    assert sorted(index["kept"]) == sorted({a.key, other.key})
    assert len(list((tmp_path / "record_axpy").glob("*.npz"))) == 2
    assert store.read("record_axpy", a.key).tests == ["tests/test_a.py::test_one",
                                                      "tests/test_a.py::test_two"]
    # a later run of a third test with the same launch adds to it, not beside it
    c = axpy_recording(axpy, 64, seed=3, test="tests/test_b.py::test_three")
    index = store.save("record_axpy", [c], cap_bytes=1 << 20)
    assert sorted(index["kept"]) == sorted({a.key, other.key})
    assert store.read("record_axpy", a.key).tests == [
        "tests/test_a.py::test_one", "tests/test_a.py::test_two", "tests/test_b.py::test_three"]
    assert sorted(r.key for r in store.load_all("record_axpy")) == sorted(index["kept"])


def test_rerecording_a_changed_kernel_replaces_its_outputs(axpy, tmp_path):
    store = RecordingStore(tmp_path)
    old = axpy_recording(axpy, 32, seed=5, test="t::old")
    also_old = axpy_recording(axpy, 16, seed=6, test="t::gone")
    store.save("record_axpy", [old, also_old], cap_bytes=1 << 20)
    # the kernel source changed (a bug fix, say): same inputs, new outputs
    new = axpy_recording(axpy, 32, seed=5, test="t::new")
    new.outputs = {"y": new.outputs["y"] + 1}
    new.source_hash = "0123456789abcdef"
    index = store.save("record_axpy", [new], cap_bytes=1 << 20)
    assert index["kept"] == [new.key]
    again = store.read("record_axpy", new.key)
    assert bits(again.outputs["y"]) == bits(new.outputs["y"])
    assert again.source_hash == "0123456789abcdef"
    assert sorted((d["key"], d["why"]) for d in index["dropped"]) == sorted(
        (r.key, "recorded from another version of the kernel source") for r in (old, also_old)
        if r.key != new.key)
    assert not (tmp_path / "record_axpy" / f"{also_old.key}.npz").exists()
    assert sorted(p.stem for p in (tmp_path / "record_axpy").glob("*.npz")) == [new.key]


def test_size_cap_keeps_one_of_each_shape_first(axpy, tmp_path):
    small_a = axpy_recording(axpy, 100, seed=1, test="t::small_a")
    small_b = axpy_recording(axpy, 100, seed=2, test="t::small_b")
    large = axpy_recording(axpy, 1000, seed=3, test="t::large")
    # smallest-first alone would keep both small ones; the cap fits one small + the large
    cap = small_a.nbytes + large.nbytes
    kept, dropped = select([large, small_b, small_a], cap)
    assert {r.shape_signature for r in kept} == {small_a.shape_signature,
                                                 large.shape_signature}
    assert len(dropped) == 1 and dropped[0][0] in (small_a, small_b)

    store = RecordingStore(tmp_path)
    index = store.save("record_axpy", [small_a, small_b, large], cap_bytes=cap)
    assert large.key in index["kept"] and len(index["kept"]) == 2
    assert index["kept_bytes"] == cap and index["cap_bytes"] == cap
    [entry] = index["dropped"]
    assert entry["key"] in (small_a.key, small_b.key)
    assert entry["nbytes"] == small_b.nbytes
    assert entry["why"] == f"over the per-kernel cap of {cap} bytes"
    assert entry["tests"] in (["t::small_a"], ["t::small_b"])
    on_disk = json.loads((tmp_path / "record_axpy" / "index.json").read_text())
    assert on_disk == index
    assert sorted(p.stem for p in (tmp_path / "record_axpy").glob("*.npz")) == \
        sorted(index["kept"])
    assert store.keys("record_axpy") == index["kept"]


def test_cap_smaller_than_every_recording_keeps_nothing(axpy, tmp_path):
    recording = axpy_recording(axpy, 100)
    index = RecordingStore(tmp_path).save("record_axpy", [recording], cap_bytes=10)
    assert index["kept"] == [] and index["dropped"][0]["key"] == recording.key


def test_recording_whose_output_equals_its_input_is_flagged_weak(axpy, tmp_path):
    weak = axpy_recording(axpy, 20, a=0.0, test="t::a_is_zero")  # y unchanged
    empty = axpy_recording(axpy, 0, test="t::empty")
    strong = axpy_recording(axpy, 20, a=2.0, test="t::real")
    assert weak.weak_outputs() == ["y"] and empty.weak_outputs() == ["y"]
    assert strong.weak_outputs() == []
    store = RecordingStore(tmp_path)
    index = store.save("record_axpy", [weak, empty, strong], cap_bytes=1 << 20)
    assert sorted(index["weak"]) == sorted([weak.key, empty.key])
    meta = json.loads((tmp_path / "record_axpy" / f"{weak.key}.json").read_text())
    assert meta["weak_outputs"] == ["y"]


def test_store_lists_kernels_and_is_empty_before_recording(axpy, tmp_path):
    store = RecordingStore(tmp_path / "nothing_yet")
    assert store.kernels() == []
    store.save("record_axpy", [axpy_recording(axpy, 8)], cap_bytes=1 << 20)
    assert store.kernels() == ["record_axpy"]


# -- aliasing ----------------------------------------------------------------------------------

# a rewrite that is right for separate buffers and wrong in place: restrict promises that x
# and y never alias, and the two passes read x after y changed
RESTRICT_REWRITE_C = """\
void axpy_inplace(long n, float a, const float *restrict x, float *restrict y)
{
    for (long i = 0; i < n; ++i)
        y[i] += x[i];
    for (long i = 0; i < n; ++i)
        y[i] += (a - 1.0f) * x[i];
}
"""


def inplace_recording(axpy, n=40, a=2.0, seed=0, test="t::in_place"):
    y = np.random.default_rng(seed).standard_normal(n).astype(np.float32)
    expected = a * y + y
    _, recording = launch(axpy, n, a, y, y, test=test)
    np.testing.assert_allclose(y, expected, rtol=1e-6)  # the caller sees the in-place result
    return recording


def test_an_in_place_launch_is_recorded_as_aliased(axpy, tmp_path):
    recording = inplace_recording(axpy)
    assert recording.aliases == [["x", "y"]] and recording.overlaps == []
    assert recording.alias_groups() == [["x", "y"]]
    assert recording.alias_of() == {"x": "x", "y": "x"}
    assert bits(recording.inputs["x"]) == bits(recording.inputs["y"])

    # the same values in separate buffers are another launch
    y = recording.inputs["y"].copy()
    _, separate = launch(axpy, 40, 2.0, y.copy(), y.copy(), test="t::separate")
    assert separate.aliases == [] and separate.alias_groups() == []
    assert separate.key != recording.key
    assert separate.shape_signature != recording.shape_signature

    store = RecordingStore(tmp_path)
    index = store.save("record_axpy", [recording, separate], cap_bytes=1 << 20)
    assert sorted(index["kept"]) == sorted([recording.key, separate.key])
    assert index["aliased"] == [recording.key]
    meta = json.loads((tmp_path / "record_axpy" / f"{recording.key}.json").read_text())
    assert meta["aliases"] == [["x", "y"]] and meta["overlaps"] == []
    again = store.read("record_axpy", recording.key)
    assert again.aliases == [["x", "y"]] and again.key == recording.key
    assert store.read("record_axpy", separate.key).aliases == []

    # the rebuilt arguments are one buffer, and the baseline reproduces the recording
    args = again.arguments()
    assert args[2] is args[3]
    axpy.build()(*args)
    assert bits(args[3]) == bits(again.outputs["y"])
    assert args[2] is not again.inputs["x"]  # a fresh copy, the recording is untouched


def test_a_restrict_rewrite_that_is_wrong_in_place_is_caught(axpy, tmp_path):
    (tmp_path / "rewrite.c").write_text(RESTRICT_REWRITE_C)
    rewrite = r3.kernel(tmp_path / "rewrite.c", entry="axpy_inplace",
                        name="record_axpy_restrict").build()
    store = RecordingStore(tmp_path / "recordings")
    store.save("record_axpy", [inplace_recording(axpy, a=3.0)], cap_bytes=1 << 20)
    [recording] = store.load_all("record_axpy")
    # replayed on separate copies (the launch as it was before aliasing was recorded), the
    # rewrite looks right ...
    separate = [a.copy() if isinstance(a, np.ndarray) else a for a in recording.arguments()]
    rewrite(*separate)
    np.testing.assert_allclose(separate[3], recording.outputs["y"], rtol=1e-5)
    # ... replayed in place, as recorded, it is wrong (2a * y instead of (a + 1) * y)
    args = recording.arguments()
    rewrite(*args)
    assert not np.allclose(args[3], recording.outputs["y"], rtol=1e-3)


def test_partial_overlap_is_noted(axpy):
    storage = np.arange(20, dtype=np.float32)
    _, recording = launch(axpy, 10, 2.0, storage[0:10], storage[5:15])
    assert recording.aliases == [] and recording.overlaps == [["x", "y"]]
    plain = np.arange(20, dtype=np.float32)
    _, apart = launch(axpy, 10, 2.0, plain[0:10].copy(), plain[5:15].copy())
    assert apart.overlaps == [] and apart.key != recording.key


def test_find_aliases_groups_same_buffers_and_ignores_empty_ones():
    a = np.zeros(8, np.float32)
    b = np.zeros(8, np.float32)
    as_ints = a.view(np.int32)  # same memory, another dtype: still one buffer
    empty = np.zeros(0)
    assert find_aliases(["p", "q", "r", "s", "t"], [a, b, as_ints, a, empty]) == (
        [["p", "r", "s"]], [])
    assert find_aliases(["e", "f"], [empty, empty]) == ([], [])
    assert find_aliases(["x", "y"], [a[::2], a[1::2]]) == ([], [])  # interleaved, disjoint
    assert find_aliases(["x", "y"], [a[:5], a[3:]]) == ([], [["x", "y"]])
    assert find_aliases(["x", "y"], [a, object()]) == ([], [])


def test_aliased_arguments_of_another_dtype_share_the_buffer(axpy):
    recording = inplace_recording(axpy, n=6)
    params = recording.params + [{"name": "raw", "dtype": "int32", "is_pointer": True,
                                  "written": False, "ctype": "const int *"}]
    punned = Recording(recording.kernel, params, recording.scalars,
                       {**recording.inputs, "raw": recording.inputs["x"].view(np.int32)},
                       recording.outputs, aliases=[["x", "y", "raw"]])
    args = punned.arguments()
    assert args[2] is args[3] and args[4].dtype == np.int32
    assert np.shares_memory(args[4], args[2])


def test_recordings_from_before_aliasing_read_as_not_aliased(axpy, tmp_path):
    recording = axpy_recording(axpy, 12)
    store = RecordingStore(tmp_path)
    path = store.write(recording)
    meta = json.loads(path.read_text())
    del meta["aliases"], meta["overlaps"]
    path.write_text(json.dumps(meta))
    again = store.read("record_axpy", recording.key)
    assert again.aliases == [] and again.overlaps == [] and again.key == recording.key
    args = again.arguments()
    assert args[2] is not args[3]


# -- damaged stores ------------------------------------------------------------------------------


@pytest.fixture
def stored(axpy, tmp_path):
    store = RecordingStore(tmp_path)
    recording = axpy_recording(axpy, 64)
    store.save("record_axpy", [recording], cap_bytes=1 << 20)
    folder = tmp_path / "record_axpy"
    return store, recording, folder / f"{recording.key}.npz", folder / f"{recording.key}.json"


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty", "missing"])
def test_a_damaged_arrays_file_names_the_file(stored, damage):
    store, recording, arrays, _ = stored
    content = arrays.read_bytes()
    if damage == "truncate":
        arrays.write_bytes(content[: len(content) // 2])
    elif damage == "garbage":
        arrays.write_bytes(b"not a zip archive at all" * 10)
    elif damage == "empty":
        arrays.write_bytes(b"")
    else:
        arrays.unlink()
    with pytest.raises(CorruptRecording) as info:
        store.read("record_axpy", recording.key)
    assert isinstance(info.value, R3Error)
    assert str(arrays) in str(info.value) and info.value.path == arrays
    assert "record again with `pytest --r3-record`" in str(info.value)
    # listing and loading skip it, naming it once
    with pytest.warns(CorruptStateWarning, match="skipped recording") as caught:
        assert store.load_all("record_axpy") == [] and store.keys("record_axpy") == []
    assert len(caught) == 1 and str(arrays) in str(caught[0].message)


def test_damaged_metadata_names_the_file(stored):
    store, recording, _, meta = stored
    text = meta.read_text()
    meta.write_text(text[: len(text) // 2])
    with pytest.raises(CorruptRecording, match="not readable JSON") as info:
        store.read("record_axpy", recording.key)
    assert str(meta) in str(info.value)
    meta.write_text("[1, 2, 3]")
    with pytest.raises(CorruptRecording, match="not a recording's metadata"):
        store.read("record_axpy", recording.key)
    meta.write_text(json.dumps({**json.loads(text), "params": "nonsense"}))
    with pytest.raises(CorruptRecording, match="malformed metadata"):
        store.read("record_axpy", recording.key)


def test_arrays_that_do_not_fit_the_metadata_are_refused(stored, tmp_path):
    store, recording, arrays, _ = stored
    np.savez(arrays, **{"in.x": recording.inputs["x"], "in.y": recording.inputs["y"]})
    with pytest.raises(CorruptRecording, match=r"arrays missing for out\.y"):
        store.read("record_axpy", recording.key)
    np.savez(arrays, **{"in.x": recording.inputs["x"][:3], "in.y": recording.inputs["y"],
                        "out.y": recording.outputs["y"]})
    with pytest.raises(CorruptRecording, match="'x' is <f4 \\[3\\], the metadata says"):
        store.read("record_axpy", recording.key)


def test_a_damaged_index_is_named_and_rebuilt_from_the_files(stored):
    store, recording, arrays, _ = stored
    index = arrays.parent / "index.json"
    index.write_text("{\"kept\": [")
    with pytest.warns(CorruptStateWarning) as caught:
        assert [r.key for r in store.load_all("record_axpy")] == [recording.key]
    assert len(caught) == 1 and str(index) in str(caught[0].message)
    assert json.loads(index.read_text())["kept"] == [recording.key]


def test_recording_again_replaces_damaged_files(stored, axpy):
    store, recording, arrays, _ = stored
    arrays.write_bytes(arrays.read_bytes()[:40])
    (arrays.parent / "index.json").write_text("garbage")
    fresh = axpy_recording(axpy, 32, seed=9, test="t::fresh")
    index = store.save("record_axpy", [fresh], cap_bytes=1 << 20)
    assert index["kept"] == [fresh.key]
    [dropped] = index["dropped"]
    assert dropped["key"] == recording.key and dropped["why"].startswith("unreadable: ")
    assert not arrays.exists() and not arrays.with_suffix(".json").exists()
    assert [r.key for r in store.load_all("record_axpy")] == [fresh.key]
    # the same launch recorded again replaces its damaged files
    arrays = arrays.parent / f"{fresh.key}.npz"
    arrays.write_bytes(b"")
    index = store.save("record_axpy", [axpy_recording(axpy, 32, seed=9)], cap_bytes=1 << 20)
    assert index["kept"] == [fresh.key] and index["dropped"] == []
    assert bits(store.read("record_axpy", fresh.key).outputs["y"]) == bits(fresh.outputs["y"])


# -- ``pytest --r3-record`` on a real project -------------------------------------------------

PACKAGE = """\
import pytest_r3 as r3

double_add = r3.kernel("double_add.c", entry="double_add", name="pyt_double_add")
negate = r3.kernel("negate.c", entry="negate", name="pyt_negate")
"""

DOUBLE_ADD_C = """\
void double_add(long n, const float *x, const float *y, float *out)
{
    for (long i = 0; i < n; ++i)
        out[i] = 2.0f * x[i] + y[i];
}
"""

NEGATE_C = """\
void negate(int n, double *v)
{
    for (int i = 0; i < n; ++i)
        v[i] = -v[i];
}
"""

TESTS = """\
import numpy as np
import pytest
from mypkg import double_add, negate


@pytest.mark.r3_oracle(double_add)
@pytest.mark.parametrize("n", [5, 300])
def test_double_add(n):
    x = np.arange(n, dtype=np.float32)
    y = np.ones(n, dtype=np.float32)
    out = np.zeros(n, dtype=np.float32)
    double_add(n, x, y, out)
    np.testing.assert_array_equal(out, 2 * x + 1)
    assert x[-1] == n - 1


def test_unmarked_use_of_double_add():
    x = np.full(7, 4.0, dtype=np.float32)
    out = np.empty(7, dtype=np.float32)
    double_add(7, x, x, out)
    assert (out == 12.0).all()


def test_negate_twice():
    v = np.linspace(-1, 1, 9)
    negate(9, v)
    assert v[0] == 1.0
    negate(9, v)
    np.testing.assert_array_equal(v, np.linspace(-1, 1, 9))
"""


@pytest.fixture
def project(pytester):
    pytester.syspathinsert()
    package = pytester.mkpydir("mypkg")
    (package / "__init__.py").write_text(PACKAGE)
    (package / "double_add.c").write_text(DOUBLE_ADD_C)
    (package / "negate.c").write_text(NEGATE_C)
    pytester.makepyfile(test_kernels=TESTS)
    return pytester


def recorded_tests(root, kernel):
    store = RecordingStore(root / ".r3" / "recordings")
    return sorted(test for r in store.load_all(kernel) for test in r.tests)


def test_recording_does_not_change_the_test_results(project):
    plain = project.runpytest("-q")
    plain.assert_outcomes(passed=4)
    assert not (project.path / ".r3").exists()
    recorded = project.runpytest("-q", "--r3-record")
    recorded.assert_outcomes(passed=4)
    recorded.stdout.fnmatch_lines([
        "*pytest-r3 recordings*",
        "pyt_double_add: 2 launch(es), 2 unique recording(s) kept, *",
        "pyt_negate: 2 launch(es), 2 unique recording(s) kept, * (no test is marked "
        "r3_oracle for it: recorded from the tests that launch it)",
        "stored under *recordings",
    ])
    folder = project.path / ".r3" / "recordings" / "pyt_double_add"
    names = sorted(p.name for p in folder.iterdir())
    assert "kernel.json" in names and "index.json" in names
    keys = json.loads((folder / "index.json").read_text())["kept"]
    assert sorted(names) == sorted(["kernel.json", "index.json"]
                                   + [f"{k}.{ext}" for k in keys for ext in ("json", "npz")])


def test_marked_kernels_are_recorded_only_inside_their_oracle_tests(project):
    project.runpytest("--r3-record").assert_outcomes(passed=4)
    root = project.path
    # the unmarked test's launch of double_add (x aliased, n=7) is not recorded
    assert recorded_tests(root, "pyt_double_add") == [
        "test_kernels.py::test_double_add[300]", "test_kernels.py::test_double_add[5]"]
    store = RecordingStore(root / ".r3" / "recordings")
    sizes = sorted(r.scalars["n"] for r in store.load_all("pyt_double_add"))
    assert sizes == [5, 300]
    spec = json.loads((root / ".r3/recordings/pyt_double_add/kernel.json").read_text())
    assert spec["recorded_from"] == "marked"
    assert sorted(spec["oracle_tests"]) == ["test_kernels.py::test_double_add[300]",
                                            "test_kernels.py::test_double_add[5]"]
    assert "test_kernels.py::test_unmarked_use_of_double_add" in spec["observed_tests"]
    assert spec["spec"]["entry"] == "double_add"
    assert spec["spec"]["source_text"] == DOUBLE_ADD_C


def test_kernels_without_marked_tests_are_recorded_from_tests_that_launch_them(project):
    project.runpytest("--r3-record").assert_outcomes(passed=4)
    root = project.path
    # two launches of negate in one test, with different inputs: two recordings
    assert recorded_tests(root, "pyt_negate") == ["test_kernels.py::test_negate_twice"] * 2
    spec = json.loads((root / ".r3/recordings/pyt_negate/kernel.json").read_text())
    assert spec["recorded_from"] == "observed" and spec["oracle_tests"] == []
    store = RecordingStore(root / ".r3" / "recordings")
    for recording in store.load_all("pyt_negate"):
        np.testing.assert_array_equal(recording.outputs["v"], -recording.inputs["v"])


def test_recording_twice_accumulates_without_duplicates(project):
    project.runpytest("--r3-record").assert_outcomes(passed=4)
    first = sorted(p.name for p in (project.path / ".r3/recordings/pyt_double_add").iterdir())
    result = project.runpytest("--r3-record")
    result.assert_outcomes(passed=4)
    second = sorted(p.name for p in (project.path / ".r3/recordings/pyt_double_add").iterdir())
    assert first == second
    assert recorded_tests(project.path, "pyt_double_add") == [
        "test_kernels.py::test_double_add[300]", "test_kernels.py::test_double_add[5]"]


def test_record_dir_and_cap_options(project):
    # the cap fits the n=5 recording (3 * 20 + 20 bytes) but not the n=300 one
    result = project.runpytest("--r3-record", "-o", "r3_dir=elsewhere",
                               "--r3-record-cap", "0.001")
    result.assert_outcomes(passed=4)
    assert not (project.path / ".r3").exists()
    index = json.loads(
        (project.path / "elsewhere/recordings/pyt_double_add/index.json").read_text())
    assert len(index["kept"]) == 1 and len(index["dropped"]) == 1
    assert index["dropped"][0]["tests"] == ["test_kernels.py::test_double_add[300]"]
    assert "over the per-kernel cap" in index["dropped"][0]["why"]
    result.stdout.fnmatch_lines(["pyt_double_add: 2 launch(es), 1 unique recording(s) kept*",
                                 "  dropped 1 over the cap of 0 MiB: *"])


def test_weak_recordings_are_reported_in_the_summary(pytester):
    pytester.syspathinsert()
    package = pytester.mkpydir("mypkg")
    (package / "__init__.py").write_text(PACKAGE)
    (package / "double_add.c").write_text(DOUBLE_ADD_C)
    (package / "negate.c").write_text(NEGATE_C)
    pytester.makepyfile(test_zero="""
        import numpy as np
        from mypkg import negate

        def test_negating_zeros_changes_nothing():
            v = np.zeros(4)
            negate(4, v)
            assert (v == 0).all()
    """)
    result = pytester.runpytest("--r3-record")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["  too weak to verify with alone (output equals input): *"])


def test_deselected_oracle_tests_are_not_reported_as_having_run(project):
    result = project.runpytest("--r3-record", "-k", "negate")
    result.assert_outcomes(passed=1, deselected=3)
    result.stdout.fnmatch_lines([
        "pyt_double_add: not recorded, none of its marked oracle tests ran (deselected or "
        "skipped)"])
    result.stdout.no_fnmatch_line("*marked oracle tests ran but never launched it*")
    assert not (project.path / ".r3/recordings/pyt_double_add").exists()


def test_a_failing_test_still_fails_when_recording(project):
    project.makepyfile(test_failing=textwrap.dedent("""
        import numpy as np
        from mypkg import negate

        def test_wrong_expectation():
            v = np.ones(3)
            negate(3, v)
            assert (v == 1).all()
    """))
    result = project.runpytest("--r3-record", "test_failing.py")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*assert*"])


def test_an_in_place_launch_is_recorded_and_reported(project):
    project.makepyfile(test_alias=textwrap.dedent("""
        import numpy as np
        import pytest
        from mypkg import double_add

        @pytest.mark.r3_oracle(double_add)
        def test_same_input_twice():
            x = np.arange(6, dtype=np.float32)
            out = np.zeros(6, dtype=np.float32)
            double_add(6, x, x, out)
            assert (out == 3 * x).all()
    """))
    result = project.runpytest("--r3-record", "test_alias.py")
    result.assert_outcomes(passed=1)
    store = RecordingStore(project.path / ".r3" / "recordings")
    [recording] = store.load_all("pyt_double_add")
    assert recording.aliases == [["x", "y"]]
    result.stdout.fnmatch_lines([
        f"  launched with aliased arguments (replayed the same way): {recording.key}"])
