"""Benchmark CUDA emulation on the CPU against the CPU backend doing the same work.

Side by side, median seconds per call (arguments copied in and out included, as a test
sees them):

- the example project's ``matmul_tiled.cu`` emulated at 256^3 (fibers: it has barriers), at
  TILE 16 (its baseline) and 8, and the CPU backend's ``matmul.c`` at n = 256 (double, the
  naive baseline and a blocked variant);
- ``saxpy.cu`` emulated at 2^20 elements (a plain loop: no barriers), and the CPU backend's
  ``scaled_add.c`` on the same 2^20 floats.

Also the seconds the first build of each took (clang + LLVM + loading). Emulation is forced
on (``PYTEST_R3_CUDA_EMULATION=1``), so a machine with a GPU measures it too. Run from the
repository root::

    python benchmarks/bench_cuda_emulation.py [--repeat 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import isolation

isolation.isolate()  # before anything reads the environment (see isolation.py)

ROOT = Path(__file__).resolve().parent.parent
os.environ["PYTEST_R3_CUDA_EMULATION"] = "1"
sys.path[:0] = [str(ROOT), str(ROOT / "example_project")]

import numpy as np  # noqa: E402
from exampleproj.cuda import matmul_tiled, saxpy  # noqa: E402
from exampleproj.kernels import matmul, scaled_add  # noqa: E402


def median_seconds(call, repeat: int) -> float:
    call()  # warm: the first call builds
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def build_seconds(kernel, **tunables) -> tuple[object, float]:
    started = time.perf_counter()
    launcher = kernel.configure(**tunables)
    return launcher, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15)
    isolation.add_option(parser)
    options = parser.parse_args()
    rng = np.random.default_rng(0)
    rows = []

    n = 256
    a32 = rng.standard_normal((n, n), dtype=np.float32)
    b32 = rng.standard_normal((n, n), dtype=np.float32)
    c32 = np.empty((n, n), np.float32)
    a64, b64, c64 = a32.astype(np.float64), b32.astype(np.float64), np.empty((n, n))
    for tile in (16, 8):
        launcher, built = build_seconds(matmul_tiled, TILE=tile)
        seconds = median_seconds(lambda f=launcher: f(n, n, n, a32, b32, c32), options.repeat)
        assert np.allclose(c32, a64 @ b64, rtol=1e-3, atol=1e-3)
        rows.append((f"emulated matmul_tiled.cu 256^3 TILE={tile}", seconds, built))
    for name, tunables in (("naive", {}), ("blocked 32x32x32",
                                           {"TILE_I": 32, "TILE_J": 32, "TILE_K": 32})):
        launcher, built = build_seconds(matmul, **tunables)
        seconds = median_seconds(lambda f=launcher: f(n, a64, b64, c64), options.repeat)
        assert np.allclose(c64, a64 @ b64)
        rows.append((f"cpu matmul.c n=256 (double) {name}", seconds, built))

    size = 1 << 20
    x = rng.standard_normal(size, dtype=np.float32)
    y = rng.standard_normal(size, dtype=np.float32)
    launcher, built = build_seconds(saxpy, BLOCK=256, ITEMS=1)
    seconds = median_seconds(lambda: launcher(size, 2.5, x, y), options.repeat)
    rows.append(("emulated saxpy.cu 2^20", seconds, built))
    launcher, built = build_seconds(scaled_add)
    seconds = median_seconds(lambda: launcher(size, 2.5, x, y), options.repeat)
    rows.append(("cpu scaled_add.c 2^20", seconds, built))

    print(f"{'work':44} {'median ms':>10} {'first build s':>14}")
    for label, seconds, built in rows:
        print(f"{label:44} {seconds * 1e3:10.2f} {built:14.2f}")


if __name__ == "__main__":
    main()
