"""The contract every backend fulfils: compile, inspect, load, launch, time, copy to host."""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import Literal

from ..errors import BackendError
from ..model.pipeline import Pipeline
from ..model.signature import Signature
from ..model.source import KernelSource

REQUIRED_METHODS = ("target_name", "compile", "inspect", "load", "launch", "time", "to_host")


class Launcher(abc.ABC):
    """A loaded, ready-to-run kernel variant; calling it launches the kernel."""

    @abc.abstractmethod
    def __call__(self, *args: object) -> object: ...


class Backend(abc.ABC):
    """Turns kernel source into something runnable on one kind of device."""

    name: str = ""
    language: str = "c"
    # A GPU backend's device limits: its kernels then need ``launch=`` (grid and block), and
    # load() receives ``launch=`` (a pytest_r3.model.launch.LaunchConfig) and ``tunables=``.
    # None: kernels are plain function calls and take no launch=.
    launch_limits: object = None
    # False: the replay worker lifts its address-space cap for this backend (GPU drivers
    # reserve more virtual memory than any useful cap).
    address_space_cap: bool = True
    # The CPU time read beside a timed launch's wall time, to see that it kept its core:
    # "thread" (the timing thread's: a kernel that runs on the calling thread), "process"
    # (a kernel that runs several threads of its own) or "none" (a device times it).
    cpu_clock: Literal["thread", "process", "none"] = "thread"
    # The pipeline's code generation settings (model.pipeline.CODEGEN_CHOICES) this backend
    # honours, so tuning searches them: it emits its code inside model.pipeline.codegen().
    codegen_settings: tuple[str, ...] = ()

    @abc.abstractmethod
    def target_name(self) -> str:
        """Stable name of the device kernels run on (CPU model, GPU architecture)."""

    @abc.abstractmethod
    def compile(self, source: KernelSource, macros: Mapping[str, object]) -> str:
        """Source and macro values -> unoptimised LLVM IR text."""

    def reachable(self, module, entry: str, where: str):
        """``module`` (parsed IR) reduced to ``entry`` and what it calls, so the rest of a
        file (``main``, drivers) is never checked, loaded or run. The built-in backends do
        this; by default nothing is removed."""
        return module

    @abc.abstractmethod
    def inspect(self, source: KernelSource, entry: str, macros: Mapping[str, object],
                kernel_name: str = "") -> Signature:
        """The entry point's parameters, their dtypes and which pointers it writes
        (``kernel_name`` is for error messages)."""

    @abc.abstractmethod
    def load(self, ir: str, entry: str, signature: Signature, pipeline: Pipeline,
             kernel_name: str) -> Launcher:
        """Optimise ``ir`` with ``pipeline`` and load it, returning a launcher."""

    @abc.abstractmethod
    def launch(self, launcher: Launcher, args: Sequence[object]) -> object:
        """Run the kernel once with ``args``."""

    @abc.abstractmethod
    def time(self, launcher: Launcher, args: Sequence[object], repeat: int) -> list[float]:
        """Seconds taken by each of ``repeat`` launches (device-side timing where possible)."""

    def enter_worker(self) -> None:
        """Called in a replay worker before it loads anything and is contained: a backend
        reads now what it will need later (the worker may open no file and start no
        program once sealed)."""
        return None

    @abc.abstractmethod
    def to_host(self, value: object) -> object:
        """A host numpy copy of an argument (device arrays are copied back)."""


def check_backend(backend: object, name: str) -> None:
    """Refuse a backend object that lacks part of the contract, naming what is missing."""
    missing = [m for m in REQUIRED_METHODS if not callable(getattr(backend, m, None))]
    if isinstance(backend, Backend):
        missing += sorted(set(getattr(type(backend), "__abstractmethods__", ())) - set(missing))
    if missing:
        raise BackendError(
            f"backend {name!r} ({type(backend).__module__}.{type(backend).__qualname__}) does "
            f"not implement {', '.join(missing)}; a backend must provide "
            f"{', '.join(REQUIRED_METHODS)} (see pytest_r3.backends.base.Backend)"
        )
