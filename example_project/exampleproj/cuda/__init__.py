"""The package's GPU kernels, declared once. Declaring compiles nothing and needs neither
a CUDA runtime nor a GPU; calling a kernel does (``pip install "pytest-r3[cuda]"``).

Each tunable's first value is the baseline a hand-written launch would use. ``work=``
gives the bytes a call moves (and its flops): the report's achieved GB/s, and on a GPU the
speed-of-light check a timing must pass (docs/cuda.md, "Timing on a GPU").
"""

import pytest_r3 as r3
from pytest_r3 import cdiv

# one thread per ITEMS elements: the grid shrinks as each thread does more
saxpy = r3.kernel(
    "saxpy.cu",
    entry="saxpy",
    backend="cuda",
    tune={"BLOCK": [256, 64, 128, 512, 1024], "ITEMS": [1, 2, 4, 8]},
    launch=lambda args, t: {"grid": (cdiv(args["n"], t["BLOCK"] * t["ITEMS"]),)},
    work=lambda a: {"flops": 2 * a["n"], "bytes": 3 * 4 * a["n"]},  # x read, y read+written
)

# a 2-D block from the BLOCK_X/BLOCK_Y tunables; the device's limit of 1024 threads per block
# rules out combinations such as 256 x 8 before the tuner ever tries them
stencil2d = r3.kernel(
    "stencil2d.cu",
    entry="stencil2d",
    backend="cuda",
    tune={"BLOCK_X": [32, 16, 64, 128, 256], "BLOCK_Y": [8, 1, 2, 4, 16, 32]},
    launch={"grid": lambda args, t: (cdiv(args["cols"], t["BLOCK_X"]),
                                     cdiv(args["rows"], t["BLOCK_Y"]))},
)

# a TILE x TILE block per output tile; TILE is also the shared-memory tile's size
matmul_tiled = r3.kernel(
    "matmul.cu",
    entry="matmul_tiled",
    backend="cuda",
    tune={"TILE": [16, 8, 32]},
    launch={"grid": lambda args, t: (cdiv(args["n"], t["TILE"]), cdiv(args["m"], t["TILE"])),
            "block": lambda t: (t["TILE"], t["TILE"])},
    # a (m x k) and b (k x n) read once from DRAM at best, c (m x n) written
    work=lambda a: {"flops": 2 * a["m"] * a["n"] * a["k"],
                    "bytes": 4 * (a["m"] * a["k"] + a["k"] * a["n"] + a["m"] * a["n"])},
)

__all__ = ["matmul_tiled", "saxpy", "stencil2d"]
