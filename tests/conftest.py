"""Shared fixtures: tiny C kernels on disk, registry isolation and a swappable clang."""

from __future__ import annotations

import atexit
import itertools
import os
import re
import shutil
import stat
import tempfile
import textwrap
from pathlib import Path
from types import SimpleNamespace

# numpy, llvmlite and the backends are imported here, before any pytester run: in-process
# runs drop the modules they imported when they end, and numpy cannot be imported twice.
import llvmlite.binding  # noqa: F401
import numpy  # noqa: F401
import pytest

import pytest_r3 as r3
import pytest_r3.backends.cpu  # noqa: F401
from pytest_r3.backends import clang as toolchain
from pytest_r3.backends import compile_cache
from pytest_r3.kernel import declaration

AXPY_C = """\
#ifndef UNROLL
#define UNROLL 1
#endif
/* y = a * x + y */
void axpy(long n, float a, const float *x, float *y)
{
    #pragma clang loop unroll_count(UNROLL)
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + y[i];
}

int twice(int q) { return 2 * q; }
"""

SUM_C = """\
#ifndef SCALE
#define SCALE 1
#endif
double total(int n, const double *x)
{
    double s = 0.0;
    for (int i = 0; i < n; ++i)
        s += x[i];
    return SCALE * s;
}
"""

_LOOP_ORDER_C = textwrap.dedent("""\
    #ifndef ORDER
    #define ORDER 0
    #endif
    @MACROS@
    void @NAME@(int n, const float *in, float *out)
    {
    @FIRST@
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


def loop_order_kernel(name: str, first_statement: str = "", macros: str = "") -> str:
    """C source of ``void name(int n, const float *in, float *out)``: out = 2 * in + 1 over
    an n x n matrix, walked column by column when ORDER=0 (strided, slow) and row by row
    when ORDER=1 (same result): a tunable with a clear winner for tuning tests."""
    return (_LOOP_ORDER_C.replace("@NAME@", name).replace("@MACROS@", macros)
            .replace("@FIRST@", first_statement))


_counter = itertools.count()


# Set when this file is imported, before collection, plugins' hooks, module-level code of test
# files, session fixtures and threads that outlive the session: nothing the suite runs, nor a
# process it starts, finds the user's compiled-code cache (a developer's PYTEST_R3_CACHE_DIR
# included). Each test then gets a folder of its own (below).
SUITE_CACHE = tempfile.mkdtemp(prefix="pytest-r3-suite-cache-")
os.environ[compile_cache.DIR_ENV] = SUITE_CACHE
atexit.register(shutil.rmtree, SUITE_CACHE, ignore_errors=True)


@pytest.fixture(autouse=True)
def isolated_compile_cache(tmp_path_factory, monkeypatch):
    """Every test, and every process it starts (pytester runs, workers, subprocesses), keeps
    compiled code in a fresh folder of its own: never in the user's cache."""
    monkeypatch.setenv(compile_cache.DIR_ENV, str(tmp_path_factory.mktemp("r3-cache")))
    monkeypatch.delenv(compile_cache.SWITCH_ENV, raising=False)
    monkeypatch.delenv(compile_cache.SIZE_ENV, raising=False)


def environment_without_pytest() -> dict[str, str]:
    """os.environ without pytest's variables (PYTEST_ADDOPTS, xdist's...), for a child run
    as a user would; the test's own compiled-code cache folder is kept."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith("PYTEST_") or k == compile_cache.DIR_ENV}


@pytest.fixture(autouse=True)
def isolated_registry():
    """Kernels declared by a test vanish from ``r3.registry()`` when it ends."""
    saved = declaration.snapshot_registry()
    yield
    declaration.restore_registry(saved)


@pytest.fixture(autouse=True)
def outside_any_xdist_worker(monkeypatch):
    """Under ``pytest -n 2`` this process is an xdist worker; the pytest runs a test starts
    must not inherit that (their own workers and controller tell themselves apart by
    PYTEST_XDIST_WORKER)."""
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def empty_registry():
    """No kernel declared, as in a fresh process (for in-process pytester runs, which see
    this process's registry); the autouse fixture restores it afterwards."""
    declaration.restore_registry({})


@pytest.fixture
def unique_name(request):
    """A kernel name no other test (or pytester project) uses."""

    def make(prefix: str = "k") -> str:
        stem = re.sub(r"\W", "_", request.node.name)[:40]
        return f"{prefix}_{stem}_{next(_counter)}"

    return make


@pytest.fixture(scope="session")
def kernel_dir(tmp_path_factory) -> Path:
    """A folder holding the C sources shared by the launch tests."""
    folder = tmp_path_factory.mktemp("kernels")
    (folder / "axpy.c").write_text(AXPY_C)
    (folder / "total.c").write_text(SUM_C)
    return folder


@pytest.fixture(scope="module")
def axpy(kernel_dir):
    """``axpy`` with a tunable unroll factor, compiled once per test module."""
    return r3.kernel(
        kernel_dir / "axpy.c", entry="axpy", name=f"axpy_{next(_counter)}",
        tune={"UNROLL": [1, 2, 4, 8]},
    )


@pytest.fixture(scope="module")
def total(kernel_dir):
    """A kernel returning a double, with a tunable scale that changes the result."""
    return r3.kernel(
        kernel_dir / "total.c", entry="total", name=f"total_{next(_counter)}",
        tune={"SCALE": [1, 2, 3]},
    )


@pytest.fixture
def write_c(tmp_path):
    """Write dedented C source to ``tmp_path/name`` and return its path."""

    def write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
        return path

    return write


_ORDER_MODULE_PY = textwrap.dedent("""
    import pytest_r3 as r3

    {name} = r3.kernel("{name}.c", entry="{name}", tune={{"ORDER": [0, 1]}})
""")

_ORDER_TEST_PY = textwrap.dedent("""
    import numpy as np
    import pytest

    from ordermod import {name}


    @pytest.mark.r3_oracle({name})
    @pytest.mark.parametrize("n", [3, 384])
    def test_{name}(n):
        grid = np.random.default_rng(n).random((n, n), dtype=np.float32)
        out = np.empty_like(grid)
        {name}(n, grid, out)
        np.testing.assert_allclose(out, 2 * grid + 1, rtol=1e-6)
""")


@pytest.fixture
def order_project(pytester, empty_registry):
    """A project to tune in pytester's folder: one kernel, ``order_kernel``, whose tunable
    ORDER=1 (row by row) is clearly faster than its default; settings only, one worker,
    a budget of 2 (its whole space). ``order_project.name`` is the kernel's name."""
    name = "order_kernel"
    (pytester.path / f"{name}.c").write_text(loop_order_kernel(name))
    (pytester.path / "ordermod.py").write_text(_ORDER_MODULE_PY.format(name=name))
    (pytester.path / f"test_{name}.py").write_text(_ORDER_TEST_PY.format(name=name))
    (pytester.path / "pytest.ini").write_text(
        "[pytest]\nr3_search_pipeline = false\nr3_workers = 1\nr3_budget = 2\n")
    pytester.name = name
    return pytester


def r3_tune(project, *args: str):
    """``pytest --r3-tune`` of a pytester project, in a subprocess."""
    return project.runpytest_subprocess("-p", "no:cacheprovider", "--r3-tune", *args,
                                        timeout=600)


def new_evaluations(result, name: str) -> int:
    """The "(N)" of new evaluations in the kernel's row of the summary table."""
    (line,) = [line for line in result.outlines if line.startswith(name + " ")]
    return int(re.search(r"\(\s*(\d+)\)", line).group(1))


@pytest.fixture
def fresh_clang(monkeypatch):
    """Forget the cached clang before and after the test, so env changes take effect."""
    monkeypatch.delenv(toolchain.CLANG_ENV, raising=False)
    toolchain.find_clang.cache_clear()
    toolchain._clang_identity.cache_clear()
    yield toolchain.find_clang
    toolchain.find_clang.cache_clear()
    toolchain._clang_identity.cache_clear()


@pytest.fixture
def fake_clang(tmp_path):
    """Make an executable script that answers ``--version`` like a clang of ``version``."""

    def make(version: str = "15.0.0", exit_code: int = 0) -> Path:
        script = tmp_path / f"fake-clang-{version}"
        script.write_text(
            "#!/bin/sh\n"
            f'echo "clang version {version} (https://github.com/llvm/llvm-project)"\n'
            'echo "Target: x86_64-unknown-linux-gnu"\n'
            f"exit {exit_code}\n"
        )
        script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        return script

    return make


SAXPY_C = """\
#ifndef UNROLL
#define UNROLL 1
#endif
void saxpy(long n, float a, const float *x, float *y)
{
    #pragma clang loop unroll_count(UNROLL)
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + y[i];
}
"""

SAXPY_TESTS = """\
import numpy as np
import pytest

from {package} import saxpy


@pytest.mark.r3_oracle(saxpy)
@pytest.mark.parametrize("n", [0, 7, 1000])
def test_saxpy_matches_numpy(n):
    x = np.arange(n, dtype=np.float32)
    y = np.ones(n, dtype=np.float32)
    saxpy(n, 2.0, x, y)
    np.testing.assert_allclose(y, 2 * np.arange(n) + 1)


@pytest.mark.r3_oracle({name!r})
def test_saxpy_by_name():
    y = np.zeros(3, dtype=np.float32)
    saxpy(3, -1.0, np.ones(3, dtype=np.float32), y)
    assert y.tolist() == [-1.0, -1.0, -1.0]


def test_not_an_oracle():
    assert saxpy.name == {name!r}
"""


@pytest.fixture
def r3_project(pytester, unique_name, empty_registry):
    """A small user project in pytester's folder: a C kernel in a package, oracle tests.

    The kernel gets a name no other test uses (in-process runs share this process's
    registry while they last).
    """
    name = unique_name("saxpy")
    package = f"pkg_{name}"
    pytester.mkpydir(package)
    (pytester.path / package / "saxpy.c").write_text(SAXPY_C)
    (pytester.path / package / "__init__.py").write_text(
        "import pytest_r3 as r3\n\n"
        f"saxpy = r3.kernel('saxpy.c', entry='saxpy', name={name!r},\n"
        "                  tune={'UNROLL': [1, 2, 4]}, constraints=['UNROLL <= 4'])\n")
    pytester.makeconftest('"""Puts the project folder on sys.path (rootdir conftest)."""\n')
    (pytester.mkdir("tests") / "test_saxpy.py").write_text(
        SAXPY_TESTS.format(package=package, name=name))
    return SimpleNamespace(path=pytester.path, kernel=name, package=package)


@pytest.fixture
def cuda_device_backend(monkeypatch):
    """The CUDA backend that compiles for the GPU (PTX), even on a machine where CUDA kernels
    would run in emulation: for tests of the device build itself."""
    from pytest_r3.backends import forget_backend

    monkeypatch.setenv("PYTEST_R3_CUDA_EMULATION", "0")
    forget_backend("cuda")
    yield
    forget_backend("cuda")


def record_matmul_launches(kernel, folder: Path):
    """Two launches of a tiled matmul kernel ``(m, n, k, a, b, c)`` (CUDA's or HIP's)
    recorded into a store under ``folder``: (its KernelSpec, the store, the kept keys), what
    a ReplayServer is started with."""
    import numpy as np

    from pytest_r3.record.store import RecordingStore, capture
    from pytest_r3.replay import KernelSpec

    store = RecordingStore(folder / "recordings")
    launcher = kernel.build()
    recordings = []
    for index, (m, n, k) in enumerate([(40, 24, 56), (16, 16, 16)]):
        rng = np.random.default_rng(index)
        args = (m, n, k, rng.standard_normal((m, k), dtype=np.float32),
                rng.standard_normal((k, n), dtype=np.float32), np.zeros((m, n), np.float32))
        _, recording = capture(kernel, args, lambda a=args: launcher(*a), f"t.py::test_{index}")
        recordings.append(recording)
    keys = store.save(kernel.name, recordings, cap_bytes=1 << 26)["kept"]
    return KernelSpec.from_kernel(kernel), store, keys
