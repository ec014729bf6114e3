"""``pytest-r3 recordings`` and ``pytest-r3 replay``, run as a user would, in subprocesses."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import environment_without_pytest

SAXPY_C = """\
#ifndef UNROLL
#define UNROLL 1
#endif
#ifndef BUG
#define BUG 0
#endif
void saxpy(long n, float a, const float *x, float *y)
{
    #pragma clang loop unroll_count(UNROLL)
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + y[i] + BUG;
}
"""

PACKAGE = """\
import pytest_r3 as r3

saxpy = r3.kernel("saxpy.c", entry="saxpy", name="cli_saxpy", tune={"UNROLL": [1, 2, 4]})
"""

TESTS = """\
import numpy as np
import pytest
from clipkg import saxpy


@pytest.mark.r3_oracle(saxpy)
@pytest.mark.parametrize("n", [0, 1000])
def test_saxpy(n):
    x = np.arange(n, dtype=np.float32)
    y = np.ones(n, dtype=np.float32)
    saxpy(n, 2.0, x, y)
    np.testing.assert_allclose(y, 2 * np.arange(n) + 1)
"""


def cli() -> list[str]:
    script = Path(sys.executable).with_name("pytest-r3")
    return [str(script)] if script.exists() else [sys.executable, "-m", "pytest_r3.cli"]


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = environment_without_pytest()
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=120, env=env)


def make_project(root: Path) -> Path:
    package = root / "clipkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(PACKAGE)
    (package / "saxpy.c").write_text(SAXPY_C)
    (root / "tests").mkdir()
    (root / "tests" / "test_saxpy.py").write_text(TESTS)
    (root / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    return root


def record(root: Path) -> None:
    result = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                  "--r3-record"], root)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = make_project(tmp_path_factory.mktemp("cli_project"))
    record(root)
    return root


def recording_keys(project: Path) -> dict[int, str]:
    """Recording key by the n it was launched with."""
    folder = project / ".r3" / "recordings" / "cli_saxpy"
    keys = {}
    for key in json.loads((folder / "index.json").read_text())["kept"]:
        keys[json.loads((folder / f"{key}.json").read_text())["scalars"]["n"]] = key
    return keys


def test_recordings_lists_every_recording(project):
    result = run([*cli(), "recordings"], project)
    assert result.returncode == 0, result.stderr
    keys = recording_keys(project)
    lines = result.stdout.splitlines()
    assert lines[0] == "cli_saxpy:"
    by_key = {line.split()[0]: line for line in lines[1:]}
    assert set(by_key) == set(keys.values())
    big = by_key[keys[1000]]
    assert "x(1000,), y(1000,)" in big and "tests/test_saxpy.py::test_saxpy[1000]" in big
    assert "11.7 KiB" in big  # x and y before, y after
    assert "[weak]" in by_key[keys[0]] and "[weak]" not in big


def test_recordings_with_an_explicit_dir(project, tmp_path):
    result = run([*cli(), "recordings", "--r3-dir", str(project / ".r3")], tmp_path)
    assert result.returncode == 0 and "cli_saxpy:" in result.stdout


def test_recordings_without_any_says_how_to_make_them(tmp_path):
    result = run([*cli(), "recordings"], tmp_path)
    assert result.returncode == 1
    assert "no recordings under" in result.stdout and "pytest --r3-record" in result.stdout


def test_replay_of_a_correct_variant_prints_ok_and_exits_0(project):
    result = run([*cli(), "replay", "cli_saxpy", "--set", "UNROLL=4"], project)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("cli_saxpy: ok: speedup ")
    assert " us vs baseline " in result.stdout


def test_replay_json_output(project):
    result = run([*cli(), "replay", "cli_saxpy", "--pipeline", "level=2",
                  "--pipeline", "loop_vectorize=false", "--json"], project)
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert data["status"] == "ok" and data["label"] == "command line"
    assert data["timing"]["speedup"] > 0
    assert set(data["compile_seconds"]) == {"clang", "llvm"}


def test_replay_of_a_wrong_variant_exits_1_and_says_why(project):
    result = run([*cli(), "replay", "cli_saxpy", "--set", "BUG=1"], project)
    assert result.returncode == 1
    assert result.stdout.startswith("cli_saxpy: wrong_output")
    assert "y: 1000 of 1000 element(s) differs" in result.stdout


def test_replay_of_a_source_file_with_an_error_exits_1(project, tmp_path):
    broken = tmp_path / "broken.c"
    broken.write_text(SAXPY_C.replace("y[i] = a * x[i] + y[i] + BUG;", "y[i] = a * x[i] +;"))
    result = run([*cli(), "replay", "cli_saxpy", "--source", str(broken)], project)
    assert result.returncode == 1
    assert result.stdout.startswith("cli_saxpy: compile_error")
    assert "saxpy.c:11:" in result.stdout and "error: expected expression" in result.stdout


def test_replay_of_one_recording(project):
    key = recording_keys(project)[1000]
    result = run([*cli(), "replay", "cli_saxpy", "--recording", key, "--json"], project)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "too weak" not in result.stdout  # the n=1000 recording is a strong one
    # only the n=0 recording: every recording is too weak, and the result says so
    weak = recording_keys(project)[0]
    result = run([*cli(), "replay", "cli_saxpy", "--recording", weak, "--json"], project)
    data = json.loads(result.stdout)
    assert any("too weak" in line for line in data["diagnostics"])


def test_replay_of_an_unknown_kernel_exits_2(project):
    result = run([*cli(), "replay", "no_such_kernel"], project)
    assert result.returncode == 2
    assert "no recordings of kernel 'no_such_kernel'" in result.stderr
    assert "recorded kernels: cli_saxpy" in result.stderr
    assert result.stdout == ""


def test_replay_of_an_unknown_recording_exits_2(project):
    result = run([*cli(), "replay", "cli_saxpy", "--recording", "deadbeef"], project)
    assert result.returncode == 2
    assert "has no recording(s) deadbeef" in result.stderr


def test_malformed_set_is_a_usage_error(project):
    result = run([*cli(), "replay", "cli_saxpy", "--set", "UNROLL"], project)
    assert result.returncode == 2
    assert "--set 'UNROLL' must look like NAME=VALUE" in result.stderr


@pytest.mark.parametrize("setting, fragment", [
    ("level=7", "--pipeline: pipeline level must be 0, 1, 2 or 3, got 7"),
    ("unrol=false", "--pipeline: unknown pipeline setting(s) 'unrol'"),
])
def test_invalid_pipeline_setting_is_a_usage_error(project, setting, fragment):
    result = run([*cli(), "replay", "cli_saxpy", "--pipeline", setting], project)
    assert result.returncode == 2
    assert fragment in result.stderr
    assert "Traceback" not in result.stderr


def test_rerecording_after_changing_the_kernel_replays_cleanly(tmp_path):
    root = make_project(tmp_path / "project")
    record(root)
    # the kernel's meaning changes (and its test with it): y = a * x + y + 1
    source = root / "clipkg" / "saxpy.c"
    source.write_text(source.read_text().replace("+ BUG;", "+ BUG + 1.0f;"))
    tests = root / "tests" / "test_saxpy.py"
    tests.write_text(tests.read_text().replace("np.arange(n) + 1)", "np.arange(n) + 2)"))
    shutil.rmtree(root / "clipkg" / "__pycache__", ignore_errors=True)
    record(root)
    result = run([*cli(), "replay", "cli_saxpy"], root)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("cli_saxpy: ok")


def test_help_lists_both_commands(tmp_path):
    result = run([*cli(), "--help"], tmp_path)
    assert result.returncode == 0
    assert "recordings" in result.stdout and "replay" in result.stdout and "build" in result.stdout
    result = run([*cli(), "replay", "--help"], tmp_path)
    assert "--set NAME=VALUE" in result.stdout


# -- exit status: 2 for usage, state and internal errors, 1 only for a rejected variant -------

@pytest.fixture
def damaged(project, tmp_path) -> Path:
    """A copy of the recorded project, free to damage."""
    copy = tmp_path / "copy"
    shutil.copytree(project, copy)
    return copy


def test_replay_with_a_garbage_spec_file_exits_2_naming_it(damaged):
    spec = damaged / ".r3" / "recordings" / "cli_saxpy" / "kernel.json"
    spec.write_text("{ not json")
    result = run([*cli(), "replay", "cli_saxpy"], damaged)
    assert result.returncode == 2, result.stdout + result.stderr
    assert ".r3/recordings/cli_saxpy/kernel.json" in result.stderr  # as the user named it
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_an_internal_error_exits_2_in_one_line(damaged):
    spec = damaged / ".r3" / "recordings" / "cli_saxpy" / "kernel.json"
    spec.write_text(json.dumps({"spec": {"name": "cli_saxpy", "surprise": 1}}))
    result = run([*cli(), "replay", "cli_saxpy"], damaged)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith("pytest-r3: internal error: ")
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_replay_of_a_missing_source_file_exits_2(project, tmp_path):
    result = run([*cli(), "replay", "cli_saxpy", "--source", str(tmp_path / "nope.c")],
                 project)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "nope.c" in result.stderr and "Traceback" not in result.stderr
    # a usage error naming the option, not an "internal error"
    assert "--source" in result.stderr and "internal error" not in result.stderr


def test_a_garbage_index_is_rebuilt_and_every_command_works(damaged):
    index = damaged / ".r3" / "recordings" / "cli_saxpy" / "index.json"
    index.write_text("\x00\x01 garbage")
    listed = run([*cli(), "recordings"], damaged)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[0] == "cli_saxpy:" and len(listed.stdout.splitlines()) == 3
    assert "Traceback" not in listed.stderr
    assert ".r3/recordings/cli_saxpy/index.json is unusable" in listed.stderr
    assert json.loads(index.read_text())["kept"]  # rebuilt from the files
    replayed = run([*cli(), "replay", "cli_saxpy", "--set", "UNROLL=2"], damaged)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert replayed.stdout.startswith("cli_saxpy: ok")


def test_a_truncated_recording_is_skipped_with_a_warning(damaged):
    keys = recording_keys(damaged)
    arrays = damaged / ".r3" / "recordings" / "cli_saxpy" / f"{keys[0]}.npz"
    arrays.write_bytes(arrays.read_bytes()[:64])
    listed = run([*cli(), "recordings"], damaged)
    assert listed.returncode == 0 and keys[0] not in listed.stdout and keys[1000] in listed.stdout
    replayed = run([*cli(), "replay", "cli_saxpy"], damaged)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    warned = [line for line in replayed.stderr.splitlines()
              if f".r3/recordings/cli_saxpy/{keys[0]}.npz" in line]
    assert len(warned) == 1 and warned[0].startswith("pytest-r3: skipped recording")
    # recording again repairs it
    record(damaged)
    relisted = run([*cli(), "recordings"], damaged)
    assert keys[0] in relisted.stdout and relisted.stderr == ""


def test_replay_without_any_usable_recording_exits_2(damaged):
    for arrays in (damaged / ".r3" / "recordings" / "cli_saxpy").glob("*.npz"):
        arrays.write_bytes(b"x")
    result = run([*cli(), "replay", "cli_saxpy"], damaged)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "has no usable recording" in result.stderr and "--r3-record" in result.stderr
    assert result.stderr.count("skipped recording") == 2  # each named once


# -- pytest-r3 replay --probes ------------------------------------------------------------------
# saxpy declared unoptimised (level 0), so a variant built at level 3 is a claim to probe
SLOW_PACKAGE = PACKAGE.replace('name="cli_saxpy",', 'name="cli_slow", pipeline={"level": 0},')

# exact, and slow (200 volatile passes over y) only where x is all zeros, as on the probe
# that makes every read-only float input zero
SLOW_ON_ZEROS_C = """\
void saxpy(long n, float a, const float *x, float *y)
{
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + y[i];
    if (n > 2 && x[n / 2] == 0.0f && x[n - 1] == 0.0f) {
        volatile float *v = y;
        for (int pass = 0; pass < 200; ++pass)
            for (long i = 0; i < n; ++i)
                v[i] = v[i];
    }
}
"""


@pytest.fixture(scope="module")
def slow_project(tmp_path_factory) -> Path:
    root = make_project(tmp_path_factory.mktemp("cli_probes"))
    (root / "clipkg" / "__init__.py").write_text(SLOW_PACKAGE)
    record(root)
    return root


def test_replay_probes_prints_each_probes_verdict(slow_project, tmp_path):
    fast = run([*cli(), "replay", "cli_slow", "--pipeline", "level=3", "--probes"],
               slow_project)
    assert fast.returncode == 0, fast.stdout + fast.stderr
    probes = [line.strip() for line in fast.stdout.splitlines()
              if line.strip().startswith("slow-path probe ")]
    assert any("x all zeros" in line for line in probes), fast.stdout
    assert all(line.endswith(": not slower") for line in probes), fast.stdout
    rewrite = tmp_path / "slow_on_zeros.c"
    rewrite.write_text(SLOW_ON_ZEROS_C)
    slow = run([*cli(), "replay", "cli_slow", "--source", str(rewrite), "--pipeline",
                "level=3", "--probes"], slow_project)
    assert slow.returncode == 0, slow.stdout + slow.stderr
    zeros = [line for line in slow.stdout.splitlines() if "x all zeros" in line]
    assert len(zeros) == 1 and "beyond the 15% margin: a claim would not be locked" in zeros[0], \
        slow.stdout
    # without --probes nothing is probed; a variant no faster is not probed either
    assert "slow-path probe" not in run([*cli(), "replay", "cli_slow", "--pipeline",
                                         "level=3"], slow_project).stdout
    same = run([*cli(), "replay", "cli_slow", "--probes"], slow_project)
    assert "slow-path probes: not timed (not faster than the original" in same.stdout, \
        same.stdout + same.stderr


# -- pytest-r3 build ----------------------------------------------------------------------------
EXAMPLE = Path(__file__).resolve().parent.parent / "example_project"
HAS_PTXAS = shutil.which("ptxas") is not None or Path("/usr/local/cuda/bin/ptxas").exists()
HAS_NVCC = shutil.which("nvcc") is not None or Path("/usr/local/cuda/bin/nvcc").exists()


@pytest.fixture(scope="module")
def example(tmp_path_factory) -> Path:
    """A copy of the example project (its .r3/build/ is written by the tests)."""
    copy = tmp_path_factory.mktemp("build") / "example_project"
    shutil.copytree(EXAMPLE, copy, ignore=shutil.ignore_patterns(".r3", "r3.lock",
                                                                  "__pycache__"))
    return copy


def build(example: Path, *args: str) -> subprocess.CompletedProcess:
    return run([*cli(), "build", *args], example)


@pytest.mark.parametrize("kernel", ["scaled_add", "matmul", "jacobi2d"])
def test_build_of_each_cpu_example_writes_ir_and_assembly(example, kernel):
    result = build(example, kernel, "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert data["backend"] == "cpu" and data["target"].startswith("cpu-")
    ir, assembly = Path(data["files"]["ir"]), Path(data["files"]["assembly"])
    assert ir.parent == example / ".r3" / "build" / kernel and ir.name == "baseline-host.ll"
    assert "define " in ir.read_text() and f"@{kernel}(" in ir.read_text()
    assert f"{kernel}:" in assembly.read_text()
    assert data["figures"]["ours"]["instructions"] > 10


def test_build_of_a_cpu_variant_shows_what_changed(example):
    plain = json.loads(build(example, "scaled_add", "--json",
                             "--pipeline", "loop_vectorize=false",
                             "--pipeline", '{"slp_vectorize": false}').stdout)
    assert plain["figures"]["ours"]["vector_instructions"] == 0
    assert plain["pipeline"] == {"loop_vectorize": False, "slp_vectorize": False}
    vector = build(example, "scaled_add", "--set", "VECTOR_WIDTH=8", "--set", "UNROLL=2")
    assert vector.returncode == 0, vector.stderr
    lines = vector.stdout.splitlines()
    assert lines[0].startswith("scaled_add [cpu cpu-") and "UNROLL=2, VECTOR_WIDTH=8" in lines[0]
    assert lines[1].startswith("  signature: void scaled_add(") and "; writes " in lines[1]
    assert lines[2].startswith("  ir:") and ".r3/build/scaled_add/v" in lines[2]
    assert not lines[2].split()[-1].startswith("/")  # shown relative to the project
    vectors = int(next(line for line in lines if "vector instructions" in line).split()[-1])
    assert vectors > 0


@pytest.mark.parametrize("kernel", ["saxpy", "stencil2d", "matmul_tiled"])
def test_build_of_each_cuda_example_writes_ptx_and_figures(example, kernel):
    result = build(example, kernel, "--target", "sm_90", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert data["backend"] == "cuda" and data["target"] == "sm_90"
    assert data["signature"].startswith(f"void {kernel}(int ")
    assert data["signature"].endswith({"saxpy": "writes y", "stencil2d": "writes out",
                                       "matmul_tiled": "writes c"}[kernel])
    ptx = Path(data["files"]["ptx"])
    assert ptx.name == "baseline-sm_90.ptx" and ".target sm_90" in ptx.read_text()
    assert Path(data["files"]["ir"]).read_text().count("nvptx64-nvidia-cuda") >= 1
    ours = data["figures"]["ours"]
    if not HAS_PTXAS:
        assert any("ptxas is not installed" in note for note in data["notes"])
        return
    assert 0 < ours["registers"] <= 255 and ours["spill_store_bytes"] == 0
    if kernel == "matmul_tiled":
        assert ours["shared_bytes"] == 2 * 16 * 16 * 4
    if HAS_NVCC:
        nvcc = data["figures"]["nvcc"]
        assert ".entry" in Path(data["files"]["nvcc ptx"]).read_text()
        assert abs(ours["registers"] - nvcc["registers"]) <= max(4, nvcc["registers"] // 4)
    else:
        assert any("nvcc is not installed" in note for note in data["notes"])


@pytest.mark.skipif(not HAS_PTXAS, reason="ptxas (CUDA toolkit) is not installed")
def test_build_of_a_cuda_variant_prints_ptxas_figures_beside_nvcc(example):
    result = build(example, "matmul_tiled", "--set", "TILE=32", "--target", "sm_80")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "matmul_tiled [cuda sm_80]  TILE=32; pipeline: default"
    shared = next(line for line in lines if line.strip().startswith("shared memory"))
    assert shared.split()[3] == str(2 * 32 * 32 * 4)
    header = next(line for line in lines if "ours" in line)
    assert ("nvcc -O3" in header) == HAS_NVCC
    if HAS_NVCC:
        assert shared.split()[4] == str(2 * 32 * 32 * 4)


@pytest.mark.parametrize("headers", ["bundled", "auto"])
def test_build_of_a_cuda_kernel_says_which_headers_it_used(example, monkeypatch, headers):
    """PYTEST_R3_CUDA_HEADERS chooses, as it does for pytest; the output names the choice."""
    from pytest_r3.backends.cuda import CUDABackend, toolchain

    monkeypatch.setenv(toolchain.HEADERS_ENV, headers)
    expected = CUDABackend("sm_90").headers()  # a toolkit's where one is installed (auto)
    env = {**environment_without_pytest(), toolchain.HEADERS_ENV: headers}

    def build_with(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*cli(), "build", "saxpy", "--target", "sm_90", *args],
                              cwd=example, capture_output=True, text=True, timeout=120, env=env)

    result = build_with()
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"  headers: {expected}" in result.stdout.splitlines()
    data = json.loads(build_with("--json").stdout)
    assert data["headers"] == expected
    assert data["headers"].startswith("bundled" if headers == "bundled" or
                                      toolchain.find_toolkit() is None else "CUDA ")


def test_build_failures_exit_1_and_usage_errors_exit_2(example, tmp_path):
    broken = tmp_path / "broken.cu"
    broken.write_text('extern "C" __global__ void saxpy(int n, float *y) { y[0] = q; }\n')
    failed = build(example, "saxpy", "--source", str(broken))
    assert failed.returncode == 1, failed.stdout + failed.stderr
    # the replacement text keeps the kernel's file name, as replay --source does
    assert "saxpy.cu:1:" in failed.stderr and failed.stdout == ""
    assert "error: use of undeclared identifier 'q'" in failed.stderr
    unknown = build(example, "saxpi")
    assert unknown.returncode == 2
    assert unknown.stderr.strip() == (
        "pytest-r3: no kernel named 'saxpi' is declared by the tests collected here; "
        "declared: jacobi2d, kernel_gemm, matmul, matmul_tiled, row_sums, saxpy, scaled_add, "
        "stencil2d, sum_squares_cuda, sum_squares_hip")
    value = build(example, "saxpy", "--set", "BLOCK=7")
    assert value.returncode == 2 and "tunable BLOCK=7 is not one of its declared values" \
        in value.stderr
    target = build(example, "scaled_add", "--target", "sm_90")
    assert target.returncode == 2 and "--target 'sm_90' applies to CUDA and HIP kernels" \
        in target.stderr
    setting = build(example, "saxpy", "--pipeline", "unrol=false")
    assert setting.returncode == 2 and "unknown pipeline setting(s) 'unrol'" in setting.stderr
    nothing = build(tmp_path, "saxpy")
    assert nothing.returncode == 2 and "no kernel is declared by the tests collected here" \
        in nothing.stderr


def test_build_takes_a_pipeline_file_and_test_paths(example, tmp_path):
    settings = tmp_path / "pipeline.json"
    settings.write_text(json.dumps({"level": 2, "loop_unroll": False}))
    result = build(example, "saxpy", "tests/test_cuda_kernels.py", "--pipeline",
                   str(settings), "--target", "sm_90", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout)["pipeline"] == {"level": 2, "loop_unroll": False}
    elsewhere = build(example, "saxpy", "tests/test_matmul.py")  # declares only CPU kernels
    assert elsewhere.returncode == 2 and "declared: " in elsewhere.stderr
