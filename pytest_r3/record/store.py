"""Recording kernel launches from the reference tests, and the on-disk recording store.

A recording is everything needed to re-run one launch in isolation: scalar arguments,
every array argument as it was before the launch, every written array after it, and the
return value. On disk it is ``<hash>.npz`` (arrays, ``in.<name>`` / ``out.<name>``) beside
``<hash>.json`` (metadata) under ``.r3/recordings/<kernel>/``; the hash covers the inputs,
so the same launch seen twice is stored once.

Pointer arguments that were the same buffer at the launch (``axpy(n, a, y, y)``) are
recorded as aliased: ``aliases`` holds groups of parameter names, ``overlaps`` pairs of
buffers that partly overlapped and ``overlap_offsets`` how many bytes the second of each
pair started after the first. A replay must pass one buffer for an aliased group
(``Recording.arguments()`` does) and one for overlapping ones, or a rewrite that assumes
``restrict`` goes unnoticed. Recordings written before aliasing was recorded read as not
aliased; before offsets were, their overlaps are replayed on separate buffers.

A recording is either an oracle's (verification, and timing when there is nothing else) or
a *workload*: a launch from a benchmark test, an ``r3_workload`` test or the application
itself (see :mod:`.workloads`), timed because it is the size users run. A workload's
metadata holds ``"workload": {"weight", "origin", "run"}``; recordings without that key
(all of them, before workloads existed) are oracle recordings. Each role has its own cap.

A file that cannot be read is skipped with one warning naming it (recording again replaces
it); a broken ``index.json`` is rebuilt from the files; ``save`` merges under a file lock,
so concurrent recording runs (xdist workers) keep each other's recordings. Longer than most
modules: capture, the on-disk format and its repair are one contract.
"""

from __future__ import annotations

import hashlib
import io
import json
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import CorruptStateWarning, R3Error
from ..outputs import file_lock, write_bytes_atomic, write_json_atomic

DEFAULT_CAP_BYTES = 64 * 1024 * 1024
DEFAULT_WORKLOAD_CAP_BYTES = 256 * 1024 * 1024  # production-sized launches are larger
INDEX_FILE = "index.json"
SPEC_FILE = "kernel.json"  # the kernel's spec beside its recordings (see plugin_record)


class CorruptRecording(R3Error, ValueError):
    """A recording (or a store's index) on disk is truncated, corrupt or incomplete."""

    def __init__(self, path: Path | str, reason: str) -> None:
        super().__init__(f"recording file {path} is unusable: {reason}; delete it (and its "
                         ".json/.npz companion) or record again with `pytest --r3-record`")
        self.path = Path(path)
        self.reason = reason


@dataclass
class Recording:
    kernel: str
    params: list[dict]  # name, dtype, is_pointer, written (the kernel's signature)
    scalars: dict[str, int | float]
    inputs: dict[str, np.ndarray]
    outputs: dict[str, np.ndarray]
    returned: int | float | None = None
    tests: list[str] = field(default_factory=list)
    source_hash: str = ""
    # groups of pointer parameters that were the same buffer at the launch, in parameter
    # order (``[["x", "y"]]`` for ``axpy(n, a, y, y)``); empty when none aliased
    aliases: list[list[str]] = field(default_factory=list)
    # pairs of pointer parameters whose memory partly overlapped
    overlaps: list[list[str]] = field(default_factory=list)
    # a timing workload: {"weight": launches it stands for, "origin": the test or command
    # it came from, "run": the recording session}; None for an oracle recording
    workload: dict | None = None
    # per overlapping pair: the byte offset of the second's start from the first's ([] in
    # recordings made before offsets were kept: those overlaps replay on separate buffers)
    overlap_offsets: list[int] = field(default_factory=list)

    @property
    def is_workload(self) -> bool:
        return self.workload is not None

    @property
    def weight(self) -> float:
        """How many launches this recording stands for in the timing objective."""
        return float(self.workload["weight"]) if self.workload else 1.0

    @property
    def key(self) -> str:
        """Content hash of the launch: read-only inputs, scalars and the written results.

        The prior content of written buffers is left out: for output-only buffers it is
        whatever memory held (np.empty), and for in-out buffers it shows in the results.
        Aliasing is part of the launch (an in-place call is not a call on separate
        buffers); a launch without any hashes as it did before aliasing was recorded.
        """
        digest = hashlib.sha256(self.kernel.encode())
        for param in self.params:
            name = param["name"]
            digest.update(name.encode())
            if param["is_pointer"]:
                array = self.outputs[name] if param["written"] else self.inputs[name]
                digest.update(f"{array.dtype.str}{array.shape}".encode())
                digest.update(np.ascontiguousarray(array).tobytes())
            else:
                digest.update(repr(self.scalars[name]).encode())
        if self.aliases or self.overlaps:
            described = {"aliases": self.aliases, "overlaps": self.overlaps}
            if self.overlap_offsets:
                described["overlap_offsets"] = self.overlap_offsets
            digest.update(json.dumps(described).encode())
        if self.workload is not None:  # the same launch as an oracle's is stored apart
            digest.update(f"workload:{self.workload['origin']}".encode())
        return digest.hexdigest()[:20]

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.inputs.values()) + sum(
            a.nbytes for a in self.outputs.values())

    @property
    def shape_signature(self) -> str:
        """Shapes and scalar sizes: recordings with different ones exercise different paths."""
        parts = [f"{n}{a.shape}" for n, a in sorted(self.inputs.items())]
        parts += [f"{n}={v}" for n, v in sorted(self.scalars.items()) if isinstance(v, int)]
        parts += ["=".join(group) for group in self.aliases]  # in place is another path
        return ";".join(parts)

    def alias_groups(self) -> list[list[str]]:
        """Groups (two or more names, parameter order) of pointer parameters that were the
        same buffer at the launch; [] when none were."""
        return [list(group) for group in self.aliases]

    def alias_of(self) -> dict[str, str]:
        """Each pointer parameter's canonical name: the first of its alias group (itself
        when not aliased). Parameters with the same canonical name share one buffer."""
        canonical = {p["name"]: p["name"] for p in self.params if p["is_pointer"]}
        for group in self.aliases:
            for name in group:
                canonical[name] = group[0]
        return canonical

    def arguments(self) -> list[object]:
        """Fresh copies of the launch arguments in parameter order.

        Aliased parameters get the same array object (a view of it where their dtype or
        shape differ), so an in-place launch is replayed in place.
        """
        canonical = self.alias_of()
        shared: dict[str, np.ndarray] = {}
        args: list[object] = []
        for param in self.params:
            name = param["name"]
            if not param["is_pointer"]:
                args.append(self.scalars[name])
                continue
            root = canonical.get(name, name)
            if root not in shared:
                shared[root] = self.inputs[root].copy()
            args.append(_view_as(shared[root], self.inputs[name]))
        return args

    def weak_outputs(self) -> list[str]:
        """Written buffers whose content before the launch already equals the result."""
        return [name for name, after in self.outputs.items()
                if np.array_equal(self.inputs[name], after, equal_nan=after.dtype.kind == "f")]

    def metadata(self) -> dict:
        extra = {} if self.workload is None else {"workload": dict(self.workload)}
        return {
            "kernel": self.kernel,
            "key": self.key,
            "params": self.params,
            "scalars": self.scalars,
            "returned": self.returned,
            "tests": sorted(set(self.tests)),
            "source_hash": self.source_hash,
            "arrays": {n: {"dtype": a.dtype.str, "shape": list(a.shape)}
                       for n, a in self.inputs.items()},
            "nbytes": self.nbytes,
            "weak_outputs": self.weak_outputs(),
            "aliases": self.aliases,
            "overlaps": self.overlaps,
            "overlap_offsets": self.overlap_offsets,
            **extra,
        }


def _view_as(base: np.ndarray, like: np.ndarray) -> np.ndarray:
    """``base`` itself, or a view of its memory with ``like``'s dtype and shape."""
    if base.dtype == like.dtype and base.shape == like.shape:
        return base
    return base.reshape(-1).view(np.uint8)[: like.nbytes].view(like.dtype).reshape(like.shape)


def _extent(value: object) -> tuple[str, int, int] | None:
    """(address space, first byte, byte count) of an array argument; None if unknown."""
    if isinstance(value, np.ndarray):
        return "host", int(value.__array_interface__["data"][0]), int(value.nbytes)
    interface = getattr(value, "__cuda_array_interface__", None)
    if isinstance(interface, dict):
        try:
            count = int(np.prod(interface["shape"], dtype=np.int64))
            return ("cuda", int(interface["data"][0]),
                    count * np.dtype(interface["typestr"]).itemsize)
        except (KeyError, TypeError, ValueError, IndexError):
            return None
    if hasattr(value, "gpudata") and hasattr(value, "nbytes"):  # a pycuda GPUArray
        try:
            return "cuda", int(value.gpudata), int(value.nbytes)
        except (TypeError, ValueError):
            return None
    return None


_TOO_HARD = getattr(np, "exceptions", np).TooHardError  # numpy < 1.25 has no np.exceptions


def find_aliases(names: list[str], values: list[object]
                 ) -> tuple[list[list[str]], list[list[str]]]:
    """(aliases, overlaps) among pointer arguments ``values`` named ``names``.

    Arguments with the same address and byte count are one buffer (an alias group, in
    argument order); arguments whose memory otherwise intersects overlap partly (pairs).
    Empty arrays alias nothing.
    """
    extents = [(name, _extent(value), value) for name, value in zip(names, values, strict=True)]
    extents = [(n, e, v) for n, e, v in extents if e is not None and e[2] > 0]
    groups: dict[tuple[str, int, int], list[str]] = {}
    for name, extent, _ in extents:
        groups.setdefault(extent, []).append(name)
    aliases = [group for group in groups.values() if len(group) > 1]
    overlaps: list[list[str]] = []
    for i, (name_a, (space_a, start_a, size_a), value_a) in enumerate(extents):
        for name_b, (space_b, start_b, size_b), value_b in extents[i + 1:]:
            if space_a != space_b or (start_a, size_a) == (start_b, size_b):
                continue
            if start_a < start_b + size_b and start_b < start_a + size_a:
                if isinstance(value_a, np.ndarray) and isinstance(value_b, np.ndarray):
                    try:  # strided views can interleave without sharing an element
                        if not np.shares_memory(value_a, value_b, max_work=10**6):
                            continue
                    except _TOO_HARD:
                        pass
                overlaps.append([name_a, name_b])
    return aliases, overlaps


def overlap_offsets(names: list[str], values: list[object], overlaps: list[list[str]]
                    ) -> list[int]:
    """For each overlapping pair, the byte offset of the second's start from the first's."""
    starts = {name: extent[1] for name, value in zip(names, values, strict=True)
              if (extent := _extent(value)) is not None}
    return [starts[second] - starts[first] for first, second in overlaps]


def _numbers(array, param):
    """A structured array passed for a struct pointer (``struct point *``) is kept as the
    plain numbers it holds, the form a replay passes back (numpy cannot save its fields)."""
    if isinstance(array, np.ndarray) and array.dtype.names and param.components > 1:
        return array.view(np.dtype(param.dtype))
    return array


def capture(kernel, args: tuple, run: Callable[[], object], test: str) -> tuple[object, Recording]:
    """Run one launch, recording it; the caller sees exactly what an unrecorded run gives."""
    signature = kernel.signature
    to_host = kernel.backend.to_host  # device arrays (a GPU kernel's) are copied back
    inputs = {p.name: _numbers(to_host(a), p)
              for p, a in zip(signature.params, args, strict=False) if p.is_pointer}
    result = run()
    outputs = {p.name: _numbers(to_host(a), p)
               for p, a in zip(signature.params, args, strict=False) if p.written}
    scalars = {p.name: (int(a) if np.dtype(p.dtype).kind in "iub" else float(a))
               for p, a in zip(signature.params, args, strict=False) if not p.is_pointer}
    params = [p.as_dict() for p in signature.params]
    returned = None if result is None else (float(result) if isinstance(result, float)
                                            else int(result))
    pointers = [(p.name, a) for p, a in zip(signature.params, args, strict=False)
                if p.is_pointer]
    names, values = [n for n, _ in pointers], [a for _, a in pointers]
    aliases, overlaps = find_aliases(names, values)
    recording = Recording(kernel.name, params, scalars, inputs, outputs, returned, [test],
                          kernel.source.hash, aliases, overlaps,
                          overlap_offsets=overlap_offsets(names, values, overlaps))
    return result, recording


class RecordingStore:
    """``.r3/recordings/<kernel>/``: npz + json per recording, and an index of choices."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self._warned: set[str] = set()  # each unusable file is named once per store

    def kernel_dir(self, kernel: str) -> Path:
        return self.root / kernel

    def write(self, recording: Recording) -> Path:
        folder = self.kernel_dir(recording.kernel)
        arrays = {f"in.{n}": a for n, a in recording.inputs.items()}
        arrays.update({f"out.{n}": a for n, a in recording.outputs.items()})
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        trusted = self.root.parent  # no link from there down (see outputs)
        write_bytes_atomic(folder / f"{recording.key}.npz", buffer.getvalue(), root=trusted)
        return write_json_atomic(folder / f"{recording.key}.json", recording.metadata(),
                                 root=trusted)

    def read(self, kernel: str, key: str) -> Recording:
        """One recording; a missing, truncated or inconsistent file raises CorruptRecording
        naming it."""
        folder = self.kernel_dir(kernel)
        meta_path, arrays_path = folder / f"{key}.json", folder / f"{key}.npz"
        meta = _read_json(meta_path)
        if not isinstance(meta, dict) or not _REQUIRED_META <= set(meta):
            missing = sorted(_REQUIRED_META - set(meta)) if isinstance(meta, dict) else []
            raise CorruptRecording(meta_path, f"not a recording's metadata (missing "
                                              f"{', '.join(missing) or 'everything'})")
        try:
            # opened here: np.load leaves its own file open when the archive is bad
            with open(arrays_path, "rb") as stream, \
                    np.load(stream, allow_pickle=False) as data:
                inputs = {n[3:]: data[n] for n in data.files if n.startswith("in.")}
                outputs = {n[4:]: data[n] for n in data.files if n.startswith("out.")}
        except FileNotFoundError:
            raise CorruptRecording(arrays_path, "the file is missing") from None
        except Exception as exc:  # BadZipFile, zlib.error, EOFError, ValueError, OSError...
            why = ("not an .npz archive" if "pickled" in str(exc)  # numpy's fallback guess
                   else f"{type(exc).__name__}: {' '.join(str(exc).split())}")
            raise CorruptRecording(arrays_path, f"cannot read its arrays ({why})") from exc
        try:
            recording = Recording(meta["kernel"], meta["params"], meta["scalars"], inputs,
                                  outputs, meta["returned"], meta["tests"],
                                  meta.get("source_hash", ""),
                                  [list(g) for g in meta.get("aliases") or []],
                                  [list(p) for p in meta.get("overlaps") or []],
                                  _workload_of(meta.get("workload")),
                                  [int(o) for o in meta.get("overlap_offsets") or []])
            problem = _inconsistency(recording, meta)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CorruptRecording(meta_path, f"malformed metadata ({type(exc).__name__}: "
                                              f"{exc})") from exc
        if problem:
            raise CorruptRecording(arrays_path, problem)
        return recording

    def keys(self, kernel: str) -> list[str]:
        """Keys of the kernel's usable recordings: the index's (or, without a readable
        index, the files'), less any that cannot be read, each skipped with one warning
        naming its file (recording again repairs it)."""
        return [key for key, _ in self._usable(kernel)]

    def load_all(self, kernel: str) -> list[Recording]:
        """Every usable recording (see :meth:`keys`)."""
        return [recording for _, recording in self._usable(kernel)]

    def _usable(self, kernel: str) -> Iterator[tuple[str, Recording]]:
        for key in self._listed(kernel, rebuild=True):
            try:
                yield key, self.read(kernel, key)
            except CorruptRecording as exc:
                self._warn(f"pytest-r3: skipped recording {key} of kernel {kernel!r}: {exc}")

    def _listed(self, kernel: str, rebuild: bool = False) -> list[str]:
        """The keys the index lists, or the files' keys when it is missing or unreadable
        (then, with ``rebuild``, an index of the readable files is written if it can be)."""
        try:
            index = self._index_file(kernel)
        except CorruptRecording as exc:
            self._warn(f"pytest-r3: {exc.path} is unusable ({exc.reason}); going by the "
                       "recording files instead")
            if rebuild:
                self._rebuild_index(kernel)
            return self._files(kernel)
        return list(index["kept"]) if index else self._files(kernel)

    def _warn(self, message: str) -> None:
        message = " ".join(message.split())  # one line
        if message not in self._warned:
            self._warned.add(message)
            warnings.warn(CorruptStateWarning(message), stacklevel=2)

    def _files(self, kernel: str) -> list[str]:
        """Keys of the recordings in the folder, by their arrays file (no index to go by)."""
        return sorted(p.stem for p in self.kernel_dir(kernel).glob("*.npz"))

    def workloads(self, kernel: str) -> dict[str, float]:
        """The kernel's workload recordings: key -> weight (empty without any)."""
        index = self.index(kernel) or {}
        workloads = index.get("workloads") or {}
        return {key: float(weight) for key, weight in workloads.items()
                if key in index.get("kept", ())}

    def workload_metadata(self, kernel: str) -> dict[str, dict]:
        """Each kept workload's ``workload`` metadata (weight, origin, run), by key; read
        from the metadata files only (the arrays stay on disk)."""
        found = {}
        for key in self.workloads(kernel):
            try:
                meta = _read_json(self.kernel_dir(kernel) / f"{key}.json")
                workload = _workload_of(meta.get("workload"))
            except (CorruptRecording, ValueError, AttributeError):
                continue
            if workload:
                found[key] = workload
        return found

    def workloads_of(self, kernel: str, origin: str, run: str) -> dict[str, float]:
        """The workloads one recording session saved: key -> weight."""
        return {key: w["weight"] for key, w in self.workload_metadata(kernel).items()
                if w["origin"] == origin and w["run"] == run}

    def kernels(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.is_dir())

    def index(self, kernel: str) -> dict | None:
        """The index ``save`` wrote, or None if there is none; an unreadable one is rebuilt
        from the readable recording files (with a warning naming it)."""
        try:
            return self._index_file(kernel)
        except CorruptRecording as exc:
            self._warn(f"pytest-r3: {exc.path} is unusable ({exc.reason}); going by the "
                       "recording files instead")
            return self._rebuild_index(kernel)

    def _index_file(self, kernel: str) -> dict | None:
        """The index on disk, or None; an unreadable one raises CorruptRecording."""
        path = self.kernel_dir(kernel) / INDEX_FILE
        if not path.exists():
            return None
        index = _read_json(path)
        if not isinstance(index, dict) or not isinstance(index.get("kept"), list) or not all(
                isinstance(k, str) for k in index["kept"]):
            raise CorruptRecording(path, "not an index of recordings (no list of kept keys)")
        return index

    def _rebuild_index(self, kernel: str) -> dict:
        """An index of the readable recording files, written over a broken one if the
        folder is free and writable (else only returned)."""
        kept = []
        for key in self._files(kernel):
            try:
                kept.append(self.read(kernel, key))
            except CorruptRecording as exc:
                self._warn(f"pytest-r3: skipped recording {key} of kernel {kernel!r}: {exc}")
        index = _index_of(kernel, None, kept, [])
        index["rebuilt"] = True
        path = self.kernel_dir(kernel) / INDEX_FILE
        try:
            with file_lock(path, timeout=1.0):
                try:
                    self._index_file(kernel)
                except CorruptRecording:  # still broken (no save() repaired it meanwhile)
                    write_json_atomic(path, index)
        except R3Error:  # read-only, full, or busy: reading still works from the files
            pass
        return index

    def spec(self, kernel: str) -> dict | None:
        """The kernel's spec file (``kernel.json``) as written by ``--r3-record``, None if
        there is none; an unreadable one raises CorruptRecording naming it."""
        path = self.kernel_dir(kernel) / SPEC_FILE
        if not path.exists():
            return None
        data = _read_json(path)
        if not isinstance(data, dict) or not isinstance(data.get("spec"), dict):
            raise CorruptRecording(path, "not a kernel spec (no \"spec\" object)")
        return data

    def save(self, kernel: str, recordings: Iterable[Recording], cap_bytes: int,
             workload_cap_bytes: int | None = None) -> dict:
        """Keep a representative subset under ``cap_bytes``; write it and an index of choices.

        Recordings already on disk for this kernel are merged in (by key), so recording
        twice, or from two test runs, accumulates; stale files beyond the cap are removed.
        A new recording replaces one with the same inputs, and recordings made from another
        version of the kernel source are dropped (their outputs are no longer the answer).
        Workloads merge by origin: a new recording session of a test or command replaces
        what that origin recorded before, and saves of one session (an application's child
        processes) add up. Oracle recordings are kept under ``cap_bytes``, workloads under
        ``workload_cap_bytes`` (default: the same).
        """
        recordings = list(recordings)
        with file_lock(self.kernel_dir(kernel) / INDEX_FILE):
            return self._save(kernel, recordings, cap_bytes,
                              cap_bytes if workload_cap_bytes is None else workload_cap_bytes)

    def _save(self, kernel: str, recordings: list[Recording], cap_bytes: int,
              workload_cap_bytes: int) -> dict:
        current = {r.source_hash for r in recordings if r.source_hash}
        merged: dict[str, Recording] = {}
        stale: list[tuple[Recording, str]] = []
        unreadable: list[tuple[str, str]] = []  # (key, why): replaced by this session's
        for existing in self._readable(kernel, unreadable):
            if current and existing.source_hash and existing.source_hash not in current:
                # its outputs come from another version of the kernel: no longer the answer
                stale.append((existing, "recorded from another version of the kernel source"))
            else:
                merged[existing.key] = existing
        origins = {(r.workload["origin"], r.workload["run"]) for r in recordings
                   if r.workload is not None}
        for key, existing in list(merged.items()):
            if existing.workload is not None and any(
                    existing.workload["origin"] == origin and existing.workload["run"] != run
                    for origin, run in origins):
                del merged[key]
                stale.append((existing, "replaced: its origin was recorded again"))
        for recording in recordings:
            old = merged.get(recording.key)
            if old is not None and recording.workload is not None:  # one session, two saves
                recording.workload = {**recording.workload,
                                      "weight": recording.weight + old.weight}
            elif old is not None:  # same inputs: the new run's outputs win
                recording.tests = sorted(set(old.tests) | set(recording.tests))
            merged[recording.key] = recording
        oracle_kept, dropped = select([r for r in merged.values() if not r.is_workload],
                                      cap_bytes)
        workloads_kept, workloads_dropped = select_workloads(
            [r for r in merged.values() if r.is_workload], workload_cap_bytes)
        kept, dropped = oracle_kept + workloads_kept, dropped + workloads_dropped
        kept_keys = {r.key for r in kept}
        # a stale recording with the same inputs as a new one was replaced, not dropped
        dropped = [(r, why) for r, why in stale if r.key not in kept_keys] + dropped
        folder = self.kernel_dir(kernel)
        unreadable = [(key, why) for key, why in unreadable if key not in kept_keys]
        for key in [key for key, _ in unreadable] + [r.key for r, _ in dropped]:
            for suffix in (".npz", ".json"):
                (folder / f"{key}{suffix}").unlink(missing_ok=True)
        for recording in kept:
            self.write(recording)
        index = _index_of(kernel, cap_bytes, kept, dropped)
        index["dropped"] += [{"key": key, "nbytes": 0, "tests": [], "why": f"unreadable: {why}"}
                             for key, why in unreadable]
        if kept or dropped or unreadable:
            write_json_atomic(folder / INDEX_FILE, index)
        return index

    def _readable(self, kernel: str, unreadable: list[tuple[str, str]]) -> list[Recording]:
        """The recordings on disk that can be read; the others go to ``unreadable``."""
        if not self.kernel_dir(kernel).is_dir():
            return []
        try:
            index = self._index_file(kernel)
        except CorruptRecording:  # a broken index: go by the files (it is rewritten)
            index = None
        # the index's keys, and files it does not list (a save cut short by a crash)
        keys = list(dict.fromkeys([*(index["kept"] if index else []), *self._files(kernel)]))
        readable = []
        for key in keys:
            try:
                readable.append(self.read(kernel, key))
            except CorruptRecording as exc:
                unreadable.append((key, f"{exc.path.name}: {exc.reason}"))
        return readable


_REQUIRED_META = {"kernel", "params", "scalars", "returned", "tests"}


def _index_of(kernel: str, cap_bytes: int | None, kept: list[Recording],
              dropped: list[tuple[Recording, str]]) -> dict:
    return {
        "kernel": kernel,
        "cap_bytes": cap_bytes,
        "kept": [r.key for r in kept],
        "kept_bytes": sum(r.nbytes for r in kept),
        "workloads": {r.key: r.weight for r in kept if r.is_workload},
        "dropped": [{"key": r.key, "nbytes": r.nbytes, "tests": r.tests, "why": why}
                    for r, why in dropped],
        "weak": [r.key for r in kept if not r.is_workload and r.weak_outputs()
                 and len(r.weak_outputs()) == len(r.outputs)],
        "aliased": [r.key for r in kept if r.aliases],
    }


def _workload_of(value: object) -> dict | None:
    """A workload's metadata as read back (None for an oracle recording); raises
    ValueError when it is there but malformed."""
    if value is None:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("origin"), str):
        raise ValueError(f"workload metadata {value!r} names no origin")
    weight = float(value.get("weight", 1.0))
    if not weight > 0:
        raise ValueError(f"workload weight {weight!r} is not positive")
    return {"weight": weight, "origin": value["origin"], "run": str(value.get("run", ""))}


def _read_json(path: Path) -> object:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise CorruptRecording(path, "the file is missing") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorruptRecording(path, f"not readable JSON ({type(exc).__name__}: {exc})") from exc


def _inconsistency(recording: Recording, meta: dict) -> str | None:
    """What does not fit between a recording's metadata and its arrays, or None."""
    pointers = {p["name"] for p in recording.params if p["is_pointer"]}
    written = {p["name"] for p in recording.params if p["is_pointer"] and p["written"]}
    missing = sorted(pointers - set(recording.inputs)) + sorted(
        f"out.{n}" for n in written - set(recording.outputs))
    if missing:
        return f"arrays missing for {', '.join(missing)}"
    scalars = {p["name"] for p in recording.params if not p["is_pointer"]}
    absent = sorted(scalars - set(recording.scalars))
    if absent:
        return f"scalars missing from the metadata: {', '.join(absent)}"
    for name, described in (meta.get("arrays") or {}).items():
        array = recording.inputs.get(name)
        if array is not None and (array.dtype.str != described["dtype"]
                                  or list(array.shape) != list(described["shape"])):
            return (f"array {name!r} is {array.dtype.str} {list(array.shape)}, the metadata "
                    f"says {described['dtype']} {described['shape']}")
    for name, after in recording.outputs.items():
        before = recording.inputs.get(name)
        if before is not None and (before.dtype != after.dtype or before.shape != after.shape):
            return f"output {name!r} does not match its input's dtype and shape"
    for group in recording.aliases + recording.overlaps:
        if not set(group) <= pointers:
            return f"aliasing names unknown pointer parameters {group}"
    if recording.overlap_offsets and len(recording.overlap_offsets) != len(recording.overlaps):
        return "overlap_offsets does not give one offset per overlapping pair"
    return None


def select(recordings: list[Recording],
           cap_bytes: int) -> tuple[list[Recording], list[tuple[Recording, str]]]:
    """Pick a subset under the cap: one of each distinct shape first, smallest first."""
    ordered = sorted(recordings, key=lambda r: (r.nbytes, r.key))
    seen_shapes: set[str] = set()
    first_of_shape, repeats = [], []
    for recording in ordered:
        if recording.shape_signature in seen_shapes:
            repeats.append(recording)
        else:
            seen_shapes.add(recording.shape_signature)
            first_of_shape.append(recording)
    kept, dropped, total = [], [], 0
    for recording in first_of_shape + repeats:
        if total + recording.nbytes <= cap_bytes:
            kept.append(recording)
            total += recording.nbytes
        else:
            dropped.append((recording, f"over the per-kernel cap of {cap_bytes} bytes"))
    kept.sort(key=lambda r: r.key)
    return kept, dropped


def select_workloads(recordings: list[Recording],
                     cap_bytes: int) -> tuple[list[Recording], list[tuple[Recording, str]]]:
    """The heaviest workloads (weight, then the smaller first) that fit under the cap."""
    ordered = sorted(recordings, key=lambda r: (-r.weight, r.nbytes, r.key))
    kept, dropped, total = [], [], 0
    for recording in ordered:
        if total + recording.nbytes <= cap_bytes:
            kept.append(recording)
            total += recording.nbytes
        else:
            dropped.append((recording, f"workload over the per-kernel cap of {cap_bytes} "
                                       "bytes"))
    kept.sort(key=lambda r: r.key)
    return kept, dropped
