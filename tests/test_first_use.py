"""What a new user meets: every mistake they can make is one line saying what to do, the
terminal table fits a terminal, and the reports keep every kernel."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest
from conftest import loop_order_kernel

KERNEL_C = loop_order_kernel("fu_scale", macros=textwrap.dedent("""\
    #ifndef NOISE
    #define NOISE 0
    #endif
    #if NOISE == 3
    #error "NOISE=3 is refused on purpose"
    #endif
    #ifndef SAME
    #define SAME 0
    #endif"""))

# ORDER=1 is much faster; NOISE=3 does not compile (a failed candidate with a cause).
MODULE_PY = textwrap.dedent("""
    import pytest_r3 as r3

    fu_scale = r3.kernel("fu_scale.c", entry=@ENTRY@, tune={"ORDER": [0, 1],
                                                          "NOISE": [0, 3]})
    fu_same = r3.kernel("fu_scale.c", entry="fu_scale", name="fu_same",
                        tune={"SAME": [0, 1]})
""")

TEST_PY = textwrap.dedent("""
    import numpy as np
    import pytest

    from fumod import fu_same, fu_scale


    @pytest.mark.r3_oracle(fu_scale, fu_same)
    def test_fu_scale():
        grid = np.random.default_rng(0).random((300, 300), dtype=np.float32)
        for kernel in (fu_scale, fu_same):
            out = np.empty_like(grid)
            kernel(300, grid, out)
            np.testing.assert_allclose(out, 2 * grid + 1, rtol=1e-6)
""")

INI = textwrap.dedent("""
    [pytest]
    r3_search_pipeline = false
    r3_workers = 1
""")


@pytest.fixture
def project(pytester) -> Path:
    (pytester.path / "fu_scale.c").write_text(KERNEL_C)
    (pytester.path / "fumod.py").write_text(MODULE_PY.replace("@ENTRY@", '"fu_scale"'))
    (pytester.path / "test_fu.py").write_text(TEST_PY)
    (pytester.path / "pytest.ini").write_text(INI)
    return pytester.path


def run(pytester, *args: str):
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=300)
    output = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in output and "Traceback" not in output, output
    return result, output


def section(output: str, title: str) -> list[str]:
    """The lines of the terminal summary section ``title``."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if f" {title} " in line)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("====")),
               len(lines))
    return lines[start + 1:end]


@pytest.mark.parametrize("mode", ["--r3-list", "--r3-record", "--r3-tune", "--r3-check"])
def test_a_wrong_entry_is_one_line_naming_the_declaration(pytester, project, mode):
    (project / "fumod.py").write_text(MODULE_PY.replace("@ENTRY@", '"fu_scael"'))
    result, output = run(pytester, mode)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, output
    result.stderr.fnmatch_lines(["ERROR: pytest-r3: kernel 'fu_scael' declared at fumod.py:4: "
                                 "fu_scale.c: entry symbol 'fu_scael' is not defined by the "
                                 "source (it defines: fu_scale)*"])
    assert "passed" not in output  # stopped before any test ran
    assert "no kernel to tune" not in output and "recorded" not in output, output


@pytest.mark.parametrize("mode", ["--r3-record", "--r3-tune", "--r3-check"])
def test_a_wrong_entry_is_one_line_under_xdist(pytester, project, mode):
    """Under ``-n 2`` the workers collect: a worker's check reaches the controller's
    terminal as the same one line, before any test runs."""
    (project / "fumod.py").write_text(MODULE_PY.replace("@ENTRY@", '"fu_scael"'))
    result, output = run(pytester, "-n", "2", mode)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, output
    result.stderr.fnmatch_lines(["ERROR: pytest-r3: kernel 'fu_scael' declared at fumod.py:4: "
                                 "fu_scale.c: entry symbol 'fu_scael' is not defined by the "
                                 "source (it defines: fu_scale)*"])
    assert "passed" not in output and "crashed" not in output, output
    assert "no kernel to tune" not in output and "recorded" not in output, output


def test_a_misspelled_boolean_ini_value_is_a_usage_error(pytester, project):
    (project / "pytest.ini").write_text(INI.replace("false", '"nope"'))
    result, output = run(pytester, "--r3-tune")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, output
    result.stderr.fnmatch_lines(["ERROR: ini key r3_search_pipeline: '\"nope\"' is not valid; "
                                 "expected true or false*"])


def test_check_without_a_lock_says_what_to_run_and_ci_can_make_it_fail(pytester, project):
    result, output = run(pytester, "--r3-check")
    assert result.ret == 0, output
    assert any("no lock file at r3.lock: nothing to check; run `pytest --r3-tune` "
               "first" in line for line in section(output, "pytest-r3 check"))
    strict, output = run(pytester, "--r3-check", "--r3-require-lock")
    assert strict.ret == pytest.ExitCode.TESTS_FAILED, output
    strict.stdout.fnmatch_lines(["FAILED no lock file at *r3.lock*"])


def test_tune_names_failure_causes_fits_100_columns_and_reports_every_kernel(pytester,
                                                                              project):
    result, output = run(pytester, "--r3-tune", "--r3-budget=8")
    assert result.ret == 0, output
    table = section(output, "pytest-r3 tuning")
    assert all(len(line) <= 100 for line in table), "\n".join(table)
    assert re.match(r"fu_scale +tuned ", "\n".join(table), re.M) or any(
        re.match(r"fu_scale +tuned ", line) for line in table), "\n".join(table)
    text = "\n".join(table)
    # the failed candidate: its cause, its setting and the first line of its diagnostic
    assert re.search(r"\d compile_error, e\.g\. (ORDER=\d, )?NOISE=3: .*NOISE=3 is refused on "
                     "purpose", text.replace("\n      ", " ")), text
    assert "    settings: ORDER=1\n" in text
    assert any(re.match(r"fu_same +baseline kept ", line) for line in table), text
    # the lock is written for the tuned kernel only, and said so
    assert "lock file: r3.lock" in text
    report = json.loads((project / ".r3" / "report.json").read_text())
    rows = {row["kernel"]: row for row in report["r3"]["kernels"]}
    assert set(rows) == {"fu_scale", "fu_same"}
    benchmarks = {b["name"]: b for b in report["benchmarks"]}
    assert benchmarks["fu_same[baseline]"]["extra_info"]["baseline_kept"] is True
    assert benchmarks["fu_scale[tuned]"]["extra_info"]["baseline_kept"] is False

    # a run of one kernel keeps the other's row; the check writes its own report
    tuning_report = (project / ".r3" / "report.html").read_text()
    again, output = run(pytester, "--r3-tune", "--r3-budget=8", "--r3-kernels=fu_same")
    assert again.ret == 0, output
    report = json.loads((project / ".r3" / "report.json").read_text())
    assert {row["kernel"] for row in report["r3"]["kernels"]} == {"fu_scale", "fu_same"}
    merged = (project / ".r3" / "report.html").read_text()
    assert "fu_scale" in merged and "not in this run (--r3-kernels)" in merged
    checked, output = run(pytester, "--r3-check")
    assert checked.ret == 0, output
    assert (project / ".r3" / "check-report.md").read_text().startswith(
        "## pytest-r3 check report")
    assert (project / ".r3" / "report.html").read_text() == merged
    assert merged != tuning_report


def test_a_lock_that_cannot_be_written_is_one_line(pytester, project):
    (project / "r3.lock").mkdir()  # not a file: neither readable nor replaceable
    result, output = run(pytester, "--r3-tune", "--r3-budget=4", "--r3-kernels=fu_scale")
    # refused before any tuning runs, in one line naming the file
    assert result.ret == pytest.ExitCode.USAGE_ERROR, output
    assert "INTERNALERROR" not in output
    errors = [line for line in result.stderr.lines if line.startswith("ERROR")]
    assert len(errors) == 1 and str(project / "r3.lock") in errors[0], output
    assert "pytest-r3 tuning" not in output


def test_tune_with_no_kernel_declared_says_how_to_declare_one(pytester):
    pytester.makepyfile(test_plain="def test_nothing():\n    pass\n")
    result, output = run(pytester, "--r3-tune")
    assert result.ret == 0, output
    result.stdout.fnmatch_lines(["no kernel to tune: none is declared. Declare one*"
                                 "r3.kernel(*@pytest.mark.r3_oracle(*"])
    assert "lock file" not in output
    # nothing was tuned: no reports of nothing (a project's earlier reports stay as they were)
    assert "reports:" not in output and not (pytester.path / ".r3" / "report.html").exists()


def test_a_value_option_written_with_a_space_outside_the_project(pytester, project,
                                                                   tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    result, output = run(pytester, "--r3-record", "--r3-dir", str(elsewhere))
    assert result.ret == pytest.ExitCode.USAGE_ERROR, output
    result.stderr.fnmatch_lines([f"ERROR: --r3-dir {elsewhere}: pytest read {elsewhere} as a "
                                 f"test path *; write --r3-dir={elsewhere}"])
    fine, output = run(pytester, "--r3-record", f"--r3-dir={elsewhere}")
    assert fine.ret == 0, output
    assert (elsewhere / "recordings").is_dir()


TOLERANT_C = """\
#ifndef EPS
#define EPS 0
#endif
void tolk(long n, const float *x, float *y) {
    for (long i = 0; i < n; ++i) y[i] = x[i] * (1.0f + EPS * 1e-4f);
}
"""


def test_replay_uses_the_tolerance_the_kernel_declares(pytester):
    """EPS=1 is off by 1e-4 relative: beyond float32's default tolerance, within the
    rtol=1e-3 the kernel declares (after its launches were recorded)."""
    import subprocess
    import sys

    (pytester.path / "tolk.c").write_text(TOLERANT_C)
    module = pytester.path / "tolmod.py"
    module.write_text('import pytest_r3 as r3\ntolk = r3.kernel("tolk.c", entry="tolk", '
                      'tune={"EPS": [0, 1]})\n')
    pytester.makepyfile(test_tol=textwrap.dedent("""
        import numpy as np, pytest
        from tolmod import tolk

        @pytest.mark.r3_oracle(tolk)
        def test_tol():
            x = np.arange(1, 1001, dtype=np.float32)
            y = np.empty_like(x)
            tolk(len(x), x, y)
            np.testing.assert_allclose(y, x, rtol=1e-3)
    """))
    (pytester.path / "pytest.ini").write_text("[pytest]\n")
    recorded, output = run(pytester, "--r3-record")
    assert recorded.ret == 0, output

    def replay() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pytest_r3.cli", "replay", "tolk",
                               "--set", "EPS=1"], cwd=pytester.path, capture_output=True,
                              text=True, timeout=300)

    strict = replay()
    assert strict.returncode == 1 and "wrong_output" in strict.stdout, strict.stdout
    module.write_text(module.read_text().replace('"EPS": [0, 1]}', '"EPS": [0, 1]}, '
                                                 'tolerance={"rtol": 1e-3}'))
    tolerant = replay()
    assert tolerant.returncode == 0, tolerant.stdout + tolerant.stderr
    assert tolerant.stdout.startswith("tolk: ok")


def test_work_must_be_a_function_of_the_arguments(tmp_path):
    import pytest_r3 as r3
    from pytest_r3.errors import DeclarationError

    (tmp_path / "w.c").write_text("void w(long n, float *y) { for (long i = 0; i < n; ++i) "
                                  "y[i] = 0; }\n")
    with pytest.raises(DeclarationError, match=r"work= must be a function of the arguments"):
        r3.kernel(str(tmp_path / "w.c"), entry="w", name="work_bad", work={"flops": 1})
