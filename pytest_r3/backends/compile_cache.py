"""Compiled code kept on disk between processes, so a kernel compiles once per machine.

What is stored: clang's output for trusted source (IR text, preprocessed text), a kernel's
signature, and the machine code of a loaded variant (a CPU object file). Each
entry is named by a SHA-256 key of everything that changes it (see :func:`key`); an entry
made from source also records the content hash of every header clang read, and is used
only while they are unchanged.

Where: ``$PYTEST_R3_CACHE_DIR``, else ``$XDG_CACHE_HOME/pytest-r3``, else
``~/.cache/pytest-r3``; ``PYTEST_R3_CACHE=off`` turns it off; ``PYTEST_R3_CACHE_SIZE``
bounds it (default 512M; the least recently used entries go first).

Why it is safe to share between processes (xdist workers, parallel CI jobs): an entry is
written to a temporary file in its folder and renamed into place, so a reader sees a whole
entry or none; each entry starts with the SHA-256 of the rest, checked on every read, so a
truncated or altered file is ignored (with one warning) and rebuilt. The folder is the
user's only (0700), and a folder owned by someone else is not used: machine code read from
it runs in this process.

Who writes: only code running inside :func:`trusted_build` (pytest-r3's own compile path for
declared kernels: plain calls, ``pytest-r3 build``). A candidate from tuning is never built
inside it; replay workers read their baseline inside ``trusted_build(write=False)``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import stat
import tempfile
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from ..errors import CorruptStateWarning, DeclarationError, R3Warning

DIR_ENV = "PYTEST_R3_CACHE_DIR"
SWITCH_ENV = "PYTEST_R3_CACHE"
SIZE_ENV = "PYTEST_R3_CACHE_SIZE"
DEFAULT_SIZE = 512 * 2**20
FORMAT = "v1"                  # the folder of this entry format inside the cache folder
_MAGIC = b"R3C1 "
_LOW_WATER = 0.8               # eviction goes down to this share of the bound
_STALE_TEMPORARY = 3600.0      # seconds after which a writer's leftover temporary file goes


class CacheWarning(R3Warning):
    """The compiled-code cache could not be used (kernels compile as if it were off)."""


@dataclass(frozen=True)
class Entry:
    payload: bytes
    meta: dict


def key(kind: str, *parts: object) -> str:
    """The SHA-256 name of an entry of ``kind`` made from ``parts`` (plain data or text)."""
    digest = hashlib.sha256(kind.encode())
    for part in parts:
        data = part.encode() if isinstance(part, str) else json.dumps(
            part, sort_keys=True, default=str).encode()
        digest.update(b"\0%d\0" % len(data))
        digest.update(data)
    return digest.hexdigest()


def file_hashes(paths: Sequence[str]) -> list[list[str]]:
    """``[[path, sha256], ...]`` of files read to make an entry (headers)."""
    return [[path, _sha256_of(path)] for path in sorted(set(paths))]


def files_unchanged(recorded: Sequence[Sequence[str]]) -> bool:
    """Whether every recorded file still has its recorded content."""
    return all(_sha256_of(path) == digest for path, digest in recorded)


def _sha256_of(path: str) -> str:
    try:
        with open(path, "rb") as stream:
            return hashlib.sha256(stream.read()).hexdigest()
    except OSError:
        return "missing"


@functools.lru_cache(maxsize=1)
def code_identity() -> str:
    """pytest-r3's version and a hash of the code that turns source into machine code (the
    backends and the model), with llvmlite's and LLVM's versions: a change to any of them
    (an upgrade, or an edit of an editable install) makes every entry a miss."""
    import llvmlite
    import llvmlite.binding as llvm

    from .. import __version__

    package = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for folder in ("backends", "model"):
        for path in sorted((package / folder).rglob("*.py")):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    llvm_version = ".".join(map(str, llvm.llvm_version_info))
    return (f"pytest-r3 {__version__} {digest.hexdigest()[:16]}; llvmlite "
            f"{llvmlite.__version__}; LLVM {llvm_version}")


def parse_size(text: str) -> int:
    """``512M``, ``2G``, ``100000`` -> bytes; a clear error names the variable otherwise."""
    units = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
    value = text.strip().upper().removesuffix("B").removesuffix("I")
    number, unit = (value[:-1], value[-1]) if value[-1:] in "KMGT" else (value, "")
    try:
        size = int(float(number) * units[unit])
    except (ValueError, KeyError):
        size = -1
    if size <= 0:
        raise DeclarationError(f"{SIZE_ENV}={text!r} is not a size; give bytes or a number "
                               "with K, M or G, e.g. PYTEST_R3_CACHE_SIZE=512M")
    return size


def default_dir() -> Path:
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "pytest-r3"


def configured_dir() -> Path:
    chosen = os.environ.get(DIR_ENV, "").strip()
    return Path(chosen).expanduser() if chosen else default_dir()


def enabled() -> bool:
    return os.environ.get(SWITCH_ENV, "").strip().lower() not in ("off", "0", "false", "no")


class CompileCache:
    """The entries under one folder: read, write, evict, describe, clear."""

    def __init__(self, root: Path, max_bytes: int = DEFAULT_SIZE) -> None:
        self.root = Path(root)
        self._entries = str(self.root / FORMAT)
        self.max_bytes = max_bytes
        self.usable = True            # False after a failure to create or write it
        self._written_since_check: int | None = None  # None: no eviction check yet
        self._warned: set[str] = set()

    @property
    def entries_dir(self) -> Path:
        return self.root / FORMAT

    def _path(self, name: str) -> Path:
        return Path(self._entry_file(name))

    def _entry_file(self, name: str) -> str:
        return os.path.join(self._entries, name[:2], name)  # str: reads are the hot path

    # -- reading ------------------------------------------------------------------------------
    def get(self, name: str, repair: bool = True) -> Entry | None:
        """The entry called ``name`` if present and whole. A damaged one is removed, with a
        warning, so the caller rebuilds it (with ``repair``; a reader that may not write
        only ignores it)."""
        path = self._entry_file(name)
        try:
            with open(path, "rb") as stream:
                data = stream.read()
        except OSError:
            return None
        entry = _decode(data)
        if entry is None and not repair:
            return None
        if entry is None:
            self._warn_once(path, f"compiled-code cache entry {path} is damaged (its content "
                            "hash does not match); it was ignored and is rebuilt",
                            CorruptStateWarning)
            Path(path).unlink(missing_ok=True)
            return None
        if repair:
            try:
                os.utime(path)  # least recently used goes first: a hit counts as a use
            except OSError:
                pass
        return entry

    # -- writing ------------------------------------------------------------------------------
    def put(self, name: str, payload: bytes, meta: dict | None = None) -> None:
        """Store an entry atomically; a failure to write leaves the cache unused, warned once."""
        if not self.usable:
            return
        body = json.dumps(meta or {}, sort_keys=True).encode() + b"\n" + payload
        data = _MAGIC + hashlib.sha256(body).hexdigest().encode() + b"\n" + body
        path = self._path(name)
        temporary = None
        try:
            self._prepare(path.parent)
            handle, temporary = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
            with os.fdopen(handle, "wb") as stream:
                stream.write(data)
            os.replace(temporary, path)
        except OSError as exc:
            if temporary is not None:
                Path(temporary).unlink(missing_ok=True)
            self._disable(f"cannot write to the compiled-code cache {self.root}: "
                          f"{exc.strerror or exc}")
            return
        self._after_write(len(data))

    def _prepare(self, folder: Path) -> None:
        """Create ``folder`` (and the cache root) for the user only; refuse a root owned by
        someone else, whose files could be machine code of their choosing."""
        if folder.is_dir():
            return
        fresh = not self.root.exists()
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        if fresh:
            os.chmod(self.root, 0o700)
        check_owner(self.root)

    def _disable(self, message: str, warn: bool = True) -> None:
        self.usable = False
        if warn:
            self._warn_once(self.root, f"{message}; kernels are compiled every time. Set "
                            f"{DIR_ENV} to a writable folder, or {SWITCH_ENV}=off",
                            CacheWarning)

    def _warn_once(self, path: Path | str, message: str, category: type[Warning]) -> None:
        if str(path) not in self._warned:
            self._warned.add(str(path))
            warnings.warn(message, category, stacklevel=4)

    # -- size bound ---------------------------------------------------------------------------
    def _after_write(self, size: int) -> None:
        """Check the size bound at a process's first write, then after each sixteenth of the
        bound written: a scan of the folder stays rare."""
        if self._written_since_check is not None:
            self._written_since_check += size
            if self._written_since_check < self.max_bytes // 16:
                return
        self._written_since_check = 0
        try:
            self.evict()
        except OSError:  # another process clearing it meanwhile: the next check evicts
            pass

    def _files(self) -> Iterator[tuple[Path, os.stat_result]]:
        if not self.entries_dir.is_dir():
            return
        for shard in os.scandir(self.entries_dir):
            if not shard.is_dir(follow_symlinks=False):
                continue
            for item in os.scandir(shard.path):
                try:
                    yield Path(item.path), item.stat(follow_symlinks=False)
                except OSError:
                    continue

    def entries(self) -> Iterator[tuple[str, Entry | None]]:
        """Every entry by name, None for a damaged one (for ``info``; reads every file)."""
        for path, _ in self._files():
            if not path.name.startswith(".tmp-"):
                try:
                    yield path.name, _decode(path.read_bytes())
                except OSError:
                    continue

    def evict(self) -> int:
        """Remove the least recently used entries until the cache is under its bound (and
        temporary files writers left over an hour ago); the number of files removed."""
        now = time.time()
        entries, total, removed = [], 0, 0
        for path, info in self._files():
            if path.name.startswith(".tmp-"):
                if now - info.st_mtime > _STALE_TEMPORARY:
                    path.unlink(missing_ok=True)
                    removed += 1
                continue
            entries.append((info.st_mtime, info.st_size, path))
            total += info.st_size
        if total <= self.max_bytes:
            return removed
        for _, size, path in sorted(entries):
            if total <= self.max_bytes * _LOW_WATER:
                break
            path.unlink(missing_ok=True)
            total -= size
            removed += 1
        return removed

    # -- management (pytest-r3 cache info / clear) --------------------------------------------
    def info(self) -> dict:
        """Where the cache is, its entries by kind, damaged ones, its size and its bound."""
        kinds: dict[str, int] = {}
        damaged = 0
        for _, entry in self.entries():
            if entry is None:
                damaged += 1
            else:
                kind = str(entry.meta.get("kind", "other"))
                kinds[kind] = kinds.get(kind, 0) + 1
        total = sum(item.st_size for path, item in self._files()
                    if not path.name.startswith(".tmp-"))
        return {"folder": str(self.root), "entries": sum(kinds.values()) + damaged,
                "kinds": dict(sorted(kinds.items())), "damaged": damaged, "bytes": total,
                "max_bytes": self.max_bytes}

    def clear(self) -> int:
        """Remove every entry (other formats' folders too); the number of files removed."""
        removed = 0
        if not self.root.is_dir():
            return 0
        check_owner(self.root)
        for folder in sorted(self.root.iterdir()):
            if folder.is_dir() and not folder.is_symlink():
                for path in sorted(folder.rglob("*"), reverse=True):
                    if path.is_dir() and not path.is_symlink():
                        path.rmdir()
                    else:
                        path.unlink(missing_ok=True)
                        removed += 1
                folder.rmdir()
        return removed


def _decode(data: bytes) -> Entry | None:
    """The entry in ``data``, or None when its recorded hash does not match its content."""
    head, _, body = data.partition(b"\n")
    if not head.startswith(_MAGIC) or head[len(_MAGIC):] != hashlib.sha256(body).hexdigest(
            ).encode():
        return None
    meta, _, payload = body.partition(b"\n")
    try:
        return Entry(payload, json.loads(meta))
    except ValueError:
        return None


def check_owner(root: Path) -> None:
    """Refuse (OSError) a cache folder owned by another user; make ours private (0700)."""
    info = os.stat(root)
    if info.st_uid != os.getuid():
        raise PermissionError(f"it is owned by user id {info.st_uid}, not by this user "
                              f"({os.getuid()})")
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(root, 0o700)


_caches: dict[tuple[str | None, ...], CompileCache] = {}


def open_cache(warn: bool = True, folder: str | None = None) -> CompileCache | None:
    """The cache the environment chooses now (or the one in ``folder``), or None when it is
    off or unusable (said once in a warning when ``warn``)."""
    if not enabled():
        return None
    environ = os.environ
    chosen = (folder, *(environ.get(name)
                        for name in (DIR_ENV, SIZE_ENV, "XDG_CACHE_HOME", "HOME")))
    cache = _caches.get(chosen)
    if cache is None:
        root = Path(folder) if folder else configured_dir()
        size_text = os.environ.get(SIZE_ENV, "").strip()
        max_bytes = parse_size(size_text) if size_text else DEFAULT_SIZE
        cache = _caches[chosen] = CompileCache(root, max_bytes)
        if root.is_dir():
            try:
                check_owner(root)
            except OSError as exc:
                cache._disable(f"cannot use the compiled-code cache {root}: {exc}", warn)
    return cache if cache.usable else None


def folder_for_workers() -> str:
    """What a replay worker on another machine is told to read (see :func:`trusted_build`):
    this process's cache folder, or ``"off"`` when the cache is off here."""
    return str(configured_dir()) if enabled() else "off"


# -- who may use it ---------------------------------------------------------------------------
# (mode, folder): "write" or "read", and a folder chosen by the submitter (None: the
# environment's); None outside a trusted build
_scope: ContextVar[tuple[str, str | None] | None] = ContextVar("pytest_r3_compile_cache",
                                                               default=None)
_hits = 0


@dataclass(frozen=True)
class Access:
    """The cache as the current build may use it: reads, and writes when trusted to."""

    cache: CompileCache
    writable: bool

    def get(self, name: str) -> Entry | None:
        global _hits
        entry = self.cache.get(name, repair=self.writable)
        if entry is not None:
            _hits += 1
        return entry

    def put(self, name: str, payload: bytes, meta: dict | None = None) -> None:
        if self.writable:
            self.cache.put(name, payload, meta)


def hits() -> int:
    """How many entries this process has read from the cache (a replay worker reports it)."""
    return _hits


@contextmanager
def trusted_build(write: bool = True, folder: str | None = None) -> Iterator[None]:
    """Let the builds inside use the cache: pytest-r3's own compile path for a declared
    kernel's source. ``write=False`` reads only (a replay worker's baseline). ``folder`` is
    the submitter's (a Dask worker's replay worker reads the cache of the process that
    started the run): used when this machine sees it, else the environment's cache is;
    ``"off"``: none."""
    if folder == "off":
        with untrusted_build():
            yield
        return
    chosen = folder if folder and os.path.isdir(folder) else None
    token = _scope.set(("write" if write else "read", chosen))
    try:
        yield
    finally:
        _scope.reset(token)


@contextmanager
def untrusted_build() -> Iterator[None]:
    """No cache for the builds inside (a candidate's), even within a trusted build."""
    token = _scope.set(None)
    try:
        yield
    finally:
        _scope.reset(token)


def current() -> Access | None:
    """The cache the build in progress may use, or None (outside trusted_build, or off)."""
    scope = _scope.get()
    if scope is None:
        return None
    mode, folder = scope
    cache = open_cache(warn=mode == "write", folder=folder)
    return None if cache is None else Access(cache, mode == "write")
