"""Whether a speedup may be claimed, and so locked or failed on.

Two measurements decide, never the search's figures:

- **the noise band**, learned per kernel on this machine before the search by timing the
  baseline against itself (an A/A run): how far from 1 a ratio of two identical builds
  reaches here, at least ``MIN_EFFECT``;
- **a confirmation in a fresh worker process**, one that took no part in the search (no
  candidate ran in it, and none of its figures chose the winner): the winner is timed A/B
  against the baseline there; where that interval lies above the band, it is **timed
  again in a second fresh process**, and the claim's interval covers both processes'
  intervals, widened on each side by the gap between their two estimates (see
  :func:`reproduced`). It is claimed only when that whole interval lies above the band.
  The same rule, mirrored, fails ``--r3-check`` on a regression.
- **the slow-path probes** (``replay/probes.py``), timed in that same confirmation: the
  largest timed input with its written buffers misaligned, with zeros in its float inputs,
  and with an input and an output as rows of one array. A winner timed slower than the
  original on any of them, beyond the band and by ``PROBE_MARGIN`` at least, and again in
  a second fresh process, is not claimed: it would be fast on the recorded values and
  layouts and slower than the original on other data in production. The next best
  candidate is then confirmed the same way (:func:`confirm_ranked`), so one slow path in
  the winner does not cost the kernel a claim its runner-up earns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..replay.measurement import Timing
from ..replay.probes import PROBE_MARGIN, ProbeTiming
from ..replay.protocol import Candidate, Result
from ..replay.statistics import Verdict, band_from, verdict

# The smallest difference claimed, whatever the A/A run showed (asv asks for a minimum
# effect as well as significance): a variant 2% faster is not worth a lock entry, and
# buffer placement alone moves timings that much between processes.
MIN_EFFECT = 0.03
# where a claim is measured (reports, r3.lock; a report says "confirmed in a ...")
CONFIRMED_IN = "fresh worker process, and timed again in another"


def reproduced(first: Timing, second: Timing) -> tuple[float, tuple[float, float]]:
    """The speedup and interval a claim states from two timings in two fresh processes:
    the geometric midpoint of their estimates, and an interval covering both intervals,
    widened on each side by the ratio of the two estimates.

    One timing's interval describes that timing only: its rounds share a process (buffer
    addresses, page placement) and a few seconds of the machine's state (frequency, the
    neighbours' use of memory), and a matmul claimed at 2.75x [2.57-2.85] read 2.56x,
    2.91x and 2.86x in three later processes. Over 16 timings of one matmul variant in 8
    processes (load 11-14), one timing's interval held 62% of the others' estimates, the
    two intervals' hull 84%, and the hull widened by the gap 94% (2.4%, 3.8% and 6.0%
    wide)."""
    low_estimate, high_estimate = sorted((first.speedup, second.speedup))
    gap = high_estimate / low_estimate
    low = min(first.interval[0], second.interval[0]) / gap
    high = max(first.interval[1], second.interval[1]) * gap
    return math.sqrt(low_estimate * high_estimate), (low, high)


@dataclass(frozen=True)
class Band:
    """The band of no difference, ``1 / (1 + width)`` to ``1 + width``, and the A/A run that
    gave it (when it failed or was never run, ``width`` is ``MIN_EFFECT``)."""

    width: float
    calibration: Result | None = None

    @property
    def low(self) -> float:
        return 1.0 / (1.0 + self.width)

    @property
    def high(self) -> float:
        return 1.0 + self.width

    def describe(self) -> str:
        return f"{self.low:.3f}-{self.high:.3f}"

    def said(self) -> str:
        """The band and the A/A measurement behind it, for the terminal."""
        timing = None if self.calibration is None else self.calibration.timing
        if timing is None:
            why = "" if self.calibration is None else f": {self.calibration.reason()}"
            return (f"noise band {self.describe()} (the baseline could not be timed against "
                    f"itself{why}; the minimum effect)")
        low, high = timing.interval
        return (f"noise band {self.describe()} (the baseline timed against itself: "
                f"{timing.speedup:.3f}x, 95% interval {low:.3f}-{high:.3f}, "
                f"{100 * timing.dropped_share:.0f}% of samples dropped)")


def calibrate(server, kernel: str) -> Band:
    """The kernel's noise band: the baseline timed against itself, in full, on ``server``.

    Its width is how far that A/A speedup lands from 1 (at least ``MIN_EFFECT``): the size
    of a phantom speedup this machine produces now, for this kernel, from two identical
    builds (buffer placement, code alignment, a busy neighbour). Not the A/A interval: a
    claim's own interval already carries its measurement's uncertainty, and counting it
    twice would let a few disturbed rounds of the A/A run veto every claim."""
    result = server.evaluate(Candidate(label=f"{kernel} A/A (the baseline against itself)"))
    if not result.ok or result.timing is None:
        return Band(MIN_EFFECT, result)  # said() gives the reason
    estimate = result.timing.speedup
    return Band(band_from((estimate, estimate), MIN_EFFECT), result)


@dataclass(frozen=True)
class Claim:
    """A confirmation in a fresh process, and where it read faster, the winner timed again
    in a second one (``again``: A/B on the timed cases, and on the probes the first read
    slower on); whether they bear the claim, and the figures it states."""

    result: Result
    band: Band
    again: Result | None = None

    @property
    def measured_again(self) -> bool:
        """Whether the second process gave a timing (None: not asked, or it failed)."""
        return self.again is not None and self.again.ok and self.again.timing is not None

    @property
    def _figures(self) -> tuple[float | None, tuple[float, float] | None]:
        """The claimed speedup and interval: both processes' (see :func:`reproduced`)
        where the second gave a timing, else the first timing's (None without one)."""
        first = self.result.timing
        if first is None:
            return None, None
        if not self.measured_again:
            return first.speedup, first.interval
        return reproduced(first, self.again.timing)

    @property
    def speedup(self) -> float | None:
        return self._figures[0]

    @property
    def interval(self) -> tuple[float, float] | None:
        return self._figures[1]

    @property
    def verdict(self) -> Verdict | str:
        """faster, slower or within (the band), or the status of a failed confirmation (the
        second's, where it failed: a claim not measured again is not made)."""
        if not self.result.ok or self.result.timing is None:
            return self.result.status
        if self.again is not None and not self.measured_again:
            return self.again.status
        return verdict(self.interval, self.band.width)

    @property
    def first_verdict(self) -> Verdict | str:
        """The first process's verdict alone: whether a second is worth taking."""
        if not self.result.ok or self.result.timing is None:
            return self.result.status
        return self.result.timing.verdict(self.band.width)

    def confirmations(self) -> list[dict]:
        """Each process's figures (speedup, 95% interval, rounds, share dropped), for the
        report."""
        timings = [self.result.timing] + ([self.again.timing] if self.measured_again else [])
        return [{"speedup": t.speedup, "interval": list(t.interval), "rounds": t.rounds,
                 "dropped_share": t.dropped_share} for t in timings if t is not None]

    def _each(self) -> str:
        """Each process's speedup and interval: ``2.91x [2.88-2.92] and 2.56x [...]``."""
        return " and ".join(f"{c['speedup']:.2f}x [{c['interval'][0]:.2f}-"
                            f"{c['interval'][1]:.2f}]" for c in self.confirmations())

    def reproduced_said(self) -> str:
        """The row's note on the two processes behind a claim ("" without a second)."""
        if not self.measured_again:
            return ""
        return (f"timed in 2 fresh worker processes, {self._each()}: the claimed interval "
                "covers both, widened on each side by the gap between them")

    @property
    def probe_band(self) -> float:
        """How much slower than the original a probe must read to count: the band, and
        ``PROBE_MARGIN`` at least."""
        return max(self.band.width, PROBE_MARGIN)

    def _slower(self, result: Result) -> list[ProbeTiming]:
        slower = [p for p in result.probes if p.slower(self.probe_band)]
        return sorted(slower, key=lambda p: p.timing.speedup)

    @property
    def slower_probes(self) -> list[ProbeTiming]:
        """The slow-path probes the winner was timed slower on than the original (slowest
        first): beyond the probe band in the confirmation, and again in the second one
        where it was made (a second that failed clears none)."""
        first = self._slower(self.result)
        if self.again is None or not self.again.ok:
            return first
        again = {p.label for p in self._slower(self.again)}
        return [p for p in first if p.label in again]

    def _again(self, label: str) -> str:
        """The second confirmation's figure on probe ``label`` ("" if none)."""
        found = [p for p in (self.again.probes if self.again else ()) if p.label == label]
        return f"; measured again in a fresh worker process: " \
            f"{found[0].timing.speedup:.2f}x" if found else ""

    @property
    def holds(self) -> bool:
        return self.verdict == "faster" and not self.slower_probes

    @property
    def refused_by_probe(self) -> bool:
        """Faster on the timed cases, refused only for a slow-path probe: the next best
        candidate may still hold (see :func:`confirm_ranked`)."""
        return self.verdict == "faster" and bool(self.slower_probes)

    def probes_said(self) -> str:
        """The row's note on the slow-path probes of a claim that holds ("" without any)."""
        probes = self.result.probes
        if not probes:
            return ""
        worst = min(probes, key=lambda p: p.timing.speedup)
        return (f"timed on {len(probes)} slow-path probe(s) too: none slower than the "
                f"original beyond the noise band (lowest {worst.timing.speedup:.2f}x, on "
                f"{worst.label})")

    def why_not(self, estimate: float | None) -> str:
        """The row's note when the claim did not reproduce."""
        searched = f"estimated {estimate:.2f}x in the search, " if estimate else ""
        if not self.result.ok or self.result.timing is None:
            return (f"not locked: the winner ({searched}then) failed its confirmation in a "
                    f"fresh worker process: {self.result.reason()}")
        timing = self.result.timing
        if self.again is not None and not self.measured_again:
            return (f"not locked: the winner ({searched}confirmed {timing.speedup:.2f}x) "
                    f"could not be timed again in a second fresh worker process: "
                    f"{self.again.reason()}")
        low, high = self.interval
        if self.verdict == "faster" and self.slower_probes:
            worst = self.slower_probes[0]
            others = len(self.slower_probes) - 1
            return (f"not locked: the winner ({searched}confirmed {self.speedup:.2f}x) is "
                    f"{worst.describe()}{self._again(worst.label)}, beyond the noise band "
                    f"{self.band.describe()} and the {PROBE_MARGIN:.0%} margin"
                    + (f"; slower on {others} more slow-path probe(s)" if others else ""))
        where = f"2 fresh worker processes ({self._each()})" if self.measured_again \
            else "a fresh worker process"
        return (f"not locked: the winner did not reproduce in {where} "
                f"({searched}confirmed {self.speedup:.2f}x, interval {low:.2f}-{high:.2f}, "
                f"not wholly above the noise band {self.band.describe()})")


def confirm(pool, candidate: Candidate, band: Band) -> Claim:
    """``candidate`` timed A/B against the baseline, verified in full, in a new worker
    process (``pool.fresh()``), on the timed cases and the slow-path probes. Where it reads
    faster there, it is timed again in another new process: A/B on the timed cases (the
    claim covers both, see :func:`reproduced`), and on the probes it read slower on, if
    any, before they refuse it (one timing of a large case on a busy machine can read slow
    by chance). What the first process verified needs no second verification."""
    with pool.fresh() as server:
        claim = Claim(server.evaluate(candidate.unraced()), band)
    if claim.first_verdict == "faster":
        slower = {probe.label for probe in claim.slower_probes}
        with pool.fresh() as server:
            claim = Claim(claim.result, band, server.measure_again(candidate, slower))
    return claim


@dataclass(frozen=True)
class Ranked:
    """What :func:`confirm_ranked` found: the candidate whose claim decides the row (the
    first that holds, else the last one tried) with that claim, and the better ones a
    slow-path probe refused before it, best first."""

    candidate: Candidate
    claim: Claim
    refused: tuple[tuple[Candidate, Claim], ...] = ()


def confirm_ranked(pool, ranked: list[Candidate], band: Band, tries: int = 2) -> Ranked:
    """The best of ``ranked`` (best first, non-empty) confirmed as :func:`confirm` does;
    where a slow-path probe refuses it, the next distinct candidate is confirmed in turn,
    up to ``tries`` in all. A claim that fails otherwise (it does not reproduce, or its
    confirmation fails) ends the search: the candidates after it were measured slower
    still, in the same search."""
    refused: list[tuple[Candidate, Claim]] = []
    seen: set[str] = set()
    distinct = [c for c in ranked if not (c.key() in seen or seen.add(c.key()))]
    for number, candidate in enumerate(distinct[:max(1, tries)]):
        claim = confirm(pool, candidate, band)
        last = number + 1 >= min(len(distinct), max(1, tries))
        if claim.holds or not claim.refused_by_probe or last:
            return Ranked(candidate, claim, tuple(refused))
        refused.append((candidate, claim))
    raise ValueError("confirm_ranked needs at least one candidate")
