"""Whether a speedup may be claimed, and so locked or failed on.

Two measurements decide, never the search's figures:

- **the noise band**, learned per kernel on this machine before the search by timing the
  baseline against itself (an A/A run): how far from 1 a ratio of two identical builds
  reaches here, at least ``MIN_EFFECT``;
- **a confirmation in a fresh worker process**, one that took no part in the search (no
  candidate ran in it, and none of its figures chose the winner): the winner is timed A/B
  against the baseline there, and it is claimed only when the whole confirmed interval
  lies above the band. The same rule, mirrored, fails ``--r3-check`` on a regression.
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

from dataclasses import dataclass

from ..replay.probes import PROBE_MARGIN, ProbeTiming
from ..replay.protocol import Candidate, Result
from ..replay.statistics import band_from

# The smallest difference claimed, whatever the A/A run showed (asv asks for a minimum
# effect as well as significance): a variant 2% faster is not worth a lock entry, and
# buffer placement alone moves timings that much between processes.
MIN_EFFECT = 0.03
CONFIRMED_IN = "fresh worker process"  # where a claim is measured (reports, r3.lock)


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
    """A confirmation in a fresh process: its result and whether it bears the claim."""

    result: Result
    band: Band
    again: Result | None = None  # the slower probes timed again, in a second new process

    @property
    def verdict(self) -> str:
        """faster, slower or within (the band), or the status of a failed confirmation."""
        if not self.result.ok or self.result.timing is None:
            return self.result.status
        return self.result.timing.verdict(self.band.width)

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
        return f"; measured again in a {CONFIRMED_IN}: {found[0].timing.speedup:.2f}x" \
            if found else ""

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
        low, high = timing.interval
        if self.verdict == "faster" and self.slower_probes:
            worst = self.slower_probes[0]
            others = len(self.slower_probes) - 1
            return (f"not locked: the winner ({searched}confirmed {timing.speedup:.2f}x) is "
                    f"{worst.describe()}{self._again(worst.label)}, beyond the noise band "
                    f"{self.band.describe()} and the {PROBE_MARGIN:.0%} margin"
                    + (f"; slower on {others} more slow-path probe(s)" if others else ""))
        return (f"not locked: the winner did not reproduce in a {CONFIRMED_IN} "
                f"({searched}confirmed {timing.speedup:.2f}x, interval {low:.2f}-{high:.2f}, "
                f"not wholly above the noise band {self.band.describe()})")


def confirm(pool, candidate: Candidate, band: Band) -> Claim:
    """``candidate`` timed A/B against the baseline, verified in full, in a new worker
    process (``pool.fresh()``), on the timed cases and the slow-path probes. Where it reads
    slower on a probe, it is timed once more on those probes in another new process before
    they refuse it: one timing of a large case on a busy machine can read slow by chance
    (what the first process verified and timed on the recorded cases needs no second)."""
    with pool.fresh() as server:
        claim = Claim(server.evaluate(candidate.unraced()), band)
    if claim.refused_by_probe:
        slower = {probe.label for probe in claim.slower_probes}
        with pool.fresh() as server:
            claim = Claim(claim.result, band, server.probes_again(candidate, slower))
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
