"""``report.html``: one self-contained page to look at, not read (inline SVG and CSS, no
script, no network).

The header says when, on which commit and machine (CPU model, load) the figures were
measured; a summary table and chart give each kernel's confirmed speedup with its
interval. Each kernel then gets every evaluation of its search plotted in order (ok, lost
race, failed; the finalists ringed), how the speedup depends on each setting (a slice per
setting, ranked by how much it moves the speedup), its failures by cause with an example,
and its workloads, with the achieved GFLOP/s and GB/s where the kernel declares its work
(``r3.kernel(work=...)``): the flops against a one-thread BLAS matmul, the bytes against
numpy moving as many bytes, both measured here."""

from __future__ import annotations

import html
import statistics
from pathlib import Path

from ..outputs import write_text_atomic
from . import svg
from .model import KernelReport, human_seconds, setting_value, with_buckets
from .run import RunInfo

CSS = """
body{font-family:system-ui,sans-serif;max-width:64em;margin:1.5em auto;padding:0 1em;
     color:#222;line-height:1.4}
header{border-bottom:2px solid #ddd;margin-bottom:1em}
header dl{display:grid;grid-template-columns:max-content auto;gap:.1em 1em;margin:.5em 0}
header dt{color:#666}
table{border-collapse:collapse;margin:.5em 0 1em}
th,td{border-bottom:1px solid #e4e4e4;padding:.25em .6em;text-align:left;vertical-align:top}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
td.num{white-space:nowrap}
table.summary{width:100%}
table.summary code{font-size:.85em}
table.workloads{width:100%}
td.achieved{text-align:right}
td.achieved span{white-space:nowrap}
.fail{color:#b00}.good{color:#080}.muted{color:#777}
section.kernel{border-top:1px solid #ccc;margin-top:2em}
.big{font-size:1.6em;font-weight:600}
.slices{display:flex;flex-wrap:wrap;gap:.5em}
code{background:#f4f4f4;padding:0 .2em;border-radius:3px}
.why{color:#555;font-style:italic}
svg{display:block;margin:.4em 0;max-width:100%;height:auto}
"""


def _e(text: object) -> str:
    return html.escape(str(text))


def _interval(row: KernelReport) -> str:
    return row.describe_interval()


def _header(run: RunInfo, rows: list[KernelReport]) -> str:
    targets = ", ".join(sorted({row.target for row in rows if row.target != "-"})) or "-"
    title = "tuning report" if run.kind == "tuning" else f"{run.kind} report"
    items = [("date", run.date or "-"),
             ("commit", f"{run.commit or 'not a repository'}"
                        + (f" on {run.branch}" if run.branch else "")),
             ("machine", f"{run.cpu or 'CPU unknown'}, {run.cores} cores, {run.machine}"),
             ("target", targets), ("load", run.describe_load()),
             *([("peak", run.describe_peaks())] if run.describe_peaks() else []),
             ("tool", f"pytest-r3 {run.version}, Python {run.python}")]
    return (f"<header><h1>pytest-r3 {_e(title)}</h1><dl>" + "".join(
        f"<dt>{_e(key)}</dt><dd>{_e(value)}</dd>" for key, value in items) + "</dl></header>")


def _summary(rows: list[KernelReport]) -> str:
    lines = ["<h2>Summary</h2><table class='summary'><tr><th>kernel</th><th>status</th>"
             "<th class='num'>baseline</th><th class='num'>tuned</th>"
             "<th class='num'>confirmed speedup [95%]</th><th class='num'>evals</th>"
             "<th class='num'>failed</th><th>settings</th></tr>"]
    for row in with_buckets(rows):
        failed = sum(cause["count"] for cause in row.failure_causes)
        css = "fail" if row.status.failed else ""
        why = row.why_no_figures()
        figures = (f"<td colspan='6' class='why'>{_e(why)}</td>" if why else
                   f"<td class='num'>{human_seconds(row.baseline_seconds)}</td>"
                   f"<td class='num'>{human_seconds(row.tuned_seconds)}</td>"
                   f"<td class='num'>{_interval(row)}</td><td class='num'>{row.evaluations}"
                   f"</td><td class='num'>{failed}</td><td>{_settings(row)}</td>")
        lines.append(f"<tr><td><a href='#{_anchor(row)}'>{_e(row.label)}</a></td>"
                     f"<td class='{css}'>{_e(str(row.status))}</td>{figures}</tr>")
    lines.append("</table>")
    measured = [(row.label, row.speedup, *(row.interval if len(row.interval) == 2
                                           else (None, None)))
                for row in with_buckets(rows) if row.speedup]
    if measured:
        lines.append(svg.bars(measured, "confirmed speedup over the baseline (x); whiskers: "
                                        "95% interval; dashed: 1x"))
    return "".join(lines)


def _settings(row: KernelReport) -> str:
    return _code(row.describe_changes())


def _code(text: str) -> str:
    """Settings as code that wraps after a comma, never inside a pass's name."""
    return "<code>" + _e(text).replace(",", ",<wbr>") + "</code>"


def _anchor(row: KernelReport) -> str:
    return "k-" + "".join(c if c.isalnum() else "-" for c in row.label)


def _headline(row: KernelReport) -> str:
    if row.speedup is None:  # no claim: why not, and what the baseline measured
        why = _why(row)
        baseline = (f"<p>baseline {human_seconds(row.baseline_seconds)} per timed run</p>"
                    if row.baseline_seconds is not None else "")
        return (f"<p class='big muted'>{_e(str(row.status))}</p>"
                + (f"<p class='why'>{_e(why)}</p>" if why else "") + baseline
                + f"<p class='muted'>{_e(row.describe_confirmation())}</p>")
    css = "good" if row.speedup >= 1 else "fail"
    interval = (f" (95% interval {row.interval[0]:.2f}-{row.interval[1]:.2f})"
                if len(row.interval) == 2 else "")
    return (f"<p><span class='big {css}'>{row.speedup:.2f}x</span> confirmed{interval}: "
            f"{human_seconds(row.baseline_seconds)} &rarr; {human_seconds(row.tuned_seconds)}"
            f" per timed run, {_e(str(row.status))}</p>"
            f"<p class='muted'>{_e(row.describe_confirmation())}</p>")


def _why(row: KernelReport) -> str:
    """Why a row claims no speedup, shown under its status: why it has no timings, or for
    a kept baseline its first note (nothing beat the noise band, the claim did not hold)."""
    return row.why_no_figures() or (row.notes[0] if row.baseline_kept and row.notes else "")


def _setting_groups(row: KernelReport) -> list[tuple[str, float, list[tuple[str, list[float]]]]]:
    """Per setting that took several values: (name, spread, [(value, speedups)]), where
    spread is the ratio of the best value's median speedup to the worst's (values seen at
    least twice); largest first. A list setting (a pass sequence) is split by member: each
    pass gets the evaluations whose list holds it."""
    measured = [p for p in row.evaluation_log
                if p["speedup"] is not None and p["outcome"] != "failed"]
    names = sorted({name for p in measured for name in (*p["macros"], *p["pipeline"])})
    found = []
    for name in names:
        groups: dict[str, list[float]] = {}
        for point in measured:
            value = point["macros"].get(name, point["pipeline"].get(name, "(default)"))
            members = (value or ["none"]) if isinstance(value, (list, tuple)) else [value]
            for member in dict.fromkeys(members):
                groups.setdefault(setting_value(member), []).append(point["speedup"])
        least = 2 if len(groups) > 10 else 1  # many values: those seen once are noise
        common = {k: v for k, v in groups.items() if len(v) >= least}
        if len(common) < 2:
            continue
        medians = [statistics.median(v) for v in common.values()]
        spread = max(medians) / max(min(medians), 1e-9)
        shown = sorted(common.items(), key=lambda item: -len(item[1]))[:10]
        found.append((name, spread, sorted(shown, key=lambda item: _order(item[0]))))
    return sorted(found, key=lambda item: -item[1])


def _order(value: str):
    try:
        return (0, float(value), value)
    except ValueError:
        return (1, 0.0, value)


def _settings_section(row: KernelReport) -> str:
    groups = _setting_groups(row)
    if not groups:
        return ""
    parts = ["<h4>Which settings mattered</h4><p>For each setting, the ratio of the best "
             "value's median speedup to the worst value's (search estimates over the "
             "evaluations that ran; a pass list counts each pass it holds):</p>",
             svg.bars([(name, spread, None, None) for name, spread, _ in groups[:12]],
                      "best value's median / worst value's median", reference=None),
             "<div class='slices'>"]
    parts += [svg.slice_chart(name, values) for name, _, values in groups[:6]]
    parts.append("</div>")
    return "".join(parts)


def _failures(row: KernelReport) -> str:
    if not row.failure_causes:
        return ""
    return ("<h4>Failed candidates by cause</h4><table><tr><th>cause</th>"
            "<th class='num'>count</th><th>example settings</th><th>first diagnostic</th>"
            "</tr>" + "".join(
                f"<tr><td class='fail'>{_e(c['status'])}</td><td class='num'>{c['count']}"
                f"</td><td>{_code(c['example'])}</td><td><code>"
                f"{_e(c['diagnostic'] or '-')}</code></td></tr>" for c in row.failure_causes)
            + "</table>")


def _workloads(row: KernelReport, run: RunInfo) -> str:
    if not row.workloads:
        if row.timed_on == "test inputs":
            return ("<p class='muted'>Timed on the oracle tests' inputs: no workload was "
                    "recorded.</p>")
        return ""
    achieved = any("work" in w for w in row.workloads)
    head = ("<th>achieved (baseline &rarr; tuned; hover for the peak)</th>" if achieved
            else "")
    return ("<h4>Workloads</h4><p class='muted'>Baseline and tuned above are the weighted "
            "total over these.</p><table class='workloads'><tr><th>workload</th><th>shape</th>"
            "<th class='num'>weight</th><th class='num'>baseline</th><th class='num'>tuned"
            f"</th><th class='num'>speedup</th>{head}</tr>" + "".join(
                f"<tr><td>{_e(w['origin']).replace('::', '::<wbr>')}</td>"
                f"<td><code>{_e(w['shape']).replace(';', ';<wbr>')}</code></td>"
                f"<td class='num'>{w['weight']:g}</td>"
                f"<td class='num'>{human_seconds(w['baseline_median'])}</td>"
                f"<td class='num'>{human_seconds(w['candidate_median'])}</td>"
                f"<td class='num'>{w['speedup']:.2f}x</td>"
                + (f"<td class='achieved'>{_throughput(w, run)}</td>" if achieved else "")
                + "</tr>"
                for w in row.workloads) + "</table>")


def _throughput(workload: dict, run: RunInfo) -> str:
    """GFLOP/s and GB/s of one workload's call (from r3.kernel's work=), baseline and tuned,
    each as a share of what the machine reaches: a one-thread float32 BLAS matmul, and
    numpy's y += x moving as many bytes (from the cache or memory that holds them), one
    line per unit."""
    work = workload.get("work") or {}
    moved = workload.get("stream_bandwidth")  # numpy moving as many bytes as the call
    peaks = {"flops": (run.matmul_flops, "a one-thread float32 BLAS matmul"),
             "bytes": (moved, "numpy y += x moving as many bytes") if moved else
                      (run.stream_bandwidth, "numpy y += x streaming from memory")}
    parts = []
    for key, unit in (("flops", "GFLOP/s"), ("bytes", "GB/s")):
        if work.get(key):
            base = work[key] / workload["baseline_median"] / 1e9
            tuned = work[key] / workload["candidate_median"] / 1e9
            text = f"{base:.3g} &rarr; {tuned:.3g} {unit}"
            peak, what = peaks[key]
            if peak:
                text = (f"<span title='of the {peak / 1e9:.3g} {unit} {what} reaches here'>"
                        f"{text}, {100 * tuned * 1e9 / peak:.0f}% of peak</span>")
            parts.append(text)
    return "<br>".join(parts) or "-"


def _evolution(row: KernelReport) -> str:
    if not row.evolution:
        return ""
    return ("<h4>Source evolution</h4><table><tr><th class='num'>generation</th>"
            "<th class='num'>best</th><th class='num'>model wait</th>"
            "<th class='num'>evaluation</th><th class='num'>wall</th></tr>" + "".join(
                f"<tr><td class='num'>{g['index']}</td><td class='num'>"
                f"{g['best_speedup']:.2f}x</td><td class='num'>{g['model_wait_seconds']:.1f} s"
                f"</td><td class='num'>{g['evaluation_seconds']:.1f} s</td>"
                f"<td class='num'>{g['wall_seconds']:.1f} s</td></tr>" for g in row.evolution)
            + "</table>")


def _kernel(row: KernelReport, run: RunInfo) -> str:
    parts = [f"<section class='kernel' id='{_anchor(row)}'><h3>{_e(row.label)} "
             f"<small class='muted'>{_e(row.target)}</small></h3>", _headline(row)]
    if row.changes:
        parts.append(f"<p>Settings: {_settings(row)}</p>")
    if row.evaluation_log:
        parts.append(f"<h4>Every evaluation ({len(row.evaluation_log)}, "
                     f"{row.new_evaluations} new, {_e(row.optimizer or '-')})</h4>"
                     "<p class='muted'>Each dot is the search's estimate for one candidate "
                     "(grey: it lost its race, stopped after a brief timing as clearly "
                     "slower than the best so far; a red cross: it failed, see below)"
                     + ("; the purple line across is the speedup confirmed afterwards"
                        if row.speedup is not None else "") + ".</p>")
        parts.append(svg.evaluations_chart(row.evaluation_log, row.speedup))
    parts += [_settings_section(row), _failures(row), _workloads(row, run),
              _evolution(row)]
    notes = [note for note in row.notes if row.speedup is not None or note != _why(row)]
    if notes:
        parts.append("<ul>" + "".join(f"<li>{_e(note)}</li>" for note in notes) + "</ul>")
    parts.append("</section>")
    return "".join(parts)


def render(rows: list[KernelReport], run: RunInfo | None = None) -> str:
    run = run or RunInfo()
    body = [_header(run, rows)]
    # the largest confirmed speedups first, then the kernels without one, in their order
    rows = sorted(rows, key=lambda row: -row.speedup if row.speedup is not None else 0.0)
    if rows:
        body.append(_summary(rows))
        body += [_kernel(row, run) for row in with_buckets(rows)]
    else:
        body.append("<p>No kernel was tuned or checked in this run.</p>")
    body.append("<p class='muted'>Speedups are measured interleaved against the baseline and "
                "confirmed in a fresh worker process after the search, with their 95% interval "
                "and the noise band learned by timing the baseline against itself; the "
                "per-evaluation figures are the search's estimates, never claims.</p>")
    return ("<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>pytest-r3 {_e(run.kind)} report</title>"
            f"<meta name='viewport' content='width=device-width'><style>{CSS}</style></head>"
            "<body>" + "\n".join(body) + "</body></html>\n")


def write(path: Path, rows: list[KernelReport], run: RunInfo | None = None) -> Path:
    return write_text_atomic(path, render(rows, run))
