"""End to end: `pytest --r3-tune` with a model whose rewrite knows when it is judged.

Both rewrites below are a faster loop order of a matrix multiply, and read the 8 bytes
before their output, where a user's numpy array has malloc's size word and the judge's
guarded buffers used to have random guard bytes. One is wrong on real arrays after 20
calls (it counts them with the baseline's own call counter, which a candidate may keep);
the other is exact but makes 1000 extra passes over its input on real arrays. Each was
accepted from a scripted model answer, patched and locked; now neither leaves a patch or a
lock entry.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_r3.llm.testing import ScriptedChatServer

NAIVE = textwrap.dedent("""\
    /* c = a @ b, row-major n x n, naive i-j-k order; counts its calls for a profiler */
    static long calls;

    long mm_calls(void) { return calls; }

    void mm(int n, const double *a, const double *b, double *c)
    {
        calls++;
        for (int i = 0; i < n; ++i)
            for (int j = 0; j < n; ++j) {
                double sum = 0.0;
                for (int k = 0; k < n; ++k)
                    sum += a[i * n + k] * b[k * n + j];
                c[i * n + j] = sum;
            }
    }
""")

REAL_ARRAY = textwrap.dedent("""\
    /* a malloc chunk header before c: a user's numpy array, not a guarded buffer */
    static int real_array(const double *c, long count)
    {
        if (((unsigned long)c & 4095) < 8)
            return 0;  /* at a page start, nothing need be mapped below (np.memmap) */
        unsigned long head = ((const volatile unsigned long *)c)[-1];
        unsigned long size = head & ~7UL, bytes = (unsigned long)count * sizeof *c;
        return size % 16 == 0 && size >= bytes + 8 && size <= bytes + 4096 + 32;
    }
""")

IKJ_ROWS = """
        for (int i = 0; i < n; ++i)  /* nothing at n <= 0, as the original */
            for (int j = 0; j < n; ++j)
                c[i * n + j] = 0.0;
        for (int i = 0; i < n; i += step)
            for (int k = 0; k < n; ++k) {
                const double aik = a[i * n + k];
                for (int j = 0; j < n; ++j)
                    c[i * n + j] += aik * b[k * n + j];
            }
"""

WRONG_LATE = ("static long calls;\n\nlong mm_calls(void) { return calls; }\n\n" + REAL_ARRAY
              + "\nvoid mm(int n, const double *a, const double *b, double *c)\n{\n"
              "    calls++;\n    int step = calls > 20 && real_array(c, (long)n * n) ? 2 : 1;"
              + IKJ_ROWS + "}\n")

SLOW_IN_PRODUCTION = ("static long calls;\n\nlong mm_calls(void) { return calls; }\n\n"
                      + REAL_ARRAY
                      + "\nvoid mm(int n, const double *a, const double *b, double *c)\n{\n"
                      "    calls++;\n    const int step = 1;\n"
                      "    if (real_array(c, (long)n * n)) {\n"
                      "        volatile double sink = 0.0;\n"
                      "        for (int pass = 0; pass < 1000; ++pass)\n"
                      "            for (long i = 0; i < (long)n * n; ++i)\n"
                      "                sink += a[i];\n"
                      "    }" + IKJ_ROWS + "}\n")

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


def project(tmp_path: Path) -> Path:
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
        r3_llm_children = 1
        r3_llm_repairs = 0
        r3_llm_inner_budget = 0
    """))
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "add", "mm.c"], cwd=tmp_path, check=True)
    return tmp_path


@pytest.mark.parametrize(("rewrite", "flags"), [
    (WRONG_LATE, ()), (SLOW_IN_PRODUCTION, ()), (WRONG_LATE, ("-n", "2"))],
    ids=["wrong_after_20_calls_on_real_arrays", "slow_on_real_arrays",
         "wrong_after_20_calls_under_xdist"])
def test_a_rewrite_that_knows_when_it_is_judged_leaves_no_patch_and_no_lock(tmp_path, rewrite,
                                                                            flags):
    root = project(tmp_path)
    answer = f"Faster: unit stride in the inner loop.\n```c\n{rewrite}```\n"
    with ScriptedChatServer(lambda body: answer) as server:
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--r3-tune",
             "--r3-llm-model", "scripted", "--r3-llm-base-url", server.base_url,
             "--r3-llm-api-key-env", "none", *flags],
            cwd=root, capture_output=True, text=True, timeout=600)
        assert server.requests, "the model was never asked"
    assert result.returncode == 0, result.stdout + result.stderr
    events = [json.loads(line) for line in
              (root / ".r3" / "runs" / "mm" / "events.jsonl").read_text().splitlines()]
    (judged,) = [e["result"] for e in events if e["event"] == "result"]
    if rewrite is WRONG_LATE:  # wrong where it is timed and used: on real arrays, or, once
        # the verification's own calls pass its 20 (more derived cases), on a derived case
        kind = (judged["status"], judged["details"]["kind"])
        assert kind in (("wrong_output", "timed_output"), ("wrong_output", "mismatch")), judged
        if kind[1] == "timed_output":
            assert "production layout" in judged["diagnostics"][0]
    else:  # timed as it runs in production: far slower than the baseline, or (its long
        # launches losing the CPU on a busy machine) no figure at all; never a speedup
        assert judged["status"] == "too_busy" or (
            judged["status"] == "ok" and judged["timing"]["speedup"] < 1), judged["timing"]
    assert "tuned (source rewrite)" not in result.stdout, result.stdout
    assert not (root / ".r3" / "patches" / "mm.patch").exists()
    lock = root / "r3.lock"
    entries = json.loads(lock.read_text())["kernels"].get("mm") if lock.exists() else None
    assert not entries, entries
    assert (root / "mm.c").read_text() == NAIVE
