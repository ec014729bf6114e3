"""What CUDA C pytest-r3's clang build does not provide, said in one line.

clang compiles kernels against pytest-r3's own device headers (``pytest_r3/include``), not
CUDA's. When a kernel reaches for something those headers lack (cooperative groups, CUB, a
texture fetch, ``std::vector``), clang's own message is precise but misleading ("did you
mean 'float'?"). This module recognises those cases in clang's diagnostics and says instead
what is missing, that it is not supported, and where the list of what is supported lives.
Any other compile error keeps clang's first error line, without the long clang command
(which stays on ``CompileError.command``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...errors import CompileError
from .toolchain import INSTANCE_FILE

DOCS = "docs/cuda.md (section 'What CUDA C is supported')"


@dataclass(frozen=True)
class Vocabulary:
    """The words of a GPU language's one-line errors: the HIP backend extends the CUDA one,
    and its users read about hipcc's build, HIP's host API and docs/hip.md, not CUDA's."""

    build: str  # "pytest-r3's CUDA build"
    page: str  # "docs/cuda.md": the language's page
    docs: str  # where on it the supported subset is written down
    host_api: str  # "the CUDA host API"
    host_names: str  # a regular expression for the names of that API
    half_header: str  # the include that declares __half
    intrinsic: str  # "the CUDA intrinsic"
    vendor_headers: str  # a regular expression for the language's own headers
    vendor: str  # "CUDA": "the CUDA header <...>"
    device_code: str  # what the device build makes: "PTX"
    libraries: tuple[tuple[str, str], ...] = ()  # the language's own library headers


CUDA = Vocabulary(
    build="pytest-r3's CUDA build", page="docs/cuda.md", docs=DOCS, host_api="the CUDA host API",
    host_names=r"cuda[A-Z]\w*|CUDA_\w+|cu[A-Z]\w*", half_header="<cuda_fp16.h>",
    intrinsic="the CUDA intrinsic", vendor="CUDA", device_code="PTX",
    vendor_headers=r"(?:cuda|cu|sm_|device_|nv|crt/)[\w/.]*|\w+_functions\.h")

# headers of CUDA libraries and features the device headers do not provide
_LIBRARY_HEADERS = [
    (r"cooperative_groups(?:\.h|/.*)", "cooperative groups"),
    (r"cub/.*|cub\.cuh", "CUB"),
    (r"thrust/.*", "Thrust"),
    (r"cuda/.*", "libcu++ (the cuda:: library)"),
    (r"mma\.h|crt/mma\.h", "warp matrix multiply (WMMA, nvcuda::wmma)"),
    (r"cuda_fp8\.h|cuda_fp8\.hpp|cuda_fp6\.h|cuda_fp4\.h", "fp8/fp6/fp4 types"),
    (r"cuda_pipeline.*\.h|cuda_awbarrier.*\.h", "asynchronous copies (memcpy_async, pipelines)"),
    (r"curand.*\.h", "the cuRAND device API"),
    (r"cufft.*\.h|cublas.*\.h|cusparse.*\.h|cudnn.*\.h", "CUDA's host libraries"),
    (r"texture_.*\.h|surface_.*\.h|texture_fetch_functions\.h", "textures and surfaces"),
]
# undeclared names: what they belong to
_LIBRARY_NAMES = [
    (r"this_grid|grid_group|this_multi_grid|multi_grid_group",
     "grid-wide and multi-grid cooperative groups"),
    (r"coalesced_threads|coalesced_group|thread_group|binary_partition|labeled_partition"
     r"|memcpy_async|wait|wait_prior|inclusive_scan|exclusive_scan|invoke_one\w*",
     "cooperative groups beyond block tiles (see the supported subset)"),
    (r"cooperative_groups|cg|this_thread_block|tiled_partition"
     r"|thread_block(?:_tile)?", "cooperative groups"),
    (r"cub", "CUB"),
    (r"thrust", "Thrust"),
    (r"nvcuda|wmma|fragment|load_matrix_sync|store_matrix_sync|mma_sync",
     "warp matrix multiply (WMMA, nvcuda::wmma)"),
    (r"__nv_bfloat16\w*|nv_bfloat16\w*|__float2bfloat16\w*|__bfloat162\w*",
     "bfloat16 without #include <cuda_bf16.h>"),
    (r"__half\w*|half2?|__float2half\w*|__half2float",
     "half precision without #include {half_header}"),
    (r"__nv_fp8\w*", "fp8 types"),
    (r"(?:tex|surf)(?:1D|2D|3D|Cubemap)\w*|tex1Dfetch|cudaTextureObject_t"
     r"|cudaSurfaceObject_t|texture|surface",
     "textures and surfaces"),
    (r"__pipeline_\w+|memcpy_async|__cvta_\w+", "asynchronous copies (memcpy_async, pipelines)"),
    (r"curand\w*", "the cuRAND device API"),
    (r"malloc|free|new|delete", "dynamic allocation in device code"),
]
_CXX_HEADER = re.compile(r"[a-z_]+")  # <vector>, <algorithm>, <type_traits>...
TOOLKIT_DOCS = "docs/cuda.md (section 'With an installed CUDA toolkit')"
# the parts of the toolkit's CCCL whose host side needs CUDA's whole runtime API: the first
# error they meet is deep inside them, so the line names the header the file included
_HOST_SIDE_CCCL = re.compile(r"(?:.*/)?(?P<header>(?:thrust/.+|cub/cub\.cuh"
                             r"|cub/(?:device|dispatch|agent|grid)/.+"
                             r"|cub/util_(?:allocator|device)\.cuh))")
_INCLUDED_FROM = re.compile(r"^In file included from (?P<file>.+):(?P<line>\d+):$")
_FIRST_ERROR = re.compile(r"^(?P<file>[^\n]+?):\d+:\d+: (?:fatal )?error: ", re.MULTILINE)

_NOT_FOUND = re.compile(r"^(?P<where>[^\n]*?:\d+):\d+: fatal error: '(?P<header>[^']+)' "
                        r"file not found", re.MULTILINE)
_UNDECLARED = re.compile(
    r"^(?P<where>[^\n]*?:\d+):\d+: error: (?:use of undeclared identifier|unknown type name"
    r"|no template named|use of undeclared label|unknown namespace) '(?P<name>[\w:]+)'",
    re.MULTILINE)
_NO_GROUPS_MEMBER = re.compile(
    r"^(?P<where>[^\n]*?:\d+):\d+: error: no (?:member|type|template) named '(?P<name>\w+)' "
    r"in (?:namespace 'cooperative_groups'|'cooperative_groups::[^']*')", re.MULTILINE)
_NO_STD_MEMBER = re.compile(
    r"^(?P<where>[^\n]*?:\d+):\d+: error: no (?:member|type|template) named '(?P<name>\w+)' "
    r"in namespace 'std'", re.MULTILINE)
_NO_OVERLOAD = re.compile(
    r"^(?P<where>[^\n]*?:\d+):\d+: error: no matching function for call to "
    r"'(?P<name>(?:atomic|__|cuda[A-Z]|hip[A-Z])\w+)'", re.MULTILINE)
# host code reached from device code: the standard library's host side, the runtime API
_HOST_IN_DEVICE = re.compile(
    r"^(?P<where>[^\n]*?:\d+):\d+: error: (?:reference to __host__ (?:variable|function) "
    r"'(?P<name>\w+)' in __(?:global|device)__ function|implicit instantiation of undefined "
    r"template 'std::(?P<template>\w+))", re.MULTILINE)


def explain(error: CompileError, filename: str,
            vocabulary: Vocabulary = CUDA) -> CompileError:
    """``error`` (clang's, on a CUDA or HIP kernel) as a one-line "not supported" error
    when the kernel uses something pytest-r3's device headers do not provide, in the words
    of ``vocabulary``; otherwise clang's first error line and its diagnostics, without the
    command line."""
    if error.kind != "compile_error":  # a rewrite's forbidden include says it already
        return error
    diagnostics = error.diagnostics or str(error)
    instance = re.search(rf"^{re.escape(INSTANCE_FILE)}:\d+:\d+: error: (.*)$\n.*&(.+?); }}",
                         diagnostics, re.MULTILINE)
    if instance:
        message = (f"{filename}: entry {instance[2]!r} is not a template instance of a kernel "
                   f"in the file ({instance[1]}); check entry= and the template's arguments")
        return CompileError(message, f"{message}\n{diagnostics}", error.command, error.kind)
    line = unsupported(diagnostics, vocabulary)
    if line is None:
        first = next((text for text in diagnostics.splitlines() if "error" in text),
                     diagnostics.splitlines()[0] if diagnostics else "clang failed")
        message = f"clang could not compile {filename}: {first}\n\n{diagnostics}"
        return CompileError(message, diagnostics, error.command, error.kind)
    return CompileError(line, f"{line}\n{diagnostics}", error.command, error.kind)


_GRID_GROUPS = re.compile(r"\b(this_grid|grid_group|this_multi_grid|multi_grid_group)\b")
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)


def grid_groups(text: str, filename: str) -> CompileError | None:
    """The one-line error for grid-wide or multi-grid cooperative groups in ``text`` (the
    entry's code, cut to what it reaches), or None. A toolkit's <cooperative_groups.h>
    declares them, but they need a cooperative launch, which pytest-r3 never makes: on the
    GPU, such a kernel would hang or fail at run time instead."""
    code = _COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text)
    match = _GRID_GROUPS.search(code)
    if match is None:
        return None
    line, where = code.count("\n", 0, match.start()) + 1, filename
    for marker in re.finditer(r'^#line (\d+) "([^"]*)"', code[:match.start()], re.MULTILINE):
        # inlined headers keep their own names and lines: count from the last marker
        line = int(marker[1]) + code.count("\n", marker.end(), match.start()) - 1
        where = marker[2]
    message = (f"{where}:{line}: '{match[1]}' (grid-wide and multi-grid cooperative groups) "
               f"is not supported by pytest-r3's CUDA build; see {DOCS} for what is")
    return CompileError(message, message)


def unsupported(diagnostics: str, vocabulary: Vocabulary = CUDA) -> str | None:
    """The one-line explanation of the first use of something not provided, or None."""
    host_side = host_side_library(diagnostics)
    if host_side is not None:
        return host_side
    candidates = []
    for match in _NOT_FOUND.finditer(diagnostics):
        what = _header_feature(match["header"], vocabulary)
        if what:
            candidates.append((match.start(), match["where"], what))
    for match in _UNDECLARED.finditer(diagnostics):
        what = _name_feature(match["name"], vocabulary)
        if what:
            candidates.append((match.start(), match["where"], what))
    for match in _NO_GROUPS_MEMBER.finditer(diagnostics):
        what = _name_feature(match["name"], vocabulary) or "this part of cooperative groups"
        if not what.startswith("'"):
            what = f"'{match['name']}' ({what})"
        candidates.append((match.start(), match["where"], what))
    for match in _NO_STD_MEMBER.finditer(diagnostics):
        candidates.append((match.start(), match["where"],
                           f"std::{match['name']} (device code gets the C library parts of "
                           "<cmath>, <cstdint>, <cstdio>... only)"))
    for match in _NO_OVERLOAD.finditer(diagnostics):
        host = re.fullmatch(vocabulary.host_names, match["name"])
        candidates.append((match.start(), match["where"],
                           f"'{match['name']}' ({vocabulary.host_api}) in device code or with "
                           "these arguments" if host
                           else f"{match['name']} with these argument types"))
    for match in _HOST_IN_DEVICE.finditer(diagnostics):
        name = match["name"] or f"std::{match['template'].removeprefix('basic_')}"
        candidates.append((match.start(), match["where"],
                           f"'{name}' (host code: the C++ standard library's host side or "
                           f"{vocabulary.host_api}) in device code"))
    if not candidates:
        return None
    _, where, what = min(candidates)
    return (f"{where}: {what} is not supported by {vocabulary.build}; see {vocabulary.docs} "
            "for what is")


def host_side_library(diagnostics: str) -> str | None:
    """The one line for a file that includes <cub/cub.cuh>, device-wide CUB or Thrust
    (under a CUDA toolkit's headers) when clang's first error is inside it, or None: those
    headers' host side needs CUDA's runtime API, which the device build does not declare
    in full, so a kernel beside them cannot build however plain it is."""
    first = _FIRST_ERROR.search(diagnostics)
    if first is None:
        return None
    chain = []  # the "In file included from" lines just above the first error, outermost first
    for line in reversed(diagnostics[:first.start()].splitlines()):
        match = _INCLUDED_FROM.match(line)
        if match is None:
            break
        chain.insert(0, match)
    if not chain:
        return None
    included = chain[1]["file"] if len(chain) > 1 else first["file"]
    header = _HOST_SIDE_CCCL.fullmatch(included.replace("\\", "/"))
    if header is None:
        return None
    name = header["header"]
    library = "Thrust" if name.startswith("thrust/") else \
        "all of CUB, device-wide algorithms included" if name == "cub/cub.cuh" else \
        "CUB's device-wide algorithms"
    return (f"{chain[0]['file']}:{chain[0]['line']}: <{name}> ({library}) needs "
            "CUDA's runtime API, which pytest-r3's CUDA build does not provide, so no kernel "
            "of this file builds; include only the CUB block and warp headers kernels use "
            "(<cub/block/...>, <cub/warp/...>), or keep the host code that needs it in "
            f"another file; see {TOOLKIT_DOCS}")


def _header_feature(header: str, vocabulary: Vocabulary) -> str | None:
    for pattern, what in (*vocabulary.libraries, *_LIBRARY_HEADERS):
        if re.fullmatch(pattern, header):
            return f"{what} (<{header}>)"
    if re.fullmatch(vocabulary.vendor_headers, header):
        return f"the {vocabulary.vendor} header <{header}>"
    if re.fullmatch(CUDA.vendor_headers, header):
        return f"the CUDA header <{header}>"
    if _CXX_HEADER.fullmatch(header):
        return f"the C++ standard library header <{header}>"
    return None  # the kernel's own header: clang's message says it best


def _name_feature(name: str, vocabulary: Vocabulary) -> str | None:
    head = name.split("::", 1)[0]
    for pattern, what in _LIBRARY_NAMES:
        if re.fullmatch(pattern, head):
            return f"'{name}' ({what.format(half_header=vocabulary.half_header)})"
    if re.fullmatch(vocabulary.host_names, head):
        return (f"'{name}' ({vocabulary.host_api}, which pytest-r3 declares for the host code "
                "beside kernels; not this name)")
    if head.startswith("__"):  # reserved names: an intrinsic the headers lack
        return f"{vocabulary.intrinsic} '{name}'"
    return None
