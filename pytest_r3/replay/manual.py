"""Replaying recordings by hand, from Python or ``pytest-r3 replay`` (to debug a variant)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from ..errors import R3Error
from ..record.store import RecordingStore
from .client import ReplayServer
from .probes import PROBE_MARGIN
from .protocol import Candidate, KernelSpec, ReplaySettings, Result

SPEC_FILE = "kernel.json"


def load_spec(r3_dir: str | Path, kernel: str) -> KernelSpec:
    """The kernel spec saved beside its recordings by ``pytest --r3-record``."""
    root = Path(r3_dir) / "recordings"
    path = root / kernel / SPEC_FILE
    if not path.exists():
        known = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
        raise R3Error(
            f"no recordings of kernel {kernel!r} under {root} (recorded kernels: "
            f"{', '.join(known) or 'none'}); run `pytest --r3-record` first")
    return KernelSpec.from_dict(json.loads(path.read_text())["spec"])


def replay(
    kernel: str,
    candidate: Candidate | None = None,
    *,
    r3_dir: str | Path = ".r3",
    recordings: list[str] | None = None,
    settings: ReplaySettings | None = None,
    source_file: str | Path | None = None,
    tolerance: dict | None = None,
) -> Result:
    """Evaluate ``candidate`` (default: the baseline) on the kernel's recordings.

    ``recordings`` restricts the run to some recording keys; ``source_file`` replaces the
    kernel's source text with that file's (the declared source is left untouched);
    ``tolerance`` replaces the one saved with the recordings (the declaration's, today).
    """
    spec = load_spec(r3_dir, kernel)
    if tolerance is not None:
        spec = dataclasses.replace(spec, tolerance=dict(tolerance))
    store = RecordingStore(Path(r3_dir) / "recordings")
    keys = store.keys(kernel)
    if recordings:
        unknown = sorted(set(recordings) - set(keys))
        if unknown:
            raise R3Error(f"kernel {kernel!r} has no recording(s) {', '.join(unknown)}; "
                          f"recordings: {', '.join(keys)}")
        keys = list(recordings)
    candidate = candidate or Candidate(label="baseline")
    if source_file is not None:
        candidate = Candidate(candidate.macros, candidate.pipeline,
                              Path(source_file).read_text(), candidate.launch,
                              candidate.label or str(source_file))
    with ReplayServer(spec, store.root, keys, settings) as server:
        return server.evaluate(candidate)


def probe_verdicts(result: Result) -> list[str]:
    """One line per slow-path probe ``result`` was timed on (``ReplaySettings.probes``), each
    with its verdict as a claim's confirmation reads it (slower beyond ``PROBE_MARGIN``:
    no noise band is learnt here, and a claim's band is at least that), or one line saying
    why none was timed: probes are timed only where the variant is faster, as when tuning."""
    if not result.probes:
        if not result.ok or result.timing is None:
            return [f"slow-path probes: not timed (the variant is {result.status})"]
        low = result.timing.interval[0]
        if low <= 1.0 or result.timing.within_noise:
            return [f"slow-path probes: not timed (not faster than the original beyond noise: "
                    f"the 95% interval starts at {low:.2f}x; only a faster variant is probed, "
                    "as a claim's confirmation does)"]
        return ["slow-path probes: none (the baseline could not run any, or no buffer "
                "could be probed)"]
    lines = []
    for probe in result.probes:
        low, high = probe.timing.interval
        verdict = (f"slower than the original beyond the {PROBE_MARGIN:.0%} margin: a claim "
                   "would not be locked") if probe.slower(PROBE_MARGIN) else "not slower"
        lines.append(f"slow-path probe {probe.label}: {probe.timing.speedup:.2f}x (95% "
                     f"interval {low:.2f}-{high:.2f}): {verdict}")
    return lines
