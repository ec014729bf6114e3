"""Extension points of pytest-r3, as pluggy hook specifications.

A backend is one module with hook implementations: built-in backends are registered first,
third-party ones arrive through the ``pytest_r3`` entry-point group, e.g.::

    [project.entry-points.pytest_r3]
    opencl = "my_package.r3_opencl"
"""

from __future__ import annotations

import pluggy

hookspec = pluggy.HookspecMarker("pytest_r3")
hookimpl = pluggy.HookimplMarker("pytest_r3")


@hookspec
def pytest_r3_backend_names() -> list[str]:
    """Return the names of the backends this plugin provides (for listings and errors)."""


@hookspec(firstresult=True)
def pytest_r3_make_backend(name: str):
    """Return a backend object for the backend called ``name``, or None if not provided here.

    The object must implement :class:`pytest_r3.backends.base.Backend`; the first non-None
    answer wins, so a plugin registered later cannot silently replace a built-in backend
    unless it is asked for by its own name.
    """
