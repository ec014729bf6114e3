"""The search space of one kernel as a Nevergrad parametrization.

It joins the kernel's own tunables (with their constraints) and the LLVM pipeline: the
optimisation level, the PassBuilder switches, the inlining threshold, loop hints (vector
width, interleave and unroll counts), short custom pass sequences before and after the
standard pipeline, and the code generation settings the kernel's backend honours (CUDA:
loop strength reduction). Every point starts at the kernel's baseline, so the first candidate
asked is the baseline itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model.pipeline import CODEGEN_CHOICES, CUSTOM_PASSES, PIPELINE_CHOICES, Pipeline
from ..model.tunables import TuningSpace
from ..replay.protocol import Candidate

__all__ = ["PIPELINE_CHOICES", "SearchSpace"]
NO_PASS = "-"


@dataclass
class SearchSpace:
    tuning: TuningSpace
    baseline_pipeline: Pipeline
    tune_pipeline: bool = True
    pass_slots: int = 2
    codegen: tuple[str, ...] = ()  # CODEGEN_CHOICES the backend honours (codegen_settings)

    @property
    def pipeline_choices(self) -> dict[str, tuple]:
        """The pipeline settings searched, each with its values."""
        return {**PIPELINE_CHOICES, **{name: CODEGEN_CHOICES[name] for name in self.codegen}}

    def parametrization(self, seed: int, start_macros: dict | None = None):
        import nevergrad as ng

        def choice(values: tuple, start: object):
            values = list(values)
            if start not in values:
                values.insert(0, start)
            ordered = all(isinstance(v, (int, float)) and not isinstance(v, bool)
                          for v in values) and values == sorted(values)
            kind = ng.p.TransitionChoice if ordered and len(values) > 2 else ng.p.Choice
            parameter = kind(values)
            parameter.value = start
            return parameter

        start = {**self.tuning.default, **(start_macros or {})}
        macros = {name: choice(values, start[name])
                  for name, values in self.tuning.tunables.items()}
        parts: dict = {"macros": ng.p.Dict(**macros)}
        if self.tune_pipeline:
            base = self.baseline_pipeline
            pipeline = {name: choice(values, getattr(base, name))
                        for name, values in self.pipeline_choices.items()}
            for where in ("before", "after"):
                current = list(getattr(base, f"passes_{where}"))
                for slot in range(self.pass_slots):
                    start = current[slot] if slot < len(current) else NO_PASS
                    pipeline[f"pass_{where}_{slot}"] = choice((NO_PASS, *CUSTOM_PASSES), start)
            parts["pipeline"] = ng.p.Dict(**pipeline)
        parametrization = ng.p.Dict(**parts)
        parametrization.random_state.seed(seed)
        if self.tuning.constraints:
            parametrization.register_cheap_constraint(self.is_valid)
        return parametrization

    def decode(self, value: dict, label: str = "") -> Candidate:
        """A Nevergrad point as a replay candidate (only what differs from the baseline)."""
        macros = {k: v for k, v in value["macros"].items() if self.tuning.default[k] != v}
        pipeline: dict = {}
        if "pipeline" in value:
            raw = dict(value["pipeline"])
            chosen = {k: raw[k] for k in self.pipeline_choices}
            for where in ("before", "after"):
                chosen[f"passes_{where}"] = [raw[f"pass_{where}_{slot}"]
                                             for slot in range(self.pass_slots)
                                             if raw[f"pass_{where}_{slot}"] != NO_PASS]
            base = self.baseline_pipeline.as_dict()
            pipeline = {k: v for k, v in chosen.items()
                        if _normal(base.get(k)) != _normal(v)}
        return Candidate(macros=macros, pipeline=pipeline, label=label)

    def is_valid(self, value: dict) -> bool:
        return self.tuning.violated(value["macros"]) is None


def _normal(value: object) -> object:
    return list(value) if isinstance(value, tuple) else value
