"""What the derived verification inputs cost: per-candidate evaluation time with them
(``ReplaySettings.derived_inputs``, the default) and without (as before they existed).

For each example kernel (scaled_add, matmul, jacobi2d) this script, in one run:

0. records the kernel's launches from ``example_project``'s tests into a temporary r3 folder
   (benchmark tests included: their workloads are what gets timed);
1. starts two replay servers on the same recordings, one without the derived inputs and
   one with them, and reports how long each took to start (the baseline runs on every
   case once, to learn what it must produce) and how many cases each verifies on;
2. evaluates the same non-default tunable settings on both, interleaved (A B B A ...), and
   prints the median wall time of an evaluation (compile, verification, timing) and of the
   verification alone (every verifying case run twice, as a candidate's are), with the
   ratios with/without.

Run from anywhere::

    python benchmarks/bench_verification.py [--variants N] [--repeats R]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
import time
from pathlib import Path

import isolation

isolation.isolate()  # before anything reads the environment (see isolation.py)

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_replay import KERNELS, QUICK, non_default_variants, record  # noqa: E402

from pytest_r3.record.store import RecordingStore  # noqa: E402
from pytest_r3.replay import Candidate, ReplayServer  # noqa: E402
from pytest_r3.replay.manual import load_spec  # noqa: E402


def _verification_seconds(server: ReplayServer) -> float:
    """The verification a candidate gets, run with the baseline: every verifying case,
    twice with different poison."""
    run = server._runner("baseline", server.request_timeout)
    started = time.perf_counter()
    server.judge.verify(run, server.judge.verifying())
    return time.perf_counter() - started


def measure(name: str, r3_dir: Path, variants: list[dict], repeats: int) -> dict:
    spec = load_spec(r3_dir, name)
    store = RecordingStore(r3_dir / "recordings")
    keys = store.keys(name)
    servers, starts = {}, {}
    for label, derived in (("without", False), ("with", True)):
        settings = dataclasses.replace(QUICK, derived_inputs=derived)
        started = time.perf_counter()
        servers[label] = ReplayServer(spec, store.root, keys, settings).start()
        starts[label] = time.perf_counter() - started
    walls = {label: [] for label in servers}
    checks = {label: [] for label in servers}
    try:
        for server in servers.values():
            server.evaluate(Candidate(label="warm-up"))
        order = ["without", "with"]
        for _ in range(repeats):
            for macros in variants:
                for label in order:
                    started = time.perf_counter()
                    result = servers[label].evaluate(Candidate(macros=macros))
                    walls[label].append(time.perf_counter() - started)
                    if not result.ok:
                        sys.exit(f"{name} {macros} failed {label} the derived inputs: "
                                 f"{result.reason()}")
                    checks[label].append(_verification_seconds(servers[label]))
                order.reverse()
        cases = {label: len(server.judge.verifying()) for label, server in servers.items()}
        dropped = len(servers["with"].dropped_cases) - len(servers["without"].dropped_cases)
    finally:
        for server in servers.values():
            server.close()
    return {"starts": starts, "walls": walls, "checks": checks, "cases": cases,
            "dropped": dropped}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    isolation.add_option(parser)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="r3-bench-verification-") as folder:
        r3_dir = Path(folder) / ".r3"
        print("recording the example project's launches ...", flush=True)
        record(r3_dir, oracles_only=False)
        print(f"{'kernel':<11} {'cases':>9} {'start s':>13} {'evaluation ms (median)':>28} "
              f"{'verification ms (median)':>30}")
        print(f"{'':<11} {'w/o -> w':>9} {'w/o -> w':>13} {'w/o -> w':>20} {'ratio':>7} "
              f"{'w/o -> w':>22} {'ratio':>7}")
        for name in KERNELS:
            figures = measure(name, r3_dir, non_default_variants(name, args.variants),
                              args.repeats)
            wall = {k: statistics.median(v) * 1e3 for k, v in figures["walls"].items()}
            check = {k: statistics.median(v) * 1e3 for k, v in figures["checks"].items()}
            print(f"{name:<11} {figures['cases']['without']:>4} -> {figures['cases']['with']:<3}"
                  f"{figures['starts']['without']:>6.2f} -> {figures['starts']['with']:<5.2f}"
                  f"{wall['without']:>10.1f} -> {wall['with']:<7.1f}"
                  f"{wall['with'] / wall['without']:>6.2f}x"
                  f"{check['without']:>12.1f} -> {check['with']:<7.1f}"
                  f"{check['with'] / check['without']:>6.2f}x"
                  f"   ({figures['dropped']} derived case(s) the baseline could not run)")


if __name__ == "__main__":
    main()
