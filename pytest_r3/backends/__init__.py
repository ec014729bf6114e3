"""Backend lookup through pluggy: built-in backends first, then ``pytest_r3`` entry points."""

from __future__ import annotations

import functools
import threading

import pluggy

from ..errors import BackendError
from . import hookspecs
from .base import Backend, Launcher, check_backend

__all__ = ["Backend", "Launcher", "available_backends", "forget_backend", "get_backend",
           "plugin_manager"]

BUILTIN_BACKENDS = ("pytest_r3.backends.cpu", "pytest_r3.backends.cuda",
                    "pytest_r3.backends.hip")

_lock = threading.Lock()
_instances: dict[str, object] = {}


@functools.lru_cache(maxsize=1)
def plugin_manager() -> pluggy.PluginManager:
    import importlib

    manager = pluggy.PluginManager("pytest_r3")
    manager.add_hookspecs(hookspecs)
    for module_name in BUILTIN_BACKENDS:
        manager.register(importlib.import_module(module_name), name=module_name)
    manager.load_setuptools_entrypoints("pytest_r3")
    return manager


def available_backends() -> list[str]:
    """Backend names: the built-in ones first, in BUILTIN_BACKENDS order, then plugins'."""
    names: list[str] = []
    # pluggy answers from the last registered plugin to the first
    for result in reversed(plugin_manager().hook.pytest_r3_backend_names()):
        names += [n for n in result if n not in names]
    return names


def get_backend(name: str):
    """The (shared, per-process) backend object called ``name``."""
    with _lock:
        if name in _instances:
            return _instances[name]
        try:
            backend = plugin_manager().hook.pytest_r3_make_backend(name=name)
        except TypeError as exc:
            if "abstract" not in str(exc):
                raise
            raise BackendError(
                f"backend {name!r} is incomplete: {exc}. A backend must implement every "
                "method of pytest_r3.backends.base.Backend."
            ) from exc
        if backend is None:
            raise BackendError(
                f"no backend named {name!r}; available backends: "
                f"{', '.join(available_backends())}. Third-party backends register through "
                "the 'pytest_r3' entry-point group."
            )
        check_backend(backend, name)
        _instances[name] = backend
        return backend


def forget_backend(name: str) -> None:
    """Drop the shared backend object called ``name``: the next get_backend makes it anew
    (after a setting that chooses it changed, such as CUDA emulation)."""
    with _lock:
        _instances.pop(name, None)
