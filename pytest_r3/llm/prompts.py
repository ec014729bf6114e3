"""Chat prompts for rewrites and repairs, laid out for the server's prefix cache.

The system message and the first part of the user message never change within a kernel's
run (role, rules, target facts, the original source and recorded shapes); what varies (the
parent, its measurements, feedback, examples) comes last, so a server that caches prompt
prefixes (vLLM, llama.cpp, hosted APIs) reuses most of every request.
"""

from __future__ import annotations

from .retrieval import Example

SYSTEM = """You are an expert in performance engineering of numerical kernels written in C \
(and CUDA C). You rewrite a kernel so it runs faster on the stated target while computing \
the same results.

Rules for a valid rewrite:
1. Keep the entry function's name, parameter list, parameter types and return type exactly.
2. Produce the same outputs as the original for every input (floating-point differences of \
a few units in the last place are tolerated; do not change the arithmetic per element \
beyond reassociation within one output). Inputs are not only the ones the tests draw: \
sizes of zero or below (do what the original does there, usually nothing), NaN, \
infinities, negative zeros and subnormal values, and arrays that overlap where the \
original allows it.
3. Write every element of every output array; never read output memory before writing it, \
unless the original does.
4. Call no external function except those in math.h; no I/O, no system calls, no inline \
assembly, no global state. Tunable macros (#ifndef NAME / #define NAME default) may be kept.
5. Answer with the complete new source file in one ```c code block (or with \
<<<<<<< SEARCH / ======= / >>>>>>> REPLACE blocks that copy the lines to change verbatim). \
Put a one-sentence explanation before the code."""


def target_facts(target: str, cpu_features: str = "") -> str:
    widths = [w for w, f in ((512, "+avx512f"), (256, "+avx2"), (128, "+sse2"))
              if f in cpu_features.split(",")]
    vector = f"; widest vector registers: {widths[0]} bits" if widths else ""
    return f"Target: {target}{vector}."


def stable_context(kernel_name: str, entry: str, source: str, shapes: list[str],
                   target: str, cpu_features: str = "", signature: str = "",
                   flags: tuple[str, ...] = ()) -> str:
    """What every prompt for one kernel starts with. ``signature`` (with C array bounds) and
    ``flags`` (the declared -D configuration) say how the entry is called and built: only
    the entry and what it calls run, the rest of the file (a ``main``, say) never does."""
    shape_text = "\n".join(f"- {s}" for s in shapes[:8]) or "- (none recorded)"
    called = f" Called as `{signature}`." if signature else ""
    built = f" Compiled with `{' '.join(flags)}`." if flags else ""
    return (f"{target_facts(target, cpu_features)}\n\nKernel `{kernel_name}`, entry point "
            f"`{entry}`.{called}{built} Only the entry and what it calls are built and run. "
            f"Original source:\n```c\n{source}```\n\nRecorded launches (arguments "
            f"and shapes the tests use):\n{shape_text}\n")


def rewrite_messages(context: str, parent_source: str, parent_summary: str,
                     inspirations: list[tuple[str, str]], examples: list[Example]) -> list[dict]:
    parts = [context, "\n## Current version to improve\n", f"```c\n{parent_source}```\n",
             f"Measured: {parent_summary}\n"]
    for summary, source in inspirations:
        parts.append(f"\n## Another correct version ({summary})\n```c\n{source}```\n")
    for example in examples:
        parts.append(f"\n## Known optimisation: {example.title}\n{example.text}\n")
    parts.append("\nPropose one rewrite of the current version that is faster on this target.")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "".join(parts)}]


def repair_messages(previous: list[dict], answer: str, feedback: str) -> list[dict]:
    return [*previous, {"role": "assistant", "content": answer},
            {"role": "user", "content": f"Your rewrite was evaluated: {feedback}\nFix it and "
                                        "answer with the complete corrected source."}]
