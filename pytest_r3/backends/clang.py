"""Finding clang and turning C (or CUDA) source into LLVM IR text, in memory, cached.

clang is only the front end here: it emits unoptimised IR (``-O3 -Xclang
-disable-llvm-passes`` keeps the optimisation hints such as TBAA) and llvmlite runs the
pass pipeline. By default the clang inside the ``ziglang`` wheel is used; the environment
variable ``PYTEST_R3_CLANG`` may name another clang, which must share llvmlite's LLVM major
version because IR text is not compatible across major versions.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import importlib.util
import os
import platform
import re
import shlex
import subprocess
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import CompileError, ToolchainError
from . import candidate_text, compile_cache

CLANG_ENV = "PYTEST_R3_CLANG"
IR_CACHE_SIZE = 256


@dataclass(frozen=True)
class Clang:
    """A clang front end we have checked; ``command`` runs it, ``system_flags`` find libc."""

    command: tuple[str, ...]
    system_flags: tuple[str, ...]
    version: str
    origin: str

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])


@dataclass(frozen=True)
class HostTarget:
    """The machine that will run CPU kernels: clang and llvmlite must both target it."""

    triple: str
    cpu: str
    features: str

    def clang_flags(self) -> tuple[str, ...]:
        flags = ["-target", self.triple, f"-march={self.cpu}"]
        for feature in filter(None, self.features.split(",")):
            flags += ["-Xclang", "-target-feature", "-Xclang", feature]
        return tuple(flags)

    @property
    def name(self) -> str:
        """Short, stable name used in lock files and reports."""
        return f"cpu-{self.triple.split('-')[0]}-{self.cpu}"


def generic_target_flags() -> tuple[str, ...]:
    """clang flags for the oldest CPU of the host's architecture (x86-64: the 2003
    baseline, SSE2 and no more)."""
    triple = host_target().triple
    arch = triple.split("-")[0]
    march = {"x86_64": "x86-64", "aarch64": "armv8-a"}.get(arch)
    return ("-target", triple, *([f"-march={march}"] if march else []))


def llvm_major() -> int:
    import llvmlite.binding as llvm

    return llvm.llvm_version_info[0]


def _clang_version(command: Sequence[str]) -> str:
    try:
        out = subprocess.run(
            [*command, "--version"], capture_output=True, text=True, timeout=60, check=False
        )
    except OSError as exc:
        raise ToolchainError(
            f"cannot run clang {shlex.join(command)!r}: {exc}. "
            f"Unset {CLANG_ENV} to use the clang shipped in the ziglang wheel."
        ) from exc
    match = re.search(r"clang version (\d+\.\d+\.\d+)", out.stdout)
    if out.returncode != 0 or not match:
        raise ToolchainError(
            f"{shlex.join(command)!r} --version did not report a clang version "
            f"(exit {out.returncode}): {out.stdout.strip()} {out.stderr.strip()}"
        )
    return match.group(1)


def _zig_dir() -> Path:
    spec = importlib.util.find_spec("ziglang")
    if spec is None or not spec.submodule_search_locations:
        raise ToolchainError(
            "the ziglang package is not installed; it provides clang. "
            "Install it with `pip install ziglang`, or set "
            f"{CLANG_ENV} to a clang {llvm_major()}.x executable."
        )
    return Path(next(iter(spec.submodule_search_locations)))


def _zig_arch() -> str:
    """This machine's architecture as zig spells it in a target (its headers must match)."""
    machine = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)


def _zig_cc1_args(zig: Path, driver: str, language: str) -> tuple[list[str], str]:
    """The arguments `zig cc`/`zig c++` would pass to clang's cc1 (and zig's stderr)."""
    out = subprocess.run(
        [str(zig), driver, "-target", f"{_zig_arch()}-linux-gnu", "-###", "-x", language, "-c",
         os.devnull],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return (shlex.split(out.stderr.strip().splitlines()[-1]) if out.stderr.strip() else []), \
        out.stderr


def _zig_system_flags(zig: Path) -> tuple[str, ...]:
    """zig's own libc headers, read from what `zig cc` would pass to clang's cc1."""
    args, stderr = _zig_cc1_args(zig, "cc", "c")
    flags = ["-nostdinc"]
    for option, value in zip(args, args[1:]):
        if option == "-isystem":
            flags += [option, os.path.abspath(value)]  # zig prints paths under cwd relative
        elif option == "-D":
            flags += [option, value]
    if len(flags) == 1:
        raise ToolchainError(
            f"could not read zig's libc header paths from `{zig} cc -###`: {stderr[-500:]}"
        )
    return tuple(flags)


@functools.lru_cache(maxsize=1)
def cxx_library_flags() -> tuple[str, ...]:
    """The C++ standard library headers of the ziglang wheel (libc++) with the configuration
    `zig c++` gives them, as ``-I``/``-D`` flags; empty without the wheel. Only the CUDA
    device build against a toolkit's headers uses them: CCCL needs a C++ library."""
    try:
        zig = _zig_dir() / "zig"
    except ToolchainError:
        return ()
    args, _ = _zig_cc1_args(zig, "c++", "c++")
    flags: list[str] = []
    for option, value in zip(args, args[1:]):
        if option == "-isystem" and "libcxx" in Path(value).parts[-2]:
            flags += ["-I", os.path.abspath(value)]
        elif option == "-D" and value.startswith(("_LIBCPP", "_LIBCXXABI")):
            flags += ["-D", value]
    return tuple(flags)


@functools.lru_cache(maxsize=1)
def find_clang() -> Clang:
    """The clang to use, checked against llvmlite's LLVM major version."""
    wanted = llvm_major()
    override = os.environ.get(CLANG_ENV, "").strip()
    if override:
        command = tuple(shlex.split(override))
        version = _clang_version(command)
        clang = Clang(command, (), version, f"${CLANG_ENV}")
    else:
        zig = _zig_dir() / "zig"
        command = (str(zig), "clang")
        version = _clang_version(command)
        clang = Clang(command, _zig_system_flags(zig), version, "ziglang wheel")
    if clang.major != wanted:
        raise ToolchainError(
            f"clang {clang.version} from {clang.origin} ({shlex.join(clang.command)}) does not "
            f"match llvmlite's LLVM {wanted}: the IR it writes may not parse. Use a clang "
            f"{wanted}.x (set {CLANG_ENV}=/path/to/clang-{wanted}) or unset {CLANG_ENV} to use "
            "the ziglang wheel's clang."
        )
    return clang


@functools.lru_cache(maxsize=1)
def host_target() -> HostTarget:
    import llvmlite.binding as llvm

    initialize_llvm()
    return HostTarget(
        triple=llvm.get_process_triple(),
        cpu=llvm.get_host_cpu_name(),
        features=llvm.get_host_cpu_features().flatten(),
    )


@functools.lru_cache(maxsize=1)
def initialize_llvm() -> None:
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    # without it, inline assembly in a kernel aborts the process inside LLVM's JIT
    llvm.initialize_native_asmparser()


def parse_ir(ir: str, where: str):
    """An llvmlite module from IR text, verified; LLVM's complaint becomes a CompileError."""
    import llvmlite.binding as llvm

    try:
        module = llvm.parse_assembly(ir)
        module.verify()
    except RuntimeError as exc:
        raise CompileError(f"{where}: LLVM rejected the IR: {exc}", str(exc)) from exc
    return module


# Keeps a file's static functions in its IR even when nothing in the file calls them, so a
# static kernel can be the entry; what the entry does not reach is dropped afterwards.
EMIT_ALL_DECLARATIONS = ("-Xclang", "-femit-all-decls")
# what makes the linker keep a symbol: meaningless for one entry, and it would keep main alive
_LINKER_KEEP = re.compile(r"^@llvm\.(?:compiler\.)?used = [^\n]*\n", re.MULTILINE)


def without_linker_keep(ir: str) -> str:
    """IR text without ``llvm.used``/``llvm.compiler.used`` (``__attribute__((used))``)."""
    return _LINKER_KEEP.sub("", ir)


def keep_reachable(module, entry_symbol: str, machine) -> None:
    """Reduce ``module`` (llvmlite, changed in place) to ``entry_symbol`` and what it reaches.

    Kernels live in files that also hold ``main``, drivers and helpers the kernel never
    calls, which may use symbols defined elsewhere. Every definition but the entry is made
    internal and global dead-code elimination removes the ones the entry cannot reach, with
    the declarations only they used; the entry itself is made external (a ``static`` kernel
    is then callable). What remains declared is what the entry needs from outside.
    """
    import llvmlite.binding as llvm

    local = (llvm.Linkage.internal, llvm.Linkage.private)
    for value in [*module.functions, *module.global_variables]:
        if value.is_declaration or value.name.startswith("llvm."):
            continue
        if value.name == entry_symbol:
            if value.linkage in local:
                value.linkage = llvm.Linkage.external
                value.visibility = llvm.Visibility.default
        elif value.linkage not in local and value.linkage != llvm.Linkage.appending:
            value.linkage = llvm.Linkage.internal
    passes = llvm.create_new_module_pass_manager()
    passes.add_global_dead_code_eliminate_pass()
    passes.run(module, llvm.create_pass_builder(
        machine, llvm.create_pipeline_tuning_options(speed_level=0)))


def unresolved_symbols(module) -> list[str]:
    """The functions and variables ``module`` uses without defining them, LLVM's intrinsics
    aside."""
    return sorted(v.name for v in [*module.functions, *module.global_variables]
                  if v.is_declaration and not v.name.startswith("llvm."))


def macro_flags(macros: Mapping[str, object]) -> list[str]:
    """``-DNAME=VALUE`` for each macro, in a stable order (booleans become 0/1)."""
    flags = []
    for name in sorted(macros):
        value = macros[name]
        if isinstance(value, bool):
            value = int(value)
        flags.append(f"-D{name}={value}")
    return flags


@dataclass(frozen=True)
class FrontEndOutput:
    """What clang made of a source, with what names it: ``key`` covers the toolchain, the
    target, every flag and the source text; ``headers`` are the ``[path, sha256]`` of the
    headers clang read, where known (a build for the on-disk cache asks clang for them)."""

    text: str
    key: str
    headers: tuple[tuple[str, str], ...] | None = None


_ir_cache: OrderedDict[str, FrontEndOutput] = OrderedDict()
_ir_cache_lock = threading.Lock()


def compile_to_ir(source: str, **options) -> str:
    """Compile ``source`` to unoptimised LLVM IR text without touching the disk (see
    :func:`front_end` for the options)."""
    return front_end(source, **options).text


def front_end(
    source: str,
    *,
    filename: str,
    macros: Mapping[str, object] = {},
    target_flags: Sequence[str] = (),
    language: str = "c",
    include_dirs: Sequence[str | os.PathLike] = (),
    extra_flags: Sequence[str] = (),
    debug_info: bool = False,
    untrusted: bool = False,
    preprocess_only: bool = False,
) -> FrontEndOutput:
    """Compile ``source`` to unoptimised LLVM IR text (or preprocessed text).

    The source goes in through stdin with a ``#line`` marker so diagnostics still say
    ``filename:line``; the result is cached in memory by a hash of everything that affects
    it, and on disk inside a trusted build (see compile_cache) with its headers' hashes.
    ``untrusted`` text (a candidate's) may read only the kernel's own headers and the
    toolchain's, and its errors quote nothing else (see :func:`check_candidate_includes`
    and :func:`sanitize_diagnostics`). ``preprocess_only`` returns the preprocessed text
    instead (what declared array bounds are read from).
    """
    tail = [
        "-O3",
        "-Xclang",
        "-disable-llvm-passes",
        "-fno-sanitize=all",
        "-fno-discard-value-names",
        *(["-g"] if debug_info else []),
        *(f"-iquote{d}" for d in include_dirs),
        *(f"-I{d}" for d in include_dirs),
        *file_identity_flags(filename),
        *macro_flags(macros),
        *extra_flags,
        *(["-E", "-P"] if preprocess_only else ["-S", "-emit-llvm"]),
        "-o",
        "-",
        "-x",
        language,
        "-",
    ]
    # a candidate's diagnostics name its file by base name only
    shown = candidate_text.display_name(filename) if untrusted else filename
    text = f"#line 1 \"{shown}\"\n{source}"
    key = compile_cache.key("clang", clang_identity(), list(target_flags), tail, text,
                            untrusted)
    with _ir_cache_lock:
        if key in _ir_cache:
            _ir_cache.move_to_end(key)
            return _ir_cache[key]
    disk = None if untrusted else compile_cache.current()
    output = _from_disk(disk, key)
    if output is None:
        clang = find_clang()
        args = [*clang.command, *target_flags, *clang.system_flags, *tail]
        if untrusted:
            if preprocess_only:
                raise ValueError("a candidate's text is compiled, never only preprocessed")
            output = FrontEndOutput(candidate_text.compile_untrusted(
                args, text, source, filename, include_dirs, _toolchain_dirs()), key)
        elif disk is not None:
            output = _compile_for_cache(disk, key, args, text, filename, clang)
        else:
            output = FrontEndOutput(_compile(args, text, filename), key)
    with _ir_cache_lock:
        _ir_cache[key] = output
        while len(_ir_cache) > IR_CACHE_SIZE:
            _ir_cache.popitem(last=False)
    return output


def file_identity_flags(filename: str) -> list[str]:
    """Flags that make ``__FILE__`` (and ``assert``'s file name) the source's base name in
    every build, trusted or not: a candidate judged under its display name, then built by
    the user's process under its absolute path (or in another checkout), must not see two
    different file names and behave differently in production than under verification."""
    folder = os.path.dirname(str(filename))
    if not folder or "=" in folder:
        return []
    return [f"-fmacro-prefix-map={folder.rstrip(os.sep)}{os.sep}="]


def clang_identity() -> str:
    """What names the clang in use without running it where possible: the ziglang wheel's
    version and place (it fixes clang's version and libc headers), else the override's
    command and reported version."""
    return _clang_identity(os.environ.get(CLANG_ENV, "").strip())


@functools.lru_cache(maxsize=4)
def _clang_identity(override: str) -> str:
    if not override:
        try:
            return f"ziglang {importlib.metadata.version('ziglang')} {_zig_dir()}"
        except importlib.metadata.PackageNotFoundError:
            pass
    clang = find_clang()  # raises the clear error when there is no usable clang
    return f"{clang.origin} {shlex.join(clang.command)} {clang.version}"


def _from_disk(disk: compile_cache.Access | None, key: str) -> FrontEndOutput | None:
    """clang's output from the on-disk cache, if every header it read is unchanged."""
    entry = None if disk is None else disk.get(key)
    if entry is None:
        return None
    headers = tuple(tuple(pair) for pair in entry.meta.get("files", ()))
    if not compile_cache.files_unchanged(headers):
        return None
    return FrontEndOutput(entry.payload.decode(), key, headers)


def _compile_for_cache(disk: compile_cache.Access, key: str, args: list[str], text: str,
                       filename: str, clang: Clang) -> FrontEndOutput:
    """Compile as :func:`_compile`, asking clang for the headers it read (``-MD``), and store
    the result with their content hashes: an edited header makes the entry a miss. The
    ziglang wheel's own headers are left out (its version is in the key); pytest-r3's
    (r3_cuda.h) are hashed like the kernel's."""
    handle, listing = tempfile.mkstemp(prefix="pytest-r3-", suffix=".d")
    os.close(handle)
    try:
        ir = _compile([*args[:-3], "-MD", "-MF", listing, *args[-3:]], text, filename)
        with open(listing) as stream:
            headers = _dependency_paths(stream.read())
    finally:  # clang removes it itself after a fatal error (a header not found)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(listing)
    own = [str(Path(clang.command[0]).resolve().parent)] if clang.origin == "ziglang wheel" \
        else []
    hashes = compile_cache.file_hashes(
        [path for path in headers if not any(path.startswith(folder + os.sep) for folder in own)])
    disk.put(key, ir.encode(), {"kind": "clang", "files": hashes})
    return FrontEndOutput(ir, key, tuple(tuple(pair) for pair in hashes))


def _dependency_paths(listing: str) -> list[str]:
    """The files of a make-style dependency listing (``-: a.h b\\ c.h``), made absolute."""
    text = listing.replace("\\\n", " ")
    _, _, files = text.partition(": ")
    paths, current = [], ""
    index = 0
    while index < len(files):
        char = files[index]
        if char == "\\" and index + 1 < len(files) and files[index + 1] in " #$":
            current += files[index + 1]
            index += 2
            continue
        if char.isspace():
            if current:
                paths.append(current)
            current = ""
        else:
            current += char
        index += 1
    if current:
        paths.append(current)
    return [os.path.abspath(p) for p in paths if p != "-"]


def _toolchain_dirs() -> list[str]:
    try:
        return candidate_text.toolchain_dirs(find_clang())
    except ToolchainError:
        return candidate_text.toolchain_dirs(None)


def check_candidate_includes(text: str, filename: str) -> None:
    candidate_text.check_candidate_includes(text, filename)


def sanitize_diagnostics(stderr: str, filename: str, *,
                         include_dirs: Sequence[str | os.PathLike] = ()) -> str:
    """A candidate's clang diagnostics, quoting only its own text (see candidate_text)."""
    return candidate_text.sanitize_diagnostics(stderr, filename, include_dirs=include_dirs,
                                               toolchain=_toolchain_dirs())


def _compile(args: list[str], text: str, filename: str) -> str:
    # from an empty folder, as a candidate's build is (see candidate_text): a name looked up
    # relative to the working directory finds nothing in either, so a rewrite's
    # ``__has_include("exampleproj/kernels/x.h")`` cannot tell the judge's build from yours
    with tempfile.TemporaryDirectory(prefix="pytest-r3-clang-") as empty:
        result = subprocess.run(args, input=text.encode(), capture_output=True, timeout=300,
                                cwd=empty)
    if result.returncode != 0:
        diagnostics = result.stderr.decode(errors="replace").strip()
        first = next(
            (line for line in diagnostics.splitlines() if "error" in line), diagnostics[:200]
        )
        raise CompileError(
            f"clang could not compile {filename}: {first}\n\n{diagnostics}\n\n"
            f"command: {_readable_command(args)}",
            diagnostics=diagnostics,
            command=args,
        )
    return result.stdout.decode()


def _readable_command(args: Sequence[str]) -> str:
    """``args`` for an error message, the host's long run of CPU feature flags summarised
    (the exact command stays on ``CompileError.command``)."""
    shown: list[str] = []
    features = 0
    index = 0
    while index < len(args):
        if list(args[index:index + 3]) == ["-Xclang", "-target-feature", "-Xclang"] \
                and index + 3 < len(args):
            if features == 0:
                shown.append("<target features>")
            features += 1
            index += 4
            continue
        shown.append(args[index])
        index += 1
    text = shlex.join(shown)
    return text.replace("'<target features>'", f"<{features} -target-feature flags>")


def source_hash(source: str) -> str:
    """Content hash of a kernel source, used to tell whether a lock entry is stale."""
    return hashlib.sha256(source.encode()).hexdigest()[:16]
