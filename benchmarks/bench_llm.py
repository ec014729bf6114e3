"""The LLM outer loop on the example matmul, against a scripted model on loopback.

The scripted model stands in for a real one with a fixed, documented behaviour, so the
mechanisms can be measured reproducibly:

- asked without a loop-interchange example in the prompt, its first answers cycle through
  a rewrite that does not compile, one that forgets to zero the output, one that calls a
  forbidden function, and a correct i-k-j rewrite;
- shown the catalogue's loop-interchange example (retrieval), it answers with the correct
  rewrite;
- given feedback (repair), it fixes a compile error or an uninitialised output; it answers
  every other feedback with prose.
- every answer takes ``--latency`` seconds, like a real model.

Configurations run on a copy of the example project (only matmul tuned): the inner loop
alone, then the outer loop with neither repair nor retrieval, each alone, and both.
Printed: the share of first answers that became valid, with and without repair and
retrieval, the speedup reached (against the inner loop alone), and the time per generation
split into model wait and evaluation: when the two add up to more than the wall time, they
overlapped.

Run from the repository root:  python benchmarks/bench_llm.py
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import isolation

isolation.isolate()  # before anything reads the environment (see isolation.py)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_r3.llm.testing import Scripted, ScriptedChatServer  # noqa: E402

MATMUL_IKJ = """\
/* c = a @ b for row-major n x n matrices, i-k-j order: unit stride in the inner loop,
 * with optional blocking of the k loop (TILE_K, 0 = none). */
#ifndef TILE_I
#define TILE_I 0
#endif
#ifndef TILE_J
#define TILE_J 0
#endif
#ifndef TILE_K
#define TILE_K 0
#endif

void matmul(int n, const double *a, const double *b, double *c)
{
    const int tk = TILE_K ? TILE_K : n;
    for (int i = 0; i < n * n; ++i)
        c[i] = 0.0;
    for (int kk = 0; kk < n; kk += tk)
        for (int i = 0; i < n; ++i)
            for (int k = kk; k < (kk + tk < n ? kk + tk : n); ++k) {
                const double aik = a[i * n + k];
                for (int j = 0; j < n; ++j)
                    c[i * n + j] += aik * b[k * n + j];
            }
}
"""
NO_SEMICOLON = MATMUL_IKJ.replace("const double aik = a[i * n + k];",
                                  "const double aik = a[i * n + k]")
NOT_ZEROED = MATMUL_IKJ.replace("    for (int i = 0; i < n * n; ++i)\n        c[i] = 0.0;\n",
                                "")
FORBIDDEN = "#include <stdio.h>\n" + MATMUL_IKJ.replace(
    "    const int tk", "    printf(\"matmul %d\\n\", n);\n    const int tk")


BLOCKED = MATMUL_IKJ.replace("#define TILE_K 0", "#define TILE_K 64")


def fenced(code: str) -> str:
    return f"Reordering the loops makes the inner loop unit-stride.\n```c\n{code}```\n"


class ScriptedModel:
    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.mistakes = itertools.cycle([NO_SEMICOLON, NOT_ZEROED, FORBIDDEN, MATMUL_IKJ])
        self.lock = threading.Lock()

    def __call__(self, body: dict) -> Scripted:
        last = body["messages"][-1]["content"]
        if "COMPILE ERROR" in last:
            answer = fenced(MATMUL_IKJ)
        elif "WRONG OUTPUT" in last and "initialise" in last:
            answer = fenced(MATMUL_IKJ)
        elif body["messages"][-1]["role"] == "user" and "evaluated" in last:
            answer = "I do not see how to fix that."
        elif "i-k-j order" in last.split("## Current version to improve")[-1][:400]:
            answer = fenced(BLOCKED)  # the parent is already interchanged: try blocking k
        elif "Loop interchange" in last:
            answer = fenced(MATMUL_IKJ)
        else:
            with self.lock:
                answer = fenced(next(self.mistakes))
        return Scripted(answer, delay=self.latency)


def tune(project: Path, base_url: str | None, repairs: int, examples: int, args) -> dict:
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--r3-tune",
               "--r3-kernels", "matmul", "--r3-budget", str(args.budget)]
    if base_url is None:  # the inner loop alone
        result = subprocess.run(command, cwd=project, capture_output=True, text=True)
        if result.returncode != 0:
            raise SystemExit(result.stdout + result.stderr)
        lock = json.loads((project / "r3.lock").read_text())
        entry = next(iter(lock.get("kernels", {}).get("matmul", {}).values()), {})
        return {"speedup": entry.get("speedup", 1.0)}
    command += ["--r3-llm-model", "scripted", "--r3-llm-base-url", base_url,
                "--r3-llm-api-key-env", "none",
               "-o", f"r3_llm_repairs={repairs}", "-o", f"r3_llm_examples={examples}",
               "-o", f"r3_llm_generations={args.generations}", "-o", "r3_llm_islands=2",
               "-o", f"r3_llm_children={args.children}",
               "-o", f"r3_llm_inner_budget={args.inner_budget}",
               "-o", f"r3_llm_concurrency={args.concurrency}"]
    result = subprocess.run(command, cwd=project, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(result.stdout + result.stderr)
    stats = re.search(r"source rewrites: (\d+) proposed, (\d+) correct at once, (\d+) after "
                      r"repair, (\d+) unparsable", result.stdout)
    proposed, first, repaired, unparsable = (int(x) for x in stats.groups())
    lock = json.loads((project / "r3.lock").read_text())
    entry = next(iter(lock["kernels"]["matmul"].values()))
    events = [json.loads(line) for line in
              (project / ".r3" / "runs" / "matmul" / "events.jsonl").read_text().splitlines()]
    generations = [e for e in events if e["event"] == "generation"]
    return {"proposed": proposed, "valid_first": first, "valid_after_repair": repaired,
            "unparsable": unparsable, "speedup": entry["speedup"],
            "rewrite": "source_text" in entry, "generations": generations}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=30)
    parser.add_argument("--generations", type=int, default=2)
    parser.add_argument("--children", type=int, default=2)
    parser.add_argument("--inner-budget", type=int, default=6)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--latency", type=float, default=1.0)
    isolation.add_option(parser)
    args = parser.parse_args()

    rows = {}
    for label, repairs, examples in (("inner loop only", 0, 0),
                                     ("no repair, no retrieval", 0, 0),
                                     ("repair only", 2, 0),
                                     ("retrieval only", 0, 2),
                                     ("repair + retrieval", 2, 2)):
        with tempfile.TemporaryDirectory() as tmp:
            project = Path(tmp) / "example_project"
            shutil.copytree(ROOT / "example_project", project,
                            ignore=shutil.ignore_patterns(".r3", "r3.lock", "__pycache__"))
            if label == "inner loop only":
                rows[label] = tune(project, None, 0, 0, args)
            else:
                with ScriptedChatServer(ScriptedModel(args.latency)) as server:
                    rows[label] = tune(project, server.base_url, repairs, examples, args)
        print(f"{label}: done", flush=True)

    print()
    print(f"matmul, budget {args.budget} inner evaluations, {args.generations} generations x 2 "
          f"islands x {args.children} children, model latency {args.latency:g} s, "
          f"{args.concurrency} requests in flight")
    print(f"{'configuration':<24} {'proposed':>8} {'valid 1st':>9} {'after repair':>12} "
          f"{'valid share':>11} {'lock speedup':>12} {'rewrite':>7}")
    print(f"{'inner loop only':<24} {'-':>8} {'-':>9} {'-':>12} {'-':>11} "
          f"{rows['inner loop only']['speedup']:>11.2f}x {'no':>7}")
    for label, row in rows.items():
        if label == "inner loop only":
            continue
        valid = row["valid_first"] + row["valid_after_repair"]
        share = valid / row["proposed"] if row["proposed"] else 0.0
        print(f"{label:<24} {row['proposed']:>8} {row['valid_first']:>9} "
              f"{row['valid_after_repair']:>12} {share:>10.0%} {row['speedup']:>11.2f}x "
              f"{'yes' if row['rewrite'] else 'no':>7}")
    print()
    print("time per generation (repair + retrieval run):")
    print(f"{'generation':>10} {'model wait':>11} {'evaluation':>11} {'sum':>8} {'wall':>8} "
          f"{'overlap':>8}")
    for g in rows["repair + retrieval"]["generations"]:
        total = g["model_wait_seconds"] + g["evaluation_seconds"]
        print(f"{g['index']:>10} {g['model_wait_seconds']:>10.1f}s "
              f"{g['evaluation_seconds']:>10.1f}s {total:>7.1f}s {g['wall_seconds']:>7.1f}s "
              f"{total / g['wall_seconds']:>7.2f}x")
    print("model wait sums the latency of every request; overlap > 1 means requests were in "
          "flight while evaluations ran.")


if __name__ == "__main__":
    main()
