"""Benchmark the CPU backend of pytest-r3 on the example kernels.

For each kernel of ``example_project/exampleproj`` this script measures, in one run:

(a) the plugin's default build (the kernel object called with numpy arrays, baseline
    variant: clang front end + llvmlite -O3 pipeline + MCJIT) against ``clang -O3`` of the
    same source built as a shared library and called through ctypes with the same arrays.
    Both are checked to produce the same output first, then timed interleaved (the order
    within each pair alternates), after warm-up;
(b) the per-call overhead of the Python launch path: a tiny problem launched through the
    kernel object, minus the same compiled code called through a raw ctypes function with
    pre-extracted data pointers.

The baseline is activated explicitly, so an ``r3.lock`` entry for a kernel is not used here.

Run from the repository root::

    python benchmarks/bench_cpu_backend.py [--repeat N] [--json PATH]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import isolation
import numpy as np

isolation.isolate()  # before anything reads the environment (see isolation.py)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "example_project"))

import exampleproj  # noqa: E402

import pytest_r3  # noqa: E402
from pytest_r3.backends import clang as toolchain  # noqa: E402

SECONDS_PER_KERNEL = 6.0  # target for part (a) when --repeat is not given
MIN_PAIRS, MAX_PAIRS = 20, 2000
CTYPES = {
    "float32": ctypes.c_float, "float64": ctypes.c_double, "bool": ctypes.c_bool,
    **{f"int{b}": getattr(ctypes, f"c_int{b}") for b in (8, 16, 32, 64)},
    **{f"uint{b}": getattr(ctypes, f"c_uint{b}") for b in (8, 16, 32, 64)},
}


@dataclass
class Case:
    """A kernel, a way to make its arguments, and which argument holds the result."""

    name: str
    label: str
    make_args: object  # rng -> list of arguments
    output: int
    tiny_args: object  # rng -> list of arguments of the smallest problem
    tiny_label: str


def _scaled_add(n):
    def make(rng):
        return [n, 1.5, rng.standard_normal(n, dtype=np.float32),
                rng.standard_normal(n, dtype=np.float32)]
    return make


def _matmul(n):
    def make(rng):
        return [n, rng.standard_normal((n, n)), rng.standard_normal((n, n)), np.zeros((n, n))]
    return make


def _jacobi2d(rows, cols):
    def make(rng):
        return [rows, cols, rng.random((rows, cols), dtype=np.float32),
                np.zeros((rows, cols), dtype=np.float32)]
    return make


CASES = [
    Case("scaled_add", "n=4M float32", _scaled_add(4 << 20), 3, _scaled_add(1), "n=1"),
    Case("matmul", "n=256 float64", _matmul(256), 3, _matmul(1), "n=1"),
    Case("jacobi2d", "1024x1024 float32", _jacobi2d(1024, 1024), 3, _jacobi2d(3, 3), "3x3"),
]


# ---------------------------------------------------------------------------- clang -O3 build

@dataclass
class NativeBuild:
    how: str
    command: list[str]
    library: ctypes.CDLL = field(repr=False)


def build_native(kernel, directory: Path) -> NativeBuild:
    """``clang -O3`` of the kernel's source (baseline macros) as a shared library."""
    clang = toolchain.find_clang()
    target = toolchain.host_target()
    source = Path(kernel.source.filename)
    output = directory / f"lib{kernel.name}.so"
    macros = toolchain.macro_flags(kernel.space.default)
    common = ["-O3", "-fno-sanitize=all", "-shared", "-fPIC", "-o", str(output),
              f"-I{source.parent}", *macros, str(source)]
    raw = [*clang.command, *clang.system_flags, *target.clang_flags()]
    attempts = [
        ("pytest-r3's clang driver (find_clang + host_target flags)", [*raw, *common]),
        ("pytest-r3's clang driver with -nostdlib", [*raw, "-nostdlib", *common]),
        ("python -m ziglang cc -target x86_64-linux-gnu", [
            sys.executable, "-m", "ziglang", "cc", "-target", "x86_64-linux-gnu",
            f"-march={target.cpu}", *common]),
    ]
    failures = []
    for how, command in attempts:
        result = subprocess.run(command, capture_output=True, text=True, timeout=300)
        if result.returncode == 0:
            try:
                library = ctypes.CDLL(str(output))
                getattr(library, kernel.entry)
            except (OSError, AttributeError) as exc:
                failures.append(f"{how}: built but did not load: {exc}")
                continue
            return NativeBuild(how, command, library)
        failures.append(f"{how}: exit {result.returncode}: {result.stderr.strip()[-300:]}")
    raise RuntimeError(f"cannot build {source.name} with clang -O3:\n" + "\n".join(failures))


def native_function(library: ctypes.CDLL, kernel):
    signature = kernel.signature
    function = getattr(library, kernel.entry)
    function.argtypes = [ctypes.c_void_p if p.is_pointer else CTYPES[p.dtype]
                         for p in signature.params]
    function.restype = CTYPES[signature.return_dtype] if signature.return_dtype else None
    return function


def raw_values(args: list) -> list:
    """Arguments with arrays replaced by their data pointers (extracted once)."""
    return [a.ctypes.data if isinstance(a, np.ndarray) else a for a in args]


# ----------------------------------------------------------------------------- statistics

def quartiles(values: list[float]) -> tuple[float, float, float]:
    q1, q2, q3 = np.percentile(values, [25, 50, 75])
    return float(q1), float(q2), float(q3)


def interleaved(first, second, pairs: int, warmup: int) -> tuple[list[float], list[float]]:
    """Time two calls alternately; the order inside a pair flips every pair."""
    clock = time.perf_counter
    for _ in range(warmup):
        first()
        second()
    a, b = [], []
    for index in range(pairs):
        order = ((first, a), (second, b)) if index % 2 == 0 else ((second, b), (first, a))
        for call, times in order:
            start = clock()
            call()
            times.append(clock() - start)
    return a, b


def batched(calls: dict, batch: int, rounds: int) -> dict[str, list[float]]:
    """Mean seconds per call over ``batch`` calls, ``rounds`` times, calls interleaved."""
    clock = time.perf_counter
    results: dict[str, list[float]] = {name: [] for name in calls}
    loop = range(batch)
    for _ in range(3):  # warm-up
        for function, args in calls.values():
            for _ in loop:
                function(*args)
    for _ in range(rounds):
        for name, (function, args) in calls.items():
            start = clock()
            for _ in loop:
                function(*args)
            results[name].append((clock() - start) / batch)
    return results


# -------------------------------------------------------------------------------- parts

def compare(case: Case, kernel, native, repeat: int | None) -> dict:
    """(a): plugin default build against clang -O3, same arrays, after an output check."""
    rng = np.random.default_rng(0)
    inputs = case.make_args(rng)

    plugin_args = [a.copy() if isinstance(a, np.ndarray) else a for a in inputs]
    native_args = [a.copy() if isinstance(a, np.ndarray) else a for a in inputs]
    kernel(*plugin_args)
    native(*raw_values(native_args))
    got, want = plugin_args[case.output], native_args[case.output]
    if np.array_equal(got, want):
        agreement = "bitwise equal"
    else:
        tolerance = 1e-5 if got.dtype == np.float32 else 1e-12
        error = float(np.max(np.abs(got - want) / np.maximum(np.abs(want), 1e-30)))
        if not np.allclose(got, want, rtol=tolerance, atol=tolerance):
            raise AssertionError(f"{case.name}: plugin and clang -O3 outputs differ "
                                 f"(max relative error {error:.3g})")
        agreement = f"close (max rel. err. {error:.2g})"

    # Time on one set of arrays; arrays written in place just keep being updated.
    args = plugin_args
    values = raw_values(args)
    start = time.perf_counter()
    kernel(*args)
    native(*values)
    one_pair = time.perf_counter() - start
    pairs = repeat or int(min(MAX_PAIRS, max(MIN_PAIRS, SECONDS_PER_KERNEL / max(one_pair, 1e-6))))
    warmup = max(3, pairs // 10)
    plugin_times, clang_times = interleaved(lambda: kernel(*args), lambda: native(*values),
                                            pairs, warmup)
    ratios = [p / c for p, c in zip(plugin_times, clang_times, strict=True)]
    r1, r2, r3 = quartiles(ratios)
    return {
        "kernel": case.name, "problem": case.label, "agreement": agreement, "pairs": pairs,
        "plugin_median_ms": statistics.median(plugin_times) * 1e3,
        "clang_median_ms": statistics.median(clang_times) * 1e3,
        "ratio_of_medians": statistics.median(plugin_times) / statistics.median(clang_times),
        "pair_ratio_median": r2, "pair_ratio_q1": r1, "pair_ratio_q3": r3,
    }


def overhead(case: Case, kernel, rounds: int) -> dict:
    """(b): per-call cost of the Python launch path on a tiny problem."""
    args = case.tiny_args(np.random.default_rng(1))
    launcher = kernel.build()  # the baseline's CPULauncher, which kernel() calls
    thunk_values = launcher.binder(args)  # what kernel() hands to the JIT thunk
    signature = kernel.signature
    entry = launcher.engine.get_function_address(kernel.entry)  # the kernel, not the thunk
    restype = CTYPES[signature.return_dtype] if signature.return_dtype else None
    raw = ctypes.CFUNCTYPE(restype, *[ctypes.c_void_p if p.is_pointer else CTYPES[p.dtype]
                                      for p in signature.params])(entry)
    pointers = raw_values(args)
    calls = {
        "kernel": (kernel, args),
        "thunk": (launcher.function, thunk_values),
        "raw": (raw, pointers),
        "empty": (_nothing, args),
    }
    times = batched(calls, batch=1000, rounds=rounds)
    median = {name: statistics.median(values) * 1e6 for name, values in times.items()}
    per_round = [(k - r) * 1e6 for k, r in zip(times["kernel"], times["raw"], strict=True)]
    o1, _, o3 = quartiles(per_round)
    return {
        "kernel": case.name, "problem": case.tiny_label, "rounds": rounds, "batch": 1000,
        "kernel_call_us": median["kernel"], "thunk_call_us": median["thunk"],
        "raw_call_us": median["raw"], "python_call_us": median["empty"],
        "overhead_us": median["kernel"] - median["raw"],
        "overhead_q1_us": o1, "overhead_q3_us": o3,
    }


def _nothing(*args):
    return None


# --------------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=None, metavar="N",
                        help="timed pairs per kernel in part (a) (default: about "
                             f"{SECONDS_PER_KERNEL:g} s per kernel, {MIN_PAIRS} to "
                             f"{MAX_PAIRS} pairs)")
    parser.add_argument("--json", type=Path, default=None, metavar="PATH",
                        help="also write every measurement to PATH as JSON")
    isolation.add_option(parser)
    options = parser.parse_args(argv)
    if options.repeat is not None and options.repeat < 1:
        parser.error("--repeat must be at least 1")

    began = time.perf_counter()
    clang = toolchain.find_clang()
    target = toolchain.host_target()
    print(f"pytest-r3 {pytest_r3.__version__} CPU backend benchmark")
    print(f"python {platform.python_version()}, numpy {np.__version__}, "
          f"clang {clang.version} ({clang.origin}), target {target.triple} {target.cpu}")
    print(f"{os.cpu_count()} CPU(s), load average at start {os.getloadavg()[0]:.2f} "
          "(other busy processes widen the spreads below)")

    comparisons, overheads, builds = [], [], {}
    with tempfile.TemporaryDirectory(prefix="r3-bench-") as temporary:
        for case in CASES:
            kernel = getattr(exampleproj, case.name)
            locked = kernel.active != kernel.baseline  # an r3.lock entry applies
            kernel.activate(kernel.baseline)  # time the baseline even if r3.lock has an entry
            start = time.perf_counter()
            kernel.build()
            plugin_build_s = time.perf_counter() - start
            start = time.perf_counter()
            build = build_native(kernel, Path(temporary))
            clang_build_s = time.perf_counter() - start
            builds[case.name] = {"how": build.how, "command": shlex.join(build.command),
                                 "plugin_build_s": plugin_build_s,
                                 "clang_build_s": clang_build_s}
            native = native_function(build.library, kernel)
            comparisons.append(compare(case, kernel, native, options.repeat))
            overheads.append(overhead(case, kernel, rounds=101))
            builds[case.name]["lock_entry_ignored"] = locked
            kernel.activate(None)

    hows = sorted({b["how"] for b in builds.values()})
    print(f"clang -O3 reference built with: {'; '.join(hows)}")
    print("  flags: -O3 -fno-sanitize=all -shared -fPIC -I<kernels dir> + host -march and "
          "target features")
    print("plugin: kernel object called with numpy arrays (baseline variant); clang: ctypes "
          "function with pointers extracted once")
    ignored = [name for name, b in builds.items() if b["lock_entry_ignored"]]
    if ignored:
        print(f"  r3.lock entries not used (baseline activated): {', '.join(ignored)}")
    print()
    print("(a) plugin default build vs clang -O3 (interleaved pairs, medians; ratio < 1: "
          "plugin faster)")
    head = (f"{'kernel':<11} {'problem':<18} {'pairs':>5} {'plugin ms':>10} {'clang ms':>10} "
            f"{'ratio':>6}  {'pair ratio [IQR]':<22} {'output check':<18} {'builds s':>11}")
    print(head)
    print("-" * len(head))
    for c in comparisons:
        b = builds[c["kernel"]]
        spread = f"{c['pair_ratio_median']:.3f} [{c['pair_ratio_q1']:.3f}, " \
                 f"{c['pair_ratio_q3']:.3f}]"
        print(f"{c['kernel']:<11} {c['problem']:<18} {c['pairs']:>5} "
              f"{c['plugin_median_ms']:>10.3f} {c['clang_median_ms']:>10.3f} "
              f"{c['ratio_of_medians']:>6.3f}  {spread:<22} {c['agreement']:<18} "
              f"{b['plugin_build_s']:>5.2f}/{b['clang_build_s']:<5.2f}")
    print("  ratio = median(plugin) / median(clang); pair ratio = median and interquartile "
          "range of per-pair ratios; builds = plugin/clang build time")
    print()
    print("(b) per-call overhead of the Python launch path, microseconds (medians of batch "
          "means)")
    head = (f"{'kernel':<11} {'problem':<8} {'kernel()':>9} {'thunk':>8} {'raw':>8} "
            f"{'overhead':>9}  {'overhead IQR':<16}")
    print(head)
    print("-" * len(head))
    for o in overheads:
        print(f"{o['kernel']:<11} {o['problem']:<8} {o['kernel_call_us']:>9.3f} "
              f"{o['thunk_call_us']:>8.3f} {o['raw_call_us']:>8.3f} {o['overhead_us']:>9.3f}  "
              f"[{o['overhead_q1_us']:.3f}, {o['overhead_q3_us']:.3f}]")
    python_call = statistics.median(o["python_call_us"] for o in overheads)
    print(f"  kernel() = calling the kernel object; thunk = CPULauncher.function with the "
          f"arguments already bound (arrays as objects);\n  raw = ctypes function of the "
          f"compiled kernel with pointers extracted once; overhead = kernel() - raw.\n"
          f"  Each figure includes the benchmark loop and a Python call (an empty Python "
          f"function takes {python_call:.3f} us here).")
    elapsed = time.perf_counter() - began
    print(f"\ntotal time {elapsed:.1f} s, load average at end {os.getloadavg()[0]:.2f}")

    if options.json is not None:
        options.json.write_text(json.dumps({
            "clang": clang.version, "clang_origin": clang.origin, "target": target.name,
            "python": platform.python_version(), "numpy": np.__version__,
            "builds": builds, "comparisons": comparisons, "overheads": overheads,
            "elapsed_s": elapsed, "cpu_count": os.cpu_count(),
        }, indent=2))
        print(f"wrote {options.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
