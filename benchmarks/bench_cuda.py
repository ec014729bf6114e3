"""Benchmark the CUDA backend of pytest-r3 on the example GPU kernels (needs a GPU and a CUDA
runtime: cuda-bindings or pycuda, see docs/cuda.md).

For each kernel of ``example_project/exampleproj/cuda`` this script

1. builds the baseline (the declared default tunables, default pipeline) through pytest-r3's
   path: clang -> NVPTX IR -> llvmlite -> PTX;
2. tunes it by brute force: every valid tunable combination, then a few pass pipelines for
   the best one (a stand-in for ``pytest --r3-tune``, which needs recordings; the GPU suite
   runs that separately);
3. builds the same source with ``nvcc -O3`` (the vendor baseline), with the baseline's and
   with the tuned tunables, when nvcc is installed;
4. checks every variant's output against numpy, then times all of them interleaved with
   CUDA events on device-resident arrays (no transfers), after warm-up;
5. reports the tuned speedup over the baseline and over nvcc, and the achieved bandwidth
   (GB/s) or arithmetic rate (GFLOP/s) against a measured peak: device-to-device copy
   bandwidth, and an FMA-throughput kernel compiled the same way.

Run from the repository root::

    python benchmarks/bench_cuda.py [--quick] [--rounds N] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import isolation
import numpy as np

isolation.isolate()  # before anything reads the environment (see isolation.py)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "example_project"))

import exampleproj.cuda as examples  # noqa: E402

import pytest_r3 as r3  # noqa: E402
from pytest_r3.backends import get_backend  # noqa: E402
from pytest_r3.backends.cuda import runtime as cuda_runtime  # noqa: E402
from pytest_r3.backends.cuda import toolchain as cuda_tools  # noqa: E402

PIPELINES = {
    "default": {},
    "no unrolling": {"unroll_count": 1},
    "unroll x4": {"unroll_count": 4},
    "level 2": {"level": 2},
}
FMA_PEAK = r"""
extern "C" __global__ void fma_peak(float *out, int iters)
{
    float x = threadIdx.x * 1e-6f, m = 0.999999f;
    float c0 = 0.1f, c1 = 0.2f, c2 = 0.3f, c3 = 0.4f, c4 = 0.5f, c5 = 0.6f, c6 = 0.7f,
          c7 = 0.8f;
    for (int i = 0; i < iters; ++i) {
        c0 = fmaf(c0, m, x); c1 = fmaf(c1, m, x); c2 = fmaf(c2, m, x); c3 = fmaf(c3, m, x);
        c4 = fmaf(c4, m, x); c5 = fmaf(c5, m, x); c6 = fmaf(c6, m, x); c7 = fmaf(c7, m, x);
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = c0 + c1 + c2 + c3 + c4 + c5 + c6 + c7;
}
"""
FMA_CHAINS, FMA_ITERS, FMA_BLOCK = 8, 4096, 256


@dataclass
class Problem:
    """A kernel with device-resident arguments, its numpy answer and its cost model."""

    kernel: object
    args: list
    output: int             # index of the argument holding the result
    expected: np.ndarray
    bytes_moved: float      # compulsory DRAM traffic of one launch
    flops: float = 0.0
    rtol: float = 1e-5


@dataclass
class Row:
    kernel: str
    size: str
    tuned: dict = field(default_factory=dict)
    seconds: dict = field(default_factory=dict)       # variant label -> median seconds
    registers: dict = field(default_factory=dict)     # variant label -> ptxas registers
    notes: list = field(default_factory=list)


def problems(quick: bool) -> dict[str, Problem]:
    gpu = cuda_runtime.runtime()
    rng = np.random.default_rng(0)
    n = 1 << (22 if quick else 26)
    x = rng.standard_normal(n, dtype=np.float32)
    y = rng.standard_normal(n, dtype=np.float32)
    rows, cols = (2048, 2048) if quick else (8192, 8192)
    grid = rng.random((rows, cols), dtype=np.float32)
    stencil = grid.copy()
    stencil[1:-1, 1:-1] = 0.25 * (grid[:-2, 1:-1] + grid[2:, 1:-1] + grid[1:-1, :-2]
                                  + grid[1:-1, 2:])
    size = 512 if quick else 2048
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    return {
        # y is overwritten in place, so every launch starts from y again: time on a copy
        "saxpy": Problem(examples.saxpy, [n, 2.0, gpu.to_device(x), gpu.to_device(y)], 3,
                         2 * x + y, 12.0 * n),
        "stencil2d": Problem(examples.stencil2d,
                             [rows, cols, gpu.to_device(grid),
                              gpu.empty((rows, cols), np.float32)], 3, stencil,
                             8.0 * rows * cols),
        "matmul_tiled": Problem(examples.matmul_tiled,
                                [size, size, size, gpu.to_device(a), gpu.to_device(b),
                                 gpu.empty((size, size), np.float32)], 5,
                                a.astype(np.float64) @ b, 12.0 * size * size,
                                flops=2.0 * size**3, rtol=1e-3),
    }


def check(problem: Problem, launcher, label: str, initial) -> None:
    """Run once from fresh inputs and compare with numpy; raises on a wrong answer."""
    args = list(problem.args)
    if initial is not None:  # in-place kernels start from the saved input
        args[problem.output] = initial.copy()
    launcher(*args)
    result = args[problem.output].get()
    np.testing.assert_allclose(result, problem.expected, rtol=problem.rtol,
                               atol=problem.rtol, err_msg=label)


def time_interleaved(backend, launchers: dict, args, rounds: int) -> dict[str, float]:
    """Median seconds per launch of each variant, variants interleaved round by round."""
    single = {label: min(backend.time(launcher, args, 3)) for label, launcher in
              launchers.items()}
    repeat = {label: max(1, min(1000, int(0.02 / max(t, 1e-7)))) for label, t in single.items()}
    samples: dict[str, list[float]] = {label: [] for label in launchers}
    order = list(launchers)
    for round_index in range(rounds + 2):  # two warm-up rounds
        for label in order if round_index % 2 else reversed(order):
            per_launch = backend.time(launchers[label], args, repeat[label])
            if round_index >= 2:
                samples[label].append(statistics.median(per_launch))
    return {label: statistics.median(values) for label, values in samples.items()}


def measure_peaks(backend, rounds: int) -> dict[str, float]:
    gpu = cuda_runtime.runtime()
    driver = gpu.driver
    nbytes = 1 << 30
    source, target = gpu.empty(nbytes // 4, np.float32), gpu.empty(nbytes // 4, np.float32)
    start, end = driver.new_event(), driver.new_event()
    copies = []
    for _ in range(rounds + 2):
        driver.record(start)
        driver.copy_on_device(target.pointer, source.pointer, nbytes)
        driver.record(end)
        driver.wait(end)
        copies.append(driver.elapsed(start, end))
    source.free()
    target.free()
    bandwidth = 2 * nbytes / statistics.median(copies[2:])  # read + write
    sms = driver.multiprocessors or 132
    blocks = sms * 16
    peak = r3.kernel(FMA_PEAK, entry="fma_peak", backend="cuda", name="bench_fma_peak",
                     launch={"grid": blocks, "block": FMA_BLOCK})
    out = gpu.empty(blocks * FMA_BLOCK, np.float32)
    seconds = time_interleaved(backend, {"peak": peak.build()}, [out, FMA_ITERS], rounds)
    flops = 2.0 * FMA_CHAINS * FMA_ITERS * blocks * FMA_BLOCK / seconds["peak"]
    return {"copy_bandwidth_gb_s": bandwidth / 1e9, "fma_gflop_s": flops / 1e9,
            "multiprocessors": sms}


def bench_kernel(backend, name: str, problem: Problem, rounds: int) -> Row:
    kernel = problem.kernel
    size = " x ".join(str(a) for a in problem.args if isinstance(a, int))
    row = Row(name, size)
    initial = problem.args[problem.output].copy() if name == "saxpy" else None
    # brute-force the tunables (default pipeline), then the pipeline for the best of them
    variants = {"baseline": kernel.baseline}
    for values in kernel.space.iter_valid():
        label = ", ".join(f"{k}={v}" for k, v in values.items())
        variants.setdefault(label, kernel.variant(**values))
    launchers = {label: kernel.build(variant) for label, variant in variants.items()}
    for label, launcher in launchers.items():
        check(problem, launcher, label, initial)
    seconds = time_interleaved(backend, launchers, problem.args, max(3, rounds // 3))
    best_label = min(seconds, key=seconds.get)
    best = variants[best_label]
    candidates = {best_label: launchers[best_label]}
    for label, settings in PIPELINES.items():
        if settings:
            variant = kernel.variant(pipeline=settings, **best.macro_dict)
            combined = f"{best_label}, {label}"
            variants[combined] = variant
            candidates[combined] = launchers[combined] = kernel.build(variant)
            check(problem, launchers[combined], combined, initial)
    seconds.update(time_interleaved(backend, candidates, problem.args, rounds))
    tuned_label = min(candidates, key=lambda label: seconds[label])
    row.tuned = {"variant": tuned_label, "macros": variants[tuned_label].macro_dict,
                 "pipeline": variants[tuned_label].pipeline.differences()}
    final = {"baseline": launchers["baseline"], "tuned": launchers[tuned_label]}
    if cuda_tools.find_tool("nvcc"):
        final["nvcc baseline"] = backend.vendor_launcher(kernel)
        final["nvcc tuned macros"] = backend.vendor_launcher(
            kernel, kernel.variant(**variants[tuned_label].macro_dict))
        for label in ("nvcc baseline", "nvcc tuned macros"):
            check(problem, final[label], label, initial)
    else:
        row.notes.append("nvcc not installed: no vendor baseline")
    row.seconds = time_interleaved(backend, final, problem.args, rounds)
    row.registers = {label: getattr(launcher, "diagnostics", {}).get("registers")
                     for label, launcher in final.items()}
    return row


def report(rows: list[Row], peaks: dict, problems_: dict[str, Problem]) -> list[str]:
    gpu = cuda_runtime.runtime()
    lines = [f"device: {gpu.device_name} ({gpu.arch}, {gpu.name}); "
             f"measured peaks: copy {peaks['copy_bandwidth_gb_s']:.0f} GB/s, FMA "
             f"{peaks['fma_gflop_s']:.0f} GFLOP/s", ""]
    header = (f"{'kernel':<13} {'baseline':>11} {'tuned':>11} {'nvcc':>11} {'vs base':>8} "
              f"{'vs nvcc':>8} {'throughput (tuned)':>28}  tuned variant")
    lines += [header, "-" * len(header)]
    for row in rows:
        problem = problems_[row.kernel]
        tuned = row.seconds["tuned"]
        nvcc = row.seconds.get("nvcc baseline")
        if problem.flops:
            rate = problem.flops / tuned / 1e9
            share = rate / peaks["fma_gflop_s"]
            throughput = f"{rate:,.0f} GFLOP/s ({share:.0%} of FMA peak)"
        else:
            rate = problem.bytes_moved / tuned / 1e9
            share = rate / peaks["copy_bandwidth_gb_s"]
            throughput = f"{rate:,.0f} GB/s ({share:.0%} of copy)"
        lines.append(
            f"{row.kernel:<13} {row.seconds['baseline'] * 1e6:>9.1f}us {tuned * 1e6:>9.1f}us "
            + (f"{nvcc * 1e6:>9.1f}us " if nvcc else f"{'-':>11} ")
            + f"{row.seconds['baseline'] / tuned:>7.2f}x "
            + (f"{nvcc / tuned:>7.2f}x " if nvcc else f"{'-':>8} ")
            + f"{throughput:>28}  {row.tuned['variant']}")
        if "nvcc tuned macros" in row.seconds:
            lines.append(f"{'':<13} nvcc with the tuned tunables: "
                         f"{row.seconds['nvcc tuned macros'] * 1e6:.1f}us "
                         f"(ours {row.seconds['nvcc tuned macros'] / tuned:.2f}x faster); "
                         f"registers: {row.registers}")
        lines += [f"{'':<13} {note}" for note in row.notes]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller problems")
    parser.add_argument("--rounds", type=int, default=15, help="timed rounds per comparison")
    parser.add_argument("--json", type=Path, help="also write the results here")
    isolation.add_option(parser)
    options = parser.parse_args(argv)
    reason = cuda_runtime.unavailable_reason()
    if reason:
        print(f"bench_cuda: cannot run CUDA kernels here: {reason}", file=sys.stderr)
        return 2
    backend = get_backend("cuda")
    started = time.perf_counter()
    peaks = measure_peaks(backend, options.rounds)
    cases = problems(options.quick)
    rows = [bench_kernel(backend, name, problem, options.rounds)
            for name, problem in cases.items()]
    print("\n".join(report(rows, peaks, cases)))
    print(f"\n({time.perf_counter() - started:.0f} s; ptxas: "
          f"{'yes' if cuda_tools.find_tool('ptxas') else 'no'}, libdevice: "
          f"{'yes' if cuda_tools.find_libdevice() else 'no'})")
    if options.json:
        options.json.write_text(json.dumps({
            "device": cuda_runtime.runtime().device_name, "arch": backend.arch,
            "peaks": peaks, "kernels": [asdict(row) for row in rows],
            "problems": {name: {"bytes": p.bytes_moved, "flops": p.flops}
                         for name, p in cases.items()}}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
