"""``pytest-r3``: work with recordings outside a test run (list them, replay a variant)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import settings as options
from .errors import R3Error


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


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "recordings":
            return _list(Path(args.r3_dir))
        return _replay(args)
    except R3Error as exc:
        print(f"pytest-r3: {exc}", file=sys.stderr)
        return 2


def _list(r3_dir: Path) -> int:
    from .record.store import RecordingStore

    store = RecordingStore(r3_dir / "recordings")
    kernels = store.kernels()
    if not kernels:
        print(f"no recordings under {store.root}; run `pytest --r3-record` first")
        return 1
    for kernel in kernels:
        index = store.index(kernel) or {}
        weak = set(index.get("weak", []))
        print(f"{kernel}:")
        for key in store.keys(kernel):
            meta = json.loads((store.kernel_dir(kernel) / f"{key}.json").read_text())
            shapes = ", ".join(f"{n}{tuple(a['shape'])}" for n, a in meta["arrays"].items())
            print(f"  {key}  {meta['nbytes'] / 1024:9.1f} KiB  {shapes}"
                  f"{'  [weak]' if key in weak else ''}  {', '.join(meta['tests'])}")
    return 0


def _replay(args: argparse.Namespace) -> int:
    from .model.pipeline import Pipeline
    from .replay import Candidate, ReplaySettings
    from .replay.manual import replay

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
    return 0 if result.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
