"""Whether a pointer parameter LLVM leaves unmarked is only read, its address at most
inspected: ``if (((uintptr_t)x & 15) == 0)`` picks a loop by x's alignment.

LLVM's own inference (``readonly`` on an argument) gives up at the first ``ptrtoint`` of
the pointer, so such a parameter would be taken as written: the user's launcher would
then refuse read-only arrays there, and the signature check would call a rewrite that only
tests an input's alignment a change of signature. This walk follows the optimised
function's uses of the parameter: loads, comparisons and pointers derived from it are
reads; its address converted to an integer may only reach comparisons and branches,
through integer arithmetic, unless it is first cut to its offset in a page (``x & 15``:
a peel count made from it may then index anything, since no number that small leads
another pointer to x). Anything else (a store through it or of it, a call, an
address that becomes an index or a pointer again, ``inttoptr`` or a pointer loaded from
memory anywhere in the module) leaves LLVM's answer as it was: written.
"""

from __future__ import annotations

import ctypes

# instructions whose result is the same pointer (or a pointer into the same buffer)
_DERIVED = {"getelementptr", "bitcast", "addrspacecast", "select", "phi", "freeze",
            "extractelement", "insertelement", "shufflevector"}
# integer work an inspected address may go through on its way to a comparison
_INTEGER = {"add", "sub", "mul", "and", "or", "xor", "shl", "lshr", "ashr", "udiv", "sdiv",
            "urem", "srem", "trunc", "zext", "sext", "icmp", "select", "phi", "freeze",
            "extractelement", "insertelement", "shufflevector"}
_BRANCHES = {"br", "switch"}
PAGE_BITS = 4096  # ``address & 4095`` or ``address % 4096`` at most: an offset in a page
# intrinsics that only read through a pointer argument, or ignore it
_READING_CALLS = ("llvm.masked.load.", "llvm.masked.gather.", "llvm.masked.expandload.",
                  "llvm.prefetch", "llvm.assume")


def _key(value) -> int:
    return ctypes.cast(value._as_parameter_, ctypes.c_void_p).value or 0


def _makes_pointers_from_integers(module) -> bool:
    for function in module.functions:
        for block in function.blocks:
            for instruction in block.instructions:
                if instruction.opcode == "inttoptr" or (
                        instruction.opcode == "load" and "ptr" in str(instruction.type)):
                    return True
    return False


def _uses(function) -> dict[int, list[tuple[object, int]]]:
    found: dict[int, list[tuple[object, int]]] = {}
    for block in function.blocks:
        for instruction in block.instructions:
            for index, operand in enumerate(instruction.operands):
                found.setdefault(_key(operand), []).append((instruction, index))
    return found


def only_read(function, argument) -> bool:
    """Whether ``function`` (optimised, llvmlite) only reads through ``argument``, its
    address at most compared (see the module's docstring)."""
    if _makes_pointers_from_integers(function.module):
        return False
    uses = _uses(function)
    pointers, seen = [argument], {_key(argument)}
    while pointers:
        value = pointers.pop()
        for instruction, index in uses.get(_key(value), ()):
            opcode = instruction.opcode
            if opcode in ("load", "icmp"):
                continue
            if opcode == "ptrtoint":
                if not _only_compared(instruction, uses):
                    return False
                continue
            if opcode == "call":
                callee = list(instruction.operands)[-1]
                if index == len(list(instruction.operands)) - 1 or \
                        not callee.name.startswith(_READING_CALLS):
                    return False
                continue
            if opcode not in _DERIVED:
                return False  # a store through it or of it, an atomic, a return...
            if _key(instruction) not in seen:
                seen.add(_key(instruction))
                pointers.append(instruction)
    return True


def _low_bits(instruction, index: int) -> bool:
    """Whether ``instruction`` keeps only the low bits (below a page) of its operand
    ``index``: ``address & 15``, ``address % 64``. What it gives may go anywhere (a peel
    count, an index): a number that small cannot lead another pointer to the buffer."""
    operands = list(instruction.operands)
    if instruction.opcode not in ("and", "urem") or len(operands) != 2 or \
            (instruction.opcode == "urem" and index != 0):
        return False
    other = operands[1 - index]
    if not other.is_constant or "<" in str(other.type):
        return False
    try:
        value = int(other.get_constant_value())
    except (TypeError, ValueError):
        return False
    return 0 <= value <= PAGE_BITS


def _only_compared(address, uses) -> bool:
    """Whether the integer ``address`` reaches nothing but comparisons and branches, or
    is first cut to its low bits (see _low_bits)."""
    values, seen = [address], {_key(address)}
    while values:
        value = values.pop()
        for instruction, index in uses.get(_key(value), ()):
            opcode = instruction.opcode
            if opcode in _BRANCHES:
                continue
            if _low_bits(instruction, index):
                continue  # a value below a page: the alignment, never a distance to x
            if opcode not in _INTEGER:
                return False
            if opcode == "select" and index == 0 and "ptr" in str(instruction.type):
                continue  # it picks between pointers: the address becomes none of them
            if "ptr" in str(instruction.type):
                return False
            if _key(instruction) not in seen:
                seen.add(_key(instruction))
                values.append(instruction)
    return True
