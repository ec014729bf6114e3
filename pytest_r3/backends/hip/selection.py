"""Which HIP backend runs kernels in this process: the AMD GPU's, or emulation on the CPU.

``PYTEST_R3_HIP_EMULATION`` forces one (1 or 0); unset or ``auto``, emulation is chosen on
first use when no AMD GPU is usable, so that declaring a kernel imports neither
hip-python nor llvmlite. The same rules as CUDA's (``backends/cuda/selection``).
"""

from __future__ import annotations

from ..base import Backend
from ..cuda.selection import AutoCUDABackend, requested, why_unrunnable
from .device import HIPBackend
from .emulation import EMULATION_ENV, EmulatedHIPBackend


def selected() -> bool:
    """Whether HIP kernels run in emulation in this process: as requested, else when no AMD
    GPU is usable (no hip-python, no driver or no device)."""
    wanted = requested(EMULATION_ENV)
    if wanted is not None:
        return wanted
    from . import runtime

    return runtime.unavailable_reason() is not None


def unavailable_reason() -> str | None:
    """Why HIP kernels can run neither on an AMD GPU nor in emulation here, else None: the
    one place tests decide to skip HIP runs."""
    from . import runtime

    return why_unrunnable(selected, runtime.unavailable_reason, EMULATION_ENV)


def hip_backend() -> Backend:
    """The backend called "hip": on the GPU or emulated as PYTEST_R3_HIP_EMULATION says,
    else chosen on first use."""
    wanted = requested(EMULATION_ENV)
    if wanted is None:
        return AutoHIPBackend()
    return EmulatedHIPBackend() if wanted else HIPBackend()


class AutoHIPBackend(AutoCUDABackend):
    """Stands for the AMD GPU backend or the emulated one, whichever :func:`selected`
    picks the first time it is used."""

    name = "hip"
    language = "hip"

    def choose(self) -> Backend:
        return EmulatedHIPBackend() if selected() else HIPBackend()
