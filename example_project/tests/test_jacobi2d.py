import numpy as np
import pytest
from exampleproj import jacobi2d


def reference(grid):
    out = grid.copy()
    out[1:-1, 1:-1] = 0.25 * (grid[:-2, 1:-1] + grid[2:, 1:-1] + grid[1:-1, :-2] + grid[1:-1, 2:])
    return out


@pytest.mark.r3_oracle(jacobi2d)
@pytest.mark.parametrize("shape", [(3, 3), (10, 37), (256, 300)])
def test_jacobi2d_matches_numpy(shape):
    grid = np.random.default_rng(sum(shape)).random(shape, dtype=np.float32)
    out = np.empty_like(grid)
    jacobi2d(shape[0], shape[1], grid, out)
    np.testing.assert_allclose(out, reference(grid), rtol=1e-6)


@pytest.mark.r3_oracle(jacobi2d)
def test_jacobi2d_keeps_a_constant_field():
    grid = np.full((64, 64), 3.0, dtype=np.float32)
    out = np.zeros_like(grid)
    jacobi2d(64, 64, grid, out)
    np.testing.assert_array_equal(out, grid)
