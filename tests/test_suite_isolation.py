"""The test suite never writes the user's compiled-code cache.

A run of this suite's own conftest.py over tests that compile kernels everywhere a suite
can (while test files are imported, in a module-scoped fixture's child process, in a test,
in a child given pytest's environment minus its variables, and after the session has ended),
started from a developer's shell with no PYTEST_R3_CACHE_DIR: their cache stays empty.
"""

from __future__ import annotations

from pathlib import Path

from pytest_r3.backends import compile_cache

KERNEL_C = """\
void addc(int n, const float *x, float *y)
{
    for (int i = 0; i < n; ++i)
        y[i] = x[i] + OFFSET;
}
"""

CALL = """\
import sys
import numpy as np
import pytest_r3 as r3

def call(path, offset):
    kernel = r3.kernel(path, entry="addc", name=f"addc_{offset}", defines={"OFFSET": offset})
    y = np.zeros(3, dtype=np.float32)
    kernel(3, np.ones(3, dtype=np.float32), y)
    assert y.tolist() == [1.0 + offset] * 3, y
"""

TESTS = CALL + f"""
CALL = {CALL!r}
""" + """
import atexit
import os
import subprocess
from pathlib import Path

import pytest

from pytest_r3.backends import compile_cache

KERNEL = str(Path(__file__).with_name("addc.c"))
CHILD = CALL + "call(sys.argv[1], int(sys.argv[2]))\\n"

call(KERNEL, 1)  # while the test file is imported (collection)
atexit.register(call, KERNEL, 2)  # after the session, its fixtures torn down


def child(offset, env):
    subprocess.run([sys.executable, "-c", CHILD, KERNEL, str(offset)], env=env, check=True)


@pytest.fixture(scope="module")
def module_child():  # a child process started by a module-scoped fixture
    child(3, dict(os.environ))


def test_in_process(module_child):
    call(KERNEL, 4)
    assert compile_cache.CompileCache(compile_cache.configured_dir()).info()["entries"] > 0


def test_child_without_pytest_variables():
    child(5, {k: v for k, v in os.environ.items()
              if not k.startswith("PYTEST_") or k == compile_cache.DIR_ENV})
"""


def test_the_suite_never_writes_the_users_compiled_code_cache(pytester, monkeypatch,
                                                              tmp_path_factory):
    pytester.makeconftest((Path(__file__).with_name("conftest.py")).read_text())
    pytester.makepyfile(test_compiles=TESTS)
    (pytester.path / "addc.c").write_text(KERNEL_C)
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))  # the developer's home; their cache is under it
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv(compile_cache.DIR_ENV)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=2)
    users = home / ".cache" / "pytest-r3"
    written = sorted(str(p.relative_to(users)) for p in users.rglob("*") if p.is_file())
    assert written == [], f"the suite wrote {len(written)} entries to the user's cache"
