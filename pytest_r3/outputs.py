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
"""

from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
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


def make_dirs(path: str | os.PathLike, hint: str = DIR_HINT) -> Path:
    """``mkdir -p path``; a failure is a StateWriteError naming it."""
    folder = Path(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise state_write_error(folder, exc, hint) from None
    return folder


def write_bytes_atomic(path: str | os.PathLike, data: bytes, *, hint: str = DIR_HINT) -> Path:
    target = Path(path)
    if target.is_symlink():  # replace what the link points at, keep the link
        target = target.resolve()
    make_dirs(target.parent, hint)
    try:
        mode = stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    except OSError as exc:
        raise state_write_error(target, exc, hint) from None
    temporary = None
    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp",
                                             dir=target.parent)
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fchmod(stream.fileno(), mode)
            os.fsync(stream.fileno())
        os.replace(temporary, target)
    except OSError as exc:
        if temporary is not None:
            Path(temporary).unlink(missing_ok=True)
        raise state_write_error(target, exc, hint) from None
    except BaseException:
        if temporary is not None:
            Path(temporary).unlink(missing_ok=True)
        raise
    return target


def write_text_atomic(path: str | os.PathLike, text: str, *, hint: str = DIR_HINT) -> Path:
    return write_bytes_atomic(path, text.encode(), hint=hint)


def write_json_atomic(path: str | os.PathLike, payload: object, *, hint: str = DIR_HINT) -> Path:
    return write_text_atomic(path, json.dumps(payload, indent=2, sort_keys=True) + "\n",
                             hint=hint)


@contextmanager
def file_lock(path: str | os.PathLike, timeout: float = LOCK_TIMEOUT, *,
              hint: str = DIR_HINT) -> Iterator[Path]:
    """Hold the exclusive lock on edits of ``path`` (read, merge, write) while inside.

    The lock is an ``flock`` on the folder holding ``path`` (so it survives the atomic
    rename that replaces the file, and leaves no lock file in a project): one edit at a time
    per folder. Other processes, and other threads (each opens its own descriptor), wait up
    to ``timeout`` seconds, then get a StateLockTimeout naming the file. Not reentrant: take
    it once per folder. Released when the holder leaves, or dies.
    """
    folder = make_dirs(Path(path).parent, hint)
    try:
        handle = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError as exc:
        raise state_write_error(folder, exc, hint) from None
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


def append_line(path: str | os.PathLike, line: str, *, hint: str = DIR_HINT) -> None:
    """Append one line (under the file's lock, in one write, flushed to disk).

    A last line torn by a killed run is ended first, so the new line is never glued to it.
    """
    target = Path(path)
    data = line.rstrip("\n").encode() + b"\n"
    with file_lock(target, hint=hint):
        try:
            handle = os.open(target, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
        except OSError as exc:
            raise state_write_error(target, exc, hint) from None
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
