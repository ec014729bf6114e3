"""Mistakes a user can make around pytest-r3's state (the .r3 folder, r3.lock, the
kernel's files, option values): each ends in one line saying what to do, never in an
INTERNALERROR or a traceback, and nothing says a file was written when it was not."""

from __future__ import annotations

import json

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


def _committed_lock(folder, macros: dict) -> str:
    """r3.lock with a strong committed entry for fu_scale (1000 evaluations, 50x) made for
    the project's current source: a short run cannot replace it by the merge rules."""
    import pytest_r3 as r3
    from pytest_r3.backends.clang import host_target
    from pytest_r3.kernel.lock import features_hash, source_fingerprint

    kernel = r3.kernel(str(folder / "fu_scale.c"), entry="fu_scale", name="fu_scale_lock",
                       tune={"ORDER": [0, 1], "NOISE": [0, 3]})
    entry = {"source_hash": source_fingerprint(kernel), "macros": macros, "pipeline": {},
             "features_hash": features_hash(host_target().features), "evaluations": 1000,
             "speedup": 50.0, "baseline_seconds": 1e-3, "tuned_seconds": 2e-5}
    text = json.dumps({"version": 1, "kernels": {"fu_scale": {
        kernel.backend.target_name(): entry}}}, indent=2, sort_keys=True) + "\n"
    (folder / "r3.lock").write_text(text)
    return text


def test_a_kept_committed_entry_is_not_said_to_be_written(pytester, project):  # noqa: F811
    committed = _committed_lock(project, {"ORDER": 1})
    result, output = run(pytester, "--r3-tune", "--r3-budget=4", "--r3-kernels=fu_scale")
    assert result.ret == 0, output
    table = "\n".join(section(output, "pytest-r3 tuning"))
    assert "kept the committed entry" in table, table
    assert (project / "r3.lock").read_text() == committed
    assert "lock file: r3.lock" not in table
    assert "lock file: none written (r3.lock unchanged)" in table


def test_a_committed_entry_that_no_longer_fits_is_replaced(pytester, project):  # noqa: F811
    """ORDER=7 is not a declared value: plain pytest cannot use the entry (it runs the
    baseline), so however strong it was measured, this run's result replaces it."""
    _committed_lock(project, {"ORDER": 7})
    result, output = run(pytester, "--r3-tune", "--r3-budget=4", "--r3-kernels=fu_scale")
    assert result.ret == 0, output
    table = "\n".join(section(output, "pytest-r3 tuning"))
    assert "kept the committed entry" not in table, table
    assert "lock file: r3.lock" in table
    (entry,) = json.loads((project / "r3.lock").read_text())["kernels"]["fu_scale"].values()
    assert entry["macros"]["ORDER"] == 1 and entry["evaluations"] == 4, entry


@pytest.mark.parametrize("mode", [[], ["--r3-check"]])
def test_a_kernel_file_deleted_since_the_last_run_is_one_line(pytester, project,  # noqa: F811
                                                              mode):
    (project / "fu_scale.c").unlink()
    result, output = run(pytester, *mode)
    assert result.ret == pytest.ExitCode.INTERRUPTED, output  # a collection error
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if "ERROR collecting test_fu.py" in line)
    assert lines[start + 1] == (
        "kernel 'fu_scale' (declared at fumod.py:4): source file 'fu_scale.c' not found "
        f"(looked for {project}/fu_scale.c). Paths are relative to the file that declares "
        "the kernel; to pass C code inline, give text containing a newline."), output
    assert " short test summary info " in lines[start + 2], output
    # nothing ran: no empty pytest-r3 sections guessing at why
    assert "pytest-r3 check" not in output and "pytest-r3 recordings" not in output, output


def test_recordings_that_could_not_be_saved_are_not_said_never_launched(
        pytester, project):  # noqa: F811
    (project / "blocker").write_text("a file, not a folder")
    result, output = run(pytester, "--r3-record", "--r3-dir=blocker/r3")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, output
    said = section(output, "pytest-r3 recordings")
    assert "fu_scale: launched, but no recording of it was saved" in said, said
    assert any(line.startswith("could not save the recordings: cannot write ") and
               "blocker/r3" in line and "--r3-dir=DIR" in line for line in said), said
    assert not [line for line in said if "never launched" in line or "stored under" in line]


def test_a_state_folder_given_with_a_space_from_outside_the_project(
        pytester, project, tmp_path_factory):  # noqa: F811
    """pytest started from the folder above the project, with the project as its test
    path: an existing --r3-dir DIR elsewhere is refused in one line (pytest would take DIR
    for a second test path), and --r3-dir=DIR records there."""
    inner = project / "proj"
    inner.mkdir()
    for name in ("fu_scale.c", "fumod.py", "test_fu.py", "pytest.ini"):
        (project / name).rename(inner / name)
    elsewhere = tmp_path_factory.mktemp("state")
    result, output = run(pytester, "proj", "--r3-record", "--r3-dir", str(elsewhere))
    assert result.ret == pytest.ExitCode.USAGE_ERROR, output
    result.stderr.fnmatch_lines([f"ERROR: --r3-dir {elsewhere}: pytest read {elsewhere} as a "
                                 f"test path *; write --r3-dir={elsewhere}"])
    fine, output = run(pytester, "proj", "--r3-record", f"--r3-dir={elsewhere}")
    assert fine.ret == 0, output
    assert f"rootdir: {inner}" in output  # the project's pytest.ini was found
    assert (elsewhere / "recordings" / "fu_scale").is_dir()


def test_check_of_a_lock_naming_only_kernels_not_declared_here(pytester, project):  # noqa: F811
    """A kernel renamed (or removed) since it was tuned: its entry checks nothing, and the
    line says which names the lock has and which kernels are declared, not 'target(s) -'."""
    entry = {"source_hash": "0123456789abcdef", "macros": {"ORDER": 1}, "pipeline": {}}
    (project / "r3.lock").write_text(json.dumps(
        {"version": 1, "kernels": {"fu_old": {"cpu-x86_64-somecpu": entry}}}))
    result, output = run(pytester, "--r3-check")
    assert result.ret == 0, output
    assert [line for line in section(output, "pytest-r3 check") if line] == [
        "r3.lock has no entry for the kernels declared here (fu_same, fu_scale); its entries "
        "name fu_old, which no collected test declares: nothing to check; run `pytest "
        "--r3-tune` first and commit r3.lock"], output
    strict, output = run(pytester, "--r3-check", "--r3-require-lock")
    assert strict.ret == pytest.ExitCode.TESTS_FAILED, output
