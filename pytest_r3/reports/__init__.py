"""Reports of a tuning run: pytest-benchmark JSON, Markdown for a pull request, HTML with
plots. Each takes the same list of :class:`KernelReport` rows.

``--r3-tune`` writes ``report.{json,md,html}``; ``--r3-check`` writes
``check-report.{json,md,html}`` beside them, so a check never hides what tuning found. A
run limited to some kernels (``--r3-kernels``) keeps the other kernels' rows of the last
report of its kind, marked as from that run."""

from __future__ import annotations

from pathlib import Path

from ..outputs import make_dirs
from .model import KernelReport
from .run import RunInfo
from .status import Outcome, Status

__all__ = ["KernelReport", "Outcome", "RunInfo", "Status", "report_paths",
           "write_reports"]


def report_paths(r3_dir: str | Path, kind: str = "tuning") -> dict[str, Path]:
    stem = "report" if kind == "tuning" else f"{kind}-report"
    return {ext: Path(r3_dir) / f"{stem}.{ext}" for ext in ("html", "md", "json")}


def write_reports(r3_dir: str | Path, rows: list[KernelReport], kind: str = "tuning",
                  partial: bool = False, run: RunInfo | None = None) -> dict[str, Path]:
    """``kind``: "tuning" (--r3-tune) or "check" (--r3-check); ``partial``: this run covered
    only some kernels, so the previous report's other rows are kept."""
    from . import benchmark_json, html, markdown

    folder = make_dirs(r3_dir, root=Path(r3_dir).parent)  # a link there is refused
    paths = report_paths(folder, kind)
    if partial:
        rows = benchmark_json.merged(paths["json"], rows)
    run = run or RunInfo.collect(kind)
    return {
        "json": benchmark_json.write(paths["json"], rows, run),
        "md": markdown.write(paths["md"], rows, kind),
        "html": html.write(paths["html"], rows, run),
    }
