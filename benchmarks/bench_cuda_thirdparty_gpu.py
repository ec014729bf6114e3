"""The third-party CUDA files (tests/cuda_thirdparty/) on a real GPU: every kernel against
numpy, and its time next to nvcc's build of the same unchanged file.

For each kernel of ``tests/test_cuda_thirdparty.py``'s table, at the table's (test) sizes:

1. pytest-r3's build (clang device-only -> llvmlite -O3 -> PTX, loaded by the driver) and
   nvcc's (``nvcc -O3 -cubin`` of the same file, the host-library declarations given as in
   bench_cuda_thirdparty.py) are loaded through the same runtime and launched the same way;
2. each runs once on the table's arguments and is compared with the numpy oracle;
3. both are timed interleaved (the order alternating by round) with pytest-r3's GPU timing:
   CUDA events around each launch on the launch stream, an L2 flush before it, warm-up
   launches first; a round's figure is its median launch;
4. a launch faster than its buffers' bytes at the device's peak bandwidth is flagged
   ``SUSPECT`` (see docs/cuda.md, "Timing on a GPU").

The GPU, its peak bandwidth and its clocks (NVML) before and after are printed. The sizes
are the oracle tests' (hundreds of elements): the times are launch-bound and say how the
two builds compare on these kernels at these sizes, not at production sizes.

Run from the repository root, where a GPU is usable (scripts/gpu_suite.py thirdparty)::

    python benchmarks/bench_cuda_thirdparty_gpu.py [--rounds 15] [--launches 20] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

import isolation
import numpy as np

isolation.isolate()  # before anything reads the environment (see isolation.py)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
os.environ["PYTEST_R3_CUDA_EMULATION"] = "0"  # on the GPU or not at all

from bench_cuda_thirdparty import library_folder, suite  # noqa: E402

from pytest_r3.backends import get_backend  # noqa: E402
from pytest_r3.backends.cuda import runtime as cuda_runtime  # noqa: E402
from pytest_r3.backends.cuda import toolchain  # noqa: E402
from pytest_r3.errors import R3Error  # noqa: E402

SEED = 2024


def oracle(item, launcher) -> str:
    """"ok", or how far the launcher's outputs are from numpy's."""
    args = item.arguments(np.random.default_rng(SEED))
    expected = item.expected([a.copy() if isinstance(a, np.ndarray) else a for a in args])
    launcher(*args)
    for index, want in expected.items():
        got = np.asarray(item.read(args[index]), np.float64)
        if not np.allclose(got, want, rtol=item.rtol, atol=item.atol, equal_nan=True):
            return f"MISMATCH arg {index + 1} (max error {np.nanmax(np.abs(got - want)):.3g})"
    return "ok"


def verdict(said: str | None) -> str:
    """A numpy comparison in a table cell: ok, FAIL, or - (not built)."""
    return "-" if said is None else "ok" if said == "ok" else "FAIL"


def nvcc_launcher(backend, item, kernel, libraries: Path | None):
    source = kernel.source_for(kernel.baseline)
    flags = ("-I", str(libraries)) if libraries else ()
    ptx = toolchain.nvcc_ptx(source, {}, backend.arch, extra_flags=flags, entry=item.entry)
    symbol = toolchain.match_symbol(toolchain.ptx_entries(ptx), item.entry, item.id)
    cubin = toolchain.nvcc_cubin(source, {}, backend.arch, extra_flags=flags, entry=item.entry)
    return backend.load_ptx(cubin, symbol, kernel.signature, kernel.launch, {}, kernel.name)


def interleaved(backend, launchers: dict, args: list, rounds: int, launches: int) -> dict:
    """Per launcher: each round's median launch time, rounds alternating the order."""
    times: dict[str, list[float]] = {label: [] for label in launchers}
    for number in range(rounds):
        order = list(launchers) if number % 2 == 0 else list(reversed(launchers))
        for label in order:
            times[label].append(statistics.median(backend.time(launchers[label], args,
                                                               launches)))
    return times


def measure(backend, module, item, libraries, options, peak: float) -> dict:
    kernel = module.declare(item, launch=item.launch)
    row: dict = {"kernel": item.id}
    launchers = {"ours": kernel.build()}
    try:
        launchers["nvcc"] = nvcc_launcher(backend, item, kernel, libraries)
    except R3Error as exc:
        row["nvcc_error"] = str(exc).splitlines()[0][:160]
    for label, launcher in launchers.items():
        row[f"numpy_{label}"] = oracle(item, launcher)
    args = item.arguments(np.random.default_rng(SEED))
    moved = sum(a.nbytes for a in args if isinstance(a, np.ndarray))
    times = interleaved(backend, launchers, args, options.rounds, options.launches)
    bound = moved / peak if peak else 0.0
    for label, rounds in times.items():
        row[f"{label}_seconds"] = statistics.median(rounds)
        row[f"{label}_rounds"] = rounds
        row[f"{label}_suspect"] = row[f"{label}_seconds"] < bound
    if "nvcc" in times:
        row["nvcc_over_ours"] = statistics.median(
            n / o for n, o in zip(times["nvcc"], times["ours"], strict=True))
    row["bytes"] = moved
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--launches", type=int, default=20, help="timed launches per round")
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    isolation.add_option(parser)
    options = parser.parse_args()
    reason = cuda_runtime.unavailable_reason()
    if reason is not None:
        print(f"needs a GPU: {reason}")
        return 1
    gpu = cuda_runtime.runtime()
    facts = gpu.facts()
    backend = get_backend("cuda")
    module = suite()
    print(f"{facts.name} ({facts.arch}): L2 {facts.l2_bytes >> 20} MiB, peak "
          f"{facts.peak_bandwidth / 1e9:.0f} GB/s ({facts.source}); runtime {gpu.name}; "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"clocks before: {gpu.clocks().describe()}")
    with tempfile.TemporaryDirectory(prefix="r3-libraries-") as folder:
        libraries = library_folder(Path(folder)) if toolchain.find_tool("nvcc") else None
        rows = [measure(backend, module, item, libraries, options, facts.peak_bandwidth)
                for item in module.CASES]
    print(f"clocks after: {gpu.clocks().describe()}")
    print(f"median launch of {options.rounds} interleaved rounds x {options.launches} "
          "launches, each after an L2 flush; nvcc/ours > 1: ours is faster")
    print(f"{'kernel':<58} {'numpy':>5} {'nvcc':>5} {'ours us':>8} {'nvcc us':>8} "
          f"{'nvcc/ours':>9}")
    for row in rows:
        nvcc_us = f"{row['nvcc_seconds'] * 1e6:8.2f}" if "nvcc_seconds" in row else "       -"
        ratio = f"{row['nvcc_over_ours']:9.2f}" if "nvcc_over_ours" in row else "        -"
        flags = [f"ours {row['numpy_ours']}" if row["numpy_ours"] != "ok" else "",
                 f"nvcc {row['numpy_nvcc']}" if row.get("numpy_nvcc", "ok") != "ok" else "",
                 "SUSPECT (faster than the memory allows)" if row["ours_suspect"]
                 or row.get("nvcc_suspect") else "",
                 f"(nvcc: {row['nvcc_error']})" if "nvcc_error" in row else ""]
        print(f"{row['kernel']:<58} {verdict(row.get('numpy_ours')):>5} "
              f"{verdict(row.get('numpy_nvcc')):>5} "
              f"{row['ours_seconds'] * 1e6:8.2f} {nvcc_us} {ratio}  "
              + "  ".join(f for f in flags if f))
    compared = [r["nvcc_over_ours"] for r in rows if "nvcc_over_ours" in r]
    passed = sum(r["numpy_ours"] == "ok" for r in rows)
    print(f"{len(rows)} kernels; ours match numpy: {passed}; timed next to nvcc: "
          f"{len(compared)}" + (f"; nvcc/ours geometric mean "
                                f"{float(np.exp(np.mean(np.log(compared)))):.2f}, range "
                                f"{min(compared):.2f}-{max(compared):.2f}" if compared else ""))
    if options.json:
        options.json.write_text(json.dumps({"device": facts.as_dict(), "rows": rows},
                                           indent=1))
    return 0 if passed == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
