"""``r3.lock``: the tuned settings of each kernel per target, committed with the code.

JSON with sorted keys and one setting per line, so a change shows as a small diff::

    {"version": 1,
     "kernels": {"<kernel>": {"<target>": {"source_hash": "...", "macros": {...},
                                           "pipeline": {...}, "speedup": 1.8,
                                           "evaluations": 60, ...}}}}

A kernel declared with ``specialize=`` (see :mod:`.specialize`) has one entry per bucket of
sizes instead: ``{"<target>": {"specialize": "n", "buckets": {"n=1024": {<entry>}, ...}}}``.

Using an entry (:func:`locked_variant`): a kernel uses its entry only when the entry fits
the kernel's current source (:func:`source_fingerprint`: its text and every local header it
includes) and was made for this machine's target (:func:`entry_problem`, the one staleness
rule); otherwise it runs its baseline and says why once, at debug level (logger
``pytest_r3``). A lock that is not JSON or not of the shape above is ignored with one
:class:`~pytest_r3.errors.CorruptStateWarning` naming the file: the application keeps
running on its baselines.

Writing an entry (:func:`update_entry`): the file is re-read, merged and written under a
file lock, so concurrent runs on different kernels keep every entry; :func:`merge_entry`
says which of two entries for one kernel and target wins.

Longer than most modules on purpose: the file's shape, its fingerprint, the rule that picks
the winning entry and the rule that says when an entry is stale are one contract, read and
changed together.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import re
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..errors import CorruptStateError, CorruptStateWarning, DeclarationError
from ..model.pipeline import bounds_problem as pipeline_bounds_problem
from ..outputs import LOCK_TIMEOUT, file_lock, write_json_atomic
from .bounded_build import build_problem

LOCK_NAME = "r3.lock"
LOCK_ENV = "PYTEST_R3_LOCK"
VERSION = 1
LOCK_HINT = "r3.lock is kept with the project: make its folder writable"
# Whether a kernel can use a lock entry: the closed set entry_status answers with.
EntryStatus = Literal["ok", "patch pending", "stale"]
FIX = "restore it from version control (a merge conflict?) or delete it and tune again"
CONFLICT_FIX = ("resolve the conflict: keep one side of each conflicting entry (or delete the "
                "file and tune again), then remove the markers")
_CONFLICT = re.compile(r"^(<{7}|={7}|>{7}|\|{7})(?: |$)", re.MULTILINE)
log = logging.getLogger("pytest_r3")


def features_hash(features: str) -> str:
    return hashlib.sha256(features.encode()).hexdigest()[:12]


# -- the source fingerprint ----------------------------------------------------------------

_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]', re.MULTILINE)


def local_headers(source) -> list[tuple[str, Path]]:
    """(name as written, file) of every header ``source`` (a KernelSource) includes from its
    own folders, recursively, in the order first met.

    ``#include "x.h"`` is looked up beside the including file, then in the kernel's include
    dirs; ``#include <x.h>`` in the include dirs only (system and toolchain headers are
    covered by the toolchain's version). Every directive counts, including ones in an
    inactive ``#if`` branch: a fingerprint may change for nothing, never miss a change.
    """
    dirs = [Path(d) for d in getattr(source, "include_dirs", ())]
    path = getattr(source, "path", None)
    found: list[tuple[str, Path]] = []
    seen: set[Path] = set()

    def scan(text: str, folder: Path | None, prefix: str) -> None:
        for quote, name in _INCLUDE.findall(text):
            name = name.strip()
            places = ([folder] if quote == '"' and folder is not None else []) + dirs
            for place in places:
                candidate = place / name
                if candidate.is_file():
                    resolved = candidate.resolve()
                    if resolved not in seen:
                        seen.add(resolved)
                        found.append((prefix + name, resolved))
                        try:
                            inner = resolved.read_text(errors="replace")
                        except OSError:
                            inner = ""
                        scan(inner, resolved.parent, prefix + name + ">")
                    break

    scan(source.text, Path(path).parent if path is not None else None, "")
    return found


def source_fingerprint(kernel_or_source) -> str:
    """What a lock entry's ``source_hash`` (and ``rewrite_hash``) must equal for the entry to
    be used: the hash of the kernel's source text plus the name and content of every local
    header it includes (see :func:`local_headers`).

    The declared ``defines=`` and ``include_dirs=`` count too (they change what is built).
    Takes a Kernel or a KernelSource (for a rewrite: ``kernel.source.with_text(text)``). A
    source without local headers keeps its plain text hash (``KernelSource.hash``), so
    entries written before headers were covered stay valid.
    """
    source = getattr(kernel_or_source, "source", kernel_or_source)
    headers = local_headers(source)
    if not headers:
        return source.hash  # the text and its declared defines= and include_dirs=
    digest = hashlib.sha256(source.text.encode())
    if getattr(source, "defines", ()) or getattr(source, "declared_include_dirs", ()):
        digest.update(b"\0" + source.hash.encode())
    for name, path in headers:
        try:
            content = path.read_bytes()
        except OSError:
            content = b"<unreadable>"
        digest.update(b"\0" + name.encode() + b"\0" + hashlib.sha256(content).digest())
    return digest.hexdigest()[:16]


# -- the shape of the file -------------------------------------------------------------------

_SCALARS = (str, int, float, bool)
_NUMBERS = (int, float)


def lock_problem(data: object) -> str | None:
    """What is wrong with the shape of a parsed lock file, or None when it is well formed."""
    if not isinstance(data, dict):
        return f"the top level must be an object, got {type(data).__name__}"
    version = data.get("version")
    if version != VERSION:
        if isinstance(version, int) and not isinstance(version, bool) and version > VERSION:
            return (f"version {version} was written by a newer pytest-r3 (this one reads "
                    f"version {VERSION})")
        return f"'version' must be {VERSION}, got {version!r}"
    kernels = data.get("kernels")
    if not isinstance(kernels, dict):
        return f"'kernels' must be an object, got {type(kernels).__name__}"
    for kernel, targets in kernels.items():
        if not isinstance(targets, dict):
            return f"kernels.{kernel} must be an object of targets, got {type(targets).__name__}"
        for target, entry in targets.items():
            problem = (buckets_shape_problem(entry) if isinstance(entry, dict)
                       and "buckets" in entry else entry_shape_problem(entry))
            if problem:
                return f"kernels.{kernel}.{target}: {problem}"
    return None


def buckets_shape_problem(value: dict) -> str | None:
    """What is wrong with the shape of a specialised kernel's entry (``{"specialize": "n",
    "buckets": {"n=1024": <entry>, ...}}``), or None."""
    if not isinstance(value.get("specialize"), str):
        return "'specialize' must be a string (the specialize= of the declaration)"
    buckets = value["buckets"]
    if not isinstance(buckets, dict) or not buckets:
        return "'buckets' must be a non-empty object of bucket label -> entry"
    unknown = sorted(set(value) - {"specialize", "buckets"})
    if unknown:
        return f"unknown field(s) {', '.join(unknown)} beside 'buckets'"
    for label, entry in buckets.items():
        problem = entry_shape_problem(entry)
        if problem:
            return f"buckets.{label}: {problem}"
    return None


def entry_shape_problem(entry: object) -> str | None:
    """What is wrong with the shape of one entry, or None."""
    if not isinstance(entry, dict):
        return f"an entry must be an object, got {type(entry).__name__}"
    if not isinstance(entry.get("source_hash"), str):
        return "'source_hash' must be a string"
    for field in ("macros", "pipeline"):
        value = entry.get(field)
        if not isinstance(value, dict):
            return f"{field!r} must be an object, got {type(value).__name__}"
        for name, setting in value.items():
            # a pipeline's custom pass sequences are lists of pass names
            items = setting if field == "pipeline" and isinstance(setting, (list, tuple)) \
                else [setting]
            if not all(item is None or isinstance(item, _SCALARS) for item in items):
                return f"{field}.{name} must be a number, string or boolean"
    typed = {"rewrite_hash": (str,), "features_hash": (str, type(None)),
             "speedup": _NUMBERS, "baseline_seconds": _NUMBERS, "tuned_seconds": _NUMBERS,
             "evaluations": (int,)}
    for field, kinds in typed.items():
        if field in entry and (not isinstance(entry[field], kinds)
                               or isinstance(entry[field], bool)):
            return f"{field!r} has the wrong type ({type(entry[field]).__name__})"
    return None


def conflict_problem(text: str) -> str | None:
    """Where a lock holds merge-conflict markers (a merge of two branches that both tuned),
    or None: said as such rather than as a JSON error at some column."""
    found = _CONFLICT.search(text)
    if found is None:
        return None
    line = text.count("\n", 0, found.start()) + 1
    return f"has merge-conflict markers (line {line}: {found.group(1)})"


# -- the file --------------------------------------------------------------------------------

class LockFile:
    def __init__(self, path: str | Path, data: dict | None = None,
                 problem: str | None = None) -> None:
        self.path = Path(path)
        self.data = data or {"version": VERSION, "kernels": {}}
        self.problem = problem  # why the file on disk was ignored (lenient loads only)

    @classmethod
    def load(cls, path: str | Path, *, strict: bool = True) -> LockFile:
        """The lock at ``path`` (empty if there is none).

        A file that cannot be read, is not JSON or is not of the lock's shape raises
        CorruptStateError naming it and what is wrong (``strict``, for tuning and checking);
        with ``strict=False`` (a plain run of the application) it gives one
        CorruptStateWarning and an empty lock instead: every kernel runs its baseline.
        """
        path = Path(path)
        fix = FIX
        try:
            text = path.read_text()
        except FileNotFoundError:
            return cls(path)
        except (OSError, UnicodeDecodeError) as exc:
            problem = f"cannot be read ({exc.strerror if isinstance(exc, OSError) else exc})"
        else:
            problem = conflict_problem(text)
            if problem is not None:
                fix = CONFLICT_FIX
            else:
                try:
                    data = json.loads(text)
                except ValueError as exc:
                    problem = f"is not valid JSON ({exc})"
                else:
                    problem = lock_problem(data)
                    if problem is None:
                        return cls(path, data)
                    problem = f"is not a pytest-r3 lock file: {problem}"
        if strict:
            raise CorruptStateError(path, problem, fix)
        warnings.warn(CorruptStateWarning(
            f"pytest-r3: ignoring {path}: it {problem}; every kernel runs its baseline "
            f"until it is fixed ({fix})"), stacklevel=2)
        return cls(path, problem=problem)

    def entry(self, kernel: str, target: str, bucket: str | None = None,
              specialize: str | None = None) -> dict | None:
        """The entry of ``kernel`` on ``target``: the plain one (``bucket`` None), or the one
        of ``bucket`` when the kernel is specialised by ``specialize``."""
        value = self.data["kernels"].get(kernel, {}).get(target)
        if value is None or ("buckets" in value) != (bucket is not None):
            return None
        if bucket is None:
            return value
        if value["specialize"] != specialize:
            return None  # tuned under another specialize=: none of its buckets applies
        return value["buckets"].get(bucket)

    def buckets(self, kernel: str, target: str) -> tuple[str, dict] | None:
        """(specialize, {bucket label: entry}) of a specialised kernel, else None."""
        value = self.data["kernels"].get(kernel, {}).get(target)
        if value is None or "buckets" not in value:
            return None
        return value["specialize"], value["buckets"]

    def entries(self) -> list[tuple[str, str, dict]]:
        """Every entry: a specialised kernel's one per bucket (each has a ``bucket`` key in
        the copy returned here)."""
        found = []
        for k, targets in sorted(self.data["kernels"].items()):
            for t, value in sorted(targets.items()):
                if "buckets" in value:
                    found += [(k, t, {**e, "bucket": label})
                              for label, e in sorted(value["buckets"].items())]
                else:
                    found.append((k, t, value))
        return found

    def set_entry(self, kernel: str, target: str, entry: dict, bucket: str | None = None,
                  specialize: str | None = None) -> None:
        targets = self.data["kernels"].setdefault(kernel, {})
        if bucket is None:
            targets[target] = entry
            return
        value = targets.get(target)
        if value is None or "buckets" not in value or value["specialize"] != specialize:
            value = targets[target] = {"specialize": specialize, "buckets": {}}
        value["buckets"][bucket] = entry

    def remove_entry(self, kernel: str, target: str, bucket: str | None = None) -> None:
        targets = self.data["kernels"].get(kernel, {})
        value = targets.get(target)
        if bucket is not None and value is not None and "buckets" in value:
            value["buckets"].pop(bucket, None)
            if value["buckets"]:
                return
        targets.pop(target, None)
        if not targets:
            self.data["kernels"].pop(kernel, None)

    def save(self) -> Path:
        return write_json_atomic(self.path, self.data, hint=LOCK_HINT)

    @classmethod
    @contextmanager
    def editing(cls, path: str | Path, timeout: float = LOCK_TIMEOUT) -> Iterator[LockFile]:
        """``with LockFile.editing(path) as lock:`` the file as it is now, held against
        other writers, written back (atomically, its mode kept) if changed inside.

        A corrupt file raises CorruptStateError rather than being overwritten.
        """
        with file_lock(path, timeout, hint=LOCK_HINT):
            lock = cls.load(path, strict=True)
            before = json.dumps(lock.data, sort_keys=True)
            yield lock
            if json.dumps(lock.data, sort_keys=True) != before:
                lock.save()

    @classmethod
    def update(cls, path: str | Path, kernel: str, target: str, entry: dict | None, *,
               source_hash: str | None = None, features_hash: str | None = None,
               retune: bool = False, timeout: float = LOCK_TIMEOUT) -> LockDecision:
        """See :func:`update_entry`."""
        return update_entry(path, kernel, target, entry, source_hash=source_hash,
                            features_hash=features_hash, retune=retune, timeout=timeout)


# -- which entry wins --------------------------------------------------------------------------

@dataclass(frozen=True)
class LockDecision:
    """What :func:`merge_entry` did: ``action`` is ``written`` (no entry before),
    ``replaced``, ``removed``, ``kept`` (the committed entry stays; ``reason`` says why, for
    the report) or ``unchanged`` (no entry before or after); ``entry`` is the entry now."""

    action: str
    reason: str
    entry: dict | None

    @property
    def changed(self) -> bool:
        return self.action in ("written", "replaced", "removed")


TEST_INPUTS = "test inputs"  # what an entry without ``timed_on`` was timed on


def _number(entry: dict, field: str, default: float) -> float:
    value = entry.get(field)
    return float(value) if isinstance(value, _NUMBERS) and not isinstance(value, bool) \
        else default


def _describe(entry: dict) -> str:
    return (f"speedup {_number(entry, 'speedup', 0.0):.2f}x measured with "
            f"{int(_number(entry, 'evaluations', 0))} evaluation(s)")


def _relates(entry: dict, fingerprint: str | None, features: str | None) -> bool:
    """Whether ``entry`` was made for this source (used as is, or waiting for its rewrite's
    patch) and these CPU features; an entry that does not relate is stale."""
    if fingerprint is not None and fingerprint not in (entry.get("source_hash"),
                                                       entry.get("rewrite_hash")):
        return False
    return features is None or entry.get("features_hash") in (None, features)


def merge_entry(lock: LockFile, kernel: str, target: str, entry: dict | None, *,
                source_hash: str | None = None, features_hash: str | None = None,
                retune: bool = False, bucket: str | None = None,
                specialize: str | None = None,
                unfit: Callable[[dict], str | None] | None = None) -> LockDecision:
    """Put the outcome of one tuning run (``entry``; None when the run found nothing beyond
    the noise or its best was rejected) into ``lock``, in memory.

    ``source_hash`` (default: ``entry["source_hash"]``) is the :func:`source_fingerprint`
    the run tuned, and ``features_hash`` the CPU's (CPU kernels), so a stale committed entry
    can be told from a current one. The rules, in order:

    1. ``retune`` (``--r3-retune``): this run's outcome is the entry, whatever was there
       (None removes it).
    2. No entry, or a stale one (made for another source or other CPU features), or one
       that no longer fits the declaration (``unfit``: why the kernel cannot build it, e.g.
       a tunable value it no longer declares): this run's outcome is the entry (None
       removes the stale one: it could not be used anyway).
    3. A run without a result (``entry`` None) never deletes a current entry.
    4. A current entry timed on other inputs (``timed_on``: "test inputs", the default,
       or which workloads) is replaced: speedups on different inputs do not compare.
    5. A current entry is replaced only by one measured with at least as many
       ``evaluations`` (the budget that produced it) and at least its ``speedup``; so of
       two runs with the same budget the better measured entry wins, in any order. A
       missing ``evaluations`` counts as 0, a missing ``speedup`` as 0.

    A specialised kernel (``specialize``: its declaration's specialize=) merges each
    ``bucket`` by the same rules; the first bucket written replaces a plain entry, and one
    written under another specialize= replaces all of that one's buckets.
    """
    problem = None if entry is None else entry_shape_problem(entry)
    if problem:  # never write what a reader would reject (and so ignore the whole file)
        raise ValueError(f"refusing to write a malformed r3.lock entry for {kernel!r} on "
                         f"{target}: {problem}")
    current = lock.entry(kernel, target, bucket, specialize)
    fingerprint = source_hash or (entry or {}).get("source_hash")
    features = features_hash or (entry or {}).get("features_hash")

    def put(action: str, reason: str) -> LockDecision:
        if entry is None:
            lock.remove_entry(kernel, target, bucket)
        else:
            lock.set_entry(kernel, target, entry, bucket, specialize)
        return LockDecision(action, reason, entry)

    if entry is None and current is None:
        return LockDecision("unchanged", "no entry to write", None)
    if retune:
        if entry is None:
            return put("removed", "--r3-retune: the committed entry was removed, this run "
                                  "found nothing better than the baseline")
        return put("replaced" if current else "written",
                   "--r3-retune: this run's entry replaces the committed one"
                   if current else "new entry")
    if current is None:
        return put("written", "new entry")
    if not _relates(current, fingerprint, features):
        if entry is None:
            return put("removed", "the committed entry was stale (tuned for another source "
                                  "or CPU) and this run found nothing better than the "
                                  "baseline")
        return put("replaced", "the committed entry was stale (tuned for another source or "
                               "CPU)")
    misfit = unfit(current) if unfit is not None else None
    if misfit:
        return put("removed" if entry is None else "replaced",
                   f"the committed entry no longer fits the declaration ({misfit})")
    if entry is None:
        return LockDecision("kept", f"kept the committed entry ({_describe(current)}): this "
                            "run found nothing better; use --r3-retune to drop it", current)
    if current.get("timed_on", TEST_INPUTS) != entry.get("timed_on", TEST_INPUTS):
        return put("replaced", f"replaces the committed entry ({_describe(current)}), timed "
                               f"on other inputs ({current.get('timed_on', TEST_INPUTS)})")
    old_runs, new_runs = _number(current, "evaluations", 0), _number(entry, "evaluations", 0)
    if new_runs < old_runs:
        return LockDecision("kept", f"kept the committed entry ({_describe(current)}): this "
                            f"run made {int(new_runs)} evaluation(s); use a budget of at least "
                            f"{int(old_runs)} or --r3-retune to replace it", current)
    if _number(entry, "speedup", 0.0) < _number(current, "speedup", 0.0):
        return LockDecision("kept", f"kept the committed entry ({_describe(current)}): it "
                            f"beats this run's ({_describe(entry)}); use --r3-retune to "
                            "replace it", current)
    return put("replaced", f"replaces the committed entry ({_describe(current)})")


def update_entry(path: str | Path, kernel: str, target: str, entry: dict | None, *,
                 source_hash: str | None = None, features_hash: str | None = None,
                 retune: bool = False, timeout: float = LOCK_TIMEOUT,
                 bucket: str | None = None, specialize: str | None = None,
                 unfit: Callable[[dict], str | None] | None = None) -> LockDecision:
    """Merge one tuning run's outcome for ``kernel`` on ``target`` into the lock at ``path``:
    re-read under a file lock, :func:`merge_entry`, written atomically if changed (other
    kernels' and targets' entries, written meanwhile by other runs, are kept).

    Raises CorruptStateError if the file on disk is corrupt (it is not overwritten),
    StateWriteError if it cannot be written, StateLockTimeout if another run holds it for
    more than ``timeout`` seconds.
    """
    with LockFile.editing(path, timeout) as lock:
        return merge_entry(lock, kernel, target, entry, source_hash=source_hash,
                           features_hash=features_hash, retune=retune, bucket=bucket,
                           specialize=specialize, unfit=unfit)


# -- using an entry ------------------------------------------------------------------------------

def find_lock(start: str | Path | None) -> Path | None:
    """``$PYTEST_R3_LOCK``, else the nearest ``r3.lock`` in ``start`` or a parent folder."""
    override = os.environ.get(LOCK_ENV)
    if override:
        return Path(override)
    if start is None:
        return None
    folder = Path(start).resolve()
    for candidate in (folder, *folder.parents):
        if (candidate / LOCK_NAME).is_file():
            return candidate / LOCK_NAME
    return None


@functools.lru_cache(maxsize=32)
def _read(path: str, mtime_ns: int, size: int) -> LockFile:
    return LockFile.load(path, strict=False)  # warns once per version of the file


def read_lock(path: str | Path) -> LockFile:
    """The lock at ``path`` for using its entries: cached while the file is unchanged, and
    a corrupt one is an empty lock after one warning."""
    try:
        info = Path(path).stat()
    except OSError:
        return LockFile(path)
    return _read(str(path), info.st_mtime_ns, info.st_size)


def entry_status(kernel, entry: dict, fingerprint: str | None = None
                 ) -> tuple[EntryStatus, str]:
    """Whether ``kernel`` can use ``entry``, by the one staleness rule: (``"ok"``, ""), or
    (``"patch pending"``, why) for a source rewrite whose patch is not applied yet, or
    (``"stale"``, why) for an entry made for another source (or header) or other CPU
    features. ``fingerprint`` defaults to :func:`source_fingerprint` of the kernel."""
    fingerprint = fingerprint or source_fingerprint(kernel)
    if entry.get("rewrite_hash"):
        # r3.lock holds settings, never code: a rewrite applies once its patch is applied
        if entry["rewrite_hash"] != fingerprint:
            if entry.get("source_hash") not in (None, fingerprint):
                return "stale", (f"entry is stale (made for source {entry.get('source_hash')} "
                                 f"and its rewrite {entry['rewrite_hash']}, now "
                                 f"{fingerprint})")
            return "patch pending", (f"entry needs its source rewrite applied (git apply "
                                     f".r3/patches/{kernel.name}.patch)")
    elif entry.get("source_hash") != fingerprint:
        return "stale", (f"entry is stale (source hash {entry.get('source_hash')}, now "
                         f"{fingerprint}: the source or a header it includes changed)")
    if kernel.backend_name == "cpu" and entry.get("features_hash") is not None:
        from ..backends.clang import host_target

        if entry["features_hash"] != features_hash(host_target().features):
            return "stale", "entry was tuned on other CPU features"
    return "ok", ""


def entry_problem(kernel, entry: dict, fingerprint: str | None = None) -> str | None:
    """Why ``kernel`` cannot use ``entry`` (see :func:`entry_status`), or None when it can."""
    status, why = entry_status(kernel, entry, fingerprint)
    return None if status == "ok" else why


def locked_variant(kernel):
    """The variant ``kernel`` should run per the lock file, or None (with the reason logged)."""
    start = Path(kernel.declared_at.rsplit(":", 1)[0]).parent
    path = find_lock(start)
    if path is None or not path.exists():
        log.debug("kernel %r: no %s found from %s; using the baseline", kernel.name,
                  LOCK_NAME, start)
        return None
    lock = read_lock(path)
    if lock.problem:
        log.debug("kernel %r: %s %s; using the baseline", kernel.name, path, lock.problem)
        return None
    target = kernel.backend.target_name()
    entry = lock.entry(kernel.name, target)
    if entry is None:
        log.debug("kernel %r: %s has no entry for target %s; using the baseline",
                  kernel.name, path, target)
        return None
    problem = entry_problem(kernel, entry)
    if problem:
        log.debug("kernel %r: %s %s; using the baseline", kernel.name, path, problem)
        return None
    return _usable_variant(kernel, entry, path)


def _usable_variant(kernel, entry: dict, path: Path, bucket: str | None = None):
    """The variant of a current ``entry``, or None: an entry asking for settings tuning
    never explores, or one that does not build within the time limit (see bounded_build),
    gets one warning; one that no longer fits the declaration, a debug line."""
    what = f"kernel {kernel.name!r}" + (f" bucket {bucket}" if bucket else "")
    problem = pipeline_bounds_problem(entry.get("pipeline", {}), kernel.pipeline)
    try:
        variant = None if problem else variant_from_entry(kernel, entry)
    except Exception as exc:  # e.g. a tunable value no longer declared
        log.debug("%s: %s entry no longer fits the declaration (%s); using the baseline",
                  what, path, exc)
        return None
    if variant is not None and variant != kernel.baseline:
        problem = build_problem(kernel, variant)
    if problem:
        warnings.warn(CorruptStateWarning(
            f"pytest-r3: {what}: not using its entry in {path}: {problem}; it runs its "
            f"baseline (tune it again with pytest --r3-tune, or restore {LOCK_NAME})"),
            stacklevel=3)
        return None
    return variant


def locked_buckets(kernel) -> dict[str, object]:
    """The variant of each tuned bucket of a specialised ``kernel`` per the lock file, by
    bucket label (empty when there are none; a bucket whose entry cannot be used is left
    out, with the reason logged)."""
    start = Path(kernel.declared_at.rsplit(":", 1)[0]).parent
    path = find_lock(start)
    if path is None or not path.exists():
        return {}
    lock = read_lock(path)
    found = None if lock.problem else lock.buckets(kernel.name, kernel.backend.target_name())
    if found is None:
        return {}
    specialize, entries = found
    if specialize != kernel.specialize.description:
        log.debug("kernel %r: %s was tuned with specialize=%s, the declaration says %s; "
                  "using the baseline", kernel.name, path, specialize,
                  kernel.specialize.description)
        return {}
    fingerprint = source_fingerprint(kernel)
    variants = {}
    for label, entry in entries.items():
        problem = entry_problem(kernel, entry, fingerprint)
        if problem:
            log.debug("kernel %r bucket %s: %s %s", kernel.name, label, path, problem)
            continue
        variant = _usable_variant(kernel, entry, path, label)
        if variant is not None:
            variants[label] = variant
    return variants


def unfit_problem(kernel, entry: dict) -> str | None:
    """Why ``kernel`` as declared now cannot build ``entry``'s settings (a tunable value
    or pipeline setting it does not declare), or None."""
    try:
        variant_from_entry(kernel, entry)
    except (DeclarationError, TypeError, ValueError) as exc:
        return str(exc).replace(f"{kernel.where}: ", "").replace(f"{kernel.where}", "")
    return None


def variant_from_entry(kernel, entry: dict):
    """The entry's settings applied to the kernel's own source: text found in a lock file is
    never compiled (a lock may be edited by anyone who can open a pull request), nor
    settings beyond what tuning explores (DeclarationError)."""
    problem = pipeline_bounds_problem(entry.get("pipeline", {}), kernel.pipeline)
    if problem:
        raise DeclarationError(f"{kernel.where}: {LOCK_NAME} entry: {problem}")
    pipeline = {**kernel.pipeline.as_dict(), **entry.get("pipeline", {})}
    return kernel.variant(pipeline=pipeline, **entry.get("macros", {}))
