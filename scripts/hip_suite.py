#!/usr/bin/env python3
"""The AMD GPU suite: HIP kernels run on a real AMD GPU (MI200/MI300: gfx90a, gfx942).

No AMD GPU is lent to this project's machines, so nothing here has run on one yet. On a
machine with ROCm, an AMD GPU and pytest-r3 installed with its HIP extra
(``pip install -e ".[hip,test]"``), from the checkout's root::

    python3 scripts/hip_suite.py test     # HIP tests on the GPU (emulation turned off)
    python3 scripts/hip_suite.py build    # benchmarks/bench_hip_suite.py: registers, LDS

``test`` runs tests/test_hip_runtime.py, test_hip_suite.py and test_hip.py with
``PYTEST_R3_HIP_EMULATION=0``, so every HIP kernel is loaded with hipModuleLoadData and
launched on the GPU, and judges skips by reason, not by count: a skip saying HIP kernels
cannot run, or that no AMD GPU is usable, fails the stage; others (a tool that is simply
absent) are listed. Logs, junit.xml and hip-summary.txt go to ``$OUT`` when set, else
./gpu-results (the GPU suite's helpers, scripts/gpu_suite.py). Standard library only.
"""

from __future__ import annotations

import argparse
import os
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_suite import ROOT, STAGE_SECONDS, results_dir, run_logged  # noqa: E402

HIP_TESTS = ["tests/test_hip_runtime.py", "tests/test_hip_suite.py", "tests/test_hip.py"]
# skip reasons that mean the GPU was not used where it should have been
_NOT_ON_THE_GPU = ("cannot run here", "no usable amd gpu", "needs an amd gpu",
                   "pytest-r3[hip]")


def judge_skips(junit: Path) -> tuple[list[str], dict[str, int]]:
    """(skips that fail the suite on an AMD GPU machine, other skip reasons with counts)."""
    bad, fine = [], {}
    for case in ElementTree.parse(junit).getroot().iter("testcase"):
        for skipped in case.findall("skipped"):
            reason = (skipped.get("message") or "").removeprefix("Skipped: ").strip()
            if any(words in reason.lower() for words in _NOT_ON_THE_GPU):
                bad.append(f"{case.get('classname')}::{case.get('name')}: {reason}")
            else:
                fine[reason] = fine.get(reason, 0) + 1
    return bad, fine


def test(args: argparse.Namespace) -> int:
    out = results_dir()
    junit = out / "junit.xml"
    command = [sys.executable, "-m", "pytest", *HIP_TESTS, *args.pytest_args,
               "-p", "no:cacheprovider", "-q", "-rs", f"--junitxml={junit}"]
    status = run_logged(command, "hip-tests.log", STAGE_SECONDS,
                        env={**os.environ, "PYTEST_R3_HIP_EMULATION": "0",
                             "PYTHONUNBUFFERED": "1"})
    bad, fine = judge_skips(junit) if junit.is_file() else (["no JUnit report"], {})
    lines = [f"pytest exit status {status}"]
    lines += [f"SKIP THAT FAILS THE SUITE: {line}" for line in bad]
    lines += [f"skip (fine here, {count}x): {reason}" for reason, count in sorted(fine.items())]
    (out / "hip-summary.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 1 if status != 0 or bad else 0


def build(args: argparse.Namespace) -> int:
    out = results_dir()
    return run_logged([sys.executable, str(ROOT / "benchmarks" / "bench_hip_suite.py"),
                       "--json", str(out / "bench_hip_suite.json")], "hip-build.log",
                      STAGE_SECONDS)


def main(argv: list[str] | None = None) -> int:
    top = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    stages = top.add_subparsers(dest="stage", required=True)
    testing = stages.add_parser("test", help="HIP tests on the AMD GPU, skips judged")
    testing.add_argument("pytest_args", nargs="*", help="more pytest arguments")
    stages.add_parser("build", help="registers, LDS and occupancy of the HIP suite")
    args = top.parse_args(argv)
    return {"test": test, "build": build}[args.stage](args)


if __name__ == "__main__":
    sys.exit(main())
