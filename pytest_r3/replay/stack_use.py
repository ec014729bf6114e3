"""How much stack a kernel's frames take, read from its IR: part of the static check.

A rewrite that packs an input into a stack array sized by the arguments (a VLA,
``__builtin_alloca(n * n * 8)``) is exact and fast on every size verification draws, and
kills the user's process at an ordinary larger one: an 8 MiB main-thread stack holds a
1024 x 1024 double matrix's copy no more than a 1 MiB thread stack holds a 384 x 384 one.
The worker's threads get the same 8 MiB as its main thread (glibc sizes a new thread's
stack by RLIMIT_STACK), so no replayed size below that shows it. So the check refuses, in
a candidate whose baseline has none of the kind:

- a stack allocation whose size is not a constant (the arguments set it);
- constant stack allocations of more than FRAME_LIMIT bytes in one function (a thread
  made with a small stack, musl's 128 KiB default or ``threading.stack_size``, faults
  where the worker's 8 MiB do not).

Reads clang's IR before optimisation, where every local is an ``alloca``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FRAME_LIMIT = 64 << 10  # bytes of fixed stack arrays a function may hold

_ALLOCA = re.compile(r"=\s*alloca\s+(?:inalloca\s+)?(.+?)(?:,\s*(i\d+)\s+(%[-\w.$]+|-?\d+))?"
                     r"(?:,\s*align\s+\d+)?(?:,\s*addrspace\(\d+\))?\s*$")
_NAMED_TYPE = re.compile(r"^(%[-\w.$]+|%\"[^\"]*\")\s*=\s*type\s+(.*)$", re.MULTILINE)
_SCALARS = {"half": 2, "bfloat": 2, "float": 4, "double": 8, "fp128": 16, "x86_fp80": 16,
            "ppc_fp128": 16, "ptr": 8, "void": 0}


@dataclass(frozen=True)
class StackUse:
    """The most fixed stack bytes any one function allocates, and whether any allocation's
    size is set at run time."""

    fixed: int = 0
    dynamic: bool = False


def of(module) -> StackUse:
    """The stack use of every defined function of an llvmlite module."""
    named = {name: body for name, body in _NAMED_TYPE.findall(str(module))}
    fixed, dynamic = 0, False
    for function in module.functions:
        if function.is_declaration:
            continue
        total = 0
        for block in function.blocks:
            for instruction in block.instructions:
                if instruction.opcode != "alloca":
                    continue
                bytes_, constant = allocation(str(instruction).strip(), named)
                dynamic |= not constant
                total += bytes_
        fixed = max(fixed, total)
    return StackUse(fixed, dynamic)


def allocation(text: str, named: dict[str, str]) -> tuple[int, bool]:
    """(bytes, whether the count is a constant) of one ``alloca`` instruction's text."""
    match = _ALLOCA.search(text)
    if match is None:
        return 0, True  # a form not understood: taken as sized at run time
    kind, count = match.group(1), match.group(3)
    if count is not None and not re.fullmatch(r"-?\d+", count):
        return 0, False
    return size_of(kind, named) * (int(count) if count is not None else 1), True


def size_of(kind: str, named: dict[str, str], depth: int = 0) -> int:
    """Bytes of an IR type written as text (an upper bound for packed structs: fields are
    added, not aligned, which only matters for limits near FRAME_LIMIT)."""
    kind = kind.strip()
    if depth > 32:
        return 0
    if kind in _SCALARS:
        return _SCALARS[kind]
    if re.fullmatch(r"i\d+", kind):
        return (int(kind[1:]) + 7) // 8
    if kind.startswith("ptr") and re.fullmatch(r"ptr(\s+addrspace\(\d+\))?", kind):
        return 8
    array = re.fullmatch(r"[\[<]\s*(\d+)\s+x\s+(.*)[\]>]", kind)
    if array:
        return int(array.group(1)) * size_of(array.group(2), named, depth + 1)
    struct = re.fullmatch(r"<?\{(.*)\}>?", kind)
    if struct:
        return sum(size_of(field, named, depth + 1) for field in _fields(struct.group(1)))
    if kind in named:
        body = named[kind]
        return 0 if body.strip() == "opaque" else size_of(body, named, depth + 1)
    return 0


def _fields(body: str) -> list[str]:
    """The top-level comma-separated types of a struct body."""
    fields, depth, start = [], 0, 0
    for index, char in enumerate(body):
        if char in "[<{(":
            depth += 1
        elif char in "]>})":
            depth -= 1
        elif char == "," and depth == 0:
            fields.append(body[start:index])
            start = index + 1
    if body[start:].strip():
        fields.append(body[start:])
    return fields


def violations(use: StackUse, baseline: StackUse) -> list[tuple[str, str]]:
    """(symbol, reason) for each way ``use`` exceeds what its ``baseline`` does."""
    found = []
    if use.dynamic and not baseline.dynamic:
        found.append(("alloca", "a stack allocation whose size the arguments set (a "
                      "variable-length array or alloca(n)): at a size above those verified "
                      "it overflows the caller's stack and kills the process; the baseline "
                      "has none"))
    if use.fixed > max(FRAME_LIMIT, baseline.fixed):
        found.append(("alloca", f"{use.fixed} bytes of stack arrays in one function, more "
                      f"than {FRAME_LIMIT >> 10} KiB (a thread with a small stack, such as "
                      "musl's 128 KiB default, faults there); the baseline uses "
                      f"{baseline.fixed}"))
    return found
