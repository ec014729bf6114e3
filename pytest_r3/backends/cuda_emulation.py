"""CUDA kernels on the CPU, with CUDA semantics, for machines without a usable GPU.

The same declared CUDA kernel (``backend="cuda"``, its ``launch=``) is compiled for the host
by the same clang in C++ mode against ``r3_cuda_host.h``, which maps threadIdx, barriers,
shuffles, votes, shared memory, atomics and printf onto a small runtime
(``r3_cuda_host_runtime.c``, linked into every kernel): blocks run one after another, the
threads of a block as a plain loop, or as fibers when the kernel has barriers, shuffles or
votes. Arguments are copied into buffers with guard zones, as a GPU backend copies them to
the device, so a write out of bounds is reported with the argument it hit.

Emulation verifies (tests, recordings, candidates) and never times: ``time()`` refuses, and
tuning skips emulated kernels with one line. It is chosen when no GPU is usable, or forced
on or off with ``PYTEST_R3_CUDA_EMULATION=1``/``0`` (the ``r3_cuda_emulation`` setting).
x86-64 only: the fiber switch is written for it.
"""

from __future__ import annotations

import base64
import ctypes
import functools
import os
import platform
import re
import threading
import time
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from ..errors import (
    BackendError,
    CompileError,
    DeclarationError,
    KernelFault,
    LaunchError,
    ToolchainError,
)
from ..model.arguments import GUARD_BYTES, converters
from ..model.launch import Launch, LaunchConfig
from ..model.pipeline import Pipeline
from ..model.signature import Signature, read_signature
from ..model.source import KernelSource
from . import clang as toolchain
from . import cuda_tools
from .base import Backend, Launcher
from .cuda import CUDABackend

EMULATION_ENV = "PYTEST_R3_CUDA_EMULATION"
STACK_ENV = "PYTEST_R3_CUDA_EMULATION_STACK"
RACECHECK_ENV = "PYTEST_R3_CUDA_RACECHECK"
INCLUDE = Path(__file__).resolve().parent.parent / "include"
HEADER = INCLUDE / "r3_cuda_host.h"
SHIMS = INCLUDE / "r3_cuda_host"  # <cstdio>, <cmath>, <cassert>, <cuda_runtime.h>... as C
RUNTIME = INCLUDE / "r3_cuda_host_runtime.c"
LAUNCH_SYMBOL = "__r3_cuda_launch"
RELEASE_SYMBOL = "__r3_cuda_release"
BODY_SYMBOL = "__r3_cuda_thread_body"
SHARED_SECTION = ".r3.shared"
DEFAULT_STACK = 128 * 1024
# the kernel needs fibers only when it calls one of these (barriers, shuffles, votes; a
# trap stops its fiber alone)
_FIBER_SERVICES = re.compile(
    r"@__r3_cuda_(?:barrier|shuffle|vote|match|activemask|trap|assert_fail)\b")
_ERROR_SIZE = 1024
_RUNTIME_MARKER = "; r3-cuda-emulation-runtime"
# `extern __shared__ float buf[];` -> a pointer to the launch's dynamic shared memory
_EXTERN_SHARED = re.compile(
    r"\b(?:extern\s+__shared__|__shared__\s+extern)\s+([^;\[\]{}()]*?(?:\([^()]*\))?"
    r"[^;\[\]{}()]*?)\b(\w+)\s*\[\s*\]\s*;")
_ALIGN = re.compile(r"__align__\s*\([^()]*\)|alignas\s*\([^()]*\)")
_STATIC_SHARED = re.compile(r"\bstatic\s+__shared__\b")
_CTYPES = {
    "float32": ctypes.c_float, "float64": ctypes.c_double, "bool": ctypes.c_bool,
    **{f"int{b}": getattr(ctypes, f"c_int{b}") for b in (8, 16, 32, 64)},
    **{f"uint{b}": getattr(ctypes, f"c_uint{b}") for b in (8, 16, 32, 64)},
}
# guard bytes around every copied argument; a write into them is an out-of-bounds write
_GUARD = np.random.default_rng(0x5233).integers(0, 256, 2 * GUARD_BYTES, dtype=np.uint8)


class _LaunchStruct(ctypes.Structure):
    """``r3_launch_t`` of the runtime (keep the two in step)."""

    _fields_ = [
        ("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3),
        ("shared_bytes", ctypes.c_ulonglong), ("fibers", ctypes.c_int),
        ("stack_bytes", ctypes.c_int), ("kernel", ctypes.c_char_p),
        ("args", ctypes.POINTER(ctypes.c_void_p)), ("error", ctypes.c_char_p),
        ("error_size", ctypes.c_int), ("racecheck", ctypes.c_int),
        ("ranges", ctypes.POINTER(ctypes.c_ulonglong)),
        ("range_names", ctypes.POINTER(ctypes.c_char_p)), ("range_count", ctypes.c_int),
    ]


def requested() -> bool | None:
    """``PYTEST_R3_CUDA_EMULATION``: True (1/on), False (0/off), None (unset or auto)."""
    raw = os.environ.get(EMULATION_ENV, "").strip().lower()
    if raw in ("", "auto"):
        return None
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise BackendError(f"{EMULATION_ENV}={raw!r} is not understood; use 1 (emulate CUDA on "
                       "the CPU), 0 (never emulate) or auto (emulate when no GPU is usable)")


def selected() -> bool:
    """Whether CUDA kernels run in emulation in this process: as requested, else when no
    GPU is usable (no pycuda, no driver or no device)."""
    wanted = requested()
    if wanted is not None:
        return wanted
    from . import cuda_runtime

    return cuda_runtime.unavailable_reason() is not None


def unavailable_reason() -> str | None:
    """Why CUDA kernels can run neither on a GPU nor in emulation here, else None: the one
    place tests decide to skip CUDA runs."""
    from . import cuda_runtime

    try:
        emulate = selected()
        if emulate:
            check_host()
    except BackendError as exc:
        return str(exc)
    if emulate:
        return None
    reason = cuda_runtime.unavailable_reason()
    if reason is not None and requested() is False:
        reason += f" (and {EMULATION_ENV}=0 turns emulation off)"
    return reason


def check_host() -> None:
    machine = platform.machine().lower()
    if machine not in ("x86_64", "amd64"):
        raise BackendError(
            f"CUDA emulation runs on x86-64 only (this machine is {machine}): its fiber "
            f"switch is written for it. Run CUDA kernels on a GPU, or set {EMULATION_ENV}=0 "
            "to leave them unrun (tests that call them then fail or skip)")


def host_source(text: str) -> str:
    """The source as the host compile reads it: ``extern __shared__ T name[];`` becomes a
    pointer to the launch's dynamic shared memory (same line count, so lines still match)."""
    def dynamic(match: re.Match) -> str:
        kind = _ALIGN.sub("", match.group(1)).strip()
        return f"{kind} *const {match.group(2)} = ({kind} *)__r3_cuda_dynamic_shared();"

    text = _EXTERN_SHARED.sub(dynamic, text)
    return _STATIC_SHARED.sub("__shared__", text)


class EmulatedCUDABackend(CUDABackend):
    """The CUDA backend, running kernels on the CPU (see the module docstring)."""

    emulated = True
    address_space_cap = True  # plain host memory: the worker's cap applies
    # what the static check of candidates allows beyond C: the runtime's services, and
    # __shared__ arrays, which the runtime refills before every block (no state kept)
    sandbox_functions = frozenset({
        "__r3_cuda_state", "__r3_cuda_dynamic_shared", "__r3_cuda_barrier",
        "__r3_cuda_shuffle", "__r3_cuda_vote", "__r3_cuda_match", "__r3_cuda_activemask",
        "__r3_cuda_printf", "__r3_cuda_trap", "__r3_cuda_assert_fail"})
    sandbox_sections = frozenset({SHARED_SECTION})

    def target_name(self) -> str:
        return f"cuda-emulation-{toolchain.host_target().name.removeprefix('cpu-')}"

    def host_flags(self) -> tuple[str, ...]:
        return (*toolchain.host_target().clang_flags(), "-std=c++17", "-nostdinc++",
                "-fno-exceptions", "-fno-rtti", "-fno-threadsafe-statics",
                "-Wno-unused-command-line-argument", "-I", str(SHIMS), "-I", str(INCLUDE),
                "-include", str(HEADER))

    def compile(self, source: KernelSource, macros: Mapping[str, object],
                debug_info: bool = False) -> str:
        check_host()
        text = host_source(source.text)
        if text != source.text:
            source = source.with_text(text)
        ir = toolchain.compile_to_ir(
            source.text, filename=source.filename, macros=macros,
            target_flags=self.host_flags(), language="c++",
            include_dirs=source.include_dirs, extra_flags=source.extra_flags,
            debug_info=debug_info, untrusted=source.untrusted)
        return ir + _runtime_trailer()

    def inspect(self, source: KernelSource, entry: str, macros: Mapping[str, object],
                kernel_name: str = "") -> Signature:
        """Parameters, dtypes and written pointers, read from the host build (as the CPU
        backend reads C kernels), so nothing depends on the device compile's header."""
        where = f"kernel {kernel_name or entry!r} ({source.filename})"
        debug_ir, _ = split_runtime(self.compile(source, macros, debug_info=True), where)
        module = self.parse(debug_ir, where)
        defined = [f.name for f in module.functions if not f.is_declaration]
        symbol = cuda_tools.match_symbol(defined, entry, where)
        Pipeline().run(module, self.target_machine())
        signature = read_signature(debug_ir, symbol, module.get_function(symbol), where=where)
        if signature.return_dtype is not None:
            raise DeclarationError(f"{where}: a __global__ function returns void")
        return Signature(entry, signature.params, None)

    def parse(self, ir: str, where: str):
        toolchain.initialize_llvm()
        return toolchain.parse_ir(ir, where)

    def target_machine(self):
        import llvmlite.binding as llvm

        toolchain.initialize_llvm()
        target = toolchain.host_target()
        return llvm.Target.from_triple(target.triple).create_target_machine(
            cpu=target.cpu, features=target.features, opt=3, reloc="default",
            codemodel="jitdefault", jit=True)

    def load(self, ir: str, entry: str, signature: Signature, pipeline: Pipeline,
             kernel_name: str, launch: LaunchConfig | None = None,
             tunables: Mapping[str, object] | None = None) -> Launcher:
        import llvmlite.binding as llvm

        if launch is None:
            raise DeclarationError(f"kernel {kernel_name!r}: a CUDA kernel needs launch= "
                                   "(its grid and block); see docs/cuda.md")
        where = f"kernel {kernel_name!r}"
        ir, runtime = split_runtime(ir, where)
        prepared = pipeline.prepare_ir(ir)
        fibers = bool(_FIBER_SERVICES.search(prepared))
        racecheck = racecheck_requested()
        if racecheck:
            prepared = instrument_accesses(prepared)
        module = self.parse(prepared, where)
        defined = [f.name for f in module.functions if not f.is_declaration]
        symbol = cuda_tools.match_symbol(defined, entry, where)
        shared = _shared_variables(module)
        module.link_in(self.parse(_body_ir(module, symbol, shared), where))
        module.link_in(self.parse(runtime, f"{where}: the emulation runtime"))
        for function in module.functions:  # only the launch stays visible: the rest may go
            if not function.is_declaration \
                    and function.name not in (LAUNCH_SYMBOL, RELEASE_SYMBOL) \
                    and function.linkage == llvm.Linkage.external:
                function.linkage = llvm.Linkage.internal
        machine = self.target_machine()
        pipeline.run(module, machine)
        optimised_ir = str(module)
        engine = llvm.create_mcjit_compiler(module, machine)
        engine.finalize_object()
        address = engine.get_function_address(LAUNCH_SYMBOL)
        run = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_LaunchStruct))(address)
        release = ctypes.CFUNCTYPE(None)(engine.get_function_address(RELEASE_SYMBOL))
        ranges = [(engine.get_global_value_address(name), size, _shown_name(name))
                  for name, size in shared] if racecheck else None
        return EmulatedLauncher(engine, run, release, signature, launch, tunables or {}, self,
                                kernel_name, fibers, optimised_ir, ranges)

    def time(self, launcher: Launcher, args: Sequence[object], repeat: int) -> list[float]:
        """Host seconds per emulated launch, copies included. They measure the emulation,
        never a GPU: tuning skips emulated kernels and the replay verifies them untimed;
        only the worker's warm-up calls this."""
        return launcher.time(args, repeat)  # type: ignore[attr-defined]

    def to_host(self, value: object) -> object:
        return np.array(value, copy=True) if isinstance(value, np.ndarray) else value


def cuda_backend() -> Backend:
    """The backend called "cuda": on the GPU or emulated as PYTEST_R3_CUDA_EMULATION says,
    else chosen on first use (declaring a kernel must import neither pycuda nor llvmlite)."""
    wanted = requested()
    if wanted is None:
        return AutoCUDABackend()
    return EmulatedCUDABackend() if wanted else CUDABackend()


class AutoCUDABackend(Backend):
    """Stands for the GPU backend or the emulated one, whichever :func:`selected` picks the
    first time it is used; everything is forwarded to that one."""

    name = "cuda"
    language = "cuda"
    launch_limits = CUDABackend.launch_limits  # the same either way: no need to choose yet

    def __init__(self) -> None:
        self._chosen: Backend | None = None
        self._choosing = threading.Lock()

    @property
    def chosen(self) -> Backend:
        with self._choosing:
            if self._chosen is None:
                self._chosen = EmulatedCUDABackend() if selected() else CUDABackend()
        return self._chosen

    def __getattr__(self, name: str):  # arch, compile_ptx, emulated, sandbox rules...
        if name.startswith("__") or name in ("_chosen", "_choosing"):
            raise AttributeError(name)
        return getattr(self.chosen, name)

    @property
    def address_space_cap(self) -> bool:  # type: ignore[override]
        return self.chosen.address_space_cap

    def target_name(self) -> str:
        return self.chosen.target_name()

    def compile(self, source: KernelSource, macros: Mapping[str, object], **options) -> str:
        return self.chosen.compile(source, macros, **options)

    def inspect(self, source: KernelSource, entry: str, macros: Mapping[str, object],
                kernel_name: str = "") -> Signature:
        return self.chosen.inspect(source, entry, macros, kernel_name)

    def load(self, ir: str, entry: str, signature: Signature, pipeline: Pipeline,
             kernel_name: str, **options) -> Launcher:
        return self.chosen.load(ir, entry, signature, pipeline, kernel_name, **options)

    def launch(self, launcher: Launcher, args: Sequence[object]) -> object:
        return self.chosen.launch(launcher, args)

    def time(self, launcher: Launcher, args: Sequence[object], repeat: int) -> list[float]:
        return self.chosen.time(launcher, args, repeat)

    def to_host(self, value: object) -> object:
        return self.chosen.to_host(value)


def _shared_variables(module) -> list[tuple[str, int]]:
    """(name, bytes) of the kernel's ``__shared__`` variables, made visible to the body
    module that resets them (they are function-local statics, internal to the kernel)."""
    import llvmlite.binding as llvm

    data = llvm.create_target_data(module.data_layout)
    found = []
    for variable in module.global_variables:
        head = str(variable).split("\n", 1)[0]
        if variable.is_declaration or f'section "{SHARED_SECTION}"' not in head:
            continue
        variable.linkage = llvm.Linkage.external
        found.append((variable.name, data.get_abi_size(variable.global_value_type)))
    return found


def racecheck_requested() -> bool:
    """``PYTEST_R3_CUDA_RACECHECK=1``: check shared memory for races between barriers."""
    return os.environ.get(RACECHECK_ENV, "").strip().lower() in ("1", "true", "yes", "on")


_SCALAR_BYTES = {"i1": 1, "i8": 1, "i16": 2, "half": 2, "bfloat": 2, "i32": 4, "float": 4,
                 "i64": 8, "double": 8, "ptr": 8, "i128": 16, "fp128": 16}
_ACCESS = re.compile(r"^(\s+)(?:%[-\w.$]+ = )?(load|store) (?!atomic)(?:volatile )?(.*)$")


def _top_level_parts(text: str) -> list[str]:
    """``text`` split at the commas outside brackets (IR operands may nest)."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char in "([{<":
            depth += 1
        elif char in ")]}>":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:index].strip())
            start = index + 1
    parts.append(text[start:].strip())
    return parts


def _type_bytes(kind: str) -> int | None:
    vector = re.fullmatch(r"<(\d+) x (\w+)>", kind)
    if vector:
        element = _SCALAR_BYTES.get(vector.group(2))
        return None if element is None else int(vector.group(1)) * element
    return _SCALAR_BYTES.get(kind)


def instrument_accesses(ir: str) -> str:
    """The kernel's IR with a call to the runtime's race checker in front of every plain
    load and store (``__r3_cuda_access(address, bytes, is_write)``); the runtime keeps only
    those that touch shared memory. A debugging aid: it makes a kernel several times
    slower."""
    lines = []
    for line in ir.splitlines():
        match = _ACCESS.match(line)
        if match:
            parts = [p for p in _top_level_parts(match.group(3))
                     if not p.startswith(("align", "!"))]
            write = match.group(2) == "store"
            if len(parts) == 2 and parts[1].startswith("ptr "):
                head = parts[0] if not write else parts[0].rsplit(" ", 1)[0]
                size = _type_bytes(head.strip())
                if size:
                    lines.append(f"{match.group(1)}call void @__r3_cuda_access({parts[1]}, "
                                 f"i64 {size}, i32 {int(write)})")
        lines.append(line)
    lines.append("declare void @__r3_cuda_access(ptr, i64, i32)")
    return "\n".join(lines) + "\n"


def _shown_name(symbol: str) -> str:
    """``_ZZ12matmul_tiledE6a_tile`` -> ``a_tile`` (a function's static), else the symbol."""
    match = re.search(r"E(\d+)(\w+)$", symbol)
    if symbol.startswith("_ZZ") and match and len(match.group(2)) == int(match.group(1)):
        return match.group(2)
    return symbol


def _quoted(name: str) -> str:
    return '@"' + name.replace("\\", "\\5C").replace('"', "\\22") + '"'


def _body_ir(module, symbol: str, shared: list[tuple[str, int]]) -> str:
    """IR of ``__r3_cuda_thread_body(void **args)``, which calls the kernel with
    ``*args[i]``, and of ``__r3_cuda_reset_shared()``, which fills its shared memory with
    0xff bytes before each block (uninitialised on a GPU: NaN here, never zeros)."""
    function = module.get_function(symbol)
    lines, call_args, declared = [], [], []
    for index, arg in enumerate(function.arguments):
        kind = str(arg.type)
        extension = " ".join(a.decode() for a in arg.attributes
                             if a.decode() in ("zeroext", "signext"))
        typed = f"{kind} {extension}".strip()
        declared.append(typed)
        # invariant: the arguments never change during a launch, so the loads may leave
        # the runtime's loop over threads
        lines += [f"  %s{index} = getelementptr inbounds ptr, ptr %args, i64 {index}",
                  f"  %p{index} = load ptr, ptr %s{index}, !invariant.load !0",
                  f"  %v{index} = load {kind}, ptr %p{index}, !invariant.load !0"]
        call_args.append(f"{typed} %v{index}")
    return "\n".join([
        f'target datalayout = "{module.data_layout}"',
        f'target triple = "{module.triple}"',
        f'declare void {_quoted(symbol)}({", ".join(declared)})',
        *(f"{_quoted(name)} = external global i8" for name, _ in shared),
        "declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)",
        f"define void @{BODY_SYMBOL}(ptr %args) {{",
        *lines,
        f'  call void {_quoted(symbol)}({", ".join(call_args)})',
        "  ret void",
        "}",
        "define void @__r3_cuda_reset_shared() {",
        *(f"  call void @llvm.memset.p0.i64(ptr {_quoted(name)}, i8 -1, i64 {size}, i1 false)"
          for name, size in shared),
        "  ret void",
        "}",
        "!0 = !{}",
    ])


def split_runtime(ir: str, where: str) -> tuple[str, str]:
    """The kernel's IR and the runtime's, from what :meth:`EmulatedCUDABackend.compile`
    gave. The runtime travels with the kernel, in one comment line at the end of its IR, so
    that a replay worker (which may start no program, and may be on another machine) links
    the runtime without running clang. The static check of candidates reads the kernel's
    IR alone (comments are not IR); the runtime is ours and is never a candidate's."""
    head, marker, packed = ir.rpartition(f"\n{_RUNTIME_MARKER} ")
    if not marker or "\n" in packed.strip():
        raise CompileError(f"{where}: the IR lacks the CUDA emulation runtime; it was not "
                           "compiled by the emulated CUDA backend", "")
    return head + "\n", _unpack(packed.strip())


@functools.lru_cache(maxsize=4)
def _unpack(packed: str) -> str:
    return zlib.decompress(base64.b64decode(packed)).decode()


@functools.lru_cache(maxsize=1)
def _runtime_trailer() -> str:
    packed = base64.b64encode(zlib.compress(_runtime_ir().encode(), 9)).decode()
    return f"\n{_RUNTIME_MARKER} {packed}\n"


def _runtime_ir() -> str:
    """The runtime's IR, compiled once per process (it is ours, not the kernel's)."""
    check_host()
    try:
        text = RUNTIME.read_text()
    except OSError as exc:
        raise ToolchainError(f"the CUDA emulation runtime {RUNTIME} is missing ({exc}); "
                             "reinstall pytest-r3") from exc
    return toolchain.compile_to_ir(text, filename=str(RUNTIME),
                                   target_flags=toolchain.host_target().clang_flags(),
                                   language="c")


def _stack_bytes() -> int:
    raw = os.environ.get(STACK_ENV, "").strip()
    if not raw:
        return DEFAULT_STACK
    try:
        value = int(raw)
    except ValueError:
        raise LaunchError(f"{STACK_ENV}={raw!r} is not a number of bytes") from None
    return max(16 * 1024, min(value, 64 * 1024 * 1024)) // 4096 * 4096


class _Copies:
    """One launch's arguments: guarded host copies of the arrays, ctypes scalars."""

    def __init__(self, staging: dict[int, np.ndarray]) -> None:
        self.keep: list[object] = []
        self.copies: list[tuple[int, np.ndarray, np.ndarray, bool]] = []
        self.by_buffer: dict[tuple[int, int], np.ndarray] = {}
        # the launcher's buffers from earlier calls, reused: fresh memory costs page faults
        self.staging = staging

    def array(self, index: int, value: np.ndarray, written: bool) -> int:
        """Where the kernel's pointer to a guarded copy of ``value`` lies."""
        key = (value.__array_interface__["data"][0], value.nbytes)
        storage = self.by_buffer.get(key)
        if storage is None:
            storage = self.staging.get(index)
            if storage is None or storage.size != value.nbytes + 2 * GUARD_BYTES:
                storage = self.staging[index] = np.empty(value.nbytes + 2 * GUARD_BYTES,
                                                         np.uint8)
            storage[:GUARD_BYTES] = _GUARD[:GUARD_BYTES]
            storage[GUARD_BYTES + value.nbytes:] = _GUARD[GUARD_BYTES:]
            storage[GUARD_BYTES:GUARD_BYTES + value.nbytes] = value.reshape(-1).view(np.uint8)
            self.by_buffer[key] = storage
        self.copies.append((index, value, storage, written))
        box = ctypes.c_void_p(storage.ctypes.data + GUARD_BYTES)
        self.keep.append(box)
        return ctypes.addressof(box)

    def scalar(self, value: object, dtype: str) -> int:
        """Where the value lies (the kernel's arguments are passed by address)."""
        box = _CTYPES[dtype](value)
        self.keep.append(box)
        return ctypes.addressof(box)

    def overrun(self) -> tuple[int, str] | None:
        """(argument index, what happened) for the first argument whose guards changed."""
        for index, value, storage, _ in self.copies:
            before = storage[:GUARD_BYTES] != _GUARD[:GUARD_BYTES]
            after = storage[GUARD_BYTES + value.nbytes:] != _GUARD[GUARD_BYTES:]
            if before.any():
                return index, (f"wrote {GUARD_BYTES - int(np.argmax(before))} byte(s) before "
                               "its start")
            if after.any():
                last = len(after) - int(np.argmax(after[::-1]))
                return index, f"wrote up to {last} byte(s) past its end"
        return None

    def copy_back(self) -> None:
        for _, value, storage, written in self.copies:
            if written and value.nbytes:
                value.reshape(-1).view(np.uint8)[:] = \
                    storage[GUARD_BYTES:GUARD_BYTES + value.nbytes]


class EmulatedLauncher(Launcher):
    """A kernel variant compiled for the host: calling it runs the whole grid, then returns."""

    emulated = True

    def __init__(self, engine, run, release, signature: Signature, launch: LaunchConfig,
                 tunables: Mapping[str, object], backend: EmulatedCUDABackend,
                 kernel_name: str, fibers: bool, optimised_ir: str,
                 shared_ranges: list[tuple[int, int, str]] | None = None) -> None:
        self.engine = engine  # keeps the code alive
        self._run = run
        self._release = release
        self.signature = signature
        self.launch_config = launch
        self.tunables = dict(tunables)
        self.limits = backend.launch_limits
        self.kernel_name = kernel_name
        self.fibers = fibers
        self.optimised_ir = optimised_ir
        self.diagnostics = {"emulation": "fibers" if fibers else "loop"}
        # racecheck: the kernel's __shared__ arrays (address, bytes) and their names
        self.racecheck = shared_ranges is not None
        ranges = shared_ranges or []
        self._ranges = (ctypes.c_ulonglong * max(2 * len(ranges), 1))(
            *[number for address, size, _ in ranges for number in (address, size)])
        self._range_names = (ctypes.c_char_p * max(len(ranges), 1))(
            *[name.encode() for _, _, name in ranges])
        self._range_count = len(ranges)
        unsupported = [p.describe() for p in signature.params
                       if not p.is_pointer and p.dtype not in _CTYPES]
        if unsupported:
            raise DeclarationError(f"kernel {kernel_name!r}: scalar parameter(s) "
                                   f"{', '.join(unsupported)} cannot be passed to a CUDA "
                                   "kernel here; pass them through an array")
        self._converters = converters(kernel_name, signature, arrays_by_object=True)
        self._lock = threading.Lock()  # the runtime's state is the module's: one launch at once
        self._staging: dict[int, np.ndarray] = {}

    def configure(self, args: Sequence[object]) -> Launch:
        named = dict(zip(self.signature.names, args))
        return self.launch_config.resolve(named, self.tunables, self.limits, self.kernel_name)

    def _bind(self, args: Sequence[object]) -> tuple[_Copies, ctypes.Array]:
        if len(args) != len(self._converters):
            raise LaunchError(f"kernel {self.kernel_name!r} takes {len(self._converters)} "
                              f"argument(s) ({self.signature.describe()}), got {len(args)}")
        copies = _Copies(self._staging)
        pointers = (ctypes.c_void_p * max(len(args), 1))()
        for index, (param, convert, value) in enumerate(
                zip(self.signature.params, self._converters, args)):
            if param.is_pointer and not isinstance(value, np.ndarray) and (
                    hasattr(value, "__cuda_array_interface__") or hasattr(value, "gpudata")):
                raise LaunchError(
                    f"kernel {self.kernel_name!r} argument {index + 1} ({param.describe()}): "
                    "CUDA runs in emulation on this machine, which takes numpy arrays, not "
                    "device arrays")
            converted = convert(value)
            pointers[index] = copies.array(index, converted, param.written) \
                if param.is_pointer else copies.scalar(converted, param.dtype)
        return copies, pointers

    def __call__(self, *args: object) -> None:
        with self._lock:  # one launch at once: the staging buffers and the runtime's state
            return self._call(args)

    def _call(self, args: Sequence[object]) -> None:
        copies, pointers = self._bind(args)
        launch = self.configure(args)
        if not launch.threads:
            return None
        error = ctypes.create_string_buffer(_ERROR_SIZE)
        spec = _LaunchStruct(
            (ctypes.c_uint * 3)(*launch.grid), (ctypes.c_uint * 3)(*launch.block),
            launch.shared, int(self.fibers), _stack_bytes(), self.kernel_name.encode(),
            ctypes.cast(pointers, ctypes.POINTER(ctypes.c_void_p)),
            ctypes.cast(error, ctypes.c_char_p), _ERROR_SIZE, int(self.racecheck),
            self._ranges, self._range_names, self._range_count)
        failed = self._run(ctypes.byref(spec))
        shape = f"grid {launch.grid}, block {launch.block}"
        if failed:
            raise KernelFault(f"{error.value.decode(errors='replace')} ({shape}, emulated on "
                              "the CPU)")
        overrun = copies.overrun()
        if overrun is not None:
            index, what = overrun
            param = self.signature.params[index]
            raise KernelFault(
                f"kernel {self.kernel_name!r} ({shape}, emulated on the CPU) wrote out of "
                f"bounds: argument {index + 1} ({param.describe()}) {what}. Check the "
                "kernel's bounds tests against the sizes and the launch grid.")
        copies.copy_back()
        return None

    def __del__(self) -> None:
        """Unmap the fiber stacks before the code that owns them goes (a replay worker
        loads and drops many variants)."""
        release = getattr(self, "_release", None)
        if release is not None:
            release()
            self._release = None

    def time(self, args: Sequence[object], repeat: int) -> list[float]:
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            self(*args)
            times.append(time.perf_counter() - started)
        return times
