"""Ctrl-C during ``pytest --r3-tune``: the run stops within seconds even while a worker is
busy for minutes, its workers are killed, what was measured stays, and one line says so."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import environment_without_pytest, new_evaluations

# HANG=1 spins until the worker's run limit (set to 10 minutes below) ends it.
SPIN_C = textwrap.dedent("""\
    #ifndef HANG
    #define HANG 0
    #endif
    void spin(int n, const float *in, float *out) {
    #if HANG
        volatile int forever = 1;
        while (forever) {}
    #endif
        for (int i = 0; i < n; i++) out[i] = 2.0f * in[i] + 1.0f;
    }
""")

MODULE_PY = textwrap.dedent("""
    import pytest_r3 as r3

    spin = r3.kernel("spin.c", entry="spin", tune={"HANG": [0, 1]})
""")

TEST_PY = textwrap.dedent("""
    import numpy as np
    import pytest

    from spinmod import spin


    @pytest.mark.r3_oracle(spin)
    def test_spin():
        x = np.arange(64, dtype=np.float32)
        out = np.empty_like(x)
        spin(64, x, out)
        np.testing.assert_allclose(out, 2 * x + 1)
""")

STOPPED_WITHIN = 60.0  # seconds from Ctrl-C to exit, generous for a loaded 2-core runner


@pytest.fixture(params=["local", "dask"])
def spin_project(pytester, request) -> Path:
    """The project, evaluating on the local pool or on a Dask cluster of one worker."""
    if request.param == "dask":
        pytest.importorskip("distributed")
    (pytester.path / "spin.c").write_text(SPIN_C)
    (pytester.path / "spinmod.py").write_text(MODULE_PY)
    (pytester.path / "test_spin.py").write_text(TEST_PY)
    (pytester.path / "pytest.ini").write_text(
        "[pytest]\nr3_search_pipeline = false\nr3_workers = 1\nr3_run_timeout = 600\n"
        + ("r3_dask = local:1\n" if request.param == "dask" else ""))
    return pytester.path


def _results(folder: Path) -> list[dict]:
    return [json.loads(line) for path in sorted((folder / ".r3" / "results").rglob("*.jsonl"))
            for line in path.read_text().splitlines() if line.strip()]


def _workers(root: int) -> set[int]:
    """The replay worker processes below ``root`` (on Dask, below its worker processes)."""
    found, seen = set(), [root]
    while seen:
        pid = seen.pop()
        children = []
        for task in Path(f"/proc/{pid}/task").glob("*"):  # a child belongs to its thread
            try:
                children += (task / "children").read_text().split()
            except OSError:
                continue
        seen += [int(child) for child in children]
        found |= {int(child) for child in children if _alive(int(child))}
    return found


def _alive(pid: int) -> bool:
    """A process ``pid`` still running the replay worker (the number may have been reused)."""
    try:
        return b"pytest_r3.replay.worker" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def test_ctrl_c_while_a_worker_runs_stops_the_run_and_keeps_what_was_measured(spin_project):
    # the terminal sends SIGINT to the whole foreground process group: so does this test
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--r3-tune"],
        cwd=spin_project, env=environment_without_pytest(), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 500
        # HANG=0 (the starting point) is stored first; HANG=1 is then in the worker
        while not _results(spin_project):
            assert process.poll() is None, process.stdout.read().decode()
            assert time.monotonic() < deadline, "the first evaluation never finished"
            time.sleep(0.5)
        time.sleep(3)
        workers = _workers(process.pid)
        assert workers, "no replay worker found running"
        os.killpg(process.pid, signal.SIGINT)
        sent = time.monotonic()
        try:
            output = process.communicate(timeout=STOPPED_WITHIN)[0].decode()
        except subprocess.TimeoutExpired:
            pytest.fail(f"pytest --r3-tune still ran {STOPPED_WITHIN:g} s after Ctrl-C")
        took = time.monotonic() - sent
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert process.returncode == pytest.ExitCode.INTERRUPTED, output
    assert took < STOPPED_WITHIN
    assert "Traceback" not in output and "INTERNALERROR" not in output, output
    said = [line for line in output.splitlines() if "interrupted (Ctrl-C)" in line]
    assert said == ["pytest-r3: interrupted (Ctrl-C) while tuning spin: its replay workers "
                    "were stopped; what was measured is kept in .r3/results and the next "
                    "`pytest --r3-tune` resumes from it"], output
    assert not [pid for pid in workers if _alive(pid)], "a replay worker outlived the run"
    # only the finished evaluation is stored: the one stopped midway is no crash or timeout
    stored = _results(spin_project)
    assert [entry["candidate"]["macros"] for entry in stored] == [{}], stored  # the default
    assert not (spin_project / "r3.lock").exists()

    # the next run resumes: HANG=0 comes from the store, only HANG=1 is evaluated
    rerun = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--r3-tune",
         "-o", "r3_run_timeout=3"],
        cwd=spin_project, env=environment_without_pytest(), capture_output=True, text=True,
        timeout=600)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr

    class Lines:
        outlines = rerun.stdout.splitlines()

    assert new_evaluations(Lines, "spin") == 1, rerun.stdout
