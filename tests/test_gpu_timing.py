"""GPU timing's logic, tested without a GPU: the L2 flush size, the peak bandwidth and the
speed-of-light check, NVML's absence, the conditions kept in the typed Timing, and a
"suspect" result flowing to the report row, the terminal table, report.md and r3.lock.

The timing loop on a device (events, flush, warm-up) is tested on the stand-in driver in
test_cuda_runtime.py and on a real GPU there and in scripts/gpu_suite.py.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

import pytest_r3 as r3
from pytest_r3.backends.cuda.gpu_timing import (
    DEFAULT_FLUSH_BYTES,
    Clocks,
    DeviceFacts,
    Nvml,
    flush_bytes,
    peak_bandwidth,
    throttle_names,
)
from pytest_r3.kernel.lock import update_entry
from pytest_r3.llm.feedback import explain
from pytest_r3.pytest_plugin.table import table_lines
from pytest_r3.record.store import RecordingStore, capture
from pytest_r3.replay import Candidate, KernelSpec, ReplayServer, ReplaySettings
from pytest_r3.replay.cases import Slot
from pytest_r3.replay.client import case_bytes, device_conditions
from pytest_r3.replay.device_timing import DeviceTiming, speed_of_light
from pytest_r3.replay.judge import Case
from pytest_r3.replay.measurement import Timing
from pytest_r3.replay.protocol import STATUSES, Result
from pytest_r3.reports import KernelReport, Status, markdown
from pytest_r3.tuning.context import Tuning, TuningSettings
from pytest_r3.tuning.rows import measured
from pytest_r3.tuning.tune import _lock_entry, _suspect

H100 = DeviceFacts("NVIDIA H100 80GB HBM3", "sm_90", 50 << 20, 2_619_000, 5120)


# -- device arithmetic ----------------------------------------------------------------------------
def test_the_l2_flush_writes_at_least_twice_the_l2_in_whole_mib():
    assert flush_bytes(50 << 20) == 100 << 20
    assert flush_bytes(40 * 1024 * 1024 + 1) == 81 << 20  # rounded up, never under 2x
    for l2 in (256 * 1024, 6 << 20, 96 << 20, 126 << 20):
        assert flush_bytes(l2) >= 2 * l2 and flush_bytes(l2) % (1 << 20) == 0
    assert flush_bytes(0) == DEFAULT_FLUSH_BYTES >= 2 * (126 << 20)  # unknown: above any L2


def test_peak_bandwidth_is_memory_clock_times_bus_width_times_two():
    assert H100.peak_bandwidth == pytest.approx(2_619e6 * 2 * 640)  # 3.35 TB/s
    assert peak_bandwidth(1_215_000, 5120) == pytest.approx(1.555e12, rel=1e-3)  # A100 40GB
    assert peak_bandwidth(0, 5120) == 0.0 and peak_bandwidth(2_619_000, 0) == 0.0


def test_throttle_reasons_are_named():
    assert throttle_names(0) == ()
    assert throttle_names(0x4 | 0x40) == ("sw_power_cap", "hw_thermal_slowdown")
    assert throttle_names(0x1 | 0x1000) == ("gpu_idle", "other_0x1000")
    clocks = Clocks(1980, 2619, 41, 312.4, ("gpu_idle", "sw_power_cap"))
    assert clocks.describe() == ("SM 1980 MHz, memory 2619 MHz, 41 C, 312 W, clocks held "
                                 "down by sw_power_cap")
    assert Clocks.from_dict(clocks.as_dict()) == clocks


# -- NVML absent ----------------------------------------------------------------------------------
def test_without_nvidia_ml_py_the_clocks_say_why(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # an import of it fails, as when absent
    clocks = Nvml("0000:41:00.0").clocks()
    assert not clocks.read
    assert clocks.reason == ('nvidia-ml-py is not installed (pip install "pytest-r3[cuda]" '
                             "installs it)")
    assert clocks.describe().startswith("GPU clocks not recorded: nvidia-ml-py is not")


def test_without_the_nvml_library_the_clocks_say_why():
    pytest.importorskip("pynvml", reason="needs nvidia-ml-py (the cuda extra): not installed")
    nvml = Nvml("0000:41:00.0")  # no NVIDIA driver here, or no GPU at that bus id
    if nvml.handle is not None:
        pytest.skip("a GPU at bus 0000:41:00.0 answers NVML here")
    assert nvml.clocks().reason.startswith("NVML could not be opened (NVMLError")
    assert nvml.memory() == (0, 0)


# -- the speed-of-light check ---------------------------------------------------------------------
def test_a_time_below_bytes_over_peak_is_suspect_and_one_at_or_above_is_not():
    peak = H100.peak_bandwidth
    moved = 3 * 4 * (16 << 20)  # a saxpy over 16 Mi floats: 201 MB, 60 us at 3.35 TB/s
    bound = moved / peak
    assert speed_of_light([("the candidate", bound * 1.01)], [moved], peak, "buffer sizes") == ""
    said = speed_of_light([("the baseline", 1e-3), ("the candidate", bound / 10)],
                          [moved, moved], peak, "buffer sizes")
    assert said.startswith("speed of light: the candidate took 6.01 us per launch, but moving "
                           "its 201 MB (buffer sizes) at the device's peak 3352 GB/s")
    assert "takes at least 60.1 us" in said and "work=lambda a: {'bytes': ...}" in said
    declared = speed_of_light([("the candidate", bound / 10)], [moved], peak, "work=")
    assert declared and "work=lambda" not in declared  # the user already said
    assert speed_of_light([("the candidate", 1e-9)], [moved], 0.0, "buffer sizes") == ""


def slot(name: str, values: np.ndarray, written: bool = False) -> Slot:
    return Slot([name], written, values)


def test_bytes_moved_come_from_work_else_from_the_buffer_sizes(tmp_path):
    (tmp_path / "k.c").write_text("void k(long n, const float *x, float *y) {\n"
                                  "  for (long i = 0; i < n; ++i) y[i] = x[i];\n}\n")
    kernel = r3.kernel(tmp_path / "k.c", entry="k", name="gpu_timing_bytes")
    x, y = np.ones(1000, np.float32), np.zeros(1000, np.float32)
    _, recording = capture(kernel, (1000, x, y), lambda: kernel(1000, x, y), "t.py::test")
    case = Case("recorded 1", "recorded", {"n": 1000}, [slot("x", x), slot("y", y, True)],
                recording=recording)
    assert case_bytes([case]) == ([8000.0], "buffer sizes")
    assert case_bytes([case], lambda a: {"bytes": 8 * a["n"] + 4}) == ([8004.0], "work=")
    # a work= without bytes, or one that fails, leaves the buffer sizes
    assert case_bytes([case], lambda a: {"flops": 1.0}) == ([8000.0], "buffer sizes")
    assert case_bytes([case], lambda a: 1 / 0) == ([8000.0], "buffer sizes")


def test_the_conditions_check_both_sides_against_the_baseline_only_when_direct():
    x = np.ones(1 << 20, np.float32)
    case = Case("workload 1", "workload", {}, [slot("x", x), slot("y", x.copy(), True)])
    bound = 8 * len(x) / H100.peak_bandwidth  # 2.5 us
    honest = Timing.from_samples([1e-5] * 3, [5e-6] * 3)
    conditions = device_conditions(H100, honest, [case], Clocks(1980, 2619, 40).as_dict())
    assert conditions.suspect == "" and conditions.bytes_moved == (8 * len(x),)
    assert conditions.flush_bytes == 100 << 20 and conditions.clocks.sm_mhz == 1980
    impossible_baseline = Timing.from_samples([bound / 2] * 3, [bound * 2] * 3)
    said = device_conditions(H100, impossible_baseline, [case], None).suspect
    assert said.startswith("speed of light: the baseline on timed case 1 (workload 1)")
    # scaled from the best so far: the baseline's figures were not measured, so not checked
    scaled = impossible_baseline.against_baseline(1.0)
    assert device_conditions(H100, scaled, [case], None).suspect == ""
    assert not device_conditions(H100, honest, [case], None).clocks.read


def test_the_conditions_travel_in_the_timing_and_reach_the_report_row():
    device = DeviceTiming(H100, Clocks(1980, 2619, 41, 300.0, ("sw_power_cap",)), 100 << 20,
                          bytes_moved=(8e6,), bytes_source="work=")
    timing = Timing.from_samples([2e-5] * 5, [1e-5] * 5).on_device(device)
    again = Timing.from_dict(json.loads(json.dumps(timing.as_dict())))
    assert again.device == device and again.suspect == ""
    assert Timing.from_dict(Timing.from_samples([1.0], [1.0]).as_dict()).device is None
    row = KernelReport("saxpy", "cuda-sm_90", Status("tuned"))
    measured(row, again)
    assert row.gpu["clocks"]["sm_mhz"] == 1980 and row.gpu["facts"]["l2_bytes"] == 50 << 20
    assert ("NVIDIA H100 80GB HBM3; peak 3352 GB/s; L2 flush 100 MiB between samples; 3 "
            "warm-up launches; SM 1980 MHz, memory 2619 MHz, 41 C, 300 W, clocks held down "
            "by sw_power_cap") in row.describe_confirmation()


def test_the_lock_entry_keeps_the_device_and_its_clocks(tmp_path):
    (tmp_path / "k.c").write_text("void k(long n, float *y) { for (long i = 0; i < n; ++i) "
                                  "y[i] += 1.0f; }\n")
    kernel = r3.kernel(tmp_path / "k.c", entry="k", name="gpu_timing_lock")
    device = DeviceTiming(H100, Clocks(1755, 2619, 52, 410.0, ("hw_slowdown",)), 100 << 20)
    row = KernelReport(kernel.name, "cuda-sm_90-nvidia-h100-80gb-hbm3", Status("tuned"))
    measured(row, Timing.from_samples([2e-5] * 5, [1e-5] * 5).on_device(device))
    tuning = Tuning(TuningSettings(budget=None), tmp_path / ".r3", tmp_path, None,
                    lambda name: [], lambda *a: [])
    entry = _lock_entry(kernel, tuning, row, Candidate(), "NGOpt")
    assert entry["gpu"] == {"facts": H100.as_dict(), "clocks": device.clocks.as_dict(),
                            "flush_bytes": 100 << 20, "warmup_launches": 3}
    json.dumps(entry)  # plain data, as r3.lock holds it
    cpu_row = KernelReport(kernel.name, "x86_64", Status("tuned"))
    measured(cpu_row, Timing.from_samples([2e-5] * 5, [1e-5] * 5))
    assert "gpu" not in _lock_entry(kernel, tuning, cpu_row, Candidate(), "NGOpt")


# -- a suspect result, from a real replay worker, through the row, table, report and lock -----
KERNEL_C = "void copy(long n, const float *x, float *y) {\n" \
           "  for (long i = 0; i < n; ++i) y[i] = x[i];\n}\n"


@pytest.fixture(scope="module")
def copy_server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gpu_timing")
    (folder / "copy.c").write_text(KERNEL_C)
    kernel = r3.kernel(folder / "copy.c", entry="copy", name="gpu_timing_copy")
    store = RecordingStore(folder / "recordings")
    x = np.random.default_rng(0).standard_normal(4096).astype(np.float32)
    y = np.zeros_like(x)
    _, recording = capture(kernel, (4096, x, y), lambda: kernel(4096, x, y), "t.py::test")
    keys = store.save(kernel.name, [recording], cap_bytes=1 << 26)["kept"]
    settings = ReplaySettings(run_timeout=2.0, timing_rounds=3, warmup_rounds=1,
                              min_sample_seconds=1e-4)
    with ReplayServer(KernelSpec.from_kernel(kernel), store.root, keys, settings,
                      request_timeout=120) as server:
        yield server


def test_a_cpu_worker_reports_no_device_and_is_never_checked(copy_server):
    assert copy_server.device_facts is None
    result = copy_server.evaluate(Candidate(label="baseline"))
    assert result.status == "ok" and result.timing.device is None


def test_a_timing_faster_than_the_memory_allows_is_suspect_and_never_locked(copy_server,
                                                                             tmp_path):
    """The real worker's timing of a 32 KiB copy, judged as if on a device whose memory
    moves 1 MB/s: every launch beats that bound, so the result is suspect."""
    copy_server.device_facts = DeviceFacts("slow device", "sm_90", 1 << 20, 500, 8)
    try:
        result = copy_server.evaluate(Candidate(label="baseline"))
    finally:
        copy_server.device_facts = None
    assert "suspect" in STATUSES and result.status == "suspect", result.summary()
    assert result.reason().startswith("suspect (speed_of_light): speed of light: the "
                                      "candidate on timed case 1")
    assert "(buffer sizes) at the device's peak 0.001 GB/s" in result.reason()
    assert explain(result).startswith("NOT TRUSTED: speed of light")
    row = KernelReport("gpu_timing_copy", "cuda-sm_90", Status("baseline kept"))
    assert _suspect(row, result) and row.status == Status("suspect")
    assert not _suspect(KernelReport("k", "t", Status("tuned")), Result("ok"))
    assert row.notes == [f"not locked: {result.reason()}"]
    lines = [line for line, _ in table_lines([row])]
    assert lines[1].split()[:2] == ["gpu_timing_copy", "suspect"]
    assert any("not locked: suspect (speed_of_light)" in line for line in lines)
    report = markdown.render([row])
    # no timings: why not, in the status cell
    assert ("| `gpu_timing_copy` | cuda-sm_90 | suspect (not locked: suspect (speed_of_light)"
            in report)
    lock = tmp_path / "r3.lock"
    update_entry(lock, row.kernel, row.target, None, source_hash="abc")  # tune's commit(None)
    assert not lock.exists() or row.kernel not in lock.read_text()
