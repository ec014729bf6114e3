"""A CUDA file cut down, as text, to what one entry reaches.

Kernels live in .cu files next to their host code (``main``, allocation, ``<<<...>>>``
launches) and next to other kernels that may use what pytest-r3 does not support (grid-wide
sync, textures). nvcc builds all of it; pytest-r3 builds one kernel, so only what that
kernel reaches should be able to stop it. This module finds the file's top-level function
definitions (also inside namespaces and ``extern "C"`` blocks) and blanks those the entry
cannot reach, keeping every line where it was so clang's messages point at the file's own
lines. Reaching is by name: a definition is kept when its name appears in kept code, which
keeps every overload of a name (never too little). Types, variables, macros and
declarations always stay, and whatever names they use are reached too.

The project's own headers (found beside the file or in ``include_dirs=``, as clang finds
them) are read into the text first, each once, behind ``#line`` markers, so a common
header's host utilities are set aside as the file's own are. A rewrite's text (untrusted)
is cut but reads no header.

It reads text, never runs it, and gives the text back unchanged when it cannot follow the
file's braces (an ``#if`` whose branches open different blocks).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from ...model.source import KernelSource

_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"][^\n]*$', re.MULTILINE)

_TOKEN = re.compile(
    r"""(?P<skip>//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'"""
    r"""|^[ \t]*\#(?:\\\n|[^\n])*)"""
    r"""|(?P<word>[A-Za-z_]\w*)|(?P<punct>::|[{}()\[\];=<>])""",
    re.DOTALL | re.MULTILINE)
_TYPE_KEYWORDS = {"struct", "class", "union", "enum", "typedef", "using", "concept"}
# identifiers followed by a parenthesis that are not the function's name
_NOT_NAMES = {"__launch_bounds__", "__attribute__", "__declspec", "alignas", "__align__",
              "decltype", "noexcept", "throw", "requires", "__maxnreg__", "operator"}
_PREPROCESSOR_WORD = re.compile(r"[A-Za-z_]\w*")


class _Unfollowable(Exception):
    """The braces do not balance as written (preprocessor branches): do not cut."""


def entry_text(source: KernelSource, also: Sequence[str] = ()) -> str:
    """The text to compile for ``source.entry``: ``source.text`` with the project's headers
    read in and what the entry (and the entries in ``also``: the template instances the
    build adds for other kernels of the file) does not reach blanked; the text as it is
    without an entry."""
    if not source.entry:
        return source.text
    text = source.text
    if not source.untrusted:
        folder = Path(source.filename).parent if source.path is not None else None
        dirs = [Path(d) for d in source.include_dirs]
        text = _inline(text, source.filename, folder, dirs, set(), depth=0)
    return cut_to_entry(text, source.entry, also)


def _inline(text: str, filename: str, folder: Path | None, include_dirs: Sequence[Path],
            seen: set[Path], depth: int) -> str:
    """``text`` with each ``#include`` of a project header replaced by that header's text
    (read once; a second include of it is dropped, as its guard would)."""
    if depth > 32:
        return text
    pieces, position = [], 0
    for match in _INCLUDE.finditer(text):
        found = _find(match[2], folder, include_dirs)
        if found is None:
            continue
        after = text.count("\n", 0, match.end()) + 2  # the line after the #include
        pieces.append(text[position:match.start()])
        if found not in seen:
            seen.add(found)
            header = found.read_text(errors="replace")
            inner = _inline(header, str(found), found.parent, include_dirs, seen, depth + 1)
            pieces.append(f'#line 1 "{found}"\n{inner}\n')
        pieces.append(f'#line {after} "{filename}"\n')
        position = match.end() + (text[match.end():match.end() + 1] == "\n")
    pieces.append(text[position:])
    return "".join(pieces)


def _find(name: str, folder: Path | None, include_dirs: Sequence[Path]) -> Path | None:
    for directory in ([folder] if folder is not None else []) + list(include_dirs):
        candidate = directory / name
        if candidate.is_file():
            return candidate.resolve()
    return None


def cut_to_entry(text: str, entry: str, also: Sequence[str] = ()) -> str:
    """``text`` with the definitions ``entry`` (and ``also``) do not reach blanked out.

    An entry is a kernel's name, qualified or not, or a template instance
    (``"scale_tiles<16, float>"``); what is kept is found by its last name component.
    """
    name = _last_name(entry)
    if not name:
        return text
    try:
        definitions, reached = _scan(text)
    except _Unfollowable:
        return text
    if not any(d.name == name and d.kind == "function" for d in definitions):
        return text  # the entry is elsewhere (a header, a macro): cut nothing
    reached |= {name, *(_last_name(other) for other in also)}
    kept: set[int] = set()
    changed = True
    while changed:
        changed = False
        for index, definition in enumerate(definitions):
            if index not in kept and (definition.name in reached
                                      or definition.owner in reached):
                kept.add(index)
                reached |= definition.names
                changed = True
    pieces, position = [], 0
    for index, definition in enumerate(definitions):
        if index in kept or definition.kind == "macro":
            continue
        pieces.append(text[position:definition.start])
        pieces.append(_blank(text[definition.start:definition.end]))
        position = definition.end
    pieces.append(text[position:])
    return "".join(pieces)


def _last_name(entry: str) -> str:
    return re.split(r"::", entry.split("<", 1)[0].strip())[-1].strip()


class _Definition:
    """A function, class or macro defined at file scope: what it is called (a member
    function defined outside its class is kept with its ``owner``), where its text is, and
    the names it uses."""

    __slots__ = ("kind", "name", "owner", "start", "end", "names")

    def __init__(self, kind: str, name: str, owner: str | None, start: int, end: int,
                 names: set[str]) -> None:
        self.kind, self.name, self.owner = kind, name, owner
        self.start, self.end, self.names = start, end, names


def _blank(text: str) -> str:
    """Spaces for ``text``, its line breaks kept."""
    return re.sub(r"[^\n]", " ", text)


_DEFINE = re.compile(r"[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)(.*)", re.DOTALL)


def _scan(text: str) -> tuple[list[_Definition], set[str]]:
    """The file-scope definitions, and every name used outside them."""
    tokens = []
    for match in _TOKEN.finditer(text):
        if match["skip"] is not None:
            if match["skip"].lstrip().startswith("#"):
                tokens.append(("pp", match["skip"], match.start(), match.end()))
            continue
        kind = "word" if match["word"] is not None else "punct"
        tokens.append((kind, match.group(), match.start(), match.end()))
    definitions: list[_Definition] = []
    other: set[str] = set()
    _statements(tokens, 0, len(tokens), definitions, other)
    return definitions, other


def _statements(tokens, first: int, last: int, definitions: list[_Definition],
                other: set[str]) -> None:
    """File-scope statements of ``tokens[first:last]``: definitions go to ``definitions``;
    the names in everything else go to ``other``."""
    index = start = first  # the current token; the first token of the current statement
    while index < last:
        kind, value, begin, end = tokens[index]
        if kind == "pp":
            define = _DEFINE.match(value)
            if define:  # a macro reaches what it names where it is used
                definitions.append(_Definition("macro", define[1], None, begin, end,
                                               set(_PREPROCESSOR_WORD.findall(define[2]))))
            else:  # #if, #pragma... (never the file names of #include and #line)
                other.update(_PREPROCESSOR_WORD.findall(_directive_words(value)))
            if start == index:
                start = index + 1
            index += 1
            continue
        if value == ";":
            head = _code(tokens, start, index)
            if _function_head(head) is None:  # a prototype reaches nothing by itself
                _names_of(tokens, start, index + 1, other)
            index += 1
            start = index
            continue
        if value == "}":
            raise _Unfollowable()
        if value != "{":
            index += 1
            continue
        close = _matching(tokens, index, last)
        head = _code(tokens, start, index)
        words = [t[1] for t in head]
        if words == ["extern"] or "namespace" in words[:3]:  # extern "C" { }, namespaces
            _statements(tokens, index + 1, close, definitions, other)
            index = start = close + 1
            continue
        function = _function_head(head)
        named_class = _class_head(words) if function is None else None
        if function is None and named_class is None:
            index = close + 1  # an initialiser, an enum, an unnamed struct: runs to its ';'
            continue
        stop = close + 1
        if named_class is not None:  # struct S { ... } (declarators) ;
            while stop < last and tokens[stop][1] != ";":
                stop += 1
            if stop < last and stop > close + 1:  # it declares variables too: keep it
                index = close + 1
                continue
        names: set[str] = set()
        _names_of(tokens, start, min(stop + 1, last), names)
        if function is not None:
            name, owner = function
            definitions.append(_Definition("function", name, owner, tokens[start][2],
                                           tokens[close][3], names))
        else:
            definitions.append(_Definition("class", named_class, None, tokens[start][2],
                                           tokens[min(stop, last - 1)][3], names))
        index = stop + (named_class is not None or (stop < last and tokens[stop][1] == ";"))
        start = index
    if start < last:
        _names_of(tokens, start, last, other)


def _directive_words(directive: str) -> str:
    if re.match(r"\s*#\s*(?:include|line|error|warning)\b", directive):
        return ""
    return re.sub(r'"(?:\\.|[^"\\])*"|<[^>\n]*>', " ", directive)


def _code(tokens, first: int, last: int) -> list:
    return [t for t in tokens[first:last] if t[0] != "pp"]


def _matching(tokens, open_index: int, last: int) -> int:
    depth = 0
    for index in range(open_index, last):
        if tokens[index][0] != "punct":
            continue
        if tokens[index][1] == "{":
            depth += 1
        elif tokens[index][1] == "}":
            depth -= 1
            if depth == 0:
                return index
    raise _Unfollowable()


def _function_head(head) -> tuple[str, str | None] | None:
    """(name, owner class or None) when the tokens before a ``{`` (or ``;``) begin a
    function: a name followed by its parameter list, no ``=`` and no class keyword."""
    words = [t[1] for t in head]
    if not words or "=" in _outside_parentheses(words):
        return None
    if any(w in _TYPE_KEYWORDS for w in _outside_template(words)):
        return None
    depth = 0
    for index, word in enumerate(words):
        if word == "(":
            if depth == 0 and index > 0:
                name = words[index - 1]
                if re.fullmatch(r"[A-Za-z_]\w*", name) and name not in _NOT_NAMES:
                    return name, _owner(words, index - 1)
            depth += 1
        elif word == ")":
            depth -= 1
    return None


def _owner(words: list[str], name_index: int) -> str | None:
    """``Foo`` for ``Foo::bar(`` and ``Foo<T>::bar(``, None for a free function."""
    index = name_index - 1
    if index < 0 or words[index] != "::":
        return None
    index -= 1
    depth = 0
    while index >= 0 and (depth or words[index] == ">"):
        depth += {">": 1, "<": -1}.get(words[index], 0)
        index -= 1
    return words[index] if index >= 0 and re.fullmatch(r"[A-Za-z_]\w*", words[index]) \
        else None


def _class_head(words: list[str]) -> str | None:
    """The name of a struct, class or union being defined, or None (unnamed, an enum):
    the last plain name before its bases, attributes (``alignas(16)``) aside."""
    body = _outside_template(words)
    if not body or body[0] not in ("struct", "class", "union"):
        return None
    name, depth = None, 0
    for word in body[1:]:
        if word == "(":
            depth += 1
        elif word == ")":
            depth -= 1
        elif depth == 0 and word in (":", "final"):
            break
        elif depth == 0 and re.fullmatch(r"[A-Za-z_]\w*", word) and word not in _NOT_NAMES \
                and not word.startswith("__"):
            name = word
    return name


def _outside_parentheses(words: list[str]) -> list[str]:
    out, depth = [], 0
    for word in words:
        if word == "(":
            depth += 1
        elif word == ")":
            depth -= 1
        elif depth == 0:
            out.append(word)
    return out


def _outside_template(words: list[str]) -> list[str]:
    """``words`` without a leading ``template <...>`` (whose ``class T`` is no type)."""
    if words[:2] != ["template", "<"]:
        return words
    depth = 0
    for index, word in enumerate(words[1:], 1):
        if word == "<":
            depth += 1
        elif word == ">":
            depth -= 1
            if depth == 0:
                return _outside_template(words[index + 1:])
    return []


def _names_of(tokens, first: int, last: int, into: set[str]) -> None:
    for kind, value, _, _ in tokens[first:last]:
        if kind == "word":
            into.add(value)
        elif kind == "pp":
            into.update(_PREPROCESSOR_WORD.findall(_directive_words(value)))
