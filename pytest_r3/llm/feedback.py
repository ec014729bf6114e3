"""Turning a raw evaluation result into advice a model can act on (AutoGuide-style).

Each status gets a one-line explanation and a concrete suggestion; numbers are kept short.
"""

from __future__ import annotations

import re

from ..replay.protocol import Result


def _compile_hint(diagnostics: str) -> str:
    match = re.search(r":(\d+):(\d+): error: (.*)", diagnostics)
    if not match:
        return "fix the compile error and keep standard C (C11) only"
    line, _, message = match.groups()
    hint = {"undeclared identifier": "declare it, or use a name that exists in the source",
            "expected ';'": "a statement is missing its semicolon",
            "conflicting types": "keep the entry point's exact signature",
            "implicit declaration": "include the header (<math.h>) or define the function"}
    advice = next((v for k, v in hint.items() if k in message), "fix this line")
    return f"line {line}: {message.strip()} -> {advice}"


def explain(result: Result, parent_speedup: float | None = None) -> str:
    """Short, actionable feedback about one candidate."""
    text = " ".join(result.diagnostics)
    if result.status == "compile_error":
        return f"COMPILE ERROR. {_compile_hint(text)}. Compiler said: {text[:600]}"
    if result.status == "sandbox_violation":
        return (f"REJECTED WITHOUT RUNNING: {text[:400]} Write the computation with plain "
                "loops and arithmetic; only math.h functions are allowed.")
    if result.status == "timeout":
        return ("TIMEOUT: a run did not finish. Check loop bounds and increments (an index "
                "that never reaches its bound), and do not add work that grows with n^2 or "
                "more beyond the original.")
    if result.status == "crash":
        return (f"CRASH: {text[:300]}. Usually an out-of-bounds index or pointer: check every "
                "array index stays within [0, size) for sizes not divisible by your tile or "
                "unroll factor (handle the remainder).")
    if result.status == "wrong_output":
        kind = result.details.get("kind", "")
        tip = {
            "out_of_bounds": "a write falls outside the buffer: guard the remainder iterations",
            "mismatch": "the result differs: keep the same arithmetic per output element; "
                        "initialise accumulators; handle sizes not divisible by the tile",
            "nondeterministic": "two runs differ: some output is read before it is written "
                                "(initialise it), or a value is left uninitialised",
            "modified_input": "an input array was modified: only write the output arrays",
        }.get(kind, "the outputs must match the original kernel for every input")
        return f"WRONG OUTPUT: {text[:500]} -> {tip}."
    if result.status == "too_busy":
        return ("CORRECT, NOT TIMED: the machine was too busy to measure it; this says "
                "nothing about the rewrite. Keep it or try another transformation.")
    if result.status == "suspect":
        return (f"NOT TRUSTED: {text[:400]} A launch must do all of its memory traffic; "
                "the rewrite is not kept.")
    if result.ok and result.timing is not None:
        speedup = result.timing.speedup
        versus = ""
        if parent_speedup:
            versus = f", {speedup / parent_speedup:.2f}x the parent's"
        verdict = {"faster": "faster", "within": "no faster",
                   "slower": "slower"}[result.timing.verdict()]
        return (f"CORRECT, {verdict}: {speedup:.2f}x the baseline{versus} "
                f"({result.timing.candidate_median * 1e6:.1f} us vs "
                f"{result.timing.baseline_median * 1e6:.1f} us). "
                + ("Build on this." if verdict == "faster"
                   else "Try a different transformation of the hot loop nest."))
    return f"{result.status}: {text[:300]}"


def code_facts(optimised_ir: str | None) -> str:
    """Compile statistics worth telling the model (vectorised loops, unrolling)."""
    if not optimised_ir:
        return ""
    vector_ops = len(re.findall(r"<\d+ x (?:float|double|i\d+)>", optimised_ir))
    loops = optimised_ir.count("!llvm.loop")
    return f"optimised IR: {loops} loop(s), {vector_ops} vector-typed operation(s)"
