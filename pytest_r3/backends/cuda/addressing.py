"""Addressing array elements from the base pointer: the ``flat_addresses`` pipeline setting.

A kernel that writes ``const float *x = inp + row * C;`` and then reads ``x[i]`` in a loop
gets, from clang and LLVM, a 64-bit row pointer kept live through the loop and each address
as ``row pointer + i * 4``; nvcc addresses ``inp + (row + i) * 4`` from the parameter
itself. ptxas allocates fewer registers for nvcc's form in some kernels (llm.c's
``softmax_forward_kernel3``: 24 -> 18, nvcc's count) and more in others, so it is a setting
tuning searches, applied to the optimised IR just before code generation (LLVM's own passes
would fold it back).
"""

from __future__ import annotations

import re

# %x = getelementptr [inbounds [nuw]] T, ptr [addrspace(N)] %base, i64 %index   (one
# index, nothing after: a line with debug metadata is left as it is)
_GEP = re.compile(r"^(?P<indent>[ \t]+)(?P<name>%[\w.]+) = getelementptr "
                  r"(?P<flags>inbounds (?:nuw )?|nuw )?(?P<type>\w+), "
                  r"(?P<pointer>ptr(?: addrspace\(\d+\))?) (?P<base>%[\w.]+), "
                  r"i64 (?P<index>%[\w.]+)$", re.MULTILINE)


def flat_addresses(ir: str) -> str:
    """``ir`` with every ``gep T, (gep T, base, row), i`` rewritten as
    ``gep T, base, row + i``: the same address, from the base pointer. Only single-index
    GEPs of one element type, written on a line of their own, are rewritten."""
    rows = {match["name"]: match for match in _GEP.finditer(ir)}
    count = 0

    def rebased(match: re.Match) -> str:
        nonlocal count
        row = rows.get(match["base"])
        if row is None or (row["type"], row["pointer"]) != (match["type"], match["pointer"]):
            return match[0]
        count += 1
        # in bounds when both steps were; then the sum of the two offsets cannot overflow
        inbounds = "inbounds " if (row["flags"] or "").startswith("inbounds") \
            and (match["flags"] or "").startswith("inbounds") else ""
        offset = f"%r3.flat.{count}"
        return (f"{match['indent']}{offset} = add {'nsw ' if inbounds else ''}i64 "
                f"{row['index']}, {match['index']}\n"
                f"{match['indent']}{match['name']} = getelementptr {inbounds}{match['type']}, "
                f"{match['pointer']} {row['base']}, i64 {offset}")

    return _GEP.sub(rebased, ir)
