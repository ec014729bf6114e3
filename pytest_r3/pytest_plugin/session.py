"""``--r3-tune`` and ``--r3-check``: what happens after the test run has recorded launches.

--r3-tune: for each recorded kernel, search on replay workers, confirm the best, re-run the
kernel's oracle tests with it active, and write r3.lock and the reports.
--r3-check: for each r3.lock entry of this target, re-verify and re-measure the locked
variant against the baseline (interleaved, as a ratio) and re-run its oracle tests.

Under pytest-xdist this runs on the controller only, after every worker is down: the kernel
objects come from importing their declaring modules, and oracle tests re-run in a child
pytest (:mod:`.distributed`, :mod:`.oracle_run`).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from .. import settings as options
from ..errors import CorruptStateError, R3Error, StateLockTimeout, StateWriteError
from ..kernel import declaration
from ..kernel.lock import LOCK_NAME, LockFile
from ..outputs import refuse_links
from ..replay.interrupt import stop_on_ctrl_c
from ..reports import KernelReport, RunInfo, Status, write_reports
from ..reports.run import load_average
from ..tuning.context import Tuning, TuningSettings
from .oracle_run import failure_line
from .recording import RecordingPlugin
from .table import table_lines


class TunePlugin:
    def __init__(self, config: pytest.Config, recorder: RecordingPlugin, r3_dir: Path,
                 mode: str, distributed: bool = False) -> None:
        self.config = config
        self.distributed = distributed  # on the xdist controller: no test items here
        self.recorder = recorder
        self.r3_dir = r3_dir
        self.mode = mode  # "tune" or "check"
        self.rows: list[KernelReport] = []
        self.report_paths: dict[str, Path] = {}
        self.load_at_start = load_average()
        self.failures: list[str] = []
        self.skipped_reason: str | None = None
        self.missing_lock: str | None = None  # --r3-check: why nothing was checked
        self.usage_error: str | None = None
        self.current: str | None = None  # the kernel being tuned or checked
        self.interrupted: str | None = None  # Ctrl-C stopped the run: the one line saying so
        self.unimportable: dict[str, str] = {}  # xdist controller: kernel -> why not
        self.lock_path = config.rootpath / LOCK_NAME
        self.lock_written = False  # --r3-tune: this run changed r3.lock
        wanted = str(options.value(config, "r3_kernels"))
        self.selected = {n.strip() for n in wanted.split(",") if n.strip()}
        self.settings = tuning_settings(config)  # bad settings stop pytest before any test
        try:  # a state file that is a link stops it too, and a lock that could not be
            refuse_state_links(self.lock_path, r3_dir, config.rootpath)  # merged into
            LockFile.load(self.lock_path, strict=True)
        except R3Error as exc:
            raise pytest.UsageError(f"pytest-r3: {exc}") from None
        if mode == "tune" and self.settings.llm is not None:
            from ..llm.client import LLMSetupError

            try:
                self.settings.llm.api_key()  # a missing key: said now, nothing sent
            except LLMSetupError as exc:
                raise pytest.UsageError(f"pytest-r3: {exc}") from None

    # -- pytest hooks ---------------------------------------------------------------------
    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session):
        result = yield
        if session.config.option.collectonly or options.value(session.config, "r3_list"):
            return result
        if session.testsfailed:
            self.skipped_reason = (f"{session.testsfailed} test(s) failed, so nothing was "
                                   f"{'tuned' if self.mode == 'tune' else 'checked'}: fix them "
                                   "first")
            return result
        if session.shouldstop or session.shouldfail:
            return result
        try:
            self.recorder.save()
        except R3Error as exc:  # a read-only or full disk: one line naming the path
            raise pytest.UsageError(f"pytest-r3: {exc}") from None
        if self.distributed:
            self._check_selection(set(self.recorder.declared))
            if self.usage_error:
                return result
        try:
            with stop_on_ctrl_c():  # Ctrl-C kills the workers instead of waiting for them
                if self.mode == "tune":
                    self._tune_all(session)
                else:
                    self._check_all(session)
        except KeyboardInterrupt:
            self.interrupted = self._interruption()
        except (CorruptStateError, StateWriteError, StateLockTimeout) as exc:
            raise pytest.UsageError(f"pytest-r3: {exc}") from None  # e.g. edited meanwhile
        return result

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Kernels are declared when test modules import them: check --r3-kernels now,
        before any test runs."""
        if not session.config.option.collectonly:
            self._check_selection(set(declaration.registry()))
            if self.usage_error:
                raise pytest.UsageError(self.usage_error)

    def _check_selection(self, declared: set[str]) -> None:
        unknown = self.selected - declared
        if unknown:
            self.usage_error = (f"--r3-kernels names unknown kernel(s) "
                                f"{', '.join(sorted(unknown))}; declared: "
                                f"{', '.join(sorted(declared)) or 'none'}")

    def _interruption(self) -> str:
        """The one line an interrupted run ends with."""
        doing = "tuning" if self.mode == "tune" else "checking"
        where = f" while {doing} {self.current}" if self.current else ""
        if self.mode == "check":
            return (f"pytest-r3: interrupted (Ctrl-C){where}: its replay workers were "
                    "stopped; nothing was written")
        return (f"pytest-r3: interrupted (Ctrl-C){where}: its replay workers were stopped; "
                f"what was measured is kept in {self._shown(self.r3_dir / 'results')} and "
                "the next `pytest --r3-tune` resumes from it")

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.interrupted:
            session.exitstatus = pytest.ExitCode.INTERRUPTED
        elif self.usage_error:  # under xdist, known only once the workers have collected
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
        elif self.failures and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter, exitstatus) -> None:
        stopped = (pytest.ExitCode.USAGE_ERROR, pytest.ExitCode.INTERRUPTED)
        if exitstatus in stopped and not (self.usage_error or self.rows or self.interrupted):
            return  # stopped before anything ran (a wrong entry=, a collection error, Ctrl-C
            # during the tests): pytest's own lines say why
        title = "pytest-r3 tuning" if self.mode == "tune" else "pytest-r3 check"
        terminalreporter.section(title)
        write = terminalreporter.write_line
        if self.skipped_reason or self.usage_error:
            write(self.skipped_reason or self.usage_error, red=True)
            return
        if self.interrupted and not self.rows:
            write(self.interrupted, red=True)
            return
        for line, red in table_lines(self.rows):
            write(line, red=red, bold=line.startswith("kernel "))
        if self.missing_lock:
            write(self.missing_lock, yellow=True)
        elif not self.rows and self.mode == "tune":
            write(self._nothing_to_tune(), yellow=True)
        lock = self._shown(self.lock_path)
        if self.mode == "tune" and self.lock_written:
            write(f"lock file: {lock}")
        elif self.mode == "tune" and self.rows:
            write(f"lock file: none written ({lock} "
                  + ("unchanged)" if self.lock_path.exists() else "does not exist)"))
        if self.report_paths:
            write(f"reports: {self._shown(self.report_paths['html'])}, "
                  f"{self.report_paths['md'].name}, {self.report_paths['json'].name}")
        for failure in self.failures:
            write(f"FAILED {failure}", red=True)
        if self.interrupted:
            write(self.interrupted, red=True)

    def _shown(self, path: Path) -> str:
        """``path`` relative to where pytest was started, when it lies below it."""
        try:
            return str(path.relative_to(self.config.invocation_params.dir))
        except ValueError:
            return str(path)

    def _nothing_to_tune(self) -> str:
        if not declaration.registry() and not self.recorder.declared:
            return ("no kernel to tune: none is declared. Declare one in your package, e.g. "
                    "`saxpy = r3.kernel(\"saxpy.c\", entry=\"saxpy\", tune={\"UNROLL\": "
                    "[1, 2, 4]})`, and mark a test that calls it with "
                    "`@pytest.mark.r3_oracle(saxpy)` (see README.md, Quick start)")
        return ("no kernel to tune: no oracle test launched a declared kernel in this "
                "session; mark a test that calls it with @pytest.mark.r3_oracle(kernel) "
                "(pytest --r3-list shows kernels and their oracle tests)")

    # -- shared helpers ---------------------------------------------------------------------
    def _say(self, text: str) -> None:
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        if terminal is not None:
            terminal.write_line(text)

    def _tuning(self, session: pytest.Session) -> Tuning:
        return Tuning(self.settings, self.r3_dir, self.config.rootpath, self.recorder.store,
                      self.recorder.oracle_tests,
                      lambda kernel, variant, candidate: self.run_oracle_tests(
                          session, kernel, variant, candidate),
                      say=self._say)

    def run_oracle_tests(self, session: pytest.Session, kernel, variant,
                         candidate=None) -> list[str]:
        """Re-run ``kernel``'s oracle tests in this session with ``variant`` active (in a child
        pytest on the xdist controller). A source rewrite (``candidate`` with source text)
        runs in a contained worker, never here."""
        from _pytest.runner import runtestprotocol

        if self.distributed:
            from .oracle_run import run_in_child

            return run_in_child(self.config, self.r3_dir, self.settings, kernel, variant,
                                candidate, self.recorder.oracle_tests(kernel.name),
                                self._tuning(session).log_path(kernel.name))
        wanted = set(self.recorder.oracle_tests(kernel.name))
        items = [item for item in session.items if item.nodeid in wanted]
        if not items:
            return ["no oracle test of this kernel was collected in this session"]
        launcher = None
        if candidate is not None and candidate.source_text is not None:
            from ..replay.contained import ContainedLauncher
            from ..replay.protocol import KernelSpec

            try:
                launcher = ContainedLauncher(
                    KernelSpec.from_kernel(kernel), candidate, self.settings.replay,
                    address_space=self.settings.address_space,
                    log_path=self._tuning(session).log_path(kernel.name))
            except Exception as exc:
                return [f"the rewrite could not be loaded in a contained worker: {exc}"]
        failures: list[str] = []
        self.recorder.paused = True
        kernel.activate(variant, launcher)
        try:
            for item in items:
                for report in runtestprotocol(item, log=False, nextitem=None):
                    if report.failed:
                        failures.append(f"{item.nodeid} ({report.when}): "
                                        f"{failure_line(report)}")
        finally:
            kernel.activate(None)
            self.recorder.paused = False
            if launcher is not None:
                launcher.close()
        return failures

    # -- tuning and checking ------------------------------------------------------------------
    def _tune_all(self, session: pytest.Session) -> None:
        from ..tuning.tune import tune_kernel

        tuning = self._tuning(session)
        names = [name for name in self.recorder.recorded_kernels()
                 if not self.selected or name in self.selected]
        kernels = self._declarations(names)
        before = _contents(self.lock_path)  # a kept committed entry leaves it as it was
        try:
            for name in names:
                self.current = name
                if name not in kernels:
                    self._unavailable(name)
                    continue
                emulated = getattr(kernels[name].backend, "emulated", False)  # never timed
                timed_on = "" if emulated else self._say_what_times(name)
                try:
                    row = tune_kernel(kernels[name], tuning, self.lock_path)
                except R3Error as exc:  # r3.lock unwritable, corrupt or held: one line
                    row = KernelReport(name, kernels[name].backend.target_name(),
                                       Status("FAILED", "lock not written"),
                                       notes=[str(exc)])
                row.timed_on = row.timed_on or timed_on  # said even when the baseline was kept
                if row.status.failed:
                    self.failures.append(f"{name}: {row.notes[-1]}")
                self.rows.append(row)
            self.current = None
        except KeyboardInterrupt:  # the kernels tuned before it keep their report rows
            if self.rows:
                self._write_reports("tuning", partial=True)
            raise
        finally:
            tuning.close()  # a Dask cluster started for the run stops with it
            self.lock_written = _contents(self.lock_path) != before
        if self.rows:  # nothing tuned: no empty reports over the last ones
            self._write_reports("tuning")

    def _say_what_times(self, name: str) -> str:
        """One line: the workloads candidates of ``name`` are timed on, or that there are
        none and timing uses the oracle tests' inputs; "workloads" or "test inputs"."""
        origins: dict[str, float] = {}
        for workload in self.recorder.store.workload_metadata(name).values():
            origins[workload["origin"]] = origins.get(workload["origin"], 0) + workload["weight"]
        if origins:
            self._say(f"pytest-r3: {name}: timing on workloads (weighted total): " + ", ".join(
                f"{origin} x{weight:g}" for origin, weight in sorted(origins.items())))
            return "workloads"
        self._say(f"pytest-r3: {name}: no workload recorded, so timing uses the oracle tests' "
                  "(test-sized) inputs; add a benchmark test (pytest-benchmark's `benchmark` "
                  "fixture) or @pytest.mark.r3_workload with production-sized inputs, or "
                  "record the application with `pytest-r3 record -- python app.py`")
        return "test inputs"

    def _write_reports(self, kind: str, partial: bool = False) -> None:
        """``partial``: this run covered only some kernels (--r3-kernels, or a Ctrl-C), so
        the last report's other rows are kept."""
        run = RunInfo.collect(kind, self.load_at_start, bandwidth=any(
            "work" in workload for row in self.rows for workload in row.workloads))
        try:
            self.report_paths = write_reports(self.r3_dir, self.rows, kind,
                                              partial=partial or bool(self.selected), run=run)
        except R3Error as exc:  # an unwritable --r3-dir: one line, the table still shows
            self.failures.append(f"reports not written: {exc}")

    def _check_all(self, session: pytest.Session) -> None:
        from ..tuning.check import check_kernel

        tuning = self._tuning(session)
        if not self.lock_path.is_file():
            self.missing_lock = (f"no lock file at {self._shown(self.lock_path)}: nothing to "
                                 "check; run "
                                 "`pytest --r3-tune` first and commit r3.lock")
            if options.value(self.config, "r3_require_lock"):
                self.failures.append(self.missing_lock)
            return
        try:
            lock = LockFile.load(self.lock_path)
        except R3Error as exc:  # corrupt: one line, and the check fails
            self.failures.append(str(exc))
            return
        entries = [(name, target, entry) for name, target, entry in lock.entries()
                   if not self.selected or name in self.selected]
        registry = self._declarations(sorted({name for name, _, _ in entries}))
        targets = {}
        exercised = set(self.recorder.recorded_kernels())
        for name, target, entry in entries:
            self.current = name
            kernel = registry.get(name)
            if kernel is None:
                if name in self.recorder.declared:  # a worker declared it, this cannot
                    self._unavailable(name)
                continue
            own_target = targets.setdefault(kernel.backend_name, kernel.backend.target_name())
            if target != own_target:
                continue
            row = check_kernel(kernel, target, entry, tuning, name in exercised)
            if row.status.failed:
                self.failures.append(f"{name}: {row.notes[-1]}")
            self.rows.append(row)
        self.current = None
        if not self.rows:
            self.missing_lock = self._nothing_to_check(entries, targets)
            if options.value(self.config, "r3_require_lock"):
                self.failures.append(self.missing_lock)
            return
        self._write_reports("check")

    def _nothing_to_check(self, entries: list[tuple], targets: dict[str, str]) -> str:
        """Why no entry of r3.lock was checked: made on other machines (``targets``: this
        machine's, of the declared kernels that have entries), or for kernels not declared
        here (renamed or removed since they were tuned)."""
        lock = self._shown(self.lock_path)
        if targets:
            return (f"{lock} has no entry for this machine's target(s) "
                    f"{', '.join(sorted(set(targets.values())))}: nothing to check; run "
                    "`pytest --r3-tune` on this machine")
        declared = sorted(set(declaration.registry()) | set(self.recorder.declared))
        wanted = [name for name in declared if not self.selected or name in self.selected]
        said = f"{lock} has no entry for the kernels declared here ({', '.join(wanted)})" \
            if wanted else f"no kernel is declared here to check against {lock}"
        others = sorted({name for name, _, _ in entries} - set(declared))
        if others:
            said += f"; its entries name {', '.join(others)}, which no collected test declares"
        return f"{said}: nothing to check; run `pytest --r3-tune` first and commit r3.lock"

    def _declarations(self, names: list[str]) -> dict:
        """The kernel objects named ``names`` that are declared here (on the xdist controller:
        imported from the modules the workers declared them in; see _unavailable)."""
        if not self.distributed:
            registry = declaration.registry()
            return {name: registry[name] for name in names if name in registry}
        from .distributed import import_kernels

        kernels, self.unimportable = import_kernels(names, self.recorder.declared,
                                                    self.recorder.worker_sys_path)
        return kernels

    def _unavailable(self, name: str) -> None:
        why = self.unimportable.get(name, "it is not declared here")
        row = KernelReport(name, "-", Status("FAILED", "not importable"))
        row.notes.append(f"the xdist controller cannot get the kernel object: {why}")
        self.failures.append(f"{name}: {row.notes[-1]}")
        self.rows.append(row)


def _contents(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def refuse_state_links(lock_path: Path, r3_dir: Path, root: Path) -> None:
    """A StateWriteError now, before any test, for a symbolic link where a run would write:
    r3.lock, the state folder, or anything directly in it (writes refuse them too)."""
    refuse_links(lock_path)
    refuse_links(r3_dir, root)
    if r3_dir.is_dir():
        for entry in os.scandir(r3_dir):
            refuse_links(entry.path)


def tuning_settings(config: pytest.Config) -> TuningSettings:
    """Every --r3-tune/--r3-check setting, checked now: a bad value is a usage error before
    any test runs."""
    from ..replay.protocol import ReplaySettings
    from ..search.tuner import Budget, BudgetError

    value = lambda name: options.value(config, name)  # noqa: E731
    try:
        budget = Budget.parse(value("r3_budget"))
    except BudgetError as exc:
        raise pytest.UsageError(f"--r3-budget: {exc}") from None
    dask = str(value("r3_dask")).strip()
    if dask:
        from ..replay.dask_pool import DaskAddressError, parse_address

        try:
            parse_address(dask)
        except DaskAddressError as exc:
            raise pytest.UsageError(str(exc)) from None
        if importlib.util.find_spec("distributed") is None:
            raise pytest.UsageError(f"--r3-dask {dask}: needs the 'distributed' package: "
                                    "pip install 'pytest-r3[dask]'")
    try:
        replay = ReplaySettings(run_timeout=float(value("r3_run_timeout")),
                                compile_timeout=float(value("r3_compile_timeout")),
                                seed=int(value("r3_seed")))
        return TuningSettings(
            budget=budget, workers=int(value("r3_workers")) or os.cpu_count() or 1,
            optimizer=str(value("r3_optimizer")), seed=int(value("r3_seed")),
            search_pipeline=bool(value("r3_search_pipeline")), replay=replay,
            address_space=int(float(value("r3_memory_limit")) * 2**20),
            **check_thresholds(str(value("r3_check_threshold"))),
            retune=bool(value("r3_retune")), dask=dask,
            llm=_llm_settings(value), evolution=_evolution_settings(value))
    except (TypeError, ValueError) as exc:
        raise pytest.UsageError(f"pytest-r3 settings: {exc}") from None


def check_thresholds(text: str) -> dict:
    """``--r3-check-threshold``: a percent (``5``, the default rule) or pytest-benchmark's
    ``--benchmark-compare-fail`` expressions (``median:5%``, ``mean:0.001``), parsed by
    pytest-benchmark itself; TuningSettings' check_threshold and check_fail."""
    from pytest_benchmark.utils import parse_compare_fail

    parts = [part.strip() for part in text.split(",") if part.strip()]
    if len(parts) == 1:
        try:
            return {"check_threshold": float(parts[0].rstrip("%")) / 100}
        except ValueError:
            pass
    checks = []
    for part in parts:
        try:
            checks.append(parse_compare_fail(part))
        except Exception:  # argparse.ArgumentTypeError
            raise pytest.UsageError(
                f"--r3-check-threshold: {part!r} is not a threshold; give a percent (5) or "
                "FIELD:N% / FIELD:SECONDS with FIELD one of min, max, mean, median, stddev, "
                "iqr (pytest-benchmark's --benchmark-compare-fail syntax, e.g. median:5%)"
            ) from None
    if not checks:
        raise pytest.UsageError("--r3-check-threshold is empty; give e.g. 5 or median:5%")
    return {"check_fail": tuple(checks)}


def _llm_settings(value):
    model = str(value("r3_llm_model")).strip()
    if not model:
        return None
    from ..llm.client import LLMSettings

    return LLMSettings(
        model=model, base_url=str(value("r3_llm_base_url")).strip() or None,
        api_key_env=str(value("r3_llm_api_key_env")),
        temperature=_temperature(value("r3_llm_temperature")),
        max_answer_tokens=int(value("r3_llm_max_answer_tokens")) or None,
        timeout=float(value("r3_llm_timeout")),
        concurrency=int(value("r3_llm_concurrency")),
        max_requests=int(value("r3_llm_max_requests")),
        max_tokens=int(value("r3_llm_max_tokens")),
        max_seconds=float(value("r3_llm_max_seconds")))


def _temperature(text: object) -> float | None:
    cleaned = str(text).strip().lower()
    return None if cleaned in ("", "none") else float(cleaned)


def _evolution_settings(value):
    if not str(value("r3_llm_model")).strip():
        return None
    from ..llm.evolution import EvolutionSettings

    number = lambda name: int(value(name))  # noqa: E731
    return EvolutionSettings(
        generations=number("r3_llm_generations"), islands=number("r3_llm_islands"),
        children=number("r3_llm_children"), repairs=number("r3_llm_repairs"),
        inner_budget=number("r3_llm_inner_budget"), examples=number("r3_llm_examples"),
        seed=number("r3_seed"))
