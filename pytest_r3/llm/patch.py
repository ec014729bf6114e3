"""``.r3/patches/<kernel>.patch``: an accepted rewrite as a unified diff ``git apply`` takes."""

from __future__ import annotations

import difflib
from pathlib import Path

from ..outputs import write_text_atomic


def unified_diff(original: str, rewritten: str, relative_path: str) -> str:
    before = original.splitlines(keepends=True)
    after = rewritten.splitlines(keepends=True)
    for lines in (before, after):
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += "\n"
    return "".join(difflib.unified_diff(before, after, f"a/{relative_path}",
                                        f"b/{relative_path}"))


def write_patch(folder: Path, kernel: str, source_path: Path, root: Path,
                rewritten: str) -> Path:
    """Write the patch (paths relative to ``root``, the repository or rootdir)."""
    try:
        relative = source_path.resolve().relative_to(root.resolve())
    except ValueError:
        relative = Path(source_path.name)
    diff = unified_diff(source_path.read_text(), rewritten, relative.as_posix())
    return write_text_atomic(folder / f"{kernel}.patch", diff)
