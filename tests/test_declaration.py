"""Declaring kernels: what is refused (and how), and what launching a declared kernel does."""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pytest_r3 as r3
from pytest_r3.kernel import declaration
from pytest_r3.model.pipeline import Pipeline

# -- declaration errors -----------------------------------------------------------------------


def test_missing_source_file(tmp_path, unique_name):
    name = unique_name()
    missing = tmp_path / "kernels" / "nowhere.c"
    with pytest.raises(r3.SourceNotFoundError) as excinfo:
        r3.kernel(missing, entry="nowhere", name=name)
    message = str(excinfo.value)
    assert message.startswith(f"kernel {name!r} (declared at {__file__}:")
    assert f"looked for {missing}" in message
    assert name not in r3.registry()


def test_relative_missing_source_is_looked_for_beside_this_file(unique_name):
    with pytest.raises(r3.SourceNotFoundError) as excinfo:
        r3.kernel("kernels/absent.c", entry="absent", name=unique_name())
    here = __file__.rsplit("/", 1)[0]
    assert f"looked for {here}/kernels/absent.c" in str(excinfo.value)


def test_unknown_entry_symbol_lists_the_defined_functions(kernel_dir, unique_name):
    kernel = r3.kernel(kernel_dir / "axpy.c", entry="saxpy", name=unique_name())
    x = np.zeros(1, np.float32)
    with pytest.raises(r3.EntryNotFoundError) as excinfo:
        kernel(1, 1.0, x, x)
    message = str(excinfo.value)
    assert "entry symbol 'saxpy' is not defined by the source" in message
    assert "(it defines: axpy, twice)" in message
    assert str(kernel_dir / "axpy.c") in message
    assert isinstance(excinfo.value, r3.DeclarationError)


def test_entry_must_be_a_c_identifier(kernel_dir):
    with pytest.raises(r3.DeclarationError, match="entry must be a C function name, got 'ax py'"):
        r3.kernel(kernel_dir / "axpy.c", entry="ax py")


def test_tunable_value_outside_its_declared_set(axpy):
    expected = "tunable UNROLL=3 is not one of its declared values [1, 2, 4, 8]"
    with pytest.raises(r3.DeclarationError) as excinfo:
        axpy.configure(UNROLL=3)
    assert str(excinfo.value) == f"{axpy.where}: {expected}"
    with pytest.raises(r3.DeclarationError, match=expected.replace("[", r"\[")):
        axpy.variant(UNROLL=3)
    with pytest.raises(r3.DeclarationError,
                       match="names unknown tunable 'UNROLLS'; tunables: UNROLL"):
        axpy.variant(UNROLLS=2)


def test_constraints_that_exclude_every_combination(kernel_dir, unique_name):
    name = unique_name()
    with pytest.raises(r3.DeclarationError) as excinfo:
        r3.kernel(kernel_dir / "axpy.c", entry="axpy", name=name,
                  tune={"UNROLL": [1, 2, 4], "TILE": [8, 16]}, constraints=["UNROLL > TILE"])
    message = str(excinfo.value)
    assert message.startswith(f"kernel {name!r} (declared at ")
    assert "the constraints exclude every combination of tunable values" in message
    assert "UNROLL > TILE" in message
    assert name not in r3.registry()


def test_constraint_naming_an_unknown_tunable(kernel_dir, unique_name):
    with pytest.raises(r3.DeclarationError) as excinfo:
        r3.kernel(kernel_dir / "axpy.c", entry="axpy", name=unique_name(),
                  tune={"UNROLL": [1, 2]}, constraints=["TILE % UNROLL == 0"])
    assert "constraint 'TILE % UNROLL == 0' names TILE, which is not tunable; tunables: UNROLL" \
        in str(excinfo.value)


def test_constraint_violated_by_a_configured_variant(kernel_dir, unique_name):
    kernel = r3.kernel(kernel_dir / "axpy.c", entry="axpy", name=unique_name(),
                       tune={"UNROLL": [1, 2, 4], "TILE": [1, 2, 4]},
                       constraints=["TILE >= UNROLL"])
    with pytest.raises(r3.DeclarationError, match="violate constraint 'TILE >= UNROLL'"):
        kernel.configure(UNROLL=4, TILE=2)
    assert kernel.variant(UNROLL=4, TILE=4).macro_dict == {"TILE": 4, "UNROLL": 4}


def test_unknown_pipeline_key(kernel_dir, axpy, unique_name):
    name = unique_name()
    with pytest.raises(r3.DeclarationError) as excinfo:
        r3.kernel(kernel_dir / "axpy.c", entry="axpy", name=name, pipeline={"vectorise": False})
    message = str(excinfo.value)
    assert message.startswith(f"kernel {name!r} (declared at ")
    assert "unknown pipeline setting(s) 'vectorise'; known settings: level, loop_vectorize" \
        in message
    with pytest.raises(r3.DeclarationError, match="unknown pipeline setting.*'unrol'"):
        axpy.configure(pipeline={"unrol": False})


def test_unknown_backend_name(kernel_dir, unique_name):
    name = unique_name()
    with pytest.raises(r3.BackendError) as excinfo:
        r3.kernel(kernel_dir / "axpy.c", entry="axpy", name=name, backend="opencl")
    message = str(excinfo.value)
    assert "no backend named 'opencl'" in message
    assert "available backends: cpu" in message
    assert name not in r3.registry()


def test_two_different_kernels_with_the_same_name(kernel_dir, unique_name):
    name = unique_name()
    first = r3.kernel(kernel_dir / "axpy.c", entry="axpy", name=name)
    with pytest.raises(r3.DeclarationError) as excinfo:
        r3.kernel(kernel_dir / "axpy.c", entry="twice", name=name)
    message = str(excinfo.value)
    assert f"another kernel is already named {name!r}" in message
    assert f"(declared at {first.declared_at})" in message
    assert "distinct name=" in message
    assert r3.registry()[name] is first


def test_name_defaults_to_the_entry_and_clashes_across_sources(write_c):
    first = r3.kernel(write_c("a/scale.c", "void scale(int n) { (void)n; }\n"), entry="scale")
    assert first.name == "scale"
    with pytest.raises(r3.DeclarationError, match="another kernel is already named 'scale'"):
        r3.kernel(write_c("b/scale.c", "void scale(int n) { (void)n; }\n"), entry="scale")
    second = r3.kernel(write_c("b/scale.c", "void scale(int n) { (void)n; }\n"), entry="scale",
                       name="scale_b")
    assert set(r3.registry()) >= {"scale", "scale_b"}
    assert r3.registry()["scale"] is first and r3.registry()["scale_b"] is second


def test_reimporting_the_declaring_module_is_not_a_clash(tmp_path, monkeypatch, unique_name):
    name = unique_name()
    module_name = f"reimported_{name}"
    (tmp_path / "k.c").write_text("int k(void) { return 3; }\n")
    (tmp_path / f"{module_name}.py").write_text(
        f"import pytest_r3 as r3\nk = r3.kernel('k.c', entry='k', name={name!r})\n")
    monkeypatch.syspath_prepend(tmp_path)
    module = importlib.import_module(module_name)
    try:
        reloaded = importlib.reload(module)
        assert r3.registry()[name] is reloaded.k
        assert reloaded.k() == 3
    finally:
        sys.modules.pop(module_name, None)


def test_declaring_does_not_compile(unique_name, monkeypatch):
    calls = []
    real_run = subprocess.run
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: calls.append(a) or real_run(*a, **k))
    kernel = r3.kernel("void broken(int n) { this is not C }\n", entry="broken",
                       name=unique_name())
    assert calls == []  # clang runs on the first call, not at import time
    monkeypatch.undo()
    with pytest.raises(r3.CompileError, match="inline source of kernel"):
        kernel(1)


# -- launching --------------------------------------------------------------------------------


@pytest.mark.parametrize("unroll", [1, 2, 4, 8])
def test_every_tunable_value_gives_the_right_result(axpy, unroll):
    n = 1003  # not a multiple of any unroll factor: the remainder loop runs too
    x = np.linspace(-1, 1, n, dtype=np.float32)
    y = np.arange(n, dtype=np.float32)
    expected = np.float32(0.5) * x + y
    axpy.configure(UNROLL=unroll)(n, 0.5, x, y)
    np.testing.assert_allclose(y, expected, rtol=1e-6)


def test_tunable_values_reach_the_code(total):
    x = np.arange(10, dtype=np.float64)
    assert total(10, x) == 45.0
    assert total.configure(SCALE=2)(10, x) == 90.0
    assert total.configure(SCALE=3, pipeline={"level": 0})(10, x) == 135.0
    assert total.configure(pipeline={"level": 0})(10, x) == 45.0


def test_scalar_return_value(total):
    result = total(3, np.array([0.25, 0.5, 1.0]))
    assert result == 1.75
    assert type(result) is float
    assert total(0, np.zeros(0)) == 0.0


def test_variants_are_built_once(axpy):
    variant = axpy.variant(UNROLL=4)
    assert variant == axpy.variant(UNROLL=4)
    assert axpy.build(variant) is axpy.build(axpy.variant(UNROLL=4))
    assert axpy.configure(UNROLL=4) is axpy.build(variant)
    assert axpy.build() is axpy.build(axpy.baseline)
    assert axpy.build(axpy.variant(UNROLL=2)) is not axpy.build(variant)
    assert axpy.configure(UNROLL=4, pipeline={"level": 1}) is not axpy.build(variant)


def test_variant_key_names_what_changes_the_code(axpy):
    baseline = axpy.baseline
    assert baseline.macro_dict == {"UNROLL": 1}
    assert baseline.pipeline == Pipeline()
    assert baseline.key() == axpy.variant().key() == axpy.variant(UNROLL=1).key()
    keys = {baseline.key(), axpy.variant(UNROLL=2).key(),
            axpy.variant(pipeline={"level": 2}).key(),
            axpy.variant(source_text="void axpy(void) {}\n").key()}
    assert len(keys) == 4


def test_activate_changes_what_plain_calls_launch(total):
    x = np.ones(4)
    assert total.active == total.baseline
    total.activate(total.variant(SCALE=3))
    try:
        assert total(4, x) == 12.0
        assert total.active.macro_dict == {"SCALE": 3}
    finally:
        total.activate(None)
    assert total(4, x) == 4.0


def test_rewritten_source_variant(kernel_dir, total):
    rewritten = (kernel_dir / "total.c").read_text().replace("s += x[i];", "s += x[i] * x[i];")
    squares = total.build(total.variant(source_text=rewritten))
    x = np.array([1.0, 2.0, 3.0])
    assert squares(3, x) == 14.0
    assert total(3, x) == 6.0  # the declared source is unchanged
    assert "x[i] * x[i]" not in (kernel_dir / "total.c").read_text()


def test_inline_source(unique_name):
    name = unique_name()
    kernel = r3.kernel(
        textwrap.dedent("""\
            #ifndef POWER
            #define POWER 1
            #endif
            void powers(int n, const int *x, long *out) {
                for (int i = 0; i < n; ++i) {
                    long p = 1;
                    for (int k = 0; k < POWER; ++k) p *= x[i];
                    out[i] = p;
                }
            }
            """),
        entry="powers", name=name, tune={"POWER": [1, 2, 3]})
    assert kernel.source.filename.startswith(f"<inline source of kernel {name!r}")
    assert r3.registry()[name] is kernel
    x = np.array([1, 2, 3, -4], dtype=np.int32)
    out = np.zeros(4, dtype=np.int64)
    kernel(4, x, out)
    np.testing.assert_array_equal(out, x)
    kernel.configure(POWER=3)(4, x, out)
    np.testing.assert_array_equal(out, [1, 8, 27, -64])
    assert [p.written for p in kernel.signature.params] == [False, False, True]


def test_kernel_repr_and_where(axpy):
    assert repr(axpy) == f"<Kernel {axpy.name!r} cpu {axpy.source.filename}:axpy>"
    assert axpy.where.startswith(f"kernel {axpy.name!r} (declared at ")
    assert axpy.backend_name == "cpu"


def test_interceptors_see_every_launch(axpy):
    seen = []

    def record(kernel, args, proceed):
        seen.append((kernel.name, args[0]))
        return proceed()

    x, y = np.ones(2, np.float32), np.zeros(2, np.float32)
    declaration.add_interceptor(record)
    try:
        axpy(2, 1.0, x, y)
        axpy(1, 1.0, x, y)
    finally:
        declaration.remove_interceptor(record)
    axpy(2, 1.0, x, y)
    assert seen == [(axpy.name, 2), (axpy.name, 1)]
    np.testing.assert_array_equal(y, [3.0, 2.0])
