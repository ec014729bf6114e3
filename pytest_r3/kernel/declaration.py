"""Declaring a kernel: ``r3.kernel(source, entry=..., tune=..., constraints=...)``.

A declaration is cheap (no compilation at import time); the first call compiles the active
variant through its backend and later calls go straight to the loaded function. Longer than
most modules: ``r3.kernel``'s checks of every argument, the ``Kernel`` and ``Variant`` it
returns and the call path's interceptors are one contract with users.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from ..backends.compile_cache import trusted_build, untrusted_build
from ..errors import DeclarationError
from ..model.configuration import configuration_hash
from ..model.launch import LaunchConfig
from ..model.pipeline import Pipeline
from ..model.source import KernelSource, load_source
from ..model.tunables import TuningSpace
from .specialize import Specialization

Interceptor = Callable[["Kernel", tuple, Callable[[], object]], object]

# Kernels declared in this process, by name (what ``pytest --r3-list`` shows).
_registry: dict[str, Kernel] = {}
_registry_lock = threading.Lock()
# Called around every launch while non-empty (recording, test-to-kernel observation).
_interceptors: list[Interceptor] = []
# Whether plain calls use r3.lock entries; recording sessions turn it off to record baselines.
_use_lock = True


def use_lock_file(enabled: bool) -> None:
    """Let plain kernel calls use their r3.lock entry (default) or always the baseline."""
    global _use_lock
    _use_lock = enabled
    for kernel in registry().values():
        kernel.activate(kernel._active)  # drop cached launchers chosen under the old rule


_UNSET = object()


@dataclass(frozen=True)
class Variant:
    """One buildable version of a kernel: macro values, pass pipeline, optional new source."""

    macros: tuple[tuple[str, object], ...]
    pipeline: Pipeline = field(default_factory=Pipeline)
    source_text: str | None = None

    @property
    def macro_dict(self) -> dict[str, object]:
        return dict(self.macros)

    def key(self) -> str:
        """Stable hash of everything that changes the built code (the configuration hash)."""
        return configuration_hash(self.macro_dict, self.pipeline.as_dict(), {},
                                  self.source_text)


class Kernel:
    """A declared compute kernel; call it with numpy arrays and scalars to launch it."""

    def __init__(
        self,
        source: KernelSource,
        *,
        entry: str,
        name: str,
        backend: str,
        space: TuningSpace,
        pipeline: Pipeline,
        declared_at: str,
        tolerance: Mapping[str, object] | None = None,
        launch: LaunchConfig | None = None,
        specialize: Specialization | None = None,
        no_alias: bool = False,
        work: Callable[[Mapping[str, object]], Mapping[str, float]] | None = None,
    ) -> None:
        self.source = source
        self.entry = entry
        self.name = name
        self.backend_name = backend
        self.space = space
        self.pipeline = pipeline
        self.declared_at = declared_at
        self.tolerance = dict(tolerance or {})
        self.launch = launch  # a GPU kernel's grid and block (pytest_r3.model.launch)
        self.specialize = specialize  # buckets with their own variant (kernel.specialize)
        self.no_alias = no_alias  # declared: callers never pass overlapping buffers
        self.work = work  # args -> {"flops": .., "bytes": ..} of one call, for the reports
        self._lock = threading.RLock()
        self._launchers: dict[Variant, object] = {}
        self._signature = None
        self._active: Variant | None = None
        self._active_launcher = None
        self._locked: object = _UNSET
        self._bucket_variants: dict[str, Variant] | None = None  # from the lock, by label
        self._bucket_launchers: dict[object, object] = {}  # the call path's, by bucket key

    def __repr__(self) -> str:
        return f"<Kernel {self.name!r} {self.backend_name} {self.source.filename}:{self.entry}>"

    @property
    def where(self) -> str:
        return f"kernel {self.name!r} (declared at {self.declared_at})"

    @property
    def backend(self):
        from ..backends import get_backend

        return get_backend(self.backend_name)

    @property
    def baseline(self) -> Variant:
        """The declared default: default tunable values, declared pipeline, declared source."""
        return Variant(tuple(sorted(self.space.default.items())), self.pipeline)

    def variant(self, pipeline: Mapping[str, object] | Pipeline | None = None,
                source_text: str | None = None, **tunables: object) -> Variant:
        """A variant with some tunables (and optionally the pipeline or source) changed."""
        values = self.space.resolve(tunables)
        if pipeline is None:
            chosen = self.pipeline
        elif isinstance(pipeline, Pipeline):
            chosen = pipeline
        else:  # settings given as a mapping change the declared pipeline, key by key
            chosen = Pipeline.from_mapping({**self.pipeline.as_dict(), **pipeline},
                                           where=f"{self.where}: ")
        return Variant(tuple(sorted(values.items())), chosen, source_text)

    @property
    def signature(self):
        """Parameters read from the IR of the baseline (names, dtypes, written pointers)."""
        if self._signature is None:
            with self._lock:
                if self._signature is None:
                    with trusted_build():
                        self._signature = self.backend.inspect(
                            self.source, self.entry, self.space.default,
                            kernel_name=self.name)
        return self._signature

    def source_for(self, variant: Variant) -> KernelSource:
        if variant.source_text is None:
            return self.source
        return self.source.with_text(variant.source_text)

    def build(self, variant: Variant | None = None):
        """The loaded launcher of ``variant`` (baseline by default), compiled once."""
        variant = variant or self.baseline
        launcher = self._launchers.get(variant)
        if launcher is None:
            with self._lock:
                launcher = self._launchers.get(variant)
                if launcher is None:
                    backend = self.backend
                    signature = self.signature
                    # the declared source (baseline, locked variants) may use the on-disk
                    # cache; a rewrite's text never does
                    scope = trusted_build() if variant.source_text is None \
                        else untrusted_build()
                    with scope:
                        ir = backend.compile(self.source_for(variant), variant.macro_dict)
                        options = {} if self.launch is None else {
                            "launch": self.launch, "tunables": variant.macro_dict}
                        launcher = backend.load(ir, self.entry, signature, variant.pipeline,
                                                self.name, **options)
                    self._launchers[variant] = launcher
        return launcher

    def configure(self, pipeline: Mapping[str, object] | Pipeline | None = None,
                  **tunables: object):
        """A callable for one variant, e.g. ``matmul.configure(TILE=32)(a, b, c, n)``."""
        return self.build(self.variant(pipeline=pipeline, **tunables))

    @property
    def active(self) -> Variant:
        """The variant plain calls launch: an activated one, else the lock file's, else the
        baseline (a kernel with specialize= and tuned buckets: see :meth:`serving`)."""
        if self._active is not None:
            return self._active
        if _use_lock:
            if self._locked is _UNSET:
                from .lock import locked_variant

                self._locked = locked_variant(self)
            if self._locked is not None:
                return self._locked
        return self.baseline

    def activate(self, variant: Variant | None, launcher=None) -> None:
        """Make ``variant`` what plain calls launch; ``None`` goes back to the baseline.
        ``launcher`` runs it instead of a local build (e.g. in a contained worker)."""
        with self._lock:
            self._active = variant
            self._active_launcher = launcher
            self._locked = _UNSET
            self._bucket_variants = None
            self._bucket_launchers = {}

    # -- shape-specialised variants (see kernel.specialize) ------------------------------------
    @property
    def bucket_variants(self) -> dict[str, Variant]:
        """The lock's variant of each tuned bucket, by label (``{"n=1024": Variant}``); empty
        for a kernel without specialize=, or when plain calls do not use the lock."""
        if self.specialize is None or not _use_lock:
            return {}
        if self._bucket_variants is None:
            from .lock import locked_buckets

            self._bucket_variants = locked_buckets(self)
        return self._bucket_variants

    def bucket_of(self, *args: object) -> str:
        """The label of the bucket a call with ``args`` falls into, e.g. ``"n=1024"``."""
        if self.specialize is None:
            raise DeclarationError(f"{self.where}: bucket_of() needs specialize= in the "
                                   "declaration")
        positions = self.specialize.positions(self.signature, self.where)
        return self.specialize.label(self.specialize.key(
            {name: args[i] for name, i in positions}))

    def serving(self, *args: object) -> tuple[str | None, Variant]:
        """(bucket label, variant) a plain call with ``args`` runs: an activated variant
        (label None), else its bucket's tuned variant, else the nearest tuned bucket's, else
        the lock's plain entry or the baseline (label None)."""
        if self._active is not None or self.specialize is None:
            return None, self.active
        return self._bucket_choice(self.bucket_of(*args))

    def _bucket_choice(self, label: str) -> tuple[str | None, Variant]:
        variants = self.bucket_variants
        chosen = self.specialize.nearest(label, sorted(variants))
        return (chosen, variants[chosen]) if chosen is not None else (None, self.active)

    def _call_launcher(self):
        """What plain calls run: the active variant's launcher, or for a specialised kernel
        with tuned buckets, a dispatcher choosing by bucket (cached per bucket)."""
        if self._active is None and self.bucket_variants:
            positions = self.specialize.positions(self.signature, self.where)
            table = self._bucket_launchers

            def miss(key):
                label = self.specialize.label(key)
                launcher = table[key] = self.build(self._bucket_choice(label)[1])
                return launcher
            def unbucketed(*args):  # the plain variant's launcher names what is wrong
                return self.build(self.active)(*args)
            return self.specialize.dispatcher(positions, table, miss, unbucketed)
        return self.build(self.active)

    def __call__(self, *args: object) -> object:
        launcher = self._active_launcher
        if launcher is None:
            launcher = self._active_launcher = self._call_launcher()
        if _interceptors:
            return _intercepted(self, args, lambda: launcher(*args))
        return launcher(*args)


def _intercepted(kernel: Kernel, args: tuple, proceed: Callable[[], object]) -> object:
    call = proceed
    for interceptor in reversed(_interceptors):
        call = (lambda inner, hook: lambda: hook(kernel, args, inner))(call, interceptor)
    return call()


def add_interceptor(interceptor: Interceptor) -> None:
    _interceptors.append(interceptor)


def remove_interceptor(interceptor: Interceptor) -> None:
    if interceptor in _interceptors:
        _interceptors.remove(interceptor)


def kernel(
    source: str | os.PathLike,
    *,
    entry: str,
    backend: str = "cpu",
    name: str | None = None,
    tune: Mapping[str, Sequence[object]] | None = None,
    constraints: Sequence[str | Callable[..., bool]] = (),
    defaults: Mapping[str, object] | None = None,
    pipeline: Mapping[str, object] | Pipeline | None = None,
    tolerance: Mapping[str, object] | None = None,
    launch: Callable[..., Mapping[str, object]] | Mapping[str, object] | None = None,
    defines: Mapping[str, object] | None = None,
    include_dirs: Sequence[str | os.PathLike] = (),
    specialize: Sequence[str] | str | Callable[[Mapping[str, object]], object] | None = None,
    no_alias: bool = False,
    work: Callable[[Mapping[str, object]], Mapping[str, float]] | None = None,
) -> Kernel:
    """Declare a compute kernel.

    ``source`` is a path relative to the calling module (``"kernels/saxpy.c"``) or inline C
    text. ``tune`` maps macro names to their allowed values (the first is the default unless
    ``defaults`` says otherwise); ``constraints`` are expressions over those names that every
    tuned combination must satisfy. ``pipeline`` overrides the default ``-O3``-equivalent
    LLVM pipeline (see :class:`pytest_r3.Pipeline`). ``tolerance`` sets how close a tuned
    variant's float outputs must stay: ``{"rtol": 1e-5, "atol": 1e-6}``, or ``{"norm": 1e-6}``
    for a relative L2 bound, with ``"per_argument": {"c": {...}}`` overrides.

    ``defines`` and ``include_dirs`` are the fixed configuration a build system would pass
    (``-DDATA_TYPE_IS_DOUBLE``, ``-I../utilities``): ``defines={"DATA_TYPE_IS_DOUBLE": 1}``
    (None defines a name without a value), folders relative to the calling module. They are
    part of the source hash and never tuned.

    A GPU kernel (``backend="cuda"``, or ``"hip"`` for AMD GPUs) is launched with
    ``launch``: its grid and block, e.g.
    ``launch=lambda args, t: {"grid": (cdiv(args["n"], t["BLOCK"]),), "block": (t["BLOCK"],)}``
    (see :mod:`pytest_r3.model.launch`, docs/cuda.md and docs/hip.md). Without it the
    kernel's signature and PTX can still be read; a launch then says launch= is missing.

    ``specialize`` gives buckets of sizes their own tuned variant: the names of integer
    scalar arguments (``specialize=["n"]``: power-of-two buckets, n=1000 in bucket 1024) or a
    function of the scalar arguments returning the bucket key (``lambda args: ...``); see
    :mod:`pytest_r3.kernel.specialize` and docs/tuning.md.

    ``no_alias=True`` declares that callers never pass overlapping buffers: the judge then
    does not try the kernel in place, and a rewrite that adds ``restrict`` is kept without
    an "assumes: x and y do not overlap" note (docs/record-and-replay.md).
    ``work`` says how much one call does, for the report's achieved throughput: a function
    of the call's arguments by name (arrays and scalars) returning ``{"flops": ..,
    "bytes": ..}`` (either key), e.g. ``work=lambda a: {"flops": 2 * a["n"] ** 3}``.
    """
    frame = sys._getframe(1)
    declaring_file = frame.f_globals.get("__file__")
    declared_at = f"{declaring_file or '<unknown>'}:{frame.f_lineno}"
    from ..backends.cuda.toolchain import default_name, is_entry_name  # CUDA: also templates

    if not isinstance(entry, str) or not (entry.isidentifier() or (
            backend in ("cuda", "hip") and is_entry_name(entry))):
        raise DeclarationError(f"kernel declared at {declared_at}: entry must be a C "
                               f"function name, got {entry!r} (for CUDA and HIP, also a "
                               "template instance such as 'scale_tiles<16, float>')")
    name = name or default_name(entry)  # a file name too: "scale_tiles<16, float>" is not
    where = f"kernel {name!r} (declared at {declared_at})"
    kernel_source = replace(load_source(source, declaring_file, where, defines, include_dirs),
                            entry=entry)
    clash = sorted(set(dict(kernel_source.defines)) & set(tune or ()))
    if clash:
        raise DeclarationError(f"{where}: {', '.join(clash)} is both in defines= (fixed) and "
                               "in tune= (tuned); keep it in one of them")
    from ..backends import get_backend

    backend_object = get_backend(backend)  # unknown backend names fail here, at declaration
    launch_config, limit = _launch_config(launch, backend, backend_object, tune, where)
    space = TuningSpace(tune, [*constraints, *limit], defaults, where=where)
    chosen = Pipeline.from_mapping(pipeline, where=f"{where}: ")
    _check_tolerance(tolerance, where)
    if not isinstance(no_alias, bool):
        raise DeclarationError(f"{where}: no_alias must be True or False, got {no_alias!r}")
    specialization = None if specialize is None else Specialization(specialize, where)
    if work is not None and not callable(work):
        raise DeclarationError(f"{where}: work= must be a function of the arguments by name "
                               "returning {'flops': ..., 'bytes': ...}, e.g. "
                               "work=lambda a: {'flops': 2 * a['n']}")
    declared = Kernel(kernel_source, entry=entry, name=name, backend=backend, space=space,
                      pipeline=chosen, declared_at=declared_at, tolerance=tolerance,
                      launch=launch_config, specialize=specialization, no_alias=no_alias,
                      work=work)
    _register(declared)
    return declared


def _launch_config(launch, backend_name: str, backend, tune, where: str):
    """The validated launch= of a GPU kernel, and the device's block limits as a tuning
    constraint (when the block follows from the tunables alone)."""
    limits = getattr(backend, "launch_limits", None)
    if launch is None:  # a GPU kernel without it can be inspected and built, not launched
        return None, ()
    if limits is None:
        raise DeclarationError(f"{where}: backend {backend_name!r} runs kernels as plain "
                               "function calls and takes no launch= (it is for GPU backends)")
    config = LaunchConfig(launch, where)
    names = tuple(tune) if isinstance(tune, Mapping) else ()
    config.check_tunables(names)
    config.portable()  # refuse now what could not reach the replay worker
    check = config.block_constraint(limits, names)
    return config, (() if check is None else (check,))


def _check_tolerance(tolerance: Mapping[str, object] | None, where: str) -> None:
    allowed = {"rtol", "atol", "norm"}
    for key, value in (tolerance or {}).items():
        if key == "per_argument":
            if not isinstance(value, Mapping):
                raise DeclarationError(f"{where}: tolerance per_argument must map argument "
                                       "names to {'rtol': ..., 'atol': ..., 'norm': ...}")
            for argument, override in value.items():
                unknown = set(override) - allowed
                if unknown:
                    raise DeclarationError(f"{where}: unknown tolerance key(s) "
                                           f"{sorted(unknown)} for argument {argument!r}; "
                                           f"use {sorted(allowed)}")
        elif key not in allowed:
            raise DeclarationError(f"{where}: unknown tolerance key {key!r}; use "
                                   f"{sorted(allowed)} or per_argument")
        elif not isinstance(value, (int, float)) or value < 0:
            raise DeclarationError(f"{where}: tolerance {key} must be a number >= 0, "
                                   f"got {value!r}")


def _register(new: Kernel) -> None:
    with _registry_lock:
        old = _registry.get(new.name)
        same_site = old is not None and old.declared_at == new.declared_at
        if old is not None and not same_site and old.source.filename == new.source.filename \
                and old.entry == new.entry:
            same_site = True  # the same module imported again (e.g. under another name)
        if old is not None and not same_site:
            raise DeclarationError(
                f"{new.where}: another kernel is already named {new.name!r} (declared at "
                f"{old.declared_at}); give one of them a distinct name=..."
            )
        _registry[new.name] = new


def registry() -> dict[str, Kernel]:
    """The kernels declared so far in this process, by name."""
    with _registry_lock:
        return dict(_registry)


def lookup(name_or_kernel: str | Kernel) -> Kernel:
    if isinstance(name_or_kernel, Kernel):
        return name_or_kernel
    known = registry()
    if name_or_kernel not in known:
        raise DeclarationError(
            f"no kernel named {name_or_kernel!r} is declared; declared kernels: "
            f"{', '.join(sorted(known)) or 'none'}"
        )
    return known[name_or_kernel]


def snapshot_registry() -> dict[str, Kernel]:
    return registry()


def restore_registry(saved: Mapping[str, Kernel]) -> None:
    with _registry_lock:
        _registry.clear()
        _registry.update(saved)
