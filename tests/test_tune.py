"""--r3-tune and --r3-check end to end, on a small project run by real pytest sessions."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import loop_order_kernel

from pytest_r3.search.tuner import Budget, BudgetError

# ORDER=0 walks the matrix column by column (strided, slow); ORDER=1 row by row. Same result.
KERNEL_C = loop_order_kernel("tune_scale")

MODULE_PY = textwrap.dedent("""
    import pytest_r3 as r3

    tune_scale = r3.kernel("tune_scale.c", entry="tune_scale", tune={"ORDER": [0, 1]})
""")

TEST_PY = textwrap.dedent("""
    import numpy as np
    import pytest

    from tunemod import tune_scale


    @pytest.mark.r3_oracle(tune_scale)
    @pytest.mark.parametrize("n", [3, 512])
    def test_tune_scale(n):
        grid = np.random.default_rng(n).random((n, n), dtype=np.float32)
        out = np.empty_like(grid)
        tune_scale(n, grid, out)
        np.testing.assert_allclose(out, 2 * grid + 1, rtol=1e-6)
""")

INI = textwrap.dedent("""
    [pytest]
    r3_search_pipeline = false
    r3_workers = 1
    r3_budget = 4
""")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "tune_scale.c").write_text(KERNEL_C)
    (tmp_path / "tunemod.py").write_text(MODULE_PY)
    (tmp_path / "test_tune_scale.py").write_text(TEST_PY)
    (tmp_path / "pytest.ini").write_text(INI)
    return tmp_path


def run(project: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                          cwd=project, capture_output=True, text=True, timeout=timeout)


def lock_entry(project: Path) -> dict:
    lock = json.loads((project / "r3.lock").read_text())
    (targets,) = [lock["kernels"]["tune_scale"]]
    (entry,) = targets.values()
    return entry


def result_keys(project: Path) -> list[str]:
    (path,) = (project / ".r3" / "results" / "tune_scale").glob("*.jsonl")
    return [json.loads(line)["key"] for line in path.read_text().splitlines() if line.strip()]


def test_budget_parsing():
    assert Budget.parse("200") == Budget(evaluations=200)
    assert Budget.parse("5m") == Budget(seconds=300)
    assert Budget.parse("90s") == Budget(seconds=90)
    assert Budget.parse("1.5h") == Budget(seconds=5400)
    with pytest.raises(BudgetError, match="neither a number of evaluations"):
        Budget.parse("lots")


def test_tune_finds_the_faster_order_and_writes_lock_and_reports(project: Path):
    result = run(project, "--r3-tune")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "pytest-r3 tuning" in result.stdout
    assert "tuned" in result.stdout
    entry = lock_entry(project)
    assert entry["macros"] == {"ORDER": 1}
    assert entry["speedup"] > 1.5
    assert entry["source_hash"]
    for name in ("report.json", "report.md", "report.html"):
        assert (project / ".r3" / name).stat().st_size > 0
    report = json.loads((project / ".r3" / "report.json").read_text())
    names = {bench["name"] for bench in report["benchmarks"]}
    assert names == {"tune_scale[baseline]", "tune_scale[tuned]"}
    assert "ORDER=1" in (project / ".r3" / "report.md").read_text()
    assert "<svg" in (project / ".r3" / "report.html").read_text()

    # plain pytest now runs the locked variant, chosen from r3.lock at call time
    probe = project / "test_probe.py"
    probe.write_text("from tunemod import tune_scale\n\n"
                     "def test_uses_lock():\n    assert tune_scale.active.macro_dict == "
                     "{'ORDER': 1}\n")
    assert run(project, "test_probe.py").returncode == 0
    probe.unlink()

    # the pre-merge check passes right after tuning
    checked = run(project, "--r3-check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "pytest-r3 check" in checked.stdout
    # what the check's measurement rests on, as a claim's: the share of samples dropped
    assert re.search(r"\d+% of timed samples dropped", checked.stdout), checked.stdout

    # a planted regression: the baseline became the fast order, the lock still says the slow
    (project / "tunemod.py").write_text(MODULE_PY.replace("[0, 1]", "[1, 0]"))
    lock = json.loads((project / "r3.lock").read_text())
    for entry in lock["kernels"]["tune_scale"].values():
        entry["macros"] = {"ORDER": 0}
    (project / "r3.lock").write_text(json.dumps(lock))
    regressed = run(project, "--r3-check")
    assert regressed.returncode == 1, regressed.stdout
    assert "FAIL: slower" in regressed.stdout
    # measured again, in a fresh worker process, before the build failed; both reported
    assert "measured twice:" in regressed.stdout and "then, in a fresh worker process" \
        in regressed.stdout, regressed.stdout
    assert "noise band" in regressed.stdout

    # a changed source makes the entry stale: the check fails and says to re-tune
    (project / "tune_scale.c").write_text(KERNEL_C + "\n/* edited */\n")
    stale = run(project, "--r3-check")
    assert stale.returncode == 1
    assert "FAIL: stale" in stale.stdout and "--r3-tune" in stale.stdout


def test_check_without_lock_entry_says_so_and_passes(project: Path):
    result = run(project, "--r3-check")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "nothing to check" in result.stdout or "no kernel to check" in result.stdout


def test_rerun_repeats_no_evaluation(project: Path):
    first = run(project, "--r3-tune")
    assert first.returncode == 0, first.stdout + first.stderr
    keys = result_keys(project)
    second = run(project, "--r3-tune")
    assert second.returncode == 0
    assert result_keys(project) == keys  # nothing evaluated again
    assert re.search(r"^tune_scale .* \d+ \(0\)$", second.stdout, re.M)  # none new


def test_interrupted_run_resumes_without_repeating(project: Path):
    (project / "pytest.ini").write_text(INI.replace("r3_search_pipeline = false",
                                                    "r3_search_pipeline = true")
                                        .replace("r3_budget = 4", "r3_budget = 14"))
    process = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                                "--r3-tune"], cwd=project, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    results = project / ".r3" / "results" / "tune_scale"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        files = list(results.glob("*.jsonl")) if results.exists() else []
        if files and len(files[0].read_text().splitlines()) >= 3:
            break
        time.sleep(0.2)
    else:
        process.kill()
        pytest.fail("the tuning run stored no results in time")
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    done_before = set(result_keys(project))
    assert 3 <= len(done_before) < 14

    resumed = run(project, "--r3-tune")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    keys = result_keys(project)
    assert len(keys) == len(set(keys)), "an evaluation was repeated"
    assert done_before <= set(keys)
