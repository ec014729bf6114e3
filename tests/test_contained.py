"""The oracle re-run's launcher: a rewrite's calls go to a contained worker, never run here.

Before it existed, the oracle tests of a winning rewrite ran its machine code inside the
pytest process: a rewrite that faults there takes pytest down with it.
"""

from __future__ import annotations

import numpy as np
import pytest

import pytest_r3 as r3
from pytest_r3.errors import KernelFault, R3Error
from pytest_r3.replay import Candidate, KernelSpec, ReplaySettings
from pytest_r3.replay.contained import ContainedLauncher

AXPY = """\
double axpy(long n, float a, const float *x, float *y)
{
    double total = 0;
    for (long i = 0; i < n; ++i) { y[i] = a * x[i] + y[i]; total += y[i]; }
    return total;
}
"""


@pytest.fixture(scope="module")
def spec(tmp_path_factory) -> KernelSpec:
    folder = tmp_path_factory.mktemp("contained")
    (folder / "axpy.c").write_text(AXPY)
    return KernelSpec.from_kernel(r3.kernel(folder / "axpy.c", entry="axpy",
                                            name="contained_axpy"))


def launch(spec: KernelSpec, source: str, *args, settings=None):
    launcher = ContainedLauncher(spec, Candidate(source_text=source), settings, timeout=60)
    try:
        return launcher(*args)
    finally:
        launcher.close()


def test_a_rewrite_runs_contained_and_writes_back_into_the_callers_arrays(spec):
    unrolled = AXPY.replace("for (long i = 0;",
                            "#pragma clang loop unroll_count(4)\n    for (long i = 0;")
    x = np.arange(10, dtype=np.float32)
    y = np.ones(10, dtype=np.float32)
    total = launch(spec, unrolled, 10, 2.0, x, y)
    np.testing.assert_array_equal(y, 2 * np.arange(10, dtype=np.float32) + 1)
    assert total == pytest.approx(float(y.sum()))
    np.testing.assert_array_equal(x, np.arange(10, dtype=np.float32))  # read-only: untouched


def test_an_in_place_call_stays_in_place(spec):
    y = np.arange(6, dtype=np.float32)
    launch(spec, AXPY, 6, 1.0, y, y)  # x and y are one array: y = y + y
    np.testing.assert_array_equal(y, 2 * np.arange(6, dtype=np.float32))


def test_a_faulting_rewrite_raises_here_instead_of_killing_pytest(spec):
    crash = AXPY.replace("double total = 0;", "double total = 0; *(volatile int *)0 = 1;")
    with pytest.raises(KernelFault, match="SIGSEGV"):
        launch(spec, crash, 4, 1.0, np.ones(4, np.float32), np.ones(4, np.float32))


def test_a_forbidden_system_call_ends_the_worker_not_the_test_run(spec):
    forks = "extern int fork(void);\n" + AXPY.replace("double total = 0;",
                                                       "double total = fork();")
    with pytest.raises(KernelFault, match="SIGSYS"):
        launch(spec, forks, 4, 1.0, np.ones(4, np.float32), np.ones(4, np.float32),
               settings=ReplaySettings(static_check=False))


def test_a_rewrite_the_static_check_refuses_never_starts(spec):
    calls_system = "extern int system(const char *);\n" + AXPY.replace(
        "double total = 0;", 'double total = system("true");')
    with pytest.raises(R3Error, match="sandbox_violation"):
        ContainedLauncher(spec, Candidate(source_text=calls_system))


COUNTED = """\
static long calls;

long axpy_calls(void) { return calls; }

double axpy(long n, float a, const float *x, float *y)
{
    calls++;
    for (long i = 0; i < n; ++i) y[i] = a * x[i] + y[i];
    return 0;
}
"""


def test_a_rewrite_that_changes_after_a_few_calls_fails_in_the_oracle_run(tmp_path):
    """The oracle tests make few calls; a rewrite counting them with the baseline's own
    counter (allowed: the baseline has it) is exact for 20 and wrong after. The first
    forwarded call is made many times in a row, so it is caught before any test sees a
    result, even in a test that calls the kernel three times."""
    (tmp_path / "axpy.c").write_text(COUNTED)
    spec = KernelSpec.from_kernel(r3.kernel(tmp_path / "axpy.c", entry="axpy",
                                            name="contained_counted"))
    late = COUNTED.replace("+ y[i];", "+ y[i] + (calls > 20 ? 1.0f : 0.0f);")
    honest = COUNTED.replace("for (long i = 0;",
                             "#pragma clang loop unroll_count(2)\n    for (long i = 0;")
    x = np.arange(8, dtype=np.float32)
    for source, fails in ((late, True), (honest, False)):
        launcher = ContainedLauncher(spec, Candidate(source_text=source), timeout=60)
        outputs = []
        try:
            for _ in range(3):  # as a test calling the kernel three times
                outputs.append(np.ones(8, dtype=np.float32))
                launcher(8, 2.0, x, outputs[-1])
        except KernelFault as fault:
            assert fails and "keeps state between calls" in str(fault), fault
        else:
            assert not fails, "the late rewrite passed three calls"
            for out in outputs:
                np.testing.assert_array_equal(out, 2 * x + 1)
        finally:
            launcher.close()
