"""CUDA backend: .cu -> clang (device only) NVPTX IR -> llvmlite passes -> PTX -> the GPU.

Compiling needs neither a GPU nor the CUDA toolkit: clang (from the ziglang wheel) compiles
the device side with ``-nocudainc -nocudalib`` and pytest-r3's own headers: ``r3_cuda.h``
in front of every kernel supplies ``__global__``, ``threadIdx``, vector types, warp
functions, atomics, intrinsics and math on top of clang's NVVM builtins, and
``include/cuda_device/`` answers the includes device code makes (``cuda_fp16.h``,
``<cstdio>``...); what they lack is reported in one line (``support``). llvmlite
optimises the IR with the same :class:`~pytest_r3.Pipeline` as CPU kernels and emits PTX.
Where NVIDIA's tools are installed, ``ptxas -v`` checks every PTX and reports registers
and spills, and libdevice supplies accurate math (see ``toolchain``).
Running needs a GPU and a CUDA runtime (cuda-bindings, ``pip install "pytest-r3[cuda]"``, or
pycuda; see ``runtime``), imported on first launch.

The GPU architecture is ``$PYTEST_R3_CUDA_ARCH`` (``sm_90``...), else the GPU's own when
the CUDA runtime can see one, else ``sm_80``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ...errors import CompileError, DeclarationError, ToolchainError
from ...model.bounds import with_declared_bounds
from ...model.launch import LaunchConfig, LaunchLimits
from ...model.pipeline import Pipeline, codegen
from ...model.signature import Signature, read_signature, signature_from_dict
from ...model.source import KernelSource
from .. import clang, compile_cache
from ..base import Backend, Launcher
from ..candidate_text import display_name
from . import addressing, reach, support, toolchain

ARCH_ENV = "PYTEST_R3_CUDA_ARCH"
DEFAULT_ARCH = "sm_80"
TRIPLE = "nvptx64-nvidia-cuda"
_KERNEL_DEFINE = re.compile(r'^define [^\n]*\bptx_kernel\b[^\n]*?@"?([\w.$]+)"?\(', re.MULTILINE)


def ptx_version(arch: str) -> int:
    """The PTX ISA version to emit for ``arch``: the oldest that has it, at least 7.8 (CUDA
    11.8), so a driver from CUDA 11.8 on can load PTX for any architecture up to sm_90."""
    number = int(re.sub(r"\D", "", arch) or 0)
    if arch.endswith(("a", "f")) and number < 100:  # sm_90a: arch-specific features
        return 80
    if number >= 120:
        return 87
    if number >= 100:
        return 86
    return 78


def check_arch(arch: str) -> str:
    if not re.fullmatch(r"sm_\d{2,3}[af]?", arch):
        raise ToolchainError(f"GPU architecture {arch!r} is not of the form sm_80, sm_90, "
                             f"sm_90a...; check ${ARCH_ENV}")
    return arch


@dataclass
class PTXBuild:
    """A variant compiled to PTX: the text, its kernel symbol, and what ptxas reported."""

    ptx: str
    symbol: str
    arch: str
    optimised_ir: str
    libdevice: bool = False
    diagnostics: dict = field(default_factory=dict)
    cubin: bytes | None = None  # ptxas's output for ``arch``, where ptxas is installed


class CUDABackend(Backend):
    name = "cuda"
    language = "cuda"
    vocabulary = support.CUDA  # the words of its one-line errors (HIP has its own)
    launch_limits = LaunchLimits()
    address_space_cap = False  # the CUDA driver reserves more address space than any cap
    cpu_clock = "none"  # the device times a launch; the host thread waits for it
    kernel_define = _KERNEL_DEFINE  # a kernel's definition in the IR, its symbol captured
    # LSR's 64-bit pointers, and row pointers, can cost registers (see addressing.py)
    codegen_settings = ("codegen_lsr", "flat_addresses")

    def __init__(self, arch: str | None = None, headers: str | None = None) -> None:
        self._arch = check_arch(arch) if arch else None
        if headers is not None and headers not in toolchain.HEADER_CHOICES:
            raise ToolchainError(f"CUDA headers {headers!r}: use one of "
                                 f"{', '.join(toolchain.HEADER_CHOICES)}")
        self._headers = headers  # None: $PYTEST_R3_CUDA_HEADERS decides at each build
        # template instances declared as entries, per source file: compile() instantiates
        # them in the compiled text, whether or not the file itself does
        self._instances: dict[str, set[str]] = {}

    # -- target ---------------------------------------------------------------------------
    @property
    def arch(self) -> str:
        if self._arch is None:
            override = os.environ.get(ARCH_ENV, "").strip()
            self._arch = check_arch(override) if override else _device_arch() or DEFAULT_ARCH
        return self._arch

    def target_name(self) -> str:
        """``cuda-sm_90-nvidia-h100-80gb-hbm3``: the architecture, and the GPU model when
        one is usable (the same architecture comes with different memory systems)."""
        arch = self.arch
        device = _device_name()
        slug = re.sub(r"[^a-z0-9]+", "-", device.lower()).strip("-") if device else ""
        return f"cuda-{arch}" + (f"-{slug}" if slug else "")

    def clang_flags(self, libdevice: bool) -> tuple[str, ...]:
        """Device-only CUDA without CUDA's headers: r3_cuda.h and <cuda_runtime.h> in front of
        every kernel, the forwarding headers (<cstdio>, cuda_fp16.h...) ahead of the C
        library's, then the declarations host code includes (host_only/). Where a CUDA
        toolkit lends its headers (:meth:`toolkit`), they come after those (see
        :func:`toolkit_flags`)."""
        toolkit = self.toolkit()
        return (
            "--cuda-device-only", "-nocudainc", "-nocudalib", f"--cuda-gpu-arch={self.arch}",
            f"--cuda-feature=+ptx{ptx_version(self.arch)}", "-Wno-unknown-cuda-version",
            "-fdeclspec", "-I", str(toolchain.HEADER.parent),
            "-I", str(toolchain.DEVICE_HEADERS),
            *(clang.cxx_library_flags() if toolkit else ()),
            "-I", str(toolchain.HOST_ONLY_HEADERS),
            *(toolkit_flags(toolkit) if toolkit else ()),
            "-include", str(toolchain.HEADER),
            # as under nvcc, <cuda_runtime.h> is there without an #include
            "-include", str(toolchain.DEVICE_HEADERS / "cuda_runtime.h"),
            *(["-DR3_LIBDEVICE=1"] if libdevice else []),
        )

    def toolkit(self) -> toolchain.Toolkit | None:
        """The CUDA toolkit whose headers this build adds to pytest-r3's (CUB's block and
        warp primitives, the full cooperative groups), or None: bundled headers alone. Chosen by
        ``headers=`` or ``$PYTEST_R3_CUDA_HEADERS`` (auto: the toolkit's when installed)."""
        return toolchain.device_toolkit(self._headers)

    def headers(self) -> str:
        """Which headers the device build uses, for people (``pytest-r3 build``)."""
        toolkit = self.toolkit()
        if toolkit is None:
            return "bundled (pytest-r3's own; no CUB, Thrust or full cooperative groups)"
        return f"{toolkit.describe()} for CUB and cooperative groups; " \
               "pytest-r3's own for the rest"

    @functools.cached_property
    def _machine(self):
        import llvmlite.binding as llvm

        _initialize_nvptx()
        return llvm.Target.from_triple(TRIPLE).create_target_machine(
            cpu=self.arch, features=f"+ptx{ptx_version(self.arch)}", opt=3)

    def target_machine(self):
        return self._machine

    # -- compiling --------------------------------------------------------------------------
    def compile(self, source: KernelSource, macros: Mapping[str, object],
                debug_info: bool = False, preprocess_only: bool = False) -> str:
        # clang keeps only line tables for optimised NVPTX code; ask cc1 for variables too
        debug = ("-Xclang", "-debug-info-kind=constructor") if debug_info else ()
        instances = sorted(self._instances.get(source.filename, ()))
        text = reach.entry_text(source, instances) + toolchain.instantiation_text(*instances)
        flags = self.clang_flags(toolchain.find_libdevice() is not None)
        refused = support.grid_groups(text, _shown_name(source)) \
            if "-DR3_CUDA_TOOLKIT_HEADERS=1" in flags else None
        if refused is not None:  # the bundled headers leave them undeclared: clang says it
            raise refused
        try:
            return clang.compile_to_ir(
                text, filename=source.filename, macros=macros,
                target_flags=flags, language=self.language, include_dirs=source.include_dirs,
                extra_flags=(*debug, *source.flags), debug_info=debug_info,
                untrusted=source.untrusted, preprocess_only=preprocess_only)
        except CompileError as exc:
            raise support.explain(exc, _shown_name(source), self.vocabulary) from None

    def parse(self, ir: str, where: str):
        _initialize_nvptx()
        return clang.parse_ir(ir, where)

    def reachable(self, module, entry: str, where: str):
        """``module`` reduced to kernel ``entry`` and what it reaches (clang.keep_reachable);
        host code never reaches device IR, but unused device functions do."""
        symbol = toolchain.match_symbol(self.kernel_define.findall(str(module)), entry,
                                        where)
        clang.keep_reachable(module, symbol, self.target_machine())
        return module

    def add_entry(self, source: KernelSource, entry: str) -> None:
        """Let :meth:`compile` instantiate ``entry`` when it names a template instance
        (``inspect`` does this; a build on another backend object must too)."""
        if toolchain.parse_entry(entry).arguments is not None:
            self._instances.setdefault(source.filename, set()).add(entry)

    def inspect(self, source: KernelSource, entry: str, macros: Mapping[str, object],
                kernel_name: str = "") -> Signature:
        where = f"kernel {kernel_name or entry!r} ({source.filename})"
        try:
            self.add_entry(source, entry)
        except DeclarationError as exc:
            raise DeclarationError(f"{where}: {exc}") from None
        debug_ir = self.compile(source, macros, debug_info=True)
        if source.untrusted or compile_cache.current() is None:
            return self._read_signature(source, entry, macros, debug_ir, where)
        text = self.compile(source, macros, preprocess_only=True)  # its bounds are read
        return cached_signature(
            ("cuda-signature", self.arch, entry, debug_ir, text),
            lambda: self._read_signature(source, entry, macros, debug_ir, where, text))

    def _read_signature(self, source: KernelSource, entry: str, macros: Mapping[str, object],
                        debug_ir: str, where: str, text: str | None = None) -> Signature:
        symbol = toolchain.match_symbol(self.kernel_define.findall(debug_ir), entry, where)
        module = self.parse(clang.without_linker_keep(debug_ir), where)
        clang.keep_reachable(module, symbol, self.target_machine())
        debug_ir = str(module)
        Pipeline().run(module, self.target_machine())
        signature = read_signature(debug_ir, symbol, module.get_function(symbol), where=where)
        if signature.return_dtype is not None:
            raise DeclarationError(f"{where}: a __global__ function returns void")
        signature = Signature(entry, signature.params, None)
        if any(p.is_pointer for p in signature.params):  # C array bounds, as written
            if text is None:  # a rewrite's text is never preprocessed: read as written
                text = source.text if source.untrusted else \
                    self.compile(source, macros, preprocess_only=True)
            signature = with_declared_bounds(signature, text)
        return signature

    def link_libraries(self, module) -> bool:
        """Link the device libraries ``module`` calls into it: CUDA's libdevice (``__nv_*``)
        where installed. True when something was linked."""
        libdevice = any(f.is_declaration and f.name.startswith("__nv_")
                        for f in module.functions)
        if libdevice:
            module.link_in(_libdevice_module(module.triple, module.data_layout))
        return libdevice

    def optimised_entry(self, ir: str, entry: str, pipeline: Pipeline, where: str):
        """``ir`` reduced to kernel ``entry`` and what it reaches, with the device libraries
        it calls, optimised by ``pipeline``: (the llvmlite module, the entry's symbol,
        whether a library was linked). Only the entry stays visible, so what it inlined may
        go."""
        import llvmlite.binding as llvm

        prepared = pipeline.prepare_ir(ir)
        symbol = toolchain.match_symbol(self.kernel_define.findall(prepared), entry, where)
        module = self.parse(clang.without_linker_keep(prepared), where)
        machine = self.target_machine()
        clang.keep_reachable(module, symbol, machine)  # a static one too
        linked = self.link_libraries(module)
        for function in module.functions:
            if not function.is_declaration and function.name != symbol \
                    and function.linkage == llvm.Linkage.external:
                function.linkage = llvm.Linkage.internal
        pipeline.run(module, machine)
        cleanup = llvm.create_new_module_pass_manager()
        cleanup.add_global_dead_code_eliminate_pass()
        cleanup.run(module, llvm.create_pass_builder(
            machine, llvm.create_pipeline_tuning_options(speed_level=0)))
        if pipeline.flat_addresses:  # after LLVM's passes, which would fold it back
            module = self.parse(addressing.flat_addresses(str(module)), where)
        return module, symbol, linked

    def compile_ptx(self, ir: str, entry: str, pipeline: Pipeline,
                    kernel_name: str = "") -> PTXBuild:
        """Optimise ``ir`` with ``pipeline`` and emit PTX for ``entry`` alone; where ptxas
        is installed, assemble it and attach what ``ptxas -v`` reports and the cubin.
        Inside a trusted build both come from the compiled-code cache when they can."""
        disk = compile_cache.current()
        key = build = None
        if disk is not None:
            key = compile_cache.key("cuda-ptx", compile_cache.code_identity(), self.arch,
                                    ptx_version(self.arch), entry, pipeline.as_dict(),
                                    _libdevice_identity(), ir)
            build = _cached_build(disk.get(key), self.arch)
        if build is None:
            build = self._emit_ptx(ir, entry, pipeline, kernel_name)
            if disk is not None and key is not None:
                disk.put(key, json.dumps({"ptx": build.ptx, "ir": build.optimised_ir}).encode(),
                         {"kind": "cuda-ptx", "symbol": build.symbol,
                          "libdevice": build.libdevice})
        assembled = toolchain.assemble(build.ptx, self.arch)
        if assembled is None:
            build.diagnostics = {"ptxas": "not installed: PTX not assembled ahead of loading"}
        else:
            build.diagnostics = {"ptxas": "ok", **assembled.info.get(build.symbol, {})}
            build.cubin = assembled.cubin
        return build

    def _emit_ptx(self, ir: str, entry: str, pipeline: Pipeline, kernel_name: str) -> PTXBuild:
        where = f"kernel {kernel_name or entry!r}"
        module, symbol, libdevice = self.optimised_entry(ir, entry, pipeline, where)
        machine = self.target_machine()
        optimised_ir = str(module)
        try:
            with codegen(pipeline):
                ptx = machine.emit_assembly(module)
        except RuntimeError as exc:
            raise CompileError(f"{where}: LLVM could not generate PTX: {exc}", str(exc)) from exc
        return PTXBuild(ptx, symbol, self.arch, optimised_ir, libdevice)

    # -- running -----------------------------------------------------------------------------
    def load(self, ir: str, entry: str, signature: Signature, pipeline: Pipeline,
             kernel_name: str, launch: LaunchConfig | None = None,
             tunables: Mapping[str, object] | None = None) -> Launcher:
        build = self.compile_ptx(ir, entry, pipeline, kernel_name)
        return self.load_ptx(build.ptx, build.symbol, signature, launch, tunables or {},
                             kernel_name, build)

    def load_ptx(self, ptx: str | bytes, symbol: str, signature: Signature,
                 launch: LaunchConfig | None, tunables: Mapping[str, object],
                 kernel_name: str, build: PTXBuild | None = None) -> Launcher:
        """A launcher for PTX from anywhere (ours, or nvcc's for the vendor baseline), or
        for a cubin's bytes."""
        from . import runtime

        if launch is None:
            raise DeclarationError(f"kernel {kernel_name!r} was declared without launch=: its "
                                   "signature and PTX can be read, but a launch needs its grid "
                                   "and block; add launch= to r3.kernel (see docs/cuda.md)")
        return runtime.runtime().launcher(ptx, symbol, signature, launch, dict(tunables),
                                               self.launch_limits, kernel_name, build)

    def vendor_launcher(self, kernel, variant=None, cubin: bool = False) -> Launcher:
        """``kernel``'s variant (baseline by default) built by nvcc instead of clang/LLVM;
        ``cubin``: assembled by nvcc too (ptxas -O3), so the driver compiles nothing."""
        variant = variant or kernel.baseline
        source = kernel.source_for(variant)
        ptx = toolchain.nvcc_ptx(source, variant.macro_dict, self.arch, entry=kernel.entry)
        symbol = toolchain.match_symbol(toolchain.ptx_entries(ptx), kernel.entry,
                                         kernel.where)
        image = toolchain.nvcc_cubin(source, variant.macro_dict, self.arch,
                                     entry=kernel.entry) if cubin else ptx
        return self.load_ptx(image, symbol, kernel.signature, kernel.launch,
                             variant.macro_dict, kernel.name)

    def launch(self, launcher: Launcher, args: Sequence[object]) -> object:
        return launcher(*args)

    def time(self, launcher: Launcher, args: Sequence[object], repeat: int) -> list[float]:
        return launcher.time(args, repeat)  # type: ignore[attr-defined]

    def device_facts(self) -> dict:
        """The GPU's name, L2 size, memory clock and bus width (see gpu_timing), as plain
        data; opens NVML. A replay worker asks before any candidate runs in it."""
        from . import runtime

        return runtime.runtime().facts().as_dict()

    def clocks(self) -> dict:
        """The GPU's clocks, temperature, power and throttle reasons now (NVML), or why
        they could not be read, as plain data."""
        from . import runtime

        return runtime.runtime().clocks().as_dict()

    def enter_worker(self) -> None:
        """A replay worker starts no ptxas (its PTX goes to the driver) and reads libdevice
        now: a candidate that calls ``__nv_*`` math links it after the worker is sealed."""
        toolchain.forbid_programs()
        path = toolchain.find_libdevice()
        if path is not None:
            _libdevice_bitcode(str(path))

    def to_host(self, value: object) -> object:
        if isinstance(value, np.ndarray) or not _on_device(value):
            return np.array(value, copy=True)
        from . import runtime

        return runtime.runtime().to_host(value)


def toolkit_flags(toolkit: toolchain.Toolkit) -> tuple[str, ...]:
    """What lets the toolkit's libraries compile on pytest-r3's core headers under clang:
    the versions clang's own CUDA wrapper would define, CCCL's folder (CUB, Thrust,
    libcu++) and the toolkit's include folder after every other (its cooperative groups
    through pytest-r3's <cooperative_groups.h>; nothing pytest-r3 provides is replaced).
    CCCL's support for CUDA's half, bfloat16 and fp8 types is left out: those come from
    pytest-r3's headers, which CCCL does not know."""
    return (
        "-DR3_CUDA_TOOLKIT_HEADERS=1", f"-DCUDA_VERSION={toolkit.version}",
        f"-DCUDART_VERSION={toolkit.version}", "-D_ALLOW_UNSUPPORTED_LIBCPP",
        *(f"-DCCCL_DISABLE_{kind}_SUPPORT" for kind in ("FP16", "BF16", "NVFP8", "NVFP6",
                                                        "NVFP4")),
        "-I", str(toolkit.include / "cccl"), "-idirafter", str(toolkit.include),
    )


def parse_entry(entry: str) -> toolchain.EntryName:
    """A CUDA kernel's entry= (a name, or a template instance such as
    ``"scale_tiles<16, float>"``), checked; DeclarationError says what is wrong."""
    return toolchain.parse_entry(entry)


def _shown_name(source: KernelSource) -> str:
    return display_name(source.filename) if source.untrusted else source.filename


def _on_device(value: object) -> bool:
    from .runtime import is_device_array

    return is_device_array(value)


@functools.lru_cache(maxsize=1)
def _initialize_nvptx() -> None:
    import llvmlite.binding as llvm

    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()


def _device_arch() -> str | None:
    """The GPU's architecture when a CUDA runtime is installed and sees one, else None."""
    from . import runtime

    try:
        return runtime.runtime().arch
    except Exception:  # no runtime, no driver, no GPU: compile for the default
        return None


def _device_name() -> str | None:
    from . import runtime

    try:
        return runtime.runtime().device_name
    except Exception:
        return None


def cached_signature(parts: tuple, read: Callable[[], Signature]) -> Signature:
    """A signature from the compiled-code cache, named by ``parts`` (its kind first, then
    the compiled text it is read from), else ``read()`` and kept; only inside a trusted
    build."""
    disk = compile_cache.current()
    key = compile_cache.key(parts[0], compile_cache.code_identity(), *parts[1:])
    cached = None if disk is None else disk.get(key)
    if cached is not None:
        try:
            return signature_from_dict(json.loads(cached.payload))
        except (ValueError, KeyError, TypeError):
            pass
    signature = read()
    if disk is not None:
        disk.put(key, json.dumps(signature.as_dict()).encode(), {"kind": parts[0]})
    return signature


def _cached_build(entry: compile_cache.Entry | None, arch: str) -> PTXBuild | None:
    """A PTXBuild from a cache entry, or None when there is none (or it is not one)."""
    if entry is None:
        return None
    try:
        texts = json.loads(entry.payload)
        return PTXBuild(texts["ptx"], str(entry.meta["symbol"]), arch, texts["ir"],
                        bool(entry.meta.get("libdevice")))
    except (ValueError, KeyError, TypeError):
        return None


def _libdevice_identity() -> str:
    """The libdevice a PTX links when its kernel calls ``__nv_*`` math: its path and the
    hash of its bitcode (another CUDA toolkit's libdevice is another entry)."""
    path = toolchain.find_libdevice()
    if path is None:
        return "none"
    return f"{path} {_libdevice_digest(str(path))}"


@functools.lru_cache(maxsize=4)
def _libdevice_digest(path: str) -> str:
    return hashlib.sha256(_libdevice_bitcode(path)).hexdigest()


@functools.lru_cache(maxsize=4)
def _libdevice_bitcode(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def _libdevice_module(triple: str, data_layout: str):
    import llvmlite.binding as llvm

    path = toolchain.find_libdevice()
    if path is None:  # only reachable if the file vanished since compiling
        raise ToolchainError("the kernel calls libdevice (__nv_*) functions but libdevice "
                             f"is not installed; set {toolchain.LIBDEVICE_ENV}")
    library = llvm.parse_bitcode(_libdevice_bitcode(str(path)))
    library.triple, library.data_layout = triple, data_layout
    return library
