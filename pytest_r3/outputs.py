"""Writing files so that a crash, Ctrl-C or a second run never leaves a half-written or
half-merged one behind.

Every file pytest-r3 produces goes through here: written to a temporary file in the same
folder, flushed to disk, given the permission bits of the file it replaces (a new file gets
the umask's default, 0644 typically), then renamed over the target (atomic on POSIX).

A file that is read, merged and written back (``r3.lock``, a recordings index, the accepted
rewrites, the result store's appends) is edited under :func:`file_lock`: an exclusive
``flock`` on its folder, so two runs never lose each other's update. A folder rather than a
sidecar file: nothing is left in the project to ignore or commit, and the lock outlives the
rename that replaces the file. ``flock`` is released when its holder ends, even by a crash,
so nothing stale ever blocks anyone.

A write that fails for a reason of the file system (read-only folder, full disk, no
permission) raises :class:`~pytest_r3.errors.StateWriteError`: one line naming the path.

No write follows a symbolic link: a link planted where a state file goes (``r3.lock``,
``.r3/report.md``, a folder such as ``.r3/patches``, committed by anyone who can open a
pull request) would make a tuning run overwrite a file elsewhere. The file itself is never
written through a link, and with ``root`` (the folder the state is trusted from, the project
for ``.r3``) neither is any folder between ``root`` and the file: each is opened relative
to the one above it with ``O_NOFOLLOW``, and a link is refused with a StateWriteError.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import StateLockTimeout, StateWriteError

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: edits are atomic, not serialised
    fcntl = None

LOCK_TIMEOUT = 60.0  # seconds to wait for another run's edit of the same file
DIR_HINT = "keep pytest-r3's state in a writable folder with --r3-dir=DIR"
LINK_HINT = ("pytest-r3 never writes through a symbolic link: remove the link (or keep the "
             "state elsewhere with --r3-dir=DIR)")
_DIRECTORY = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _umask() -> int:
    """The process's umask, read without changing it where the system allows."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # briefly changed: only where /proc cannot tell
    os.umask(mask)
    return mask


def _reason(exc: OSError) -> str:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "the disk is full"
    if exc.errno == errno.EFBIG:
        return "the file is too large (file size limit or full disk)"
    if exc.errno == errno.EROFS:
        return "the file system is read-only"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    return exc.strerror or str(exc)


def state_write_error(path: str | os.PathLike, exc: OSError,
                      hint: str = DIR_HINT) -> StateWriteError:
    """The one-line error for a failed write of ``path``."""
    return StateWriteError(Path(path), _reason(exc), hint)


def make_dirs(path: str | os.PathLike, hint: str = DIR_HINT, *,
              root: str | os.PathLike | None = None) -> Path:
    """``mkdir -p path``; a failure is a StateWriteError naming it. Below ``root`` no
    folder may be a symbolic link (see the module's docstring)."""
    os.close(_open_folder(Path(path), root, hint))
    return Path(path)


def link_error(path: str | os.PathLike, link: str | os.PathLike) -> StateWriteError:
    """The one-line refusal to write ``path`` because ``link`` is a symbolic link."""
    try:
        where = f" (to {os.readlink(link)})"
    except OSError:
        where = ""
    return StateWriteError(Path(path), f"{link} is a symbolic link{where}", LINK_HINT)


def refuse_links(path: str | os.PathLike, root: str | os.PathLike | None = None,
                 hint: str = DIR_HINT) -> None:
    """Raise the StateWriteError a write of ``path`` would raise for a symbolic link at
    the file or below ``root``, before any work is done (nothing is created)."""
    target = Path(path)
    top = Path(root) if root is not None else target.parent
    try:
        parts = target.relative_to(top).parts
    except ValueError:
        top, parts = target.parent, (target.name,)
    current = top
    for part in parts:
        current = current / part
        if current.is_symlink():
            raise link_error(target, current)
        if not current.exists():
            return


def _open_folder(folder: Path, root: str | os.PathLike | None, hint: str) -> int:
    """A descriptor of ``folder``, created with its parents where missing; every folder
    below ``root`` is opened without following a link (None: ``folder`` itself is trusted)."""
    top = Path(root) if root is not None else folder
    try:
        parts = folder.relative_to(top).parts
    except ValueError:
        top, parts = folder, ()
    try:
        top.mkdir(parents=True, exist_ok=True)
        handle = os.open(top, _DIRECTORY)
    except OSError as exc:
        raise state_write_error(top, exc, hint) from None
    current = top
    for part in parts:
        current = current / part
        try:
            try:
                os.mkdir(part, 0o777, dir_fd=handle)
            except FileExistsError:
                pass
            inner = os.open(part, _DIRECTORY | _NOFOLLOW, dir_fd=handle)
        except OSError as exc:
            if os.path.islink(current):
                os.close(handle)
                raise link_error(folder, current) from None
            os.close(handle)
            raise state_write_error(current, exc, hint) from None
        os.close(handle)
        handle = inner
    return handle


def _existing_mode(folder: int, name: str, target: Path) -> int | None:
    """The permission bits of the file being replaced (None: there is none); a link there
    is refused."""
    try:
        info = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(info.st_mode):
        raise link_error(target, target)
    return stat.S_IMODE(info.st_mode)


def write_bytes_atomic(path: str | os.PathLike, data: bytes, *, hint: str = DIR_HINT,
                       root: str | os.PathLike | None = None) -> Path:
    """Write ``path`` whole or not at all, keeping the mode of the file it replaces; never
    through a symbolic link (the file, or a folder below ``root``)."""
    target = Path(path)
    folder = _open_folder(target.parent, root, hint)
    temporary = None
    try:
        mode = _existing_mode(folder, target.name, target)
        mode = 0o666 & ~_umask() if mode is None else mode
        temporary = f".{target.name}.{secrets.token_hex(6)}.tmp"
        handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW
                         | getattr(os, "O_CLOEXEC", 0), 0o600, dir_fd=folder)
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fchmod(stream.fileno(), mode)
            os.fsync(stream.fileno())
        os.replace(temporary, target.name, src_dir_fd=folder, dst_dir_fd=folder)
        temporary = None
    except StateWriteError:
        raise
    except OSError as exc:
        raise state_write_error(target, exc, hint) from None
    finally:
        if temporary is not None:
            try:
                os.unlink(temporary, dir_fd=folder)
            except OSError:
                pass
        os.close(folder)
    return target


def write_text_atomic(path: str | os.PathLike, text: str, *, hint: str = DIR_HINT,
                      root: str | os.PathLike | None = None) -> Path:
    return write_bytes_atomic(path, text.encode(), hint=hint, root=root)


def write_json_atomic(path: str | os.PathLike, payload: object, *, hint: str = DIR_HINT,
                      root: str | os.PathLike | None = None) -> Path:
    return write_text_atomic(path, json.dumps(payload, indent=2, sort_keys=True) + "\n",
                             hint=hint, root=root)


@contextmanager
def file_lock(path: str | os.PathLike, timeout: float = LOCK_TIMEOUT, *,
              hint: str = DIR_HINT, root: str | os.PathLike | None = None) -> Iterator[Path]:
    """Hold the exclusive lock on edits of ``path`` (read, merge, write) while inside.

    The lock is an ``flock`` on the folder holding ``path`` (so it survives the atomic
    rename that replaces the file, and leaves no lock file in a project): one edit at a time
    per folder. Other processes, and other threads (each opens its own descriptor), wait up
    to ``timeout`` seconds, then get a StateLockTimeout naming the file. Not reentrant: take
    it once per folder. Released when the holder leaves, or dies.
    """
    handle = _open_folder(Path(path).parent, root, hint)
    try:
        if fcntl is not None:
            deadline = time.monotonic() + timeout
            delay = 0.002
            while True:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise StateLockTimeout(Path(path), timeout) from None
                    time.sleep(delay)
                    delay = min(delay * 2, 0.05)
        yield Path(path)
    finally:
        os.close(handle)  # releases the flock


def append_line(path: str | os.PathLike, line: str, *, hint: str = DIR_HINT,
                root: str | os.PathLike | None = None) -> None:
    """Append one line (under the file's lock, in one write, flushed to disk).

    A last line torn by a killed run is ended first, so the new line is never glued to it.
    """
    target = Path(path)
    data = line.rstrip("\n").encode() + b"\n"
    with file_lock(target, hint=hint, root=root):
        handle = open_append(target, hint=hint)
        try:
            size = os.fstat(handle).st_size
            if size and os.pread(handle, 1, size - 1) != b"\n":
                data = b"\n" + data
            view = memoryview(data)
            while view:
                view = view[os.write(handle, view):]
            os.fsync(handle)
        except OSError as exc:
            raise state_write_error(target, exc, hint) from None
        finally:
            os.close(handle)


def open_append(path: str | os.PathLike, *, hint: str = DIR_HINT,
                root: str | os.PathLike | None = None) -> int:
    """A descriptor appending to ``path`` (created if missing), never through a link."""
    target = Path(path)
    folder = _open_folder(target.parent, root, hint)
    try:
        return os.open(target.name, os.O_RDWR | os.O_APPEND | os.O_CREAT | _NOFOLLOW
                       | getattr(os, "O_CLOEXEC", 0), 0o666, dir_fd=folder)
    except OSError as exc:
        if os.path.islink(target):
            raise link_error(target, target) from None
        raise state_write_error(target, exc, hint) from None
    finally:
        os.close(folder)
