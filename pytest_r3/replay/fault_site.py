"""Which argument a fault below a floored buffer (or above a fenced one) belongs to, said by
the worker that faulted.

Where a guarded buffer starts at a page boundary with an inaccessible page below it (see
buffers.floored_seed), a read or write before its first element faults, as it does on an
``np.memmap`` of a raw file in production; where a fenced one ends against an inaccessible
page (buffers.GuardedBuffer), a read or write past its end faults likewise, as past a file
mapping's slice with nothing mapped above. The worker dies of it either way; this handler
(SIGSEGV and SIGBUS, installed once, reset to the default on entry) only adds which argument
the address lies beside, so the verdict says "reads before the start of x" or "reads past
the end of x" rather than "invalid memory access". A fault anywhere else returns at once and
kills the worker as before. What the handler sends is a hint from a process that runs
candidate code: it can only make the verdict on its own candidate worse, never better.
"""

from __future__ import annotations

import ctypes
import os
import platform
import signal
from collections.abc import Callable

# (first address, end address, argument name[, "after" or "read-only"]) of each
# inaccessible page range below a floored buffer of the current run (or, marked "after",
# above a fenced one; marked "read-only", a read-only input's pages); the runner sets it
# before each launch
WATCHED: list[tuple] = []

_SA_SIGINFO, _SA_RESETHAND = 0x4, 0x80000000
_SI_ADDR = 16          # offset of si_addr in Linux's siginfo_t (64-bit)
_X86_ERROR = 40 + 19 * 8  # ucontext_t.uc_mcontext.gregs[REG_ERR] on x86-64 glibc
_HANDLER = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)


class _SigAction(ctypes.Structure):  # glibc's struct sigaction on 64-bit Linux
    _fields_ = [("handler", _HANDLER), ("mask", ctypes.c_ulong * 16),
                ("flags", ctypes.c_int), ("restorer", ctypes.c_void_p)]


_installed: list = []  # the callback and its struct, kept alive


def describe(address: int, wrote: bool | None) -> str | None:
    """The hint for a fault at ``address``, or None where it lies beside no fenced or
    floored buffer."""
    for low, high, name, *where in WATCHED:
        if low <= address < high:
            verb = "reads or writes" if wrote is None else "writes" if wrote else "reads"
            if where == ["read-only"]:  # only a write faults there
                return (f"the worker died with SIGSEGV: writes to {name}, which the original "
                        "only reads (or just beside it), where its pages were mapped "
                        "read-only, as a read-only array's or np.load(..., mmap_mode='r')'s "
                        "are (it faulted there)")
            if where:
                return (f"the worker died with SIGSEGV: {verb} past the end of {name}: a "
                        "buffer may end at a page end with nothing mapped above, as a slice "
                        "of np.load(..., mmap_mode='r') can (it faulted there)")
            return (f"the worker died with SIGSEGV: {verb} before the start of {name}: a "
                    "buffer may begin at a page boundary, as np.memmap's does, with nothing "
                    "mapped below (it faulted there)")
    return None


def install(report: Callable[[str], None]) -> bool:
    """Install the handler; ``report(hint)`` sends the hint before the worker exits.
    False where it cannot be (not 64-bit Linux with glibc)."""
    if _installed or platform.system() != "Linux" or ctypes.sizeof(ctypes.c_void_p) != 8:
        return bool(_installed)
    try:
        sigaction = ctypes.CDLL(None, use_errno=True).sigaction
    except (OSError, AttributeError):
        return False
    x86 = platform.machine() in ("x86_64", "AMD64")

    def handle(number: int, info: int, context: int) -> None:
        address = ctypes.c_void_p.from_address(info + _SI_ADDR).value or 0
        wrote = bool(ctypes.c_ulong.from_address(context + _X86_ERROR).value & 2) \
            if x86 and context else None
        hint = describe(address, wrote)
        if hint is None:
            return  # the default action is back (SA_RESETHAND): the fault repeats, and kills
        try:
            report(hint)
        finally:
            os._exit(128 + signal.SIGSEGV)

    callback = _HANDLER(handle)
    action = _SigAction(callback, (ctypes.c_ulong * 16)(), _SA_SIGINFO | _SA_RESETHAND, None)
    sigaction.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    for number in (signal.SIGSEGV, signal.SIGBUS):
        if sigaction(number, ctypes.byref(action), None) != 0:
            return False
    _installed.extend([callback, action])
    return True
