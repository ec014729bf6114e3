"""Workloads: launches at the sizes users run (benchmark tests, ``r3_workload`` tests, the
application recorded with ``pytest-r3 record``) are what --r3-tune times and --r3-check
checks; the oracle tests keep verifying. Real pytest sessions and real subprocesses."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from conftest import loop_order_kernel

from pytest_r3.record.store import RecordingStore

KERNEL_C = loop_order_kernel("wl_scale")

MODULE_PY = textwrap.dedent("""
    import pytest_r3 as r3

    wl_scale = r3.kernel("wl_scale.c", entry="wl_scale", tune={"ORDER": [0, 1]})
""")

ORACLE_TEST_PY = textwrap.dedent("""
    import numpy as np
    import pytest

    from wlmod import wl_scale


    @pytest.mark.r3_oracle(wl_scale)
    @pytest.mark.parametrize("n", [3, 40])
    def test_wl_scale(n):
        grid = np.random.default_rng(n).random((n, n), dtype=np.float32)
        out = np.empty_like(grid)
        wl_scale(n, grid, out)
        np.testing.assert_allclose(out, 2 * grid + 1, rtol=1e-6)
""")

BENCHMARK_TEST_PY = textwrap.dedent("""
    import numpy as np

    from wlmod import wl_scale


    def test_wl_scale_production(benchmark):
        grid = np.random.default_rng(1).random((700, 700), dtype=np.float32)
        out = np.empty_like(grid)
        benchmark(wl_scale, 700, grid, out)
""")

INI = textwrap.dedent("""
    [pytest]
    r3_search_pipeline = false
    r3_workers = 1
    r3_budget = 4
""")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "wl_scale.c").write_text(KERNEL_C)
    (tmp_path / "wlmod.py").write_text(MODULE_PY)
    (tmp_path / "test_oracle.py").write_text(ORACLE_TEST_PY)
    (tmp_path / "pytest.ini").write_text(INI)
    return tmp_path


def run(project: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                          cwd=project, capture_output=True, text=True, timeout=timeout)


def report(project: Path) -> dict:
    data = json.loads((project / ".r3" / "report.json").read_text())
    return {b["name"]: b for b in data["benchmarks"]}


def test_benchmark_test_is_a_workload_and_tuning_times_it(project: Path):
    (project / "test_bench.py").write_text(BENCHMARK_TEST_PY)
    result = run(project, "--r3-tune")
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    store = RecordingStore(project / ".r3" / "recordings")
    workloads = store.workloads("wl_scale")
    assert list(workloads.values()) == [1.0], out  # one launch: the benchmark ran once
    recordings = {r.key: r for r in store.load_all("wl_scale")}
    (key,) = workloads
    assert recordings[key].inputs["in"].shape == (700, 700)
    assert recordings[key].workload["origin"] == "test_bench.py::test_wl_scale_production"
    oracle = [r for r in recordings.values() if not r.is_workload]
    assert sorted(r.inputs["in"].shape for r in oracle) == [(3, 3), (40, 40)]
    assert "no workload recorded" not in out
    assert "workload test_bench.py::test_wl_scale_production [" in out
    markdown = (project / ".r3" / "report.md").read_text()
    assert "### Workloads of `wl_scale`" in markdown
    tuned = report(project)["wl_scale[tuned]"]["extra_info"]
    assert tuned["timed_on"] == "workloads"
    assert [w["shape"] for w in tuned["workloads"]] == [recordings[key].shape_signature]


MARKED_TEST_PY = textwrap.dedent("""
    import numpy as np
    import pytest

    from wlmod import wl_scale


    @pytest.mark.r3_workload(wl_scale, weight=5)
    def test_common_size():
        for _ in range(2):  # two launches, each counting 5
            grid = np.ones((300, 300), dtype=np.float32)
            wl_scale(300, grid, np.empty_like(grid))


    @pytest.mark.r3_workload("wl_scale")
    def test_rare_size():
        grid = np.ones((500, 500), dtype=np.float32)
        wl_scale(500, grid, np.empty_like(grid))
""")


def test_marked_workloads_are_weighted_and_are_no_oracle(project: Path):
    (project / "test_marked.py").write_text(MARKED_TEST_PY)
    result = run(project, "--r3-record")
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    store = RecordingStore(project / ".r3" / "recordings")
    by_shape = {r.inputs["in"].shape: r for r in store.load_all("wl_scale")}
    # one recording per shape (the same content launched twice is one), weighted
    assert by_shape[(300, 300)].workload["weight"] == 10.0
    assert by_shape[(500, 500)].workload["weight"] == 1.0
    assert not by_shape[(40, 40)].is_workload and not by_shape[(3, 3)].is_workload
    assert "workloads: 3 launch(es) in 2 benchmark/r3_workload test(s)" in out
    spec = json.loads((project / ".r3" / "recordings" / "wl_scale" / "kernel.json").read_text())
    assert spec["oracle_tests"] == ["test_oracle.py::test_wl_scale[3]",
                                    "test_oracle.py::test_wl_scale[40]"]
    # recording again replaces what each test recorded before: weights do not pile up
    assert run(project, "--r3-record").returncode == 0
    again = {r.inputs["in"].shape: r.weight for r in store.load_all("wl_scale")
             if r.is_workload}
    assert again == {(300, 300): 10.0, (500, 500): 1.0}


def test_bad_workload_marker_is_a_usage_error(project: Path):
    (project / "test_bad.py").write_text(textwrap.dedent("""
        import pytest

        from wlmod import wl_scale


        @pytest.mark.r3_workload(wl_scale, weight=0)
        def test_x():
            pass
    """))
    result = run(project, "--r3-record")
    assert result.returncode == pytest.ExitCode.USAGE_ERROR
    assert "r3_workload" in result.stderr and "positive number" in result.stderr, result.stderr


def test_without_workloads_tuning_says_it_timed_test_sized_inputs(project: Path):
    # an oracle input large enough for the faster order to show
    result = run(project, "--r3-tune")
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    lines = [line for line in out.splitlines() if "no workload recorded" in line]
    assert len(lines) == 1 and "benchmark" in lines[0], out
    assert "Timed on the oracle tests' inputs (no workload recorded): `wl_scale`" in (
        project / ".r3" / "report.md").read_text()
    assert "    workload " not in out


APP_PY = textwrap.dedent("""
    import sys

    import numpy as np

    from wlmod import wl_scale

    for seed, n in enumerate([200] * 7 + [400] * 2):
        grid = np.random.default_rng(seed).random((n, n), dtype=np.float32)
        wl_scale(n, grid, np.empty_like(grid))
    sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
""")


def record_app(project: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest_r3.cli", "record", *args],
                          cwd=project, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(
                              [str(project), os.environ.get("PYTHONPATH", "")])})


def test_record_command_samples_the_application_and_tuning_times_on_it(project: Path):
    (project / "app.py").write_text(APP_PY)
    result = record_app(project, "--first", "2", "--every", "3", "--", sys.executable,
                        "app.py")
    assert result.returncode == 0, result.stderr
    # 200x200 launched 7 times: launches 1, 2 (--first) and 5 (then every 3rd) captured,
    # each standing for 7/3 launches; 400x400 twice, both captured
    assert "wl_scale: 5 workload recording(s) standing for 9 launch(es)" in result.stdout
    store = RecordingStore(project / ".r3" / "recordings")
    weights = sorted((r.inputs["in"].shape, r.weight) for r in store.load_all("wl_scale"))
    assert weights == [((200, 200), pytest.approx(7 / 3))] * 3 + [((400, 400), 1.0)] * 2
    listing = subprocess.run([sys.executable, "-m", "pytest_r3.cli", "recordings"],
                             cwd=project, capture_output=True, text=True, timeout=60)
    assert listing.stdout.count("[workload x1]") == 2, listing.stdout
    assert all(r.workload["origin"].startswith("application: ") and
               r.workload["origin"].endswith("app.py") for r in store.load_all("wl_scale"))
    tuned = run(project, "--r3-tune")
    out = tuned.stdout + tuned.stderr
    assert tuned.returncode == 0, out
    assert "no workload recorded" not in out
    workloads = report(project)["wl_scale[tuned]"]["extra_info"]["workloads"]
    assert sorted(w["weight"] for w in workloads) == [1.0, 1.0] + [pytest.approx(7 / 3)] * 3


def test_record_command_passes_on_the_programs_failure(project: Path):
    (project / "app.py").write_text(APP_PY)
    result = record_app(project, "--", sys.executable, "app.py", "3")
    assert result.returncode == 3
    assert "exited with status 3" in result.stderr
    empty = record_app(project, "--", sys.executable, "-c", "pass")
    assert empty.returncode == 1 and "no launch of a declared kernel" in empty.stderr
    assert record_app(project).returncode == 2


def test_recording_is_off_without_the_environment_variable(project: Path):
    code = ("import sys, pytest_r3; from pytest_r3.kernel import declaration; "
            "print(len(declaration._interceptors), 'pytest_r3.record.application' in "
            "sys.modules, 'numpy' in sys.modules)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_R3_RECORD")}
    off = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, check=True)
    assert off.stdout.split() == ["0", "False", "False"]
    on = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                        env={**env, "PYTEST_R3_RECORD": str(project / ".r3")}, check=True)
    assert on.stdout.split()[:2] == ["1", "True"]


def lock_order(project: Path, order: int) -> None:
    """An r3.lock entry naming ORDER=``order`` for wl_scale, as --r3-tune writes them."""
    import pytest_r3 as r3
    from pytest_r3.kernel.lock import VERSION, source_fingerprint

    kernel = r3.kernel(str(project / "wl_scale.c"), entry="wl_scale", name="wl_scale")
    entry = {"source_hash": source_fingerprint(kernel), "features_hash": None,
             "macros": {"ORDER": order}, "pipeline": {}, "speedup": 10.0}
    (project / "r3.lock").write_text(json.dumps({"version": VERSION, "kernels": {
        "wl_scale": {kernel.backend.target_name(): entry}}}))


def test_check_threshold_in_pytest_benchmark_syntax_checks_every_workload(project: Path):
    (project / "test_bench.py").write_text(BENCHMARK_TEST_PY)
    lock_order(project, 1)  # the row order: far faster than the strided baseline
    passed = run(project, "--r3-check", "--r3-check-threshold", "median:5%")
    out = passed.stdout + passed.stderr
    assert passed.returncode == 0, out
    assert "workload test_bench.py::test_wl_scale_production [" in out
    # the baseline becomes the row order (same C source: the lock entry still fits) and the
    # lock names the strided one: clearly slower
    (project / "wlmod.py").write_text(MODULE_PY.replace("[0, 1]", "[1, 0]"))
    lock_order(project, 0)
    failed = run(project, "--r3-check", "--r3-check-threshold", "median:5%")
    out = failed.stdout + failed.stderr
    assert failed.returncode == 1, out
    assert "FAIL: slower" in out
    assert ("workload test_bench.py::test_wl_scale_production [in(700, 700);out(700, 700);"
            "n=700]: the locked variant against the baseline: Field 'median' has failed "
            "PercentageRegressionCheck") in out
    markdown = (project / ".r3" / "check-report.md").read_text()  # what CI posts on the PR
    assert markdown.startswith("## pytest-r3 check report")
    assert "| FAIL: slower |" in markdown and "### Workloads of `wl_scale`" in markdown


def test_bad_check_threshold_is_a_usage_error(project: Path):
    result = run(project, "--r3-check", "--r3-check-threshold", "median:five")
    assert result.returncode == pytest.ExitCode.USAGE_ERROR
    assert "--r3-check-threshold: 'median:five' is not a threshold" in result.stderr


EXAMPLE = Path(__file__).resolve().parents[1] / "example_project"


def test_example_app_is_recorded_and_its_launches_time_the_tuning(tmp_path: Path):
    project = tmp_path / "example_project"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns(".r3", "r3.lock",
                                                                    "__pycache__"))
    recorded = record_app(project, "--", sys.executable, "example_app.py", "5")
    assert recorded.returncode == 0, recorded.stderr
    assert "jacobi2d: 1 workload recording(s) standing for 5 launch(es)" in recorded.stdout
    assert "scaled_add: 1 workload recording(s) standing for 8 launch(es)" in recorded.stdout
    tuned = run(project, "--r3-tune", "--r3-kernels", "scaled_add", "-o", "r3_budget=3",
                "-o", "r3_search_pipeline=false", "-o", "r3_workers=1", "-k", "scaled_add")
    out = tuned.stdout + tuned.stderr
    assert tuned.returncode == 0, out
    assert ("pytest-r3: scaled_add: timing on workloads (weighted total): application: "
            f"{sys.executable} example_app.py 5 x8, "
            "tests/test_benchmarks.py::test_scaled_add_production x1") in out


def _recording(value: float, workload: dict | None = None):
    from pytest_r3.record.store import Recording

    x = np.full(16, value, dtype=np.float32)
    params = [{"name": "n", "dtype": "int64", "is_pointer": False, "written": False,
               "ctype": "long"},
              {"name": "x", "dtype": "float32", "is_pointer": True, "written": True,
               "ctype": "float *"}]
    return Recording("k", params, {"n": 16}, {"x": x}, {"x": x * 2}, None, ["t"], "h",
                     workload=workload)


def test_store_keeps_workloads_apart_and_merges_them_by_origin(tmp_path: Path):
    store = RecordingStore(tmp_path)
    oracle = _recording(1.0)
    store.save("k", [oracle, _recording(1.0, {"weight": 3.0, "origin": "app", "run": "r1"})],
               2**20)
    # the same launch as an oracle's and as a workload: two recordings, one of each role
    assert sorted(r.is_workload for r in store.load_all("k")) == [False, True]
    assert store.workloads("k") == {_recording(1.0, {"weight": 1, "origin": "app",
                                                     "run": "r1"}).key: 3.0}
    # another process of the same session: its launches add up
    store.save("k", [_recording(1.0, {"weight": 2.0, "origin": "app", "run": "r1"})], 2**20)
    assert list(store.workloads("k").values()) == [5.0]
    # the same origin recorded again: it replaces what that origin recorded before
    store.save("k", [_recording(7.0, {"weight": 1.0, "origin": "app", "run": "r2"})], 2**20)
    (kept,) = [r for r in store.load_all("k") if r.is_workload]
    assert kept.inputs["x"][0] == 7.0 and kept.weight == 1.0
    assert len(list(tmp_path.glob("k/*.npz"))) == 2  # the replaced files are gone
    # an oracle save of a test run leaves the workloads alone
    store.save("k", [oracle], 2**20)
    assert list(store.workloads("k").values()) == [1.0]
    assert [r.key for r in store.load_all("k") if not r.is_workload] == [oracle.key]


def test_workloads_over_their_cap_drop_the_lightest(tmp_path: Path):
    store = RecordingStore(tmp_path)
    heavy = _recording(1.0, {"weight": 9.0, "origin": "a", "run": "r"})
    light = _recording(2.0, {"weight": 1.0, "origin": "b", "run": "r"})
    index = store.save("k", [light, heavy], 2**20, workload_cap_bytes=heavy.nbytes)
    assert index["workloads"] == {heavy.key: 9.0}
    assert [d["key"] for d in index["dropped"]] == [light.key]


def test_malformed_workload_metadata_is_named(tmp_path: Path):
    from pytest_r3.record.store import CorruptRecording

    store = RecordingStore(tmp_path)
    recording = _recording(1.0, {"weight": 1.0, "origin": "a", "run": "r"})
    store.write(recording)
    meta_path = tmp_path / "k" / f"{recording.key}.json"
    meta = json.loads(meta_path.read_text())
    meta["workload"]["weight"] = -1
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(CorruptRecording, match="workload weight -1.0 is not positive"):
        store.read("k", recording.key)


def test_the_worker_must_send_one_figure_per_timed_case():
    from pytest_r3.replay.measurement import MalformedTiming, Timing

    case = {"weight": 2.0, "baseline_samples": [2e-3], "candidate_samples": [1e-3]}
    timing = {"format": 2, "basis": "baseline", "baseline_samples": [4e-3],
              "candidate_samples": [2e-3], "repeats": [1], "cases": [case]}
    assert Timing.from_dict(timing, [2.0]).cases[0].speedup == pytest.approx(2.0)
    with pytest.raises(MalformedTiming):  # figures for other weights than the judge sent
        Timing.from_dict(timing, [1.0])
    with pytest.raises(MalformedTiming):
        Timing.from_dict({**timing, "cases": [{**case, "candidate_samples": [-1.0]}]}, [2.0])


def test_workloads_under_xdist(project: Path):
    pytest.importorskip("xdist")
    (project / "test_bench.py").write_text(BENCHMARK_TEST_PY)
    (project / "test_marked.py").write_text(MARKED_TEST_PY)
    result = run(project, "-n", "2", "--r3-record")
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "workloads: 4 launch(es) in 3 benchmark/r3_workload test(s)" in out, out
    weights = sorted(RecordingStore(project / ".r3" / "recordings").workloads("wl_scale")
                     .values())
    assert weights == [1.0, 1.0, 10.0]


def test_a_large_speedup_with_a_wide_spread_is_not_noise():
    """Production-sized launches of a cache-bound baseline spread widely (1.2 ms in one
    round, 13 ms in the next): a 15x median whose interval runs from 5x to 40x is no noise,
    and was called noise when the spread was compared with the distance from 1 in ratio
    units. What decides is where the whole interval lies against the band."""
    from pytest_r3.replay.statistics import verdict

    assert verdict((5.0, 40.0)) == "faster"
    assert verdict((1.03, 1.07)) == "faster"        # narrow, above the floor
    assert verdict((0.98, 1.30)) == "within"        # the interval reaches 1
    assert verdict((0.99, 1.02)) == "within"        # under the 2% floor
    assert verdict((1.01, 1.05)) == "within"        # starts inside the floor: no claim
    assert verdict((1.03, 1.07), band=0.05) == "within"  # inside this machine's band
    assert verdict((0.2, 0.5)) == "slower"          # clearly slower is no noise either


def test_an_entry_timed_on_other_inputs_is_replaced_not_compared(tmp_path: Path):
    """A lock entry's speedup measured on test-sized inputs says nothing about one measured
    on workloads: once workloads exist, the new entry replaces it even with a lower one."""
    from pytest_r3.kernel.lock import LockFile, merge_entry

    lock = LockFile(tmp_path / "r3.lock")
    old = {"source_hash": "s", "macros": {"T": 8}, "pipeline": {}, "speedup": 5.0,
           "evaluations": 10}
    merge_entry(lock, "k", "cpu", old)
    new = {**old, "macros": {"T": 32}, "speedup": 2.0, "timed_on": "workloads 1234"}
    decision = merge_entry(lock, "k", "cpu", new)
    assert decision.action == "replaced" and "timed on other inputs" in decision.reason
    assert lock.entry("k", "cpu")["macros"] == {"T": 32}
    # the same inputs again: compared as before, the better entry stays
    assert merge_entry(lock, "k", "cpu", {**new, "speedup": 1.5}).action == "kept"
