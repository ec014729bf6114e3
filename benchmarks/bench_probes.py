"""What the slow-path probes cost where a claim is confirmed, and what the original reads on
them against itself, on the example project's recordings (workloads included).

The example project is recorded once (``pytest --r3-record``, as bench_harness_cost.py
does). Then, per kernel, a fresh confirming server (``ReplaySettings.confirming()``) is
started and evaluates a winner, with the probes and without (interleaved, ``--repeats``
times): its start (the probes learnt from the baseline) and start plus evaluation (the
probes timed when the winner is faster than the baseline), seconds of wall time. Winners:
matmul with cache tiles (faster, so its probes are timed), the others' default build (not
faster: their probes are learnt, not timed). Last, per kernel, the baseline timed against
itself on every probe (``ReplayServer.time_probes``): each A/A figure with its interval
and whether a claim would count it slower (the 3% band and ``PROBE_MARGIN``).

Run from the repository root::

    python benchmarks/bench_probes.py [--repeats 2] [--aa-runs 10 [--aa-only]]

Each line ends with the 1-minute load average.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "example_project"))

import isolation  # noqa: E402

isolation.isolate()  # before anything reads the environment (see isolation.py)

from bench_harness_cost import record  # noqa: E402

from pytest_r3.kernel import declaration  # noqa: E402
from pytest_r3.record.store import RecordingStore  # noqa: E402
from pytest_r3.replay import Candidate, KernelSpec, ReplaySettings  # noqa: E402
from pytest_r3.replay.client import ReplayServer  # noqa: E402
from pytest_r3.replay.pool import ServerPool  # noqa: E402
from pytest_r3.tuning.claims import MIN_EFFECT, PROBE_MARGIN  # noqa: E402

WINNERS = {"matmul": {"TILE_I": 32, "TILE_J": 32, "TILE_K": 64}, "scaled_add": {},
           "jacobi2d": {}}


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def confirmation(pool: ServerPool, macros: dict, probes: bool) -> tuple[float, float, str]:
    """(start seconds, start + evaluation seconds, outcome) of one confirming server."""
    settings = dataclasses.replace(pool.settings.confirming(), probes=probes)
    started = time.perf_counter()
    server = ReplayServer(pool.spec, pool.recordings_root, pool.keys, settings,
                          reference=pool.servers[0].judge)
    with server.start():
        start = time.perf_counter() - started
        result = server.evaluate(Candidate(macros=macros))
    outcome = f"{result.status} {result.speedup or 0:.2f}x, {len(result.probes)} probe(s) timed"
    return start, time.perf_counter() - started, outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--aa-runs", type=int, default=1,
                        help="times the baseline is timed against itself on every probe, "
                        "each in a fresh process (a summary per probe follows)")
    parser.add_argument("--aa-only", action="store_true",
                        help="leave out the confirmations with and without the probes")
    isolation.add_option(parser)
    args = parser.parse_args()
    import exampleproj  # noqa: F401  (declares the kernels)

    width = max(MIN_EFFECT, PROBE_MARGIN)
    with tempfile.TemporaryDirectory(prefix="r3-bench-probes-") as temporary:
        r3_dir = Path(temporary) / "r3"
        record(r3_dir, oracles_only=False)
        store = RecordingStore(r3_dir / "recordings")
        for name, macros in WINNERS.items():
            spec = KernelSpec.from_kernel(declaration.lookup(name))
            with ServerPool(spec, store.root, store.keys(name), ReplaySettings(), 1) as pool:
                for repeat in range(0 if args.aa_only else args.repeats):
                    for probes in (True, False):
                        start, whole, outcome = confirmation(pool, macros, probes)
                        print(f"{name} [{repeat + 1}/{args.repeats}] probes "
                              f"{'on ' if probes else 'off'}: start {start:.1f} s, start + "
                              f"evaluation {whole:.1f} s ({outcome}); {load()}", flush=True)
                figures: dict[str, list[float]] = {}
                for run in range(args.aa_runs):
                    with pool.fresh() as server:
                        started = time.perf_counter()
                        timings = server.time_probes(
                            Candidate(label="the baseline, built apart"))
                        seconds = time.perf_counter() - started
                    for probe in timings:
                        low, high = probe.timing.interval
                        figures.setdefault(probe.label, []).append(probe.timing.speedup)
                        print(f"{name} [{run + 1}/{args.aa_runs}] A/A on {probe.label}: "
                              f"{probe.timing.speedup:.3f}x [{low:.3f}-{high:.3f}] over "
                              f"{probe.timing.rounds} round(s), "
                              f"{'SLOWER' if probe.slower(width) else 'not slower'}; {load()}")
                    print(f"{name}: the probes timed in {seconds:.1f} s", flush=True)
                for label, speedups in figures.items():
                    print(f"{name} A/A summary on {label}: {len(speedups)} run(s), lowest "
                          f"{min(speedups):.3f}x, median {statistics.median(speedups):.3f}x, "
                          f"highest {max(speedups):.3f}x; {load()}", flush=True)


if __name__ == "__main__":
    main()
