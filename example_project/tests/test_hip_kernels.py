"""The AMD GPU kernels against numpy. Without an AMD GPU they run in pytest-r3's HIP
emulation on the CPU (x86-64, 64-lane wavefronts), which verifies and records them but
never tunes them; they skip, saying why, only where neither is possible."""

import numpy as np
import pytest
from exampleproj.hip import row_sums, sum_squares_cuda, sum_squares_hip

from pytest_r3.backends.cuda import unavailable_reason as cuda_unavailable
from pytest_r3.backends.hip import unavailable_reason

HIP_MISSING = unavailable_reason()
pytestmark = pytest.mark.skipif(HIP_MISSING is not None,
                                reason=f"needs an AMD GPU: {HIP_MISSING}")


@pytest.mark.r3_oracle(row_sums)
@pytest.mark.parametrize("shape", [(1, 1), (7, 300), (64, 4096)])
def test_row_sums_match_numpy(shape):
    matrix = np.random.default_rng(sum(shape)).random(shape, dtype=np.float32)
    sums = np.zeros(shape[0], np.float32)
    row_sums(shape[0], shape[1], matrix, sums)
    np.testing.assert_allclose(sums, matrix.sum(axis=1), rtol=1e-5)


@pytest.mark.r3_oracle(sum_squares_hip)
@pytest.mark.parametrize("n", [1, 1000, 100_000])
def test_sum_squares_on_hip_matches_numpy(n):
    x = np.random.default_rng(n).standard_normal(n, dtype=np.float32)
    result = np.zeros(1, np.float32)
    sum_squares_hip(n, x, result)
    assert result[0] == pytest.approx(float(np.dot(x, x)), rel=1e-4)


@pytest.mark.r3_oracle(sum_squares_cuda)
@pytest.mark.skipif(cuda_unavailable() is not None, reason=f"{cuda_unavailable()}")
def test_the_single_source_gives_the_same_answer_as_cuda():
    x = np.random.default_rng(5).standard_normal(5000, dtype=np.float32)
    on_cuda, on_hip = np.zeros(1, np.float32), np.zeros(1, np.float32)
    sum_squares_cuda(5000, x, on_cuda)
    sum_squares_hip(5000, x, on_hip)
    assert on_cuda[0] == pytest.approx(on_hip[0], rel=1e-4)  # the sums run in another order
