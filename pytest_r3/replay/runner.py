"""What a replay worker does with candidate code: load variants from IR, run them on the
cases the judge sent, and time them against the baseline.

It computes no verdict. It never sees an expected output: every run returns the raw
buffers (guards included) and the judge, in the parent process, decides. Its process is
assumed compromised as soon as a candidate has run in it.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from ..backends import get_backend
from ..errors import KernelFault, LaunchError, R3Error
from ..model.launch import LaunchConfig
from ..model.pipeline import Pipeline
from ..model.signature import Signature, param_from_dict
from . import fault_site, fpmode, protocol, timed_sets
from .buffers import (
    GuardedBuffer,
    PlainBuffer,
    fenced_seed,
    floored_seed,
    flush_seed,
    plain_buffers,
)
from .cases import Slot
from .counters import Counters
from .device_timing import DeviceTimed
from .heartbeat import quiet
from .layout import PAGE, prefer_heap, timed_seed
from .protocol import KernelSpec, Rejected, ReplaySettings
from .sampling import Arguments
from .threads import on_fresh_thread
from .timing import interleaved_speedup

ROTATION_BYTES = 64 << 20  # at most this much in a timed case's value sets, per layout


@dataclass
class WorkerCase:
    scalars: dict
    slots: list[Slot]


@dataclass
class TimedCase:
    """One timed case's buffers on one layout: the launch arguments of its value sets (see
    timed_sets), and the first set's arguments, buffers and values, which are checked."""

    arguments: Arguments
    buffers: list
    args: list
    values: list[np.ndarray]
    written: list[int]


def _with_values(case: WorkerCase, values: list[np.ndarray]) -> WorkerCase:
    """``case`` holding ``values`` (in slot order) instead of its recorded ones."""
    return WorkerCase(case.scalars, [replace(slot, values=array)
                                     for slot, array in zip(case.slots, values, strict=True)])


def signature_of(spec: KernelSpec) -> Signature:
    return Signature(spec.entry, tuple(param_from_dict(p) for p in spec.params),
                     spec.return_dtype)


class Runner:
    def __init__(self, spec: KernelSpec, settings: ReplaySettings,
                 beat: Callable[[], None] = quiet) -> None:
        self.spec = spec
        self.settings = settings
        self.beat = beat  # each step counted for the parent's watchdog (see heartbeat)
        self.backend = get_backend(spec.backend)
        self.signature = signature_of(spec)
        self.launch = (LaunchConfig.from_portable(spec.launch, f"kernel {spec.name!r}")
                       if spec.launch else None)
        self.variants: dict[str, object] = {}
        # guarded buffers of odd seeds end against an inaccessible page where the kernel runs on
        # host memory (see buffers.fenced_seed); a GPU copies its buffers, guards and all
        self.fenced = self.backend.name == "cpu"
        prefer_heap()  # a heap buffer of the production layout is one (see layout)
        self.cases: list[WorkerCase] = []
        self._repeats: dict[tuple, int] = {}  # launches per timed sample, by (reference, case)
        # opened before the worker is sealed (perf_event_open is not on its allowlist)
        self.counters = Counters() if getattr(self.backend, "cpu_clock", "thread") != "none" \
            else None
        if self.counters is not None and not self.counters.available:
            print(f"pytest-r3 replay worker: {self.counters.reason}", file=sys.stderr,
                  flush=True)
        # a GPU's facts, read before any candidate runs here (the parent trusts only these)
        self.device_facts: dict | None = None
        if self.counters is None and isinstance(self.backend, DeviceTimed):
            self.device_facts = self.backend.device_facts()

    def _timed_reply(self, timing) -> dict:
        """A timing's reply; on a GPU, with its clocks read now, as the timing ends."""
        reply = {"timing": timing.as_dict()}
        if self.device_facts is not None:
            reply["clocks"] = self.backend.clocks()
        return reply

    # -- variants ----------------------------------------------------------------------------
    def build(self, name: str, ir: str, pipeline: dict, tunables: dict) -> dict:
        """Optimise and load ``ir``; a time limit (SIGALRM, which ends the process) stops
        pass pipelines that make LLVM run for minutes."""
        started = time.perf_counter()
        if name == "reference":  # another configuration: its launches per sample differ
            self._repeats = {k: v for k, v in self._repeats.items() if k[0] != name}
        options = {} if self.launch is None else {"launch": self.launch, "tunables": tunables}
        self.beat()
        signal.setitimer(signal.ITIMER_REAL, self.settings.compile_timeout)
        try:
            self.variants[name] = self.backend.load(
                ir, self.spec.entry, self.signature, Pipeline.from_mapping(pipeline),
                self.spec.name, **options)
        except R3Error as exc:
            raise Rejected(protocol.COMPILE_ERROR, "compile_error", str(exc)) from None
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            self.beat()
        return {"llvm": time.perf_counter() - started}

    def drop(self, name: str) -> None:
        if name != "baseline":
            self.variants.pop(name, None)

    # -- cases --------------------------------------------------------------------------------
    def set_cases(self, layout: list[dict], arrays: dict[str, np.ndarray]) -> None:
        self._repeats = {}
        self.cases = [
            WorkerCase(dict(case["scalars"]), [
                Slot.from_layout(slot, arrays[f"{index}.{number}"])
                for number, slot in enumerate(case["slots"])])
            for index, case in enumerate(layout)]

    def _arguments(self, case: WorkerCase, fills: dict, guard_seed: int,
                   plain: bool = False):
        """Launch arguments in parameter order; aliased parameters share one buffer.
        ``plain``: buffers allocated as numpy allocates the user's, with no guards, in the
        layout ``guard_seed`` draws (see layout)."""
        self.beat()
        buffers: list[GuardedBuffer | PlainBuffer] = []
        if plain:
            buffers += plain_buffers([slot.values for slot in case.slots], guard_seed)
        else:
            fenced = self.fenced and fenced_seed(guard_seed)  # inputs mapped read-only too
            floored = fenced and floored_seed(guard_seed)
            buffers += [GuardedBuffer(slot.values, guard_seed + number, fenced,
                                      read_only=self.fenced and not slot.written,
                                      floored=floored,
                                      flush=flush_seed(guard_seed))
                        for number, slot in enumerate(case.slots)]
        by_param = {}
        for number, (slot, buffer) in enumerate(zip(case.slots, buffers, strict=True)):
            buffer.fill(slot.values, fills.get(str(number)))
            for name in slot.params:  # overlapping parameters: views of one buffer
                by_param[name] = slot.view_of(buffer.array, name)
        args = [by_param[p.name] if p.is_pointer else case.scalars[p.name]
                for p in self.signature.params]
        fault_site.WATCHED[:] = _watched(case.slots, buffers)
        return args, buffers

    def _launch(self, variant: str, args: list):
        self.beat()
        signal.setitimer(signal.ITIMER_REAL, self.settings.run_timeout)
        try:
            return self.variants[variant](*args)
        except KernelFault as fault:
            end_worker(fault)
        except LaunchError as exc:  # e.g. a GPU block the device refuses
            raise Rejected(protocol.COMPILE_ERROR, "launch", str(exc)) from None
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            self.beat()

    def warm_up(self) -> None:
        """Exercise every code path once with the baseline, before the worker is sealed:
        modules imported lazily (numpy's percentile needs numpy.ma) cannot load after."""
        import numpy.ma  # noqa: F401

        if not self.cases:
            return
        # the smallest case (with data): the code paths are the same, the launches cheap
        # (the first case may be the largest recording, timed once per worker for nothing)
        filled = [n for n, case in enumerate(self.cases)
                  if all(slot.values.size for slot in case.slots)] or [0]
        first = min(filled, key=lambda n: sum(s.values.nbytes for s in self.cases[n].slots))
        self.run("baseline", first, {}, 0)
        quick = ReplaySettings.from_dict({**self.settings.__dict__, "warmup_rounds": 0,
                                          "timing_rounds": 1, "min_timing_rounds": 1,
                                          "min_sample_seconds": 0.0})
        args = [Arguments([self._arguments(self.cases[first], {}, 0, plain=True)[0]])
                for _ in range(2)]
        baseline = self.variants["baseline"]
        interleaved_speedup(self.backend, baseline, baseline, args[:1], args[1:],
                            quick, counters=self.counters).as_dict()

    # -- requests -----------------------------------------------------------------------------
    def run(self, variant: str, case_index: int, fills: dict, guard_seed: int,
            after: list[int] = (), plain: bool = False, thread: bool = False,
            flush: bool = False):
        """One launch on fresh guarded buffers (``plain``: laid out as in production); every
        buffer comes back whole. With
        ``after``, those cases run first on the same buffers, each launch refilling only the
        read-only inputs, so what the written buffers hold is kept from launch to launch.
        ``thread``: the launches are made from a fresh thread, not the main one (see
        threads). ``flush``: with flush-to-zero and denormals-are-zero set on the launching
        thread (see fpmode)."""
        chain = [self.cases[index] for index in (*after, case_index)]
        args, buffers = self._arguments(chain[0], fills, guard_seed, plain)

        def launches() -> object:
            with fpmode.flushing(flush):
                return self._chain(variant, chain, args, buffers)

        returned = on_fresh_thread(launches) if thread else launches()
        fault_site.WATCHED.clear()
        for buffer in buffers:  # a floored buffer's guard below comes back too
            if isinstance(buffer, GuardedBuffer):
                buffer.open_floor()
        return {"returned": _plain(returned)}, {
            str(number): buffer.storage for number, buffer in enumerate(buffers)}

    def _chain(self, variant: str, chain: list[WorkerCase], args: list, buffers: list):
        """The launches of one run (see run); the last one's return value."""
        returned = self._launch(variant, args)
        for case in chain[1:]:
            for buffer, slot in zip(buffers, case.slots, strict=True):
                if not slot.written:
                    buffer.fill(slot.values, None)
            returned = self._launch(variant, args)
        return returned

    def _timed(self, case: WorkerCase, guard_seed: int, which: int, index: int,
               restore: list[int] | None) -> TimedCase:
        """Launch arguments for timing ``case``: several copies, each holding one of the
        value sets the timing draws (see timed_sets; ``restore``: the written buffers the
        kernel also reads, every written one when not said), used in turn by every launch
        of every sample, their written buffers put back to their set's values before each
        use, outside the timed region (see sampling.Arguments). Buffers are laid out as
        numpy lays out the user's arrays: a candidate timed on buffers it can tell apart
        from production's could be fast only when timed; set ``which`` 0 is laid out as a
        short script's fresh large arrays, 1 as a long-lived process's, in the order the
        settings' ``timed_heap_order`` says (see layout.timed_seed)."""
        order = self.settings.timed_heap_order
        written = [n for n, slot in enumerate(case.slots) if slot.written]
        in_place = written if restore is None else \
            [n for n in restore if 0 <= n < len(case.slots) and case.slots[n].written]
        read = {n for n, slot in enumerate(case.slots) if not slot.written} | set(in_place)
        size = sum(slot.values.nbytes for slot in case.slots)
        count = max(2, min(timed_sets.SETS, ROTATION_BYTES // max(size, 1)))
        drawn = timed_sets.draw([slot.values for slot in case.slots], read,
                                timed_sets.seed(guard_seed, index), count)
        made = [self._arguments(_with_values(case, values), {},
                                timed_seed(guard_seed, which, index, k, heap_order=order),
                                plain=True)
                for k, values in enumerate(drawn)]
        ring = [args for args, _ in made]
        turn = [0]  # the set the next launch takes

        def put_back(used: int) -> None:
            start = turn[0]
            ring[:] = [made[(start + k) % count][0] for k in range(count)]
            for k in range(start, start + min(used, count)):
                for number in written:
                    np.copyto(made[k % count][1][number].array, drawn[k % count][number])
            turn[0] = (start + used) % count
        return TimedCase(Arguments(ring, put_back), made[0][1], made[0][0], drawn[0], written)

    def time(self, variant: str, case_indices: list[int], guard_seed: int,
             checks: list[dict], weights: list[float] | None = None,
             race_against: float | None = None, reference: str = "baseline",
             restore: list[list[int]] | None = None, budget: float | None = None,
             rounds: float | None = None, clear_of: float | None = None,
             warmup: float | None = None, thread: bool = False):
        """Interleaved timing against the baseline, then the candidate again on each set of
        buffers the timing used, as many launches in a row as a timed sample made, refilled
        as the judge asks (``checks``: the fills of even and odd launches): a variant that
        skips work on buffers it has seen before shows in the last two, which the judge
        checks. ``weights``: what each case counts for in the total (see timing).
        ``reference``: the variant timed side by side, the baseline unless the client built
        the best configuration so far as "reference". ``budget``: seconds the rounds may
        take (see timing.interleaved_speedup). ``rounds``: at most this many timed rounds
        (``min_timing_rounds`` at least) instead of the settings' ``timing_rounds``.
        ``clear_of``: only whether the candidate is slower than this is asked (a slow-path
        probe, see timing.interleaved_speedup); ``warmup``: warm-up rounds (at most the
        settings'; none may be asked) instead of the settings' ``warmup_rounds``.
        ``thread``: the timed launches are made from a fresh thread, not the main one (see
        threads), whose CPU time checks the samples; the hardware counters, which count
        the main thread, are not read."""
        settings = self.settings if rounds is None else replace(
            self.settings, timing_rounds=max(self.settings.min_timing_rounds, int(rounds)))
        if warmup is not None:
            settings = replace(settings, warmup_rounds=max(0, min(settings.warmup_rounds,
                                                                  int(warmup))))
        if reference not in ("baseline", "reference") or reference not in self.variants:
            raise protocol.ProtocolError(f"time against {reference!r}: no such variant")
        sets = {"base": [], "cand": []}
        for offset, which in enumerate(sets):  # two layouts, each variant timed on both
            for position, index in enumerate(case_indices):
                sets[which].append(self._timed(
                    self.cases[index], guard_seed, offset, index,
                    None if restore is None else list(restore[position])))
        try:
            measure = functools.partial(
                interleaved_speedup,
                _Counted(self.backend, self.beat), self.variants[reference],
                self.variants[variant],
                [t.arguments for t in sets["base"]], [t.arguments for t in sets["cand"]],
                settings, weights, race_against,
                [self._repeats.get((reference, index)) for index in case_indices],
                # a winner against the best so far is timed again against the baseline: it
                # may stop as soon as it has won; against the baseline, after the minimum
                stop_ahead=self.settings.race_rounds if reference != "baseline"
                else self.settings.min_timing_rounds,
                counters=None if thread else self.counters, budget=budget,
                clear_of=clear_of)
            timing = on_fresh_thread(measure) if thread else measure()
            self._repeats.update(((reference, index), count)
                                 for index, count in zip(case_indices, timing.repeats))
        except KernelFault as fault:
            end_worker(fault)
        reply = self._timed_reply(timing)
        if timing.raced or timing.stopped == "too_busy":  # never kept: no check needed
            return reply, {}
        # the set of buffers the candidate ran on last
        last_set = list(sets.values())[timing.last_set]
        arrays = {}
        for position, timed in enumerate(last_set):
            case = self.cases[case_indices[position]]
            self._check_timed_values(variant, timed, case, guard_seed, case_indices[position],
                                     arrays, position)
            buffers, args = timed.buffers, timed.args
            # as many launches in a row on these buffers as one timed sample made, each on
            # refilled buffers; the last two come back
            launches = max(2, timing.repeats[position])
            for launch in range(launches):
                for number, (buffer, slot) in enumerate(zip(buffers, case.slots, strict=True)):
                    buffer.fill(slot.values, checks[launch % 2][position].get(str(number)))
                self._launch(variant, args)
                if launch >= launches - 2:
                    for number, buffer in enumerate(buffers):
                        arrays[f"{position}.{number}.{launch % 2}"] = buffer.storage.copy()
        arrays["set"] = np.array([0 if last_set is sets["base"] else 1], dtype=np.int64)
        return reply, arrays

    def _check_timed_values(self, variant: str, timed: TimedCase, case: WorkerCase,
                            guard_seed: int, index: int, arrays: dict, position: int) -> None:
        """One more launch of ``variant`` on the buffers of the first timed value set, its
        written buffers put back (``position.number.timed``), and the baseline's launch on
        the same values in fresh buffers (``position.number.timed_base``): the judge
        compares them (see judge.check_timed), so a result kept from an earlier launch, or
        read from data the timed launches changed, shows as a wrong output."""
        for number in timed.written:
            np.copyto(timed.buffers[number].array, timed.values[number])
        self._launch(variant, timed.args)
        fresh_args, fresh = self._arguments(
            _with_values(case, timed.values), {},
            timed_seed(guard_seed, 0, index, timed_sets.SETS,
                       heap_order=self.settings.timed_heap_order), plain=True)
        self._launch("baseline", fresh_args)
        for number in timed.written:
            arrays[f"{position}.{number}.timed"] = timed.buffers[number].array.copy()
            arrays[f"{position}.{number}.timed_base"] = fresh[number].array.copy()

    def call(self, layout: dict, arrays: dict[str, np.ndarray], repeats: int = 1):
        """One launch of the loaded variant on the caller's values (an oracle test's call,
        forwarded); the written buffers come back. With ``repeats``, the call is made up to
        that many times in a row (for about a second at most), each on fresh copies of the
        caller's values, and on the CPU every repeat must give the first one's outputs
        bit for bit: a kernel that changes after some calls, with no input changed, keeps
        state between calls. The last repeat answers."""
        deadline = 0.0
        first = last = None
        for attempt in range(max(1, repeats)):
            case = WorkerCase(dict(layout["scalars"]), [
                Slot(list(slot["params"]), bool(slot["written"]), arrays[str(number)].copy())
                for number, slot in enumerate(layout["slots"])])
            by_param = {name: slot.values for slot in case.slots for name in slot.params}
            args = [by_param[p.name] if p.is_pointer else case.scalars[p.name]
                    for p in self.signature.params]
            returned = _plain(self._launch("baseline", args))
            written = {str(number): slot.values for number, slot in enumerate(case.slots)
                       if slot.written}
            last = (returned, written)
            if first is None:
                first, deadline = last, time.perf_counter() + 1.0
            elif self.spec.backend == "cpu" and not _same_outputs(first, last):
                raise Rejected(protocol.WRONG_OUTPUT, "hidden_state",
                               f"call {attempt + 1} in a row on the same inputs gave other "
                               "outputs than the first: the kernel keeps state between calls")
            if time.perf_counter() > deadline:
                break
        return {"returned": last[0]}, last[1]


def _same_outputs(one: tuple, other: tuple) -> bool:
    """The same return value and written buffers, bit for bit (NaN payloads included)."""
    if repr(one[0]) != repr(other[0]):
        return False
    return all(one[1][key].tobytes() == other[1][key].tobytes() for key in one[1])


class _Counted:
    """The backend as timing sees it: each timed sample counts as a step for the parent's
    watchdog, so a sample must end within the run limit (plus its margin) like a launch."""

    def __init__(self, backend, beat: Callable[[], None]) -> None:
        self.backend = backend
        self.beat = beat
        # which CPU time samples are checked against: a device-timed backend's "none" too
        self.cpu_clock = getattr(backend, "cpu_clock", "thread")

    def time(self, launcher, args, repeat: int) -> list[float]:
        self.beat()
        try:
            return self.backend.time(launcher, args, repeat)
        finally:
            self.beat()


def _plain(value: object) -> object:
    """A return value as JSON can carry it (numpy scalars included)."""
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    return float(value)


def _watched(slots: list[Slot], buffers: list) -> list[tuple]:
    """Whose pages below (floored), above (fenced) or over a read-only input fault: the
    fault handler names them."""
    watched: list[tuple] = []
    for slot, buffer in zip(slots, buffers, strict=True):
        if not isinstance(buffer, GuardedBuffer):
            continue
        if buffer.floor:
            watched.append((*buffer.floor, _starting_in_first_page(slot)))
        if buffer.ceiling:
            watched.append((*buffer.ceiling, _ending_in_last_page(slot), "after"))
        if buffer.read_only_pages:
            watched.append((*buffer.read_only_pages, " and ".join(slot.params), "read-only"))
    return watched


def _ending_in_last_page(slot: Slot) -> str:
    """The parameters of a fenced buffer that end in its last page: those a fault just
    above it reached past."""
    itemsize, size = slot.values.dtype.itemsize, slot.values.size
    ends = {name: start + int(np.prod(shape)) for name, (start, shape) in slot.views.items()}
    return " and ".join(name for name in slot.params
                        if (size - ends.get(name, size)) * itemsize < PAGE)


def _starting_in_first_page(slot: Slot) -> str:
    """The parameters of a floored buffer that start in its first page (a view at an
    offset, such as ``a[1:]``, too): those a fault just below it reached before."""
    itemsize = slot.values.dtype.itemsize
    return " and ".join(name for name in slot.params
                        if slot.views.get(name, (0,))[0] * itemsize < PAGE)


def end_worker(fault: KernelFault) -> None:
    """A fault on a GPU leaves its context unusable: end this worker the way a crash would,
    so the client reports a crash for this candidate and starts a fresh worker."""
    print(f"pytest-r3 replay worker: {fault}", file=sys.stderr, flush=True)
    os._exit(protocol.DEVICE_FAULT_EXIT)
