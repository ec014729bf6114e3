"""Verdicts that hold in production: a rewrite the judge accepts must behave the same when
the user's own process builds and calls it (after the patch is applied), on the arrays
ordinary numpy code passes.

Each test evaluates a hostile rewrite of ``matmul`` (``tests/adversarial/``) with a real
replay server, then builds the same text the way the user's process does (``r3.kernel`` on
the patched file, at its absolute path) and calls it on plain numpy arrays.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import pytest_r3 as r3
from pytest_r3.record.store import RecordingStore, capture
from pytest_r3.replay import Candidate, KernelSpec, ReplayServer, ReplaySettings

HERE = Path(__file__).parent / "adversarial"
FAST = ReplaySettings(run_timeout=0.5, timing_rounds=3, warmup_rounds=1,
                      min_sample_seconds=1e-4)


class Matmul:
    """The base matmul kernel in a folder of its own, recorded at n = 24 and n = 17."""

    def __init__(self, root: Path) -> None:
        self.path = root / "kernels" / "matmul.c"
        self.path.parent.mkdir(parents=True)
        self.path.write_text((HERE / "_base_matmul.c").read_text())
        self.kernel = r3.kernel(self.path, entry="matmul", name="production_matmul",
                                no_alias=True)
        self.store = RecordingStore(root / "recordings")
        launcher = self.kernel.build()
        rng = np.random.default_rng(5)
        recordings = []
        for index, n in enumerate((24, 17)):
            args = (n, rng.standard_normal((n, n)), rng.standard_normal((n, n)),
                    np.zeros((n, n)))
            recordings.append(capture(self.kernel, args, lambda a=args: launcher(*a),
                                      f"test_production_builds.py::launch_{index}")[1])
        self.keys = self.store.save(self.kernel.name, recordings, cap_bytes=1 << 26)["kept"]
        self.server = ReplayServer(KernelSpec.from_kernel(self.kernel), self.store.root,
                                   self.keys, FAST, address_space=1 << 30,
                                   request_timeout=60.0).start()

    def evaluate(self, file: str):
        return self.server.evaluate(Candidate(source_text=(HERE / f"{file}.c").read_text(),
                                              label=file))

    def production(self, file: str):
        """The rewrite as the user's process runs it once the patch is applied."""
        self.path.write_text((HERE / f"{file}.c").read_text())
        try:
            return r3.kernel(self.path, entry="matmul", name=f"patched_{file}").build()
        finally:
            self.path.write_text((HERE / "_base_matmul.c").read_text())


@pytest.fixture(scope="module")
def matmul(tmp_path_factory):
    base = Matmul(tmp_path_factory.mktemp("production"))
    yield base
    base.server.close()


def test_a_rewrite_sees_the_file_name_it_will_see_in_production(matmul):
    """Keyed on ``__FILE__`` naming a folder: the judge's build and the user's build see
    the same file identity, so the verdict (accepted, exact) holds in production."""
    result = matmul.evaluate("file_identity_probe")
    assert result.status in ("ok", "too_busy"), result.summary()
    patched = matmul.production("file_identity_probe")
    rng = np.random.default_rng(1)
    for n in (17, 33):
        a, b, c = rng.standard_normal((n, n)), rng.standard_normal((n, n)), np.zeros((n, n))
        patched(n, a, b, c)
        assert np.allclose(c, a @ b), f"wrong in the user's build at n={n}: " \
            f"max error {np.abs(c - a @ b).max():.3g}"


def test_two_read_only_inputs_passed_as_one_array_are_verified(matmul):
    """Wrong only for ``matmul(n, a, a, c)``: the judge draws the read-only inputs as one
    array (the kernel is declared no_alias, which concerns written buffers only), and
    the rewrite is refused naming that case; the user's squaring call shows why."""
    result = matmul.evaluate("shared_inputs_wrong")
    assert result.status == "wrong_output", result.summary()
    assert "read-only inputs a and b the same array" in result.reason(), result.reason()
    patched = matmul.production("shared_inputs_wrong")
    n = 9
    a, c = np.random.default_rng(2).standard_normal((n, n)), np.zeros((n, n))
    patched(n, a, a, c)
    assert not np.allclose(c, a @ a)  # what the verdict protects the user from


def test_timing_and_the_late_pass_use_consecutive_heap_blocks_in_parameter_order():
    """Consecutive numpy arrays of a long-lived process are heap blocks end to end in the
    order they were made: one timed buffer set is laid out so (a rewrite slow only there is
    timed slow), and the late pass meets it too (one wrong only there is refused)."""
    import ctypes

    from pytest_r3.replay import layout
    from pytest_r3.replay.buffers import check_plain, plain_buffers

    values = [np.full((33, 33), float(k)) for k in range(3)]
    timed = layout.draw(layout.timed_seed(7, 1, 0), len(values))
    assert timed.adjacent and timed.order == (0, 1, 2), timed.describe()
    walked = {layout.draw(layout.seed_for(index, 3), 3) for index in range(18)}
    assert any(d.adjacent and d.order == (0, 1, 2) for d in walked)
    buffers = plain_buffers(values, layout.timed_seed(7, 1, 0))
    addresses = [b.array.ctypes.data for b in buffers]
    sizes = [int.from_bytes(ctypes.string_at(a - 8, 8), "little") for a in addresses]
    assert not any(size & 2 for size in sizes)  # heap blocks, not mapped ones
    assert addresses[1] == addresses[0] + (sizes[0] & ~7)
    assert addresses[2] == addresses[1] + (sizes[1] & ~7)
    assert all(a % 4096 != 16 for a in addresses)  # never where a mapped block starts
    for buffer, like in zip(buffers, values):
        buffer.fill(like, None)
        assert np.array_equal(buffer.array, like) and check_plain(buffer.storage, like) is None
    ctypes.memset(addresses[0] + values[0].nbytes, 0x5A, 1)  # into b's size word
    assert "before the start" in check_plain(buffers[1].storage, values[1])
