"""The model endpoint: retries, deadlines, errors that stop the loop, cached answers, patches.

Everything against ``ScriptedChatServer``, a real chat-completions HTTP server on loopback.
"""

from __future__ import annotations

import socket
import subprocess
import time
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path

import pytest

from pytest_r3.llm.archive import Elite
from pytest_r3.llm.client import LLMClient, LLMSettings, LLMSetupError, is_loopback
from pytest_r3.llm.evolution import Evolution, EvolutionSettings
from pytest_r3.llm.patch import write_patch
from pytest_r3.llm.retrieval import ExampleIndex
from pytest_r3.llm.runlog import RunLog
from pytest_r3.llm.testing import Scripted, ScriptedChatServer

SOURCE = "void inc(int n, double *x)\n{\n    for (int i = 0; i < n; ++i)\n        x[i] += 1.0;\n}\n"
REWRITE = SOURCE.replace("x[i] += 1.0;", "x[i] = x[i] + 1.0;")
HI = [{"role": "user", "content": "hi"}]


def local(base_url: str, **settings) -> LLMSettings:
    """Settings for the scripted server: local, and the user says it needs no key."""
    return LLMSettings(settings.pop("model", "m"), base_url,
                       **{"api_key_env": "none", **settings})


def ask(settings: LLMSettings, wait: float = 20.0):
    client = LLMClient(settings)
    started = time.monotonic()
    try:
        reply = client.submit(HI).result(timeout=wait)
    finally:
        client.close()
    return reply, time.monotonic() - started


def evolve(tmp_path: Path, client: LLMClient, **settings):
    """The outer loop with no replay server: these answers never reach an evaluation."""
    options = {"generations": 3, "islands": 2, "children": 2, "repairs": 1,
               "inner_budget": 0, **settings}
    return Evolution(kernel="inc", entry="inc", source=SOURCE, source_hash="h",
                     context="ctx", servers=[], client=client, space=None, store=None,
                     log=RunLog(tmp_path / "run"), examples=ExampleIndex(),
                     start=Elite(SOURCE, 1.0, 1.0), settings=EvolutionSettings(**options))


def run_evolution(tmp_path: Path, settings: LLMSettings, **evolution):
    client = LLMClient(settings)
    try:
        return evolve(tmp_path, client, **evolution).run()
    finally:
        client.close()


# -- retries and the deadline -----------------------------------------------------------------
def test_the_client_retries_honour_retry_after():
    answers = iter([Scripted(status=429, headers={"Retry-After": "2"}), "fine"])
    with ScriptedChatServer(lambda body: next(answers)) as server:
        reply, _ = ask(local(server.base_url))
    assert reply.ok and reply.text == "fine" and reply.attempts == 2
    assert server.times[1] - server.times[0] >= 1.9  # the server's wait, not our backoff


def test_retries_are_bounded():
    with pytest.raises(ValueError, match="retries"):
        LLMSettings("m", retries=100)
    with ScriptedChatServer(lambda body: Scripted(status=503)) as server:
        reply, _ = ask(local(server.base_url, retries=1))
    assert not reply.ok and reply.cause == "server_error" and len(server.requests) == 2
    assert "HTTP 503" in reply.reason


def test_a_retry_after_past_the_deadline_is_not_waited_for():
    with ScriptedChatServer(lambda body: Scripted(status=429,
                                                  headers={"Retry-After": "30"})) as server:
        reply, seconds = ask(local(server.base_url, timeout=3.0))
    assert not reply.ok and reply.cause == "rate_limited" and not reply.fatal
    assert "30 s" in reply.reason and "--r3-llm-concurrency" in reply.reason
    assert len(server.requests) == 1 and seconds < 2.0


@pytest.mark.parametrize("trickle", [0.05, 0.7])
def test_a_trickling_server_is_cut_at_the_total_deadline(trickle):
    """--r3-llm-timeout bounds the whole request, not each read: a server sending a byte
    every 50 ms would otherwise hold it for minutes (and one every 0.7 s is cut while a
    read waits, not after it)."""
    with ScriptedChatServer(lambda body: Scripted("x" * 3000, trickle=trickle)) as server:
        try:
            reply, seconds = ask(local(server.base_url, timeout=1.0), wait=6.0)
        except FutureTimeout:
            pytest.fail("the request was not cut at its deadline")
    assert not reply.ok and reply.cause == "timeout"
    assert "1 s deadline (--r3-llm-timeout)" in reply.reason
    assert 0.9 <= seconds <= 1.3, seconds
    assert len(server.requests) == 1  # no retry after the deadline


def test_a_slow_first_byte_is_cut_at_the_deadline_too():
    with ScriptedChatServer(lambda body: Scripted("late", delay=3.0)) as server:
        reply, seconds = ask(local(server.base_url, timeout=0.8, retries=3))
    assert reply.cause == "timeout" and 0.7 <= seconds <= 1.5, seconds


# -- errors only the user can fix -------------------------------------------------------------
@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_key_stops_the_loop_naming_the_variable(tmp_path, monkeypatch, status):
    monkeypatch.setenv("R3_TEST_KEY", "sk-test")
    with ScriptedChatServer(lambda body: Scripted(status=status,
                                                  error="Incorrect API key")) as server:
        outcome = run_evolution(tmp_path, local(server.base_url, api_key_env="R3_TEST_KEY",
                                                concurrency=1))
    assert len(server.requests) == 1  # 3 generations x 4 children were planned
    assert server.headers[0]["authorization"] == "Bearer sk-test"
    assert outcome.fatal and "$R3_TEST_KEY" in outcome.stopped
    assert "Incorrect API key" in outcome.stopped and "\n" not in outcome.stopped
    assert outcome.stats.failures == {"auth": 1} == outcome.stats.answer_failures


def test_concurrent_requests_stop_at_the_first_fatal_answer(tmp_path):
    with ScriptedChatServer(lambda body: Scripted(status=401)) as server:
        outcome = run_evolution(tmp_path, local(server.base_url, concurrency=2))
    assert outcome.fatal and len(server.requests) <= 2


def test_an_unknown_model_names_the_model_and_the_endpoint(tmp_path):
    with ScriptedChatServer(lambda body: Scripted(
            status=404, error="The model `gtp-5` does not exist.")) as server:
        outcome = run_evolution(tmp_path, local(server.base_url, model="gtp-5",
                                                concurrency=1))
    assert len(server.requests) == 1 and outcome.fatal
    assert "'gtp-5'" in outcome.stopped and server.base_url in outcome.stopped
    assert "--r3-llm-model" in outcome.stopped
    assert outcome.stats.failures == {"not_found": 1}


def test_a_rejected_temperature_says_which_setting_to_change(tmp_path):
    refuse = ("Unsupported value: 'temperature' does not support 0.7 with this model. Only "
              "the default (1) value is supported.")

    def script(body: dict):
        if "temperature" in body:
            return Scripted(status=400, error=refuse, param="temperature")
        return "I would not change it."

    with ScriptedChatServer(script) as server:
        outcome = run_evolution(tmp_path, local(server.base_url, concurrency=1))
        assert len(server.requests) == 1 and outcome.fatal
        assert refuse in outcome.stopped and "--r3-llm-temperature" in outcome.stopped
        assert outcome.stats.failures == {"bad_request": 1}
        # temperature=None: not sent, and the model answers
        reply, _ = ask(local(server.base_url, temperature=None))
    assert reply.ok and "temperature" not in server.requests[-1]


def test_a_rejected_parameter_is_found_in_the_message_too():
    with ScriptedChatServer(lambda body: Scripted(
            status=400, error="max_tokens is too large: 999999")) as server:
        reply, _ = ask(local(server.base_url, max_answer_tokens=999999))
    assert reply.fatal and reply.cause == "bad_request"
    assert "--r3-llm-max-answer-tokens" in reply.reason
    assert server.requests[0]["max_tokens"] == 999999


def test_a_too_long_conversation_is_counted_not_fatal():
    with ScriptedChatServer(lambda body: Scripted(
            status=400, error="This model's maximum context length is 4096 tokens.",
            code="context_length_exceeded")) as server:
        reply, _ = ask(local(server.base_url))
    assert reply.cause == "context_too_long" and not reply.fatal


def test_a_missing_key_is_an_error_before_anything_is_sent(tmp_path, monkeypatch):
    monkeypatch.delenv("R3_NO_SUCH_KEY", raising=False)
    with ScriptedChatServer(lambda body: "hello") as server:
        settings = LLMSettings("m", server.base_url, api_key_env="R3_NO_SUCH_KEY")
        with pytest.raises(LLMSetupError, match=r"\$R3_NO_SUCH_KEY is not set"):
            settings.api_key()
        outcome = run_evolution(tmp_path, settings)
    assert server.requests == []
    assert outcome.fatal and "$R3_NO_SUCH_KEY is not set" in outcome.stopped
    assert outcome.stats.failures == {}


def test_no_key_is_only_for_a_local_endpoint(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert LLMSettings("m", "http://127.0.0.1:8000/v1", api_key_env="none").api_key() is None
    assert LLMSettings("m", "http://localhost:11434/v1", api_key_env="").api_key() is None
    for url in ("https://api.example.com/v1", None):
        with pytest.raises(LLMSetupError, match="only for a local endpoint"):
            LLMSettings("m", url, api_key_env="none").api_key()
    assert is_loopback("http://[::1]:8000/v1") and not is_loopback("http://10.0.0.1/v1")


def test_no_key_sends_no_authorization_header():
    with ScriptedChatServer(lambda body: "hello") as server:
        reply, _ = ask(local(server.base_url))
    assert reply.ok and "authorization" not in server.headers[0]


def test_an_unreachable_endpoint_stops_the_loop(tmp_path):
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    outcome = run_evolution(tmp_path, local(f"http://127.0.0.1:{port}/v1", retries=0,
                                            concurrency=1))
    assert outcome.fatal and "cannot reach" in outcome.stopped
    assert outcome.stats.failures == {"connection": 3}


# -- answers that cannot be used, by cause -------------------------------------------------------
def test_a_cut_answer_is_named_and_counted_apart(tmp_path):
    cut = "Here it is:\n```c\nvoid inc(int n, double *x)\n{\n    for (int i"
    with ScriptedChatServer(lambda body: Scripted(cut, finish_reason="length")) as server:
        reply, _ = ask(local(server.base_url, max_answer_tokens=64))
        outcome = run_evolution(tmp_path, local(server.base_url), generations=1)
    assert reply.cause == "truncated" and server.requests[0]["max_tokens"] == 64
    assert "the answer was cut at max_tokens=64" in reply.reason
    assert "raise --r3-llm-max-answer-tokens" in reply.reason
    assert outcome.stats.failures == {"truncated": 4} and outcome.stats.parse_failures == 0
    assert not outcome.fatal and not outcome.stopped


def test_failures_are_counted_by_cause(tmp_path):
    answers = iter([Scripted(status=429), Scripted("x", delay=2.0), Scripted(raw_body="{"),
                    "No code here."])
    with ScriptedChatServer(lambda body: next(answers, "No code either.")) as server:
        outcome = run_evolution(tmp_path, local(server.base_url, retries=0, timeout=1.0,
                                                concurrency=1), generations=1, repairs=0)
    stats = outcome.stats
    assert stats.answer_failures == {"malformed": 1, "rate_limited": 1, "timeout": 1,
                                     "unparsable": 1}
    assert stats.rewrite_failures == {} and stats.parse_failures == 1
    assert stats.proposed == 4 and not outcome.fatal


def test_long_answers_kept_in_a_repair_conversation_are_cut(tmp_path):
    babble = "Let me think. " * 20_000  # 280 kB and no code

    def script(body: dict) -> str:
        return babble if len(body["messages"]) == 2 else "Still no code."

    with ScriptedChatServer(script) as server:
        run_evolution(tmp_path, local(server.base_url, concurrency=1), generations=1,
                      islands=1, children=1, repairs=2, kept_answer_chars=4000)
    repair = server.requests[1]["messages"]
    kept = repair[2]["content"]
    assert repair[2]["role"] == "assistant" and len(kept) < 4100
    assert "characters of this answer cut by pytest-r3" in kept
    assert kept.startswith("Let me think.") and kept.rstrip().endswith("Let me think.")
    total = sum(len(m["content"]) for m in server.requests[-1]["messages"])
    assert total < 20_000


# -- cached answers -----------------------------------------------------------------------------
def test_cached_answers_are_keyed_by_endpoint_model_and_temperature(tmp_path):
    with ScriptedChatServer(lambda body: f"{body['model']} says: no code") as server:
        def run(**settings) -> int:
            before = len(server.requests)
            run_evolution(tmp_path, local(server.base_url, **settings), generations=1,
                          islands=1, children=1, repairs=0)
            return len(server.requests) - before

        assert run(model="a") == 1
        assert run(model="a") == 0          # resumed: the answer comes from the run log
        assert run(model="b") == 1          # another model is asked
        assert run(model="a", temperature=0.2) == 1
        with ScriptedChatServer(lambda body: "elsewhere") as other:
            run_evolution(tmp_path, local(other.base_url, model="a"), generations=1,
                          islands=1, children=1, repairs=0)
            assert len(other.requests) == 1  # another endpoint is asked


# -- patches ------------------------------------------------------------------------------------
def git(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)


@pytest.mark.parametrize("name, original", [
    ("crlf.c", SOURCE.replace("\n", "\r\n")),
    ("no_final_newline.c", SOURCE.rstrip("\n")),
    ("crlf_no_final_newline.c", SOURCE.rstrip("\n").replace("\n", "\r\n")),
    ("plain.c", SOURCE),
], ids=["crlf", "no-final-newline", "crlf-no-final-newline", "plain"])
def test_patches_apply_and_keep_line_endings_and_final_newline(tmp_path, name, original):
    git(tmp_path, "init", "-q")
    git(tmp_path, "config", "core.autocrlf", "false")
    path = tmp_path / "src" / name
    path.parent.mkdir()
    path.write_bytes(original.encode())
    git(tmp_path, "add", ".")
    patch = write_patch(tmp_path / ".r3" / "patches", "inc", path, tmp_path, REWRITE)
    check = git(tmp_path, "apply", "--check", str(patch))
    assert check.returncode == 0, check.stderr + patch.read_text()
    assert git(tmp_path, "apply", str(patch)).returncode == 0
    patched = path.read_bytes().decode()
    crlf = "\r\n" in original
    assert patched == (REWRITE.replace("\n", "\r\n") if crlf else REWRITE)[
        :None if original.endswith("\n") else -(2 if crlf else 1)]
    assert len(patch.read_text().splitlines()) < 12  # one line changed, not the whole file
