"""Reading a kernel's parameter list from its LLVM IR, so users never repeat it.

Names and C types come from the debug-info metadata clang attaches with ``-g`` (IR pointers
are opaque, the element type lives only there); whether a pointer is written comes from the
attributes LLVM infers once the module is optimised (``readonly``, ``memory(...)``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import DeclarationError, EntryNotFoundError
from .address_use import only_read

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
    """One kernel parameter: a scalar, or a pointer to elements of ``dtype``.

    ``dims`` is set for a C array parameter (``double C[ni][nj]``): one bound per axis, as
    written (a C expression over the other parameters, a number, or "" when unknown); a
    call passes an array of that rank. ``components`` is the number of ``dtype`` values in
    one element of a pointer to a vector type or a struct of one number type (``float4 *``:
    4): a call passes an array of ``dtype`` whose size is a multiple of it.
    """

    name: str
    ctype: str
    dtype: str
    is_pointer: bool
    written: bool = False
    dims: tuple[str, ...] = ()
    components: int = 1

    def describe(self) -> str:
        if self.dims:
            element = self.ctype.rstrip(" *")
            return f"{element} {self.name}" + "".join(f"[{d}]" for d in self.dims)
        return f"{self.ctype} {self.name}".replace("* ", "*")

    def as_dict(self) -> dict:
        """Plain data, for the replay worker and recordings (``param_from_dict`` reads it)."""
        data = {"name": self.name, "ctype": self.ctype, "dtype": self.dtype,
                "is_pointer": self.is_pointer, "written": self.written}
        if self.dims:
            data["dims"] = list(self.dims)
        if self.components != 1:
            data["components"] = self.components
        return data


def param_from_dict(data) -> Param:
    return Param(data["name"], data["ctype"], data["dtype"], data["is_pointer"],
                 data["written"], tuple(data.get("dims", ())), int(data.get("components", 1)))


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

    def as_dict(self) -> dict:
        """Plain data (``signature_from_dict`` reads it): for the compiled-code cache."""
        return {"entry": self.entry, "params": [p.as_dict() for p in self.params],
                "return_dtype": self.return_dtype}


def signature_from_dict(data) -> Signature:
    return Signature(data["entry"], tuple(param_from_dict(p) for p in data["params"]),
                     data["return_dtype"])


def _field(text: str, name: str) -> str | None:
    match = re.search(_FIELD.format(name), text)
    if not match:
        return None
    return next(g for g in match.groups() if g is not None)


@dataclass
class _Type:
    spelled: str
    dtype: str
    pointer: bool
    inner: tuple[str, ...] = ()  # the bounds of a pointed-to array type (after the first)
    components: int = 1


def _subranges(metadata: dict[str, str], node: str) -> list[str]:
    """The bounds of a DW_TAG_array_type node: numbers, or "" where not a constant."""
    elements = metadata.get(_field(node, "elements") or "", "!{}")
    bounds = []
    for ref in re.findall(r"!(\d+)", elements):
        count = _field(metadata[ref], "count")
        bounds.append(count if count is not None and count.isdigit() else "")
    return bounds


def _members(metadata: dict[str, str], node: str, where: str) -> tuple[str, int, str]:
    """(dtype, count, C name) of a struct whose members are all one number type and that has
    no padding, or a DeclarationError saying why it cannot be an array element."""
    name = _field(node, "name") or "struct"
    refs = re.findall(r"!(\d+)", metadata.get(_field(node, "elements") or "", "!{}"))
    dtypes = set()
    count = 0
    for ref in refs:
        member = metadata[ref]  # C++ structs also list their constructors and methods
        if _field(member, "tag") != "DW_TAG_member" or "DIFlagStaticMember" in member:
            continue
        nested = _struct_of(metadata, _field(member, "baseType"))
        if nested is not None:  # __half2 {__half x, y;}: a struct of structs of one number
            dtype, members, _ = _members(metadata, nested, where)
            dtypes.add(dtype)
            count += members
            continue
        count += 1
        inner = _resolve(metadata, _field(member, "baseType"), where)
        if inner.pointer or inner.inner or inner.components != 1:
            dtypes.add("?")
        dtypes.add(inner.dtype)
    if len(dtypes) != 1 or "?" in dtypes:
        raise DeclarationError(
            f"{where}: struct {name!r} mixes member types; pointers to structs are read as "
            "arrays of one number type (float4, struct {double re, im;}): pass the members "
            "as separate arrays")
    (dtype,) = dtypes
    import numpy as np  # here: declaring a kernel imports no numpy

    if int(_field(node, "size") or 0) != count * np.dtype(dtype).itemsize * 8:
        raise DeclarationError(f"{where}: struct {name!r} has padding between or after its "
                               "members, so it is not an array of numbers")
    return dtype, count, name


def _struct_of(metadata: dict[str, str], ref: str | None) -> str | None:
    """The struct node a member's type names, through typedefs and qualifiers, or None."""
    while ref is not None and ref != "null":
        node = metadata[ref]
        tag = _field(node, "tag")
        if tag == "DW_TAG_structure_type":
            return node
        if tag not in ("DW_TAG_typedef", "DW_TAG_const_type", "DW_TAG_volatile_type"):
            return None
        ref = _field(node, "baseType")
    return None


def _resolve(metadata: dict[str, str], ref: str | None, where: str) -> _Type:
    """Follow typedefs and qualifiers down to the element type of a parameter."""
    qualifiers = []
    pointer = False
    inner: list[str] = []
    spelled_name = None  # the outermost typedef, as the user wrote it
    while ref is not None and ref != "null":  # a null base type is void
        node = metadata[ref]
        if node.startswith("!DIBasicType"):
            key = (_field(node, "encoding"), int(_field(node, "size") or 0))
            name = _field(node, "name") or "?"
            if name == "__bf16":  # no numpy type: passed as its bits (ml_dtypes' bfloat16
                key = ("DW_ATE_unsigned", 16)  # arrays .view(np.uint16))
            if key not in _DTYPES:
                raise DeclarationError(f"{where}: C type {name!r} has no numpy equivalent")
            spelled = " ".join([*qualifiers, spelled_name or name]) + (" *" if pointer else "")
            return _Type(spelled, _DTYPES[key], pointer, tuple(inner))
        tag = _field(node, "tag")
        vector = tag == "DW_TAG_array_type" and "DIFlagVector" in (_field(node, "flags") or "")
        if pointer and not inner and (vector or tag == "DW_TAG_structure_type"):
            if vector:  # float __attribute__((ext_vector_type(4))) and the like
                element = _resolve(metadata, _field(node, "baseType"), where)
                (count,) = _subranges(metadata, node) or [""]
                dtype, components = element.dtype, int(count or 0)
                name = spelled_name or f"{element.spelled} vector"
            else:
                dtype, components, name = _members(metadata, node, where)
                cplusplus = _field(node, "identifier") is not None  # C++ says vec4, C struct vec4
                name = spelled_name or (name if cplusplus else f"struct {name}")
            if components < 1:
                raise DeclarationError(f"{where}: vector type {name!r} has no known length")
            spelled = " ".join([*qualifiers, name]) + " *"
            return _Type(spelled, dtype, True, (), components)
        if tag == "DW_TAG_pointer_type":
            if pointer:
                raise DeclarationError(
                    f"{where}: pointers to pointers are not supported; pass a flat array "
                    "and index it"
                )
            pointer = True
            qualifiers = []
            spelled_name = None
        elif tag == "DW_TAG_array_type" and pointer and not vector:
            inner += _subranges(metadata, node)  # double C[ni][nj] arrives as double (*)[nj]
        elif tag == "DW_TAG_const_type":
            qualifiers.append("const")
        elif tag == "DW_TAG_typedef" and spelled_name is None:
            spelled_name = _field(node, "name")
        elif tag not in ("DW_TAG_typedef", "DW_TAG_restrict_type", "DW_TAG_volatile_type",
                         "DW_TAG_atomic_type"):
            raise DeclarationError(
                f"{where}: unsupported parameter type ({tag or node.split('(')[0]}); kernels "
                "take scalars, pointers to numbers, C arrays of numbers and pointers to "
                "vector types or structs of one number type"
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
        kind = _resolve(metadata, ref, f"{where}: parameter {name!r}")
        if kind.pointer:
            if written_flags is not None:
                written = written_flags[index - 1]
            else:
                written = not kind.spelled.startswith("const")
        else:
            written = False
        dims = ("", *kind.inner) if kind.inner else ()
        params.append(Param(name, kind.spelled, kind.dtype, kind.pointer, written, dims,
                            kind.components))
    return_ref = type_refs[0]
    return_dtype = None
    if return_ref != "null":
        returned = _resolve(metadata, return_ref, f"{where}: return type")
        if returned.pointer:
            raise DeclarationError(f"{where}: a kernel may return a number, not a pointer")
        return_dtype = returned.dtype
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
        if not read_only and str(arg.type) == "ptr":  # LLVM stops at an inspected address
            read_only = only_read(function, arg)
        flags.append(not read_only)
    return flags
