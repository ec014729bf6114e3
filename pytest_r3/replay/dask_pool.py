"""Evaluating candidates on a Dask cluster (``--r3-dask``), with the local pool's interface.

``DaskPool.servers`` are stand-ins for replay servers: ``evaluate(candidate)`` sends one task
and waits for its result, so the search runs unchanged, one thread per slot. The replay
servers themselves live on the Dask workers across tasks (see dask_worker). Only workers of
the submitting machine's target run candidates: every speedup is a ratio measured on one
worker, and results and lock entries are per target.

``distributed`` is imported only here, and only when a cluster is asked for.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from concurrent.futures import CancelledError
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace

from ..backends import compile_cache
from ..errors import R3Error
from . import dask_worker, interrupt, protocol
from .client import ReplayError
from .process import DEFAULT_ADDRESS_SPACE
from .protocol import Candidate, KernelSpec, ReplaySettings, Result

# how many Dask workers one candidate may take down before it is recorded as a crash (the
# scheduler's allowed-failures on a cluster started here; an existing scheduler uses its own)
WORKER_FAILURES = 2
_ADDRESS = re.compile(r"(tcp|tls|ucx)://\S+:\d+")


class DaskAddressError(R3Error, ValueError):
    pass


def parse_address(text: str) -> tuple[str, int | str]:
    """``("local", n)`` or ``("scheduler", "tcp://host:port")``; anything else is refused
    with what is accepted."""
    text = str(text).strip()
    local = re.fullmatch(r"local:(\d+)", text)
    if local and int(local.group(1)) >= 1:
        return "local", int(local.group(1))
    if _ADDRESS.fullmatch(text):
        return "scheduler", text
    raise DaskAddressError(f"--r3-dask {text!r}: expected tcp://HOST:PORT (a running Dask "
                           "scheduler) or local:N (a cluster of N worker processes on this "
                           "machine for the run)")


def _distributed():
    try:
        import distributed
    except ImportError:
        raise R3Error("--r3-dask needs the 'distributed' package: pip install "
                      "'pytest-r3[dask]'") from None
    return distributed


class DaskCluster:
    """The run's connection to Dask: a LocalCluster started for it, or an existing
    scheduler. Opened on first use, shared by the kernels of the run, closed at its end."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.kind, self.where = parse_address(address)
        self._client = None
        self._cluster = None
        self.lost = ""  # why the scheduler is gone, once it is: later kernels stop at once
        self._losing = threading.Lock()  # every slot's thread learns it at the same moment

    def client(self):
        if self.lost:
            raise ReplayError(self.lost)
        if self._client is not None:
            return self._client
        distributed = _distributed()
        import dask

        if self.kind == "local":
            with dask.config.set({"distributed.scheduler.allowed-failures": WORKER_FAILURES}):
                self._cluster = distributed.LocalCluster(
                    n_workers=self.where, threads_per_worker=1, processes=True,
                    host="127.0.0.1", dashboard_address=None, silence_logs=40)
            self._client = distributed.Client(self._cluster)
        else:
            try:
                self._client = distributed.Client(self.where, timeout=30)
            except (OSError, TimeoutError) as exc:  # once: the next kernels fail at once
                self.lost = (f"--r3-dask {self.address}: cannot reach the Dask scheduler: "
                             f"{' '.join(str(exc).split())}")
                raise ReplayError(self.lost) from None
        return self._client

    def lose(self, exc: BaseException) -> ReplayError:
        """The scheduler is gone: the error that ends each kernel's tuning from now on."""
        with self._losing:
            return self._lose(exc)

    def _lose(self, exc: BaseException) -> ReplayError:
        if not self.lost:
            self.lost = (f"lost the Dask scheduler at {self.address} ({type(exc).__name__}: "
                         f"{' '.join(str(exc).split())}); what was measured is saved: run "
                         "again to resume")
            import logging

            quiet = logging.getLogger("distributed.client")
            level = quiet.level
            quiet.setLevel(logging.CRITICAL)  # its traceback would say nothing more
            try:  # else the client waits out its reconnection timeout before the run ends
                self._client.close(timeout=2)
            except Exception:
                pass
            finally:
                quiet.setLevel(level)
        return ReplayError(self.lost)

    def close(self) -> None:
        if self.lost and self._cluster is None:  # nothing to close: it would only wait
            self._client = None                   # for a reconnection that cannot come
            return
        for thing in (self._client, self._cluster):
            if thing is not None:
                try:
                    thing.close()
                except Exception:  # a scheduler already gone has nothing left to close
                    pass
        self._client = self._cluster = None


class DaskPool:
    """The local pool's interface (``start``, ``servers``, ``containment``, ``close``) over
    the workers of a Dask cluster that share this machine's target."""

    START_TIMEOUT = 600.0  # seconds for the workers to learn the baseline's reference

    def __init__(self, cluster: DaskCluster, spec: KernelSpec, recordings_root: str | Path,
                 keys: list[str], settings: ReplaySettings, *,
                 address_space: int = DEFAULT_ADDRESS_SPACE) -> None:
        self.cluster, self.spec, self.keys, self.settings = cluster, spec, list(keys), settings
        self.root = Path(recordings_root)
        self.address_space = address_space
        self.servers: list[RemoteServer] = []
        self.containment = ""
        self.used: list[str] = []
        self.skipped: dict[str, str] = {}    # worker -> why it runs nothing
        self.hosts: list[str] | None = None  # the placement restriction, None: anywhere
        self.resources: dict | None = None
        self.manifest = self._manifest()
        self.headers = local_headers(spec)
        self.digest = dask_worker.manifest_digest(self.manifest)
        self.key = dask_worker.server_key(spec.as_dict(), asdict(settings), self.digest,
                                          address_space)
        self.started = time.perf_counter()
        self.evaluations = 0
        self.recent: dict[str, float] = {}   # worker -> when it last returned a result
        self._lock = threading.Lock()

    def _manifest(self) -> dict[str, str]:
        files = {}
        for key in self.keys:
            for suffix in (".json", ".npz"):
                relative = f"{self.spec.name}/{key}{suffix}"
                files[relative] = dask_worker.file_digest((self.root / relative).read_bytes())
        return files

    @property
    def job(self) -> dict:
        """What a worker needs to start this kernel's replay server, sent with each task
        (the recordings themselves travel apart, once; headers are small)."""
        return {"key": self.key, "spec": self.spec.as_dict(), "settings": asdict(self.settings),
                "digest": self.digest, "root": str(self.root), "manifest": self.manifest,
                "keys": self.keys, "address_space": self.address_space,
                "headers": self.headers,
                # workers that see this folder read their baseline from it (never write)
                "compile_cache": compile_cache.folder_for_workers()}

    # -- starting -----------------------------------------------------------------------------
    def start(self) -> DaskPool:
        client = self.cluster.client()
        own = dask_worker.worker_target(self.spec.backend)
        try:
            targets = client.run(dask_worker.worker_target, self.spec.backend)
        except ImportError as exc:
            raise ReplayError(f"the Dask workers at {self.cluster.address} cannot import "
                              f"pytest-r3 ({exc}): install it in their environment") from None
        gpu = self.spec.backend != "cpu"
        slots, self.skipped, by_resource = choose_workers(
            own, targets, client.scheduler_info()["workers"], gpu)
        if not slots:
            raise ReplayError(f"kernel {self.spec.name!r}: no Dask worker at "
                              f"{self.cluster.address} can run it for target {own['target']}"
                              + (f" (skipped: {self._skipped()})" if self.skipped else
                                 " (the cluster has no workers)"))
        self.used = sorted(slots)
        self.resources = {"GPU": 1} if by_resource else None
        hosts = {_host(a) for a in self.used}
        if any(_host(a) in hosts for a in self.skipped):
            self.hosts = self.used  # a mixed host: pin to the addresses themselves
        elif self.skipped:
            self.hosts = sorted(hosts)  # by host, so a restarted worker still counts
        self.send_recordings(self._missing(self.used))
        futures = [client.submit(dask_worker.start_server, self.job, workers=[address],
                                 allow_other_workers=False, pure=False,
                                 resources=self.resources) for address in self.used]
        # a warm-up: a worker that dies meanwhile (its task would wait for it forever) is
        # simply not warmed; a baseline that fails on a worker fails the run here
        distributed = _distributed()
        try:
            distributed.wait(futures, timeout=self.START_TIMEOUT)
        except TimeoutError:
            client.cancel([future for future in futures if future.status == "pending"])
        except CancelledError as exc:
            raise self.cluster.lose(exc) from None
        started = []
        for future in futures:
            if future.status in ("finished", "error"):
                try:
                    started.append(future.result())
                except distributed.KilledWorker:
                    continue
        if not started:
            raise ReplayError(f"kernel {self.spec.name!r}: no Dask worker at "
                              f"{self.cluster.address} started a replay server within "
                              f"{self.START_TIMEOUT:g} s")
        self.containment = started[0]["containment"]
        self.servers = [RemoteServer(self, index) for index in range(sum(slots.values()))]
        self.started = time.perf_counter()
        return self

    def _missing(self, workers: list[str]) -> list[str]:
        client = self.cluster.client()
        found = client.run(dask_worker.locate_recordings, self.digest, self.job["root"],
                           self.manifest, workers=workers)
        return [address for address, folder in found.items() if folder is None]

    def send_recordings(self, workers: list[str]) -> None:
        """Send the recordings, once, to workers that cannot read them; they check the
        hash on arrival."""
        if not workers:
            return
        files = {path: (self.root / path).read_bytes() for path in self.manifest}
        if dask_worker.manifest_digest({p: dask_worker.file_digest(d)
                                        for p, d in files.items()}) != self.digest:
            raise ReplayError(f"kernel {self.spec.name!r}: its recordings changed on disk "
                              "during the run")
        self.cluster.client().run(dask_worker.receive_recordings, self.digest, files,
                                  workers=workers)

    def _skipped(self) -> str:
        return ", ".join(f"{a} ({why})" for a, why in sorted(self.skipped.items()))

    @property
    def description(self) -> str:
        """Which workers run candidates and which were left out, and why (one line)."""
        text = (f"Dask at {self.cluster.address}: {len(self.used)} worker(s) used, "
                f"{len(self.servers)} slot(s)")
        return text + (f"; skipped {self._skipped()}" if self.skipped else "")

    # -- progress -----------------------------------------------------------------------------
    def note(self, result: Result) -> None:
        with self._lock:
            self.evaluations += 1
            worker = result.details.get("dask_worker")
            if worker:
                self.recent[worker] = time.perf_counter()

    @property
    def activity(self) -> str:
        """Evaluations per second since the start, and workers that answered lately."""
        now = time.perf_counter()
        with self._lock:
            rate = self.evaluations / max(now - self.started, 1e-9)
            busy = sum(1 for t in self.recent.values() if now - t < 30)
        return f"{rate:.2f} evaluations/s on {busy} Dask worker(s)"

    # -- closing ------------------------------------------------------------------------------
    def close(self) -> None:
        if not self.used:
            return
        try:
            self.cluster.client().run(dask_worker.release, self.key)
        except Exception:  # workers or scheduler gone: their replay servers went with them
            pass

    @contextmanager
    def fresh(self) -> Iterator[RemoteServer]:
        """A slot whose every evaluation runs in a new replay worker process on a Dask worker
        (none that took part in the search), which stops after it (see the local pool's)."""
        yield RemoteServer(self, -1, task=dask_worker.evaluate_fresh)

    def __enter__(self) -> DaskPool:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class RemoteServer:
    """One slot of a DaskPool: evaluates a candidate on whichever worker the scheduler
    picks (the search calls ``evaluate`` from one thread per slot)."""

    def __init__(self, pool: DaskPool, index: int, task=None) -> None:
        self.pool, self.index = pool, index
        self.task = task or dask_worker.evaluate

    def evaluate(self, candidate: Candidate) -> Result:
        distributed = _distributed()
        pool = self.pool
        client = pool.cluster.client()
        job = pool.job
        for _ in range(3):  # each turn: a worker lacked the recordings and was sent them
            future = client.submit(self.task, job, candidate.as_dict(),
                                   pure=False, workers=pool.hosts, resources=pool.resources,
                                   key=f"r3-{pool.spec.name}-{candidate.key()}-"
                                       f"{time.monotonic_ns()}")
            try:
                result = Result.from_dict(_result(future))
            except dask_worker.RecordingsMissing as missing:
                pool.send_recordings([missing.worker])
                continue
            except distributed.KilledWorker as killed:
                result = _killed(candidate, killed)
            except (CancelledError, OSError, TimeoutError) as exc:
                raise pool.cluster.lose(exc) from None
            pool.note(result)
            return result
        raise ReplayError(f"kernel {pool.spec.name!r}: recordings sent to Dask workers were "
                          "still missing there three times in a row")

    def measure_again(self, candidate: Candidate, labels) -> Result:
        """A claim timed again, with the probes it read slower on (see the local server's):
        here a whole evaluation in a new worker process, whose probes include ``labels``."""
        return self.evaluate(candidate.unraced())


def _result(future, poll: float = 0.5):
    """The task's result, waited for in short steps: on Ctrl-C (see interrupt) the task is
    cancelled and the wait ends with Interrupted, not with the evaluation."""
    while True:
        try:
            return future.result(timeout=poll)
        except TimeoutError:
            if future.status == "error":  # the task's own TimeoutError, not this wait's
                raise
            if interrupt.stopping():
                future.cancel()
                interrupt.check()


def _killed(candidate: Candidate, killed: Exception) -> Result:
    """A candidate whose evaluation took down Dask workers one after another: a crash."""
    return Result(protocol.CRASH, candidate_key=candidate.key(), label=candidate.label,
                  diagnostics=["the Dask workers evaluating it died one after another, more "
                               "often than the scheduler allows (allowed-failures): "
                               + " ".join(str(killed).split())],
                  details={"kind": "worker_lost"})


def choose_workers(own: dict, targets: dict[str, dict], info: dict[str, dict],
                   gpu: bool) -> tuple[dict[str, int], dict[str, str], bool]:
    """(slots per worker used, why each other worker is skipped, whether GPU tasks go by
    the workers' ``GPU`` resource). A worker runs candidates only if its target (and CPU
    features) are the submitting machine's; a GPU worker gets one slot per GPU it declares
    (``--resources GPU=n``); with no worker declaring GPUs, one per worker thread."""
    slots: dict[str, int] = {}
    skipped: dict[str, str] = {}
    by_resource = gpu and any(w.get("resources", {}).get("GPU") for w in info.values())
    for address, target in sorted(targets.items()):
        if (target["target"], target["features"]) != (own["target"], own["features"]):
            skipped[address] = f"target {target['target']}" + (
                " with other CPU features" if target["target"] == own["target"] else "")
            continue
        worker = info.get(address, {})
        count = int(worker.get("resources", {}).get("GPU", 0)) if by_resource \
            else int(worker.get("nthreads", 1))
        if count < 1:
            skipped[address] = "declares no GPU resource"
            continue
        slots[address] = count
    return slots, skipped, by_resource


def local_headers(spec: KernelSpec) -> dict[str, bytes]:
    """The headers the kernel includes from its own include directories, by
    ``"<include dir index>/<path in it>"``: a worker that cannot see a directory gets them."""
    from ..kernel.lock import local_headers as included

    source = SimpleNamespace(text=spec.source_text, include_dirs=spec.include_dirs,
                             path=Path(spec.filename) if Path(spec.filename).is_file()
                             else None)
    dirs = [Path(d).resolve() for d in spec.include_dirs]
    headers: dict[str, bytes] = {}
    for _, path in included(source):
        for index, folder in enumerate(dirs):
            if folder in path.parents:
                headers[f"{index}/{path.relative_to(folder).as_posix()}"] = path.read_bytes()
                break
    return headers


def _host(address: str) -> str:
    return address.split("://", 1)[-1].rsplit(":", 1)[0]
