"""--r3-dask: tuning through a Dask cluster on loopback gives what the local pool gives, and
survives workers dying under it. Real LocalClusters, real replay servers on their workers."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from conftest import loop_order_kernel
from test_llm import (
    IKJ,
    ModelScript,
    ScriptedChatServer,
    mm_project,  # noqa: F401  (the fixture: a project a model rewrites)
    tune_with_model,
)

from pytest_r3.backends.clang import source_hash

pytest.importorskip("distributed")
psutil = pytest.importorskip("psutil")

from pytest_r3.record.store import RecordingStore  # noqa: E402
from pytest_r3.replay import dask_worker  # noqa: E402
from pytest_r3.replay.client import ReplayError  # noqa: E402
from pytest_r3.replay.dask_pool import (  # noqa: E402
    DaskAddressError,
    DaskCluster,
    DaskPool,
    choose_workers,
    parse_address,
)
from pytest_r3.replay.protocol import Candidate, KernelSpec, ReplaySettings  # noqa: E402

# ORDER=0 walks the matrix column by column (slow), ORDER=1 row by row; CRASH=1 writes
# through a null pointer, a crash in the contained worker, never in the Dask worker
KERNEL_C = loop_order_kernel("dask_scale", macros="#ifndef CRASH\n#define CRASH 0\n#endif",
                             first_statement="#if CRASH\n*(volatile int *)0 = 1;\n#endif")

MODULE_PY = textwrap.dedent("""
    import pytest_r3 as r3

    dask_scale = r3.kernel("dask_scale.c", entry="dask_scale", tune=TUNE)
""")

TEST_PY = textwrap.dedent("""
    import numpy as np
    import pytest

    from daskmod import dask_scale


    @pytest.mark.r3_oracle(dask_scale)
    @pytest.mark.parametrize("n", [3, 512])
    def test_dask_scale(n):
        grid = np.random.default_rng(n).random((n, n), dtype=np.float32)
        out = np.empty_like(grid)
        dask_scale(n, grid, out)
        np.testing.assert_allclose(out, 2 * grid + 1, rtol=1e-6)
""")

# writes down whether anything of Dask was imported by the end of the session
CONFTEST_PY = textwrap.dedent("""
    import json
    import sys


    def pytest_unconfigure(config):
        with open("imported.json", "w") as stream:
            json.dump(sorted(m for m in ("dask", "distributed") if m in sys.modules), stream)
""")


def make_project(folder: Path, tune: dict, ini: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "dask_scale.c").write_text(KERNEL_C)
    (folder / "daskmod.py").write_text(MODULE_PY.replace("TUNE", repr(tune)))
    (folder / "test_dask_scale.py").write_text(TEST_PY)
    (folder / "conftest.py").write_text(CONFTEST_PY)
    (folder / "pytest.ini").write_text("[pytest]\n" + textwrap.dedent(ini))
    return folder


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args]


def run(project: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(command(*args), cwd=project, capture_output=True, text=True,
                          timeout=timeout)


def lock_entry(project: Path) -> dict:
    lock = json.loads((project / "r3.lock").read_text())
    (entry,) = lock["kernels"]["dask_scale"].values()
    return entry


def results(project: Path) -> list[dict]:
    (path,) = (project / ".r3" / "results" / "dask_scale").glob("*.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# -- the option --------------------------------------------------------------------------------
def test_addresses_accepted_and_refused():
    assert parse_address("local:3") == ("local", 3)
    assert parse_address(" tcp://10.0.0.5:8786 ") == ("scheduler", "tcp://10.0.0.5:8786")
    for bad in ("local:0", "local", "8786", "http://host:8786", "tcp://host"):
        with pytest.raises(DaskAddressError, match="expected tcp://HOST:PORT"):
            parse_address(bad)


def test_a_bad_address_is_a_usage_error_before_tests_run(tmp_path: Path):
    project = make_project(tmp_path, {"ORDER": [0, 1]}, "r3_budget = 2\n")
    result = run(project, "--r3-tune", "--r3-dask", "scheduler:8786")
    assert result.returncode == 4, result.stdout + result.stderr
    assert "--r3-dask 'scheduler:8786': expected tcp://HOST:PORT" in result.stderr
    assert "test_dask_scale" not in result.stdout


# -- a whole tuning run ------------------------------------------------------------------------
def test_dask_gives_the_lock_entry_of_the_local_pool(tmp_path: Path):
    ini = """
        r3_search_pipeline = false
        r3_workers = 2
        r3_budget = 4
        r3_seed = 3
    """
    for attempt in range(3):
        local = make_project(tmp_path / f"local{attempt}", {"ORDER": [0, 1]}, ini)
        dask = make_project(tmp_path / f"dask{attempt}", {"ORDER": [0, 1]},
                            textwrap.dedent(ini) + "r3_dask = local:2\n")
        plain = run(local, "--r3-tune")
        assert plain.returncode == 0, plain.stdout + plain.stderr
        assert json.loads((local / "imported.json").read_text()) == []  # nothing of Dask
        assert "Dask" not in plain.stdout

        spread = run(dask, "--r3-tune")
        assert spread.returncode == 0, spread.stdout + spread.stderr
        assert json.loads((dask / "imported.json").read_text()) == ["dask", "distributed"]
        assert "dask_scale: Dask at local:2: 2 worker(s) used, 2 slot(s)" in spread.stdout
        assert sorted(r["key"] for r in results(dask)) == \
            sorted(r["key"] for r in results(local))  # the same seed asked the same points
        if (local / "r3.lock").exists() and (dask / "r3.lock").exists():
            break
        # on a busy machine a 30x speedup can measure as noise (its interval, or the noise
        # band of the baseline against itself, is wide), and the baseline is kept: only
        # that may stop a run from writing the lock entry
        for project, output in ((local, plain.stdout), (dask, spread.stdout)):
            if not (project / "r3.lock").exists():
                assert "beyond the noise band" in output or "did not reproduce in" in output \
                    or "could not be timed again" in output, output
    else:
        pytest.fail("three times, timing noise kept the baseline in one of the runs")

    same = ("macros", "pipeline", "configuration", "evaluations", "source_hash",
            "features_hash", "optimizer")
    expected, got = lock_entry(local), lock_entry(dask)
    assert expected["macros"] == {"ORDER": 1}
    assert {k: got[k] for k in same} == {k: expected[k] for k in same}
    workers = {r["result"]["details"].get("dask_worker") for r in results(dask)}
    assert all(w and w.startswith("tcp://127.0.0.1:") for w in workers)


def _dask_workers(root: psutil.Process) -> list[psutil.Process]:
    """The Dask worker processes a run started: spawned children that parent replay
    workers."""
    found = []
    for process in root.children(recursive=True):
        try:
            if "spawn_main" in " ".join(process.cmdline()) and any(
                    "pytest_r3.replay.worker" in " ".join(child.cmdline())
                    for child in process.children()):
                found.append(process)
        except psutil.Error:
            continue
    return found


def test_a_worker_killed_mid_run_loses_no_result_and_a_crash_is_a_result(tmp_path: Path):
    budget = 12
    project = make_project(tmp_path, {"ORDER": [0, 1], "CRASH": [0, 1]}, f"""
        r3_search_pipeline = true
        r3_budget = {budget}
        r3_dask = local:2
    """)
    process = subprocess.Popen(command("--r3-tune"), cwd=project, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    output: list[str] = []
    reader = threading.Thread(target=lambda: output.extend(process.stdout), daemon=True)
    reader.start()
    store = project / ".r3" / "results" / "dask_scale"
    killed = None
    deadline = time.monotonic() + 240
    try:
        while killed is None and time.monotonic() < deadline and process.poll() is None:
            files = list(store.glob("*.jsonl")) if store.exists() else []
            done = len(files[0].read_text().splitlines()) if files else 0
            workers = _dask_workers(psutil.Process(process.pid)) if done >= 2 else []
            if workers:
                killed = workers[0].pid
                os.kill(killed, signal.SIGKILL)
            time.sleep(0.05)
        assert killed is not None, "no Dask worker was found busy in time:\n" + "".join(output)
        assert process.wait(timeout=300) == 0, "".join(output)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    reader.join(timeout=10)
    text = "".join(output)
    stored = results(project)
    keys = [r["key"] for r in stored]
    assert len(keys) == len(set(keys)) == budget, text  # every evaluation, each once
    assert lock_entry(project)["evaluations"] == budget
    crashing = [r["result"]["status"] for r in stored if r["candidate"]["macros"].get("CRASH")]
    others = [r["result"]["status"] for r in stored
              if not r["candidate"]["macros"].get("CRASH")]
    assert crashing and set(crashing) == {"crash"}, stored
    assert set(others) == {"ok"}, stored  # the killed worker's candidate was run again
    assert lock_entry(project)["macros"].get("ORDER") == 1
    assert not lock_entry(project)["macros"].get("CRASH")
    assert "evaluations/s on" in text and "Dask worker(s)" in text


# -- the pool from Python ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> tuple[KernelSpec, RecordingStore]:
    """The kernel's recordings, made by a real recording run."""
    project = make_project(tmp_path_factory.mktemp("dask_pool"),
                           {"ORDER": [0, 1], "CRASH": [0, 1]}, "")
    result = run(project, "--r3-record")
    assert result.returncode == 0, result.stdout + result.stderr
    store = RecordingStore(project / ".r3" / "recordings")
    sys.path.insert(0, str(project))
    try:
        import daskmod
    finally:
        sys.path.remove(str(project))
    return KernelSpec.from_kernel(daskmod.dask_scale), store


@pytest.fixture(scope="module")
def cluster():
    cluster = DaskCluster("local:2")
    yield cluster
    cluster.close()


FAST = ReplaySettings(timing_rounds=5, min_timing_rounds=3, warmup_rounds=1)


def test_pool_evaluates_on_contained_servers_that_live_across_tasks(recorded, cluster):
    spec, store = recorded
    with DaskPool(cluster, spec, store.root, store.keys(spec.name), FAST) as pool:
        assert "seccomp" in pool.containment and "DEGRADED" not in pool.containment
        client = cluster.client()
        before = client.run(lambda: sorted(p.pid for p in psutil.Process().children()))
        fast = pool.servers[0].evaluate(Candidate(macros={"ORDER": 1}, label="fast"))
        crash = pool.servers[1].evaluate(Candidate(macros={"CRASH": 1}, label="crash"))
        assert fast.ok and fast.timing.speedup > 1.5, fast.summary()
        assert crash.status == "crash" and crash.label == "crash", crash.summary()
        again = pool.servers[0].evaluate(Candidate(macros={"ORDER": 1}, label="again"))
        assert again.ok, again.summary()
        rewrite = spec.source_text.replace("#if ORDER\n", "#if 1\n")  # always row by row
        assert rewrite != spec.source_text
        rewritten = pool.servers[1].evaluate(Candidate(source_text=rewrite, label="rewrite"))
        assert rewritten.ok and rewritten.timing.speedup > 1.5, rewritten.summary()
        after = client.run(lambda: sorted(p.pid for p in psutil.Process().children()))
        # one replay server per worker, started with the pool: a candidate costs a task,
        # not a server start (only the crashed one was replaced)
        assert all(len(pids) == 1 for pids in before.values()), before
        assert sum(before[w] != after[w] for w in before) <= 1
        assert "evaluations/s on" in pool.activity
    assert all(not pids for pids in client.run(
        lambda: [p.pid for p in psutil.Process().children()
                 if "pytest_r3.replay.worker" in " ".join(p.cmdline())]).values())


def test_recordings_are_sent_once_and_checked_on_arrival(recorded, cluster):
    spec, store = recorded
    client = cluster.client()
    pool = DaskPool(cluster, spec, store.root, store.keys(spec.name), FAST)
    files = {path: (store.root / path).read_bytes() for path in pool.manifest}
    nowhere = str(store.root) + "-not-here"
    located = client.run(dask_worker.locate_recordings, "0" * 64, nowhere, pool.manifest)
    assert set(located.values()) == {None}  # neither a copy nor a visible folder

    damaged = dict(files)
    first = sorted(damaged)[0]
    damaged[first] = damaged[first][:-1] + bytes([damaged[first][-1] ^ 1])
    with pytest.raises(ValueError, match="arrived damaged"):
        client.run(dask_worker.receive_recordings, pool.digest, damaged)

    kept = client.run(dask_worker.receive_recordings, pool.digest, files)
    local = client.run(lambda dask_worker: dask_worker.local_directory)
    for worker, folder in kept.items():  # each worker's own copy, in its own directory
        assert Path(folder) == Path(local[worker]) / "r3-recordings" / pool.digest
        assert dask_worker._holds(Path(folder), pool.manifest)
    missing = dask_worker.RecordingsMissing(pool.digest, "tcp://127.0.0.1:1")
    assert pickle.loads(pickle.dumps(missing)).worker == "tcp://127.0.0.1:1"


class FarAway(DaskPool):
    """A pool whose workers cannot see the recordings folder (as on other machines)."""

    sent: list

    @property
    def job(self) -> dict:
        return {**super().job, "root": "/nonexistent/recordings"}

    def send_recordings(self, workers: list[str]) -> None:
        self.sent = [*getattr(self, "sent", []), *workers]
        super().send_recordings(workers)


def test_workers_that_cannot_see_the_recordings_get_them_once(recorded, cluster):
    spec, store = recorded
    client = cluster.client()
    client.run(dask_worker.release_all)
    client.run(lambda: dask_worker._recordings.clear())
    client.run(lambda dask_worker: shutil.rmtree(  # copies an earlier test sent
        Path(dask_worker.local_directory) / "r3-recordings", ignore_errors=True))
    with FarAway(cluster, spec, store.root, store.keys(spec.name), FAST) as pool:
        assert sorted(pool.sent) == sorted(pool.used)  # each worker once, at the start
        first = pool.servers[0].evaluate(Candidate(macros={"ORDER": 1}))
        assert first.ok, first.summary()
        assert sorted(pool.sent) == sorted(pool.used)  # nothing sent again
        # a worker that lost its copy (a replacement on a new node) is sent it when asked
        client.run(dask_worker.release_all)
        client.run(lambda: dask_worker._recordings.clear())
        client.run(lambda digest, dask_worker: shutil.rmtree(
            Path(dask_worker.local_directory) / "r3-recordings" / digest), pool.digest)
        again = pool.servers[0].evaluate(Candidate(macros={"ORDER": 1}))
        assert again.ok, again.summary()
        # the wiped worker that got the task was sent them (the retry may land on the other
        # wiped one, sent them too): once per worker, never twice
        assert len(pool.used) < len(pool.sent) <= 2 * len(pool.used)
        assert all(pool.sent.count(worker) <= 2 for worker in pool.used)


def test_workers_that_start_no_server_in_time_are_named(recorded, cluster):
    spec, store = recorded
    cluster.client().run(dask_worker.release_all)
    pool = DaskPool(cluster, spec, store.root, store.keys(spec.name), FAST)
    pool.START_TIMEOUT = 0.001  # no worker learns a reference that fast
    with pytest.raises(ReplayError, match="no Dask worker at local:2 started a replay server "
                                          "within 0.001 s"):
        pool.start()


def test_a_candidate_that_keeps_killing_workers_is_a_crash(recorded, cluster):
    spec, store = recorded
    client = cluster.client()
    with DaskPool(cluster, spec, store.root, store.keys(spec.name), FAST) as pool:
        pids = {w: t["pid"] for w, t in client.run(dask_worker.worker_target, "cpu").items()}
        stop = threading.Event()

        def kill_whoever_runs_it() -> None:  # stands in for a node that dies under it
            while not stop.is_set():
                for worker, keys in client.processing().items():
                    if any(str(k).startswith("r3-dask_scale-") for k in keys):
                        pid = pids.get(worker)
                        if pid is None:
                            pid = client.run(os.getpid, workers=[worker])[worker]
                            pids[worker] = pid
                        try:
                            os.kill(pid, signal.SIGKILL)
                        except ProcessLookupError:
                            pass
                time.sleep(0.02)

        killer = threading.Thread(target=kill_whoever_runs_it, daemon=True)
        killer.start()
        try:
            result = pool.servers[0].evaluate(Candidate(macros={"ORDER": 0}, label="doomed"))
        finally:
            stop.set()
            killer.join()
        assert result.status == "crash" and result.kind == "worker_lost", result.summary()
        wait_for_workers(client, 2)
        survivor = pool.servers[0].evaluate(Candidate(macros={"ORDER": 1}, label="after"))
        assert survivor.ok, survivor.summary()  # the cluster is still there


def wait_for_workers(client, count: int, stall: float = 120.0) -> float:
    """Wait until the cluster has ``count`` workers again, for as long as the ones starting
    make progress; the seconds it took. On a loaded 2-core runner a Dask worker restarted
    by its nanny took over 120 s to start (spawning Python, importing numpy and
    distributed), and a fixed bound failed while it was still starting; a start that gets
    no CPU time and adds no worker for ``stall`` seconds fails, naming what it saw."""
    started = moved = time.monotonic()
    workers, cpu = -1, _descendants_cpu()
    while True:
        try:
            client.wait_for_workers(count, timeout=5)
            return time.monotonic() - started
        except TimeoutError:
            pass
        now_workers, now_cpu = len(client.scheduler_info()["workers"]), _descendants_cpu()
        busy = any(now_cpu.get(pid, 0.0) > used + 0.05 or pid not in cpu
                   for pid, used in now_cpu.items())
        if now_workers > workers or busy:  # a worker joined, or a process is starting
            moved, workers, cpu = time.monotonic(), now_workers, now_cpu
        elif time.monotonic() - moved > stall:
            pytest.fail(f"{now_workers} of {count} Dask worker(s) after "
                        f"{time.monotonic() - started:.0f} s, no start progressing for "
                        f"{stall:g} s (load average {os.getloadavg()[0]:.1f})")


def _descendants_cpu() -> dict[tuple[int, float], float]:
    """CPU seconds used so far by each of this process's children and theirs (nannies,
    workers), by (pid, start time)."""
    found = {}
    for process in psutil.Process().children(recursive=True):
        try:
            times = process.cpu_times()
            found[(process.pid, process.create_time())] = times.user + times.system
        except psutil.Error:
            continue
    return found


# -- an existing scheduler ---------------------------------------------------------------------
def _start(args: list[str], log: Path) -> subprocess.Popen:
    with open(log, "wb") as stream:
        return subprocess.Popen(args, stdout=stream, stderr=subprocess.STDOUT,
                                start_new_session=True)


def test_a_lost_scheduler_ends_the_run_with_its_results_saved(tmp_path: Path):
    budget = 8
    project = make_project(tmp_path / "project", {"ORDER": [0, 1]}, f"""
        r3_search_pipeline = true
        r3_budget = {budget}
    """)
    dask = [sys.executable, "-m", "distributed.cli.dask_scheduler"]
    address_file = tmp_path / "scheduler.json"
    scheduler = _start([*dask, "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                        "--scheduler-file", str(address_file)], tmp_path / "scheduler.log")
    worker = None
    try:
        deadline = time.monotonic() + 60
        while not address_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        address = json.loads(address_file.read_text())["address"]
        worker = _start([sys.executable, "-m", "distributed.cli.dask_worker", address,
                         "--nthreads", "1", "--no-dashboard"], tmp_path / "worker.log")
        process = subprocess.Popen(command("--r3-tune", "--r3-dask", address), cwd=project,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True, start_new_session=True)
        store = project / ".r3" / "results" / "dask_scale"
        while time.monotonic() < deadline + 180 and process.poll() is None:
            files = list(store.glob("*.jsonl")) if store.exists() else []
            if files and len(files[0].read_text().splitlines()) >= 2:
                os.killpg(scheduler.pid, signal.SIGKILL)
                break
            time.sleep(0.05)
        output, _ = process.communicate(timeout=240)
    finally:
        for started in (worker, scheduler):
            if started is not None and started.poll() is None:
                os.killpg(started.pid, signal.SIGKILL)
    assert process.returncode == 1, output
    assert f"lost the Dask scheduler at {address}" in output
    assert "run again to resume" in output
    saved = [r["key"] for r in results(project)]
    assert 2 <= len(saved) < budget, output

    resumed = run(project, "--r3-tune")  # here, on the local pool: the same results store
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    keys = [r["key"] for r in results(project)]
    assert len(keys) == len(set(keys)), "an evaluation was repeated"
    assert set(saved) <= set(keys)


def test_only_workers_of_this_target_run_candidates():
    own = {"target": "cpu-x86_64-znver4", "features": "f1"}
    targets = {"tcp://a:1": own, "tcp://b:1": {"target": "cpu-aarch64-neoverse-v2",
                                               "features": "f9"},
               "tcp://c:1": {"target": "cpu-x86_64-znver4", "features": "f2"},
               "tcp://d:1": own}
    info = {"tcp://a:1": {"nthreads": 2}, "tcp://b:1": {"nthreads": 4},
            "tcp://c:1": {"nthreads": 1}, "tcp://d:1": {"nthreads": 1}}
    slots, skipped, by_resource = choose_workers(own, targets, info, gpu=False)
    assert slots == {"tcp://a:1": 2, "tcp://d:1": 1} and not by_resource
    assert skipped == {"tcp://b:1": "target cpu-aarch64-neoverse-v2",
                       "tcp://c:1": "target cpu-x86_64-znver4 with other CPU features"}

    gpu = {"target": "cuda-sm_90-nvidia-h100", "features": None}
    targets = {"tcp://g:1": gpu, "tcp://h:1": gpu, "tcp://i:1": {
        "target": "none (cuda: no CUDA driver)", "features": None}}
    info = {"tcp://g:1": {"nthreads": 8, "resources": {"GPU": 4}},
            "tcp://h:1": {"nthreads": 8}, "tcp://i:1": {"nthreads": 8}}
    slots, skipped, by_resource = choose_workers(gpu, targets, info, gpu=True)
    assert slots == {"tcp://g:1": 4} and by_resource  # one slot per declared GPU
    assert skipped["tcp://h:1"] == "declares no GPU resource"
    assert skipped["tcp://i:1"].startswith("target none (cuda:")


def test_the_slurm_snippet_of_the_docs_builds_its_cluster():
    pytest.importorskip("dask_jobqueue")
    page = (Path(__file__).parents[1] / "docs" / "scale-out.md").read_text()
    (block,) = [b.split("\n", 1)[1] for b in page.split("```")
                if b.startswith("python\n") and "SLURMCluster(" in b]
    setup = block[:block.index("cluster.scale")]  # submitting jobs needs SLURM: not here
    namespace: dict = {}
    exec(setup.replace('"port": 8786', '"port": 0'), namespace)
    cluster = namespace["cluster"]
    try:
        script = cluster.job_script()
        assert "#SBATCH -p compute" in script and "#SBATCH --exclusive" in script
        assert "source ~/venvs/r3/bin/activate" in script
        assert "--nthreads 16" in script  # one worker per job, one replay server per core
        assert cluster.scheduler_address.startswith("tcp://")
    finally:
        cluster.close()


def test_headers_go_to_workers_that_cannot_see_them(tmp_path: Path, cluster):
    import numpy as np

    import pytest_r3 as r3
    from pytest_r3.record.store import capture

    source = tmp_path / "src"
    source.mkdir()
    (source / "factor.h").write_text("#define FACTOR 3.0f\n")
    (source / "hdr_scale.c").write_text(
        '#include "factor.h"\n'
        "void hdr_scale(long n, const float *x, float *y)\n"
        "{\n    for (long i = 0; i < n; ++i)\n        y[i] = FACTOR * x[i];\n}\n")
    kernel = r3.kernel(source / "hdr_scale.c", entry="hdr_scale", name="dask_hdr_scale")
    store = RecordingStore(tmp_path / "recordings")
    launcher = kernel.build()
    args = (4096, np.arange(4096, dtype=np.float32), np.zeros(4096, dtype=np.float32))
    _, recording = capture(kernel, args, lambda: launcher(*args), "t.py::test_scale")
    keys = store.save(kernel.name, [recording], cap_bytes=1 << 26)["kept"]

    pool = DaskPool(cluster, KernelSpec.from_kernel(kernel), store.root, keys, FAST)
    assert pool.headers == {"0/factor.h": b"#define FACTOR 3.0f\n"}
    assert dask_worker.with_headers(pool.job["spec"], pool.headers) == pool.job["spec"]
    (source / "factor.h").rename(tmp_path / "factor.h.moved")  # no worker sees it any more
    with pool:
        result = pool.servers[0].evaluate(Candidate(label="baseline"))
    assert result.ok, result.summary()
    moved = dask_worker.with_headers(pool.job["spec"], pool.headers)
    (folder,) = moved["include_dirs"]
    assert (Path(folder) / "factor.h").read_bytes() == b"#define FACTOR 3.0f\n"


def test_workers_read_their_baseline_from_the_submitters_compiled_code_cache(tmp_path: Path,
                                                                          cluster, monkeypatch):
    import numpy as np

    import pytest_r3 as r3
    from pytest_r3.backends import compile_cache
    from pytest_r3.record.store import capture

    client = cluster.client()  # its workers are started (or were) with another cache folder
    monkeypatch.setenv(compile_cache.DIR_ENV, str(tmp_path / "submitters-cache"))
    (tmp_path / "cc_scale.c").write_text(
        "void cc_scale(long n, const float *x, float *y)\n"
        "{\n    for (long i = 0; i < n; ++i)\n        y[i] = 5.0f * x[i];\n}\n")
    kernel = r3.kernel(tmp_path / "cc_scale.c", entry="cc_scale", name="dask_cc_scale")
    launcher = kernel.build()  # as a plain call: the baseline enters this process's cache
    args = (4096, np.arange(4096, dtype=np.float32), np.zeros(4096, dtype=np.float32))
    _, recording = capture(kernel, args, lambda: launcher(*args), "t.py::test_cc_scale")
    store = RecordingStore(tmp_path / "recordings")
    keys = store.save(kernel.name, [recording], cap_bytes=1 << 26)["kept"]
    ours = compile_cache.CompileCache(compile_cache.configured_dir())
    entries = ours.info()["entries"]
    theirs = set(client.run(lambda: os.environ.get(compile_cache.DIR_ENV)).values())
    assert str(ours.root) not in theirs  # the workers' environment names another folder

    job = DaskPool(cluster, KernelSpec.from_kernel(kernel), store.root, keys, FAST).job
    assert job["compile_cache"] == str(ours.root)

    def hits(case: str, folder: str) -> int:
        started = client.submit(dask_worker.start_server,
                                {**job, "key": f"{job['key']}-{case}", "compile_cache": folder},
                                pure=False).result()
        client.run(dask_worker.release, f"{job['key']}-{case}")
        return started["compile_cache_hits"]

    assert hits("shared", str(ours.root)) == 1  # the baseline's object code, read
    # a folder the worker cannot see: its own cache, which does not hold this kernel
    assert hits("elsewhere", str(tmp_path / "not-on-this-worker")) == 0
    assert hits("off", "off") == 0  # PYTEST_R3_CACHE=off where the run was started
    assert ours.info()["entries"] == entries  # workers read, never write


# -- the LLM outer loop ------------------------------------------------------------------------
def test_the_rewrite_loop_evaluates_on_dask(mm_project: Path):  # noqa: F811
    """The model's answers (a broken one, a malicious one, a wrong one, a good one) are
    judged on the Dask worker's contained replay servers while requests stay in flight."""
    ini = mm_project / "pytest.ini"
    ini.write_text(ini.read_text() + "r3_dask = local:1\n")
    with ScriptedChatServer(ModelScript()) as server:
        result = tune_with_model(mm_project, server.base_url)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "mm: Dask at local:1: 1 worker(s) used" in result.stdout
    assert "tuned (source rewrite)" in result.stdout
    events = [json.loads(line) for line in
              (mm_project / ".r3" / "runs" / "mm" / "events.jsonl").read_text().splitlines()]
    judged = [e for e in events if e["event"] == "result"]
    assert {"compile_error", "sandbox_violation", "wrong_output", "ok"} <= \
        {e["status"] for e in judged}
    assert all(e["result"]["details"].get("dask_worker", "").startswith("tcp://127.0.0.1:")
               for e in judged)  # every answer was judged on the cluster
    assert not (mm_project / "pwned").exists()
    lock = json.loads((mm_project / "r3.lock").read_text())
    (entry,) = lock["kernels"]["mm"].values()
    assert entry["rewrite_hash"] == source_hash(IKJ)
