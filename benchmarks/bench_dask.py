"""Evaluations per second on the local pool and on Dask, and how far one scheduler scales.

For each example kernel this records the oracle tests once, draws a fixed set of candidates
from its search space (the same for every pool), and evaluates them with one thread per slot,
as the search does:

- on the local pool of replay servers (``--workers`` of them),
- on a Dask LocalCluster of 1, 2 and 4 worker processes (``--dask``), replay servers kept on
  each worker across tasks; the cluster starts before timing (its start is printed apart).

Then the cost of Dask itself:

- per-task overhead: one candidate evaluated again and again on one slot, on the local pool
  and on Dask with one worker; the difference of the medians is what a task adds;
- scheduler overhead per task: the wall time per task of many no-op tasks in flight at once
  (what limits a scheduler), and from it a projection of how many workers one scheduler
  keeps busy for evaluations of 1 ms, 10 ms and 100 ms (workers = evaluation time / scheduler
  time per task, at the measured rate).

On a machine with fewer cores than workers the figures above 1 worker measure contention,
not scaling: the core count is printed beside them.

Run from the repository root:  python benchmarks/bench_dask.py [--candidates 8]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import isolation

isolation.isolate()  # before anything reads the environment (see isolation.py)

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "example_project"
KERNELS = ("scaled_add", "matmul", "jacobi2d")


def record(r3_dir: Path) -> None:
    subprocess.run([sys.executable, "-m", "pytest", str(EXAMPLE), "-q", "-p", "no:cacheprovider",
                    "--r3-record", "-o", f"r3_dir={r3_dir}"], check=True, cwd=EXAMPLE,
                   stdout=subprocess.DEVNULL)


def candidates(kernel, count: int, seed: int) -> list:
    """``count`` distinct valid candidates from the kernel's space, the same on every run."""
    import nevergrad as ng

    from pytest_r3.search.parametrization import SearchSpace

    space = SearchSpace(kernel.space, kernel.pipeline)
    parametrization = space.parametrization(seed)
    optimizer = ng.optimizers.registry["RandomSearch"](parametrization=parametrization,
                                                      budget=count * 20)
    found: dict = {}
    for _ in range(count * 20):
        point = optimizer.ask()
        if space.is_valid(point.value):
            candidate = space.decode(point.value, f"{kernel.name} #{len(found) + 1}")
            found.setdefault(candidate.key(), candidate)
        if len(found) == count:
            break
    return list(found.values())


def throughput(servers: list, batch: list) -> tuple[float, list]:
    """Evaluations per second of ``batch`` on ``servers``, one thread per server."""
    from queue import Queue

    free: Queue = Queue()
    for server in servers:
        free.put(server)

    def evaluate(candidate):
        server = free.get()
        try:
            return server.evaluate(candidate)
        finally:
            free.put(server)

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=len(servers)) as pool:
        results = list(pool.map(evaluate, batch))
    return len(batch) / (time.perf_counter() - started), results


def per_evaluation(server, candidate, repeats: int) -> tuple[float, float]:
    """(median seconds of one evaluation of ``candidate`` on ``server`` alone, median
    seconds of it spent outside the replay server's own evaluation: what the pool adds,
    immune to how long the evaluation itself took this time)."""
    times, added = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        result = server.evaluate(candidate)
        times.append(time.perf_counter() - started)
        added.append(times[-1] - result.details["seconds"])
    return statistics.median(times), statistics.median(added)


def statuses(results: list) -> str:
    counts: dict[str, int] = {}
    for result in results:
        counts[result.status] = counts.get(result.status, 0) + 1
    return ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))


def _noop(x: int) -> int:
    return x


def scheduler_overhead(client, tasks: int) -> tuple[float, float, float]:
    """(wall seconds per task with ``tasks`` no-op tasks in flight, CPU seconds per task of
    this process, which holds the LocalCluster's scheduler and the client, and seconds of
    one no-op round trip)."""
    client.gather(client.map(_noop, range(50), pure=False))  # warm
    started, cpu = time.perf_counter(), time.process_time()
    client.gather(client.map(_noop, range(tasks), pure=False))
    per_task = (time.perf_counter() - started) / tasks
    cpu_per_task = (time.process_time() - cpu) / tasks
    trips = []
    for index in range(50):
        started = time.perf_counter()
        client.submit(_noop, index, pure=False).result()
        trips.append(time.perf_counter() - started)
    return per_task, cpu_per_task, statistics.median(trips)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=int, default=8, help="per kernel and pool")
    parser.add_argument("--workers", type=int, default=2, help="servers of the local pool")
    parser.add_argument("--dask", default="1,2,4", help="Dask worker counts")
    parser.add_argument("--repeats", type=int, default=5, help="for the per-task overhead")
    parser.add_argument("--noop-tasks", type=int, default=2000)
    parser.add_argument("--kernels", default=",".join(KERNELS))
    parser.add_argument("--seed", type=int, default=0)
    isolation.add_option(parser)
    args = parser.parse_args()

    sys.path.insert(0, str(EXAMPLE))
    import exampleproj

    from pytest_r3.record.store import RecordingStore
    from pytest_r3.replay import KernelSpec, ReplaySettings
    from pytest_r3.replay.dask_pool import DaskCluster, DaskPool
    from pytest_r3.replay.pool import ServerPool

    settings = ReplaySettings(seed=args.seed)
    counts = [int(n) for n in args.dask.split(",")]
    names = args.kernels.split(",")
    rates: dict[tuple[str, str], float] = {}
    overhead: dict[str, tuple[float, ...]] = {}
    starts: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        r3_dir = Path(tmp) / "r3"
        record(r3_dir)
        store = RecordingStore(r3_dir / "recordings")
        kernels = {name: getattr(exampleproj, name) for name in names}
        batches = {name: candidates(kernels[name], args.candidates, args.seed)
                   for name in names}

        def pools(name):
            spec = KernelSpec.from_kernel(kernels[name])
            return spec, store.keys(name)

        label = f"local pool ({args.workers})"
        for name in names:
            spec, keys = pools(name)
            with ServerPool(spec, store.root, keys, settings, args.workers) as pool:
                rates[(label, name)], results = throughput(pool.servers, batches[name])
                overhead[name] = per_evaluation(pool.servers[0], batches[name][0],
                                                args.repeats)
            print(f"{label:<18} {name:<11} {rates[(label, name)]:6.2f} evaluations/s "
                  f"({statuses(results)})", flush=True)
        scheduler, scheduler_workers = None, 0
        for count in counts:
            label = f"Dask local:{count}"
            started = time.perf_counter()
            cluster = DaskCluster(f"local:{count}")
            cluster.client().wait_for_workers(count)
            starts[label] = time.perf_counter() - started
            try:
                for name in names:
                    spec, keys = pools(name)
                    started = time.perf_counter()
                    with DaskPool(cluster, spec, store.root, keys, settings) as pool:
                        starts[f"{label} {name}"] = time.perf_counter() - started
                        rates[(label, name)], results = throughput(pool.servers,
                                                                   batches[name])
                        if count == 1:
                            overhead[name] = (*overhead[name], *per_evaluation(
                                pool.servers[0], batches[name][0], args.repeats))
                    print(f"{label:<18} {name:<11} {rates[(label, name)]:6.2f} evaluations/s"
                          f" ({statuses(results)}; servers started in "
                          f"{starts[f'{label} {name}']:.1f} s)", flush=True)
                if count == max(counts):  # no-op tasks spread over every worker
                    scheduler = scheduler_overhead(cluster.client(), args.noop_tasks)
                    scheduler_workers = count
            finally:
                cluster.close()

    print()
    print(f"{os.cpu_count()} CPU core(s); {args.candidates} candidates per kernel, the same "
          "for every pool; evaluations per second (compile + verify + interleaved timing)")
    labels = [f"local pool ({args.workers})"] + [f"Dask local:{n}" for n in counts]
    print(f"{'kernel':<12}" + "".join(f"{lab:>20}" for lab in labels))
    for name in names:
        print(f"{name:<12}" + "".join(f"{rates[(lab, name)]:>20.2f}" for lab in labels))
    print("cluster start: " + ", ".join(f"{lab} {starts[lab]:.1f} s" for lab in labels[1:]))
    print()
    print("per-task overhead (one candidate again and again on one slot; medians): whole "
          "evaluation, and the part outside the replay server's own evaluation")
    for name in names:
        if len(overhead[name]) < 4:
            continue
        local_one, local_added, dask_one, dask_added = overhead[name]
        print(f"  {name:<11} local {local_one * 1e3:8.1f} ms (pool adds "
              f"{local_added * 1e3:6.2f} ms)   Dask local:1 {dask_one * 1e3:8.1f} ms (task "
              f"adds {dask_added * 1e3:6.2f} ms)")
    if scheduler is not None:
        per_task, cpu_per_task, trip = scheduler
        print(f"scheduler ({scheduler_workers} worker(s)): {per_task * 1e3:.2f} ms wall per "
              f"task with {args.noop_tasks} no-op tasks in flight ({1 / per_task:.0f} tasks/s), "
              f"{cpu_per_task * 1e3:.2f} ms CPU per task in the scheduler + client process; "
              f"one no-op round trip {trip * 1e3:.2f} ms")
        print("projection: workers one scheduler keeps busy = evaluation time / scheduler "
              "time per task (CPU: a scheduler with a core of its own; wall: as measured here)")
        for seconds in (1e-3, 1e-2, 1e-1):
            print(f"  evaluations of {seconds * 1e3:5.0f} ms: about "
                  f"{seconds / cpu_per_task:8.0f} workers (CPU), "
                  f"{seconds / per_task:8.0f} (wall)")


if __name__ == "__main__":
    main()
