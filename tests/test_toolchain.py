"""Finding clang, checking its version against llvmlite, and compiling C to IR in memory."""

from __future__ import annotations

import re
import shlex
import subprocess
import tempfile
import uuid

import llvmlite.binding as llvm
import numpy as np
import pytest

import pytest_r3 as r3
from pytest_r3.backends import clang as toolchain


def _unique_source(entry: str) -> str:
    """Source text no earlier compile has seen, so the IR cache cannot answer for it."""
    return (f"/* {uuid.uuid4()} */\n"
            f"void {entry}(int n, float *x) {{ for (int i = 0; i < n; ++i) x[i] += 1.0f; }}\n")


class CountingRun:
    """Wraps subprocess.run, counting the calls (every clang invocation goes through it)."""

    def __init__(self, real):
        self.real = real
        self.calls: list[list[str]] = []

    def __call__(self, args, *rest, **kwargs):
        self.calls.append(list(args))
        return self.real(args, *rest, **kwargs)


@pytest.fixture
def count_runs(monkeypatch):
    toolchain.find_clang()  # found (and its own subprocess calls made) before counting
    counter = CountingRun(subprocess.run)
    monkeypatch.setattr(subprocess, "run", counter)
    return counter


# -- finding clang -----------------------------------------------------------------------


def test_ziglang_clang_is_found_and_matches_llvmlite_major(fresh_clang):
    clang = fresh_clang()
    assert clang.origin == "ziglang wheel"
    assert "ziglang" in clang.command[0]
    assert clang.major == llvm.llvm_version_info[0] == toolchain.llvm_major()
    # the version is what the executable itself reports
    out = subprocess.run([*clang.command, "--version"], capture_output=True, text=True)
    assert f"clang version {clang.version}" in out.stdout
    # zig's own libc headers replace the system ones
    assert clang.system_flags[0] == "-nostdinc"
    assert "-isystem" in clang.system_flags


def test_find_clang_is_cached(fresh_clang):
    assert fresh_clang() is fresh_clang()


def test_clang_of_wrong_major_version_is_refused(fresh_clang, fake_clang, monkeypatch):
    fake = fake_clang("15.0.0")
    monkeypatch.setenv(toolchain.CLANG_ENV, str(fake))
    with pytest.raises(r3.ToolchainError) as excinfo:
        fresh_clang()
    message = str(excinfo.value)
    wanted = llvm.llvm_version_info[0]
    assert "clang 15.0.0" in message
    assert str(fake) in message
    assert f"LLVM {wanted}" in message
    assert toolchain.CLANG_ENV in message  # says how to fix it
    assert f"{wanted}.x" in message


def test_wrong_clang_stops_a_kernel_launch(fresh_clang, fake_clang, monkeypatch, unique_name):
    monkeypatch.setenv(toolchain.CLANG_ENV, str(fake_clang("15.0.0")))
    kernel = r3.kernel(_unique_source("bump"), entry="bump", name=unique_name())
    with pytest.raises(r3.ToolchainError, match="15.0.0"):
        kernel(1, np.zeros(1, np.float32))


def test_clang_override_of_matching_version_is_used(fresh_clang, monkeypatch):
    zig_clang = fresh_clang().command
    fresh_clang.cache_clear()
    monkeypatch.setenv(toolchain.CLANG_ENV, shlex.join(zig_clang))
    clang = fresh_clang()
    assert clang.origin == f"${toolchain.CLANG_ENV}"
    assert clang.command == zig_clang
    assert clang.system_flags == ()
    ir = toolchain.compile_to_ir(_unique_source("via_env"), filename="via_env.c")
    assert re.search(r"^define .*@via_env\(", ir, re.MULTILINE)


def test_missing_clang_override_is_a_toolchain_error(fresh_clang, monkeypatch, tmp_path):
    missing = tmp_path / "no-such-clang"
    monkeypatch.setenv(toolchain.CLANG_ENV, str(missing))
    with pytest.raises(r3.ToolchainError, match="cannot run clang") as excinfo:
        fresh_clang()
    assert str(missing) in str(excinfo.value)
    assert toolchain.CLANG_ENV in str(excinfo.value)


def test_override_that_is_not_clang_is_refused(fresh_clang, monkeypatch, tmp_path):
    script = tmp_path / "gcc"
    script.write_text('#!/bin/sh\necho "gcc (GCC) 12.2.0"\n')
    script.chmod(0o755)
    monkeypatch.setenv(toolchain.CLANG_ENV, str(script))
    with pytest.raises(r3.ToolchainError, match="did not report a clang version") as excinfo:
        fresh_clang()
    assert "gcc (GCC) 12.2.0" in str(excinfo.value)


def test_failing_clang_override_is_refused(fresh_clang, fake_clang, monkeypatch):
    monkeypatch.setenv(toolchain.CLANG_ENV, str(fake_clang("22.1.0", exit_code=3)))
    with pytest.raises(r3.ToolchainError, match="exit 3"):
        fresh_clang()


# -- compiling -----------------------------------------------------------------------------


def test_compile_to_ir_returns_ir_of_the_entry_and_writes_no_files(tmp_path, monkeypatch):
    workdir, scratch = tmp_path / "cwd", tmp_path / "tmp"
    workdir.mkdir()
    scratch.mkdir()
    monkeypatch.chdir(workdir)
    monkeypatch.setenv("TMPDIR", str(scratch))  # for clang
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # for Python's tempfile
    ir = toolchain.compile_to_ir(
        _unique_source("no_files"),
        filename=str(workdir / "no_files.c"),
        target_flags=toolchain.host_target().clang_flags(),
    )
    assert re.search(r"^define .*void @no_files\(i32 noundef %n, ptr noundef %x\)", ir,
                     re.MULTILINE)
    assert f'target triple = "{toolchain.host_target().triple}"' in ir
    # unoptimised: clang's front end only, the loop is still there as written
    assert "for.body" in ir
    llvm.parse_assembly(ir).verify()  # llvmlite accepts the text
    assert list(workdir.iterdir()) == []
    assert list(scratch.iterdir()) == []


def test_compile_cache_returns_same_text_without_running_clang(count_runs):
    source = _unique_source("cached")
    first = toolchain.compile_to_ir(source, filename="cached.c")
    assert len(count_runs.calls) == 1
    second = toolchain.compile_to_ir(source, filename="cached.c")
    assert second == first
    assert len(count_runs.calls) == 1  # answered from the cache
    # anything that changes the output misses the cache
    toolchain.compile_to_ir(source, filename="cached.c", macros={"N": 4})
    toolchain.compile_to_ir(source, filename="cached.c", debug_info=True)
    assert len(count_runs.calls) == 3


def test_macros_reach_the_preprocessor_and_booleans_become_0_or_1(unique_name):
    source = "int flags(void) { return 100 * FIRST + 10 * SECOND + THIRD; }\n"
    assert toolchain.macro_flags({"SECOND": True, "FIRST": 7, "THIRD": False}) == [
        "-DFIRST=7", "-DSECOND=1", "-DTHIRD=0"]
    kernel = r3.kernel(source, entry="flags", name=unique_name(),
                       tune={"FIRST": [7, 2], "SECOND": [True, False], "THIRD": [False, True]})
    assert kernel() == 710
    assert kernel.configure(FIRST=2, SECOND=False, THIRD=True)() == 201


def test_syntax_error_is_a_compile_error_with_file_line_and_diagnostic(count_runs):
    source = "void broken(int n, float *x)\n{\n    x[0] = n\n}\n"
    with pytest.raises(r3.CompileError) as excinfo:
        toolchain.compile_to_ir(source, filename="/src/kernels/broken.c")
    error = excinfo.value
    message = str(error)
    first_line = message.splitlines()[0]
    assert first_line.startswith("clang could not compile /src/kernels/broken.c")
    assert "/src/kernels/broken.c:3:" in first_line  # file:line of the bad statement
    assert "error: expected ';'" in first_line  # clang's own words
    assert "error: expected ';'" in error.diagnostics
    assert "x[0] = n" in error.diagnostics  # the source excerpt clang prints
    assert error.command[: len(toolchain.find_clang().command)] == list(
        toolchain.find_clang().command)
    # failures are not cached: the next attempt runs clang again
    with pytest.raises(r3.CompileError):
        toolchain.compile_to_ir(source, filename="/src/kernels/broken.c")
    assert len(count_runs.calls) == 2


def test_compile_error_in_a_kernel_file_names_that_file(write_c, unique_name):
    path = write_c("bad.c", """\
        /* line 1 */
        void bad(int n, float *x)
        {
            x[0] = undeclared_thing;
        }
        """)
    kernel = r3.kernel(path, entry="bad", name=unique_name())
    with pytest.raises(r3.CompileError) as excinfo:
        kernel(1, np.zeros(1, np.float32))
    message = str(excinfo.value)
    assert f"{path}:4:" in message.splitlines()[0]
    assert "undeclared_thing" in message
    # the host's CPU feature flags are summarised in the message, kept on the error
    features = excinfo.value.command.count("-target-feature")
    assert features > 0
    assert f"<{features} -target-feature flags>" in message
    assert "-target-feature -Xclang" not in message
    assert len(message) < 3000


def test_host_target_matches_llvmlite():
    target = toolchain.host_target()
    assert target.triple == llvm.get_process_triple()
    assert target.cpu == llvm.get_host_cpu_name()
    flags = target.clang_flags()
    assert flags[:2] == ("-target", target.triple)
    assert f"-march={target.cpu}" in flags
    assert target.name.startswith("cpu-" + target.triple.split("-")[0])


def test_source_hash_changes_with_the_text():
    assert toolchain.source_hash("a") == toolchain.source_hash("a")
    assert toolchain.source_hash("a") != toolchain.source_hash("b")
    assert len(toolchain.source_hash("a")) == 16
