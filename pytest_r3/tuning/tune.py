"""Tuning one kernel: search its settings on replay workers, evolve its source when a model
is configured, confirm the best variant with the kernel's oracle tests, and say what goes
into r3.lock and the reports."""

from __future__ import annotations

import datetime
import hashlib
import importlib
import json
import threading
import time

from .. import __version__
from ..backends.clang import host_target
from ..errors import R3Error
from ..kernel.lock import features_hash, source_fingerprint, unfit_problem, update_entry
from ..outputs import write_text_atomic
from ..replay.protocol import Candidate
from ..reports import KernelReport, Status
from ..reports.model import describe_settings
from ..reports.run import stream_bandwidth
from ..search.parametrization import SearchSpace
from ..search.results import ResultStore, configuration_key, result_context
from ..search.tuner import Tuner
from .claims import CONFIRMED_IN, Ranked, calibrate, confirm_ranked
from .context import Tuning
from .rows import measured


def tune_kernel(kernel, tuning: Tuning, lock_path) -> KernelReport:
    """Tune ``kernel`` and merge its entry into the lock file at ``lock_path`` (under a file
    lock; see kernel.lock.merge_entry for which entry wins); one kernel's failure is its
    row's status, never an exception that stops the others."""
    settings = tuning.settings
    target = kernel.backend.target_name()
    row = KernelReport(kernel.name, target, Status("baseline kept"),
                       optimizer=settings.optimizer)
    if getattr(kernel.backend, "emulated", False):  # see backends/cuda/emulation.py
        row.status = Status("not tuned")
        language = {"cuda": "CUDA", "hip": "HIP"}.get(kernel.backend_name,
                                                       kernel.backend_name)
        row.notes.append(f"{language} runs in emulation on the CPU here: its timings say "
                         "nothing about a GPU, so nothing is ranked and no lock entry is "
                         "written")
        tuning.say(f"pytest-r3: {kernel.name}: not tuned: {row.notes[-1]}")
        return row
    if settings.llm is None:
        tuning.say_once("pytest-r3: no LLM configured (--r3-llm-model): tuning settings "
                        "only, no source rewrites")
    if not kernel.space.tunables and not settings.search_pipeline and settings.llm is None:
        row.status = Status("not tuned")
        row.notes.append("nothing to tune: no tunables and r3_search_pipeline is false")
        return row
    tuning.say(f"pytest-r3: tuning {kernel.name} on {target} with {settings.optimizer}, "
               f"budget {settings.budget.describe()}, "
               + (f"on Dask ({settings.dask})" if settings.dask
                  else f"{settings.workers} worker(s)"))
    if kernel.specialize is not None:
        return _tune_buckets(kernel, tuning, lock_path, row)
    return _tune_variant(kernel, tuning, lock_path, row)


def _tune_buckets(kernel, tuning: Tuning, lock_path, row: KernelReport) -> KernelReport:
    """Tune each bucket that has recordings on its own: timed on that bucket's recordings
    (its workloads first), verified on all of them and confirmed by every oracle test."""
    try:
        buckets = tuning.buckets(kernel)
    except Exception as exc:  # a bad specialize= names itself here
        row.status = Status("FAILED", "tuning error")
        row.notes.append(f"{type(exc).__name__}: {exc}")
        return row
    if tuning.settings.llm is not None:
        row.notes.append("source rewrites are not evolved per bucket (one source serves "
                         "every bucket): each bucket tunes its settings; declare the kernel "
                         "without specialize= to evolve its source")
    for label, keys in buckets.items():
        tuning.say(f"pytest-r3: {kernel.name}: bucket {label} ({len(keys)} recording(s))")
        sub = KernelReport(kernel.name, row.target, Status("baseline kept"),
                           optimizer=row.optimizer, bucket=label)
        row.buckets.append(_tune_variant(kernel, tuning, lock_path, sub, label, keys))
    tuned = [b for b in row.buckets if b.status.tuned]
    failed = [b for b in row.buckets if b.status.failed]
    row.status = (Status("FAILED", f"{len(failed)} of {len(row.buckets)} bucket(s)") if failed
                  else Status("tuned buckets", f"{len(tuned)} of {len(row.buckets)} bucket(s)")
                  if tuned else Status("baseline kept"))
    row.evaluations = sum(b.evaluations for b in row.buckets)
    row.new_evaluations = sum(b.new_evaluations for b in row.buckets)
    row.timed_on = next((b.timed_on for b in row.buckets if b.timed_on), "")
    row.notes += [f"bucket {b.bucket}: {note}" for b in row.buckets for note in b.notes]
    return row


def _tune_variant(kernel, tuning: Tuning, lock_path, row: KernelReport,
                  bucket: str | None = None, timed_keys: list[str] | None = None
                  ) -> KernelReport:
    """Search, confirm and commit one variant: the kernel's, or one ``bucket``'s (timed on
    ``timed_keys`` only; results and lock entry kept per bucket)."""
    settings = tuning.settings
    target = row.target
    space = SearchSpace(kernel.space, kernel.pipeline, tune_pipeline=settings.search_pipeline,
                        codegen=getattr(kernel.backend, "codegen_settings", ()))
    fingerprint = source_fingerprint(kernel)
    features = features_hash(host_target().features) if kernel.backend_name == "cpu" else None
    extra = {"features": features}
    if bucket is not None:
        extra.update(specialize=kernel.specialize.description, bucket=bucket,
                     timed=sorted(timed_keys or ()))
    try:
        store = ResultStore(tuning.r3_dir / "results", kernel.name, target,
                            context=result_context(
                                source_fingerprint=fingerprint, target=target,
                                recordings=tuning.recordings.keys(kernel.name),
                                tolerance=kernel.tolerance, extra=extra))
    except R3Error as exc:  # an unusable results folder: the row says which file
        row.status = Status("FAILED", "tuning error")
        row.notes.append(str(exc))
        return row
    specialize = None if bucket is None else kernel.specialize.description

    def commit(entry):
        try:
            decision = update_entry(lock_path, kernel.name, target, entry,
                                    source_hash=fingerprint, features_hash=features,
                                    retune=settings.retune, bucket=bucket,
                                    specialize=specialize,
                                    unfit=lambda current: unfit_problem(kernel, current))
        except R3Error as exc:  # unwritable, corrupt or held r3.lock: the row says so
            row.status = Status("FAILED", "lock not written")
            row.notes.append(str(exc))
            return None
        if decision.action == "kept":
            row.notes.append(decision.reason)
        return decision
    evolution = None
    overrides = {"timed_keys": tuple(timed_keys)} if timed_keys else {}
    # the optimizer's package takes seconds to import: it loads while the pool starts
    # (its workers learning the reference), and is in before the A/A run is timed
    importing = _importing("nevergrad")
    try:
        with tuning.pool(kernel, **overrides) as pool:
            if "DEGRADED" in pool.containment:
                tuning.say(f"pytest-r3: {kernel.name}: candidate {pool.containment}")
            if getattr(pool, "description", ""):
                tuning.say(f"pytest-r3: {kernel.name}: {pool.description}")
            importing.join()
            band = calibrate(pool.servers[0], kernel.name)  # before any candidate runs
            tuning.say(f"pytest-r3: {row.label}: {band.said()}")
            outcome = Tuner(kernel.name, kernel.source.hash, space, pool.servers, store,
                            optimizer=settings.optimizer, seed=settings.seed,
                            budget=settings.budget, remeasure=settings.retune,
                            band=band.width, baseline=band.calibration,
                            progress=_progress(tuning, settings.budget, pool)).run()
            best, result = outcome.best_candidate, outcome.best_result
            # one source serves every bucket: rewrites are evolved without specialize= only
            if settings.llm is not None and tuning.model_stopped is None and bucket is None:
                evolution = _evolve(kernel, tuning, pool.servers, space, store, target, best,
                                    result)
                best, result = _best_rewrite(kernel, pool.servers[0], evolution, best, result,
                                             band)
            ranked = None if best is None else _ranked(best, result, outcome.confirmations,
                                                       band.width)
            found = None if ranked is None else confirm_ranked(
                pool, [candidate for candidate, _ in ranked], band)
    except Exception as exc:  # one kernel's trouble must not stop the others
        row.status = Status("FAILED", "tuning error")
        row.notes.append(f"{type(exc).__name__}: {exc}")
        return row
    row.noise_band = [band.low, band.high]
    _describe_search(row, outcome, evolution)
    _log_evaluations(row, outcome, store, kernel.source.hash, tuning.root)
    claim = None
    if found is not None:  # the runner-up where a probe refused the best (see claims)
        _refused(row, found, dict((c.key(), r) for c, r in ranked))
        best, claim = found.candidate, found.claim
        result = next(r for c, r in ranked if c.key() == best.key())
    if _suspect(row, band.calibration) or _suspect(row, claim and claim.result):
        commit(None)
        return row
    if best is None or claim is None:
        row.notes.append(f"no variant was faster than the baseline beyond the noise band "
                         f"{band.describe()}")
        commit(None)
        return row
    row.search_estimate = result.speedup
    if not claim.holds:  # the claim did not reproduce where the search took no part
        row.notes.append(claim.why_not(result.speedup))
        commit(None)
        return row
    measured(row, claim.result.timing)
    # the claim's figures: both fresh processes' (see claims.reproduced)
    row.speedup, row.interval = claim.speedup, list(claim.interval or row.interval)
    row.confirmations = claim.confirmations()
    row.confirmed_in = CONFIRMED_IN
    if claim.reproduced_said():
        row.notes.append(claim.reproduced_said())
    if claim.probes_said():
        row.notes.append(claim.probes_said())
    _achieved_work(kernel, tuning, row)
    row.changes = {"macros": best.macros, "pipeline": best.pipeline,
                   "source": best.source_text is not None}
    row.review = result.review
    variant = kernel.variant(pipeline={**kernel.pipeline.as_dict(), **best.pipeline},
                             source_text=best.source_text, **best.macros)
    failures = tuning.run_oracles(kernel, variant, best)
    if failures:
        row.status = Status("rejected by oracles")
        row.notes += [f"oracle test failed with the best variant: {f}" for f in failures]
        commit(None)
        return row
    row.status = Status("tuned" if best.source_text is None else "tuned (source rewrite)")
    entry = _lock_entry(kernel, tuning, row, best, outcome.optimizer)
    if best.source_text is not None:  # the lock names the rewrite; the patch carries it
        entry["rewrite_hash"] = source_fingerprint(kernel.source.with_text(best.source_text))
        assumes = list(result.details.get("assumes") or ())
        row.notes += [f"the rewrite assumes: {note}" for note in assumes]
        row.notes.append(_write_patch(kernel, tuning, best.source_text, assumes))
        _examples(tuning).remember(kernel.name, kernel.source.text, best.source_text,
                                   row.speedup)
    entry["source_hash"] = fingerprint
    commit(entry)
    return row


def _ranked(best: Candidate, result, confirmations, band: float) -> list[tuple]:
    """``best`` with its ``result``, then the search's other finalists that its own
    confirmation measured faster beyond the noise ``band``, fastest first (a finalist
    measured twice: the later figure stands), as (candidate, result) pairs."""
    latest = {candidate.key(): (candidate, measured) for candidate, measured in confirmations}
    others = [(candidate, measured) for key, (candidate, measured) in latest.items()
              if key != best.key() and measured.ok and measured.timing is not None
              and measured.timing.verdict(band) == "faster"]
    return [(best, result)] + sorted(others, key=lambda pair: -pair[1].timing.speedup)


def _refused(row: KernelReport, found: Ranked, results: dict) -> None:
    """The better candidates a slow-path probe refused before ``found.candidate`` was
    confirmed: a note each, and ``row.refused`` for report.json."""
    for candidate, claim in found.refused:
        estimate = results[candidate.key()].speedup if candidate.key() in results else None
        settings = describe_settings(candidate.macros, candidate.pipeline) \
            + (" (source rewrite)" if candidate.source_text is not None else "")
        why = claim.why_not(estimate)
        row.notes.append(f"{why}; the next best candidate was confirmed instead")
        row.refused.append({
            "settings": settings, "source_rewrite": candidate.source_text is not None,
            "confirmed_speedup": claim.result.timing.speedup if claim.result.timing else None,
            "probes": [p.label for p in claim.slower_probes], "reason": why})


def _importing(module: str) -> threading.Thread:
    """``module`` imported in a thread of its own (its import errors are left to the code
    that uses it): join it before that code runs."""
    def load() -> None:
        try:
            importlib.import_module(module)
        except ImportError:
            pass
    thread = threading.Thread(target=load, name=f"r3-import-{module}", daemon=True)
    thread.start()
    return thread


def _lock_entry(kernel, tuning: Tuning, row: KernelReport, best: Candidate,
                optimizer: str) -> dict:
    return {
        "source_hash": kernel.source.hash,
        "features_hash": features_hash(host_target().features)
        if kernel.backend_name == "cpu" else None,
        "macros": best.macros,
        "pipeline": best.pipeline,
        "configuration": best.key(),  # the same hash the search and its results store use
        "baseline_seconds": round(row.baseline_seconds, 9),
        "tuned_seconds": round(row.tuned_seconds, 9),
        "speedup": round(row.speedup, 4),
        "speedup_interval": [round(x, 4) for x in row.interval],
        "noise_band": [round(x, 4) for x in row.noise_band],
        "dropped_share": round(row.dropped_share or 0.0, 4),
        "confirmed_in": row.confirmed_in,
        "evaluations": row.evaluations,
        "optimizer": optimizer,
        "oracle_tests": len(tuning.oracle_tests(kernel.name)),
        "timed_on": _timed_on(row),
        **({"gpu": {k: row.gpu[k] for k in ("facts", "clocks", "flush_bytes",
                                            "warmup_launches")}} if row.gpu else {}),
        "tuned_on": datetime.date.today().isoformat(),
        "tuned_with": f"pytest-r3 {__version__}",
    }


def _suspect(row: KernelReport, result) -> bool:
    """Whether ``result`` is a GPU timing faster than the device's memory allows (see
    replay/device_timing): the row then says "suspect" and why, and nothing is locked."""
    if result is None or result.status != "suspect":
        return False
    row.status = Status("suspect")
    row.notes.append(f"not locked: {result.reason()}")
    return True


def _timed_on(row: KernelReport) -> str:
    """What the entry's speedup was measured on: "test inputs", or which workloads (their
    keys and weights, hashed): an entry timed on other inputs is replaced, not compared."""
    if not row.workloads:
        return "test inputs"
    chosen = sorted([w["key"], w["weight"]] for w in row.workloads)
    return f"workloads {hashlib.sha256(json.dumps(chosen).encode()).hexdigest()[:12]}"


def _describe_search(row: KernelReport, outcome, evolution) -> None:
    row.evaluations, row.new_evaluations = outcome.evaluations, outcome.new_evaluations
    row.convergence = outcome.convergence()
    if outcome.baseline_result and outcome.baseline_result.timing is not None:
        row.baseline_seconds = outcome.baseline_result.timing.baseline_median
    if outcome.exhausted:
        row.notes.append(f"search space exhausted after {outcome.evaluations} distinct "
                         "configuration(s)")
    if evolution is not None:
        row.evolution = [g.__dict__ for g in evolution.generations]
        row.archive = evolution.archive
        stats = evolution.stats
        row.notes.append(
            f"source rewrites: {stats.proposed} proposed, {stats.valid_first_try} correct "
            f"at once, {stats.valid_after_repair} after repair, {stats.parse_failures} "
            "unparsable answer(s)"
            + (f"; failed: {stats.describe_failures()}" if stats.failures else "")
            + (f"; stopped: {evolution.stopped}" if evolution.stopped else ""))


def _log_evaluations(row: KernelReport, outcome, store: ResultStore, source_hash: str,
                     root) -> None:
    """Every evaluation for the report's plots, and the failed ones grouped by cause (with
    one example each: its settings and the first line of its diagnostics)."""
    finalists = {configuration_key(source_hash, candidate.key())
                 for candidate, _ in outcome.confirmations}
    causes: dict[str, dict] = {}
    for step in outcome.steps:
        if step.status == "invalid":
            continue  # refused by a constraint: nothing ran
        stored = store.get(step.key) or {}
        candidate = stored.get("candidate") or {}
        settings = describe_settings(candidate.get("macros") or {},
                                     candidate.get("pipeline") or {})
        kind = "failed" if step.status != "ok" else "lost race" if step.raced else "ok"
        row.evaluation_log.append({
            "index": step.index, "speedup": step.speedup, "outcome": kind,
            "status": step.status, "settings": settings, "finalist": step.key in finalists,
            "macros": candidate.get("macros") or {},
            "pipeline": candidate.get("pipeline") or {}})
        if kind == "failed":
            diagnostics = (stored.get("result") or {}).get("diagnostics") or []
            first = next((line.strip() for text in diagnostics for line in str(text)
                          .splitlines() if line.strip()), "").replace(f"{root}/", "")
            cause = causes.setdefault(step.status, {
                "status": step.status, "count": 0, "example": settings,
                "diagnostic": first[:200]})
            cause["count"] += 1
    row.failure_causes = sorted(causes.values(), key=lambda c: -c["count"])
    if row.failure_causes:
        total = sum(c["count"] for c in row.failure_causes)
        row.notes.append(f"{total} candidate(s) failed and were skipped: "
                         + "; ".join(row.describe_failures()))


def _achieved_work(kernel, tuning: Tuning, row: KernelReport) -> None:
    """Each timed workload's flops and bytes per call, from the kernel's work= (for the
    report's achieved throughput); a work= that fails is a note, never an error."""
    if kernel.work is None:
        return
    for workload in row.workloads:
        try:
            recording = tuning.recordings.read(kernel.name, workload["key"])
            amounts = kernel.work({**recording.inputs, **recording.scalars})
            workload["work"] = {key: float(amounts[key]) for key in ("flops", "bytes")
                                if key in amounts}
            if workload["work"].get("bytes"):  # its peak: numpy moving as many bytes
                workload["stream_bandwidth"] = stream_bandwidth(workload["work"]["bytes"])
        except Exception as exc:  # the user's function: its failure is reported
            row.notes.append(f"work= failed on workload {workload['origin']}: "
                             f"{type(exc).__name__}: {exc}")
            return


def _best_rewrite(kernel, server, evolution, best, result, band):
    """The evolution's best rewrite, measured again alone, if it beats the settings' best
    with its whole interval above the noise ``band``."""
    elite = evolution.best
    if elite is None or elite.source == kernel.source.text:
        return best, result
    rewrite = Candidate(elite.macros, elite.pipeline, elite.source,
                        label=f"{kernel.name} best rewrite")
    confirmed = server.evaluate(rewrite)
    inner = result.speedup if result is not None and result.speedup else 1.0
    if confirmed.ok and confirmed.timing is not None \
            and confirmed.timing.verdict(band.width) == "faster" \
            and confirmed.timing.speedup > inner:
        return rewrite, confirmed
    return best, result


def _examples(tuning: Tuning):
    from ..llm.retrieval import ExampleIndex

    return ExampleIndex(tuning.r3_dir / "runs" / "accepted.json")


def _evolve(kernel, tuning: Tuning, servers, space, store, target, best, result):
    from ..llm.archive import Elite
    from ..llm.client import LLMClient
    from ..llm.evolution import Evolution
    from ..llm.prompts import stable_context
    from ..llm.runlog import RunLog

    llm, settings = tuning.settings.llm, tuning.settings.evolution
    speedup = result.speedup if result is not None and result.speedup else 1.0
    start = Elite(kernel.source.text, 1.0 / speedup, speedup,
                  best.macros if best else {}, best.pipeline if best else {}, 0,
                  f"{speedup:.2f}x the original with tuned settings")
    shapes = [f"{', '.join(f'{n}{tuple(a.shape)}' for n, a in r.inputs.items())}; "
              f"scalars {r.scalars}" for r in tuning.recordings.load_all(kernel.name)]
    features = host_target().features if kernel.backend_name == "cpu" else ""
    context = stable_context(kernel.name, kernel.entry, kernel.source.text, shapes,
                             target, features, kernel.signature.describe(),
                             kernel.source.define_flags)
    tuning.say(f"pytest-r3: evolving the source of {kernel.name} with {llm.model} "
               f"({settings.generations} generations x {settings.islands} islands x "
               f"{settings.children} children)")
    client = LLMClient(llm)
    try:
        outcome = Evolution(
            kernel=kernel.name, entry=kernel.entry, source=kernel.source.text,
            source_hash=kernel.source.hash, context=context, servers=servers,
            client=client, space=space, store=store,
            log=RunLog(tuning.r3_dir / "runs" / kernel.name), examples=_examples(tuning),
            start=start, settings=settings).run()
    finally:
        client.close()
    if getattr(outcome, "fatal", False):  # the same 401 or 404 would stop every kernel
        tuning.model_stopped = outcome.stopped
        tuning.say(f"pytest-r3: {kernel.name}: model endpoint stopped: {outcome.stopped}")
    for generation in outcome.generations:
        tuning.say(f"  {kernel.name}: generation {generation.index}, best "
                   f"{generation.best_speedup:.2f}x, model wait "
                   f"{generation.model_wait_seconds:.1f} s, evaluation "
                   f"{generation.evaluation_seconds:.1f} s, wall "
                   f"{generation.wall_seconds:.1f} s")
    return outcome


def _write_patch(kernel, tuning: Tuning, rewritten: str, assumes: list[str]) -> str:
    from ..llm.patch import write_patch

    if kernel.source.path is None:
        header = "".join(f"/* pytest-r3: this rewrite assumes: {note} */\n" for note in assumes)
        path = write_text_atomic(tuning.r3_dir / "patches" / f"{kernel.name}.rewrite.c",
                                 header + rewritten, root=tuning.r3_dir.parent)
        return (f"source rewrite written to {path} for review (inline source: put it in "
                "the declaration to use it)")
    path = write_patch(tuning.r3_dir / "patches", kernel.name, kernel.source.path,
                       tuning.root, rewritten, assumes)
    return f"source rewrite written as {path} (apply with git apply)"


def _progress(tuning: Tuning, budget, pool):
    last = [0]
    started = time.perf_counter()

    def report(outcome) -> None:
        done = outcome.evaluations
        if done - last[0] >= 10 or budget.exhausted(done, 0):
            last[0] = done
            total = budget.evaluations if budget.evaluations is not None else "?"
            rate = getattr(pool, "activity", "") or (
                f"{outcome.new_evaluations / max(time.perf_counter() - started, 1e-9):.2f} "
                f"evaluations/s on {len(pool.servers)} local worker(s)")
            tuning.say(f"  {outcome.kernel}: {done}/{total} evaluations, best search "
                       f"estimate {outcome.convergence()[-1]:.2f}x (unconfirmed; "
                       f"{outcome.new_evaluations} new), {rate}")
    return report
