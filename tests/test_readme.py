"""The README's Quick start, word for word: its files and commands are read from README.md
itself, so the two cannot drift, and run in a fresh pytester folder."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def quick_start() -> tuple[dict[str, str], list[list[str]]]:
    """The Quick start's files (``path`` -> text: each fenced block that follows a line
    naming a file in backticks) and its commands (the ``pytest`` lines of its bash block)."""
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    files = {path: text for path, text in re.findall(
        r"^`([\w./-]+\.\w+)`(?:(?!```).)*?:\n\n```\w*\n(.*?)^```", section, re.M | re.S)}
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", section, re.S):
        for line in block.splitlines():
            line = line.split("#", 1)[0].strip()
            if line.startswith("pytest"):
                commands.append(shlex.split(line)[1:])
    return files, commands


def test_the_readme_names_its_files_and_commands():
    files, commands = quick_start()
    assert set(files) == {"pyproject.toml", "mypkg/dot.c", "mypkg/__init__.py",
                          "tests/test_dot.py"}
    assert 'pythonpath = ["."]' in files["pyproject.toml"]
    assert commands == [[], ["--r3-list"], ["--r3-tune"], ["--r3-check"]]


def test_the_quick_start_runs_as_written_and_shows_a_tuned_speedup(pytester):
    files, commands = quick_start()
    for path, text in files.items():
        target = pytester.path / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    outputs = {}
    for args in commands:
        # the README's tune runs the default budget of 100 evaluations (a few minutes); 30
        # find the LANES that matter in about half the time, which keeps this test short
        budget = ["--r3-budget=30"] if args == ["--r3-tune"] else []
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, *budget,
                                               timeout=600)
        output = result.stdout.str() + result.stderr.str()
        assert result.ret == 0, f"pytest {' '.join(args)} failed:\n{output}"
        assert "INTERNALERROR" not in output and "Traceback" not in output
        outputs[" ".join(args)] = output
    assert "1 passed" in outputs[""]
    assert "dot [cpu]  mypkg/dot.c:dot" in outputs["--r3-list"]
    assert "LANES in [1, 2, 4, 8, 16]" in outputs["--r3-list"]
    assert "tests/test_dot.py::test_dot" in outputs["--r3-list"]
    tuned = re.search(r"^dot +tuned +\S+ \w+ +\S+ \w+ +([\d.]+)x", outputs["--r3-tune"], re.M)
    assert tuned, outputs["--r3-tune"]
    assert float(tuned.group(1)) > 1.2  # a speedup that shows what the tool is for
    assert "lock file: r3.lock" in outputs["--r3-tune"]
    assert (pytester.path / "r3.lock").is_file()
    assert re.search(r"^dot +ok ", outputs["--r3-check"], re.M), outputs["--r3-check"]
    # the check's report sits beside the tuning report, which it leaves as it was
    assert (pytester.path / ".r3" / "check-report.html").is_file()
    assert "pytest-r3 tuning report" in (pytester.path / ".r3" / "report.md").read_text()
