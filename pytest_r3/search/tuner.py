"""The inner search loop: Nevergrad proposes, replay workers evaluate, the store remembers.

Candidates are evaluated as workers free up and told back in the order asked, each asked
only after the one a window before it was told, so a run with the same seed asks the same
sequence again; together with the result store this is what lets an interrupted run resume
without repeating an evaluation.
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from queue import Queue

from ..errors import R3Error
from ..replay import interrupt
from ..replay.protocol import INVALID, OK, Candidate, Result, Status
from ..replay.statistics import NOISE_FLOOR
from .parametrization import SearchSpace
from .results import ResultStore, configuration_key

FAILURE_LOSS = 10.0
IN_FLIGHT_TRIES = 8  # asks past points being evaluated before waiting for a result
CONFIRMATION_DROP = 0.25  # a confirmed speedup this far below the search's is measured again


class BudgetError(R3Error, ValueError):
    pass


@dataclass(frozen=True)
class Budget:
    """How much search per kernel: a number of evaluations and/or wall-clock seconds."""

    evaluations: int | None = None
    seconds: float | None = None

    @classmethod
    def parse(cls, text: str | int) -> Budget:
        text = str(text).strip().lower()
        if re.fullmatch(r"\d+", text):
            if int(text) < 1:
                raise BudgetError(f"budget {text!r}: need at least 1 evaluation")
            return cls(evaluations=int(text))
        match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(s|m|h)", text)
        if match:
            seconds = float(match.group(1)) * {"s": 1, "m": 60, "h": 3600}[match.group(2)]
            return cls(seconds=seconds)
        raise BudgetError(f"budget {text!r} is neither a number of evaluations (200) nor a "
                          "duration (90s, 5m, 1h)")

    def exhausted(self, evaluations: int, elapsed: float) -> bool:
        if self.evaluations is not None and evaluations >= self.evaluations:
            return True
        return self.seconds is not None and elapsed >= self.seconds

    def describe(self) -> str:
        return (f"{self.evaluations} evaluations" if self.evaluations is not None
                else f"{self.seconds:g} s")


@dataclass
class Step:
    """One evaluation as the search saw it (for convergence plots and resumption stats)."""

    index: int
    key: str
    status: Status
    loss: float
    speedup: float | None
    cached: bool
    raced: bool = False  # lost its race: timed briefly, verified on the smallest recording
    direct: bool = True  # timed against the baseline itself (not scaled from the best's)


@dataclass
class Outcome:
    kernel: str
    optimizer: str
    budget: Budget
    steps: list[Step] = field(default_factory=list)
    best_candidate: Candidate | None = None
    best_result: Result | None = None
    baseline_result: Result | None = None
    new_evaluations: int = 0
    seconds: float = 0.0
    candidates: list[Candidate] = field(default_factory=list)
    confirmations: list[tuple[Candidate, Result]] = field(default_factory=list)
    exhausted: bool = False

    @property
    def evaluations(self) -> int:
        return len(self.steps)

    def convergence(self) -> list[float]:
        """Best speedup so far after each evaluation."""
        best, curve = 1.0, []
        for step in self.steps:
            if step.speedup is not None and step.status == OK:
                best = max(best, step.speedup)
            curve.append(best)
        return curve

    def evaluations_to_within(self, fraction: float = 0.05) -> int | None:
        curve = self.convergence()
        if not curve:
            return None
        final = curve[-1]
        for index, value in enumerate(curve, start=1):
            if value >= final * (1 - fraction):
                return index
        return len(curve)


class _Enumeration:
    """Asks every valid setting of a tunables-only space once, ``start`` first, in the
    order the kernel declares its values; tells change nothing. Sets ``exhausted`` on the
    outcome once all were asked."""

    @dataclass
    class Point:
        value: dict

    def __init__(self, space: SearchSpace, start: dict, outcome: Outcome) -> None:
        first = dict(start["macros"])
        self.values = [first, *(v for v in space.tuning.iter_valid() if v != first)]
        self.outcome = outcome

    def ask(self) -> _Enumeration.Point:
        value = self.values.pop(0)
        self.outcome.exhausted = not self.values
        return self.Point({"macros": value})

    def tell(self, point, loss: float) -> None:
        pass


@dataclass
class _Pending:
    """A point asked and not yet told, and its evaluation (None: invalid, nothing to run)."""

    point: object
    candidate: Candidate
    key: str
    future: Future | None


def _fields(configuration) -> dict:
    return {"macros": configuration.macros, "pipeline": configuration.pipeline,
            "source_text": configuration.source_text, "launch": configuration.launch}


def loss_of(result: Result) -> float:
    if not result.ok or result.timing is None:
        return FAILURE_LOSS
    return 1.0 / max(result.timing.speedup, 1e-9)


class Tuner:
    """Searches one kernel's space on a pool of replay servers."""

    def __init__(self, kernel: str, source_hash: str, space: SearchSpace, servers: list,
                 store: ResultStore, *, optimizer: str = "NGOpt", seed: int = 0,
                 budget: Budget = Budget(evaluations=100),
                 progress: Callable[[Outcome], None] | None = None,
                 confirm_top: int = 3, max_repeats: int = 200,
                 source_text: str | None = None, remeasure: bool = False,
                 band: float = NOISE_FLOOR, baseline: Result | None = None) -> None:
        import nevergrad as ng

        if optimizer not in ng.optimizers.registry:
            close = sorted(n for n in ng.optimizers.registry if optimizer.lower()[:4] in n.lower())
            raise R3Error(f"unknown Nevergrad optimizer {optimizer!r}"
                          + (f"; similar: {', '.join(close[:8])}" if close else "")
                          + "; e.g. NGOpt, TwoPointsDE, PortfolioDiscreteOnePlusOne, "
                          "RandomSearch")
        self.kernel = kernel
        self.source_hash = source_hash
        self.space = space
        self.servers = servers
        self.store = store
        self.optimizer_name = optimizer
        self.seed = seed
        self.budget = budget
        self.progress = progress
        self.confirm_top = confirm_top
        self.max_repeats = max_repeats
        self.source_text = source_text  # a rewrite whose settings are searched
        self.remeasure = remeasure  # --r3-retune: no stored result is reused
        self.band = band  # this machine's noise band for the kernel (from an A/A run)
        # that A/A run's result: the baseline evaluated (verified and timed) in full in
        # this run, which the search's starting point would only measure again
        self.baseline = baseline if baseline is not None and baseline.ok else None

    def _evaluate_one(self, candidate: Candidate) -> tuple[Result, bool]:
        """(result, came from the store) for ``candidate``, on the first free server."""
        key = configuration_key(self.source_hash, candidate.key())
        stored = None if self.remeasure else self.store.reusable(key, self.seed)
        if stored is not None:
            return stored, True
        if self.baseline is not None and candidate.key() == Candidate().key() \
                and self.source_text is None:
            result = Result.from_dict(self.baseline.as_dict())
            result.label = candidate.label
            self.store.add(key, candidate.unraced().as_dict(), result.as_dict(), self.seed)
            return result, False
        server = self._free.get()
        try:
            result = server.evaluate(candidate)
        finally:
            self._free.put(server)
        interrupt.check()  # a result finished as Ctrl-C stopped the workers is not kept
        self.store.add(key, candidate.unraced().as_dict(), result.as_dict(), self.seed)
        return result, False

    def run(self) -> Outcome:
        """Search within the budget, then confirm the best configurations.

        When both the kernel's own tunables and the pipeline are searched, the tunables go
        first, alone, on up to half the budget (exhaustively if they are few): they are what
        the kernel's author thought mattered, and in the joint space an optimiser spends
        most of a small budget on pipeline flags. The pipeline search then starts from the
        best tunable values.
        """
        outcome = Outcome(self.kernel, self.optimizer_name, self.budget)
        started = time.perf_counter()
        self._free: Queue = Queue()
        self._case_speedups: dict[str, list[float]] = {}  # per timed case, measured directly
        for server in self.servers:
            self._free.put(server)
        losses: dict[str, float] = {}  # configurations seen in this run, by key
        values: dict[str, dict] = {}
        if not self.space.tune_pipeline and not self.space.tuning.tunables:
            self._evaluate_only(outcome)  # nothing to search: measure the starting point
        elif self.space.tune_pipeline and self.space.tuning.tunables:
            own = SearchSpace(self.space.tuning, self.space.baseline_pipeline,
                              tune_pipeline=False, codegen=self.space.codegen)
            size = sum(1 for _ in self.space.tuning.iter_valid(limit=100_000))
            share = None
            if self.budget.evaluations is not None:
                share = min(size, max(1, self.budget.evaluations // 2))
            seconds = None if self.budget.seconds is None else self.budget.seconds / 2
            self._search(own, Budget(share, seconds), outcome, losses, values, started, None,
                         every=share == size)
            best = min((k for k in values if k in losses), key=losses.__getitem__, default=None)
            start = values[best]["macros"] if best else None
            outcome.exhausted = False
            self._search(self.space, self.budget, outcome, losses, values, started, start)
        else:
            every = not self.space.tune_pipeline and self.budget.evaluations is not None \
                and sum(1 for _ in self.space.tuning.iter_valid(limit=self.budget.evaluations
                                                               + 1)) <= self.budget.evaluations
            self._search(self.space, self.budget, outcome, losses, values, started, None,
                         every=every)
        self._confirm(outcome)
        outcome.seconds = time.perf_counter() - started
        return outcome

    def _evaluate_only(self, outcome: Outcome) -> None:
        candidate = Candidate(source_text=self.source_text, label=f"{self.kernel} #1")
        key = configuration_key(self.source_hash, candidate.key())
        result, cached = self._evaluate_one(candidate)
        outcome.new_evaluations += 0 if cached else 1
        outcome.candidates.append(candidate)
        outcome.steps.append(Step(1, key, result.status, loss_of(result), result.speedup,
                                  cached))
        if self.source_text is None and result.ok:
            outcome.baseline_result = result

    def _search(self, space: SearchSpace, budget: Budget, outcome: Outcome,
                losses: dict[str, float], values: dict[str, dict], started: float,
                start_macros: dict | None, every: bool = False) -> None:
        """Ask, evaluate and tell through a window of ``2 x workers`` candidates in flight.

        With ``every`` (a tunables-only space no larger than the budget) every valid setting
        is evaluated, the starting point first, instead of asking an optimizer: it would
        spend the budget re-proposing known points, one at a time.

        A worker takes the next candidate as soon as it is free (a candidate that loses its
        race early does not wait for a slow neighbour), but answers are told in the order
        asked, and a new candidate is asked only once the one ``window`` places before it
        is told: what the optimizer knows at each ask depends on results only, never on
        which evaluation finished first, so the same seed and stored results ask the same
        sequence again (an interrupted or repeated run re-evaluates nothing).
        """
        import nevergrad as ng

        window = 2 * len(self.servers)
        parametrization = space.parametrization(self.seed, start_macros)
        if every:
            optimizer = _Enumeration(space, parametrization.value, outcome)
        else:
            optimizer = ng.optimizers.registry[self.optimizer_name](
                parametrization=parametrization, budget=budget.evaluations or 100_000,
                num_workers=window)
            optimizer.suggest(parametrization.value)  # the starting point goes first
        first = len(outcome.steps)
        in_flight: deque[_Pending] = deque()

        def spent() -> bool:
            elapsed = time.perf_counter() - started
            asked = len(outcome.steps) - first + len(in_flight)
            return (outcome.exhausted or budget.exhausted(asked, elapsed)
                    or self.budget.exhausted(first + asked, elapsed))

        with ThreadPoolExecutor(max_workers=len(self.servers)) as executor:
            try:
                while True:
                    while len(in_flight) < window and not spent():
                        pending = self._ask(optimizer, space, outcome, losses, in_flight,
                                            executor)
                        if pending is None:  # it proposes only points in flight: wait
                            break
                        in_flight.append(pending)
                    if not in_flight:
                        return
                    self._tell(optimizer, in_flight.popleft(), outcome, losses, values)
                    if self.progress:
                        self.progress(outcome)
            except BaseException:
                executor.shutdown(wait=True, cancel_futures=True)
                raise

    def _ask(self, optimizer, space: SearchSpace, outcome: Outcome, losses: dict[str, float],
             in_flight: deque, executor) -> _Pending | None:
        """The optimizer's next new point, its evaluation started (an invalid one has none).

        A point known already is told its loss at once and costs no budget; after
        ``max_repeats`` of those in a row the space counts as exhausted. A point being
        evaluated is asked past (an optimizer mutating one parent proposes it again and
        again until told), up to ``IN_FLIGHT_TRIES`` times; then None: wait for a result.
        """
        repeats = tries = 0
        while True:
            point = optimizer.ask()
            candidate = space.decode(point.value,
                                     f"{self.kernel} #{len(losses) + len(in_flight) + 1}")
            if self.source_text is not None:
                candidate = replace(candidate, source_text=self.source_text)
            key = configuration_key(self.source_hash, candidate.key())
            if key in losses:
                optimizer.tell(point, losses[key])
                repeats += 1
                if repeats >= self.max_repeats:
                    outcome.exhausted = True  # the optimizer only proposes known points
                if outcome.exhausted:
                    return None
            elif any(p.key == key for p in in_flight):
                tries += 1
                if tries >= IN_FLIGHT_TRIES:
                    return None
            else:
                break
        if not space.is_valid(point.value):
            return _Pending(point, candidate, key, None)
        # a candidate clearly slower than the best told so far stops timing early (racing),
        # timed side by side with that best; the finalists are measured in full again, against
        # the baseline, when confirmed
        best = max(((step.speedup, told) for step, told in zip(outcome.steps, outcome.candidates)
                    if step.status == OK and step.speedup and step.direct),
                   key=lambda pair: pair[0], default=(1.0, None))
        race_with = None
        if best[0] > 1.0:  # with its per-case speedups: each timed case is scaled by its own
            race_with = {**_fields(best[1].configuration()),
                         "case_speedups": self._case_speedups.get(best[1].key(), [])}
        racing = replace(candidate, race_against=max(1.0, best[0]), race_with=race_with)
        return _Pending(point, candidate, key, executor.submit(self._evaluate_one, racing))

    def _tell(self, optimizer, pending: _Pending, outcome: Outcome, losses: dict[str, float],
              values: dict[str, dict]) -> None:
        result, cached = (pending.future.result() if pending.future is not None
                          else (Result(INVALID), True))
        candidate, key = pending.candidate, pending.key
        loss = losses[key] = loss_of(result)
        values[key] = pending.point.value
        optimizer.tell(pending.point, loss)
        outcome.new_evaluations += 0 if cached else 1
        outcome.candidates.append(candidate)
        timing = result.timing
        if result.ok and timing is not None and timing.cases and timing.direct:
            self._case_speedups[candidate.key()] = [c.speedup for c in timing.cases]
        outcome.steps.append(Step(len(outcome.steps) + 1, key, result.status, loss,
                                  result.speedup, cached,
                                  timing is not None and timing.raced,
                                  timing is None or timing.direct))
        if not candidate.macros and not candidate.pipeline \
                and candidate.source_text is None \
                and outcome.baseline_result is None and result.status != INVALID:
            outcome.baseline_result = result

    def _confirm(self, outcome: Outcome) -> None:
        """Re-measure the best few alone, one at a time, and keep the best confirmed one.

        During the search workers time candidates side by side and a lucky measurement can
        look like a win, and a candidate that lost its race was verified on the smallest
        recording only; the confirmation runs have the machine to themselves and check
        everything. A finalist counts only when its whole interval lies above the noise
        band (``band``); the winner is confirmed once more by the caller, in a fresh
        worker process, before anything is claimed.
        """
        ranked: dict[str, tuple[float, Candidate]] = {}
        direct: dict[str, tuple[float, Candidate]] = {}
        for step, candidate in zip(outcome.steps, outcome.candidates):
            if step.status == OK and (candidate.macros or candidate.pipeline
                                        or candidate.source_text is not None):
                ranked.setdefault(step.key, (step.loss, candidate))
                if step.direct and not step.raced:
                    direct.setdefault(step.key, (step.loss, candidate))
        # the best speedup measured against the baseline itself is always a finalist: the
        # best of many estimates scaled from it (ties, stopped early) tends to read high
        first = [min(direct.items(), key=lambda item: item[1][0])] if direct else []
        rest = sorted(((k, v) for k, v in ranked.items() if not first or k != first[0][0]),
                      key=lambda item: item[1][0])
        finalists = [pair for _, pair in [*first, *rest]][: self.confirm_top]
        outcome.best_candidate, outcome.best_result = None, None
        best_speedup = 1.0
        for loss, candidate in finalists:  # unraced: verified in full and timed in full
            result = self.servers[0].evaluate(candidate.unraced())
            outcome.confirmations.append((candidate, result))
            if result.ok and result.timing and \
                    result.timing.speedup * loss < 1 - CONFIRMATION_DROP:
                # far below what the search measured: a busy moment of a shared machine
                # slows a whole confirmation; it is measured once more, and that one stands
                result = self.servers[0].evaluate(candidate.unraced())
                outcome.confirmations.append((candidate, result))
            timing = result.timing
            if result.ok and timing is not None and timing.verdict(self.band) == "faster" \
                    and timing.speedup > best_speedup:
                best_speedup = timing.speedup
                outcome.best_candidate, outcome.best_result = candidate, result
