"""Timing that a busy machine cannot inflate: descheduled samples are dropped, a machine too
busy to measure says so, and the figures come with an interval.

A real kernel runs in a real worker process; the worker is stopped (SIGSTOP) and resumed
(SIGCONT) from the test while it times, which is what losing the CPU to another process
looks like from inside: wall time passes, the thread's CPU time does not.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import threading
import time

import numpy as np
import pytest
from test_replay import axpy_launch, record_launches

import pytest_r3 as r3
from pytest_r3.record.store import RecordingStore
from pytest_r3.replay import Candidate, KernelSpec, ReplayServer, ReplaySettings
from pytest_r3.replay.counters import Counters
from pytest_r3.replay.statistics import band_from, ratio_interval, verdict

KERNEL_C = """\
void axpy2(long n, const float *x, const float *y, float *out)
{
    for (long i = 0; i < n; ++i) {
        out[i] = 2.0f * x[i] + y[i];
    }
}
"""


@pytest.fixture(scope="module")
def large(tmp_path_factory):
    """A kernel and one recording large enough that a launch takes about a millisecond."""
    folder = tmp_path_factory.mktemp("timing")
    (folder / "axpy2.c").write_text(KERNEL_C)
    kernel = r3.kernel(folder / "axpy2.c", entry="axpy2", name="timing_axpy2")
    store = RecordingStore(folder / "recordings")
    keys = record_launches(kernel, store, [axpy_launch(1_000_000, 1)])
    return KernelSpec.from_kernel(kernel), store, keys


class Stopper:
    """Stops a process for ``pause`` seconds every ``period`` seconds, from a thread."""

    def __init__(self, pid: int, period: float, pause: float) -> None:
        self.pid, self.period, self.pause = pid, period, pause
        self.stops = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._done.wait(self.period):
            try:
                os.kill(self.pid, signal.SIGSTOP)
                time.sleep(self.pause)
                os.kill(self.pid, signal.SIGCONT)
            except ProcessLookupError:  # the worker was replaced meanwhile
                return
            self.stops += 1

    def __enter__(self) -> Stopper:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._done.set()
        self._thread.join()


def test_a_sample_the_worker_was_stopped_in_is_dropped_and_the_result_unchanged(large):
    """A worker stopped for 150 ms in the middle of samples (a time slice lost, 100 times
    over) would put 150 ms into a sample of about 20: each such slice is dropped and
    counted, no kept sample carries the pause, and the baseline against itself stays near
    1x, at about the time an undisturbed timing measures (this machine is shared: the
    bounds leave room for its own noise, not for a pause)."""
    spec, store, keys = large
    settings = ReplaySettings(timing_rounds=12, min_timing_rounds=12, warmup_rounds=1,
                              min_sample_seconds=0.02)
    with ReplayServer(spec, store.root, keys, settings) as server:
        quiet = server.evaluate(Candidate(label="undisturbed"))
        with Stopper(server.pid, period=0.25, pause=0.15) as stopper:
            stopped = server.evaluate(Candidate(label="stopped while timing"))
    assert quiet.ok and stopped.ok, stopped.summary()
    assert stopper.stops >= 3
    timing = stopped.timing
    assert timing.dropped >= 1 and timing.taken > timing.dropped, timing
    for samples in (timing.baseline_samples, timing.candidate_samples):
        # a kept pause would make a sample 8x the others; a busy machine's spread is less
        assert max(samples) < 3 * float(np.median(samples)), samples
    assert 0.8 < timing.speedup < 1.25, stopped.summary()
    assert 0.5 < timing.baseline_median / quiet.timing.baseline_median < 2
    assert "of" in stopped.summary() and "dropped (descheduled)" in stopped.summary()


SPIN_C = """\
void spin(long n, const float *x, float *out)
{
    for (long i = 0; i < n; ++i) {
        float v = x[i];
        for (int k = 0; k < 2000; ++k) v = v * 0.999f + 0.001f;
        out[i] = v;
    }
}
"""


def test_a_machine_too_busy_to_measure_gives_that_status_and_no_figure(tmp_path):
    """When rounds keep losing their core beyond the retakes allowed, the evaluation is
    ``too_busy`` with one line saying so, never a speedup measured on the scheduler. The
    launches here last milliseconds, and the worker is stopped every 2 ms: none is clean
    (and none is timed by its CPU time, see the test of long launches below)."""
    (tmp_path / "spin.c").write_text(SPIN_C)
    kernel = r3.kernel(tmp_path / "spin.c", entry="spin", name="timing_spin")
    store = RecordingStore(tmp_path / "recordings")
    x = np.random.default_rng(0).random(4_000, dtype=np.float32)
    keys = record_launches(kernel, store, [(x.size, x, np.zeros_like(x))])
    settings = ReplaySettings(timing_rounds=5, warmup_rounds=1, min_sample_seconds=1e-4,
                              retakes_per_round=0.0, long_slice_seconds=60.0)
    with ReplayServer(KernelSpec.from_kernel(kernel), store.root, keys, settings) as server:
        with Stopper(server.pid, period=0.002, pause=0.002):
            busy = server.evaluate(Candidate(label="stopped all the time"))
        after = server.evaluate(Candidate(label="left alone"))
    assert busy.status == "too_busy" and busy.timing is None, busy.summary()
    assert busy.kind == "too_busy" and busy.details["dropped"] >= 3  # a whole sample
    assert busy.diagnostics[0].startswith("the machine was too busy to measure")
    assert "\n" not in busy.diagnostics[0]
    assert after.status in ("ok", "too_busy")  # the worker goes on serving


def test_a_timing_that_contention_drags_past_the_request_limit_is_too_busy(tmp_path):
    """Under heavy load, a timing outlived the request limit (300 s): the worker was
    killed and the baseline itself came out ``timeout``, a failed candidate. The worker
    now stops its rounds within its share of that limit and says the machine was too
    busy. Here the request limit is 4 s, the rounds asked for take about 3.5 s of CPU, and
    the worker is stopped half the time."""
    (tmp_path / "spin.c").write_text(SPIN_C)
    kernel = r3.kernel(tmp_path / "spin.c", entry="spin", name="timing_spin_late")
    store = RecordingStore(tmp_path / "recordings")
    x = np.random.default_rng(0).random(20_000, dtype=np.float32)  # ~50 ms a launch
    keys = record_launches(kernel, store, [(x.size, x, np.zeros_like(x))])
    settings = ReplaySettings(timing_rounds=15, min_timing_rounds=15, warmup_rounds=2,
                              derived_sizes=False, derived_inputs=False, reserve_inputs=0,
                              production_calls=2)
    with ReplayServer(KernelSpec.from_kernel(kernel), store.root, keys, settings,
                      request_timeout=4.0) as server:
        started = time.monotonic()
        with Stopper(server.pid, period=0.005, pause=0.005):
            busy = server.evaluate(Candidate(label="stopped half the time"))
        elapsed = time.monotonic() - started
    assert busy.status == "too_busy", busy.summary()
    assert busy.diagnostics[0].startswith("the machine was too busy to measure")
    assert elapsed < 30, elapsed


def test_long_launches_that_keep_losing_their_core_are_timed_by_their_cpu_time(tmp_path):
    """A launch of tens of milliseconds loses its core at least once on a busy machine
    (matmul at load 3: 634 of 666 slices dropped, 110 s for one evaluation; at load 12-17,
    past the request limit). Stopped every 6 ms here, no long slice is clean; each is
    timed by the thread's CPU time, so the baseline against itself still gives a figure
    near 1x and near what it measures undisturbed, with the count of such slices."""
    (tmp_path / "spin.c").write_text(SPIN_C)
    kernel = r3.kernel(tmp_path / "spin.c", entry="spin", name="timing_spin_long")
    store = RecordingStore(tmp_path / "recordings")
    x = np.random.default_rng(0).random(20_000, dtype=np.float32)  # ~50 ms a launch
    keys = record_launches(kernel, store, [(x.size, x, np.zeros_like(x))])
    settings = ReplaySettings(timing_rounds=6, min_timing_rounds=6, warmup_rounds=1,
                              retakes_per_round=2.0)
    with ReplayServer(KernelSpec.from_kernel(kernel), store.root, keys, settings) as server:
        quiet = server.evaluate(Candidate(label="undisturbed"))
        with Stopper(server.pid, period=0.006, pause=0.003) as stopper:
            stopped = server.evaluate(Candidate(label="stopped while timing"))
    assert quiet.ok and stopped.ok, stopped.summary()
    assert stopper.stops >= 20
    timing = stopped.timing
    assert timing.rounds == 6 and timing.cpu_timed >= 6, timing
    assert 0.8 < timing.speedup < 1.25, stopped.summary()
    assert 0.7 < timing.baseline_median / quiet.timing.baseline_median < 1.4
    assert "timed by its CPU time" in stopped.summary()


def test_the_interval_is_distribution_free_and_the_verdict_needs_all_of_it():
    """With 15 rounds the interval runs from the 4th to the 12th ratio in order; a claim
    needs its whole interval beyond the band, and a band learned from an A/A timing is
    how far that one's interval reached from 1."""
    base = [1.0] * 15
    cand = [1 / r for r in (0.9, 0.95, 0.97, 0.98, 0.99, 1.0, 1.0, 1.01, 1.01, 1.02, 1.03,
                            1.04, 1.1, 1.3, 3.0)]
    low, high = ratio_interval(base, cand)
    assert (low, high) == pytest.approx((0.98, 1.04))  # the outliers do not reach it
    assert verdict((low, high)) == "within"
    assert band_from((low, high)) == pytest.approx(0.04)
    assert verdict((1.05, 1.2), band=0.04) == "faster"
    assert verdict((1.03, 1.2), band=0.04) == "within"
    assert ratio_interval([1.0] * 5, [0.5, 0.9, 1.0, 1.1, 2.0]) == pytest.approx((0.5, 2.0))


def test_hardware_counters_are_used_where_they_open_and_their_absence_is_said_once():
    """These virtual machines have no PMU: the counters say why in one sentence and time
    without them. Where they open, they count this thread's user-mode work."""
    counters = Counters()
    try:
        if not counters.available:
            assert counters.reason.startswith("no hardware counters (perf_event_open: ")
            assert counters.read() == (0, 0)
            return
        before = counters.read()
        sum(range(200_000))
        after = counters.read()
        assert after[0] > before[0] and after[1] > before[1] + 200_000
    finally:
        counters.close()


def test_a_timed_worker_reports_what_it_checked_samples_with(large):
    spec, store, keys = large
    settings = dataclasses.replace(ReplaySettings(), timing_rounds=3, warmup_rounds=1,
                                   min_sample_seconds=1e-3)
    with ReplayServer(spec, store.root, keys, settings) as server:
        result = server.evaluate(Candidate(label="baseline"))
    assert result.ok and result.timing.clock == "thread"
    assert result.timing.taken >= 2 * result.timing.rounds
    assert result.timing.counters  # what was counted, or why nothing was


GROW_C = """\
void grow(long n, const float *x, float *y)
{
    for (long i = 0; i < n; ++i) {
        y[i] = y[i] * y[i] + x[i];
    }
}
"""


def test_a_kernel_whose_in_place_output_would_overflow_is_timed_on_restored_data(tmp_path):
    """``y = y * y + x`` in place reaches Inf within ten launches of its own output, and a
    timed sample makes hundreds: each timed launch must start from the recorded values
    (restored between launches, outside the timed region). The judge checks what the
    timed launches left, and nothing prints a numpy RuntimeWarning."""
    import warnings

    (tmp_path / "grow.c").write_text(GROW_C)
    kernel = r3.kernel(tmp_path / "grow.c", entry="grow", name="timing_grow")
    store = RecordingStore(tmp_path / "recordings")
    rng = np.random.default_rng(3)
    launches = []
    for n in (20_000, 3_000):
        launches.append((n, rng.random(n, dtype=np.float32),
                         (1.5 + 0.5 * rng.random(n)).astype(np.float32)))
    keys = record_launches(kernel, store, launches)
    settings = ReplaySettings(timing_rounds=5, warmup_rounds=1, min_sample_seconds=2e-3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning fails the test
        with ReplayServer(KernelSpec.from_kernel(kernel), store.root, keys, settings) \
                as server:
            result = server.evaluate(Candidate(label="baseline against itself"))
            unrolled = server.evaluate(Candidate(pipeline={"loop_unroll": False}))
    assert result.ok, result.summary()
    assert unrolled.ok, unrolled.summary()
    assert max(result.timing.repeats) > 20  # many launches per sample: drift would show


def test_a_candidate_clearly_slower_on_one_timed_layout_gets_that_layouts_figure():
    """Each round times both variants on both timed layouts: 10x on one, 0.5x on the other
    is reported as 0.5x with the layout named; a few percent of scatter between the sets
    is pooled."""
    from pytest_r3.replay.measurement import Timing

    def timing(on_script: float, on_heap: float) -> Timing:
        rounds = [(1.0, on_script, 1.0, on_heap)] * 8
        base = [1.0] * 8
        cand = [(on_script + on_heap) / 2] * 8
        return Timing.from_samples(base, cand, by_set=tuple(rounds))

    keyed = timing(2.0, 0.1).on_worse_layout(("script", "heap"))
    assert keyed.layout == "script" and keyed.speedup == pytest.approx(0.5)
    assert keyed.rounds == 8
    noisy = timing(0.50, 0.51).on_worse_layout(("script", "heap"))
    assert noisy.layout == "" and noisy.rounds == 8 and noisy.by_set
    again = Timing.from_dict(keyed.as_dict())
    assert again == keyed
    assert Timing.from_dict(timing(2.0, 0.1).as_dict()).on_worse_layout(
        ("script", "heap")).layout == "script"


SAXPY_C = """\
void saxpy(long n, float a, const float *x, float *y)
{
    for (long i = 0; i < n; ++i) {
        y[i] = a * x[i] + y[i];
    }
}
"""


def test_an_in_place_kernel_timed_against_itself_in_a_worker_is_1x(tmp_path):
    """scaled_add's shape: ``y`` updated in place, so timed launches rotate prepared copies
    restored between slices, and where each copy's arrays land differs from the other
    set's. Timed against itself in a real worker, every evaluation says "within noise"
    and none is off by 10%, and their median is within 3% of 1.00x. (The target is 29
    evaluations in 30 within 5%: with rounds that started on the buffers just used, CI
    under -n 2 saw 0.927x; with eight-sample rounds and their present stopping rule, 60
    evaluations at load 8 came out at 0.973-1.024x, yet CI under -n 2 read 1.052x once,
    within noise, so a test that every one of a few lands within 5% fails now and then on
    a correct timing.)"""
    (tmp_path / "saxpy.c").write_text(SAXPY_C)
    kernel = r3.kernel(tmp_path / "saxpy.c", entry="saxpy", name="timing_saxpy")
    store = RecordingStore(tmp_path / "recordings")
    rng = np.random.default_rng(5)
    n = 1 << 16
    keys = record_launches(kernel, store, [(n, 1.5, rng.standard_normal(n, dtype=np.float32),
                                            rng.standard_normal(n, dtype=np.float32))])
    settings = ReplaySettings(fresh_inputs=1, derived_sizes=False, reserve_inputs=0)
    with ReplayServer(KernelSpec.from_kernel(kernel), store.root, keys, settings) as server:
        results = [server.evaluate(Candidate(label=f"A/A {i}")) for i in range(5)]
    for result in results:
        assert result.ok, result.summary()
        assert 0.90 <= result.timing.speedup <= 1.10, result.summary()
        assert result.timing.within_noise, result.summary()
    median = float(np.median([result.timing.speedup for result in results]))
    assert 0.97 <= median <= 1.03, [result.summary() for result in results]
