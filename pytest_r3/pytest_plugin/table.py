"""The terminal table of ``--r3-tune`` and ``--r3-check``: at most 100 columns, one line
per kernel, its details (settings as a person writes them, failure causes, buckets,
workloads, notes) wrapped and indented below it; everything else is in the reports."""

from __future__ import annotations

import textwrap

from ..reports import KernelReport
from ..reports.model import human_seconds

TABLE_WIDTH = 100


def table_lines(rows: list[KernelReport]) -> list[tuple[str, bool]]:
    """The terminal table, at most TABLE_WIDTH columns: one line per kernel, then its
    settings, failure causes, buckets, workloads and notes, wrapped and indented; (line,
    red) pairs."""
    if not rows:
        return []
    width = min(max(6, *(len(row.label) for row in rows)), 22)
    lines = [(f"{'kernel':<{width}} {'status':<24} {'baseline':>9} {'tuned':>9} "
              f"{'speedup [95%]':>19} {'evals (new)':>12}", False)]

    def wrapped(text: str, indent: str = "    ", red: bool = False) -> None:
        lines.extend((line, red) for line in textwrap.wrap(
            text, TABLE_WIDTH, initial_indent=indent, subsequent_indent=indent + "  ",
            break_on_hyphens=False, break_long_words=False))

    said: dict[str, str] = {}  # a reason given already: the row that gave it
    for row in rows:
        red = row.status.failed
        status = str(row.status)
        label = row.label if len(row.label) <= width else row.label[:width - 1] + "~"
        head = f"{label:<{width}} {status[:24]:<24} "
        why = row.why_no_figures()
        if why in said:  # the reason of several GPU kernels in emulation, said once
            why = f"as {said[why]}"
        elif why:
            said[why] = row.label
        if why:  # no timings: why not, where the figures would be
            lines.extend((line, red) for line in textwrap.wrap(
                why, TABLE_WIDTH, initial_indent=head, subsequent_indent=" " * len(head),
                break_on_hyphens=False, break_long_words=False))
        else:
            lines.append((f"{head}{human_seconds(row.baseline_seconds):>9} "
                          f"{human_seconds(row.tuned_seconds):>9} {_speedup(row):>19} "
                          f"{f'{row.evaluations} ({row.new_evaluations})':>12}", red))
        if len(row.label) > width or len(status) > 24:
            wrapped(f"{row.label}: {status}", red=red)
        if row.describe_confirmation():
            wrapped(row.describe_confirmation())
        if row.changes:
            wrapped(f"settings: {row.describe_changes()}")
        for sub in row.buckets:  # a specialised kernel: the variant of each bucket
            wrapped(f"bucket {sub.bucket}: {sub.status}, {human_seconds(sub.baseline_seconds)}"
                    f" -> {human_seconds(sub.tuned_seconds)}, {_speedup(sub)}, "
                    f"{sub.evaluations} evaluations, {sub.describe_changes()}",
                    red=sub.status.failed)
        for workload in row.workloads:
            wrapped(f"workload {workload['origin']} [{workload['shape']}] x"
                    f"{workload['weight']:g}: {human_seconds(workload['baseline_median'])} -> "
                    f"{human_seconds(workload['candidate_median'])}, "
                    f"{workload['speedup']:.2f}x")
        for note in row.other_notes():
            wrapped(note)
    return lines


def _speedup(row: KernelReport) -> str:
    """The confirmed speedup with its 95% interval (the search's figures never show here)."""
    return row.describe_interval()
