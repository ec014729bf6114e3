"""HIP kernels on an AMD GPU through hip-python: loading the linked code object, copies,
launches and HIP-event timing, through the CUDA runtime's shared launcher. These tests
run where an AMD GPU and hip-python are usable (scripts/hip_suite.py runs them there) and
skip elsewhere with the reason; the driver's contract is checked everywhere."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import pytest_r3 as r3
from pytest_r3 import Pipeline
from pytest_r3.backends.cuda.runtime import Driver
from pytest_r3.backends.hip import HIPBackend
from pytest_r3.backends.hip import runtime as hip_runtime

SUITE = Path(__file__).resolve().parent / "hip_suite"
REASON = hip_runtime.unavailable_reason()
needs_amd_gpu = pytest.mark.skipif(REASON is not None,
                                   reason=f"needs an AMD GPU and hip-python: {REASON}")


def test_the_hip_driver_fulfils_the_runtime_contract():
    assert issubclass(hip_runtime.HIPDriver, Driver)
    assert not hip_runtime.HIPDriver.__abstractmethods__


@needs_amd_gpu
def test_the_runtime_names_the_gpu_and_its_architecture():
    started = hip_runtime.runtime()
    assert started.arch.startswith("gfx") and started.device_name


@needs_amd_gpu
def test_a_code_object_runs_on_the_gpu_and_matches_numpy():
    backend = HIPBackend(hip_runtime.runtime().arch)
    kernel = r3.kernel(str(SUITE / "vector_add.hip"), entry="vector_add", backend="hip",
                       name="vector_add_on_gpu",
                       launch=lambda a, t: {"grid": (r3.cdiv(a["n"], 256),), "block": (256,)})
    ir = backend.compile(kernel.source_for(kernel.baseline), {})
    launcher = backend.load(ir, "vector_add", kernel.signature, Pipeline(), kernel.name,
                            launch=kernel.launch)
    a, b = np.arange(1000, dtype=np.float32), np.ones(1000, np.float32)
    c = np.zeros(1000, np.float32)
    launcher(a, b, c, 1000)
    np.testing.assert_array_equal(c, a + b)
    seconds = launcher.time([a, b, c, 1000], 5)
    assert len(seconds) == 5 and all(0 < s < 1 for s in seconds)


@needs_amd_gpu
def test_a_wavefront_reduction_runs_on_the_gpu():
    kernel = r3.kernel(str(SUITE / "wave_reduce.hip"), entry="wave_reduce", backend="hip",
                       name="wave_reduce_on_gpu",
                       launch=lambda a, t: {"grid": (r3.cdiv(a["n"], 256),), "block": (256,)})
    assert not getattr(kernel.backend, "emulated", False)
    x = np.random.default_rng(1).random(5000, np.float32)
    total = np.zeros(1, np.float32)
    kernel(x, total, 5000)
    assert total[0] == pytest.approx(float(x.sum()), rel=1e-4)


def test_the_amd_gpu_suite_fails_on_skips_that_mean_the_gpu_was_not_used(tmp_path):
    import importlib.util
    import sys

    script = Path(__file__).resolve().parent.parent / "scripts" / "hip_suite.py"
    sys.path.insert(0, str(script.parent))
    try:
        spec = importlib.util.spec_from_file_location("hip_suite", script)
        suite = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(suite)
    finally:
        sys.path.remove(str(script.parent))
    junit = tmp_path / "junit.xml"
    junit.write_text(
        '<testsuites><testsuite>'
        '<testcase classname="tests.test_hip_runtime" name="test_a">'
        '<skipped message="needs an AMD GPU and hip-python: no usable AMD GPU"/></testcase>'
        '<testcase classname="tests.test_hip_suite" name="test_b">'
        '<skipped message="llvm-readobj not installed"/></testcase>'
        '<testcase classname="tests.test_hip" name="test_c"/>'
        '</testsuite></testsuites>')
    bad, fine = suite.judge_skips(junit)
    assert [line.split(": ")[0] for line in bad] == ["tests.test_hip_runtime::test_a"]
    assert fine == {"llvm-readobj not installed": 1}


def test_every_parameter_type_has_a_launch_argument():
    """Each scalar dtype the CUDA launcher packs (and pointers) becomes a ctypes value of
    the same size for hipModuleLaunchKernel's ``extra``."""
    import ctypes
    import struct

    from pytest_r3.backends.cuda.runtime import FORMAT

    for code in [*FORMAT.values(), "P"]:
        argument = hip_runtime.launch_argument(code, 1)
        assert ctypes.sizeof(argument) == struct.calcsize(code), code
    assert hip_runtime.launch_argument("e", 1.5).value == 0x3E00  # 1.5 in half precision
    assert hip_runtime.launch_argument("f", 2.5).value == 2.5
