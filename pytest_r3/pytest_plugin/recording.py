"""``--r3-record``: capture kernel launches inside their oracle tests during a pytest run.

A kernel with tests marked ``r3_oracle`` is recorded only inside those; a kernel with no
marked test is recorded inside any test that launches it (observed). At the end of the
session the recordings go to ``<r3-dir>/recordings/<kernel>/`` with the kernel's spec.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from ..kernel import declaration
from ..outputs import write_json_atomic
from ..record.store import SPEC_FILE, Recording, RecordingStore, capture


class RecordingPlugin:
    def __init__(self, config: pytest.Config, root: Path, cap_bytes: int,
                 oracle_kernels) -> None:
        self.config = config
        self.store = RecordingStore(root)
        self.cap_bytes = cap_bytes
        self._oracle_kernels = oracle_kernels
        self.marked: dict[str, list[str]] = {}
        self.observed: dict[str, set[str]] = defaultdict(set)
        self.recordings: dict[str, list[Recording]] = defaultdict(list)
        self.launches: dict[str, int] = defaultdict(int)
        self.kernels: dict[str, declaration.Kernel] = {}
        self.summary: dict[str, dict] = {}
        self.ran: set[str] = set()  # test ids that ran (marked ones may be deselected)
        self._item: pytest.Item | None = None
        self._item_oracles: set[str] = set()
        self.paused = False
        self.saved = False

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            for name in self._oracle_kernels(item):
                self.marked.setdefault(name, []).append(item.nodeid)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        self._item = item
        self._item_oracles = set(self._oracle_kernels(item))
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
        return self.marked.get(kernel) or sorted(self.observed.get(kernel, ()))

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.save()

    def save(self) -> None:
        """Write the session's recordings (once) and each kernel's spec beside them."""
        from ..replay.protocol import KernelSpec

        if self.saved:
            return
        self.saved = True
        for name, recordings in self.recordings.items():
            kernel = self.kernels[name]
            index = self.store.save(name, recordings, self.cap_bytes)
            spec = KernelSpec.from_kernel(kernel).as_dict()
            write_json_atomic(self.store.kernel_dir(name) / SPEC_FILE, {
                "spec": spec,
                "oracle_tests": self.marked.get(name, []),
                "observed_tests": sorted(self.observed.get(name, ())),
                "recorded_from": "marked" if name in self.marked else "observed",
            })
            self.summary[name] = index

    def pytest_terminal_summary(self, terminalreporter) -> None:
        write = terminalreporter.write_line
        terminalreporter.section("pytest-r3 recordings")
        if not self.summary:
            write("no kernel launch was recorded (are the oracle tests selected?)")
        for name, index in sorted(self.summary.items()):
            origin = "" if name in self.marked else (
                " (no test is marked r3_oracle for it: recorded from the tests that launch it)")
            write(f"{name}: {self.launches[name]} launch(es), {len(index['kept'])} unique "
                  f"recording(s) kept, {index['kept_bytes'] / 2**20:.1f} MiB{origin}")
            if index["dropped"]:
                write(f"  dropped {len(index['dropped'])} over the cap of "
                      f"{index['cap_bytes'] / 2**20:.0f} MiB: "
                      + ", ".join(d["key"] for d in index["dropped"]))
            if index["weak"]:
                write(f"  too weak to verify with alone (output equals input): "
                      f"{', '.join(index['weak'])}")
            if index.get("aliased"):
                write(f"  launched with aliased arguments (replayed the same way): "
                      f"{', '.join(index['aliased'])}")
        for name in sorted(set(self.marked) - set(self.summary)):
            if self.ran.intersection(self.marked[name]):
                write(f"{name}: marked oracle tests ran but never launched it")
            else:
                write(f"{name}: not recorded, none of its marked oracle tests ran "
                      "(deselected or skipped)")
        write(f"stored under {self.store.root}")
