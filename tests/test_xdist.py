"""--r3-record, --r3-tune, --r3-check and --r3-list under pytest-xdist (``-n 2``): workers
record into the shared store, the controller tunes or checks once and re-runs the oracle
tests, with the variant active, in a child pytest."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from test_llm import IKJ, NAIVE
from test_tune import KERNEL_C as TUNE_KERNEL_C

from pytest_r3.kernel import declaration
from pytest_r3.pytest_plugin.distributed import import_kernels

pytest.importorskip("xdist")

# ORDER=0 walks the matrix column by column (strided, slow); ORDER=1 row by row. Same result.
KERNEL_C = TUNE_KERNEL_C.replace("tune_scale", "xscale")

# Every run of the oracle test appends "<xdist worker or -> <active ORDER> <test>" to
# runs.txt, so a test can see where and with which variant it ran. With R3_REJECT set, the
# oracle test refuses any variant but the baseline: verification cannot tell, only the
# oracle test can.
TEST_PY = textwrap.dedent("""
    import os

    import numpy as np
    import pytest

    from xmod import xscale


    @pytest.mark.r3_oracle(xscale)
    def test_{name}(request):
        order = xscale.active.macro_dict["ORDER"]
        with open("runs.txt", "a") as runs:
            runs.write(f"{{os.environ.get('PYTEST_XDIST_WORKER', '-')}} {{order}} "
                       f"{{request.node.nodeid}}\\n")
        grid = np.random.default_rng({n}).random(({n}, {n}), dtype=np.float32)
        out = np.empty_like(grid)
        xscale({n}, grid, out)
        np.testing.assert_allclose(out, 2 * grid + 1, rtol=1e-6)
        if os.environ.get("R3_REJECT"):
            assert order == 0, "this oracle accepts the baseline only"
""")

INI = textwrap.dedent("""
    [pytest]
    r3_search_pipeline = false
    r3_workers = 1
""")


@pytest.fixture
def project(pytester) -> Path:
    """Two test files, so ``--dist loadfile`` gives each of the two workers one."""
    (pytester.path / "xscale.c").write_text(KERNEL_C)
    (pytester.path / "xmod.py").write_text(
        'import pytest_r3 as r3\n\nxscale = r3.kernel("xscale.c", entry="xscale", '
        'tune={"ORDER": [0, 1]})\n')
    (pytester.path / "test_small.py").write_text(TEST_PY.format(name="small", n=3))
    (pytester.path / "test_large.py").write_text(TEST_PY.format(name="large", n=512))
    (pytester.path / "pytest.ini").write_text(INI)
    return pytester.path


def run(pytester, *args: str):
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2",
                                         "--dist", "loadfile", *args, timeout=300)


def runs(project: Path) -> list[tuple[str, str, str]]:
    """(worker, ORDER, test) of every oracle test run so far, then forgets them."""
    path = project / "runs.txt"
    lines = sorted((tuple(line.split()) for line in path.read_text().splitlines()),
                   key=lambda run: (run[2], run[0]))
    path.unlink()
    return lines


SMALL, LARGE = "test_small.py::test_small", "test_large.py::test_large"


def test_record_tune_and_check_under_xdist(pytester, project: Path, monkeypatch):
    recorded = run(pytester, "--r3-record")
    assert recorded.ret == 0, recorded.stdout.str()
    # each worker ran one file, recorded one launch and saved it into the shared store
    ran = runs(project)
    assert sorted((order, test) for _, order, test in ran) == [("0", LARGE), ("0", SMALL)]
    assert {worker for worker, _, _ in ran} == {"gw0", "gw1"}
    store = project / ".r3" / "recordings" / "xscale"
    index = json.loads((store / "index.json").read_text())
    assert len(index["kept"]) == 2
    tests = {json.loads((store / f"{key}.json").read_text())["tests"][0] for key in index["kept"]}
    assert tests == {SMALL, LARGE}
    spec = json.loads((store / "kernel.json").read_text())
    assert sorted(spec["oracle_tests"]) == [LARGE, SMALL]
    output = recorded.stdout.str()
    assert output.count("pytest-r3 recordings") == 1
    assert "xscale: 2 launch(es), 2 unique recording(s) kept" in output

    tuned = run(pytester, "--r3-tune", "--r3-budget=6")
    output = tuned.stdout.str()
    assert tuned.ret == 0, output
    assert "no kernel to tune" not in output
    assert output.count("pytest-r3 tuning") == 1
    tuned.stdout.fnmatch_lines(["xscale*tuned*", "*settings: ORDER=1"])
    lock = json.loads((project / "r3.lock").read_text())
    (entry,) = lock["kernels"]["xscale"].values()
    assert entry["macros"] == {"ORDER": 1}
    assert entry["oracle_tests"] == 2
    # the workers recorded with the baseline; then the controller, not a worker, re-ran
    # both oracle tests once, with the winner active
    assert [(order, test) for worker, order, test in runs(project) if worker == "-"] == [
        ("1", LARGE), ("1", SMALL)]
    for name in ("report.json", "report.md", "report.html"):
        assert (project / ".r3" / name).stat().st_size > 0

    checked = run(pytester, "--r3-check")
    output = checked.stdout.str()
    assert checked.ret == 0, output
    assert output.count("pytest-r3 check") == 1
    checked.stdout.fnmatch_lines(["xscale*ok*", "*settings: ORDER=1"])
    assert [(order, test) for worker, order, test in runs(project) if worker == "-"] == [
        ("1", LARGE), ("1", SMALL)]

    # an oracle test that now refuses the locked variant fails the check, and pytest
    monkeypatch.setenv("R3_REJECT", "1")
    refused = run(pytester, "--r3-check")
    assert refused.ret == 1, refused.stdout.str()
    refused.stdout.fnmatch_lines(["xscale*FAIL: oracle tests*",
                                  "*this oracle accepts the baseline only*"])


def test_tune_under_xdist_rejects_a_winner_its_oracle_tests_refuse(pytester, project: Path,
                                                                    monkeypatch):
    monkeypatch.setenv("R3_REJECT", "1")  # inherited by the workers and the child run
    result = run(pytester, "--r3-tune", "--r3-budget=6")
    output = result.stdout.str()
    assert result.ret == 0, output
    result.stdout.fnmatch_lines([
        "xscale*rejected by oracles*",
        f"*oracle test failed with the best variant: {LARGE} (call)*",
        "*baseline only*"])
    assert not (project / "r3.lock").exists() or "xscale" not in (
        project / "r3.lock").read_text()


def test_list_selection_and_an_unwritable_store_under_xdist(pytester, project: Path):
    listed = run(pytester, "--r3-list")
    assert listed.ret == 0, listed.stdout.str()
    output = listed.stdout.str()
    assert output.count("pytest-r3: 1 kernel(s) declared") == 1
    assert "oracle tests (2):" in output
    assert not (project / "runs.txt").exists()  # nothing ran

    unknown = run(pytester, "--r3-tune", "--r3-kernels", "nope")
    assert unknown.ret == pytest.ExitCode.USAGE_ERROR, unknown.stdout.str()
    unknown.stdout.fnmatch_lines(["*--r3-kernels names unknown kernel(s) nope; declared: "
                                  "xscale*"])

    # a worker that cannot save says so in one line on the controller, and pytest fails
    (project / "blocker").write_text("a file, not a folder")
    unsaved = run(pytester, "--r3-record", "--r3-dir", "blocker/r3")
    assert unsaved.ret == pytest.ExitCode.TESTS_FAILED, unsaved.stdout.str()
    unsaved.stdout.fnmatch_lines([
        "xscale: launched, but no recording of it was saved",
        "an xdist worker could not save its recordings: cannot write *blocker/r3*--r3-dir*"])


def test_the_controller_imports_a_kernel_from_a_file_not_on_its_path(tmp_path, unique_name):
    name = unique_name("lone")
    module = tmp_path / "elsewhere" / "declares.py"
    module.parent.mkdir()
    module.write_text("import pytest_r3 as r3\n\n"
                      f"k = r3.kernel('void f(int n) {{ (void)n; }}\\n', entry='f', "
                      f"name={name!r})\n")
    declared = {name: {"file": str(module), "module": "no_such_module_name"}}
    kernels, problems = import_kernels([name], declared, [])
    assert problems == {} and kernels[name] is declaration.registry()[name]
    assert kernels[name].declared_at == f"{module}:3"

    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('no GPU here')\n")
    kernels, problems = import_kernels(["gone"], {"gone": {"file": str(broken),
                                                           "module": None}}, [])
    assert kernels == {} and "RuntimeError: no GPU here" in problems["gone"]


# -- a source rewrite: the child run's calls go to a contained worker ----------------------
NAIVE_MM = NAIVE.replace("void mm(", "void xmm(")
IKJ_MM = IKJ.replace("void mm(", "void xmm(")

MM_TEST = textwrap.dedent("""
    import os

    import numpy as np
    import pytest

    from mmmod import xmm


    @pytest.mark.r3_oracle(xmm)
    @pytest.mark.parametrize("n", [5, 160])
    def test_xmm(n):
        rng = np.random.default_rng(n)
        a, b = rng.standard_normal((n, n)), rng.standard_normal((n, n))
        c = np.empty((n, n))
        xmm(n, a, b, c)
        with open("runs.txt", "a") as runs:
            runs.write(f"{os.environ.get('PYTEST_XDIST_WORKER', '-')} "
                       f"{type(xmm._active_launcher).__name__} {n} {os.getpid()}\\n")
        np.testing.assert_allclose(c, a @ b, rtol=1e-10, atol=1e-10)
""")


def test_a_source_rewrite_reruns_its_oracles_in_a_contained_worker_under_xdist(
        pytester, monkeypatch):
    from pytest_r3.llm.testing import ScriptedChatServer

    (pytester.path / "xmm.c").write_text(NAIVE_MM)
    (pytester.path / "mmmod.py").write_text(
        'import pytest_r3 as r3\n\nxmm = r3.kernel("xmm.c", entry="xmm")\n')
    (pytester.path / "test_xmm.py").write_text(MM_TEST)
    (pytester.path / "pytest.ini").write_text(INI + textwrap.dedent("""
        r3_llm_generations = 1
        r3_llm_islands = 1
        r3_llm_children = 1
        r3_llm_repairs = 0
        r3_llm_inner_budget = 0
    """))
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    with ScriptedChatServer(lambda body: f"Faster:\n```c\n{IKJ_MM}```\n") as server:
        result = pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", "-n", "2", "--r3-tune", "--r3-llm-model", "scripted",
            "--r3-llm-base-url", server.base_url, timeout=300)
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["xmm*tuned (source rewrite)*"])
    assert (pytester.path / "xmm.c").read_text() == NAIVE_MM
    lines = [line.split() for line in (pytester.path / "runs.txt").read_text().splitlines()]
    recorded = [(launcher, n) for worker, launcher, n, _ in lines if worker != "-"]
    assert sorted(recorded) == [("CPULauncher", "160"), ("CPULauncher", "5")]  # baseline
    rerun = sorted((launcher, n) for worker, launcher, n, _ in lines if worker == "-")
    assert rerun == [("ContainedLauncher", "160"), ("ContainedLauncher", "5")]
