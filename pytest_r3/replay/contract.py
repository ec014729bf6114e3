"""What a rewrite assumes about its callers that the baseline does not, read from the IR
clang makes of each (before any optimisation): ``restrict`` (``noalias`` on a parameter),
alignment (``align`` on a parameter or an ``"align"`` assumption), and conditions of its own
(``__builtin_assume``). Each narrows what callers may pass.

Where the judge verified the candidate with the parameters in question sharing a buffer
(recorded in place or overlapping, or in place derived where the baseline gives the same
result), the candidate has already shown it copes, and nothing is said. Elsewhere a
candidate is kept with its assumptions written out ("assumes: x and y do not overlap") in
its verdict, its patch header and the reports, for the reviewer. ``r3.kernel(...,
no_alias=True)`` declares that callers never pass overlapping buffers, which silences the
overlap note.
"""

from __future__ import annotations

import re
from collections import Counter

_DEFINE = r"define\b[^@\n]*@{name}\("
_ALIGN_BUNDLE = re.compile(r'"align"\(ptr [^,]+, i\d+ (\d+)')
_CONDITION = re.compile(r"call void @llvm\.assume\(i1 %")
_ALIGN_ATTRIBUTE = re.compile(r"\balign (\d+)")


def parameters(ir: str, entry: str) -> dict[str, str]:
    """The entry's parameters in ``ir``: name -> the attributes written before it."""
    match = re.search(_DEFINE.format(name=re.escape(entry)), ir)
    if match is None:
        return {}
    depth, start, found = 1, match.end(), {}
    end = start
    while end < len(ir) and depth:
        depth += {"(": 1, ")": -1}.get(ir[end], 0)
        end += 1
    for part in ir[start:end - 1].split(","):
        named = re.search(r"%([-\w.$]+)\s*$", part.strip())
        if named:
            found[named.group(1)] = part
    return found


def assumptions(baseline_ir: str, candidate_ir: str, entry: str, params: list[dict],
                shared: set[frozenset[str]], no_alias: bool = False) -> list[str]:
    """What ``candidate_ir`` assumes that ``baseline_ir`` does not, one phrase each;
    ``shared``: parameter pairs the candidate was verified with as one buffer."""
    before, after = parameters(baseline_ir, entry), parameters(candidate_ir, entry)
    pointers = [p["name"] for p in params if p["is_pointer"]]
    written = {p["name"] for p in params if p["is_pointer"] and p["written"]}
    found: list[str] = []
    restricted = [name for name in pointers if "noalias" in after.get(name, "")
                  and "noalias" not in before.get(name, "")]
    if not no_alias:
        pairs = []
        for name in restricted:
            for other in pointers:
                pair = tuple(sorted((name, other), key=pointers.index))
                if other != name and (name in written or other in written) and \
                        frozenset(pair) not in shared and pair not in pairs:
                    pairs.append(pair)
        found += [f"{a} and {b} do not overlap" for a, b in sorted(
            pairs, key=lambda p: (pointers.index(p[0]), pointers.index(p[1])))]
    for name in pointers:
        had = _ALIGN_ATTRIBUTE.search(before.get(name, ""))
        has = _ALIGN_ATTRIBUTE.search(after.get(name, ""))
        if has and (not had or int(has.group(1)) > int(had.group(1))):
            found.append(f"{name} is {has.group(1)}-byte aligned")
    gained = Counter(_ALIGN_BUNDLE.findall(candidate_ir)) - Counter(
        _ALIGN_BUNDLE.findall(baseline_ir))
    found += [f"a pointer is {size}-byte aligned (__builtin_assume_aligned)"
              for size in sorted(gained, key=int)]
    if len(_CONDITION.findall(candidate_ir)) > len(_CONDITION.findall(baseline_ir)):
        found.append("a condition of its own holds (__builtin_assume)")
    return found
