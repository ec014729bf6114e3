"""Small charts as inline SVG for report.html: no plotting library, no script, no network.

Each function returns one ``<svg>`` element with labelled axes and a ``<title>`` on every
mark (a browser shows it on hover), sized in CSS pixels."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

COLOURS = {"ok": "#1f77b4", "lost race": "#b0b0b0", "failed": "#d62728",
           "best": "#2ca02c", "finalist": "#ff7f0e", "confirmed": "#7b2d8e"}
FONT = 'font-family="sans-serif"'


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high] (1, 2 or 5 times a power of ten apart)."""
    if high <= low:
        high = low + 1.0
    raw = (high - low) / max(count, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.floor(low / step) * step
    ticks, value = [], first
    while value <= high + step * 1e-9:
        ticks.append(round(value, 10))
        value += step
    return ticks


def _speedup_label(value: float) -> str:
    return f"{value:g}x"


class Frame:
    """A plot area with x and y axes: maps data to pixels and draws ticks and labels."""

    def __init__(self, width: int, height: int, x_range: tuple[float, float],
                 y_range: tuple[float, float], x_label: str, y_label: str,
                 left: int = 56, bottom: int = 40, top: int = 14, right: int = 14) -> None:
        self.width, self.height = width, height
        self.left, self.bottom, self.top, self.right = left, bottom, top, right
        self.x_ticks = nice_ticks(*x_range)
        self.y_ticks = nice_ticks(*y_range)
        self.x0, self.x1 = min(self.x_ticks[0], x_range[0]), max(self.x_ticks[-1], x_range[1])
        self.y0, self.y1 = min(self.y_ticks[0], y_range[0]), max(self.y_ticks[-1], y_range[1])
        self.x_label, self.y_label = x_label, y_label

    def x(self, value: float) -> float:
        span = (self.x1 - self.x0) or 1.0
        return self.left + (self.width - self.left - self.right) * (value - self.x0) / span

    def y(self, value: float) -> float:
        span = (self.y1 - self.y0) or 1.0
        return self.height - self.bottom - (self.height - self.top - self.bottom) * (
            value - self.y0) / span

    def axes(self, x_format=lambda v: f"{v:g}", y_format=_speedup_label,
             x_ticks: Sequence[tuple[float, str]] | None = None,
             slanted: bool = False) -> list[str]:
        """``slanted``: tick labels at an angle, for long ones (give a taller bottom)."""
        inner = self.width - self.left - self.right
        parts = [f'<rect x="{self.left}" y="{self.top}" width="{inner}"'
                 f' height="{self.height - self.top - self.bottom}" fill="#fff" stroke="#ccc"/>']
        for value in self.y_ticks:
            y = self.y(value)
            parts.append(f'<line x1="{self.left}" y1="{y:.1f}" x2="{self.width - self.right}" '
                         f'y2="{y:.1f}" stroke="#eee"/><text x="{self.left - 4}" y="{y + 4:.1f}"'
                         f' font-size="11" text-anchor="end" {FONT}>{y_format(value)}</text>')
        for value, label in (x_ticks if x_ticks is not None
                             else [(v, x_format(v)) for v in self.x_ticks]):
            x, y = self.x(value), self.height - self.bottom + 16
            placed = (f'text-anchor="end" transform="rotate(-35 {x + 4:.1f} {y - 6})"'
                      if slanted else 'text-anchor="middle"')
            parts.append(f'<line x1="{x:.1f}" y1="{self.height - self.bottom}" x2="{x:.1f}" '
                         f'y2="{self.height - self.bottom + 4}" stroke="#666"/>'
                         f'<text x="{x + 4 if slanted else x:.1f}" y="{y}" font-size="11" '
                         f'{placed} {FONT}>{html.escape(label)}</text>')
        parts.append(f'<text x="{(self.left + self.width - self.right) / 2:.0f}" '
                     f'y="{self.height - 6}" font-size="12" text-anchor="middle" {FONT}>'
                     f'{html.escape(self.x_label)}</text>')
        middle = (self.top + self.height - self.bottom) / 2
        parts.append(f'<text x="14" y="{middle:.0f}" font-size="12" text-anchor="middle" '
                     f'transform="rotate(-90 14 {middle:.0f})" {FONT}>'
                     f'{html.escape(self.y_label)}</text>')
        return parts

    def baseline(self) -> str:
        """The dashed 1x line: as fast as the baseline."""
        if not self.y0 <= 1.0 <= self.y1:
            return ""
        return (f'<line x1="{self.left}" y1="{self.y(1):.1f}" x2="{self.width - self.right}" '
                f'y2="{self.y(1):.1f}" stroke="#555" stroke-dasharray="5 4"/>')

    def svg(self, parts: list[str], label: str) -> str:
        return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width}" '
                f'height="{self.height}" viewBox="0 0 {self.width} {self.height}" role="img" '
                f'aria-label="{html.escape(label)}">' + "".join(parts) + "</svg>")


def legend(items: list[tuple[str, str]], x: float, y: float) -> list[str]:
    parts = []
    for colour, text in items:
        parts.append(f'<circle cx="{x + 5:.1f}" cy="{y - 4:.1f}" r="4" fill="{colour}"/>'
                     f'<text x="{x + 13:.1f}" y="{y:.1f}" font-size="11" {FONT}>'
                     f'{html.escape(text)}</text>')
        x += 22 + 6.5 * len(text)
    return parts


def evaluations_chart(points: list[dict], confirmed: float | None,
                      width: int = 720, height: int = 280) -> str:
    """Speedup by evaluation: every evaluation a dot coloured by outcome (failed ones on
    the bottom edge), the best so far as a step line, confirmed finalists ringed, and the
    confirmed speedup as a purple line."""
    if not points:
        return "<p>No evaluation was run.</p>"
    measured = [p["speedup"] for p in points if p["speedup"] is not None]
    top = max([*measured, confirmed or 0.0, 1.0]) * 1.08
    frame = Frame(width, height, (0, max(p["index"] for p in points)), (0, top),
                  "evaluation", "speedup (search estimate)", top=30)
    parts = frame.axes(x_format=lambda v: f"{v:g}")
    parts.append(frame.baseline())
    best, steps = 1.0, []
    for point in points:
        if point["outcome"] == "ok" and point["speedup"] is not None:
            best = max(best, point["speedup"])
        steps.append((frame.x(point["index"]), frame.y(best)))
    path = f"M{steps[0][0]:.1f} {steps[0][1]:.1f}" + "".join(
        f"H{x:.1f}V{y:.1f}" for x, y in steps[1:])
    parts.append(f'<path d="{path}" fill="none" stroke="{COLOURS["best"]}" stroke-width="1.5">'
                 '<title>best speedup so far</title></path>')
    for point in points:
        value = point["speedup"]
        failed = point["outcome"] == "failed" or value is None
        x, y = frame.x(point["index"]), frame.y(0 if failed else value)
        shown = "failed" if failed else point["outcome"]
        title = (f"#{point['index']}: {point['status']}"
                 + ("" if failed else f", {value:.2f}x") + f" - {point['settings']}")
        if shown == "failed":
            parts.append(f'<path d="M{x - 3.5:.1f} {y - 3.5:.1f}l7 7m0 -7l-7 7" '
                         f'stroke="{COLOURS["failed"]}" stroke-width="1.5">'
                         f'<title>{html.escape(title)}</title></path>')
        else:
            parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{COLOURS[shown]}" '
                         f'fill-opacity="0.8"><title>{html.escape(title)}</title></circle>')
        if point.get("finalist"):
            parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="7" fill="none" '
                         f'stroke="{COLOURS["finalist"]}" stroke-width="2">'
                         f'<title>finalist: confirmed again - {html.escape(title)}</title>'
                         '</circle>')
    if confirmed:
        y = frame.y(confirmed)
        parts.append(f'<line x1="{frame.left}" y1="{y:.1f}" x2="{width - frame.right}" '
                     f'y2="{y:.1f}" stroke="{COLOURS["confirmed"]}" stroke-width="2">'
                     f'<title>confirmed speedup {confirmed:.2f}x</title></line>')
    parts += legend([(COLOURS["ok"], "ok"), (COLOURS["lost race"], "lost race"),
                     (COLOURS["failed"], "failed (on the axis)"),
                     (COLOURS["finalist"], "finalist (ringed)"),
                     (COLOURS["best"], "best estimate so far"),
                     *([(COLOURS["confirmed"], "confirmed")] if confirmed else [])], frame.left,
                    frame.top - 10)
    return frame.svg(parts, "speedup of every evaluation, in order")


def slice_chart(name: str, groups: list[tuple[str, list[float]]], width: int = 340,
                height: int = 220) -> str:
    """How the speedup depends on one setting: each value's evaluations as dots, their
    median as a bar."""
    longest = max(len(label) for label, _ in groups)
    slanted = longest > 9  # pass names: slanted, whole, rather than cut to fit
    limit = 24 if slanted else 9
    width = max(width, 70 + (30 if slanted else 64) * len(groups))  # room for each label
    bottom = 40 + (int(3.5 * min(longest, limit)) if slanted else 0)
    values = [v for _, speedups in groups for v in speedups]
    top = max([*values, 1.0]) * 1.08
    count = len(groups)
    first = min(len(groups[0][0]), limit)  # the one label that may reach past the axis
    left = max(56, int(4.9 * first) - 10) if slanted else 56
    frame = Frame(width + left - 56, height + bottom - 40, (-0.5, count - 0.5), (0, top),
                  name, "estimated speedup", left=left, bottom=bottom)
    parts = frame.axes(x_ticks=[(i, _short(label, limit)) for i, (label, _) in
                                enumerate(groups)], slanted=slanted)
    parts.append(frame.baseline())
    for i, (label, speedups) in enumerate(groups):
        for j, value in enumerate(speedups):
            jitter = ((j * 0.618) % 1 - 0.5) * 0.5
            parts.append(f'<circle cx="{frame.x(i + jitter):.1f}" cy="{frame.y(value):.1f}" '
                         f'r="2.5" fill="{COLOURS["ok"]}" fill-opacity="0.55"/>')
        median = sorted(speedups)[len(speedups) // 2]
        y = frame.y(median)
        parts.append(f'<line x1="{frame.x(i - 0.3):.1f}" y1="{y:.1f}" x2="{frame.x(i + 0.3):.1f}" '
                     f'y2="{y:.1f}" stroke="#000" stroke-width="2"><title>'
                     f'{html.escape(name)}={html.escape(label)}: median {median:.2f}x over '
                     f'{len(speedups)} evaluation(s)</title></line>')
    return frame.svg(parts, f"speedup by {name}")


def bars(items: list[tuple[str, float, float | None, float | None]], unit_label: str,
         reference: float | None = 1.0, width: int = 720) -> str:
    """Horizontal bars with an optional interval whisker: (label, value, low, high); the
    labels sit left of the axis and the figures right of the whisker, never under it."""
    if not items:
        return ""
    label_width = min(220, 12 + 7 * max(len(label) for label, *_ in items))
    bar = 28
    height = 14 + bar * len(items) + 40
    top = max(max(high if high is not None else value, value) for _, value, _, high in items)
    frame = Frame(width, height, (0, max(top, reference or 0) * 1.15), (0, len(items)),
                  unit_label, "", left=label_width, bottom=40, right=70)
    parts = [f'<rect x="{frame.left}" y="{frame.top}" width="{width - frame.left - frame.right}"'
             f' height="{height - frame.top - frame.bottom}" fill="#fff" stroke="#ccc"/>']
    for value in frame.x_ticks:
        x = frame.x(value)
        parts.append(f'<line x1="{x:.1f}" y1="{frame.top}" x2="{x:.1f}" '
                     f'y2="{height - frame.bottom + 4}" stroke="#eee"/><text x="{x:.1f}" '
                     f'y="{height - frame.bottom + 16}" font-size="11" text-anchor="middle" '
                     f'{FONT}>{value:g}</text>')
    parts.append(f'<text x="{(frame.left + width - frame.right) / 2:.0f}" y="{height - 6}" '
                 f'font-size="12" text-anchor="middle" {FONT}>{html.escape(unit_label)}</text>')
    for i, (label, value, low, high) in enumerate(items):
        y = frame.top + i * bar
        colour = COLOURS["best"] if reference is None or value >= reference else COLOURS["failed"]
        parts.append(f'<text x="{frame.left - 6}" y="{y + bar / 2 + 4:.1f}" font-size="12" '
                     f'text-anchor="end" {FONT}>{html.escape(_short(label, 30))}</text>')
        parts.append(f'<rect x="{frame.left}" y="{y + 6}" width="{frame.x(value) - frame.left:.1f}"'
                     f' height="{bar - 12}" fill="{colour}" fill-opacity="0.75"><title>'
                     f'{html.escape(label)}: {value:.3g}</title></rect>')
        end = frame.x(value)
        if low is not None and high is not None:
            x_low, x_high = frame.x(low), frame.x(high)
            parts.append(f'<path d="M{x_low:.1f} {y + bar / 2:.1f}H{x_high:.1f}M{x_low:.1f} '
                         f'{y + 9:.1f}V{y + bar - 9:.1f}M{x_high:.1f} {y + 9:.1f}'
                         f'V{y + bar - 9:.1f}" stroke="#000" fill="none"/>')
            end = max(end, x_high)
        parts.append(f'<text x="{end + 5:.1f}" y="{y + bar / 2 + 4:.1f}" font-size="11" '
                     f'{FONT}>{value:.2f}</text>')
    if reference is not None:
        x = frame.x(reference)
        parts.append(f'<line x1="{x:.1f}" y1="{frame.top}" x2="{x:.1f}" '
                     f'y2="{height - frame.bottom}" stroke="#555" stroke-dasharray="5 4"/>')
    return frame.svg(parts, unit_label)


def _short(text: str, limit: int = 14) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "\u2026"
