"""A small application using exampleproj's kernels at the sizes it runs in production: a
heat-diffusion solve (Jacobi sweeps on a 1024 x 1024 grid), a long vector update, and a few
dense products. Record its launches as tuning workloads with

    pytest-r3 record -- python example_app.py

then `pytest --r3-tune` times candidates on them (see docs/record-and-replay.md).
"""

import sys

import numpy as np
from exampleproj import jacobi2d, matmul, scaled_add


def diffuse(grid: np.ndarray, sweeps: int) -> np.ndarray:
    """``sweeps`` Jacobi sweeps, ping-ponging between two buffers."""
    other = np.empty_like(grid)
    for _ in range(sweeps):
        jacobi2d(grid.shape[0], grid.shape[1], grid, other)
        grid, other = other, grid
    return grid


def main(sweeps: int = 40) -> None:
    rng = np.random.default_rng(0)
    grid = np.zeros((1024, 1024), dtype=np.float32)
    grid[0, :] = 100.0  # a hot edge
    grid = diffuse(grid, sweeps)

    n = 1 << 22
    x = rng.standard_normal(n, dtype=np.float32)
    y = np.zeros(n, dtype=np.float32)
    for step in range(8):
        scaled_add(n, 0.5 ** step, x, y)

    a = rng.standard_normal((384, 384))
    c = np.empty_like(a)
    for _ in range(2):
        matmul(384, a, a, c)
        a = c / np.abs(c).max()
    print(f"mean heat {grid.mean():.4f}, |y| {np.linalg.norm(y):.1f}, "
          f"trace {np.trace(a):.4f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 40)
