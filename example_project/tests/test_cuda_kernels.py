"""The GPU kernels against numpy. Without a usable GPU they run in pytest-r3's CUDA emulation
on the CPU (x86-64), which verifies and records them but never tunes them; they skip, saying
why, only where neither is possible (another architecture, or PYTEST_R3_CUDA_EMULATION=0
without a GPU)."""

import numpy as np
import pytest
from exampleproj.cuda import matmul_tiled, saxpy, stencil2d

from pytest_r3.backends.cuda import unavailable_reason

CUDA_MISSING = unavailable_reason()
pytestmark = pytest.mark.skipif(CUDA_MISSING is not None,
                                reason=f"needs a GPU: {CUDA_MISSING}")


@pytest.mark.r3_oracle(saxpy)
@pytest.mark.parametrize("n", [1, 1000, 1 << 20])
def test_saxpy_matches_numpy(n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n, dtype=np.float32)
    y = rng.standard_normal(n, dtype=np.float32)
    expected = np.float32(2.5) * x + y
    saxpy(n, 2.5, x, y)
    np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-6)


def reference_stencil(grid):
    out = grid.copy()
    out[1:-1, 1:-1] = 0.25 * (grid[:-2, 1:-1] + grid[2:, 1:-1] + grid[1:-1, :-2] + grid[1:-1, 2:])
    return out


@pytest.mark.r3_oracle(stencil2d)
@pytest.mark.parametrize("shape", [(3, 3), (10, 37), (1024, 1000)])
def test_stencil2d_matches_numpy(shape):
    grid = np.random.default_rng(sum(shape)).random(shape, dtype=np.float32)
    out = np.empty_like(grid)
    stencil2d(shape[0], shape[1], grid, out)
    np.testing.assert_allclose(out, reference_stencil(grid), rtol=1e-6)


@pytest.mark.r3_oracle(matmul_tiled)
@pytest.mark.parametrize("m, n, k", [(1, 1, 1), (17, 33, 5), (256, 192, 320)])
def test_matmul_tiled_matches_numpy(m, n, k):
    rng = np.random.default_rng(m * n * k)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    c = np.empty((m, n), dtype=np.float32)
    matmul_tiled(m, n, k, a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
