"""What runs inside a Dask worker: replay servers kept across tasks, recordings kept by hash,
and the worker's target.

The functions here are sent by name (the worker imports this module), so a task carries only
plain data: the kernel spec, the settings, the recordings' hash and one candidate. The replay
servers are the same contained ones as in the local pool; the Dask worker is only their
parent, as pytest is locally.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import threading
from pathlib import Path

from ..backends import get_backend
from .client import ReplayServer
from .protocol import Candidate, KernelSpec, ReplaySettings

_lock = threading.Lock()
_idle: dict[str, list[ReplayServer]] = {}   # servers not running a task, by kernel key
_judges: dict[str, object] = {}             # one learnt reference per kernel key and worker
_recordings: dict[str, str] = {}            # recordings hash -> a folder holding them here


class RecordingsMissing(Exception):
    """This worker has neither the recordings' folder nor a copy: they must be sent."""

    def __init__(self, digest: str, worker: str) -> None:
        super().__init__(f"recordings {digest[:12]} are not on worker {worker}")
        self.digest, self.worker = digest, worker

    def __reduce__(self):  # travels back to the submitter pickled, with both fields
        return (RecordingsMissing, (self.digest, self.worker))


def file_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def manifest_digest(manifest: dict[str, str]) -> str:
    """The hash naming a set of recording files: their relative paths and contents."""
    text = "\n".join(f"{path} {digest}" for path, digest in sorted(manifest.items()))
    return hashlib.sha256(text.encode()).hexdigest()


def _worker():
    from distributed import get_worker

    return get_worker()


def _cache_root(worker=None) -> Path:
    """Where this worker keeps recordings it was sent: its own local directory. Functions
    sent with ``Client.run`` get the worker as their ``dask_worker`` argument; tasks find it
    with ``get_worker``."""
    if worker is None:
        try:
            worker = _worker()
        except ValueError:  # not on a worker (tests call these functions directly)
            return Path(tempfile.gettempdir()) / "r3-recordings"
    return Path(worker.local_directory) / "r3-recordings"


def worker_target(backend: str) -> dict:
    """What this worker's timings are valid for: the backend's target name and, on CPUs,
    the hash of the CPU features the code is built for."""
    try:
        target = get_backend(backend).target_name()
    except Exception as exc:  # no GPU, no driver: this worker cannot serve the backend
        return {"target": f"none ({backend}: {' '.join(str(exc).split())[:120]})",
                "features": None, "pid": os.getpid()}
    features = None
    if backend == "cpu":
        from ..backends.clang import host_target
        from ..kernel.lock import features_hash

        features = features_hash(host_target().features)
    return {"target": target, "features": features, "pid": os.getpid()}


def locate_recordings(digest: str, root: str, manifest: dict[str, str],
                      dask_worker=None) -> str | None:
    """A folder on this worker holding exactly the recordings ``manifest`` names: a copy
    received earlier, or the submitter's own folder when this worker sees it with the same
    contents; None when neither (then they must be sent, once)."""
    with _lock:
        known = _recordings.get(digest)
    if known is not None:
        return known
    for folder in (_cache_root(dask_worker) / digest, Path(root)):
        if _holds(folder, manifest):
            with _lock:
                _recordings[digest] = str(folder)
            return str(folder)
    return None


def _holds(folder: Path, manifest: dict[str, str]) -> bool:
    try:
        return all(file_digest((folder / path).read_bytes()) == digest
                   for path, digest in manifest.items())
    except OSError:
        return False


def receive_recordings(digest: str, files: dict[str, bytes], dask_worker=None) -> str:
    """Store sent recordings under their hash, after checking every file and the whole set
    against it (a damaged transfer is refused, never replayed)."""
    manifest = {path: file_digest(data) for path, data in files.items()}
    if manifest_digest(manifest) != digest:
        raise ValueError(f"recordings {digest[:12]} arrived damaged: their contents do not "
                         "hash to the name they were sent under")
    target = _cache_root(dask_worker) / digest
    if not _holds(target, manifest):
        _store(target, files, f"recordings {digest[:12]}")
    with _lock:
        _recordings[digest] = str(target)
    return str(target)


def server_key(spec: dict, settings: dict, digest: str, address_space: int) -> str:
    import json

    text = json.dumps([spec, settings, digest, address_space], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def with_headers(spec: dict, headers: dict[str, bytes]) -> dict:
    """The spec, its include directories that this worker cannot see (or sees with other
    contents) replaced by a copy of the headers the kernel includes from them.
    ``headers`` maps ``"<include dir index>/<path in it>"`` to the file's bytes."""
    dirs = list(spec["include_dirs"])
    by_dir: dict[int, dict[str, bytes]] = {}
    for name, data in headers.items():
        index, _, relative = name.partition("/")
        by_dir.setdefault(int(index), {})[relative] = data
    stale = [index for index, files in by_dir.items()
             if not _holds(Path(dirs[index]), {p: file_digest(d) for p, d in files.items()})]
    if not stale:
        return spec
    digest = manifest_digest({name: file_digest(data) for name, data in headers.items()})
    target = _cache_root().parent / "r3-headers" / digest
    if not _holds(target, {name: file_digest(data) for name, data in headers.items()}):
        _store(target, headers, f"headers {digest[:12]}")
    for index in stale:
        dirs[index] = str(target / str(index))
    return {**spec, "include_dirs": dirs}


def _store(target: Path, files: dict[str, bytes], what: str) -> None:
    """Write ``files`` under ``target`` all at once (staged, then renamed into place)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name[:12]}-", dir=target.parent))
    for path, data in files.items():
        destination = (staging / path).resolve()
        if staging.resolve() not in destination.parents:
            shutil.rmtree(staging, ignore_errors=True)
            raise ValueError(f"{what}: refused file name {path!r}")
        destination.parent.mkdir(parents=True, exist_ok=True)
        destination.write_bytes(data)
    shutil.rmtree(target, ignore_errors=True)
    os.replace(staging, target)


def _checkout(job: dict, fresh: bool = False) -> ReplayServer:
    """An idle replay server of the job's kernel, or a new one (always, with ``fresh``)."""
    key = job["key"]
    with _lock:
        idle = _idle.get(key)
        if idle and not fresh:
            return idle.pop()
        judge = _judges.get(key)
    folder = locate_recordings(job["digest"], job["root"], job["manifest"])
    if folder is None:
        raise RecordingsMissing(job["digest"], _worker().address)
    kernel = KernelSpec.from_dict(with_headers(job["spec"], job["headers"]))
    logs = Path(_cache_root().parent) / "r3-logs"
    logs.mkdir(parents=True, exist_ok=True)
    settings = ReplaySettings.from_dict(job["settings"])
    server = ReplayServer(kernel, folder, job["keys"], settings.confirming() if fresh else settings,
                          address_space=job["address_space"],
                          log_path=logs / f"{kernel.name}.log", reference=judge,
                          compile_cache=job.get("compile_cache")).start()
    with _lock:
        _judges.setdefault(key, server.judge)
    return server


def _checkin(key: str, server: ReplayServer) -> None:
    with _lock:
        _idle.setdefault(key, []).append(server)


def start_server(job: dict) -> dict:
    """Start (or find) a replay server for the kernel on this worker, before any candidate:
    a baseline that fails here fails the run now, with its reason. ``job`` says which
    kernel (see DaskPool.job)."""
    server = _checkout(job)
    _checkin(job["key"], server)
    return {"containment": server.containment, "worker": _worker().address,
            "compile_cache_hits": server.compile_cache_hits}


def evaluate(job: dict, candidate: dict) -> dict:
    """One candidate on one of this worker's replay servers: the result, as plain data."""
    server = _checkout(job)
    try:
        result = server.evaluate(Candidate.from_dict(candidate))
    except BaseException:
        server.close()  # a server that raised is not trusted for the next task
        raise
    _checkin(job["key"], server)
    result.details["dask_worker"] = _worker().address
    return result.as_dict()


def evaluate_fresh(job: dict, candidate: dict) -> dict:
    """One candidate on a replay server started for it alone, in a new worker process that
    took no part in the search (a claim's confirmation), stopped afterwards."""
    server = _checkout(job, fresh=True)
    try:
        result = server.evaluate(Candidate.from_dict(candidate))
    finally:
        server.close()
    result.details["dask_worker"] = _worker().address
    return result.as_dict()


def release(key: str) -> int:
    """Stop this worker's replay servers of one kernel (its tuning ended); how many."""
    with _lock:
        servers = _idle.pop(key, [])
        _judges.pop(key, None)
    for server in servers:
        server.close()
    return len(servers)


def release_all() -> int:
    with _lock:
        keys = list(_idle)
    return sum(release(key) for key in keys)
