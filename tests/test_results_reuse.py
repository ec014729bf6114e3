"""Stored results are reused only when they can stand for a new measurement: the same
seed, not measured under contention, not --r3-retune; and they keep their raw samples and
dropped counts. Real pytest runs of a small project (pytester, in a subprocess)."""

from __future__ import annotations

import json

from conftest import new_evaluations, r3_tune


def stored_lines(project) -> list[dict]:
    (path,) = (project.path / ".r3" / "results" / project.name).glob("*.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_stored_results_keep_their_raw_samples_dropped_counts_and_seed(order_project):
    result = r3_tune(order_project)
    assert result.ret == 0, result.stdout.str()
    lines = stored_lines(order_project)
    assert lines
    for entry in lines:
        assert entry["seed"] == 0
        timing = entry["result"]["timing"]
        assert timing["baseline_samples"] and timing["candidate_samples"]
        assert timing["taken"] >= len(timing["baseline_samples"]) * 2
        assert 0 <= timing["dropped"] <= timing["taken"]


def test_stored_results_measured_under_contention_are_measured_again(order_project):
    first = r3_tune(order_project)
    assert first.ret == 0, first.stdout.str()
    (path,) = (order_project.path / ".r3" / "results" / order_project.name).glob("*.jsonl")
    noisy = []
    for entry in stored_lines(order_project):  # as if the worker had lost its core nearly
        timing = entry["result"]["timing"]      # always (19 slices in 20 dropped)
        timing["dropped"], timing["taken"] = 19 * timing["taken"], 20 * timing["taken"]
        noisy.append(json.dumps(entry))
    path.write_text("\n".join(noisy) + "\n")
    again = r3_tune(order_project)
    assert again.ret == 0, again.stdout.str()
    assert new_evaluations(again, order_project.name) == len(noisy)
    assert new_evaluations(r3_tune(order_project), order_project.name) == 0


def test_another_seed_measures_again_and_the_same_seed_reuses(order_project):
    first = r3_tune(order_project)
    assert first.ret == 0, first.stdout.str()
    assert new_evaluations(first, order_project.name) == 2
    other = r3_tune(order_project, "--r3-seed", "7")
    assert other.ret == 0, other.stdout.str()
    assert new_evaluations(other, order_project.name) == 2
    assert {entry["seed"] for entry in stored_lines(order_project)[-2:]} == {7}
    same = r3_tune(order_project, "--r3-seed", "7")
    assert new_evaluations(same, order_project.name) == 0


def test_retune_measures_stored_results_again(order_project):
    assert r3_tune(order_project).ret == 0
    again = r3_tune(order_project, "--r3-retune")
    assert again.ret == 0, again.stdout.str()
    assert new_evaluations(again, order_project.name) == 2
