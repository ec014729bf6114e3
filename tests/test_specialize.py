"""Shape-specialised variants (specialize=): bucketing, the lock's per-bucket entries, the
call path's choice by bucket, and --r3-record then --r3-tune end to end."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import pytest_r3 as r3
from pytest_r3.errors import CorruptStateError, DeclarationError, LaunchError
from pytest_r3.kernel import declaration
from pytest_r3.kernel.lock import LOCK_ENV, LockFile, merge_entry, source_fingerprint
from pytest_r3.kernel.specialize import Specialization, power_of_two_bucket

SCALE_C = """
#ifndef SCALE
#define SCALE 1
#endif
void {name}(int n, int m, float *x) {{ for (int i = 0; i < n; ++i) x[i] *= SCALE; }}
"""


def scale_kernel(name: str, specialize) -> declaration.Kernel:
    """A kernel whose output says which variant ran: it multiplies by its SCALE."""
    return r3.kernel(SCALE_C.format(name=name), entry=name, tune={"SCALE": [1, 2, 3, 4]},
                     specialize=specialize)


def entry(kernel, scale: int, **extra) -> dict:
    return {"source_hash": source_fingerprint(kernel), "macros": {"SCALE": scale},
            "pipeline": {}, "speedup": 1.5, "evaluations": 4, **extra}


def write_lock(path: Path, kernel, buckets: dict[str, int], specialize: str = "n") -> None:
    lock = LockFile(path)
    for label, scale in buckets.items():
        merge_entry(lock, kernel.name, kernel.backend.target_name(), entry(kernel, scale),
                    bucket=label, specialize=specialize)
    lock.save()


def scaled_by(kernel, n: int, m: int = 1) -> float:
    """Which SCALE a plain call with ``n`` (and ``m``) ran."""
    x = np.ones(max(n, 1), dtype=np.float32)
    kernel(n, m, x)
    return float(x[0]) if n > 0 else float("nan")


@pytest.fixture
def lock_path(tmp_path: Path, monkeypatch) -> Path:
    path = tmp_path / "r3.lock"
    monkeypatch.setenv(LOCK_ENV, str(path))
    return path


# -- buckets ---------------------------------------------------------------------------------

def test_power_of_two_buckets():
    assert [power_of_two_bucket(n) for n in (1, 2, 3, 1000, 1024, 1025)] == \
        [1, 2, 4, 1024, 1024, 2048]
    assert power_of_two_bucket(0) == power_of_two_bucket(-7) == 0
    assert power_of_two_bucket(np.int64(1000)) == 1024


def test_labels_and_nearest_bucket_by_log_distance():
    one = Specialization(["n"], "here")
    assert one.label(one.key({"n": 1000, "m": 5})) == "n=1024"
    two = Specialization(("m", "n"), "here")
    assert two.label(two.key({"n": 1000, "m": 5})) == "m=8,n=1024"
    tuned = ["n=16", "n=1024"]
    assert one.nearest("n=1024", tuned) == "n=1024"
    assert one.nearest("n=64", tuned) == "n=16"      # 2 octaves from 16, 4 from 1024
    assert one.nearest("n=128", tuned) == "n=1024"   # 3 and 3: ties go to the larger
    assert one.nearest("n=0", tuned) == "n=16"
    assert one.nearest("n=64", []) is None
    assert two.nearest("m=8,n=64", ["m=8,n=1024", "m=1,n=64"]) == "m=1,n=64"


def test_function_keys():
    keyed = Specialization(lambda args: ("big" if args["n"] > 100 else "small"), "here")
    assert keyed.label(keyed.key({"n": 500})) == '"big"'
    assert keyed.nearest('"big"', ['"small"']) is None  # not numbers: no nearest bucket
    numeric = Specialization(lambda args: (args["n"] // 100, args["m"]), "here")
    assert numeric.label(numeric.key({"n": 250, "m": 3})) == "[2, 3]"
    assert numeric.nearest("[3, 3]", ["[2, 3]", "[40, 3]"]) == "[2, 3]"
    with pytest.raises(DeclarationError, match="a bucket key must be a number"):
        keyed.label(object())


@pytest.mark.parametrize("names", [["n"], ("m", "n"), ("k", "m", "n")])
def test_the_call_paths_keys_are_the_recordings_buckets(names):
    """The dispatcher's fast key must be the bucket the tuner computed from recordings."""
    spec = Specialization(names, "here")
    positions = tuple((name, i) for i, name in enumerate(names))
    missed, table = [], {}

    def miss(key):  # as Kernel's: find the bucket's launcher, cache it by the key
        missed.append(spec.label(key))
        table[key] = lambda *args: spec.label(key)
        return table[key]
    call = spec.dispatcher(positions, table, miss, lambda *args: "unbucketed")
    for values in [(1000, 3, 7), (0, -1, 1), (np.int32(1025), 64, 65)]:
        values = values[:len(names)]
        expected = spec.label(spec.key(dict(zip(names, values, strict=True))))
        assert call(*values) == expected
        assert call(*values) == expected
        assert missed[-1] == expected
    assert len(missed) == 3  # a bucket's launcher is found once, then cached
    assert call() == "unbucketed"  # too few arguments: the plain launcher says so
    assert call(*["x"] * len(names)) == "unbucketed"


@pytest.mark.parametrize("bad", [[], [1], ["n", "n"], ["not a name"], 3])
def test_bad_specialize_is_refused_at_declaration(bad):
    with pytest.raises(DeclarationError, match="specialize="):
        scale_kernel("spec_refused", bad)


def test_a_name_that_is_not_an_integer_scalar_names_the_integer_scalars(lock_path):
    kernel = scale_kernel("spec_unknown_name", ["x"])
    write_lock(lock_path, kernel, {"x=4": 2}, specialize="x")
    with pytest.raises(DeclarationError, match="'x', which is not an integer scalar argument "
                       "of spec_unknown_name; its integer scalars are: n, m"):
        scaled_by(kernel, 4)


# -- the lock --------------------------------------------------------------------------------

def test_lock_round_trip_keeps_one_entry_per_bucket(lock_path):
    kernel = scale_kernel("spec_lock", ["n"])
    target = kernel.backend.target_name()
    write_lock(lock_path, kernel, {"n=16": 2, "n=1024": 3})
    lock = LockFile.load(lock_path)
    data = json.loads(lock_path.read_text())
    assert data["kernels"]["spec_lock"][target]["specialize"] == "n"
    assert lock.entry("spec_lock", target, "n=16", "n")["macros"] == {"SCALE": 2}
    assert lock.entry("spec_lock", target) is None  # no plain entry beside the buckets
    assert lock.entry("spec_lock", target, "n=16", "m,n") is None  # another specialize=
    assert [(e["bucket"], e["macros"]["SCALE"]) for _, _, e in lock.entries()] == \
        [("n=1024", 3), ("n=16", 2)]

    # each bucket is merged by the usual rules: a weaker run keeps the committed entry
    weaker = merge_entry(lock, "spec_lock", target, entry(kernel, 4, speedup=1.1),
                         bucket="n=16", specialize="n")
    assert weaker.action == "kept"
    # buckets tuned under another specialize= are all replaced
    merge_entry(lock, "spec_lock", target, entry(kernel, 4), bucket="m=1,n=16",
                specialize="m,n")
    assert lock.buckets("spec_lock", target) == ("m,n", {"m=1,n=16": entry(kernel, 4)})
    # and a plain entry (specialize= removed from the declaration) replaces them
    merge_entry(lock, "spec_lock", target, entry(kernel, 2))
    assert lock.buckets("spec_lock", target) is None
    assert lock.entry("spec_lock", target)["macros"] == {"SCALE": 2}


def test_old_lock_files_stay_readable_and_bad_buckets_are_named(lock_path):
    old = {"version": 1, "kernels": {"k": {"cpu-x": {"source_hash": "abc", "macros": {},
                                                     "pipeline": {}}}}}
    lock_path.write_text(json.dumps(old))
    assert LockFile.load(lock_path).entry("k", "cpu-x")["source_hash"] == "abc"
    for value, problem in [
            ({"specialize": "n", "buckets": {}}, "'buckets' must be a non-empty object"),
            ({"buckets": {"n=4": {}}}, "'specialize' must be a string"),
            ({"specialize": "n", "buckets": {"n=4": {"macros": {}}}},
             "buckets.n=4: 'source_hash' must be a string"),
            ({"specialize": "n", "buckets": {"n=4": old["kernels"]["k"]["cpu-x"]},
              "macros": {}}, "unknown field(s) macros beside 'buckets'")]:
        lock_path.write_text(json.dumps({"version": 1, "kernels": {"k": {"cpu-x": value}}}))
        with pytest.raises(CorruptStateError) as caught:
            LockFile.load(lock_path)
        assert f"kernels.k.cpu-x: {problem}" in str(caught.value)


# -- the call path -----------------------------------------------------------------------------

def test_plain_calls_run_their_buckets_variant_or_the_nearest(lock_path):
    kernel = scale_kernel("spec_calls", ["n"])
    write_lock(lock_path, kernel, {"n=16": 2, "n=1024": 3})
    assert scaled_by(kernel, 10) == 2       # bucket 16
    assert scaled_by(kernel, 1000) == 3     # bucket 1024
    assert scaled_by(kernel, 40) == 2       # bucket 64: nearest is 16
    assert scaled_by(kernel, 100) == 3      # bucket 128: as near to 16 as to 1024: larger
    assert scaled_by(kernel, 3000) == 3     # bucket 4096: nearest is 1024
    assert kernel.serving(40, 1, None)[0] == "n=16"
    assert kernel.bucket_of(1000, 1, None) == "n=1024"
    # an activated variant serves every bucket (tuning and the oracle re-runs rely on it)
    kernel.activate(kernel.variant(SCALE=4))
    assert scaled_by(kernel, 10) == scaled_by(kernel, 1000) == 4
    kernel.activate(None)
    assert scaled_by(kernel, 10) == 2
    # recording sessions run baselines
    declaration.use_lock_file(False)
    try:
        assert scaled_by(kernel, 10) == scaled_by(kernel, 1000) == 1
    finally:
        declaration.use_lock_file(True)


def test_wrong_arguments_get_the_same_error_as_without_specialize(lock_path):
    kernel = scale_kernel("spec_wrong_args", ["n"])
    plain = r3.kernel(SCALE_C.format(name="spec_wrong_args_plain"),
                      entry="spec_wrong_args_plain")
    write_lock(lock_path, kernel, {"n=16": 2})
    x = np.ones(4, dtype=np.float32)
    for args in [(4, 1), (x, 1, x)]:
        with pytest.raises(LaunchError) as specialised:
            kernel(*args)
        with pytest.raises(LaunchError) as unspecialised:
            plain(*args)
        assert str(specialised.value).replace("spec_wrong_args", "K") == \
            str(unspecialised.value).replace("spec_wrong_args_plain", "K")


def test_no_tuned_bucket_runs_the_plain_entry_or_the_baseline(lock_path):
    kernel = scale_kernel("spec_plain", ["n"])
    assert scaled_by(kernel, 10) == 1  # no lock at all: the baseline, as without specialize=
    lock = LockFile(lock_path)
    merge_entry(lock, kernel.name, kernel.backend.target_name(), entry(kernel, 3))
    lock.save()
    kernel.activate(None)  # forget what was read
    assert scaled_by(kernel, 10) == scaled_by(kernel, 5000) == 3
    # a lock tuned under another specialize= does not apply: the baseline
    write_lock(lock_path, kernel, {"m=1,n=16": 2}, specialize="m,n")
    kernel.activate(None)
    assert scaled_by(kernel, 10) == 1


def test_several_names_and_a_key_function(lock_path):
    several = scale_kernel("spec_several", ("m", "n"))
    write_lock(lock_path, several, {"m=1,n=16": 2, "m=8,n=16": 4}, specialize="m,n")
    assert scaled_by(several, 10, 1) == 2
    assert scaled_by(several, 10, 7) == 4
    assert scaled_by(several, 10, 5) == 4  # m=5 is in bucket m=8
    assert scaled_by(several, 10, 3) == 4  # m=4: nearer to m=8 than to m=1

    def size_class(args):
        return 0 if args["n"] < 100 else 1
    keyed = scale_kernel("spec_keyed", size_class)
    write_lock(lock_path, keyed, {"0": 2, "1": 3}, specialize=keyed.specialize.description)
    assert scaled_by(keyed, 10) == 2
    assert scaled_by(keyed, 500) == 3


# -- end to end: --r3-record, --r3-tune, then plain calls --------------------------------------

# ORDER=0 walks the matrix column by column (strided, slow); ORDER=1 row by row.
ORDER_C = textwrap.dedent("""
    #ifndef ORDER
    #define ORDER 0
    #endif
    void spec_scale(int n, const float *in, float *out)
    {
    #if ORDER
        for (int i = 0; i < n; ++i)
            for (int j = 0; j < n; ++j)
                out[i * n + j] = 2.0f * in[i * n + j] + 1.0f;
    #else
        for (int j = 0; j < n; ++j)
            for (int i = 0; i < n; ++i)
                out[i * n + j] = 2.0f * in[i * n + j] + 1.0f;
    #endif
    }
""")

MODULE_PY = textwrap.dedent("""
    import pytest_r3 as r3

    spec_scale = r3.kernel("spec_scale.c", entry="spec_scale", tune={"ORDER": [0, 1]},
                           specialize=["n"])
""")

TEST_PY = textwrap.dedent("""
    import numpy as np
    import pytest

    from specmod import spec_scale


    @pytest.mark.r3_oracle(spec_scale)
    @pytest.mark.parametrize("n", [500, 1000])
    def test_spec_scale(n):
        grid = np.random.default_rng(n).random((n, n), dtype=np.float32)
        out = np.empty_like(grid)
        spec_scale(n, grid, out)
        np.testing.assert_allclose(out, 2 * grid + 1, rtol=1e-6)
""")

PROBE_PY = textwrap.dedent("""
    import numpy as np

    from specmod import spec_scale


    def served(n):
        grid = np.zeros((n, n), dtype=np.float32)
        out = np.empty_like(grid)
        spec_scale(n, grid, out)  # a plain call: the dispatcher caches this bucket's launcher
        label, variant = spec_scale.serving(n, grid, out)
        launcher = spec_scale._bucket_launchers[1 << (n - 1).bit_length()]
        assert launcher is spec_scale.build(variant)
        return label, variant.macro_dict


    def test_each_size_runs_its_buckets_variant():
        assert served(500) == ("n=512", {"ORDER": 0})
        assert served(1000) == ("n=1024", {"ORDER": 1})
        assert served(3) == ("n=512", {"ORDER": 0})      # unseen: the nearest bucket
        assert served(1500) == ("n=1024", {"ORDER": 1})  # unseen: the nearest bucket
""")


def run(project: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                          cwd=project, capture_output=True, text=True, timeout=600)


def test_record_then_tune_gives_each_bucket_its_variant(tmp_path: Path, monkeypatch):
    monkeypatch.delenv(LOCK_ENV, raising=False)
    (tmp_path / "spec_scale.c").write_text(ORDER_C)
    (tmp_path / "specmod.py").write_text(MODULE_PY)
    (tmp_path / "test_spec_scale.py").write_text(TEST_PY)
    (tmp_path / "pytest.ini").write_text("[pytest]\nr3_search_pipeline = false\n"
                                         "r3_workers = 1\nr3_budget = 2\n")
    recorded = run(tmp_path, "--r3-record")
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    tuned = run(tmp_path, "--r3-tune")
    assert tuned.returncode == 0, tuned.stdout + tuned.stderr
    assert "bucket n=512" in tuned.stdout and "bucket n=1024" in tuned.stdout

    lock = json.loads((tmp_path / "r3.lock").read_text())
    (value,) = lock["kernels"]["spec_scale"].values()
    assert value["specialize"] == "n"
    assert sorted(value["buckets"]) == ["n=1024", "n=512"]
    for bucket in value["buckets"].values():  # the row-by-row order wins at both sizes
        assert bucket["macros"] == {"ORDER": 1} and bucket["speedup"] > 1.2
    # each bucket was timed on its own recording: n=1000 launches take 4x the n=500 ones
    small, large = (value["buckets"][label]["baseline_seconds"] for label in ("n=512", "n=1024"))
    assert large > 2 * small
    report = (tmp_path / ".r3" / "report.md").read_text()
    assert "`spec_scale` bucket `n=512`" in report and "`spec_scale` bucket `n=1024`" in report

    # each bucket has its own entry: make the smaller one the slow order by hand, and plain
    # calls at each size (and at unseen sizes, by the nearest bucket) follow the lock
    value["buckets"]["n=512"]["macros"] = {"ORDER": 0}
    (tmp_path / "r3.lock").write_text(json.dumps(lock))
    (tmp_path / "test_probe.py").write_text(PROBE_PY)
    probed = run(tmp_path, "test_probe.py")
    assert probed.returncode == 0, probed.stdout + probed.stderr

    # the pre-merge check checks each bucket's entry (the slow order is the baseline: ok)
    checked = run(tmp_path, "--r3-check", "test_spec_scale.py")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "spec_scale [n=512]" in checked.stdout and "spec_scale [n=1024]" in checked.stdout

    # resuming repeats no evaluation: the results are kept per bucket
    again = run(tmp_path, "--r3-tune", "test_spec_scale.py")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "0 new" in again.stdout or "(  0)" in again.stdout


def test_a_specialised_kernel_tunes_settings_per_bucket_but_no_rewrites(tmp_path: Path,
                                                                         monkeypatch):
    """One source serves every bucket: a model is not asked for rewrites of a specialised
    kernel, and the report says why."""
    from pytest_r3.llm.testing import ScriptedChatServer

    monkeypatch.delenv(LOCK_ENV, raising=False)
    (tmp_path / "spec_scale.c").write_text(ORDER_C)
    (tmp_path / "specmod.py").write_text(MODULE_PY)
    (tmp_path / "test_spec_scale.py").write_text(TEST_PY.replace("[500, 1000]", "[500]"))
    (tmp_path / "pytest.ini").write_text("[pytest]\nr3_search_pipeline = false\n"
                                         "r3_workers = 1\nr3_budget = 2\n")
    with ScriptedChatServer(lambda body: "no rewrite") as server:
        tuned = run(tmp_path, "--r3-tune", "--r3-llm-model", "scripted", "--r3-llm-base-url",
                    server.base_url, "--r3-llm-api-key-env", "none")
        asked = len(server.requests)
    assert tuned.returncode == 0, tuned.stdout + tuned.stderr
    assert asked == 0
    assert "source rewrites are not evolved per bucket" in tuned.stdout
    lock = json.loads((tmp_path / "r3.lock").read_text())
    (value,) = lock["kernels"]["spec_scale"].values()
    assert value["buckets"]["n=512"]["macros"] == {"ORDER": 1}
