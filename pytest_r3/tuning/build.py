"""Build one variant of a kernel to files and figures, without running it (``pytest-r3 build``).

A CUDA kernel becomes optimised NVPTX IR and PTX; where ptxas is installed it is assembled
(a rejection is a CompileError) and its registers, spills, stack and shared memory are
reported; where nvcc is installed the same source and macros are built by ``nvcc -O3`` too,
and ptxas's figures for that PTX are reported beside ours. A CPU kernel becomes optimised IR
and host assembly. Files are written atomically under the given folder.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..backends.clang import without_linker_keep
from ..backends.compile_cache import trusted_build, untrusted_build
from ..errors import CompileError, DeclarationError, EntryNotFoundError, R3Error
from ..model.pipeline import codegen
from ..outputs import write_bytes_atomic, write_text_atomic

# ptxas figures shown, in order, with their labels
CUDA_FIGURES = (("registers", "registers"), ("spill_store_bytes", "spill stores (bytes)"),
                ("spill_load_bytes", "spill loads (bytes)"), ("stack_bytes", "stack (bytes)"),
                ("shared_bytes", "shared memory (bytes)"),
                ("constant_bytes", "constant memory (bytes)"))


# code-object figures shown for HIP kernels, in order, with their labels
HIP_FIGURES = (("vgprs", "VGPRs"), ("agprs", "AGPRs"), ("sgprs", "SGPRs"),
               ("vgpr_spills", "VGPR spills"), ("sgpr_spills", "SGPR spills"),
               ("scratch_bytes", "scratch (bytes)"), ("lds_bytes", "LDS (bytes)"),
               ("waves_per_simd", "occupancy (waves/SIMD)"))


@dataclass
class BuildResult:
    kernel: str
    backend: str
    target: str
    macros: dict
    pipeline: dict                                  # settings that differ from the default
    signature: str = ""                             # as read from the IR, written pointers
    files: dict[str, str] = field(default_factory=dict)       # "ir", "ptx", "assembly"...
    figures: dict[str, dict] = field(default_factory=dict)    # "ours", "nvcc"
    notes: list[str] = field(default_factory=list)
    headers: str = ""                               # CUDA: bundled, or a toolkit's

    def as_dict(self) -> dict:
        return {"kernel": self.kernel, "backend": self.backend, "target": self.target,
                "macros": self.macros, "pipeline": self.pipeline, "signature": self.signature,
                "files": self.files, "headers": self.headers,
                "figures": self.figures, "notes": self.notes}

    def lines(self, relative_to: Path | None = None) -> list[str]:
        """The human summary: what was built, where the files are (relative to
        ``relative_to`` when inside it), the figures."""
        macros = ", ".join(f"{k}={v}" for k, v in self.macros.items()) or "no tunables"
        pipeline = ", ".join(f"{k}={v}" for k, v in self.pipeline.items()) or "default"
        lines = [f"{self.kernel} [{self.backend} {self.target}]  {macros}; pipeline: {pipeline}"]
        if self.signature:
            lines.append(f"  signature: {self.signature}")
        width = max(len(k) for k in self.files) + 1 if self.files else 0
        lines += [f"  {kind + ':':<{width}} {_shown(path, relative_to)}"
                  for kind, path in self.files.items()]
        if self.headers:
            lines.append(f"  headers: {self.headers}")
        ours, nvcc = self.figures.get("ours", {}), self.figures.get("nvcc")
        if self.backend == "cuda" and ours:
            lines.append(f"  {'':<24} {'ours':>8}" + (f" {'nvcc -O3':>9}" if nvcc else ""))
            for key, label in CUDA_FIGURES:
                if key in ours or (nvcc and key in nvcc):
                    theirs = f" {nvcc.get(key, '-'):>9}" if nvcc else ""
                    lines.append(f"  {label:<24} {ours.get(key, '-'):>8}{theirs}")
        elif self.backend == "hip" and ours:
            lines.append(f"  {'':<24} {'ours':>8}")
            lines += [f"  {label:<24} {ours[key]:>8}" for key, label in HIP_FIGURES
                      if key in ours]
        elif ours:
            lines += [f"  {key.replace('_', ' ')}: {value}" for key, value in ours.items()]
        lines += [f"  note: {note}" for note in self.notes]
        return lines


def _shown(path: str, root: Path | None) -> str:
    if root is not None:
        try:
            return str(Path(path).relative_to(root))
        except ValueError:
            pass
    return path


def variant_label(kernel, variant, target: str) -> str:
    """``baseline-sm_90``, or a short hash of what differs, so each variant has its files."""
    if variant == kernel.baseline:
        return f"baseline-{target}"
    text = json.dumps([variant.macro_dict, variant.pipeline.as_dict(),
                       variant.source_text], sort_keys=True, default=str)
    return f"v{hashlib.sha256(text.encode()).hexdigest()[:10]}-{target}"


def build(kernel, variant, out_dir: Path, target: str | None = None) -> BuildResult:
    """Compile ``variant`` of ``kernel`` (a declared Kernel) into ``out_dir``; the declared
    source's compilation uses the on-disk compiled-code cache (a ``--source`` file's never
    does)."""
    scope = trusted_build() if variant.source_text is None else untrusted_build()
    with scope:
        return _build(kernel, variant, out_dir, target)


def _build(kernel, variant, out_dir: Path, target: str | None) -> BuildResult:
    if kernel.backend_name == "cuda":
        return _build_cuda(kernel, variant, Path(out_dir), target)
    if kernel.backend_name == "hip":
        return _build_hip(kernel, variant, Path(out_dir), target)
    if target:
        raise DeclarationError(f"--target {target!r} applies to CUDA and HIP kernels; "
                               f"{kernel.where} is a {kernel.backend_name} kernel built for "
                               "this machine")
    return _build_cpu(kernel, variant, Path(out_dir))


def _result(kernel, variant, target: str) -> BuildResult:
    result = BuildResult(kernel.name, kernel.backend_name, target, dict(variant.macro_dict),
                         variant.pipeline.differences())
    try:  # what a launch must pass; a kernel whose parameters cannot be read still builds
        signature = kernel.signature
        written = [p.name for p in signature.params if p.is_pointer and p.written]
        result.signature = signature.describe() + (f"; writes {', '.join(written)}"
                                                   if written else "")
    except R3Error as exc:
        result.notes.append(f"its parameters cannot be read: {str(exc).splitlines()[0]}")
    return result


def _build_cuda(kernel, variant, out_dir: Path, target: str | None) -> BuildResult:
    from ..backends.cuda import CUDABackend, toolchain

    backend = CUDABackend(target) if target else kernel.backend
    arch = backend.arch
    result = _result(kernel, variant, arch)
    result.headers = backend.headers()
    stem = out_dir / variant_label(kernel, variant, arch)
    source = kernel.source_for(variant)
    backend.add_entry(source, kernel.entry)  # a template instance the file may never make
    ir = backend.compile(source, variant.macro_dict)
    ptx = backend.compile_ptx(ir, kernel.entry, variant.pipeline, kernel.name)
    result.files["ir"] = str(write_text_atomic(stem.with_suffix(".ll"), ptx.optimised_ir))
    result.files["ptx"] = str(write_text_atomic(stem.with_suffix(".ptx"), ptx.ptx))
    result.figures["ours"] = {k: v for k, v in ptx.diagnostics.items() if k != "ptxas"}
    if ptx.diagnostics.get("ptxas") != "ok":
        result.notes.append("ptxas is not installed: the PTX was not assembled, so there "
                            "are no register or spill figures (install the CUDA toolkit)")
    if toolchain.find_tool("nvcc") is None:
        result.notes.append("nvcc is not installed: no vendor figures to compare with")
        return result
    try:
        theirs = toolchain.nvcc_ptx(source, variant.macro_dict, arch, entry=kernel.entry)
        symbol = toolchain.match_symbol(toolchain.ptx_entries(theirs), kernel.entry,
                                         kernel.where)
        result.files["nvcc ptx"] = str(write_text_atomic(stem.with_suffix(".nvcc.ptx"),
                                                         theirs))
        info = toolchain.ptxas_info(theirs, arch)
        if info is not None:
            result.figures["nvcc"] = info.get(symbol, {})
    except R3Error as exc:  # nvcc's opinion is informative: ours built, so the build stands
        first = (str(exc).splitlines() or [""])[0]
        result.notes.append(f"nvcc could not build it: {first[:300]}")
    return result


def _build_hip(kernel, variant, out_dir: Path, target: str | None) -> BuildResult:
    """AMDGCN IR, assembly and a linked code object for an AMD GPU (no GPU needed), with
    the registers, LDS and occupancy its metadata gives; hipcc's where ROCm is installed
    is not compared yet, and the notes say so."""
    from ..backends.hip import HIPBackend, toolchain

    backend = HIPBackend(target) if target else _hip_device(kernel.backend)
    arch = backend.arch
    result = _result(kernel, variant, arch)
    stem = out_dir / variant_label(kernel, variant, arch)
    ir = backend.compile(kernel.source_for(variant), variant.macro_dict)
    built = backend.compile_code_object(ir, kernel.entry, variant.pipeline, kernel.name)
    result.files["ir"] = str(write_text_atomic(stem.with_suffix(".ll"), built.optimised_ir))
    result.files["assembly"] = str(write_text_atomic(stem.with_suffix(".s"), built.assembly))
    result.files["code object"] = str(write_bytes_atomic(stem.with_suffix(".hsaco"),
                                                         built.code_object))
    result.figures["ours"] = {key: built.figures[key] for key, _ in HIP_FIGURES
                              if key in built.figures}
    if toolchain.find_hipcc() is None:
        result.notes.append("hipcc is not installed (ROCm): no vendor figures to compare with")
    else:
        result.notes.append("hipcc is installed, but pytest-r3 does not compare with its "
                            "build yet")
    return result


def _hip_device(backend):
    """The AMD GPU build of a HIP kernel's backend, also when the process emulates HIP."""
    return getattr(backend, "device", backend) if getattr(backend, "emulated", False) \
        else backend


def _build_cpu(kernel, variant, out_dir: Path) -> BuildResult:
    backend = kernel.backend
    target = backend.target_name()
    result = _result(kernel, variant, target)
    stem = out_dir / variant_label(kernel, variant, "host")
    ir = backend.compile(kernel.source_for(variant), variant.macro_dict)
    where = kernel.where
    module = backend.parse(without_linker_keep(variant.pipeline.prepare_ir(ir)), where)
    if not any(f.name == kernel.entry and not f.is_declaration for f in module.functions):
        raise EntryNotFoundError(f"{where}: entry symbol {kernel.entry!r} is not defined")
    machine = backend.target_machine()
    # the entry and what it reaches, as a replay loads it: not main, not unused helpers, and
    # a static entry is kept although nothing in the file calls it
    backend.reachable(module, kernel.entry, where)
    variant.pipeline.run(module, machine)
    optimised = str(module)
    try:
        with codegen():  # as the CPU backend generates code: it honours no such setting
            assembly = machine.emit_assembly(module)
    except RuntimeError as exc:
        raise CompileError(f"{where}: LLVM could not generate assembly: {exc}", str(exc)) \
            from exc
    result.files["ir"] = str(write_text_atomic(stem.with_suffix(".ll"), optimised))
    result.files["assembly"] = str(write_text_atomic(stem.with_suffix(".s"), assembly))
    result.figures["ours"] = _assembly_figures(assembly, kernel.entry)
    return result


_WIDE_REGISTER = re.compile(r"%[yz]mm\d+|\bv\d+\.\d+[bhsd]\b|\bz\d+\.[bhsd]\b")


def _is_vector(instruction: str) -> bool:
    """Whether an instruction works on several elements: a ymm/zmm (or Arm vector)
    register, or an xmm register with a packed mnemonic (``vaddps``, ``vpaddd``); scalar
    floating point (``vaddss``) lives in xmm registers too and does not count."""
    if _WIDE_REGISTER.search(instruction):
        return True
    if "%xmm" not in instruction:
        return False
    mnemonic = instruction.split()[0]
    return mnemonic.endswith(("ps", "pd")) or mnemonic.startswith(("vp", "p")) \
        and not mnemonic.startswith(("push", "pop"))


def _assembly_figures(assembly: str, entry: str) -> dict[str, int]:
    """Instructions in the entry function, and how many of them touch vector registers."""
    inside, instructions, vector = False, 0, 0
    for line in assembly.splitlines():
        stripped = line.strip()
        if re.match(rf"_?{re.escape(entry)}:", stripped):
            inside = True
            continue
        if not inside:
            continue
        if stripped.startswith(".Lfunc_end") or stripped.startswith(".size") \
                or stripped.startswith(".cfi_endproc"):
            break
        if not stripped or stripped.startswith((".", "#", "//", ";")) or stripped.endswith(":"):
            continue
        instructions += 1
        vector += _is_vector(stripped)
    return {"instructions": instructions, "vector_instructions": vector}
