"""The benchmarks under benchmarks/ as someone runs them: from a shell whose pytest and
pytest-r3 variables must not change what they measure, and without filling that person's
compiled-code cache unless asked (benchmarks/isolation.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
SCRIPTS = sorted(path.name for path in BENCHMARKS.glob("bench_*.py"))
# a shell in which pytest is busy: options for every pytest, an xdist worker's variables,
# a test in progress, and a lock file the benchmark must not pick up
NOISY = {"PYTEST_ADDOPTS": "--no-such-option", "PYTEST_XDIST_WORKER": "gw3",
         "PYTEST_XDIST_WORKER_COUNT": "4", "PYTEST_CURRENT_TEST": "test_x.py::test_y (call)",
         "PYTEST_R3_LOCK": "/nonexistent/r3.lock", "R3_BENCH_FORCE": "{}"}


def run(tmp_path: Path, *args: str, **extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CACHE_HOME",)}
    env.update(NOISY, HOME=str(tmp_path), **extra)
    env.pop("PYTEST_R3_CACHE_DIR", None)  # the user's cache is ~/.cache/pytest-r3
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=600)


def test_what_a_benchmark_starts_sees_none_of_pytests_variables(tmp_path):
    probe = ("import subprocess, sys; sys.path.insert(0, sys.argv[1]); import isolation; "
             "isolation.isolate(); print(subprocess.run([sys.executable, '-c', "
             "'import os; print(sorted(k for k in os.environ if k.startswith((\"PYTEST\", "
             "\"R3_BENCH\"))))'], capture_output=True, text=True, "
             "env=isolation.environment()).stdout)")
    done = run(tmp_path, "-c", probe, str(BENCHMARKS))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['PYTEST_R3_CACHE_DIR']"  # the temporary cache alone


def test_a_benchmark_leaves_the_users_cache_alone_unless_asked(tmp_path):
    script = str(BENCHMARKS / "bench_locked_call.py")
    cache = tmp_path / ".cache" / "pytest-r3"
    done = run(tmp_path, script, "--rounds", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "this checkout   locked" in done.stdout
    assert not cache.exists()
    done = run(tmp_path, script, "--rounds", "1", "--real-cache")
    assert done.returncode == 0, done.stdout + done.stderr
    assert cache.is_dir() and any(cache.iterdir())


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_benchmark_offers_the_real_cache_and_starts(tmp_path, script):
    done = run(tmp_path, str(BENCHMARKS / script), "--help")
    assert done.returncode == 0, done.stderr
    assert "--real-cache" in done.stdout


WRONG_SCALED_ADD = """void scaled_add(long n, float alpha, const float *x, float *y)
{
    for (long i = 0; i < n; ++i)
        y[i] = x[i] + y[i];  /* forgets alpha */
}
"""


def test_the_timing_trust_benchmark_reports_a_refused_variant_and_goes_on(tmp_path):
    """A reference variant that does not compile, and one the replay refuses as wrong, are
    each reported in one line (variant, status, first diagnostic) and left out; the other
    variants' cells are still measured and printed."""
    (tmp_path / "wrong.c").write_text(WRONG_SCALED_ADD)
    (tmp_path / "broken.c").write_text(WRONG_SCALED_ADD.replace("y[i];", "y[i]"))
    done = run(tmp_path, str(BENCHMARKS / "bench_timing_trust.py"), "--kernels", "scaled_add",
               "--levels", "0", "--aa", "1", "--ab", "1", "--reference-seconds", "0.2",
               "--variant", "scaled_add=wrong.c", "--variant", "scaled_add=broken.c")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert any(line.startswith("refused scaled_add broken.c: build error: ")
               and "expected ';'" in line for line in lines), done.stdout
    assert any(line.startswith("refused scaled_add wrong.c at 0 busy: wrong_output (mismatch): ")
               and "differs" in line for line in lines), done.stdout
    table = lines[next(n for n, line in enumerate(lines)
                       if line.split()[:4] == ["busy", "load", "kernel", "variant"]):]
    assert [line.split()[3:5] for line in table[1:3]] == [["two", "passes"], ["fifth", "twice"]]
