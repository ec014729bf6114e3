"""The compiled-code cache for CUDA kernels: PTX, ptxas's cubin and report, and the host
object code of emulation are kept between processes, and never reused wrongly.

As in test_compile_cache.py, a "fresh process" is simulated by forgetting what this process
holds in memory (clang's output, ptxas's report) and declaring the kernel again; what is
left is the disk, counted as ``pytest-r3 cache info`` shows it.
"""

from __future__ import annotations

import subprocess
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import pytest_r3 as r3
from pytest_r3.backends import clang as toolchain
from pytest_r3.backends import compile_cache
from pytest_r3.backends.compile_cache import trusted_build, untrusted_build
from pytest_r3.backends.cuda import CUDABackend
from pytest_r3.backends.cuda import toolchain as cuda_toolchain
from pytest_r3.cli import main
from pytest_r3.errors import CorruptStateWarning
from pytest_r3.model.pipeline import Pipeline
from pytest_r3.tuning.build import build

KERNEL_CU = """\
#include "offset.h"
extern "C" __global__ void shift(int n, const float *x, float *y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = SCALE * x[i] + OFFSET;
}
"""

needs_ptxas = pytest.mark.skipif(cuda_toolchain.find_tool("ptxas") is None,
                                 reason="ptxas (CUDA toolkit) is not installed")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "shift.cu").write_text(KERNEL_CU)
    (tmp_path / "offset.h").write_text("#define OFFSET 1.0f\n")
    return tmp_path


@pytest.fixture
def work(monkeypatch) -> dict[str, int]:
    """How many times clang, LLVM's optimiser and ptxas ran in this process."""
    counts = {"clang": 0, "llvm": 0, "ptxas": 0}
    compile_, optimise, run = toolchain._compile, Pipeline.run, subprocess.run

    def counted_compile(*args, **kwargs):
        counts["clang"] += 1
        return compile_(*args, **kwargs)

    def counted_optimise(self, module, machine):
        counts["llvm"] += 1
        return optimise(self, module, machine)

    def counted_run(command, *args, **kwargs):
        # ptxas assembling (not asked its version; nvcc --dryrun finds the toolkit's headers)
        counts["ptxas"] += Path(command[0]).name == "ptxas" and "--version" not in command
        return run(command, *args, **kwargs)

    monkeypatch.setattr(toolchain, "_compile", counted_compile)
    monkeypatch.setattr(Pipeline, "run", counted_optimise)
    monkeypatch.setattr(cuda_toolchain, "subprocess", SimpleNamespace(
        run=counted_run, SubprocessError=subprocess.SubprocessError))
    return counts


def fresh(project: Path, work: dict[str, int], **options) -> r3.Kernel:
    """The kernel as a new process declares it: nothing compiled in memory."""
    toolchain._ir_cache.clear()
    cuda_toolchain.assemble.cache_clear()
    for name in work:
        work[name] = 0
    options.setdefault("defines", {"SCALE": 2})
    return r3.kernel(project / "shift.cu", entry="shift", name="cached_shift", backend="cuda",
                     launch={"grid": lambda args, t: ((args["n"] + 63) // 64,), "block": (64,)},
                     **options)


def ptx(kernel: r3.Kernel, arch: str = "sm_80", **pipeline: object):
    """The kernel's baseline (or a pipeline variant) compiled to PTX for ``arch`` the way
    ``pytest-r3 build`` compiles it (a trusted build of the declared source)."""
    variant = kernel.variant(pipeline=pipeline or None)
    backend = CUDABackend(arch)
    with trusted_build():
        ir = backend.compile(kernel.source_for(variant), variant.macro_dict)
        return backend.compile_ptx(ir, kernel.entry, variant.pipeline, kernel.name)


def kinds() -> dict[str, int]:
    return compile_cache.CompileCache(compile_cache.configured_dir()).info()["kinds"]


def test_pytest_r3_build_keeps_the_ptx_and_a_second_build_reads_it(project, work,
                                                                   cuda_device_backend,
                                                                   tmp_path, capsys):
    kernel = fresh(project, work)
    first = build(kernel, kernel.baseline, tmp_path / "a", "sm_80")
    assert work["llvm"] > 0
    assert kinds()["cuda-ptx"] == 1
    assert main(["cache", "info"]) == 0
    assert "1 cuda-ptx" in capsys.readouterr().out
    kernel = fresh(project, work)
    second = build(kernel, kernel.baseline, tmp_path / "b", "sm_80")
    assert work["clang"] == 0 and work["llvm"] == 0
    assert kinds()["cuda-ptx"] == 1 and kinds()["cuda-signature"] == 1
    assert Path(second.files["ptx"]).read_text() == Path(first.files["ptx"]).read_text()
    assert Path(second.files["ir"]).read_text() == Path(first.files["ir"]).read_text()
    assert ".entry shift(" in Path(second.files["ptx"]).read_text()


@pytest.mark.parametrize("change", ["define", "header", "target", "pipeline"])
def test_each_key_component_makes_another_ptx(project, work, cuda_device_backend, change):
    before = ptx(fresh(project, work))
    assert kinds()["cuda-ptx"] == 1
    kernel = fresh(project, work, defines={"SCALE": 3}) if change == "define" \
        else fresh(project, work)
    if change == "header":
        (project / "offset.h").write_text("#define OFFSET 5.0f\n")
    after = ptx(kernel, **({"arch": "sm_90"} if change == "target" else {}),
                **({"level": 0} if change == "pipeline" else {}))
    assert work["llvm"] > 0, "the changed build was read from the cache"
    assert kinds()["cuda-ptx"] == 2
    assert after.ptx != before.ptx
    if change == "target":
        assert ".target sm_90" in after.ptx and ".target sm_80" in before.ptx
    ptx(fresh(project, work))  # the first one is still there, and still right
    assert work["llvm"] == 0


@pytest.mark.parametrize("damage", ["truncated", "one byte changed"])
def test_a_damaged_ptx_entry_is_rebuilt_with_one_warning(project, work, cuda_device_backend,
                                                         damage):
    expected = ptx(fresh(project, work)).ptx
    (path,) = entry_files("cuda-ptx")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2] if damage == "truncated"
                     else data[:-10] + bytes([data[-10] ^ 0x40]) + data[-9:])
    with pytest.warns(CorruptStateWarning, match="damaged") as caught:
        assert ptx(fresh(project, work)).ptx == expected
    assert len([w for w in caught if w.category is CorruptStateWarning]) == 1
    assert work["llvm"] > 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ptx(fresh(project, work)).ptx == expected
    assert work["llvm"] == 0


def test_a_rewrite_of_a_cuda_kernel_never_enters_the_cache(project, work, cuda_device_backend):
    kernel = fresh(project, work)
    backend = CUDABackend("sm_80")
    rewrite = KERNEL_CU.replace("SCALE * x[i]", "x[i] * SCALE")
    with untrusted_build():
        backend.compile_ptx(backend.compile(kernel.source_for(kernel.variant(
            source_text=rewrite)), {"SCALE": 2}), "shift", Pipeline())
    assert kinds() == {}


@needs_ptxas
def test_ptxas_runs_once_per_ptx_and_its_report_is_kept(project, work, cuda_device_backend):
    first = ptx(fresh(project, work))
    assert work["ptxas"] == 1 and first.diagnostics["ptxas"] == "ok"
    assert first.cubin and first.cubin[:4] == b"\x7fELF"
    assert kinds()["cuda-cubin"] == 1
    second = ptx(fresh(project, work))
    assert work["ptxas"] == 0
    assert second.diagnostics == first.diagnostics and second.cubin == first.cubin


@needs_ptxas
def test_another_ptxas_version_assembles_again(project, work, cuda_device_backend, tmp_path,
                                               monkeypatch):
    ptx(fresh(project, work))
    assert kinds()["cuda-cubin"] == 1
    real = cuda_toolchain.find_tool("ptxas")
    folder = tmp_path / "newer-toolkit"
    folder.mkdir()
    wrapper = folder / "ptxas"
    wrapper.write_text('#!/bin/sh\nif [ "$1" = --version ]; then echo "ptxas: release 99.9";'
                       f' exit 0; fi\nexec "{real}" "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}:{subprocess.os.environ['PATH']}")
    again = ptx(fresh(project, work))
    assert work["ptxas"] == 1 and work["llvm"] == 0  # the PTX is the same: only ptxas runs
    assert again.diagnostics["ptxas"] == "ok"
    assert kinds()["cuda-cubin"] == 2


# -- emulation ---------------------------------------------------------------------------------
def outputs(kernel: r3.Kernel) -> list[float]:
    x = np.arange(5, dtype=np.float32)
    y = np.zeros(5, dtype=np.float32)
    kernel(5, x, y)
    return y.tolist()


@pytest.fixture
def emulated(monkeypatch):
    from pytest_r3.backends import forget_backend

    monkeypatch.setenv("PYTEST_R3_CUDA_EMULATION", "1")
    forget_backend("cuda")
    yield
    forget_backend("cuda")


def test_emulation_keeps_its_host_object_code(project, work, emulated):
    assert outputs(fresh(project, work)) == [1, 3, 5, 7, 9]
    assert kinds()["cuda-emulation-object"] == 1
    kernel = fresh(project, work)
    assert outputs(kernel) == [1, 3, 5, 7, 9]
    assert work["clang"] == 0 and work["llvm"] == 0
    assert kinds()["cuda-emulation-object"] == 1
    assert kinds()["cuda-emulation-signature"] == 1
    assert "define" in kernel.build().optimised_ir  # made again when asked for
    assert work["llvm"] == 1
    assert outputs(fresh(project, work, defines={"SCALE": 3})) == [1, 4, 7, 10, 13]
    assert kinds()["cuda-emulation-object"] == 2


def test_a_damaged_emulation_entry_is_rebuilt_with_one_warning(project, work, emulated):
    fresh(project, work).build()
    (path,) = entry_files("cuda-emulation-object")
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.warns(CorruptStateWarning, match="damaged") as caught:
        assert outputs(fresh(project, work)) == [1, 3, 5, 7, 9]
    assert len([w for w in caught if w.category is CorruptStateWarning]) == 1
    assert kinds()["cuda-emulation-object"] == 1


def test_racecheck_builds_never_use_the_cache(project, work, emulated, monkeypatch):
    monkeypatch.setenv("PYTEST_R3_CUDA_RACECHECK", "1")
    assert outputs(fresh(project, work)) == [1, 3, 5, 7, 9]
    assert "cuda-emulation-object" not in kinds()


def entry_files(kind: str) -> list[Path]:
    store = compile_cache.CompileCache(compile_cache.configured_dir())
    found = [store.entries_dir / name[:2] / name for name, entry in store.entries()
             if entry is not None and entry.meta.get("kind") == kind]
    assert found, f"no {kind} entry"
    return found
