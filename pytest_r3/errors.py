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


class Interrupted(KeyboardInterrupt):
    """A wait on a replay worker ended because the run is stopping (Ctrl-C): what the worker
    was doing is no result and must not be stored as one (see replay/interrupt.py)."""


class R3Warning(UserWarning):
    """Base class of pytest-r3 warnings."""


class StateWriteError(R3Error, OSError):
    """pytest-r3 could not write its state (read-only folder, full disk, no permission).

    One line naming the path and what to do; ``path`` and ``reason`` hold the parts.
    """

    def __init__(self, path, reason: str, hint: str = "") -> None:
        super().__init__(f"cannot write {path}: {reason}" + (f"; {hint}" if hint else ""))
        self.path = path
        self.reason = reason
        self.hint = hint

    def __reduce__(self):
        return type(self), (self.path, self.reason, self.hint)


class StateLockTimeout(R3Error, TimeoutError):
    """Another run held the lock on a state file for too long."""

    def __init__(self, path, timeout: float, holder: str = "") -> None:
        who = f"process {holder}" if holder else "another process"
        super().__init__(f"waited {timeout:g} s for {who} to finish editing {path}; is "
                         "another pytest-r3 run still going? Try again when it has ended")
        self.path = path
        self.timeout = timeout
        self.holder = holder

    def __reduce__(self):
        return type(self), (self.path, self.timeout, self.holder)


class CorruptStateError(R3Error, ValueError):
    """A state file (r3.lock, a kernel spec...) is unreadable or not what it should be."""

    def __init__(self, path, problem: str, fix: str = "") -> None:
        super().__init__(f"{path}: {problem}" + (f"; {fix}" if fix else ""))
        self.path = path
        self.problem = problem
        self.fix = fix

    def __reduce__(self):
        return type(self), (self.path, self.problem, self.fix)


class CorruptStateWarning(R3Warning):
    """A state file was unreadable and was ignored (the baseline, or the other files, used)."""
