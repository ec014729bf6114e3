"""One definition of every pytest-r3 setting, shared by the pytest plugin and the CLI.

Each option is a command-line flag (``--r3-record-cap``) paired with an ini key
(``r3_record_cap``) usable in ``[tool.pytest.ini_options]``; the flag wins over the ini
value, which wins over the default.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _flag(value: object) -> bool:
    """A boolean ini value; anything but the words below is refused, not taken as false."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in TRUE + FALSE:
        raise ValueError(f"{value!r} is not a boolean")
    return text in TRUE


def _count(value: object) -> int:
    """A whole number, 0 or more (a seed, a number of workers or requests)."""
    number = int(str(value).strip())
    if number < 0:
        raise ValueError(f"{value!r} is negative")
    return number


def _positive(value: object) -> float:
    """A number above 0 (a time limit, a size cap): 0 or less would refuse everything."""
    number = float(str(value).strip())
    if not number > 0:  # NaN too
        raise ValueError(f"{value!r} is not above 0")
    return number


EXPECTED = {_flag: "true or false (also yes/no, on/off, 1/0)", int: "a whole number",
            float: "a number", str: "text", _count: "a whole number, 0 or more",
            _positive: "a number above 0"}


@dataclass(frozen=True)
class Option:
    name: str                       # dest and ini key: r3_record_cap
    help: str
    default: object
    convert: Callable[[object], object] = str
    is_flag: bool = False
    metavar: str | None = None

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def describe_default(self) -> str:
        return f"{self.help} (default: {self.default if self.default != '' else 'none'})"


OPTIONS: dict[str, Option] = {o.name: o for o in [
    Option("r3_list", "list declared kernels, their tunables and oracle tests; run no test",
           False, _flag, is_flag=True),
    Option("r3_record", "record the launches of each kernel inside its oracle tests into "
           "<r3-dir>/recordings", False, _flag, is_flag=True),
    Option("r3_tune", "record, tune every kernel exercised by its oracle tests, verify the "
           "best variant with those tests, and write r3.lock and reports", False, _flag,
           is_flag=True),
    Option("r3_check", "pre-merge guard: re-verify and re-measure every locked kernel against "
           "its baseline; fail on stale entries, failing oracles or slowdowns", False, _flag,
           is_flag=True),
    Option("r3_budget", "search budget per kernel: evaluations (200) or time (90s, 5m, 1h)",
           "100", str, metavar="BUDGET"),
    Option("r3_optimizer", "Nevergrad optimizer, by name", "NGOpt", str, metavar="NAME"),
    Option("r3_seed", "random seed of the search (same seed, same sequence: resumable; "
           "another seed measures everything again)", 0,
           _count, metavar="N"),
    Option("r3_workers", "replay workers per kernel; 0 means one per CPU core", 0, _count,
           metavar="N"),
    Option("r3_dask", "evaluate candidates on a Dask cluster: tcp://HOST:PORT (a running "
           "scheduler) or local:N (N worker processes here); none: the local pool", "", str,
           metavar="ADDRESS"),
    Option("r3_search_pipeline", "also search the LLVM pipeline (level, vectoriser, unroller, "
           "loop hints, extra passes); false searches the kernel's own tunables only", True,
           _flag, metavar="BOOL"),
    Option("r3_kernels", "comma-separated kernel names to tune or check; none: all", "",
           str, metavar="NAMES"),
    Option("r3_retune", "measure every configuration again (no stored result is reused) and "
           "replace each kernel's r3.lock entry with this run's result, even one "
           "measured with a smaller budget or finding nothing (by default a weaker run keeps "
           "the committed entry)", False, _flag, is_flag=True),
    Option("r3_check_threshold", "slowdown against the baseline at which --r3-check fails, "
           "on the weighted total and on every workload: a percent (5), or pytest-benchmark's "
           "--benchmark-compare-fail syntax (median:5%%, mean:0.001 in seconds); "
           "comma-separated for several", "5", str, metavar="THRESHOLD"),
    Option("r3_require_lock", "with --r3-check: fail when there is no r3.lock, or no entry "
           "in it for this machine's target (for CI; without it, nothing to check passes)",
           False, _flag, is_flag=True),
    Option("r3_llm_model", "chat model for source rewrites; none: tune settings only", "",
           str, metavar="MODEL"),
    Option("r3_llm_base_url", "OpenAI-compatible endpoint, e.g. http://localhost:8000/v1 "
           "(vLLM, Ollama, llama.cpp); none: the openai default", "", str, metavar="URL"),
    Option("r3_llm_api_key_env", "environment variable holding the API key; none: a local "
           "server that needs no key", "OPENAI_API_KEY", str, metavar="NAME"),
    Option("r3_llm_temperature", "sampling temperature; none: not sent (for models that "
           "refuse it)", "0.7", str, metavar="T"),
    Option("r3_llm_timeout", "total seconds per request, retries included", 120.0, _positive,
           metavar="SECONDS"),
    Option("r3_llm_max_answer_tokens", "max_tokens sent with each request; 0: not sent", 0,
           _count, metavar="N"),
    Option("r3_llm_concurrency", "requests in flight at once", 2, _count, metavar="N"),
    Option("r3_llm_max_requests", "request budget per kernel", 40, _count, metavar="N"),
    Option("r3_llm_max_tokens", "token budget per kernel (prompt + completion)", 400000, _count,
           metavar="N"),
    Option("r3_llm_max_seconds", "wall-time budget per kernel for the rewrite search", 1800.0,
           _positive, metavar="SECONDS"),
    Option("r3_llm_generations", "generations of the evolutionary search", 3, _count,
           metavar="N"),
    Option("r3_llm_islands", "islands of the MAP-Elites archive", 2, _count, metavar="N"),
    Option("r3_llm_children", "rewrites requested per island and generation", 2, _count,
           metavar="N"),
    Option("r3_llm_repairs", "repair rounds for a rewrite that fails to compile or verify", 2,
           _count, metavar="N"),
    Option("r3_llm_examples", "retrieved examples shown per prompt", 2, _count, metavar="N"),
    Option("r3_llm_inner_budget", "Nevergrad evaluations for each new correct rewrite", 8, _count,
           metavar="N"),
    Option("r3_cuda_emulation", "run CUDA kernels on the CPU with CUDA semantics: auto (when "
           "no GPU is usable), on or off; sets PYTEST_R3_CUDA_EMULATION for the run and its "
           "replay workers", "auto", str, metavar="auto|on|off"),
    Option("r3_hip_emulation", "run HIP kernels on the CPU with 64-lane wavefronts: auto "
           "(when no AMD GPU is usable), on or off; sets PYTEST_R3_HIP_EMULATION for the run "
           "and its replay workers", "auto", str, metavar="auto|on|off"),
    Option("r3_cuda_headers", "headers of the CUDA device build: auto (an installed CUDA "
           "toolkit's beside pytest-r3's, for CUB and the full cooperative groups; else "
           "pytest-r3's alone), toolkit or bundled; sets PYTEST_R3_CUDA_HEADERS for the run "
           "and its replay workers", "auto", str, metavar="auto|toolkit|bundled"),
    Option("r3_cuda_racecheck", "in CUDA emulation, fail a launch whose threads race on "
           "shared memory (no __syncthreads between two accesses, one a write); several "
           "times slower; sets PYTEST_R3_CUDA_RACECHECK", False, _flag, is_flag=True),
    Option("r3_dir", "folder for recordings, results and reports, relative to the rootdir",
           ".r3", str, metavar="DIR"),
    Option("r3_record_cap", "size cap per kernel for recordings, in MiB; a representative "
           "subset is kept", 64.0, _positive, metavar="MIB"),
    Option("r3_workload_cap", "size cap per kernel for workload recordings (benchmark tests, "
           "r3_workload tests, `pytest-r3 record`), in MiB; the heaviest are kept", 256.0,
           _positive, metavar="MIB"),
    Option("r3_run_timeout", "wall-time limit in seconds for one kernel run during replay",
           10.0, _positive, metavar="SECONDS"),
    Option("r3_compile_timeout", "wall-time limit in seconds for compiling one candidate "
           "during replay", 60.0, _positive, metavar="SECONDS"),
    Option("r3_memory_limit", "address-space limit of a replay worker, in MiB", 8192.0, _positive,
           metavar="MIB"),
]}


def add_to_pytest(parser) -> None:
    group = parser.getgroup("r3", "pytest-r3 kernel autotuning")
    for option in OPTIONS.values():
        if option.is_flag:
            group.addoption(option.flag, action="store_true", dest=option.name, default=None,
                            help=option.help)
        else:
            group.addoption(option.flag, dest=option.name, default=None,
                            metavar=option.metavar, help=option.describe_default())
        parser.addini(option.name, option.describe_default(), default=None)


def add_to_argparse(parser: argparse.ArgumentParser, names: list[str]) -> None:
    for name in names:
        option = OPTIONS[name]
        if option.is_flag:
            parser.add_argument(option.flag, action="store_true", dest=name,
                                default=option.default, help=option.help)
        else:
            parser.add_argument(option.flag, dest=name, default=option.default,
                                type=_argparse_type(option.convert), metavar=option.metavar,
                                help=option.describe_default())


def _argparse_type(convert: Callable[[object], object]) -> Callable[[str], object]:
    """``convert`` for argparse: a refused value says what is expected."""
    def checked(text: str) -> object:
        try:
            return convert(text)
        except (TypeError, ValueError):
            expected = EXPECTED.get(convert, convert.__name__)
            raise argparse.ArgumentTypeError(f"{text!r} is not valid; expected {expected}"
                                             ) from None
    return checked


def value(config, name: str) -> object:
    """The effective value of ``name`` for a pytest config: flag, else ini, else default."""
    import pytest

    option = OPTIONS[name]
    raw = config.getoption(name, default=None)
    source = f"{option.flag}"
    if raw is None:
        raw = config.getini(name)
        source = f"ini key {name}"
    if raw is None or raw == "" or raw == []:
        return option.default
    try:
        return option.convert(raw)
    except (TypeError, ValueError):
        expected = EXPECTED.get(option.convert, option.convert.__name__)
        raise pytest.UsageError(
            f"{source}: {raw!r} is not valid; expected {expected} ({option.help})") from None
