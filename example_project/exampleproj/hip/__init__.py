"""The package's AMD GPU kernels (HIP), declared once. Declaring compiles nothing and needs
neither ROCm nor a GPU; without an AMD GPU the kernels run in pytest-r3's emulation on the
CPU (64-lane wavefronts), which verifies and records them but never tunes them. On an AMD
GPU they need ``pip install "pytest-r3[hip]"``.
"""

import pytest_r3 as r3
from pytest_r3 import cdiv

# one block per row; BLOCK threads (a multiple of the 64-lane wavefront) share it
row_sums = r3.kernel(
    "row_sums.hip",
    entry="row_sums",
    backend="hip",
    tune={"BLOCK": [256, 64, 128, 512, 1024]},
    launch={"grid": lambda args, t: (args["rows"],), "block": lambda t: (t["BLOCK"],)},
)

# one source, two backends: the same file declared for NVIDIA (CUDA) and AMD (HIP) GPUs
_sum_squares_launch = {"grid": lambda args, t: (min(cdiv(args["n"], t["BLOCK"]), 1024),),
                       "block": lambda t: (t["BLOCK"],)}
sum_squares_cuda = r3.kernel("sum_squares.cu", entry="sum_squares", backend="cuda",
                             name="sum_squares_cuda", tune={"BLOCK": [256, 128, 512]},
                             launch=_sum_squares_launch)
sum_squares_hip = r3.kernel("sum_squares.cu", entry="sum_squares", backend="hip",
                            name="sum_squares_hip", tune={"BLOCK": [256, 128, 512]},
                            launch=_sum_squares_launch)

__all__ = ["row_sums", "sum_squares_cuda", "sum_squares_hip"]
