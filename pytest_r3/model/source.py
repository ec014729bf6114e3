"""Where a kernel's source text comes from: a file beside the declaring module, or inline."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ..errors import DeclarationError, SourceNotFoundError

SOURCE_SUFFIXES = (".c", ".h", ".cu", ".cuh", ".hip", ".cl", ".cc", ".cpp")


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
    # fixed configuration declared with the kernel (defines=, include_dirs=): never tuned
    defines: tuple[tuple[str, object], ...] = ()
    declared_include_dirs: tuple[str, ...] = ()  # as declared, for the hash
    # the kernel this text is compiled for: a CUDA build sets aside what it cannot reach
    # (host code, other kernels); not part of the hash, the file is the same
    entry: str | None = None

    @property
    def hash(self) -> str:
        """Content hash of the text and its declared configuration: a lock entry is stale
        once this changes. Without configuration, the hash of the text alone."""
        digest = hashlib.sha256(self.text.encode())
        if self.defines or self.declared_include_dirs:
            digest.update(b"\0configuration\0" + json.dumps(
                [[list(d) for d in self.defines], list(self.declared_include_dirs)],
                default=str).encode())
        return digest.hexdigest()[:16]

    @property
    def define_flags(self) -> tuple[str, ...]:
        """``-DNAME=VALUE`` (``-DNAME`` for None, booleans as 0/1) for each declared define."""
        flags = []
        for name, value in self.defines:
            if value is None:
                flags.append(f"-D{name}")
            else:
                flags.append(f"-D{name}={int(value) if isinstance(value, bool) else value}")
        return tuple(flags)

    @property
    def flags(self) -> tuple[str, ...]:
        """What clang gets besides the macros of a variant: defines, then extra flags."""
        return (*self.define_flags, *self.extra_flags)

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


def load_source(source: str | os.PathLike, declaring_file: str | None, where: str,
                defines: Mapping[str, object] | None = None,
                include_dirs: Sequence[str | os.PathLike] = ()) -> KernelSource:
    """Resolve ``source`` (path relative to the declaring module, or inline text), with its
    fixed configuration: ``defines`` for clang's -D and ``include_dirs`` (relative to the
    declaring module) for -I."""
    base = Path(declaring_file).resolve().parent if declaring_file else Path.cwd()
    configuration = {"defines": _checked_defines(defines, where),
                     "declared_include_dirs": tuple(str(d) for d in include_dirs)}
    extra_dirs = _checked_include_dirs(include_dirs, base, where)
    if not looks_like_path(source):
        return KernelSource(text=str(source), filename=f"<inline source of {where}>",
                            include_dirs=extra_dirs, **configuration)
    path = (base / Path(source)).resolve()
    if not path.is_file():
        raise SourceNotFoundError(
            f"{where}: source file {str(source)!r} not found (looked for {path}). Paths are "
            "relative to the file that declares the kernel; to pass C code inline, give text "
            "containing a newline."
        )
    return KernelSource(text=path.read_text(), filename=str(path), path=path,
                        include_dirs=(str(path.parent), *extra_dirs), **configuration)


def _checked_defines(defines: Mapping[str, object] | None, where: str):
    if defines is None:
        return ()
    if not isinstance(defines, Mapping):
        raise DeclarationError(f"{where}: defines must map macro names to values, e.g. "
                               "defines={'DATA_TYPE_IS_DOUBLE': 1}")
    for name, value in defines.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise DeclarationError(f"{where}: defines: {name!r} is not a C macro name")
        if value is not None and not isinstance(value, (bool, int, float, str)):
            raise DeclarationError(f"{where}: defines: {name}={value!r} must be a number, a "
                                   "string of C tokens or None (defined without a value)")
        if isinstance(value, str) and ("\n" in value or "\0" in value):
            raise DeclarationError(f"{where}: defines: {name}'s value must be one line")
    return tuple(sorted(defines.items()))


def _checked_include_dirs(include_dirs, base: Path, where: str) -> tuple[str, ...]:
    if isinstance(include_dirs, (str, os.PathLike)):
        raise DeclarationError(f"{where}: include_dirs must be a list of folders, e.g. "
                               f"include_dirs=[{str(include_dirs)!r}]")
    found = []
    for folder in include_dirs:
        path = (base / Path(folder)).resolve()
        if not path.is_dir():
            raise DeclarationError(f"{where}: include_dirs: folder {str(folder)!r} not found "
                                   f"(looked for {path}); folders are relative to the file "
                                   "that declares the kernel")
        found.append(str(path))
    return tuple(found)
