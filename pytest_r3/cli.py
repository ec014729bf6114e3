"""``pytest-r3``: work with recordings outside a test run (list them, replay a variant).

Exit status: 0 when the command did its work (``replay``: the variant passed), 1 only when
``replay`` rejected the variant (or ``recordings`` found none), 2 for a usage error, a
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
            print(f"  {recording.key}  {meta['nbytes'] / 1024:9.1f} KiB  {shapes}"
                  f"{'  [weak]' if recording.key in weak else ''}  {', '.join(meta['tests'])}")
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


if __name__ == "__main__":
    raise SystemExit(main())
