"""report.html as a person sees it: the example project tuned (a small budget), its report
opened in a real headless browser (Chromium), checked, and photographed.

Skipped where no Chromium is installed (Debian: ``apt-get install chromium``). With
``PYTEST_R3_UPDATE_SCREENSHOT=1`` the screenshot replaces docs/images/report.png."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCREENSHOT = REPO / "docs" / "images" / "report.png"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def browser() -> str:
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("no headless browser installed (apt-get install chromium)")


def headless(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """Chromium without network, GPU or a shared profile."""
    return subprocess.run(
        [browser(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
         "--proxy-server=127.0.0.1:9", "--disable-background-networking", *args],
        capture_output=True, text=True, timeout=180)


@pytest.fixture(scope="module")
def example_report(tmp_path_factory) -> Path:
    """The example project, copied and tuned with a small budget: its report.html."""
    browser()
    project = tmp_path_factory.mktemp("example") / "example_project"
    shutil.copytree(REPO / "example_project", project,
                    ignore=shutil.ignore_patterns(".r3", "r3.lock", "__pycache__"))
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--r3-tune",
         "--r3-budget=24", "--r3-kernels=scaled_add,matmul,jacobi2d,saxpy"],
        # a safety limit only: about 5 min alone, past 15 beside a loaded `pytest -n 2`
        cwd=project, capture_output=True, text=True, timeout=2400)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    return project / ".r3" / "report.html"


def test_the_report_renders_in_a_browser_and_is_self_contained(example_report, tmp_path):
    page = example_report.read_text()
    # nothing fetched: no script, no external stylesheet, image or font
    assert "<script" not in page
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)
    dom = headless(tmp_path, "--dump-dom", example_report.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    # the header: when, where, with what
    for label in ("date", "commit", "machine", "target", "load", "tool"):
        assert f"<dt>{label}</dt>" in html
    assert re.search(r"<dd>\d{4}-\d\d-\d\d \d\d:\d\d UTC</dd>", html)
    assert "pytest-r3 0." in html and "cores" in html
    # the summary: one row per kernel, a confirmed speedup with its interval
    for kernel in ("scaled_add", "matmul", "jacobi2d"):
        anchor = "k-" + kernel.replace("_", "-")
        assert f'href="#{anchor}"' in html and f'id="{anchor}"' in html
    assert re.search(r"\d+\.\d\dx \[\d+\.\d\d-\d+\.\d\d\]", html)  # with its 95% interval
    # a CUDA kernel where no GPU is usable says why it has no figures (its GPU test runs
    # in emulation), where they would be
    saxpy = re.search(r"<tr><td><a href=\"#k-saxpy\">.*?</tr>", html).group(0)
    if "cuda-emulation-" in html:
        assert ('<td class="">not tuned</td><td colspan="6" class="why">CUDA runs in '
                "emulation on the CPU here") in saxpy, saxpy
    # per kernel: every evaluation plotted, the settings that mattered
    searched = 3 if "cuda-emulation-" in html else 4  # saxpy is searched on a GPU
    assert html.count('aria-label="speedup of every evaluation, in order"') == searched
    assert "Which settings mattered" in html
    assert 'aria-label="speedup by TILE_I"' in html or 'aria-label="speedup by TILE_J"' in html
    # the example declares its kernels' work=: achieved throughput against this machine's
    assert re.search(r"[\d.]+ &rarr; [\d.]+ GFLOP/s, \d+% of peak</span><br><span [^>]*>"
                     r"[\d.]+ &rarr; [\d.]+ GB/s, \d+% of peak", html.replace("→", "&rarr;"))
    assert re.search(r"<dt>peak</dt><dd>[\d.]+ GB/s streaming 512 MiB \(numpy y \+= x\), "
                     r"[\d.]+ GFLOP/s", html)
    shot = tmp_path / "report.png"
    taken = headless(tmp_path, "--window-size=1100,2600", f"--screenshot={shot}",
                     example_report.as_uri())
    assert taken.returncode == 0 and shot.stat().st_size > 30_000, taken.stderr[-2000:]
    if os.environ.get("PYTEST_R3_UPDATE_SCREENSHOT"):
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, SCREENSHOT)
