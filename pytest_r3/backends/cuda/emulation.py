"""CUDA kernels on the CPU, with CUDA semantics, for machines without a usable GPU.

The same declared CUDA kernel (``backend="cuda"``, its ``launch=``) is compiled for the host
by the same clang in C++ mode against ``r3_cuda_host.h``, which maps threadIdx, barriers,
shuffles, votes, shared memory, atomics and printf onto a small runtime
(``r3_cuda_host_runtime.c``, linked into every kernel): blocks run one after another, the
threads of a block as a plain loop, or as fibers when the kernel has barriers, shuffles or
votes. Arguments are copied into buffers with guard zones, as a GPU backend copies them to
the device, so a write out of bounds is reported with the argument it hit.

Emulation verifies (tests, recordings, candidates) and never times a GPU: tuning skips
emulated kernels with one line, and the replay verifies their candidates untimed. It is
chosen when no GPU is usable, or forced on or off with ``PYTEST_R3_CUDA_EMULATION=1``/``0``
(the ``r3_cuda_emulation`` setting). x86-64 only: the fiber switch is written for it.

This module compiles and loads; ``emulation_ir`` writes the host IR around the kernel,
``emulation_launch`` runs it, ``selection`` decides whether a process emulates.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import re
from collections.abc import Mapping, Sequence

import numpy as np

from ...errors import BackendError, CompileError, DeclarationError
from ...model.launch import LaunchConfig
from ...model.pipeline import Pipeline
from ...model.signature import Signature, read_signature
from ...model.source import KernelSource
from .. import clang, compile_cache
from ..base import Launcher
from ..candidate_text import display_name
from ..cpu import check_resolvable, jit_kept, load_object, loadable
from . import reach, support, toolchain
from .device import CUDABackend, cached_signature
from .emulation_ir import (
    HEADER,
    INCLUDE,
    RUNTIME_MARKER,
    SHARED_SECTION,
    SHIMS,
    body_ir,
    host_source,
    instrument_accesses,
    runtime_trailer,
    shared_variables,
    shown_name,
    split_runtime,
)
from .emulation_launch import EmulatedLauncher, LaunchStruct

EMULATION_ENV = "PYTEST_R3_CUDA_EMULATION"
RACECHECK_ENV = "PYTEST_R3_CUDA_RACECHECK"
LAUNCH_SYMBOL = "__r3_cuda_launch"
RELEASE_SYMBOL = "__r3_cuda_release"
# the kernel needs fibers only when it calls one of these (barriers, shuffles, votes; a
# trap stops its fiber alone)
_FIBER_SERVICES = re.compile(
    r"@__r3_cuda_(?:barrier|shuffle|vote|match|activemask|trap|assert_fail)\b")


def check_host() -> None:
    machine = platform.machine().lower()
    if machine not in ("x86_64", "amd64"):
        raise BackendError(
            f"CUDA emulation runs on x86-64 only (this machine is {machine}): its fiber "
            f"switch is written for it. Run CUDA kernels on a GPU, or set {EMULATION_ENV}=0 "
            "to leave them unrun (tests that call them then fail or skip)")


class EmulatedCUDABackend(CUDABackend):
    """The CUDA backend, running kernels on the CPU (see the module docstring)."""

    emulated = True
    codegen_settings = ()  # host code: not searched (emulated kernels are not timed)
    address_space_cap = True  # plain host memory: the worker's cap applies
    cpu_clock = "process"  # blocks run on several OS threads
    # what the static check of candidates allows beyond C: the runtime's services, and
    # __shared__ arrays, which the runtime refills before every block (no state kept)
    sandbox_functions = frozenset({
        "__r3_cuda_state", "__r3_cuda_dynamic_shared", "__r3_cuda_barrier",
        "__r3_cuda_shuffle", "__r3_cuda_vote", "__r3_cuda_match", "__r3_cuda_activemask",
        "__r3_cuda_printf", "__r3_cuda_trap", "__r3_cuda_assert_fail"})
    sandbox_sections = frozenset({SHARED_SECTION})
    warp_size = 32  # lanes per warp, in the header and the runtime (HIP's wavefronts: 64)
    # included in front of every kernel: the CUDA vocabulary, and <cuda_runtime.h> (implicit,
    # as under nvcc)
    host_includes = (HEADER, SHIMS / "cuda_runtime.h")

    def target_name(self) -> str:
        return f"cuda-emulation-{clang.host_target().name.removeprefix('cpu-')}"

    def reachable(self, module, entry: str, where: str):
        """The host module whole: the kernel is reached through the emulation runtime's
        launcher, not by a call from the entry, so nothing is cut (files with host code are
        built for the device only, see docs/cuda.md)."""
        return module

    def host_flags(self) -> tuple[str, ...]:
        return (*clang.host_target().clang_flags(), "-std=c++17", "-nostdinc++",
                "-fno-exceptions", "-fno-rtti", "-fno-threadsafe-statics",
                "-Wno-unused-command-line-argument", "-I", str(SHIMS), "-I", str(INCLUDE),
                "-I", str(toolchain.HOST_ONLY_HEADERS),
                *(flag for header in self.host_includes for flag in ("-include", str(header))))

    def compile(self, source: KernelSource, macros: Mapping[str, object],
                debug_info: bool = False) -> str:
        check_host()
        instances = sorted(self._instances.get(source.filename, ()))  # template entries
        text = host_source(reach.entry_text(source, instances)) + _host_instances(instances)
        if text != source.text:
            source = source.with_text(text)
        try:
            ir = clang.compile_to_ir(
                source.text, filename=source.filename, macros=macros,
                target_flags=self.host_flags(), language="c++",
                include_dirs=source.include_dirs, extra_flags=source.flags,
                debug_info=debug_info, untrusted=source.untrusted)
        except CompileError as exc:  # what the bundled headers lack: one line, as on a GPU
            shown = display_name(source.filename) if source.untrusted else source.filename
            raise support.explain(exc, shown, self.vocabulary) from None
        return ir + runtime_trailer(self.warp_size)

    def inspect(self, source: KernelSource, entry: str, macros: Mapping[str, object],
                kernel_name: str = "") -> Signature:
        """Parameters, dtypes and written pointers, read from the host build (as the CPU
        backend reads C kernels), so nothing depends on the device compile's header."""
        where = f"kernel {kernel_name or entry!r} ({source.filename})"
        try:
            if toolchain.parse_entry(entry).arguments is not None:  # a template instance
                self._instances.setdefault(source.filename, set()).add(entry)
        except DeclarationError as exc:
            raise DeclarationError(f"{where}: {exc}") from None
        debug_ir, _ = split_runtime(self.compile(source, macros, debug_info=True), where)
        if source.untrusted:
            return self._read_signature(debug_ir, entry, where)
        return cached_signature(("cuda-emulation-signature", entry, debug_ir),
                                lambda: self._read_signature(debug_ir, entry, where))

    def _read_signature(self, debug_ir: str, entry: str, where: str) -> Signature:
        module = self.parse(debug_ir, where)
        defined = [f.name for f in module.functions if not f.is_declaration]
        symbol = toolchain.match_symbol(defined, entry, where)
        Pipeline().run(module, self.target_machine())
        signature = read_signature(debug_ir, symbol, module.get_function(symbol), where=where)
        if signature.return_dtype is not None:
            raise DeclarationError(f"{where}: a __global__ function returns void")
        return Signature(entry, signature.params, None)

    def parse(self, ir: str, where: str):
        clang.initialize_llvm()
        return clang.parse_ir(ir, where)

    def target_machine(self):
        import llvmlite.binding as llvm

        clang.initialize_llvm()
        target = clang.host_target()
        return llvm.Target.from_triple(target.triple).create_target_machine(
            cpu=target.cpu, features=target.features, opt=3, reloc="default",
            codemodel="jitdefault", jit=True)

    def load(self, ir: str, entry: str, signature: Signature, pipeline: Pipeline,
             kernel_name: str, launch: LaunchConfig | None = None,
             tunables: Mapping[str, object] | None = None) -> Launcher:
        if launch is None:
            words = self.vocabulary
            raise DeclarationError(f"kernel {kernel_name!r} was declared without launch=: its "
                                   f"signature and {words.device_code} can be read, but a "
                                   "launch needs its grid and block; add launch= to r3.kernel "
                                   f"(see {words.page})")
        where = f"kernel {kernel_name!r}"
        racecheck = racecheck_requested()
        # racecheck reads the __shared__ arrays' addresses from the JIT: never from the cache
        disk = None if racecheck else compile_cache.current()
        key = None
        if disk is not None:
            target = clang.host_target()
            key = compile_cache.key("cuda-emulation-object", compile_cache.code_identity(),
                                    target.triple, target.cpu, target.features, entry,
                                    pipeline.as_dict(), ir)
            cached = disk.get(key)
            if cached is not None and loadable(cached.meta.get("needs", ())):
                engine = load_object(cached.payload)
                if engine.get_function_address(LAUNCH_SYMBOL):
                    def optimised() -> str:
                        machine = self.target_machine()
                        return str(self._optimised(ir, entry, pipeline, where, machine)[0])

                    return self._launcher(engine, signature, launch, tunables, kernel_name,
                                          bool(cached.meta.get("fibers")), optimised, None)
        machine = self.target_machine()
        module, fibers, shared = self._optimised(ir, entry, pipeline, where, machine, racecheck)
        check_resolvable(module, entry, where)  # else the JIT ends the process when it links
        needs = clang.unresolved_symbols(module)
        optimised_ir = str(module)
        engine = jit_kept(module, machine, disk, key, {"kind": "cuda-emulation-object",
                                                       "needs": needs, "fibers": fibers})
        ranges = [(engine.get_global_value_address(name), size, shown_name(name))
                  for name, size in shared] if racecheck else None
        return self._launcher(engine, signature, launch, tunables, kernel_name, fibers,
                              optimised_ir, ranges)

    def _optimised(self, ir: str, entry: str, pipeline: Pipeline, where: str, machine,
                   racecheck: bool = False):
        """The host module of ``ir`` with its launch wrapper and the emulation runtime
        linked in, optimised by ``pipeline``; whether it needs fibers; its __shared__
        arrays."""
        import llvmlite.binding as llvm

        ir, runtime = split_runtime(ir, where)
        prepared = pipeline.prepare_ir(ir)
        fibers = bool(_FIBER_SERVICES.search(prepared))
        if racecheck:
            prepared = instrument_accesses(prepared)
        module = self.parse(prepared, where)
        defined = [f.name for f in module.functions if not f.is_declaration]
        symbol = toolchain.match_symbol(defined, entry, where)
        shared = shared_variables(module)
        module.link_in(self.parse(body_ir(module, symbol, shared), where))
        module.link_in(self.parse(runtime, f"{where}: the emulation runtime"))
        for function in module.functions:  # only the launch stays visible: the rest may go
            if not function.is_declaration \
                    and function.name not in (LAUNCH_SYMBOL, RELEASE_SYMBOL) \
                    and function.linkage == llvm.Linkage.external:
                function.linkage = llvm.Linkage.internal
        pipeline.run(module, machine)
        return module, fibers, shared

    def _launcher(self, engine, signature: Signature, launch: LaunchConfig,
                  tunables: Mapping[str, object] | None, kernel_name: str, fibers: bool,
                  optimised_ir, ranges) -> EmulatedLauncher:
        address = engine.get_function_address(LAUNCH_SYMBOL)
        run = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(LaunchStruct))(address)
        release = ctypes.CFUNCTYPE(None)(engine.get_function_address(RELEASE_SYMBOL))
        return EmulatedLauncher(engine, run, release, signature, launch, tunables or {}, self,
                                kernel_name, fibers, optimised_ir, ranges)

    def time(self, launcher: Launcher, args: Sequence[object], repeat: int) -> list[float]:
        """Host seconds per emulated launch, copies included. They measure the emulation,
        never a GPU: tuning skips emulated kernels and the replay verifies them untimed;
        only the worker's warm-up calls this."""
        return launcher.time(args, repeat)  # type: ignore[attr-defined]

    def to_host(self, value: object) -> object:
        return np.array(value, copy=True) if isinstance(value, np.ndarray) else value

    @functools.cached_property
    def device(self) -> CUDABackend:
        """The GPU backend, for what needs no GPU: PTX and ptxas diagnostics of a source
        (``backend.device.compile_ptx(backend.device.compile(source, macros), ...)``)."""
        return CUDABackend()

    def compile_ptx(self, ir: str, entry: str, pipeline: Pipeline, kernel_name: str = ""):
        if RUNTIME_MARKER in ir:
            raise CompileError(
                f"kernel {kernel_name or entry!r}: compile_ptx was given the host IR of CUDA "
                "emulation; compile the source for the device with backend.device.compile() "
                "and pass that IR to backend.device.compile_ptx()", "")
        return self.device.compile_ptx(ir, entry, pipeline, kernel_name)


def racecheck_requested() -> bool:
    """``PYTEST_R3_CUDA_RACECHECK=1``: check shared memory for races between barriers."""
    return os.environ.get(RACECHECK_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def _host_instances(entries: list[str]) -> str:
    """Code appended to the compiled text (never to the file) so that the template instances
    named as entries are emitted in the host build: a kept, read-only pointer to each."""
    lines = [f"__attribute__((used)) static auto const __r3_instance_{index} = "
             f"&{toolchain.parse_entry(entry).text};\n" for index, entry in enumerate(entries)]
    return f'\n#line 1 "{toolchain.INSTANCE_FILE}"\n' + "".join(lines) if lines else ""
