"""Timed samples that a busy machine cannot inflate.

A sample is ``repeat`` launches of one variant on one case, timed in slices of a few
hundred microseconds. Around each slice the worker reads its wall clock and the CPU time
of the thread that runs the launches (``CLOCK_THREAD_CPUTIME_ID``; the whole process's
for a backend whose kernels run several threads). The two agree while the thread keeps
its core; a slice whose wall time exceeds its CPU time by more than a small margin lost
the core to another process (or the worker was stopped), so it is dropped and counted.
A sample keeps the mean launch time of its clean slices, and is dropped whole when none
was clean: timing takes it again at once, in MIN_SLICES slices at least. A launch as long as a
sample (0.5 ms by default) is a sample by itself, one slice: quietly nothing
more is needed, and under load one launch per try costs less than three per sample did
(1/(1-p) launches per clean sample against 3/(1-p^3), for a share p of launches that
lose the core). A slice of at least
``long_slice`` seconds (ReplaySettings.long_slice_seconds, 5 ms) of CPU time on the
timing thread that lost its core is not dropped but timed by that CPU time
(``cpu_timed``): on a busy machine nearly every launch of tens of milliseconds loses the
core at least once, so dropping them left no clean sample and retakes ran for minutes,
while the caches a lost time slice leaves to refill cost such a slice a share that the
baseline's and candidate's slices pay alike (a ratio of two such figures keeps its size).
A GPU backend (``cpu_clock`` "none") is timed by the device and checked no further here.

Where written buffers are also read (a kernel updating its data in place), each launch
runs on a prepared copy holding the recorded values: the copies are put back between
slices, outside the timed region, so every timed launch works on what was recorded,
never on values that repeated launches grew to Inf or NaN.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from .counters import Counters

CLOCKS: dict[str, Callable[[], int] | None] = {
    "thread": time.thread_time_ns, "process": time.process_time_ns, "none": None}
SLICE_SECONDS = 2.5e-4  # launches timed between two readings of the clocks
# a checked sample of at least this many launches starts with one launch left untimed
WARM_FROM = 4
# A sample taken again after losing its core has at least this many slices (a sample of
# launches of 0.5 ms or more is one launch, one slice: quietly, that is all it needs, and
# at load 20 on 2 cores, 40% of 1.5 ms launches lost the core).
MIN_SLICES = 3


def descheduled(wall_ns: int, cpu_ns: int) -> bool:
    """Whether a slice lost its core: wall time beyond CPU time by more than 20 us and 2%
    (reading the clocks and page faults are CPU time; a time slice lost is milliseconds)."""
    return wall_ns - cpu_ns > 20_000 + wall_ns // 50


@dataclass
class Arguments:
    """Launch arguments for timed launches: one set, or ``copies`` whose written buffers
    ``restore(n)`` puts back to the recorded values (the first ``n`` copies)."""

    copies: list[list]
    restore: Callable[[int], None] | None = None


@dataclass
class Sample:
    """One sample: the mean seconds of a launch over its clean slices (None: dropped), and
    user-mode cycles and instructions per launch where counters exist."""

    seconds: float | None
    cycles: float = 0.0
    instructions: float = 0.0


@dataclass
class Sampler:
    """Takes samples for one timing, counting slices taken and dropped."""

    backend: object
    counters: Counters | None = None
    long_slice: float = 5e-3  # seconds of CPU time from which a lost slice keeps it
    taken: int = 0
    dropped: int = 0
    cpu_timed: int = 0  # slices that lost their core, long enough to keep their CPU time

    @property
    def clock(self) -> str:
        return getattr(self.backend, "cpu_clock", "thread")

    @property
    def counting(self) -> bool:
        """Whether hardware counters are read beside the clocks."""
        return self.counters is not None and self.counters.available \
            and CLOCKS[self.clock] is not None

    def _launches(self, launcher, arguments: Arguments, count: int) -> list[float]:
        if arguments.restore is None:
            return list(self.backend.time(launcher, arguments.copies[0], count))
        return [seconds for copy in arguments.copies[:count]
                for seconds in self.backend.time(launcher, copy, 1)]

    def per_slice(self, single: float, arguments: Arguments) -> int:
        """Launches in one slice: about SLICE_SECONDS, at most one per prepared copy."""
        count = max(1, math.ceil(SLICE_SECONDS / max(single, 1e-9)))
        return min(count, len(arguments.copies)) if arguments.restore else count

    def single(self, launcher, arguments: Arguments) -> float:
        """One launch's seconds, for sizing samples: its CPU time if that is less (a launch
        that lost its core would make samples too short)."""
        read = CLOCKS[self.clock]
        if arguments.restore is not None:
            arguments.restore(1)
        before = read() if read else 0
        seconds = self._launches(launcher, arguments, 1)[0]
        if read is not None:
            seconds = min(seconds, (read() - before) / 1e9)
        return max(seconds, 1e-9)

    def _warm(self, launcher, arguments: Arguments) -> None:
        """One launch, not timed, before a sample: the other variant and the other set of
        buffers ran just before, and the first slice of a sample of short launches was
        15-70% slower than the rest on both sides (a 100 KB scaled_add: 25 us against 15;
        1.01x after one such launch), which pulled a speedup towards 1."""
        if arguments.restore is not None:
            arguments.restore(1)
        self._launches(launcher, arguments, 1)

    def sample(self, launcher, arguments: Arguments, repeat: int, per_slice: int,
               checked: bool = True) -> Sample:
        """``repeat`` launches in slices of ``per_slice``; ``checked``: count and drop
        descheduled slices (warm-up samples are not checked)."""
        read = CLOCKS[self.clock] if checked else None
        counters = self.counters if checked and self.counting else None
        if read is not None and repeat >= WARM_FROM:  # a GPU's timing warms up its own way
            self._warm(launcher, arguments)
        kept: list[float] = []
        cycles = instructions = 0
        done = 0
        while done < repeat:
            count = min(per_slice, repeat - done)
            if arguments.restore is not None:
                arguments.restore(count)
            counted = counters.read() if counters else (0, 0)
            cpu = read() if read else 0
            wall = time.perf_counter_ns()
            times = self._launches(launcher, arguments, count)
            wall = time.perf_counter_ns() - wall
            cpu = read() - cpu if read else wall
            done += count
            if read is None:
                kept += times
                continue
            self.taken += 1
            if descheduled(wall, cpu):
                if self.clock != "thread" or cpu < self.long_slice * 1e9:
                    self.dropped += 1
                    continue
                self.cpu_timed += 1  # the time off the core taken out, launch by launch
                times = [seconds * cpu / wall for seconds in times]
            kept += times
            if counters:
                after = counters.read()
                cycles += after[0] - counted[0]
                instructions += after[1] - counted[1]
        if not kept:
            return Sample(None)
        return Sample(sum(kept) / len(kept), cycles / len(kept), instructions / len(kept))
