"""Where kernel source comes from: a file beside the declaring module, or inline text."""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

import numpy as np
import pytest

import pytest_r3 as r3
from pytest_r3.model.source import KernelSource, load_source, looks_like_path


def _import_file(path: Path, module_name: str):
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("source", "is_path"),
    [
        ("saxpy.c", True),
        ("kernels/stencil.cu", True),
        (" matmul.cpp ", True),
        (Path("no_suffix"), True),
        ("void f(void) {}\n", False),
        ("int f(void) { return 1; }", False),  # no newline and no source suffix: inline
    ],
)
def test_paths_and_inline_text_are_told_apart(source, is_path):
    assert looks_like_path(source) is is_path


def test_relative_path_is_relative_to_the_declaring_module_not_the_cwd(
        tmp_path, monkeypatch, unique_name):
    package = tmp_path / "pkg"
    (package / "kernels").mkdir(parents=True)
    (package / "kernels" / "fill.c").write_text(
        "void fill(int n, int *x) { for (int i = 0; i < n; ++i) x[i] = i * i; }\n")
    name = unique_name()
    (package / "decl.py").write_text(textwrap.dedent(f"""\
        import pytest_r3 as r3

        fill = r3.kernel("kernels/fill.c", entry="fill", name={name!r})
        """))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    module = _import_file(package / "decl.py", f"decl_{name}")
    kernel = module.fill
    assert kernel.source.path == package / "kernels" / "fill.c"
    assert kernel.source.filename == str(package / "kernels" / "fill.c")
    assert kernel.declared_at == f"{package / 'decl.py'}:3"
    assert r3.registry()[name] is kernel
    x = np.zeros(4, dtype=np.int32)
    kernel(4, x)
    np.testing.assert_array_equal(x, [0, 1, 4, 9])


def test_missing_source_file_names_the_path_looked_for(tmp_path):
    declaring = tmp_path / "module.py"
    with pytest.raises(r3.SourceNotFoundError) as excinfo:
        load_source("kernels/missing.c", str(declaring), "kernel 'k'")
    message = str(excinfo.value)
    assert "'kernels/missing.c' not found" in message
    assert f"looked for {tmp_path / 'kernels' / 'missing.c'}" in message
    assert "relative to the file that declares the kernel" in message
    assert isinstance(excinfo.value, FileNotFoundError)  # plain except clauses still work


def test_includes_beside_the_source_are_found(write_c, unique_name):
    write_c("kern/helpers.h", "static inline float square(float v) { return v * v; }\n")
    path = write_c("kern/squares.c", """\
        #include "helpers.h"
        #include <math.h>
        void squares(int n, float *x) {
            for (int i = 0; i < n; ++i) x[i] = square(x[i]) + (float)fabs(-0.0);
        }
        """)
    source = load_source(path, None, "kernel 'k'")
    assert source.include_dirs == (str(path.parent),)
    kernel = r3.kernel(path, entry="squares", name=unique_name())
    x = np.array([1, 2, 3], dtype=np.float32)
    kernel(3, x)
    np.testing.assert_array_equal(x, [1, 4, 9])


def test_inline_source():
    source = load_source("void f(void) {}\n", None, "kernel 'f'")
    assert source.path is None
    assert not source.is_file
    assert source.filename == "<inline source of kernel 'f'>"
    assert source.include_dirs == ()


def test_rewritten_text_keeps_the_file_and_changes_the_hash(write_c):
    path = write_c("orig.c", "void f(void) {}\n")
    original = load_source(path, None, "kernel 'f'")
    rewritten = original.with_text("void f(void) { /* faster */ }\n")
    assert rewritten.path == original.path
    assert rewritten.include_dirs == original.include_dirs
    assert rewritten.hash != original.hash
    assert path.read_text() == "void f(void) {}\n"  # the user's file is never touched
    assert KernelSource("void f(void) {}\n", "x.c").hash == original.hash

