"""State that survives concurrency, crashes and corruption: r3.lock, the recordings, the
result store and the accepted examples, with real files and real processes."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import stat
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import environment_without_pytest

import pytest_r3 as r3
from pytest_r3.errors import (
    CorruptStateError,
    CorruptStateWarning,
    R3Error,
    StateLockTimeout,
    StateWriteError,
)
from pytest_r3.kernel import lock as lockmod
from pytest_r3.kernel.lock import LockFile, merge_entry, source_fingerprint, update_entry
from pytest_r3.outputs import append_line, file_lock, write_json_atomic, write_text_atomic
from pytest_r3.record.store import RecordingStore, capture

SPAWN = multiprocessing.get_context("spawn")
ROOT = Path(__file__).resolve().parent.parent

KERNEL_C = """\
#ifndef STEP
#define STEP 1
#endif
void bump(long n, float *y)
{
    for (long i = 0; i < n; ++i)
        y[i] += STEP;
}
"""


def entry(speedup: float = 1.5, evaluations: int = 40, source_hash: str = "s1", **more):
    return {"source_hash": source_hash, "macros": {"STEP": 2}, "pipeline": {},
            "speedup": speedup, "evaluations": evaluations, **more}


def run_python(code: str, cwd: Path) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter (``app.py`` is run as a script)."""
    env = environment_without_pytest()
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    args = ["app.py"] if code == "app.py" else ["-c", textwrap.dedent(code)]
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=env)


# -- writes keep file modes ------------------------------------------------------------------

@pytest.mark.parametrize("mode", [0o644, 0o664, 0o600, 0o640])
def test_an_atomic_rewrite_keeps_the_file_mode(tmp_path, mode):
    path = tmp_path / "r3.lock"
    path.write_text("{}")
    path.chmod(mode)
    write_json_atomic(path, {"version": 1, "kernels": {}})
    assert stat.S_IMODE(path.stat().st_mode) == mode
    assert json.loads(path.read_text()) == {"version": 1, "kernels": {}}


def test_a_new_file_gets_the_umask_default(tmp_path):
    old = os.umask(0o022)
    try:
        path = write_text_atomic(tmp_path / "new" / "report.md", "hello\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert not list(path.parent.glob(".*"))  # no temporary, no lock file left


@pytest.mark.parametrize("write", [
    lambda path: write_text_atomic(path, "new\n"),
    lambda path: LockFile(path).save(),
    lambda path: update_entry(path, "k", "cpu-x", entry()),
    lambda path: append_line(path, "new"),
], ids=["atomic", "lock-save", "lock-update", "append"])
def test_a_state_file_planted_as_a_symlink_is_refused_not_written_through(tmp_path, write):
    outside = tmp_path / "outside.json"  # e.g. a user's file, from a committed r3.lock link
    precious = '{"kernels": {}, "version": 1}\n'
    outside.write_text(precious)
    project = tmp_path / "project"
    project.mkdir()
    link = project / "r3.lock"
    link.symlink_to(outside)
    with pytest.raises(StateWriteError, match="is a symbolic link.*never writes through") as info:
        write(link)
    assert str(link) in str(info.value) and "\n" not in str(info.value)
    assert outside.read_text() == precious and link.is_symlink()
    assert sorted(p.name for p in project.iterdir()) == ["r3.lock"]  # no temporary left


def test_a_state_folder_planted_as_a_symlink_is_refused_below_the_root(tmp_path):
    from pytest_r3.llm.patch import write_patch

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    project = tmp_path / "project"
    (project / ".r3").mkdir(parents=True)
    (project / ".r3" / "patches").symlink_to(outside)
    source = project / "k.c"
    source.write_text("int k(void) { return 1; }\n")
    with pytest.raises(StateWriteError, match=r"\.r3/patches is a symbolic link"):
        write_patch(project / ".r3" / "patches", "k", source, project, "int k(void);\n")
    (project / ".r3" / "patches").unlink()
    (project / ".r3").rmdir()
    (project / ".r3").symlink_to(outside)
    with pytest.raises(StateWriteError, match=r"\.r3 is a symbolic link"):
        write_text_atomic(project / ".r3" / "report.md", "report\n", root=project)
    assert list(outside.iterdir()) == []


# -- the file lock -----------------------------------------------------------------------------

def _count_up(path: str, times: int) -> None:
    for _ in range(times):
        with file_lock(path):
            value = json.loads(Path(path).read_text()) if Path(path).exists() else 0
            time.sleep(0.001)
            write_json_atomic(path, value + 1)


def test_read_merge_write_under_the_file_lock_loses_nothing(tmp_path):
    path = tmp_path / "counter.json"
    workers = [SPAWN.Process(target=_count_up, args=(str(path), 40)) for _ in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    assert json.loads(path.read_text()) == 120


def _hold(path: str, ready, release) -> None:
    with file_lock(path):
        ready.set()
        release.wait(30)


def test_a_lock_held_too_long_is_a_clear_error(tmp_path):
    path = tmp_path / "r3.lock"
    ready, release = SPAWN.Event(), SPAWN.Event()
    holder = SPAWN.Process(target=_hold, args=(str(path), ready, release))
    holder.start()
    try:
        assert ready.wait(30)
        with pytest.raises(StateLockTimeout) as info:
            with file_lock(path, timeout=0.3):
                pass
        assert str(path) in str(info.value) and "another pytest-r3 run" in str(info.value)
        assert isinstance(info.value, R3Error)
    finally:
        release.set()
        holder.join(30)
    with file_lock(path, timeout=5):  # released when its holder let go
        pass


def test_a_lock_is_released_when_its_holder_is_killed(tmp_path):
    path = tmp_path / "r3.lock"
    ready, release = SPAWN.Event(), SPAWN.Event()
    holder = SPAWN.Process(target=_hold, args=(str(path), ready, release))
    holder.start()
    assert ready.wait(30)
    holder.kill()
    holder.join(30)
    with file_lock(path, timeout=5):
        pass


# -- r3.lock: concurrent runs and which entry wins -----------------------------------------------

def _tune_kernels(path: str, prefix: str, count: int) -> None:
    for index in range(count):
        update_entry(path, f"{prefix}{index}", "cpu-x", entry(1.0 + index / 10))


def test_concurrent_runs_on_different_kernels_keep_every_entry(tmp_path):
    path = tmp_path / "r3.lock"
    runs = [SPAWN.Process(target=_tune_kernels, args=(str(path), prefix, 25))
            for prefix in ("a", "b", "c")]
    for run in runs:
        run.start()
    for run in runs:
        run.join(120)
        assert run.exitcode == 0
    lock = LockFile.load(path)
    assert sorted(name for name, _, _ in lock.entries()) == sorted(
        f"{p}{i}" for p in "abc" for i in range(25))


def _tune_same(path: str, speedup: float, delay: float) -> None:
    time.sleep(delay)
    update_entry(path, "shared", "cpu-x", entry(speedup, 40))


@pytest.mark.parametrize("delays", [(0.0, 0.0), (0.0, 0.3), (0.3, 0.0)])
def test_on_the_same_kernel_the_better_measured_entry_wins_in_any_order(tmp_path, delays):
    path = tmp_path / "r3.lock"
    runs = [SPAWN.Process(target=_tune_same, args=(str(path), speedup, delay))
            for speedup, delay in zip((1.4, 2.1), delays)]
    for run in runs:
        run.start()
    for run in runs:
        run.join(60)
        assert run.exitcode == 0
    assert LockFile.load(path).entry("shared", "cpu-x")["speedup"] == 2.1


def test_a_run_that_finds_nothing_keeps_the_committed_entry(tmp_path):
    path = tmp_path / "r3.lock"
    update_entry(path, "k", "cpu-x", entry(1.8, 60))
    decision = update_entry(path, "k", "cpu-x", None, source_hash="s1")
    assert decision.action == "kept" and "--r3-retune" in decision.reason
    assert LockFile.load(path).entry("k", "cpu-x")["speedup"] == 1.8


def test_a_smaller_budget_never_replaces_an_entry(tmp_path):
    path = tmp_path / "r3.lock"
    update_entry(path, "k", "cpu-x", entry(1.8, 60))
    decision = update_entry(path, "k", "cpu-x", entry(2.5, 1))  # --r3-budget=1, lucky
    assert decision.action == "kept" and "at least 60" in decision.reason
    assert LockFile.load(path).entry("k", "cpu-x")["evaluations"] == 60
    decision = update_entry(path, "k", "cpu-x", entry(1.9, 60))  # same budget, better
    assert decision.action == "replaced"
    decision = update_entry(path, "k", "cpu-x", entry(1.85, 200))  # bigger budget, worse
    assert decision.action == "kept"
    assert LockFile.load(path).entry("k", "cpu-x")["speedup"] == 1.9


def test_retune_replaces_or_removes_explicitly(tmp_path):
    path = tmp_path / "r3.lock"
    update_entry(path, "k", "cpu-x", entry(1.8, 60))
    assert update_entry(path, "k", "cpu-x", entry(1.2, 5), retune=True).action == "replaced"
    assert LockFile.load(path).entry("k", "cpu-x")["speedup"] == 1.2
    assert update_entry(path, "k", "cpu-x", None, retune=True).action == "removed"
    assert LockFile.load(path).entry("k", "cpu-x") is None


def test_a_stale_entry_is_replaced_or_removed_by_any_run():
    lock = LockFile("unused")
    lock.set_entry("k", "cpu-x", entry(3.0, 500, source_hash="old"))
    decision = merge_entry(lock, "k", "cpu-x", entry(1.1, 2, source_hash="new"))
    assert decision.action == "replaced" and "stale" in decision.reason
    lock.set_entry("k", "cpu-x", entry(3.0, 500, source_hash="old"))
    decision = merge_entry(lock, "k", "cpu-x", None, source_hash="new")
    assert decision.action == "removed" and lock.entry("k", "cpu-x") is None
    # an entry waiting for its rewrite's patch is not stale for the source it rewrote
    lock.set_entry("k", "cpu-x", entry(3.0, 50, source_hash="orig", rewrite_hash="rw"))
    assert merge_entry(lock, "k", "cpu-x", None, source_hash="orig").action == "kept"
    assert merge_entry(lock, "k", "cpu-x", None, source_hash="rw").action == "kept"
    # tuned on other CPU features: stale for this machine
    lock.set_entry("k", "cpu-x", entry(3.0, 50, features_hash="f-old"))
    decision = merge_entry(lock, "k", "cpu-x", entry(1.1, 2, features_hash="f-new"))
    assert decision.action == "replaced"


def test_update_keeps_other_targets_and_the_file_mode(tmp_path):
    path = tmp_path / "r3.lock"
    update_entry(path, "k", "cuda-sm_90", entry(2.0, 10))
    path.chmod(0o664)
    update_entry(path, "k", "cpu-x", entry(1.5, 10))
    lock = LockFile.load(path)
    assert {t for _, t, _ in lock.entries()} == {"cuda-sm_90", "cpu-x"}
    assert stat.S_IMODE(path.stat().st_mode) == 0o664
    before = path.stat().st_mtime_ns
    update_entry(path, "k", "cpu-x", None, source_hash="s1")  # kept: not rewritten
    assert path.stat().st_mtime_ns == before


def test_update_refuses_to_overwrite_a_corrupt_lock(tmp_path):
    path = tmp_path / "r3.lock"
    conflict = '{\n<<<<<<< HEAD\n  "version": 1\n=======\n>>>>>>> other\n}\n'
    path.write_text(conflict)
    with pytest.raises(CorruptStateError, match="merge-conflict markers") as info:
        update_entry(path, "k", "cpu-x", entry())
    assert str(path) in str(info.value) and "line 2" in str(info.value)
    assert "resolve the conflict" in str(info.value)
    assert path.read_text() == conflict


# -- a corrupt r3.lock: one warning, baselines, the application keeps running -----------------

APP = """\
import warnings
import numpy as np
import pytest_r3 as r3

warnings.simplefilter("default")
bump = r3.kernel("bump.c", entry="bump", name="state_bump", tune={"STEP": [1, 2]})
for _ in range(3):
    y = np.zeros(4, dtype=np.float32)
    bump(4, y)
    print("y =", y.tolist(), bump.active.macro_dict)
"""


@pytest.fixture
def app(tmp_path):
    (tmp_path / "bump.c").write_text(KERNEL_C)
    (tmp_path / "app.py").write_text(APP)
    return tmp_path


def good_lock(app: Path) -> dict:
    kernel = r3.kernel(app / "bump.c", entry="bump", name="state_bump_probe")
    target = kernel.backend.target_name()
    return {"version": 1, "kernels": {"state_bump": {target: {
        "source_hash": source_fingerprint(kernel), "macros": {"STEP": 2}, "pipeline": {}}}}}


def test_a_valid_lock_is_used(app):
    (app / "r3.lock").write_text(json.dumps(good_lock(app)))
    result = run_python("app.py", app)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "y = [2.0, 2.0, 2.0, 2.0] {'STEP': 2}"
    assert "Warning" not in result.stderr


@pytest.mark.parametrize("damage, problem", [
    (lambda lock: "not json {", "is not valid JSON"),
    (lambda lock: json.dumps({**lock, "kernels": []}), "'kernels' must be an object"),
    (lambda lock: json.dumps({"kernels": lock["kernels"]}), "'version' must be 1"),
    (lambda lock: json.dumps({**lock, "version": 7}), "written by a newer pytest-r3"),
    (lambda lock: json.dumps({**lock, "kernels": {"state_bump": {"t": {"macros": {}}}}}),
     "'source_hash' must be a string"),
    (lambda lock: json.dumps({**lock, "kernels": {"state_bump": {
        t: {**e, "macros": ["STEP", 2]} for t, e in lock["kernels"]["state_bump"].items()}}}),
     "'macros' must be an object"),
    (lambda lock: json.dumps({**lock, "kernels": {"state_bump": ["x"]}}),
     "must be an object of targets"),
    (lambda lock: "<<<<<<< HEAD\n" + json.dumps(lock) + "\n=======\n{}\n>>>>>>> other\n",
     "has merge-conflict markers (line 1: <<<<<<<)"),
])
def test_a_corrupt_lock_gives_one_warning_and_the_baseline(app, damage, problem):
    (app / "r3.lock").write_text(damage(good_lock(app)))
    result = run_python("app.py", app)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["y = [1.0, 1.0, 1.0, 1.0] {'STEP': 1}"] * 3
    warned = [line for line in result.stderr.splitlines() if "CorruptStateWarning" in line]
    assert len(warned) == 1, result.stderr
    assert str(app / "r3.lock") in warned[0] and problem in warned[0]
    assert "Traceback" not in result.stderr


def test_locked_variant_of_a_corrupt_lock_in_process(app, monkeypatch):
    monkeypatch.setenv(lockmod.LOCK_ENV, str(app / "r3.lock"))
    (app / "r3.lock").write_text(json.dumps({"version": 1, "kernels": {"k": {"t": 3}}}))
    kernel = r3.kernel(app / "bump.c", entry="bump", name="k", tune={"STEP": [1, 2]})
    with pytest.warns(CorruptStateWarning, match="an entry must be an object"):
        assert lockmod.locked_variant(kernel) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert lockmod.locked_variant(kernel) is None  # the same file: no second warning
    with pytest.raises(CorruptStateError, match="kernels.k.t: an entry must be an object"):
        LockFile.load(app / "r3.lock")


@pytest.mark.parametrize("pipeline, environment, problem", [
    ({"unroll_count": 100000, "vector_width": 1024, "interleave_count": 1024}, {},
     "pipeline unroll_count=100000 is outside what tuning explores"),
    ({"unroll_count": 8, "vector_width": 8}, {"PYTEST_R3_LOCKED_BUILD_TIMEOUT": "0.001"},
     "did not compile within 0.001 s"),
], ids=["out-of-bounds", "time-limit"])
def test_a_locked_variant_that_would_hang_the_application_falls_back_to_the_baseline(
        app, pipeline, environment, problem):
    """An entry that matches the source but asks LLVM for absurd loop hints hung the first
    call for minutes: it is refused by its bounds when loaded, and a locked variant that
    does not compile within the time limit runs the baseline; one warning each."""
    lock = good_lock(app)
    for entry in lock["kernels"]["state_bump"].values():
        entry["pipeline"] = pipeline
    (app / "r3.lock").write_text(json.dumps(lock))
    (app / "app.py").write_text(f"import os\nos.environ.update({environment!r})\n" + APP)
    started = time.perf_counter()
    result = run_python("app.py", app)
    assert result.returncode == 0, result.stderr
    assert time.perf_counter() - started < 30
    assert result.stdout.splitlines() == ["y = [1.0, 1.0, 1.0, 1.0] {'STEP': 1}"] * 3
    warned = [line for line in result.stderr.splitlines() if "Warning" in line]
    assert len(warned) == 1 and problem in warned[0], result.stderr
    assert "state_bump" in warned[0] and "baseline" in warned[0]


# -- the source fingerprint covers included headers ----------------------------------------------

def test_the_fingerprint_covers_local_headers(tmp_path):
    (tmp_path / "inc").mkdir()
    (tmp_path / "step.h").write_text('#include "inc/deep.h"\n#define STEP 2\n')
    (tmp_path / "inc" / "deep.h").write_text("#define DEEP 1\n")
    (tmp_path / "k.c").write_text('#include "step.h"\n#include <stddef.h>\n'
                                  "void bump(long n, float *y)\n"
                                  "{ for (long i = 0; i < n; ++i) y[i] += STEP * DEEP; }\n")
    kernel = r3.kernel(tmp_path / "k.c", entry="bump", name="fp_bump")
    first = source_fingerprint(kernel)
    assert first != kernel.source.hash  # headers are in it
    assert [name for name, _ in lockmod.local_headers(kernel.source)] == [
        "step.h", "step.h>inc/deep.h"]
    (tmp_path / "inc" / "deep.h").write_text("#define DEEP 3\n")
    second = source_fingerprint(kernel)
    assert second != first
    (tmp_path / "inc" / "deep.h").write_text("#define DEEP 1\n")
    assert source_fingerprint(kernel) == first


def test_without_local_headers_the_fingerprint_is_the_text_hash(tmp_path):
    (tmp_path / "k.c").write_text("#include <stdint.h>\n" + KERNEL_C)
    kernel = r3.kernel(tmp_path / "k.c", entry="bump", name="fp_plain")
    assert source_fingerprint(kernel) == kernel.source.hash
    inline = r3.kernel(KERNEL_C, entry="bump", name="fp_inline")
    assert source_fingerprint(inline) == inline.source.hash


def test_a_changed_header_makes_the_lock_entry_stale(app, monkeypatch):
    (app / "step.h").write_text("#define STEP_BASE 1\n")
    (app / "bump.c").write_text('#include "step.h"\n' + KERNEL_C)
    monkeypatch.setenv(lockmod.LOCK_ENV, str(app / "r3.lock"))
    kernel = r3.kernel(app / "bump.c", entry="bump", name="hdr_bump", tune={"STEP": [1, 2]})
    target = kernel.backend.target_name()
    lock = {"version": 1, "kernels": {"hdr_bump": {target: {
        "source_hash": source_fingerprint(kernel), "macros": {"STEP": 2}, "pipeline": {}}}}}
    (app / "r3.lock").write_text(json.dumps(lock))
    assert lockmod.locked_variant(kernel).macro_dict == {"STEP": 2}
    (app / "step.h").write_text("#define STEP_BASE 2\n")
    assert lockmod.locked_variant(kernel) is None
    assert "stale" in lockmod.entry_problem(kernel, lock["kernels"]["hdr_bump"][target])


# -- the result store's key ----------------------------------------------------------------------

def test_the_result_context_covers_everything_that_changes_a_result():
    from pytest_r3.search.results import result_context, toolchain_version

    base = dict(source_fingerprint="s", target="cpu-x", recordings=["a", "b"],
                tolerance={"rtol": 1e-5}, toolchain="clang 15; llvmlite 0.41")
    reference = result_context(**base)
    assert result_context(**{**base, "recordings": ["b", "a"]}) == reference
    for change in ({"source_fingerprint": "t"}, {"target": "cpu-y"},
                   {"recordings": ["a"]}, {"tolerance": {"rtol": 1e-3}},
                   {"toolchain": "clang 16; llvmlite 0.42"}, {"extra": {"features": "+avx"}}):
        assert result_context(**{**base, **change}) != reference, change
    from pytest_r3.backends.clang import find_clang

    version = toolchain_version()
    import llvmlite

    assert find_clang().version in version and llvmlite.__version__ in version


def test_a_result_store_sees_only_its_context(tmp_path):
    from pytest_r3.search.results import ResultStore

    ResultStore(tmp_path, "k", "cpu-x", context="c1").add("key1", {}, {"status": "ok"})
    assert "key1" in ResultStore(tmp_path, "k", "cpu-x", context="c1")
    assert "key1" not in ResultStore(tmp_path, "k", "cpu-x", context="c2")
    assert "key1" not in ResultStore(tmp_path, "k", "cpu-x")


def test_a_torn_last_line_does_not_swallow_the_next_result(tmp_path):
    from pytest_r3.search.results import ResultStore

    store = ResultStore(tmp_path, "k", "cpu-x")
    store.add("first", {}, {"status": "ok"})
    with open(store.path, "a") as stream:  # a run killed in the middle of a line
        stream.write('{"key": "torn", "resu')
    ResultStore(tmp_path, "k", "cpu-x").add("second", {}, {"status": "ok"})
    again = ResultStore(tmp_path, "k", "cpu-x")
    assert "first" in again and "second" in again and len(again) == 2


def test_a_stored_result_that_cannot_be_read_is_measured_again(tmp_path):
    """A stored timing no version could have written (samples missing) reads as no result:
    the tuner evaluates that configuration again instead of failing or trusting it."""
    from pytest_r3.search.results import ResultStore

    store = ResultStore(tmp_path, "k", "cpu-x")
    store.add("good", {}, {"status": "crash", "timing": {}})
    store.add("bad", {}, {"status": "ok", "timing": {"speedup": 3.0}})
    again = ResultStore(tmp_path, "k", "cpu-x")
    assert again.result("good").status == "crash"
    assert "bad" in again and again.result("bad") is None
    assert again.result("absent") is None


# -- recordings: concurrent saves, corrupt files -------------------------------------------------

def _record(root: str, source: str, seeds: list[int], slow: bool) -> None:
    from pytest_r3.record import store as store_module

    kernel = r3.kernel(source, entry="bump", name="rec_bump", tune={"STEP": [1, 2]})
    if slow:  # widen the window between reading the store and writing its index
        choose = store_module.select

        def select(*args, **kwargs):
            time.sleep(0.5)
            return choose(*args, **kwargs)

        store_module.select = select
    recordings = []
    for seed in seeds:
        y = np.random.default_rng(seed).random(8 + seed, dtype=np.float32)
        launcher = kernel.build()
        recordings.append(capture(kernel, (len(y), y), lambda a=y, b=launcher: b(len(a), a),
                                  f"t::{seed}")[1])
    RecordingStore(root).save("rec_bump", recordings, cap_bytes=1 << 20)


def test_concurrent_recording_runs_keep_every_recording(tmp_path):
    source = tmp_path / "bump.c"
    source.write_text(KERNEL_C)
    runs = [SPAWN.Process(target=_record, args=(str(tmp_path / "rec"), str(source), seeds,
                                                True))
            for seeds in ([1, 2], [3, 4])]
    for run in runs:
        run.start()
    for run in runs:
        run.join(120)
        assert run.exitcode == 0
    store = RecordingStore(tmp_path / "rec")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing unreadable either
        assert len(store.keys("rec_bump")) == 4
        assert sorted(t for r in store.load_all("rec_bump") for t in r.tests) == [
            "t::1", "t::2", "t::3", "t::4"]


@pytest.fixture
def recorded(tmp_path):
    source = tmp_path / "bump.c"
    source.write_text(KERNEL_C)
    _record(str(tmp_path / "rec"), str(source), [1, 2, 3], False)
    store = RecordingStore(tmp_path / "rec")
    return store, store.keys("rec_bump"), store.kernel_dir("rec_bump"), str(source)


@pytest.mark.parametrize("damage", ["truncate", "garbage json", "missing npz"])
def test_a_bad_recording_is_skipped_with_one_warning_naming_it(recorded, damage):
    store, keys, folder, _ = recorded
    bad = keys[1]
    if damage == "truncate":
        path = folder / f"{bad}.npz"
        path.write_bytes(path.read_bytes()[:100])
    elif damage == "garbage json":
        path = folder / f"{bad}.json"
        path.write_text("{ garbage")
    else:
        path = folder / f"{bad}.npz"
        path.unlink()
    with pytest.warns(CorruptStateWarning) as caught:
        assert store.keys("rec_bump") == [keys[0], keys[2]]
        assert [r.key for r in store.load_all("rec_bump")] == [keys[0], keys[2]]
    assert len(caught) == 1, [str(w.message) for w in caught]
    message = str(caught[0].message)
    assert str(path) in message and "\n" not in message and "--r3-record" in message


def test_recording_again_repairs_a_truncated_recording(recorded, tmp_path):
    store, keys, folder, source = recorded
    path = folder / f"{keys[0]}.npz"
    path.write_bytes(path.read_bytes()[:50])
    seed = [s for s in (1, 2, 3) if json.loads((folder / f"{keys[0]}.json").read_text())[
        "tests"] == [f"t::{s}"]]
    _record(str(tmp_path / "rec"), source, seed, False)  # the same launch, recorded again
    fresh = RecordingStore(tmp_path / "rec")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert sorted(fresh.keys("rec_bump")) == sorted(keys)
        assert fresh.read("rec_bump", keys[0]).outputs["y"].shape[0] > 0


def test_a_garbage_index_is_rebuilt_from_the_files(recorded):
    store, keys, folder, _ = recorded
    (folder / "index.json").write_text("\x00garbage")
    with pytest.warns(CorruptStateWarning, match="index.json is unusable"):
        assert sorted(store.keys("rec_bump")) == sorted(keys)
    index = json.loads((folder / "index.json").read_text())
    assert sorted(index["kept"]) == sorted(keys) and index["rebuilt"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert sorted(RecordingStore(store.root).keys("rec_bump")) == sorted(keys)


def test_a_garbage_accepted_examples_file_is_ignored_and_rewritten(tmp_path):
    from pytest_r3.llm.retrieval import ExampleIndex

    path = tmp_path / "accepted.json"
    path.write_text("[{ not json")
    with pytest.warns(CorruptStateWarning, match="accepted.json"):
        index = ExampleIndex(path)
    index.remember("k", "before", "after", 1.5)
    assert [i["kernel"] for i in json.loads(path.read_text())] == ["k"]


def _remember(path: str, kernel: str) -> None:
    from pytest_r3.llm.retrieval import ExampleIndex

    for number in range(15):
        ExampleIndex(Path(path)).remember(f"{kernel}{number}", "b", "a", 1.5)


def test_concurrent_runs_keep_every_accepted_example(tmp_path):
    path = tmp_path / "accepted.json"
    runs = [SPAWN.Process(target=_remember, args=(str(path), name)) for name in "xy"]
    for run in runs:
        run.start()
    for run in runs:
        run.join(60)
        assert run.exitcode == 0
    assert len(json.loads(path.read_text())) == 30


# -- read-only folders and full disks ------------------------------------------------------------

def _can_unshare() -> bool:
    if shutil.which("unshare") is None or os.geteuid() != 0:
        return False
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"],
                           capture_output=True)
    return probe.returncode == 0


WRITE_STATE = """\
import sys
from pathlib import Path
from pytest_r3.errors import StateWriteError
from pytest_r3.kernel.lock import update_entry
from pytest_r3.record.store import RecordingStore
from pytest_r3.outputs import write_bytes_atomic
folder = Path(sys.argv[1])
for name, write in [
        ("lock", lambda: update_entry(folder / "r3.lock", "k", "t", {
            "source_hash": "s", "macros": {}, "pipeline": {}})),
        ("recordings", lambda: RecordingStore(folder / ".r3" / "recordings").save(
            "k", [], 1)),
        ("big", lambda: write_bytes_atomic(folder / ".r3" / "big.bin", bytes(1 << 20)))]:
    try:
        write()
        print(name, "written")
    except StateWriteError as exc:
        print(name, "|", exc)
"""


def run_write_state(folder: Path, setup: str) -> list[str]:
    """Run WRITE_STATE against ``folder``, inside a private mount namespace where
    ``setup`` (a shell command) has mounted something on it."""
    script = folder.parent / "write_state.py"
    script.write_text(WRITE_STATE)
    env = environment_without_pytest()
    env["PYTHONPATH"] = str(ROOT)
    command = f'{setup} && exec "{sys.executable}" "{script}" "{folder}"'
    result = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                             command], capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_a_read_only_folder_is_one_line_naming_the_path(tmp_path):
    folder = tmp_path / "project"
    folder.mkdir()
    if os.geteuid() != 0:  # chmod stops writes for anyone but root
        folder.chmod(0o555)
        try:
            with pytest.raises(StateWriteError) as info:
                update_entry(folder / "r3.lock", "k", "t", entry())
            assert str(folder) in str(info.value)
            with pytest.raises(StateWriteError, match="--r3-dir"):
                RecordingStore(folder / ".r3" / "recordings").save("k", [], 1)
        finally:
            folder.chmod(0o755)
        return
    if not _can_unshare():
        pytest.skip("running as root, where chmod does not stop writes, and without "
                    "unshare to mount a read-only folder")
    lines = run_write_state(folder, f'mount --bind "{folder}" "{folder}" && '
                                    f'mount -o remount,bind,ro "{folder}"')
    assert len(lines) == 3
    for line in lines:
        assert " | cannot write " in line and "the file system is read-only" in line, line
        assert str(folder) in line
    assert lines[0].startswith(f"lock | cannot write {folder / 'r3.lock'}: ")
    assert "r3.lock is kept with the project" in lines[0] and "--r3-dir" in lines[1]


def test_a_full_disk_is_one_line_naming_the_path(tmp_path):
    folder = tmp_path / "project"
    folder.mkdir()
    if _can_unshare():
        lines = run_write_state(folder, f'mount -t tmpfs -o size=256k none "{folder}"')
        assert lines[0] == "lock written" and lines[1] == "recordings written"
        assert lines[2].startswith("big | cannot write ") and "the disk is full" in lines[2]
        assert str(folder / ".r3" / "big.bin") in lines[2] and "--r3-dir" in lines[2]
        return
    # no mount namespace: a file size limit fails writes the same way (EFBIG)
    result = run_python(f"""
        import resource
        resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))
        from pytest_r3.errors import StateWriteError
        from pytest_r3.outputs import write_bytes_atomic
        try:
            write_bytes_atomic({str(folder / 'big.bin')!r}, bytes(1 << 20))
        except StateWriteError as exc:
            print(exc)
        """, tmp_path)
    assert "cannot write" in result.stdout and "big.bin" in result.stdout, result.stderr
    assert not list(folder.glob(".big.bin.*.tmp"))  # no temporary left behind


def test_an_entry_as_tuning_writes_it_is_valid_and_a_malformed_one_is_refused(tmp_path):
    from pytest_r3.model.pipeline import Pipeline

    pipeline = {**Pipeline().as_dict(), "passes_before": ["licm", "loop-rotate"],
                "inline_threshold": None}
    written = entry(1.7, 30, pipeline=pipeline, features_hash=None, rewrite_hash="r",
                    speedup_iqr=[1.6, 1.8], optimizer="NGOpt", tuned_on="2026-01-01")
    path = tmp_path / "r3.lock"
    assert update_entry(path, "k", "cpu-x", written).action == "written"
    assert LockFile.load(path).entry("k", "cpu-x") == json.loads(json.dumps(written))
    with pytest.raises(ValueError, match="malformed r3.lock entry for 'k'.*'macros'"):
        update_entry(path, "k", "cpu-x", {**written, "macros": None})
    assert LockFile.load(path).entry("k", "cpu-x")["macros"] == {"STEP": 2}


def test_entry_status_tells_a_pending_patch_from_a_stale_entry(tmp_path):
    (tmp_path / "k.c").write_text(KERNEL_C)
    kernel = r3.kernel(tmp_path / "k.c", entry="bump", name="status_bump")
    now = source_fingerprint(kernel)
    assert lockmod.entry_status(kernel, entry(source_hash=now)) == ("ok", "")
    pending = entry(source_hash=now, rewrite_hash="elsewhere")
    assert lockmod.entry_status(kernel, pending)[0] == "patch pending"
    applied = entry(source_hash="original", rewrite_hash=now)
    assert lockmod.entry_status(kernel, applied) == ("ok", "")
    assert lockmod.entry_status(kernel, entry(source_hash="old"))[0] == "stale"
    assert lockmod.entry_status(kernel, entry(source_hash="a", rewrite_hash="b"))[0] == "stale"
    other_cpu = entry(source_hash=now, features_hash="not-this-cpu")
    assert lockmod.entry_status(kernel, other_cpu) == ("stale",
                                                       "entry was tuned on other CPU features")
