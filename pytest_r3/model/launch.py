"""How a GPU kernel is launched: its grid and block as functions of arguments and tunables.

A GPU kernel's declaration says how many threads to start (``launch=``); a CPU kernel is a
plain function call and takes none. ``launch`` is either

- a callable ``launch(args, t) -> {"grid": ..., "block": ..., "shared": ...}``, where
  ``args`` maps parameter names to the call's arguments and ``t`` maps tunable names to
  this variant's values, or
- a mapping ``{"grid": ..., "block": ..., "shared": ...}`` whose values are constants or
  callables: ``grid(args, t)``, ``block(t)``, ``shared(args, t)``.

``grid`` and ``block`` are an int or a tuple of up to three ints; ``shared`` is the number of
bytes of dynamic shared memory (default 0). Without ``block``, the block comes from the
tunables ``BLOCK_X``, ``BLOCK_Y``, ``BLOCK_Z`` (or ``BLOCK`` for one dimension), which are
then macros and launch settings at once. A block that depends on the tunables alone (those
tunables, or a mapping's ``block(t)``) is checked against the device limits for every
tunable combination when the kernel is declared, so the tuner never proposes one that does
not fit; any other block is checked at each launch.

The replay worker rebuilds a kernel without importing the user's code, so a launch callable
travels to it as its compiled code plus the values it refers to (numbers, strings, modules,
other such functions); :meth:`LaunchConfig.portable` refuses, at declaration, one that
refers to anything else.
"""

from __future__ import annotations

import ast
import base64
import builtins
import dis
import importlib
import marshal
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..errors import DeclarationError, LaunchError

BLOCK_TUNABLES = ("BLOCK_X", "BLOCK_Y", "BLOCK_Z")
KEYS = ("grid", "block", "shared")
Dims = tuple[int, int, int]


@dataclass(frozen=True)
class LaunchLimits:
    """What one device accepts; a backend that takes ``launch=`` publishes its limits."""

    threads_per_block: int = 1024
    block: Dims = (1024, 1024, 64)
    grid: Dims = (2**31 - 1, 65535, 65535)

    def describe_block(self) -> str:
        x, y, z = self.block
        return (f"at most {self.threads_per_block} threads per block, block x <= {x}, "
                f"y <= {y}, z <= {z}")

    def block_problem(self, block: Dims) -> str | None:
        threads = block[0] * block[1] * block[2]
        if threads > self.threads_per_block or any(d > m for d, m in zip(block, self.block)):
            return f"block {block} ({threads} threads) exceeds the limits: " \
                   f"{self.describe_block()}"
        return None

    def grid_problem(self, grid: Dims) -> str | None:
        if any(d > m for d, m in zip(grid, self.grid)):
            return f"grid {grid} exceeds the limits x <= {self.grid[0]}, y <= " \
                   f"{self.grid[1]}, z <= {self.grid[2]}"
        return None


@dataclass(frozen=True)
class Launch:
    """One launch's resolved configuration."""

    grid: Dims
    block: Dims
    shared: int = 0

    @property
    def threads(self) -> int:
        g, b = self.grid, self.block
        return g[0] * g[1] * g[2] * b[0] * b[1] * b[2]


def cdiv(a: int, b: int) -> int:
    """Ceiling division, the usual ``grid = cdiv(n, BLOCK)``."""
    return -(-a // b)


def dims(value: object, what: str, allow_zero: bool = False) -> Dims:
    """An int or a tuple of 1-3 positive ints, padded to three; ValueError otherwise.
    A grid may have a zero dimension: nothing to do (no launch)."""
    items = value if isinstance(value, (tuple, list)) else (value,)
    if not 1 <= len(items) <= 3:
        raise ValueError(f"{what} must have 1 to 3 dimensions, got {value!r}")
    result = []
    for item in items:
        if isinstance(item, bool) or not hasattr(item, "__index__"):
            raise ValueError(f"{what} must be an int or a tuple of ints, got {value!r}")
        if int(item) < (0 if allow_zero else 1):
            raise ValueError(f"{what} dimensions must be >= {0 if allow_zero else 1}, got "
                             f"{value!r}")
        result.append(int(item))
    return tuple(result + [1] * (3 - len(result)))  # type: ignore[return-value]


def block_from_tunables(tunables: Mapping[str, object]) -> Dims | None:
    """The block named by BLOCK_X/BLOCK_Y/BLOCK_Z (or BLOCK) tunables, if there are any."""
    if not any(n in tunables for n in (*BLOCK_TUNABLES, "BLOCK")):
        return None
    x = tunables.get("BLOCK_X", tunables.get("BLOCK", 1))
    return dims((x, tunables.get("BLOCK_Y", 1), tunables.get("BLOCK_Z", 1)),
                "block from the BLOCK_X/BLOCK_Y/BLOCK_Z tunables")


class LaunchConfig:
    """A kernel's ``launch=``: validated at declaration, resolved at every launch."""

    def __init__(self, launch: object, where: str = "kernel") -> None:
        self.where = where
        self.function: Callable | None = None
        self.parts: dict[str, object] = {}
        if callable(launch):
            self.function = launch
        elif isinstance(launch, Mapping):
            unknown = sorted(set(launch) - set(KEYS))
            if unknown:
                raise DeclarationError(f"{where}: launch= has unknown key(s) "
                                       f"{', '.join(map(repr, unknown))}; use {', '.join(KEYS)}")
            if "grid" not in launch:
                raise DeclarationError(f"{where}: launch= needs a 'grid' entry")
            for key, value in launch.items():
                if not callable(value):
                    try:
                        dims(value, key, key == "grid") if key != "shared" else _shared(value)
                    except ValueError as exc:
                        raise DeclarationError(f"{where}: launch= {exc}") from None
            self.parts = dict(launch)
        else:
            raise DeclarationError(
                f"{where}: launch= must be a callable launch(args, t) returning "
                "{'grid': ..., 'block': ...}, or a mapping {'grid': ..., 'block': ...}; got "
                f"{type(launch).__name__}")

    def check_tunables(self, tunable_names: tuple[str, ...]) -> None:
        """Refuse at declaration a mapping without a block when no tunable names one."""
        if self.parts and "block" not in self.parts and not any(
                n in tunable_names for n in (*BLOCK_TUNABLES, "BLOCK")):
            raise DeclarationError(
                f"{self.where}: launch= gives no 'block' and no tunable is named BLOCK_X, "
                "BLOCK_Y, BLOCK_Z or BLOCK; add 'block': (128,) (or block(t)) or such tunables")

    def static_block(self, tunables: Mapping[str, object]) -> Dims | None:
        """The block when it depends on the tunables alone, else None."""
        if self.parts.get("block") is not None:
            block = self.parts["block"]
            return dims(block(tunables) if callable(block) else block, "block")
        return block_from_tunables(tunables)

    def block_constraint(self, limits: LaunchLimits, tunable_names: tuple[str, ...]):
        """A tuning-space constraint refusing blocks beyond ``limits``, if one can be known."""
        if not self.parts.get("block") and not any(
                n in tunable_names for n in (*BLOCK_TUNABLES, "BLOCK")):
            return None

        def check(**values: object) -> bool:
            try:
                block = self.static_block(values)
            except ValueError as exc:
                raise DeclarationError(f"{self.where}: {exc}") from None
            return block is None or limits.block_problem(block) is None

        check.__name__ = f"device limits: {limits.describe_block()}"
        return check

    def resolve(self, args: Mapping[str, object], tunables: Mapping[str, object],
                limits: LaunchLimits, kernel: str) -> Launch:
        """Grid, block and shared memory for one call; LaunchError naming what is wrong."""
        head = f"kernel {kernel!r} launch configuration"
        try:
            if self.function is not None:
                result = self.function(args, tunables)
                if not isinstance(result, Mapping):
                    raise LaunchError(f"{head}: launch(args, t) must return a mapping "
                                      f"{{'grid': ..., 'block': ...}}, got {result!r}")
                unknown = sorted(set(result) - set(KEYS))
                if unknown or "grid" not in result:
                    raise LaunchError(f"{head}: launch(args, t) returned keys "
                                      f"{sorted(result)}; it must give 'grid' and may give "
                                      "'block' and 'shared'")
                raw_grid, raw_block = result["grid"], result.get("block")
                raw_shared = result.get("shared", 0)
            else:
                raw_grid, raw_block, raw_shared = (
                    self._part("grid", args, tunables), self._part("block", args, tunables),
                    self._part("shared", args, tunables))
            grid = dims(raw_grid, "grid", allow_zero=True)
            block = dims(raw_block, "block") if raw_block is not None \
                else block_from_tunables(tunables)
            shared = _shared(raw_shared)
        except LaunchError:
            raise
        except Exception as exc:
            raise LaunchError(f"{head}: {type(exc).__name__}: {exc}") from exc
        if block is None:
            raise LaunchError(f"{head}: no block size: return 'block' from launch= or declare "
                              "tunables BLOCK_X/BLOCK_Y/BLOCK_Z")
        problem = limits.block_problem(block) or limits.grid_problem(grid)
        if problem:
            raise LaunchError(f"{head}: {problem}")
        return Launch(grid, block, shared)

    def _part(self, key: str, args, tunables):
        value = self.parts.get(key)
        if not callable(value):
            return value if value is not None or key != "shared" else 0
        return value(tunables) if key == "block" else value(args, tunables)

    # -- crossing to the replay worker ---------------------------------------------------
    def portable(self) -> dict:
        """Plain data that :meth:`from_portable` turns back into this configuration."""
        where = f"{self.where}: launch="
        if self.function is not None:
            return {"function": export_function(self.function, where)}
        return {"parts": {key: {"function": export_function(value, where)} if callable(value)
                          else {"value": repr(value)} for key, value in self.parts.items()}}

    @classmethod
    def from_portable(cls, data: Mapping, where: str = "kernel") -> LaunchConfig:
        if "function" in data:
            return cls(import_function(data["function"]), where)
        parts = {key: import_function(part["function"]) if "function" in part
                 else ast.literal_eval(part["value"]) for key, part in data["parts"].items()}
        return cls(parts, where)


def _shared(value: object) -> int:
    if isinstance(value, bool) or not hasattr(value, "__index__") or int(value) < 0:
        raise ValueError(f"shared (dynamic shared memory bytes) must be an int >= 0, got "
                         f"{value!r}")
    return int(value)


def _literal(value: object) -> bool:
    try:
        return ast.literal_eval(repr(value)) == value
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False


def _global_names(code: types.CodeType) -> set[str]:
    """Names a function's code (and the code nested in it) looks up as globals."""
    names = {i.argval for i in dis.get_instructions(code)
             if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


def export_function(function: Callable, where: str, depth: int = 0) -> dict:
    """A plain Python function as data: its code (marshal), defaults, closure and globals."""
    if not isinstance(function, types.FunctionType) or depth > 4:
        raise DeclarationError(
            f"{where} uses {function!r}, which cannot be sent to the replay worker; use plain "
            "functions (lambda or def) over numbers, strings and modules")

    def value(name: str, item: object) -> dict:
        if isinstance(item, types.ModuleType):
            return {"module": item.__name__}
        if isinstance(item, types.FunctionType):
            return {"function": export_function(item, where, depth + 1)}
        if isinstance(item, types.BuiltinFunctionType) and item.__module__:
            return {"attribute": [item.__module__, item.__name__]}
        if _literal(item):
            return {"value": repr(item)}
        raise DeclarationError(
            f"{where} refers to {name!r} ({type(item).__name__}), which cannot be sent to the "
            "replay worker; use numbers, strings, tuples, modules or plain functions, or "
            "pass the value through the tunables")

    globals_: dict[str, dict] = {}
    for name in sorted(_global_names(function.__code__)):
        if name in function.__globals__:
            globals_[name] = value(name, function.__globals__[name])
        elif not hasattr(builtins, name):
            raise DeclarationError(
                f"{where} uses {name!r}, which is not defined when the kernel is declared; "
                "define it before the r3.kernel(...) call")
    closure = [value(name, cell.cell_contents) for name, cell in
               zip(function.__code__.co_freevars, function.__closure__ or ())]
    return {
        "code": base64.b64encode(marshal.dumps(function.__code__)).decode(),
        "name": function.__name__,
        "defaults": [value("default", d) for d in function.__defaults__ or ()],
        "closure": closure,
        "globals": globals_,
    }


def import_function(data: Mapping) -> Callable:
    """The function :func:`export_function` described (run in the replay worker)."""

    def value(item: Mapping) -> object:
        if "module" in item:
            return importlib.import_module(item["module"])
        if "function" in item:
            return import_function(item["function"])
        if "attribute" in item:
            return getattr(importlib.import_module(item["attribute"][0]), item["attribute"][1])
        return ast.literal_eval(item["value"])

    code = marshal.loads(base64.b64decode(data["code"]))
    namespace = {"__builtins__": builtins, **{k: value(v) for k, v in data["globals"].items()}}
    closure = tuple(types.CellType(value(c)) for c in data["closure"]) or None
    defaults = tuple(value(d) for d in data["defaults"]) or None
    return types.FunctionType(code, namespace, data["name"], defaults, closure)
