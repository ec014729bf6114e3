import numpy as np
import pytest
from exampleproj import scaled_add


@pytest.mark.r3_oracle(scaled_add)
@pytest.mark.parametrize("n", [0, 1, 7, 1000, 1 << 16])
def test_scaled_add_matches_numpy(n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n, dtype=np.float32)
    y = rng.standard_normal(n, dtype=np.float32)
    expected = np.float32(1.5) * x + y
    scaled_add(n, 1.5, x, y)
    np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.r3_oracle(scaled_add)
def test_scaled_add_leaves_x_alone():
    x = np.arange(100, dtype=np.float32)
    y = np.zeros(100, dtype=np.float32)
    scaled_add(100, -2.0, x, y)
    np.testing.assert_array_equal(x, np.arange(100, dtype=np.float32))
    np.testing.assert_array_equal(y, -2.0 * np.arange(100, dtype=np.float32))
