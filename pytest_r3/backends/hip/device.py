"""HIP backend: .hip -> clang (device only) AMDGCN IR -> llvmlite passes -> code object.

The same shape as the CUDA backend, whose device build this one extends: clang (from the
ziglang wheel) compiles the device side with ``-x hip --offload-arch=gfx942 -nogpuinc
-nogpulib`` against pytest-r3's own ``r3_hip.h`` (no ROCm needed), llvmlite optimises the
IR with the same :class:`~pytest_r3.Pipeline` and its AMDGPU back end writes an object,
and the ziglang wheel's ``ld.lld`` links it into a code object (``.hsaco``) that the HIP
runtime loads with ``hipModuleLoadData``. Building needs no GPU; running needs an AMD GPU
and hip-python (``pip install "pytest-r3[hip]"``, see ``runtime``).

The architecture is ``$PYTEST_R3_HIP_ARCH`` (gfx90a, gfx942), else the GPU's own when the
HIP runtime sees one, else gfx942.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from ...errors import CompileError, DeclarationError, ToolchainError
from ...model.launch import LaunchConfig
from ...model.pipeline import Pipeline, codegen
from ...model.signature import Signature
from ..base import Launcher
from ..cuda import toolchain as cuda_toolchain
from ..cuda.device import CUDABackend
from . import toolchain
from .support import HIP

_KERNEL_DEFINE = re.compile(r'^define [^\n]*\bamdgpu_kernel\b[^\n]*?@"?([\w.$]+)"?\(',
                            re.MULTILINE)


@dataclass
class CodeObjectBuild:
    """A variant built for an AMD GPU: the linked code object, its assembly, the kernel's
    symbol and the figures its metadata gives (registers, LDS, occupancy)."""

    code_object: bytes
    assembly: str
    symbol: str
    arch: str
    optimised_ir: str
    figures: dict = field(default_factory=dict)


class HIPBackend(CUDABackend):
    """HIP kernels built for AMD GPUs (see the module docstring)."""

    name = "hip"
    language = "hip"
    vocabulary = HIP
    kernel_define = _KERNEL_DEFINE

    def __init__(self, arch: str | None = None) -> None:
        super().__init__()
        self._arch = toolchain.check_arch(arch) if arch else None

    @property
    def arch(self) -> str:
        if self._arch is None:
            override = os.environ.get(toolchain.ARCH_ENV, "").strip()
            self._arch = toolchain.check_arch(override) if override else \
                _device_property("arch") or toolchain.DEFAULT_ARCH
        return self._arch

    def target_name(self) -> str:
        """``hip-gfx942-amd-instinct-mi300x``: the architecture, and the GPU model when one
        is usable."""
        device = _device_property("device_name")
        slug = re.sub(r"[^a-z0-9]+", "-", device.lower()).strip("-") if device else ""
        return f"hip-{self.arch}" + (f"-{slug}" if slug else "")

    def clang_flags(self, libdevice: bool = False) -> tuple[str, ...]:
        """Device-only HIP without ROCm: r3_hip.h and <hip/hip_runtime.h> in front of every
        kernel (hipcc includes the runtime header implicitly too), then the declarations
        host code includes (host_only/, shared with CUDA)."""
        return (
            "--cuda-device-only", f"--offload-arch={self.arch}", "-nogpuinc", "-nogpulib",
            "-fdeclspec", "-I", str(toolchain.INCLUDE),
            "-I", str(cuda_toolchain.HOST_ONLY_HEADERS),
            "-include", str(toolchain.HEADER),
            "-include", str(toolchain.INCLUDE / "hip" / "hip_runtime.h"),
        )

    @functools.cached_property
    def _machine(self):
        import llvmlite.binding as llvm

        _initialize_amdgpu()
        return llvm.Target.from_triple(toolchain.TRIPLE).create_target_machine(
            cpu=self.arch, opt=3, reloc="pic")

    def link_libraries(self, module) -> bool:
        return False  # no device libraries: what r3_hip.h lacks fails at link, by name

    def compile_code_object(self, ir: str, entry: str, pipeline: Pipeline,
                            kernel_name: str = "") -> CodeObjectBuild:
        """Optimise ``ir`` with ``pipeline``, emit AMDGCN for ``entry`` alone and link it
        into a code object; its figures come from the kernel's metadata."""
        import llvmlite.binding as llvm

        where = f"kernel {kernel_name or entry!r}"
        module, symbol, _ = self.optimised_entry(ir, entry, pipeline, where)
        optimised_ir = str(module)
        machine = self.target_machine()
        try:  # code generation changes the module it is given: each output gets a copy
            with codegen(pipeline):
                assembly = machine.emit_assembly(llvm.parse_assembly(optimised_ir))
                obj = machine.emit_object(llvm.parse_assembly(optimised_ir))
        except RuntimeError as exc:
            raise CompileError(f"{where}: LLVM could not generate AMDGCN code: {exc}",
                               str(exc)) from exc
        code_object = toolchain.link_code_object(obj, where)
        figures = toolchain.kernel_figures(assembly, symbol)
        if figures:
            figures.update(toolchain.occupancy(figures, self.arch))
        return CodeObjectBuild(code_object, assembly, symbol, self.arch, optimised_ir,
                               figures)

    def compile_ptx(self, ir: str, entry: str, pipeline: Pipeline, kernel_name: str = ""):
        raise CompileError(f"kernel {kernel_name or entry!r} is a HIP kernel: it builds to an "
                           "AMD code object (compile_code_object), not PTX", "")

    # -- running -------------------------------------------------------------------------
    def load(self, ir: str, entry: str, signature: Signature, pipeline: Pipeline,
             kernel_name: str, launch: LaunchConfig | None = None,
             tunables: Mapping[str, object] | None = None) -> Launcher:
        from . import runtime

        if launch is None:
            raise DeclarationError(f"kernel {kernel_name!r} was declared without launch=: its "
                                   "signature and code object can be built, but a launch "
                                   "needs its grid and block; add launch= to r3.kernel (see "
                                   "docs/hip.md)")
        build = self.compile_code_object(ir, entry, pipeline, kernel_name)
        return runtime.runtime().launcher(build.code_object, build.symbol, signature, launch,
                                          dict(tunables or {}), self.launch_limits,
                                          kernel_name)

    def vendor_launcher(self, kernel, variant=None) -> Launcher:
        raise ToolchainError(f"{kernel.where}: a hipcc baseline needs ROCm's hipcc, which "
                             "pytest-r3 does not drive yet (see docs/hip.md)")

    def to_host(self, value: object) -> object:
        import numpy as np

        return np.array(value, copy=True)


@functools.lru_cache(maxsize=1)
def _initialize_amdgpu() -> None:
    import llvmlite.binding as llvm

    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()


def _device_property(name: str) -> str | None:
    """The AMD GPU's ``arch`` or ``device_name`` when hip-python sees one, else None (no
    hip-python, driver or GPU: build for the default)."""
    from . import runtime

    try:
        return getattr(runtime.runtime(), name)
    except Exception:
        return None
