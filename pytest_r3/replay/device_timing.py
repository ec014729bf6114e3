"""What a GPU timing recorded besides its samples, and the speed-of-light check on it.

A GPU launch is timed by CUDA events on its stream after an L2 flush (see
``backends/cuda/gpu_timing``). The worker reads the device's facts (L2 size, memory clock,
bus width) when it starts, before any candidate runs in it, and the clocks (NVML) after
each timing. The parent then checks what the timing claims against physics: a launch
cannot move its bytes faster than the memory's peak bandwidth, so a per-launch time below
``bytes / peak`` is not a measurement of the kernel (a launch that did nothing, events not
around the launch, a forged figure) and the evaluation is ``suspect``: never ranked,
locked or called tuned. The check is the parent's arithmetic on the facts read before any
candidate ran; nothing the worker says after that changes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from ..backends.cuda.gpu_timing import WARMUP_LAUNCHES, Clocks, DeviceFacts

# where a case's bytes moved came from: the kernel's work= (declared), or the sizes of the
# buffers the launch reads and writes, each counted once (a lower bound for most kernels)
BytesSource = Literal["work=", "buffer sizes"]


@runtime_checkable
class DeviceTimed(Protocol):
    """A backend whose launches a device times (``cpu_clock`` "none"), and that can say
    what the device is and how its clocks stand."""

    def device_facts(self) -> dict: ...

    def clocks(self) -> dict: ...


@dataclass(frozen=True)
class DeviceTiming:
    """A GPU timing's conditions: the device, its clocks when the timing ended, the L2
    flush and warm-up used, each timed case's bytes moved, and ``suspect``: why the
    figures are physically impossible ("" when they are not)."""

    facts: DeviceFacts = field(default_factory=DeviceFacts)
    clocks: Clocks = field(default_factory=Clocks)
    flush_bytes: int = 0
    warmup_launches: int = WARMUP_LAUNCHES
    bytes_moved: tuple[float, ...] = ()
    bytes_source: BytesSource = "buffer sizes"
    suspect: str = ""

    def describe(self) -> str:
        """One line for a report: device, peak bandwidth, L2 flush and clocks."""
        peak = self.facts.peak_bandwidth
        parts = [self.facts.name or "GPU",
                 f"peak {peak / 1e9:.0f} GB/s" if peak else "peak bandwidth unknown",
                 f"L2 flush {self.flush_bytes >> 20} MiB between samples",
                 f"{self.warmup_launches} warm-up launches", self.clocks.describe()]
        return "; ".join(parts)

    def as_dict(self) -> dict:
        return {"facts": self.facts.as_dict(), "clocks": self.clocks.as_dict(),
                "flush_bytes": self.flush_bytes, "warmup_launches": self.warmup_launches,
                "bytes_moved": list(self.bytes_moved), "bytes_source": self.bytes_source,
                "suspect": self.suspect}

    @classmethod
    def from_dict(cls, data: object) -> DeviceTiming | None:
        if not isinstance(data, dict):
            return None
        source = str(data.get("bytes_source", "buffer sizes"))
        return cls(DeviceFacts.from_dict(data.get("facts")) or DeviceFacts(),
                   Clocks.from_dict(data.get("clocks")), int(data.get("flush_bytes", 0)),
                   int(data.get("warmup_launches", WARMUP_LAUNCHES)),
                   tuple(float(x) for x in data.get("bytes_moved", ())),
                   source if source == "work=" else "buffer sizes",
                   str(data.get("suspect", "")))


def lower_bound(bytes_moved: float, peak: float) -> float:
    """Seconds a launch moving ``bytes_moved`` takes at least at ``peak`` bytes/s (0 when
    the peak is unknown: no bound)."""
    return bytes_moved / peak if peak > 0 and bytes_moved > 0 else 0.0


def speed_of_light(per_launch: Sequence[tuple[str, float]], bytes_moved: Sequence[float],
                   peak: float, source: BytesSource) -> str:
    """Why these per-launch times are impossible, or "" when each is at least its case's
    ``bytes / peak``. ``per_launch``: (which variant and case, seconds) pairs, in the
    order of ``bytes_moved``'s cases (several pairs may share a case)."""
    for (what, seconds), moved in zip(per_launch, bytes_moved, strict=True):
        bound = lower_bound(moved, peak)
        if seconds < bound:
            hint = ("" if source == "work=" else "; if the kernel reads only part of its "
                    "buffers, declare its traffic with work=lambda a: {'bytes': ...}")
            return (f"speed of light: {what} took {seconds * 1e6:.3g} us per launch, but "
                    f"moving its {moved / 1e6:.3g} MB ({source}) at the device's peak "
                    f"{peak / 1e9:.4g} GB/s (memory clock x bus width x 2) takes at least "
                    f"{bound * 1e6:.3g} us: the timing cannot be right (a launch that did "
                    f"no work, or events not around it); nothing is claimed{hint}")
    return ""
