"""Capturing timing workloads: launches at the sizes users run, sampled so that recording a
long-running program stays cheap.

Every launch is counted by its shape (array shapes and dtypes, integer scalars); only the
first ``first`` launches of each shape, then every ``every``-th, are captured (inputs and
outputs copied), and capturing stops once ``cap_bytes`` are held. At the end each shape's
launch count is spread over its captured recordings as their weight, so the timing
objective is the total time the counted launches would take.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from .store import Recording, capture

DEFAULT_FIRST = 1
DEFAULT_EVERY = 0  # 0: only the first ``first`` launches of a shape are captured


def launch_shape(args: tuple) -> tuple:
    """What tells launches apart for timing, read without copying anything: each array's
    shape and dtype, each integer scalar's value."""
    parts = []
    for value in args:
        shape = getattr(value, "shape", None)
        if shape is not None:
            parts.append((tuple(shape), str(getattr(value, "dtype", ""))))
        elif isinstance(value, (bool, int)) or type(value).__name__.startswith(("int", "uint")):
            parts.append(int(value))
        else:
            parts.append(None)  # a float scalar: its value does not change the work
    return tuple(parts)


@dataclass
class _Shape:
    launches: int = 0
    weight: float = 0.0
    captured: list[Recording] = field(default_factory=list)


@dataclass
class WorkloadSampler:
    """Counts and samples the launches of one recording session (see the module doc)."""

    run: str                       # the session: saves of one run add up
    first: int = DEFAULT_FIRST
    every: int = DEFAULT_EVERY
    cap_bytes: int = 64 * 2**20
    held_bytes: int = 0
    over_cap: int = 0              # launches not captured because the cap was reached
    kernels: dict = field(default_factory=dict)  # name -> kernel object
    _shapes: dict = field(default_factory=lambda: defaultdict(_Shape))

    def launch(self, kernel, args: tuple, proceed: Callable[[], object], origin: str,
               weight: float = 1.0) -> object:
        """Run one launch, counting it and capturing it when sampled."""
        shape = self._shapes[(kernel.name, origin, launch_shape(args))]
        shape.launches += 1
        shape.weight += weight
        self.kernels.setdefault(kernel.name, kernel)
        n = shape.launches
        sampled = n <= self.first or (self.every > 0 and (n - self.first) % self.every == 0)
        if not sampled:
            return proceed()
        if self.held_bytes >= self.cap_bytes:
            self.over_cap += 1
            return proceed()
        result, recording = capture(kernel, args, proceed, origin)
        self.held_bytes += recording.nbytes
        shape.captured.append(recording)
        return result

    def recordings(self) -> dict[str, list[Recording]]:
        """Per kernel, the captured launches as workloads, weighted by their shape's count."""
        found: dict[str, list[Recording]] = defaultdict(list)
        for (name, origin, _), shape in self._shapes.items():
            for recording in shape.captured:
                recording.workload = {"weight": shape.weight / len(shape.captured),
                                      "origin": origin, "run": self.run}
                found[name].append(recording)
        return dict(found)

    def launches(self) -> dict[str, int]:
        counts: dict[str, int] = defaultdict(int)
        for (name, _, _), shape in self._shapes.items():
            counts[name] += shape.launches
        return dict(counts)

