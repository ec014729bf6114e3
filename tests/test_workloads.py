"""Workloads: launches at the sizes users run (benchmark tests, ``r3_workload`` tests, the
application recorded with ``pytest-r3 record``) are what --r3-tune times and --r3-check
checks; the oracle tests keep verifying. Real pytest sessions and real subprocesses."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_r3.record.store import RecordingStore

KERNEL_C = textwrap.dedent("""
    #ifndef ORDER
    #define ORDER 0
    #endif
    void wl_scale(int n, const float *in, float *out)
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
