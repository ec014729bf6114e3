"""The replay server's wire format, its dataclasses, and a real worker answering over pipes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import asdict

import pytest

import pytest_r3 as r3
from pytest_r3.model.pipeline import Pipeline
from pytest_r3.replay import protocol
from pytest_r3.replay.protocol import (
    CLIENT_EVENTS,
    WORKER_EVENTS,
    Candidate,
    KernelSpec,
    ProtocolError,
    ReplaySettings,
    Result,
    decode,
    encode,
)

SAMPLE_DATA = {
    "load": {"spec": {"name": "k"}, "settings": {"run_timeout": 1.5}, "ir": "define ..."},
    "cases": {"layout": [{"scalars": {"n": 3}, "slots": [{"params": ["x"], "written": True}]}]},
    "seal": {"ioctl": False},
    "build": {"name": "candidate0", "ir": "define ...", "pipeline": {"level": 2},
              "tunables": {"TILE": 16}},
    "run": {"variant": "candidate0",
            "runs": [{"case": 0, "fills": {"0": 12345}, "guard_seed": 7}]},
    "time": {"variant": "candidate0", "cases": [0], "guard_seed": 7, "checks": [{}]},
    "drop": {"name": "candidate0"},
    "call": {"layout": {"scalars": {"n": 3}, "slots": []}},
    "ping": {"sequence": 7},
    "shutdown": {},
    "loaded": {},
    "ready": {},
    "sealed": {"containment": "containment: no_new_privs"},
    "built": {"seconds": {"llvm": 0.01}},
    "outputs": {"returned": [None]},
    "timed": {"timing": {"speedup": 1.25}},
    "dropped": {},
    "rejected": {"status": "compile_error", "kind": "compile_error", "message": "LLVM said no"},
    "pong": {"sequence": 7},
    "error": {"message": "ValueError: boom", "traceback": "Traceback ...\n"},
}


@pytest.mark.parametrize("event", CLIENT_EVENTS)
def test_client_messages_round_trip(event):
    message = encode(event, SAMPLE_DATA[event], CLIENT_EVENTS)
    assert isinstance(message, bytes)
    assert decode(message, CLIENT_EVENTS) == (event, SAMPLE_DATA[event])


@pytest.mark.parametrize("event", WORKER_EVENTS)
def test_worker_messages_round_trip(event):
    message = encode(event, SAMPLE_DATA[event], WORKER_EVENTS)
    assert decode(message, WORKER_EVENTS) == (event, SAMPLE_DATA[event])


def test_every_event_has_sample_data():
    assert set(SAMPLE_DATA) == set(CLIENT_EVENTS) | set(WORKER_EVENTS)


def test_messages_are_plain_json_not_pickle():
    message = encode("ping", {"x": [1, 2.5, None, "s"]}, CLIENT_EVENTS)
    assert json.loads(message) == ["ping", {"x": [1, 2.5, None, "s"]}]


def test_encoding_an_unknown_event_is_refused():
    with pytest.raises(ProtocolError, match="unknown event 'outputs'"):
        encode("outputs", {}, CLIENT_EVENTS)  # a worker event is not a client event


@pytest.mark.parametrize("message, fragment", [
    (b'["launch_missiles", {}]', "unknown event 'launch_missiles'"),
    (b'["outputs", {}]', "unknown event 'outputs'"),  # worker event sent to the worker
    (b'["ping", [1, 2]]', "unknown event 'ping'"),  # data must be a mapping
    (b'["ping", {}, "extra"]', "malformed message"),
    (b'{"event": "ping"}', "malformed message"),
    (b"not json at all", "malformed message"),
    (b"42", "malformed message"),
    (b'\x80\x81', "malformed message"),
])
def test_decode_refuses_anything_but_a_known_event_with_a_mapping(message, fragment):
    with pytest.raises(ProtocolError) as info:
        decode(message, CLIENT_EVENTS)
    assert fragment in str(info.value)


def test_statuses_are_the_documented_ones():
    assert protocol.STATUSES == ("ok", "compile_error", "sandbox_violation", "crash",
                                 "timeout", "wrong_output", "too_busy", "invalid", "suspect")
    with pytest.raises(ValueError, match="unknown status 'okay'"):
        Result.from_dict({"status": "okay"})


def test_a_worker_cannot_claim_a_status_only_the_parent_gives():
    """A worker may refuse a variant (compile_error...), never call it ok, too busy or
    invalid, nor suspect: those are decided outside it."""
    assert set(protocol.REJECTIONS) == set(protocol.STATUSES) - {"ok", "too_busy", "invalid",
                                                                 "suspect"}


# -- dataclasses ------------------------------------------------------------------------------


def _through_json(data: dict) -> dict:
    return json.loads(json.dumps(data))


def test_candidate_round_trips_through_json():
    candidate = Candidate(macros={"TILE": 32, "NAME": "x"}, pipeline={"level": 1},
                          source_text="void k(void) {}\n", launch={"threads": 4}, label="c1")
    again = Candidate.from_dict(_through_json(candidate.as_dict()))
    assert again == candidate
    assert again.key() == candidate.key()
    racing = Candidate(macros={"TILE": 32}, race_against=2.5,
                       race_with={"macros": {"TILE": 64}, "pipeline": {}, "source_text": None,
                                  "launch": {}})
    assert Candidate.from_dict(_through_json(racing.as_dict())) == racing
    assert racing.key() == Candidate(macros={"TILE": 32}).key() == racing.unraced().key()
    assert racing.unraced().race_against is None and racing.unraced().race_with is None


def test_candidate_key_tells_variants_apart():
    base = Candidate(macros={"TILE": 32})
    assert Candidate(macros={"TILE": 32}, label="other label").key() == base.key()
    assert Candidate(macros={"TILE": 64}).key() != base.key()
    assert Candidate(macros={"TILE": 32}, pipeline={"level": 2}).key() != base.key()
    assert Candidate(macros={"TILE": 32}, source_text="x").key() != base.key()
    assert Candidate(macros={"TILE": 32}, source_text="y").key() != \
        Candidate(macros={"TILE": 32}, source_text="x").key()


def test_result_round_trips_through_json():
    result = Result(status="wrong_output", candidate_key="0123", label="c",
                    diagnostics=["out: 1 of 10 element(s) differ"],
                    timing=None, compile_seconds={"clang": 0.01, "llvm": 0.02},
                    review=False, details={"kind": "mismatch", "buffer": "out"})
    again = Result.from_dict(_through_json(result.as_dict()))
    assert again == result
    assert not again.ok and again.speedup is None


def test_a_timed_result_round_trips_through_json_as_a_typed_value():
    from pytest_r3.replay.measurement import CaseTiming, Timing, Workload

    case = CaseTiming(2.0, (2e-3, 2.1e-3, 2e-3), (1e-3, 1e-3, 1.1e-3),
                      Workload("abc", "benchmark", "n=3"))
    timing = Timing((4e-3, 4.2e-3, 4e-3), (2e-3, 2e-3, 2.2e-3), (case,), (7,),
                    warmup_rounds=2, stopped="settled", timed_on="workloads", dropped=3,
                    taken=12).against_baseline(1.5)
    result = Result("ok", candidate_key="k", timing=timing)
    again = Result.from_dict(_through_json(result.as_dict()))
    assert again == result
    assert again.timing.basis == "best_so_far" and not again.timing.direct
    assert again.timing.workloads[0].workload.origin == "benchmark"
    assert again.speedup == pytest.approx(3.0) and again.timing.dropped_share == 0.25


def test_a_result_stored_before_timings_were_typed_is_read():
    """Result files written by the previous version (a timing dict whose ``reference`` key
    meant "scaled from the best so far") stay readable: the figures come from the samples."""
    stored = {"status": "ok", "candidate_key": "k", "label": "", "diagnostics": [],
              "compile_seconds": {}, "review": False, "details": {},
              "timing": {"baseline_median": 6e-3, "candidate_median": 2e-3, "speedup": 3.0,
                         "speedup_q1": 2.9, "speedup_q3": 3.1, "rounds": 3,
                         "warmup_rounds": 1, "repeats": [4], "within_noise": False,
                         "raced": True, "stopped": "raced",
                         "baseline_samples": [6e-3, 6.1e-3, 6e-3],
                         "candidate_samples": [2e-3, 2e-3, 2.1e-3],
                         "cases": [{"weight": 1.0, "baseline_median": 6e-3,
                                    "candidate_median": 2e-3, "speedup": 3.0,
                                    "baseline_samples": [6e-3, 6.1e-3, 6e-3],
                                    "candidate_samples": [2e-3, 2e-3, 2.1e-3]}],
                         "reference": {"speedup": 1.5, "median": 4e-3},
                         "timed_on": "workloads",
                         "workloads": [{"key": "abc", "origin": "benchmark", "shape": "n=3",
                                        "weight": 1.0}]}}
    result = Result.from_dict(stored)
    assert result.timing.basis == "best_so_far" and result.timing.scaled_by == 1.5
    assert result.timing.raced and result.timing.stopped == "raced"
    assert result.speedup == pytest.approx(3.0)
    assert result.timing.workloads[0].workload.key == "abc"
    failed = Result.from_dict({**stored, "status": "crash", "timing": {}})
    assert failed.timing is None


def test_result_summary_reports_speedup_and_diagnostics():
    from pytest_r3.replay.measurement import Timing

    timing = Timing.from_samples([1e-5] * 5, [4e-6, 4e-6, 4e-6, 4.1e-6, 3.9e-6])
    ok = Result("ok", timing=timing)
    assert ok.ok and ok.speedup == pytest.approx(2.5)
    assert ok.summary() == ("ok: speedup 2.500x (95% CI 2.439-2.564), candidate 4.0 us vs "
                            "baseline 10.0 us")
    same = Timing.from_samples([1e-5] * 5, [0.99e-5, 1e-5, 1.01e-5, 1e-5, 1e-5])
    flagged = Result("ok", timing=same, review=True)
    assert "(within noise)" in flagged.summary() and "marked for review" in flagged.summary()
    failed = Result("crash", diagnostics=["the worker died with SIGSEGV"])
    assert failed.summary() == "crash\n  the worker died with SIGSEGV"


@pytest.fixture(scope="module")
def declared_kernel(tmp_path_factory):
    folder = tmp_path_factory.mktemp("protocol_kernel")
    path = folder / "scale.c"
    path.write_text(textwrap.dedent("""\
        #ifndef FACTOR
        #define FACTOR 2
        #endif
        double scale(int n, const double *x, double *out)
        {
            double s = 0;
            for (int i = 0; i < n; ++i) { out[i] = FACTOR * x[i]; s += out[i]; }
            return s;
        }
    """))
    return r3.kernel(path, entry="scale", name="protocol_scale", tune={"FACTOR": [2, 3]},
                     pipeline={"level": 2}, tolerance={"rtol": 1e-6})


def test_kernel_spec_from_a_real_kernel_round_trips(declared_kernel):
    spec = KernelSpec.from_kernel(declared_kernel)
    assert spec.name == "protocol_scale" and spec.entry == "scale" and spec.backend == "cpu"
    assert spec.source_text == declared_kernel.source.text
    assert spec.filename.endswith("scale.c")
    assert spec.default_macros == {"FACTOR": 2}
    assert spec.pipeline["level"] == 2
    assert spec.tolerance == {"rtol": 1e-6}
    assert spec.return_dtype == "float64"
    assert [(p["name"], p["dtype"], p["is_pointer"], p["written"]) for p in spec.params] == [
        ("n", "int32", False, False), ("x", "float64", True, False),
        ("out", "float64", True, True)]
    again = KernelSpec.from_dict(_through_json(spec.as_dict()))
    assert again.as_dict() == _through_json(spec.as_dict())
    assert Pipeline.from_mapping(again.pipeline) == declared_kernel.pipeline


def test_replay_settings_cross_the_boundary_and_ignore_unknown_keys():
    settings = ReplaySettings(run_timeout=0.5, timing_rounds=3, seed=9, timed_keys=("k1",))
    data = {**_through_json(asdict(settings)), "from_a_newer_version": True}
    assert ReplaySettings.from_dict(data) == settings


# -- a real worker over real pipes ------------------------------------------------------------


@pytest.fixture
def raw_worker():
    """A replay worker process and the two pipe ends the client would use."""
    from multiprocessing.connection import Connection

    parent_read, child_write = os.pipe()
    child_read, parent_write = os.pipe()
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest_r3.replay.worker", str(child_read), str(child_write)],
        pass_fds=(child_read, child_write), stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    os.close(child_read)
    os.close(child_write)
    reader = Connection(parent_read, writable=False)
    writer = Connection(parent_write, readable=False)

    def ask(raw: bytes) -> tuple[str, dict]:
        writer.send_bytes(raw)
        assert reader.poll(30), "the worker did not answer"
        return decode(reader.recv_bytes(), WORKER_EVENTS)

    yield process, ask, writer
    if process.poll() is None:
        process.kill()
    process.wait()
    process.stderr.close()
    reader.close()
    writer.close()


def test_worker_answers_error_to_an_unknown_event_and_keeps_serving(raw_worker):
    process, ask, writer = raw_worker
    event, data = ask(b'["format_disk", {}]')
    assert event == "error"
    assert data["message"].startswith("ProtocolError: unknown event 'format_disk'")
    event, data = ask(b"\x00garbage")
    assert event == "error" and "malformed message" in data["message"]
    event, data = ask(encode("run", SAMPLE_DATA["run"], CLIENT_EVENTS))
    assert event == "error" and "run before load" in data["message"]
    # still alive and answering
    assert ask(encode("ping", {"sequence": 3}, CLIENT_EVENTS)) == ("pong", {"sequence": 3})
    assert process.poll() is None
    writer.send_bytes(encode("shutdown", {}, CLIENT_EVENTS))
    assert process.wait(timeout=30) == 0


def test_worker_reports_a_load_failure_instead_of_dying(raw_worker, tmp_path):
    process, ask, _ = raw_worker
    event, data = ask(encode("load", {"spec": {"name": "x"}, "settings": {}, "ir": ""},
                             CLIENT_EVENTS))
    assert event == "error"
    assert "TypeError" in data["message"]  # an incomplete spec
    assert "worker.py" in data["traceback"] and "in on_load" in data["traceback"]
    assert process.poll() is None


def test_worker_exits_when_the_client_goes_away(raw_worker):
    process, ask, writer = raw_worker
    assert ask(encode("ping", {}, CLIENT_EVENTS))[0] == "pong"
    writer.close()
    assert process.wait(timeout=30) == 0


# -- when racing stops timing -------------------------------------------------------------------


def _rounds(ratios: list[float]) -> tuple[list[float], list[float]]:
    """Baseline and candidate times whose per-round ratios are ``ratios``."""
    return [r * 1e-3 for r in ratios], [1e-3] * len(ratios)


def test_a_race_is_lost_won_or_tied_only_on_enough_clear_rounds():
    from pytest_r3.replay.protocol import ReplaySettings
    from pytest_r3.replay.timing import _ahead, _outrun, _tied

    settings = ReplaySettings(race_rounds=3, min_timing_rounds=5)
    behind, ahead = _rounds([0.8, 0.8, 0.8]), _rounds([1.3, 1.3, 1.3])
    assert _outrun(*behind, 1.0, settings) and not _outrun(*ahead, 1.0, settings)
    assert _ahead(*ahead, 1.0, 3) and not _ahead(*behind, 1.0, 3)
    assert not _ahead(*ahead, 1.0, 5)  # against the baseline a win needs more rounds
    assert not _ahead(*_rounds([1.3, 1.3, 0.9, 0.9]), 1.0, 3)  # one in two is no win
    assert not _outrun(*behind, None, settings) and not _ahead(*ahead, None, 3)
    even = _rounds([1.01, 0.99, 1.0, 1.015, 0.995])
    assert _tied(*even, 1.0, settings)
    # fewer than the minimum, one round not within 2%: not yet
    assert not _tied(*_rounds([1.01, 0.97, 1.0, 1.015]), 1.0, settings)
    # every round within 2% of the speedup to beat: tied from the second on
    assert _tied(*_rounds([1.01, 0.99]), 1.0, settings)
    assert not _tied(*_rounds([1.01]), 1.0, settings)
    assert not _tied(*_rounds([1.05] * 5), 1.0, settings)  # 5% ahead is no tie
    assert _tied(*_rounds([2.02] * 5), 2.0, settings)  # within 2% of the speedup to beat
    assert not _tied(*even, None, settings)  # unraced: every round runs
