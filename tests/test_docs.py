"""The docs say what the code does: the option tables what ``pytest --help`` says (every
flag, its ini key, its value's name and its default), the command table what
``pytest-r3 --help`` says, the markers what ``pytest --markers`` says; the output samples
are what their commands print today, the examples run, and every name a reader copies
exists."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import test_workloads as workloads
from conftest import environment_without_pytest

from pytest_r3 import settings
from pytest_r3.model.pipeline import CODEGEN_CHOICES, PIPELINE_CHOICES
from pytest_r3.search.parametrization import SearchSpace

DOCS = Path(__file__).resolve().parent.parent / "docs"

CLI = (sys.executable, "-m", "pytest_r3.cli")  # the `pytest-r3` command, venv or not


def pytest_help(pytester) -> str:
    return pytester.runpytest("--help").stdout.str()


def help_flags(pytester, output: str | None = None) -> dict[str, str]:
    """``--r3-*`` flags in ``pytest --help``, each with its metavar ("" for a switch)."""
    output = output or pytest_help(pytester)
    group = output.split("pytest-r3 kernel autotuning:", 1)[1].split("\n\n", 1)[0]
    return dict(re.findall(r"^  (--r3-[a-z0-9-]+)(?:=(\S+))?", group, re.M))


def help_ini_keys(output: str) -> set[str]:
    """The ``r3_*`` ini keys in ``pytest --help``'s list of configuration options."""
    section = output.split("[pytest] configuration options", 1)[1]
    return set(re.findall(r"^  (r3_[a-z0-9_]+) \(", section, re.M))


def ini_key(flag: str) -> str:
    return flag[2:].replace("-", "_")


def table(name: str) -> dict[str, list[str]]:
    """Rows of ``docs/<name>`` whose first cell is a ``--r3-*`` flag: flag -> its cells
    (the first cell without the flag: ``=METAVAR`` or "")."""
    rows = {}
    for line in (DOCS / name).read_text().splitlines():
        match = re.match(r"^\| `(--r3-[a-z0-9-]+)([^`]*)`(?: / `[a-z0-9_]+`)? \|(.*)\|$", line)
        if match:
            rows[match.group(1)] = [match.group(2)] + [
                cell.strip() for cell in match.group(3).split(" | ")]
    return rows


def shown_default(option: settings.Option) -> str:
    if option.is_flag:
        return "off"
    default = option.default
    if default == "":
        return "none"
    if isinstance(default, bool):
        return "true" if default else "false"
    if isinstance(default, float) and default.is_integer():
        default = int(default)
    return str(default)


def test_api_md_documents_every_option_as_pytest_help_does(pytester):
    flags = help_flags(pytester)
    documented = table("api.md")
    assert set(documented) == set(flags), (
        f"missing from docs/api.md: {sorted(set(flags) - set(documented))}; "
        f"documented but unknown: {sorted(set(documented) - set(flags))}")
    for flag, metavar in flags.items():
        first, default = documented[flag][0], documented[flag][1]
        assert first == (f"={metavar.replace('|', chr(92) + '|')}" if metavar else ""), flag
        option = settings.OPTIONS[ini_key(flag)]
        expected = shown_default(option)
        assert default.strip("`") == expected or (expected == "none" and default == "all"), (
            f"{flag}: docs/api.md says {default}, the default is {expected}")


def test_every_option_is_an_ini_key_of_the_same_name(pytester):
    """api.md: "every option is a command-line flag and an ini key of the same name with
    underscores"; pytest's own help lists them both ways."""
    output = pytest_help(pytester)
    assert help_ini_keys(output) == {ini_key(flag) for flag in help_flags(pytester, output)}


# what a guide's default cell may say for an option whose default is empty
SAYS_NONE = ("none", "all", "openai default")


def guide_default(cell: str) -> str:
    """A guide's default cell as the value it names: "64 (MiB)" -> "64", "(none)" -> "none"."""
    cell = cell.strip().strip("`")
    if cell.startswith("("):
        return cell.strip("()")
    return cell if cell in SAYS_NONE else cell.split(" (", 1)[0].strip("`")


@pytest.mark.parametrize("page, which", [
    ("tuning.md", lambda flag: not flag.startswith("--r3-llm-")),
    ("llm.md", lambda flag: flag.startswith("--r3-llm-")),
])
def test_the_guides_tables_list_their_options(pytester, page, which):
    """tuning.md and llm.md each have a table of their options: every one of them, with its
    ini key where the row names one, and its default."""
    output = pytest_help(pytester)
    flags = {flag for flag in help_flags(pytester, output) if which(flag)}
    rows = table(page)
    assert set(rows) == flags, (
        f"docs/{page}: missing {sorted(flags - set(rows))}, unknown {sorted(set(rows) - flags)}")
    ini_keys = help_ini_keys(output)
    for line in (DOCS / page).read_text().splitlines():
        flag = re.match(r"^\| `(--r3-[a-z0-9-]+)", line)
        for named in re.findall(r"`(r3_[a-z0-9_]+)`", line) if flag else ():
            assert named == ini_key(flag.group(1)) and named in ini_keys, (page, line)
    for flag in flags:
        cells = [cell for cell in rows[flag][1:] if not re.fullmatch(r"`r3_[a-z0-9_]+`", cell)]
        expected, shown = shown_default(settings.OPTIONS[ini_key(flag)]), guide_default(cells[0])
        assert shown == expected or (expected == "none" and shown in SAYS_NONE), (
            f"docs/{page}: {flag} defaults to {expected}, the table says {cells[0]}")


def example_project(folder: Path) -> Path:
    """A copy of example_project/ in ``folder``, without state from earlier runs."""
    project = folder / "example_project"
    shutil.copytree(DOCS.parent / "example_project", project,
                    ignore=shutil.ignore_patterns(".r3", "__pycache__", "r3.lock"))
    return project


def test_the_getting_started_listing_is_what_r3_list_prints(pytester):
    """docs/getting-started.md shows `pytest --r3-list` of example_project: the kernels it
    names, in order, with their headers and the lines it shows of each, are what the
    command prints today."""
    text = (DOCS / "getting-started.md").read_text()
    sample = text.split("$ cd example_project && pytest --r3-list\n", 1)[1].split("```", 1)[0]
    project = example_project(pytester.path)
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                             "--r3-list"], cwd=project, capture_output=True, text=True,
                            env=environment_without_pytest(), timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    printed = result.stdout.splitlines()
    shown = [line for line in sample.splitlines()
             if line.strip() and line.strip() not in ("...",) and not line.startswith("(")
             and not line.startswith("[") and not line.startswith("=====")]
    missing = [line for line in shown if line not in printed]
    assert not missing, "\n".join(missing)
    named = re.findall(r"^(\w+) \[\w+\]", sample, re.M) + re.findall(
        r"(\w+)\s+\[\w+\]", sample.split("(then", 1)[1])
    assert named == re.findall(r"^(\w+) \[\w+\]  ", result.stdout, re.M)


PAGES = sorted(DOCS.glob("*.md")) + [DOCS.parent / "README.md"]
REPOSITORY_PATH = re.compile(r"\b(?:pytest_r3|benchmarks|scripts|example_project|docs)/"
                             r"[A-Za-z0-9_./-]*[A-Za-z0-9_]")


def _anchors(text: str) -> set[str]:
    """The anchors of a Markdown page's headings, as GitHub makes them."""
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
            for heading in re.findall(r"^#+ (.+)$", text, re.M)}


def test_every_flag_variable_file_and_link_the_docs_name_exists(pytester):
    """What a reader copies from the docs (a flag, an environment variable, a pip extra, a
    file of this repository, a script's option, a link to another page's section) is there:
    renamed or removed names are caught here rather than by the reader."""
    flags = set(help_flags(pytester))
    package = DOCS.parent / "pytest_r3"
    read = set(re.findall(r"PYTEST_R3_[A-Z0-9_]+", "\n".join(  # the tests' own too
        path.read_text() for folder in (package, DOCS.parent / "tests")
        for path in folder.rglob("*.py"))))
    pyproject = (DOCS.parent / "pyproject.toml").read_text()
    extras = set(re.findall(r"^([a-z0-9-]+) = \[", pyproject.split(
        "[project.optional-dependencies]", 1)[1].split("\n[", 1)[0], re.M))
    wrong = []
    for page in PAGES:
        text = page.read_text()
        where = page.relative_to(DOCS.parent)
        wrong += [f"{where}: pip extra {extra}" for extra in set(re.findall(
            r"(?:pytest-r3|\.)\[([a-z0-9,-]+)\]", text)) for extra in extra.split(",")
            if extra not in extras]
        wrong += [f"{where}: flag {flag}" for flag in set(re.findall(r"--r3-[a-z0-9-]+", text))
                  if flag not in flags]
        wrong += [f"{where}: variable {name}" for name in
                  set(re.findall(r"PYTEST_R3_[A-Z0-9_]+", text)) if name not in read]
        wrong += [f"{where}: file {path}" for path in set(REPOSITORY_PATH.findall(text))
                  if not (DOCS.parent / path).exists()]
        for script, rest in set(re.findall(r"python3? ((?:benchmarks|scripts)/\w+\.py)"
                                           r"((?: [^\n`]*)?)", text)):
            known = (DOCS.parent / script).read_text() if (DOCS.parent / script).exists() else ""
            wrong += [f"{where}: {script} {flag}" for flag in set(re.findall(
                r"(?<![\w-])(--[a-z][a-z0-9-]*)", rest)) if f'"{flag}"' not in known]
        for target, anchor in re.findall(r"\]\(([^)#\s:]*)(?:#([^)\s]+))?\)", text):
            linked = page.parent / target if target else page
            if not linked.exists():
                wrong.append(f"{where}: link to {target}")
            elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked.read_text()):
                wrong.append(f"{where}: link to {target}#{anchor}")
    assert not wrong, "\n".join(sorted(wrong))


BACKEND_USE = """
import sys
import numpy as np
import pytest_r3 as r3
from pytest_r3.backends import plugin_manager
import r3_fastmath

plugin_manager().register(r3_fastmath)  # what the entry point does once installed
DOT = '''
double dot(long n, const double *x, const double *y) {
    double s = 0.0;
    for (long i = 0; i < n; ++i) s += x[i] * y[i];
    return s;
}
'''
fast = r3.kernel(DOT, entry="dot", backend="cpu-fastmath", name="fast_dot")
plain = r3.kernel(DOT, entry="dot", name="plain_dot")
x = np.arange(1000.0)
assert abs(fast(1000, x, x) - float(x @ x)) < 1e-6 * float(x @ x)
print(fast.backend.target_name())
print("FAST", "fadd fast <" in fast.build().optimised_ir)
print("PLAIN", "fadd fast" in plain.build().optimised_ir)
"""


def test_the_backend_example_of_how_it_works_runs(tmp_path):
    """docs/how-it-works.md's third-party backend, copied from the page, declares and runs a
    kernel, and its code comes out with fast-math vector additions where the CPU backend's
    does not (a subprocess: registering a backend lasts for the process)."""
    text = (DOCS / "how-it-works.md").read_text()
    module = text.split("```python\n# r3_fastmath.py\n", 1)[1].split("```", 1)[0]
    (tmp_path / "r3_fastmath.py").write_text(module)
    result = subprocess.run([sys.executable, "-c", BACKEND_USE], cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    target, fast, plain = result.stdout.splitlines()[-3:]
    assert target.endswith("-fastmath")
    assert (fast, plain) == ("FAST True", "PLAIN False")


def _options(synopsis: str) -> dict[str, str]:
    """``[--flag METAVAR]`` pairs of a usage line or a documented synopsis (no help)."""
    return {flag: metavar for flag, metavar in re.findall(
        r"\[(--[a-z0-9-]+)(?: ([A-Z][A-Z_=]*))?\]", synopsis) if flag != "--help"}


def test_api_md_documents_every_pytest_r3_command_as_its_help_does():
    """The table of the `pytest-r3` command in docs/api.md has a row per subcommand of
    ``pytest-r3 --help``, and each row's synopsis names that subcommand's options with
    their values, no more and no fewer."""
    def run(*args: str) -> str:
        result = subprocess.run([*CLI, *args, "--help"], capture_output=True, text=True,
                                timeout=60)
        assert result.returncode == 0, result.stderr
        return result.stdout

    commands = re.search(r"\{([a-z,]+)\}", run()).group(1).split(",")
    text = (DOCS / "api.md").read_text().split("### The `pytest-r3` command", 1)[1]
    rows = dict(re.findall(r"^\| `pytest-r3 ([a-z]+)([^`]*)` \|", text, re.M))
    assert set(rows) == set(commands), (
        f"missing from docs/api.md: {sorted(set(commands) - set(rows))}; "
        f"documented but unknown: {sorted(set(rows) - set(commands))}")
    for command in commands:
        usage = " ".join(run(command).split("\n\n", 1)[0].split())
        assert _options(rows[command]) == _options(usage), (command, rows[command], usage)


def test_tuning_md_gives_the_pipeline_values_the_search_explores():
    """The search-space table of docs/tuning.md names, for each pipeline setting, the values
    search/parametrization.py offers the optimizer."""
    text = (DOCS / "tuning.md").read_text().split("## The search space", 1)[1].split("\n## ")[0]
    rows = {}
    for names, values in re.findall(r"^\| ((?:`\w+`(?:, )?)+) \| ([^|]+) \|", text, re.M):
        for name in re.findall(r"`(\w+)`", names):
            rows[name] = values.strip()
    assert set(rows) == set(PIPELINE_CHOICES) | set(CODEGEN_CHOICES) | {
        "passes_before", "passes_after"}
    for name, values in {**PIPELINE_CHOICES, **CODEGEN_CHOICES}.items():
        shown = rows[name]
        if set(values) == {True, False}:
            assert shown in ("on/off", "off/on"), (name, shown)
        elif name == "level":
            assert shown == f"{min(values)}-{max(values)}" and values == tuple(
                range(min(values), max(values) + 1)), shown
        else:
            numbers = [int(n) for n in re.findall(r"\d+", shown)]
            assert numbers == [v for v in values if v is not None], (name, shown)
            assert ("default" in shown) == (None in values), (name, shown)
    slots = SearchSpace.__dataclass_fields__["pass_slots"].default
    assert rows["passes_before"] == f"up to {slots} passes each"


def _shape(text: str) -> str:
    """Text with its figures masked and its wrapping undone: what stays from run to run."""
    return " ".join(re.sub(r"\d+(?:\.\d+)?", "N", text).split())


def test_the_ci_md_check_table_is_what_a_failing_check_prints(tmp_path):
    """docs/ci.md shows the table of a `--r3-check --r3-check-threshold median:5%` that
    fails on a workload: the same project (tests/test_workloads.py's, its lock naming the
    strided loop order) prints that table today, figures aside."""
    (tmp_path / "wl_scale.c").write_text(workloads.KERNEL_C)
    (tmp_path / "wlmod.py").write_text(workloads.MODULE_PY.replace("[0, 1]", "[1, 0]"))
    (tmp_path / "test_oracle.py").write_text(workloads.ORACLE_TEST_PY)
    (tmp_path / "test_bench.py").write_text(workloads.BENCHMARK_TEST_PY)
    (tmp_path / "pytest.ini").write_text(workloads.INI)
    workloads.lock_order(tmp_path, 0)  # the baseline is the row order: the lock is slower
    result = workloads.run(tmp_path, "--r3-check", "--r3-check-threshold", "median:5%")
    assert result.returncode == 1, result.stdout + result.stderr
    printed = result.stdout.split("\nkernel ", 1)[1].split("\nreports: ", 1)[0]
    text = (DOCS / "ci.md").read_text()
    sample = text.split("and on each workload:\n\n```\n", 1)[1]
    shown = sample.split("```", 1)[0].split("kernel ", 1)[1]
    assert _shape(shown) == _shape(printed), printed


def test_api_md_gives_the_markers_as_pytest_markers_does(pytester):
    """Each `@pytest.mark.r3_*` of docs/api.md, with its signature, is what the plugin
    registers (``pytest --markers``), and none is left out."""
    registered = re.findall(r"^@pytest\.mark\.(r3_\w+\([^)]*\)):",
                            pytester.runpytest("--markers").stdout.str(), re.M)
    documented = re.findall(r"^`@pytest\.mark\.(r3_\w+\([^)]*\))`$",
                            (DOCS / "api.md").read_text(), re.M)
    assert sorted(documented) == sorted(registered) and registered


def test_the_hip_md_build_sample_is_what_pytest_r3_build_prints(tmp_path):
    """docs/hip.md shows `pytest-r3 build row_sums --target gfx942` of example_project: its
    paths and figures come from the compiler alone (no GPU, no ROCm), so the command prints
    that text today, line for line."""
    if shutil.which("hipcc"):
        pytest.skip("hipcc is installed: the build compares its figures, the sample does not")
    text = (DOCS / "hip.md").read_text().split("pytest-r3 build row_sums --target gfx942", 1)[1]
    sample = text.split("```\n", 2)[2].split("```", 1)[0]
    result = subprocess.run([*CLI, "build", "row_sums", "--target", "gfx942"],
                            cwd=example_project(tmp_path), capture_output=True, text=True,
                            env=environment_without_pytest(), timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == sample


def test_api_md_documents_every_public_name():
    """Each name ``pytest_r3`` exports (``__all__``, what `import pytest_r3 as r3` offers)
    has its place in docs/api.md: a heading, a table row or its section."""
    import pytest_r3

    text = (DOCS / "api.md").read_text()
    missing = [name for name in pytest_r3.__all__ if not name.startswith("_") and not re.search(
        rf"^#+ .*\b{name}\b|^\| `{name}`|`r3\.{name}\b", text, re.M)]
    assert not missing, f"not in docs/api.md: {missing}"


def test_api_md_exceptions_are_one_table_of_every_error_and_warning():
    """The exceptions of docs/api.md are one unbroken table (a paragraph inside it once cut
    it in two) with a row per exception and warning class of pytest_r3.errors, its bases
    as the code has them."""
    from pytest_r3 import errors

    section = (DOCS / "api.md").read_text().split("## Exceptions", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"(?:^\|.*\n)+", section, re.M)
    assert len(blocks) == 1, f"{len(blocks)} tables in the Exceptions section"
    rows = dict(re.findall(r"^\| `(\w+)`(?: \(`[\w.]+`\))? \| ([^|]+) \|", blocks[0], re.M))
    classes = {name: cls for name, cls in vars(errors).items() if isinstance(cls, type)
               and issubclass(cls, (errors.R3Error, errors.R3Warning))}
    assert set(rows) == set(classes)
    for name, cls in classes.items():
        assert re.findall(r"`(\w+)`", rows[name]) == [b.__name__ for b in cls.__bases__], name


@pytest.mark.parametrize("page", ["api.md", "getting-started.md"])
def test_the_pipeline_tables_give_every_setting_with_its_default(page):
    """The `Pipeline` settings tables (api.md, getting-started.md) list every field of
    ``r3.Pipeline``, each with the default the dataclass has."""
    import dataclasses

    import pytest_r3 as r3

    rows = dict(re.findall(r"^\| `(\w+)` +\| `([^`]*)` +\|", (DOCS / page).read_text(), re.M))
    fields = {field.name: repr(field.default) for field in dataclasses.fields(r3.Pipeline)}
    assert {name: rows.get(name) for name in fields} == fields


def test_api_md_lists_the_custom_passes():
    from pytest_r3.model.pipeline import CUSTOM_PASSES

    text = (DOCS / "api.md").read_text().split("`CUSTOM_PASSES`: ", 1)[1].split("(each is", 1)[0]
    assert re.findall(r"`(\w+)`", text) == sorted(CUSTOM_PASSES)


def test_record_and_replay_md_gives_the_crash_cap_the_server_has():
    """A server gives up on the death after ``max_consecutive_crashes`` in a row
    (tests/test_replay.py shows it); the page names that death and the default."""
    import inspect

    from pytest_r3.replay.client import ReplayServer

    cap = inspect.signature(ReplayServer).parameters["max_consecutive_crashes"].default
    words = {10: ("eleventh", "ten")}  # the default the page was written for
    assert cap in words, f"the crash cap is now {cap}: say so in docs/record-and-replay.md"
    text = " ".join((DOCS / "record-and-replay.md").read_text().split())
    assert "The {} worker death in a row ({} are borne)".format(*words[cap]) in text
