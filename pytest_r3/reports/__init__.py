"""Reports of a tuning run: pytest-benchmark JSON, Markdown for a pull request, HTML with
plots. Each takes the same list of :class:`KernelReport` rows."""

from __future__ import annotations

from pathlib import Path

from ..outputs import make_dirs
from .model import KernelReport

__all__ = ["KernelReport", "write_reports"]


def write_reports(r3_dir: str | Path, rows: list[KernelReport],
                  kind: str = "tuning") -> dict[str, Path]:
    """``kind``: "tuning" (--r3-tune) or "check" (--r3-check), named in the Markdown title."""
    from . import benchmark_json, html, markdown

    folder = make_dirs(r3_dir, root=Path(r3_dir).parent)  # a link there is refused
    return {
        "json": benchmark_json.write(folder / "report.json", rows),
        "md": markdown.write(folder / "report.md", rows, kind),
        "html": html.write(folder / "report.html", rows),
    }
