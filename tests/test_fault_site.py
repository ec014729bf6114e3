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
elif sys.argv[1] == "write input":
    x = GuardedBuffer(np.zeros(1000, np.float32), 11, read_only=True)
    x.fill(np.ones(1000, np.float32), None)
    fault_site.WATCHED.append((*x.read_only_pages, "x", "read-only"))
    ctypes.memmove(x.array.ctypes.data + 8, x.array.ctypes.data + 8, 4)
elif sys.argv[1] == "read past":
    fenced = GuardedBuffer(np.zeros(1001, np.float32), 9, fenced=True, flush=True)
    fault_site.WATCHED.append((*fenced.ceiling, "y", "after"))
    ctypes.string_at(fenced.array.ctypes.data + 4000, 64)
else:
    ctypes.string_at(8, 1)  # a null-page read, below no buffer
print("survived", flush=True)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's signal frames")
@pytest.mark.parametrize("how", ["read", "write", "read past", "write input", "elsewhere"])
def test_a_fault_below_a_floored_buffer_names_the_argument(how):
    done = subprocess.run([sys.executable, "-c", SCRIPT, how], capture_output=True, text=True,
                          timeout=60)
    assert "survived" not in done.stdout
    if how == "elsewhere":
        assert done.returncode == -11 and "HINT" not in done.stdout
        return
    assert done.returncode == 139
    (hint,) = [line for line in done.stdout.splitlines() if line.startswith("HINT")]
    if how == "write input":
        assert "writes to x, which the original only reads" in hint
        return
    if how == "read past":
        assert re.search(r"(reads|reads or writes) past the end of y: a buffer may end at a "
                         "page end with nothing mapped above", hint)
        return
    verb = {"read": "reads", "write": "writes"}[how]
    assert re.search(rf"({verb}|reads or writes) before the start of x: a buffer may begin "
                     "at a page boundary", hint)  # the verb where the CPU says it (x86-64)


def test_a_crash_on_the_second_run_names_both_of_its_layouts_and_the_read_only_inputs():
    """The reason a fenced run's crash gets says every way that run differs: the inputs
    mapped read-only, the end against an inaccessible page, the start at a page boundary."""
    from types import SimpleNamespace

    from pytest_r3.replay.judge import fenced_hint

    slots = [SimpleNamespace(written=False, params=["x"]),
             SimpleNamespace(written=True, params=["y"])]
    named = fenced_hint([SimpleNamespace(slots=slots)], host=True)
    assert "where x, which the original only reads, lay in pages mapped read-only" in named
    for hint in (named, fenced_hint([SimpleNamespace(slots=slots)], host=False)):
        assert "ends just before an inaccessible page (some exactly at the page end" in hint
        assert "starts at a page boundary with nothing mapped below" in hint
