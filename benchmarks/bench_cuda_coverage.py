"""Registers per kernel of the CUDA coverage suite: pytest-r3's build against nvcc -O3.

For each kernel of ``tests/cuda_suite/kernels.json`` this script compiles the file the way
pytest-r3 does (clang device-only with r3_cuda.h, the default llvmlite pipeline, LLVM's
NVPTX back end) and, where nvcc is installed, with ``nvcc -O3 -ptx``; ``ptxas -v`` assembles
both for the same architecture and reports registers and spills. It prints one row per
kernel: our registers, nvcc's, whether ours are within 25% of nvcc's (the target) and
whether both allow as many resident warps per SM (what a register count costs), then a
summary. Needs ptxas; the nvcc columns are left empty without nvcc. No GPU is used.

Run from the repository root::

    python benchmarks/bench_cuda_coverage.py [--arch sm_90] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import isolation

isolation.isolate()  # before anything reads the environment (see isolation.py)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_r3 import Pipeline  # noqa: E402
from pytest_r3.backends.cuda import CUDABackend  # noqa: E402
from pytest_r3.backends.cuda import toolchain as cuda_tools  # noqa: E402
from pytest_r3.model.source import KernelSource  # noqa: E402

SUITE = ROOT / "tests" / "cuda_suite"
TARGET = 1.25  # ours may use at most 25% more registers than nvcc
# what registers cost: an SM of sm_80/sm_90 has 65536 registers and holds at most 64 warps,
# each warp's registers allocated in units of 256 (8 per thread)
SM_REGISTERS, SM_WARPS, UNIT = 65536, 64, 8


def resident_warps(registers: int) -> int:
    """Warps per SM that registers alone allow (the occupancy a register count costs)."""
    per_thread = -(-max(registers, 1) // UNIT) * UNIT
    return min(SM_WARPS, SM_REGISTERS // (per_thread * 32))


def measure(row: dict, backend: CUDABackend, with_nvcc: bool) -> dict:
    path = SUITE / row["file"]
    source = KernelSource(path.read_text(), str(path), path, (str(path.parent),))
    entry, macros = row["entry"], row.get("macros", {})
    if "<" in entry:
        backend.inspect(source, entry, macros)  # declares the template instance
    build = backend.compile_ptx(backend.compile(source, macros), entry, Pipeline(), entry)
    result = {"file": row["file"], "entry": entry,
              "ours": build.diagnostics.get("registers"),
              "ours_spills": build.diagnostics.get("spill_store_bytes", 0)}
    if with_nvcc:
        ptx = cuda_tools.nvcc_ptx(source, macros, backend.arch, entry=entry)
        symbol = cuda_tools.match_symbol(cuda_tools.ptx_entries(ptx), entry, row["file"])
        info = (cuda_tools.ptxas_info(ptx, backend.arch) or {}).get(symbol, {})
        result.update(nvcc=info.get("registers"), nvcc_spills=info.get("spill_store_bytes", 0))
        result["within_target"] = result["ours"] <= TARGET * result["nvcc"]
        result["same_occupancy"] = resident_warps(result["ours"]) == resident_warps(result["nvcc"])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    isolation.add_option(parser)
    options = parser.parse_args()
    if cuda_tools.find_tool("ptxas") is None:
        print("ptxas (CUDA toolkit) is not installed: no register counts to compare")
        return 1
    with_nvcc = cuda_tools.find_tool("nvcc") is not None
    backend = CUDABackend(options.arch)
    rows = [measure(row, backend, with_nvcc)
            for row in json.loads((SUITE / "kernels.json").read_text())]

    print(f"registers per kernel, {options.arch}: pytest-r3 (clang + llvmlite -O3) vs "
          f"{'nvcc -O3' if with_nvcc else 'nvcc (not installed)'}")
    print(f"{'kernel':<32} {'file':<28} {'ours':>5} {'nvcc':>5} {'ratio':>6}  within 25%  "
          "same occupancy")
    for row in rows:
        nvcc = row.get("nvcc")
        ratio = f"{row['ours'] / nvcc:.2f}" if nvcc else "-"
        verdict = ("yes" if row["within_target"] else "NO") if nvcc else "-"
        occupancy = ("yes" if row["same_occupancy"] else "NO") if nvcc else "-"
        spills = "  (spills)" if row["ours_spills"] or row.get("nvcc_spills") else ""
        print(f"{row['entry']:<32} {row['file']:<28} {row['ours']:>5} "
              f"{nvcc if nvcc is not None else '-':>5} {ratio:>6}  {verdict:<10}  "
              f"{occupancy}{spills}")
    if with_nvcc:
        within = sum(row["within_target"] for row in rows)
        total_ours = sum(row["ours"] for row in rows)
        total_nvcc = sum(row["nvcc"] for row in rows)
        same = sum(row["same_occupancy"] for row in rows)
        print(f"\n{within} of {len(rows)} kernels within 25% of nvcc's registers; "
              f"total {total_ours} vs {total_nvcc} ({total_ours / total_nvcc:.2f}x); "
              f"{same} of {len(rows)} with the same occupancy as registers allow")
    if options.json:
        options.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
