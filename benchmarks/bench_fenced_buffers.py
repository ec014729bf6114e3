"""What the read-only page after each buffer costs a verification run: a guarded buffer
made, filled and read back, unfenced (the first run of a case), fenced (its second
run: a fresh mapping whose tail is made read-only, see replay/buffers.py), fenced as a
read-only input is (its whole mapping made read-only once filled) and floored (about
half the second runs: the data at a page start, an inaccessible page below, opened
again to read the guard back), and a read-only input on an unfenced run (a mapping of
its own, reused, made read-only once filled, where the others use np.empty), at sizes
from a test's to a workload's. Median microseconds per buffer over interleaved
repetitions.

    python benchmarks/bench_fenced_buffers.py [--repeats 200]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import isolation
import numpy as np

from pytest_r3.replay.buffers import GuardedBuffer, check_guards

isolation.isolate()  # before anything reads the environment (see isolation.py)

SIZES = (37, 1000, 65536, 1 << 20)  # float32 elements


LAYOUTS = ("unfenced", "fenced", "read-only", "floored", "unfenced read-only")


def _once(like: np.ndarray, layout: str) -> float:
    started = time.perf_counter()
    buffer = GuardedBuffer(like, 5, not layout.startswith("unfenced"),
                           read_only=layout.endswith("read-only"), floored=layout == "floored")
    buffer.fill(like, None)
    buffer.open_floor()
    assert check_guards(buffer.storage, like, 5) is None
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=200)
    isolation.add_option(parser)
    args = parser.parse_args()
    for size in SIZES:
        like = np.random.default_rng(size).standard_normal(size).astype(np.float32)
        times: dict[str, list[float]] = {layout: [] for layout in LAYOUTS}
        for _ in range(args.repeats):  # interleaved, so a busy machine slows all alike
            for layout in LAYOUTS:
                times[layout].append(_once(like, layout))
        plain, fenced, read_only, floored, input_ = (statistics.median(times[f]) * 1e6
                                                     for f in LAYOUTS)
        print(f"n={size:>8}: unfenced {plain:9.1f} us  fenced {fenced:9.1f} us  "
              f"{fenced / plain:5.2f}x  read-only {read_only:9.1f} us  "
              f"{read_only / fenced:5.2f}x of fenced  floored {floored:9.1f} us  "
              f"{floored / plain:5.2f}x  unfenced read-only {input_:9.1f} us  "
              f"{input_ / plain:5.2f}x  (load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
