"""The LLVM pass pipeline a kernel variant is optimised with.

The default reproduces ``clang -O3``: llvmlite's PassBuilder at speed level 3 with loop and
SLP vectorisation, unrolling and interleaving on (clang turns SLP vectorisation on at -O2 and
above; llvmlite's own default leaves it off).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields

from .errors import DeclarationError


@dataclass(frozen=True)
class Pipeline:
    """Settings of llvmlite's PassBuilder; every field is a knob the tuner may turn."""

    level: int = 3
    loop_vectorize: bool = True
    slp_vectorize: bool = True
    loop_unroll: bool = True
    loop_interleave: bool = True
    inline_threshold: int | None = None

    def __post_init__(self) -> None:
        if self.level not in (0, 1, 2, 3):
            raise DeclarationError(f"pipeline level must be 0, 1, 2 or 3, got {self.level!r}")
        for name in ("loop_vectorize", "slp_vectorize", "loop_unroll", "loop_interleave"):
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
    def from_mapping(cls, settings: Mapping[str, object] | Pipeline | None, where: str = "") -> Pipeline:
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

    def run(self, module, target_machine) -> None:
        """Optimise an llvmlite module in place."""
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
