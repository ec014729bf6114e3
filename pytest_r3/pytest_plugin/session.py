"""``--r3-tune`` and ``--r3-check``: what happens after the test run has recorded launches.

--r3-tune: for each recorded kernel, search on replay workers, confirm the best, re-run the
kernel's oracle tests with it active, and write r3.lock and the reports.
--r3-check: for each r3.lock entry of this target, re-verify and re-measure the locked
variant against the baseline (interleaved, as a ratio) and re-run its oracle tests.
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path

import pytest

from .. import __version__
from .. import settings as options
from ..kernel import declaration
from ..kernel.lock import LOCK_NAME, LockFile, features_hash, variant_from_entry
from ..reports import KernelReport, write_reports
from .recording import RecordingPlugin


class TunePlugin:
    def __init__(self, config: pytest.Config, recorder: RecordingPlugin, r3_dir: Path,
                 mode: str) -> None:
        self.config = config
        self.recorder = recorder
        self.r3_dir = r3_dir
        self.mode = mode  # "tune" or "check"
        self.rows: list[KernelReport] = []
        self.failures: list[str] = []
        self.skipped_reason: str | None = None
        self._said_no_llm = False
        self.lock_path = config.rootpath / LOCK_NAME
        wanted = str(options.value(config, "r3_kernels"))
        self.selected = {n.strip() for n in wanted.split(",") if n.strip()}

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
        self.recorder.save()
        if self.mode == "tune":
            self._tune_all(session)
        else:
            self._check_all(session)
        return result

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.failures and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter) -> None:
        title = "pytest-r3 tuning" if self.mode == "tune" else "pytest-r3 check"
        terminalreporter.section(title)
        write = terminalreporter.write_line
        if self.skipped_reason:
            write(self.skipped_reason, red=True)
            return
        if not self.rows:
            write("no kernel to " + self.mode + (" (no lock entry for this target)"
                                                 if self.mode == "check" else ""))
        header = (f"{'kernel':<16} {'status':<22} {'baseline':>12} {'tuned':>12} "
                  f"{'speedup (IQR)':>22} {'evals':>11}  changes")
        if self.rows:
            write(header, bold=True)
        for row in self.rows:
            speedup = "-" if row.speedup is None else (
                f"{row.speedup:.2f}x ({row.speedup_q1:.2f}-{row.speedup_q3:.2f})")
            write(f"{row.kernel:<16} {row.status:<22} {_us(row.baseline_seconds):>12} "
                  f"{_us(row.tuned_seconds):>12} {speedup:>22} "
                  f"{row.evaluations:>5} ({row.new_evaluations:>3})  {row.describe_changes()}",
                  red=row.status.startswith("FAIL"))
            for note in row.notes:
                write(f"    {note}")
        if self.mode == "tune" and self.rows:
            write(f"lock file: {self.lock_path}")
            write(f"reports: {self.r3_dir / 'report.md'}, report.json, report.html")
        for failure in self.failures:
            write(f"FAILED {failure}", red=True)

    # -- shared helpers ---------------------------------------------------------------------
    def _say(self, text: str) -> None:
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        if terminal is not None:
            terminal.write_line(text)

    def _kernels(self) -> list[str]:
        names = sorted(self.recorder.kernels)
        unknown = self.selected - set(declaration.registry())
        if unknown:
            raise pytest.UsageError(
                f"--r3-kernels names unknown kernel(s) {', '.join(sorted(unknown))}; declared: "
                f"{', '.join(sorted(declaration.registry())) or 'none'}")
        return [n for n in names if not self.selected or n in self.selected]

    def _settings(self, **overrides):
        from ..replay import ReplaySettings

        return ReplaySettings(run_timeout=float(options.value(self.config, "r3_run_timeout")),
                              compile_timeout=float(options.value(self.config,
                                                                  "r3_compile_timeout")),
                              seed=int(options.value(self.config, "r3_seed")), **overrides)

    def _address_space(self) -> int:
        return int(float(options.value(self.config, "r3_memory_limit")) * 2**20)

    def _log_path(self, kernel) -> Path:
        logs = self.r3_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        return logs / f"{kernel.name}.log"

    def _server(self, kernel, settings, reference=None):
        from ..replay import KernelSpec, ReplayServer

        return ReplayServer(
            KernelSpec.from_kernel(kernel), self.recorder.store.root,
            self.recorder.store.keys(kernel.name), settings,
            address_space=self._address_space(), log_path=self._log_path(kernel),
            reference=reference)

    def _start_servers(self, kernel, settings, count: int) -> list:
        """Replay servers for ``kernel``; the first learns the reference outputs, the others
        share them. The containment each got is reported once."""
        first = self._server(kernel, settings).start()
        servers = [first] + [self._server(kernel, settings, first.judge) for _ in range(count - 1)]
        try:
            for server in servers[1:]:
                server.start()
        except BaseException:
            for server in servers:
                server.close()
            raise
        if "DEGRADED" in first.containment:
            self._say(f"pytest-r3: {kernel.name}: candidate {first.containment}")
        return servers

    def run_oracle_tests(self, session: pytest.Session, kernel, variant,
                         candidate=None) -> list[str]:
        """Re-run ``kernel``'s oracle tests in this session with ``variant`` active. A source
        rewrite (``candidate`` with source text) runs in a contained worker, never here."""
        from _pytest.runner import runtestprotocol

        wanted = set(self.recorder.oracle_tests(kernel.name))
        items = [item for item in session.items if item.nodeid in wanted]
        failures: list[str] = []
        launcher = None
        if candidate is not None and candidate.source_text is not None:
            from ..replay import KernelSpec
            from ..replay.contained import ContainedLauncher

            try:
                launcher = ContainedLauncher(
                    KernelSpec.from_kernel(kernel), candidate, self._settings(),
                    address_space=self._address_space(), log_path=self._log_path(kernel))
            except Exception as exc:
                return [f"the rewrite could not be loaded in a contained worker: {exc}"]
        self.recorder.paused = True
        kernel.activate(variant, launcher)
        try:
            for item in items:
                for report in runtestprotocol(item, log=False, nextitem=None):
                    if report.failed:
                        last = (report.longreprtext.strip().splitlines() or ["failed"])[-1]
                        failures.append(f"{item.nodeid} ({report.when}): {last}")
        finally:
            kernel.activate(None)
            self.recorder.paused = False
            if launcher is not None:
                launcher.close()
        if not items:
            failures.append("no oracle test of this kernel was collected in this session")
        return failures

    # -- tuning -------------------------------------------------------------------------------
    def _tune_all(self, session: pytest.Session) -> None:
        from ..search.tuner import Budget, BudgetError

        try:
            budget = Budget.parse(options.value(self.config, "r3_budget"))
        except BudgetError as exc:
            raise pytest.UsageError(f"--r3-budget: {exc}") from None
        lock = LockFile.load(self.lock_path)
        for name in self._kernels():
            row = self._tune_one(session, declaration.registry()[name], budget, lock)
            self.rows.append(row)
        lock.save()
        write_reports(self.r3_dir, self.rows)

    def _tune_one(self, session, kernel, budget, lock: LockFile) -> KernelReport:
        from ..replay import Candidate
        from ..search.parametrization import SearchSpace
        from ..search.results import ResultStore
        from ..search.tuner import Tuner

        target = kernel.backend.target_name()
        workers = int(options.value(self.config, "r3_workers")) or os.cpu_count() or 1
        optimizer = str(options.value(self.config, "r3_optimizer"))
        row = KernelReport(kernel.name, target, "baseline kept", optimizer=optimizer)
        search_pipeline = bool(options.value(self.config, "r3_search_pipeline"))
        llm = self._llm_settings()
        if not kernel.space.tunables and not search_pipeline and llm is None:
            row.status = "not tuned"
            row.notes.append("nothing to tune: no tunables and r3_search_pipeline is false")
            return row
        self._say(f"pytest-r3: tuning {kernel.name} on {target} with {optimizer}, "
                  f"budget {budget.describe()}, {workers} worker(s)")
        space = SearchSpace(kernel.space, kernel.pipeline, tune_pipeline=search_pipeline)
        store = ResultStore(self.r3_dir / "results", kernel.name, target)
        servers = []
        evolution = None
        try:
            servers = self._start_servers(kernel, self._settings(), workers)
            tuner = Tuner(kernel.name, kernel.source.hash, space, servers, store,
                          optimizer=optimizer, seed=int(options.value(self.config, "r3_seed")),
                          budget=budget, progress=self._progress(budget))
            outcome = tuner.run()
            best, result = outcome.best_candidate, outcome.best_result
            if llm is not None:
                evolution = self._evolve(kernel, llm, servers, space, store, target, best,
                                         result)
                elite = evolution.best
                if elite is not None and elite.source != kernel.source.text:
                    rewrite = Candidate(elite.macros, elite.pipeline, elite.source,
                                        label=f"{kernel.name} best rewrite")
                    confirmed = servers[0].evaluate(rewrite)  # measured alone, like the rest
                    inner = result.timing["speedup"] if result is not None else 1.0
                    if confirmed.ok and not confirmed.timing.get("within_noise") \
                            and confirmed.timing["speedup"] > inner:
                        best, result = rewrite, confirmed
        except Exception as exc:  # one kernel's trouble must not stop the others
            row.status = "FAILED: tuning error"
            row.notes.append(f"{type(exc).__name__}: {exc}")
            self.failures.append(f"{kernel.name}: {exc}")
            return row
        finally:
            for server in servers:
                server.close()
        row.evaluations, row.new_evaluations = outcome.evaluations, outcome.new_evaluations
        row.convergence = outcome.convergence()
        if outcome.baseline_result and outcome.baseline_result.timing:
            row.baseline_seconds = outcome.baseline_result.timing["baseline_median"]
        if outcome.exhausted:
            row.notes.append(f"search space exhausted after {outcome.evaluations} distinct "
                             "configuration(s)")
        failed = sum(1 for s in outcome.steps if s.status not in ("ok", "invalid"))
        if failed:
            row.notes.append(f"{failed} candidate(s) failed (compile error, crash, wrong "
                             "output...): scored and skipped")
        if evolution is not None:
            row.evolution = [g.__dict__ for g in evolution.generations]
            row.archive = evolution.archive
            stats = evolution.stats
            row.notes.append(
                f"source rewrites: {stats.proposed} proposed, {stats.valid_first_try} correct "
                f"at once, {stats.valid_after_repair} after repair, {stats.parse_failures} "
                f"unparsable answer(s); failures by kind {stats.failures or '{}'}"
                + (f"; stopped: {evolution.stopped}" if evolution.stopped else ""))
        if best is None:
            row.notes.append("no variant was faster than the baseline beyond the noise")
            lock.remove_entry(kernel.name, target)
            return row
        timing = result.timing
        row.baseline_seconds = timing["baseline_median"]
        row.tuned_seconds = timing["candidate_median"]
        row.speedup, row.speedup_q1, row.speedup_q3 = (
            timing["speedup"], timing["speedup_q1"], timing["speedup_q3"])
        row.baseline_samples = timing["baseline_samples"]
        row.tuned_samples = timing["candidate_samples"]
        row.changes = {"macros": best.macros, "pipeline": best.pipeline,
                       "source": best.source_text is not None}
        row.review = result.review
        variant = kernel.variant(pipeline={**kernel.pipeline.as_dict(), **best.pipeline},
                                 source_text=best.source_text, **best.macros)
        failures = self.run_oracle_tests(session, kernel, variant, best)
        if failures:
            row.status = "rejected by oracles"
            row.notes += [f"oracle test failed with the best variant: {f}" for f in failures]
            lock.remove_entry(kernel.name, target)
            return row
        row.status = "tuned" if best.source_text is None else "tuned (source rewrite)"
        from ..backends.clang import host_target, source_hash

        entry = {
            "source_hash": kernel.source.hash,
            "features_hash": features_hash(host_target().features)
            if kernel.backend_name == "cpu" else None,
            "macros": best.macros,
            "pipeline": best.pipeline,
            "baseline_seconds": round(row.baseline_seconds, 9),
            "tuned_seconds": round(row.tuned_seconds, 9),
            "speedup": round(row.speedup, 4),
            "speedup_iqr": [round(row.speedup_q1, 4), round(row.speedup_q3, 4)],
            "evaluations": row.evaluations,
            "optimizer": outcome.optimizer,
            "oracle_tests": len(self.recorder.oracle_tests(kernel.name)),
            "tuned_on": datetime.date.today().isoformat(),
            "tuned_with": f"pytest-r3 {__version__}",
        }
        if best.source_text is not None:  # the lock names the rewrite; the patch carries it
            entry["rewrite_hash"] = source_hash(best.source_text)
            row.notes.append(self._write_patch(kernel, best.source_text))
            self._examples().remember(kernel.name, kernel.source.text, best.source_text,
                                      row.speedup)
        lock.set_entry(kernel.name, target, entry)
        return row

    # -- the outer loop (LLM rewrites) -----------------------------------------------------
    def _llm_settings(self):
        model = str(options.value(self.config, "r3_llm_model")).strip()
        if not model:
            if not self._said_no_llm:
                self._said_no_llm = True
                self._say("pytest-r3: no LLM configured (--r3-llm-model): tuning settings "
                          "only, no source rewrites")
            return None
        from ..llm.client import LLMSettings

        value = lambda name: options.value(self.config, name)  # noqa: E731
        return LLMSettings(
            model=model, base_url=str(value("r3_llm_base_url")).strip() or None,
            api_key_env=str(value("r3_llm_api_key_env")),
            temperature=float(value("r3_llm_temperature")),
            timeout=float(value("r3_llm_timeout")),
            concurrency=int(value("r3_llm_concurrency")),
            max_requests=int(value("r3_llm_max_requests")),
            max_tokens=int(value("r3_llm_max_tokens")),
            max_seconds=float(value("r3_llm_max_seconds")))

    def _examples(self):
        from ..llm.retrieval import ExampleIndex

        return ExampleIndex(self.r3_dir / "runs" / "accepted.json")

    def _evolve(self, kernel, llm, servers, space, store, target, best, result):
        from ..backends.clang import host_target
        from ..llm.archive import Elite
        from ..llm.client import LLMClient
        from ..llm.evolution import Evolution, EvolutionSettings
        from ..llm.prompts import stable_context
        from ..llm.runlog import RunLog

        speedup = result.timing["speedup"] if result is not None else 1.0
        start = Elite(kernel.source.text, 1.0 / speedup, speedup,
                      best.macros if best else {}, best.pipeline if best else {}, 0,
                      f"{speedup:.2f}x the original with tuned settings")
        shapes = [f"{', '.join(f'{n}{tuple(a.shape)}' for n, a in r.inputs.items())}; "
                  f"scalars {r.scalars}"
                  for r in self.recorder.store.load_all(kernel.name)]
        features = host_target().features if kernel.backend_name == "cpu" else ""
        context = stable_context(kernel.name, kernel.entry, kernel.source.text, shapes,
                                 target, features)
        value = lambda name: int(options.value(self.config, name))  # noqa: E731
        settings = EvolutionSettings(
            generations=value("r3_llm_generations"), islands=value("r3_llm_islands"),
            children=value("r3_llm_children"), repairs=value("r3_llm_repairs"),
            inner_budget=value("r3_llm_inner_budget"), examples=value("r3_llm_examples"),
            seed=value("r3_seed"))
        self._say(f"pytest-r3: evolving the source of {kernel.name} with {llm.model} "
                  f"({settings.generations} generations x {settings.islands} islands x "
                  f"{settings.children} children)")
        client = LLMClient(llm)
        try:
            evolution = Evolution(
                kernel=kernel.name, entry=kernel.entry, source=kernel.source.text,
                source_hash=kernel.source.hash, context=context, servers=servers,
                client=client, space=space, store=store,
                log=RunLog(self.r3_dir / "runs" / kernel.name), examples=self._examples(),
                start=start, settings=settings)
            outcome = evolution.run()
        finally:
            client.close()
        for generation in outcome.generations:
            self._say(f"  {kernel.name}: generation {generation.index}, best "
                      f"{generation.best_speedup:.2f}x, model wait "
                      f"{generation.model_wait_seconds:.1f} s, evaluation "
                      f"{generation.evaluation_seconds:.1f} s, wall "
                      f"{generation.wall_seconds:.1f} s")
        return outcome

    def _write_patch(self, kernel, rewritten: str) -> str:
        from ..llm.patch import write_patch

        if kernel.source.path is None:
            from ..outputs import write_text_atomic

            path = write_text_atomic(self.r3_dir / "patches" / f"{kernel.name}.rewrite.c",
                                     rewritten)
            return (f"source rewrite written to {path} for review (inline source: put it in "
                    "the declaration to use it)")
        path = write_patch(self.r3_dir / "patches", kernel.name, kernel.source.path,
                           self.config.rootpath, rewritten)
        return f"source rewrite written as {path} (apply with git apply)"

    def _progress(self, budget):
        last = [0]

        def report(outcome) -> None:
            done = outcome.evaluations
            if done - last[0] >= 10 or budget.exhausted(done, 0):
                last[0] = done
                total = budget.evaluations if budget.evaluations is not None else "?"
                self._say(f"  {outcome.kernel}: {done}/{total} evaluations, best speedup so "
                          f"far {outcome.convergence()[-1]:.2f}x "
                          f"({outcome.new_evaluations} new)")
        return report

    # -- checking ----------------------------------------------------------------------------
    def _check_all(self, session: pytest.Session) -> None:
        lock = LockFile.load(self.lock_path)
        registry = declaration.registry()
        threshold = float(options.value(self.config, "r3_check_threshold")) / 100
        targets = {}
        for name, target, entry in lock.entries():
            if self.selected and name not in self.selected:
                continue
            kernel = registry.get(name)
            if kernel is None:
                continue
            own_target = targets.setdefault(kernel.backend_name,
                                            kernel.backend.target_name())
            if target != own_target:
                continue
            self.rows.append(self._check_one(session, kernel, target, entry, threshold))
        if not self.rows:
            self._say(f"pytest-r3: {self.lock_path} has no entry for this machine's target(s) "
                      f"{', '.join(sorted(set(targets.values()))) or '-'}: nothing to check")

    def _check_one(self, session, kernel, target, entry, threshold) -> KernelReport:
        from ..replay import Candidate

        row = KernelReport(kernel.name, target, "ok", changes={
            "macros": entry.get("macros", {}), "pipeline": entry.get("pipeline", {})})
        row.notes.append(f"locked speedup {entry.get('speedup', '?')}x when tuned")

        def fail(status: str, why: str) -> KernelReport:
            row.status = f"FAIL: {status}"
            row.notes.append(why)
            self.failures.append(f"{kernel.name}: {why}")
            return row

        if entry.get("rewrite_hash"):
            if entry["rewrite_hash"] != kernel.source.hash:
                row.status = "patch not applied"
                row.notes.append(f"the locked variant is a source rewrite: review and apply "
                                 f".r3/patches/{kernel.name}.patch (git apply), then check "
                                 "again; until then plain runs use the baseline")
                return row
        elif entry.get("source_hash") != kernel.source.hash:
            return fail("stale", f"the lock entry was tuned for source {entry.get('source_hash')}"
                        f" but the source is now {kernel.source.hash}: run pytest --r3-tune")
        if kernel.name not in self.recorder.kernels:
            row.status = "not exercised"
            row.notes.append("no oracle test launched it in this session; not checked")
            return row
        try:
            variant = variant_from_entry(kernel, entry)
        except Exception as exc:
            return fail("invalid entry", f"the lock entry no longer fits the declaration: {exc}")
        server = self._server(kernel, self._settings(timing_rounds=21))
        try:
            server.start()
            result = server.evaluate(Candidate(macros=entry.get("macros", {}),
                                               pipeline=entry.get("pipeline", {}),
                                               label="locked"))
        finally:
            server.close()
        if not result.ok:
            return fail("verification", f"the locked variant fails replay: {result.status}: "
                        + "; ".join(result.diagnostics))
        timing = result.timing
        row.baseline_seconds, row.tuned_seconds = (timing["baseline_median"],
                                                   timing["candidate_median"])
        row.speedup, row.speedup_q1, row.speedup_q3 = (timing["speedup"], timing["speedup_q1"],
                                                       timing["speedup_q3"])
        row.baseline_samples, row.tuned_samples = (timing["baseline_samples"],
                                                   timing["candidate_samples"])
        failures = self.run_oracle_tests(session, kernel, variant)
        if failures:
            return fail("oracle tests", "; ".join(failures))
        if timing["speedup"] < 1 - threshold and timing["speedup_q3"] < 1:  # slower, clearly
            return fail("slower", f"the locked variant is {1 / timing['speedup']:.2f}x slower "
                        f"than the baseline (threshold {threshold:.0%}), measured interleaved")
        return row


def _us(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e6:,.1f} us"
