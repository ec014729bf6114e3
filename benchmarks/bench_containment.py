"""Benchmark the cost of containing candidates: per-candidate evaluation time with the
worker contained (seccomp, Landlock, namespaces) and with containment off, and optionally
against another checkout of pytest-r3 (e.g. the commit before containment existed).

For each example kernel (scaled_add, matmul, jacobi2d) the script records the kernel's
launches from ``example_project``'s tests once, then evaluates the same non-default tunable
settings through a warm ReplayServer under each configuration, the configurations taking
turns (A B A B ...) so a busy machine slows all alike. It prints, per kernel, the median
seconds per candidate and per server start, and the ratio to the contained configuration.
Each server keeps a worker log under the recordings' folder, as ``--r3-tune`` does.

Run from the repository root::

    python benchmarks/bench_containment.py [--rounds 3] [--variants 4] [--before PATH]

``--before PATH`` adds a checkout of pytest-r3 at PATH (``git worktree add /tmp/before
HEAD~1``, say) as a third configuration; only the public ReplayServer API is used, so any
version that has it can be compared.
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
KERNELS = ("scaled_add", "matmul", "jacobi2d")

# One configuration, measured in a child process: its own pytest_r3 on sys.path, its env.
CHILD = r"""
import json, sys, time
from pathlib import Path
sys.path[:0] = [sys.argv[1], sys.argv[1] + "/example_project"]
import exampleproj  # declares the kernels
from pytest_r3.record import RecordingStore  # (public names only: any version runs this)
from pytest_r3.replay import Candidate, ReplayServer, ReplaySettings
from pytest_r3.replay.manual import load_spec

r3_dir, variants = sys.argv[2], json.loads(sys.argv[3])
settings = ReplaySettings(timing_rounds=3, warmup_rounds=1, min_sample_seconds=1e-4)
figures = {}
for name, settings_list in variants.items():
    spec = load_spec(r3_dir, name)
    store = RecordingStore(r3_dir + "/recordings")
    logs = Path(r3_dir) / "logs"  # a log as tuning keeps one: the worker's output copied
    logs.mkdir(exist_ok=True)
    started = time.perf_counter()
    server = ReplayServer(spec, store.root, store.keys(name), settings,
                          log_path=logs / f"{name}.log").start()
    start_seconds = time.perf_counter() - started
    seconds, statuses = [], []
    for macros in settings_list:
        began = time.perf_counter()
        result = server.evaluate(Candidate(macros=macros, label=str(macros)))
        seconds.append(time.perf_counter() - began)
        statuses.append(result.status)
    server.close()
    figures[name] = {"start": start_seconds, "candidates": seconds, "statuses": statuses}
print(json.dumps(figures))
"""


def non_default_variants(count: int) -> dict[str, list[dict]]:
    sys.path[:0] = [str(ROOT), str(ROOT / "example_project")]
    import exampleproj  # noqa: F401

    from pytest_r3.kernel import declaration

    chosen = {}
    for name in KERNELS:
        space = declaration.registry()[name].space
        picks = []
        for tunable, values in space.tunables.items():
            for value in values[1:]:
                candidate = {**space.default, tunable: value}
                if space.violated(candidate) is None and len(picks) < count:
                    picks.append({tunable: value})
        chosen[name] = picks
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variants", type=int, default=4)
    parser.add_argument("--before", type=Path, help="another pytest-r3 checkout to compare")
    isolation.add_option(parser)
    args = parser.parse_args()
    configurations = {"contained": (ROOT, {}), "containment off": (
        ROOT, {"PYTEST_R3_CONTAINMENT": "off"})}
    if args.before:
        configurations["before"] = (args.before.resolve(), {})
    variants = non_default_variants(args.variants)
    results: dict[str, dict[str, dict[str, list[float]]]] = {c: {} for c in configurations}
    with tempfile.TemporaryDirectory(prefix="r3-bench-containment-") as folder:
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        str(ROOT / "example_project"), "--r3-record", "-o", f"r3_dir={folder}",
                        "-k", "not cuda"], check=True, cwd=ROOT, env=isolation.environment(),
                       stdout=subprocess.DEVNULL)
        for round_index in range(args.rounds):
            order = list(configurations)
            if round_index % 2:
                order.reverse()
            for label in order:
                code, env = configurations[label]
                done = subprocess.run(
                    [sys.executable, "-c", CHILD, str(code), folder, json.dumps(variants)],
                    capture_output=True, text=True, cwd=code, env=isolation.environment(**env))
                if done.returncode:
                    sys.exit(f"{label} failed:\n{done.stderr[-3000:]}")
                for name, figures in json.loads(done.stdout.splitlines()[-1]).items():
                    kept = results[label].setdefault(name, {"start": [], "candidates": []})
                    kept["start"].append(figures["start"])
                    kept["candidates"] += figures["candidates"]
                    bad = [s for s in figures["statuses"] if s != "ok"]
                    if bad:
                        print(f"note: {label} {name}: statuses {bad}")
    print(f"per-candidate and start-up seconds, medians over {args.rounds} rounds x "
          f"{args.variants} variants (python {sys.version.split()[0]}, {os.cpu_count()} cores)")
    print(f"{'kernel':<12} {'configuration':<17} {'candidate s':>12} {'start s':>9} "
          f"{'candidate vs contained':>24}")
    for name in KERNELS:
        reference = statistics.median(results["contained"][name]["candidates"])
        for label in configurations:
            figures = results[label][name]
            median = statistics.median(figures["candidates"])
            print(f"{name:<12} {label:<17} {median:>12.4f} "
                  f"{statistics.median(figures['start']):>9.3f} {median / reference:>23.3f}x")


if __name__ == "__main__":
    main()
