"""The optional parts of NVIDIA's toolkit the CUDA backend uses when they are installed.

None of them is required: PTX comes from clang and llvmlite alone. Where installed,
``ptxas -v`` assembles every PTX (a PTX it rejects is a compile error) and reports registers,
spills, stack and shared memory; libdevice supplies accurate math functions; ``nvcc``
builds the vendor baseline the GPU benchmark compares against.

Tools are looked up on ``PATH``, then under ``$CUDA_HOME``, ``$CUDA_PATH`` and
``/usr/local/cuda``. ``PYTEST_R3_LIBDEVICE`` names libdevice's bitcode file, or ``0`` to
not use it.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from ..errors import CompileError, EntryNotFoundError, ToolchainError
from ..model.source import KernelSource
from .clang import macro_flags

LIBDEVICE_ENV = "PYTEST_R3_LIBDEVICE"
HEADER = Path(__file__).resolve().parent.parent / "include" / "r3_cuda.h"


def _cuda_roots() -> list[Path]:
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    return [Path(r) for r in roots if r]


def find_tool(name: str) -> str | None:
    """Path of a CUDA toolkit program (``ptxas``, ``nvcc``), or None."""
    found = shutil.which(name)
    if found:
        return found
    for root in _cuda_roots():
        candidate = root / "bin" / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


@functools.lru_cache(maxsize=1)
def find_libdevice() -> Path | None:
    """libdevice's bitcode (``nvvm/libdevice/libdevice.10.bc``), or None."""
    override = os.environ.get(LIBDEVICE_ENV, "").strip()
    if override in ("0", "off", "no", "false"):
        return None
    if override:
        if not Path(override).is_file():
            raise ToolchainError(f"{LIBDEVICE_ENV}={override!r} is not a file; point it at "
                                 "libdevice.10.bc or set it to 0 to do without libdevice")
        return Path(override)
    roots = _cuda_roots()
    for tool in ("nvcc", "ptxas"):
        path = shutil.which(tool)
        if path:
            roots.append(Path(os.path.realpath(path)).parent.parent)
    for root in roots:
        candidate = root / "nvvm" / "libdevice" / "libdevice.10.bc"
        if candidate.is_file():
            return candidate
    return None


# -- kernel symbols -------------------------------------------------------------------------
def match_symbol(symbols: Iterable[str], entry: str, where: str) -> str:
    """The symbol of kernel ``entry``: the name itself (``extern "C"``) or its C++ mangling."""
    symbols = list(dict.fromkeys(symbols))
    if entry in symbols:
        return entry
    mangled = re.compile(rf"_ZL?{len(entry)}{re.escape(entry)}[A-Za-z]")  # L: static
    found = [s for s in symbols if mangled.match(s)]
    if len(found) == 1:
        return found[0]
    if found:
        raise EntryNotFoundError(
            f"{where}: entry {entry!r} matches several kernels ({', '.join(found)}: overloads "
            "or template instances); declare the one to launch extern \"C\" or give its "
            "mangled name as entry=")
    names = [demangled_name(s) for s in symbols]
    raise EntryNotFoundError(
        f"{where}: no __global__ function {entry!r} in the source (its kernels: "
        f"{', '.join(names) or 'none'}). Check entry= and that the function is __global__.")


def demangled_name(symbol: str) -> str:
    """``_Z4vaddPKfS0_Pfi`` -> ``vadd`` (free functions only), else the symbol itself."""
    match = re.match(r"_ZL?(\d+)", symbol)
    if match:
        length = int(match.group(1))
        return symbol[match.end():match.end() + length]
    return symbol


def ptx_entries(ptx: str) -> list[str]:
    return re.findall(r"^\s*(?:\.visible\s+|\.weak\s+)?\.entry\s+([\w$]+)\s*\(", ptx, re.MULTILINE)


# -- ptxas -v -------------------------------------------------------------------------------
_PROPERTIES = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, "
                         r"(\d+) bytes spill loads")
_FIELDS = {
    "registers": re.compile(r"Used (\d+) registers"),
    "barriers": re.compile(r"used (\d+) barriers"),
    "shared_bytes": re.compile(r"(\d+) bytes smem"),
    "constant_bytes": re.compile(r"(\d+) bytes cmem\[0\]"),
}


def parse_ptxas_info(text: str) -> dict[str, dict[str, int]]:
    """``ptxas -v`` output -> per function: registers, spills, stack, shared memory..."""
    functions: dict[str, dict[str, int]] = {}
    current = None
    for line in text.splitlines():
        header = re.search(r"(?:Compiling entry function|Function properties for) '?([\w$]+)'?",
                           line)
        if header:
            current = functions.setdefault(header.group(1), {})
            continue
        if current is None:
            continue
        properties = _PROPERTIES.search(line)
        if properties:
            current.update(stack_bytes=int(properties.group(1)),
                           spill_store_bytes=int(properties.group(2)),
                           spill_load_bytes=int(properties.group(3)))
        for key, pattern in _FIELDS.items():
            match = pattern.search(line)
            if match:
                current[key] = int(match.group(1))
    return functions


@functools.lru_cache(maxsize=256)
def ptxas_info(ptx: str, arch: str) -> dict[str, dict[str, int]] | None:
    """Assemble ``ptx`` with ``ptxas -v`` (output discarded) and parse what it reports.

    None when ptxas is not installed; a CompileError quoting ptxas when it rejects the PTX.
    """
    ptxas = find_tool("ptxas")
    if ptxas is None:
        return None
    with tempfile.TemporaryDirectory(prefix="r3-ptxas-") as folder:
        source = Path(folder) / "kernel.ptx"
        source.write_text(ptx)
        command = [ptxas, "-v", f"-arch={arch}", str(source), "-o", str(Path(folder) / "k.o")]
        result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        message = (result.stderr or result.stdout).strip()
        raise CompileError(f"ptxas rejected the PTX for {arch}: {message[-2000:]}\n\n"
                           f"command: {shlex.join(command)}", message, command)
    return parse_ptxas_info(result.stderr + result.stdout)


# -- the vendor baseline --------------------------------------------------------------------
def nvcc_ptx(source: KernelSource, macros: Mapping[str, object], arch: str,
             extra_flags: Iterable[str] = ()) -> str:
    """PTX of ``source`` built by ``nvcc -O3 -ptx`` (with CUDA's own headers; r3_cuda.h is
    then empty). Raises ToolchainError without nvcc, CompileError when nvcc fails."""
    nvcc = find_tool("nvcc")
    if nvcc is None:
        raise ToolchainError("nvcc is not installed (not on PATH nor under $CUDA_HOME/bin); "
                             "the vendor baseline needs the CUDA toolkit")
    name = hashlib.sha256(source.text.encode()).hexdigest()[:12]
    with tempfile.TemporaryDirectory(prefix="r3-nvcc-") as folder:
        path = Path(folder) / f"{name}.cu"
        path.write_text(f'#line 1 "{source.filename}"\n{source.text}')
        output = Path(folder) / f"{name}.ptx"
        command = [nvcc, "-O3", "-ptx", f"-arch={arch}", "-I", str(HEADER.parent),
                   "-include", str(HEADER), *(f"-I{d}" for d in source.include_dirs),
                   *macro_flags(macros), *source.define_flags, *extra_flags, str(path),
                   "-o", str(output)]
        result = subprocess.run(command, capture_output=True, text=True, timeout=600)
        if result.returncode != 0:
            message = (result.stderr or result.stdout).strip()
            raise CompileError(f"nvcc could not compile {source.filename}: {message[-2000:]}"
                               f"\n\ncommand: {shlex.join(command)}", message, command)
        return output.read_text()
