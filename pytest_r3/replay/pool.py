"""The replay servers of one kernel, started together: the first learns the reference
outputs from the baseline, the others share them, and all stop together."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
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

    def _server(self, reference=None, settings: ReplaySettings | None = None
                ) -> ReplayServer:
        return ReplayServer(self.spec, self.recordings_root, self.keys,
                            settings or self.settings,
                            address_space=self.address_space, log_path=self.log_path,
                            reference=reference, work=self.work)

    def start(self) -> ServerPool:
        """The others' workers start while the first learns the reference outputs; they get
        the reference once it is known."""
        self.servers = [self._server() for _ in range(self.count)]
        first, others = self.servers[0], self.servers[1:]
        try:
            with ThreadPoolExecutor(max_workers=max(1, len(others))) as executor:
                prepared = [executor.submit(server.prepare) for server in others]
                try:
                    first.start()
                finally:
                    for future in prepared:
                        future.exception()  # every worker started or failed before going on
            for server, future in zip(others, prepared, strict=True):
                future.result()
                server.judge = first.judge
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
        slower only on one of the two is timed slow before it is locked."""
        server = self._server(self.servers[0].judge if self.servers else None,
                              self.settings.confirming())
        try:
            yield server.start()
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
