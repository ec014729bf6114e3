"""A PolyBench-style gemm, declared as it is (see exampleproj/existing), against numpy."""

import numpy as np
import pytest
from exampleproj.existing import gemm


@pytest.mark.r3_oracle(gemm)
@pytest.mark.parametrize("ni, nj, nk", [(20, 25, 30), (64, 48, 40)])
def test_gemm_matches_numpy(ni, nj, nk):
    rng = np.random.default_rng(ni)
    c = rng.random((ni, nj), dtype=np.float32)
    a = rng.random((ni, nk), dtype=np.float32)
    b = rng.random((nk, nj), dtype=np.float32)
    expected = 1.5 * a @ b + 1.2 * c
    gemm(ni, nj, nk, 1.5, 1.2, c, a, b)
    np.testing.assert_allclose(c, expected, rtol=1e-5)
