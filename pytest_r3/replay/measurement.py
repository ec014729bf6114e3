"""The measurement as a typed value: what one interleaved timing found, frozen.

A worker builds a :class:`Timing` from its samples and sends :meth:`Timing.as_dict`; the
parent rebuilds it with :meth:`Timing.from_dict`, which checks every sample and computes
every figure again from the samples (a worker runs candidate code: its arithmetic is not
believed). Dicts exist only on the wire and on disk; everything above works on the value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal, get_args

import numpy as np

from . import statistics
from .device_timing import DeviceTiming
from .statistics import NOISE_FLOOR, Verdict

# What the ratios were measured against: the baseline itself, or the best configuration so
# far (whose own speedup then scales every figure into one against the baseline).
Basis = Literal["baseline", "best_so_far"]
# Why timing stopped before ``timing_rounds``: "" (it did not), the ratio settled, a race
# was lost / tied / won, or rounds kept losing their core: "busy" (enough clean rounds for
# a figure) or "too_busy" (too few: no figure); "clear": a timing that only asked whether
# the candidate is slower than a threshold (a slow-path probe) had its answer, no.
Stop = Literal["", "settled", "raced", "tied", "ahead", "busy", "too_busy", "clear"]
STOPS: tuple[str, ...] = get_args(Stop)
RACE_STOPS = ("raced", "tied", "ahead")  # reasons to stop timing that only a race has
TimedOn = Literal["", "workloads", "test inputs"]
# Which CPU time was read beside each sample's wall time: the timing thread's, the whole
# process's (kernels that run several threads), or none (a GPU, timed by the device).
Clock = Literal["thread", "process", "none"]

FORMAT = 2  # the shape of Timing.as_dict; stored results without it are the older shape



# A layout is told apart from noise only with this many rounds (every one of them on one
# set below every one on the other happens by chance once in 126 A/A timings) and a gap
# between the sets' speedups larger than this fraction.
LAYOUT_ROUNDS = 5
LAYOUT_GAP = 3 * NOISE_FLOOR


class MalformedTiming(ValueError):
    """Timing figures that are not well-formed: from a worker, a crash; on disk, a result
    measured again."""


@dataclass(frozen=True)
class Workload:
    """A timed workload recording: which, where it came from, its shapes."""

    key: str
    origin: str
    shape: str


class _Paired:
    """Figures of paired samples, one pair per round: the medians, the speedup estimate
    (the median of the rounds' ratios) and its 95% confidence interval."""

    baseline_samples: tuple[float, ...]
    candidate_samples: tuple[float, ...]

    @property
    def baseline_median(self) -> float:
        return float(np.median(self.baseline_samples))

    @property
    def candidate_median(self) -> float:
        return float(np.median(self.candidate_samples))

    @property
    def speedup(self) -> float:
        return statistics.median_ratio(self.baseline_samples, self.candidate_samples)

    @property
    def interval(self) -> tuple[float, float]:
        """Distribution-free, for a median (see statistics.ratio_interval)."""
        return statistics.ratio_interval(self.baseline_samples, self.candidate_samples)


@dataclass(frozen=True)
class CaseTiming(_Paired):
    """One timed case: per-launch times of every kept round, and the figures from them."""

    weight: float
    baseline_samples: tuple[float, ...]
    candidate_samples: tuple[float, ...]
    workload: Workload | None = None
    # per kept round: (baseline, candidate) on buffer set 0, then on set 1 (see Timing)
    by_set: tuple[tuple[float, float, float, float], ...] = ()

    def on_set(self, which: int) -> CaseTiming:
        """Only the samples taken on buffer set ``which`` (unchanged without them)."""
        if not self.by_set:
            return self
        return replace(self, baseline_samples=tuple(r[2 * which] for r in self.by_set),
                       candidate_samples=tuple(r[2 * which + 1] for r in self.by_set),
                       by_set=())

    def scaled(self, factor: float) -> CaseTiming:
        """As if the baseline took ``factor`` times the reference's time."""
        return replace(self, baseline_samples=tuple(x * factor for x in self.baseline_samples),
                       by_set=_scaled_sets(self.by_set, factor))

    def as_dict(self) -> dict:
        data = {"weight": self.weight, "baseline_samples": list(self.baseline_samples),
                "candidate_samples": list(self.candidate_samples)}
        if self.by_set:
            data["by_set"] = [list(four) for four in self.by_set]
        if self.baseline_samples:  # derived, for a reader; from_dict recomputes them
            data.update(baseline_median=self.baseline_median,
                        candidate_median=self.candidate_median, speedup=self.speedup)
        if self.workload is not None:
            data["workload"] = {"key": self.workload.key, "origin": self.workload.origin,
                                "shape": self.workload.shape}
        return data


@dataclass(frozen=True)
class Timing(_Paired):
    """An interleaved timing of a candidate against the baseline (or, with ``basis``
    "best_so_far", against the best configuration so far, scaled by its speedup
    ``scaled_by``).

    ``baseline_samples``/``candidate_samples``: one weighted total per kept round. The
    figures (medians, the speedup estimate, its interval, the rounds' quartiles) are
    computed from them. ``dropped``: samples thrown away because the timing thread lost its
    core while they ran (wall time beyond CPU time), of ``taken`` samples in all;
    ``cpu_timed``: slices that lost their core but were long enough to be timed by the
    thread's CPU time instead (see sampling);
    ``clock``: which CPU time was compared; ``counters``: the hardware counters read, or
    why none were. ``stopped`` "too_busy": too many rounds lost their core to be taken
    again; such a timing may have no rounds and gives no figures (the evaluation's status
    is then ``too_busy``).
    """

    baseline_samples: tuple[float, ...]
    candidate_samples: tuple[float, ...]
    cases: tuple[CaseTiming, ...]
    repeats: tuple[int, ...]
    warmup_rounds: int = 0
    raced: bool = False
    stopped: Stop = ""
    basis: Basis = "baseline"
    scaled_by: float = 1.0
    timed_on: TimedOn = ""
    # "" when the figures pool both buffer sets, else the set whose rounds alone they are
    # (the candidate was clearly slower there: see on_worse_layout)
    layout: str = ""
    dropped: int = 0
    taken: int = 0
    cpu_timed: int = 0
    clock: Clock = "thread"
    counters: str = ""
    # per kept round, (baseline, candidate) user-mode cycles and instructions per launch,
    # weighted like the samples; empty where the machine has no hardware counters
    cycles: tuple[tuple[float, float], ...] = ()
    instructions: tuple[tuple[float, float], ...] = ()
    # on a GPU: the device, its clocks, the L2 flush and warm-up, the bytes each case moved
    # and whether the figures beat the speed of light (see device_timing); None on a CPU
    device: DeviceTiming | None = None
    # per kept round, weighted like the samples: (baseline, candidate) on buffer set 0,
    # then on set 1 (each variant runs once on each set in a round; empty where unknown)
    by_set: tuple[tuple[float, float, float, float], ...] = ()
    last_set: int = 0  # the buffer set the candidate's last timed sample ran on

    # -- figures ---------------------------------------------------------------------------
    @property
    def rounds(self) -> int:
        return len(self.baseline_samples)

    @property
    def speedup_q1(self) -> float:
        return statistics.quartiles(self.baseline_samples, self.candidate_samples)[0]

    @property
    def speedup_q3(self) -> float:
        return statistics.quartiles(self.baseline_samples, self.candidate_samples)[1]

    @property
    def direct(self) -> bool:
        """Measured against the baseline itself, not scaled from the best so far."""
        return self.basis == "baseline"

    @property
    def workloads(self) -> tuple[CaseTiming, ...]:
        """The timed cases that are workload recordings (each with its own speedup)."""
        return tuple(case for case in self.cases if case.workload is not None)

    @property
    def dropped_share(self) -> float:
        return self.dropped / self.taken if self.taken else 0.0

    def verdict(self, band: float = NOISE_FLOOR) -> Verdict:
        """Whether the whole interval lies above the noise band ("faster"), below it
        ("slower") or not wholly outside it ("within": no claim). ``band``: this machine's,
        learned by timing the baseline against itself (:func:`statistics.band_from`)."""
        return statistics.verdict(self.interval, band)

    @property
    def within_noise(self) -> bool:
        """No clear difference at the fixed floor (when no learned band is at hand)."""
        return self.verdict() == "within"

    # -- changes -----------------------------------------------------------------------------
    def against_baseline(self, scale: float, case_scales: Sequence[float] | None = None
                         ) -> Timing:
        """Figures timed against the best configuration so far (its speedup: ``scale``) as
        figures against the baseline: each reference time times ``scale`` (what the
        baseline would take), each timed case's by that configuration's own speedup on it
        (``case_scales``; the total's when unknown)."""
        factors = list(case_scales) if case_scales else [scale] * len(self.cases)
        return replace(self, basis="best_so_far", scaled_by=scale,
                       baseline_samples=tuple(x * scale for x in self.baseline_samples),
                       by_set=_scaled_sets(self.by_set, scale),
                       cases=tuple(case.scaled(factor)
                                   for case, factor in zip(self.cases, factors, strict=True)))

    @property
    def suspect(self) -> str:
        """Why the figures are physically impossible ("" when they are not)."""
        return self.device.suspect if self.device is not None else ""

    def on_device(self, device: DeviceTiming) -> Timing:
        """The same timing, with its GPU conditions."""
        return replace(self, device=device)

    def on(self, timed_on: TimedOn, workloads: Sequence[Workload | None] = ()) -> Timing:
        """The same timing, saying what it was timed on (and which case is which workload)."""
        cases = self.cases
        if workloads:
            cases = tuple(replace(case, workload=workload)
                          for case, workload in zip(self.cases, workloads, strict=True))
        return replace(self, timed_on=timed_on, cases=cases)

    def rounds_on(self, which: int) -> Timing:
        """Only the samples taken on buffer set ``which``: each variant's one sample of
        every round on that set (unchanged where the timing kept no per-set samples)."""
        if not self.by_set:
            return self
        return replace(self, baseline_samples=tuple(r[2 * which] for r in self.by_set),
                       candidate_samples=tuple(r[2 * which + 1] for r in self.by_set),
                       cases=tuple(case.on_set(which) for case in self.cases), by_set=())

    def on_worse_layout(self, names: Sequence[str]) -> Timing:
        """The figures production can count on. The two buffer sets are laid out as two
        kinds of process lay out arrays (``names``); where the candidate's ratio is lower
        on one set by more than three times the noise floor (LAYOUT_GAP) and every round on
        it (LAYOUT_ROUNDS at least) is below every round on the other (a kernel keyed on
        its pointers' values, or one that suffers from a layout), the figures are that
        set's rounds alone; else all rounds (a smaller gap is within what timing can tell;
        with three rounds, one A/A timing in ten put every round of one set below the
        other's by chance)."""
        pooled = replace(self, layout="")
        halves = [self.rounds_on(which) for which in (0, 1)]
        if not self.by_set or self.rounds < LAYOUT_ROUNDS:
            return pooled
        worse, better = sorted(halves, key=lambda half: half.speedup)
        low = np.array(worse.baseline_samples) / np.array(worse.candidate_samples)
        high = np.array(better.baseline_samples) / np.array(better.candidate_samples)
        if worse.speedup * (1 + LAYOUT_GAP) < better.speedup and low.max() < high.min():
            return replace(worse, layout=names[0 if worse is halves[0] else 1])
        return pooled

    # -- wire and disk -----------------------------------------------------------------------
    def as_dict(self) -> dict:
        """Plain data: the samples and what they were, plus the figures for a reader."""
        data = self._raw()
        if self.rounds:  # derived, for people reading a result file; from_dict recomputes
            data.update(speedup=self.speedup, interval=list(self.interval),
                        baseline_median=self.baseline_median,
                        candidate_median=self.candidate_median)
        return data

    def _raw(self) -> dict:
        return {
            "format": FORMAT,
            "baseline_samples": list(self.baseline_samples),
            "candidate_samples": list(self.candidate_samples),
            "cases": [case.as_dict() for case in self.cases],
            "repeats": list(self.repeats), "warmup_rounds": self.warmup_rounds,
            "raced": self.raced, "stopped": self.stopped, "basis": self.basis,
            "scaled_by": self.scaled_by, "timed_on": self.timed_on, "layout": self.layout,
            "dropped": self.dropped, "taken": self.taken, "cpu_timed": self.cpu_timed,
            "clock": self.clock,
            "counters": self.counters,
            "cycles": [list(pair) for pair in self.cycles],
            "instructions": [list(pair) for pair in self.instructions],
            "rounds": self.rounds,
            **({"device": self.device.as_dict()} if self.device is not None else {}),
            **({"by_set": [list(four) for four in self.by_set]} if self.by_set else {}),
            "last_set": self.last_set,
        }

    @classmethod
    def from_dict(cls, data: object, weights: Sequence[float] | None = None) -> Timing:
        """The timing ``data`` describes, checked: samples positive and finite, one case per
        timed case (carrying the weight it was sent, when ``weights`` are given), names
        from their closed sets. Accepts the shape stored before this type existed (a
        ``reference`` key meant "scaled from the best so far"). MalformedTiming if not."""
        try:
            if not isinstance(data, Mapping):
                raise TypeError("not a mapping")
            older = "format" not in data
            cases = tuple(_case(case, index, data) for index, case in enumerate(data["cases"]))
            basis = ("best_so_far" if "reference" in data else "baseline") if older \
                else str(data["basis"])
            scaled_by = float(data["reference"]["speedup"]) if older and "reference" in data \
                else float(data.get("scaled_by", 1.0))
            timing = cls(
                baseline_samples=_samples(data["baseline_samples"]),
                candidate_samples=_samples(data["candidate_samples"]),
                cases=cases, repeats=tuple(int(x) for x in data["repeats"]),
                warmup_rounds=int(data.get("warmup_rounds", 0)),
                raced=bool(data.get("raced", False)), stopped=str(data.get("stopped", "")),
                basis=basis, scaled_by=scaled_by, timed_on=str(data.get("timed_on", "")),
                layout=str(data.get("layout", "")),
                dropped=int(data.get("dropped", 0)), taken=int(data.get("taken", 0)),
                cpu_timed=int(data.get("cpu_timed", 0)),
                clock=str(data.get("clock", "thread")), counters=str(data.get("counters", "")),
                cycles=_pairs(data.get("cycles", ())),
                instructions=_pairs(data.get("instructions", ())),
                device=DeviceTiming.from_dict(data.get("device")),
                by_set=_fours(data.get("by_set", ())),
                last_set=int(data.get("last_set", 0)))
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise MalformedTiming(f"malformed timing figures: {exc}") from None
        problem = timing._problem(weights)
        if problem:
            raise MalformedTiming(problem)
        return timing

    def _problem(self, weights: Sequence[float] | None) -> str:
        if self.last_set not in (0, 1):
            return "no such buffer set"
        if self.stopped not in STOPS:
            return f"unknown reason to stop timing {self.stopped!r}"
        if self.basis not in get_args(Basis) or self.clock not in get_args(Clock) \
                or self.timed_on not in get_args(TimedOn):
            return "unknown basis, clock or timed inputs"
        if len(self.baseline_samples) != len(self.candidate_samples):
            return "unpaired samples"
        if not self.baseline_samples and self.stopped != "too_busy":
            return "no rounds"
        if any(len(counted) not in (0, self.rounds) for counted in (self.cycles,
                                                                     self.instructions)):
            return "hardware counts do not match the rounds"
        if len(self.repeats) != len(self.cases) or any(r < 1 for r in self.repeats):
            return "launches per sample do not match the timed cases"
        if weights is not None and [c.weight for c in self.cases] != [float(w) for w in weights]:
            return "per-case figures do not match the timed cases"
        if any(len(c.baseline_samples) != self.rounds or len(c.candidate_samples) != self.rounds
               for c in self.cases):
            return "per-case samples do not match the rounds"
        if any(len(sets) not in (0, self.rounds) for sets in
               (self.by_set, *(c.by_set for c in self.cases))):
            return "per-set samples do not match the rounds"
        if not 0 <= self.dropped <= max(self.taken, self.dropped) or self.taken < 0 \
                or not 0 <= self.cpu_timed <= self.taken:
            return "impossible counts of dropped samples"
        values = [*self.baseline_samples, *self.candidate_samples, self.scaled_by]
        values += [x for c in self.cases for x in (*c.baseline_samples, *c.candidate_samples)]
        values += [x for sets in (self.by_set, *(c.by_set for c in self.cases))
                   for four in sets for x in four]
        if not all(math.isfinite(v) and v > 0 for v in values):
            return "impossible timing figures (not positive and finite)"
        return ""

    @classmethod
    def from_samples(cls, baseline_samples: Sequence[float],
                     candidate_samples: Sequence[float], **fields: object) -> Timing:
        """A one-case timing from its rounds' samples (what a stand-in measurement needs)."""
        base, cand = tuple(map(float, baseline_samples)), tuple(map(float, candidate_samples))
        fields.setdefault("cases", (CaseTiming(1.0, base, cand),))
        fields.setdefault("repeats", (1,))
        return cls(base, cand, **fields)


def _samples(values: object) -> tuple[float, ...]:
    return tuple(float(x) for x in values)  # type: ignore[union-attr]


def _pairs(values: object) -> tuple[tuple[float, float], ...]:
    pairs = tuple((float(a), float(b)) for a, b in values)  # type: ignore[union-attr]
    if not all(math.isfinite(x) and x >= 0 for pair in pairs for x in pair):
        raise ValueError("hardware counts that are not finite and non-negative")
    return pairs


def _fours(values: object) -> tuple[tuple[float, float, float, float], ...]:
    fours = tuple(tuple(float(x) for x in four) for four in values)  # type: ignore[union-attr]
    if any(len(four) != 4 for four in fours):
        raise ValueError("per-set samples that are not four per round")
    return fours  # type: ignore[return-value]


def _scaled_sets(by_set: tuple, factor: float) -> tuple:
    """Per-set samples with each baseline time (set 0's and set 1's) times ``factor``."""
    return tuple((b0 * factor, c0, b1 * factor, c1) for b0, c0, b1, c1 in by_set)


def _case(case: Mapping, index: int, data: Mapping) -> CaseTiming:
    workload = case.get("workload")
    if workload is None and "format" not in data and data.get("workloads"):
        workload = data["workloads"][index]  # the older shape kept workloads beside cases
    return CaseTiming(
        float(case["weight"]), _samples(case["baseline_samples"]),
        _samples(case["candidate_samples"]),
        None if workload is None else Workload(str(workload["key"]), str(workload["origin"]),
                                               str(workload["shape"])),
        _fours(case.get("by_set", ())))
