"""Kernels from files as a benchmark suite ships them, declared without editing the files:
gemm/gemm.c keeps its static kernel, its C99 array parameters, its main and driver code;
its configuration is what the suite's build passes (-D flags, -I utilities)."""

import pytest_r3 as r3

gemm = r3.kernel(
    "gemm/gemm.c",
    entry="kernel_gemm",
    defines={"DATA_TYPE_IS_FLOAT": 1, "POLYBENCH_USE_C99_PROTO": None,
             "POLYBENCH_USE_RESTRICT": None, "MINI_DATASET": None},
    include_dirs=["utilities"],
)

__all__ = ["gemm"]
