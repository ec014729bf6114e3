"""``report.json`` in pytest-benchmark's format, so ``pytest-benchmark compare`` reads it.

Each kernel gives two benchmarks in one group: the baseline and the tuned variant, with
the per-round times measured interleaved during the final confirmation.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from ..outputs import write_json_atomic
from .model import KernelReport, with_buckets
from .run import RunInfo

OPTIONS = {"disable_gc": False, "timer": "perf_counter", "min_rounds": 1, "max_time": 0.0,
           "min_time": 0.0, "warmup": True}


def _benchmark(row: KernelReport, which: str, samples: list[float]) -> dict:
    from pytest_benchmark.stats import Stats

    stats = Stats()
    for sample in samples:
        stats.update(sample)
    data = stats.as_dict()
    data["iterations"] = 1
    data["data"] = list(samples)
    return {
        "group": f"r3:{row.label}",
        "name": f"{row.label}[{which}]",
        "fullname": f"r3::{row.label}[{which}]",
        "params": {"variant": which},
        "param": which,
        "extra_info": {"target": row.target, "status": row.status.as_dict(), "speedup": row.speedup,
                       "baseline_kept": row.baseline_kept,
                       "interval": row.interval, "noise_band": row.noise_band,
                       "dropped_share": row.dropped_share, "confirmed_in": row.confirmed_in,
                       "search_estimate": row.search_estimate,
                       "changes": row.changes, "evaluations": row.evaluations,
                       "timed_on": row.timed_on, "gpu": row.gpu,
                       "workloads": [{k: v for k, v in w.items() if not k.endswith("samples")}
                                     for w in row.workloads]},
        "options": OPTIONS,
        "stats": data,
    }


def build(rows: list[KernelReport], run: RunInfo | None = None) -> dict:
    import pytest_benchmark
    from pytest_benchmark.plugin import pytest_benchmark_generate_machine_info
    from pytest_benchmark.utils import get_commit_info

    benchmarks = []
    for row in with_buckets(rows):
        if row.baseline_samples:
            benchmarks.append(_benchmark(row, "baseline", row.baseline_samples))
        elif row.baseline_seconds is not None:  # a kept baseline: its median, one datum
            benchmarks.append(_benchmark(row, "baseline", [row.baseline_seconds]))
        if row.tuned_samples:
            benchmarks.append(_benchmark(row, "tuned", row.tuned_samples))
    return {
        "machine_info": pytest_benchmark_generate_machine_info(),
        "commit_info": get_commit_info(),
        "benchmarks": benchmarks,
        "datetime": datetime.now(timezone.utc).isoformat(),
        "version": pytest_benchmark.__version__,
        # pytest-r3's own: every kernel's row (one without timings too), for merging
        "r3": {"run": (run or RunInfo()).as_dict(),
               "kernels": [row.as_dict() for row in rows]},
    }


def write(path: Path, rows: list[KernelReport], run: RunInfo | None = None) -> Path:
    return write_json_atomic(path, build(rows, run))


def merged(path: Path, rows: list[KernelReport]) -> list[KernelReport]:
    """``rows``, then the rows of the report at ``path`` for kernels ``rows`` lacks (a run
    limited with --r3-kernels keeps the others' last results), each with a note saying so."""
    try:
        data = json.loads(Path(path).read_text())
        earlier = data["r3"]["kernels"]
        date = data["r3"]["run"].get("date", "an earlier run")
        kept = [KernelReport.from_dict(item) for item in earlier]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return rows  # no earlier report, or one from before rows were kept
    present = {row.kernel for row in rows}
    for row in kept:
        if row.kernel not in present:
            row.notes = [n for n in row.notes if not n.startswith("not in this run")]
            row.notes.append(f"not in this run (--r3-kernels): the result of {date}")
            rows = [*rows, row]
    return rows
