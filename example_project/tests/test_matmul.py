import numpy as np
import pytest
from exampleproj import matmul


@pytest.mark.r3_oracle(matmul)
@pytest.mark.parametrize("n", [1, 5, 33, 128, 256])
def test_matmul_matches_numpy(n):
    rng = np.random.default_rng(n)
    a = rng.standard_normal((n, n))
    b = rng.standard_normal((n, n))
    c = np.empty((n, n))
    matmul(n, a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-10, atol=1e-10)


@pytest.mark.r3_oracle(matmul)
def test_matmul_identity():
    n = 17
    a = np.random.default_rng(0).standard_normal((n, n))
    c = np.full((n, n), np.nan)
    matmul(n, a, np.eye(n), c)
    np.testing.assert_array_equal(c, a)
