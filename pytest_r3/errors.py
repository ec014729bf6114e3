"""Every exception and warning pytest-r3 raises, in one place.

Each error names the specific thing at fault (kernel, argument, file and line) and says how
to fix it, so a user can act on the message alone.
"""

from __future__ import annotations


class R3Error(Exception):
    """Base class of all pytest-r3 errors."""


class DeclarationError(R3Error, ValueError):
    """A kernel declaration is invalid (bad tunables, constraints, entry, source...)."""


class SourceNotFoundError(DeclarationError, FileNotFoundError):
    """The kernel's source file does not exist."""


class ToolchainError(R3Error, RuntimeError):
    """clang cannot be found, or is the wrong version for llvmlite."""


class CompileError(R3Error):
    """clang rejected the kernel source; ``diagnostics`` holds its message verbatim."""

    def __init__(self, message: str, diagnostics: str = "", command: list[str] | None = None,
                 kind: str = "compile_error"):
        super().__init__(message)
        self.diagnostics = diagnostics
        self.command = command or []
        self.kind = kind  # "forbidden_include" when a rewrite reached for another file


class EntryNotFoundError(DeclarationError):
    """The declared entry symbol is not defined by the compiled source."""


class LaunchError(R3Error, TypeError):
    """A kernel was called with arguments that do not match its signature."""


class BackendError(R3Error):
    """No backend of that name, or a backend that does not fulfil the contract."""


class MissingExtraError(R3Error, ImportError):
    """An optional dependency is not installed; the message names the pip extra."""


class KernelFault(R3Error, RuntimeError):
    """A kernel failed on the device (illegal address, trap...); its context is unusable."""


class R3Warning(UserWarning):
    """Base class of pytest-r3 warnings."""
