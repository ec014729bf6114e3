"""Turning a candidate into IR, in the parent: clang and the static check run here, never in
the contained worker (which may not start programs, and may be compromised).

clang reads the candidate's text as untrusted input (restricted includes, diagnostics that
quote nothing else); the static check refuses IR that reaches outside the kernel before it
is ever sent to a worker.
"""

from __future__ import annotations

import functools
import re
import threading
import time
from dataclasses import dataclass

from ..backends.candidate_text import check_token_pasting
from ..backends.clang import front_end, generic_target_flags, host_target, without_linker_keep
from ..errors import CompileError, R3Error
from ..model.signature import Signature
from ..model.source import KernelSource
from . import sandbox
from .protocol import COMPILE_ERROR, SANDBOX_VIOLATION, Candidate, KernelSpec, Rejected

# llvmlite parses into one global context: the tuner's threads take turns
_llvm_lock = threading.Lock()

# uninitialised locals then hold NaN or 0xAA... instead of whatever the optimiser folded
PATTERN_INIT = "-ftrivial-auto-var-init=pattern"

# macros whose value depends on when the text is built: the verification build and the
# user's later build would see different values (a time bomb folded away before any check)
_BUILD_TIME_MACROS = re.compile(r"\b__(?:DATE|TIME|TIMESTAMP)__\b")
BUILD_TIME_ADVICE = ("a rewrite may not use __DATE__, __TIME__ or __TIMESTAMP__ (the kernel "
                     "does not): their value differs between the build that verified it and "
                     "the build your code runs; remove them")


def build_time_flags(baseline_text: str) -> tuple[str, ...]:
    """clang flags for a candidate of a kernel whose own text is ``baseline_text``: build-time
    macros are an error (clang sees every expansion, even one a macro builds) unless the
    kernel itself uses them."""
    return () if _BUILD_TIME_MACROS.search(baseline_text) else ("-Werror=date-time",)


@dataclass
class CompiledCandidate:
    ir: str
    pattern_ir: str | None  # rewrites only: the verification build with patterned locals
    seconds: dict


class CandidateCompiler:
    """Compiles and checks a kernel's candidates against what its baseline is allowed."""

    def __init__(self, spec: KernelSpec, backend, static_check: bool = True) -> None:
        self.spec = spec
        self.backend = backend
        self.static_check = static_check
        # what the backend's own runtime lends candidates (CUDA emulation's services and its
        # per-block __shared__ sections)
        self._runtime = {
            "runtime_functions": getattr(backend, "sandbox_functions", frozenset()),
            "memory_sections": getattr(backend, "sandbox_sections", frozenset())}
        self.source = KernelSource(spec.source_text, spec.filename,
                                   include_dirs=tuple(spec.include_dirs),
                                   defines=tuple(tuple(d) for d in spec.defines),
                                   entry=spec.entry)
        self.baseline_ir = self._clang(self.source, {})
        self._original_features: set[str] | None = None  # of its build for a plain CPU
        with _llvm_lock:
            module = self._reachable(self.baseline_ir)
            self.baseline_state = sandbox.BaselineState.of(module)

    def _reachable(self, ir: str):
        """The parsed module cut down to what the entry reaches: a candidate is judged on
        the code that can run, as plain calls load it (``main`` and unused helpers of the
        file never run and never count against it)."""
        module = self.backend.parse(without_linker_keep(ir), f"kernel {self.spec.name!r}")
        reachable = getattr(self.backend, "reachable", None)
        if reachable is not None:
            reachable(module, self.spec.entry, f"kernel {self.spec.name!r}")
        return module

    def _clang(self, source: KernelSource, macros: dict) -> str:
        return self.backend.compile(source, {**self.spec.default_macros, **macros})

    def compile(self, candidate: Candidate) -> CompiledCandidate:
        """IR for ``candidate``, or Rejected (compile error, sandbox violation)."""
        rewrite = candidate.source_text is not None
        source = self.source.candidate(candidate.source_text) if rewrite else self.source
        if rewrite:
            source = source.with_flags(*build_time_flags(self.spec.source_text))
        started = time.perf_counter()
        try:
            if rewrite:
                check_token_pasting(candidate.source_text, self.spec.source_text,
                                    self.spec.filename)
            ir = self._clang(source, candidate.macros)
            pattern_ir = self._clang(source.with_flags(PATTERN_INIT), candidate.macros) \
                if rewrite else None
        except CompileError as exc:
            kind = exc.kind
            text = exc.diagnostics or str(exc)
            first = next((line for line in text.splitlines() if "error" in line),
                         text.splitlines()[0] if text else "clang failed")
            if "-Wdate-time" in first:
                first = f"{first.split(': error:')[0]}: error: {BUILD_TIME_ADVICE}"
            raise Rejected(COMPILE_ERROR, kind, first.strip(), explanation=text) from None
        clang_seconds = time.perf_counter() - started
        try:
            with _llvm_lock:
                module = self._reachable(ir)
                ir = str(module) + _trailer(ir)
                violations = sandbox.check_module(module, baseline=self.baseline_state,
                                                  **self._runtime) if self.static_check else []
                if pattern_ir is not None:  # the same text: cut, and checked, the same way
                    patterned = self._reachable(pattern_ir)
                    pattern_ir = str(patterned) + _trailer(pattern_ir)
                    if self.static_check and not violations:
                        violations = sandbox.check_module(patterned,
                                                          baseline=self.baseline_state,
                                                          **self._runtime)
        except R3Error as exc:
            raise Rejected(COMPILE_ERROR, "compile_error", str(exc)) from None
        if violations:
            raise Rejected(SANDBOX_VIOLATION, violations[0].kind, sandbox.advice(violations),
                           symbols=sorted({v.symbol for v in violations}))
        if rewrite and self.static_check:
            self._check_signature(source, candidate.macros)
            self._check_portable(source, candidate.macros)
        return CompiledCandidate(ir, pattern_ir, {"clang": clang_seconds})

    def _check_portable(self, source: KernelSource, macros: dict) -> None:
        """A rewrite builds to the same code on every CPU of this architecture: the patch
        is compiled on every machine the project runs on, each for itself, and the judge
        runs only this machine's build. So it may not name a target macro the original
        does not (``#if defined(__AVX512F__)`` keeping the original and an off-by-one
        under ``#else``: right here, wrong on every CPU without AVX-512), its build for
        the oldest CPU of the architecture must succeed (intrinsics of newer CPUs fail
        there) and ask for no CPU feature the original's does not (a target attribute or
        pragma: an illegal instruction there). A rewrite cannot build a macro's name
        (token pasting is refused where the original does not paste)."""
        if getattr(self.backend, "name", "") != "cpu":
            return
        plain = "a plain x86-64 CPU" if host_target().triple.startswith("x86_64") else \
            "the oldest CPU of this architecture"
        named = _target_words(source.text) - _target_words(self.spec.source_text)
        if named:
            raise Rejected(COMPILE_ERROR, "target_dependent",
                           f"the rewrite tests the target macro(s) "
                           f"{', '.join(sorted(named)[:3])}, which the original does not: "
                           "what it builds depends on the CPU of the machine that builds "
                           f"it, and {plain} builds code no check ran; keep one version "
                           "for every CPU")
        if self._original_features is None:
            self._original_features = _features(self.backend.front_end(
                self.source, self.spec.default_macros, generic=True).text)
        try:
            generic = self.backend.front_end(source, {**self.spec.default_macros, **macros},
                                             generic=True).text
        except CompileError as exc:
            first = next((line for line in (exc.diagnostics or str(exc)).splitlines()
                          if "error" in line), "clang failed")
            raise Rejected(COMPILE_ERROR, "target_dependent",
                           f"the rewrite does not build for {plain} ({first.strip()}): it "
                           "needs CPU features this machine has and others lack (intrinsics "
                           "of newer CPUs); keep to portable C") from None
        extra = _features(generic) - self._original_features
        if extra:
            raise Rejected(COMPILE_ERROR, "target_dependent",
                           f"the rewrite asks for CPU features the original does not "
                           f"({', '.join(sorted(extra)[:4])}: a target attribute or pragma); "
                           f"{plain} would stop on an illegal instruction; remove it")


    def _check_signature(self, source: KernelSource, macros: dict) -> None:
        """A rewrite keeps the kernel's signature as the user's launcher reads it from the
        source: parameters, their types and declared extents, and which arrays it writes.
        The judge calls the entry as the original is called; after ``git apply`` the
        launcher follows the rewrite (an extra parameter refused every call, a parameter
        written back with its own value refused every read-only array)."""
        try:
            signature = self.backend.inspect(source, self.spec.entry,
                                             {**self.spec.default_macros, **macros},
                                             self.spec.name)
        except R3Error as exc:
            raise Rejected(COMPILE_ERROR, "signature", str(exc).splitlines()[0]) from None
        change = signature_change(self.spec.params, self.spec.return_dtype, signature)
        if change:
            raise Rejected(COMPILE_ERROR, "signature",
                           f"the rewrite changes the kernel's signature: {change}; callers "
                           "pass what the original takes, so keep its parameters, types, "
                           "extents and which arrays it writes")


def signature_change(params: list[dict], return_dtype: str | None,
                     signature: Signature) -> str:
    """How ``signature`` differs from the original's ``params`` and ``return_dtype``, in a
    phrase, or "" where it does not."""
    theirs = [p.as_dict() for p in signature.params]
    if len(theirs) != len(params):
        return f"it takes {len(theirs)} parameter(s), the original {len(params)}"
    for number, (was, now) in enumerate(zip(params, theirs, strict=True), start=1):
        name = was.get("name")
        if now.get("written") and not was.get("written"):
            return (f"{name} (parameter {number}) would be taken as written, which the "
                    "original only reads (the rewrite writes it, or lets its address "
                    "escape), so read-only arrays would be refused there")
        if was.get("written") and not now.get("written"):
            return f"it never writes {name} (parameter {number}), which the original writes"
        # not ctype: a rewrite may add const or restrict (contract.py speaks of restrict)
        for key in ("name", "dtype", "is_pointer", "dims", "components"):
            before, after = was.get(key), now.get(key)
            if key == "dims":  # a rewrite's extent read as "" (behind a macro) is unknown
                before, after = list(before or ()), list(after or ())
                if len(before) == len(after):
                    after = [a or b for a, b in zip(after, before, strict=True)]
            if before != after:
                return f"parameter {number} ({name}) has {key} {after!r}, the original {before!r}"
    if signature.return_dtype != return_dtype:
        return f"it returns {signature.return_dtype or 'void'}, the original " \
               f"{return_dtype or 'void'}"
    return ""


_FEATURES = re.compile(r'"target-features"="([^"]*)"')
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
# names of CPU features no reference target below defines, and runtime CPU dispatch
_FEATURE_NAMES = re.compile(r"__(?:AVX|AMX|SSE|APX|ARM_FEATURE|ARM_NEON|ARM_SVE)\w*|"
                            r"__builtin_cpu_(?:supports|is|init)")
# the CPUs whose predefined macros are compared: this machine, the oldest of its
# architecture, and a recent one (AVX-512); a macro that differs among them is a target's
_RECENT = {"x86_64": "-march=x86-64-v4", "aarch64": "-march=armv9-a"}


@functools.lru_cache(maxsize=1)
def target_macros() -> frozenset[str]:
    """The macros clang predefines differently for this machine, the oldest CPU of its
    architecture and a recent one: ``__AVX512F__``, ``__SSE4_2__``, ``__tune_k8__``..."""
    triple = host_target().triple
    recent = _RECENT.get(triple.split("-")[0])
    targets = [host_target().clang_flags(), generic_target_flags(),
               *([("-target", triple, recent)] if recent else [])]
    defined = []
    for flags in targets:
        text = front_end("", filename="r3_target_macros.c", target_flags=flags,
                         extra_flags=("-dM",), preprocess_only=True).text
        defined.append(dict(line.split(" ", 2)[1:] + [""] if line.count(" ") == 1
                            else line.split(" ", 2)[1:] for line in text.splitlines()
                            if line.startswith("#define ")))
    names = set().union(*defined)
    return frozenset(name for name in names if len({d.get(name) for d in defined}) > 1)


def _target_words(text: str) -> set[str]:
    """The target macros (and CPU dispatch builtins) ``text`` names, comments included
    (a name in a comment costs a refusal, never a miss)."""
    words = set(_IDENTIFIER.findall(text.replace("\\\n", "")))
    return {word for word in words if word in target_macros() or _FEATURE_NAMES.fullmatch(word)}


def _features(ir: str) -> set[str]:
    """The CPU features any function of ``ir`` is built with."""
    return {feature for listed in _FEATURES.findall(ir) for feature in listed.split(",")
            if feature.startswith("+")}


def _trailer(ir: str) -> str:
    """The comment lines that end ``ir``: a backend's own payload (CUDA emulation carries its
    runtime there), which printing the parsed module would drop."""
    lines = ir.rstrip("\n").split("\n")
    count = 0
    while count < len(lines) and lines[-1 - count].startswith(";"):
        count += 1
    return "\n" + "\n".join(lines[-count:]) + "\n" if count else ""
