"""Benchmark what a plain kernel call costs in the application's process, with and without
an r3.lock entry, optionally against another checkout of pytest-r3 (e.g. the commit before
locked variants were built in a bounded child first).

For the example project's ``scaled_add`` kernel, each configuration runs in a fresh
interpreter (its own pytest_r3 on sys.path) that declares the kernel, then times: the first
call (compilation included) without a lock, the first call with a lock entry for a
non-default variant, and the median of later calls. Configurations take turns (A B B A ...)
so a busy machine slows all alike. It prints medians over the rounds and the ratio to this
checkout.

Run from the repository root::

    python benchmarks/bench_locked_call.py [--rounds 5] [--before PATH]

``--before PATH``: another checkout (``git archive REV | tar -x -C PATH``, say).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import isolation

isolation.isolate()  # before anything reads the environment (see isolation.py)

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, os, sys, time
import numpy as np
sys.path[:0] = [sys.argv[1]]
import pytest_r3 as r3
from pytest_r3.kernel.lock import source_fingerprint

folder, locked = sys.argv[2], sys.argv[3] == "locked"
os.environ["PYTEST_R3_LOCK"] = folder + "/r3.lock"
source = sys.argv[1] + "/example_project/exampleproj/kernels/scaled_add.c"
kernel = r3.kernel(source, entry="scaled_add", name="bench_scaled_add",
                   tune={"UNROLL": [0, 1, 2, 4, 8], "VECTOR_WIDTH": [0, 1, 4, 8, 16]})
lock = {"version": 1, "kernels": {}}
if locked:
    lock["kernels"]["bench_scaled_add"] = {kernel.backend.target_name(): {
        "source_hash": source_fingerprint(kernel), "macros": {"UNROLL": 4},
        "pipeline": {"unroll_count": 4, "vector_width": 8}}}
with open(folder + "/r3.lock", "w") as out:
    json.dump(lock, out)
n = 4096
x = np.ones(n, np.float32)
y = np.zeros(n, np.float32)
args = (n, 2.0, x, y)
started = time.perf_counter()
kernel(*args)
first = time.perf_counter() - started
calls = []
for _ in range(2000):
    began = time.perf_counter()
    kernel(*args)
    calls.append(time.perf_counter() - began)
calls.sort()
assert kernel.active.macro_dict["UNROLL"] == (4 if locked else 0)
print(json.dumps({"first": first, "call": calls[len(calls) // 2]}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--before", type=Path, help="another pytest-r3 checkout to compare")
    isolation.add_option(parser)
    args = parser.parse_args()
    configurations = {"this checkout": ROOT}
    if args.before:
        configurations["before"] = args.before.resolve()
    env = isolation.environment()
    figures: dict[tuple[str, str], dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="r3-bench-locked-") as folder:
        for round_index in range(args.rounds):
            order = list(configurations)
            if round_index % 2:
                order.reverse()
            for label in order:
                for lock in ("no lock", "locked"):
                    done = subprocess.run(
                        [sys.executable, "-c", CHILD, str(configurations[label]), folder,
                         "locked" if lock == "locked" else "plain"],
                        capture_output=True, text=True, env=env)
                    if done.returncode:
                        sys.exit(f"{label} {lock} failed:\n{done.stderr[-3000:]}")
                    kept = figures.setdefault((label, lock), {"first": [], "call": []})
                    for key, value in json.loads(done.stdout.splitlines()[-1]).items():
                        kept[key].append(value)
    print(f"scaled_add (n=4096): medians over {args.rounds} rounds "
          f"(python {sys.version.split()[0]}, {os.cpu_count()} cores)")
    print(f"{'configuration':<15} {'lock':<8} {'first call s':>13} {'later call us':>14} "
          f"{'first vs this':>14} {'later vs this':>14}")
    for (label, lock), kept in figures.items():
        first, call = statistics.median(kept["first"]), statistics.median(kept["call"])
        reference = figures["this checkout", lock]
        print(f"{label:<15} {lock:<8} {first:>13.3f} {call * 1e6:>14.2f} "
              f"{first / statistics.median(reference['first']):>13.2f}x "
              f"{call / statistics.median(reference['call']):>13.2f}x")


if __name__ == "__main__":
    main()
