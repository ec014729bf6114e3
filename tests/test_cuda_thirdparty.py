"""Real CUDA files of public projects, unchanged (tests/cuda_thirdparty/, see its README).

Every kernel in them is declared with ``r3.kernel`` as it stands, built to PTX (assembled by
ptxas where it is installed), and run in emulation against numpy; sizes are small, since
emulation runs each CUDA thread on the CPU.
"""

from __future__ import annotations

import hashlib
import json
import math
import platform
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

import pytest_r3 as r3
from pytest_r3 import Pipeline, cdiv
from pytest_r3.backends import forget_backend
from pytest_r3.backends.cuda import CUDABackend, runtime, toolchain
from pytest_r3.backends.cuda import emulation as cuda_emulation

SUITE = Path(__file__).resolve().parent / "cuda_thirdparty"
LLMC = SUITE / "llm.c" / "dev" / "cuda"
SAMPLES = SUITE / "cuda-samples" / "Samples" / "0_Introduction"
COMMON = SUITE / "cuda-samples" / "Common"


# -- numbers as the kernels store them ----------------------------------------------------------

def bf16(values) -> np.ndarray:
    """float32 -> bfloat16 bits (round to nearest even), as __float2bfloat16 does."""
    bits = np.asarray(values, np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def from_bf16(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def gelu(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def layernorm(x, weight, bias):
    x = x.astype(np.float64)
    mean = x.mean(axis=1)
    rstd = 1 / np.sqrt(((x - mean[:, None]) ** 2).mean(axis=1) + 1e-5)
    return (x - mean[:, None]) * rstd[:, None] * weight + bias, mean, rstd


@dataclass
class Case:
    """One kernel of one file: how it is launched, its arguments, what numpy says."""

    file: Path
    entry: str
    launch: dict
    arguments: Callable[[np.random.Generator], list]
    expected: Callable[[list], dict[int, np.ndarray]]  # argument index -> its values after
    rtol: float = 1e-5
    atol: float = 1e-6
    read: Callable[[np.ndarray], np.ndarray] = field(default=lambda a: a)
    include_dirs: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return f"{self.file.parent.name}/{self.file.name}:{self.entry}"


CASES: list[Case] = []


def case(file: Path, entry: str, launch: dict, arguments, expected, **options) -> None:
    CASES.append(Case(file, entry, launch, arguments, expected, **options))


def grid_of(total: str, block: int, per_thread: int = 1) -> dict:
    return {"grid": lambda a, t: (cdiv(a[total] if isinstance(total, str) else total,
                                       block * per_thread),), "block": block}


# -- llm.c: residual_forward.cu, gelu_forward.cu, encoder_forward.cu (bfloat16) -----------------
N_ELEMENTS = 512


def residual_arguments(rng):
    return [np.zeros(N_ELEMENTS, np.uint16), bf16(rng.standard_normal(N_ELEMENTS)),
            bf16(rng.standard_normal(N_ELEMENTS)), N_ELEMENTS]


def residual_expected(args):
    return {0: from_bf16(bf16(from_bf16(args[1]) + from_bf16(args[2])))}


for entry, per in [("residual_forward_kernel1", 1), ("residual_forward_kernel2", 8)]:
    case(LLMC / "residual_forward.cu", entry, grid_of("N", 64, per), residual_arguments,
         residual_expected, read=from_bf16, rtol=0, atol=0)
    case(LLMC / "gelu_forward.cu", entry.replace("residual", "gelu"),
         grid_of("N", 64, per),
         lambda rng: [np.zeros(N_ELEMENTS, np.uint16), bf16(3 * rng.standard_normal(N_ELEMENTS)),
                      N_ELEMENTS],
         lambda args: {0: gelu(from_bf16(args[1]))}, read=from_bf16, rtol=1e-2, atol=1e-2)

B, T, C, V = 2, 4, 32, 16


def encoder_arguments(rng):
    return [np.zeros(B * T * C, np.uint16), rng.integers(0, V, B * T).astype(np.int32),
            bf16(rng.standard_normal(V * C)), bf16(rng.standard_normal(T * C)), B, T, C]


def encoder_expected(args):
    tokens = args[1].reshape(B, T)
    wte, wpe = from_bf16(args[2]).reshape(V, C), from_bf16(args[3]).reshape(T, C)
    return {0: from_bf16(bf16(wte[tokens] + wpe[None, :, :])).reshape(-1)}


for entry, total, per in [("encoder_forward_kernel1", B * T, 1),
                          ("encoder_forward_kernel2", B * T * C, 1),
                          ("encoder_forward_kernel3", B * T * C, 8)]:
    case(LLMC / "encoder_forward.cu", entry, grid_of(total, 32, per), encoder_arguments,
         encoder_expected, read=from_bf16, rtol=0, atol=0)

# -- llm.c: crossentropy_forward.cu, adamw.cu, permute.cu (float) ---------------------------------


def crossentropy_arguments(rng):
    probs = softmax(rng.standard_normal((B * T, V))).astype(np.float32)
    return [np.zeros(B * T, np.float32), probs.reshape(-1),
            rng.integers(0, V, B * T).astype(np.int32), B, T, V]


case(LLMC / "crossentropy_forward.cu", "crossentropy_forward_kernel1", grid_of(B * T, 32),
     crossentropy_arguments,
     lambda a: {0: -np.log(a[1].reshape(B * T, V)[np.arange(B * T), a[2]])}, rtol=1e-5)

ADAM = dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, decay=0.01, step=3)


def adamw_arguments(rng):
    n = 300
    p = ADAM
    return [rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32),
            (0.1 * rng.standard_normal(n)).astype(np.float32),
            (0.1 * rng.random(n)).astype(np.float32), n, p["lr"], p["beta1"], p["beta2"],
            1 - p["beta1"] ** p["step"], 1 - p["beta2"] ** p["step"], p["eps"], p["decay"]]


def adamw_expected(args):
    params, grads, m, v = (a.astype(np.float64) for a in args[:4])
    lr, beta1, beta2, c1, c2, eps, decay = args[5:]
    m = beta1 * m + (1 - beta1) * grads
    v = beta2 * v + (1 - beta2) * grads ** 2
    params = params - lr * ((m / c1) / (np.sqrt(v / c2) + eps) + decay * params)
    return {0: params, 2: m, 3: v}


for entry in ["adamw_kernel1", "adamw_kernel2"]:
    case(LLMC / "adamw.cu", entry, grid_of("num_parameters", 128), adamw_arguments,
         adamw_expected, rtol=1e-5, atol=1e-6)

DIMS = (2, 3, 4, 5)
case(LLMC / "permute.cu", "permute_kernel", grid_of(int(np.prod(DIMS)), 64),
     lambda rng: [rng.standard_normal(int(np.prod(DIMS))).astype(np.float32),
                  np.zeros(int(np.prod(DIMS)), np.float32), *DIMS],
     lambda a: {1: a[0].reshape(DIMS).transpose(3, 2, 0, 1).reshape(-1)}, rtol=0, atol=0)

# -- llm.c: softmax_forward.cu (cooperative-groups warp reductions) --------------------------------
ROWS, COLUMNS = 6, 70


def softmax_arguments(rng):
    return [np.zeros(ROWS * COLUMNS, np.float32),
            (4 * rng.standard_normal(ROWS * COLUMNS)).astype(np.float32), ROWS, COLUMNS]


def softmax_expected(args):
    return {0: softmax(args[1].reshape(ROWS, COLUMNS)).reshape(-1)}


def rows_of(block: int, shared_per_warp: int = 0, threads_per_row: int = 1,
            shared_per_thread: int = 0) -> dict:
    launch = {"grid": lambda a, t: (cdiv(a["N"] * threads_per_row, block),) if
              threads_per_row != block else (a["N"],), "block": block}
    if shared_per_warp or shared_per_thread:
        launch["shared"] = block // 32 * shared_per_warp + block * shared_per_thread
    return launch


for entry, launch in [
        ("softmax_forward_kernel1", rows_of(32)),
        ("softmax_forward_kernel2", rows_of(64, threads_per_row=64, shared_per_thread=4)),
        ("softmax_forward_kernel3", rows_of(32, threads_per_row=32, shared_per_thread=4)),
        ("softmax_forward_kernel4", rows_of(64, threads_per_row=64, shared_per_warp=4)),
        ("softmax_forward_online_kernel1", rows_of(32)),
        ("softmax_forward_online_kernel2", rows_of(64, threads_per_row=32)),
        ("softmax_forward_kernel7", rows_of(64, threads_per_row=64, shared_per_warp=8)),
        ("softmax_forward_online_kernel8", rows_of(64, threads_per_row=32))]:
    case(LLMC / "softmax_forward.cu", entry, launch, softmax_arguments, softmax_expected,
         rtol=1e-4, atol=1e-6)

# -- llm.c: layernorm_forward.cu ------------------------------------------------------------------
LN_ROWS, LN_C = 5, 64


def layernorm_arguments(rng):
    n = LN_ROWS
    return [np.zeros(n * LN_C, np.float32), np.zeros(n, np.float32), np.zeros(n, np.float32),
            rng.standard_normal(n * LN_C).astype(np.float32),
            rng.standard_normal(LN_C).astype(np.float32),
            rng.standard_normal(LN_C).astype(np.float32), n, LN_C]


def layernorm_expected(args):
    out, mean, rstd = layernorm(args[3].reshape(-1, LN_C), args[4], args[5])
    return {0: out.reshape(-1), 1: mean, 2: rstd}


for entry, launch in [
        ("layernorm_forward_kernel1", rows_of(32)),
        ("layernorm_forward_kernel3", rows_of(64, threads_per_row=32)),
        ("layernorm_forward_kernel4", rows_of(64, threads_per_row=32)),
        ("layernorm_forward_kernel5", rows_of(64, threads_per_row=64))]:
    case(LLMC / "layernorm_forward.cu", entry, launch, layernorm_arguments, layernorm_expected,
         rtol=1e-4, atol=1e-4)
case(LLMC / "layernorm_forward.cu", "layernorm_forward_kernel6",
     {"grid": lambda a, t: (cdiv(a["N"], 2),), "block": (32, 2), "shared": (2 + 2) * LN_C * 4},
     layernorm_arguments, layernorm_expected, rtol=1e-4, atol=1e-4)


def mean_arguments(rng):
    return [np.zeros(LN_ROWS, np.float32),
            rng.standard_normal(LN_ROWS * LN_C).astype(np.float32), LN_ROWS, LN_C, 64]


case(LLMC / "layernorm_forward.cu", "mean_kernel",
     {"grid": lambda a, t: (a["N"],), "block": 64, "shared": 64 * 4}, mean_arguments,
     lambda a: {0: a[1].reshape(-1, LN_C).mean(axis=1)}, rtol=1e-5, atol=1e-6)


def rstd_arguments(rng):
    x = rng.standard_normal(LN_ROWS * LN_C).astype(np.float32)
    mean = x.reshape(-1, LN_C).mean(axis=1).astype(np.float32)
    return [np.zeros(LN_ROWS, np.float32), x, mean, LN_ROWS, LN_C, 64]


case(LLMC / "layernorm_forward.cu", "rstd_kernel",
     {"grid": lambda a, t: (a["N"],), "block": 64, "shared": 64 * 4}, rstd_arguments,
     lambda a: {0: layernorm(a[1].reshape(-1, LN_C), 1, 0)[2]}, rtol=1e-4, atol=1e-6)


def normalization_arguments(rng):
    x = rng.standard_normal(LN_ROWS * LN_C).astype(np.float32)
    _, mean, rstd = layernorm(x.reshape(-1, LN_C), 1, 0)
    return [np.zeros(LN_ROWS * LN_C, np.float32), x, mean.astype(np.float32),
            rstd.astype(np.float32), rng.standard_normal(LN_C).astype(np.float32),
            rng.standard_normal(LN_C).astype(np.float32), 1, LN_ROWS, LN_C]


case(LLMC / "layernorm_forward.cu", "normalization_kernel", grid_of(LN_ROWS * LN_C, 64),
     normalization_arguments,
     lambda a: {0: layernorm(a[1].reshape(-1, LN_C), a[4], a[5])[0].reshape(-1)},
     rtol=1e-4, atol=1e-4)

# -- llm.c: global_norm.cu (templates over bfloat16, cooperative groups, atomics) -----------------
COUNT, NORM_GRID, NORM_BLOCK = 1000, 3, 64


def norm_arguments(rng):
    return [np.zeros(NORM_GRID, np.float32), bf16(rng.standard_normal(COUNT)), COUNT]


def norm_total(args):
    return {0: np.r_[np.sum(from_bf16(args[1]).astype(np.float64) ** 2),
                     np.zeros(NORM_GRID - 1)]}


def norm_per_block(args):
    squares = from_bf16(args[1]).astype(np.float64) ** 2
    threads = np.arange(COUNT) % (NORM_GRID * NORM_BLOCK)
    return {0: np.bincount(threads // NORM_BLOCK, squares, NORM_GRID)}


NORM_LAUNCH = {"grid": NORM_GRID, "block": NORM_BLOCK}
for entry in ["norm_kernel1<__nv_bfloat16>", "norm_kernel2<__nv_bfloat16>",
              "norm_kernel3<__nv_bfloat16>"]:
    case(LLMC / "global_norm.cu", entry, NORM_LAUNCH, norm_arguments, norm_total, rtol=1e-4)
case(LLMC / "global_norm.cu", "norm_kernel4<__nv_bfloat16>", NORM_LAUNCH, norm_arguments,
     norm_per_block, rtol=1e-4)
case(LLMC / "global_norm.cu", "global_norm_aggregate_kernel", {"grid": 1, "block": 1024},
     lambda rng: [rng.random(40).astype(np.float32), 40],
     lambda a: {0: np.r_[a[0].astype(np.float64).sum(), a[0][1:]]}, rtol=1e-5)

# -- NVIDIA cuda-samples: vectorAdd.cu, fp16ScalarProduct.cu, matrixMul.cu -------------------------
case(SAMPLES / "vectorAdd" / "vectorAdd.cu", "vectorAdd", grid_of("numElements", 256),
     lambda rng: [rng.random(1000).astype(np.float32), rng.random(1000).astype(np.float32),
                  np.zeros(1000, np.float32), 1000],
     lambda a: {2: a[0] + a[1]}, rtol=0, atol=0, include_dirs=(str(COMMON),))

HALF_BLOCKS, HALF_PAIRS = 4, 4 * 128 * 3


def half_arguments(rng):
    return [rng.uniform(-1, 1, 2 * HALF_PAIRS).astype(np.float16),
            rng.uniform(-1, 1, 2 * HALF_PAIRS).astype(np.float16),
            np.zeros(HALF_BLOCKS, np.float32), HALF_PAIRS]


def half_expected(args):
    """Per block: its threads' products from index threadIdx.x + blockDim.x + blockIdx.x
    (as the sample writes it) in steps of the grid, both halves summed."""
    products = (args[0].astype(np.float64) * args[1]).reshape(-1, 2).sum(axis=1)
    sums = np.zeros(HALF_BLOCKS)
    for block in range(HALF_BLOCKS):
        for thread in range(128):
            sums[block] += products[thread + 128 + block::HALF_BLOCKS * 128].sum()
    return {2: sums}


for entry in ["scalarProductKernel_intrinsics", "scalarProductKernel_native"]:
    case(SAMPLES / "fp16ScalarProduct" / "fp16ScalarProduct.cu", entry,
         {"grid": HALF_BLOCKS, "block": 128}, half_arguments, half_expected, rtol=2e-2,
         atol=5e-2, include_dirs=(str(COMMON),))

MM = 32
case(SAMPLES / "matrixMul" / "matrixMul.cu", "MatrixMulCUDA<16>",
     {"grid": lambda a, t: (a["wB"] // 16, MM // 16), "block": (16, 16)},
     lambda rng: [np.zeros(MM * MM, np.float32), rng.random(MM * MM).astype(np.float32),
                  rng.random(MM * MM).astype(np.float32), MM, MM],
     lambda a: {0: (a[1].reshape(MM, MM).astype(np.float64) @ a[2].reshape(MM, MM)).ravel()},
     rtol=1e-5, include_dirs=(str(COMMON),))

IDS = [c.id for c in CASES]


def declare(item: Case, **options) -> r3.Kernel:
    name = "thirdparty_" + "".join(ch if ch.isalnum() else "_" for ch in item.id)
    return r3.kernel(item.file, entry=item.entry, backend="cuda", name=name,
                     include_dirs=list(item.include_dirs), **options)


def test_the_suite_is_twelve_files_and_their_kernels():
    files = {c.file for c in CASES}
    assert len(files) >= 12 and len(CASES) >= 25
    for path in files:  # every kernel of every file is covered
        text = path.read_text()
        declared = {c.entry.split("<")[0] for c in CASES if c.file == path}
        assert text.count("__global__") == len(declared), path


def test_the_files_are_unchanged():
    for row in json.loads((SUITE / "SOURCES.json").read_text()):
        data = (SUITE / row["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == row["sha256"], row["file"]
    for project in ("llm.c", "cuda-samples"):
        assert (SUITE / project / "LICENSE").is_file()


@pytest.mark.parametrize("item", CASES, ids=IDS)
def test_builds_to_ptx(item: Case):
    """The device build of the file as it is: ptxas assembles the PTX where it is
    installed (a rejection is a CompileError), else the PTX is only emitted."""
    backend = CUDABackend("sm_80")
    kernel = declare(item)
    source = kernel.source_for(kernel.baseline)
    backend.inspect(source, item.entry, {})
    build = backend.compile_ptx(backend.compile(source, {}), item.entry, Pipeline())
    assert toolchain.ptx_entries(build.ptx) == [build.symbol]
    if toolchain.find_tool("ptxas") is not None:
        assert build.diagnostics["ptxas"] == "ok" and build.diagnostics["registers"] > 0


@pytest.fixture
def emulated(monkeypatch):
    monkeypatch.setenv(cuda_emulation.EMULATION_ENV, "1")
    forget_backend("cuda")
    yield
    forget_backend("cuda")


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                    reason="CUDA emulation is written for x86-64")
@pytest.mark.parametrize("item", CASES, ids=IDS)
def test_matches_numpy_in_emulation(item: Case, emulated):
    matches_numpy(item)


GPU_MISSING = runtime.unavailable_reason()


@pytest.mark.skipif(GPU_MISSING is not None, reason=f"no GPU: {GPU_MISSING}")
@pytest.mark.parametrize("item", CASES, ids=IDS)
def test_matches_numpy_on_the_gpu(item: Case, monkeypatch):
    """The same oracle on a GPU (scripts/gpu_suite.py runs this file where one is lent)."""
    monkeypatch.setenv(cuda_emulation.EMULATION_ENV, "0")
    forget_backend("cuda")
    try:
        matches_numpy(item)
    finally:
        forget_backend("cuda")


def matches_numpy(item: Case) -> None:
    kernel = declare(item, launch=item.launch)
    args = item.arguments(np.random.default_rng(2024))
    expected = item.expected([a.copy() if isinstance(a, np.ndarray) else a for a in args])
    kernel(*args)
    for index, want in expected.items():
        np.testing.assert_allclose(item.read(args[index]), want, rtol=item.rtol,
                                   atol=item.atol, err_msg=f"{item.id}: argument {index + 1}")
