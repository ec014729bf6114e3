"""Mistakes a user can make around pytest-r3's state (the .r3 folder, r3.lock, the
kernel's files, option values): each ends in one line saying what to do, never in an
INTERNALERROR or a traceback, and nothing says a file was written when it was not."""

from __future__ import annotations

import pytest
from test_first_use import MODULE_PY, project, run, section  # noqa: F401 (a fixture)


def test_a_results_folder_that_cannot_be_read_is_one_line(pytester, project):  # noqa: F811
    (project / ".r3").mkdir()
    (project / ".r3" / "results").write_text("not a folder\n")
    result, output = run(pytester, "--r3-tune", "--r3-budget=4", "--r3-kernels=fu_scale")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, output
    table = "\n".join(section(output, "pytest-r3 tuning"))
    assert "fu_scale FAILED: tuning error" in table.replace("  ", " "), table
    result.stdout.fnmatch_lines([f"FAILED fu_scale: cannot write {project}/.r3/results/"
                                 "fu_scale/*.jsonl: Not a directory; keep pytest-r3's state "
                                 "in a writable folder with --r3-dir=DIR"])
    assert "lock file: none written" in table


@pytest.mark.parametrize("given, said", [
    (["--r3-run-timeout=-1"], "--r3-run-timeout: '-1' is not valid; expected a number above 0"),
    (["-o", "r3_seed=-3"], "ini key r3_seed: '-3' is not valid; expected a whole number, 0 "
                           "or more"),
    (["--r3-record-cap=0"], "--r3-record-cap: '0' is not valid; expected a number above 0"),
    (["--r3-workers=-2"], "--r3-workers: '-2' is not valid; expected a whole number, 0 or "
                          "more"),
])
def test_a_number_out_of_range_is_a_usage_error_before_any_test(
        pytester, project, given, said):  # noqa: F811
    result, output = run(pytester, "--r3-tune", *given)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, output
    result.stderr.fnmatch_lines([f"ERROR: {said} (*)"])
    assert "passed" not in output  # said before the tests ran, not after
