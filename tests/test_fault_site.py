"""The worker's fault handler (replay/fault_site.py): a fault below a floored buffer is
answered with the argument's name; any other fault still kills the process by its signal."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

SCRIPT = """
import ctypes, sys, numpy as np
from pytest_r3.replay import fault_site
from pytest_r3.replay.buffers import GuardedBuffer
assert fault_site.install(lambda hint: print("HINT", hint, flush=True))
buffer = GuardedBuffer(np.zeros(1000, np.float32), 7, fenced=True, floored=True)
fault_site.WATCHED[:] = [(*buffer.floor, "x")]
start = buffer.array.ctypes.data
if sys.argv[1] == "read":
    ctypes.string_at(start - 4, 4)
elif sys.argv[1] == "write":
    ctypes.memset(start - 4, 0, 1)
else:
    ctypes.string_at(8, 1)  # a null-page read, below no buffer
print("survived", flush=True)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's signal frames")
@pytest.mark.parametrize("how", ["read", "write", "elsewhere"])
def test_a_fault_below_a_floored_buffer_names_the_argument(how):
    done = subprocess.run([sys.executable, "-c", SCRIPT, how], capture_output=True, text=True,
                          timeout=60)
    assert "survived" not in done.stdout
    if how == "elsewhere":
        assert done.returncode == -11 and "HINT" not in done.stdout
        return
    assert done.returncode == 139
    (hint,) = [line for line in done.stdout.splitlines() if line.startswith("HINT")]
    verb = {"read": "reads", "write": "writes"}[how]
    assert re.search(rf"({verb}|reads or writes) before the start of x: a buffer may begin "
                     "at a page boundary", hint)  # the verb where the CPU says it (x86-64)


def test_a_crash_on_the_second_run_names_both_of_its_layouts_and_the_read_only_inputs():
    """The reason a fenced run's crash gets says every way that run differs: the inputs
    mapped read-only, the end against a read-only page, the start at a page boundary."""
    from types import SimpleNamespace

    from pytest_r3.replay.judge import fenced_hint

    slots = [SimpleNamespace(written=False, params=["x"]),
             SimpleNamespace(written=True, params=["y"])]
    named = fenced_hint([SimpleNamespace(slots=slots)], host=True)
    assert "where x, which the original only reads, lay in pages mapped read-only" in named
    for hint in (named, fenced_hint([SimpleNamespace(slots=slots)], host=False)):
        assert "ends just before a read-only page" in hint
        assert "starts at a page boundary with nothing mapped below" in hint
