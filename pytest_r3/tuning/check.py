"""Checking a locked variant before a merge: still fits its source, still verifies, still
passes the oracle tests, and is not clearly slower than the baseline (measured interleaved,
as a ratio)."""

from __future__ import annotations

from ..kernel.lock import entry_status, variant_from_entry
from ..replay.protocol import Candidate
from ..reports import KernelReport
from .context import Tuning


def check_kernel(kernel, target: str, entry: dict, tuning: Tuning,
                 exercised: bool) -> KernelReport:
    """The row for one lock entry; a failed check has a status starting with ``FAIL:`` and
    says why. Any error becomes such a row, never an exception."""
    row = KernelReport(kernel.name, target, "ok", changes={
        "macros": entry.get("macros", {}), "pipeline": entry.get("pipeline", {})})
    row.notes.append(f"locked speedup {entry.get('speedup', '?')}x when tuned")
    try:
        return _check(kernel, entry, tuning, exercised, row)
    except Exception as exc:  # a check that cannot run has failed, with its reason
        return _fail(row, "error", f"the check could not run: {type(exc).__name__}: {exc}")


def _fail(row: KernelReport, status: str, why: str) -> KernelReport:
    row.status = f"FAIL: {status}"
    row.notes.append(why)
    return row


def _check(kernel, entry: dict, tuning: Tuning, exercised: bool,
           row: KernelReport) -> KernelReport:
    status, why = entry_status(kernel, entry)
    if status == "patch pending":
        row.status = "patch not applied"
        row.notes.append(f"the locked variant is a source rewrite: review and apply "
                         f".r3/patches/{kernel.name}.patch (git apply), then check "
                         "again; until then plain runs use the baseline")
        return row
    if status == "stale":
        return _fail(row, "stale", f"the lock {why}: run pytest --r3-tune")
    if not exercised:
        row.status = "not exercised"
        row.notes.append("no oracle test launched it in this session; not checked")
        return row
    try:
        variant = variant_from_entry(kernel, entry)
    except Exception as exc:
        return _fail(row, "invalid entry", f"the lock entry no longer fits the declaration: "
                     f"{exc}")
    with tuning.pool(kernel, count=1,
                     timing_rounds=tuning.settings.check_timing_rounds) as pool:
        result = pool.servers[0].evaluate(Candidate(macros=entry.get("macros", {}),
                                                    pipeline=entry.get("pipeline", {}),
                                                    label="locked"))
    if not result.ok:
        return _fail(row, "verification", f"the locked variant fails replay: {result.status}: "
                     + "; ".join(result.diagnostics))
    row.measured(result.timing)
    failures = tuning.run_oracles(kernel, variant, None)
    if failures:
        return _fail(row, "oracle tests", "; ".join(failures))
    threshold = tuning.settings.check_threshold
    if row.speedup < 1 - threshold and row.speedup_q3 < 1:  # slower, clearly
        return _fail(row, "slower", f"the locked variant is {1 / row.speedup:.2f}x slower "
                     f"than the baseline (threshold {threshold:.0%}), measured interleaved")
    return row
