"""Hardware counters of the timing thread: user-mode cycles and instructions, through
perf_event_open, where the machine has a PMU and the kernel lets a process count itself.

They are opened once, before the worker is sealed (perf_event_open is not on its
allowlist; reading an open counter is a plain read). Where they cannot be opened (most
virtual machines expose no PMU; ``kernel.perf_event_paranoid`` above 2 refuses), timing
goes on without them and :attr:`Counters.reason` says why, once.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct

# perf_event_open's syscall number per machine (asm/unistd.h)
_SYSCALL = {"x86_64": 298, "aarch64": 241}
_PERF_TYPE_HARDWARE = 0
_CYCLES, _INSTRUCTIONS = 0, 1
# perf_event_attr flag bits: disabled=0, exclude_kernel=5, exclude_hv=6
_EXCLUDE_KERNEL, _EXCLUDE_HV = 1 << 5, 1 << 6
_ATTR_SIZE = 112  # PERF_ATTR_SIZE_VER5: accepted by every kernel since 4.1


def _attr(config: int) -> ctypes.Array:
    """A perf_event_attr for one hardware event counting this thread in user mode only."""
    buffer = ctypes.create_string_buffer(_ATTR_SIZE)
    # type u32, size u32, config u64, sample_period u64, sample_type u64, read_format u64,
    # then the flag bits (u64)
    struct.pack_into("IIQQQQQ", buffer, 0, _PERF_TYPE_HARDWARE, _ATTR_SIZE, config, 0, 0, 0,
                     _EXCLUDE_KERNEL | _EXCLUDE_HV)
    return buffer


class Counters:
    """Open counters of the calling thread (``available``), or the reason there are none."""

    def __init__(self) -> None:
        self.fds: list[int] = []
        self.reason = ""
        number = _SYSCALL.get(platform.machine())
        if number is None:
            self.reason = f"no hardware counters: perf_event_open not known on {platform.machine()}"
            return
        libc = ctypes.CDLL(None, use_errno=True)
        for config in (_CYCLES, _INSTRUCTIONS):
            attr = _attr(config)
            fd = libc.syscall(number, attr, 0, -1, -1, 0)  # this thread, any CPU, no group
            if fd < 0:
                error = ctypes.get_errno()
                self.close()
                self.reason = (f"no hardware counters (perf_event_open: "
                               f"{os.strerror(error)}; a virtual machine often has no PMU, "
                               "and kernel.perf_event_paranoid above 2 refuses): samples are "
                               "checked with the thread's CPU time only")
                return
            self.fds.append(fd)

    @property
    def available(self) -> bool:
        return len(self.fds) == 2

    def read(self) -> tuple[int, int]:
        """(user-mode cycles, instructions) so far; (0, 0) without counters."""
        if not self.available:
            return 0, 0
        return tuple(struct.unpack("q", os.read(fd, 8))[0] for fd in self.fds)  # type: ignore[return-value]

    def describe(self) -> str:
        return "user-mode cycles and instructions (perf_event_open)" if self.available \
            else self.reason

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []
