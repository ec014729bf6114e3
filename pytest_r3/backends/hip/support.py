"""What HIP pytest-r3's clang build does not provide, in HIP's words.

The HIP backend explains clang's errors with the CUDA backend's explainer
(``backends/cuda/support``), whose patterns serve both languages; this module gives it
HIP's vocabulary, so that a HIP user reads about pytest-r3's HIP build, the HIP host API,
``<hip/hip_fp16.h>`` and docs/hip.md, and sees ROCm's libraries named as such (hipCUB,
rocPRIM, rocRAND, HIP's cooperative groups) rather than as unknown headers.
"""

from __future__ import annotations

from ..cuda.support import Vocabulary

DOCS = "docs/hip.md (section 'What HIP is supported')"

HIP = Vocabulary(
    build="pytest-r3's HIP build", page="docs/hip.md",
    docs=DOCS, host_api="the HIP host API", host_names=r"hip[A-Z]\w*|HIP_\w+",
    half_header="<hip/hip_fp16.h>", intrinsic="the HIP intrinsic", vendor="HIP",
    device_code="code object",
    vendor_headers=r"hip/[\w/.]*|hip_[\w.]*|amd_[\w/.]*",
    libraries=(
        (r"hip/hip_cooperative_groups\.h|hip/amd_detail/amd_hip_cooperative_groups\.h",
         "HIP's cooperative groups"),
        (r"hipcub/.*", "hipCUB"),
        (r"rocprim/.*", "rocPRIM"),
        (r"rocrand/.*|hiprand/.*", "the rocRAND/hipRAND device API"),
        (r"rocwmma/.*", "wave matrix multiply (rocWMMA)"),
        (r"(?:roc|hip)(?:blas|blaslt|fft|sparse|solver)/.*|(?:roc|hip)(?:blas|fft|sparse)\.h"
         r"|miopen/.*", "ROCm's host libraries"),
    ))
