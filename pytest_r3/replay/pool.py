"""The replay servers of one kernel, started together: the first learns the reference
outputs from the baseline, the others share them, and all stop together."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import partial
from pathlib import Path

from .client import ReplayServer
from .process import DEFAULT_ADDRESS_SPACE
from .protocol import KernelSpec, ReplaySettings


class ServerPool:
    """``count`` replay servers for one kernel, as a context manager."""

    def __init__(self, spec: KernelSpec, recordings_root: str | Path, keys: list[str],
                 settings: ReplaySettings, count: int, *,
                 address_space: int = DEFAULT_ADDRESS_SPACE,
                 log_path: str | Path | None = None, work=None) -> None:
        self.spec, self.recordings_root, self.keys = spec, recordings_root, keys
        self.work = work  # the kernel's work= (parent side only: the speed-of-light check)
        self.settings, self.count = settings, max(1, count)
        self.address_space, self.log_path = address_space, log_path
        self.servers: list[ReplayServer] = []
        # the slow-path probes the first fresh server learnt from the baseline, and why
        # it dropped others: every later fresh server of the pool starts with them
        self._probes: tuple[list, list[str]] | None = None

    def _server(self, reference=None, settings: ReplaySettings | None = None
                ) -> ReplayServer:
        return ReplayServer(self.spec, self.recordings_root, self.keys,
                            settings or self.settings,
                            address_space=self.address_space, log_path=self.log_path,
                            reference=reference, work=self.work)

    def start(self) -> ServerPool:
        """Every worker starts at once; the baseline's runs on the planned cases, which
        give the reference outputs, are shared out between them (one worker alone would
        leave the others idle through it); each then gets the reference."""
        self.servers = [self._server() for _ in range(self.count)]
        first = self.servers[0]
        try:
            with ThreadPoolExecutor(max_workers=self.count) as executor:
                _every(executor, [server.prepare for server in self.servers])
                with first._loading():
                    judge, cases = first.plan_reference()
                shares = _shares(cases, self.count)
                for server in self.servers[1:]:
                    with server._loading():
                        server._send_cases(cases)
                dropped: dict[int, str] = {}
                for learnt in _every(executor, [
                        partial(_learn, server, judge, cases, share)
                        for server, share in zip(self.servers, shares, strict=True)]):
                    dropped.update(learnt)
            with first._loading():
                first.adopt_reference(judge, cases, dropped)
            for server in self.servers:
                server.judge = judge
                server.start()
        except BaseException:
            self.close()
            raise
        return self

    @contextmanager
    def fresh(self) -> Iterator[ReplayServer]:
        """A server in a new worker process that took no part in the search (no candidate
        ran in it, nothing it measured was kept), sharing the reference outputs: a claim is
        confirmed there, A/B against the baseline, before it is locked. Its heap buffers are
        timed in reverse allocation order (the search's in parameter order), so a rewrite
        slower only on one of the two is timed slow before it is locked. The slow-path
        probes are learnt from the baseline by the first such server only."""
        server = self._server(self.servers[0].judge if self.servers else None,
                              self.settings.confirming())
        if self._probes is not None and server.judge is not None:  # the baseline's outputs
            server.probes, dropped = self._probes               # there are known already
            server.dropped_cases += dropped
        try:
            yield server.start()
            if self._probes is None and server.judge is not None:
                self._probes = (list(server.probes or ()), [
                    d for d in server.dropped_cases if d.startswith("slow-path probe")])
        finally:
            server.close()

    @property
    def containment(self) -> str:
        """What containment the workers got (one line; says DEGRADED and why if so)."""
        return self.servers[0].containment if self.servers else ""

    def close(self) -> None:
        for server in self.servers:
            server.close()

    def __enter__(self) -> ServerPool:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _learn(server: ReplayServer, judge, cases: list, share: list) -> dict[int, str]:
    with server._loading():
        return server.learn_cases(judge, cases, share)


def _every(executor: ThreadPoolExecutor, calls: list) -> list:
    """Each call's result, once every one has ended (the first error raised then)."""
    futures = [executor.submit(call) for call in calls]
    for future in futures:
        future.exception()
    return [future.result() for future in futures]


def _shares(cases: list, count: int) -> list[list]:
    """``cases`` shared out between ``count`` workers, about evenly by the bytes they move;
    a case and the later launches that run after it (on the buffers it wrote) stay in one
    share, in their order."""
    chains: dict[int, list] = {}
    for case in cases:
        chains.setdefault(id(case.after[0]) if case.after else id(case), []).append(case)
    loads, shares = [0] * count, [[] for _ in range(count)]
    for chain in sorted(chains.values(), key=lambda c: -sum(case.nbytes for case in c)):
        lightest = loads.index(min(loads))
        shares[lightest] += chain
        loads[lightest] += sum(case.nbytes for case in chain)
    order = {id(case): number for number, case in enumerate(cases)}
    return [sorted(share, key=lambda case: order[id(case)]) for share in shares]
