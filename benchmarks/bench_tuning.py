"""Tuning quality at a fixed budget: NGOpt against random search, on the example kernels.

For each example kernel this records the oracle tests once, then runs the search twice with
the same budget, seed and workers (NGOpt, then RandomSearch), each into its own fresh result
store, and prints:

- the confirmed speedup of the best variant over the default build (the -O3 equivalent),
- the same for random search, and the ratio of the two,
- how many evaluations NGOpt needed to get within 5% of its final best (search phase).

Run from the repository root:  python benchmarks/bench_tuning.py [--budget 40] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import isolation

isolation.isolate()  # before anything reads the environment (see isolation.py)

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "example_project"
KERNELS = ("scaled_add", "matmul", "jacobi2d")


def record(r3_dir: Path) -> None:
    subprocess.run([sys.executable, "-m", "pytest", str(EXAMPLE), "-q", "-p", "no:cacheprovider",
                    "--r3-record", "-o", f"r3_dir={r3_dir}"], check=True, cwd=EXAMPLE,
                   stdout=subprocess.DEVNULL)


def search(kernel, recordings: Path, results: Path, optimizer: str, budget: int, workers: int,
           seed: int):
    from pytest_r3.record.store import RecordingStore
    from pytest_r3.replay import KernelSpec, ReplayServer, ReplaySettings
    from pytest_r3.search.parametrization import SearchSpace
    from pytest_r3.search.results import ResultStore
    from pytest_r3.search.tuner import Budget, Tuner

    store = RecordingStore(recordings)
    spec = KernelSpec.from_kernel(kernel)
    servers = [ReplayServer(spec, store.root, store.keys(kernel.name),
                            ReplaySettings(seed=seed)).start() for _ in range(workers)]
    try:
        tuner = Tuner(kernel.name, kernel.source.hash, SearchSpace(kernel.space, kernel.pipeline),
                      servers, ResultStore(results / optimizer, kernel.name, "bench"),
                      optimizer=optimizer, seed=seed, budget=Budget(evaluations=budget))
        return tuner.run()
    finally:
        for server in servers:
            server.close()


def confirmed(outcome) -> float:
    return outcome.best_result.timing.speedup if outcome.best_result else 1.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=40)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kernels", default=",".join(KERNELS))
    parser.add_argument("--json", type=Path)
    isolation.add_option(parser)
    args = parser.parse_args()

    sys.path.insert(0, str(EXAMPLE))
    import exampleproj

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        r3_dir = Path(tmp) / "r3"
        record(r3_dir)
        for name in args.kernels.split(","):
            kernel = getattr(exampleproj, name)
            started = time.perf_counter()
            ng_outcome = search(kernel, r3_dir / "recordings", Path(tmp) / "results", "NGOpt",
                                args.budget, args.workers, args.seed)
            ng_seconds = time.perf_counter() - started
            started = time.perf_counter()
            random_outcome = search(kernel, r3_dir / "recordings", Path(tmp) / "results",
                                    "RandomSearch", args.budget, args.workers, args.seed)
            random_seconds = time.perf_counter() - started
            row = {
                "kernel": name,
                "budget": args.budget,
                "ngopt_speedup": confirmed(ng_outcome),
                "random_speedup": confirmed(random_outcome),
                "ngopt_best_search_phase": ng_outcome.convergence()[-1],
                "ngopt_evals_within_5pct": ng_outcome.evaluations_to_within(0.05),
                "ngopt_distinct_evaluations": ng_outcome.evaluations,
                "ngopt_seconds": ng_seconds,
                "random_seconds": random_seconds,
                "ngopt_best": None if ng_outcome.best_candidate is None
                else ng_outcome.best_candidate.as_dict(),
            }
            row["ngopt_over_random"] = row["ngopt_speedup"] / row["random_speedup"]
            rows.append(row)
            print(f"{name}: done in {ng_seconds + random_seconds:.0f} s", flush=True)

    print()
    print(f"budget {args.budget} evaluations per kernel and optimizer, {args.workers} workers, "
          f"seed {args.seed}; speedups are confirmed medians of interleaved baseline/candidate "
          "ratios (1.00 = the default -O3 build kept)")
    header = (f"{'kernel':<12} {'NGOpt vs -O3':>13} {'Random vs -O3':>14} {'NGOpt/Random':>13} "
              f"{'evals to 5%':>12} {'time NG/Rand':>14}")
    print(header)
    print("-" * len(header))
    for row in rows:
        print(f"{row['kernel']:<12} {row['ngopt_speedup']:>12.2f}x {row['random_speedup']:>13.2f}x"
              f" {row['ngopt_over_random']:>12.2f}x {row['ngopt_evals_within_5pct']!s:>12} "
              f"{row['ngopt_seconds']:>6.0f}/{row['random_seconds']:<6.0f}s")
    for row in rows:
        if row["ngopt_best"]:
            best = row["ngopt_best"]
            print(f"  {row['kernel']} NGOpt best: macros={best['macros']} "
                  f"pipeline={best['pipeline']}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
