"""The exception hierarchy: one base class to catch, and the standard types users expect."""

from __future__ import annotations

import numpy as np
import pytest

import pytest_r3 as r3


@pytest.mark.parametrize(
    ("error", "bases"),
    [
        (r3.DeclarationError, (r3.R3Error, ValueError)),
        (r3.SourceNotFoundError, (r3.DeclarationError, FileNotFoundError)),
        (r3.EntryNotFoundError, (r3.DeclarationError,)),
        (r3.ToolchainError, (r3.R3Error, RuntimeError)),
        (r3.CompileError, (r3.R3Error,)),
        (r3.LaunchError, (r3.R3Error, TypeError)),
        (r3.BackendError, (r3.R3Error,)),
        (r3.R3Warning, (UserWarning,)),
    ],
)
def test_hierarchy(error, bases):
    for base in bases:
        assert issubclass(error, base)


def test_launch_errors_are_type_errors_for_callers(axpy):
    """Code that guards a call with ``except TypeError`` keeps working."""
    x = np.zeros(2, np.float32)
    with pytest.raises(TypeError):
        axpy(2, 1.0, x)


def test_compile_error_keeps_diagnostics_and_command():
    error = r3.CompileError("clang could not compile a.c: ...", "a.c:1:1: error: x", ["clang"])
    assert error.diagnostics == "a.c:1:1: error: x"
    assert error.command == ["clang"]
    assert r3.CompileError("message").command == []
