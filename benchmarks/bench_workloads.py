"""Tuning on workloads against tuning on test-sized inputs, both measured at production size.

The example project's oracle tests use small inputs (jacobi2d up to 256 x 300, matmul up to
n=256, scaled_add up to 65536); its benchmark tests (tests/test_benchmarks.py) call each
kernel at production size. This script copies the project to a temporary folder and tunes
it twice with the same budget and seed:

- "test inputs": without the benchmark tests, so candidates are timed on the oracles'
  recordings (what pytest-r3 did before workloads);
- "workloads": with them, so candidates are timed on the production-sized launches.

Then it measures both locked variants against the baseline on the production-sized
recordings, interleaved in one replay worker, and prints them side by side with the ratio.

Run from the repository root:  python benchmarks/bench_workloads.py [--budget 12]
"""

from __future__ import annotations

import argparse
import json
import shutil
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


def tune(project: Path, r3_dir: str, budget: int, kernels: list[str], with_benchmarks: bool,
         seed: int) -> tuple[dict, float]:
    """Run --r3-tune; the lock entries it wrote (by kernel) and the wall time."""
    lock = project / "r3.lock"
    lock.unlink(missing_ok=True)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--r3-tune",
               "-o", f"r3_dir={r3_dir}", "-o", f"r3_budget={budget}", "-o", f"r3_seed={seed}",
               "-o", "r3_search_pipeline=false", "-o", "r3_workers=1",
               "--r3-kernels", ",".join(kernels)]
    if not with_benchmarks:
        command += ["--ignore", "tests/test_benchmarks.py"]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=project, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"--r3-tune failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    entries = {}
    if lock.exists():
        for name, targets in json.loads(lock.read_text())["kernels"].items():
            entries[name] = next(iter(targets.values()))
    shutil.move(lock, project / f"{r3_dir}.lock") if lock.exists() else None
    return entries, seconds


def production_speedups(project: Path, r3_dir: str, kernel: str, entries: dict[str, dict]
                        ) -> dict[str, dict]:
    """Each locked variant against the baseline, timed on the production-sized workloads."""
    from pytest_r3.record.store import RecordingStore
    from pytest_r3.replay import Candidate, ReplayServer
    from pytest_r3.replay.manual import load_spec

    store = RecordingStore(project / r3_dir / "recordings")
    spec = load_spec(project / r3_dir, kernel)
    figures = {}
    with ReplayServer(spec, store.root, store.keys(kernel)) as server:
        for label, entry in entries.items():
            if entry is None:  # the baseline was kept
                figures[label] = {"speedup": 1.0, "settings": "baseline kept"}
                continue
            result = server.evaluate(Candidate(macros=entry["macros"],
                                               pipeline=entry["pipeline"], label=label))
            settings = ", ".join(f"{k}={v}" for k, v in
                                 {**entry["macros"], **entry["pipeline"]}.items())
            if not result.ok:
                figures[label] = {"speedup": float("nan"), "settings": settings}
                continue
            figures[label] = {"speedup": result.timing.speedup, "settings": settings,
                              "iqr": (result.timing.speedup_q1, result.timing.speedup_q3)}
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=12, help="evaluations per kernel")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kernels", default=",".join(KERNELS))
    isolation.add_option(parser)
    args = parser.parse_args()
    kernels = [k for k in args.kernels.split(",") if k]
    with tempfile.TemporaryDirectory(prefix="r3-bench-workloads-") as folder:
        project = Path(folder) / "example_project"
        shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns(".r3*", "r3.lock",
                                                                         "__pycache__"))
        small, small_seconds = tune(project, ".r3-tests", args.budget, kernels, False,
                                    args.seed)
        large, large_seconds = tune(project, ".r3-workloads", args.budget, kernels, True,
                                    args.seed)
        print(f"budget {args.budget} evaluations per kernel, seed {args.seed}; tuning took "
              f"{small_seconds:.0f} s on test inputs, {large_seconds:.0f} s on workloads")
        print("speedups over the baseline, measured on the production-sized workloads "
              "(benchmark tests), interleaved:")
        print(f"{'kernel':<12} {'tuned on test inputs':>34} {'tuned on workloads':>34} "
              f"{'ratio':>7}")
        for kernel in kernels:
            figures = production_speedups(project, ".r3-workloads", kernel, {
                "test inputs": small.get(kernel), "workloads": large.get(kernel)})
            a, b = figures["test inputs"], figures["workloads"]
            print(f"{kernel:<12} {a['speedup']:>7.2f}x {a['settings']:>25} "
                  f"{b['speedup']:>7.2f}x {b['settings']:>25} "
                  f"{b['speedup'] / a['speedup']:>6.2f}x")


if __name__ == "__main__":
    main()
