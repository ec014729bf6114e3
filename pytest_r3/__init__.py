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
