"""scripts/gpu_suite.py, the parts that run without a GPU: trimming the ziglang wheel,
splitting the pack into parts and putting them together over several calls, the virtual
environment that sees its parent's packages, and judging skips by their reason."""

from __future__ import annotations

import importlib.util
import io
import json
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "gpu_suite.py"


@pytest.fixture(scope="module")
def suite():
    spec = importlib.util.spec_from_file_location("gpu_suite", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_wheel(path: Path, files: dict[str, bytes], executable: set[str] = frozenset()) -> None:
    record = "".join(f"{name},sha256=x,{len(data)}\n" for name, data in files.items())
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as wheel:
        for name, data in files.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (0o755 if name in executable else 0o644) << 16
            wheel.writestr(info, data)
        wheel.writestr("ziglang-0.1.dist-info/RECORD",
                       record + "ziglang-0.1.dist-info/RECORD,,\n")


def test_ziglang_loses_other_targets_only(suite, tmp_path):
    files = {
        "ziglang/zig": b"\x7fELF" + b"0" * 100,
        "ziglang/lib/include/stddef.h": b"clang's own",
        "ziglang/lib/std/std.zig": b"std",
        "ziglang/lib/libc/include/x86_64-linux-gnu/bits/x.h": b"kept",
        "ziglang/lib/libc/include/generic-glibc/stdio.h": b"kept",
        "ziglang/lib/libc/include/any-linux-any/linux/a.h": b"kept",
        "ziglang/lib/libc/include/aarch64-linux-gnu/bits/x.h": b"dropped",
        "ziglang/lib/libc/include/any-windows-any/windows.h": b"dropped",
        "ziglang/lib/libc/mingw/crt.c": b"dropped",
        "ziglang/lib/libtsan/tsan.cpp": b"dropped",
        "ziglang/lib/libcxx/include/vector": b"kept: C++ headers",
    }
    source, target = tmp_path / "ziglang.whl", tmp_path / "trimmed.whl"
    make_wheel(source, files, executable={"ziglang/zig"})
    kept, dropped = suite.trim_ziglang(source, target)
    assert dropped == 4 and kept == len(files) - 4 + 1  # + RECORD
    with zipfile.ZipFile(target) as trimmed:
        names = set(trimmed.namelist())
        assert {n for n, data in files.items() if data != b"dropped"} <= names
        assert not {n for n, data in files.items() if data == b"dropped"} & names
        assert all(info.compress_type == zipfile.ZIP_STORED for info in trimmed.infolist())
        assert (trimmed.getinfo("ziglang/zig").external_attr >> 16) & 0o111
        record = trimmed.read("ziglang-0.1.dist-info/RECORD").decode()
    assert "mingw" not in record and "ziglang/zig," in record and "RECORD,," in record


def pack_of(suite, tmp_path, payload: bytes, part_bytes: int) -> Path:
    archive = tmp_path / "wheelhouse.tar.xz"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz") as tar:
        info = tarfile.TarInfo("wheelhouse/demo-1.0-py3-none-any.whl")
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))
    archive.write_bytes(buffer.getvalue())
    destination = tmp_path / "carry-here"
    suite.split(archive, destination, part_bytes)
    return destination


def test_parts_come_together_over_several_calls(suite, tmp_path, monkeypatch, capsys):
    import random

    payload = random.Random(1).randbytes(20_000)  # incompressible: several parts
    parts = pack_of(suite, tmp_path, payload, part_bytes=8_000)
    folders = sorted(parts.iterdir())
    assert [f.name for f in folders] == ["1", "2", "3"]
    manifest = json.loads((folders[0] / "manifest.json").read_text())
    assert manifest["parts"] == 3
    assert all((f / "manifest.json").read_text() == (folders[0] / "manifest.json").read_text()
               for f in folders)
    checkout = tmp_path / "checkout" / ".gpu-carry"
    monkeypatch.setattr(suite, "CARRY", checkout)
    monkeypatch.setattr(suite, "STATE", tmp_path / "state")
    for index, folder in enumerate(folders, start=1):  # one part per call, as carried
        if checkout.exists():
            import shutil

            shutil.rmtree(checkout)
        checkout.mkdir(parents=True)
        (checkout / folder.name).symlink_to(folder, target_is_directory=True)
        wheelhouse = suite.assemble(suite.gather_parts())
        if index < 3:
            assert wheelhouse is None
            assert f"have {index} of 3 part(s)" in capsys.readouterr().out
    assert (wheelhouse / "demo-1.0-py3-none-any.whl").read_bytes() == payload


def test_a_damaged_part_is_refused(suite, tmp_path, monkeypatch):
    parts = pack_of(suite, tmp_path, b"x" * 5000, part_bytes=100)
    monkeypatch.setattr(suite, "CARRY", parts)
    monkeypatch.setattr(suite, "STATE", tmp_path / "state")
    piece = next((parts / "1").glob("wheelhouse.tar.xz.*"))
    piece.write_bytes(b"!" + piece.read_bytes()[1:])
    with pytest.raises(suite.SuiteError, match="checksum differs"):
        suite.assemble(suite.gather_parts())


def test_nothing_carried_says_to_pack(suite, tmp_path, monkeypatch):
    monkeypatch.setattr(suite, "CARRY", tmp_path / "none")
    monkeypatch.setattr(suite, "STATE", tmp_path / "state")
    with pytest.raises(suite.SuiteError, match="gpu_suite.py pack"):
        suite.gather_parts()


@pytest.mark.skipif(sys.prefix == sys.base_prefix, reason="the tests do not run in a venv")
def test_the_new_environment_sees_the_parent_environment(suite, tmp_path):
    """As on the lent machine, whose python3 is a virtual environment holding numpy."""
    python = suite.make_venv(tmp_path / "venv", with_pip=False)
    found = subprocess.run([str(python), "-c", "import numpy, pluggy; print(numpy.__file__)"],
                           capture_output=True, text=True, timeout=120)
    assert found.returncode == 0, found.stderr
    assert found.stdout.startswith(sys.prefix)
    where = subprocess.run([str(python), "-c", "import sys; print(sys.prefix)"],
                           capture_output=True, text=True, timeout=60).stdout.strip()
    assert where == str(tmp_path / "venv")


JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="tests.test_cuda_runtime" name="test_gpu_numpy[cuda-bindings]">
  <skipped type="pytest.skip" message="needs a GPU (runtime cuda-bindings): no usable CUDA GPU: x"/>
</testcase>
<testcase classname="tests.test_cuda_runtime" name="test_gpu_numpy[pycuda]">
  <skipped type="pytest.skip" message="needs pycuda (runtime pycuda): not installed"/>
</testcase>
<testcase classname="tests.test_cuda_runtime" name="test_gpu_cupy[cuda-bindings]">
  <skipped type="pytest.skip" message="needs CuPy: not installed"/>
</testcase>
<testcase classname="tests.test_cuda_backend" name="test_saxpy">
  <skipped type="pytest.skip" message="needs cuda-bindings (runtime cuda-bindings): no"/>
</testcase>
<testcase classname="tests.test_cuda_backend" name="test_fine"/>
</testsuite></testsuites>
"""


def test_skips_are_judged_by_their_reason(suite, tmp_path):
    report = tmp_path / "junit.xml"
    report.write_text(JUNIT)
    bad, fine = suite.judge_skips(report, {"cuda-bindings"})
    assert [line.split(":")[2] for line in bad] == [
        "test_gpu_numpy[cuda-bindings]", "test_saxpy"]
    assert fine == {"needs pycuda (runtime pycuda): not installed": 1,
                    "needs CuPy: not installed": 1}
    bad, fine = suite.judge_skips(report, {"cuda-bindings", "pycuda"})
    assert len(bad) == 3 and "runtime pycuda should be here" in bad[1]


def test_the_thirdparty_stage_runs_the_gpu_benchmark_and_says_why_it_cannot(suite):
    """``thirdparty`` runs benchmarks/bench_cuda_thirdparty_gpu.py; where no GPU is usable
    that script fails in one line saying why (so the stage fails on a GPU machine whose
    GPU is not seen, instead of timing nothing)."""
    from pytest_r3.backends.cuda.runtime import unavailable_reason

    args = suite.parser().parse_args(["thirdparty", "--rounds", "3"])
    assert (args.stage, args.rounds, args.launches) == ("thirdparty", 3, 20)
    if unavailable_reason() is None:
        pytest.skip("a GPU is usable here: the GPU suite runs the stage itself")
    script = SCRIPT.parent.parent / "benchmarks" / "bench_cuda_thirdparty_gpu.py"
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            timeout=600, cwd=script.parent.parent)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.startswith("needs a GPU: ") and len(result.stdout.splitlines()) == 1
