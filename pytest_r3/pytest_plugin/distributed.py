"""pytest-xdist: workers record, the controller tunes or checks once.

Under ``pytest -n N`` the tests run in worker processes and the controller collects nothing.
Each worker records as usual, saves into the shared store at the end of its session (the
store merges under a file lock) and hands the controller, through xdist's ``workeroutput``,
what it learnt: which kernels it recorded and how often they were launched, the oracle test
ids (marked and observed), which marked tests ran, where each kernel is declared, and the
``sys.path`` that made those modules importable. The controller merges the workers' answers
and, for ``--r3-tune`` and ``--r3-check``, imports the declaring modules to get the kernel
objects (their tunables and constraints are Python, not data), then tunes or checks once and
re-runs oracle tests in a child pytest (:mod:`.oracle_run`).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys

import pytest

from ..kernel import declaration

OUTPUT_KEY = "pytest_r3"  # our entry in xdist's workeroutput
USAGE_ERROR_KEY = "pytest_r3_usage_error"  # a worker's one-line usage error, if any


def role(config: pytest.Config) -> str | None:
    """``"worker"`` on an xdist worker, ``"controller"`` on the process that distributes
    tests to workers, None when tests run here (no xdist, ``-n 0``, ``--collect-only``)."""
    if hasattr(config, "workerinput"):
        return "worker"
    option = config.option
    if (getattr(option, "dist", "no") != "no" and getattr(option, "tx", None)
            and not option.collectonly):
        return "controller"
    return None


def stop_distributing(config: pytest.Config) -> None:
    """Run this session without workers (``--r3-list`` only collects: no test runs)."""
    config.option.dist = "no"
    config.option.tx = []


def declared_kernels() -> dict[str, dict]:
    """Where each kernel declared in this process comes from: ``{name: {"file", "module"}}``
    (``module`` is the name it has in ``sys.modules``, None if none has that file)."""
    modules: dict[str, str] = {}
    for module_name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if isinstance(file, str):
            modules.setdefault(os.path.realpath(file), module_name)
    found = {}
    for name, kernel in declaration.registry().items():
        file = kernel.declared_at.rsplit(":", 1)[0]
        found[name] = {"file": file, "module": modules.get(os.path.realpath(file))}
    return found


def import_kernels(names, declared: dict[str, dict], sys_path: list[str]
                   ) -> tuple[dict, dict[str, str]]:
    """The kernel objects named ``names``, declared by importing their modules here.

    A module is imported by its name in the worker (with the worker's extra ``sys.path``
    entries in front), else from its file. Returns ``(kernels, problems)``: a kernel that
    cannot be had is in ``problems`` with the reason.
    """
    present = set(sys.path)
    sys.path[:0] = [entry for entry in dict.fromkeys(sys_path) if entry not in present]
    kernels, problems = {}, {}
    for name in names:
        if name not in declaration.registry():
            where = declared.get(name)
            if where is None:
                problems[name] = "no worker said where it is declared"
                continue
            try:
                _import(name, where)
            except Exception as exc:  # the user's module: anything can happen
                problems[name] = (f"importing its declaring module {where['file']} failed: "
                                  f"{type(exc).__name__}: {exc}")
                continue
        kernel = declaration.registry().get(name)
        if kernel is None:
            problems[name] = f"importing {declared[name]['file']} did not declare it"
        else:
            kernels[name] = kernel
    return kernels, problems


def _import(name: str, where: dict) -> None:
    file, module = where["file"], where.get("module")
    if module and module not in sys.modules:
        try:
            importlib.import_module(module)
        except ImportError:
            pass
        if name in declaration.registry():
            return
    # importlib mode, a conftest, or a name that found another file: import the file itself
    alias = f"_pytest_r3_{module or 'module'}_{hashlib.sha256(file.encode()).hexdigest()[:8]}"
    spec = importlib.util.spec_from_file_location(alias, file)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {file}")
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[alias] = loaded
    try:
        spec.loader.exec_module(loaded)
    except BaseException:
        sys.modules.pop(alias, None)
        raise
