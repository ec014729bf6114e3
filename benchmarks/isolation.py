"""Benchmarks measure pytest-r3, not the shell they are started from.

Every script in benchmarks/ calls :func:`isolate` before anything reads the environment.
It removes from this process's environment, and so from every command the script starts:

- pytest's variables: ``PYTEST_ADDOPTS`` would add options to each pytest a benchmark
  starts, ``PYTEST_XDIST_*`` and ``PYTEST_CURRENT_TEST`` (a benchmark started from a test)
  make a child believe it runs inside another session, ``PYTEST_PLUGINS`` loads plugins;
- pytest-r3's (``PYTEST_R3_LOCK``, ``PYTEST_R3_RECORD``, ``PYTEST_R3_CUDA_EMULATION``... would
  change what is measured), except those that only say where this machine's tools and
  devices are (:data:`KEPT`);
- the benchmarks' own ``R3_BENCH_*`` (a script sets what its children need);

and points the compiled-code cache at a temporary folder, removed at exit, so that a cold
figure is cold and the user's cache (``~/.cache/pytest-r3``) is neither read nor filled.
``--real-cache`` (every benchmark accepts it) or ``R3_BENCH_REAL_CACHE=1`` keeps the
user's own cache, as their environment chooses it, instead.
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

REAL_CACHE_OPTION = "--real-cache"
REAL_CACHE_ENV = "R3_BENCH_REAL_CACHE"
CACHE_DIR_ENV = "PYTEST_R3_CACHE_DIR"
# where this machine's tools and devices are: kept, since without them nothing may run
KEPT = frozenset({"PYTEST_R3_CLANG", "PYTEST_R3_LLD", "PYTEST_R3_LIBDEVICE",
                  "PYTEST_R3_CUDA_RUNTIME", "PYTEST_R3_CUDA_DEVICE", "PYTEST_R3_HIP_DEVICE"})
# the user's choice of cache, kept with --real-cache
_CACHE_SETTINGS = ("PYTEST_R3_CACHE", CACHE_DIR_ENV, "PYTEST_R3_CACHE_SIZE")
_STRIPPED = ("PYTEST_", "R3_BENCH_")

_isolated: list[Path | None] = []  # the temporary cache folder, once isolated


def isolate(argv: Sequence[str] | None = None) -> Path | None:
    """Clean this process's environment (see the module docstring), once per process; the
    temporary cache folder, or None when the user's cache is kept. ``argv``: the script's
    arguments (``sys.argv[1:]``), read for ``--real-cache``."""
    if _isolated:
        return _isolated[0]
    arguments = sys.argv[1:] if argv is None else argv
    real = REAL_CACHE_OPTION in arguments or \
        os.environ.get(REAL_CACHE_ENV, "").strip().lower() in ("1", "true", "yes", "on")
    users_cache = {name: os.environ[name] for name in _CACHE_SETTINGS if name in os.environ}
    for name in list(os.environ):
        if name.startswith(_STRIPPED) and name not in KEPT:
            del os.environ[name]
    folder = None
    if real:
        os.environ.update(users_cache)
    else:
        folder = Path(tempfile.mkdtemp(prefix="r3-bench-cache-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        os.environ[CACHE_DIR_ENV] = str(folder)
    _isolated.append(folder)
    return folder


def add_option(parser: argparse.ArgumentParser) -> None:
    """``--real-cache`` in a benchmark's ``--help`` (:func:`isolate` has acted on it)."""
    parser.add_argument(REAL_CACHE_OPTION, action="store_true",
                        help="use your compiled-code cache ($PYTEST_R3_CACHE_DIR or "
                             "~/.cache/pytest-r3) instead of a temporary one (also "
                             f"{REAL_CACHE_ENV}=1)")


def environment(**extra: str) -> dict[str, str]:
    """The environment for a command the benchmark starts: this process's, isolated, with
    ``extra`` on top."""
    isolate()
    return {**os.environ, **extra}
