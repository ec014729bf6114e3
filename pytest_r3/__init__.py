"""pytest-r3: autotune the compute kernels of a codebase from inside pytest.

Declare a kernel with :func:`kernel`, test it with ordinary pytest tests marked
``@pytest.mark.r3_oracle(kernel)``, and run ``pytest --r3-tune``.
"""

from .backends.hookspecs import hookimpl
from .errors import (
    BackendError,
    CompileError,
    DeclarationError,
    EntryNotFoundError,
    LaunchError,
    R3Error,
    R3Warning,
    SourceNotFoundError,
    ToolchainError,
)
from .kernel.declaration import Kernel, Variant, kernel, registry
from .model.launch import cdiv
from .model.pipeline import Pipeline

__version__ = "0.1.0"


def _record_application() -> None:
    """``pytest-r3 record`` (PYTEST_R3_RECORD in the environment): record this program's
    launches as workloads. Unset, this is one dictionary lookup at import and nothing more
    (the name is record.application.ENV, not imported for it: that module loads numpy)."""
    import os

    if not os.environ.get("PYTEST_R3_RECORD"):
        return
    from .kernel import declaration
    from .record.application import from_environment, install
    from .replay.protocol import KernelSpec

    recorder = from_environment(os.environ, lambda k: KernelSpec.from_kernel(k).as_dict())
    install(recorder, declaration.add_interceptor, declaration.use_lock_file)


_record_application()

__all__ = [
    "BackendError",
    "CompileError",
    "DeclarationError",
    "EntryNotFoundError",
    "Kernel",
    "LaunchError",
    "Pipeline",
    "R3Error",
    "R3Warning",
    "SourceNotFoundError",
    "ToolchainError",
    "Variant",
    "__version__",
    "cdiv",
    "hookimpl",
    "kernel",
    "registry",
]
