"""The figures a claim rests on, from interleaved pairs of samples.

Each round gives one ratio (baseline time / candidate time) measured side by side. A
sample that lost its core is slower, never faster, so noise is one-sided on each side of
the ratio: the estimate is the median of the rounds' ratios (taken on their logarithms, so
2x faster and 2x slower weigh alike), which a minority of disturbed rounds cannot move
far, and its interval is the distribution-free one for a median, between two order
statistics chosen by the binomial distribution. No resampling, no seed: the same samples
always give the same figures, in the worker and in the parent.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np

CONFIDENCE = 0.95
# Differences under 2% are not claimed unless this machine's own noise band, learned by
# timing the baseline against itself, is known: buffer placement alone moves timings that much.
NOISE_FLOOR = 0.02

Verdict = Literal["faster", "slower", "within"]


def log_ratios(base: Sequence[float], cand: Sequence[float]) -> np.ndarray:
    return np.log(np.asarray(base, dtype=float)) - np.log(np.asarray(cand, dtype=float))


def median_ratio(base: Sequence[float], cand: Sequence[float]) -> float:
    """The median of the per-round ratios (for an even count, the geometric midpoint of
    the middle two: the median taken on logarithms)."""
    ratios = np.sort(np.asarray(base, dtype=float) / np.asarray(cand, dtype=float))
    middle = len(ratios) // 2
    if len(ratios) % 2:
        return float(ratios[middle])
    return float(math.sqrt(ratios[middle - 1] * ratios[middle]))


def _rank(n: int, confidence: float) -> int:
    """The 1-based rank k whose order statistics ``x(k)`` and ``x(n-k+1)`` bound the median
    with at least ``confidence`` (the largest such k; 1 when even the extremes fall short,
    as with fewer than six rounds at 95%)."""
    tail, k = 0.0, 0
    while k < n // 2:
        tail += math.comb(n, k) / 2.0 ** n  # P(at most k of n below the median)
        if 2 * tail > 1 - confidence:
            break
        k += 1
    return max(1, k)


def upper_is_highest(rounds: int, confidence: float = CONFIDENCE) -> bool:
    """Whether the interval over ``rounds`` rounds (or fewer) reaches up to the highest
    round's ratio (fewer than six rounds at 95%): then one round that reads at least some
    value puts the interval's upper end there too, whatever the other rounds read."""
    return _rank(rounds, confidence) == 1


def ratio_interval(base: Sequence[float], cand: Sequence[float],
                   confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The interval for the median ratio: order statistics of the per-round ratios."""
    ordered = np.sort(log_ratios(base, cand))
    k = _rank(len(ordered), confidence)
    return float(math.exp(ordered[k - 1])), float(math.exp(ordered[len(ordered) - k]))


def quartiles(base: Sequence[float], cand: Sequence[float]) -> tuple[float, float]:
    """The per-round ratios' interquartile range: how far rounds spread, not the estimate's
    uncertainty (that is :func:`ratio_interval`)."""
    ratios = np.asarray(base, dtype=float) / np.asarray(cand, dtype=float)
    q1, q3 = np.percentile(ratios, [25, 75])
    return float(q1), float(q3)


def verdict(interval: tuple[float, float], band: float = NOISE_FLOOR) -> Verdict:
    """Where the whole interval lies against the band of no difference ``1 / (1 + band)``
    to ``1 + band``: above it ("faster"), below it ("slower"), or anywhere else ("within":
    no claim either way, however far its median)."""
    low, high = interval
    if low > 1.0 + band:
        return "faster"
    if high < 1.0 / (1.0 + band):
        return "slower"
    return "within"


def band_from(interval: tuple[float, float], floor: float = 0.0) -> float:
    """The noise band an A/A measurement (the baseline timed against itself) shows: how far
    its interval reaches from 1 on either side, as a fraction, at least ``floor``."""
    low, high = interval
    return max(floor, high - 1.0, 1.0 / low - 1.0)
