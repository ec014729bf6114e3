"""The HIP backend: HIP kernels built for AMD GPUs, or run on the CPU in emulation.

It extends the CUDA backend rather than copying it. Modules by concern, each importing
only those listed before it: ``support`` (the CUDA explainer's one-line errors in HIP's
words: the HIP host API, ROCm's libraries, docs/hip.md), ``toolchain`` (targets, linking
code objects with the ziglang wheel's ld.lld, registers/LDS/occupancy from a code
object's metadata), ``runtime`` (hip-python: loading and launching code objects on an AMD
GPU, through the CUDA runtime's shared launcher), ``device`` (the device build: .hip ->
AMDGCN IR -> code object), ``emulation`` (CUDA emulation with 64-lane wavefronts) and
``selection`` (which of the two a process uses). This module registers the backend.
"""

from __future__ import annotations

from ..hookspecs import hookimpl
from .device import CodeObjectBuild, HIPBackend
from .selection import hip_backend, unavailable_reason

__all__ = ["CodeObjectBuild", "HIPBackend", "unavailable_reason"]


@hookimpl
def pytest_r3_backend_names() -> list[str]:
    return ["hip"]


@hookimpl(tryfirst=True)
def pytest_r3_make_backend(name: str):
    if name != "hip":
        return None
    return hip_backend()  # without a usable AMD GPU, kernels run on the CPU
