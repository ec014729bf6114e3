"""Benchmark the call path of shape-specialised variants (``specialize=``): what choosing the
variant by bucket adds to a plain call.

Four kernels share one tiny C source (a launch costs little, so the dispatch shows): one
without ``specialize=`` and one each with ``specialize=["n"]``, ``("m", "n")`` and a key
function, the specialised ones with two tuned buckets in a temporary r3.lock. Calls are
timed in batches, the kernels taking turns batch by batch (A B C D A B ...) so a busy machine
slows all alike; each figure is the median over batches of the seconds per call. The target
is under 1 µs added per call by the dispatch on names; the key function's cost is the
user's function plus a dict of the scalar arguments.

Run from the repository root::

    python benchmarks/bench_specialize.py [--batches 200] [--calls 2000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import isolation

isolation.isolate()  # before anything reads the environment (see isolation.py)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

import pytest_r3 as r3  # noqa: E402
from pytest_r3.kernel.lock import LOCK_ENV, LockFile, merge_entry, source_fingerprint  # noqa: E402

SOURCE = """
#ifndef SCALE
#define SCALE 1
#endif
void {name}(int n, int m, float *x) {{ for (int i = 0; i < n; ++i) x[i] *= SCALE; }}
"""
TARGET_US = 1.0


def declare(name: str, specialize=None):
    return r3.kernel(SOURCE.format(name=name), entry=name, tune={"SCALE": [1, 2, 3]},
                     specialize=specialize)


def lock_buckets(lock: LockFile, kernel, buckets: dict[str, int]) -> None:
    for label, scale in buckets.items():
        merge_entry(lock, kernel.name, kernel.backend.target_name(), {
            "source_hash": source_fingerprint(kernel), "macros": {"SCALE": scale},
            "pipeline": {}, "speedup": 1.5, "evaluations": 3},
            bucket=label, specialize=kernel.specialize.description)


def per_call(kernel, args: tuple, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        kernel(*args)
    return (time.perf_counter() - start) / calls


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--calls", type=int, default=2000)
    isolation.add_option(parser)
    options = parser.parse_args()

    folder = tempfile.mkdtemp(prefix="r3-bench-specialize-")
    os.environ[LOCK_ENV] = str(Path(folder) / "r3.lock")
    plain = declare("bench_plain")
    by_name = declare("bench_by_name", ["n"])
    by_names = declare("bench_by_names", ("m", "n"))
    by_key = declare("bench_by_key", lambda args: args["n"] >= 64)
    lock = LockFile(os.environ[LOCK_ENV])
    lock_buckets(lock, by_name, {"n=16": 2, "n=1024": 3})
    lock_buckets(lock, by_names, {"m=1,n=16": 2, "m=1,n=1024": 3})
    lock_buckets(lock, by_key, {"false": 2, "true": 3})
    lock.save()

    x = np.ones(16, dtype=np.float32)
    args = (10, 1, x)  # bucket n=16 (m=1): a tuned bucket, the common case
    kernels = {"no specialize=": plain, 'specialize=["n"]': by_name,
               'specialize=("m", "n")': by_names, "specialize=<key function>": by_key}
    for kernel in kernels.values():  # first calls: compile, read the lock, fill the cache
        kernel(*args)
    assert by_name.serving(*args)[0] == "n=16", "the lock's bucket was not used"
    times: dict[str, list[float]] = {label: [] for label in kernels}
    for _ in range(options.batches):
        for label, kernel in kernels.items():
            times[label].append(per_call(kernel, args, options.calls))

    base = statistics.median(times["no specialize="])
    print(f"per-call time, median of {options.batches} batches of {options.calls} calls "
          f"(launch of a 16-element kernel):")
    failed = False
    for label, samples in times.items():
        median = statistics.median(samples)
        extra = (median - base) * 1e6
        line = f"  {label:<28} {median * 1e6:8.3f} us"
        if label != "no specialize=":
            line += f"   dispatch adds {extra:+.3f} us"
            if label != "specialize=<key function>":
                ok = extra < TARGET_US
                failed |= not ok
                line += f"   (target < {TARGET_US:g} us: {'met' if ok else 'MISSED'})"
        print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
