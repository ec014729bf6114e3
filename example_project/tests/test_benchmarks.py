"""Production-sized calls of each CPU kernel, timed with pytest-benchmark.

`pytest --r3-tune` records the launches in these tests as timing *workloads*: candidates are
timed on them (the sizes the package runs), while the oracle tests beside this file keep
deciding what is correct. pytest.ini passes --benchmark-disable, so a plain `pytest` runs
each once; `pytest --benchmark-enable` times them.
"""

import numpy as np
from exampleproj import jacobi2d, matmul, scaled_add


def test_scaled_add_production(benchmark):
    n = 1 << 22  # 16 MiB per vector
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n, dtype=np.float32)
    y = rng.standard_normal(n, dtype=np.float32)
    benchmark(scaled_add, n, 0.5, x, y)


def test_matmul_production(benchmark):
    n = 384
    rng = np.random.default_rng(1)
    a = rng.standard_normal((n, n))
    b = rng.standard_normal((n, n))
    c = np.empty((n, n))
    benchmark(matmul, n, a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-9, atol=1e-9)


def test_jacobi2d_production(benchmark):
    rows, cols = 2048, 2048
    grid = np.random.default_rng(2).random((rows, cols), dtype=np.float32)
    out = np.empty_like(grid)
    benchmark(jacobi2d, rows, cols, grid, out)
