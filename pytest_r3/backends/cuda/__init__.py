"""The CUDA backend: CUDA C kernels built for NVIDIA GPUs, or run on the CPU in emulation.

Modules by concern, each importing only those listed before it:
``toolchain`` (NVIDIA's tools where installed: ptxas, nvcc, libdevice; kernel symbols and
template entries), ``support`` (one-line errors for the CUDA C not provided),
``gpu_timing`` (L2 flush size, peak memory bandwidth, NVML clocks), ``runtime``
with one module per binding, ``runtime_bindings`` and ``runtime_pycuda`` (loading and
launching PTX on a GPU), ``device`` (the device build: .cu -> NVPTX IR -> PTX),
``emulation_ir``, ``emulation_launch`` and ``emulation`` (kernels on the CPU with CUDA
semantics), and ``selection`` (which of the two a process uses). This module registers the
backend.
"""

from __future__ import annotations

from ..hookspecs import hookimpl
from .device import CUDABackend, PTXBuild, parse_entry, ptx_version
from .selection import cuda_backend, unavailable_reason

__all__ = ["CUDABackend", "PTXBuild", "parse_entry", "ptx_version", "unavailable_reason"]


@hookimpl
def pytest_r3_backend_names() -> list[str]:
    return ["cuda"]


@hookimpl(tryfirst=True)
def pytest_r3_make_backend(name: str):
    if name != "cuda":
        return None
    return cuda_backend()  # without a usable GPU, kernels run on the CPU
