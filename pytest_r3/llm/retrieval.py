"""Examples to show the model: a small built-in catalogue of classic kernel optimisations,
plus rewrites accepted in earlier runs of this repository, ranked by word overlap."""

from __future__ import annotations

import json
import math
import re
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ..errors import CorruptStateWarning
from ..outputs import file_lock, write_json_atomic


@dataclass(frozen=True)
class Example:
    title: str
    text: str
    source: str = "catalogue"
    tags: frozenset = frozenset()


CATALOGUE = (
    Example("Loop interchange for unit-stride access",
            "In a matrix multiply with i-j-k order, the inner k loop reads b[k*n+j] with stride "
            "n. Reorder to i-k-j: hoist a[i*n+k] into a scalar and stream c[i*n+j] += aik * "
            "b[k*n+j] over j, which is unit-stride in both c and b and vectorises. Zero c "
            "first. Same for any loop nest whose innermost loop strides over rows.",
            tags=frozenset(["strided", "nested3"])),
    Example("Cache blocking (tiling)",
            "Split each loop of a nest into blocks so the working set of the innermost blocks "
            "fits in L1/L2: for (ii...; ii += T) for (kk...; kk += T) for (i = ii; i < "
            "min(ii+T, n); ...). Keep the unit-stride loop innermost; handle remainders with "
            "min().",
            tags=frozenset(["nested3", "nested2", "large"])),
    Example("Scalar replacement and register accumulation",
            "Accumulate into a local variable instead of re-reading and re-writing memory in "
            "the inner loop: double sum = 0; for (k...) sum += a[..]*b[..]; c[..] = sum;",
            tags=frozenset(["reduction", "nested3"])),
    Example("restrict pointers",
            "Declare non-aliasing array parameters with restrict (float *restrict y) so the "
            "compiler may vectorise without runtime alias checks. Keep the parameter types "
            "otherwise identical.",
            tags=frozenset(["elementwise"])),
    Example("Unroll and jam",
            "Unroll an outer loop by 2-4 and fuse the copies of the inner loop, so each loaded "
            "value is used several times: compute rows i and i+1 together in a stencil or a "
            "matrix multiply; handle an odd remainder row separately.",
            tags=frozenset(["stencil", "nested2"])),
    Example("Hoist loop invariants and strength-reduce indices",
            "Compute row base pointers (const float *row = in + i*cols) outside the inner loop "
            "and index row[j-1], row[j], row[j+1]; this removes multiplications and helps the "
            "vectoriser recognise contiguous accesses.",
            tags=frozenset(["stencil", "nested2"])),
    Example("Split boundary handling from the interior",
            "Handle the first/last rows and columns in separate simple loops and keep the "
            "interior loop branch-free so it vectorises.",
            tags=frozenset(["stencil"])),
)


def _words(text: str) -> Counter:
    return Counter(w for w in re.findall(r"[a-z]+", text.lower()) if len(w) > 2)


def code_tags(source: str) -> set[str]:
    """Structural facts about a kernel that make an optimisation relevant."""
    from .archive import loop_depth

    tags = set()
    depth = loop_depth(source)
    tags.add("elementwise" if depth <= 1 else f"nested{min(depth, 3)}")
    loop_vars = re.findall(r"for\s*\(\s*(?:int|long|size_t|unsigned)?\s*(\w+)\s*=", source)
    order = {name: index for index, name in enumerate(loop_vars)}
    for outer_of_row, inner_col in re.findall(r"\[\s*(\w+)\s*\*\s*\w+\s*\+\s*(\w+)\s*\]",
                                              source):
        if order.get(outer_of_row, -1) > order.get(inner_col, 10**6):
            tags.add("strided")  # the row index varies faster than the column index
    if re.search(r"\[[^\]]*[+-]\s*1\s*\]", source):
        tags.add("stencil")
    if any(name not in order for name in re.findall(r"\b(\w+)\s*\+=", source)):
        tags.add("reduction")  # an accumulation, not a loop increment
    return tags


class ExampleIndex:
    """Catalogue plus accepted rewrites (``<r3 dir>/runs/accepted.json``), ranked for a
    query (the parent's source and measurements) by the structural tags they share (strided
    inner loop, stencil, reduction, nesting depth) plus the cosine similarity of words."""

    def __init__(self, accepted_path: Path | None = None, catalogue=CATALOGUE) -> None:
        self.accepted_path = accepted_path
        self.examples = list(catalogue)
        for item in self._accepted(warn=True):
            self.examples.append(Example(item["title"], item["text"], "accepted",
                                         frozenset(code_tags(item["text"]))))

    def _accepted(self, warn: bool = False) -> list[dict]:
        """The accepted rewrites on disk; an unreadable file, or an item that is not an
        example, is left out (with a warning naming the file when ``warn``)."""
        if self.accepted_path is None:
            return []
        try:
            items = json.loads(self.accepted_path.read_text())
        except FileNotFoundError:
            return []
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            if warn:
                warnings.warn(CorruptStateWarning(
                    f"pytest-r3: ignoring {self.accepted_path}: not readable JSON "
                    f"({' '.join(str(exc).split())}); it is rewritten by the next accepted "
                    "rewrite"), stacklevel=3)
            return []
        if not isinstance(items, list):
            items = []
        good = [i for i in items if isinstance(i, dict) and isinstance(i.get("title"), str)
                and isinstance(i.get("text"), str)]
        if warn and len(good) != len(items):
            warnings.warn(CorruptStateWarning(
                f"pytest-r3: {self.accepted_path}: ignored {len(items) - len(good)} item(s) "
                "that are not examples (title and text)"), stacklevel=3)
        return good

    def top(self, query: str, count: int = 2) -> list[Example]:
        wanted = _words(query)
        tags = code_tags(query)
        if not wanted or count <= 0:
            return []
        query_norm = math.sqrt(sum(v * v for v in wanted.values())) or 1.0

        def score(example: Example) -> float:
            words = _words(example.title + " " + example.text)
            dot = sum(wanted[w] * words[w] for w in wanted)
            norm = math.sqrt(sum(v * v for v in words.values())) or 1.0
            shared = tags & example.tags
            return (len(shared) + ("strided" in shared) + dot / (norm * query_norm)
                    + (0.5 if example.source == "accepted" else 0.0))

        ranked = sorted(self.examples, key=score, reverse=True)
        return [e for e in ranked[:count] if score(e) > 0]

    def remember(self, kernel: str, before: str, after: str, speedup: float) -> None:
        """Store an accepted rewrite as a future example (one per kernel: the latest).

        The file is re-read and written under its lock, so runs tuning other kernels at
        the same time keep theirs; an unreadable file is replaced.
        """
        if self.accepted_path is None:
            return
        with file_lock(self.accepted_path):
            items = [i for i in self._accepted() if i.get("kernel") != kernel]
            items.append({"kernel": kernel, "speedup": speedup,
                          "title": f"Accepted rewrite of {kernel} ({speedup:.2f}x)",
                          "text": f"Before:\n{before}\nAfter:\n{after}"})
            write_json_atomic(self.accepted_path, items)
