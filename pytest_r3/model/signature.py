"""Reading a kernel's parameter list from its LLVM IR, so users never repeat it.

Names and C types come from the debug-info metadata clang attaches with ``-g`` (IR pointers
are opaque, the element type lives only there); whether a pointer is written comes from the
attributes LLVM infers once the module is optimised (``readonly``, ``memory(...)``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import DeclarationError, EntryNotFoundError

_METADATA = re.compile(r"^!(\d+) = (?:distinct )?(.*)$", re.MULTILINE)
_FIELD = r"{}: (?:!(\d+)|\"([^\"]*)\"|([\w.-]+))"

# (DWARF encoding, size in bits) -> numpy dtype name
_DTYPES = {
    ("DW_ATE_float", 16): "float16",
    ("DW_ATE_float", 32): "float32",
    ("DW_ATE_float", 64): "float64",
    ("DW_ATE_boolean", 8): "bool",
}
for _bits in (8, 16, 32, 64):
    for _enc in ("DW_ATE_signed", "DW_ATE_signed_char"):
        _DTYPES[(_enc, _bits)] = f"int{_bits}"
    for _enc in ("DW_ATE_unsigned", "DW_ATE_unsigned_char"):
        _DTYPES[(_enc, _bits)] = f"uint{_bits}"


@dataclass(frozen=True)
class Param:
    """One kernel parameter: a scalar, or a pointer to elements of ``dtype``."""

    name: str
    ctype: str
    dtype: str
    is_pointer: bool
    written: bool = False

    def describe(self) -> str:
        return f"{self.ctype} {self.name}".replace("* ", "*")


@dataclass(frozen=True)
class Signature:
    entry: str
    params: tuple[Param, ...]
    return_dtype: str | None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    @property
    def written(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if p.written)

    def describe(self) -> str:
        ret = "void" if self.return_dtype is None else self.return_dtype
        return f"{ret} {self.entry}({', '.join(p.describe() for p in self.params)})"


def _field(text: str, name: str) -> str | None:
    match = re.search(_FIELD.format(name), text)
    if not match:
        return None
    return next(g for g in match.groups() if g is not None)


def _resolve(metadata: dict[str, str], ref: str | None, where: str) -> tuple[str, str, bool]:
    """Follow typedefs and qualifiers: (C spelling, numpy dtype, is_pointer)."""
    qualifiers = []
    pointer = False
    spelled_name = None  # the outermost typedef, as the user wrote it
    while ref is not None and ref != "null":  # a null base type is void
        node = metadata[ref]
        if node.startswith("!DIBasicType"):
            key = (_field(node, "encoding"), int(_field(node, "size") or 0))
            name = _field(node, "name") or "?"
            if key not in _DTYPES:
                raise DeclarationError(f"{where}: C type {name!r} has no numpy equivalent")
            spelled = " ".join([*qualifiers, spelled_name or name]) + (" *" if pointer else "")
            return spelled, _DTYPES[key], pointer
        tag = _field(node, "tag")
        if tag == "DW_TAG_pointer_type":
            if pointer:
                raise DeclarationError(
                    f"{where}: pointers to pointers are not supported; pass a flat array "
                    "and index it"
                )
            pointer = True
            qualifiers = []
            spelled_name = None
        elif tag == "DW_TAG_const_type":
            qualifiers.append("const")
        elif tag == "DW_TAG_typedef" and spelled_name is None:
            spelled_name = _field(node, "name")
        elif tag not in ("DW_TAG_typedef", "DW_TAG_restrict_type", "DW_TAG_volatile_type",
                         "DW_TAG_atomic_type"):
            raise DeclarationError(
                f"{where}: unsupported parameter type ({tag or node.split('(')[0]}); kernels "
                "take scalars and pointers to numbers"
            )
        ref = _field(node, "baseType")
    if pointer:
        raise DeclarationError(f"{where}: 'void *' has no element type; use e.g. 'float *'")
    raise DeclarationError(f"{where}: a parameter of type void is not supported")


def _argument_memory(function_attributes: str) -> str:
    """The effect on argument memory stated by a ``memory(...)`` attribute."""
    match = re.search(r"memory\(([^)]*)\)", function_attributes)
    if not match:
        return "readwrite"
    default, argmem = "none", None
    for clause in match.group(1).split(","):
        location, _, effect = clause.strip().rpartition(":")
        if not location:
            default = effect.strip()
        elif location.strip() == "argmem":
            argmem = effect.strip()
    return argmem or default


def read_signature(debug_ir: str, entry: str, optimised_function=None,
                   where: str = "") -> Signature:
    """Build the signature of ``entry`` from ``-g`` IR and, if given, its optimised function.

    ``optimised_function`` is an llvmlite ValueRef of the same function after the pass
    pipeline: its inferred attributes say which pointers are written. Without it every
    non-const pointer counts as written.
    """
    # the backend gives a static entry external linkage before reading (keep_reachable)
    define = re.search(
        rf"^define [^\n]*@{re.escape(entry)}\((.*)\)[^\n]*!dbg !(\d+)", debug_ir, re.MULTILINE)
    if not define:
        defined = [name for name in re.findall(r"^define [^\n]*?@([\w.$]+)\(", debug_ir,
                                               re.MULTILINE) if not name.startswith("_")]
        shown = ", ".join(defined[:20]) + (", ..." if len(defined) > 20 else "")
        raise EntryNotFoundError(
            f"{where}: entry symbol {entry!r} is not defined by the source "
            f"(it defines: {shown or 'no functions'}). Check the entry= name."
        )
    metadata = dict(_METADATA.findall(debug_ir))
    subprogram_id = define.group(2)
    subprogram = metadata[subprogram_id]
    types = metadata[_field(metadata[_field(subprogram, "type")], "types")]
    type_refs = [t.strip().lstrip("!") for t in types.strip()[2:-1].split(",")]
    names = {}
    for node in metadata.values():
        if node.startswith("!DILocalVariable") and _field(node, "scope") == subprogram_id:
            arg = _field(node, "arg")
            if arg:
                names[int(arg)] = _field(node, "name")

    written_flags = _written_flags(optimised_function)
    params = []
    for index, ref in enumerate(type_refs[1:], start=1):
        if ref == "null":  # clang marks a variadic function with a trailing null
            raise DeclarationError(
                f"{where}: variadic kernels ('...') are not supported; declare every parameter"
            )
        name = names.get(index, f"arg{index}")
        ctype, dtype, is_pointer = _resolve(metadata, ref, f"{where}: parameter {name!r}")
        if is_pointer:
            if written_flags is not None:
                written = written_flags[index - 1]
            else:
                written = not ctype.startswith("const")
        else:
            written = False
        params.append(Param(name, ctype, dtype, is_pointer, written))
    return_ref = type_refs[0]
    return_dtype = None
    if return_ref != "null":
        _, return_dtype, ret_pointer = _resolve(metadata, return_ref, f"{where}: return type")
        if ret_pointer:
            raise DeclarationError(f"{where}: a kernel may return a number, not a pointer")
    return Signature(entry, tuple(params), return_dtype)


def _written_flags(function) -> list[bool] | None:
    if function is None:
        return None
    function_attrs = " ".join(a.decode() for a in function.attributes)
    argmem = _argument_memory(function_attrs)
    flags = []
    for arg in function.arguments:
        attrs = {a.decode().split("(")[0] for a in arg.attributes}
        read_only = bool(attrs & {"readonly", "readnone"}) or "write" not in argmem
        flags.append(not read_only)
    return flags
