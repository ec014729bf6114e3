"""Registers, LDS and occupancy of the HIP suite's kernels as pytest-r3 builds them.

For each kernel of ``tests/hip_suite/kernels.json`` this script builds the code object the
way pytest-r3 does (clang -x hip device-only with r3_hip.h, the default llvmlite
pipeline, LLVM's AMDGPU back end, the ziglang wheel's ld.lld) for gfx90a and gfx942, and
prints one row per kernel and target: VGPRs, AGPRs, SGPRs, LDS bytes, scratch bytes, the
occupancy the registers and LDS allow (waves per SIMD, at most 8), the code object's size
and the build's seconds (clang, passes, code generation and link). hipcc's figures would
sit beside ours where ROCm is installed; this script says when it is not. No GPU is used.

Run from the repository root::

    python benchmarks/bench_hip_suite.py [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import isolation

isolation.isolate()  # before anything reads the environment (see isolation.py)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_r3 import Pipeline  # noqa: E402
from pytest_r3.backends.hip import HIPBackend  # noqa: E402
from pytest_r3.backends.hip import toolchain as hip_tools  # noqa: E402
from pytest_r3.model.source import KernelSource  # noqa: E402

SUITE = ROOT / "tests" / "hip_suite"
COLUMNS = ("vgprs", "agprs", "sgprs", "lds_bytes", "scratch_bytes", "waves_per_simd")


def build_row(backend: HIPBackend, file: str, entry: str) -> dict:
    path = SUITE / file
    source = KernelSource(path.read_text(), str(path), path, (str(SUITE),), entry=entry)
    started = time.perf_counter()
    backend.inspect(source, entry, {})
    built = backend.compile_code_object(backend.compile(source, {}), entry, Pipeline(), entry)
    seconds = time.perf_counter() - started
    symbols = hip_tools.code_object_symbols(built.code_object)
    return {"file": file, "entry": entry, "arch": backend.arch,
            **{key: built.figures.get(key) for key in COLUMNS},
            "descriptor": symbols.get(f"{built.symbol}.kd") == 64,
            "code_object_bytes": len(built.code_object), "build_seconds": round(seconds, 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    isolation.add_option(parser)
    args = parser.parse_args(argv)
    kernels = json.loads((SUITE / "kernels.json").read_text())
    rows = []
    header = (f"{'kernel':<28} {'arch':<7} {'VGPR':>5} {'AGPR':>5} {'SGPR':>5} {'LDS':>6} "
              f"{'scratch':>7} {'waves':>5} {'bytes':>6} {'build s':>7}")
    print(header)
    for arch in hip_tools.TARGETS:
        backend = HIPBackend(arch)
        for kernel in kernels:
            row = build_row(backend, kernel["file"], kernel["entry"])
            rows.append(row)
            print(f"{kernel['entry'][:28]:<28} {arch:<7} {row['vgprs']:>5} {row['agprs']:>5} "
                  f"{row['sgprs']:>5} {row['lds_bytes']:>6} {row['scratch_bytes']:>7} "
                  f"{row['waves_per_simd']:>5} {row['code_object_bytes']:>6} "
                  f"{row['build_seconds']:>7.2f}" + ("" if row["descriptor"] else "  NO .kd"))
    print(f"{sum(r['descriptor'] for r in rows)} of {len(rows)} code objects hold their "
          "kernel descriptor")
    print("hipcc: " + ("found, not compared yet" if hip_tools.find_hipcc() else
                       "not installed (no ROCm here): no vendor figures to compare with"))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0 if all(r["descriptor"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
