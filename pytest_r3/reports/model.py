"""What a report says about one kernel after tuning (plain data, built by the plugin)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from .status import Status


@dataclass
class KernelReport:
    kernel: str
    target: str
    status: Status                   # what became of the kernel (see reports/status.py)
    baseline_seconds: float | None = None
    tuned_seconds: float | None = None
    speedup: float | None = None
    speedup_q1: float | None = None
    speedup_q3: float | None = None
    interval: list[float] = field(default_factory=list)  # the speedup's 95% interval
    dropped_share: float | None = None  # of timed samples, dropped as descheduled
    # this machine's band of no difference for the kernel ([low, high], from timing the
    # baseline against itself); a claim's whole interval lies above it
    noise_band: list[float] = field(default_factory=list)
    search_estimate: float | None = None  # the search's figure for the winner: an estimate
    confirmed_in: str = ""           # where the speedup above was measured: "fresh worker
                                     # process, ..." for a claim, "" when nothing was claimed
    # a claim's timings, one per fresh worker process (speedup, interval, rounds,
    # dropped_share): the speedup and interval above cover them (see tuning/claims)
    confirmations: list[dict] = field(default_factory=list)
    evaluations: int = 0
    new_evaluations: int = 0
    optimizer: str = ""
    changes: dict = field(default_factory=dict)
    convergence: list[float] = field(default_factory=list)
    baseline_samples: list[float] = field(default_factory=list)
    tuned_samples: list[float] = field(default_factory=list)
    review: bool = False
    notes: list[str] = field(default_factory=list)
    evolution: list[dict] = field(default_factory=list)  # per generation of LLM rewrites
    archive: list[dict] = field(default_factory=list)    # MAP-Elites cells at the end
    timed_on: str = ""               # "workloads" or "test inputs" (the oracles' recordings)
    # per timed workload: key, origin, shape, weight, baseline/candidate medians, speedup
    workloads: list[dict] = field(default_factory=list)
    # a specialised kernel (specialize=): its row sums up, one sub-row per bucket of sizes
    bucket: str = ""                 # the bucket a sub-row tuned, e.g. "n=1024"
    buckets: list[KernelReport] = field(default_factory=list)
    # every evaluation of the search, in order: index, speedup (None unless measured),
    # outcome ("ok", "lost race", "failed"), status, settings (as written), finalist
    evaluation_log: list[dict] = field(default_factory=list)
    # failed candidates by cause, most frequent first: status, count, and one example's
    # settings and first diagnostic line
    failure_causes: list[dict] = field(default_factory=list)
    # on a GPU, the confirmation's conditions: device facts, clocks (SM, memory,
    # temperature, power, throttle reasons), L2 flush, warm-up, bytes moved; "described":
    # them in one line
    gpu: dict = field(default_factory=dict)
    # better candidates a slow-path probe refused at their confirmation, before the one
    # this row claims (or keeps the baseline for) was confirmed: settings, source_rewrite,
    # confirmed_speedup, probes (the labels it read slower on), reason (the row's note)
    refused: list[dict] = field(default_factory=list)

    @property
    def label(self) -> str:
        """The kernel's name, with the bucket for a bucket's sub-row: ``matvec [n=1024]``."""
        return f"{self.kernel} [{self.bucket}]" if self.bucket else self.kernel

    def __post_init__(self) -> None:
        if not isinstance(self.status, Status):  # free text is refused where it is made
            raise TypeError(f"a report row's status is a Status, not {self.status!r}")

    def as_dict(self) -> dict:
        return asdict(self)  # the status as {"outcome": ..., "detail": ...}

    @classmethod
    def from_dict(cls, data: dict) -> KernelReport:
        """A row written by :meth:`as_dict` (keys it does not know are ignored)."""
        known = {f.name for f in fields(cls)} - {"buckets"}
        values = {key: value for key, value in data.items() if key in known}
        row = cls(**{**values, "status": Status.from_data(data.get("status", ""))})
        row.buckets = [cls.from_dict(sub) for sub in data.get("buckets") or ()]
        return row

    @property
    def baseline_kept(self) -> bool:
        """The search ran and found nothing to lock: the baseline stays."""
        return self.status.outcome == "baseline kept"

    def why_no_figures(self) -> str:
        """Why a row has no timings ("" when it has some): its last note, else its status's
        detail, so a CUDA kernel in emulation says so where its figures would be."""
        if self.speedup is not None or self.baseline_seconds is not None:
            return ""
        return self.notes[-1] if self.notes else self.status.detail

    def other_notes(self) -> list[str]:
        """The notes not already shown as :meth:`why_no_figures`."""
        why = self.why_no_figures()
        return [note for note in self.notes if note != why]

    def describe_interval(self) -> str:
        """The speedup with its 95% interval, ``2.91x [2.80-3.02]``, or "-"."""
        if self.speedup is None:
            return "-"
        if len(self.interval) != 2:
            return f"{self.speedup:.2f}x"
        return f"{self.speedup:.2f}x [{self.interval[0]:.2f}-{self.interval[1]:.2f}]"

    def describe_confirmation(self) -> str:
        """One line on what the speedup rests on: where it was confirmed, its interval, the
        noise band, the share of samples dropped (a check's measurement too), and the
        search's estimate ("" if none)."""
        parts = []
        if self.speedup is not None and self.confirmed_in:
            parts.append(f"confirmed in a {self.confirmed_in}: {self.speedup:.2f}x"
                         + (f", 95% interval {self.interval[0]:.2f}-{self.interval[1]:.2f}"
                            if len(self.interval) == 2 else ""))
        if len(self.noise_band) == 2:
            parts.append(f"noise band {self.noise_band[0]:.3f}-{self.noise_band[1]:.3f} "
                         "(baseline against itself)")
        if self.dropped_share is not None and self.speedup is not None:  # tune and check
            parts.append(f"{100 * self.dropped_share:.0f}% of timed samples dropped")
        if self.search_estimate is not None:
            parts.append(f"search estimate {self.search_estimate:.2f}x")
        if self.gpu.get("described"):
            parts.append(str(self.gpu["described"]))
        return "; ".join(parts)

    def describe_changes(self) -> str:
        if not self.changes:
            return "-"
        parts = describe_settings(self.changes.get("macros", {}),
                                  self.changes.get("pipeline", {}))
        if self.changes.get("source"):
            parts += ", source rewrite" if parts != "-" else "source rewrite"
        return parts

    def describe_failures(self, limit: int = 3) -> list[str]:
        """The top causes of failed candidates, one line each with an example."""
        return [f"{cause['count']} {cause['status']}, e.g. {cause['example']}: "
                f"{cause['diagnostic'] or 'no diagnostic'}"
                for cause in self.failure_causes[:limit]]


def setting_value(value: object) -> str:
    """A setting as a person writes it: ``simplify_cfg,reassociate``, not a Python list."""
    if isinstance(value, (list, tuple)):
        return ",".join(setting_value(v) for v in value) or "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def describe_settings(macros: dict, pipeline: dict) -> str:
    """``LANES=8, passes_before=new_gvn,loop_simplify``; "-" for none."""
    parts = [f"{k}={setting_value(v)}" for k, v in {**macros, **pipeline}.items()]
    return ", ".join(parts) or "-"


def with_buckets(rows: list[KernelReport]) -> list[KernelReport]:
    """Each row followed by its buckets' sub-rows (a specialised kernel's variants)."""
    return [shown for row in rows for shown in (row, *row.buckets)]


def human_seconds(seconds: float | None) -> str:
    """``342 us``, ``1.43 ms``, ``12.5 ns``: three significant figures in a fitting unit."""
    if seconds is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if abs(seconds) >= scale * 0.9995 or unit == "ns":
            value = seconds / scale
            digits = 0 if abs(value) >= 99.95 else 1 if abs(value) >= 9.995 else 2
            return f"{value:.{digits}f} {unit}"
    return "-"
