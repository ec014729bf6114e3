"""The LLVM pass pipeline a variant is optimised with, and what its settings change."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

from pytest_r3 import DeclarationError, Pipeline

VECTOR = re.compile(r"<\d+ x float>")


def test_default_pipeline_is_o3_with_everything_on():
    pipeline = Pipeline()
    assert pipeline.as_dict().items() >= {
        "level": 3, "loop_vectorize": True, "slp_vectorize": True, "loop_unroll": True,
        "loop_interleave": True, "inline_threshold": None}.items()
    assert pipeline.differences() == {}
    assert Pipeline.from_mapping(None) == pipeline
    assert Pipeline.from_mapping({}) == pipeline


def test_from_mapping_passes_a_pipeline_through_and_reports_differences():
    custom = Pipeline(level=1, loop_unroll=False)
    assert Pipeline.from_mapping(custom) is custom
    assert Pipeline.from_mapping({"level": 1, "loop_unroll": False}) == custom
    assert custom.differences() == {"level": 1, "loop_unroll": False}


def test_unknown_setting_is_refused_with_the_known_ones():
    with pytest.raises(DeclarationError) as excinfo:
        Pipeline.from_mapping({"levle": 2, "vectorize": True}, where="kernel 'k': ")
    assert str(excinfo.value).startswith(
        "kernel 'k': unknown pipeline setting(s) 'levle', 'vectorize'; known settings: level, "
        "loop_vectorize, slp_vectorize, loop_unroll, loop_interleave, inline_threshold")


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        ({"level": 4}, "level must be 0, 1, 2 or 3, got 4"),
        ({"inline_threshold": "high"}, "inline_threshold must be an integer or None, got 'high'"),
        ({"loop_vectorize": "no"}, "loop_vectorize must be True or False, got 'no'"),
    ],
)
def test_bad_values_are_refused_and_name_the_kernel(settings, problem):
    with pytest.raises(DeclarationError) as excinfo:
        Pipeline.from_mapping(settings, where="kernel 'k': ")
    assert str(excinfo.value) == f"kernel 'k': pipeline {problem}"


def test_key_is_stable_and_distinguishes_settings():
    assert Pipeline().key() == Pipeline(level=3).key()
    keys = {Pipeline().key(), Pipeline(level=2).key(), Pipeline(loop_vectorize=False).key(),
            Pipeline(inline_threshold=0).key()}
    assert len(keys) == 4
    # the same in another interpreter (it names variants in lock files)
    other = subprocess.run(
        [sys.executable, "-c",
         "from pytest_r3 import Pipeline; print(Pipeline(level=2).key())"],
        capture_output=True, text=True, check=True,
    )
    assert other.stdout.strip() == Pipeline(level=2).key()


def test_settings_change_the_optimised_code_not_the_results(axpy):
    x = np.arange(100, dtype=np.float32)
    expected = 3.0 * x + 1.0
    launchers = {
        "default": axpy.configure(),
        "level0": axpy.configure(pipeline={"level": 0}),
        "novec": axpy.configure(pipeline={"loop_vectorize": False, "slp_vectorize": False}),
    }
    for launcher in launchers.values():
        y = np.ones(100, dtype=np.float32)
        launcher(100, 3.0, x, y)
        np.testing.assert_allclose(y, expected)
    assert VECTOR.search(launchers["default"].optimised_ir)  # -O3 vectorises the loop
    assert not VECTOR.search(launchers["level0"].optimised_ir)
    assert "alloca" in launchers["level0"].optimised_ir  # not even mem2reg at level 0
    assert not VECTOR.search(launchers["novec"].optimised_ir)


def test_pipeline_declared_with_the_kernel_is_the_baseline(kernel_dir, unique_name):
    import pytest_r3 as r3

    kernel = r3.kernel(kernel_dir / "axpy.c", entry="axpy", name=unique_name(),
                       pipeline={"level": 0})
    assert kernel.baseline.pipeline == Pipeline(level=0)
    assert kernel.variant().pipeline == Pipeline(level=0)
    assert kernel.variant(pipeline={"level": 3}).pipeline == Pipeline()
    assert "alloca" in kernel.build().optimised_ir
    y = np.zeros(4, dtype=np.float32)
    kernel(4, 2.0, np.ones(4, dtype=np.float32), y)
    np.testing.assert_array_equal(y, 2.0)


def test_code_generation_settings_are_searched_only_where_the_backend_honours_them():
    """CUDA's PTX is emitted with the candidate's codegen_lsr; a CPU kernel's search space
    does not spend its budget on a setting its backend ignores."""
    from pytest_r3.backends import get_backend
    from pytest_r3.backends.cuda import CUDABackend
    from pytest_r3.model.pipeline import bounds_problem
    from pytest_r3.model.tunables import TuningSpace
    from pytest_r3.search.parametrization import SearchSpace

    cuda = SearchSpace(TuningSpace({}), Pipeline(), codegen=CUDABackend.codegen_settings)
    cpu = SearchSpace(TuningSpace({}), Pipeline(), codegen=get_backend("cpu").codegen_settings)
    point = cuda.parametrization(seed=1)
    assert {"codegen_lsr", "flat_addresses"} <= set(point["pipeline"].value)
    assert "codegen_lsr" not in cpu.parametrization(seed=1)["pipeline"].value
    point.value = {**point.value,
                   "pipeline": {**point.value["pipeline"], "codegen_lsr": False}}
    assert cuda.decode(point.value).pipeline == {"codegen_lsr": False}
    assert Pipeline.from_mapping({"codegen_lsr": False}).differences() == {"codegen_lsr": False}
    assert bounds_problem({"codegen_lsr": False}, Pipeline()) is None
    assert "codegen_lsr='no' is outside" in bounds_problem({"codegen_lsr": "no"}, Pipeline())


def test_a_pass_sequence_written_as_text_is_a_list_of_passes():
    """``pytest-r3 replay --pipeline passes_before=sccp,jump_threading`` gives the text
    "sccp,jump_threading": it was read letter by letter ("unknown pass 's'")."""
    pipeline = Pipeline.from_mapping({"passes_before": "sccp, jump_threading",
                                      "passes_after": "new_gvn"})
    assert pipeline.passes_before == ("sccp", "jump_threading")
    assert pipeline.passes_after == ("new_gvn",)
