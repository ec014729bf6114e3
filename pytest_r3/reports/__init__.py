"""Reports of a tuning run: pytest-benchmark JSON, Markdown for a pull request, HTML with
plots. Each takes the same list of :class:`KernelReport` rows."""

from __future__ import annotations

from pathlib import Path

from .model import KernelReport

__all__ = ["KernelReport", "write_reports"]


def write_reports(r3_dir: str | Path, rows: list[KernelReport]) -> dict[str, Path]:
    from . import benchmark_json, html, markdown

    folder = Path(r3_dir)
    return {
        "json": benchmark_json.write(folder / "report.json", rows),
        "md": markdown.write(folder / "report.md", rows),
        "html": html.write(folder / "report.html", rows),
    }
