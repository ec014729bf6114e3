"""Real pytest runs of user projects: a small one built here, and the repository's example."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "example_project"
EXAMPLE_KERNELS = {
    "scaled_add": ["UNROLL", "VECTOR_WIDTH"],
    "matmul": ["TILE_I", "TILE_J", "TILE_K"],
    "jacobi2d": ["BLOCK_ROWS", "BLOCK_COLS", "UNROLL"],
}


# -- a small project ----------------------------------------------------------------------


def test_project_with_an_oracle_tested_kernel_passes(pytester, r3_project):
    result = pytester.runpytest("-v")
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines([
        "tests/test_saxpy.py::test_saxpy_matches_numpy[[]1000[]] PASSED*",
        "tests/test_saxpy.py::test_saxpy_by_name PASSED*",
    ])


def test_wrong_arguments_inside_a_test_fail_it_with_the_launch_error(pytester, r3_project):
    (pytester.path / "tests" / "test_misuse.py").write_text(
        "import numpy as np\n"
        f"from {r3_project.package} import saxpy\n\n"
        "def test_float64_output():\n"
        "    saxpy(2, 1.0, np.ones(2, np.float32), np.ones(2))\n")
    result = pytester.runpytest()
    result.assert_outcomes(passed=5, failed=1)
    result.stdout.fnmatch_lines([
        f"E *pytest_r3.errors.LaunchError: kernel '{r3_project.kernel}' argument 4 (float *y): "
        "expected dtype float32, got float64; convert with arr.astype(np.float32)",
    ])


def test_compile_error_fails_the_tests_and_points_at_the_source_line(pytester, r3_project):
    source = r3_project.path / r3_project.package / "saxpy.c"
    source.write_text(source.read_text().replace("y[i] = a * x[i] + y[i];", "y[i] = a * x[i] +;"))
    result = pytester.runpytest("-x")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        f"E *pytest_r3.errors.CompileError: clang could not compile {source}: "
        f"{source}:8:*error: expected expression",
    ])


# -- the repository's example project ---------------------------------------------------------


@pytest.fixture(scope="module")
def example_runs():
    """``pytest example_project`` and ``pytest example_project --r3-list``, run side by side."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    commands = {
        "test": [sys.executable, "-m", "pytest", str(EXAMPLE), "-q", "-p", "no:cacheprovider"],
        "list": [sys.executable, "-m", "pytest", str(EXAMPLE), "--r3-list", "-p",
                 "no:cacheprovider"],
    }
    running = {
        key: subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
        for key, command in commands.items()
    }
    results = {}
    for key, process in running.items():
        output, _ = process.communicate(timeout=300)
        results[key] = (process.returncode, output)
    return results


def test_example_project_passes(example_runs):
    returncode, output = example_runs["test"]
    assert returncode == 0, output
    summary = output.strip().splitlines()[-1]
    # the GPU kernels' tests skip where pycuda or a GPU is missing
    assert re.match(r"^\d+ passed(, \d+ skipped)? in ", summary), summary
    assert int(summary.split()[0]) >= 15


def _sections(output: str) -> dict[str, list[str]]:
    """The --r3-list output split into one list of lines per kernel."""
    sections: dict[str, list[str]] = {}
    current = None
    for line in output.splitlines():
        match = re.match(r"^(\w+) \[cpu\]  ", line)
        if match:
            current = match.group(1)
            sections[current] = [line]
        elif current and line.startswith("  "):
            sections[current].append(line)
        else:
            current = None
    return sections


def test_example_project_r3_list(example_runs):
    returncode, output = example_runs["list"]
    assert returncode == 0, output
    assert "pytest-r3: 10 kernel(s) declared" in output
    assert "kernel_gemm [cpu]  exampleproj/existing/gemm/gemm.c:kernel_gemm" in output
    for name, source in (("saxpy", "saxpy"), ("stencil2d", "stencil2d"),
                         ("matmul_tiled", "matmul")):
        assert f"{name} [cuda]  exampleproj/cuda/{source}.cu:{name}" in output
    assert "row_sums [hip]  exampleproj/hip/row_sums.hip:row_sums" in output
    for backend in ("cuda", "hip"):  # one source, declared for both vendors' GPUs
        assert (f"sum_squares_{backend} [{backend}]  exampleproj/hip/sum_squares.cu:"
                "sum_squares") in output
    assert re.search(r"no tests ran", output)
    sections = _sections(output)
    assert set(sections) == {*EXAMPLE_KERNELS, "kernel_gemm"}
    for name, tunables in EXAMPLE_KERNELS.items():
        lines = sections[name]
        assert lines[0] == f"{name} [cpu]  exampleproj/kernels/{name}.c:{name}"
        assert lines[1].startswith("  declared at: exampleproj/kernels/__init__.py:")
        text = "\n".join(lines)
        for tunable in tunables:
            assert re.search(rf"\b{tunable} in \[", text), (tunable, text)
        header = next(i for i, line in enumerate(lines) if line.startswith("  oracle tests ("))
        count = int(re.match(r"  oracle tests \((\d+)\):", lines[header]).group(1))
        tests = [line.strip() for line in lines[header + 1:]]
        assert len(tests) == count >= 2
        assert all(t.startswith(f"tests/test_{name}.py::test_{name}_") for t in tests), tests
    assert "constraint: (TILE_I == 0) == (TILE_J == 0)" in "\n".join(sections["matmul"])
    assert "    tests/test_matmul.py::test_matmul_identity" in sections["matmul"]
    assert "    tests/test_scaled_add.py::test_scaled_add_leaves_x_alone" in sections["scaled_add"]
    assert "    tests/test_jacobi2d.py::test_jacobi2d_keeps_a_constant_field" \
        in sections["jacobi2d"]
    assert "    tests/test_matmul.py::test_matmul_matches_numpy[128]" in sections["matmul"]
