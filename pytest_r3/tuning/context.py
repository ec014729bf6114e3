"""What a tuning or checking run needs besides the kernel: settings, where state lives,
how to re-run a kernel's oracle tests, and where progress goes (a callback, so this package
never imports the pytest plugin)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..outputs import make_dirs
from ..replay.pool import ServerPool
from ..replay.protocol import KernelSpec, ReplaySettings


@dataclass(frozen=True)
class TuningSettings:
    """Every knob of ``--r3-tune`` and ``--r3-check``, validated once, before tests run."""

    budget: object                      # search.tuner.Budget
    workers: int = 1
    optimizer: str = "NGOpt"
    seed: int = 0
    search_pipeline: bool = True
    replay: ReplaySettings = field(default_factory=ReplaySettings)
    address_space: int = 8 * 1024**3
    check_threshold: float = 0.1        # a fraction: 0.1 fails a 10% slowdown
    check_fail: tuple = ()              # pytest-benchmark RegressionChecks (median:5%...)
    check_timing_rounds: int = 11
    retune: bool = False                # replace lock entries even with a weaker result
    llm: object = None                  # llm.client.LLMSettings, or None: no rewrites
    evolution: object = None            # llm.evolution.EvolutionSettings
    dask: str = ""                      # --r3-dask address; "": the local pool


@dataclass
class Tuning:
    """One run: settings, the state folder, the recordings, and the callbacks."""

    settings: TuningSettings
    r3_dir: Path
    root: Path                                           # patches name files relative to it
    recordings: object                                   # record.store.RecordingStore
    oracle_tests: Callable[[str], list[str]]             # kernel name -> test ids
    run_oracles: Callable[..., list[str]]                # (kernel, variant, candidate)
    say: Callable[[str], None] = print
    model_stopped: str | None = None  # why the model endpoint cannot be used any more
    said: set = field(default_factory=set)
    cluster: object = None            # replay.dask_pool.DaskCluster, opened on first use

    def log_path(self, kernel_name: str) -> Path:
        logs = make_dirs(self.r3_dir / "logs", root=self.r3_dir.parent)  # no link in it
        return logs / f"{kernel_name}.log"

    def pool(self, kernel, count: int | None = None, **replay_overrides):
        """The replay servers of ``kernel``: on the Dask cluster when ``--r3-dask`` names
        one and no fixed count is asked (a check measures on this machine), else local."""
        settings = replace(self.settings.replay, **replay_overrides)
        if self.settings.dask and count is None:
            from ..replay.dask_pool import DaskCluster, DaskPool

            if self.cluster is None:
                self.cluster = DaskCluster(self.settings.dask)
            return DaskPool(self.cluster, KernelSpec.from_kernel(kernel), self.recordings.root,
                            self.recordings.keys(kernel.name), settings,
                            address_space=self.settings.address_space)
        return ServerPool(KernelSpec.from_kernel(kernel), self.recordings.root,
                          self.recordings.keys(kernel.name), settings,
                          count or self.settings.workers,
                          address_space=self.settings.address_space,
                          log_path=self.log_path(kernel.name),
                          work=kernel.work)

    def buckets(self, kernel) -> dict[str, list[str]]:
        """The recording keys of each bucket of a specialised ``kernel`` (specialize=), by
        bucket label, smallest first; a recording's bucket comes from its stored scalars."""
        specialize = kernel.specialize
        positions = specialize.positions(kernel.signature, kernel.where)
        found: dict[str, list[str]] = {}
        for recording in self.recordings.load_all(kernel.name):
            key = specialize.key({name: recording.scalars[name] for name, _ in positions})
            found.setdefault(specialize.label(key), []).append(recording.key)
        return dict(sorted(found.items(),
                           key=lambda item: (specialize.vector(item[0]) or (), item[0])))

    def close(self) -> None:
        """Close the Dask cluster of the run, if one was opened (a local one stops)."""
        if self.cluster is not None:
            self.cluster.close()
            self.cluster = None

    def say_once(self, text: str) -> None:
        if text not in self.said:
            self.said.add(text)
            self.say(text)
