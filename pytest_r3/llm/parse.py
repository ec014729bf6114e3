"""Getting a kernel source out of a model's answer: a code fence or search/replace blocks.

Anything that does not parse is a failed attempt with a reason, not an exception.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_FENCE = re.compile(r"```[ \t]*([\w+.-]*)[^\n]*\n(.*?)```", re.DOTALL)
_BLOCK = re.compile(r"<<<<<<< SEARCH\n(.*?)\n=======\n(.*?)\n>>>>>>> REPLACE", re.DOTALL)
_C_LANGS = {"", "c", "cpp", "c++", "cu", "cuda", "h"}


@dataclass(frozen=True)
class Parsed:
    source: str | None
    reason: str = ""
    form: str = ""  # "fence" or "search/replace"


def parse_answer(answer: str, original: str, entry: str) -> Parsed:
    """The new full source text, from search/replace blocks or the last C code fence."""
    blocks = _BLOCK.findall(answer)
    if blocks:
        text = original
        for search, replace in blocks:
            if search not in text:
                first = search.strip().splitlines()[0] if search.strip() else "(empty)"
                return Parsed(None, f"a SEARCH block does not match the source exactly (it "
                                    f"starts with {first!r}); copy the lines verbatim",
                              "search/replace")
            text = text.replace(search, replace, 1)
        return _checked(text, original, entry, "search/replace")
    fences = [(lang.lower(), body) for lang, body in _FENCE.findall(answer)]
    code = [body for lang, body in fences if lang in _C_LANGS]
    if not code:
        return Parsed(None, "no ```c code block and no SEARCH/REPLACE block in the answer")
    return _checked(code[-1], original, entry, "fence")


def _checked(text: str, original: str, entry: str, form: str) -> Parsed:
    if not re.search(rf"\b{re.escape(entry)}\s*\(", text):
        return Parsed(None, f"the rewrite does not define the entry function {entry!r}", form)
    if text.strip() == original.strip():
        return Parsed(None, "the rewrite is identical to the current source", form)
    if not text.endswith("\n"):
        text += "\n"
    return Parsed(text, "", form)
