"""``pytest-r3``: work outside a test run: list recordings, replay a variant, build a kernel,
record an application's launches, look at or clear the compiled-code cache.

Exit status: 0 when the command did its work (``replay``: the variant passed; ``build``: it
compiled, and ptxas accepted it where installed), 1 only when ``replay`` rejected the variant,
``build`` could not compile it (or ``recordings`` or ``record`` found none; ``record`` passes
on a failing command's own status), 2 for a usage error, a state
that cannot be used, or any other error (one line on stderr, never a traceback unless
``PYTEST_R3_DEBUG=1``), 130 when interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import traceback
import warnings
from pathlib import Path

from . import settings as options
from .errors import CompileError, R3Error, R3Warning

OK, REJECTED, ERROR, INTERRUPTED = 0, 1, 2, 130


def _assignments(pairs: list[str], what: str) -> dict[str, object]:
    values: dict[str, object] = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep or not name:
            raise R3Error(f"{what} {pair!r} must look like NAME=VALUE")  # exit code 2
        try:
            values[name] = json.loads(text)
        except ValueError:
            values[name] = text
    return values


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pytest-r3", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    listing = commands.add_parser("recordings", help="list recorded kernels and recordings")
    options.add_to_argparse(listing, ["r3_dir"])
    replay = commands.add_parser("replay", help="evaluate a variant on a kernel's recordings")
    replay.add_argument("kernel")
    replay.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="tunable macro value (repeatable)")
    replay.add_argument("--pipeline", action="append", default=[], metavar="NAME=VALUE",
                        help="pipeline setting, e.g. level=2 or loop_vectorize=false")
    replay.add_argument("--source", metavar="FILE", help="replace the kernel source by FILE")
    replay.add_argument("--recording", action="append", default=[], metavar="KEY",
                        help="replay only this recording (repeatable)")
    replay.add_argument("--json", action="store_true", help="print the result as JSON")
    replay.add_argument("--probes", action="store_true",
                        help="also time a variant that is faster on the slow-path probes "
                        "(misaligned outputs, zero inputs, rows of one array), as a claim's "
                        "confirmation does, and print each probe's verdict")
    options.add_to_argparse(replay, ["r3_dir", "r3_run_timeout"])
    build = commands.add_parser(
        "build", help="compile a declared kernel (or a variant) and show what it became",
        description="Find the kernels the project's tests declare (as `pytest --r3-list` "
        "does), compile KERNEL, write its IR and PTX or assembly under <r3-dir>/build/ and "
        "print registers, spills and shared memory (ptxas), beside nvcc's where installed.")
    build.add_argument("kernel")
    build.add_argument("paths", nargs="*", metavar="PYTEST_ARG",
                       help="test paths or pytest options to collect (default: as pytest)")
    build.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                       help="tunable macro value (repeatable)")
    build.add_argument("--pipeline", action="append", default=[], metavar="SETTINGS",
                       help="pipeline settings: NAME=VALUE (repeatable), a JSON object, or a "
                       "JSON file")
    build.add_argument("--source", metavar="FILE", help="replace the kernel source by FILE")
    build.add_argument("--target", metavar="ARCH",
                       help="GPU architecture of a CUDA kernel, e.g. sm_90 (default: "
                       "$PYTEST_R3_CUDA_ARCH, the GPU's, else sm_80), or of a HIP kernel: "
                       "gfx90a, gfx942 (default: $PYTEST_R3_HIP_ARCH, the GPU's, else "
                       "gfx942)")
    build.add_argument("--json", action="store_true", help="print the result as JSON")
    _add_record_command(commands)
    cache = commands.add_parser(
        "cache", help="the compiled-code cache: where it is, how large; clear it",
        description="Compiled kernels are kept on disk between runs (docs/cache.md): "
        "$PYTEST_R3_CACHE_DIR, else $XDG_CACHE_HOME/pytest-r3, else ~/.cache/pytest-r3.")
    cache.add_argument("action", choices=["info", "clear"])
    cache.add_argument("--json", action="store_true", help="print `info` as JSON")
    return parser


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """pytest-r3's warnings as one line each, without Python's source excerpt."""
    if issubclass(category, R3Warning):
        text = str(message)
        print(text if text.startswith("pytest-r3") else f"pytest-r3: warning: {text}",
              file=sys.stderr)
    else:
        print(warnings.formatwarning(message, category, filename, lineno, line),
              file=sys.stderr, end="")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)  # a usage error exits 2 from argparse
    saved = warnings.showwarning
    warnings.showwarning = _show_warning
    try:
        if args.command == "recordings":
            return _list(Path(args.r3_dir))
        if args.command == "build":
            return _build(args)
        if args.command == "record":
            return _record(args)
        if args.command == "cache":
            return _cache(args)
        from .replay.interrupt import stop_on_ctrl_c

        with stop_on_ctrl_c():  # Ctrl-C kills the worker instead of waiting for it
            return _replay(args)
    except R3Error as exc:
        if isinstance(exc, CompileError) and args.command == "build":  # its verdict
            print(f"pytest-r3: {_one_paragraph(exc)}", file=sys.stderr)
            return REJECTED
        print(f"pytest-r3: {' '.join(str(exc).split())}", file=sys.stderr)
        return ERROR
    except KeyboardInterrupt:
        print("pytest-r3: interrupted", file=sys.stderr)
        return INTERRUPTED
    except Exception as exc:  # a bug or an unforeseen state: still an error, not a verdict
        if os.environ.get("PYTEST_R3_DEBUG"):
            traceback.print_exc()
        first = (str(exc).splitlines() or [""])[0]
        print(f"pytest-r3: internal error: {type(exc).__name__}: {first} (set "
              "PYTEST_R3_DEBUG=1 for the traceback)", file=sys.stderr)
        return ERROR
    finally:
        warnings.showwarning = saved


def _list(r3_dir: Path) -> int:
    from .record.store import RecordingStore

    store = RecordingStore(r3_dir / "recordings")
    kernels = store.kernels()
    if not kernels:
        print(f"no recordings under {store.root}; run `pytest --r3-record` first")
        return REJECTED  # documented: nothing to list
    for kernel in kernels:
        index = store.index(kernel) or {}
        weak = set(index.get("weak", []))
        print(f"{kernel}:")
        for recording in store.load_all(kernel):  # unreadable ones: skipped, named
            meta = recording.metadata()
            shapes = ", ".join(f"{n}{tuple(a['shape'])}" for n, a in meta["arrays"].items())
            role = f"  [workload x{recording.weight:g}]" if recording.is_workload else ""
            print(f"  {recording.key}  {meta['nbytes'] / 1024:9.1f} KiB  {shapes}"
                  f"{'  [weak]' if recording.key in weak else ''}{role}  "
                  f"{', '.join(meta['tests'])}")
    return OK


def _replay(args: argparse.Namespace) -> int:
    from .model.pipeline import Pipeline
    from .record.store import RecordingStore
    from .replay import Candidate, ReplaySettings
    from .replay.manual import probe_verdicts, replay

    # first: collecting runs pytest, which resets the warnings shown once below
    tolerance = _declared_tolerance(args.kernel)
    store = RecordingStore(Path(args.r3_dir) / "recordings")
    # a spec file that cannot be read is named (CorruptRecording), not a JSON traceback
    if store.spec(args.kernel) is not None and not store.keys(args.kernel):
        raise R3Error(f"kernel {args.kernel!r} has no usable recording under "
                      f"{store.kernel_dir(args.kernel)}; record again with "
                      "`pytest --r3-record`")
    pipeline = _assignments(args.pipeline, "--pipeline")
    Pipeline.from_mapping(pipeline, where="--pipeline: ")  # a usage error, not a worker error
    candidate = Candidate(macros=_assignments(args.set, "--set"), pipeline=pipeline,
                          label="command line")
    if args.source:
        _source_text(args.source)  # a usage error here, not a worker's
    result = replay(args.kernel, candidate, r3_dir=args.r3_dir,
                    recordings=args.recording or None, source_file=args.source,
                    settings=ReplaySettings(run_timeout=args.r3_run_timeout,
                                            probes=args.probes),
                    tolerance=tolerance)
    if args.json:
        print(json.dumps(result.as_dict(), indent=2))
    else:
        print(f"{args.kernel}: {result.summary()}")
        for line in probe_verdicts(result) if args.probes else ():
            print(f"  {line}")
    return OK if result.ok else REJECTED


def _source_text(path: str) -> str:
    """The text of a ``--source`` file, or a usage error that names it."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise R3Error(f"--source {path}: no such file; give the path of the rewritten "
                      "kernel source (relative to the current folder)") from None
    except (OSError, UnicodeDecodeError) as error:
        raise R3Error(f"--source {path}: cannot be read as UTF-8 text ({error})") from None


def _declared_tolerance(name: str) -> dict | None:
    """The tolerance= the project declares for kernel ``name`` now (it may have changed
    since the recordings were made); None when the kernel is not declared here."""
    try:
        kernels, _, _ = declared_kernels([])
    except Exception:  # a project that does not collect: the recorded tolerance stands
        return None
    kernel = kernels.get(name)
    return None if kernel is None else dict(kernel.tolerance)


def _one_paragraph(exc: CompileError) -> str:
    """A compile error's message without the command line it quotes."""
    text = str(exc).split("\n\ncommand:")[0]
    return text.strip()


def _pipeline_settings(values: list[str]) -> dict[str, object]:
    """``--pipeline`` values: NAME=VALUE pairs, JSON objects, or JSON files, merged."""
    settings: dict[str, object] = {}
    for value in values:
        text = value.strip()
        if not text.startswith("{") and "=" not in text:
            path = Path(text)
            if not path.is_file():
                raise R3Error(f"--pipeline {value!r} is neither NAME=VALUE, a JSON object nor "
                              "a file")
            text = path.read_text()
        if text.startswith("{"):
            try:
                loaded = json.loads(text)
            except ValueError as exc:
                raise R3Error(f"--pipeline {value!r}: not valid JSON ({exc})") from exc
            if not isinstance(loaded, dict):
                raise R3Error(f"--pipeline {value!r}: the JSON must be an object of settings")
            settings.update(loaded)
        else:
            settings.update(_assignments([text], "--pipeline"))
    return settings


def declared_kernels(pytest_args: list[str]) -> tuple[dict, Path, str]:
    """The kernels the project's tests declare, found by collecting them as ``pytest
    --r3-list`` does (in this process, without running a test); the r3 folder; and
    pytest's output, for when collection failed."""
    import importlib.util

    import pytest

    from .kernel import declaration
    from .pytest_plugin.plugin import r3_dir

    found: dict = {}
    where: list[Path] = []

    class Collector:
        @pytest.hookimpl(trylast=True)
        def pytest_collection_finish(self, session: pytest.Session) -> None:
            found.update(declaration.registry())
            where.append(r3_dir(session.config))

    args = ["--collect-only", "-q", "-p", "no:cacheprovider", *pytest_args]
    if importlib.util.find_spec("xdist") is not None:
        args.append("-n0")  # collecting needs no workers, whatever the project's addopts
    output = io.StringIO()
    with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
        pytest.main(args, plugins=[Collector()])
    return found, (where[0] if where else Path(".r3")), output.getvalue()


def _build(args: argparse.Namespace) -> int:
    from .model.pipeline import Pipeline
    from .tuning.build import build

    pipeline = _pipeline_settings(args.pipeline)
    Pipeline.from_mapping(pipeline, where="--pipeline: ")  # a usage error before collecting
    macros = _assignments(args.set, "--set")
    kernels, r3_folder, output = declared_kernels(args.paths)
    kernel = kernels.get(args.kernel)
    if kernel is None:
        if not kernels:
            tail = " ".join(output.strip().splitlines()[-3:])
            raise R3Error(f"no kernel is declared by the tests collected here ({Path.cwd()}); "
                          f"run it from the project's folder or name the test paths. pytest "
                          f"said: {tail[-600:]}")
        raise R3Error(f"no kernel named {args.kernel!r} is declared by the tests collected "
                      f"here; declared: {', '.join(sorted(kernels))}")
    source_text = _source_text(args.source) if args.source else None
    variant = kernel.variant(pipeline=pipeline or None, source_text=source_text, **macros)
    result = build(kernel, variant, r3_folder / "build" / kernel.name, args.target)
    if args.json:
        print(json.dumps(result.as_dict(), indent=2))
    else:
        print("\n".join(result.lines(relative_to=Path.cwd())))
    return OK


def _cache(args: argparse.Namespace) -> int:
    from .backends import compile_cache

    size_text = os.environ.get(compile_cache.SIZE_ENV, "").strip()
    cache = compile_cache.CompileCache(
        compile_cache.configured_dir(),
        compile_cache.parse_size(size_text) if size_text else compile_cache.DEFAULT_SIZE)
    if args.action == "clear":
        try:
            removed = cache.clear()
        except OSError as exc:
            raise R3Error(f"cannot clear the compiled-code cache {cache.root}: "
                          f"{exc.strerror or exc}") from None
        print(f"removed {removed} compiled-code cache entr{'y' if removed == 1 else 'ies'} "
              f"from {cache.root}")
        return OK
    info = {**cache.info(), "enabled": compile_cache.enabled()}
    if args.json:
        print(json.dumps(info, indent=2))
        return OK
    state = "on" if info["enabled"] else f"off ({compile_cache.SWITCH_ENV}=off)"
    kinds = ", ".join(f"{count} {kind}" for kind, count in info["kinds"].items())
    damaged = f", {info['damaged']} damaged (rebuilt when next used)" if info["damaged"] else ""
    print(f"compiled-code cache: {info['folder']}\n  state: {state}\n  entries: "
          f"{info['entries']}{f' ({kinds})' if kinds else ''}{damaged}\n  size: "
          f"{_mib(info['bytes'])} of {_mib(info['max_bytes'])} (least recently used entries "
          f"go first; {compile_cache.SIZE_ENV} sets the bound)")
    return OK


def _mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


# -- pytest-r3 record -- COMMAND ...: the application's launches as timing workloads --------
def _add_record_command(commands) -> None:
    record = commands.add_parser(
        "record", help="run a command and record the launches of declared kernels in it as "
        "timing workloads (pytest-r3 record -- python app.py)")
    record.add_argument("--first", type=int, default=1, metavar="N",
                        help="launches captured per distinct shape (default: 1)")
    record.add_argument("--every", type=int, default=0, metavar="K",
                        help="after those, capture every K-th launch of a shape; every launch "
                        "is counted either way (default: 0, none)")
    options.add_to_argparse(record, ["r3_dir", "r3_workload_cap"])
    record.add_argument("program", nargs=argparse.REMAINDER, metavar="-- COMMAND",
                        help="the program to run, after --")


def _record(args: argparse.Namespace) -> int:
    import subprocess
    import uuid

    from .record import application
    from .record.store import RecordingStore

    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    if not program:
        raise R3Error("record needs a command to run: pytest-r3 record -- python app.py")
    if args.first < 1 or args.every < 0 or args.r3_workload_cap <= 0:
        raise R3Error("record: --first must be at least 1, --every 0 or more, and "
                      "--r3-workload-cap positive")
    r3_dir = Path(args.r3_dir).resolve()
    origin = "application: " + " ".join(program)
    run = uuid.uuid4().hex
    environment = {**os.environ, application.ENV: str(r3_dir),
                   application.ENV_FIRST: str(args.first),
                   application.ENV_EVERY: str(args.every),
                   application.ENV_CAP: str(args.r3_workload_cap),
                   application.ENV_ORIGIN: origin, application.ENV_RUN: run}
    try:
        status = subprocess.call(program, env=environment)
    except OSError as exc:
        raise R3Error(f"record: cannot run {program[0]!r}: {exc.strerror or exc}") from None
    store = RecordingStore(r3_dir / "recordings")
    recorded = {kernel: found for kernel in store.kernels()
                if (found := store.workloads_of(kernel, origin, run))}
    for kernel, weights in sorted(recorded.items()):
        print(f"{kernel}: {len(weights)} workload recording(s) standing for "
              f"{sum(weights.values()):g} launch(es)")
    if status != 0:
        print(f"pytest-r3: the command exited with status {status}", file=sys.stderr)
        return status
    if not recorded:
        print(f"pytest-r3: no launch of a declared kernel was recorded (does {program[0]!r} "
              "import pytest_r3 and call its kernels?)", file=sys.stderr)
        return REJECTED
    print(f"stored under {store.root}; `pytest --r3-tune` times candidates on them")
    return OK


if __name__ == "__main__":
    raise SystemExit(main())
