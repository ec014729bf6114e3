"""Do a tuning run's claims reproduce? Each entry of a project's ``r3.lock`` re-measured in
this separate process, A/B against the baseline, interleaved, on the same recordings.

For each locked kernel the script replays the locked settings against the baseline
``--repeats`` times (each in a new replay worker, ``--rounds`` rounds each: more than
tuning takes), and prints the claim (speedup and 95% interval from the lock entry), each
re-measurement (speedup, 95% interval, share of samples dropped), and two verdicts:

- ``within``: the median re-measured speedup lies within the claimed interval, and how
  many of the repeats each do (``3/3``);
- ``real``: the re-measured speedup is beyond +-3% of 1 (a claim is never made for a
  variant within 3% of the baseline).

Run it after ``pytest --r3-tune`` in the project's folder, on a quiet machine::

    python benchmarks/bench_claims.py example_project [--r3-dir .r3] [--rounds 41]
        [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import isolation

from pytest_r3.replay import Candidate, ReplaySettings
from pytest_r3.replay.manual import replay

isolation.isolate()  # before anything reads the environment (see isolation.py)

MARGIN = 0.03


def remeasure(kernel: str, entry: dict, r3_dir: Path, rounds: int) -> dict:
    settings = ReplaySettings(timing_rounds=rounds, min_timing_rounds=rounds,
                              min_sample_seconds=2e-3)
    candidate = Candidate(macros=entry.get("macros", {}), pipeline=entry.get("pipeline", {}),
                          label="locked, re-measured")
    result = replay(kernel, candidate, r3_dir=r3_dir, settings=settings)
    if not result.ok or result.timing is None:
        return {"error": result.reason()}
    timing = result.timing
    return {"speedup": timing.speedup, "interval": list(timing.interval),
            "dropped_share": timing.dropped_share, "rounds": timing.rounds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("project", type=Path)
    parser.add_argument("--r3-dir", type=Path, default=Path(".r3"),
                        help="relative to the project (default .r3)")
    parser.add_argument("--rounds", type=int, default=41)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    isolation.add_option(parser)
    args = parser.parse_args()
    lock = json.loads((args.project / "r3.lock").read_text())
    r3_dir = args.project / args.r3_dir
    figures = {}
    print(f"{'kernel':<14} {'claimed':>22} {'re-measured (each repeat)':<52} within   real")
    for kernel, targets in sorted(lock["kernels"].items()):
        for target, entry in targets.items():
            runs = [remeasure(kernel, entry, r3_dir, args.rounds) for _ in range(args.repeats)]
            good = [run for run in runs if "error" not in run]
            claimed = entry.get("speedup")
            low, high = entry.get("speedup_interval") or [claimed, claimed]
            median = statistics.median(run["speedup"] for run in good) if good else None
            within = median is not None and low <= median <= high
            each = sum(low <= run["speedup"] <= high for run in good)
            real = median is not None and abs(median - 1) > MARGIN
            cells = ", ".join(
                f"{run['speedup']:.2f}x [{run['interval'][0]:.2f}-{run['interval'][1]:.2f}] "
                f"{100 * run['dropped_share']:.0f}%d" if "error" not in run else run["error"]
                for run in runs)
            print(f"{kernel:<14} {claimed:>7.2f}x [{low:.2f}-{high:.2f}]   {cells:<52} "
                  f"{'yes' if within else 'NO':>3} {each}/{len(runs)} "
                  f"{'yes' if real else 'NO':>4}")
            figures[f"{kernel}/{target}"] = {"claimed": claimed, "interval": [low, high],
                                             "remeasured": runs, "median": median,
                                             "within": within, "within_each": each,
                                             "real": real}
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
