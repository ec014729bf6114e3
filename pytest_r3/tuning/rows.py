"""A report row's figures from a measurement: the one place a typed Timing becomes the
plain data the report writers (which sit below replay/ and never import it) show."""

from __future__ import annotations

from ..replay.measurement import Timing
from ..reports import KernelReport


def measured(row: KernelReport, timing: Timing) -> None:
    """Take the baseline and variant times, the speedup, its interval, the share of
    samples dropped and, on a GPU, the clocks and conditions from one interleaved
    measurement."""
    row.baseline_seconds = timing.baseline_median
    row.tuned_seconds = timing.candidate_median
    row.speedup = timing.speedup
    row.speedup_q1, row.speedup_q3 = timing.speedup_q1, timing.speedup_q3
    row.interval = list(timing.interval)
    row.dropped_share = timing.dropped_share
    row.baseline_samples = list(timing.baseline_samples)
    row.tuned_samples = list(timing.candidate_samples)
    row.timed_on = timing.timed_on
    row.workloads = [
        {"key": case.workload.key, "origin": case.workload.origin,
         "shape": case.workload.shape, "weight": case.weight,
         "baseline_median": case.baseline_median, "candidate_median": case.candidate_median,
         "speedup": case.speedup, "baseline_samples": list(case.baseline_samples),
         "candidate_samples": list(case.candidate_samples)}
        for case in timing.workloads if case.workload is not None]
    if timing.device is not None:
        row.gpu = {**timing.device.as_dict(), "described": timing.device.describe()}
