"""Which CUDA backend runs kernels in this process: the GPU's, or emulation on the CPU.

``PYTEST_R3_CUDA_EMULATION`` (the ``r3_cuda_emulation`` setting) forces one; unset, the
choice is made on first use, so that declaring a kernel imports neither a CUDA runtime nor
llvmlite. ``unavailable_reason()`` is the one place tests decide to skip CUDA runs.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence

from ...errors import BackendError
from ...model.pipeline import Pipeline
from ...model.signature import Signature
from ...model.source import KernelSource
from ..base import Backend, Launcher
from .device import CUDABackend
from .emulation import EMULATION_ENV, EmulatedCUDABackend, check_host


def requested(env: str = EMULATION_ENV) -> bool | None:
    """``PYTEST_R3_CUDA_EMULATION`` (or ``env``, HIP's): True (1/on), False (0/off), None
    (unset or auto)."""
    raw = os.environ.get(env, "").strip().lower()
    if raw in ("", "auto"):
        return None
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise BackendError(f"{env}={raw!r} is not understood; use 1 (emulate on the CPU), 0 "
                       "(never emulate) or auto (emulate when no GPU is usable)")


def selected() -> bool:
    """Whether CUDA kernels run in emulation in this process: as requested, else when no
    GPU is usable (no pycuda, no driver or no device)."""
    wanted = requested()
    if wanted is not None:
        return wanted
    from . import runtime

    return runtime.unavailable_reason() is not None


def unavailable_reason() -> str | None:
    """Why CUDA kernels can run neither on a GPU nor in emulation here, else None: the one
    place tests decide to skip CUDA runs."""
    from . import runtime

    return why_unrunnable(selected, runtime.unavailable_reason, EMULATION_ENV)


def why_unrunnable(emulated: Callable[[], bool], gpu_reason: Callable[[], str | None],
                   env: str) -> str | None:
    """Why kernels of a GPU backend (CUDA's, HIP's) can run neither on its GPU nor in
    emulation, given whether the process ``emulated``, why its GPU is not usable and the
    variable (``env``) that turns emulation on or off."""
    try:
        emulate = emulated()
        if emulate:
            check_host()
    except BackendError as exc:
        return str(exc)
    if emulate:
        return None
    reason = gpu_reason()
    if reason is not None and requested(env) is False:
        reason += f" (and {env}=0 turns emulation off)"
    return reason


def cuda_backend() -> Backend:
    """The backend called "cuda": on the GPU or emulated as PYTEST_R3_CUDA_EMULATION says,
    else chosen on first use (declaring a kernel must import neither pycuda nor llvmlite)."""
    wanted = requested()
    if wanted is None:
        return AutoCUDABackend()
    return EmulatedCUDABackend() if wanted else CUDABackend()


class AutoCUDABackend(Backend):
    """Stands for the GPU backend or the emulated one, whichever :func:`selected` picks the
    first time it is used; everything is forwarded to that one."""

    name = "cuda"
    language = "cuda"
    launch_limits = CUDABackend.launch_limits  # the same either way: no need to choose yet

    def __init__(self) -> None:
        self._chosen: Backend | None = None
        self._choosing = threading.Lock()

    @property
    def chosen(self) -> Backend:
        with self._choosing:
            if self._chosen is None:
                self._chosen = self.choose()
        return self._chosen

    def choose(self) -> Backend:
        """The backend this process uses, made on first use."""
        return EmulatedCUDABackend() if selected() else CUDABackend()

    def __getattr__(self, name: str):  # arch, compile_ptx, emulated, sandbox rules...
        if name.startswith("__") or name in ("_chosen", "_choosing"):
            raise AttributeError(name)
        return getattr(self.chosen, name)

    @property
    def address_space_cap(self) -> bool:  # type: ignore[override]
        return self.chosen.address_space_cap

    def enter_worker(self) -> None:
        self.chosen.enter_worker()

    @property
    def cpu_clock(self):  # type: ignore[override]
        return self.chosen.cpu_clock

    @property
    def codegen_settings(self) -> tuple[str, ...]:  # type: ignore[override]
        return self.chosen.codegen_settings

    def target_name(self) -> str:
        return self.chosen.target_name()

    def compile(self, source: KernelSource, macros: Mapping[str, object], **options) -> str:
        return self.chosen.compile(source, macros, **options)

    def inspect(self, source: KernelSource, entry: str, macros: Mapping[str, object],
                kernel_name: str = "") -> Signature:
        return self.chosen.inspect(source, entry, macros, kernel_name)

    def load(self, ir: str, entry: str, signature: Signature, pipeline: Pipeline,
             kernel_name: str, **options) -> Launcher:
        return self.chosen.load(ir, entry, signature, pipeline, kernel_name, **options)

    def launch(self, launcher: Launcher, args: Sequence[object]) -> object:
        return self.chosen.launch(launcher, args)

    def time(self, launcher: Launcher, args: Sequence[object], repeat: int) -> list[float]:
        return self.chosen.time(launcher, args, repeat)

    def to_host(self, value: object) -> object:
        return self.chosen.to_host(value)
