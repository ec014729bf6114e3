"""What the reports show a person for rows the plugin builds: a kernel with no timings says
why where its figures would be, settings wrap between settings, and a slice plot names each
pass in full."""

from __future__ import annotations

import re

from pytest_r3.pytest_plugin.table import TABLE_WIDTH, table_lines
from pytest_r3.reports import KernelReport, RunInfo, Status, html, markdown
from pytest_r3.reports.run import stream_bandwidth

EMULATED = ("CUDA runs in emulation on the CPU here: its timings say nothing about a GPU, so "
            "nothing is ranked and no lock entry is written")


def emulated_row() -> KernelReport:
    """The row --r3-tune makes for a CUDA kernel where no GPU is usable (tuning/tune.py)."""
    return KernelReport("stencil2d_with_a_long_name", "cuda-emulated", Status("not tuned"),
                        notes=[EMULATED])


def tuned_row() -> KernelReport:
    passes = ["simplify_cfg", "reassociate", "loop_unroll_and_jam"]
    log = [{"index": i + 1, "speedup": speedup, "outcome": "ok", "status": "ok",
            "settings": "", "finalist": False, "macros": {"TILE": tile},
            "pipeline": {"passes_before": chosen}}
           for i, (speedup, tile, chosen) in enumerate([
               (1.0, 8, []), (1.9, 16, passes[:1]), (2.1, 16, passes[1:]),
               (0.7, 8, passes[2:]), (2.0, 16, passes[:2])])]
    return KernelReport("scale", "cpu-x86_64", Status("tuned"), baseline_seconds=2e-3,
                        tuned_seconds=1e-3, speedup=2.0, interval=[1.9, 2.1],
                        confirmed_in="fresh worker process", evaluations=5,
                        new_evaluations=5, evaluation_log=log,
                        changes={"macros": {"TILE": 16},
                                 "pipeline": {"passes_before": passes[:2]}})


def summary_row(page: str, kernel: str) -> str:
    return re.search(rf"<tr><td><a href='#k-[\w-]+'>{kernel}</a>.*?</tr>", page).group(0)


def test_a_kernel_without_timings_says_why_in_the_html_summary_not_dashes():
    page = html.render([tuned_row(), emulated_row()])
    row = summary_row(page, "stencil2d_with_a_long_name")
    assert "not tuned" in row and EMULATED in row
    assert "<td class='num'>-</td>" not in row
    # said once in the kernel's section too, under its status, not again as a note
    section = page[page.index("id='k-stencil2d-with-a-long-name'"):]
    assert section.count(EMULATED) == 1


def test_a_kernel_without_timings_says_why_in_the_terminal_table_and_markdown():
    saxpy = KernelReport("saxpy", "cuda-emulated", Status("not tuned"), notes=[EMULATED])
    lines = [line for line, _ in table_lines([tuned_row(), emulated_row(), saxpy])]
    assert all(len(line) <= TABLE_WIDTH for line in lines), "\n".join(lines)
    shown = "\n".join(lines)
    assert re.search(r"^stencil2d_with_a_long~ not tuned +CUDA runs in emulation", shown,
                     re.M), shown
    # said once: a second kernel with the same reason points to the first
    assert " ".join(shown.split()).count(EMULATED) == 1, shown
    assert re.search(r"^saxpy +not tuned +as stencil2d_with_a_long_name$", shown, re.M), shown
    md = markdown.render([emulated_row()])
    assert f"| not tuned ({EMULATED}) |" in md
    assert md.count(EMULATED) == 1


def test_settings_wrap_between_passes_never_inside_a_name():
    page = html.render([tuned_row()])
    assert ("<code>TILE=16,<wbr> passes_before=simplify_cfg,<wbr>reassociate</code>"
            in summary_row(page, "scale"))
    assert "overflow-wrap:anywhere" not in page


def test_a_slice_plot_names_every_pass_in_full():
    page = html.render([tuned_row()])
    chart = re.search(r'<svg[^>]*aria-label="speedup by passes_before".*?</svg>', page).group(0)
    labels = re.findall(r"<text[^>]*>([^<]*)</text>", chart)
    assert {"simplify_cfg", "reassociate", "loop_unroll_and_jam", "none"} <= set(labels)
    assert not any("\u2026" in label for label in labels)


def test_achieved_throughput_is_shown_against_what_this_machine_reaches():
    """A kernel declaring its work (r3.kernel(work=...)) gets its flops against a one-thread
    BLAS matmul and its bytes against numpy moving as many bytes, both measured here: a
    call whose 48 MB sit in a cache is not held to memory's bandwidth (a memcpy's)."""
    run = RunInfo.collect("tuning", bandwidth=True)
    assert run.matmul_flops > 1e8 and run.stream_bandwidth > 1e8  # any machine of this age
    in_cache = stream_bandwidth(48e6)
    row = tuned_row()
    row.workloads = [{"key": "w", "origin": "tests/test_b.py::test_scale", "shape": "n=4096",
                      "weight": 1.0, "baseline_median": 2e-3, "candidate_median": 1e-3,
                      "speedup": 2.0, "work": {"flops": 2e6, "bytes": 48e6},
                      "stream_bandwidth": in_cache}]
    page = html.render([row], run)
    flops = 100 * 2e6 / 1e-3 / run.matmul_flops
    assert (f"<span title='of the {run.matmul_flops / 1e9:.3g} GFLOP/s a one-thread float32 "
            f"BLAS matmul reaches here'>1 &rarr; 2 GFLOP/s, {flops:.0f}% of peak</span>") in page
    moved = 100 * 48e6 / 1e-3 / in_cache
    assert (f"<span title='of the {in_cache / 1e9:.3g} GB/s numpy y += x moving as many bytes "
            f"reaches here'>24 &rarr; 48 GB/s, {moved:.0f}% of peak</span>") in page
    assert re.search(r"<dt>peak</dt><dd>[\d.]+ GB/s streaming 512 MiB \(numpy y \+= x\), "
                     r"[\d.]+ GFLOP/s in a one-thread float32 BLAS matmul</dd>", page)


def test_a_kept_baseline_says_why_under_its_status_with_the_baseline_time():
    note = "no variant was faster than the baseline beyond the noise band 0.971-1.030"
    row = KernelReport("jacobi", "cpu-x86_64", Status("baseline kept"), baseline_seconds=1.67e-3,
                       noise_band=[0.971, 1.03], search_estimate=1.04, notes=[note])
    page = html.render([row])
    section = page[page.index("id='k-jacobi'"):]
    assert (f"<p class='big muted'>baseline kept</p><p class='why'>{note}</p>"
            "<p>baseline 1.67 ms per timed run</p>") in section
    assert section.count(note) == 1 and "search estimate 1.04x" in section


def test_the_largest_confirmed_speedup_comes_first():
    slower = KernelReport("a_small_win", "cpu-x86_64", Status("tuned"), baseline_seconds=1e-3,
                          tuned_seconds=8e-4, speedup=1.25, interval=[1.2, 1.3])
    page = html.render([emulated_row(), slower, tuned_row()])
    order = re.findall(r"<tr><td><a href='#k-([\w-]+)'>", page)
    assert order == ["scale", "a-small-win", "stencil2d-with-a-long-name"]
    sections = re.findall(r"<section class='kernel' id='k-([\w-]+)'>", page)
    assert sections == order
