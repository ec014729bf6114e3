"""What a harness indistinguishable from production costs: this checkout vs another.

Timing on buffers laid out as numpy allocates them, the late pass of ``production_calls``
launches in a row after timing, and the oracle re-run's first-call burst all add work to
every evaluation. This script measures, in one run, interleaved (before, now, before,
now...) so that a busy machine slows both alike:

1. **per-candidate evaluation time**: the example project is recorded once (``pytest
   --r3-record``, oracle tests and workloads); then, in a fresh process per checkout and
   round, a replay server (default ReplaySettings, as tuning uses) per example kernel
   evaluates ``--candidates`` non-default tunable settings twice: unraced (a finalist:
   every check, full timing, the late pass) and raced against a best-so-far of 1.5x (as
   the search evaluates most candidates). Median wall seconds per evaluation.
   The same evaluations also give what an unraced one costs less its timing (``checks``:
   verification, the late pass), its timing alone (``timing``) and a server's start
   (``learning``: the baseline run on every planned case), so a busy machine's timing
   retakes can be told from the checks.
2. **a full ``pytest --r3-tune``** of the example project (``bench_tune_walltime.tune``: a
   fresh copy of each checkout's example project, same budget, seed and workers), wall and
   CPU time.

Ratios are now / before (1.10x = 10% more time); with ``--before`` given twice, the second
checkout is measured in the same rounds too (``before2``), and ratios are given to each.
The other checkouts run with this interpreter and ``PYTHONPATH`` pointing at them, as
``bench_tune_walltime.py`` does.

Run from the repository root::

    python benchmarks/bench_harness_cost.py --before /work/main [--candidates 4]
        [--repeats 2] [--budget 30] [--skip-tune | --skip-evaluations] [--oracles-only]
        [--short-timing]

Each line gives the 1-minute load average as it ended: figures taken on a busy machine say
so.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import isolation

isolation.isolate()  # before anything reads the environment (see isolation.py)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_tune_walltime import tune  # noqa: E402

KERNELS = ("scaled_add", "matmul", "jacobi2d")

# Run in a fresh interpreter with PYTHONPATH at one checkout: the evaluations of one round.
DRIVER = r"""
import dataclasses, json, statistics, sys, time
from pathlib import Path
import exampleproj  # noqa: F401  (declares the kernels)
from pytest_r3.kernel import declaration
from pytest_r3.record.store import RecordingStore
from pytest_r3.replay import Candidate, KernelSpec, ReplayServer, ReplaySettings

r3_dir, count, kernels = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3].split(",")
overrides = {k: v for k, v in json.loads(sys.argv[4]).items()
             if k in ReplaySettings.__dataclass_fields__}
figures = {}
for name in kernels:
    kernel = declaration.lookup(name)
    valid = [v for v in kernel.space.iter_valid() if v != kernel.space.default]
    step = max(1, len(valid) // count)
    variants = [{k: v for k, v in values.items() if v != kernel.space.default[k]}
                for values in valid[step // 2::step][:count]]
    store = RecordingStore(r3_dir / "recordings")
    # the spec saved at recording, less the fields an older checkout does not know
    saved = json.loads((r3_dir / "recordings" / name / "kernel.json").read_text())["spec"]
    known = {f.name for f in dataclasses.fields(KernelSpec)}
    # and its pipeline less the settings an older checkout does not know (saved at their
    # defaults, which an older checkout applies as it always did)
    from pytest_r3.model.pipeline import Pipeline
    settings = {f.name for f in dataclasses.fields(Pipeline)}
    saved["pipeline"] = {k: v for k, v in saved.get("pipeline", {}).items() if k in settings}
    spec = KernelSpec.from_dict({k: v for k, v in saved.items() if k in known})
    started = time.perf_counter()
    server = ReplayServer(spec, store.root, store.keys(name),
                          ReplaySettings(**overrides)).start()
    learning = time.perf_counter() - started  # the baseline run on every planned case
    timed = [0.0]
    measure = server._time

    def _time(*args, **kwargs):  # the timing's share of an evaluation
        begun = time.perf_counter()
        try:
            return measure(*args, **kwargs)
        finally:
            timed[0] += time.perf_counter() - begun
    server._time = _time
    try:
        server.evaluate(Candidate(label="warm-up"))
        walls, statuses = {"unraced": [], "raced": [], "checks": [], "timing": []}, []
        for macros in variants:
            for kind, race in (("unraced", None), ("raced", 1.5)):
                started, timed[0] = time.perf_counter(), 0.0
                result = server.evaluate(Candidate(macros=macros, race_against=race))
                walls[kind].append(time.perf_counter() - started)
                if kind == "unraced":  # everything but the timing: what verification costs
                    walls["checks"].append(walls[kind][-1] - timed[0])
                    walls["timing"].append(timed[0])
                # a busy machine may leave a timing without a figure, or past the request
                # timeout: its cost still counts
                assert result.status in ("ok", "too_busy", "timeout"), result.summary()
                statuses.append(result.status)
    finally:
        server.close()
    figures[name] = {kind: statistics.median(values) for kind, values in walls.items()}
    figures[name]["too_busy"] = len(statuses) - statuses.count("ok")
    figures[name]["learning"] = learning
print(json.dumps(figures))
"""


def environment(checkout: Path) -> dict[str, str]:
    return isolation.environment(
        PYTHONPATH=os.pathsep.join([str(checkout), str(checkout / "example_project")]))


def record(r3_dir: Path, oracles_only: bool) -> None:
    selected = f"({' or '.join(KERNELS)}) and not benchmark" if oracles_only else \
        " or ".join(KERNELS) + " or benchmark"
    command = [sys.executable, "-m", "pytest", str(ROOT / "example_project"), "--r3-record",
               "-o", f"r3_dir={r3_dir}", "-q", "-p", "no:cacheprovider", "-k", selected]
    result = subprocess.run(command, capture_output=True, text=True, env=environment(ROOT),
                            cwd=ROOT / "example_project")
    if result.returncode != 0:
        sys.exit(f"recording failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")


# --short-timing: fewer timing rounds for both checkouts (the checks stay whole), where a
# busy machine makes full timings retake samples for minutes
SHORT_TIMING = {"timing_rounds": 5, "min_timing_rounds": 3, "warmup_rounds": 1}


def evaluations(checkout: Path, r3_dir: Path, count: int, workdir: Path,
                overrides: dict) -> dict:
    result = subprocess.run([sys.executable, "-c", DRIVER, str(r3_dir), str(count),
                             ",".join(KERNELS), json.dumps(overrides)], capture_output=True,
                            text=True,
                            env=environment(checkout), cwd=workdir)
    if result.returncode != 0:
        sys.exit(f"evaluations with {checkout} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def commit(path: Path) -> str:
    found = subprocess.run(["git", "-C", str(path), "log", "-1", "--format=%h"],
                           capture_output=True, text=True)
    return found.stdout.strip() or "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True, action="append",
                        help="another checkout of pytest-r3 (its root folder); given twice, "
                             "both are measured in the same rounds")
    parser.add_argument("--candidates", type=int, default=4,
                        help="tunable settings evaluated per kernel and round (default 4)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--budget", type=int, default=30,
                        help="evaluations per kernel of the full --r3-tune (default 30)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--skip-tune", action="store_true", help="per-candidate figures only")
    parser.add_argument("--skip-evaluations", action="store_true",
                        help="full --r3-tune figures only (more rounds in the same time)")
    parser.add_argument("--short-timing", action="store_true",
                        help=f"per-candidate evaluations with {SHORT_TIMING} for both "
                             "checkouts: the checks are whole, the timing shorter")
    parser.add_argument("--oracles-only", action="store_true",
                        help="no production-sized workloads (the benchmark tests): candidates "
                             "are timed on the oracle tests' inputs, so a busy machine makes "
                             "fewer timings too_busy")
    isolation.add_option(parser)
    args = parser.parse_args()
    checkouts = {}
    for number, path in enumerate(args.before):
        if not (path.resolve() / "pytest_r3").is_dir():
            sys.exit(f"--before {path}: not a pytest-r3 checkout")
        checkouts[f"before{number + 1 if number else ''}"] = path.resolve()
    olds = list(checkouts)
    checkouts["now"] = ROOT
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} "
          f"CPU(s); " + ", ".join(f"{label} = {path} ({commit(path)})"
                                  for label, path in checkouts.items()) + "; "
          f"{args.candidates} candidate(s) per kernel, {args.repeats} round(s), tune budget "
          f"{args.budget}, seed {args.seed}", flush=True)
    per_candidate: dict[str, list[dict]] = {label: [] for label in checkouts}
    tunes: dict[str, list[dict]] = {label: [] for label in checkouts}
    with tempfile.TemporaryDirectory(prefix="r3-bench-harness-") as temporary:
        r3_dir = Path(temporary) / "r3"
        record(r3_dir, args.oracles_only)
        for round_number in range(args.repeats):
            for label, checkout in checkouts.items():  # interleaved: drift hits both alike
                if args.skip_evaluations:
                    break
                figures = evaluations(checkout, r3_dir, args.candidates, Path(temporary),
                                      SHORT_TIMING if args.short_timing else {})
                per_candidate[label].append(figures)
                print(f"  [{round_number + 1}/{args.repeats}] evaluations, {label}: " + ", ".join(
                    f"{k} {v['unraced']:.2f}/{v['raced']:.2f} s (checks {v['checks']:.2f} s, "
                    f"learning {v['learning']:.2f} s)"
                    + (f" ({v['too_busy']} too_busy or timeout)" if v.get("too_busy") else "")
                    for k, v in figures.items()) + f"; load {os.getloadavg()[0]:.1f}",
                    flush=True)
            for label, checkout in checkouts.items():
                if args.skip_tune:
                    break
                workdir = Path(temporary) / f"tune-{label}"
                workdir.mkdir(exist_ok=True)
                figure = tune(checkout, workdir, args,
                              ["-k", "not benchmark"] if args.oracles_only else [])
                tunes[label].append(figure)
                print(f"  [{round_number + 1}/{args.repeats}] --r3-tune, {label}: "
                      f"{figure['wall']:.1f} s ({figure['cpu']:.1f} s CPU), " + ", ".join(
                          f"{k} x{v:.2f}" for k, v in figure["speedups"].items())
                      + f"; load {os.getloadavg()[0]:.1f}", flush=True)

    if not args.skip_evaluations:
        print("\nper-candidate evaluation, median seconds over rounds and now/before: unraced "
              "(a finalist), raced (most of the search), checks (an unraced evaluation less its "
              "timing: verification and the late pass), timing (the unraced evaluation's timing, "
              "with the check of its buffers), learning (a server's start: the baseline on every "
              "planned case)")
        for kind in ("unraced", "raced", "checks", "timing", "learning"):
            for kernel in (*KERNELS, "all three"):
                figures = {label: statistics.median(
                    sum(f[k][kind] for k in KERNELS) if kernel == "all three" else f[kernel][kind]
                    for f in per_candidate[label]) for label in checkouts}
                print(f"  {kind:<8} {kernel:<11} " + "   ".join(
                    f"{label} {figures[label]:7.3f} s" for label in checkouts) + "   " + "   ".join(
                    f"{figures['now'] / figures[label]:5.2f}x" for label in olds))
    if not args.skip_tune:
        print("\nfull pytest --r3-tune of the example project, median over rounds")
        for what in ("wall", "cpu"):
            figures = {label: statistics.median(f[what] for f in tunes[label])
                       for label in checkouts}
            print(f"  {what:<5} " + "   ".join(f"{label} {figures[label]:7.1f} s"
                                               for label in checkouts)
                  + "   " + "   ".join(f"{figures['now'] / figures[label]:5.2f}x"
                                       for label in olds))


if __name__ == "__main__":
    main()
