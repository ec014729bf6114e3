"""The kept-output chains' inputs: what the earlier launch's output holds for the next."""

from __future__ import annotations

import numpy as np

from pytest_r3.replay import chains
from pytest_r3.replay.cases import Slot


class Planned:
    def __init__(self, n: int) -> None:
        rng = np.random.default_rng(n)
        self.label = f"recording n={n}"
        self.scalars = {"n": n}
        self.slots = [Slot(["a"], False, rng.standard_normal((n, n))),
                      Slot(["b"], False, rng.standard_normal((n, n))),
                      Slot(["c"], True, np.zeros((n, n)))]


def _steps(case, seed: int = 0) -> list[tuple]:
    return chains.steps(case, lambda label, scalars, slots, after: (label, slots, after),
                        np.random.default_rng(seed))


def test_a_swap_within_a_row_keeps_the_product_row_sums_and_changes_the_product():
    """Two neighbours of one row of b swapped: a @ b' has a @ b's row sums (an order-blind
    "already computed" test by row sums passes) but is another matrix (it is wrong)."""
    case = Planned(24)
    a, b = case.slots[0].values, case.slots[1].values
    swapped = [step for step in _steps(case) if "two elements of b swapped (neighbours"
               in step[0]]
    assert len(swapped) == 1
    label, slots, after = swapped[0]
    fresh = slots[1].values
    assert after == [case] and np.array_equal(slots[0].values, a)
    assert (fresh != b).sum() == 2 and np.allclose(fresh.sum(axis=1), b.sum(axis=1))
    assert np.allclose((a @ fresh).sum(axis=1), (a @ b).sum(axis=1))
    assert not np.allclose(a @ fresh, a @ b)


def test_a_swap_a_row_apart_keeps_column_sums_and_each_input_is_swapped_alone():
    case = Planned(17)
    b = case.slots[1].values
    column = [step for step in _steps(case, 3) if "b swapped (17 apart, within a column)"
              in step[0]]
    assert len(column) == 1
    fresh = column[0][1][1].values
    assert (fresh != b).sum() == 2 and np.allclose(fresh.sum(axis=0), b.sum(axis=0))
    labels = [step[0] for step in _steps(case)]
    assert sum("two elements of a swapped" in label for label in labels) == 2
    assert sum("two elements of b swapped" in label for label in labels) == 2


def test_a_flat_input_takes_its_row_length_from_an_integer_argument():
    values = np.arange(64.0)
    assert chains.swap_distances(values, {"n": 8, "alpha": 2.5}) == [
        (1, "neighbours within a row"), (8, "8 apart, within a column")]
    assert chains.swap_distances(values, {"alpha": 2.5}) == [(1, "neighbours")]
    assert chains.swapped(np.ones(10), 1, 0, np.random.default_rng(0)) is None
