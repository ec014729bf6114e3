"""A launcher whose kernel runs in a contained worker: the oracle re-run of a source rewrite.

The oracle tests themselves run in pytest as usual; each call of the kernel is forwarded to
a sealed worker that has loaded only the rewrite (no baseline beside it to borrow answers
from), and the written buffers are copied back into the caller's arrays. The rewrite's
machine code never runs in the pytest process.

The tests make few calls, and a kernel that keeps state could count them: the first call
is made many times in a row in the worker (``production_calls``, for about a second at
most), each on the caller's values, and must give the same outputs every time; every test
call after it is then a late call in a long-lived process, as in production.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import numpy as np

from ..backends import get_backend
from ..errors import KernelFault, LaunchError, R3Error
from .compile import CandidateCompiler
from .process import DEFAULT_ADDRESS_SPACE, WorkerDied, WorkerProcess
from .protocol import Candidate, KernelSpec, Rejected, ReplaySettings


class ContainedLauncher:
    """Called like any launcher, with the kernel's arguments (numpy arrays and scalars)."""

    def __init__(self, spec: KernelSpec, candidate: Candidate,
                 settings: ReplaySettings | None = None, *,
                 address_space: int = DEFAULT_ADDRESS_SPACE,
                 log_path: str | Path | None = None, timeout: float = 300.0) -> None:
        self.spec = spec
        self.settings = settings or ReplaySettings()
        self.timeout = timeout
        self.calls = 0
        backend = get_backend(spec.backend)
        try:
            compiled = CandidateCompiler(spec, backend, self.settings.static_check).compile(
                candidate)
        except Rejected as rejected:
            raise R3Error(f"kernel {spec.name!r}: {rejected.result().reason()}") from None
        gpu = not getattr(backend, "address_space_cap", True)
        self.worker = WorkerProcess(self.settings, address_space, log_path, gpu=gpu)
        self.worker.spawn()
        try:
            self.worker.ask("load", {
                "spec": spec.as_dict(), "settings": asdict(self.settings), "ir": compiled.ir,
                "pipeline": {**spec.pipeline, **candidate.pipeline},
                "tunables": {**spec.default_macros, **candidate.macros, **candidate.launch}},
                timeout)
            self.worker.ask("seal", {"ioctl": not getattr(backend, "address_space_cap", True)},
                            timeout)
        except (WorkerDied, Rejected) as failed:
            self.worker.kill()
            raise R3Error(f"kernel {spec.name!r}: the contained worker could not load the "
                          f"variant: {failed}") from None

    def __call__(self, *args: object) -> object:
        params = self.spec.params
        if len(args) != len(params):
            raise LaunchError(f"kernel {self.spec.name!r} takes {len(params)} argument(s), "
                              f"got {len(args)}")
        slots, arrays, scalars = [], {}, {}
        by_identity: dict[int, int] = {}
        for param, value in zip(params, args, strict=True):
            if not param["is_pointer"]:
                scalars[param["name"]] = value.item() if isinstance(value, np.generic) else value
                continue
            if not isinstance(value, np.ndarray):
                raise LaunchError(f"kernel {self.spec.name!r}: argument {param['name']!r} must "
                                  "be a numpy array when the variant runs contained")
            number = by_identity.get(id(value))
            if number is None:  # the same array passed twice stays one buffer (aliasing)
                number = by_identity[id(value)] = len(slots)
                slots.append({"params": [], "written": False, "array": value})
                arrays[str(number)] = value
            slots[number]["params"].append(param["name"])
            slots[number]["written"] |= bool(param["written"])
        layout = {"scalars": scalars, "slots": [{"params": s["params"], "written": s["written"]}
                                                for s in slots]}
        try:
            repeats = self.settings.production_calls if self.calls == 0 else 1
            self.calls += 1
            _, data, returned = self.worker.ask("call", {"layout": layout, "repeats": repeats},
                                                self.timeout, arrays)
        except (WorkerDied, Rejected) as failed:
            self.worker.kill()
            raise KernelFault(f"kernel {self.spec.name!r}: the contained variant failed: "
                              f"{failed}") from None
        for number, slot in enumerate(slots):
            if slot["written"]:
                output = returned.get(str(number))
                if output is None or output.shape != slot["array"].shape \
                        or output.dtype != slot["array"].dtype:
                    self.worker.kill()
                    raise KernelFault(f"kernel {self.spec.name!r}: the contained worker "
                                      "returned a malformed buffer")
                np.copyto(slot["array"], output)
        return data.get("returned")

    def close(self) -> None:
        self.worker.close()
