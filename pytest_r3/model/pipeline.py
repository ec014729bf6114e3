"""The LLVM pass pipeline a kernel variant is optimised with.

The default reproduces ``clang -O3``: llvmlite's PassBuilder at speed level 3 with loop and
SLP vectorisation, unrolling and interleaving on (clang turns SLP vectorisation on at -O2 and
above; llvmlite's own default leaves it off).

Beyond the PassBuilder options, a pipeline may run extra passes before and after the
standard one, and attach loop hints (vector width, interleave count, unroll count) to every
loop as ``llvm.loop`` metadata, the same hints ``#pragma clang loop`` writes. Loop hints are
used instead of LLVM's global command-line options (``-force-vector-width``...) because
those stay set for the whole process once given, so one variant would change the next.

Code generation settings (:data:`CODEGEN_CHOICES`) are read by LLVM's code generator, which
has no per-module option: a backend that honours them (CUDA's PTX) emits inside
:func:`codegen`, which sets them for that emission alone, and every other emission in the
process takes the same lock, so none sees another build's setting.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import threading
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, fields

from ..errors import DeclarationError

# Transform passes llvmlite exposes that make sense around the standard pipeline.
CUSTOM_PASSES = (
    "aggressive_dce", "aggressive_instcombine", "dead_store_elimination", "instruction_combine",
    "jump_threading", "lcssa", "loop_deletion", "loop_rotate", "loop_simplify",
    "loop_strength_reduce", "loop_unroll", "loop_unroll_and_jam", "mem_copy_opt", "new_gvn",
    "reassociate", "sccp", "simplify_cfg", "sinking", "sroa", "tail_call_elimination",
)

# The values the tuner explores for each PassBuilder setting (search/parametrization.py); a
# lock entry holding anything else (beside the declared pipeline's own) was not tuned here.
PIPELINE_CHOICES: dict[str, tuple] = {
    "level": (0, 1, 2, 3),
    "loop_vectorize": (True, False),
    "slp_vectorize": (True, False),
    "loop_unroll": (True, False),
    "loop_interleave": (True, False),
    "inline_threshold": (None, 0, 100, 225, 500, 1000),
    "vector_width": (0, 1, 2, 4, 8, 16),
    "interleave_count": (0, 1, 2, 4, 8),
    "unroll_count": (0, 1, 2, 4, 8, 16),
}
# Code generation settings, searched only for backends that honour them (a backend's
# ``codegen_settings``), each with its default first.
CODEGEN_CHOICES: dict[str, tuple] = {
    "codegen_lsr": (True, False),
    "flat_addresses": (False, True),
}
# the settings codegen() applies: on by default, turned off by LLVM's option named here
_DISABLING_OPTIONS = {"codegen_lsr": "-disable-lsr"}
_CODEGEN_LOCK = threading.Lock()
MAX_CUSTOM_PASSES = 8  # per sequence, in a state file (the tuner uses two slots)


def bounds_problem(settings: Mapping[str, object], declared: Pipeline) -> str | None:
    """Why pipeline ``settings`` read from a state file (r3.lock) ask for something tuning
    never explores, or None. Each setting must be one of :data:`PIPELINE_CHOICES` or the
    ``declared`` pipeline's own value: ``unroll_count=100000`` makes LLVM run for minutes."""
    for name, value in settings.items():
        allowed = PIPELINE_CHOICES.get(name, CODEGEN_CHOICES.get(name))
        if allowed is not None and value != getattr(declared, name) and not any(
                value == choice and type(value) is type(choice) for choice in allowed):
            return (f"pipeline {name}={value!r} is outside what tuning explores "
                    f"({', '.join(map(repr, allowed))})")
    for name in ("passes_before", "passes_after"):
        passes = settings.get(name, ())
        if isinstance(passes, (list, tuple)) and len(passes) > MAX_CUSTOM_PASSES \
                and tuple(passes) != getattr(declared, name):
            return (f"pipeline {name} lists {len(passes)} passes, more than "
                    f"{MAX_CUSTOM_PASSES}")
    return None


@dataclass(frozen=True)
class Pipeline:
    """Settings of llvmlite's PassBuilder; every field is a knob the tuner may turn."""

    level: int = 3
    loop_vectorize: bool = True
    slp_vectorize: bool = True
    loop_unroll: bool = True
    loop_interleave: bool = True
    inline_threshold: int | None = None
    passes_before: tuple[str, ...] = ()
    passes_after: tuple[str, ...] = ()
    vector_width: int = 0          # 0: the vectoriser decides
    interleave_count: int = 0      # 0: the vectoriser decides
    unroll_count: int = 0          # 0: the unroller decides; 1: no unrolling
    # code generation's loop strength reduction (CUDA: False can save registers where LSR
    # turns array indexing into several 64-bit pointers; see codegen())
    codegen_lsr: bool = True
    # GPU: address p[row + i] from p, not through a row pointer p + row (the backend rewrites
    # the optimised IR; see backends/cuda/addressing.py)
    flat_addresses: bool = False

    def __post_init__(self) -> None:
        for name in ("passes_before", "passes_after"):  # "a,b" (a command line) is two passes
            value = getattr(self, name)
            if isinstance(value, str):
                value = [part.strip() for part in value.split(",") if part.strip()]
            object.__setattr__(self, name, tuple(value))
        for name in self.passes_before + self.passes_after:
            if name not in CUSTOM_PASSES:
                raise DeclarationError(
                    f"unknown pass {name!r} in a custom pass sequence; known passes: "
                    f"{', '.join(CUSTOM_PASSES)}")
        for knob in ("vector_width", "interleave_count", "unroll_count"):
            value = getattr(self, knob)
            if not isinstance(value, int) or value < 0:
                raise DeclarationError(f"pipeline {knob} must be an integer >= 0, got {value!r}")
        if self.level not in (0, 1, 2, 3):
            raise DeclarationError(f"pipeline level must be 0, 1, 2 or 3, got {self.level!r}")
        for name in ("loop_vectorize", "slp_vectorize", "loop_unroll", "loop_interleave",
                     "codegen_lsr", "flat_addresses"):
            if not isinstance(getattr(self, name), bool):
                raise DeclarationError(
                    f"pipeline {name} must be True or False, got {getattr(self, name)!r}"
                )
        if self.inline_threshold is not None and not isinstance(self.inline_threshold, int):
            raise DeclarationError(
                f"pipeline inline_threshold must be an integer or None, got "
                f"{self.inline_threshold!r}"
            )

    @classmethod
    def from_mapping(cls, settings: Mapping[str, object] | Pipeline | None,
                     where: str = "") -> Pipeline:
        """Build from a user's dict, refusing unknown keys with the list of known ones."""
        if settings is None:
            return cls()
        if isinstance(settings, Pipeline):
            return settings
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(settings) - set(known))
        if unknown:
            raise DeclarationError(
                f"{where}unknown pipeline setting(s) {', '.join(map(repr, unknown))}; "
                f"known settings: {', '.join(known)}"
            )
        try:
            return cls(**settings)  # type: ignore[arg-type]
        except DeclarationError as exc:
            raise DeclarationError(f"{where}{exc}") from None

    def as_dict(self) -> dict[str, object]:
        return asdict(self)

    def key(self) -> str:
        """Stable short hash, the same across processes and Python versions."""
        text = json.dumps(self.as_dict(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def differences(self) -> dict[str, object]:
        """Settings that differ from the default pipeline (for reports)."""
        default = Pipeline()
        return {k: v for k, v in self.as_dict().items() if getattr(default, k) != v}

    @property
    def loop_hints(self) -> list[tuple[str, str]]:
        hints = []
        if self.vector_width:
            hints += [("llvm.loop.vectorize.enable", "i1 true"),
                      ("llvm.loop.vectorize.width", f"i32 {self.vector_width}")]
        if self.interleave_count:
            hints.append(("llvm.loop.interleave.count", f"i32 {self.interleave_count}"))
        if self.unroll_count == 1:
            hints.append(("llvm.loop.unroll.disable", ""))
        elif self.unroll_count > 1:
            hints.append(("llvm.loop.unroll.count", f"i32 {self.unroll_count}"))
        return hints

    def prepare_ir(self, ir: str) -> str:
        """Attach this pipeline's loop hints to every loop of ``ir`` (text in, text out).

        A loop that already carries a ``#pragma clang loop`` hint of the same kind gets
        both; which one LLVM honours differs by hint (the pipeline's vector width wins, the
        pragma's unroll count wins), so tune a loop either by pragma or by pipeline.
        """
        hints = self.loop_hints
        if not hints:
            return ir
        loop_ids = sorted(set(re.findall(r"!llvm\.loop !(\d+)", ir)), key=int)
        if not loop_ids:
            return ir
        next_id = max(int(n) for n in re.findall(r"^!(\d+) = ", ir, re.MULTILINE)) + 1
        added = []
        for key, value in hints:
            body = f'!"{key}"' + (f", {value}" if value else "")
            added.append((next_id, f"!{next_id} = !{{{body}}}"))
            next_id += 1
        refs = ", ".join(f"!{n}" for n, _ in added)
        for loop_id in loop_ids:
            ir = re.sub(rf"^(!{loop_id} = distinct !{{.*)}}$", rf"\1, {refs}}}", ir,
                        count=1, flags=re.MULTILINE)
        return ir + "\n" + "\n".join(text for _, text in added) + "\n"

    def run(self, module, target_machine) -> None:
        """Optimise an llvmlite module in place."""
        if self.passes_before:
            _run_passes(module, self.passes_before, target_machine)
        self._run_standard(module, target_machine)
        if self.passes_after:
            _run_passes(module, self.passes_after, target_machine)

    def _run_standard(self, module, target_machine) -> None:
        import llvmlite.binding as llvm

        options = llvm.create_pipeline_tuning_options(speed_level=self.level)
        options.loop_vectorization = self.loop_vectorize
        options.slp_vectorization = self.slp_vectorize
        options.loop_unrolling = self.loop_unroll
        options.loop_interleaving = self.loop_interleave
        if self.inline_threshold is not None:
            options.inlining_threshold = self.inline_threshold
        builder = llvm.create_pass_builder(target_machine, options)
        builder.getModulePassManager().run(module, builder)



@contextlib.contextmanager
def codegen(pipeline: Pipeline | None = None) -> Iterator[None]:
    """Generate machine code inside this: ``pipeline``'s code generation settings hold for
    it alone (None: LLVM's defaults). LLVM reads them from process-wide options, so the
    lock keeps another thread's emission from seeing them and they are reset after."""
    import llvmlite.binding as llvm

    off = [option for name, option in _DISABLING_OPTIONS.items()
           if pipeline is not None and not getattr(pipeline, name)]
    with _CODEGEN_LOCK:
        try:
            for option in off:
                llvm.set_option("", f"{option}=true")
            yield
        finally:
            for option in off:
                llvm.set_option("", f"{option}=false")


def _run_passes(module, names: tuple[str, ...], target_machine) -> None:
    """Run a custom sequence of individual passes (named as in CUSTOM_PASSES)."""
    import llvmlite.binding as llvm

    manager = llvm.create_new_module_pass_manager()
    for name in names:
        getattr(manager, f"add_{name}_pass")()
    builder = llvm.create_pass_builder(target_machine, llvm.create_pipeline_tuning_options())
    manager.run(module, builder)
