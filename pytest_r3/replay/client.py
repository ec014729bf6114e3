"""The parent side of a replay server: compiles candidates, runs them in a contained worker
process, and judges what comes back. A dead, hung or misbehaving worker becomes a
``crash``, ``timeout`` or ``sandbox_violation`` result, and a fresh worker takes its place."""

from __future__ import annotations

import itertools
import secrets
import time
from collections.abc import Callable, Collection, Mapping
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

from ..backends import get_backend
from ..errors import R3Error
from ..record.store import RecordingStore
from . import contract, layout, probes, protocol
from .compile import CandidateCompiler
from .device_timing import Clocks, DeviceFacts, DeviceTiming, speed_of_light
from .judge import Case, Judge, ReferenceError
from .measurement import RACE_STOPS, MalformedTiming, Timing, Workload
from .probes import ProbeTiming
from .process import DEFAULT_ADDRESS_SPACE, WorkerDied, WorkerProcess
from .protocol import Candidate, KernelSpec, Rejected, ReplaySettings, Result
from .statistics import NOISE_FLOOR
from .threads import OTHER_THREAD

# The share of the request limit a timing's rounds may take: past it they stop (too busy,
# or the clean rounds' figures), and the rest is left for the checks after them, so a busy
# machine never gets a worker killed as if its candidate hung.
TIMING_SHARE = 0.7

# The label of the slow-path probe timed from another thread (see _time_off_main_thread).
THREAD_PROBE = f"the largest timed case {OTHER_THREAD}"


class ReplayError(R3Error):
    """The replay server itself cannot go on (its baseline fails, or it crashes in a loop)."""


class ReplayServer:
    """A long-lived, contained worker holding one kernel's baseline and cases in memory."""

    def __init__(
        self,
        spec: KernelSpec,
        recordings_root: str | Path,
        keys: list[str],
        settings: ReplaySettings | None = None,
        *,
        request_timeout: float = 300.0,
        load_timeout: float = 300.0,
        address_space: int = DEFAULT_ADDRESS_SPACE,
        max_consecutive_crashes: int = 10,
        log_path: str | Path | None = None,
        reference: Judge | None = None,
        work: Callable[[Mapping[str, object]], Mapping[str, float]] | None = None,
        compile_cache: str | None = None,
    ) -> None:
        if not keys:  # nothing to verify or time a candidate on
            raise ValueError(f"no recordings of kernel {spec.name!r} to replay: record its "
                             f"launches first (pytest --r3-record)")
        self.spec = spec
        self.recordings_root = str(recordings_root)
        self.keys = list(keys)
        self.settings = settings or ReplaySettings()
        self.request_timeout = request_timeout
        self.load_timeout = load_timeout
        self.address_space = address_space
        self.max_consecutive_crashes = max_consecutive_crashes
        self.log_path = log_path
        self.judge = reference  # shared by the servers of one kernel: learnt once
        self.work = work  # the kernel's work=: bytes a timed case moves, for speed of light
        self.device_facts: DeviceFacts | None = None  # a GPU's, read before candidates ran
        # the compiled-code cache folder the worker reads its baseline from (None: the one
        # its environment names; see compile_cache.trusted_build), and what it read there
        self.compile_cache = compile_cache
        self.compile_cache_hits = 0
        self.restarts = 0
        self.consecutive_crashes = 0
        self.containment = ""
        self.dropped_cases: list[str] = []
        # (label, case) of each slow-path probe, learnt from the baseline (settings.probes)
        self.probes: list[tuple[str, Case]] | None = None
        self.compiler: CandidateCompiler | None = None
        self._names = itertools.count()
        self._index: dict[int, int] = {}
        self._reference_identity: tuple | None = None  # (configuration key, worker pid)
        gpu = not getattr(get_backend(spec.backend), "address_space_cap", True)
        self.worker = WorkerProcess(self.settings, address_space, log_path, gpu=gpu)

    @property
    def description(self) -> dict:
        return {} if self.judge is None else {**self.judge.describe(),
                                              "containment": self.containment,
                                              "dropped_cases": self.dropped_cases}

    # -- process management --------------------------------------------------------------
    def prepare(self) -> ReplayServer:
        """Compile the baseline and start a worker with it: all a server can do before the
        reference outputs are known (a pool prepares its other servers meanwhile)."""
        if self.compiler is None:
            try:
                self.compiler = CandidateCompiler(self.spec, get_backend(self.spec.backend),
                                                  self.settings.static_check)
            except R3Error as exc:
                raise ReplayError(f"kernel {self.spec.name!r}: the baseline does not compile: "
                                  f"{exc}") from None
        if not self.worker.running:
            with self._loading():
                self._spawn()
        return self

    def start(self) -> ReplayServer:
        backend = get_backend(self.spec.backend)
        self.prepare()
        with self._loading():
            learnt = self.judge is None
            if learnt:
                self._learn_reference()
            if self.settings.probes and self.probes is None:
                self._learn_probes()
            elif not learnt or self.probes:
                self._send_cases(self._cases())
            _, data, _ = self._ask("seal", {"ioctl": not getattr(backend, "address_space_cap",
                                                                  True)}, self.load_timeout)
            self.containment = str(data.get("containment", ""))
        return self

    @contextmanager
    def _loading(self):
        """A worker that fails while loading is killed; its death is a ReplayError."""
        try:
            yield
        except WorkerDied as died:
            self._kill()
            raise ReplayError(f"replay worker for kernel {self.spec.name!r} could not load its "
                              f"baseline: {died.result.reason()}") from None
        except BaseException:
            self._kill()
            raise

    def _spawn(self) -> None:
        self.worker.spawn()
        _, data, _ = self._ask("load", {"spec": self.spec.as_dict(),
                                        "settings": asdict(self.settings),
                                        "ir": self.compiler.baseline_ir,
                                        "compile_cache": self.compile_cache},
                               self.load_timeout)
        self.device_facts = DeviceFacts.from_dict(data.get("device"))
        self.compile_cache_hits = int(data.get("compile_cache_hits", 0))

    def _send_cases(self, cases: list[Case]) -> None:
        arrays = {f"{index}.{number}": slot.values for index, case in enumerate(cases)
                  for number, slot in enumerate(case.slots)}
        self._ask("cases", {"layout": [case.layout() for case in cases]}, self.load_timeout,
                  arrays)
        self._index = {id(case): index for index, case in enumerate(cases)}

    def _cases(self) -> list[Case]:
        """Every case the worker holds: the judge's, then the probes (if any)."""
        return self.judge.cases + [case for _, case in self.probes or ()]

    def _learn_probes(self) -> None:
        """The slow-path probes of the largest timed case (see probes), learnt from the
        baseline like every case, before any candidate runs in this worker; a probe the
        baseline cannot run (it crashes, writes out of bounds or is not deterministic
        there) is dropped."""
        timed = self.judge.timed()
        # on a GPU each argument is its own device copy: no layout to probe
        host = getattr(get_backend(self.spec.backend), "address_space_cap", True)
        largest = max(timed, key=lambda c: c.nbytes) if timed else None
        planned = [] if largest is None else [
            (probe.label, Case(f"the largest timed case with {probe.label} (a slow-path "
                               "probe)", "probe", probe.scalars, probe.slots))
            for probe in probes.plan(largest.scalars, largest.slots, self.settings.seed, host)]
        self.probes = planned
        self._send_cases(self._cases())
        kept = []
        for label, case in planned:
            try:
                self.judge.learn(case, self._runner("baseline", self.load_timeout),
                                 output_only=False)
                kept.append((label, case))
                continue
            except (ReferenceError, Rejected) as exc:
                reason = str(exc)
            except WorkerDied as died:  # a fresh worker for the rest (see _learn_reference)
                reason = died.result.reason()
                self._kill()
                self._spawn()
                self._send_cases(self._cases())
            self.dropped_cases.append(f"slow-path probe {label}: {reason}")
        self.probes = kept

    def _learn_reference(self) -> None:
        """Run the baseline on every planned case, before any candidate has run in the
        worker; cases the baseline cannot serve on (derived sizes it rejects) are dropped."""
        judge, cases = self.plan_reference()
        self.adopt_reference(judge, cases, self.learn_cases(judge, cases, cases))

    def plan_reference(self) -> tuple[Judge, list[Case]]:
        """A judge and every case it plans, sent to this worker; nothing learnt yet."""
        judge = Judge(self.spec, self.settings)
        store = RecordingStore(self.recordings_root)
        try:
            recordings = [store.read(self.spec.name, key) for key in self.keys]
        except (OSError, ValueError, KeyError) as exc:
            raise ReplayError(f"kernel {self.spec.name!r}: cannot read its recordings: "
                              f"{exc}") from None
        cases = judge.plan(recordings)
        self._send_cases(cases)
        return judge, cases

    def learn_cases(self, judge: Judge, cases: list[Case], mine: list[Case]
                    ) -> dict[int, str]:
        """What the baseline produces on each case of ``mine`` (some of ``cases``, every one
        of them sent to this worker, with the earlier launches of each of ``mine``), learnt
        here in order. Returns why cases were dropped, by ``id``."""
        dropped: dict[int, str] = {}
        for case in mine:
            if any(id(before) in dropped for before in case.after):
                dropped[id(case)] = "an earlier launch of it was dropped"
                continue
            try:
                judge.learn(case, self._runner("baseline", self.load_timeout))
                continue
            except (ReferenceError, Rejected) as exc:  # Rejected: arguments it refuses
                if case.origin == "recorded":
                    raise ReplayError(f"kernel {self.spec.name!r}: {exc}") from None
                reason = str(exc)
            except WorkerDied as died:
                if case.origin == "recorded":
                    raise ReplayError(f"kernel {self.spec.name!r}: the baseline fails on "
                                      f"{case.label}: {died.result.reason()}") from None
                reason = died.result.reason()
            # the baseline wrote out of bounds or died on this case: its heap may be damaged
            # beyond the guards, so the next case gets a fresh worker
            self._kill()
            self._spawn()
            self._send_cases(cases)
            dropped[id(case)] = reason
        return dropped

    def adopt_reference(self, judge: Judge, cases: list[Case], dropped: dict[int, str]
                        ) -> None:
        """Keep the cases learnt (``dropped``: why the others went, by ``id``), settle the
        in-place ones, and send this worker the cases that stay."""
        judge.cases = [case for case in cases if id(case) not in dropped]
        self.dropped_cases += [f"{case.label}: {dropped[id(case)]}" for case in cases
                               if id(case) in dropped]
        self.dropped_cases += judge.settle()
        self._send_cases(judge.cases)
        self.judge = judge

    def close(self) -> None:
        self.worker.close()

    def _kill(self) -> None:
        self.worker.kill()

    def __enter__(self) -> ReplayServer:
        return self.start() if not self.worker.running else self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        return self.worker.pid

    def _ask(self, event: str, data: dict, timeout: float, arrays: dict | None = None):
        return self.worker.ask(event, data, timeout, arrays)

    def _runner(self, variant: str, timeout: float):
        """``run(requests)``: each ``(case, fills, guard_seed)`` run once, in one round trip;
        the replies ``(data, arrays)`` in order. A fourth item, true, runs on buffers laid
        out as in production instead of guarded ones; a fifth, true, launches from a thread
        other than the worker's main one (see threads); a sixth, true, with flush-to-zero
        and denormals-are-zero set (see fpmode)."""
        def run(requests: list[tuple]) -> list[tuple[dict, dict]]:
            _, data, arrays = self._ask("run", {"variant": variant, "runs": [
                {"case": self._index[id(case)], "fills": fills, "guard_seed": seed,
                 "after": [self._index[id(before)] for before in case.after],
                 "plain": bool(rest[:1] and rest[0]), "thread": bool(rest[1:2] and rest[1]),
                 "flush": bool(rest[2:3] and rest[2])}
                for case, fills, seed, *rest in requests]}, timeout)
            returned = data.get("returned")
            if not isinstance(returned, list) or len(returned) != len(requests):
                raise WorkerDied(Result(protocol.CRASH, diagnostics=[
                    "the worker answered a batch of runs with the wrong number of results"],
                    details={"kind": "protocol"}))
            replies = []
            for index, (case, *_) in enumerate(requests):
                storages = {str(n): arrays.get(f"{index}.{n}") for n in range(len(case.slots))}
                replies.append(({"returned": returned[index]}, storages))
            return replies
        return run

    def evaluate(self, candidate: Candidate) -> Result:
        """Evaluate ``candidate``; a crash or hang restarts the worker and is the result."""
        if not self.worker.running:
            self.start()
        started = time.perf_counter()
        try:
            result = self._evaluate(candidate)
        except Rejected as rejected:
            result = rejected.result()
            # a reply the judge could not accept, or a write past a buffer (on a production
            # layout, into the allocator's own bytes): the worker is not to be trusted
            if rejected.status == protocol.CRASH or rejected.kind == "out_of_bounds":
                self.worker.kill()
                self._restart(candidate, result)
        except WorkerDied as died:
            result = died.result
            self.consecutive_crashes += 1
            if self.consecutive_crashes > self.max_consecutive_crashes:
                raise ReplayError(
                    f"the replay worker of kernel {self.spec.name!r} died "
                    f"{self.consecutive_crashes} times in a row; giving up (last: "
                    f"{result.reason()})") from None
            self._restart(candidate, result)
        else:
            self.consecutive_crashes = 0
        result.candidate_key = candidate.key()
        result.label = candidate.label
        result.details["seconds"] = time.perf_counter() - started
        if not self.judge.verifying() or all(c.weak for c in self.judge.cases
                                             if c.origin == "recorded"):
            result.diagnostics.insert(0,
                "every recording is too weak to verify with (a do-nothing kernel would pass "
                "it): only perturbed and derived inputs were checked; add a test whose outputs "
                "differ from its inputs")
        return result

    def _restart(self, candidate: Candidate, result: Result) -> None:
        """A fresh worker, the cause in the log: the next candidate gets a clean process."""
        self.restarts += 1
        self.worker.note(f"worker restarted (restart {self.restarts}) after candidate "
                         f"{candidate.label or candidate.key()}: {result.reason()}")
        self._kill()  # a reply it judged wrong may have left the worker alive
        self.start()

    def _evaluate(self, candidate: Candidate) -> Result:
        compiled = self.compiler.compile(candidate)
        result = Result(protocol.OK, compile_seconds=dict(compiled.seconds))
        if candidate.source_text is not None:  # kept only with what it assumes said
            # on a GPU each argument is its own device copy: nothing was run in place
            host = getattr(self.compiler.backend, "address_space_cap", True)
            assumes = contract.assumptions(self.compiler.baseline_ir, compiled.ir,
                                           self.spec.entry, self.spec.params,
                                           self.judge.shared_buffers() if host else set(),
                                           self.spec.no_alias)
            if assumes:
                result.details["assumes"] = assumes
                result.diagnostics.append("assumes: " + "; ".join(assumes))
        name = f"candidate{next(self._names)}"
        tunables = {**self.spec.default_macros, **candidate.macros, **candidate.launch}
        pipeline = {**self.spec.pipeline, **candidate.pipeline}
        result.compile_seconds.update(self._build(name, compiled.ir, candidate))
        run = self._runner(name, self.request_timeout)
        emulated = getattr(self.compiler.backend, "emulated", False)  # CUDA on the CPU
        racing = candidate.race_against is not None and not emulated
        timing = None
        if racing:
            # A candidate that loses the race against the best so far is never kept (the
            # search's finalists are evaluated again in full, unraced), so it is verified
            # only as much as the race needs: on the smallest recording, which most wrong
            # candidates already fail. One that is not clearly slower is verified in full.
            self.judge.verify_smallest(run)
            timing = self._time(name, candidate.race_against, candidate.race_with)
            if timing.raced:
                result.timing = timing
                result.details["verified"] = "smallest recording (lost the race, never kept)"
                self._ask("drop", {"name": name}, self.request_timeout)
                return result
            if not timing.direct and \
                    timing.speedup > candidate.race_against * (1 + NOISE_FLOOR):
                # clearly ahead: it may become the best, which later candidates are scaled
                # by, so its own speedup is measured against the baseline (no chain of
                # scaled estimates, whose errors would compound)
                timing = None
        self.judge.verify(run, self.judge.verifying(), smallest_first=not racing)
        if compiled.pattern_ir is not None:
            self._ask("build", {"name": "pattern", "ir": compiled.pattern_ir,
                                "pipeline": pipeline, "tunables": tunables},
                      self.request_timeout)
            self.judge.verify(self._runner("pattern", self.request_timeout),
                              [c for c in self.judge.verifying() if c.origin == "recorded"],
                              attempts=1, kind="uninitialised",
                              what="the build with patterned uninitialised variables, on ")
            self._ask("drop", {"name": "pattern"}, self.request_timeout)
        if emulated:  # never timed: emulated timings say nothing about a GPU
            self.judge.verify_production(run, self.settings.production_calls)
            result.diagnostics.append("verified in CUDA emulation on the CPU; not timed: "
                                      "emulated timings say nothing about a GPU")
            self._ask("drop", {"name": name}, self.request_timeout)
            return result
        # unraced, a confirmation: every round against the baseline; racing, a candidate
        # clearly ahead of the best: against the baseline until it is clearly ahead there too
        result.timing = timing or self._time(name, candidate.race_against if racing else None)
        result.details["verified"] = "in full"
        if result.timing.layout:
            result.diagnostics.append(
                f"timed slower on {result.timing.layout} than on the other layout timed: "
                f"the speedup given is the one there ({result.timing.speedup:.2f}x)")
        if result.timing.speedup > self.settings.sanity_bound:
            self.judge.verify(run, self.judge.reserve())
            result.review = True
            result.diagnostics.append(
                f"speedup {result.timing.speedup:.1f}x is above the sanity bound of "
                f"{self.settings.sanity_bound:g}x: verified again on "
                f"{len(self.judge.reserve())} more perturbed input sets; review it before "
                "trusting it")
        # a possible claim (faster beyond the noise floor, which any learnt band is at least):
        # the probes
        if (self.settings.probes and result.timing.interval[0] > 1.0
                and not result.timing.within_noise):
            result.probes = self._time_probes(name, thread=candidate.source_text is not None)
        # last: after its timing's launches, many more on buffers as production's
        self.judge.verify_production(run, self.settings.production_calls)
        self._ask("drop", {"name": name}, self.request_timeout)
        return result

    def _build(self, name: str, ir: str, candidate: Candidate) -> dict:
        """Optimise and load ``ir`` in the worker as variant ``name`` with ``candidate``'s
        settings; the seconds it took."""
        tunables = {**self.spec.default_macros, **candidate.macros, **candidate.launch}
        pipeline = {**self.spec.pipeline, **candidate.pipeline}
        _, built, _ = self._ask("build", {"name": name, "ir": ir, "pipeline": pipeline,
                                          "tunables": tunables}, self.request_timeout)
        return dict(built.get("seconds", {}))

    def _time_probes(self, name: str, labels: Collection[str] | None = None,
                     thread: bool = True) -> tuple[ProbeTiming, ...]:
        """Variant ``name`` timed against the baseline on each slow-path probe alone (those
        named in ``labels``, if given), and its outputs there checked as the timed runs'
        are; a crash there names the probe. ``thread``: the thread probe too, where it can
        apply: a source rewrite's code may tell its calling thread (see threads), a
        compiler setting of the original's source cannot make it do so."""
        timings = []
        for label, case in self.probes or ():
            if labels is not None and label not in labels:
                continue
            try:
                timings.append(ProbeTiming(label, self._time(name, cases=[case])))
            except WorkerDied as died:  # the worker's account is kept, the probe named
                first = died.result.diagnostics[:1] or ["the worker died"]
                died.result.diagnostics[:1] = [f"{first[0]} (timed on the slow-path probe "
                                               f"{label})"]
                raise
        if not thread or (labels is not None and THREAD_PROBE not in labels):
            return tuple(timings)
        return tuple(timings) + self._time_off_main_thread(name)

    def _time_off_main_thread(self, name: str) -> tuple[ProbeTiming, ...]:
        """Variant ``name`` timed against the baseline on the largest timed case with every
        launch of both made from a thread other than the worker's main one (see threads):
        a probe like the others, on the CPU only (a GPU's context belongs to its thread)."""
        timed = self.judge.timed()
        if self.spec.backend != "cpu" or not timed:
            return ()
        largest = max(timed, key=lambda case: case.nbytes)
        return (ProbeTiming(THREAD_PROBE, self._time(name, cases=[largest], thread=True)),)

    def time_probes(self, candidate: Candidate, labels: Collection[str] | None = None
                    ) -> tuple[ProbeTiming, ...]:
        """``candidate`` timed against the baseline on every slow-path probe of a server
        with ``settings.probes`` (none otherwise; ``labels``: only those), without the rest
        of an evaluation: the baseline itself (``Candidate()``, built apart) must come out
        within noise on each."""
        return self._timed_alone(candidate, labels, timed=False).probes

    def _timed_alone(self, candidate: Candidate, labels: Collection[str] | None,
                     timed: bool) -> Result:
        """``candidate`` built and timed without the rest of an evaluation: on the timed
        cases against the baseline (``timed``; the timed runs' outputs checked as always),
        and on the slow-path probes ``labels`` (every one when None)."""
        if not self.worker.running:
            self.start()
        name = f"candidate{next(self._names)}"
        self._build(name, self.compiler.compile(candidate).ir, candidate)
        try:
            timing = self._time(name) if timed else None
            probes = self._time_probes(name, labels, thread=candidate.source_text is not None) \
                if labels is None or labels else ()
            return Result(protocol.OK, timing=timing, probes=probes)
        finally:
            self._ask("drop", {"name": name}, self.request_timeout)

    def measure_again(self, candidate: Candidate, labels: Collection[str]) -> Result:
        """``candidate``, evaluated in full in another fresh process, timed again here: A/B
        against the baseline on the timed cases (a claim covers what two processes measure,
        see tuning/claims), and on the probes ``labels`` only (where it read slower there).
        A result whose ``timing`` and ``probes`` hold those, or the failure (a crash, a busy
        machine) that ended them."""
        try:
            return self._timed_alone(candidate, labels, timed=True)
        except Rejected as rejected:
            return rejected.result()
        except WorkerDied as died:
            self._kill()
            return died.result

    def _reference(self, configuration: dict) -> str:
        """The worker's variant to time side by side with a racing candidate: the best
        configuration so far, built as "reference" once per worker process; the baseline if
        it no longer builds."""
        best = Candidate(**{k: v for k, v in configuration.items() if k != "case_speedups"})
        identity = (best.key(), self.worker.pid)
        if self._reference_identity == identity:
            return "reference"
        try:
            compiled = self.compiler.compile(best)
            self._ask("build", {"name": "reference", "ir": compiled.ir,
                                "pipeline": {**self.spec.pipeline, **best.pipeline},
                                "tunables": {**self.spec.default_macros, **best.macros,
                                             **best.launch}}, self.request_timeout)
        except Rejected:
            return "baseline"
        self._reference_identity = identity
        return "reference"

    def _time(self, name: str, race_against: float | None = None,
              race_with: dict | None = None, cases: list[Case] | None = None,
              thread: bool = False) -> Timing:
        """Interleaved timing, then the buffers the timed runs used must hold right answers
        after as many launches in a row as a timed sample made (unless the candidate lost
        its race: it is never kept, so its buffers need no check). ``cases``: those instead
        of the judge's timed ones (a slow-path probe); ``thread``: the timed launches made
        from a thread other than the worker's main one."""
        timed = cases or self.judge.timed()
        seeds = [[{n: secrets.randbits(62) for n in case.output_only} for case in timed]
                 for _ in range(2)]
        guard_seed = secrets.randbits(40)
        indices = [self._index[id(case)] for case in timed]
        weights = [case.weight for case in timed]
        reference, scale = "baseline", 1.0
        if race_against is not None and race_with is not None and race_against > 1.0:
            reference = self._reference(race_with)
            scale = race_against if reference == "reference" else 1.0
        _, data, arrays = self._ask("time", {
            "variant": name, "cases": indices, "guard_seed": guard_seed,
            "reference": reference,
            "race_against": None if race_against is None else race_against / scale,
            "checks": [[case.fills(s) for case, s in zip(timed, parity, strict=True)]
                       for parity in seeds], "weights": weights,
            "restore": [in_place(case) for case in timed],
            "budget": TIMING_SHARE * self.request_timeout,
            # a probe asks whether the candidate is far slower: the fewest rounds do, and
            # the first round that reads not slower ends it (see probes.clear_of)
            "rounds": None if cases is None else self.settings.min_timing_rounds,
            "clear_of": None if cases is None else probes.clear_of(),
            "warmup": None if cases is None else probes.WARMUP_ROUNDS,
            "thread": thread},
            self.request_timeout)
        try:
            timing = Timing.from_dict(data.get("timing"), weights)
        except MalformedTiming as exc:
            raise WorkerDied(Result(protocol.CRASH, diagnostics=[
                f"the worker sent {exc}"], details={"kind": "protocol"})) from None
        # production's layouts: the worse
        timing = timing.on_worse_layout(layout.timed_layouts(self.settings.timed_heap_order))
        if reference != "baseline":
            per_case = list((race_with or {}).get("case_speedups") or [])
            timing = timing.against_baseline(scale, per_case if len(per_case) == len(timed)
                                             else None)
        if cases is not None:  # a probe: its label says what it was timed on
            pass
        elif any(c.origin == "workload" for c in timed):  # the report gives each one's speedup
            timing = timing.on("workloads", [
                Workload(case.recording.key, case.recording.workload["origin"],
                         case.recording.shape_signature) for case in timed])
        else:
            timing = timing.on("test inputs")
        if race_against is None and (timing.raced or timing.stopped in RACE_STOPS):
            raise WorkerDied(Result(protocol.CRASH, diagnostics=[
                "the worker stopped timing a candidate that was not racing"],
                details={"kind": "protocol"}))
        if timing.stopped == "too_busy":
            raise Rejected(protocol.TOO_BUSY, "too_busy", too_busy(timing),
                           dropped=timing.dropped, taken=timing.taken)
        if self.device_facts is not None:
            timing = timing.on_device(device_conditions(
                self.device_facts, timing, timed, data.get("clocks"), self.work))
            if timing.suspect:
                raise Rejected(protocol.SUSPECT, "speed_of_light", timing.suspect,
                               timing=timing.as_dict())
        if timing.raced:  # a loser's buffers are not checked: it is never kept
            return timing
        which = arrays.get("set")
        if which is None or which.shape != (1,) or int(which[0]) not in (0, 1):
            raise WorkerDied(Result(protocol.CRASH, diagnostics=[
                "the worker did not say which buffers it checked"], details={"kind": "protocol"}))
        # a device times launches on its own copies of the buffers: the host's hold no
        # timed launch's outputs, so what timing worked on is checked on the CPU only
        host_timed = get_backend(self.spec.backend).cpu_clock != "none"
        for position, case in enumerate(timed):
            if host_timed:
                written = [n for n, slot in enumerate(case.slots) if slot.written]
                self.judge.check_timed(
                    case, {n: arrays.get(f"{position}.{n}.timed") for n in written},
                    {n: arrays.get(f"{position}.{n}.timed_base") for n in written})
            for parity in (0, 1):
                storages = {str(n): arrays.get(f"{position}.{n}.{parity}")
                            for n in range(len(case.slots))}
                self.judge.check_run(
                    case, ({}, storages),
                    guard_seed + 1000 * (int(which[0]) + 1) + indices[position],
                    seeds[parity][position], kind="timed_output",
                    what="repeated launches on the buffers of the timed runs (laid out as "
                         "numpy allocates them: the production layout), on ",
                    check_return=False, plain=True)
        return timing

    def ping(self) -> bool:
        try:
            return self._ask("ping", {}, 30)[0] == "pong"
        except (WorkerDied, Rejected):
            return False


def too_busy(timing: Timing) -> str:
    """The one line a timing that could not be taken gives, instead of a figure."""
    return (f"the machine was too busy to measure: {timing.dropped} of {timing.taken} timed "
            f"slices lost the CPU to other processes (wall time beyond the thread's CPU "
            f"time), and {timing.rounds} round(s) were clean; no figure is claimed. Run "
            "again on a quieter machine (fewer parallel jobs).")


def device_conditions(facts: DeviceFacts, timing: Timing, timed: list[Case], clocks: object,
                      work=None) -> DeviceTiming:
    """The GPU conditions of ``timing``: the facts the worker gave before any candidate ran
    in it, the clocks it read as the timing ended, and the speed-of-light check, computed
    here on each case's bytes (:func:`case_bytes`) and each measured per-launch median (the
    baseline's only when measured against it, not scaled from the best so far)."""
    moved, source = case_bytes(timed, work)
    per_launch, bytes_of = [], []
    for number, (case, piece) in enumerate(zip(timed, timing.cases, strict=True)):
        sides = [("the candidate", piece.candidate_median)]
        if timing.direct:
            sides.append(("the baseline", piece.baseline_median))
        for who, seconds in sides:
            per_launch.append((f"{who} on timed case {number + 1} ({case.label})", seconds))
            bytes_of.append(moved[number])
    return DeviceTiming(facts, Clocks.from_dict(clocks), facts.flush_bytes,
                        bytes_moved=tuple(moved), bytes_source=source,
                        suspect=speed_of_light(per_launch, bytes_of, facts.peak_bandwidth,
                                               source))


def case_bytes(timed: list[Case], work=None) -> tuple[list[float], str]:
    """Bytes each timed case's launch moves, and from where: the kernel's ``work=`` on the
    case's recording where declared and it answers for every case, else the sizes of the
    case's buffers (each once: what a kernel reading its inputs and writing its outputs
    once moves at least)."""
    if work is not None and all(case.recording is not None for case in timed):
        try:
            moved = [float(work({**case.recording.inputs, **case.recording.scalars})["bytes"])
                     for case in timed]
            if all(m > 0 for m in moved):
                return moved, "work="
        except Exception:  # the user's function: the buffer sizes serve instead
            pass
    return [float(case.nbytes) for case in timed], "buffer sizes"


def in_place(case: Case) -> list[int]:
    """The buffers ``case`` writes and also reads: restored between timed launches."""
    return [n for n, slot in enumerate(case.slots)
            if slot.written and n not in case.output_only]
