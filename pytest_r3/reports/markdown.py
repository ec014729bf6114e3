"""``report.md``: a table for a pull-request comment."""

from __future__ import annotations

from pathlib import Path

from ..outputs import write_text_atomic
from .model import KernelReport, human_seconds, with_buckets

_us = human_seconds


def render(rows: list[KernelReport], kind: str = "tuning") -> str:
    lines = [
        f"## pytest-r3 {kind} report",
        "",
        "| kernel | target | status | baseline | tuned | speedup [95% interval] | evaluations "
        "| changes |",
        "|---|---|---|---:|---:|---:|---:|---|",
    ]
    for row in with_buckets(rows):
        flag = " (review)" if row.review else ""
        if row.why_no_figures():  # why there are no timings, where they would be
            flag += f" ({row.why_no_figures()})"
        lines.append(
            f"| {_name(row)} | {row.target} | {row.status}{flag} | {_us(row.baseline_seconds)} "
            f"| {_us(row.tuned_seconds)} | {row.describe_interval()} | {row.evaluations} "
            f"({row.new_evaluations} new) | {row.describe_changes()} |")
    confirmations = [(row, row.describe_confirmation()) for row in with_buckets(rows)]
    if any(text for _, text in confirmations):
        lines += ["", "What each figure rests on:", ""] + [
            f"- {_name(row)}: {text}" for row, text in confirmations if text]
    specialised = [row for row in rows if row.buckets]
    if specialised:
        lines += ["", "Shape-specialised kernels (specialize=): each bucket row is the variant "
                  "plain calls in that bucket run; calls in a bucket without a row run the "
                  "nearest tuned bucket's variant."]
    for row in with_buckets(rows):
        if row.workloads:
            lines += ["", f"### Workloads of `{row.label}`", "",
                      "| workload | shape | weight | baseline | tuned | speedup |",
                      "|---|---|---:|---:|---:|---:|"]
            lines += [f"| {w['origin']} | `{w['shape']}` | {w['weight']:g} | "
                      f"{_us(w['baseline_median'])} | {_us(w['candidate_median'])} | "
                      f"{w['speedup']:.2f}x |" for w in row.workloads]
            lines += ["", "Baseline and tuned of the kernel row are the weighted total "
                      "time over these workloads (weight: launches each stands for)."]
        if row.evolution:
            lines += ["", f"### Source evolution of `{row.kernel}`", "",
                      "| generation | best speedup | model wait | evaluation | wall |",
                      "|---:|---:|---:|---:|---:|"]
            lines += [f"| {g['index']} | {g['best_speedup']:.2f}x | "
                      f"{g['model_wait_seconds']:.1f} s | {g['evaluation_seconds']:.1f} s | "
                      f"{g['wall_seconds']:.1f} s |" for g in row.evolution]
            if row.archive:
                cells = ", ".join(f"island {c['island']} cell {tuple(c['cell'])}: "
                                  f"{c['speedup']:.2f}x" for c in row.archive)
                lines += ["", f"Archive: {cells}"]
    notes = [(row.kernel, note) for row in rows for note in row.other_notes()]
    if notes:
        lines += ["", "Notes:", ""] + [f"- `{kernel}`: {note}" for kernel, note in notes]
    test_sized = [row.kernel for row in rows if row.timed_on == "test inputs"]
    if test_sized:
        lines += ["", f"Timed on the oracle tests' inputs (no workload recorded): "
                  f"{', '.join(f'`{k}`' for k in test_sized)}; add a benchmark test with "
                  "production-sized inputs to time what users run."]
    lines += ["", "A speedup is a claim confirmed in a fresh worker process that took no part "
              "in the search: the median of baseline/tuned ratios measured interleaved, with "
              "its 95% interval, claimed only when the whole interval lies above the kernel's "
              "noise band (the baseline timed against itself on this machine). Samples during "
              "which the worker lost its core are dropped, and their share is given. Search "
              "estimates rank candidates and are never claimed."]
    return "\n".join(lines) + "\n"


def write(path: Path, rows: list[KernelReport], kind: str = "tuning") -> Path:
    return write_text_atomic(path, render(rows, kind))


def _name(row: KernelReport) -> str:
    return f"`{row.kernel}` bucket `{row.bucket}`" if row.bucket else f"`{row.kernel}`"
