"""HIP kernels on the CPU: CUDA emulation (``backends/cuda/emulation``) with 64-lane
wavefronts, for machines without a usable AMD GPU.

The declared HIP kernel is compiled for the host against ``r3_hip_host.h`` (the CUDA
emulation header with ``warpSize`` 64 and 64-bit lane masks, plus HIP's own names), and
the emulation runtime is built with 64-lane warps, so shuffles, ballots and votes answer as
on an AMD GPU. Everything else (fibers, barriers, shared memory, guarded copies, atomics,
printf, race checking) is CUDA emulation's. It verifies and never times: tuning skips
emulated kernels with one line.
"""

from __future__ import annotations

import functools

from ...errors import CompileError
from ...model.pipeline import Pipeline
from .. import clang
from ..cuda.emulation import EmulatedCUDABackend
from .device import HIPBackend
from .support import HIP
from .toolchain import INCLUDE, WAVEFRONT

EMULATION_ENV = "PYTEST_R3_HIP_EMULATION"


class EmulatedHIPBackend(EmulatedCUDABackend):
    """The HIP backend, running kernels on the CPU (see the module docstring)."""

    name = "hip"
    language = "hip"
    vocabulary = HIP
    warp_size = WAVEFRONT
    host_includes = (INCLUDE / "r3_hip_host.h", INCLUDE / "hip" / "hip_runtime.h")

    def target_name(self) -> str:
        return f"hip-emulation-{clang.host_target().name.removeprefix('cpu-')}"

    @functools.cached_property
    def device(self) -> HIPBackend:  # type: ignore[override]
        """The AMD GPU backend, for what needs no GPU: the code object and its figures
        (``backend.device.compile_code_object(backend.device.compile(source, macros),
        ...)``)."""
        return HIPBackend()

    def compile_ptx(self, ir: str, entry: str, pipeline: Pipeline, kernel_name: str = ""):
        raise CompileError(f"kernel {kernel_name or entry!r} is a HIP kernel: build its code "
                           "object with backend.device.compile_code_object()", "")
