"""The value sets timed launches work on (replay/timed_sets.py): new per timing, distinct
from each other, the same work as the recorded values."""

from __future__ import annotations

import numpy as np

from pytest_r3.replay import timed_sets


def _recorded() -> list[np.ndarray]:
    rng = np.random.default_rng(4)
    x = rng.standard_normal(1000).astype(np.float32)
    x[:5] = [0.0, -0.0, np.inf, np.nan, 1e-40]  # zero, negative zero, inf, NaN, subnormal
    big = np.full(16, np.finfo(np.float64).max / 1.5)  # doubled, it would overflow
    index = rng.integers(0, 1000, 50).astype(np.int64)
    out = np.zeros(1000, dtype=np.float32)
    return [x, big, index, out]


def test_sets_differ_from_each_other_and_from_one_timing_to_the_next():
    recorded = _recorded()
    sets = timed_sets.draw(recorded, {0, 1, 2}, timed_sets.seed(11, 0), timed_sets.SETS)
    again = timed_sets.draw(recorded, {0, 1, 2}, timed_sets.seed(11, 0), timed_sets.SETS)
    other = timed_sets.draw(recorded, {0, 1, 2}, timed_sets.seed(12, 0), timed_sets.SETS)
    xs = [s[0].tobytes() for s in sets]
    assert len(set(xs)) == len(xs)  # no two sets alike: a kept result never fits
    assert recorded[0].tobytes() not in xs
    assert xs == [s[0].tobytes() for s in again]  # drawn from the timing's seed
    assert not set(xs) & {s[0].tobytes() for s in other}


def test_sets_keep_the_work_of_the_recorded_values():
    recorded = _recorded()
    x, big, index, out = recorded
    for values in timed_sets.draw(recorded, {0, 1, 2}, timed_sets.seed(3, 1), 8):
        varied = values[0]
        assert varied.dtype == x.dtype and varied.shape == x.shape
        # special values kept where they were: zeros (signs too), inf, NaN, subnormal
        assert np.array_equal(varied[:5].view(np.uint32), x[:5].view(np.uint32))
        ratio = varied[5:] / x[5:]
        scale = float(np.median(ratio))
        assert scale in (0.5, 1.0, 2.0)
        # at most one ulp from the scaled value, and changed in about half the elements
        assert np.all(np.abs(varied[5:] - scale * x[5:]) <= np.spacing(np.abs(scale * x[5:])))
        assert 0.35 < np.mean(varied[5:] != scale * x[5:]) < 0.65
        assert np.isfinite(values[1]).all() and (values[1] <= big * 1.0000001).all()
        assert values[2] is index and values[3] is out  # integer data, and unread buffers

