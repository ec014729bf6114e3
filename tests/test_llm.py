"""The LLM outer loop against a real chat-completions server on loopback."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from pytest_r3.backends.clang import source_hash
from pytest_r3.llm.archive import Archive, Elite, descriptors, loop_depth
from pytest_r3.llm.client import LLMClient, LLMSettings
from pytest_r3.llm.feedback import explain
from pytest_r3.llm.parse import parse_answer
from pytest_r3.llm.testing import Scripted, ScriptedChatServer
from pytest_r3.replay.measurement import Timing
from pytest_r3.replay.protocol import Result

NAIVE = textwrap.dedent("""\
    /* c = a @ b, row-major n x n, naive i-j-k order */
    void mm(int n, const double *a, const double *b, double *c)
    {
        for (int i = 0; i < n; ++i)
            for (int j = 0; j < n; ++j) {
                double sum = 0.0;
                for (int k = 0; k < n; ++k)
                    sum += a[i * n + k] * b[k * n + j];
                c[i * n + j] = sum;
            }
    }
""")

IKJ = textwrap.dedent("""\
    /* c = a @ b, row-major n x n, i-k-j order: unit stride in the inner loop */
    void mm(int n, const double *a, const double *b, double *c)
    {
        for (int i = 0; i < n; ++i)  /* nothing at n <= 0, as the original */
            for (int j = 0; j < n; ++j)
                c[i * n + j] = 0.0;
        for (int i = 0; i < n; ++i)
            for (int k = 0; k < n; ++k) {
                const double aik = a[i * n + k];
                for (int j = 0; j < n; ++j)
                    c[i * n + j] += aik * b[k * n + j];
            }
    }
""")

BROKEN = IKJ.replace("const double aik = a[i * n + k];", "const double aik = a[i * n + k]")
WRONG = IKJ.replace("c[i * n + j] = 0.0;", "c[i * n + j] = 1.0;")
EVIL = "#include <stdlib.h>\n" + IKJ.replace("c[i * n + j] = 0.0;",
                                          "c[i * n + j] = 0.0; system(\"touch pwned\");")


def fenced(code: str) -> str:
    return f"Here is a faster version.\n```c\n{code}```\n"


# -- parsing, feedback, archive ------------------------------------------------------------
def test_parse_takes_the_last_c_fence_or_search_replace_blocks():
    assert parse_answer(fenced(IKJ), NAIVE, "mm").source == IKJ
    blocks = ("<<<<<<< SEARCH\n            double sum = 0.0;\n=======\n"
              "            double sum = 0.0; /* acc */\n>>>>>>> REPLACE")
    parsed = parse_answer(blocks, NAIVE, "mm")
    assert parsed.form == "search/replace" and "/* acc */" in parsed.source
    assert "no ```c code block" in parse_answer("I think it is fine.", NAIVE, "mm").reason
    assert "does not define the entry" in parse_answer(fenced("void other(void) {}\n"),
                                                      NAIVE, "mm").reason
    missing = "<<<<<<< SEARCH\nnot in the source\n=======\nx\n>>>>>>> REPLACE"
    assert "does not match the source exactly" in parse_answer(missing, NAIVE, "mm").reason
    assert "identical" in parse_answer(fenced(NAIVE), NAIVE, "mm").reason


def test_feedback_is_specific_and_actionable():
    compile_error = Result("compile_error", diagnostics=[
        "mm.c:7:45: error: expected ';' at end of declaration\n 1 error generated."])
    assert "line 7" in explain(compile_error) and "semicolon" in explain(compile_error)
    sandbox = Result("sandbox_violation", diagnostics=["forbidden: call to external "
                                                       "function 'system'"])
    assert "math.h" in explain(sandbox)
    wrong = Result("wrong_output", diagnostics=["c: 4 of 16 element(s) differ; first at [0, 1]"],
                   details={"kind": "mismatch"})
    assert "first at [0, 1]" in explain(wrong) and "initialise" in explain(wrong)
    fast = Result("ok", timing=Timing.from_samples([3e-3] * 5, [1e-3] * 5))
    assert "CORRECT, faster: 3.00x the baseline" in explain(fast, parent_speedup=1.5)
    assert "2.00x the parent" in explain(fast, parent_speedup=1.5)
    unclear = Result("ok", timing=Timing.from_samples([3e-3] * 5, [1e-3, 6e-3, 1e-3, 6e-3,
                                                                   1e-3]))
    assert "CORRECT, no faster" in explain(unclear)  # its interval reaches below 1
    busy = Result("too_busy", diagnostics=["the machine was too busy to measure"])
    assert "too busy" in explain(busy) and "nothing about the rewrite" in explain(busy)


def test_retrieval_ranks_examples_by_what_the_code_does():
    from pytest_r3.llm.retrieval import ExampleIndex, code_tags

    assert {"strided", "nested3", "reduction"} <= code_tags(NAIVE)
    assert "strided" not in code_tags(IKJ)
    assert ExampleIndex().top(NAIVE, 1)[0].title.startswith("Loop interchange")
    stencil = "void s(int n, const float *x, float *y) { for (int i = 1; i < n - 1; ++i) " \
              "y[i] = x[i - 1] + x[i + 1]; }"
    assert "stencil" in code_tags(stencil)


def test_accepted_rewrites_become_examples(tmp_path: Path):
    from pytest_r3.llm.retrieval import ExampleIndex

    index = ExampleIndex(tmp_path / "accepted.json")
    index.remember("mm", NAIVE, IKJ, 6.0)
    again = ExampleIndex(tmp_path / "accepted.json")
    assert again.top(NAIVE, 1)[0].source == "accepted"


def test_archive_keeps_diverse_elites_and_migrates():
    assert loop_depth(NAIVE) == 3 and loop_depth("int f(void) { return 1; }") == 0
    assert descriptors(IKJ) != descriptors("void mm(void) { }\n")
    archive = Archive(islands=2, seed=1)
    slow, fast = Elite(NAIVE, 1.0, 1.0), Elite(IKJ, 0.2, 5.0)
    assert archive.add(0, slow) and archive.add(0, fast)
    assert not archive.add(0, Elite(IKJ, 0.5, 2.0))  # same cell, worse
    assert archive.best(0) is fast and archive.best(1) is None
    archive.migrate()
    assert archive.best(1) is fast


# -- the client against a real HTTP server ---------------------------------------------------
def test_client_retries_rate_limits_and_server_errors_then_succeeds():
    answers = iter([Scripted(status=429), Scripted(status=500), Scripted(fenced(IKJ))])
    with ScriptedChatServer(lambda body: next(answers)) as server:
        client = LLMClient(LLMSettings("m", server.base_url, api_key_env="none"))
        reply = client.submit([{"role": "user", "content": "hi"}]).result()
        client.close()
    assert reply.ok and reply.attempts == 3 and "i-k-j" in reply.text
    assert len(server.requests) == 3


def test_client_turns_timeouts_and_malformed_answers_into_failed_replies():
    answers = iter([Scripted(fenced(IKJ), delay=1.5), Scripted(raw_body="{not json")])
    with ScriptedChatServer(lambda body: next(answers)) as server:
        client = LLMClient(LLMSettings("m", server.base_url, api_key_env="none",
                                       timeout=0.3, retries=0))
        slow = client.submit([{"role": "user", "content": "a"}]).result()
        broken = client.submit([{"role": "user", "content": "b"}]).result()
        client.close()
    assert not slow.ok and "Timeout" in slow.reason
    assert not broken.ok and broken.reason


def test_client_budget_stops_requests():
    client = LLMClient(LLMSettings("m", "http://127.0.0.1:9/v1", api_key_env="none",
                                   max_requests=0))
    assert "request budget" in client.budget_left()
    client.close()


# -- end to end: pytest --r3-tune with a scripted model ---------------------------------------
PROJECT_TEST = textwrap.dedent("""
    import numpy as np
    import pytest

    from mmmod import mm


    @pytest.mark.r3_oracle(mm)
    @pytest.mark.parametrize("n", [5, 160])
    def test_mm(n):
        rng = np.random.default_rng(n)
        a, b = rng.standard_normal((n, n)), rng.standard_normal((n, n))
        c = np.empty((n, n))
        mm(n, a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-10, atol=1e-10)
""")


class ModelScript:
    """Answers like a model would: first a broken rewrite (repaired when told the compile
    error), then a malicious one, a wrong one, and the good one."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.first_answers = iter([BROKEN, EVIL, WRONG, IKJ])

    def __call__(self, body: dict) -> str:
        last = body["messages"][-1]["content"]
        if "COMPILE ERROR" in last:
            return fenced(IKJ)
        if any(word in last for word in ("REJECTED", "WRONG OUTPUT", "COULD NOT USE")):
            return "I cannot improve it further."
        with self.lock:
            return fenced(next(self.first_answers, IKJ))


@pytest.fixture
def mm_project(tmp_path: Path) -> Path:
    (tmp_path / "mm.c").write_text(NAIVE)
    (tmp_path / "mmmod.py").write_text(
        'import pytest_r3 as r3\n\nmm = r3.kernel("mm.c", entry="mm")\n')
    (tmp_path / "test_mm.py").write_text(PROJECT_TEST)
    (tmp_path / "pytest.ini").write_text(textwrap.dedent("""
        [pytest]
        r3_search_pipeline = false
        r3_workers = 1
        r3_llm_generations = 1
        r3_llm_islands = 1
        r3_llm_children = 4
        r3_llm_inner_budget = 0
    """))
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "add", "mm.c"], cwd=tmp_path, check=True)
    return tmp_path


def run_pytest(project: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                          cwd=project, capture_output=True, text=True, timeout=600)


def tune_with_model(project: Path, base_url: str) -> subprocess.CompletedProcess:
    # a local server that needs no key: the user says so (else a missing key is an error)
    return run_pytest(project, "--r3-tune", "--r3-llm-model", "scripted",
                      "--r3-llm-base-url", base_url, "--r3-llm-api-key-env", "none")


def test_tune_with_a_model_finds_verifies_and_patches_a_better_loop_order(mm_project: Path):
    script = ModelScript()
    with ScriptedChatServer(script) as server:
        result = tune_with_model(mm_project, server.base_url)
        port = server.port
    assert result.returncode == 0, result.stdout + result.stderr
    assert "tuned (source rewrite)" in result.stdout
    assert "1 after repair" in result.stdout  # the broken answer was repaired
    # why the others failed, in words, in the tuning row (not a dict, not only the logs)
    words = " ".join(result.stdout.split())  # the row wraps at the terminal's width
    assert "failed: compile_error 1 (first: mm.c:" in words
    # (the run that caught it may be named first: another thread, flush-to-zero)
    assert re.search(r"wrong_output 1 \(first: [^)]*recording ", words), words
    assert (mm_project / "mm.c").read_text() == NAIVE  # the user's file is untouched

    lock = json.loads((mm_project / "r3.lock").read_text())
    (entry,) = lock["kernels"]["mm"].values()
    # the lock names the rewrite by hash and never carries code: the patch does
    assert "source_text" not in entry and entry["speedup"] > 1.2
    assert entry["rewrite_hash"] == source_hash(IKJ)
    assert "system" not in json.dumps(lock)  # the malicious rewrite never got in
    # before the patch is applied, --r3-check says so and plain runs use the baseline
    waiting = run_pytest(mm_project, "--r3-check")
    assert waiting.returncode == 0, waiting.stdout + waiting.stderr
    assert "patch not applied" in waiting.stdout

    # a run interrupted before acceptance resumes from the run log: same prompts, same
    # answers, no request reaches the model (accepted.json only exists after acceptance);
    # the same endpoint (answers are cached per endpoint, model and temperature)
    (mm_project / ".r3" / "runs" / "accepted.json").unlink()
    with ScriptedChatServer(lambda body: Scripted(status=500), port=port) as offline:
        again = tune_with_model(mm_project, offline.base_url)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "tuned (source rewrite)" in again.stdout
    assert offline.requests == []

    patch = mm_project / ".r3" / "patches" / "mm.patch"
    check = subprocess.run(["git", "apply", "--check", str(patch)], cwd=mm_project,
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    subprocess.run(["git", "apply", str(patch)], cwd=mm_project, check=True)
    assert (mm_project / "mm.c").read_text() == IKJ
    assert not (mm_project / "pwned").exists()

    events = [json.loads(line) for line in
              (mm_project / ".r3" / "runs" / "mm" / "events.jsonl").read_text().splitlines()]
    statuses = [e["status"] for e in events if e["event"] == "result"]
    assert {"compile_error", "sandbox_violation", "wrong_output", "ok"} <= set(statuses)
    report = (mm_project / ".r3" / "report.md").read_text()
    assert "Source evolution of `mm`" in report

    # with the patch applied, the lock entry still applies (as the rewritten source)
    checked = run_pytest(mm_project, "--r3-check")
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_without_a_model_tuning_says_so_once(mm_project: Path):
    result = run_pytest(mm_project, "--r3-tune")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("no LLM configured") == 1


def test_a_rewrite_that_adds_restrict_is_kept_saying_what_it_assumes(mm_project: Path):
    """mm in place is not mm out of place, so in place is not verified: the rewrite that
    adds restrict is kept with its assumption in the terminal table notes, the report and
    the patch header, and the patch still applies."""
    restricted = IKJ.replace("const double *a, const double *b, double *c",
                             "const double *restrict a, const double *restrict b, "
                             "double *restrict c")
    with ScriptedChatServer(lambda body: fenced(restricted)) as server:
        result = tune_with_model(mm_project, server.base_url)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "tuned (source rewrite)" in result.stdout
    patch = mm_project / ".r3" / "patches" / "mm.patch"
    header = patch.read_text().splitlines()[:2]
    assert header == [f"pytest-r3: this rewrite assumes: {pair} do not overlap (review your "
                      "callers)" for pair in ("a and c", "b and c")]
    report = (mm_project / ".r3" / "report.md").read_text()
    assert "the rewrite assumes: a and c do not overlap" in report
    check = subprocess.run(["git", "apply", "--check", str(patch)], cwd=mm_project,
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
