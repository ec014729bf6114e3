"""Importing pytest-r3 (which pytest does in every session) must stay cheap.

Each check runs in a fresh interpreter with an import hook that records every attempt to
import a heavy package, so a guarded ``try: import pycuda`` counts even where the package
is not installed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

HEAVY = ("llvmlite", "nevergrad", "openai", "pycuda", "distributed")

PROLOGUE = textwrap.dedent(f"""\
    import json, sys

    HEAVY = {HEAVY!r}
    attempted = set()

    class Watch:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in HEAVY:
                attempted.add(name.split(".")[0])
            return None

    sys.meta_path.insert(0, Watch())
    """)

EPILOGUE = textwrap.dedent("""\
    loaded = sorted({m.split(".")[0] for m in sys.modules} & set(HEAVY))
    print(json.dumps({"attempted": sorted(attempted), "loaded": loaded}))
    """)


def _heavy_imports(body: str, cwd) -> dict:
    code = PROLOGUE + textwrap.dedent(body) + EPILOGUE
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=cwd, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_watch_sees_imports(tmp_path):
    """The check itself works: importing llvmlite on purpose is seen."""
    seen = _heavy_imports("import llvmlite.binding\ntry:\n    import pycuda\n"
                          "except ImportError:\n    pass\n", tmp_path)
    assert "llvmlite" in seen["attempted"] and "llvmlite" in seen["loaded"]
    assert "pycuda" in seen["attempted"]


@pytest.mark.parametrize(
    "body",
    [
        "import pytest_r3\n",
        "import pytest_r3.pytest_plugin.plugin\n",
        # declaring is cheap too: nothing is compiled until the first call
        "import pytest_r3\npytest_r3.kernel('void f(int n) { (void)n; }\\n', entry='f')\n",
    ],
    ids=["import", "pytest-plugin", "declare"],
)
def test_heavy_dependencies_are_not_imported(body, tmp_path):
    seen = _heavy_imports(body, tmp_path)
    assert seen == {"attempted": [], "loaded": []}


def test_launching_a_kernel_needs_llvmlite_only(tmp_path):
    seen = _heavy_imports("""\
        import numpy as np
        import pytest_r3
        k = pytest_r3.kernel('int f(int n) { return n + 1; }\\n', entry='f')
        assert k(41) == 42
        """, tmp_path)
    assert seen == {"attempted": ["llvmlite"], "loaded": ["llvmlite"]}
