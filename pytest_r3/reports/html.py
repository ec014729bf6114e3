"""``report.html``: one self-contained page with a convergence plot and a speedup chart per
kernel, drawn as inline SVG (no plotting library, no network)."""

from __future__ import annotations

import html
from pathlib import Path

from ..outputs import write_text_atomic
from .markdown import _us
from .model import KernelReport, with_buckets

WIDTH, HEIGHT, PAD = 420, 220, 36


def _convergence_svg(curve: list[float], axis: str = "evaluations",
                     confirmed: float | None = None) -> str:
    """The search's best estimate after each evaluation (never a claim), with the
    ``confirmed`` speedup, where there is one, as a line across."""
    if not curve:
        return "<p>no evaluations</p>"
    top = max(max(curve), confirmed or 1.0, 1.0) * 1.05
    count = max(len(curve) - 1, 1)

    def x(i: int) -> float:
        return PAD + (WIDTH - 2 * PAD) * i / count

    def y(v: float) -> float:
        return HEIGHT - PAD - (HEIGHT - 2 * PAD) * v / top

    points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(curve))
    return (
        f'<svg width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="best speedup against '
        f'evaluations"><rect width="100%" height="100%" fill="#fff" stroke="#ccc"/>'
        f'<line x1="{PAD}" y1="{y(1):.1f}" x2="{WIDTH - PAD}" y2="{y(1):.1f}" stroke="#999" '
        f'stroke-dasharray="4"/><polyline fill="none" stroke="#1f77b4" stroke-width="2" '
        f'points="{points}"/>{_confirmed_line(confirmed, y)}<text x="{PAD}" y="16" '
        f'font-size="12">search estimates, best so far (unconfirmed; last {curve[-1]:.2f}x)'
        f'</text><text x="{WIDTH - PAD}" y="{HEIGHT - 8}" '
        f'font-size="11" text-anchor="end">{axis} ({len(curve)})</text>'
        f'<text x="4" y="{y(1) + 4:.1f}" font-size="10">1.0x</text></svg>')


def _confirmed_line(confirmed: float | None, y) -> str:
    if confirmed is None:
        return ""
    return (f'<line x1="{PAD}" y1="{y(confirmed):.1f}" x2="{WIDTH - PAD}" '
            f'y2="{y(confirmed):.1f}" stroke="#2ca02c" stroke-width="2"/>'
            f'<text x="{WIDTH - PAD}" y="{y(confirmed) - 4:.1f}" font-size="11" '
            f'text-anchor="end">confirmed {confirmed:.2f}x</text>')


def _speedup_svg(rows: list[KernelReport]) -> str:
    """Confirmed speedups (measured in a fresh worker process), whiskers their 95%
    interval, a grey band each kernel's noise band."""
    measured = [r for r in rows if r.speedup]
    if not measured:
        return "<p>no speedups measured</p>"
    top = max(max((r.interval or [r.speedup])[-1] for r in measured), 1.0) * 1.1
    bar = 26
    height = PAD + bar * len(measured) + 10
    scale = (WIDTH * 1.5 - 160) / top
    parts = [f'<svg width="{WIDTH * 1.5:.0f}" height="{height}" role="img" '
             'aria-label="speedup per kernel"><rect width="100%" height="100%" fill="#fff"/>']
    for i, row in enumerate(measured):
        top_y = PAD + i * bar
        color = "#2ca02c" if row.speedup >= 1 else "#d62728"
        parts.append(f'<text x="4" y="{top_y + 16}" font-size="12">'
                     f'{html.escape(row.label)}</text>')
        if len(row.noise_band) == 2:
            low, high = row.noise_band
            parts.append(f'<rect x="{120 + low * scale:.1f}" y="{top_y + 1}" '
                         f'width="{(high - low) * scale:.1f}" height="{bar - 2}" '
                         'fill="#ddd"/>')
        parts.append(f'<rect x="120" y="{top_y + 4}" width="{row.speedup * scale:.1f}" '
                     f'height="{bar - 8}" fill="{color}"/>')
        if len(row.interval) == 2:
            parts.append(f'<line x1="{120 + row.interval[0] * scale:.1f}" y1="{top_y + 13}" '
                         f'x2="{120 + row.interval[1] * scale:.1f}" y2="{top_y + 13}" '
                         'stroke="#000"/>')
        parts.append(f'<text x="{124 + row.speedup * scale:.1f}" y="{top_y + 17}" '
                     f'font-size="11">{row.speedup:.2f}x</text>')
    parts.append(f'<line x1="{120 + scale:.1f}" y1="{PAD - 6}" x2="{120 + scale:.1f}" '
                 f'y2="{height - 4}" stroke="#999" stroke-dasharray="4"/></svg>')
    return "".join(parts)


def render(rows: list[KernelReport]) -> str:
    rows = with_buckets(rows)  # a specialised kernel's buckets get a section each
    body = ["<h1>pytest-r3 tuning report</h1>",
            "<h2>Confirmed speedup over the baseline</h2><p>measured in a fresh worker "
            "process; whiskers: 95% interval; grey: the kernel's noise band</p>",
            _speedup_svg(rows), "<h2>Kernels</h2>"]
    for row in rows:
        body.append(f"<section><h3>{html.escape(row.label)} <small>({html.escape(row.target)},"
                    f" {html.escape(row.status)})</small></h3>")
        body.append(f"<p>baseline {_us(row.baseline_seconds)}, tuned {_us(row.tuned_seconds)}, "
                    f"{row.evaluations} evaluations ({row.new_evaluations} new) with "
                    f"{html.escape(row.optimizer or '-')}; changes: "
                    f"<code>{html.escape(row.describe_changes())}</code></p>")
        if row.describe_confirmation():
            body.append(f"<p>{html.escape(row.describe_confirmation())}</p>")
        body.append(_convergence_svg(row.convergence, confirmed=row.speedup))
        if row.workloads:
            body.append("<h4>Workloads (timed; baseline and tuned above are their weighted "
                        "total)</h4><table><tr><th>workload</th><th>shape</th><th>weight</th>"
                        "<th>baseline</th><th>tuned</th><th>speedup</th></tr>" + "".join(
                            f"<tr><td>{html.escape(w['origin'])}</td>"
                            f"<td><code>{html.escape(w['shape'])}</code></td>"
                            f"<td>{w['weight']:g}</td><td>{_us(w['baseline_median'])}</td>"
                            f"<td>{_us(w['candidate_median'])}</td>"
                            f"<td>{w['speedup']:.2f}x</td></tr>" for w in row.workloads)
                        + "</table>")
        elif row.timed_on == "test inputs":
            body.append("<p><em>timed on the oracle tests' inputs: no workload was "
                        "recorded</em></p>")
        if row.evolution:
            body.append("<h4>Source evolution: best speedup per generation</h4>")
            body.append(_convergence_svg([g["best_speedup"] for g in row.evolution],
                                         "generations"))
            body.append("<table><tr><th>generation</th><th>best</th><th>model wait</th>"
                        "<th>evaluation</th><th>wall</th></tr>" + "".join(
                            f"<tr><td>{g['index']}</td><td>{g['best_speedup']:.2f}x</td>"
                            f"<td>{g['model_wait_seconds']:.1f} s</td>"
                            f"<td>{g['evaluation_seconds']:.1f} s</td>"
                            f"<td>{g['wall_seconds']:.1f} s</td></tr>"
                            for g in row.evolution) + "</table>")
        for note in row.notes:
            body.append(f"<p><em>{html.escape(note)}</em></p>")
        body.append("</section>")
    return ("<!doctype html><html><head><meta charset='utf-8'><title>pytest-r3 report</title>"
            "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto}"
            "svg{display:block;margin:.5em 0}</style></head><body>"
            + "\n".join(body) + "</body></html>\n")


def write(path: Path, rows: list[KernelReport]) -> Path:
    return write_text_atomic(path, render(rows))
