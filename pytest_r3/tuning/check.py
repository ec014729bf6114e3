"""Checking a locked variant before a merge: still fits its source, still verifies, still
passes the oracle tests, and is not clearly slower than the baseline (measured interleaved,
as a ratio) on the weighted total, nor on any workload.

The threshold is a percent (slower by more than it, and clearly: the whole 95% interval of
the speedup below both the threshold and the kernel's noise band, learned by timing the
baseline against itself first) or pytest-benchmark's ``--benchmark-compare-fail`` checks
(``median:5%``), which compare the locked variant's per-round times with the baseline's,
as pytest-benchmark compares a run with a saved one. A variant found slower is measured
again, in a fresh worker process, before the build fails; both measurements are reported."""

from __future__ import annotations

from collections.abc import Sequence

from ..kernel.lock import entry_status, variant_from_entry
from ..replay.measurement import Timing
from ..replay.protocol import Candidate
from ..replay.statistics import median_ratio, ratio_interval
from ..reports import KernelReport, Status
from .claims import Band, calibrate
from .context import Tuning
from .rows import measured


def check_kernel(kernel, target: str, entry: dict, tuning: Tuning,
                 exercised: bool) -> KernelReport:
    """The row for one lock entry; a failed check has the status ``FAIL`` (with what
    failed) and says why. Any error becomes such a row, never an exception."""
    row = KernelReport(kernel.name, target, Status("ok"), changes={
        "macros": entry.get("macros", {}), "pipeline": entry.get("pipeline", {})})
    row.bucket = entry.get("bucket", "")  # one bucket of a specialised kernel
    row.notes.append(f"locked speedup {entry.get('speedup', '?')}x when tuned")
    try:
        return _check(kernel, entry, tuning, exercised, row)
    except Exception as exc:  # a check that cannot run has failed, with its reason
        return _fail(row, "error", f"the check could not run: {type(exc).__name__}: {exc}")


def _fail(row: KernelReport, what: str, why: str) -> KernelReport:
    row.status = Status("FAIL", what)
    row.notes.append(why)
    return row


def _check(kernel, entry: dict, tuning: Tuning, exercised: bool,
           row: KernelReport) -> KernelReport:
    status, why = entry_status(kernel, entry)
    if status == "patch pending":
        row.status = Status("patch not applied")
        row.notes.append(f"the locked variant is a source rewrite: review and apply "
                         f".r3/patches/{kernel.name}.patch (git apply), then check "
                         "again; until then plain runs use the baseline")
        return row
    if status == "stale":
        return _fail(row, "stale", f"the lock {why}: run pytest --r3-tune")
    if not exercised:
        row.status = Status("not exercised")
        row.notes.append("no oracle test launched it in this session; not checked")
        return row
    try:
        variant = variant_from_entry(kernel, entry)
    except Exception as exc:
        return _fail(row, "invalid entry", f"the lock entry no longer fits the declaration: "
                     f"{exc}")
    timed = ()
    if entry.get("bucket") and kernel.specialize is not None:  # timed on its bucket's sizes
        timed = tuple(tuning.buckets(kernel).get(entry["bucket"], ()))
    locked = Candidate(macros=entry.get("macros", {}), pipeline=entry.get("pipeline", {}),
                       label="locked")
    settings = tuning.settings
    with tuning.pool(kernel, count=1, timing_rounds=settings.check_timing_rounds,
                     timed_keys=timed) as pool:
        band = calibrate(pool.servers[0], kernel.name)
        results = [pool.servers[0].evaluate(locked)]
        if _timed(results[0]) and _regressions(results[0].timing, settings, band):
            with pool.fresh() as server:  # measured again, elsewhere, before it fails a build
                results.append(server.evaluate(locked))
    row.noise_band = [band.low, band.high]
    for result in results:
        if result.status == "suspect":  # a GPU timing faster than light: no verdict
            row.status = Status("suspect")
            row.notes.append(f"no speed verdict: {result.reason()}")
            return row
        if not result.ok:
            return _fail(row, "verification", f"the locked variant fails replay: "
                         f"{result.status}: " + "; ".join(result.diagnostics))
        if result.timing is None:
            return _fail(row, "error", "the locked variant was verified but not timed: "
                         + "; ".join(result.diagnostics))
    measured(row, results[-1].timing)
    failures = tuning.run_oracles(kernel, variant, None)
    if failures:
        return _fail(row, "oracle tests", "; ".join(failures))
    if len(results) == 1:
        return row
    first, again = (_describe(result.timing) for result in results)
    slower = _regressions(results[-1].timing, settings, band)
    if slower:
        return _fail(row, "slower", "; ".join(slower) + f" (measured twice: {first}; then, in "
                     f"a fresh worker process, {again})")
    row.notes.append(f"a first measurement was slower ({first}); measured again in a fresh "
                     f"worker process it was not ({again}): not failed")
    return row


def _timed(result) -> bool:
    return result.ok and result.timing is not None


def _describe(timing: Timing) -> str:
    low, high = timing.interval
    return (f"{timing.speedup:.2f}x, 95% interval {low:.2f}-{high:.2f}, "
            f"{100 * timing.dropped_share:.0f}% of samples dropped")


def _regressions(timing: Timing, settings, band: Band) -> list[str]:
    """Why the locked variant counts as slower than the baseline, on the weighted total
    and on each workload (empty: it does not)."""
    return [problem for name, base, cand in _measured(timing)
            if (problem := _slower(name, base, cand, settings, band))]


def _measured(timing: Timing) -> list[tuple[str, Sequence[float], Sequence[float]]]:
    """What the threshold applies to: the weighted total, then each workload (name,
    baseline samples, variant samples)."""
    whole = ("the weighted total of its workloads" if timing.workloads
             else "its timed recordings", timing.baseline_samples, timing.candidate_samples)
    return [whole] + [(f"workload {case.workload.origin} [{case.workload.shape}]",
                       case.baseline_samples, case.candidate_samples)
                      for case in timing.workloads if case.workload is not None]


def _slower(name: str, base: Sequence[float], cand: Sequence[float], settings,
            band: Band) -> str | None:
    """Why the locked variant counts as slower than the baseline on ``name``, or None:
    pytest-benchmark's checks when given; else the whole 95% interval of the speedup lies
    below both the noise band and the threshold (the rule a claim meets, mirrored)."""
    if settings.check_fail:
        from pytest_benchmark.stats import Stats

        stats = []
        for samples in (base, cand):
            stat = Stats()
            for sample in samples:
                stat.update(sample)
            stats.append(stat.as_dict())
        failed = [problem for check in settings.check_fail
                  if (problem := check.fails(stats[1], stats[0]))]
        return (f"{name}: the locked variant against the baseline: {'; '.join(failed)}"
                if failed else None)
    speedup = median_ratio(base, cand)
    low, high = ratio_interval(base, cand)
    threshold = settings.check_threshold
    limit = min(band.low, 1 - threshold)
    if high < limit:  # slower, clearly
        return (f"{name}: the locked variant is {1 / speedup:.2f}x slower than the baseline "
                f"(95% interval {low:.2f}-{high:.2f}x, wholly below the noise band "
                f"{band.describe()} and the threshold {threshold:.0%}), measured interleaved")
    return None
