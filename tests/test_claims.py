"""Claims a user can trust: the noise band learned by an A/A run, the winner confirmed in a
fresh worker process, stored results reused only when they can stand for a new
measurement, and search figures labelled as the estimates they are. Real pytest runs of a
small project (pytester, in a subprocess), real workers."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from conftest import r3_tune

import pytest_r3 as r3
from pytest_r3.record.store import RecordingStore, capture
from pytest_r3.replay import Candidate, KernelSpec, ReplaySettings
from pytest_r3.replay.pool import ServerPool
from pytest_r3.tuning.claims import MIN_EFFECT, Band, calibrate, confirm


def test_search_figures_are_estimates_and_reports_show_the_confirmed_claim(order_project):
    project = order_project
    result = r3_tune(project)
    assert result.ret == 0, result.stdout.str()
    out = result.stdout.str()
    name = project.name
    # the progress line: an estimate, unconfirmed
    assert re.search(rf"{name}: 2/2 evaluations, best search estimate [\d.]+x \(unconfirmed",
                     out), out
    assert "best speedup so far" not in out
    # the A/A band, and the claim confirmed in a fresh process with its interval
    assert re.search(rf"{name}: noise band [\d.]+-[\d.]+ \(the baseline timed against "
                     r"itself", out), out
    (row,) = [line for line in result.outlines if line.startswith(name + " ")]
    assert re.search(r"tuned .* [\d.]+x \[[\d.]+-[\d.]+\]", row), row
    # the line under the row, wrapped to the table's 100 columns (continuation indented)
    lines = result.outlines
    start = [i for i, line in enumerate(lines) if "confirmed in a fresh worker process" in line]
    assert start, out
    end = start[0] + 1
    while end < len(lines) and lines[end].startswith("      "):
        end += 1
    confirmed = [" ".join(line.strip() for line in lines[start[0]:end])]
    assert re.search(r"noise band [\d.]+-[\d.]+", confirmed[0]), out
    assert re.search(r"[\d.]+% of timed samples dropped", confirmed[0]), confirmed
    assert re.search(r"search estimate [\d.]+x", confirmed[0]), confirmed
    r3_dir = project.path / ".r3"
    markdown = (r3_dir / "report.md").read_text()
    assert "95% interval" in markdown and "noise band" in markdown
    assert "samples dropped" in markdown
    report = json.loads((r3_dir / "report.json").read_text())
    (tuned,) = [b for b in report["benchmarks"] if b["param"] == "tuned"]
    info = tuned["extra_info"]
    low, high = info["interval"]
    assert low <= info["speedup"] <= high
    assert info["noise_band"][0] < 1 < info["noise_band"][1]
    assert 0 <= info["dropped_share"] <= 1
    assert info["confirmed_in"] == "fresh worker process"
    lock = json.loads((project.path / "r3.lock").read_text())
    (entry,) = lock["kernels"][name].values()
    assert entry["speedup"] == pytest.approx(info["speedup"], rel=1e-3)
    page = (r3_dir / "report.html").read_text()
    assert "confirmed speedup" in page.lower() and "search estimates" in page
    assert f"{info['speedup']:.2f}x" in page


# -- the noise band and the fresh confirmation, on a real pool -------------------------------


NOP_C = """\
#ifndef NOP
#define NOP 0
#endif
void nop_scale(long n, const float *x, float *out)
{
    for (long i = 0; i < n; ++i)
        out[i] = 2.0f * x[i] + (float)(NOP - NOP);
}
"""


@pytest.fixture(scope="module")
def nop_pool(tmp_path_factory):
    """A kernel whose tunable changes nothing: every variant is the baseline."""
    folder = tmp_path_factory.mktemp("claims")
    (folder / "nop.c").write_text(NOP_C)
    kernel = r3.kernel(folder / "nop.c", entry="nop_scale", name="claims_nop",
                       tune={"NOP": [0, 1]})
    store = RecordingStore(folder / "recordings")
    x = np.random.default_rng(0).random(200_000, dtype=np.float32)
    launch = (x.size, x, np.zeros_like(x))
    _, recording = capture(kernel, launch, lambda: kernel.build()(*launch), "t.py::test_nop")
    keys = store.save(kernel.name, [recording], cap_bytes=1 << 26)["kept"]
    settings = ReplaySettings(timing_rounds=15, min_sample_seconds=1e-3)
    with ServerPool(KernelSpec.from_kernel(kernel), store.root, keys, settings, 1) as pool:
        yield pool


def test_the_confirmation_runs_in_a_process_that_took_no_part_in_the_search(nop_pool):
    searched = {server.pid for server in nop_pool.servers}
    with nop_pool.fresh() as server:
        assert server.pid not in searched
        result = server.evaluate(Candidate(macros={"NOP": 1}))
    assert result.ok, result.summary()
    assert all(server.pid in searched for server in nop_pool.servers)  # still serving


def test_a_variant_no_faster_than_the_baseline_is_never_claimed(nop_pool):
    band = calibrate(nop_pool.servers[0], "claims_nop")
    assert band.calibration is not None and band.width >= MIN_EFFECT
    for _ in range(3):
        claim = confirm(nop_pool, Candidate(macros={"NOP": 1}), band)
        assert claim.result.ok, claim.result.summary()
        assert not claim.holds, claim.result.summary()
        assert "did not reproduce in a fresh worker process" in claim.why_not(1.3)


def test_a_band_is_symmetric_around_one():
    band = Band(0.05)
    assert band.low == pytest.approx(1 / 1.05) and band.high == pytest.approx(1.05)
    assert band.describe() == "0.952-1.050"
