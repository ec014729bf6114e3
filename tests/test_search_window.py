"""The search loop's scheduling: evaluations start as workers free up, answers are told in
the order asked.

The servers here are stand-ins with a known speedup per configuration and a chosen time per
evaluation: what is checked is the Tuner's scheduling (which candidate runs when, what the
optimizer is told), so real replay servers would only add noise. Real servers drive the
Tuner in test_tune.py and test_specialize.py.
"""

from __future__ import annotations

import hashlib
import time

import pytest

import pytest_r3 as r3
from pytest_r3.replay.measurement import Timing
from pytest_r3.replay.protocol import OK, Candidate, Result
from pytest_r3.search.parametrization import SearchSpace
from pytest_r3.search.results import ResultStore
from pytest_r3.search.tuner import Budget, Tuner

SOURCE = "void k(int n, float *x) { for (int i = 0; i < n; ++i) x[i] = A + B; }\n"


def speedup_of(macros: dict) -> float:
    """A fixed landscape: best (2x) at A=5, B=2; the start (A=0, B=0) is 0.83x."""
    return 2.0 / (1 + 0.2 * (abs(macros.get("A", 0) - 5) + abs(macros.get("B", 0) - 2)))


class StandInServer:
    """Answers with the landscape's speedup after ``seconds(candidate)``; logs what ran."""

    def __init__(self, name: str, seconds, log: list) -> None:
        self.name, self.seconds, self.log = name, seconds, log

    def evaluate(self, candidate) -> Result:
        began = time.perf_counter()
        time.sleep(self.seconds(candidate))
        self.log.append((self.name, candidate.key(), began, time.perf_counter(),
                         candidate.race_against, candidate.race_with))
        speedup = speedup_of({**{"A": 0, "B": 0}, **candidate.macros})
        return Result(OK, timing=measured(speedup))


def measured(speedup: float, **fields) -> Timing:
    """A timing whose five rounds all give ``speedup``."""
    return Timing.from_samples([speedup * 1e-3] * 5, [1e-3] * 5, **fields)


def space(tmp_path) -> SearchSpace:
    (tmp_path / "k.c").write_text(SOURCE)
    kernel = r3.kernel(tmp_path / "k.c", entry="k", name=f"k_{tmp_path.name}",
                       tune={"A": list(range(8)), "B": list(range(8))},
                       defaults={"A": 0, "B": 0})
    return SearchSpace(kernel.space, kernel.pipeline, tune_pipeline=False)


def tune(tmp_path, folder: str, seconds, budget: int = 24, baseline: Result | None = None):
    log: list = []
    servers = [StandInServer(f"worker{n}", seconds, log) for n in range(2)]
    store = ResultStore(tmp_path / folder, "k", "cpu")
    outcome = Tuner("k", "hash", space(tmp_path), servers, store, seed=3,
                    budget=Budget(evaluations=budget), confirm_top=1, baseline=baseline).run()
    return outcome, log


def digest(candidate_key: str) -> int:
    return int(hashlib.sha256(candidate_key.encode()).hexdigest(), 16)


def test_the_same_results_ask_the_same_sequence_whichever_evaluation_ends_first(tmp_path):
    """Two runs whose evaluations take very different times (so they finish in other
    orders) ask the same configurations in the same order and find the same best."""
    first, first_log = tune(tmp_path, "one", lambda c: 0.001 + (digest(c.key()) % 5) * 0.004)
    second, second_log = tune(tmp_path, "two",
                              lambda c: 0.021 - (digest(c.key()) % 5) * 0.004)
    assert [s.key for s in first.steps] == [s.key for s in second.steps]
    assert first.best_candidate == second.best_candidate
    searched = [key for _, key, _, _, race, _ in first_log if race is not None]
    assert len(searched) == len(set(searched)) == first.new_evaluations  # none twice
    assert second_log


def test_a_free_worker_does_not_wait_for_a_slow_neighbour(tmp_path):
    """While one evaluation takes long, the other worker goes on through the next ones, as
    many as the window holds (2 workers: 4 in flight, so 3 beside the slow one). Evaluations
    asked in pairs used to wait for the slower of the two."""
    seen: list[str] = []

    def seconds(candidate) -> float:
        if candidate.key() not in seen:
            seen.append(candidate.key())
        return 0.6 if seen.index(candidate.key()) == 4 else 0.02

    outcome, log = tune(tmp_path, "slow", seconds, budget=16)
    slow = next(entry for entry in log if entry[1] == seen[4])
    during = [entry for entry in log if entry[0] != slow[0]
              and slow[2] < entry[2] and entry[3] < slow[3]]
    assert len(during) >= 3, log
    assert outcome.evaluations == 16


def test_candidates_race_against_the_best_speedup_told_before_they_were_asked(tmp_path):
    """Each is raced against, and timed beside, the best configuration told so far."""
    outcome, log = tune(tmp_path, "race", lambda c: 0.002)
    searched = [entry for entry in log if entry[4] is not None]
    assert searched and all(entry[4] >= 1.0 for entry in searched)
    assert max(entry[4] for entry in searched) > 1.0  # the incumbent moved up
    for *_, race_against, race_with in searched:  # timed beside the configuration it names
        if race_against > 1.0:
            assert speedup_of({"A": 0, "B": 0, **race_with["macros"]}) == race_against
        else:
            assert race_with is None
    confirmations = [entry for entry in log if entry[4] is None]
    assert len(confirmations) == 1  # the finalist, unraced


def test_a_confirmation_far_below_the_search_is_measured_once_more_and_the_repeat_stands(
        tmp_path):
    """A busy moment can slow a whole confirmation: a finalist confirmed at less than 3/4 of
    the speedup the search measured is evaluated again, and the second figure is the one
    kept (not the better of the two)."""
    confirmations: list[float] = []

    class Disturbed(StandInServer):
        def evaluate(self, candidate) -> Result:
            result = super().evaluate(candidate)
            if candidate.race_against is None:  # a confirmation: the first one is disturbed
                factor = 0.5 if not confirmations else 0.97
                result.timing = measured(result.speedup * factor)
                confirmations.append(result.speedup)
            return result

    log: list = []
    servers = [Disturbed(f"worker{n}", lambda c: 0.001, log) for n in range(2)]
    outcome = Tuner("k", "hash", space(tmp_path), servers, ResultStore(tmp_path / "d", "k", "cpu"),
                    seed=3, budget=Budget(evaluations=24), confirm_top=1).run()
    searched = min(step.loss for step in outcome.steps if step.status == "ok")
    assert len(outcome.confirmations) == 2 == len(confirmations)
    assert outcome.best_result.speedup == confirmations[1] == pytest.approx(0.97 / searched)


def test_the_best_speedup_measured_against_the_baseline_is_always_a_finalist(tmp_path):
    """Candidates timed beside the best so far get scaled estimates; the highest of many such
    estimates reads high. Three of them must not push the best baseline-measured candidate
    out of the confirmations."""

    class Scaling(StandInServer):
        def evaluate(self, candidate) -> Result:
            result = super().evaluate(candidate)
            if candidate.race_with is not None:  # scaled, and reading 30% high
                result.timing = measured(result.speedup * 1.3, basis="best_so_far",
                                         scaled_by=candidate.race_against)
            return result

    log: list = []
    servers = [Scaling(f"worker{n}", lambda c: 0.001, log) for n in range(2)]
    outcome = Tuner("k", "hash", space(tmp_path), servers, ResultStore(tmp_path / "s", "k", "cpu"),
                    seed=3, budget=Budget(evaluations=24), confirm_top=3).run()
    direct = [(step.speedup, candidate) for step, candidate in
              zip(outcome.steps, outcome.candidates) if step.direct and candidate.macros]
    scaled = [step for step in outcome.steps if not step.direct]
    assert len(scaled) >= 3, "the landscape should give scaled estimates to rank above it"
    best_direct = max(direct, key=lambda pair: pair[0])[1]
    assert outcome.confirmations[0][0] == best_direct


def test_the_baseline_measured_by_the_a_a_run_is_not_evaluated_again_by_the_search(tmp_path):
    """The search starts at the baseline, which the noise band's A/A run has just verified
    and timed in full on the same servers: its result stands for the starting point (told,
    stored, the baseline's row) instead of a second evaluation of the same build."""
    aa = Result(OK, label="k A/A (the baseline against itself)", timing=measured(1.0))
    outcome, log = tune(tmp_path, "aa", lambda c: 0.002, budget=8, baseline=aa)
    baseline = Candidate().key()
    assert all(key != baseline for _, key, *_ in log), log
    assert outcome.candidates[0].key() == baseline  # still the starting point, told 1.0x
    assert outcome.steps[0].speedup == pytest.approx(1.0)
    assert outcome.baseline_result.timing.speedup == pytest.approx(1.0)
    assert outcome.new_evaluations == 8 and len(log) == 7 + 1  # 7 searched, 1 confirmed
    # without it (or when the A/A run failed) the search measures the baseline itself
    _, again = tune(tmp_path, "no-aa", lambda c: 0.002, budget=8,
                    baseline=Result("too_busy", label="k A/A"))
    assert any(key == baseline for _, key, *_ in again), again
