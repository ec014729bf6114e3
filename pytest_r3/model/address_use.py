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
another pointer to x). A comparison's result is one bit, not the address: it may go
anywhere (an overlap test picks a loop bound with it). The cut counts only bits of the
address below the page: ``(x >> 2) & 3`` (LLVM's form of ``(x & 15) / 4``) is one, while
``(x >> 40) & 1`` is a high bit brought down, and 64 such bits rebuild the address.
Anything else (a store through it or of it, a call, an address that becomes an index or a
pointer again, ``inttoptr`` or a pointer loaded from memory anywhere in the module) leaves
LLVM's answer as it was: written.

What this walk cannot see is control flow: ``if (x < t) r |= 1 << b`` rebuilds the
address bit by bit out of comparisons (a branch and a phi of constants, or the compared
bits themselves). The verification's second run maps such inputs read-only (see
replay/buffers.py), so a write through them faults whatever the path to the address.
"""

from __future__ import annotations

import ctypes

# instructions whose result is the same pointer (or a pointer into the same buffer)
_DERIVED = {"getelementptr", "bitcast", "addrspacecast", "select", "phi", "freeze",
            "extractelement", "insertelement", "shufflevector"}
# integer work an inspected address may go through on its way to a comparison
_INTEGER = {"add", "sub", "mul", "and", "or", "xor", "shl", "lshr", "ashr", "udiv", "sdiv",
            "urem", "srem", "trunc", "zext", "sext", "select", "phi", "freeze",
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


def _constant(value) -> int | None:
    """The integer a scalar constant operand holds, or None."""
    if not value.is_constant or "<" in str(value.type):
        return None
    try:
        return int(value.get_constant_value())
    except (TypeError, ValueError):
        return None


def _power_of_two(value: int | None) -> int | None:
    """k where ``value`` is 2**k, else None."""
    if value is None or value <= 0 or value & (value - 1):
        return None
    return value.bit_length() - 1


def _low_bits(instruction, index: int, shift: int | None) -> bool:
    """Whether ``instruction`` keeps only the low bits (below a page) of the address, its
    operand ``index`` being the address shifted right by ``shift`` bits (None: moved down
    in a way no count says, ``x % 4093``): ``address & 15``, ``address % 64``,
    ``(address >> 2) & 3``. What it gives may go anywhere (a peel count, an index): a
    number made of bits that low cannot lead another pointer to the buffer."""
    operands = list(instruction.operands)
    if shift is None or instruction.opcode not in ("and", "urem") or len(operands) != 2 or \
            (instruction.opcode == "urem" and index != 0):
        return False
    value = _constant(operands[1 - index])
    if instruction.opcode == "urem":  # by a power of two: a mask of the bits below it
        value = None if _power_of_two(value) is None else value - 1
    return value is not None and 0 <= value and value << shift <= PAGE_BITS


def _shifted(instruction, index: int, shift: int) -> int | None:
    """The right shift of the address in ``instruction``'s result, its operand ``index``
    being the address shifted by ``shift``: more after a shift or a division by a power of
    two, None after one that brings high bits down by no fixed count (a shift by the
    address, a division by anything else, a remainder of anything but a power of two)."""
    opcode, operands = instruction.opcode, list(instruction.operands)
    if opcode not in ("lshr", "ashr", "udiv", "sdiv", "urem", "srem"):
        return shift
    if index != 0 or len(operands) != 2:
        return None  # the address is the shift count or the divisor
    count = _constant(operands[1])
    if opcode in ("lshr", "ashr"):
        moved = count if count is not None and 0 <= count < 64 else None
    else:
        moved = _power_of_two(count)
    if moved is None:
        return None
    if opcode in ("urem", "srem"):
        return shift  # the bits below a power of two, and for srem the sign
    return shift + moved if shift + moved < 64 else None


def _only_compared(address, uses) -> bool:
    """Whether the integer ``address`` reaches nothing but comparisons and branches, or
    is first cut to its low bits (see _low_bits)."""
    values: list[tuple[object, int | None]] = [(address, 0)]
    seen = {(_key(address), 0)}
    while values:
        value, shift = values.pop()
        for instruction, index in uses.get(_key(value), ()):
            opcode = instruction.opcode
            if opcode in _BRANCHES or opcode == "icmp":
                continue  # a branch taken, or one bit: never the address itself
            if _low_bits(instruction, index, shift):
                continue  # a value below a page: the alignment, never a distance to x
            if opcode not in _INTEGER:
                return False
            if opcode == "select" and index == 0 and "ptr" in str(instruction.type):
                continue  # it picks between pointers: the address becomes none of them
            if "ptr" in str(instruction.type):
                return False
            state = (_key(instruction), _shifted(instruction, index, shift or 0)
                     if shift is not None else None)
            if state not in seen:
                seen.add(state)
                values.append((instruction, state[1]))
    return True
