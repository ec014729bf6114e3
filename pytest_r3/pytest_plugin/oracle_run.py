"""Re-running a kernel's oracle tests in a child pytest, with a variant active.

The xdist controller has no test items to run (its workers ran them and are gone), so it
re-runs the oracle tests in a child ``python -m pytest -n0 <node ids>`` in the rootdir. The
parent writes a request, ``<r3-dir>/oracle-runs/<kernel>.json`` (the variant's macros and
pipeline, a source rewrite's text, the replay limits), and points the child at it with the
``PYTEST_R3_ORACLE_RUN`` environment variable. In the child, pytest-r3 does nothing but
activate that variant once the kernel is declared (a source rewrite runs in a contained
worker, :class:`~pytest_r3.replay.contained.ContainedLauncher`, never in the child itself),
run the tests and write what failed to ``<kernel>.result.json``; those failures are the
oracle failures. The child's output goes to ``<r3-dir>/logs/<kernel>.oracle-run.log``.

The child gets the ini options (``addopts`` included), ``-p`` plugins and import mode of
the parent; other command-line flags of the parent do not reach it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from ..kernel import declaration
from ..outputs import write_json_atomic, write_text_atomic

ENV = "PYTEST_R3_ORACLE_RUN"


# -- the parent: the xdist controller -------------------------------------------------------
def run_in_child(config: pytest.Config, r3_dir: Path, settings, kernel, variant, candidate,
                 test_ids: list[str], log_path: Path) -> list[str]:
    """Run ``test_ids`` in a child pytest with ``variant`` of ``kernel`` active; returns the
    failures, one line each (empty: all passed)."""
    if not test_ids:
        return ["no oracle test of this kernel ran in this session"]
    folder = r3_dir / "oracle-runs"
    request, result = folder / f"{kernel.name}.json", folder / f"{kernel.name}.result.json"
    rewrite = candidate is not None and candidate.source_text is not None
    write_json_atomic(request, {
        "kernel": kernel.name, "macros": variant.macro_dict,
        "pipeline": variant.pipeline.as_dict(), "source_text": variant.source_text,
        "candidate": candidate.as_dict() if rewrite else None,
        "replay": asdict(settings.replay), "address_space": settings.address_space,
        "log_path": str(log_path), "result": str(result)})
    result.unlink(missing_ok=True)
    command = [sys.executable, "-m", "pytest", "-n0", "--rootdir", str(config.rootpath),
               f"--import-mode={config.option.importmode}"]
    if not config.pluginmanager.is_blocked("cacheprovider"):  # keep the user's --lf cache
        command += ["-o", f"cache_dir={folder / 'cache'}"]
    if config.inipath is not None:
        command += ["-c", str(config.inipath)]
    for plugin in config.option.plugins or ():
        command += ["-p", plugin]
    completed = subprocess.run([*command, *test_ids], cwd=config.rootpath,
                               env={**os.environ, ENV: str(request)}, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, errors="replace")
    log = log_path.with_name(f"{kernel.name}.oracle-run.log")
    write_text_atomic(log, f"$ {' '.join(command)} <{len(test_ids)} test id(s)>\n"
                           f"{completed.stdout}")
    tail = " | ".join(completed.stdout.strip().splitlines()[-3:])
    try:
        outcome = json.loads(result.read_text())
    except (OSError, ValueError):
        return [f"the oracle run ended without a result (exit code {completed.returncode}; "
                f"see {log}): {tail}"]
    failures = list(outcome["failures"])
    if outcome["problem"]:
        failures.append(outcome["problem"])
    seen = set(outcome["seen"])
    missing = [t for t in test_ids if t not in seen]
    if missing:
        failures.append(f"{len(missing)} oracle test(s) did not run in the oracle run (see "
                        f"{log}): {', '.join(missing[:3])}")
    if not failures and completed.returncode not in (0, 1):
        failures.append(f"the oracle run exited with code {completed.returncode} (see {log}): "
                        f"{tail}")
    return failures


# -- the child ------------------------------------------------------------------------------
class OracleRunPlugin:
    """In the child pytest: activate the requested variant, note failures, write them."""

    def __init__(self, request_path: Path) -> None:
        self.request = json.loads(Path(request_path).read_text())
        self.name = self.request["kernel"]
        self.kernel = None
        self.launcher = None
        self.problem: str | None = None
        self.failures: list[str] = []
        self.seen: set[str] = set()
        self.launches = 0
        declaration.add_interceptor(self._count)

    def _count(self, kernel, args, proceed):
        if kernel is self.kernel:
            self.launches += 1
        return proceed()

    def _activate(self) -> None:
        if self.kernel is not None or self.problem:
            return
        kernel = declaration.registry().get(self.name)
        if kernel is None:
            return  # not declared yet: tried again before each test
        request = self.request
        try:
            variant = kernel.variant(pipeline=request["pipeline"],
                                     source_text=request["source_text"], **request["macros"])
            if request["candidate"] is not None:
                from ..replay.contained import ContainedLauncher
                from ..replay.protocol import Candidate, KernelSpec, ReplaySettings

                self.launcher = ContainedLauncher(
                    KernelSpec.from_kernel(kernel), Candidate.from_dict(request["candidate"]),
                    ReplaySettings.from_dict(request["replay"]),
                    address_space=request["address_space"], log_path=request["log_path"])
        except Exception as exc:
            self.problem = (f"the variant could not be activated in the oracle run: "
                            f"{type(exc).__name__}: {exc}")
            return
        kernel.activate(variant, self.launcher)
        self.kernel = kernel

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        self._activate()
        if self.problem:  # run nothing with a variant that is not there
            config.hook.pytest_deselected(items=list(items))
            items[:] = []

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        self._activate()

    def pytest_collectreport(self, report) -> None:
        if report.failed:
            self.failures.append(f"{report.nodeid or '<collection>'} (collection): "
                                 f"{failure_line(report)}")

    def pytest_runtest_logreport(self, report) -> None:
        self.seen.add(report.nodeid)
        if report.failed:
            self.failures.append(f"{report.nodeid} ({report.when}): {failure_line(report)}")

    def pytest_sessionfinish(self) -> None:
        if self.kernel is None and not self.problem and self.seen:
            self.problem = f"the oracle tests never declared kernel {self.name!r}"
        write_json_atomic(self.request["result"], {
            "failures": self.failures, "problem": self.problem, "seen": sorted(self.seen),
            "launches": self.launches, "activated": self.kernel is not None})

    def pytest_unconfigure(self) -> None:
        declaration.remove_interceptor(self._count)
        if self.kernel is not None:
            self.kernel.activate(None)
        if self.launcher is not None:
            self.launcher.close()


def failure_line(report) -> str:
    """One line saying why a test (or collector) failed: where, and the error's message."""
    crash = getattr(report.longrepr, "reprcrash", None)
    message = (getattr(crash, "message", "") or "").strip()
    if crash is not None and message:
        return f"{Path(crash.path).name}:{crash.lineno}: {message.splitlines()[0]}"
    return (report.longreprtext.strip().splitlines() or ["failed"])[-1]
