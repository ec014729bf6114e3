"""The caller's floating-point mode (flush-to-zero, denormals-are-zero), as verification
varies it: set on the launching thread only, put back after, inherited by a fresh thread
and not by a pool thread started before it was set."""

from __future__ import annotations

import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from pytest_r3.replay import fpmode

pytestmark = pytest.mark.skipif(not fpmode.available(),
                                reason="the floating-point mode is varied on x86-64 only")

DENORMAL = 1e-310  # a double denormal: flushed to zero under FTZ/DAZ


def _on_thread(function):
    out = []
    thread = threading.Thread(target=lambda: out.append(function()))
    thread.start()
    thread.join()
    return out[0]


def test_flushing_sets_the_mode_on_this_thread_and_puts_it_back():
    assert fpmode.flags() == 0 and DENORMAL * 1.0 != 0.0
    with pytest.raises(ValueError), fpmode.flushing():
        assert fpmode.flags() == fpmode.FTZ_DAZ
        assert DENORMAL * 1.0 == 0.0  # Python's own float arithmetic flushes too
        raise ValueError("a launch that failed")
    assert fpmode.flags() == 0 and DENORMAL * 1.0 != 0.0
    with fpmode.flushing(False):
        assert fpmode.flags() == 0


def test_a_fresh_thread_inherits_the_mode_a_pool_thread_started_before_does_not():
    """Why the worker's main thread must be in the default mode (its fresh threads take it)
    and why a flushed launch sets the mode on the launching thread itself."""
    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(fpmode.flags).result() == 0  # the pool's thread starts now
        with fpmode.flushing():
            assert _on_thread(fpmode.flags) == fpmode.FTZ_DAZ
            assert pool.submit(fpmode.flags).result() == 0
        assert _on_thread(fpmode.flags) == 0


def test_reset_clears_a_mode_a_library_left_set():
    script = ("from pytest_r3.replay import fpmode\n"
              "held = fpmode.flushing()\n"
              "held.__enter__()\n"  # left set, as a -ffast-math constructor leaves it
              "assert fpmode.flags() == fpmode.FTZ_DAZ\n"
              "assert fpmode.reset() is True and fpmode.flags() == 0\n"
              "assert 1e-310 * 1.0 != 0.0\n"
              "assert fpmode.reset() is False\n"
              "print('reset')\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "reset", done.stderr
