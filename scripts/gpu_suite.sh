#!/usr/bin/env bash
# The GPU suite in one command, for a bare GPU machine without internet access:
#
#     scripts/gpu_suite.sh [WHEELHOUSE]
#
# installs pytest-r3 (this checkout) and pycuda into a fresh virtual environment from a
# folder of wheels (default: ./wheelhouse), building pycuda from its source distribution
# against this machine's CUDA; then runs the CUDA tests (no GPU test may skip), tunes the
# example project's CUDA kernels with `pytest --r3-tune`, and runs benchmarks/bench_cuda.py.
# Logs and results go to $R3_GPU_OUT (default ./gpu-results).
#
# The machine needs: an NVIDIA driver and GPU, the CUDA toolkit (nvcc, headers; found on
# PATH, under $CUDA_HOME or /usr/local/cuda), Python 3.10+ with venv and its headers
# (python3-dev), and a C++ compiler (to build pycuda).
#
# Preparing the wheelhouse, on a machine with internet, the same OS/architecture and the
# same Python minor version as the GPU machine (see docs/cuda.md):
#
#     pip wheel --wheel-dir wheelhouse ".[test]"            # pytest-r3's dependencies
#     pip download --dest wheelhouse setuptools wheel numpy pytools platformdirs mako
#     pip download --dest wheelhouse --no-deps --no-binary pycuda pycuda
#
# (`--no-binary pycuda` keeps pycuda a source distribution; `--no-binary :all:` would also
# try to build numpy from source.) Copy the folder and this checkout to the GPU machine.
#
# Options through the environment: R3_GPU_VENV (virtual environment, default ./.venv-gpu),
# R3_GPU_OUT, R3_GPU_FULL=1 (also run the whole test suite), R3_GPU_BUDGET (evaluations per
# kernel for --r3-tune, default 40), R3_GPU_QUICK=1 (smaller benchmark problems).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WHEELHOUSE="$(cd "${1:-$ROOT/wheelhouse}" 2>/dev/null && pwd)" || {
    echo "gpu_suite: wheelhouse folder '${1:-$ROOT/wheelhouse}' not found (see the header" \
         "of this script for how to prepare it)" >&2
    exit 2
}
VENV="${R3_GPU_VENV:-$ROOT/.venv-gpu}"
OUT="${R3_GPU_OUT:-$ROOT/gpu-results}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
PIP=(python -m pip install --no-index --find-links "$WHEELHOUSE" --disable-pip-version-check)

FAILED=()
step() { printf '\n=== %s ===\n' "$*"; }
fail() { echo "gpu_suite: $*" >&2; exit 1; }
soft() { FAILED+=("$1"); echo "gpu_suite: $1 failed (see its log in $OUT)" >&2; }

TEMP="$(mktemp -d)"
trap 'rm -rf "$TEMP"' EXIT

step "checking the machine"
command -v nvidia-smi >/dev/null && nvidia-smi -L || echo "warning: nvidia-smi not found"
for candidate in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda; do
    if [ -n "$candidate" ] && [ -x "$candidate/bin/nvcc" ]; then
        export CUDA_HOME="$candidate" PATH="$candidate/bin:$PATH"
        break
    fi
done
command -v nvcc >/dev/null || fail "nvcc not found (needed to build pycuda): install the \
CUDA toolkit or set CUDA_HOME"
export CUDA_HOME="${CUDA_HOME:-$(cd "$(dirname "$(command -v nvcc)")/.." && pwd)}"
nvcc --version | tail -1
compgen -G "$WHEELHOUSE/pycuda-*" >/dev/null \
    || fail "no pycuda source distribution (pycuda-*.tar.gz) in $WHEELHOUSE"

step "installing into $VENV (offline, from $WHEELHOUSE)"
python3 -m venv "$VENV"
# shellcheck disable=SC1091
. "$VENV/bin/activate"
"${PIP[@]}" --upgrade pip >/dev/null 2>&1 || true   # a newer pip only if the folder has one
"${PIP[@]}" --upgrade setuptools wheel numpy
PYCUDA_WHEEL="$(ls "$WHEELHOUSE"/pycuda-*.whl 2>/dev/null | tail -n 1 || true)"
if [ -n "$PYCUDA_WHEEL" ]; then
    echo "using the prebuilt $PYCUDA_WHEEL"
    "${PIP[@]}" "$PYCUDA_WHEEL"
else
    PYCUDA_SDIST="$(ls "$WHEELHOUSE"/pycuda-*.tar.gz | tail -n 1)"
    echo "building $(basename "$PYCUDA_SDIST") against $CUDA_HOME (a few minutes)"
    tar -xzf "$PYCUDA_SDIST" -C "$TEMP"
    PYCUDA_SRC="$(ls -d "$TEMP"/pycuda-*/ | head -n 1)"
    CONFIGURE=(--cuda-root="$CUDA_HOME")
    # pycuda wraps cuRAND too, which minimal CUDA installations leave out
    [ -f "$CUDA_HOME/include/curand.h" ] || CONFIGURE+=(--no-cuda-enable-curand)
    # it links against the driver's libcuda.so: the toolkit's stub, else the driver's own
    # libcuda.so.1 (ldconfig, or $R3_GPU_LIBCUDA) through a libcuda.so link made here
    if ! compgen -G "$CUDA_HOME/lib*/stubs/libcuda.so" >/dev/null \
            && ! compgen -G "$CUDA_HOME/lib*/libcuda.so" >/dev/null; then
        DRIVER="${R3_GPU_LIBCUDA:-$(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 /{print $NF; exit}')}"
        [ -n "$DRIVER" ] || fail "no libcuda.so (CUDA driver library) found to link pycuda \
against; set R3_GPU_LIBCUDA=/path/to/libcuda.so.1"
        mkdir -p "$TEMP/libcuda"
        ln -sf "$DRIVER" "$TEMP/libcuda/libcuda.so"
        CONFIGURE+=(--cudadrv-lib-dir="$TEMP/libcuda")
    fi
    (cd "$PYCUDA_SRC" && python configure.py "${CONFIGURE[@]}" >/dev/null)
    "${PIP[@]}" --no-build-isolation "$PYCUDA_SRC" > "$OUT/pycuda-build.log" 2>&1 \
        || { tail -n 20 "$OUT/pycuda-build.log"; fail "building pycuda failed (log: \
$OUT/pycuda-build.log)"; }
fi
"${PIP[@]}" --no-build-isolation -e "$ROOT[test,cuda]" | tail -n 1

step "what pytest-r3 sees"
python - <<'EOF' | tee "$OUT/environment.txt"
import platform
import pytest_r3
from pytest_r3.backends import cuda_runtime, cuda_tools, get_backend
from pytest_r3.backends.clang import find_clang
reason = cuda_runtime.unavailable_reason()
if reason:
    raise SystemExit(f"CUDA kernels cannot run: {reason}")
runtime = cuda_runtime.runtime()
backend = get_backend("cuda")
print(f"pytest-r3 {pytest_r3.__version__} on Python {platform.python_version()}")
print(f"GPU: {runtime.device_name} ({runtime.arch}); target {backend.target_name()}")
print(f"clang {find_clang().version}; ptxas {cuda_tools.find_tool('ptxas')}; nvcc "
      f"{cuda_tools.find_tool('nvcc')}; libdevice {cuda_tools.find_libdevice()}")
EOF

cd "$ROOT"
step "CUDA tests (a skipped GPU test fails the suite)"
python -m pytest tests/test_cuda_backend.py example_project/tests/test_cuda_kernels.py \
    -p no:cacheprovider -q -rs 2>&1 | tee "$OUT/tests-cuda.log"
if grep -q "^SKIPPED" "$OUT/tests-cuda.log"; then
    fail "some CUDA tests were skipped on the GPU machine (see $OUT/tests-cuda.log)"
fi

if [ "${R3_GPU_FULL:-0}" = 1 ]; then
    step "the whole test suite"
    python -m pytest tests -p no:cacheprovider -q 2>&1 | tee "$OUT/tests-all.log" \
        || soft "the whole test suite"
fi

step "pytest --r3-tune on the example project's CUDA kernels"
WORK="$TEMP/work"
mkdir -p "$WORK"
cp -r "$ROOT/example_project" "$WORK/"
rm -rf "$WORK/example_project/.r3" "$WORK/example_project/r3.lock"
(cd "$WORK/example_project" && python -m pytest --r3-tune -p no:cacheprovider -q \
    --r3-kernels saxpy,stencil2d,matmul_tiled --r3-budget "${R3_GPU_BUDGET:-40}" \
    tests/test_cuda_kernels.py) 2>&1 | tee "$OUT/r3-tune.log" || soft "pytest --r3-tune"
cp -r "$WORK/example_project/.r3" "$OUT/r3-tune-reports" 2>/dev/null || true
cp "$WORK/example_project/r3.lock" "$OUT/r3-tune.lock" 2>/dev/null || true
(cd "$WORK/example_project" && python -m pytest --r3-check -p no:cacheprovider -q \
    --r3-kernels saxpy,stencil2d,matmul_tiled tests/test_cuda_kernels.py) 2>&1 \
    | tee "$OUT/r3-check.log" || soft "pytest --r3-check"

step "GPU benchmark"
BENCH=(python benchmarks/bench_cuda.py --json "$OUT/bench_cuda.json")
[ "${R3_GPU_QUICK:-0}" = 1 ] && BENCH+=(--quick)
"${BENCH[@]}" 2>&1 | tee "$OUT/bench_cuda.txt" || soft "the benchmark"

step "done: results in $OUT"
ls "$OUT"
if [ "${#FAILED[@]}" -gt 0 ]; then
    printf 'gpu_suite: failed: %s\n' "${FAILED[@]}" >&2
    exit 1
fi
