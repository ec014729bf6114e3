"""The tools of the HIP build that are not clang: the target check, linking a code object
with the ziglang wheel's ``ld.lld``, and what a code object says about its kernel
(registers, LDS, scratch, occupancy).

The figures come from the code object's own metadata, which the AMDGPU back end writes
into the assembly (the ``amdhsa.kernels`` YAML document) and into the object's note: the
same numbers ROCm's tools print. Occupancy is computed from them with the limits of the
wave64 CDNA GPUs (gfx90a: MI200; gfx942: MI300), as AMD's occupancy calculator does.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ...errors import CompileError, ToolchainError
from .. import clang

INCLUDE = Path(__file__).resolve().parent.parent.parent / "include"
HEADER = INCLUDE / "r3_hip.h"
ARCH_ENV = "PYTEST_R3_HIP_ARCH"
DEFAULT_ARCH = "gfx942"
TRIPLE = "amdgcn-amd-amdhsa"
WAVEFRONT = 64


@dataclass(frozen=True)
class GPULimits:
    """What bounds a CDNA compute unit's occupancy (waves per SIMD)."""

    vgprs_per_simd: int = 512      # per lane; VGPRs and AGPRs share it on CDNA2/3
    vgpr_granule: int = 8
    sgprs_per_simd: int = 800
    sgpr_granule: int = 16
    waves_per_simd: int = 8
    simds_per_cu: int = 4
    lds_per_cu: int = 65536


# the architectures pytest-r3 builds for and whose occupancy limits it knows
TARGETS = {"gfx90a": GPULimits(), "gfx942": GPULimits()}


def check_arch(arch: str) -> str:
    if arch not in TARGETS:
        raise ToolchainError(f"AMD GPU architecture {arch!r} is not one pytest-r3 builds "
                             f"for; use one of {', '.join(TARGETS)} (check ${ARCH_ENV} or "
                             "--target)")
    return arch


def find_lld() -> tuple[str, ...]:
    """The command that runs the ziglang wheel's ``ld.lld`` (the linker of code objects)."""
    override = os.environ.get("PYTEST_R3_LLD", "").strip()
    if override:
        return (override,)
    return (str(clang._zig_dir() / "zig"), "ld.lld")


def link_code_object(obj: bytes, where: str) -> bytes:
    """An AMDGPU relocatable object linked into a loadable code object (a shared ELF), as
    hipcc links one; an undefined symbol (a device function nobody provides) is an error."""
    with tempfile.TemporaryDirectory(prefix="r3-hip-") as folder:
        source, target = Path(folder) / "kernel.o", Path(folder) / "kernel.hsaco"
        source.write_bytes(obj)
        command = [*find_lld(), "-shared", "--no-undefined", str(source), "-o", str(target)]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=120,
                                  check=False)
        except OSError as exc:
            raise ToolchainError(f"could not run ld.lld ({' '.join(command)}): {exc}") from exc
        if done.returncode != 0:
            message = done.stderr.strip().replace(str(source), "kernel.o")
            missing = re.findall(r"undefined (?:hidden )?symbol: (\S+)", message)
            if missing:
                raise CompileError(
                    f"{where}: the kernel calls {', '.join(sorted(set(missing)))}, which "
                    "pytest-r3's HIP build does not provide (ROCm's device libraries are not "
                    "used; see docs/hip.md, 'What HIP is supported')", message)
            raise CompileError(f"{where}: ld.lld could not link the code object: "
                               f"{message.splitlines()[0] if message else done.returncode}",
                               message)
        return target.read_bytes()


_METADATA = re.compile(r"^\s+\.(sgpr_count|vgpr_count|agpr_count|group_segment_fixed_size|"
                       r"private_segment_fixed_size|sgpr_spill_count|vgpr_spill_count|"
                       r"max_flat_workgroup_size|wavefront_size|symbol):\s+(\S+)",
                       re.MULTILINE)
_FIGURES = {"vgpr_count": "vgprs", "agpr_count": "agprs", "sgpr_count": "sgprs",
            "group_segment_fixed_size": "lds_bytes",
            "private_segment_fixed_size": "scratch_bytes",
            "vgpr_spill_count": "vgpr_spills", "sgpr_spill_count": "sgpr_spills",
            "max_flat_workgroup_size": "max_block", "wavefront_size": "wavefront"}


def kernel_figures(assembly: str, symbol: str) -> dict[str, int]:
    """The figures of kernel ``symbol`` read from the ``amdhsa.kernels`` metadata of its
    assembly: vgprs, agprs, sgprs, lds_bytes, scratch_bytes, spills, max_block,
    wavefront."""
    _, marker, metadata = assembly.partition("amdhsa.kernels:")
    if not marker:
        return {}
    for block in re.split(r"\n  - \.", metadata):  # one per kernel (its arguments nest deeper)
        found = dict(_METADATA.findall("\n    ." + block))
        if found.get("symbol") == f"{symbol}.kd":
            return {_FIGURES[k]: int(v) for k, v in found.items() if k in _FIGURES}
    return {}


def _rounded(value: int, granule: int) -> int:
    return max(granule, -(-value // granule) * granule)


def occupancy(figures: dict[str, int], arch: str, block: int | None = None) -> dict[str, int]:
    """Waves per SIMD the kernel can keep resident (at most 8 on CDNA), and what limits it:
    registers (VGPRs with AGPRs, SGPRs) and, for a block of ``block`` threads (default:
    the kernel's largest), the LDS it allocates per block."""
    limits = TARGETS[arch]
    registers = _rounded(-(-figures.get("vgprs", 0) // 4) * 4 + figures.get("agprs", 0),
                         limits.vgpr_granule)
    by_vgpr = limits.vgprs_per_simd // registers
    by_sgpr = limits.sgprs_per_simd // _rounded(figures.get("sgprs", 0), limits.sgpr_granule)
    block = block or figures.get("max_block", 1024)
    waves_per_block = -(-block // WAVEFRONT)
    lds = figures.get("lds_bytes", 0)
    by_lds = limits.waves_per_simd
    if lds:
        blocks = limits.lds_per_cu // lds
        by_lds = blocks * waves_per_block // limits.simds_per_cu
    waves = min(limits.waves_per_simd, by_vgpr, by_sgpr, by_lds)
    return {"waves_per_simd": waves, "limit_vgpr": min(by_vgpr, limits.waves_per_simd),
            "limit_sgpr": min(by_sgpr, limits.waves_per_simd),
            "limit_lds": min(by_lds, limits.waves_per_simd)}


def find_hipcc() -> str | None:
    """hipcc where ROCm is installed (for comparing its figures with ours), else None."""
    import shutil

    found = shutil.which("hipcc")
    if found:
        return found
    rocm = Path(os.environ.get("ROCM_PATH", "/opt/rocm")) / "bin" / "hipcc"
    return str(rocm) if rocm.is_file() and os.access(rocm, os.X_OK) else None


def code_object_symbols(code_object: bytes) -> dict[str, int]:
    """The symbols of a linked code object (an ELF64 file) and their sizes, read from its
    symbol table: a kernel ``k`` is there as ``k`` (its code) and ``k.kd`` (its 64-byte
    kernel descriptor, what the runtime launches)."""
    import struct

    if code_object[:4] != b"\x7fELF" or code_object[4] != 2:
        raise CompileError("not an ELF64 code object", "")
    shoff, = struct.unpack_from("<Q", code_object, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", code_object, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", code_object, shoff + i * shentsize)
                for i in range(shnum)]
    symbols = {}
    for _, kind, _, _, offset, size, link, _, _, entsize in sections:
        if kind != 2:  # SHT_SYMTAB
            continue
        strings = sections[link]
        for start in range(offset, offset + size, entsize):
            name, _, _, _, _, length = struct.unpack_from("<IBBHQQ", code_object, start)
            end = code_object.index(b"\0", strings[4] + name)
            text = code_object[strings[4] + name:end].decode()
            if text:
                symbols[text] = length
    return symbols
