"""Interleaved timing: baseline and candidate alternate in one process, so a speedup is a
ratio measured side by side, and a sample that lost its core to another process is
dropped and its round taken again (see sampling), so a busy machine cannot inflate it."""

from __future__ import annotations

import math
import time

import numpy as np

from .counters import Counters
from .measurement import LAYOUT_ROUNDS, CaseTiming, Timing
from .sampling import MIN_SLICES, Arguments, Sample, Sampler
from .statistics import NOISE_FLOOR, median_ratio, ratio_interval, upper_is_highest

# One round of one case: eight samples, (variant, set of buffers), set 0 being the
# baseline's arguments. The sets alternate from every sample to the next, across rounds too,
# so no sample runs on the buffers the sample before it used (a 48 MiB input still in cache
# made a baseline timed against itself 0.84-0.89x when each round started on the set the
# last one ended on). Each variant runs twice on each set, follows itself once and the other
# variant three times, and holds positions whose sum and sum of squares match the other's
# (1 4 6 7 against 2 3 5 8): a linear or quadratic drift, a favoured position and a favoured
# predecessor all cancel within every round, and within each set's own pairs (by_set).
# A four-sample round cannot do all of this: with A B B A rounds in which the sets or the
# sides change every other round, the rounds' ratios alternated and their median came out
# anywhere from 0.93x to 1.06x for an in-place kernel timed against itself.
SCHEDULE = (("base", 0), ("cand", 1), ("cand", 0), ("base", 1),
            ("cand", 0), ("base", 1), ("base", 0), ("cand", 1))
SAMPLES_PER_SIDE = len(SCHEDULE) // 2
# A warm-up round, untimed, is the first half: each variant once on each set, where
# nothing needs to cancel (it faults pages in and warms caches and code before the timing).
WARM_UP = SCHEDULE[:SAMPLES_PER_SIDE]
# A racing candidate's warm-up where a sample is one launch (see interleaved_speedup): each
# variant once, so neither side's first launch on the timing's buffers is timed.
WARM_UP_RACE = SCHEDULE[:2]
# A racing candidate's round in two halves, B C C B and C B B C, each on sets 0 1 0 1: each
# half has each variant once on each set, at positions whose sums match (1 4 against 2 3),
# so a linear drift cancels within it, and a race may be lost after any half (see
# _outrun_halves). What a half leaves (a favoured predecessor: the base follows the
# candidate twice in the first half, the candidate the base twice in the second) cancels
# over the whole round, which alone gives the figures a timing reports.
HALVES = (SCHEDULE[:SAMPLES_PER_SIDE], SCHEDULE[SAMPLES_PER_SIDE:])
# A racing candidate whose first half reads below this share of the speedup to beat has
# lost: most of a search's candidates are far behind its best (matmul's at 1.0-2.0x against
# 2.8x), and a half in which each variant ran once on each set cannot be 20% off by noise
# (a descheduled sample is dropped; layouts and predecessors move a half by 5-10%), so the
# three halves of a closer race would only refine a loser. Its figures are that half's.
FAR_BEHIND = 0.8
# A race is tied after this many rounds when every one is within the noise floor of the
# speedup to beat (see _tied), before min_timing_rounds.
TIED_ROUNDS = 2


def _mean(samples: list[Sample]) -> Sample:
    """A variant's time in a round: the mean of its samples (None if one was dropped)."""
    if any(s.seconds is None for s in samples):
        return Sample(None)
    return Sample(*(sum(getattr(s, what) for s in samples) / len(samples)
                    for what in ("seconds", "cycles", "instructions")))


def _settled(base_times: list[float], cand_times: list[float]) -> bool:
    """Enough rounds: at least LAYOUT_ROUNDS (enough to tell a layout that favours one
    buffer set, see Timing.on_worse_layout, and for the interval to cover the speedup
    94% of the time), and the speedup's interval (see statistics) already lies within
    the noise floor of its estimate, so more rounds would not change what is claimed.
    (A rule on the rounds' interquartile range stopped as early with an interval twice as
    wide; one on three rounds made one A/A timing in thirty claim a 3% difference.)"""
    if len(base_times) < LAYOUT_ROUNDS:
        return False
    low, high = ratio_interval(base_times, cand_times)
    estimate = median_ratio(base_times, cand_times)
    return high <= estimate * (1 + NOISE_FLOOR) and low * (1 + NOISE_FLOOR) >= estimate


def _outrun(base_times: list[float], cand_times: list[float], race_against: float | None,
            settings) -> bool:
    """A race lost: at least ``race_rounds`` rounds, and three in four of them, have a ratio
    below the speedup to beat by more than the noise floor, so more rounds would only refine
    a loser. One stray round (a page fault, a busy neighbour) does not save or sink it."""
    if race_against is None:
        return False
    ratios = np.array(base_times) / np.array(cand_times)
    behind = int((ratios < race_against * (1 - NOISE_FLOOR)).sum())
    return behind >= max(1, settings.race_rounds) and 4 * behind >= 3 * len(ratios)


def _outrun_halves(base_halves: list[float], cand_halves: list[float], race_against: float,
                   settings) -> bool:
    """A race lost on half-rounds (see :data:`HALVES`): the first half already far behind
    the speedup to beat (:data:`FAR_BEHIND`), or the first ``race_halves`` halves all
    behind it by more than the noise floor, or later, all but one in four of them and
    ``race_halves + 1`` at least. A candidate far behind stops after one half (4 samples),
    another clear loser after ``race_halves`` halves (12 samples, as rounds of four did
    before rounds of eight); a
    candidate equal to the speedup to beat is declared a loser less often than by
    :func:`_outrun` over whole rounds (tests/test_timing_race.py)."""
    ratios = np.array(base_halves) / np.array(cand_halves)
    if (ratios < race_against * FAR_BEHIND).all():
        return True  # every half so far (the first: later ones follow one that was not)
    behind = int((ratios < race_against * (1 - NOISE_FLOOR)).sum())
    first = max(2, settings.race_halves)  # a whole round at least
    if len(ratios) < first:
        return False
    return behind == len(ratios) or (len(ratios) >= first + 2 and behind >= first + 1
                                     and 4 * behind >= 3 * len(ratios))


def _tied(base_times: list[float], cand_times: list[float], race_against: float | None,
          settings) -> bool:
    """A race that more rounds would not decide: after ``min_timing_rounds`` rounds the
    median ratio is within the noise floor of the speedup to beat, so the candidate is no
    clear improvement (it does not become the best) and no clear loss; or sooner, after
    TIED_ROUNDS, every round is: its interval is already inside the noise floor (17 of a
    matmul search's 60 candidates were ties, each paying 3 rounds of eight samples)."""
    if race_against is None or not base_times:
        return False
    close = np.abs(np.array(base_times) / np.array(cand_times) / race_against - 1.0) \
        <= NOISE_FLOOR
    if len(base_times) >= TIED_ROUNDS and close.all():
        return True
    if len(base_times) < settings.min_timing_rounds:
        return False
    median = float(np.median(np.array(base_times) / np.array(cand_times)))
    return abs(median / race_against - 1.0) <= NOISE_FLOOR


def _ahead(base_times: list[float], cand_times: list[float], race_against: float | None,
           rounds: int) -> bool:
    """A race won (the mirror of :func:`_outrun`): at least ``rounds`` rounds, and three in
    four of all rounds, put the candidate ahead by more than the noise floor."""
    if race_against is None:
        return False
    ratios = np.array(base_times) / np.array(cand_times)
    ahead = int((ratios > race_against * (1 + NOISE_FLOOR)).sum())
    return ahead >= max(1, rounds) and 4 * ahead >= 3 * len(ratios)


def interleaved_speedup(backend, baseline, candidate, base_args: list[Arguments],
                        cand_args: list[Arguments], settings,
                        weights: list[float] | None = None,
                        race_against: float | None = None,
                        repeats: list[int | None] | None = None,
                        stop_ahead: int | None = None,
                        counters: Counters | None = None,
                        budget: float | None = None,
                        clear_of: float | None = None) -> Timing:
    """Baseline and candidate timed side by side, round after round (see Timing).

    ``base_args`` and ``cand_args`` are two sets of launch arguments, one per timed case.
    A round's time is the sum over cases of ``weight`` times the time of one launch (each
    weight 1 when none are given); ``cases`` holds each case's own per-round times, so a
    weighted total and per-workload speedups come from one measurement.
    Each round times every case for both variants in eight samples, each variant twice on
    each of the two sets of buffers (see :data:`SCHEDULE`), and a variant's time in the
    round is the mean of its four samples: where arrays land in memory (several percent),
    which position in a round is favoured and which side follows the other all cancel
    within every round, so the baseline timed against itself is 1.00x round by round. A
    variant's four samples in a round together last about ``min_sample_seconds`` (``repeats``:
    launches per sample already known, per case, from an earlier timing), in slices whose
    wall time is checked against the thread's CPU time (see sampling): a sample that lost
    its core is taken again at once (the rest of its round stands), up to
    ``retakes_per_round`` retakes per round planned for each of a round's samples, after
    which the rounds stop: ``busy`` with at least
    ``min_timing_rounds`` clean rounds (their figures stand, with a wider interval),
    ``too_busy`` with fewer. Rounds stop early, after
    ``min_timing_rounds``, once the ratio is steady (IQR under half the noise floor), and
    at ``timing_rounds`` otherwise. With ``race_against`` (the best speedup so
    far), they stop as soon as the candidate has clearly lost (``raced`` in the result;
    told after every half-round, see :data:`HALVES`, unless ``race_halves`` is 0), or
    is tied with it after ``min_timing_rounds``, or has clearly won in ``stop_ahead``
    rounds (None: never; a winner's speedup becomes what later candidates race against).
    ``budget``: seconds the rounds may take in all (the caller's request limit less a
    margin); past it, retakes and rounds stop as when the retakes run out (``busy`` or
    ``too_busy``), so a machine busy enough to drag the timing past the caller's limit
    gives a too-busy result instead of a killed worker (a ``timeout``, which would fail the
    candidate: the baseline itself under heavy load).
    ``clear_of``: the timing only asks whether the candidate is slower than this speedup
    (a slow-path probe: its interval wholly below it); with fewer than six rounds planned
    the interval reaches up to the highest round, so the rounds stop (``clear``) after the
    first that reads at least ``clear_of``: the answer, no, is what every round would give.
    ``stopped`` says which rule ended the rounds ("" when they all ran).
    """
    ends = None if budget is None else time.monotonic() + budget

    def late() -> bool:
        return ends is not None and time.monotonic() > ends
    sampler = Sampler(backend, counters, settings.long_slice_seconds)
    known = repeats or [None] * len(base_args)
    repeats, slices = [], []
    for args, count in zip(base_args, known, strict=True):
        if count is None:  # the baseline's time decides; a worker remembers it per case
            single = sampler.single(baseline, args)
            count = max(1, min(10_000, math.ceil(
                settings.min_sample_seconds / SAMPLES_PER_SIDE / single)))
        else:  # known: a launch lasts about a sample's share (no launch spent sizing it)
            single = settings.min_sample_seconds / SAMPLES_PER_SIDE / count
        repeats.append(count)
        slices.append(sampler.per_slice(single, args))
    weights = [1.0] * len(base_args) if weights is None else [float(w) for w in weights]
    base_times, cand_times = [], []
    counted: list[tuple[float, float, float, float]] = []
    raced, stopped = False, ""
    per_case: list[tuple[list[float], list[float]]] = [([], []) for _ in base_args]
    per_case_sets: list[list[tuple]] = [[] for _ in base_args]
    by_set: list[tuple] = []  # per kept round: base and candidate on set 0, then on set 1
    warmup = settings.warmup_rounds if race_against is None else \
        min(settings.warmup_rounds, settings.race_warmup_rounds)
    # samples of one launch each (0.5 ms and longer): one launch warms what a round of
    # shorter ones does, so one warm-up round, or racing, WARM_UP_RACE, is enough
    single_launches = all(count == 1 for count in repeats)
    if single_launches:
        warmup = min(warmup, 1)
    launchers = {"base": baseline, "cand": candidate}
    # samples taken again after losing their core, at most this many in all
    allowed = settings.retakes_per_round * (warmup + settings.timing_rounds) \
        * len(SCHEDULE) * len(base_args)
    round_index = retakes = last_set = 0
    # a racing candidate's halves (see HALVES): weighted base and candidate times of each
    halves_on = race_against is not None and settings.race_halves > 0
    # a probe's question, answered by one round (see the docstring)
    answered_by_one = clear_of is not None and upper_is_highest(settings.timing_rounds)
    base_halves: list[float] = []
    cand_halves: list[float] = []
    while round_index < warmup + settings.timing_rounds:
        timed = round_index >= warmup
        ones = []
        ones_by_set: list[tuple] = []  # per case: base and candidate on set 0, then set 1
        order = SCHEDULE if timed else \
            WARM_UP_RACE if single_launches and race_against is not None else WARM_UP
        # racing, every case's first half is taken before any case's second half
        blocks = HALVES if timed and halves_on else (order,)
        taken_per_case: list[list[tuple[str, Sample]]] = [[] for _ in base_args]
        for block in blocks:
            for sets, repeat, per_slice, taken in zip(zip(base_args, cand_args), repeats,
                                                      slices, taken_per_case, strict=True):
                for side, which in block:
                    sample = sampler.sample(launchers[side], sets[which], repeat, per_slice,
                                            timed)
                    while sample.seconds is None and retakes < allowed and not late():
                        retakes += 1  # that sample again, at once: same variant, same buffers
                        # in MIN_SLICES slices at least: one more launch lost to the
                        # scheduler leaves it clean slices (a sample of one launch is one
                        # slice, which a busy machine takes from one launch in two)
                        sample = sampler.sample(
                            launchers[side], sets[which],
                            max(repeat, MIN_SLICES) if per_slice == 1 else repeat,
                            per_slice, timed)
                    taken.append((side, sample))
            if len(blocks) == 1:
                break
            half = [tuple(_mean([s for side, s in taken[-len(block):] if side == wanted])
                          for wanted in ("base", "cand")) for taken in taken_per_case]
            if any(s.seconds is None for pair in half for s in pair):
                break  # the round is not whole: below, as when the retakes ran out
            base_halves.append(sum(w * b.seconds for w, (b, _) in zip(weights, half)))
            cand_halves.append(sum(w * c.seconds for w, (_, c) in zip(weights, half)))
            if _outrun_halves(base_halves, cand_halves, race_against, settings):
                raced = True
                break
        if raced and any(len(taken) < len(order) for taken in taken_per_case):
            if base_times:
                stopped = "raced"  # lost on a first half: the whole rounds before it stand
                break
            order = HALVES[0]  # far behind on the very first half: its figures stand
        if not timed:  # warm-up samples are not checked, so never dropped
            round_index += 1
            continue
        for taken in taken_per_case:
            ones.append(tuple(_mean([s for side, s in taken if side == wanted])
                              for wanted in ("base", "cand")))
            ones_by_set.append(tuple(
                _mean([s for (side, s), (_, on) in zip(taken, SCHEDULE, strict=False)
                       if (side, on) == (wanted, which)]).seconds
                for which in (0, 1) for wanted in ("base", "cand")))
        last_set = [which for side, which in order if side == "cand"][-1]  # its outputs
        if any(s.seconds is None for pair in ones for s in pair):
            # enough clean rounds give a figure (a wider interval); fewer give none
            enough = len(base_times) >= max(1, settings.min_timing_rounds)
            stopped = "busy" if enough else "too_busy"
            break
        round_index += 1
        for number, (base_one, cand_one) in enumerate(ones):
            per_case[number][0].append(base_one.seconds)
            per_case[number][1].append(cand_one.seconds)
            per_case_sets[number].append(ones_by_set[number])
        by_set.append(tuple(sum(w * four[k] for w, four in zip(weights, ones_by_set))
                            for k in range(4)))
        base_times.append(sum(w * b.seconds for w, (b, _) in zip(weights, ones)))
        cand_times.append(sum(w * c.seconds for w, (_, c) in zip(weights, ones)))
        counted.append(tuple(sum(w * getattr(s, what) for w, s in zip(weights, side))
                             for what in ("cycles", "instructions")
                             for side in ([b for b, _ in ones], [c for _, c in ones])))
        if raced:  # lost on a round's second half
            stopped = "raced"
        elif answered_by_one and base_times[-1] / cand_times[-1] >= clear_of:
            stopped = "clear"
        elif len(base_times) >= settings.min_timing_rounds and \
                _settled(base_times, cand_times):
            stopped = "settled"
        elif not halves_on and _outrun(base_times, cand_times, race_against, settings):
            stopped, raced = "raced", True
        elif _tied(base_times, cand_times, race_against, settings):
            stopped = "tied"
        elif stop_ahead is not None and _ahead(base_times, cand_times, race_against,
                                               stop_ahead):
            stopped = "ahead"
        elif late():  # out of time: what enough clean rounds say stands
            stopped = "busy" if len(base_times) >= max(1, settings.min_timing_rounds) \
                else "too_busy"
        if stopped:
            break
    return Timing(
        baseline_samples=tuple(base_times), candidate_samples=tuple(cand_times),
        cases=tuple(CaseTiming(weight, tuple(b), tuple(c), by_set=tuple(sets))
                    for (b, c), weight, sets in zip(per_case, weights, per_case_sets,
                                                    strict=True)),
        by_set=tuple(by_set), last_set=last_set,
        repeats=tuple(repeats), warmup_rounds=warmup, raced=raced, stopped=stopped,
        dropped=sampler.dropped, taken=sampler.taken, cpu_timed=sampler.cpu_timed,
        clock=sampler.clock,
        counters=counters.describe() if counters is not None else "",
        cycles=tuple((b, c) for b, c, _, _ in counted) if sampler.counting else (),
        instructions=tuple((b, c) for _, _, b, c in counted) if sampler.counting else ())
