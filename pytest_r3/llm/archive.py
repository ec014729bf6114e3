"""A MAP-Elites archive with islands: diverse good rewrites, not one best.

A candidate's descriptors put it in a cell: its code size (lines, bucketed) and the
deepest loop nesting in its source. Each island keeps the best candidate per cell; parents
and inspirations are drawn from an island, and every few generations each island's best
migrates to the next island.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field


@dataclass
class Elite:
    source: str
    loss: float                      # candidate time / baseline time (lower is better)
    speedup: float
    macros: dict = field(default_factory=dict)
    pipeline: dict = field(default_factory=dict)
    generation: int = 0
    summary: str = ""


def loop_depth(source: str) -> int:
    """Deepest nesting of for/while loops, from braces and loop keywords."""
    depth = best = 0
    stack: list[bool] = []
    pending_loop = False
    for token in re.findall(r"\b(?:for|while)\b|[{};]", source):
        if token in ("for", "while"):
            pending_loop = True
            depth += 1
            best = max(best, depth)
            stack.append(True)
        elif token == "{":
            stack.append(False)
        elif token == "}":
            if stack:
                stack.pop()
            while stack and stack[-1]:
                stack.pop()
                depth -= 1
        elif token == ";" and pending_loop:
            pending_loop = False
    return best


def descriptors(source: str) -> tuple[int, int]:
    lines = sum(1 for line in source.splitlines() if line.strip())
    return (min(lines // 15, 6), min(loop_depth(source), 6))


class Archive:
    def __init__(self, islands: int = 2, seed: int = 0) -> None:
        self.islands: list[dict[tuple[int, int], Elite]] = [{} for _ in range(max(1, islands))]
        self.random = random.Random(seed)

    def add(self, island: int, elite: Elite) -> bool:
        """Keep ``elite`` if its cell is empty or it beats the cell's elite."""
        cell = descriptors(elite.source)
        current = self.islands[island].get(cell)
        if current is None or elite.loss < current.loss:
            self.islands[island][cell] = elite
            return True
        return False

    def best(self, island: int | None = None) -> Elite | None:
        pools = self.islands if island is None else [self.islands[island]]
        elites = [e for pool in pools for e in pool.values()]
        return min(elites, key=lambda e: e.loss, default=None)

    def sample_parent(self, island: int) -> Elite | None:
        """Tournament of two within the island: mostly good parents, some diversity."""
        elites = list(self.islands[island].values())
        if not elites:
            return None
        picks = [self.random.choice(elites) for _ in range(2)]
        return min(picks, key=lambda e: e.loss)

    def inspirations(self, island: int, parent: Elite, count: int = 1) -> list[Elite]:
        others = [e for e in self.islands[island].values() if e is not parent]
        self.random.shuffle(others)
        return others[:count]

    def migrate(self) -> None:
        """Each island's best goes to the next island (a ring)."""
        bests = [self.best(i) for i in range(len(self.islands))]
        for index, elite in enumerate(bests):
            if elite is not None:
                self.add((index + 1) % len(self.islands), elite)

    def cells(self) -> list[dict]:
        return [{"island": i, "cell": list(cell), "speedup": e.speedup,
                 "generation": e.generation}
                for i, pool in enumerate(self.islands) for cell, e in sorted(pool.items())]
