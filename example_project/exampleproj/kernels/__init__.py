"""The package's compute kernels, declared once; calling one launches the C code.

Each tunable's first value reproduces the plain source (0 = no blocking, or the compiler's
own choice of unrolling and vector width), so the baseline is what ``clang -O3`` gives.
"""

import pytest_r3 as r3

scaled_add = r3.kernel(
    "scaled_add.c",
    entry="scaled_add",
    tune={"UNROLL": [0, 1, 2, 4, 8], "VECTOR_WIDTH": [0, 1, 4, 8, 16]},
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
)

jacobi2d = r3.kernel(
    "jacobi2d.c",
    entry="jacobi2d",
    tune={
        "BLOCK_ROWS": [0, 8, 16, 32, 64],
        "BLOCK_COLS": [0, 16, 32, 64, 128, 256],
        "UNROLL": [0, 1, 2, 4, 8],
    },
)
