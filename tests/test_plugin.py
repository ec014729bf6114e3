"""The pytest plugin in real pytest runs (pytester): marker, --r3-list and usage errors."""

from __future__ import annotations

from pathlib import Path

import pytest

import pytest_r3 as r3


def test_r3_list_shows_kernel_tunables_and_oracle_tests_and_runs_nothing(pytester, r3_project):
    # a test that would fail if anything ran
    (pytester.path / "tests" / "test_would_fail.py").write_text("def test_fails():\n    assert 0\n")
    result = pytester.runpytest("--r3-list")
    assert result.ret == pytest.ExitCode.OK
    name, package = r3_project.kernel, r3_project.package
    result.stdout.fnmatch_lines([
        "pytest-r3: 1 kernel(s) declared",
        "",
        f"{name} [[]cpu[]]  {package}/saxpy.c:saxpy",
        f"  declared at: {package}/__init__.py:3",
        "  tunables: UNROLL in [[]1, 2, 4[]]",
        "            constraint: UNROLL <= 4",
        "  oracle tests (4):",
        "    tests/test_saxpy.py::test_saxpy_matches_numpy[[]0[]]",
        "    tests/test_saxpy.py::test_saxpy_matches_numpy[[]7[]]",
        "    tests/test_saxpy.py::test_saxpy_matches_numpy[[]1000[]]",
        "    tests/test_saxpy.py::test_saxpy_by_name",
        "*no tests ran*",
    ])
    assert "test_not_an_oracle" not in result.stdout.str()
    assert "test_fails" not in result.stdout.str()
    result.assert_outcomes()


def test_r3_list_says_when_a_kernel_has_no_oracle_and_shows_its_pipeline(
        pytester, unique_name, empty_registry):
    name = unique_name("lonely")
    pytester.makepyfile(
        kernels_mod=f"""
            import pytest_r3 as r3
            lonely = r3.kernel("void lonely(int n) {{ (void)n; }}\\n", entry="lonely",
                               name={name!r}, pipeline={{"level": 1, "loop_unroll": False}})
            """,
        test_plain="""
            import kernels_mod

            def test_plain():
                pass
            """,
    )
    result = pytester.runpytest("--r3-list", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([
        "pytest-r3: 1 kernel(s) declared",
        "",
        f"{name} [[]cpu[]]  <inline source of kernel '{name}' (declared at *kernels_mod.py:2)>"
        ":lonely",
        "  tunables: none",
        "  pipeline: {'level': 1, 'loop_unroll': False}",
        f"  oracle tests: none (mark one with @pytest.mark.r3_oracle({name}))",
    ])


def test_r3_list_with_no_kernels(pytester, empty_registry):
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest("--r3-list")
    result.stdout.fnmatch_lines(["pytest-r3: 0 kernel(s) declared"])
    assert result.ret == pytest.ExitCode.OK


def test_marker_naming_an_unknown_kernel_is_a_usage_error(pytester, r3_project):
    (pytester.path / "tests" / "test_typo.py").write_text(
        "import pytest\n\n"
        "@pytest.mark.r3_oracle('saxpyy')\n"
        "def test_typo():\n"
        "    pass\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: tests/test_typo.py::test_typo: @pytest.mark.r3_oracle('saxpyy'): no kernel named "
        f"'saxpyy' is declared; declared kernels: *{r3_project.kernel}*",
    ])
    result.assert_outcomes()  # nothing ran


def test_marker_without_a_kernel_is_a_usage_error(pytester):
    pytester.makepyfile("import pytest\n\n@pytest.mark.r3_oracle()\ndef test_x():\n    pass\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: test_marker_without_a_kernel_is_a_usage_error.py::test_x: "
        "@pytest.mark.r3_oracle() names no kernel; write @pytest.mark.r3_oracle(my_kernel)",
    ])


def test_markers_documents_r3_oracle(pytester):
    result = pytester.runpytest("--markers")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([
        "@pytest.mark.r3_oracle(*kernels): the test is a reference (oracle) test of the given "
        "kernels, given as kernel objects or names; a tuned variant is accepted only if it "
        "passes. Example: @pytest.mark.r3_oracle(saxpy)",
    ])


def test_help_documents_r3_list(pytester):
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(["pytest-r3 kernel autotuning:", "  --r3-list *"])


def test_strict_markers_accepts_r3_oracle(pytester, r3_project):
    result = pytester.runpytest("--strict-markers", "-q")
    result.assert_outcomes(passed=5)


def test_registry_is_restored_after_a_session(pytester, r3_project):
    before = set(r3.registry())
    pytester.runpytest("-q").assert_outcomes(passed=5)
    assert set(r3.registry()) == before
    assert r3_project.kernel not in r3.registry()


def test_oracle_marker_on_a_class_applies_to_its_tests(pytester, r3_project):
    (pytester.path / "tests" / "test_class.py").write_text(
        "import pytest\n"
        f"from {r3_project.package} import saxpy\n\n"
        "@pytest.mark.r3_oracle(saxpy)\n"
        "class TestSaxpy:\n"
        "    def test_one(self):\n        pass\n\n"
        "    def test_two(self):\n        pass\n")
    result = pytester.runpytest("--r3-list")
    result.stdout.fnmatch_lines([
        "  oracle tests (6):",
        "    tests/test_class.py::TestSaxpy::test_one",
        "    tests/test_class.py::TestSaxpy::test_two",
    ])


@pytest.mark.parametrize("options, message", [
    (["--r3-budget=lots"], "ERROR: --r3-budget: *"),
    (["--r3-kernels=nosuchkernel"],
     "ERROR: --r3-kernels names unknown kernel(s) nosuchkernel;*"),
    (["--r3-llm-model=some-model", "--r3-llm-api-key-env=R3_TEST_UNSET_KEY"],
     "ERROR: pytest-r3: $R3_TEST_UNSET_KEY is not set*"),
], ids=["budget", "kernels", "missing-api-key"])
def test_bad_tuning_settings_stop_pytest_before_any_test_runs(pytester, r3_project, options,
                                                              message):
    """Checked before the test suite and the recording run, not after them."""
    ran = pytester.path / "ran"
    (pytester.path / "tests" / "test_slow.py").write_text(
        f"def test_marker():\n    open({str(ran)!r}, 'w').close()\n")
    result = pytester.runpytest("--r3-tune", *options)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert not ran.exists()  # nothing ran


def test_state_that_cannot_be_written_is_one_line_not_a_traceback(pytester, r3_project):
    """A read-only place for .r3 (here /proc, where nothing can be created): recording says
    so in one line and fails the run; tuning stops with a usage error naming the path."""
    recorded = pytester.runpytest("--r3-record", "-o", "r3_dir=/proc/r3-state")
    assert recorded.ret == pytest.ExitCode.TESTS_FAILED
    recorded.stdout.fnmatch_lines(["could not save the recordings: cannot write /proc/r3-state*"
                                   "--r3-dir*"])
    assert "Traceback" not in recorded.stdout.str() + recorded.stderr.str()
    tuned = pytester.runpytest("--r3-tune", "-o", "r3_dir=/proc/r3-state")
    assert tuned.ret == pytest.ExitCode.USAGE_ERROR
    tuned.stderr.fnmatch_lines(["ERROR: pytest-r3: cannot write /proc/r3-state*--r3-dir*"])


CONFLICTED_LOCK = """\
{
  "kernels": {
<<<<<<< HEAD
    "ours": {}
=======
    "theirs": {}
>>>>>>> feature
  },
  "version": 1
}
"""


def test_a_lock_with_merge_conflict_markers_stops_tuning_before_any_test(pytester, r3_project):
    """Said in one line before the suite runs, not as an INTERNALERROR after the tuning."""
    (pytester.path / "r3.lock").write_text(CONFLICTED_LOCK)
    ran = pytester.path / "ran"
    (pytester.path / "tests" / "test_slow.py").write_text(
        f"def test_marker():\n    open({str(ran)!r}, 'w').close()\n")
    result = pytester.runpytest("--r3-tune", "--r3-budget=2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert len(errors) == 1, result.stderr.str()
    assert "merge-conflict markers" in errors[0] and "line 3" in errors[0]
    assert "resolve" in errors[0] and str(pytester.path / "r3.lock") in errors[0]
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    assert not ran.exists()
    assert (pytester.path / "r3.lock").read_text() == CONFLICTED_LOCK


@pytest.mark.parametrize("planted", ["r3.lock", ".r3/report.md", ".r3/patches", ".r3"])
def test_a_state_path_planted_as_a_symlink_stops_tuning_before_any_test(pytester, r3_project,
                                                                         tmp_path, planted):
    """A link committed where --r3-tune writes (to a user's file or folder elsewhere) is
    refused in one line before the suite runs; nothing is written through it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep\n")
    link = pytester.path / planted
    link.parent.mkdir(exist_ok=True)
    link.symlink_to(outside / "precious.txt" if "." in Path(planted).name[1:] else outside)
    ran = pytester.path / "ran"
    (pytester.path / "tests" / "test_slow.py").write_text(
        f"def test_marker():\n    open({str(ran)!r}, 'w').close()\n")
    result = pytester.runpytest("--r3-tune", "--r3-budget=2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert len(errors) == 1 and f"{link} is a symbolic link" in errors[0], result.stderr.str()
    assert "never writes through" in errors[0]
    assert not ran.exists()
    assert sorted(p.name for p in outside.iterdir()) == ["precious.txt"]
    assert (outside / "precious.txt").read_text() == "keep\n"
