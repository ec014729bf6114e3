"""CPU backend: C -> clang IR -> llvmlite pass pipeline -> MCJIT -> ctypes call."""

from __future__ import annotations

import ctypes
import functools
import json
import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from ..errors import CompileError, DeclarationError, EntryNotFoundError
from ..model.arguments import ArgumentBinder
from ..model.bounds import with_declared_bounds
from ..model.pipeline import Pipeline, codegen
from ..model.signature import Signature, read_signature, signature_from_dict
from ..model.source import KernelSource
from . import clang as toolchain
from . import compile_cache
from .base import Backend, Launcher
from .hookspecs import hookimpl

_CTYPES = {
    "float32": ctypes.c_float,
    "float64": ctypes.c_double,
    "bool": ctypes.c_bool,
    **{f"int{b}": getattr(ctypes, f"c_int{b}") for b in (8, 16, 32, 64)},
    **{f"uint{b}": getattr(ctypes, f"c_uint{b}") for b in (8, 16, 32, 64)},
}


class CPULauncher(Launcher):
    """One JIT-compiled variant; keeps its execution engine alive as long as it is used."""

    def __init__(self, engine, function, binder: ArgumentBinder,
                 optimised_ir: str | Callable[[], str]) -> None:
        self.engine = engine
        self.function = function
        self.binder = binder
        self._optimised_ir = optimised_ir

    @property
    def optimised_ir(self) -> str:
        """The IR after the pass pipeline (made again on first use for a cached variant)."""
        if callable(self._optimised_ir):
            self._optimised_ir = self._optimised_ir()
        return self._optimised_ir

    def __call__(self, *args: object) -> object:
        return self.function(*self.binder(args))


def _check_scalars(signature: Signature, where: str) -> None:
    unsupported = [p.describe() for p in signature.params
                   if not p.is_pointer and p.dtype not in _CTYPES]
    if unsupported:
        raise DeclarationError(
            f"{where}: scalar parameter(s) {', '.join(unsupported)} have no C calling "
            "convention here; pass them by pointer"
        )


def _launcher(engine, address: int, signature: Signature, offset: int | None,
              kernel_name: str, optimised_ir: str | Callable[[], str]) -> CPULauncher:
    """A launcher calling the machine code at ``address`` with ctypes."""
    _check_scalars(signature, f"kernel {kernel_name!r}")
    restype = _CTYPES[signature.return_dtype] if signature.return_dtype else None
    pointer_type = ctypes.c_void_p if offset is None else ctypes.py_object
    argtypes = [pointer_type if p.is_pointer else _CTYPES[p.dtype] for p in signature.params]
    function = ctypes.CFUNCTYPE(restype, *argtypes)(address)
    binder = ArgumentBinder(kernel_name, signature, arrays_by_object=offset is not None)
    return CPULauncher(engine, function, binder, optimised_ir)


class CPUBackend(Backend):
    name = "cpu"
    language = "c"

    def target_name(self) -> str:
        return toolchain.host_target().name

    def _clang_flags(self) -> tuple[str, ...]:
        return toolchain.host_target().clang_flags()

    def compile(self, source: KernelSource, macros: Mapping[str, object],
                debug_info: bool = False, preprocess_only: bool = False) -> str:
        return self.front_end(source, macros, debug_info, preprocess_only).text

    def front_end(self, source: KernelSource, macros: Mapping[str, object],
                  debug_info: bool = False, preprocess_only: bool = False,
                  generic: bool = False) -> toolchain.FrontEndOutput:
        """clang's output for this machine, or (``generic``) for the oldest CPU of its
        architecture, which a user's build elsewhere may be (see compile.check_portable)."""
        return toolchain.front_end(
            source.text,
            filename=source.filename,
            macros=macros,
            target_flags=toolchain.generic_target_flags() if generic else self._clang_flags(),
            language=self.language,
            include_dirs=source.include_dirs,
            extra_flags=(*toolchain.EMIT_ALL_DECLARATIONS, *source.flags),
            debug_info=debug_info,
            untrusted=source.untrusted,
            preprocess_only=preprocess_only,
        )

    def target_machine(self):
        import llvmlite.binding as llvm

        toolchain.initialize_llvm()
        target = toolchain.host_target()
        return llvm.Target.from_triple(target.triple).create_target_machine(
            cpu=target.cpu, features=target.features, opt=3, reloc="default",
            codemodel="jitdefault", jit=True,
        )

    def parse(self, ir: str, where: str):
        toolchain.initialize_llvm()
        return toolchain.parse_ir(ir, where)

    def reachable(self, module, entry: str, where: str):
        """``module`` reduced to ``entry`` and what it reaches (see clang.keep_reachable);
        unchanged when it does not define ``entry``."""
        if _defined_function(module, entry, static_too=True) is not None:
            toolchain.keep_reachable(module, entry, self.target_machine())
        return module

    def inspect(self, source: KernelSource, entry: str, macros: Mapping[str, object],
                kernel_name: str = "") -> Signature:
        where = f"kernel {kernel_name or entry!r} ({source.filename})"
        compiled = self.front_end(source, macros, debug_info=True)
        debug_ir = compiled.text
        disk = None if source.untrusted else compile_cache.current()
        key = None
        if disk is not None and compiled.headers is not None:  # what clang read: known
            key = compile_cache.key("cpu-signature", compile_cache.code_identity(), entry,
                                    compiled.key, compiled.headers)
            cached = disk.get(key)
            if cached is not None:
                return signature_from_dict(json.loads(cached.payload))
        module = self.parse(toolchain.without_linker_keep(debug_ir), where)
        if _defined_function(module, entry, static_too=True) is None:
            return read_signature(debug_ir, entry, None, where=where)  # names what it has
        self.reachable(module, entry, where)
        debug_ir = str(module)
        Pipeline().run(module, self.target_machine())
        signature = read_signature(debug_ir, entry, _defined_function(module, entry),
                                   where=where)
        if any(p.is_pointer for p in signature.params):  # C array bounds, as written
            # a rewrite's text is never preprocessed: its bounds are read as it writes them
            text = source.text if source.untrusted else \
                self.compile(source, macros, preprocess_only=True)
            signature = with_declared_bounds(signature, text)
        if disk is not None and key is not None:
            disk.put(key, json.dumps(signature.as_dict()).encode(), {"kind": "cpu-signature"})
        return signature

    def load(self, ir: str, entry: str, signature: Signature, pipeline: Pipeline,
             kernel_name: str) -> CPULauncher:

        where = f"kernel {kernel_name!r}"
        offset = _numpy_data_offset()
        symbol = entry if offset is None else THUNK_PREFIX + entry
        disk = compile_cache.current()
        key = None
        if disk is not None:
            target = toolchain.host_target()
            key = compile_cache.key("cpu-object", compile_cache.code_identity(), target.triple,
                                    target.cpu, target.features, offset, entry,
                                    pipeline.as_dict(), ir)
            cached = disk.get(key)
            if cached is not None and loadable(cached.meta.get("needs", ())):
                engine, address = self._load_object(cached.payload, symbol)
                if address:
                    return _launcher(engine, address, signature, offset, kernel_name,
                                     lambda: self._optimised_ir(ir, entry, pipeline, where))
        module = self._prepared(ir, entry, pipeline, where)
        needs = toolchain.unresolved_symbols(module)
        machine = self.target_machine()
        pipeline.run(module, machine)
        optimised_ir = str(module)
        engine = jit_kept(module, machine, disk, key, {"kind": "cpu-object", "needs": needs})
        return _launcher(engine, engine.get_function_address(symbol), signature, offset,
                         kernel_name, optimised_ir)

    def _prepared(self, ir: str, entry: str, pipeline: Pipeline, where: str):
        """``ir`` parsed, cut to the entry, checked for what it needs from outside, and with
        the launch thunk linked in: ready for ``pipeline``."""
        module = self.parse(toolchain.without_linker_keep(pipeline.prepare_ir(ir)), where)
        if _defined_function(module, entry, static_too=True) is None:
            raise EntryNotFoundError(f"{where}: entry symbol {entry!r} is not defined")
        self.reachable(module, entry, where)
        check_resolvable(module, entry, where)
        offset = _numpy_data_offset()
        if offset is not None:
            module.link_in(self.parse(_thunk_ir(module, entry, offset), where))
        return module

    def _optimised_ir(self, ir: str, entry: str, pipeline: Pipeline, where: str) -> str:
        """The optimised IR of a variant loaded from the cache, made again when asked for."""
        module = self._prepared(ir, entry, pipeline, where)
        pipeline.run(module, self.target_machine())
        return str(module)

    def _load_object(self, data: bytes, symbol: str):
        """A JIT engine holding a cached object file, and the address of ``symbol`` in it
        (0 when the object does not define it)."""
        engine = load_object(data)
        return engine, engine.get_function_address(symbol)

    def launch(self, launcher: Launcher, args: Sequence[object]) -> object:
        return launcher(*args)

    def time(self, launcher: Launcher, args: Sequence[object], repeat: int) -> list[float]:
        assert isinstance(launcher, CPULauncher)
        function, values = launcher.function, launcher.binder(args)
        clock = time.perf_counter
        times = []
        for _ in range(repeat):
            start = clock()
            function(*values)
            times.append(clock() - start)
        return times

    def to_host(self, value: object) -> object:
        return np.array(value, copy=True) if isinstance(value, np.ndarray) else value


THUNK_PREFIX = "__r3_launch_"


@functools.lru_cache(maxsize=1)
def _numpy_data_offset() -> int | None:
    """Offset of the data pointer inside a numpy array object, checked on a live array.

    numpy's ``PyArrayObject_fields`` puts ``data`` right after the object header; if this
    interpreter lays it out differently, None makes launches fall back to addresses.
    """
    probe = np.arange(4.0)
    offset = ctypes.sizeof(ctypes.c_ssize_t) + ctypes.sizeof(ctypes.c_void_p)
    if ctypes.c_void_p.from_address(id(probe) + offset).value == probe.ctypes.data:
        return offset
    return None


def _thunk_ir(module, entry: str, offset: int) -> str:
    """IR of a wrapper taking numpy array objects where ``entry`` takes data pointers."""
    function = module.get_function(entry)
    return_type = str(function.global_value_type).split(" (")[0]
    params, loads, call_args, declared = [], [], [], []
    for index, arg in enumerate(function.arguments):
        kind = str(arg.type)
        extension = " ".join(a.decode() for a in arg.attributes
                             if a.decode() in ("zeroext", "signext"))
        typed = f"{kind} {extension}".strip()
        declared.append(typed)
        params.append(f"{typed} %a{index}")
        if kind == "ptr":
            loads.append(f"  %f{index} = getelementptr inbounds i8, ptr %a{index}, i64 {offset}")
            loads.append(f"  %d{index} = load ptr, ptr %f{index}, align 8")
            call_args.append(f"ptr %d{index}")
        else:
            call_args.append(f"{typed} %a{index}")
    result = "" if return_type == "void" else "%r = "
    ret = "ret void" if return_type == "void" else f"ret {return_type} %r"
    return "\n".join([
        f'target datalayout = "{module.data_layout}"',
        f'target triple = "{module.triple}"',
        f"declare {return_type} @{entry}({', '.join(declared)})",
        f"define {return_type} @{THUNK_PREFIX}{entry}({', '.join(params)}) {{",
        *loads,
        f"  {result}call {return_type} @{entry}({', '.join(call_args)})",
        f"  {ret}",
        "}",
    ])


def _defined_function(module, entry: str, static_too: bool = False):
    from llvmlite.binding import Linkage

    try:
        function = module.get_function(entry)
    except NameError:
        return None
    if function.is_declaration:
        return None
    if not static_too and function.linkage in (Linkage.internal, Linkage.private):
        return None  # not callable until keep_reachable gives it external linkage
    return function


def jit_kept(module, machine, disk: compile_cache.Access | None, key: str | None,
             meta: dict):
    """An MCJIT engine of an optimised ``module``; with a ``key``, the object file it
    generates is kept in the compiled-code cache under it (with ``meta``)."""
    import llvmlite.binding as llvm

    engine = llvm.create_mcjit_compiler(module, machine)
    objects: list[bytes] = []
    if disk is not None and key is not None:
        engine.set_object_cache(notify_func=lambda _, data: objects.append(bytes(data)))
    with codegen():  # no other build's code generation settings
        engine.finalize_object()
    if disk is not None and key is not None and len(objects) == 1:
        disk.put(key, objects[0], meta)
    return engine


def load_object(data: bytes):
    """A JIT engine holding an object file from the compiled-code cache. The engine compiles
    an empty module and the object cache answers for it with ``data``, so no code is
    generated."""
    import llvmlite.binding as llvm

    toolchain.initialize_llvm()
    empty = llvm.parse_assembly("")
    empty.triple = toolchain.host_target().triple
    # only relocates code made for this CPU: a machine without its long feature list is
    # 40 times cheaper to create
    machine = llvm.Target.from_triple(empty.triple).create_target_machine(
        reloc="default", codemodel="jitdefault", jit=True)
    engine = llvm.create_mcjit_compiler(empty, machine)
    engine.set_object_cache(getbuffer_func=lambda _: data)
    engine.finalize_object()
    return engine


def loadable(needs: Sequence[str]) -> bool:
    """Whether every symbol a cached object needs from outside is in this process."""
    return all(map(_in_process, needs))


def _in_process(name: str) -> bool:
    """Whether the JIT can link ``name``: a symbol given to LLVM, or one the process has
    loaded (libc, libm), found the way the JIT finds it. A symbol found stays found (a
    cached emulated kernel needs dozens of the C library's: each is looked up once)."""
    import llvmlite.binding as llvm

    if name in _FOUND:
        return True
    try:
        found = bool(llvm.address_of_symbol(name)) or bool(
            ctypes.cast(getattr(_PROCESS, name), ctypes.c_void_p).value)
    except (AttributeError, ValueError):
        found = False
    if found:
        _FOUND.add(name)
    return found


_PROCESS = ctypes.CDLL(None)
_FOUND: set[str] = set()


def check_resolvable(module, entry: str, where: str) -> None:
    """Refuse, with its name, a symbol the entry needs that neither the source nor this
    process defines: the JIT would otherwise end the whole process when it links."""
    missing = [name for name in toolchain.unresolved_symbols(module) if not _in_process(name)]
    if missing:
        names = ", ".join(repr(name) for name in missing)
        message = (f"{where}: the entry {entry!r} uses {names}, defined neither in its source "
                   "nor in any library loaded here; define it in the kernel's file (or a "
                   "header it includes), or stop calling it from the kernel")
        raise CompileError(message, message)


@hookimpl
def pytest_r3_backend_names() -> list[str]:
    return ["cpu"]


@hookimpl(tryfirst=True)  # pluggy asks later plugins first: built-in names must win
def pytest_r3_make_backend(name: str):
    return CPUBackend() if name == "cpu" else None
