"""Where a kernel's source text comes from: a file beside the declaring module, or inline."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, replace
from pathlib import Path

from ..errors import SourceNotFoundError

SOURCE_SUFFIXES = (".c", ".h", ".cu", ".cuh", ".cl", ".cc", ".cpp")


@dataclass(frozen=True)
class KernelSource:
    """The text of a kernel plus what clang needs to report on it and find its includes."""

    text: str
    filename: str
    path: Path | None = None
    include_dirs: tuple[str, ...] = ()
    # a candidate's text (a rewrite): compiled with a restricted include path and
    # diagnostics that quote nothing but itself
    untrusted: bool = False
    extra_flags: tuple[str, ...] = ()  # e.g. the pattern-initialised verification build

    @property
    def hash(self) -> str:
        """Content hash: a lock entry is stale once this changes."""
        return hashlib.sha256(self.text.encode()).hexdigest()[:16]

    @property
    def is_file(self) -> bool:
        return self.path is not None

    def with_text(self, text: str) -> KernelSource:
        """The same file with other contents (a rewrite); the original is never touched."""
        return replace(self, text=text)

    def candidate(self, text: str) -> KernelSource:
        """A rewrite of this file proposed by someone not trusted (a model, a person)."""
        return replace(self, text=text, untrusted=True)

    def with_flags(self, *flags: str) -> KernelSource:
        return replace(self, extra_flags=self.extra_flags + flags)


def looks_like_path(source: str | os.PathLike) -> bool:
    if isinstance(source, os.PathLike):
        return True
    return "\n" not in source and source.strip().endswith(SOURCE_SUFFIXES)


def load_source(source: str | os.PathLike, declaring_file: str | None, where: str) -> KernelSource:
    """Resolve ``source`` (path relative to the declaring module, or inline text)."""
    if not looks_like_path(source):
        return KernelSource(text=str(source), filename=f"<inline source of {where}>")
    base = Path(declaring_file).resolve().parent if declaring_file else Path.cwd()
    path = (base / Path(source)).resolve()
    if not path.is_file():
        raise SourceNotFoundError(
            f"{where}: source file {str(source)!r} not found (looked for {path}). Paths are "
            "relative to the file that declares the kernel; to pass C code inline, give text "
            "containing a newline."
        )
    return KernelSource(
        text=path.read_text(), filename=str(path), path=path, include_dirs=(str(path.parent),)
    )
