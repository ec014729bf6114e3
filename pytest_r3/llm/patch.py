"""``.r3/patches/<kernel>.patch``: an accepted rewrite as a unified diff ``git apply`` takes.

The patched file keeps the original's line endings (CRLF stays CRLF) and its final-newline
state (a file without a final newline stays without one); lines without a newline are
marked ``\\ No newline at end of file`` as git and patch expect. Lines are split on ``\\n``
only, so a form feed or other Unicode line break inside a line is kept as it is.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from ..outputs import write_bytes_atomic

NO_NEWLINE = "\\ No newline at end of file\n"


def _lines(text: str) -> list[str]:
    lines = text.split("\n")
    ends = [line + "\n" for line in lines[:-1]]
    return ends + [lines[-1]] if lines[-1] else ends


def match_layout(original: str, rewritten: str) -> str:
    """``rewritten`` with the line endings and final-newline state of ``original``."""
    crlf = original.count("\r\n")
    eol = "\r\n" if crlf and crlf >= original.count("\n") - crlf else "\n"
    body = rewritten.replace("\r\n", "\n").rstrip("\n")
    if original.endswith("\n") or not original:
        body += "\n"
    return body.replace("\n", eol)


def unified_diff(original: str, rewritten: str, relative_path: str) -> str:
    """A diff from ``original`` to ``rewritten``, both exactly as they are (no newline
    translation: read the original with ``newline=""``)."""
    out = []
    for line in difflib.unified_diff(_lines(original), _lines(rewritten), f"a/{relative_path}",
                                     f"b/{relative_path}"):
        out.append(line if line.endswith("\n") else line + "\n" + NO_NEWLINE)
    return "".join(out)


def write_patch(folder: Path, kernel: str, source_path: Path, root: Path,
                rewritten: str, assumes: list[str] | tuple[str, ...] = ()) -> Path:
    """Write the patch (paths relative to ``root``, the repository or rootdir).

    ``rewritten`` may use any line endings (the kernel's source is read with universal
    newlines); the patch gives it the file's own. ``assumes``: what the rewrite assumes of
    its callers that the original does not, one header line each before the diff (``git
    apply`` skips text before the first ``---``)."""
    try:
        relative = source_path.resolve().relative_to(root.resolve())
    except ValueError:
        relative = Path(source_path.name)
    with open(source_path, encoding="utf-8", errors="surrogateescape", newline="") as stream:
        original = stream.read()
    diff = unified_diff(original, match_layout(original, rewritten), relative.as_posix())
    if assumes:
        diff = "".join(f"pytest-r3: this rewrite assumes: {note} (review your callers)\n"
                       for note in assumes) + "\n" + diff
    return write_bytes_atomic(folder / f"{kernel}.patch",
                              diff.encode("utf-8", "surrogateescape"), root=folder.parent)
