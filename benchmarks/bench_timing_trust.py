"""Benchmark: do the timings hold on a busy machine? A/A and A/B under 0, 1, 2 and 4 busy
background processes, for each example CPU kernel (scaled_add, matmul, jacobi2d).

0. records the example project's launches (its tests and benchmark workloads) into a
   temporary r3 folder;
1. for each kernel, measures an A/B variant of known speedup "quietly first" (load level
   0, more runs): its median speedup is the reference figure;
2. for each load level (that many ``python -c "while True: pass"`` processes started
   beside it, stopped by their own pids afterwards) and each kernel:
   - A/A: the baseline replayed against itself, ``--aa`` times (default 30): how many came
     out within +-5% of 1, and how many were labelled "within noise" (their interval not
     wholly outside the 2% band);
   - A/B: the variant, ``--ab`` times (default 10): the median speedup against the quiet
     figure (target: within +-10%) and how many runs were within +-20% of it (target: 9 of
     10);
   - the share of timed slices dropped as descheduled (wall time beyond the thread's CPU
     time, and the slice after such a one), overall and in the worst single evaluation
     (what search/results.py's CONTENDED_SHARE is set from), and how many evaluations
     were too busy to give a figure.

Other work on the machine adds to every level: "load 0" is only as quiet as the machine
is; the script prints the load average at each level.

Run from anywhere::

    python benchmarks/bench_timing_trust.py            # 30 A/A and 10 A/B per cell
    python benchmarks/bench_timing_trust.py --quick    # 10 A/A and 5 A/B per cell
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "example_project"
sys.path.insert(0, str(EXAMPLE))

import exampleproj  # noqa: E402,F401  (declares the kernels)

from pytest_r3.record.store import RecordingStore  # noqa: E402
from pytest_r3.replay import Candidate, ReplayServer, ReplaySettings  # noqa: E402
from pytest_r3.replay.manual import load_spec  # noqa: E402

# a variant of each kernel with a known, clear speedup (its tunables' blocking/unrolling)
VARIANTS = {
    "scaled_add": {"UNROLL": 4, "VECTOR_WIDTH": 8},
    "matmul": {"TILE_I": 32, "TILE_J": 64, "TILE_K": 64},
    "jacobi2d": {"BLOCK_ROWS": 32, "BLOCK_COLS": 128},
}
# verification is not what is measured here: the least the replay allows
SETTINGS = ReplaySettings(fresh_inputs=1, derived_sizes=False, reserve_inputs=0)


def record(r3_dir: Path) -> None:
    command = [sys.executable, "-m", "pytest", str(EXAMPLE), "--r3-record", "-o",
               f"r3_dir={r3_dir}", "-q", "-p", "no:cacheprovider", "-k", "not cuda"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        sys.exit(f"recording failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")


class Load:
    """``count`` CPU-busy processes, stopped by their own pids on exit."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.processes: list[subprocess.Popen] = []

    def __enter__(self) -> Load:
        self.processes = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                          for _ in range(self.count)]
        time.sleep(1.0 if self.count else 0.0)  # let the scheduler see them
        return self

    def __exit__(self, *exc_info: object) -> None:
        for process in self.processes:
            os.kill(process.pid, signal.SIGTERM)
        for process in self.processes:
            process.wait()


def measure(server: ReplayServer, candidate: Candidate, runs: int) -> dict:
    """``runs`` evaluations: speedups, labels, dropped slices, too-busy outcomes."""
    speedups, within_noise, busy, dropped, taken, shares = [], [], 0, 0, 0, []
    for _ in range(runs):
        result = server.evaluate(candidate)
        if result.status == "too_busy":
            busy += 1
            dropped += int(result.details.get("dropped", 0))
            taken += int(result.details.get("taken", 0))
            continue
        if not result.ok or result.timing is None:
            sys.exit(f"{candidate.label}: {result.summary()}")
        speedups.append(result.timing.speedup)
        within_noise.append(result.timing.within_noise)
        dropped += result.timing.dropped
        taken += result.timing.taken
        shares.append(result.timing.dropped_share)
    return {"speedups": speedups, "within_noise": within_noise, "busy": busy,
            "dropped": dropped, "taken": taken, "shares": shares}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 A/A and 5 A/B per cell")
    parser.add_argument("--aa", type=int, default=None, help="A/A runs per cell (30)")
    parser.add_argument("--ab", type=int, default=None, help="A/B runs per cell (10)")
    parser.add_argument("--levels", default="0,1,2,4", help="busy processes per level")
    parser.add_argument("--kernels", default=",".join(VARIANTS))
    args = parser.parse_args()
    aa_runs = args.aa or (10 if args.quick else 30)
    ab_runs = args.ab or (5 if args.quick else 10)
    levels = [int(n) for n in args.levels.split(",")]
    kernels = args.kernels.split(",")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="r3-trust-") as folder:
        r3_dir = Path(folder)
        record(r3_dir)
        store = RecordingStore(r3_dir / "recordings")
        servers = {name: ReplayServer(load_spec(r3_dir, name), store.root, store.keys(name),
                                      SETTINGS).start() for name in kernels}
        try:
            quiet = {}
            for name in kernels:  # the reference figure, before any load is started
                figures = measure(servers[name], Candidate(macros=VARIANTS[name],
                                                           label="quiet"), 2 * ab_runs)
                quiet[name] = statistics.median(figures["speedups"])
                print(f"quiet A/B {name} {VARIANTS[name]}: {quiet[name]:.3f}x "
                      f"(median of {len(figures['speedups'])})", flush=True)
            rows = []
            for level in levels:
                with Load(level):
                    for name in kernels:
                        aa = measure(servers[name], Candidate(label="A/A"), aa_runs)
                        ab = measure(servers[name], Candidate(macros=VARIANTS[name],
                                                              label="A/B"), ab_runs)
                        load = os.getloadavg()[0]  # over the last minute of this cell
                        rows.append((level, load, name, aa, ab, quiet[name]))
                        print_row(*rows[-1])
        finally:
            for server in servers.values():
                server.close()
    print(f"\nmachine: {os.cpu_count()} CPUs; wall {time.perf_counter() - started:.0f} s; "
          f"A/A {aa_runs} and A/B {ab_runs} per cell")
    print_table(rows, aa_runs, ab_runs)


HEADER = (f"{'busy':>4} {'load':>5} {'kernel':<11} {'A/A +-5%':>9} {'A/A noise':>9} "
          f"{'A/B quiet':>9} {'A/B med':>8} {'med/quiet':>9} {'+-20%':>6} {'busy':>5} "
          f"{'dropped':>8} {'max/eval':>8}")


def print_row(level, load, name, aa, ab, quiet) -> None:
    near = sum(abs(s - 1.0) <= 0.05 for s in aa["speedups"])
    noise = sum(aa["within_noise"])
    median = statistics.median(ab["speedups"]) if ab["speedups"] else float("nan")
    close = sum(abs(s / quiet - 1.0) <= 0.20 for s in ab["speedups"])
    taken = aa["taken"] + ab["taken"]
    share = (aa["dropped"] + ab["dropped"]) / taken if taken else 0.0
    most = max(aa["shares"] + ab["shares"], default=0.0)  # the worst single evaluation
    aa_total = len(aa["speedups"]) + aa["busy"]
    ab_total = len(ab["speedups"]) + ab["busy"]
    print(f"{level:>4} {load:>5.1f} {name:<11} {near:>4}/{aa_total:<4} {noise:>4}/{aa_total:<4} "
          f"{quiet:>8.3f}x {median:>7.3f}x {median / quiet:>9.3f} {close:>3}/{ab_total:<2} "
          f"{aa['busy'] + ab['busy']:>5} {share:>7.1%} {most:>7.1%}", flush=True)


def print_table(rows, aa_runs, ab_runs) -> None:
    print(HEADER)
    for row in rows:
        print_row(*row)


if __name__ == "__main__":
    main()
