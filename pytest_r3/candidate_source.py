"""What clang may read, and what it may say, when the source is a candidate's (untrusted).

A rewrite that includes ``/etc/passwd`` or ``/proc/self/environ`` would put that file's
text into clang's diagnostics (which go back to the model as repair feedback), or into the
kernel itself. So candidate text: may include only by a literal relative name (no absolute
path, no ``..``, no computed include, no ``#embed``); is compiled from a directory of the
kernel's own, and every file it pulled in must lie under the kernel's include directories
or the toolchain's headers; and its diagnostics keep only what concerns its own text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from .errors import CompileError

_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.DOTALL)
_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*(include_next|include|import|embed|pragma)\b(.*)$",
                        re.MULTILINE)
_HAS = re.compile(r"__has_(?:include_next|include|embed)\s*\(\s*[<\"]([^>\"]*)[>\"]")
_INCLUDE_DIRS = ("-I", "-isystem", "-iquote", "-idirafter", "-cxx-isystem")


def _refuse(line: int, what: str) -> CompileError:
    return CompileError(f"line {line}: {what}", diagnostics=f"line {line}: {what}",
                        kind="forbidden_include")


def check_directives(text: str) -> None:
    """Refuse, before clang runs, every way of naming a file outside the kernel's own."""
    joined = text.replace("\\\n", "")  # line splices are undone before directives are read
    cleaned = _COMMENT.sub(lambda m: "\n" * m.group(0).count("\n") or " ", joined)
    for match in _DIRECTIVE.finditer(cleaned):
        line = cleaned.count("\n", 0, match.start()) + 1
        directive, rest = match.group(1), match.group(2).strip()
        if directive == "embed":
            raise _refuse(line, "#embed is not allowed in a rewrite")
        if directive == "pragma":
            if re.search(r"\bdependency\b|\bsystem_header\b", rest):
                raise _refuse(line, f"#pragma {rest.split()[0] if rest else ''} ... is not "
                              "allowed in a rewrite")
            continue
        literal = re.fullmatch(r"[<\"]([^>\"]+)[>\"]", rest)
        if literal is None:
            raise _refuse(line, f"#{directive} must name a header literally (\"name.h\" or "
                          "<name.h>); computed includes are not allowed in a rewrite")
        _check_name(line, directive, literal.group(1))
    for match in _HAS.finditer(cleaned):
        _check_name(cleaned.count("\n", 0, match.start()) + 1, "__has_include", match.group(1))


def _check_name(line: int, directive: str, name: str) -> None:
    if name.startswith(("/", "~")) or re.match(r"[A-Za-z]:[\\/]", name):
        raise _refuse(line, f"#{directive} of an absolute path is not allowed in a rewrite; "
                      "include the kernel's own headers by name")
    if ".." in Path(name).parts:
        raise _refuse(line, f"#{directive} with '..' is not allowed in a rewrite; include the "
                      "kernel's own headers by name")


def allowed_roots(args: Sequence[str], include_dirs: Sequence[str]) -> list[Path]:
    """Directories a candidate's includes may resolve into: the kernel's and the headers
    the toolchain itself put on the command line."""
    roots = [Path(d) for d in include_dirs]
    for option, value in zip(args, args[1:]):
        if option in _INCLUDE_DIRS:
            roots.append(Path(value))
    roots += [Path(a[2:]) for a in args if a.startswith("-I") and len(a) > 2]
    return [r.resolve() for r in roots]


def check_dependencies(make_rule: str, roots: Sequence[Path]) -> None:
    """Every file clang read (from its ``-MD`` output) must lie under ``roots``."""
    _, _, listed = make_rule.replace("\\\n", " ").partition(": ")
    for name in listed.split():
        if name in ("-", "<stdin>"):
            continue
        path = Path(name).resolve()
        if not any(path == root or root in path.parents for root in roots):
            raise CompileError("a rewrite included a file outside the kernel's include "
                               "directories and the toolchain's headers",
                               diagnostics="a rewrite may include only the kernel's own "
                               "headers and the toolchain's", kind="forbidden_include")


def sanitize_diagnostics(stderr: str, filename: str) -> str:
    """clang's output about the candidate's own text only, with no local path in it.

    Diagnostics located in another file (a header) become one line saying so; notes such
    as "In file included from" go; the candidate's file is named by its base name."""
    base = Path(filename).name
    kept: list[str] = []
    own = False
    for line in stderr.splitlines():
        located = re.match(r"^(.*?):(\d+):(?:(\d+):)? (error|warning|note|fatal error): (.*)$",
                           line)
        if located:
            own = located.group(1) == filename
            if own:
                kept.append(f"{base}:{located.group(2)}:{located.group(3) or 1}: "
                            f"{located.group(4)}: {_strip_paths(located.group(5))}")
            elif located.group(4) in ("error", "fatal error"):
                kept.append(f"{base}: {located.group(4)}: in an included header (not shown)")
            continue
        if line.startswith("In file included from") or line.startswith("                 from"):
            continue
        if own and re.match(r"^\s*(\d+\s*\|.*|\|.*|\s*[~^ ]*\^[~^ ]*)$", line):
            kept.append(line)  # the candidate's own line quoted, and the caret under it
            continue
        if re.match(r"^\d+ (errors?|warnings?)( and \d+ warnings?)? generated\.$", line):
            kept.append(line)
    return "\n".join(kept)


def _strip_paths(message: str) -> str:
    return re.sub(r"(?<![\w.])/[^\s'\"]+", lambda m: Path(m.group(0)).name or "<path>",
                  message)
