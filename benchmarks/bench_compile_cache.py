"""Benchmark the on-disk compiled-code cache: what kernels cost a test run and an application
start, with an empty cache (cold) and a filled one (warm).

A project is generated with 10, 40 and 100 kernels (each a small saxpy with its own
``defines=``, so each has its own machine code) and one test per kernel; the same with 10
and 40 CUDA kernels, run in emulation (``PYTEST_R3_CUDA_EMULATION=1``: compiled for the
host, so it runs on any machine; cached are clang's output, the signature and the host
object code). Measured, each in a
fresh process and repeated (medians shown):

- a plain ``pytest`` run: its wall time, and the kernels' share of it (the sum of each
  kernel's first call, which is where it is compiled or loaded, timed inside the test);
- a Python process that imports the package and calls every kernel once: the same figures;
- the per-kernel warm overhead: a kernel's first call in a warm process minus its second
  call (what loading it from the cache adds), median over kernels. The target is under 5 ms.

Cold runs start from an empty cache folder each time; warm runs reuse the one a cold run
filled. The cache folder is a temporary one (PYTEST_R3_CACHE_DIR), never the user's.

Run from the repository root::

    python benchmarks/bench_compile_cache.py [--kernels 10 40 100] [--cuda-kernels 10 40]
                                             [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
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
TARGET_MS = 5.0

KERNEL_C = """\
void saxpy(long n, float a, const float *x, float *y)
{
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + y[i] + OFFSET;
}
"""

PACKAGE = """\
import pytest_r3 as r3

KERNELS = [r3.kernel("saxpy.c", entry="saxpy", name=f"saxpy_{i}", defines={"OFFSET": i})
           for i in range(COUNT)]
"""

KERNEL_CU = """\
extern "C" __global__ void saxpy(long n, float a, const float *x, float *y)
{
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i] + OFFSET;
}
"""

PACKAGE_CUDA = """\
import pytest_r3 as r3

KERNELS = [r3.kernel("saxpy.cu", entry="saxpy", name=f"saxpy_{i}", defines={"OFFSET": i},
                     backend="cuda", launch={"grid": lambda args, t: (r3.cdiv(args["n"], 64),),
                                             "block": (64,)})
           for i in range(COUNT)]
"""
# environment of the CUDA rows: emulation, so that every machine measures the same thing
CUDA_ENV = {"PYTEST_R3_CUDA_EMULATION": "1"}

# the first call's time goes to the file named by BENCH_TIMES: (first, second) per kernel
TIMING = """\
import json
import os
import time

import numpy as np


def first_and_second_call(kernel, offset):
    x = np.arange(64, dtype=np.float32)
    y = np.zeros(64, dtype=np.float32)
    start = time.perf_counter()
    kernel(64, 2.0, x, y)
    first = time.perf_counter() - start
    start = time.perf_counter()
    kernel(64, 2.0, x, y)
    second = time.perf_counter() - start
    assert y[1] == 2 * (2.0 + offset), y[:2]
    with open(os.environ["BENCH_TIMES"], "a") as out:
        out.write(json.dumps([first, second]) + "\\n")
"""

TESTS = """\
import pytest

from benchproj import KERNELS
from benchproj.timing import first_and_second_call


@pytest.mark.parametrize("index", range(len(KERNELS)))
def test_kernel(index):
    first_and_second_call(KERNELS[index], index)
"""

APP = """\
from benchproj import KERNELS
from benchproj.timing import first_and_second_call

for index, kernel in enumerate(KERNELS):
    first_and_second_call(kernel, index)
"""


def make_project(folder: Path, count: int, backend: str) -> None:
    package = folder / "benchproj"
    package.mkdir(parents=True)
    if backend == "cuda":
        (package / "saxpy.cu").write_text(KERNEL_CU)
        (package / "__init__.py").write_text(PACKAGE_CUDA.replace("COUNT", str(count)))
    else:
        (package / "saxpy.c").write_text(KERNEL_C)
        (package / "__init__.py").write_text(PACKAGE.replace("COUNT", str(count)))
    (package / "timing.py").write_text(TIMING)
    (folder / "tests").mkdir()
    (folder / "tests" / "test_kernels.py").write_text(TESTS)
    (folder / "app.py").write_text(APP)
    (folder / "conftest.py").write_text('"""Puts the project on sys.path."""\n')


def run_once(folder: Path, cache: Path, command: str, code: Path, backend: str) -> dict:
    """One process: its wall time, and each kernel's first and second call."""
    times = folder / "times.jsonl"
    times.unlink(missing_ok=True)
    args = ([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]
            if command == "pytest" else [sys.executable, "app.py"])
    env = isolation.environment(PYTEST_R3_CACHE_DIR=str(cache), BENCH_TIMES=str(times),
                                PYTHONPATH=os.pathsep.join([str(code), str(folder)]),
                                **(CUDA_ENV if backend == "cuda" else {}))
    start = time.perf_counter()
    result = subprocess.run(args, cwd=folder, env=env, capture_output=True, text=True,
                            timeout=1800)
    wall = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"{command} failed:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}")
    calls = [json.loads(line) for line in times.read_text().splitlines()]
    return {"wall": wall, "kernels": sum(first for first, _ in calls),
            "overheads": [first - second for first, second in calls]}


def measure(count: int, repeats: int, code: Path, backend: str) -> dict:
    figures: dict = {}
    with tempfile.TemporaryDirectory(prefix="bench-compile-cache-") as scratch:
        folder = Path(scratch) / "project"
        make_project(folder, count, backend)
        cache = Path(scratch) / "cache"
        for command in ("pytest", "python"):
            cold, warm = [], []
            for _ in range(repeats):  # cold and warm take turns: a busy spell hits both
                shutil.rmtree(cache, ignore_errors=True)
                cold.append(run_once(folder, cache, command, code, backend))
                warm.append(run_once(folder, cache, command, code, backend))
            figures[command] = {"cold": cold, "warm": warm}
    return figures


def median_of(runs: list[dict], key: str) -> float:
    return statistics.median(run[key] for run in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernels", type=int, nargs="*", default=[10, 40, 100])
    parser.add_argument("--cuda-kernels", type=int, nargs="*", default=[10, 40],
                        help="CUDA kernels (emulated) per project; none to skip")
    parser.add_argument("--repeats", type=int, default=3)
    isolation.add_option(parser)
    args = parser.parse_args()
    print(f"compiled-code cache, {args.repeats} cold/warm pairs per figure (medians); "
          "'kernels' is the sum of each kernel's first call")
    header = (f"{'backend':>8} {'kernels':>7} {'process':>7} | {'cold wall':>9} "
              f"{'kernels':>8} {'share':>6} | {'warm wall':>9} {'kernels':>8} {'share':>6} | "
              f"{'saved':>7} | {'warm ms/kernel':>14}")
    print(header)
    print("-" * len(header))
    worst = 0.0
    with tempfile.TemporaryDirectory(prefix="bench-compile-cache-code-") as snapshot:
        # a copy of the code, taken now: an edit of the checkout while this runs would
        # change pytest-r3's code identity, and with it every cache key
        code = Path(snapshot)
        shutil.copytree(ROOT / "pytest_r3", code / "pytest_r3",
                        ignore=shutil.ignore_patterns("__pycache__"))
        worst = report(args, code)
    verdict = "met" if worst < TARGET_MS else "NOT met"
    print(f"per-kernel warm overhead: worst median {worst:.2f} ms; target < {TARGET_MS} ms "
          f"{verdict}")


def report(args: argparse.Namespace, code: Path) -> float:
    """Measure and print each row; the worst median warm overhead per kernel (ms)."""
    worst = 0.0
    rows = [("cpu", count) for count in args.kernels] + \
        [("cuda", count) for count in args.cuda_kernels]
    for backend, count in rows:
        figures = measure(count, args.repeats, code, backend)
        label = "cuda-emu" if backend == "cuda" else backend
        for command in ("pytest", "python"):
            cold, warm = figures[command]["cold"], figures[command]["warm"]
            cold_wall, cold_k = median_of(cold, "wall"), median_of(cold, "kernels")
            warm_wall, warm_k = median_of(warm, "wall"), median_of(warm, "kernels")
            overhead = statistics.median(o for run in warm for o in run["overheads"]) * 1e3
            worst = max(worst, overhead)
            print(f"{label:>8} {count:>7} {command:>7} | {cold_wall:>8.2f}s {cold_k:>7.2f}s "
                  f"{cold_k / cold_wall:>6.0%} | {warm_wall:>8.2f}s {warm_k:>7.2f}s "
                  f"{warm_k / warm_wall:>6.0%} | {cold_wall - warm_wall:>6.2f}s | "
                  f"{overhead:>14.2f}", flush=True)
    return worst


if __name__ == "__main__":
    main()
