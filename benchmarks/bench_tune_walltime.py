"""Wall time of a full ``pytest --r3-tune`` of the example project: this checkout vs another.

Runs, in one go and at the same budget, seed and worker count, each into a fresh copy of
the checkout's ``example_project`` (so no ``r3.lock`` of a checkout is touched) with a fresh
r3 folder:

- ``before``: ``pytest --r3-tune`` with the other checkout's pytest_r3 (``--before PATH``,
  e.g. a ``git worktree`` of an older commit) on that checkout's example project;
- ``now``: the same with this checkout, every test selected (benchmark tests included, so
  candidates are timed on the production-sized workloads where the version has them);
- ``now, no workloads``: the same with ``-k "not benchmark"``, so candidates are timed on
  the oracle tests' inputs as ``before`` does: the difference to ``before`` is the search
  itself (racing, verification order), not the size of what is timed.

Each run is repeated ``--repeats`` times (the median wall time is compared). The table gives
each run's wall time, its ratio to ``before``, and the confirmed speedup per kernel (from
``report.json``: the final confirmation of the winner against the baseline; 1.00 where the
baseline was kept). Speedups of ``now`` are measured on workloads (production sizes) and so
compare with the others only loosely; ``now, no workloads`` is timed on the same inputs as
``before``.

Each run's CPU time (user + system, the replay workers included) is reported beside its wall
time: the work done, steadier than wall time on a shared machine.

Run from the repository root::

    python benchmarks/bench_tune_walltime.py --before ../before [--budget 60] [--seed 0]
        [--repeats 3] [--without-workloads-only | --with-workloads-only]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import isolation

isolation.isolate()  # before anything reads the environment (see isolation.py)

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ("scaled_add", "matmul", "jacobi2d")


def clean_env(checkout: Path) -> dict[str, str]:
    return isolation.environment(PYTHONPATH=str(checkout))


def tune(checkout: Path, workdir: Path, args: argparse.Namespace, extra: list[str]) -> dict:
    """One ``pytest --r3-tune`` in a fresh copy of ``checkout``'s example project."""
    project = workdir / "example_project"
    shutil.rmtree(project, ignore_errors=True)
    shutil.copytree(checkout / "example_project", project,
                    ignore=shutil.ignore_patterns(".r3", "r3.lock", "__pycache__"))
    r3_dir = workdir / "r3"
    shutil.rmtree(r3_dir, ignore_errors=True)
    command = [sys.executable, "-m", "pytest", "--r3-tune", "-q", "-p", "no:cacheprovider",
               "-p", "no:randomly", "--r3-kernels", ",".join(KERNELS),
               "-o", f"r3_budget={args.budget}", "-o", f"r3_seed={args.seed}",
               "-o", f"r3_workers={args.workers}", "-o", f"r3_dir={r3_dir}", *extra]
    started, used = time.perf_counter(), _children_cpu()
    result = subprocess.run(command, capture_output=True, text=True, cwd=project,
                            env=clean_env(checkout))
    wall, cpu = time.perf_counter() - started, _children_cpu() - used
    log = workdir / "log.txt"
    log.write_text(result.stdout + result.stderr)
    if result.returncode != 0:
        sys.exit(f"{' '.join(command)} in {project} failed ({result.returncode}):\n"
                 f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
    speedups = confirmed_speedups(r3_dir / "report.json")
    for kernel in KERNELS:  # a kept baseline has no tuned samples in report.json
        if kernel not in speedups and re.search(rf"^{kernel}\s+baseline kept", result.stdout,
                                                re.MULTILINE):
            speedups[kernel] = 1.0
    return {"wall": wall, "cpu": cpu, "speedups": speedups,
            "evaluations": evaluation_figures(r3_dir / "results")}


def _children_cpu() -> float:
    """User + system seconds of finished child processes (with their own children: the
    replay workers): the work a run did, steadier than its wall time on a busy machine."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def evaluation_figures(results: Path) -> dict[str, dict]:
    """Kernel -> evaluations in the result store, their median wall time (seconds, as the
    replay server measured it) and how many were raced (timing stopped early)."""
    figures = {}
    for kernel in KERNELS:
        seconds, raced = [], 0
        for path in sorted((results / kernel).glob("*.jsonl")):
            for line in path.read_text().splitlines():
                try:
                    result = json.loads(line)["result"]
                except (ValueError, KeyError):
                    continue
                if "seconds" in result.get("details", {}):
                    seconds.append(float(result["details"]["seconds"]))
                raced += bool((result.get("timing") or {}).get("raced"))
        if seconds:
            figures[kernel] = {"count": len(seconds), "median": statistics.median(seconds),
                               "total": sum(seconds), "raced": raced}
    return figures


def confirmed_speedups(report: Path) -> dict[str, float]:
    """Kernel -> confirmed speedup of the tuned variant (1.0 where the baseline stayed)."""
    speedups = {}
    for entry in json.loads(report.read_text())["benchmarks"]:
        kernel = entry["group"].removeprefix("r3:")
        speedup = entry["extra_info"].get("speedup")
        if entry["param"] == "tuned" or kernel not in speedups:
            speedups[kernel] = speedup if speedup else 1.0
    return speedups


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True, action="append",
                        help="another checkout of pytest-r3 (its root folder); repeat it to "
                             "compare several (the first is what ratios are taken to)")
    parser.add_argument("--budget", type=int, default=60,
                        help="evaluations per kernel (r3_budget, default 60)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=0,
                        help="replay workers (r3_workers; default 0: one per core)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--json", type=Path, help="also write the raw figures here")
    parser.add_argument("--without-workloads-only", action="store_true",
                        help="leave out the 'now' run with the workloads (compare like with "
                             "like in less time)")
    parser.add_argument("--with-workloads-only", action="store_true",
                        help="leave out the 'now, no workloads' run (when --before times "
                             "workloads too)")
    isolation.add_option(parser)
    args = parser.parse_args()
    befores = [path.resolve() for path in args.before]
    for before in befores:
        if not (before / "pytest_r3").is_dir() or not (before / "example_project").is_dir():
            sys.exit(f"--before {before}: not a pytest-r3 checkout (no pytest_r3/ or "
                     "example_project/ in it)")

    def commit(path: Path) -> str:
        found = subprocess.run(["git", "-C", str(path), "log", "-1", "--format=%h"],
                               capture_output=True, text=True)
        return found.stdout.strip() or "?"

    labels = ["before"] + [f"before {n + 2}" for n in range(len(befores) - 1)]
    runs = [*((label, path, []) for label, path in zip(labels, befores, strict=True)),
            ("now", ROOT, []),
            ("now, no workloads", ROOT, ["-k", "not benchmark"])]
    if args.without_workloads_only:
        runs = [run for run in runs if run[0] != "now"]
    if args.with_workloads_only:
        runs = [run for run in runs if run[0] != "now, no workloads"]
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} "
          f"CPU(s); " + ", ".join(f"{label} = {path} ({commit(path)})" for label, path
                                   in zip(labels, befores, strict=True))
          + f", now = {ROOT} ({commit(ROOT)}); "
          f"budget {args.budget}, seed {args.seed}, workers {args.workers or 'one per core'}, "
          f"{args.repeats} repeat(s), kernels {', '.join(KERNELS)}")
    figures: dict[str, list[dict]] = {label: [] for label, *_ in runs}
    with tempfile.TemporaryDirectory(prefix="r3-bench-tune-") as temporary:
        for repeat in range(args.repeats):
            for label, checkout, extra in runs:  # interleaved, so drift hits all alike
                workdir = Path(temporary) / label.replace(" ", "").replace(",", "_")
                workdir.mkdir(exist_ok=True)
                figure = tune(checkout, workdir, args, extra)
                figures[label].append(figure)
                print(f"  [{repeat + 1}/{args.repeats}] {label}: {figure['wall']:.1f} s "
                      f"({figure['cpu']:.1f} s CPU), "
                      + ", ".join(f"{k} x{v:.2f}" for k, v in figure["speedups"].items()),
                      flush=True)

    reference = statistics.median(f["wall"] for f in figures["before"])
    header = (f"{'run':<18} {'wall (median)':>14} {'vs before':>10} {'CPU (median)':>13} "
              f"{'vs before':>10}  " + " ".join(f"{k:>11}" for k in KERNELS))
    cpu_reference = statistics.median(f["cpu"] for f in figures["before"])
    print("\n" + header)
    print("-" * len(header))
    for label, _, _ in runs:
        wall = statistics.median(f["wall"] for f in figures[label])
        cells = []
        for kernel in KERNELS:
            values = [f["speedups"].get(kernel) for f in figures[label]]
            values = [v for v in values if v is not None]
            cells.append(f"x{statistics.median(values):.2f}" if values else "-")
        cpu = statistics.median(f["cpu"] for f in figures[label])
        print(f"{label:<18} {wall:>12.1f} s {reference / wall:>9.2f}x {cpu:>11.1f} s "
              f"{cpu_reference / cpu:>9.2f}x  " + " ".join(f"{c:>11}" for c in cells))
    print("vs before: before's wall (or CPU) time / this run's (2.00x = half the time); CPU: "
          "user + system seconds of the run and its replay workers. Kernel columns: "
          "confirmed speedup of the winner over the default build (median over repeats); "
          "'now' is timed on the production-sized workloads, the others on test-sized inputs.")
    print("\nevaluations of the search (from the result store; compile, verification and "
          "timing in a replay server), median over repeats: seconds summed over all "
          "kernels, and per kernel: median seconds per evaluation, how many raced")
    for label, _, _ in runs:
        total = statistics.median(sum(v["total"] for v in f["evaluations"].values())
                                  for f in figures[label])
        cells = []
        for kernel in KERNELS:
            runs_of = [f["evaluations"][kernel] for f in figures[label]
                       if kernel in f["evaluations"]]
            if runs_of:
                each = statistics.median(v["median"] for v in runs_of)
                raced = statistics.median(v["raced"] for v in runs_of)
                cells.append(f"{kernel} {each * 1e3:.0f} ms, {raced:g}/{runs_of[0]['count']} "
                             "raced")
        print(f"{label:<18} {total:>7.1f} s  " + "; ".join(cells))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
