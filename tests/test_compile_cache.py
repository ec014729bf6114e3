"""The on-disk compiled-code cache: a kernel compiles once per machine, never wrongly.

A "fresh process" is simulated in-process by forgetting clang's in-memory results and
declaring the kernel again (a new Kernel holds no launcher): what remains is the disk. Real
processes are used where processes matter (two filling the cache at once).
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

import pytest_r3
import pytest_r3 as r3
from pytest_r3.backends import clang as toolchain
from pytest_r3.backends import compile_cache
from pytest_r3.cli import main
from pytest_r3.errors import CorruptStateWarning
from pytest_r3.model.pipeline import Pipeline

KERNEL_C = """\
#include "scale.h"
void scale(long n, const float *x, float *y)
{
    for (long i = 0; i < n; ++i)
        y[i] = FACTOR * x[i] + OFFSET;
}
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "scale.c").write_text(KERNEL_C)
    (tmp_path / "scale.h").write_text("#define FACTOR 2.0f\n")
    return tmp_path


@pytest.fixture
def work(monkeypatch) -> dict[str, int]:
    """How many times clang ran and LLVM optimised a module in this process."""
    counts = {"clang": 0, "llvm": 0}
    compile_, run = toolchain._compile, Pipeline.run

    def counted_compile(*args, **kwargs):
        counts["clang"] += 1
        return compile_(*args, **kwargs)

    def counted_run(self, module, machine):
        counts["llvm"] += 1
        return run(self, module, machine)

    monkeypatch.setattr(toolchain, "_compile", counted_compile)
    monkeypatch.setattr(Pipeline, "run", counted_run)
    return counts


def fresh(project: Path, work: dict[str, int], offset: float = 1, **options) -> r3.Kernel:
    """The kernel as a new process would declare it: nothing compiled in memory."""
    toolchain._ir_cache.clear()
    work.update(clang=0, llvm=0)
    return r3.kernel(project / "scale.c", entry="scale", name="cached_scale",
                     defines={"OFFSET": offset}, **options)


def outputs(kernel) -> list[float]:
    x = np.arange(4, dtype=np.float32)
    y = np.zeros(4, dtype=np.float32)
    kernel(4, x, y)
    return y.tolist()


def cache() -> compile_cache.CompileCache:
    return compile_cache.CompileCache(compile_cache.configured_dir())


def kinds() -> dict[str, int]:
    return cache().info()["kinds"]


def test_a_second_process_runs_neither_clang_nor_llvm(project, work):
    assert outputs(fresh(project, work)) == [1, 3, 5, 7]
    assert work["clang"] > 0 and work["llvm"] > 0
    assert kinds() == {"clang": 3, "cpu-object": 1, "cpu-signature": 1}
    assert outputs(fresh(project, work)) == [1, 3, 5, 7]
    assert work == {"clang": 0, "llvm": 0}


def test_an_edited_header_is_compiled_again(project, work):
    assert outputs(fresh(project, work)) == [1, 3, 5, 7]
    (project / "scale.h").write_text("#define FACTOR 3.0f\n")
    assert outputs(fresh(project, work)) == [1, 4, 7, 10]
    assert work["clang"] > 0
    (project / "scale.h").write_text("#define FACTOR 2.0f\n")  # the old text: its entry again
    assert outputs(fresh(project, work)) == [1, 3, 5, 7]


def test_each_define_has_its_own_entry(project, work):
    assert outputs(fresh(project, work, offset=1)) == [1, 3, 5, 7]
    assert outputs(fresh(project, work, offset=5)) == [5, 7, 9, 11]
    assert work["clang"] > 0 and work["llvm"] > 0
    assert outputs(fresh(project, work, offset=1)) == [1, 3, 5, 7]
    assert work == {"clang": 0, "llvm": 0}


def test_a_pipeline_setting_is_optimised_again(project, work):
    fresh(project, work).build()
    kernel = fresh(project, work)
    unoptimised = kernel.configure(pipeline={"level": 0})
    assert work["llvm"] > 0 and "alloca" in unoptimised.optimised_ir
    kernel = fresh(project, work)
    assert "alloca" in kernel.configure(pipeline={"level": 0}).optimised_ir
    assert work["clang"] == 0  # both levels' objects and the IR were on disk
    assert kinds()["cpu-object"] == 2


def test_declared_pipeline_and_tunables_are_part_of_the_key(project, work):
    kernel = fresh(project, work, pipeline={"loop_vectorize": False})
    assert outputs(kernel) == [1, 3, 5, 7]
    assert outputs(fresh(project, work)) == [1, 3, 5, 7]
    assert work["llvm"] > 0
    assert kinds()["cpu-object"] == 2


@pytest.fixture
def clang_wrapper(tmp_path, monkeypatch, fresh_clang):
    """PYTEST_R3_CLANG naming the ziglang clang behind a script whose reported version the
    test sets, as a system clang upgraded in place would change."""
    zig = toolchain.find_clang().command
    script = tmp_path / "clang"

    def install(version: str) -> None:
        script.write_text(textwrap.dedent(f"""\
            #!/bin/sh
            if [ "$1" = "--version" ]; then echo "clang version {version}"; exit 0; fi
            exec {' '.join(zig)} "$@"
            """))
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
        monkeypatch.setenv(toolchain.CLANG_ENV, str(script))
        toolchain.find_clang.cache_clear()      # as a new process would find it
        toolchain._clang_identity.cache_clear()

    yield install
    toolchain._clang_identity.cache_clear()


INLINE = """
void bump(long n, float *y) { for (long i = 0; i < n; ++i) y[i] += 1.0f; }
"""


def test_another_clang_version_compiles_again(clang_wrapper, work):
    def build_once() -> None:
        toolchain._ir_cache.clear()
        work.update(clang=0, llvm=0)
        kernel = r3.kernel(INLINE, entry="bump", name="cached_bump")
        y = np.zeros(3, dtype=np.float32)
        kernel(3, y)
        assert y.tolist() == [1, 1, 1]

    clang_wrapper(f"{toolchain.llvm_major()}.1.100")
    build_once()
    assert work["clang"] > 0
    build_once()
    assert work["clang"] == 0
    clang_wrapper(f"{toolchain.llvm_major()}.1.101")
    build_once()
    assert work["clang"] > 0


def test_another_pytest_r3_version_optimises_again(project, work, monkeypatch):
    fresh(project, work).build()
    monkeypatch.setattr(pytest_r3, "__version__", "999.0")
    compile_cache.code_identity.cache_clear()
    try:
        assert outputs(fresh(project, work)) == [1, 3, 5, 7]
        assert work["llvm"] > 0
    finally:
        compile_cache.code_identity.cache_clear()


def test_another_target_cpu_compiles_again(project, work, monkeypatch):
    assert outputs(fresh(project, work)) == [1, 3, 5, 7]
    host = toolchain.host_target()
    baseline_cpu = "x86-64" if host.triple.startswith("x86_64") else "generic"
    generic = toolchain.HostTarget(host.triple, baseline_cpu, "")
    monkeypatch.setattr(toolchain, "host_target", lambda: generic)
    assert outputs(fresh(project, work)) == [1, 3, 5, 7]
    assert work["clang"] > 0 and work["llvm"] > 0
    assert kinds()["cpu-object"] == 2


def _entry_files(kind: str) -> list[Path]:
    found = [Path(compile_cache.configured_dir(), compile_cache.FORMAT, name[:2], name)
             for name, entry in cache().entries()
             if entry is not None and entry.meta.get("kind") == kind]
    assert found, f"no {kind} entry"
    return found


@pytest.mark.parametrize("damage", ["truncated", "one byte changed"])
def test_a_damaged_entry_is_rebuilt_with_one_warning(project, work, damage):
    fresh(project, work).build()
    (path,) = _entry_files("cpu-object")
    data = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(data[: len(data) // 2])
    else:
        path.write_bytes(data[:-10] + bytes([data[-10] ^ 0x40]) + data[-9:])
    with pytest.warns(CorruptStateWarning, match="damaged") as caught:
        assert outputs(fresh(project, work)) == [1, 3, 5, 7]
    assert len([w for w in caught if w.category is CorruptStateWarning]) == 1
    assert work["llvm"] > 0
    assert cache().info()["damaged"] == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert outputs(fresh(project, work)) == [1, 3, 5, 7]
    assert work == {"clang": 0, "llvm": 0}


FILL = """
import sys
import numpy as np
import pytest_r3 as r3

for offset in range(6):
    kernel = r3.kernel(sys.argv[1], entry="scale", name=f"scale_{offset}",
                       defines={"OFFSET": offset})
    y = np.zeros(4, dtype=np.float32)
    kernel(4, np.arange(4, dtype=np.float32), y)
    assert y.tolist() == [offset + 2.0 * i for i in range(4)], y
print("filled")
"""


def test_two_processes_filling_the_cache_at_once_leave_valid_entries(project, work):
    script = project / "fill.py"
    script.write_text(FILL)
    children = [subprocess.Popen([sys.executable, str(script), str(project / "scale.c")],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for _ in range(2)]
    for child in children:
        out, err = child.communicate(timeout=600)
        assert child.returncode == 0 and "filled" in out, err
    info = cache().info()
    assert info["damaged"] == 0
    assert info["kinds"]["cpu-signature"] == 6
    leftovers = list(Path(info["folder"]).rglob(".tmp-*"))
    assert not leftovers
    for offset in range(6):  # what they wrote serves this process: nothing compiled
        toolchain._ir_cache.clear()
        kernel = r3.kernel(project / "scale.c", entry="scale", name=f"scale_{offset}",
                           defines={"OFFSET": offset})
        y = np.zeros(4, dtype=np.float32)
        kernel(4, np.arange(4, dtype=np.float32), y)
        assert y.tolist() == [offset + 2.0 * i for i in range(4)]
    assert work == {"clang": 0, "llvm": 0}


def test_cache_off_compiles_every_time(project, work, monkeypatch):
    monkeypatch.setenv(compile_cache.SWITCH_ENV, "off")
    assert outputs(fresh(project, work)) == [1, 3, 5, 7]
    assert outputs(fresh(project, work)) == [1, 3, 5, 7]
    assert work["clang"] > 0 and work["llvm"] > 0
    assert cache().info()["entries"] == 0


def test_the_folder_and_entries_are_the_users_only(project, work, tmp_path, monkeypatch):
    folder = tmp_path / "shared"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    monkeypatch.setenv(compile_cache.DIR_ENV, str(folder))
    fresh(project, work).build()
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    entries = [p for p in folder.rglob("*") if p.is_file()]
    assert entries and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in entries)


def test_the_default_folder_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv(compile_cache.DIR_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert compile_cache.configured_dir() == tmp_path / "xdg" / "pytest-r3"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert compile_cache.configured_dir() == tmp_path / "home" / ".cache" / "pytest-r3"


def test_the_least_recently_used_entries_go_first(tmp_path):
    store = compile_cache.CompileCache(tmp_path / "c", max_bytes=12_000)
    names = [compile_cache.key("test", n) for n in range(4)]
    for age, name in enumerate(names[:3]):
        store.put(name, b"x" * 3000, {"kind": "test"})
        path = tmp_path / "c" / compile_cache.FORMAT / name[:2] / name
        os.utime(path, (time.time() - 100 + age, time.time() - 100 + age))
    assert store.get(names[0]) is not None  # the oldest, used now
    store.put(names[3], b"x" * 3000, {"kind": "test"})  # over the bound: one must go
    assert store.get(names[1]) is None
    assert all(store.get(n) is not None for n in (names[0], names[2], names[3]))


def test_a_size_that_is_not_one_is_refused_by_name():
    assert compile_cache.parse_size("2M") == 2 * 2**20
    assert compile_cache.parse_size("1.5GiB") == int(1.5 * 2**30)
    with pytest.raises(r3.DeclarationError, match="PYTEST_R3_CACHE_SIZE='lots'"):
        compile_cache.parse_size("lots")


def test_a_rewrite_never_enters_the_cache(project, work):
    kernel = fresh(project, work)
    kernel.build()
    before = cache().info()["entries"]
    rewrite = KERNEL_C.replace("FACTOR * x[i]", "x[i] * FACTOR")
    kernel.build(kernel.variant(source_text=rewrite))
    assert work["clang"] > 0
    assert cache().info()["entries"] == before


def test_cache_info_and_clear(project, work, capsys):
    fresh(project, work).build()
    assert main(["cache", "info"]) == 0
    shown = capsys.readouterr().out
    assert str(compile_cache.configured_dir()) in shown
    assert "1 cpu-object" in shown
    assert main(["cache", "clear"]) == 0
    assert "removed 5 compiled-code cache entries" in capsys.readouterr().out
    assert cache().info()["entries"] == 0
    assert outputs(fresh(project, work)) == [1, 3, 5, 7]
    assert work["clang"] > 0


TUNED_MODULE = """
import pytest_r3 as r3

tuned_scale = r3.kernel("tuned_scale.c", entry="tuned_scale", tune={"ORDER": [0, 1]})
"""

TUNED_TEST = """
import numpy as np
import pytest

from tunedmod import tuned_scale


@pytest.mark.r3_oracle(tuned_scale)
@pytest.mark.parametrize("n", [3, 256])
def test_tuned_scale(n):
    grid = np.random.default_rng(n).random((n, n), dtype=np.float32)
    out = np.empty_like(grid)
    tuned_scale(n, grid, out)
    np.testing.assert_allclose(out, 2 * grid + 1, rtol=1e-6)
"""


def test_search_candidates_never_enter_the_cache(tmp_path):
    """--r3-tune compiles many configurations; the cache receives only what plain calls
    build: the baseline (while recording) and the winner (its oracle tests re-run with it).
    Whatever the tuning run stored, plain runs with and without its r3.lock store too."""
    from conftest import environment_without_pytest, loop_order_kernel

    (tmp_path / "tuned_scale.c").write_text(loop_order_kernel("tuned_scale"))
    (tmp_path / "tunedmod.py").write_text(TUNED_MODULE)
    (tmp_path / "test_tuned_scale.py").write_text(TUNED_TEST)
    (tmp_path / "pytest.ini").write_text("[pytest]\nr3_workers = 1\nr3_budget = 8\n")

    def pytest_run(*args: str) -> None:
        result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                                 *args], cwd=tmp_path, capture_output=True, text=True,
                                timeout=900, env=environment_without_pytest())
        assert result.returncode == 0, result.stdout + result.stderr

    pytest_run("--r3-tune")
    (results,) = (tmp_path / ".r3" / "results" / "tuned_scale").glob("*.jsonl")
    assert len([line for line in results.read_text().splitlines() if line.strip()]) >= 4
    tuned = {name for name, _ in cache().entries()}
    assert kinds()["cpu-object"] <= 2
    cache().clear()
    lock = tmp_path / "r3.lock"
    saved = lock.read_text()
    lock.unlink()
    pytest_run()  # the baseline
    lock.write_text(saved)
    pytest_run()  # the locked winner
    plain = {name for name, _ in cache().entries()}
    assert tuned <= plain, f"{len(tuned - plain)} entries only tuning made"



@pytest.mark.skipif(os.getuid() != 0, reason="giving a folder to another user needs root")
def test_a_folder_owned_by_someone_else_is_not_used(project, work, tmp_path, monkeypatch):
    folder = tmp_path / "theirs"
    folder.mkdir(mode=0o700)
    os.chown(folder, 12345, 12345)
    monkeypatch.setenv(compile_cache.DIR_ENV, str(folder))
    with pytest.warns(compile_cache.CacheWarning, match="owned by user id 12345"):
        assert outputs(fresh(project, work)) == [1, 3, 5, 7]
    assert not list(folder.iterdir())
    assert outputs(fresh(project, work)) == [1, 3, 5, 7]
    assert work["clang"] > 0
