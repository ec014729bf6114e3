"""Benchmark replay: evaluating a variant on recordings vs re-running the tests for it.

For each example kernel (scaled_add, matmul, jacobi2d) this script, in one run:

0. records the kernel's launches from ``example_project``'s tests into a temporary r3
   folder (``python -m pytest example_project --r3-record -o r3_dir=...``); the
   production-sized benchmark tests make workloads, so the replay evaluation times the
   candidate at production size (``--oracles-only`` leaves them out: timing on the oracle
   tests' inputs, as without workloads);
(a) evaluates a few non-default tunable settings, one at a time, through a warm
    ReplayServer (compile, sandbox check, verification on every recording and on fresh
    inputs, interleaved timing against the baseline: default ReplaySettings, as tuning uses)
    and, for the same settings, re-runs the kernel's reference tests in a fresh pytest
    process with that variant forced active (a small ``-p`` plugin activates it at
    ``pytest_configure`` and counts the launches that used it). Each variant is also
    evaluated as the search evaluates it once it knows a better one: raced against the
    best of the other variants, timed beside it. It prints the median wall time of each
    and the reduction. With workloads it also re-runs the tests together
    with the kernel's benchmark test, timed (``--benchmark-enable``): the fresh-run way to
    learn what the replay evaluation learns, the time at production size;
(b) the compile time inside the worker of a pipeline-only change (clang is skipped: the
    unoptimised IR is cached in memory; only the LLVM pipeline and JIT run) vs a macro
    change (a new clang run plus LLVM), from Result.compile_seconds.

Run from anywhere::

    python benchmarks/bench_replay.py [--variants N] [--oracles-only]
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
import textwrap
import time
from pathlib import Path

import isolation

isolation.isolate()  # before anything reads the environment (see isolation.py)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "example_project"
sys.path.insert(0, str(EXAMPLE))

import exampleproj  # noqa: E402,F401  (declares the kernels)

from pytest_r3.kernel import declaration  # noqa: E402
from pytest_r3.record.store import RecordingStore  # noqa: E402
from pytest_r3.replay import Candidate, ReplayServer, ReplaySettings  # noqa: E402
from pytest_r3.replay.manual import load_spec  # noqa: E402

KERNELS = ("scaled_add", "matmul", "jacobi2d")
QUICK = ReplaySettings(timing_rounds=3, warmup_rounds=1, min_sample_seconds=1e-4)
PIPELINE_CHANGES = [
    {"level": 2}, {"loop_unroll": False}, {"slp_vectorize": False},
    {"loop_interleave": False}, {"level": 1}, {"loop_vectorize": False},
]

FORCE_PLUGIN = textwrap.dedent('''\
    """Force one variant of one kernel for a whole pytest run, and prove it was used."""
    import json
    import os

    _state = {}


    def pytest_configure(config):
        import exampleproj  # noqa: F401  (declares the kernels)
        from pytest_r3.kernel import declaration

        wanted = json.loads(os.environ["R3_BENCH_FORCE"])
        kernel = declaration.lookup(wanted["kernel"])
        variant = kernel.variant(**wanted["macros"])
        kernel.activate(variant)
        _state.update(kernel=kernel, variant=variant, launches=0, forced=0)
        declaration.add_interceptor(_count)


    def _count(kernel, args, proceed):
        if kernel is _state["kernel"]:
            _state["launches"] += 1
            _state["forced"] += (kernel.active == _state["variant"]
                                 and kernel._active_launcher is kernel.build(_state["variant"]))
        return proceed()


    def pytest_unconfigure(config):
        with open(os.environ["R3_BENCH_REPORT"], "w") as stream:
            json.dump({"launches": _state.get("launches", 0),
                       "forced": _state.get("forced", 0)}, stream)
''')


def record(r3_dir: Path, oracles_only: bool) -> None:
    command = [sys.executable, "-m", "pytest", str(EXAMPLE), "--r3-record", "-o",
               f"r3_dir={r3_dir}", "-q", "-p", "no:cacheprovider",
               *(["-k", "not benchmark"] if oracles_only else [])]
    result = subprocess.run(command, capture_output=True, text=True, env=isolation.environment())
    if result.returncode != 0:
        sys.exit(f"recording failed:\n{result.stdout}\n{result.stderr}")


def non_default_variants(name: str, count: int) -> list[dict]:
    """``count`` distinct valid tunable settings other than the default, spread out."""
    kernel = declaration.lookup(name)
    valid = [v for v in kernel.space.iter_valid() if v != kernel.space.default]
    step = max(1, len(valid) // count)
    chosen = valid[step // 2::step][:count]
    return [{k: v for k, v in values.items() if v != kernel.space.default[k]}
            for values in chosen]


def evaluate_on_server(name: str, r3_dir: Path, variants: list[dict],
                       settings: ReplaySettings, pipelines: bool,
                       races: list[tuple[float, dict | None]] | None = None) -> dict:
    """Each variant evaluated once on a fresh, warmed-up server (cold clang cache); with
    ``races``, each raced as the search races it: against a best speedup so far, timed
    beside the configuration that reached it (None: the baseline)."""
    spec = load_spec(r3_dir, name)
    store = RecordingStore(r3_dir / "recordings")
    keys = store.keys(name)
    started = time.perf_counter()
    server = ReplayServer(spec, store.root, keys, settings).start()
    start_seconds = time.perf_counter() - started
    walls, macro_compiles, pipeline_compiles, statuses = [], [], [], []
    try:
        server.evaluate(Candidate(label="warm-up"))  # first request: lazy imports, caches
        speedups, raced = [], []
        for number, macros in enumerate(variants):
            race_against, race_with = races[number] if races else (None, None)
            candidate = Candidate(macros=macros, label=json.dumps(macros),
                                  race_against=race_against,
                                  race_with=None if race_with is None else
                                  {"macros": race_with, "pipeline": {}, "source_text": None,
                                   "launch": {}})
            if race_with is not None:  # a search builds its best once per worker, not per
                server.evaluate(Candidate(macros=race_with, race_against=race_against,
                                          race_with=candidate.race_with))  # candidate
            started = time.perf_counter()
            result = server.evaluate(candidate)
            walls.append(time.perf_counter() - started)
            statuses.append(result.status)
            macro_compiles.append(result.compile_seconds)
            speedups.append(result.speedup if result.ok else None)
            raced.append(result.timing is not None and result.timing.raced)
        for pipeline in PIPELINE_CHANGES if pipelines else ():
            result = server.evaluate(Candidate(pipeline=pipeline, label=json.dumps(pipeline)))
            statuses.append(result.status)
            pipeline_compiles.append(result.compile_seconds)
    finally:
        server.close()
    return {"start": start_seconds, "walls": walls, "recordings": len(keys),
            "macro": macro_compiles, "pipeline": pipeline_compiles, "statuses": statuses,
            "speedups": speedups, "raced": raced}


def races_of(variants: list[dict], speedups: list[float | None]) -> list[tuple]:
    """Each variant's race as a search that had found the best of the others would run it:
    against that speedup, beside that configuration (the baseline when none beat it)."""
    races = []
    for number in range(len(variants)):
        others = [(s, v) for i, (s, v) in enumerate(zip(speedups, variants)) if i != number
                  and s is not None and s > 1.0]
        best = max(others, key=lambda pair: pair[0], default=(1.0, None))
        races.append(best)
    return races


def rerun_tests(name: str, variants: list[dict], workdir: Path,
                benchmark: bool = False) -> list[float]:
    """A fresh pytest of the kernel's tests per variant; with ``benchmark``, its
    production-sized benchmark test too, timed by pytest-benchmark."""
    (workdir / "r3_bench_force.py").write_text(FORCE_PLUGIN)
    tests = [str(EXAMPLE / "tests" / f"test_{name}.py")]
    if benchmark:
        tests += [f"{EXAMPLE / 'tests' / 'test_benchmarks.py'}::test_{name}_production",
                  "--benchmark-enable"]
    walls = []
    for macros in variants:
        report = workdir / "report.json"
        report.unlink(missing_ok=True)
        env = isolation.environment(PYTHONPATH=os.pathsep.join([str(workdir), str(EXAMPLE)]),
                        R3_BENCH_FORCE=json.dumps({"kernel": name, "macros": macros}),
                        R3_BENCH_REPORT=str(report))
        command = [sys.executable, "-m", "pytest", *tests, "-q", "-p",
                   "no:cacheprovider", "-p", "r3_bench_force"]
        started = time.perf_counter()
        result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT)
        walls.append(time.perf_counter() - started)
        if result.returncode != 0:
            sys.exit(f"tests of {name} failed with {macros}:\n{result.stdout}\n{result.stderr}")
        seen = json.loads(report.read_text())
        if not seen["launches"] or seen["forced"] != seen["launches"]:
            sys.exit(f"variant {macros} of {name} was not active for every launch: {seen}")
    return walls


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variants", type=int, default=4,
                        help="non-default tunable settings per kernel (default 4)")
    parser.add_argument("--oracles-only", action="store_true",
                        help="record without the benchmark tests: no workloads, timing on "
                             "the oracle tests' inputs")
    isolation.add_option(parser)
    args = parser.parse_args()
    began = time.perf_counter()
    print(f"python {platform.python_version()} on {platform.machine()}, "
          f"{os.cpu_count()} CPU(s); {args.variants} variants per kernel; "
          + ("oracle recordings only" if args.oracles_only else
             "workloads from the benchmark tests"))
    with tempfile.TemporaryDirectory(prefix="r3-bench-replay-") as temporary:
        temporary = Path(temporary)
        r3_dir = temporary / "r3"
        started = time.perf_counter()
        record(r3_dir, args.oracles_only)
        print(f"recorded the example project in {time.perf_counter() - started:.2f} s "
              f"into {r3_dir}\n")
        rows, timed_runs = {}, {}
        for name in KERNELS:
            variants = non_default_variants(name, args.variants)
            server = evaluate_on_server(name, r3_dir, variants, ReplaySettings(), True)
            quick = evaluate_on_server(name, r3_dir, variants, QUICK, False)
            raced = evaluate_on_server(name, r3_dir, variants, ReplaySettings(), False,
                                       races_of(variants, server["speedups"]))
            server["raced_walls"], server["raced_flags"] = raced["walls"], raced["raced"]
            bad = [s for s in server["statuses"] + quick["statuses"] if s != "ok"]
            if bad:
                print(f"note: {name}: non-ok results {bad}")
            rows[name] = (variants, server, quick, rerun_tests(name, variants, temporary))
            if not args.oracles_only:
                timed_runs[name] = rerun_tests(name, variants, temporary, benchmark=True)

    print("(a) one candidate: warm ReplayServer vs a fresh pytest run of the kernel's tests")
    header = (f"{'kernel':<11} {'recs':>4} {'fresh pytest':>13} {'replay':>10} "
              f"{'reduction':>10} {'replay raced':>13} {'reduction':>10} {'lost':>5} "
              f"{'replay quick':>13} {'reduction':>10} {'compile':>9} {'server start':>13}")
    print(header)
    print("-" * len(header))
    reductions, raced_reductions, quick_reductions = [], [], []
    for name, (_, server, quick, pytest_walls) in rows.items():
        rerun = median(pytest_walls)
        evaluate, fast = median(server["walls"]), median(quick["walls"])
        raced = median(server["raced_walls"])
        compile_ = median([sum(c.values()) for c in server["macro"]])
        reductions.append(100 * (1 - evaluate / rerun))
        raced_reductions.append(100 * (1 - raced / rerun))
        quick_reductions.append(100 * (1 - fast / rerun))
        print(f"{name:<11} {server['recordings']:>4} {rerun * 1e3:>10.1f} ms "
              f"{evaluate * 1e3:>7.1f} ms {reductions[-1]:>9.1f}% {raced * 1e3:>10.1f} ms "
              f"{raced_reductions[-1]:>9.1f}% {sum(server['raced_flags']):>2}/"
              f"{len(server['raced_flags'])} {fast * 1e3:>10.1f} ms "
              f"{quick_reductions[-1]:>9.1f}% {compile_ * 1e3:>6.1f} ms "
              f"{server['start'] * 1e3:>10.1f} ms")
    print(f"medians over {args.variants} variants each (the same variants in every column).")
    print("  fresh pytest: python -m pytest example_project/tests/test_<kernel>.py with the "
          "variant forced active (verified: every launch used it); checks correctness only")
    print("  replay: ReplayServer.evaluate unraced with default ReplaySettings, as the search's "
          "finalists are confirmed: compile, sandbox check, verify on every recording + fresh "
          "inputs, and time it against the baseline (2 warm-up + up to 15 interleaved rounds, "
          ">= 2 ms samples)")
    print("  replay raced: the same variant as the search evaluates it once it has found the "
          "best of the other variants: raced against that speedup, timed beside that "
          "configuration, verified in full only if it does not lose (lost: how many lost)")
    print("  replay quick: unraced with timing cut to 1 warm-up + 3 rounds of >= 0.1 ms "
          "samples (correctness checks unchanged)")
    print("  compile: clang + LLVM part of a replay evaluation (a fresh pytest pays it too)")
    print("  server start: load recordings, build and run the baseline; paid once per kernel")
    print(f"reduction, replay: min {min(reductions):.1f}%, median {median(reductions):.1f}%; "
          f"replay raced: min {min(raced_reductions):.1f}%, median "
          f"{median(raced_reductions):.1f}%; replay quick: min {min(quick_reductions):.1f}%, "
          f"median {median(quick_reductions):.1f}% (aim >= 90%)")
    if timed_runs:
        print("\n(a') with workloads: the replay evaluation (it times the candidate at "
              "production size) vs a fresh pytest of the kernel's tests plus its benchmark "
              "test, timed by pytest-benchmark (--benchmark-enable)")
        header = f"{'kernel':<11} {'fresh pytest + benchmark':>25} {'replay':>10} {'reduction':>10}"
        print(header)
        print("-" * len(header))
        timed_reductions = []
        for name, walls in timed_runs.items():
            evaluate = median(rows[name][1]["walls"])
            timed_reductions.append(100 * (1 - evaluate / median(walls)))
            print(f"{name:<11} {median(walls) * 1e3:>22.1f} ms {evaluate * 1e3:>7.1f} ms "
                  f"{timed_reductions[-1]:>9.1f}%")
        print(f"reduction: min {min(timed_reductions):.1f}%, median "
              f"{median(timed_reductions):.1f}%")
    for name, (variants, *_) in rows.items():
        print(f"  {name} variants: " + "; ".join(
            ", ".join(f"{k}={v}" for k, v in sorted(m.items())) for m in variants))

    print("\n(b) compile time inside the worker (Result.compile_seconds), median per kernel")
    header = (f"{'kernel':<11} {'pipeline-only: clang':>21} {'llvm':>9} {'total':>9}   "
              f"{'macro change: clang':>20} {'llvm':>9} {'total':>9}")
    print(header)
    print("-" * len(header))
    for name, (_, server, _, _) in rows.items():
        cells = []
        for kind in ("pipeline", "macro"):
            clang = median([c.get("clang", float("nan")) for c in server[kind]])
            llvm = median([c.get("llvm", float("nan")) for c in server[kind]])
            cells.append((clang, llvm, clang + llvm))
        (pc, pl, pt), (mc, ml, mt) = cells
        print(f"{name:<11} {pc * 1e3:>18.2f} ms {pl * 1e3:>6.1f} ms {pt * 1e3:>6.1f} ms   "
              f"{mc * 1e3:>17.1f} ms {ml * 1e3:>6.1f} ms {mt * 1e3:>6.1f} ms")
    print(f"pipeline changes: {len(PIPELINE_CHANGES)} "
          f"({', '.join(json.dumps(p) for p in PIPELINE_CHANGES)}); macro changes: the "
          "variants of (a), each compiled for the first time")
    print(f"\ntotal benchmark time {time.perf_counter() - began:.1f} s")


if __name__ == "__main__":
    main()
