"""The bounds of C array parameters as the source writes them, and their values in a call.

``double C[ni][nj]`` reaches LLVM as ``double (*)[nj]``: the debug info keeps the rank and
the constant inner bounds, never the first bound nor which parameters the others name. Those
come from the preprocessed definition (``POLYBENCH_2D(...)`` and the like expanded), and a
bound is evaluated per call from the integer arguments, as integer arithmetic only.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Mapping
from dataclasses import replace

from .signature import Signature

_QUALIFIER = re.compile(r"\b(?:restrict|__restrict__|__restrict|const|volatile|static)\b")
_DECLARED_ARRAY = re.compile(r"^[\w\s*]*?\w[\w\s*]*?[\s*]([A-Za-z_]\w*)\s*((?:\[[^\[\]]*\]\s*)+)$")
_INTEGER_SUFFIX = re.compile(r"\b(\d+)[uUlL]+\b")


def _parameter_list(text: str, start: int) -> tuple[str, int] | None:
    """The text between the parenthesis at ``start`` and its match, and where it ends."""
    depth = 0
    for index in range(start, len(text)):
        if text[index] == "(":
            depth += 1
        elif text[index] == ")":
            depth -= 1
            if depth == 0:
                return text[start + 1:index], index
    return None


def _split_top_level(text: str) -> list[str]:
    parts, depth, current = [], 0, []
    for char in text:
        if char in "([":
            depth += 1
        elif char in ")]":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def declared_bounds(preprocessed: str, entry: str) -> dict[str, tuple[str, ...]]:
    """The array bounds of ``entry``'s parameters as its definition writes them, from the
    preprocessed source: ``{"C": ("ni", "nj")}`` for ``double C[ni][nj]`` (``POLYBENCH_2D``
    and the like already expanded). The debug info keeps only the inner constant bounds;
    the first, and which parameters the others name, exist only in the text."""
    found: dict[str, tuple[str, ...]] = {}
    for match in re.finditer(rf"\b{re.escape(entry)}\s*\(", preprocessed):
        listed = _parameter_list(preprocessed, match.end() - 1)
        if listed is None:
            continue
        text, end = listed
        bounds = {}
        for part in _split_top_level(text):
            declared = _DECLARED_ARRAY.match(" ".join(part.split()))
            if declared:
                bounds[declared.group(1)] = tuple(
                    _simplified(" ".join(_QUALIFIER.sub(" ", b).split()))
                    for b in re.findall(r"\[([^\[\]]*)\]", declared.group(2)))
        if bounds:
            found = bounds
            if preprocessed[end + 1:].lstrip().startswith("{"):
                break  # the definition: its bounds are the ones the body uses
    return found


def _simplified(bound: str) -> str:
    """``"1000 + 0"`` -> ``"1000"``, ``"ni + 0"`` -> ``"ni"`` (padding macros set to 0)."""
    constant = bound_value(bound, {})
    if constant is not None:
        return str(constant)
    return re.sub(r"(?:\s*[+-]\s*0)+$", "", bound).strip()


def with_declared_bounds(signature: Signature, preprocessed: str) -> Signature:
    """``signature`` with each array parameter's bounds as written (see declared_bounds),
    where the text agrees with the debug info on the rank."""
    written = declared_bounds(preprocessed, signature.entry)
    if not written:
        return signature
    params = []
    for param in signature.params:
        bounds = written.get(param.name)
        rank = len(param.dims) or 1
        if param.is_pointer and param.components == 1 and bounds and len(bounds) == rank:
            param = replace(param, dims=tuple(
                text or known for text, known in zip(bounds, param.dims or ("",), strict=True)))
        params.append(param)
    return replace(signature, params=tuple(params))


_BOUND_NODES = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Name, ast.Load,
                ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod, ast.USub, ast.UAdd)


@functools.lru_cache(maxsize=256)
def _bound_code(expression: str):
    """(compiled expression, names it uses), or None if it is not integer arithmetic over
    names and numbers (C's ``/`` on sizes read as floor division)."""
    text = _INTEGER_SUFFIX.sub(r"\1", expression).replace("/", "//")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if not isinstance(node, _BOUND_NODES) or (
                isinstance(node, ast.Constant) and type(node.value) is not int):
            return None
    names = frozenset(n.id for n in ast.walk(tree) if isinstance(n, ast.Name))
    return compile(tree, "<bound>", "eval"), names


def bound_value(expression: str, values: Mapping[str, int]) -> int | None:
    """The value of an array bound (``"ni"``, ``"1000 + 0"``, ``"n - 1"``) given integer
    parameter values, or None when it cannot be known (other names, other operations)."""
    compiled = _bound_code(expression) if expression else None
    if compiled is None or not compiled[1] <= values.keys():
        return None
    try:
        return int(eval(compiled[0], {"__builtins__": {}}, dict(values)))  # checked above
    except ArithmeticError:
        return None
