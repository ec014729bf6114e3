"""The pytest side of pytest-r3: options, the ``r3_oracle`` marker and ``--r3-list``.

Everything here only translates between pytest and the core modules, which run without
pytest. Nothing heavy is imported unless an r3 option is used.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .. import settings as options
from ..errors import DeclarationError, R3Error
from ..kernel import declaration
from . import distributed
from .oracle_run import ENV as ORACLE_RUN_ENV

ORACLE_MARKER = "r3_oracle"
WORKLOAD_MARKER = "r3_workload"
BENCHMARK_FIXTURE = "benchmark"  # pytest-benchmark's: its tests time what users run
registry_snapshot_key = pytest.StashKey[dict]()
oracles_key = pytest.StashKey[dict]()


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add_to_pytest(parser)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{ORACLE_MARKER}(*kernels): the test is a reference (oracle) test of the given "
        "kernels, given as kernel objects or names; a tuned variant is accepted only if "
        f"it passes. Example: @pytest.mark.{ORACLE_MARKER}(saxpy)",
    )
    config.addinivalue_line(
        "markers",
        f"{WORKLOAD_MARKER}(*kernels, weight=1): the test launches the given kernels at the "
        "sizes users run; --r3-tune times candidates on these launches (each counting "
        "`weight` times) instead of the oracle tests' inputs. Tests using pytest-benchmark's "
        f"`benchmark` fixture are workloads too. Example: @pytest.mark.{WORKLOAD_MARKER}"
        "(saxpy, weight=10)",
    )
    config.stash[registry_snapshot_key] = declaration.snapshot_registry()
    request = os.environ.pop(ORACLE_RUN_ENV, None)  # popped: the tests' own children skip it
    if request:  # a child pytest re-running oracle tests for an xdist controller
        from .oracle_run import OracleRunPlugin

        declaration.use_lock_file(False)  # every other kernel runs its baseline, as tuned
        config.pluginmanager.register(OracleRunPlugin(Path(request)), "r3-oracle-run")
        return
    _choose_cuda_emulation(config)
    _refuse_a_value_taken_for_a_path(config)
    tune = options.value(config, "r3_tune")
    check = options.value(config, "r3_check")
    if tune and check:
        raise pytest.UsageError("--r3-tune and --r3-check do not go together: tune first, "
                                "then check (e.g. in CI)")
    where = distributed.role(config)  # pytest-xdist: "worker", "controller" or None
    if where == "controller" and options.value(config, "r3_list"):
        distributed.stop_distributing(config)  # listing only collects: no workers needed
        where = None
    if options.value(config, "r3_record") or tune or check:
        from .recording import RecordingPlugin

        declaration.use_lock_file(False)  # record what the baseline does
        # benchmarked functions run once: timings taken while launches are copied mean
        # nothing, and the launch counts that weigh workloads are then per test
        config.option.benchmark_disable, config.option.benchmark_enable = True, False
        root = r3_dir(config) / "recordings"
        cap = int(options.value(config, "r3_record_cap") * 2**20)
        recorder = RecordingPlugin(config, root, cap, oracle_kernels,
                                   controller=where == "controller",
                                   workload_kernels=workload_kernels,
                                   workload_cap=int(options.value(config, "r3_workload_cap")
                                                    * 2**20))
        config.pluginmanager.register(recorder, "r3-recording")
        if (tune or check) and where != "worker":  # workers record; one process tunes
            from .session import TunePlugin

            config.pluginmanager.register(
                TunePlugin(config, recorder, r3_dir(config), "tune" if tune else "check",
                           distributed=where == "controller"),
                "r3-tuning")


def _refuse_a_value_taken_for_a_path(config: pytest.Config) -> None:
    """``--r3-dir DIR`` with a space: pytest looks for the rootdir and config file before
    plugins add their options, so it took DIR, an existing folder outside the one pytest
    started in, for a test path and may have lost both. Refused, with the spelling that
    works (a folder inside, such as ``.r3``, cannot move the rootdir)."""
    args = list(config.invocation_params.args)
    flags = {option.flag for option in options.OPTIONS.values() if not option.is_flag}
    for flag, value in zip(args, args[1:]):
        if flag not in flags:
            continue
        here = Path(config.invocation_params.dir)
        path = here / value
        if path.exists() and not path.resolve().is_relative_to(here.resolve()):
            raise pytest.UsageError(
                f"{flag} {value}: pytest read {value} as a test path while looking for the "
                f"rootdir (now {config.rootpath}); write {flag}={value}")


def check_declarations(config: pytest.Config) -> None:
    """Each declared kernel's source compiles and defines its entry: checked when kernels
    are collected for --r3-list, --r3-record, --r3-tune or --r3-check, so a wrong entry=
    is one line naming the declaration, not a traceback at the kernel's first call."""
    for name in sorted(declaration.registry()):
        kernel = declaration.registry()[name]
        try:
            _ = kernel.signature  # compiles the baseline and reads its entry
        except R3Error as exc:
            where = _relative(kernel.declared_at, config.rootpath)
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            first = first.replace(kernel.where, "").lstrip(": ")
            prefix = f"kernel {name!r} ("
            if first.startswith(prefix) and "): " in first:  # the source, named again
                first = (_relative(kernel.source.filename, config.rootpath) + ": "
                         + first.split("): ", 1)[1])
            raise pytest.UsageError(f"pytest-r3: kernel {name!r} declared at {where}: {first}"
                                    ) from None


def r3_dir(config: pytest.Config) -> Path:
    """The r3 folder (recordings, results, reports), relative to the rootdir."""
    return config.rootpath / str(options.value(config, "r3_dir"))


def pytest_unconfigure(config: pytest.Config) -> None:
    saved = config.stash.get(registry_snapshot_key, None)
    if saved is not None:
        declaration.restore_registry(saved)
    declaration.use_lock_file(True)


def oracle_kernels(item: pytest.Item) -> list[str]:
    """Names of the kernels ``item`` is marked as an oracle for (validated)."""
    names = []
    for marker in item.iter_markers(ORACLE_MARKER):
        if not marker.args:
            raise pytest.UsageError(
                f"{item.nodeid}: @pytest.mark.{ORACLE_MARKER}() names no kernel; "
                f"write @pytest.mark.{ORACLE_MARKER}(my_kernel)"
            )
        for target in marker.args:
            try:
                names.append(declaration.lookup(target).name)
            except DeclarationError as exc:
                raise pytest.UsageError(
                    f"{item.nodeid}: @pytest.mark.{ORACLE_MARKER}({target!r}): {exc}"
                ) from None
    return names


def workload_kernels(item: pytest.Item) -> dict[str | None, float]:
    """The kernels ``item`` times, with the weight of each launch: ``{None: 1.0}`` (any
    kernel) for a test using the ``benchmark`` fixture, plus those its ``r3_workload``
    markers name; {} for any other test."""
    found: dict[str | None, float] = {}
    if BENCHMARK_FIXTURE in getattr(item, "fixturenames", ()):
        found[None] = 1.0
    for marker in item.iter_markers(WORKLOAD_MARKER):
        weight = marker.kwargs.get("weight", 1.0)
        if set(marker.kwargs) - {"weight"} or not marker.args or isinstance(weight, bool) \
                or not isinstance(weight, (int, float)) or not weight > 0:
            given = ", ".join([*map(repr, marker.args),
                               *(f"{k}={v!r}" for k, v in marker.kwargs.items())])
            raise pytest.UsageError(
                f"{item.nodeid}: @pytest.mark.{WORKLOAD_MARKER}({given}) is not valid; write "
                f"@pytest.mark.{WORKLOAD_MARKER}(my_kernel) or @pytest.mark.{WORKLOAD_MARKER}"
                "(my_kernel, weight=10) (a positive number)")
        for target in marker.args:
            try:
                found[declaration.lookup(target).name] = float(weight)
            except DeclarationError as exc:
                raise pytest.UsageError(
                    f"{item.nodeid}: @pytest.mark.{WORKLOAD_MARKER}({target!r}): {exc}"
                ) from None
    return found


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    oracles: dict[str, list[str]] = {}
    for item in items:
        workload_kernels(item)  # a bad r3_workload marker: a usage error before tests run
        for name in oracle_kernels(item):
            oracles.setdefault(name, []).append(item.nodeid)
    config.stash[oracles_key] = oracles


def pytest_collection_finish(session: pytest.Session) -> None:
    config = session.config
    where = distributed.role(config)
    if config.option.collectonly or where == "controller":
        return  # under xdist the workers collect, and check (see pytest_testnodedown)
    if any(options.value(config, name) for name in ("r3_list", "r3_record", "r3_tune",
                                                    "r3_check")):
        try:
            check_declarations(config)
        except pytest.UsageError as exc:
            if where == "worker":  # the controller raises it again, for the terminal
                config.workeroutput[distributed.USAGE_ERROR_KEY] = str(exc)  # type: ignore
            raise


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    """A test module whose import declares a kernel wrongly (its source file deleted, an
    unknown tunable...): the collection error is the declaration's one line, which names
    the declaring file and line, not a traceback through pytest-r3."""
    from _pytest.reports import CollectErrorRepr

    report = yield
    call = getattr(report, "call", None)
    error = call.excinfo.value if call is not None and call.excinfo is not None else None
    if report.failed and isinstance(error, DeclarationError):
        root = f"(declared at {collector.config.rootpath}{os.sep}"
        report.longrepr = CollectErrorRepr(str(error).replace(root, "(declared at "))
    return report


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """pytest-xdist's controller: a worker stopped on a usage error (a wrong ``entry=``)
    before running any test; the same one line, here, ends the run."""
    message = (getattr(node, "workeroutput", None) or {}).get(distributed.USAGE_ERROR_KEY)
    if message:
        raise pytest.UsageError(message)


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> bool | None:
    if options.value(session.config, "r3_list"):
        _print_kernel_list(session.config)
        return True
    return None


def _relative(location: str, root: Path) -> str:
    """``location`` (a path, maybe with ``:line``) relative to ``root`` when inside it."""
    try:
        return str(Path(location).relative_to(root))
    except ValueError:
        return location


def _print_kernel_list(config: pytest.Config) -> None:
    terminal = config.pluginmanager.get_plugin("terminalreporter")

    def write(line: str, **markup: bool) -> None:
        if terminal is not None:
            terminal.write_line(line, **markup)
        else:
            print(line)

    kernels = declaration.registry()
    oracles = config.stash.get(oracles_key, {})
    write("")
    write(f"pytest-r3: {len(kernels)} kernel(s) declared", bold=True)
    for name in sorted(kernels):
        kernel = kernels[name]
        write("")
        source = _relative(kernel.source.filename, config.rootpath)
        write(f"{name} [{kernel.backend_name}]  {source}:{kernel.entry}")
        write(f"  declared at: {_relative(kernel.declared_at, config.rootpath)}")
        tunables = kernel.space.describe()
        write("  tunables: " + ("none" if not tunables else tunables[0]))
        for line in tunables[1:]:
            write(f"            {line}")
        if kernel.pipeline.differences():
            write(f"  pipeline: {kernel.pipeline.differences()}")
        tests = oracles.get(name, [])
        if tests:
            write(f"  oracle tests ({len(tests)}):")
            for nodeid in tests:
                write(f"    {nodeid}")
        else:
            write(f"  oracle tests: none (mark one with @pytest.mark.{ORACLE_MARKER}({name}))")


def _choose_cuda_emulation(config: pytest.Config) -> None:
    """--r3-cuda-emulation on/off sets PYTEST_R3_CUDA_EMULATION (replay workers inherit it),
    --r3-hip-emulation PYTEST_R3_HIP_EMULATION; auto leaves the environment variable, if
    any, to decide. --r3-cuda-racecheck sets PYTEST_R3_CUDA_RACECHECK."""
    from ..backends import forget_backend
    from ..backends.cuda.emulation import EMULATION_ENV, RACECHECK_ENV
    from ..backends.hip.emulation import EMULATION_ENV as HIP_EMULATION_ENV

    if options.value(config, "r3_cuda_racecheck"):
        os.environ[RACECHECK_ENV] = "1"

    choices = {"auto": None, "on": "1", "1": "1", "true": "1", "off": "0", "0": "0",
               "false": "0"}
    for backend, env in (("cuda", EMULATION_ENV), ("hip", HIP_EMULATION_ENV)):
        setting = f"r3_{backend}_emulation"
        value = str(options.value(config, setting)).strip().lower()
        if value not in choices:
            raise pytest.UsageError(f"--r3-{backend}-emulation / {setting}: {value!r} is not "
                                    "auto, on or off")
        if choices[value] is not None and os.environ.get(env) != choices[value]:
            os.environ[env] = choices[value]
            forget_backend(backend)
    _choose_cuda_headers(config)


def _choose_cuda_headers(config: pytest.Config) -> None:
    """--r3-cuda-headers toolkit/bundled sets PYTEST_R3_CUDA_HEADERS (replay workers inherit
    it); auto leaves the environment variable, if any, to decide."""
    from ..backends.cuda.toolchain import HEADER_CHOICES, HEADERS_ENV

    value = str(options.value(config, "r3_cuda_headers")).strip().lower()
    if value not in HEADER_CHOICES:
        raise pytest.UsageError(f"--r3-cuda-headers / r3_cuda_headers: {value!r} is not "
                                f"{', '.join(HEADER_CHOICES[:-1])} or {HEADER_CHOICES[-1]}")
    if value != "auto":
        os.environ[HEADERS_ENV] = value
