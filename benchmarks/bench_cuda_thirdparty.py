"""Registers per kernel of the third-party CUDA files (tests/cuda_thirdparty/) against nvcc -O3.

Each kernel of ``tests/test_cuda_thirdparty.py``'s table is built as pytest-r3 builds it (the
file as it stands: clang device-only, what the entry reaches, the default llvmlite pipeline)
and, where nvcc is installed, by ``nvcc -O3 -ptx`` from the same unchanged file; ``ptxas
-v`` reports both for the same architecture. Three more builds of ours take the code
generation settings tuning searches for CUDA kernels: loop strength reduction off
(``codegen_lsr=False``, "no LSR"), addresses from the base pointer
(``flat_addresses=True``, "flat"), and both; "best ratio" is the fewest of the four
against nvcc's. Where the CUDA toolkit lacks a library the files include for their
host side (cuBLAS, cuBLASLt: not part of a compiler-only toolkit), nvcc is given
pytest-r3's declarations of those headers alone (``pytest_r3/include/host_only/``), never
its stand-ins for CUDA's or C++'s own headers. One row per kernel: our registers,
nvcc's, whether ours are within 25% (the target) and whether both allow as many resident
warps per SM. No GPU is used.

Run from the repository root::

    python benchmarks/bench_cuda_thirdparty.py [--arch sm_90] [--json PATH]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
from pathlib import Path

import isolation

isolation.isolate()  # before anything reads the environment (see isolation.py)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_cuda_coverage import TARGET, resident_warps  # noqa: E402

from pytest_r3 import Pipeline  # noqa: E402
from pytest_r3.backends.cuda import CUDABackend, toolchain  # noqa: E402
from pytest_r3.errors import R3Error  # noqa: E402
from pytest_r3.model.source import KernelSource  # noqa: E402

# the code generation settings tuning searches for CUDA kernels, built beside the default
SETTINGS = {"ours_no_lsr": {"codegen_lsr": False}, "ours_flat": {"flat_addresses": True},
            "ours_both": {"codegen_lsr": False, "flat_addresses": True}}
LIBRARY_HEADERS = ("cublas_v2.h", "cublas_api.h", "cublas.h", "cublasLt.h", "curand.h",
                   "nvToolsExt.h", "cuda_profiler_api.h")


def suite():
    """tests/test_cuda_thirdparty.py as a module: its CASES table and declare()."""
    spec = importlib.util.spec_from_file_location(
        "thirdparty_cases", ROOT / "tests" / "test_cuda_thirdparty.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look themselves up there
    spec.loader.exec_module(module)
    return module


def cases() -> list:
    return suite().CASES


def library_folder(folder: Path) -> Path:
    """A folder holding pytest-r3's declarations of the host libraries the toolkit lacks.

    The toolkit is the one nvcc belongs to, found as the device build finds it (an nvcc on
    PATH may be a wrapper script outside the toolkit: its parent folder is not the
    toolkit's, and taking it for one gave matrixMul.cu pytest-r3's cuda_profiler_api.h,
    which nvcc cannot compile)."""
    found = toolchain.find_toolkit()
    nvcc = Path(toolchain.find_tool("nvcc")).resolve()
    toolkit = found.include if found else nvcc.parent.parent / "include"
    for name in LIBRARY_HEADERS:
        if not (toolkit / name).exists():
            (folder / name).write_text((toolchain.HOST_ONLY_HEADERS / name).read_text())
    return folder


def measure(item, backend: CUDABackend, libraries: Path | None) -> dict:
    path = item.file
    source = KernelSource(path.read_text(), str(path), path,
                          (str(path.parent), *item.include_dirs), entry=item.entry)
    backend.inspect(source, item.entry, {})
    ir = backend.compile(source, {})
    build = backend.compile_ptx(ir, item.entry, Pipeline(), item.entry)
    row = {"kernel": item.id, "ours": build.diagnostics.get("registers"),
           "ours_spills": build.diagnostics.get("spill_store_bytes", 0)}
    for label, settings in SETTINGS.items():
        other = backend.compile_ptx(ir, item.entry, Pipeline(**settings), item.entry)
        row[label] = other.diagnostics.get("registers")
    row["ours_best"] = min(row["ours"], *(row[label] for label in SETTINGS))
    if libraries is None:
        return row
    try:
        ptx = toolchain.nvcc_ptx(source, {}, backend.arch, extra_flags=("-I", str(libraries)),
                                 entry=item.entry)
    except R3Error as exc:
        row["nvcc_error"] = str(exc).splitlines()[0][:160]
        return row
    symbol = toolchain.match_symbol(toolchain.ptx_entries(ptx), item.entry, item.id)
    info = (toolchain.ptxas_info(ptx, backend.arch) or {}).get(symbol, {})
    row.update(nvcc=info.get("registers"), nvcc_spills=info.get("spill_store_bytes", 0))
    row["within_target"] = row["ours"] <= TARGET * row["nvcc"]
    row["same_occupancy"] = resident_warps(row["ours"]) == resident_warps(row["nvcc"])
    row["best_within_target"] = row["ours_best"] <= TARGET * row["nvcc"]
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    isolation.add_option(parser)
    options = parser.parse_args()
    if toolchain.find_tool("ptxas") is None:
        print("ptxas (CUDA toolkit) is not installed: no register counts to compare")
        return 1
    backend = CUDABackend(options.arch)
    with tempfile.TemporaryDirectory(prefix="r3-libraries-") as folder:
        libraries = library_folder(Path(folder)) if toolchain.find_tool("nvcc") else None
        rows = [measure(item, backend, libraries) for item in cases()]
    print(f"registers per kernel, {options.arch}: pytest-r3 (clang + llvmlite -O3) vs "
          f"{'nvcc -O3' if libraries else 'nvcc (not installed)'}")
    print(f"{'kernel':<58} {'ours':>5} {'nvcc':>5} {'ratio':>6}  within 25%  same occupancy"
          "  no LSR  flat  both  best ratio")
    for row in rows:
        nvcc = row.get("nvcc")
        ratio = f"{row['ours'] / nvcc:6.2f}" if nvcc else "     -"
        best = f"{row['ours_best'] / nvcc:10.2f}" if nvcc else "         -"
        print(f"{row['kernel']:<58} {row['ours']:>5} {nvcc if nvcc else '-':>5} {ratio}  "
              f"{'yes' if row.get('within_target') else ('-' if not nvcc else 'NO'):<10}  "
              f"{'yes' if row.get('same_occupancy') else ('-' if not nvcc else 'no'):<14}  "
              f"{row['ours_no_lsr']:>6}  {row['ours_flat']:>4}  {row['ours_both']:>4}  {best}"
              + (f"  (nvcc: {row['nvcc_error']})" if "nvcc_error" in row else ""))
    compared = [r for r in rows if r.get("nvcc")]
    within = sum(r["within_target"] for r in compared)
    print(f"{len(rows)} kernels; compared with nvcc: {len(compared)}; within 25%: {within}; "
          f"same occupancy: {sum(r['same_occupancy'] for r in compared)}; within 25% with "
          f"the code generation settings tuned: "
          f"{sum(r['best_within_target'] for r in compared)}")
    if options.json:
        options.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
