"""Static check of candidate IR before it ever runs: only allowlisted external symbols.

Candidate code (an LLM's rewrite, say) is untrusted. A kernel may call LLVM intrinsics
(NVVM ones included), libm, CUDA's libdevice (``__nv_*``) and the C memory primitives LLVM
itself emits; anything else (system, fopen, syscall, dlopen, inline assembly, calls
through computed addresses, references to external globals such as ``environ``, except a
GPU kernel's dynamic shared memory) is a sandbox violation and the candidate never runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_LIBM = {
    "sqrt", "cbrt", "hypot", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p",
    "pow", "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh",
    "asinh", "acosh", "atanh", "erf", "erfc", "tgamma", "lgamma", "fabs", "floor", "ceil",
    "trunc", "round", "lround", "llround", "rint", "lrint", "llrint", "nearbyint", "fmod",
    "remainder", "fmin", "fmax", "fdim", "fma", "copysign", "ldexp", "frexp", "modf",
    "scalbn", "ilogb", "logb", "nextafter", "sincos",
}
ALLOWED_SYMBOLS = frozenset(
    {name + suffix for name in _LIBM for suffix in ("", "f", "l")}
    | {"memcpy", "memmove", "memset", "malloc", "calloc", "free", "aligned_alloc",
       "posix_memalign", "abs", "labs", "llabs", "__errno_location"}
)


@dataclass(frozen=True)
class Violation:
    symbol: str
    function: str
    reason: str

    def describe(self) -> str:
        return f"{self.reason} in function {self.function!r}"


def _allowed(name: str) -> bool:
    # llvm.* covers the NVPTX intrinsics (llvm.nvvm.*); __nv_* is CUDA's libdevice math
    return name.startswith(("llvm.", "__nv_")) or name in ALLOWED_SYMBOLS


def check_module(module) -> list[Violation]:
    """Every use of something outside the allowlist in an llvmlite module."""
    from llvmlite.binding import ValueKind

    defined = {f.name for f in module.functions if not f.is_declaration}
    violations: list[Violation] = []
    # file-scope asm can define any symbol (even an allowlisted name such as fmaf)
    if re.search(r"^module asm ", str(module), re.MULTILINE):
        violations.append(Violation("asm", "<module>", "module-level inline assembly"))
    for variable in module.global_variables:
        # a GPU kernel's dynamic shared memory is an external array in address space 3
        if variable.is_declaration and "addrspace(3)" not in str(variable.type):
            violations.append(Violation(variable.name, "<module>",
                                        f"reference to external variable '{variable.name}'"))
    for function in module.functions:
        if function.is_declaration:
            continue
        for block in function.blocks:
            for instruction in block.instructions:
                if instruction.opcode not in ("call", "invoke", "callbr"):
                    continue
                text = str(instruction)
                if re.search(r"\basm\b", text):
                    violations.append(Violation("asm", function.name, "inline assembly"))
                    continue
                callee = list(instruction.operands)[-1]
                name = callee.name
                if callee.value_kind != ValueKind.function or not name:
                    violations.append(Violation(
                        "<indirect>", function.name,
                        "call through a computed address (function pointer)"))
                elif name not in defined and not _allowed(name):
                    violations.append(Violation(
                        name, function.name, f"call to external function '{name}'"))
    return violations


def advice(violations: list[Violation]) -> str:
    """What to tell whoever wrote the candidate (an LLM, via feedback)."""
    names = sorted({v.symbol for v in violations})
    described = list(dict.fromkeys(v.describe() for v in violations))
    return (
        f"forbidden: {'; '.join(described)}. Kernels may only call "
        "LLVM intrinsics, libm math functions (sqrtf, expf, fmaf, ...) and memcpy/memset/"
        f"malloc/free; remove {', '.join(names)} and compute the result in the kernel itself."
    )
