"""Recording kernel launches from the reference tests, and the on-disk recording store.

A recording is everything needed to re-run one launch in isolation: scalar arguments,
every array argument as it was before the launch, every written array after it, and the
return value. On disk it is ``<hash>.npz`` (arrays, ``in.<name>`` / ``out.<name>``) beside
``<hash>.json`` (metadata) under ``.r3/recordings/<kernel>/``; the hash covers the inputs,
so the same launch seen twice is stored once.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .outputs import write_bytes_atomic, write_json_atomic

DEFAULT_CAP_BYTES = 64 * 1024 * 1024
INDEX_FILE = "index.json"


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

    @property
    def key(self) -> str:
        """Content hash of the launch: read-only inputs, scalars and the written results.

        The prior content of written buffers is left out: for output-only buffers it is
        whatever memory held (np.empty), and for in-out buffers it shows in the results.
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
        return ";".join(parts)

    def arguments(self) -> list[object]:
        """Fresh copies of the launch arguments in parameter order."""
        return [self.inputs[p["name"]].copy() if p["is_pointer"] else self.scalars[p["name"]]
                for p in self.params]

    def weak_outputs(self) -> list[str]:
        """Written buffers whose content before the launch already equals the result."""
        return [name for name, after in self.outputs.items()
                if np.array_equal(self.inputs[name], after, equal_nan=after.dtype.kind == "f")]

    def metadata(self) -> dict:
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
        }


def capture(kernel, args: tuple, run: Callable[[], object], test: str) -> tuple[object, Recording]:
    """Run one launch, recording it; the caller sees exactly what an unrecorded run gives."""
    signature = kernel.signature
    to_host = kernel.backend.to_host  # device arrays (a GPU kernel's) are copied back
    inputs = {p.name: to_host(a) for p, a in zip(signature.params, args, strict=False)
              if p.is_pointer}
    result = run()
    outputs = {p.name: to_host(a) for p, a in zip(signature.params, args, strict=False)
               if p.written}
    scalars = {p.name: (int(a) if np.dtype(p.dtype).kind in "iub" else float(a))
               for p, a in zip(signature.params, args, strict=False) if not p.is_pointer}
    params = [{"name": p.name, "dtype": p.dtype, "is_pointer": p.is_pointer,
               "written": p.written, "ctype": p.ctype} for p in signature.params]
    returned = None if result is None else (float(result) if isinstance(result, float)
                                            else int(result))
    recording = Recording(kernel.name, params, scalars, inputs, outputs, returned, [test],
                          kernel.source.hash)
    return result, recording


class RecordingStore:
    """``.r3/recordings/<kernel>/``: npz + json per recording, and an index of choices."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def kernel_dir(self, kernel: str) -> Path:
        return self.root / kernel

    def write(self, recording: Recording) -> Path:
        folder = self.kernel_dir(recording.kernel)
        arrays = {f"in.{n}": a for n, a in recording.inputs.items()}
        arrays.update({f"out.{n}": a for n, a in recording.outputs.items()})
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        write_bytes_atomic(folder / f"{recording.key}.npz", buffer.getvalue())
        return write_json_atomic(folder / f"{recording.key}.json", recording.metadata())

    def read(self, kernel: str, key: str) -> Recording:
        folder = self.kernel_dir(kernel)
        meta = json.loads((folder / f"{key}.json").read_text())
        with np.load(folder / f"{key}.npz") as data:
            inputs = {n[3:]: data[n] for n in data.files if n.startswith("in.")}
            outputs = {n[4:]: data[n] for n in data.files if n.startswith("out.")}
        return Recording(meta["kernel"], meta["params"], meta["scalars"], inputs, outputs,
                         meta["returned"], meta["tests"], meta.get("source_hash", ""))

    def keys(self, kernel: str) -> list[str]:
        index = self.index(kernel)
        if index:
            return list(index["kept"])
        return sorted(p.stem for p in self.kernel_dir(kernel).glob("*.json")
                      if p.name != INDEX_FILE)

    def load_all(self, kernel: str) -> list[Recording]:
        return [self.read(kernel, key) for key in self.keys(kernel)]

    def kernels(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.is_dir())

    def index(self, kernel: str) -> dict | None:
        path = self.kernel_dir(kernel) / INDEX_FILE
        return json.loads(path.read_text()) if path.exists() else None

    def save(self, kernel: str, recordings: Iterable[Recording], cap_bytes: int) -> dict:
        """Keep a representative subset under ``cap_bytes``; write it and an index of choices.

        Recordings already on disk for this kernel are merged in (by key), so recording
        twice, or from two test runs, accumulates; stale files beyond the cap are removed.
        A new recording replaces one with the same inputs, and recordings made from another
        version of the kernel source are dropped (their outputs are no longer the answer).
        """
        recordings = list(recordings)
        current = {r.source_hash for r in recordings if r.source_hash}
        merged: dict[str, Recording] = {}
        stale: list[tuple[Recording, str]] = []
        for existing in self.load_all(kernel) if self.kernel_dir(kernel).is_dir() else []:
            if current and existing.source_hash and existing.source_hash not in current:
                # its outputs come from another version of the kernel: no longer the answer
                stale.append((existing, "recorded from another version of the kernel source"))
            else:
                merged[existing.key] = existing
        for recording in recordings:
            if recording.key in merged:  # same inputs: the new run's outputs win
                recording.tests = sorted(set(merged[recording.key].tests) | set(recording.tests))
            merged[recording.key] = recording
        kept, dropped = select(list(merged.values()), cap_bytes)
        kept_keys = {r.key for r in kept}
        # a stale recording with the same inputs as a new one was replaced, not dropped
        dropped = [(r, why) for r, why in stale if r.key not in kept_keys] + dropped
        for recording in kept:
            self.write(recording)
        folder = self.kernel_dir(kernel)
        for recording, _ in dropped:
            for suffix in (".npz", ".json"):
                (folder / f"{recording.key}{suffix}").unlink(missing_ok=True)
        index = {
            "kernel": kernel,
            "cap_bytes": cap_bytes,
            "kept": [r.key for r in kept],
            "kept_bytes": sum(r.nbytes for r in kept),
            "dropped": [{"key": r.key, "nbytes": r.nbytes, "tests": r.tests, "why": why}
                        for r, why in dropped],
            "weak": [r.key for r in kept if r.weak_outputs()
                     and len(r.weak_outputs()) == len(r.outputs)],
        }
        if kept or dropped:
            write_json_atomic(folder / INDEX_FILE, index)
        return index


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
