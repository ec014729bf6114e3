"""``pytest-r3 build`` (tuning/build.py): what it shows is the entry's own code."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import pytest_r3 as r3
from pytest_r3.tuning.build import build

STATIC_ENTRY_WITH_MAIN = """\
#include <stdio.h>
#define N 64
static void print_array(const double *a, int n) {
  for (int i = 0; i < n; i++) printf("%f\\n", a[i]);
}
static void smooth(int n, const double *restrict a, double *restrict b) {
  for (int i = 1; i < n - 1; i++)
    b[i] = 0.25 * a[i - 1] + 0.5 * a[i] + 0.25 * a[i + 1];
}
int main(void) {
  double a[N], b[N];
  for (int i = 0; i < N; i++) a[i] = i;
  smooth(N, a, b);
  print_array(b, N);
  return 0;
}
"""


def test_build_of_a_static_entry_in_a_file_with_main_shows_the_entry(tmp_path: Path):
    path = tmp_path / "smooth.c"
    path.write_text(STATIC_ENTRY_WITH_MAIN)
    kernel = r3.kernel(path, entry="smooth", name=f"static_smooth_{id(path)}")
    vectorised = build(kernel, kernel.baseline, tmp_path / "o3")
    ir = Path(vectorised.files["ir"]).read_text()
    assembly = Path(vectorised.files["assembly"]).read_text()
    assert "@smooth(" in ir and "@main(" not in ir and "print_array" not in ir
    assert "main:" not in assembly and "print_array" not in assembly
    assert vectorised.figures["ours"]["instructions"] > 5
    plain = build(kernel, kernel.variant(pipeline=r3.Pipeline(level=0)), tmp_path / "o0")
    assert plain.figures["ours"]["instructions"] != vectorised.figures["ours"]["instructions"]


TEMPLATE_NEVER_INSTANTIATED = """\
template <int WIDTH, typename T>
__global__ void scale_rows(int n, T factor, T *x) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    for (int k = 0; k < WIDTH; ++k) x[i * WIDTH + k] *= factor;
}
"""


@pytest.mark.skipif(shutil.which("nvcc") is None or shutil.which("ptxas") is None,
                    reason="nvcc and ptxas (CUDA toolkit) are not installed")
def test_build_of_a_template_instance_compares_the_same_instance_built_by_nvcc(tmp_path):
    """The file never instantiates the template: nvcc must be told which instance, as clang
    is, else its PTX holds no kernel and the comparison is with nothing."""
    path = tmp_path / "scale_rows.cu"
    path.write_text(TEMPLATE_NEVER_INSTANTIATED)
    kernel = r3.kernel(path, entry="scale_rows<4, float>", backend="cuda",
                       name=f"scale_rows_{id(path)}")
    result = build(kernel, kernel.baseline, tmp_path / "out", target="sm_90")
    assert not any("nvcc could not" in note for note in result.notes), result.notes
    theirs = Path(result.files["nvcc ptx"]).read_text()
    assert ".entry _Z10scale_rowsILi4EfEviT0_PS0_(" in theirs
    assert result.figures["nvcc"]["registers"] > 0
