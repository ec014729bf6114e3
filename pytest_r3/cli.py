"""``pytest-r3``: work with recordings outside a test run (list them, replay a variant,
record an application's launches).

Exit status: 0 when the command did its work (``replay``: the variant passed), 1 only when
``replay`` rejected the variant (or ``recordings`` or ``record`` found none; ``record``
passes on a failing command's own status), 2 for a usage error, a
state that cannot be used, or any other error (one line on stderr, never a traceback unless
``PYTEST_R3_DEBUG=1``), 130 when interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
import warnings
from pathlib import Path

from . import settings as options
from .errors import R3Error, R3Warning

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
    options.add_to_argparse(replay, ["r3_dir", "r3_run_timeout"])
    _add_record_command(commands)
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
        if args.command == "record":
            return _record(args)
        return _replay(args)
    except R3Error as exc:
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
    from .replay.manual import replay

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
    result = replay(args.kernel, candidate, r3_dir=args.r3_dir,
                    recordings=args.recording or None, source_file=args.source,
                    settings=ReplaySettings(run_timeout=args.r3_run_timeout))
    if args.json:
        print(json.dumps(result.as_dict(), indent=2))
    else:
        print(f"{args.kernel}: {result.summary()}")
    return OK if result.ok else REJECTED


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
