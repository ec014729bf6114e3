"""The order and placement rules of interleaved timing: a baseline timed against itself
comes out at 1.00x whatever favours one position in a round or one set of buffers.

The fake backend here is a clock, not a kernel: it answers each timed slice with a launch
time that depends only on the effects under test, so the timing rules are checked exactly.
The same A/A in a real worker process is in test_timing.py.
"""

from __future__ import annotations

import time

import pytest

from pytest_r3.replay.protocol import ReplaySettings
from pytest_r3.replay.sampling import Arguments
from pytest_r3.replay.timing import interleaved_speedup

LAUNCH = 1e-3  # seconds a fake launch reports: one launch per slice, three per sample


class Placed:
    """A fake backend where one set of buffers is faster (where arrays land in memory:
    cache sets, 4K aliasing between inputs and outputs), and the first slice after the
    other variant ran is faster still (what the machine keeps warm for the second side of
    a pair: caches, branch predictors, clock boost)."""

    cpu_clock = "thread"

    def __init__(self, fast_args: list, placement: float = 0.06, warm: float = 0.10):
        self.fast_args, self.placement, self.warm = fast_args, placement, warm
        self.previous = None

    def time(self, launcher, args, repeat: int) -> list[float]:
        seconds = LAUNCH * (1.0 if args is self.fast_args else 1.0 + self.placement)
        if self.previous is not None and self.previous is not launcher:
            seconds *= 1.0 - self.warm
        self.previous = launcher
        return [seconds] * repeat


def baseline():
    """A launcher: only its identity matters to the fake backend."""


def candidate():
    """The same kernel loaded again (an A/A timing's second side)."""


@pytest.mark.parametrize("rounds", [15, 5, 16])
def test_a_baseline_against_itself_is_1x_whatever_favours_a_set_or_a_position(rounds):
    """Before, the buffer sets were traded every other round and the order alternated: the
    rounds' ratios took two values, and a median over an odd count of rounds (15, or 5 when
    the ratio settled early) landed on whichever came up more often (0.94x or 1.06x here).
    Each round now crosses both variants with both sets in the order A B B A, so every
    round of an A/A timing is 1.00x."""
    base_args, cand_args = [object()], [object()]
    backend = Placed(base_args)
    settings = ReplaySettings(timing_rounds=rounds, min_timing_rounds=rounds,
                              warmup_rounds=2, min_sample_seconds=3 * LAUNCH)
    timing = interleaved_speedup(backend, baseline, candidate, [Arguments([base_args])],
                                 [Arguments([cand_args])], settings)
    assert timing.rounds == rounds
    assert timing.speedup == pytest.approx(1.0, abs=1e-9)
    low, high = timing.interval
    assert low <= 1.0 <= high
    assert timing.baseline_median == pytest.approx(timing.candidate_median)


class Reused:
    """A fake backend where a launch on the buffers the previous launch used is faster (a
    large input still in cache): 15% here, about what a 48 MiB scaled_add showed, whose
    launches were long (one launch a sample)."""

    cpu_clock = "thread"
    launch = 6e-3

    def __init__(self, warm: float = 0.15):
        self.warm, self.previous = warm, None

    def time(self, launcher, args, repeat: int) -> list[float]:
        times = []
        for _ in range(repeat):
            times.append(self.launch * (1.0 - self.warm if args is self.previous else 1.0))
            self.previous = args
        return times


@pytest.mark.parametrize("rounds", [15, 16])
def test_a_baseline_against_itself_is_1x_when_reused_buffers_are_faster(rounds):
    """When odd rounds swapped the sets, each round's first sample ran on the buffers the
    previous sample had just used, and it was always the baseline's: an A/A of a 48 MiB
    scaled_add read 0.84-0.92x (0.925x here). The sets now alternate from every sample to
    the next, across rounds too."""
    set_0, set_1 = [object()], [object()]
    settings = ReplaySettings(timing_rounds=rounds, min_timing_rounds=rounds,
                              warmup_rounds=2, min_sample_seconds=Reused.launch)
    timing = interleaved_speedup(Reused(), baseline, candidate, [Arguments([set_0])],
                                 [Arguments([set_1])], settings, repeats=[1])
    assert timing.speedup == pytest.approx(1.0, abs=1e-9)
    assert timing.baseline_median == pytest.approx(timing.candidate_median)


def test_a_real_speedup_is_measured_at_its_size_when_a_set_is_faster():
    """The same rules leave a real difference whole: a candidate twice as fast is 2.00x,
    not 2x times what one set of buffers or one position adds."""
    base_args, cand_args = [object()], [object()]
    backend = Placed(base_args)
    plain = backend.time

    def halved(launcher, args, repeat):
        times = plain(launcher, args, repeat)
        return [t / 2 for t in times] if launcher is candidate else times
    backend.time = halved
    settings = ReplaySettings(timing_rounds=15, min_timing_rounds=15, warmup_rounds=2,
                              min_sample_seconds=3 * LAUNCH)
    timing = interleaved_speedup(backend, baseline, candidate, [Arguments([base_args])],
                                 [Arguments([cand_args])], settings)
    assert timing.speedup == pytest.approx(2.0, rel=1e-9)


class Interrupted:
    """A fake backend whose calls numbered in ``lost`` lose their core (they sleep: wall
    time passes, the thread's CPU time does not)."""

    cpu_clock = "thread"

    def __init__(self, lost: range) -> None:
        self.lost, self.calls = lost, 0

    def time(self, launcher, args, repeat: int) -> list[float]:
        self.calls += 1
        if self.calls in self.lost:
            time.sleep(0.01)
        return [LAUNCH] * repeat


def test_a_sample_that_lost_its_core_is_taken_again_alone():
    """A round has eight samples per case, so taking the whole round again for one lost
    sample would throw away seven clean ones and, on a machine where long
    launches often lose the core, leave no clean round at all: only the lost sample is
    taken again, and the figures are those of an undisturbed timing."""
    # three launches per sample, known (no sizing launch), all in one slice (a sample's
    # share of min_sample_seconds is well under a slice); after a warm-up round of four
    # samples (4 calls), the first timed sample loses the core and is dropped
    backend = Interrupted(lost=range(5, 6))
    settings = ReplaySettings(timing_rounds=5, min_timing_rounds=5, warmup_rounds=1,
                              min_sample_seconds=3e-4)
    timing = interleaved_speedup(backend, baseline, candidate, [Arguments([[0]])],
                                 [Arguments([[1]])], settings, repeats=[3])
    # a warm-up round, 5 rounds of 8 samples, and one sample taken again
    assert backend.calls == 4 + 5 * 8 + 1
    assert timing.rounds == 5 and timing.dropped == 1
    assert timing.speedup == pytest.approx(1.0)


class Cold:
    """A fake backend whose first launch after another variant or set of buffers ran pays
    a fixed cost (caches and predictors refilled), as a real sample's first slice did."""

    cpu_clock = "thread"
    launch = {"base": 1e-4, "cand": 5e-5}
    cold = 4e-5

    def __init__(self) -> None:
        self.last = None

    def time(self, launcher, args, repeat: int) -> list[float]:
        seconds = self.launch["base" if launcher is baseline else "cand"]
        times = [seconds] * repeat
        if self.last != (launcher, id(args)):
            times[0] += self.cold
        self.last = (launcher, id(args))
        return times


def test_a_samples_cold_first_launch_does_not_pull_a_speedup_towards_1():
    """The first slice of each sample was 15-70% slower on both sides (the other variant
    and the other buffers ran just before): a fixed cost added to a faster candidate's
    sample weighs more, and a true 2x read 1.86x here. A sample of short launches now
    starts with one launch left untimed."""
    settings = ReplaySettings(timing_rounds=7, min_timing_rounds=7, warmup_rounds=1,
                              min_sample_seconds=16 * 1e-4)
    timing = interleaved_speedup(Cold(), baseline, candidate, [Arguments([[0]])],
                                 [Arguments([[1]])], settings, repeats=[8])
    assert timing.speedup == pytest.approx(2.0, rel=1e-9)
