"""A kernel's tunable parameters, their allowed values and the constraints between them.

Constraints are Python expressions over tunable names (``"TILE % UNROLL == 0"``, as in
Kernel Tuner's restrictions) or callables taking the tunables as keyword arguments.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from ..errors import DeclarationError

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SAFE_BUILTINS = {"min": min, "max": max, "abs": abs, "len": len, "int": int, "bool": bool}
MAX_ENUMERATION = 1_000_000


@dataclass(frozen=True)
class Constraint:
    text: str
    check: Callable[..., bool]

    def __call__(self, values: Mapping[str, object]) -> bool:
        return bool(self.check(**values))


def _compile_constraint(
    constraint: str | Callable[..., bool], names: Sequence[str], where: str
) -> Constraint:
    if callable(constraint):
        label = getattr(constraint, "__name__", repr(constraint))
        return Constraint(label, constraint)
    if not isinstance(constraint, str):
        raise DeclarationError(
            f"{where}: constraint {constraint!r} must be a string expression or a callable"
        )
    try:
        code = compile(constraint, "<constraint>", "eval")
    except SyntaxError as exc:
        raise DeclarationError(
            f"{where}: constraint {constraint!r} is not a valid Python expression: {exc.msg}"
        ) from None
    unknown = sorted(set(code.co_names) - set(names) - set(_SAFE_BUILTINS))
    if unknown:
        raise DeclarationError(
            f"{where}: constraint {constraint!r} names {', '.join(unknown)}, which "
            f"{'is' if len(unknown) == 1 else 'are'} not tunable; tunables: "
            f"{', '.join(names) or 'none'}"
        )

    def check(**values: object) -> bool:
        return bool(eval(code, {"__builtins__": _SAFE_BUILTINS}, values))

    return Constraint(constraint, check)


class TuningSpace:
    """Named tunables, each with a tuple of allowed values, plus constraints."""

    def __init__(
        self,
        tunables: Mapping[str, Sequence[object]] | None,
        constraints: Sequence[str | Callable[..., bool]] = (),
        defaults: Mapping[str, object] | None = None,
        where: str = "kernel",
    ) -> None:
        self.where = where
        self.tunables: dict[str, tuple[object, ...]] = {}
        for name, values in (tunables or {}).items():
            if not isinstance(name, str) or not _NAME.match(name):
                raise DeclarationError(
                    f"{where}: tunable name {name!r} is not a valid C macro name"
                )
            if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
                raise DeclarationError(
                    f"{where}: tunable {name} needs a list of allowed values, got {values!r}"
                )
            if len(values) == 0:
                raise DeclarationError(f"{where}: tunable {name} has no allowed values")
            if len(set(map(repr, values))) != len(values):
                raise DeclarationError(f"{where}: tunable {name} lists a value twice: {values!r}")
            for value in values:
                if not isinstance(value, (int, float, str)):
                    raise DeclarationError(
                        f"{where}: tunable {name} value {value!r} must be a number, bool or "
                        f"string (it becomes -D{name}=value)"
                    )
            self.tunables[name] = tuple(values)
        names = list(self.tunables)
        self.constraints = [_compile_constraint(c, names, where) for c in constraints]
        self.default = self._pick_default(defaults or {})

    def _pick_default(self, defaults: Mapping[str, object]) -> dict[str, object]:
        unknown = sorted(set(defaults) - set(self.tunables))
        if unknown:
            raise DeclarationError(
                f"{self.where}: defaults name unknown tunable(s) {', '.join(unknown)}; "
                f"tunables: {', '.join(self.tunables) or 'none'}"
            )
        values = {name: allowed[0] for name, allowed in self.tunables.items()}
        values.update(defaults)
        self.check_values(values, label="default")
        if not any(True for _ in self.iter_valid(limit=MAX_ENUMERATION)):
            raise DeclarationError(
                f"{self.where}: the constraints exclude every combination of tunable values "
                f"(constraints: {'; '.join(c.text for c in self.constraints)}). Relax a "
                "constraint or add allowed values."
            )
        violated = self.violated(values)
        if violated:
            raise DeclarationError(
                f"{self.where}: the default values {values} violate constraint "
                f"{violated.text!r}; pass defaults={{...}} naming a valid combination"
            )
        return values

    def check_values(self, values: Mapping[str, object], label: str = "") -> None:
        """Raise a DeclarationError if a name is unknown or a value is not allowed."""
        for name, value in values.items():
            if name not in self.tunables:
                raise DeclarationError(
                    f"{self.where}: {label + ' ' if label else ''}names unknown tunable "
                    f"{name!r}; tunables: {', '.join(self.tunables) or 'none'}"
                )
            if value not in self.tunables[name]:
                raise DeclarationError(
                    f"{self.where}: tunable {name}={value!r} is not one of its declared "
                    f"values {list(self.tunables[name])}"
                )

    def violated(self, values: Mapping[str, object]) -> Constraint | None:
        for constraint in self.constraints:
            try:
                ok = constraint(values)
            except Exception as exc:  # a constraint that cannot be evaluated is violated
                raise DeclarationError(
                    f"{self.where}: constraint {constraint.text!r} raised "
                    f"{type(exc).__name__}: {exc} for {dict(values)}"
                ) from exc
            if not ok:
                return constraint
        return None

    def resolve(self, overrides: Mapping[str, object]) -> dict[str, object]:
        """Default values updated with ``overrides``, validated against the space."""
        values = dict(self.default)
        self.check_values(overrides)
        values.update(overrides)
        violated = self.violated(values)
        if violated:
            raise DeclarationError(
                f"{self.where}: tunable values {values} violate constraint {violated.text!r}"
            )
        return values

    def iter_valid(self, limit: int | None = None) -> Iterator[dict[str, object]]:
        names = list(self.tunables)
        product = itertools.product(*self.tunables.values())
        for combination in itertools.islice(product, limit):
            values = dict(zip(names, combination))
            if self.violated(values) is None:
                yield values

    @property
    def size(self) -> int:
        size = 1
        for values in self.tunables.values():
            size *= len(values)
        return size

    def describe(self) -> list[str]:
        lines = [f"{name} in {list(values)}" for name, values in self.tunables.items()]
        lines += [f"constraint: {c.text}" for c in self.constraints]
        return lines
