"""The host IR of an emulated CUDA kernel (see emulation.py), as text: the source as
the host compile reads it, the runtime that travels with every kernel's IR, the generated
body that calls the kernel for one thread, and the race check's instrumentation."""

from __future__ import annotations

import base64
import functools
import re
import zlib
from pathlib import Path

from ...errors import CompileError, ToolchainError
from .. import clang

INCLUDE = Path(__file__).resolve().parent.parent.parent / "include"
HEADER = INCLUDE / "r3_cuda_host.h"
SHIMS = INCLUDE / "r3_cuda_host"  # <cstdio>, <cmath>, <cassert>, <cuda_runtime.h>... as C
RUNTIME = INCLUDE / "r3_cuda_host_runtime.c"
BODY_SYMBOL = "__r3_cuda_thread_body"
SHARED_SECTION = ".r3.shared"
RUNTIME_MARKER = "; r3-cuda-emulation-runtime"
# `extern __shared__ float buf[];` -> a pointer to the launch's dynamic shared memory
_EXTERN_SHARED = re.compile(
    r"\b(?:extern\s+__shared__|__shared__\s+extern)\s+([^;\[\]{}()]*?(?:\([^()]*\))?"
    r"[^;\[\]{}()]*?)\b(\w+)\s*\[\s*\]\s*;")
_ALIGN = re.compile(r"__align__\s*\([^()]*\)|alignas\s*\([^()]*\)")
_STATIC_SHARED = re.compile(r"\bstatic\s+__shared__\b")


def host_source(text: str) -> str:
    """The source as the host compile reads it: ``extern __shared__ T name[];`` becomes a
    pointer to the launch's dynamic shared memory (same line count, so lines still match)."""
    def dynamic(match: re.Match) -> str:
        kind = _ALIGN.sub("", match.group(1)).strip()
        return f"{kind} *const {match.group(2)} = ({kind} *)__r3_cuda_dynamic_shared();"

    text = _EXTERN_SHARED.sub(dynamic, text)
    return _STATIC_SHARED.sub("__shared__", text)


def shared_variables(module) -> list[tuple[str, int]]:
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


def shown_name(symbol: str) -> str:
    """``_ZZ12matmul_tiledE6a_tile`` -> ``a_tile`` (a function's static), else the symbol."""
    match = re.search(r"E(\d+)(\w+)$", symbol)
    if symbol.startswith("_ZZ") and match and len(match.group(2)) == int(match.group(1)):
        return match.group(2)
    return symbol


def _quoted(name: str) -> str:
    return '@"' + name.replace("\\", "\\5C").replace('"', "\\22") + '"'


def body_ir(module, symbol: str, shared: list[tuple[str, int]]) -> str:
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
    head, marker, packed = ir.rpartition(f"\n{RUNTIME_MARKER} ")
    if not marker or "\n" in packed.strip():
        raise CompileError(f"{where}: the IR lacks the CUDA emulation runtime; it was not "
                           "compiled by the emulated CUDA backend", "")
    return head + "\n", _unpack(packed.strip())


@functools.lru_cache(maxsize=4)
def _unpack(packed: str) -> str:
    return zlib.decompress(base64.b64decode(packed)).decode()


@functools.lru_cache(maxsize=2)
def runtime_trailer(warp_size: int = 32) -> str:
    packed = base64.b64encode(zlib.compress(_runtime_ir(warp_size).encode(), 9)).decode()
    return f"\n{RUNTIME_MARKER} {packed}\n"


def _runtime_ir(warp_size: int) -> str:
    """The runtime's IR for warps of ``warp_size`` lanes (32: CUDA, 64: HIP's wavefronts),
    compiled once per process (it is ours, not the kernel's)."""
    try:
        text = RUNTIME.read_text()
    except OSError as exc:
        raise ToolchainError(f"the CUDA emulation runtime {RUNTIME} is missing ({exc}); "
                             "reinstall pytest-r3") from exc
    return clang.compile_to_ir(text, filename=str(RUNTIME),
                                   target_flags=clang.host_target().clang_flags(),
                                   macros={"R3_WARP_SIZE": warp_size}, language="c")
