"""The package's compute kernels, declared once; calling one launches the C code.

Each tunable's first value reproduces the plain source (0 = no blocking, or the compiler's
own choice of unrolling and vector width), so the baseline is what ``clang -O3`` gives.
``work=`` says how much one call computes and moves, so report.html shows the achieved
GFLOP/s and GB/s.
"""

import pytest_r3 as r3

scaled_add = r3.kernel(
    "scaled_add.c",
    entry="scaled_add",
    tune={"UNROLL": [0, 1, 2, 4, 8], "VECTOR_WIDTH": [0, 1, 4, 8, 16]},
    # y = alpha * x + y: 2 flops, and x and y read and y written, per element
    work=lambda a: {"flops": 2 * a["n"], "bytes": 3 * 4 * a["n"]},
)

matmul = r3.kernel(
    "matmul.c",
    entry="matmul",
    tune={
        "TILE_I": [0, 8, 16, 32, 64],
        "TILE_J": [0, 8, 16, 32, 64, 128],
        "TILE_K": [0, 8, 16, 32, 64, 128],
    },
    constraints=["TILE_I * TILE_J <= 4096", "(TILE_I == 0) == (TILE_J == 0)"],
    # c is always a fresh array: a rewrite may add restrict without an "assumes" note
    no_alias=True,
    work=lambda a: {"flops": 2 * a["n"] ** 3, "bytes": 3 * 8 * a["n"] ** 2},
)

jacobi2d = r3.kernel(
    "jacobi2d.c",
    entry="jacobi2d",
    tune={
        "BLOCK_ROWS": [0, 8, 16, 32, 64],
        "BLOCK_COLS": [0, 16, 32, 64, 128, 256],
        "UNROLL": [0, 1, 2, 4, 8],
    },
    # the mean of four neighbours per interior point: 3 adds and a multiply; one grid
    # read and one written
    work=lambda a: {"flops": 4 * (a["rows"] - 2) * (a["cols"] - 2),
                    "bytes": 2 * 4 * a["rows"] * a["cols"]},
)
