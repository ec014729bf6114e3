"""What clang may read, and say, when the source is a candidate's rewrite (untrusted text).

Real clang (the ziglang wheel's) throughout. A rewrite that names another file is refused
before clang runs; one that reaches a file by a way the text check cannot see still finds
nothing, because clang runs in a file system showing only the kernel's and the toolchain's
header folders; and whatever clang says comes back with no other file's text and no local
path in it.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
import textwrap
import uuid
from pathlib import Path

import pytest

import pytest_r3 as r3
from pytest_r3.backends import clang as toolchain
from pytest_r3.backends import get_backend
from pytest_r3.backends.cuda import CUDABackend
from pytest_r3.model.source import KernelSource

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "example_project" / "exampleproj"
ABSOLUTE_PATH = re.compile(r"(?:^|[\s'\"`(<=:])/[\w.@+-]+/")


@pytest.fixture
def secret(tmp_path):
    """A header-named file outside the kernel's folder, holding a token that must not leak."""
    token = f"r3-secret-{uuid.uuid4().hex}"
    path = tmp_path / "outside" / "secret.h"
    path.parent.mkdir()
    path.write_text(f"#define SECRET_VALUE 1\nstatic const char leaked[] = \"{token}\";\n")
    return path, token


@pytest.fixture
def kernel_dir(tmp_path):
    folder = tmp_path / "kernels"
    folder.mkdir()
    (folder / "helpers.h").write_text("#define TWICE(v) (2.0f * (v))\n"
                                      "#define PLUS_Q(v) ((v) + q)\n")
    return folder


class CountingRun:
    """Wraps subprocess.run, counting the clang runs."""

    def __init__(self, real):
        self.real = real
        self.calls = 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.real(*args, **kwargs)


def compile_candidate(text: str, folder: Path, **options) -> str:
    return toolchain.compile_to_ir(textwrap.dedent(text), filename=str(folder / "k.c"),
                                   include_dirs=(str(folder),), untrusted=True, **options)


def assert_clean(text: str, token: str = "") -> None:
    assert not ABSOLUTE_PATH.search(text), ABSOLUTE_PATH.search(text).group(0)
    if token:
        assert token not in text


# -- refused before clang runs ---------------------------------------------------------------
REFUSED = {
    "absolute include": ('#include "/etc/hostname"\n', 1, "absolute path"),
    "proc environ": ('int x;\n#include "/proc/self/environ"\n', 2, "absolute path"),
    "angle absolute": ("#include </etc/passwd>\n", 1, "absolute path"),
    "dot dot": ('\n\n#include "../../../../etc/hostname.h"\n', 3, "'..'"),
    "dot dot inside": ('#include "sub/../../x.h"\n', 1, "'..'"),
    "include_next": ('#include_next "/etc/hostname"\n', 1, "absolute path"),
    "import": ('#import "/etc/hostname"\n', 1, "absolute path"),
    "computed include": ('#define F "/etc/hostname"\n#include F\n', 2, "computed"),
    "not a header": ('#include ".env"\n', 1, "not a header"),
    "extension-less local file": ('#include "id_rsa"\n', 1, "not a header"),
    "embed": ("static const char s[] = {\n#embed \"data.h\"\n};\n", 2, "#embed"),
    "has_embed": ("#if __has_embed(\"x.h\")\n#endif\n", 1, "__has_embed"),
    "has_include of an absolute path": ('#if __has_include("/etc/hostname")\n#endif\n', 1,
                                        "absolute path"),
    "has_include computed": ("#define F <x.h>\n#if __has_include(F)\n#endif\n", 2, "literally"),
    "pragma dependency": ('#pragma GCC dependency "/etc/hostname"\n', 1, "pragma"),
    "_Pragma dependency": ('_Pragma("clang dependency \\"x.h\\"")\n', 1, "pragma"),
    "pragma through a macro": ('#define P(x) _Pragma(#x)\nP(GCC dependency "x.h")\n', 1,
                               "_Pragma must be given a string literal"),
    "pragma words for the kernel's macro": ('R3_PRAGMA(GCC dependency "x.h")\n', 1, "pragma"),
    "debug pragma": ("#pragma clang __debug crash\n", 1, "pragma"),
    "line directive": ('#line 7 "/etc/hostname"\n', 1, "#line"),
    "line marker": ('# 7 "/etc/hostname"\n', 1, "#line"),
    "line splice": ('#inc\\\nlude "/etc/hostname"\n', 1, "absolute path"),
    "comment inside the directive": ('# /* hidden */ include "/etc/hostname"\n', 1,
                                     "absolute path"),
    "digraph": ('%:include "/etc/hostname"\n', 1, "absolute path"),
    "trigraph": ('??=include "/etc/hostname"\n', 1, "absolute path"),
    "hidden by a misread comment": ('const char *s = R"(" /*)";\n#include "/etc/hostname"\n'
                                    "// */\n", 2, "absolute path"),
    "null character": ('#\0include "/etc/hostname"\n', 1, "control character"),
}


@pytest.mark.parametrize("text, line, words", REFUSED.values(), ids=REFUSED.keys())
def test_reaching_for_other_files_is_refused_before_clang_runs(text, line, words, kernel_dir,
                                                               monkeypatch):
    toolchain.find_clang()
    counter = CountingRun(subprocess.run)
    monkeypatch.setattr(subprocess, "run", counter)
    with pytest.raises(r3.CompileError) as excinfo:
        compile_candidate(text, kernel_dir)
    error = excinfo.value
    assert counter.calls == 0
    assert error.kind == "forbidden_include"
    assert str(error).startswith(f"k.c: line {line}: ")
    assert words in str(error)
    assert error.diagnostics == str(error)
    assert error.command == []
    assert_clean(str(error))


def test_refusal_says_how_to_fix_it():
    with pytest.raises(r3.CompileError) as excinfo:
        toolchain.check_candidate_includes('int a;\nint b;\n#include "/x/y.h"\n', "/src/k.c")
    assert str(excinfo.value) == ("k.c: line 3: #include of an absolute path is not allowed in "
                                  "a rewrite; include the kernel's own headers by name")


def test_the_kernels_own_and_the_toolchains_headers_are_fine(kernel_dir):
    ir = compile_candidate("""
        #include "helpers.h"
        #include <helpers.h>
        #include <math.h>
        #include <stdlib.h>
        #include <string.h>
        #if __has_include("helpers.h") && __has_include(<math.h>)
        #define FOUND 1
        #endif
        _Pragma("GCC diagnostic ignored \\"-Wunused\\"")
        void k(long n, float *x)
        {
            #pragma clang loop vectorize_width(4)
            for (long i = 0; i < n; ++i) x[i] = TWICE(sqrtf(x[i]));
        }
    """, kernel_dir)
    assert re.search(r"^define .*@k\(", ir, re.MULTILINE)


@pytest.mark.parametrize("path", sorted((EXAMPLES / "kernels").glob("*.c")), ids=lambda p: p.name)
def test_example_kernels_compile_the_same_as_untrusted_text(path):
    backend = get_backend("cpu")
    source = KernelSource(path.read_text(), str(path), include_dirs=(str(path.parent),))
    macros = {"UNROLL": 4, "VECTOR_WIDTH": 8}
    trusted = backend.compile(source, macros)
    untrusted = backend.compile(source.candidate(source.text), macros)
    assert untrusted == trusted


@pytest.mark.parametrize("path", sorted((EXAMPLES / "cuda").glob("*.cu")), ids=lambda p: p.name)
def test_cuda_examples_compile_as_untrusted_text(path):
    backend = CUDABackend("sm_80")
    source = KernelSource(path.read_text(), str(path), include_dirs=(str(path.parent),))
    assert backend.compile(source.candidate(source.text), {}) == backend.compile(source, {})


# -- the file system clang sees ---------------------------------------------------------------
def test_a_file_reached_without_naming_it_is_not_there(secret, kernel_dir):
    """Token pasting hides __has_include from the text check; the file is still invisible."""
    path, _ = secret
    probe = f"""
        #define CAT(a, b) a##b
        #if CAT(__has_, include)("{path}")
        int found = 1;
        #else
        int found = 0;
        #endif
    """
    trusted = toolchain.compile_to_ir(textwrap.dedent(probe), filename="probe.c")
    assert "@found = dso_local global i32 1" in trusted
    assert "@found = dso_local global i32 0" in compile_candidate(probe, kernel_dir)


def test_a_name_relative_to_the_working_directory_finds_nothing_in_either_build(kernel_dir,
                                                                             tmp_path,
                                                                             monkeypatch):
    """A rewrite's ``__has_include`` of a path from the working directory (the project
    root, where ``exampleproj/kernels/pragmas.h`` lies) answered 0 in the judge's build
    and 1 in the user's: both now run clang from an empty folder, so they agree."""
    (tmp_path / "pkg" / "kernels").mkdir(parents=True)
    (tmp_path / "pkg" / "kernels" / "there.h").write_text("#define THERE 1\n")
    monkeypatch.chdir(tmp_path)
    probe = """
        #if __has_include("pkg/kernels/there.h")
        int found = 1;
        #else
        int found = 0;
        #endif
    """
    trusted = toolchain.compile_to_ir(textwrap.dedent(probe), filename="probe.c")
    assert "@found = dso_local global i32 0" in trusted
    assert "@found = dso_local global i32 0" in compile_candidate(probe, kernel_dir)


def test_has_embed_spelled_by_token_pasting_is_refused(kernel_dir):
    """A file's contents could steer a rewrite's build where its existence alone cannot be
    hidden (the user's build sees the whole disk): __has_embed is poisoned in every
    candidate build, so a pasted one is refused, naming its line."""
    probe = """
        #define CAT(a, b) a##b

        #if CAT(__has_, embed)("helpers.h" clang::offset(1)) == 1
        int found = 1;
        #endif
    """
    with pytest.raises(r3.CompileError) as excinfo:
        compile_candidate(probe, kernel_dir)
    assert excinfo.value.kind == "forbidden_include"
    assert "line 4: __has_embed is not allowed in a rewrite, however it is spelled" in \
        str(excinfo.value)


def test_relative_names_do_not_reach_the_working_directory_or_root(secret, kernel_dir,
                                                                   monkeypatch):
    path, token = secret
    monkeypatch.chdir(path.parent)
    with pytest.raises(r3.CompileError, match="'secret.h' file not found"):
        # a kernel's own build does not search the working directory either (clang alone
        # would): what a build finds cannot depend on where the process was started
        toolchain.compile_to_ir('#include "secret.h"\nint v = SECRET_VALUE;\n',
                                filename="probe.c")
    for name in ("secret.h", str(path).lstrip("/")):
        with pytest.raises(r3.CompileError) as excinfo:
            compile_candidate(f'#include "{name}"\nint v = SECRET_VALUE;\n', kernel_dir)
        assert f"'{name}' file not found" in excinfo.value.diagnostics
        assert_clean(str(excinfo.value), token)


def test_include_search_variables_are_not_honoured(secret, kernel_dir, monkeypatch):
    path, token = secret
    monkeypatch.setenv("CPATH", str(path.parent))
    monkeypatch.setenv("C_INCLUDE_PATH", str(path.parent))
    monkeypatch.setenv("CCC_OVERRIDE_OPTIONS", f"+-I{path.parent}")
    for name in ("secret.h", str(path).lstrip("/")):  # nor does the jail show that folder
        with pytest.raises(r3.CompileError) as excinfo:
            compile_candidate(f'#include "{name}"\n', kernel_dir)
        assert "file not found" in excinfo.value.diagnostics
        assert_clean(str(excinfo.value), token)


def test_untrusted_compile_writes_no_files(kernel_dir, tmp_path, monkeypatch):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    compile_candidate(f"/* {uuid.uuid4()} */ void k(float *x) {{ x[0] = 1; }}\n", kernel_dir)
    with pytest.raises(r3.CompileError):
        compile_candidate("#pragma clang loop bogus\nvoid k(float *x) { x[0] = ; }\n",
                          kernel_dir)
    assert list(scratch.iterdir()) == []


# -- what clang says ----------------------------------------------------------------------------
def test_candidate_errors_keep_its_own_lines_and_drop_the_command(kernel_dir):
    with pytest.raises(r3.CompileError) as excinfo:
        compile_candidate('#include "helpers.h"\nvoid k(float *x)\n{\n'
                          '    x[0] = PLUS_Q(x[1]);\n}\n', kernel_dir)
    error = excinfo.value
    assert error.kind == "compile_error"
    assert error.command == []
    assert str(error).splitlines()[0].startswith("clang could not compile the rewrite (k.c): "
                                                 "k.c:4:")
    assert re.search(r"^k\.c:4:\d+: error: use of undeclared identifier 'q'$",
                     error.diagnostics, re.MULTILINE)
    assert "    4 |     x[0] = PLUS_Q(x[1]);" in error.diagnostics  # its own line, quoted
    # the macro's header by short name, with clang's note, but not the header's text
    assert "<kernel>/helpers.h:2:26: note: expanded from macro 'PLUS_Q'" in error.diagnostics
    assert "((v) + q)" not in error.diagnostics
    assert "-isystem" not in str(error) and "command" not in str(error)
    assert_clean(str(error))


def test_sanitised_diagnostics_of_a_real_leak_keep_no_other_file(secret):
    """What clang prints when a trusted compile includes the file, cut down."""
    path, token = secret
    path.write_text(f"{token} is not C;\n")
    with pytest.raises(r3.CompileError) as excinfo:
        toolchain.compile_to_ir(f'int a = 1;\n#include "{path}"\nint b = ;\n',
                                filename="/home/someone/project/k.c")
    raw = excinfo.value.diagnostics
    assert token in raw and str(path) in raw  # what the model must never see
    clean = toolchain.sanitize_diagnostics(raw, "/home/someone/project/k.c")
    assert_clean(clean, token)
    assert "In file included from k.c:2:" in clean  # where the candidate included it
    assert "<another file>: error: (not shown" in clean
    assert "k.c:3:9: error: expected expression" in clean
    assert "    3 | int b = ;" in clean
    assert re.search(r"^\d+ errors? generated\.$", clean, re.MULTILINE)


def test_sanitise_shortens_known_folders_and_hides_other_paths():
    clang = toolchain.find_clang()
    header = next(v for o, v in zip(clang.system_flags, clang.system_flags[1:])
                  if o == "-isystem")
    stderr = "\n".join([
        "In file included from /work/kernels/k.c:1:",
        f"{header}/stdlib.h:5:3: note: declared here",
        "    5 | extern int system(const char *);",
        "/work/kernels/pragmas.h:2:9: note: expanded from macro 'P'",
        "    2 | #define P secret stuff",
        "/work/kernels/k.c:3:1: error: cannot open '/var/lib/data/x.bin'",
        "    3 | P",
        "      | ^",
        "PLEASE submit a bug report to https://github.com/llvm/llvm-project/issues/",
        " #0 0x000055 llvm::sys::PrintStackTrace /usr/src/llvm/lib/Support/Unix.inc:723",
        "1 error generated.",
    ])
    clean = toolchain.sanitize_diagnostics(stderr, "/work/kernels/k.c",
                                           include_dirs=["/work/kernels"])
    assert clean.splitlines() == [
        "In file included from k.c:1:",
        "<toolchain>/stdlib.h:5:3: note: declared here",
        "<kernel>/pragmas.h:2:9: note: expanded from macro 'P'",
        "k.c:3:1: error: cannot open '<path>'",
        "    3 | P",
        "      | ^",
        "1 error generated.",
    ]
