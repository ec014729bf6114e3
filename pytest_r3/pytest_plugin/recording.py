"""``--r3-record``: capture kernel launches inside their oracle tests during a pytest run.

A kernel with tests marked ``r3_oracle`` is recorded only inside those; a kernel with no
marked test is recorded inside any test that launches it (observed). At the end of the
session the recordings go to ``<r3-dir>/recordings/<kernel>/`` with the kernel's spec.

Launches inside a test that uses pytest-benchmark's ``benchmark`` fixture, or is marked
``r3_workload(kernel, weight=...)``, are timing workloads instead (sampled and weighted by
:mod:`..record.workloads`); such tests are no oracle of the kernels they time.

Under pytest-xdist each worker records and saves its own launches (the store merges them
under a file lock) and sends the controller a summary (:meth:`RecordingPlugin.export`);
the controller merges the summaries (:meth:`RecordingPlugin.merge`) and prints the
recordings once (see :mod:`.distributed`).
"""

from __future__ import annotations

import sys
import uuid
from collections import defaultdict
from pathlib import Path

import pytest

from ..errors import R3Error
from ..kernel import declaration
from ..outputs import write_json_atomic
from ..record.store import SPEC_FILE, CorruptRecording, Recording, RecordingStore, capture
from ..record.workloads import WorkloadSampler
from . import distributed


class RecordingPlugin:
    def __init__(self, config: pytest.Config, root: Path, cap_bytes: int,
                 oracle_kernels, controller: bool = False, workload_kernels=None,
                 workload_cap: int | None = None) -> None:
        self.config = config
        self.controller = controller  # xdist's: the workers record, this merges
        self.store = RecordingStore(root)
        self.cap_bytes = cap_bytes
        self._oracle_kernels = oracle_kernels
        self._workload_kernels = workload_kernels or (lambda item: {})
        self.marked: dict[str, list[str]] = {}
        self.observed: dict[str, set[str]] = defaultdict(set)
        self.recordings: dict[str, list[Recording]] = defaultdict(list)
        self.launches: dict[str, int] = defaultdict(int)
        self.kernels: dict[str, declaration.Kernel] = {}
        self.summary: dict[str, dict] = {}
        self.ran: set[str] = set()  # test ids that ran (marked ones may be deselected)
        self._item: pytest.Item | None = None
        self._item_oracles: set[str] = set()
        self._item_workloads: dict[str | None, float] = {}
        run = getattr(config, "workerinput", {}).get("testrunuid") or uuid.uuid4().hex
        self.workloads = WorkloadSampler(run=run, cap_bytes=workload_cap or cap_bytes)
        self.workload_launches: dict[str, int] = defaultdict(int)
        self.workload_tests: dict[str, set[str]] = defaultdict(set)
        self.paused = False
        self.saved = False
        # on the xdist controller: the kernels the workers recorded, where each kernel is
        # declared, the workers' sys.path, and what went wrong on a worker
        self.recorded: set[str] = set()
        self.declared: dict[str, dict] = {}
        self.worker_sys_path: list[str] = []
        self.worker_problems: list[str] = []

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            for name in self._oracle_kernels(item):
                self.marked.setdefault(name, []).append(item.nodeid)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        self._item = item
        self._item_oracles = set(self._oracle_kernels(item))
        self._item_workloads = self._workload_kernels(item)
        self.ran.add(item.nodeid)
        declaration.add_interceptor(self._intercept)
        try:
            return (yield)
        finally:
            declaration.remove_interceptor(self._intercept)
            self._item = None

    def _intercept(self, kernel, args, proceed):
        if self.paused:
            return proceed()
        nodeid = self._item.nodeid if self._item is not None else "<outside a test>"
        weight = self._item_workloads.get(kernel.name, self._item_workloads.get(None))
        if weight is not None and kernel.name not in self._item_oracles:
            self.workload_launches[kernel.name] += 1
            self.workload_tests[kernel.name].add(nodeid)
            return self.workloads.launch(kernel, args, proceed, nodeid, weight)
        self.observed[kernel.name].add(nodeid)
        wanted = (kernel.name in self._item_oracles
                  or (kernel.name not in self.marked and self._item is not None))
        if not wanted:
            return proceed()
        result, recording = capture(kernel, args, proceed, nodeid)
        self.kernels[kernel.name] = kernel
        self.launches[kernel.name] += 1
        self.recordings[kernel.name].append(recording)
        return result

    def oracle_tests(self, kernel: str) -> list[str]:
        """Node ids of the tests a tuned variant of ``kernel`` must pass."""
        marked = self.marked.get(kernel, [])
        if self.controller:  # the child run gets ids, not items: only those that ran
            marked = [nodeid for nodeid in marked if nodeid in self.ran]
        return marked or sorted(self.observed.get(kernel, ()))

    def recorded_kernels(self) -> list[str]:
        """Names of the kernels oracle launches were recorded of (here, or by xdist
        workers); workloads alone verify nothing, so they do not make a kernel tunable."""
        return sorted(set(self.recordings) | self.recorded)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        output = getattr(self.config, "workeroutput", None)
        if output is None:
            try:
                self.save()
            except R3Error as exc:  # a read-only or full disk: one line, not a traceback
                self.worker_problems.append(f"could not save the recordings: {exc}")
            if self.worker_problems and session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED  # recordings are missing
            return
        problem = None  # an xdist worker: save, then tell the controller what was recorded
        try:
            self.save()
        except R3Error as exc:  # e.g. a read-only or full disk: the controller says so
            problem = f"could not save its recordings: {exc}"
        output[distributed.OUTPUT_KEY] = {**self.export(), "problem": problem}

    # -- pytest-xdist ---------------------------------------------------------------------
    def export(self) -> dict:
        """What the xdist controller needs from this worker (plain data for execnet)."""
        marked_ids = {nodeid for ids in self.marked.values() for nodeid in ids}
        return {"recorded": sorted(self.recordings), "launches": dict(self.launches),
                "workload_launches": dict(self.workload_launches),
                "workload_tests": {n: sorted(ids) for n, ids in self.workload_tests.items()},
                "marked": self.marked,
                "observed": {name: sorted(ids) for name, ids in self.observed.items()},
                "ran": sorted(self.ran & marked_ids),
                "declared": distributed.declared_kernels(), "sys_path": list(sys.path)}

    def merge(self, output: dict) -> None:
        """Add one worker's :meth:`export` (on the xdist controller)."""
        self.recorded.update(output["recorded"])
        for name, count in output["launches"].items():
            self.launches[name] += count
        for name, count in output.get("workload_launches", {}).items():
            self.workload_launches[name] += count
        for name, ids in output.get("workload_tests", {}).items():
            self.workload_tests[name].update(ids)
        for name, ids in output["marked"].items():
            known = self.marked.setdefault(name, [])
            known.extend(nodeid for nodeid in ids if nodeid not in known)
        for name, ids in output["observed"].items():
            self.observed[name].update(ids)
        self.ran.update(output["ran"])
        for name, where in output["declared"].items():
            self.declared.setdefault(name, where)
        self.worker_sys_path += [p for p in output["sys_path"] if p not in self.worker_sys_path]
        if output.get("problem"):
            self.worker_problems.append(f"an xdist worker {output['problem']}")

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error) -> None:
        output = getattr(node, "workeroutput", None) or {}
        if distributed.OUTPUT_KEY in output:
            self.merge(output[distributed.OUTPUT_KEY])
        else:
            self.worker_problems.append(f"an xdist worker went down without a summary "
                                        f"({error or 'no output'}): its recordings may be "
                                        "missing")

    def finish_merge(self) -> None:
        """On the xdist controller, once every worker is down: the store's merged index of
        each recorded kernel, and its spec file with every worker's test ids."""
        if self.saved:
            return
        self.saved = True
        for name in sorted(self.recorded | set(self.workload_launches)):
            index = self.store.index(name)
            if index is None:
                continue
            self.summary[name] = index
            try:
                saved = self.store.spec(name)
            except CorruptRecording:  # unreadable: the next recording run writes it again
                saved = None
            if saved is not None:
                write_json_atomic(self.store.kernel_dir(name) / SPEC_FILE, {
                    **saved, "oracle_tests": self.marked.get(name, []),
                    "observed_tests": sorted(self.observed.get(name, ()))})

    def save(self) -> None:
        """Write the session's recordings (once) and each kernel's spec beside them."""
        from ..replay.protocol import KernelSpec

        if self.controller:
            return self.finish_merge()
        if self.saved:
            return
        self.saved = True
        workloads = self.workloads.recordings()
        self.kernels.update({name: kernel for name, kernel in self.workloads.kernels.items()
                             if name not in self.kernels})
        for name in sorted(set(self.recordings) | set(workloads)):
            kernel = self.kernels[name]
            index = self.store.save(name, self.recordings.get(name, []) + workloads.get(name, []),
                                    self.cap_bytes, self.workloads.cap_bytes)
            spec = KernelSpec.from_kernel(kernel).as_dict()
            write_json_atomic(self.store.kernel_dir(name) / SPEC_FILE, {
                "spec": spec,
                "oracle_tests": self.marked.get(name, []),
                "observed_tests": sorted(self.observed.get(name, ())),
                "recorded_from": "marked" if name in self.marked else "observed",
            })
            self.summary[name] = index

    def pytest_terminal_summary(self, terminalreporter, exitstatus) -> None:
        if exitstatus in (pytest.ExitCode.USAGE_ERROR, pytest.ExitCode.INTERRUPTED) \
                and not self.summary:
            return  # stopped before anything was saved (a wrong entry=, a collection error,
            # Ctrl-C): pytest's own lines say why
        write = terminalreporter.write_line
        terminalreporter.section("pytest-r3 recordings")
        if not self.summary and not self.worker_problems:
            write("no kernel launch was recorded (are the oracle tests selected?)")
        for name, index in sorted(self.summary.items()):
            origin = "" if name in self.marked else (
                " (no test is marked r3_oracle for it: recorded from the tests that launch it)")
            workloads = index.get("workloads") or {}
            oracle_keys = [key for key in index["kept"] if key not in workloads]
            write(f"{name}: {self.launches[name]} launch(es), {len(oracle_keys)} unique "
                  f"recording(s) kept, {index['kept_bytes'] / 2**20:.1f} MiB{origin}")
            if self.workload_launches.get(name):
                tests = self.workload_tests.get(name, ())
                write(f"  workloads: {self.workload_launches[name]} launch(es) in "
                      f"{len(tests)} benchmark/r3_workload test(s), {len(workloads)} "
                      "workload recording(s) kept for timing")
            if name not in self.recordings and name not in self.recorded:
                write("  no oracle test launched it: not tuned until one does (workloads "
                      "time, oracle tests verify)")
            over_cap = [d["key"] for d in index["dropped"] if d["why"].startswith("over")]
            if over_cap:
                write(f"  dropped {len(over_cap)} over the cap of "
                      f"{index['cap_bytes'] / 2**20:.0f} MiB: " + ", ".join(over_cap))
            heavy = [d["key"] for d in index["dropped"] if d["why"].startswith("workload over")]
            if heavy:
                write(f"  dropped {len(heavy)} workload(s) over --r3-workload-cap: "
                      + ", ".join(heavy))
            if index["weak"]:
                write(f"  too weak to verify with alone (output equals input): "
                      f"{', '.join(index['weak'])}")
            if index.get("aliased"):
                write(f"  launched with aliased arguments (replayed the same way): "
                      f"{', '.join(index['aliased'])}")
        for name in sorted(set(self.marked) - set(self.summary)):
            if name in self.recorded or name in self.recordings:  # launched, not saved
                write(f"{name}: launched, but no recording of it was saved")
            elif self.ran.intersection(self.marked[name]):
                write(f"{name}: marked oracle tests ran but never launched it")
            else:
                write(f"{name}: not recorded, none of its marked oracle tests ran "
                      "(deselected or skipped)")
        for problem in dict.fromkeys(self.worker_problems):
            write(problem, red=True)
        if self.summary:
            write(f"stored under {self.store.root}")
