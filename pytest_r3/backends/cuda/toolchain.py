"""The optional parts of NVIDIA's toolkit the CUDA backend uses when they are installed.

None of them is required: PTX comes from clang and llvmlite alone. Where installed,
``ptxas -v`` assembles every PTX (a PTX it rejects is a compile error) and reports registers,
spills, stack and shared memory; libdevice supplies accurate math functions; ``nvcc``
builds the vendor baseline the GPU benchmark compares against.

Tools are looked up on ``PATH``, then under ``$CUDA_HOME``, ``$CUDA_PATH`` and
``/usr/local/cuda``. ``PYTEST_R3_LIBDEVICE`` names libdevice's bitcode file, or ``0`` to
not use it. A toolkit found through ``nvcc`` (on ``PATH``, else under ``$CUDA_HOME`` or
``$CUDA_PATH``) also lends its headers to the device build (CUB, Thrust, libcu++, the full
cooperative groups); ``PYTEST_R3_CUDA_HEADERS=bundled`` keeps pytest-r3's own headers alone.
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
from dataclasses import dataclass
from pathlib import Path

from ...errors import CompileError, DeclarationError, EntryNotFoundError, ToolchainError
from ...model.source import KernelSource
from .. import compile_cache
from ..clang import macro_flags

LIBDEVICE_ENV = "PYTEST_R3_LIBDEVICE"
HEADER = Path(__file__).resolve().parent.parent.parent / "include" / "r3_cuda.h"
# CUDA's and C++'s headers for device code (cuda_fp16.h, <cstdio>...): on clang's include
# path only, since nvcc brings its own
DEVICE_HEADERS = HEADER.parent / "cuda_device"
# what host code beside kernels includes (the runtime API, cuBLAS, cuRAND, NVTX, the C++
# standard library's host headers): declarations only, for the device build and emulation
HOST_ONLY_HEADERS = HEADER.parent / "host_only"


def _cuda_roots() -> list[Path]:
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    return [Path(r) for r in roots if r]


# False in a contained replay worker: Landlock refuses the files a program such as ptxas
# writes, and once the worker is sealed seccomp ends it at exec
_programs_allowed = True


def forbid_programs() -> None:
    """No toolkit program in this process from now on: PTX goes to the driver as text and
    the driver assembles it."""
    global _programs_allowed
    _programs_allowed = False


def find_tool(name: str) -> str | None:
    """Path of a CUDA toolkit program (``ptxas``, ``nvcc``), or None (also in a process
    that may start none, see :func:`forbid_programs`)."""
    if not _programs_allowed:
        return None
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


# -- the toolkit's headers for the device build ----------------------------------------------
HEADERS_ENV = "PYTEST_R3_CUDA_HEADERS"
HEADER_CHOICES = ("auto", "toolkit", "bundled")
_CUDA_VERSION = re.compile(r"^#define\s+CUDA_VERSION\s+(\d+)", re.MULTILINE)


@dataclass(frozen=True)
class Toolkit:
    """An installed CUDA toolkit whose headers the device build may use."""

    root: Path
    version: int  # CUDA_VERSION from its cuda.h: 13000 for CUDA 13.0

    @property
    def include(self) -> Path:
        return self.root / "include"

    @property
    def release(self) -> str:
        return f"{self.version // 1000}.{self.version % 1000 // 10}"

    def describe(self) -> str:
        return f"CUDA {self.release} toolkit ({self.include})"


def find_toolkit() -> Toolkit | None:
    """The CUDA toolkit of the ``nvcc`` on ``PATH``, else under ``$CUDA_HOME`` or
    ``$CUDA_PATH``, when its ``include/cuda.h`` names its version; else None."""
    return _toolkit(os.environ.get("PATH", ""), os.environ.get("CUDA_HOME", ""),
                    os.environ.get("CUDA_PATH", ""))


@functools.lru_cache(maxsize=8)
def _toolkit(path: str, *homes: str) -> Toolkit | None:
    found = shutil.which("nvcc", path=path)
    candidates = [Path(os.path.realpath(found)).parent.parent] if found else []
    if found and not (candidates[0] / "include" / "cuda.h").is_file():
        candidates += _nvcc_home(found)  # a wrapper script: nvcc says where it lives
    candidates += [Path(home) for home in homes if home]
    for root in candidates:
        try:
            match = _CUDA_VERSION.search((root / "include" / "cuda.h").read_text(errors="replace"))
        except OSError:
            continue
        if match:
            return Toolkit(root.resolve(), int(match.group(1)))
    return None


def _nvcc_home(nvcc: str) -> list[Path]:
    try:
        result = subprocess.run([nvcc, "--dryrun", "-x", "cu", "-E", os.devnull],
                                capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return []
    match = re.search(r"^#\$ _HERE_=(.+)$", result.stdout + result.stderr, re.MULTILINE)
    return [Path(match.group(1).strip()).parent] if match else []


def header_choice() -> str:
    """``PYTEST_R3_CUDA_HEADERS``: auto (unset: the toolkit's where one is installed),
    toolkit, or bundled; anything else is a ToolchainError saying what is accepted."""
    value = os.environ.get(HEADERS_ENV, "").strip().lower() or "auto"
    if value not in HEADER_CHOICES:
        raise ToolchainError(f"{HEADERS_ENV}={value!r} is not understood; use auto (the CUDA "
                             "toolkit's headers where one is installed), toolkit or bundled")
    return value


def device_toolkit(choice: str | None = None) -> Toolkit | None:
    """The toolkit whose headers the device build adds to pytest-r3's, or None for the
    bundled headers alone. ``choice`` (default: :func:`header_choice`) ``toolkit`` without
    an installed toolkit is a ToolchainError."""
    choice = choice or header_choice()
    if choice == "bundled":
        return None
    toolkit = find_toolkit()
    if toolkit is None and choice == "toolkit":
        raise ToolchainError(f"{HEADERS_ENV}=toolkit, but no CUDA toolkit is installed (no nvcc "
                             "on PATH nor under $CUDA_HOME/bin); install it, set CUDA_HOME, or "
                             "use auto or bundled")
    return toolkit


# -- kernel symbols -------------------------------------------------------------------------
@dataclass(frozen=True)
class EntryName:
    """A declared CUDA entry: a function name, possibly qualified (``ns::saxpy``), and for a
    template instance its arguments as written (``scale_tiles<16, float>``)."""

    name: str
    arguments: str | None = None

    @property
    def text(self) -> str:
        return self.name if self.arguments is None else f"{self.name}<{self.arguments}>"


_ENTRY = re.compile(r"((?:::)?[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*) *(?:<(.*)>)?")
# what template arguments may contain: names, numbers, types, nested <...> and (...)
_ARGUMENT_TEXT = re.compile(r"[\w ,:<>*&().+\-']*")


def parse_entry(entry: str) -> EntryName:
    """``"scale_tiles<16, float>"`` -> EntryName("scale_tiles", "16, float").

    Raises DeclarationError naming the problem when ``entry`` is neither a function name nor
    the C++ name of a template instance."""
    match = _ENTRY.fullmatch(entry) if isinstance(entry, str) else None
    arguments = match.group(2) if match else None
    if match is None or (arguments is not None and not (
            arguments.strip() and _ARGUMENT_TEXT.fullmatch(arguments)
            and _balanced(arguments))):
        raise DeclarationError(
            f"entry {entry!r} is not a kernel name: give the function's name (entry='saxpy') "
            "or, for a template kernel, the C++ name of one instance "
            "(entry='scale_tiles<16, float>')")
    return EntryName(match.group(1).removeprefix("::"),
                     None if arguments is None else arguments.strip())


def is_entry_name(entry: object) -> bool:
    """Whether ``entry`` is a valid CUDA entry (see :func:`parse_entry`)."""
    try:
        parse_entry(entry)  # type: ignore[arg-type]
    except DeclarationError:
        return False
    return True


def default_name(entry: str) -> str:
    """A kernel name for ``entry`` that is safe as a file name everywhere (recordings are
    kept per kernel name): ``scale_tiles<16, float>`` -> ``scale_tiles_16_float``,
    ``ns::saxpy`` -> ``ns_saxpy``."""
    return re.sub(r"\W+", "_", entry).strip("_") or entry


def _balanced(text: str) -> bool:
    depth = {"<": 0, "(": 0}
    closing = {">": "<", ")": "("}
    for char in text:
        if char in depth:
            depth[char] += 1
        elif char in closing:
            depth[closing[char]] -= 1
            if depth[closing[char]] < 0:
                return False
    return not any(depth.values())


INSTANCE_FILE = "<pytest-r3: instance of the declared entry>"


def instantiation_text(*entries: str) -> str:
    """Code appended to the compiled text (never to the file) so that the template instances
    named as entries exist even when the file itself never instantiates them: host functions
    that take each kernel's address, which makes clang emit that instance."""
    lines = []
    for index, entry in enumerate(entries):
        parsed = parse_entry(entry)
        if parsed.arguments is not None:
            lines.append(f"[[maybe_unused]] static void __r3_instantiate_{index}() "
                         f"{{ (void)&{parsed.text}; }}\n")
    return f'\n#line 1 "{INSTANCE_FILE}"\n' + "".join(lines) if lines else ""


def match_symbol(symbols: Iterable[str], entry: str, where: str) -> str:
    """The symbol of kernel ``entry``: the name itself (``extern "C"``, or a mangled name
    given as entry), else the C++ kernel whose demangled name is ``entry``; without
    template arguments, ``entry`` may name the one instance of a template kernel."""
    symbols = list(dict.fromkeys(symbols))
    if entry in symbols:
        return entry
    try:
        wanted = parse_entry(entry)
    except DeclarationError:
        wanted = None
    names = {s: kernel_name(s) for s in symbols}
    found = []
    if wanted is not None:
        key = _comparable(wanted.text)
        found = [s for s in symbols if _comparable(names[s]) == key]
        if not found and wanted.arguments is None:  # "scale_tiles" for scale_tiles<16, float>
            found = [s for s in symbols if _comparable(_without_arguments(names[s])) == key]
    if len(found) == 1:
        return found[0]
    if found:
        raise EntryNotFoundError(
            f"{where}: entry {entry!r} matches several kernels "
            f"({', '.join(names[s] for s in found)}: overloads or template instances); "
            f"name one instance (entry={names[found[0]]!r}), or declare the kernel "
            "extern \"C\" or give its mangled name as entry=")
    hint = ""
    if wanted is not None and wanted.arguments is not None and _demangler() is None:
        hint = (" Template instances are found by their demangled names, which needs the "
                "C++ runtime library (libstdc++ or libc++abi); give the mangled name instead.")
    raise EntryNotFoundError(
        f"{where}: no __global__ function {entry!r} in the source (its kernels: "
        f"{', '.join(names.values()) or 'none'}). Check entry= and that the function is "
        f"__global__ and not static.{hint}")


def kernel_name(symbol: str) -> str:
    """A kernel symbol's C++ name without its parameters: ``_Z4vaddPKfS0_Pfi`` -> ``vadd``,
    ``_Z11scale_tilesILi16EfEvPT0_i`` -> ``scale_tiles<16, float>``; an extern "C" name,
    or a symbol that cannot be demangled, as it is."""
    if not symbol.startswith("_Z"):
        return symbol
    text = demangle(symbol)
    if text is None:
        match = re.match(r"_ZL?(\d+)", symbol)  # free functions (L: static), without a
                                                 # demangler
        if match is None:
            return symbol
        return symbol[match.end():match.end() + int(match.group(1))]
    depth = 0
    for index, char in enumerate(text):
        if char in "<":
            depth += 1
        elif char in ">":
            depth -= 1
        elif char == "(" and depth == 0:
            text = text[:index]
            break
    if text.endswith(">") and text.startswith("void "):  # templates name their return type
        text = text[len("void "):]
    return text.strip()


def _without_arguments(name: str) -> str:
    return name.split("<", 1)[0]


def _comparable(name: str) -> str:
    """A C++ name in one spelling: no spaces, no integer suffixes (``16u``), ``unsigned``
    as ``unsigned int``, so the user's spelling meets the demangler's."""
    name = re.sub(r"\bunsigned\b(?!\s*(?:int|char|short|long)\b)", "unsigned int", name)
    name = re.sub(r"\b(\d+)(?:ull|ul|ll|u|l)\b", r"\1", name, flags=re.IGNORECASE)
    return re.sub(r"\s+", "", name)


@functools.lru_cache(maxsize=1)
def _demangler():
    """``__cxa_demangle`` from the C++ runtime library, or None where there is none."""
    import ctypes
    import ctypes.util

    for library in ("stdc++", "c++abi", "c++"):
        path = ctypes.util.find_library(library)
        if not path:
            continue
        try:
            function = ctypes.CDLL(path).__cxa_demangle
        except (OSError, AttributeError):
            continue
        function.restype = ctypes.c_void_p
        function.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p,
                             ctypes.POINTER(ctypes.c_int)]
        free = ctypes.CDLL(None).free
        free.argtypes = [ctypes.c_void_p]
        return function, free
    return None


@functools.lru_cache(maxsize=1024)
def demangle(symbol: str) -> str | None:
    """The C++ declaration a mangled symbol stands for, or None (not mangled, or no
    demangler on this system)."""
    import ctypes

    demangler = _demangler()
    if demangler is None:
        return None
    function, free = demangler
    status = ctypes.c_int()
    pointer = function(symbol.encode(), None, None, ctypes.byref(status))
    if status.value != 0 or not pointer:
        return None
    try:
        return ctypes.string_at(pointer).decode(errors="replace")
    finally:
        free(pointer)


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


@dataclass(frozen=True)
class Assembled:
    """What ``ptxas -v`` made of a PTX: its report per function, and the cubin."""

    info: dict[str, dict[str, int]]
    cubin: bytes


def ptxas_info(ptx: str, arch: str) -> dict[str, dict[str, int]] | None:
    """Assemble ``ptx`` with ``ptxas -v`` and parse what it reports (see :func:`assemble`).

    None when ptxas is not installed; a CompileError quoting ptxas when it rejects the PTX.
    """
    assembled = assemble(ptx, arch)
    return None if assembled is None else assembled.info


@functools.lru_cache(maxsize=256)
def assemble(ptx: str, arch: str) -> Assembled | None:
    """``ptx`` assembled for ``arch`` by ``ptxas -v``: its report and cubin, None without
    ptxas. Kept in memory, and inside a trusted build in the compiled-code cache, keyed by
    the PTX, the architecture and ptxas's own version, so a later process skips ptxas."""
    ptxas = find_tool("ptxas")
    if ptxas is None:
        return None
    disk = compile_cache.current()
    key = compile_cache.key("ptxas", ptxas_identity(ptxas), arch, ptx)
    cached = None if disk is None else disk.get(key)
    if cached is not None and isinstance(cached.meta.get("info"), dict):
        return Assembled(cached.meta["info"], cached.payload)
    with tempfile.TemporaryDirectory(prefix="r3-ptxas-") as folder:
        source = Path(folder) / "kernel.ptx"
        source.write_text(ptx)
        output = Path(folder) / "kernel.cubin"
        command = [ptxas, "-v", f"-arch={arch}", str(source), "-o", str(output)]
        result = subprocess.run(command, capture_output=True, text=True, timeout=300)
        if result.returncode != 0:
            message = (result.stderr or result.stdout).strip()
            raise CompileError(f"ptxas rejected the PTX for {arch}: {message[-2000:]}\n\n"
                               f"command: {shlex.join(command)}", message, command)
        assembled = Assembled(parse_ptxas_info(result.stderr + result.stdout),
                              output.read_bytes())
    if disk is not None:
        disk.put(key, assembled.cubin, {"kind": "cuda-cubin", "info": assembled.info})
    return assembled


@functools.lru_cache(maxsize=4)
def ptxas_identity(ptxas: str) -> str:
    """Which ptxas this is: its real path and what ``ptxas --version`` says (run once per
    process), so another CUDA toolkit makes every cubin entry a miss."""
    try:
        result = subprocess.run([ptxas, "--version"], capture_output=True, text=True,
                                timeout=60)
        version = result.stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        version = f"unknown ({exc})"
    return f"{os.path.realpath(ptxas)} {version}"


# -- the vendor baseline --------------------------------------------------------------------
def nvcc_ptx(source: KernelSource, macros: Mapping[str, object], arch: str,
             extra_flags: Iterable[str] = (), entry: str | None = None) -> str:
    """PTX of ``source`` built by ``nvcc -O3 -ptx`` (with CUDA's own headers; r3_cuda.h is
    then empty); a template instance named as ``entry`` is instantiated as for clang.
    Raises ToolchainError without nvcc, CompileError when nvcc fails."""
    return _nvcc(source, macros, arch, extra_flags, entry, "ptx").decode()


def nvcc_cubin(source: KernelSource, macros: Mapping[str, object], arch: str,
               extra_flags: Iterable[str] = (), entry: str | None = None) -> bytes:
    """The same build as :func:`nvcc_ptx`, assembled by nvcc into a cubin for ``arch`` (the
    driver loads it as it is, without compiling PTX)."""
    return _nvcc(source, macros, arch, extra_flags, entry, "cubin")


def _nvcc(source: KernelSource, macros: Mapping[str, object], arch: str,
          extra_flags: Iterable[str], entry: str | None, output_kind: str) -> bytes:
    nvcc = find_tool("nvcc")
    if nvcc is None:
        raise ToolchainError("nvcc is not installed (not on PATH nor under $CUDA_HOME/bin); "
                             "the vendor baseline needs the CUDA toolkit")
    name = hashlib.sha256(source.text.encode()).hexdigest()[:12]
    with tempfile.TemporaryDirectory(prefix="r3-nvcc-") as folder:
        path = Path(folder) / f"{name}.cu"
        instance = instantiation_text(entry) if entry else ""  # the same as for clang
        path.write_text(f'#line 1 "{source.filename}"\n{source.text}{instance}')
        output = Path(folder) / f"{name}.{output_kind}"
        command = [nvcc, "-O3", f"-{output_kind}", f"-arch={arch}", "-I", str(HEADER.parent),
                   "-include", str(HEADER), *(f"-I{d}" for d in source.include_dirs),
                   *macro_flags(macros), *source.define_flags, *extra_flags, str(path),
                   "-o", str(output)]
        result = subprocess.run(command, capture_output=True, text=True, timeout=600)
        if result.returncode != 0:
            message = (result.stderr or result.stdout).strip()
            raise CompileError(f"nvcc could not compile {source.filename}: {message[-2000:]}"
                               f"\n\ncommand: {shlex.join(command)}", message, command)
        return output.read_bytes()
