"""What clang may read, and what it may say, when the source is a candidate's rewrite.

A rewrite that includes /etc/passwd or /proc/self/environ would put that file's text into
clang's diagnostics, which go back to the model. Three layers: the text is refused before
clang runs if it names a file other than a header by a plain relative name; clang runs
inside a virtual file system that shows it only the directories it would search for the
kernel (its own folders, the toolchain's headers) and nothing else, not even its working
directory; and its diagnostics are cut down to what concerns the candidate's own text.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ..errors import CompileError

_HEADER_SUFFIXES = (".h", ".hh", ".hpp", ".hxx", ".h++", ".cuh", ".inc", ".inl", ".ipp",
                    ".tcc", ".def")
# extension-less names: only the C++ standard library's (CUDA sources are C++)
_STD_HEADERS = frozenset(
    "algorithm array atomic bit bitset cassert cfloat climits cmath complex cstddef cstdint "
    "cstdio cstdlib cstring functional initializer_list iterator limits memory new numbers "
    "numeric optional ratio tuple type_traits utility vector".split())
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")
_SPLICE = "\x01"  # stands for a line splice: counted as a line, ignored as text
_DIRECTIVE_LINE = re.compile(r"^[ \t\f\v]*(?:#|%:)[ \t\f\v]*([A-Za-z_]\w*|\d+)(.*)$")
_C_TOKENS = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|/\*.*?\*/|//[^\n]*',
                       re.DOTALL)
_HAS_FILE = re.compile(r"\b__has_(include_next|include|embed)\b\s*(\(\s*(?:\"[^\"\n]*\"|"
                       r"<[^>\n]*>)\s*\))?")
_PRAGMA_OPERATOR = re.compile(r"\b(_Pragma|__pragma)\b\s*(\(\s*(?:L|u8|u|U)?\"((?:[^\"\\\n]|"
                              r"\\.)*)\"\s*\))?")
# pragmas that look up files (dependency), dump compiler state or crash it (__debug), load
# modules or remap includes; also caught as bare words, since a macro may build the pragma
_FILE_PRAGMA = re.compile(r"\b(?:GCC|clang)\s+(?:dependency|system_header|__debug|module)\b"
                          r"|\binclude_alias\b|\b__debug\b")


def display_name(filename: str) -> str:
    """The candidate's file as diagnostics name it: its base name, no folder."""
    name = re.split(r"[\\/]", str(filename))[-1] or "candidate"
    return re.sub(r'["\\\x00-\x1f]', "_", name)


def _refuse(filename: str, line: int, what: str) -> CompileError:
    message = f"{display_name(filename)}: line {line}: {what}"
    return CompileError(message, diagnostics=message, kind="forbidden_include")


def _views(text: str) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """(line number, text) of the logical lines of ``text`` as written and with comments
    blanked. Directives are looked for in both: a comment the scanner misreads (inside a
    C++ raw string, say) must not hide a directive from the check."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = text.replace("??=", "#").replace("??/", "\\")  # trigraphs, where enabled
    spliced = re.sub(r"\\[ \t\f\v]*\n", _SPLICE, text)
    blanked = _C_TOKENS.sub(
        lambda m: m.group(0) if m.group(0)[0] in "\"'"
        else re.sub(rf"[^\n{_SPLICE}]", " ", m.group(0)), spliced)

    def lines(view: str) -> list[tuple[int, str]]:
        result, number = [], 1
        for line in view.split("\n"):
            result.append((number, line.replace(_SPLICE, "")))
            number += 1 + line.count(_SPLICE)
        return result

    return lines(spliced), lines(blanked)


def _check_header_name(filename: str, line: int, directive: str, name: str) -> None:
    if not name.strip():
        raise _refuse(filename, line, f"{directive} of an empty name is not allowed")
    if name.startswith(("/", "\\", "~")) or re.match(r"[A-Za-z]:", name):
        raise _refuse(filename, line, f"{directive} of an absolute path is not allowed in a "
                      "rewrite; include the kernel's own headers by name")
    if ".." in re.split(r"[\\/]", name):
        raise _refuse(filename, line, f"{directive} of a path containing '..' is not allowed "
                      "in a rewrite; include the kernel's own headers by name")
    base = re.split(r"[\\/]", name)[-1]
    if not base.lower().endswith(_HEADER_SUFFIXES) and name not in _STD_HEADERS:
        raise _refuse(filename, line, f"{directive} of a file that is not a header (.h, .hpp, "
                      ".cuh ...) is not allowed in a rewrite")


def check_candidate_includes(text: str, filename: str) -> None:
    """Refuse, before clang runs, candidate text that could make clang read a file other
    than the kernel's own headers: includes by absolute path, through ``..``, computed or
    of non-headers; ``#embed`` and ``__has_embed``; pragmas that look up files or dump
    compiler state; ``#line`` (diagnostics must point at the candidate's real lines).
    Raises :class:`CompileError` (``kind="forbidden_include"``) naming the line."""
    control = _CONTROL.search(text)
    if control:
        line = text.count("\n", 0, control.start()) + 1
        raise _refuse(filename, line, f"control character {control.group(0)!r} is not "
                      "allowed in a rewrite")
    written, blanked = _views(text)
    for number, line in [*blanked, *written]:
        directive = _DIRECTIVE_LINE.match(line)
        if directive is None:
            continue
        name, rest = directive.group(1), directive.group(2).strip()
        if name == "embed":
            raise _refuse(filename, number, "#embed is not allowed in a rewrite (it reads a "
                          "file into the program)")
        if name in ("line",) or name.isdigit():
            raise _refuse(filename, number, "#line is not allowed in a rewrite; diagnostics "
                          "must point at its real lines")
        if name in ("include", "include_next", "import"):
            literal = re.fullmatch(r'"([^"]*)"|<([^>]*)>', rest)
            if literal is None:
                raise _refuse(filename, number, f"#{name} must name a header literally "
                              "(\"name.h\" or <name.h>); computed includes are not allowed "
                              "in a rewrite")
            _check_header_name(filename, number, f"#{name}", literal.group(1)
                               if literal.group(1) is not None else literal.group(2))
        if name == "pragma" and _FILE_PRAGMA.search(rest):
            raise _refuse(filename, number, f"#pragma {rest.split()[0]} ... is not allowed in "
                          "a rewrite (it looks up files or dumps compiler state)")
    for number, line in [*blanked, *written]:
        for found in _HAS_FILE.finditer(line):
            if found.group(1) == "embed":
                raise _refuse(filename, number, "__has_embed is not allowed in a rewrite")
            if found.group(2) is None:
                raise _refuse(filename, number, f"__has_{found.group(1)} must name a header "
                              "literally in a rewrite")
            _check_header_name(filename, number, f"__has_{found.group(1)}",
                               found.group(2).strip()[1:-1].strip()[1:-1])
        for found in _PRAGMA_OPERATOR.finditer(line):
            if found.group(2) is None:
                raise _refuse(filename, number, f"{found.group(1)} must be given a string "
                              "literal in a rewrite")
        if _FILE_PRAGMA.search(line):
            raise _refuse(filename, number, "this pragma is not allowed in a rewrite (it looks "
                          "up files or dumps compiler state)")


_SEARCH_HEAD = re.compile(r'^#include (?:"\.\.\."|<\.\.\.>) search starts here:$')


@functools.lru_cache(maxsize=64)
def _search_dirs(query: tuple[str, ...]) -> tuple[str, ...]:
    """The directories clang searches for headers with these flags (``-E -v``)."""
    out = subprocess.run([*query, "-E", "-v", os.devnull], capture_output=True, text=True,
                         timeout=120, stdin=subprocess.DEVNULL, check=False,
                         env=_clean_environment())
    dirs, listing = [], False
    for line in out.stderr.splitlines():
        if _SEARCH_HEAD.match(line):
            listing = True
        elif line.startswith("End of search list."):
            listing = False
        elif listing and line.startswith(" "):
            dirs.append(line.strip().removesuffix(" (framework directory)"))
    return tuple(dirs)


def _visible_dirs(args: Sequence[str], include_dirs: Sequence[str | os.PathLike]) -> list[str]:
    """What a candidate's compile may read: the directories clang would search for the
    kernel (never its working directory) and the folders of forced includes."""
    cut = len(args) - 1 - args[::-1].index("-S")
    language = args[args.index("-x", cut) + 1] if "-x" in args[cut:] else "c"
    flags = [a for a in args[:cut] if not (a.startswith("-D") and len(a) > 2)]  # macros
    dirs = list(_search_dirs((*flags, "-x", language)))
    dirs += [str(d) for d in include_dirs]
    for option, value in zip(args, args[1:]):
        if option in ("-include", "-imacros"):
            dirs.append(os.path.dirname(value))
    seen: dict[str, None] = {}
    for d in dirs:
        for form in (d, os.path.abspath(d), os.path.realpath(d)):
            if os.path.isdir(form):
                seen.setdefault(form)
    return list(seen)


def _overlay(dirs: Sequence[str]) -> str:
    """A clang VFS overlay that shows ``dirs`` and nothing else of the file system."""
    import json

    return json.dumps({
        "version": 0, "redirecting-with": "redirect-only", "case-sensitive": True,
        "roots": [{"type": "directory-remap", "name": d, "external-contents": d}
                  for d in dirs]})


_KEPT_ENVIRONMENT = ("PATH", "TMPDIR", "TEMP", "TMP", "SYSTEMROOT", "HOME")


def _clean_environment() -> dict[str, str]:
    """No CPATH, C_INCLUDE_PATH, CCC_OVERRIDE_OPTIONS...: nothing that adds search paths or
    flags behind the command line's back."""
    environment = {k: v for k, v in os.environ.items() if k in _KEPT_ENVIRONMENT}
    environment["LC_ALL"] = "C"
    return environment


# put before a candidate's text: ``__has_embed`` however it is spelled (token pasting builds
# it past the textual check) is an error, so no file's contents can steer a rewrite's build
POISON = "#pragma GCC poison __has_embed\n"
_POISONED = re.compile(r"^(?P<where>[^\n]*?):(?P<line>\d+):\d+: error: attempt to use a "
                       r"poisoned identifier", re.MULTILINE)
# token pasting, as written, as a digraph, or as trigraphs (see _views)
_PASTE = re.compile(r"##|%:%:")


def check_token_pasting(text: str, baseline_text: str, filename: str) -> None:
    """Refuse token pasting in a rewrite whose kernel never pastes tokens: ``__has_`` and
    ``include`` pasted together make a ``__has_include`` of any path that the textual check
    never sees, and the judge's build (which sees only the kernel's folders) and the
    user's (which sees the whole disk) answer it differently. Raises :class:`CompileError`
    (``kind="forbidden_include"``) naming the line."""
    if any(_PASTE.search(line) for _, line in _views(baseline_text)[1]):
        return
    for number, line in _views(text)[1]:
        if _PASTE.search(line):
            raise _refuse(filename, number, "token pasting (##) is not allowed in a rewrite "
                          "of a kernel that does not paste tokens itself (it can spell a file "
                          "lookup the include check cannot see)")


def compile_untrusted(args: list[str], text: str, source: str, filename: str,
                      include_dirs: Sequence[str | os.PathLike], toolchain: Sequence[str]) -> str:
    """clang on a candidate's text: refused before it runs if it names other files, run in
    a file system showing only the kernel's and the toolchain's header directories, with a
    clean environment (no CPATH, no CCC_OVERRIDE_OPTIONS), its diagnostics sanitised;
    ``__has_embed`` poisoned (see POISON)."""
    check_candidate_includes(source, filename)
    text = POISON + text
    dirs = _visible_dirs(args, include_dirs)
    overlay = _overlay(dirs).encode()
    environment = _clean_environment()
    extra = ["-fno-crash-diagnostics", "-fno-color-diagnostics"]
    if hasattr(os, "memfd_create"):  # in memory: nothing written to disk
        descriptor = os.memfd_create("r3-overlay")
        try:
            os.write(descriptor, overlay)
            # from an empty folder, as every trusted build is (clang._compile): a relative
            # name finds nothing there, in the judge's build and in the user's alike
            with tempfile.TemporaryDirectory(prefix="r3-candidate-") as empty:
                result = subprocess.run(
                    [*args[:-1], *extra, f"-ivfsoverlay/dev/fd/{descriptor}", args[-1]],
                    input=text.encode(), capture_output=True, timeout=300, cwd=empty,
                    env=environment, pass_fds=(descriptor,))
        finally:
            os.close(descriptor)
    else:
        with tempfile.TemporaryDirectory(prefix="r3-candidate-") as scratch:
            path = os.path.join(scratch, "overlay.json")
            Path(path).write_bytes(overlay)
            result = subprocess.run([*args[:-1], *extra, f"-ivfsoverlay{path}", args[-1]],
                                    input=text.encode(), capture_output=True, timeout=300,
                                    cwd=scratch, env=environment)
    if result.returncode != 0:
        poisoned = _POISONED.search(result.stderr.decode(errors="replace"))
        if poisoned:
            raise _refuse(filename, int(poisoned.group("line")), "__has_embed is not allowed "
                          "in a rewrite, however it is spelled (it reads files)")
        diagnostics = sanitize_diagnostics(result.stderr.decode(errors="replace"), filename,
                                           include_dirs=include_dirs, toolchain=toolchain)
        first = next((line for line in diagnostics.splitlines() if "error" in line),
                     "clang rejected the rewrite")
        raise CompileError(f"clang could not compile the rewrite "
                           f"({display_name(filename)}): {first}\n\n{diagnostics}",
                           diagnostics=diagnostics)
    return result.stdout.decode()


_LOCATED = re.compile(r"^(?P<file>.+?):(?P<line>\d+):(?:(?P<col>\d+):)? "
                      r"(?P<severity>fatal error|error|warning|note|remark): (?P<message>.*)$")
_INCLUDED_FROM = re.compile(r"^(?:In file included from| {17}from) (?P<file>.+?):(?P<line>\d+)"
                            r"[:,]$")
_SNIPPET = re.compile(r"^\s*\d*\s*\|.*$")
_SUMMARY = re.compile(r"^\d+ (?:errors?|warnings?)(?: and \d+ warnings?)? generated"
                      r"(?: when compiling for [\w.-]+)?\.$")
_ABSOLUTE = re.compile(r"(?<![\w.])(?:[A-Za-z]:)?[\\/](?:[\w.@+~-]+[\\/])*[\w.@+~-]+")
_VIRTUAL = ("<built-in>", "<command line>", "<scratch space>", "<stdin>")


def toolchain_dirs(clang) -> list[str]:
    """Header folders of the toolchain itself (the project's CUDA header, clang's, libc's):
    diagnostics may name files there by a short label."""
    dirs = [str(Path(__file__).resolve().parent.parent / "include")]
    if clang is None:
        return dirs
    for value in clang.command[:1]:
        dirs.append(str(Path(value).resolve().parent))
    dirs += [v for o, v in zip(clang.system_flags, clang.system_flags[1:]) if o == "-isystem"]
    return dirs


def sanitize_diagnostics(stderr: str, filename: str, *,
                         include_dirs: Sequence[str | os.PathLike] = (),
                         toolchain: Sequence[str] = ()) -> str:
    """clang's diagnostics cut down to what concerns the candidate's own text.

    Kept: ``name:line:col: severity: message`` about the candidate (named by its base name)
    and the candidate's own lines clang quotes under them; for diagnostics located in the
    kernel's or the toolchain's headers, the location (short name) and message, never the
    quoted line; the "N errors generated." summary. Dropped: anything located in any other
    file, quoted lines of other files, crash dumps and other chatter. No absolute path
    survives: known folders become ``<kernel>`` or ``<toolchain>``, others ``<path>``."""
    own_names = {str(filename), display_name(filename), "<stdin>"}
    kernel = [os.path.abspath(str(d)) for d in include_dirs]
    tools = [os.path.abspath(d) for d in toolchain]
    places = sorted([(d, "<kernel>") for d in kernel] + [(d, "<toolchain>") for d in tools],
                    key=lambda pair: -len(pair[0]))

    def short(path: str) -> str | None:
        """A file's name without its folder, or None for a file outside the known ones."""
        if path in own_names:
            return display_name(filename)
        if path in _VIRTUAL:
            return path
        absolute = os.path.abspath(path)
        for folder, label in places:
            if absolute == folder or absolute.startswith(folder.rstrip("/\\") + os.sep):
                return f"{label}/{os.path.relpath(absolute, folder)}"
        return None

    def scrub(message: str) -> str:
        message = message.replace(str(filename), display_name(filename))
        for folder, label in places:
            message = message.replace(folder, label)
        return _ABSOLUTE.sub("<path>", message)

    kept: list[str] = []
    quoting = False  # the lines clang quotes belong to the last located diagnostic
    for line in stderr.splitlines():
        located = _LOCATED.match(line)
        if located:
            where = short(located.group("file"))
            quoting = where == display_name(filename)
            column = f":{located.group('col')}" if located.group("col") else ""
            if where is None:
                kept.append(f"<another file>: {located.group('severity')}: (not shown: it is "
                            "about a file outside the rewrite)")
            else:
                kept.append(f"{where}:{located.group('line')}{column}: "
                            f"{located.group('severity')}: {scrub(located.group('message'))}")
            continue
        included = _INCLUDED_FROM.match(line)
        if included:
            quoting = False
            where = short(included.group("file"))
            if where is not None:
                kept.append(f"In file included from {where}:{included.group('line')}:")
            continue
        if _SNIPPET.match(line):
            if quoting:
                kept.append(line)
            continue
        quoting = False
        if _SUMMARY.match(line.strip()):
            kept.append(line.strip())
    return "\n".join(kept)


