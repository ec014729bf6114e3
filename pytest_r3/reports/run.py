"""What a report says about the run itself: when, on which commit, on which machine (CPU
model, cores, how loaded it was) and with which pytest-r3, so a figure can be judged by
where it was measured."""

from __future__ import annotations

import os
import platform
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone

LARGE = 512 * 2**20  # bytes moved by the bandwidth measured from memory, past any cache


@dataclass
class RunInfo:
    kind: str = "tuning"                 # "tuning" or "check"
    date: str = ""                       # ISO 8601, UTC
    commit: str = ""                     # short id, "+dirty" when the tree had changes
    branch: str = ""
    cpu: str = ""                        # the CPU model, as the OS names it
    cores: int = 0
    load: list[float] = field(default_factory=list)  # load average over 1, 5, 15 minutes
    load_at_start: list[float] = field(default_factory=list)
    version: str = ""                    # pytest-r3's
    python: str = ""
    machine: str = ""                    # OS and architecture
    stream_bandwidth: float = 0.0        # bytes/s of numpy's y += x from memory; 0: not
                                         # measured
    matmul_flops: float = 0.0            # flop/s of a one-thread float32 BLAS matmul

    @classmethod
    def collect(cls, kind: str = "tuning", load_at_start: list[float] | None = None,
                bandwidth: bool = False) -> RunInfo:
        from .. import __version__

        commit = _commit()
        return cls(kind=kind, date=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                   commit=commit.get("id", ""), branch=commit.get("branch", ""),
                   cpu=cpu_model(), cores=os.cpu_count() or 0, load=load_average(),
                   load_at_start=list(load_at_start or []), version=__version__,
                   python=platform.python_version(),
                   machine=f"{platform.system()} {platform.machine()}",
                   stream_bandwidth=stream_bandwidth() if bandwidth else 0.0,
                   matmul_flops=matmul_flops() if bandwidth else 0.0)

    def as_dict(self) -> dict:
        return asdict(self)

    def describe_load(self) -> str:
        """``load 1.9 at the start, 2.4 at the end (1-minute average) on 2 cores``."""
        if not self.load:
            return "load unknown"
        start = (f"{self.load_at_start[0]:.1f} at the start, "
                 if self.load_at_start else "")
        return (f"load {start}{self.load[0]:.1f} at the end (1-minute average; 5-minute "
                f"{self.load[1]:.1f}) on {self.cores} cores")

    def describe_peaks(self) -> str:
        """What this machine reaches, measured after the run for kernels that declare their
        work: the yardsticks of their achieved throughput ("" when not measured)."""
        parts = []
        if self.stream_bandwidth:
            parts.append(f"{self.stream_bandwidth / 1e9:.3g} GB/s streaming "
                         f"{LARGE / 2**20:.0f} MiB (numpy y += x)")
        if self.matmul_flops:
            parts.append(f"{self.matmul_flops / 1e9:.3g} GFLOP/s in a one-thread float32 "
                         "BLAS matmul")
        return ", ".join(parts)


def stream_bandwidth(nbytes: float = LARGE, repeats: int = 5) -> float:
    """The bytes per second numpy's ``y += x`` on float32 arrays reaches here when it moves
    ``nbytes`` in all (x and y read, y written; the best of ``repeats``): the practical peak
    of a memory-bound kernel moving as much, from whichever cache or memory holds it. (A
    copy would be no yardstick: a large memcpy bypasses the caches.)"""
    import time

    import numpy as np

    count = max(int(min(nbytes, 2.0**31)) // 12, 1024)
    x, y = np.ones(count, dtype=np.float32), np.zeros(count, dtype=np.float32)
    np.add(x, y, out=y)  # every page touched before timing
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        np.add(x, y, out=y)
        best = min(best, time.perf_counter() - start)
    return 12 * count / best


MATMUL_PROBE = """
import time, numpy as np
a = np.ones((512, 512), np.float32); b = np.ones_like(a); best = float("inf")
for _ in range(5):
    start = time.perf_counter(); a @ b; best = min(best, time.perf_counter() - start)
print(2 * 512 ** 3 / best)
"""


def matmul_flops() -> float:
    """The flop/s numpy's BLAS reaches in a float32 matmul on one thread (a fresh process,
    so the thread limit holds): the machine's practical peak for a one-thread compute-bound
    kernel. 0.0 when it cannot be measured."""
    import subprocess
    import sys

    one_thread = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                         "MKL_NUM_THREADS", "BLIS_NUM_THREADS")}
    try:
        done = subprocess.run([sys.executable, "-c", MATMUL_PROBE], capture_output=True,
                              text=True, timeout=60, env={**os.environ, **one_thread})
        return float(done.stdout.strip())
    except (OSError, ValueError, subprocess.SubprocessError):
        return 0.0


def load_average() -> list[float]:
    try:
        return [round(value, 2) for value in os.getloadavg()]
    except (OSError, AttributeError):  # not on every platform
        return []


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo on Linux, else what platform says."""
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _commit() -> dict:
    """The checkout's commit as pytest-benchmark reads it (git or hg), short."""
    try:
        from pytest_benchmark.utils import get_commit_info

        info = get_commit_info()
    except Exception:  # not a repository, no git: the report says nothing about it
        return {}
    commit = str(info.get("id") or "")[:12]
    if commit in ("", "unversioned"):
        return {}
    if commit and info.get("dirty"):
        commit += "+dirty"
    return {"id": commit, "branch": str(info.get("branch") or "")}
