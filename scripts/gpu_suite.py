#!/usr/bin/env python3
"""The GPU suite, in stages that fit a lent GPU machine (no internet, 600 s per command,
64 MiB carried per command). Standard library only: it runs before anything is installed.

    python3 scripts/gpu_suite.py pack                # here, with internet: build the parts
    python3 scripts/gpu_suite.py install             # there, once per carried part
    python3 scripts/gpu_suite.py test                # there: CUDA tests under each runtime
    python3 scripts/gpu_suite.py tune                # there: --r3-tune, --r3-check, A/A
    python3 scripts/gpu_suite.py bench [--quick]     # there: benchmarks/bench_cuda.py
    python3 scripts/gpu_suite.py thirdparty          # there: tests/cuda_thirdparty/ kernels
                                                     # against numpy, timed next to nvcc's

``pack`` downloads what the GPU machine lacks as wheels for its Python (3.12, manylinux
x86_64): llvmlite and ziglang at the versions installed here, and the rest of pytest-r3's
dependencies, minus the large ones the machine has (numpy, scipy...). The ziglang wheel
loses the C library headers of other targets; both large wheels are stored uncompressed and
the lot is packed into one xz-compressed tar, split into parts that fit one command's carry
each (.gpu-carry/1, .gpu-carry/2...). It prints the commands to run.

``install``, called once per part (each call carries one), keeps the parts outside the
checkout (``$R3_GPU_STATE``, default /tmp/r3-gpu); when all are there it unpacks them, makes
a virtual environment with ``--system-site-packages`` (seeing the machine's numpy, pytest,
cuda-bindings and CuPy, also when its python3 is itself a virtual environment) and installs
pytest-r3 from the checkout without the network. Everything lives on the machine only while
it is held: if it was given back between calls, start again with part 1.

``test`` judges skips by reason, not by count: on a GPU machine a skip whose reason says
"needs a GPU" fails the stage, as does "needs <package> (runtime <name>)" for a runtime the
machine should have (``R3_GPU_RUNTIMES``, default: those importable there); other skips
(a tool or package that is simply absent) are listed. Results go to ``$OUT`` when set (the
folder a lent machine sends back), else ./gpu-results. Each stage stops itself within
``R3_GPU_STAGE_SECONDS`` (570).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ElementTree
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CARRY = ROOT / ".gpu-carry"
STATE = Path(os.environ.get("R3_GPU_STATE", "/tmp/r3-gpu"))
ARCHIVE = "wheelhouse.tar.xz"
STAGE_SECONDS = int(os.environ.get("R3_GPU_STAGE_SECONDS", "570"))
CARRY_LIMIT = 64 * 2**20
# The lent machine's Python and platform, and large packages it has (docs: its package list)
PYTHON_VERSION = "3.12"
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64",
             "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64")
MACHINE_HAS = {"numpy", "scipy", "pandas", "scikit-learn", "pytest", "cuda-bindings",
               "cuda-core", "cupy-cuda13x", "torch", "pyarrow", "matplotlib"}
SMALL_WHEEL = 2 * 2**20  # smaller wheels travel even if the machine has the package
# ziglang: C library headers kept (this target's); whole folders dropped
ZIG_LIBC_KEPT = {"any-linux-any", "generic-glibc", "generic-musl", "x86-linux-any",
                 "x86-linux-gnu", "x86-linux-musl", "x86_64-linux-gnu", "x86_64-linux-musl"}
ZIG_DROPPED = ("lib/libc/mingw/", "lib/libc/wasi/", "lib/libc/darwin/", "lib/libc/freebsd/",
               "lib/libc/netbsd/", "lib/libc/openbsd/", "lib/libtsan/", "lib/docs/")
CUDA_TESTS = ["tests/test_cuda_runtime.py", "tests/test_cuda_backend.py",
              "tests/test_cuda_thirdparty.py", "example_project/tests/test_cuda_kernels.py"]
CUDA_KERNELS = "saxpy,stencil2d,matmul_tiled"


class SuiteError(Exception):
    """A stage cannot go on; the message says why and what to do."""


def say(message: str) -> None:
    print(f"gpu_suite: {message}", flush=True)


def results_dir() -> Path:
    folder = Path(os.environ.get("OUT") or ROOT / "gpu-results")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def venv_python() -> Path:
    return STATE / "venv" / "bin" / "python"


# -- pack (here) ---------------------------------------------------------------------------
def requirements() -> list[str]:
    """pytest-r3's dependencies, pinned to the versions installed here where they are (the
    ones the test suite ran with), with the ``cuda`` extra's."""
    from importlib import metadata

    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = project["dependencies"] + project["optional-dependencies"]["cuda"]
    pinned = []
    for requirement in wanted:
        name = re.match(r"[A-Za-z0-9_.\-]+", requirement).group(0)
        try:
            pinned.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            pinned.append(requirement)
    return [*pinned, "setuptools>=70.1"]  # builds the checkout there (bdist_wheel built in)


def project_name(wheel: str) -> str:
    return re.sub(r"[-_.]+", "-", wheel.split("-")[0]).lower()


def trim_ziglang(source: Path, target: Path) -> tuple[int, int]:
    """Copy the ziglang wheel without other targets' C library files, uncompressed (the
    tar's xz compresses it far better), RECORD rewritten to match; (files kept, dropped)."""
    kept = dropped = 0
    with zipfile.ZipFile(source) as wheel, zipfile.ZipFile(target, "w",
                                                           zipfile.ZIP_STORED) as trimmed:
        names = [info.filename for info in wheel.infolist()]
        keep = {name for name in names if zig_file_kept(name)}
        for info in wheel.infolist():
            if info.filename not in keep:
                dropped += 1
                continue
            data = wheel.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                lines = data.decode().splitlines()
                data = ("\n".join(line for line in lines
                                  if line.split(",")[0] in keep or "RECORD" in line) + "\n"
                        ).encode()
            copy = zipfile.ZipInfo(info.filename, info.date_time)
            copy.external_attr = info.external_attr  # keeps zig executable
            trimmed.writestr(copy, data, zipfile.ZIP_STORED)
            kept += 1
    return kept, dropped


def zig_file_kept(name: str) -> bool:
    inside = name.split("/", 1)[1] if name.startswith("ziglang/") else ""
    if not inside:
        return True
    if inside.startswith(ZIG_DROPPED):
        return False
    match = re.match(r"lib/libc/include/([^/]+)/", inside)
    return match is None or match.group(1) in ZIG_LIBC_KEPT


def store_uncompressed(source: Path, target: Path) -> None:
    with zipfile.ZipFile(source) as wheel, zipfile.ZipFile(target, "w",
                                                           zipfile.ZIP_STORED) as stored:
        for info in wheel.infolist():
            copy = zipfile.ZipInfo(info.filename, info.date_time)
            copy.external_attr = info.external_attr
            stored.writestr(copy, wheel.read(info), zipfile.ZIP_STORED)


def check_trimmed_zig(wheel: Path) -> None:
    """Where this machine is x86_64 Linux: the trimmed zig still compiles C with libc."""
    if sys.platform != "linux" or os.uname().machine != "x86_64":
        return
    with tempfile.TemporaryDirectory() as folder:
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(folder)
        zig = Path(folder) / "ziglang" / "zig"
        zig.chmod(0o755)
        source = Path(folder) / "check.c"
        source.write_text("#include <stdio.h>\n#include <math.h>\n#include <stdint.h>\n"
                          "int main(void) { printf(\"%f\", sqrt(2.0)); return 0; }\n")
        result = subprocess.run([str(zig), "cc", "-target", "x86_64-linux-gnu", "-c",
                                 str(source), "-o", str(Path(folder) / "check.o")],
                                capture_output=True, text=True, timeout=300)
        if result.returncode != 0:
            raise SuiteError(f"the trimmed ziglang cannot compile C: {result.stderr[-800:]}")


def split(data_path: Path, destination: Path, part_bytes: int) -> list[Path]:
    """``data_path`` in parts of at most ``part_bytes``, one folder per part (1, 2, ...),
    each with the manifest that says how to put them together again."""
    size = data_path.stat().st_size
    count = max(1, -(-size // part_bytes))
    digest = hashlib.sha256()
    parts = []
    with open(data_path, "rb") as source:
        for index in range(1, count + 1):
            chunk = source.read(part_bytes)
            digest.update(chunk)
            folder = destination / str(index)
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{ARCHIVE}.{index:03d}"
            path.write_bytes(chunk)
            parts.append(path)
    manifest = {"archive": ARCHIVE, "parts": count, "bytes": size,
                "sha256": digest.hexdigest()}
    for index in range(1, count + 1):
        (destination / str(index) / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return parts


def tree_bytes() -> int:
    """What travels with every command besides the carried part: the checkout's files."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=ROOT, capture_output=True, check=True)
    total = 0
    for name in listed.stdout.split(b"\0"):
        path = ROOT / os.fsdecode(name)
        if name and path.is_file():
            total += path.stat().st_size
    return total


def pack(args: argparse.Namespace) -> int:
    work = Path(tempfile.mkdtemp(prefix="r3-pack-"))
    try:
        download = work / "download"
        wheels = work / "wheelhouse"
        wheels.mkdir()
        command = [sys.executable, "-m", "pip", "download", "--only-binary=:all:",
                   "--python-version", args.python_version, "--implementation", "cp",
                   "-d", str(download), *[f"--platform={p}" for p in PLATFORMS],
                   *requirements()]
        say("downloading: " + " ".join(requirements()))
        subprocess.run(command, check=True)
        for wheel in sorted(download.glob("*.whl")):
            name = project_name(wheel.name)
            if name in MACHINE_HAS and wheel.stat().st_size > SMALL_WHEEL:
                say(f"left out {wheel.name} (the machine has {name})")
            elif name == "ziglang":
                kept, dropped = trim_ziglang(wheel, wheels / wheel.name)
                check_trimmed_zig(wheels / wheel.name)
                say(f"ziglang trimmed: {kept} files kept, {dropped} other targets' dropped")
            elif wheel.stat().st_size > SMALL_WHEEL:
                store_uncompressed(wheel, wheels / wheel.name)
            else:
                shutil.copy2(wheel, wheels / wheel.name)
        archive = work / ARCHIVE
        tar_path = work / "wheelhouse.tar"
        with tarfile.open(tar_path, "w") as tar:
            tar.add(wheels, arcname="wheelhouse")
        say(f"compressing {tar_path.stat().st_size / 2**20:.0f} MiB with xz (minutes)")
        compress(tar_path, archive)
        budget = args.part_mib * 2**20 if args.part_mib else \
            CARRY_LIMIT - tree_bytes() - 2 * 2**20
        if budget < 8 * 2**20:
            raise SuiteError(f"the checkout leaves only {budget / 2**20:.1f} MiB of the 64 MiB "
                             "carry per command; remove large untracked files")
        destination = Path(args.dest)
        if destination.exists():
            shutil.rmtree(destination)
        parts = split(archive, destination, budget)
        say(f"{archive.stat().st_size / 2**20:.1f} MiB in {len(parts)} part(s) under "
            f"{destination}")
        print_plan(len(parts), destination)
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


def compress(source: Path, target: Path) -> None:
    xz = shutil.which("xz")
    if xz:
        with open(target, "wb") as out:
            subprocess.run([xz, "-6", "-T0", "-c", str(source)], stdout=out, check=True)
        return
    import lzma

    with open(source, "rb") as data, lzma.open(target, "wb", preset=6) as out:
        shutil.copyfileobj(data, out, 2**20)


def print_plan(count: int, destination: Path) -> None:
    relative = destination.resolve().relative_to(ROOT) if destination.resolve().is_relative_to(
        ROOT) else destination
    print("\nOn the GPU machine, from the checkout's root, one command per part, back to back "
          "(the machine keeps the parts only while it is held):")
    for index in range(1, count + 1):
        print(f"  carry [{str(relative / str(index))!r}]: python3 scripts/gpu_suite.py install")
    for stage in ("test", "tune", "bench", "thirdparty"):
        print(f"  then: python3 scripts/gpu_suite.py {stage}")


# -- install (there) -----------------------------------------------------------------------
def gather_parts() -> dict:
    """Keep the carried part(s) in the state folder; the manifest of the pack being put
    together (a part of another pack starts the collection again)."""
    parts = STATE / "parts"
    saved = STATE / "manifest.json"
    carried = [folder for folder in sorted(CARRY.glob("*")) if (folder / "manifest.json")
               .is_file()] if CARRY.is_dir() else []
    manifest = json.loads(saved.read_text()) if saved.is_file() else None
    for folder in carried:
        brought = json.loads((folder / "manifest.json").read_text())
        if manifest is None or brought["sha256"] != manifest["sha256"]:
            shutil.rmtree(parts, ignore_errors=True)
            manifest = brought
            STATE.mkdir(parents=True, exist_ok=True)
            saved.write_text(json.dumps(manifest))
        parts.mkdir(parents=True, exist_ok=True)
        for piece in folder.glob(f"{ARCHIVE}.*"):
            shutil.copy2(piece, parts / piece.name)
            say(f"received {piece.name} ({piece.stat().st_size / 2**20:.1f} MiB)")
    if manifest is None:
        raise SuiteError(f"no part was carried (nothing under {CARRY}) and none is kept in "
                         f"{STATE}; run `python3 scripts/gpu_suite.py pack` where there is "
                         "internet and carry .gpu-carry/1")
    return manifest


def assemble(manifest: dict) -> Path | None:
    """The unpacked wheelhouse once every part is here, else None (after saying which)."""
    parts = STATE / "parts"
    names = [f"{ARCHIVE}.{index:03d}" for index in range(1, manifest["parts"] + 1)]
    missing = [index + 1 for index, name in enumerate(names) if not (parts / name).is_file()]
    if missing:
        say(f"have {manifest['parts'] - len(missing)} of {manifest['parts']} part(s); carry "
            + ", ".join(f".gpu-carry/{i}" for i in missing) + " in the next call(s)")
        return None
    digest = hashlib.sha256()
    joined = STATE / ARCHIVE
    with open(joined, "wb") as out:
        for name in names:
            data = (parts / name).read_bytes()
            digest.update(data)
            out.write(data)
    if digest.hexdigest() != manifest["sha256"]:
        raise SuiteError("the parts do not add up to the packed archive (checksum differs); "
                         "pack again and carry every part of the same pack")
    wheelhouse = STATE / "wheelhouse"
    shutil.rmtree(wheelhouse, ignore_errors=True)
    with tarfile.open(joined, "r:xz") as tar:
        tar.extractall(STATE, filter="data")
    joined.unlink()
    return wheelhouse


def make_venv(folder: Path, python: str = sys.executable, with_pip: bool = True) -> Path:
    """A virtual environment seeing the system's packages, and those of the environment
    ``python`` runs in when that is a virtual environment itself (``--system-site-packages``
    alone would reach only its base interpreter's)."""
    command = [python, "-m", "venv", "--system-site-packages", str(folder)]
    try:
        subprocess.run(command + ([] if with_pip else ["--without-pip"]), check=True)
    except subprocess.CalledProcessError:  # no ensurepip there: the parent's pip serves
        shutil.rmtree(folder, ignore_errors=True)
        subprocess.run(command + ["--without-pip"], check=True)
    probe = ("import json, site, sys; print(json.dumps([sys.prefix != sys.base_prefix, "
             "site.getsitepackages()]))")
    inside, paths = json.loads(subprocess.run([python, "-c", probe], capture_output=True,
                                              text=True, check=True).stdout)
    if inside:
        target = subprocess.run([str(folder / "bin" / "python"), "-c",
                                 "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                capture_output=True, text=True, check=True).stdout.strip()
        (Path(target) / "_r3_parent_environment.pth").write_text("\n".join(paths) + "\n")
    python_there = folder / "bin" / "python"
    if with_pip and subprocess.run([str(python_there), "-m", "pip", "--version"],
                                   capture_output=True).returncode != 0:
        raise SuiteError(f"the environment {folder} has no pip, nor does {python}'s")
    return python_there


def install(args: argparse.Namespace) -> int:
    wheelhouse = args.wheelhouse
    if wheelhouse is None:
        wheelhouse = assemble(gather_parts())
        if wheelhouse is None:
            return 0  # more parts to come: not a failure
    shutil.rmtree(STATE / "venv", ignore_errors=True)
    python = make_venv(STATE / "venv")
    # the build backend (setuptools) comes from the wheelhouse too: its build is isolated
    pip = [str(python), "-m", "pip", "install", "--no-index", "--find-links", str(wheelhouse),
           "--disable-pip-version-check"]
    if run_logged(pip + ["-e", f"{ROOT}[cuda]"], "install.log", STAGE_SECONDS) != 0:
        raise SuiteError(f"pip could not install pytest-r3 from {wheelhouse} (log above): a "
                         "package the machine lacks is missing from the pack, or the "
                         "machine's version is too old; pack again")
    return describe_environment(python, require_gpu=not args.no_gpu)


def describe_environment(python: Path, require_gpu: bool) -> int:
    code = (
        "import platform, pytest_r3\n"
        "from pytest_r3.backends.cuda import runtime as cuda_runtime\n"
        "from pytest_r3.backends.cuda import toolchain as cuda_tools\n"
        "from pytest_r3.backends.clang import find_clang\n"
        "print(f'pytest-r3 from {pytest_r3.__file__} on Python {platform.python_version()}')\n"
        "print(f'clang {find_clang().version}; ptxas {cuda_tools.find_tool(\"ptxas\")}; '\n"
        "      f'nvcc {cuda_tools.find_tool(\"nvcc\")}; libdevice {cuda_tools.find_libdevice()}')\n"
        "for name in cuda_runtime.RUNTIMES:\n"
        "    reason = cuda_runtime.unavailable_reason(name)\n"
        "    if reason is None:\n"
        "        rt = cuda_runtime.runtime(name)\n"
        "        print(f'runtime {name}: {rt.device_name} ({rt.arch})')\n"
        "    else:\n"
        "        print(f'runtime {name}: unavailable: {reason}')\n")
    result = subprocess.run([str(python), "-c", code], capture_output=True, text=True,
                            timeout=300, cwd=STATE)  # not the checkout: the installed one
    text = result.stdout + result.stderr
    (results_dir() / "environment.txt").write_text(text)
    print(text, end="")
    if result.returncode != 0:
        raise SuiteError("pytest-r3 does not import in the new environment (above)")
    usable = [line for line in text.splitlines()
              if line.startswith("runtime ") and ": unavailable:" not in line]
    if require_gpu and not usable:
        raise SuiteError("no CUDA runtime can run kernels here (above)")
    say(f"installed into {STATE / 'venv'}")
    return 0


def run_logged(command: list, log_name: str, timeout: float, cwd: Path = ROOT,
               env: dict | None = None, shown: int = 120) -> int:
    """Run ``command`` with its output saved under the results folder (its last ``shown``
    lines printed); a SuiteError when it outlives ``timeout`` seconds."""
    log = results_dir() / log_name
    try:
        with open(log, "w") as out:
            status = subprocess.run([str(c) for c in command], cwd=cwd, stdout=out,
                                    stderr=subprocess.STDOUT, env=env, timeout=timeout
                                    ).returncode
    except subprocess.TimeoutExpired:
        status = None
    lines = log.read_text(errors="replace").splitlines()
    print("\n".join(lines[-shown:]), flush=True)
    if status is None:
        raise SuiteError(f"{log_name.split('.')[0]} outlived the stage's {timeout:.0f} s "
                         f"(log: {log})")
    return status


# -- test (there) --------------------------------------------------------------------------
def expected_runtimes(python: Path) -> set[str]:
    named = os.environ.get("R3_GPU_RUNTIMES", "").strip()
    if named:
        return {name.strip() for name in named.split(",") if name.strip()}
    code = ("import json\nfrom importlib import import_module\n"
            "from pytest_r3.backends.cuda.runtime import RUNTIMES\n"
            "print(json.dumps([n for n, (m, _) in RUNTIMES.items() "
            "if import_module(m).importable()]))")
    found = subprocess.run([str(python), "-c", code], capture_output=True, text=True,
                           cwd=ROOT, timeout=120)
    return set(json.loads(found.stdout)) if found.returncode == 0 else {"cuda-bindings"}


def judge_skips(junit: Path, runtimes: set[str]) -> tuple[list[str], dict[str, int]]:
    """(failures: skips that should not happen on a GPU machine, other skip reasons with
    their counts) from a JUnit XML report."""
    bad, fine = [], {}
    for case in ElementTree.parse(junit).getroot().iter("testcase"):
        for skipped in case.findall("skipped"):
            reason = (skipped.get("message") or "").removeprefix("Skipped: ").strip()
            name = f"{case.get('classname')}::{case.get('name')}"
            lowered = reason.lower()
            runtime = re.search(r"needs \S+ \(runtime ([\w-]+)\)", reason)
            if "needs a gpu" in lowered or "no usable cuda gpu" in lowered:
                bad.append(f"{name}: {reason}")
            elif runtime and runtime.group(1) in runtimes:
                bad.append(f"{name}: {reason} (runtime {runtime.group(1)} should be here)")
            else:
                fine[reason] = fine.get(reason, 0) + 1
    return bad, fine


def test(args: argparse.Namespace) -> int:
    python = installed_python()
    out = results_dir()
    junit = out / "junit.xml"
    command = [python, "-m", "pytest", *CUDA_TESTS, *args.pytest_args, "-p", "no:cacheprovider",
               "-q", "-rs", f"--junitxml={junit}", "-o", "junit_family=xunit2"]
    if args.workers:
        command += ["-n", str(args.workers)]
    status = run_logged(command, "tests.log", STAGE_SECONDS,
                        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    runtimes = expected_runtimes(python)
    bad, fine = judge_skips(junit, runtimes) if junit.is_file() else (["no JUnit report"], {})
    lines = [f"pytest exit status {status}; runtimes expected here: "
             f"{', '.join(sorted(runtimes)) or 'none'}"]
    lines += [f"SKIP THAT FAILS THE SUITE: {line}" for line in bad]
    lines += [f"skip (fine here, {count}x): {reason}" for reason, count in sorted(fine.items())]
    (out / "test-summary.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 1 if status != 0 or bad else 0


def installed_python() -> Path:
    python = venv_python()
    if not python.is_file():
        raise SuiteError(f"no environment at {STATE / 'venv'}: run the install stage first "
                         "(the machine was given back since, if it ran)")
    return python


# -- tune and bench (there) ----------------------------------------------------------------
def tune(args: argparse.Namespace) -> int:
    python = installed_python()
    started = time.monotonic()
    work = STATE / "tune" / "example_project"
    shutil.rmtree(work.parent, ignore_errors=True)
    shutil.copytree(ROOT / "example_project", work,
                    ignore=shutil.ignore_patterns(".r3", "r3.lock", "__pycache__"))
    common = ["-m", "pytest", "-p", "no:cacheprovider", "-q", "--r3-kernels", args.kernels,
              "tests/test_cuda_kernels.py"]
    status = run_logged([python, *common, "--r3-tune", "--r3-budget", args.budget],
                        "tune.log", STAGE_SECONDS - 120, cwd=work)
    left = STAGE_SECONDS - (time.monotonic() - started)
    check = run_logged([python, *common, "--r3-check"], "check.log", max(30.0, left - 70),
                       cwd=work) if status == 0 else None
    out = results_dir()
    if (work / "r3.lock").is_file():
        shutil.copy2(work / "r3.lock", out / "r3.lock")
    say(f"--r3-tune exit {status}, --r3-check exit {check}")
    same = baseline_against_itself(python, work, args.kernels.split(","),
                                   STAGE_SECONDS - (time.monotonic() - started) - 10)
    return 0 if status == 0 and check == 0 and same else 1


def baseline_against_itself(python: Path, work: Path, kernels: list[str], seconds: float) -> bool:
    """Each kernel's baseline timed against itself on the GPU (``pytest-r3 replay KERNEL``,
    on the recordings the tuning made): a figure outside its own interval, or an interval
    that excludes 1.00x, says the GPU timing cannot be trusted here."""
    ends = time.monotonic() + seconds
    lines, trusted = [], True
    for kernel in kernels:
        left = ends - time.monotonic()
        if left < 20:
            lines.append(f"{kernel}: not run (the stage's time is spent)")
            continue
        command = [str(python), "-m", "pytest_r3.cli", "replay", kernel]
        try:
            done = subprocess.run(command, cwd=work, capture_output=True, text=True,
                                  timeout=left)
            text = (done.stdout + done.stderr).strip().splitlines()
            line = text[-1] if text else f"exit {done.returncode}, no output"
            trusted &= done.returncode == 0 and "within noise" in line
        except subprocess.TimeoutExpired:
            line, trusted = "outlived the stage", False
        lines.append(line if line.startswith(kernel) else f"{kernel}: {line}")
    (results_dir() / "baseline-vs-itself.txt").write_text("\n".join(lines) + "\n")
    say("the baseline against itself (A/A):\n  " + "\n  ".join(lines))
    return trusted


def thirdparty(args: argparse.Namespace) -> int:
    """Every kernel of the third-party CUDA files on the GPU: against numpy, and timed
    next to nvcc's cubin of the same file (benchmarks/bench_cuda_thirdparty_gpu.py)."""
    python = installed_python()
    out = results_dir()
    command = [python, ROOT / "benchmarks" / "bench_cuda_thirdparty_gpu.py", "--json",
               out / "thirdparty_gpu.json", "--rounds", str(args.rounds), "--launches",
               str(args.launches)]
    return run_logged(command, "thirdparty.log", STAGE_SECONDS,
                      env={**os.environ, "PYTHONUNBUFFERED": "1"}, shown=200)


def bench(args: argparse.Namespace) -> int:
    python = installed_python()
    out = results_dir()
    command = [python, ROOT / "benchmarks" / "bench_cuda.py", "--json", out / "bench_cuda.json",
               "--rounds", str(args.rounds)]
    if args.quick:
        command.append("--quick")
    return run_logged(command, "bench.log", STAGE_SECONDS,
                      env={**os.environ, "PYTHONUNBUFFERED": "1"})


# -- command line --------------------------------------------------------------------------
def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    stages = top.add_subparsers(dest="stage", required=True)
    packing = stages.add_parser("pack", help="here: download, trim and split the wheels")
    packing.add_argument("--dest", default=str(CARRY), help="parts folder (default .gpu-carry)")
    packing.add_argument("--python-version", default=PYTHON_VERSION)
    packing.add_argument("--part-mib", type=int, default=0,
                         help="MiB per part (default: what the carry limit leaves)")
    installing = stages.add_parser("install", help="there: gather parts, make the venv")
    installing.add_argument("--wheelhouse", type=Path, help="a folder of wheels instead of "
                            "carried parts")
    installing.add_argument("--no-gpu", action="store_true",
                            help="succeed without a usable GPU (to try the stage elsewhere)")
    testing = stages.add_parser("test", help="there: CUDA tests, skips judged by reason")
    testing.add_argument("--workers", type=int, default=8, help="pytest-xdist processes")
    testing.add_argument("pytest_args", nargs="*", help="more pytest arguments")
    tuning = stages.add_parser("tune", help="there: --r3-tune, --r3-check, then each "
                               "kernel's baseline against itself")
    tuning.add_argument("--budget", default=os.environ.get("R3_GPU_BUDGET", "60s"))
    tuning.add_argument("--kernels", default=CUDA_KERNELS)
    benching = stages.add_parser("bench", help="there: benchmarks/bench_cuda.py")
    benching.add_argument("--quick", action="store_true")
    benching.add_argument("--rounds", type=int, default=9)
    third = stages.add_parser("thirdparty", help="there: the third-party CUDA kernels "
                              "against numpy, timed next to nvcc's build")
    third.add_argument("--rounds", type=int, default=15)
    third.add_argument("--launches", type=int, default=20)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        stages = {"pack": pack, "install": install, "test": test, "tune": tune, "bench": bench,
                  "thirdparty": thirdparty}
        return stages[args.stage](args)
    except SuiteError as exc:
        say(f"error: {exc}")
        return 1
    except subprocess.CalledProcessError as exc:
        say(f"error: {' '.join(map(str, exc.cmd))[:300]} exited {exc.returncode}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
