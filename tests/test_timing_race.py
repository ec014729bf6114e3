"""Timings that stop once their question is answered. Racing, on half-rounds: a candidate
far behind the speedup to beat stops after one half, another clearly slower one after
three halves of four samples (what three rounds of four cost before rounds of eight), and
a candidate equal to the speedup to beat is declared a loser no more often than over
whole rounds. On a slow-path probe: the first round that reads
not slower ends the timing, with the verdict every round would have given.

The fake backends here are clocks, not kernels (as in test_timing_order.py): each answers a
timed sample with a launch time, so the decisions are checked on known times and noise.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from pytest_r3.replay.protocol import ReplaySettings
from pytest_r3.replay.sampling import Arguments
from pytest_r3.replay.timing import interleaved_speedup

LAUNCH = 1e-3
# one launch per sample, known (no sizing launch): a racing candidate's warm-up is one launch
# of each variant, an unraced timing's one warm-up half
SETTINGS = ReplaySettings(timing_rounds=12, min_timing_rounds=3, warmup_rounds=2,
                          race_warmup_rounds=1, min_sample_seconds=LAUNCH)


def baseline():
    """A launcher: only its identity matters to the fake backends."""


def candidate():
    """The other variant."""


class Slower:
    """A fake backend on which the candidate's launches take ``factor`` times the
    baseline's; every call counted."""

    cpu_clock = "thread"

    def __init__(self, factor: float) -> None:
        self.factor, self.calls = factor, 0

    def time(self, launcher, args, repeat: int) -> list[float]:
        self.calls += 1
        return [LAUNCH * (self.factor if launcher is candidate else 1.0)] * repeat


def _race(backend, cases: int = 1, settings: ReplaySettings = SETTINGS,
          race_against: float = 1.0):
    base = [Arguments([[0, n]]) for n in range(cases)]
    cand = [Arguments([[1, n]]) for n in range(cases)]
    return interleaved_speedup(backend, baseline, candidate, base, cand, settings,
                               race_against=race_against, repeats=[1] * cases)


def test_a_clear_loser_stops_after_three_half_rounds():
    """Rounds of eight samples made a clear loser pay two whole rounds (16 timed samples)
    where three rounds of four (12) did before; it now stops after three halves (12)."""
    backend = Slower(1.1)
    timing = _race(backend)
    assert timing.raced and timing.stopped == "raced"
    # a launch of each variant to warm up, three timed halves
    assert backend.calls == 2 + 3 * 4
    assert timing.rounds == 1  # the whole round before the deciding half; its figure stands
    assert timing.speedup == pytest.approx(1 / 1.1)


def test_a_loser_far_behind_stops_after_one_half():
    """Most of a search's candidates are far behind its best: one half (each variant once on
    each set) already says so, and its figures are the timing's (one round)."""
    backend = Slower(1.5)
    timing = _race(backend)
    assert timing.raced and timing.stopped == "raced"
    assert backend.calls == 2 + 4
    assert timing.rounds == 1 and len(timing.by_set) == 1
    assert timing.speedup == pytest.approx(1 / 1.5)
    assert timing.by_set[0] == pytest.approx((LAUNCH, 1.5 * LAUNCH) * 2)


class FirstSlow:
    """A fake backend on which each variant's first launch is three times slower (code,
    caches and pages cold), the candidate as fast as the baseline after."""

    cpu_clock = "thread"

    def __init__(self) -> None:
        self.seen: set = set()

    def time(self, launcher, args, repeat: int) -> list[float]:
        first = launcher not in self.seen
        self.seen.add(launcher)
        return [LAUNCH * (3.0 if first else 1.0)] + [LAUNCH] * (repeat - 1)


def test_a_first_launch_that_is_slow_does_not_sink_an_equal_candidate():
    """The race's warm-up launches each variant once, untimed: a candidate's first launch,
    slow here as the baseline's never is (the baseline ran before), is not its first half."""
    timing = _race(FirstSlow())
    assert not timing.raced and timing.stopped == "tied"
    assert timing.speedup == pytest.approx(1.0)


def test_a_clear_loser_on_several_cases_stops_after_three_halves_of_each():
    """Racing, each case's first half is taken before any case's second half, so a half
    covers every case and a loser stops as early with several timed cases."""
    backend = Slower(1.1)
    timing = _race(backend, cases=2)
    assert timing.raced
    assert backend.calls == 2 * (2 + 3 * 4)
    assert [case.speedup for case in timing.cases] == pytest.approx([1 / 1.1] * 2)


def test_a_loser_on_whole_rounds_only_pays_two_rounds():
    """``race_halves`` 0 decides on whole rounds, as before half-rounds: the cost the
    halves save (and the comparison the noise test below makes)."""
    backend = Slower(1.5)
    timing = _race(backend, settings=dataclasses.replace(SETTINGS, race_halves=0))
    assert timing.raced
    assert backend.calls == 2 + 2 * 8


def test_a_candidate_that_wins_is_timed_in_whole_rounds():
    """A candidate ahead is never stopped on a half: its figures are those of whole rounds
    (here until it is tied with nothing: all 12 rounds, or settled from the fifth)."""
    backend = Slower(0.5)
    timing = _race(backend)
    assert not timing.raced
    assert timing.stopped == "settled" and timing.rounds == 5
    assert backend.calls == 2 + 5 * 8
    assert timing.speedup == pytest.approx(2.0)


class Warmed:
    """A fake backend where a sample is 10% faster when the other variant ran just before
    (caches, predictors, clock boost): a half-round favours one side (the base follows the
    candidate twice in B C C B), which only the whole round cancels."""

    cpu_clock = "thread"

    def __init__(self) -> None:
        self.previous = None

    def time(self, launcher, args, repeat: int) -> list[float]:
        seconds = LAUNCH * (0.9 if self.previous not in (None, launcher) else 1.0)
        self.previous = launcher
        return [seconds] * repeat


def test_a_favoured_side_within_a_half_does_not_sink_an_equal_candidate():
    """Halves alternate which side the predecessor favours (about 5% here, beyond the 2%
    floor): one half in two reads behind, never three in four, so the race goes on to a
    tie on whole rounds, where the effect cancels."""
    timing = _race(Warmed())
    assert not timing.raced
    assert timing.stopped == "tied"
    assert timing.speedup == pytest.approx(1.0)


class Noisy:
    """A fake backend whose candidate takes ``factor`` times the baseline's time (the same
    by default), each sample off by a lognormal factor (``sigma``), from a seeded
    generator. No CPU clock is read (as for a GPU): a sample the real scheduler took the
    core from would be taken again and draw other noise, and the runs compared here must
    draw the same."""

    cpu_clock = "none"

    def __init__(self, sigma: float, seed: int, factor: float = 1.0) -> None:
        self.sigma, self.factor = sigma, factor
        self.rng = np.random.default_rng(seed)

    def time(self, launcher, args, repeat: int) -> list[float]:
        scale = LAUNCH * (self.factor if launcher is candidate else 1.0)
        return list(scale * np.exp(self.rng.normal(0.0, self.sigma, repeat)))


@pytest.mark.parametrize("sigma", [0.02, 0.05])
def test_an_equal_candidate_is_declared_a_loser_no_more_often_than_on_whole_rounds(sigma):
    """A candidate as fast as the speedup to beat, timed 300 times on the same noise with
    decisions on halves and on whole rounds only (the rule before halves): the halves
    declare it a loser no more often. (Three halves behind in three at once, or three in
    four later with four at least: looser rules on halves lost it more often at 5% noise.)"""
    losses = {}
    for halves in (3, 0):
        settings = dataclasses.replace(SETTINGS, race_halves=halves)
        losses[halves] = sum(_race(Noisy(sigma, seed), settings=settings).raced
                             for seed in range(300))
    assert losses[3] <= losses[0]
    assert losses[0] > 0 or sigma < 0.05  # the noise is enough to make whole rounds err


# -- a slow-path probe: is the candidate slower than the original by the margin? ----------

PROBE = dataclasses.replace(SETTINGS, timing_rounds=3, min_timing_rounds=3)
MARGIN = 0.15
CLEAR_OF = 1 / (1 + MARGIN)


def _probe(backend, clear_of: float | None = CLEAR_OF):
    return interleaved_speedup(backend, baseline, candidate, [Arguments([[0]])],
                               [Arguments([[1]])], PROBE, repeats=[1], clear_of=clear_of)


def test_a_probe_that_is_not_slower_stops_after_one_round():
    """Three rounds on each probe made matmul's confirmation 20 s against 5.4 s without
    probes; over fewer than six rounds the interval reaches up to the highest round, so a
    round that reads above the margin already says "not slower"."""
    backend = Slower(1.0)
    timing = _probe(backend)
    assert timing.stopped == "clear" and timing.rounds == 1
    assert backend.calls == 4 + 8  # a warm-up half (one launch a sample), one round
    assert timing.verdict(MARGIN) == "within"


def test_a_probe_that_is_slower_is_timed_in_full():
    backend = Slower(1.5)
    timing = _probe(backend)
    assert timing.stopped == "" and timing.rounds == 3
    assert timing.verdict(MARGIN) == "slower"


def test_a_probe_stopped_early_gives_the_verdict_every_round_would():
    """On noisy timings around the margin (a candidate 1.15x slower, 10% noise a sample),
    the verdict of a probe stopped at its first clear round is the verdict of all three
    rounds, seed by seed: stopping early answers the same question, never another."""
    verdicts = []
    for seed in range(200):
        early = _probe(Noisy(0.1, seed, factor=1.15))
        full = _probe(Noisy(0.1, seed, factor=1.15), clear_of=None)
        assert full.rounds == 3
        assert early.verdict(MARGIN) == full.verdict(MARGIN), seed
        verdicts.append((early.verdict(MARGIN), early.rounds))
    assert {v for v, _ in verdicts} == {"slower", "within"}  # both answers were met
    assert any(rounds < 3 for _, rounds in verdicts)  # and some stopped early
