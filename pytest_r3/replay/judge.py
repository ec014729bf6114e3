"""The verdict on a candidate, computed in the parent process, never where candidate code runs.

The judge plans the input sets (cases) a candidate is run on: the recordings as they were,
aliasing and overlaps included; perturbed copies (float and integer data, float scalars);
the smallest recording at nearby problem sizes; inputs no recording holds (``derived``:
negated and nonzero scalars, integer data over its range, small sizes and one above the
recordings, in place where the baseline allows it); and each recording run again on the
outputs it left, its read-only inputs changed in one random half, then in the other, in
one random element, or in two elements swapped (see chains). Workload recordings (the
sizes users run) are timed, weighted by how many launches each stands for, and checked
after their timed runs; the oracles' recordings are timed only when there is no workload.
It learns what each case must produce from the baseline before any candidate has run in
the worker, keeps those expected outputs here, and compares what comes back: guards,
untouched inputs, outputs within tolerance, two runs with different random poison, and the
buffers the timed runs used.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass, field

import numpy as np

from ..record.store import Recording
from . import cases as planning
from . import chains, derived, fpmode, layout
from .buffers import check_guards, check_plain, poison_for, split_plain, split_storage
from .process import WorkerDied
from .protocol import WRONG_OUTPUT, KernelSpec, Rejected, ReplaySettings
from .threads import OTHER_THREAD
from .verify import Tolerance, compare, parse_tolerances


@dataclass
class Case:
    """One input set, and once the baseline has run on it, what a candidate must produce."""

    label: str
    origin: str                      # recorded, fresh, derived, reserve or kept
    scalars: dict
    slots: list[planning.Slot]
    recording: Recording | None = None
    expected: dict[int, np.ndarray] = field(default_factory=dict)
    written_mask: dict[int, np.ndarray | None] = field(default_factory=dict)
    output_only: set[int] = field(default_factory=set)
    returned: object = None
    weak: bool = False
    after: list[Case] = field(default_factory=list)  # run first, on the same buffers
    weight: float = 1.0              # launches a timed workload stands for
    in_place: tuple[str, str] | None = None  # derived: this input and output made one buffer
    twin: Case | None = None         # ...and the same values out of place (origin "twin")
    offset: int = 0                  # ...one starting this many elements after the other
    specials: bool = False           # derived with NaN or Inf: kept where the baseline
                                     # propagates them
    empty: bool = False              # derived at negative sizes: kept where the
                                     # baseline writes nothing
    alone: str = ""                  # verified in a batch of its own, with the others of
                                     # this name (a crash names them)
    flushed: dict[int, np.ndarray] | None = None  # the outputs with flush-to-zero set, where
    flushed_returned: object = None               # learnt (see fpmode)

    @property
    def nbytes(self) -> int:
        return sum(slot.values.nbytes for slot in self.slots)

    def layout(self) -> dict:
        return {"scalars": self.scalars, "slots": [s.layout() for s in self.slots]}

    def fills(self, seeds: dict[int, int]) -> dict[str, int]:
        """Poison seeds for the buffers the kernel only writes; the rest get their input."""
        return {str(n): seeds[n] for n in self.output_only}


# A candidate right when judged and wrong on buffers laid out as in production.
PRODUCTION = "production_layout"

# The two poisons that probe whether the baseline reads a buffer it writes: random bytes,
# then NaN or Inf in every floating-point element (see buffers.poison_for).
PROBE_SEEDS = (11, -12)

# A crash only where buffers end against an inaccessible page, or start at a page boundary
# with nothing accessible below (see buffers.fenced_seed and buffers.floored_seed).
FENCED_LAYOUT = ("each buffer ends just before an inaccessible page (some exactly at the page "
                 "end, their start then misaligned as a numpy slice such as a[1:] may be), or "
                 "starts at a page boundary with nothing mapped below: a load or store past "
                 "the end of a buffer faults there, even a store that writes back the bytes "
                 "it read, as it would where nothing is mapped after an array in production "
                 "(np.load(..., mmap_mode='r')[1:]), and so does any access before its start, "
                 "as on an np.memmap)")
FENCED_HINT = " (on the second run of cases the first run passed, where " + FENCED_LAYOUT


def fenced_hint(cases: list[Case], host: bool) -> str:
    """FENCED_HINT, naming the inputs the baseline never writes where they were mapped
    read-only on that run too (host memory: see buffers.GuardedBuffer)."""
    names = _read_only_names(cases)
    if not host or not names:
        return FENCED_HINT
    them, their = ("them", "their") if len(names) > 1 else ("it", "its")
    return (f" (on the second run of cases the first run passed, where {' and '.join(names)}, "
            f"which the original only reads, lay in pages mapped read-only, so any write "
            f"through {them} faults, however the kernel reached {their} address; and where "
            + FENCED_LAYOUT)


# Said of a crash in a batch of runs some of whose launches came from another thread.
SOME_THREAD_HINT = f" (and some of its launches {OTHER_THREAD}, not the worker's main thread)"


def _crash_hint(attempt: int, cases: list[Case], host: bool, threaded: bool) -> str:
    """What a crash on verification's attempt ``attempt`` is told of its runs' layout:
    the second's (fenced_hint); on the first, the read-only inputs' pages, which every run
    on host memory maps read-only; and whether launches came from another thread."""
    thread = SOME_THREAD_HINT if threaded else ""
    if attempt % 2:  # the same cases ran unfenced
        return fenced_hint(cases, host) + thread
    names = _read_only_names(cases) if host else []
    if not names:
        return thread
    them, their = ("them", "their") if len(names) > 1 else ("it", "its")
    return (f" (where {' and '.join(names)}, which the original only reads, lay in pages "
            f"mapped read-only, so any write through {them} faults, however the kernel "
            f"reached {their} address)" + thread)


def _read_only_names(cases: list[Case]) -> list[str]:
    return sorted({name for case in cases for slot in case.slots if not slot.written
                   for name in slot.params})

# Workloads timed per candidate at most: each costs its launch time every timing round.
TIMED_WORKLOADS = 8


class ReferenceError(Exception):
    """The baseline itself cannot serve as the reference for a recording."""


class Judge:
    def __init__(self, spec: KernelSpec, settings: ReplaySettings) -> None:
        self.spec = spec
        self.settings = settings
        names = tuple(p["name"] for p in spec.params)
        self.tolerances = parse_tolerances(spec.tolerance, names, f"kernel {spec.name!r}")
        self.cases: list[Case] = []
        # verification varies the caller's floating-point mode (a CPU kernel on x86-64)
        self.flush = spec.backend == "cpu" and fpmode.available()

    # -- planning and the reference -------------------------------------------------------
    def plan(self, recordings: list[Recording]) -> list[Case]:
        rng = np.random.default_rng(self.settings.seed)
        workloads = [Case(f"workload {r.key} ({r.workload['origin']})", "workload",
                          dict(r.scalars), planning.slots_of(r, self.spec.params), r,
                          weight=r.weight) for r in recordings if r.is_workload]
        planned = []
        for r in (r for r in recordings if not r.is_workload):
            slots = planning.slots_of(r, self.spec.params)
            label = f"recording {r.key} ({', '.join(r.tests)}){planning.sharing(slots)}"
            planned.append(Case(label, "recorded", dict(r.scalars), slots, r))
        fresh = []
        for case in planned:
            for index in range(self.settings.fresh_inputs + self.settings.reserve_inputs):
                origin = "fresh" if index < self.settings.fresh_inputs else "reserve"
                scalars, slots = planning.perturb(case.scalars, case.slots, self.spec.params, rng)
                fresh.append(Case(f"perturbed inputs #{index + 1} derived from {case.label}",
                                  origin, scalars, slots))
        if self.settings.derived_sizes and planned:
            smallest = min(planned, key=lambda c: c.nbytes)
            for scalars in planning.derived_sizes(smallest.scalars, smallest.slots,
                                                  self.spec.params):
                sizes = ", ".join(f"{n}={v}" for n, v in scalars.items()
                                  if v != smallest.scalars[n])
                fresh.append(Case(f"{smallest.label} at a derived size ({sizes})", "derived",
                                  scalars, planning.resized(smallest.slots, self.spec.params,
                                                            scalars)))
        if self.settings.derived_inputs and planned:
            fresh += self._derived(planned)
        swapped = chains.swapping(planned, secrets.randbits(16))
        kept = [step for case in planned
                for step in chains.steps(case, _kept_step, rng, id(case) in swapped)]
        return planned + fresh + kept + workloads

    def _derived(self, planned: list[Case]) -> list[Case]:
        """Cases the recordings never hold (see replay/derived.py), from their own stream
        of random numbers: the perturbed cases above stay what they were."""
        rng = np.random.default_rng([self.settings.seed, 21])
        # the sizes above and between the recordings are drawn anew by every server: a
        # rewrite wrong only at sizes no run has drawn cannot learn which ones are safe
        sizes_rng = np.random.default_rng(secrets.randbits(64))
        made: dict[int, Case] = {}
        for item in derived.plan(planned, self.spec.params, rng, self.spec.no_alias,
                                 sizes_rng):
            made[id(item)] = Case(item.label, item.origin, item.scalars, item.slots,
                                  in_place=item.in_place, twin=made.get(id(item.twin)),
                                  offset=item.offset, specials=item.specials,
                                  empty=item.empty, alone=item.alone)
        return list(made.values())

    def settle(self) -> list[str]:
        """After learning: an in-place case stays only where the baseline gives there what
        it gives out of place on the same values (then callers may call it in place, and a
        candidate must agree); the twins go. Returns why cases were dropped."""
        dropped, gone = [], set()
        for case in [c for c in self.cases if c.specials]:
            if all(np.isfinite(values).all() for values in case.expected.values()) and \
                    (case.returned is None or np.isfinite(case.returned)):
                gone.add(id(case))
                dropped.append(f"{case.label}: the baseline's outputs hold no NaN or "
                               "infinity (it does not propagate them)")
        for case in [c for c in self.cases if c.in_place]:
            twin = case.twin
            problem = "its out-of-place twin was dropped" \
                if not any(c is twin for c in self.cases) else \
                self._in_place_differs(case, twin)
            if problem:
                gone.add(id(case))
                dropped.append(f"{case.label}: {problem}; a candidate that assumes "
                               f"{' and '.join(case.in_place)} never overlap says so")
        self.cases = [c for c in self.cases if c.origin != "twin" and id(c) not in gone]
        return dropped

    def _in_place_differs(self, case: Case, twin: Case) -> str | None:
        """Whether the baseline's outputs of ``case`` differ from its twin's: the written
        buffer made one with an input, or (two read-only inputs made one) every output."""
        target = case.in_place[1]
        shared = next(s for s in case.slots if target in s.params)
        targets = [target] if shared.written else \
            [s.params[0] for s in case.slots if s.written]
        for name in targets:
            number = next(n for n, s in enumerate(case.slots) if name in s.params)
            apart = next(n for n, s in enumerate(twin.slots) if name in s.params)
            slot = case.slots[number]
            if compare(name, twin.expected[apart], slot.view_of(case.expected[number], name),
                       self._tolerance(slot)):
                return "the baseline gives another result in place than out of place"
        if case.returned != twin.returned:
            return "the baseline gives another result in place than out of place"
        return None

    def shared_buffers(self) -> set[frozenset[str]]:
        """Pairs of pointer parameters some verifying case passes as one buffer (aliased
        or overlapping, recorded or derived): a candidate is checked with them together."""
        return {frozenset((a, b)) for case in self.verifying() if not case.offset
                for slot in case.slots for a in slot.params for b in slot.params if a < b}

    def learn(self, case: Case, run_batch, output_only: bool = True) -> None:
        """What the baseline produces on ``case``; ``run_batch`` runs the baseline (see
        :meth:`verify`). Raises ReferenceError when the baseline cannot be trusted on it (out
        of bounds, not deterministic, or not the recording). ``output_only``: also find
        which written buffers it only writes (two more runs each), so that a candidate's
        runs fill them with poison; without, every buffer holds its input (a slow-path
        probe's timed runs, as production calls it)."""
        # runs in two round trips, not one each (a round trip costs more than most runs):
        # the two plain runs, then, once they hold up, the poisoned ones; on even guard
        # seeds, whose buffers are not fenced (see buffers)
        flush = self.flush and output_only and case.origin != "workload"
        reply, second, *flushed = run_batch([(case, {}, 2), (case, {}, 4)] + (
            [(case, {}, 2, False, False, True)] if flush else []))
        first = self._outputs(case, reply, 2)
        again = self._outputs(case, second, 4)
        for number in first:
            if first[number].tobytes() != again[number].tobytes():
                raise ReferenceError(f"the baseline gives different outputs on two runs of "
                                     f"{case.label} (it reads memory it does not own, or is "
                                     "not deterministic)")
        if case.empty and any(not _same_bits(first[n], case.slots[n].values) for n in first):
            raise ReferenceError(_writes_on_empty_call(case))
        if case.recording is not None:
            for number, actual in first.items():
                slot = case.slots[number]
                for name in slot.params:
                    recorded = case.recording.outputs.get(name)
                    problem = recorded is not None and compare(
                        name, recorded, slot.view_of(actual, name), self._tolerance(slot))
                    if problem:
                        raise ReferenceError(
                            f"the baseline does not reproduce {case.label}: {problem}; the "
                            "recording is stale or the kernel is not deterministic. Record "
                            "again with `pytest --r3-record`.")
        probed = [] if case.after or not output_only else \
            [n for n, slot in enumerate(case.slots) if slot.written]
        replies = iter(run_batch([(case, {str(number): seed}, 6) for number in probed
                                  for seed in PROBE_SEEDS]) if probed else [])
        for number in probed:
            slot = case.slots[number]
            probes, others_unmoved = [], True
            for _ in PROBE_SEEDS:
                probe_reply = next(replies)
                written = self._outputs(case, probe_reply, 6)
                probes.append(written[number])
                others_unmoved &= _reads_none_of(number, written, first, probe_reply[0],
                                                 reply[0])
            kept = _equal_elements(probes[0], probes[1])
            poison = [poison_for(slot.values, seed) for seed in PROBE_SEEDS]
            untouched_hold_poison = all(
                _equal_elements(p, q)[~kept].all() for p, q in zip(probes, poison, strict=True))
            if case.empty:
                _check_empty_call(case, slot, untouched_hold_poison and not kept.any())
                case.output_only.add(number)  # a candidate's runs: poison it must leave
                case.written_mask[number] = np.zeros(slot.values.shape, dtype=bool)
                continue
            if kept.any() and untouched_hold_poison and others_unmoved and \
                    _equal_elements(probes[0], first[number])[kept].all():
                case.output_only.add(number)
                case.written_mask[number] = None if kept.all() else kept
        case.expected = first
        case.returned = reply[0].get("returned")
        if flushed:
            self._learn_flushed(case, flushed[0])
        in_out = [n for n, s in enumerate(case.slots) if s.written and n not in case.output_only]
        case.weak = bool(in_out) and not case.after and not case.output_only and all(
            _same_bits(case.expected[n], case.slots[n].values) for n in in_out)

    def _learn_flushed(self, case: Case, reply) -> None:
        """The baseline's outputs on ``case`` with flush-to-zero and denormals-are-zero set
        (``reply``, a run unfenced on guard seed 2): what a candidate launched in that mode
        must give. Where denormals occur they differ from the default mode's; elsewhere the
        default mode's arrays are shared, not copied."""
        flushed = self._outputs(case, reply, 2)
        case.flushed = {number: case.expected[number]
                        if _same_bits(values, case.expected[number]) else values
                        for number, values in flushed.items()}
        case.flushed_returned = reply[0].get("returned")

    def _outputs(self, case: Case, reply, guard_seed: int) -> dict[int, np.ndarray]:
        """Check a baseline run's guards and return its written buffers."""
        data, arrays = reply
        run_outputs = {}
        for number, slot in enumerate(case.slots):
            storage = arrays.get(str(number))
            problem = check_guards(storage, slot.values, guard_seed + number)
            if problem:
                raise ReferenceError(f"the baseline writes out of bounds on {case.label}: "
                                     f"buffer '{slot.name}' {problem}")
            if slot.written:
                run_outputs[number] = split_storage(storage, slot.values).copy()
            elif not _same_bits(split_storage(storage, slot.values), slot.values):
                raise ReferenceError(f"the baseline changes the read-only input "
                                     f"'{slot.name}' on {case.label} (it writes outside its "
                                     "own buffers there)")
        return run_outputs

    # -- judging a candidate ----------------------------------------------------------------
    def check_run(self, case: Case, reply, guard_seed: int, seeds: dict[int, int] | None,
                  kind: str = "mismatch", what: str = "",
                  check_return: bool = True, plain: bool = False,
                  flushed: bool = False) -> None:
        """Raise Rejected unless one candidate run on ``case`` matches the reference.
        ``seeds``: the poison of the buffers the kernel only writes (None: they held their
        recorded values). ``plain``: the run was on buffers laid out as in production.
        ``flushed``: it ran with flush-to-zero set, so the reference is the one learnt so."""
        data, arrays = reply
        label = f"{what}{case.label}"
        for number, slot in enumerate(case.slots):
            storage = arrays.get(str(number))
            if storage is None or storage.dtype != np.uint8:
                raise Rejected("crash", "protocol", f"the worker returned no buffer "
                               f"'{slot.name}' for {label}")
            problem = check_plain(storage, slot.values) if plain else \
                check_guards(storage, slot.values, guard_seed + number)
            if problem:
                raise Rejected(WRONG_OUTPUT, "out_of_bounds",
                               f"out-of-bounds write on {label}: buffer '{slot.name}' {problem}",
                               buffer=slot.name)
            actual = split_plain(storage, slot.values) if plain else \
                split_storage(storage, slot.values)
            if not slot.written:
                if not _same_bits(actual, slot.values):
                    raise Rejected(WRONG_OUTPUT, "modified_input",
                                   f"modified the read-only input '{slot.name}' on {label}",
                                   buffer=slot.name)
                continue
            expected = self._expected(case, number, seeds, flushed)
            problem = compare(slot.name, expected, actual, self._tolerance(slot))
            if problem:
                hint = (" (the buffer was pre-filled with random poison: the candidate must "
                        "write every element the original writes, and no other)"
                        if number in case.output_only and seeds is not None else
                        " (it skips work where its outputs already look computed)"
                        if case.after else "")
                raise Rejected(WRONG_OUTPUT, kind, f"{label}: {problem}{hint}",
                               buffer=slot.name)
        returned = data.get("returned")
        reference = case.flushed_returned if flushed else case.returned
        if check_return and reference is not None:
            if not isinstance(returned, (int, float)) or isinstance(returned, bool):
                raise Rejected("crash", "protocol", f"the worker returned {returned!r} as the "
                               f"return value on {label}")
            problem = compare("return value", np.asarray(reference), np.asarray(returned),
                              Tolerance())
            if problem:
                raise Rejected(WRONG_OUTPUT, kind, f"{label}: {problem}", buffer="return")

    def verify(self, run, cases: list[Case], attempts: int = 2, kind: str | None = None,
               what: str = "", smallest_first: bool = True) -> None:
        """Each case run ``attempts`` times, each with its own random poison and guards, the
        second with every buffer ending against an inaccessible page (buffers.fenced_seed), or
        in about half the runs starting at a page boundary above an inaccessible page
        (buffers.floored_seed);
        every run must match the reference (a second run that does not is nondeterminism).
        ``run`` takes a batch of ``(case, fills, guard_seed)`` and returns the replies."""
        if smallest_first and len(cases) > 2:
            self.verify_smallest(run, cases, kind, what)
        groups: dict[str, list[Case]] = {}  # one batch per kind of case, so a candidate
        for case in cases:                   # that crashes only on derived sizes is still
            groups.setdefault(case.origin, []).append(case)  # named wrong on the others
        for origin, group in groups.items():  # a kept-outputs case has no poison to vary
            self._verify_batches(run, [c for c in group if not c.alone],
                                 1 if origin == "kept" else attempts, kind, what)
        apart: dict[str, list[Case]] = {}  # batches of their own, by what names them
        for case in (c for c in cases if c.alone):
            apart.setdefault(case.alone, []).append(case)
        for name, batch in apart.items():
            try:
                self._verify_batches(run, batch, attempts, kind, what)
            except WorkerDied as died:  # the worker's account is kept, the cases named
                first = died.result.diagnostics[:1] or ["the worker died"]
                named = batch[0].label if len(batch) == 1 else name
                died.result.diagnostics[:1] = [f"{first[0]} (on {named})"]
                raise

    def off_main_thread(self) -> bool:
        """Whether a verifying run launches from a thread other than the worker's main one:
        drawn for each run, half of them, for a kernel that runs on the CPU (a GPU
        backend's context belongs to the thread that made it). Drawn apart from the run's
        layout: tied to the fenced attempt, "am I on the main thread" told a rewrite that
        it was on an unfenced run, and "is a buffer at a page edge" that it was on the
        only runs off the main thread."""
        return self.spec.backend == "cpu" and bool(secrets.randbits(1))

    def verify_smallest(self, run, cases: list[Case] | None = None, kind: str | None = None,
                        what: str = "") -> None:
        """One run on the smallest recording: most wrong candidates are wrong everywhere, and
        the smallest case says so soonest."""
        recorded = [case for case in (self.verifying() if cases is None else cases)
                    if case.origin == "recorded"]
        if recorded:
            self._verify_batches(run, [min(recorded, key=lambda c: c.nbytes)], 1, kind, what)

    def _verify_batches(self, run, cases: list[Case], attempts: int, kind: str | None,
                        what: str) -> None:
        if not cases:
            return
        flushing = self.flushed_attempts(cases, attempts)
        for attempt in range(attempts):
            # the second attempt's buffers end against an inaccessible page (buffers.fenced_seed);
            # on the CPU, about half of the runs of either are made from another thread
            plan = [(case, {n: secrets.randbits(62) for n in case.output_only},
                     secrets.randbits(39) << 1 | attempt % 2, self.off_main_thread(),
                     flushing[id(case)] == attempt)
                    for case in cases]
            try:
                replies = run([(case, case.fills(seeds), guard, False, thread, flush)
                               for case, seeds, guard, thread, flush in plan])
            except WorkerDied as died:
                if died.result.diagnostics:
                    died.result.diagnostics[0] += _crash_hint(
                        attempt, cases, self.spec.backend == "cpu",
                        any(thread for *_, thread, _flush in plan))
                raise
            for (case, seeds, guard, thread, flush), reply in zip(plan, replies, strict=True):
                # a second run disagrees (nondeterminism); but a case's first run in the
                # default mode, after one with flush-to-zero set, is a plain mismatch
                named = kind or ("mismatch" if attempt == 0 or flushing[id(case)] == 0
                                 else "nondeterministic")
                named_here = "stale_output" if case.after and not kind else named
                try:
                    self.check_run(case, reply, guard, seeds, named_here,
                                   what or _run_words(attempt, thread, flush), flushed=flush)
                except Rejected:
                    if flush:
                        self._check_unflushed(run, case, seeds, guard, attempt, thread,
                                              named_here, what)
                    raise

    def _check_unflushed(self, run, case: Case, seeds: dict, guard: int, attempt: int,
                         thread: bool, kind: str, what: str) -> None:
        """``case``, which a candidate failed with flush-to-zero set, run once more in the
        default mode, on the same fills, poison and layout (``seeds``, ``guard``: only the
        mode differs; a candidate wrong only where a buffer lands 8 bytes off a boundary was
        said to be wrong because of the mode when the run again drew another offset): raise
        Rejected if it fails there too, so that a candidate wrong in every mode is not said
        to be wrong because of the mode; else return, and the failure in that mode stands."""
        reply, = run([(case, case.fills(seeds), guard, False, thread, False)])
        self.check_run(case, reply, guard, seeds, kind, what or _run_words(attempt, thread, False))

    def flushed_attempts(self, cases: list[Case], attempts: int) -> dict[int, int]:
        """Which attempt of each case (by ``id``) launches with flush-to-zero and
        denormals-are-zero set (-1: none): one of the first two, drawn per case, so every
        case is judged once in each mode and the modes meet both threads (a kernel wrong
        only under flush-to-zero on the main thread, as a -ffast-math library leaves a
        process, or only on another thread in the default mode, is still seen); none where
        a case is run once, or its reference in that mode was not learnt (see fpmode).
        Kept-output chains, run once each, have a random half of them run in that mode: a
        rewrite that skips work only under flush-to-zero meets a stale output there too."""
        if attempts == 1:
            flushed = _half([case for case in cases if case.after and case.flushed is not None])
            return {id(case): 0 if id(case) in flushed else -1 for case in cases}
        return {id(case): secrets.randbits(1) if case.flushed is not None else -1
                for case in cases}

    def verify_production(self, run, calls: int) -> None:
        """``calls`` launches in a row on buffers laid out as numpy lays out the user's
        arrays (fresh ones each launch, filled as recorded, as a test or an application
        would call the kernel): the many calls of a long-lived process, late in the
        candidate's life (after its timing), where a guard or a call count cannot tell it
        that it is judged. Most launches are on the smallest case, walking through every
        allocation style and order of its buffers (see layout.seed_for); every other case
        that verifies runs once, last, in the next layouts, and with them a random half of
        the kept-output chains (see chains: an output holding an earlier result, next to
        an allocator's header, as a caller reusing its array gives it)."""
        verifying = self.verifying()
        cases = [case for case in verifying if not case.after]
        if not cases or calls <= 0:
            return
        kept = _half([case for case in verifying if case.after])
        smallest = min(cases, key=lambda c: c.nbytes)
        walk = len(layout.STYLES) * min(math.factorial(len(smallest.slots)), layout.MAX_ORDERS)
        plan = [smallest] * max(calls - len(cases), walk) + cases + [
            case for case in verifying if id(case) in kept]
        high = secrets.randbits(40)
        seeds = [layout.seed_for(index, high) for index in range(len(plan))]
        replies = run([(case, {}, seed, True) for case, seed in zip(plan, seeds)])
        for index, (case, reply) in enumerate(zip(plan, replies, strict=True)):
            drawn = layout.draw(seeds[index], len(case.slots)).describe()
            self.check_run(case, reply, 0, None, PRODUCTION,
                           f"buffers laid out as numpy allocates them (production layout: "
                           f"{drawn}), launch {index + 1} of {len(plan)} in a row, on ",
                           plain=True)

    def check_timed(self, case: Case, arrays: dict[int, np.ndarray | None],
                    baseline: dict[int, np.ndarray | None]) -> None:
        """Raise Rejected unless the buffers the candidate wrote on a set of timed input
        values (drawn for that timing, see timed_sets) hold what the baseline writes on
        the same values: a result kept from an earlier launch, or left in the output and
        taken as already computed, is wrong there. Outputs that are NaN or infinite where
        the baseline's are finite say the timed launches worked on values that grew (to
        Inf or NaN), not on values of the recorded kind."""
        for number, actual in arrays.items():
            slot = case.slots[number]
            reference = baseline.get(number)
            for got in (actual, reference):
                if got is None or got.shape != slot.values.shape \
                        or got.dtype != slot.values.dtype:
                    raise Rejected("crash", "protocol", f"the worker returned no timed "
                                   f"buffer '{slot.name}' for {case.label}")
            problem = compare(slot.name, reference, actual, self._tolerance(slot))
            if not problem:
                continue
            if slot.values.dtype.kind in "fc" and \
                    (np.isfinite(reference) & ~np.isfinite(actual)).any():
                raise Rejected(WRONG_OUTPUT, "timed_data",
                               f"the timed launches did not work on the recorded values of "
                               f"{case.label}: {problem}", buffer=slot.name)
            raise Rejected(WRONG_OUTPUT, "timed_output",
                           f"a timed launch (buffers laid out as numpy allocates them: the "
                           f"production layout; input values drawn anew for timing) of "
                           f"{case.label} left other outputs than the original's on the same "
                           f"values: {problem}", buffer=slot.name)

    def _expected(self, case: Case, number: int, seeds: dict[int, int] | None,
                  flushed: bool = False) -> np.ndarray:
        """The reference (the one learnt with flush-to-zero set, for a run in that mode),
        with this run's poison where the baseline writes nothing."""
        expected = (case.flushed if flushed else case.expected)[number]
        mask = case.written_mask.get(number)
        if number not in case.output_only or mask is None or seeds is None:
            return expected
        return np.where(mask, expected, poison_for(case.slots[number].values, seeds[number]))

    def _tolerance(self, slot: planning.Slot) -> Tolerance:
        written = [n for n in slot.params if n in self.tolerances]
        return self.tolerances[written[0]] if written else Tolerance()

    # -- which cases serve what ----------------------------------------------------------------
    def verifying(self) -> list[Case]:
        """Recorded cases (weak ones only alongside a strong one), then the derived ones."""
        recorded = [c for c in self.cases if c.origin == "recorded"]
        strong = [c for c in recorded if not c.weak]
        return (recorded if strong else []) + [
            c for c in self.cases if c.origin in ("fresh", "derived", "kept")]

    def reserve(self) -> list[Case]:
        return [c for c in self.cases if c.origin == "reserve"]

    def timed(self) -> list[Case]:
        """The workloads (the heaviest, by weight times size, up to TIMED_WORKLOADS) when
        there are any; else the largest oracle recordings (test-sized inputs). With
        ``timed_keys`` (one bucket of a specialised kernel) only those recordings count."""
        cases = self.cases
        if self.settings.timed_keys:
            wanted = set(self.settings.timed_keys)
            chosen = [c for c in cases if c.recording is not None and c.recording.key in wanted
                      and c.origin in ("workload", "recorded")]
            cases = chosen or cases
        workloads = [c for c in cases if c.origin == "workload"]
        if workloads:
            heaviest = sorted(workloads, key=lambda c: (-c.weight * c.nbytes, c.label))
            return heaviest[:TIMED_WORKLOADS]
        recorded = [c for c in cases if c.origin == "recorded"]
        by_size = sorted(recorded, key=lambda c: c.nbytes, reverse=True)
        return by_size[: self.settings.timing_recordings]

    def describe(self) -> dict:
        recorded = [c for c in self.cases if c.origin == "recorded"]
        return {
            "recordings": len(recorded),
            "weak": [c.recording.key for c in recorded if c.weak],
            "output_only": sorted({p for c in recorded for n in c.output_only
                                   for p in c.slots[n].params}),
            "timed": [c.recording.key for c in self.timed()],
            "timed_on": "workloads" if any(c.origin == "workload" for c in self.cases)
                        else "test inputs",
            "cases": {origin: sum(1 for c in self.cases if c.origin == origin)
                      for origin in ("recorded", "fresh", "derived", "reserve", "kept",
                                     "workload")},
        }


def _kept_step(label: str, scalars: dict, slots: list, after: list) -> Case:
    return Case(label, "kept", scalars, slots, after=after)


def _half(items: list) -> set[int]:
    """The ``id`` of a random half of ``items`` (rounded up: one of one), drawn per call."""
    order = sorted(items, key=lambda _: secrets.randbits(32))
    return {id(item) for item in order[: (len(order) + 1) // 2]}


def _run_words(attempt: int, thread: bool, flush: bool) -> str:
    """How a reason names verification's run number ``attempt`` (see Judge.verify)."""
    mode = f"{fpmode.FLUSH_TO_ZERO} (as a library built with -ffast-math sets them)"
    if attempt == 0:
        if thread:
            return f"a run {OTHER_THREAD}{' with ' + mode if flush else ''} of "
        return f"a run with {mode} on " if flush else ""
    how = ", ".join(["other poison"] + [OTHER_THREAD] * thread + [mode] * flush)
    return f"a second run ({how}) of "


def _reads_none_of(number: int, outputs: dict[int, np.ndarray], first: dict[int, np.ndarray],
                   data: dict, first_data: dict) -> bool:
    """Whether a run with buffer ``number`` poisoned left every other output and the return
    value as the run on its recorded values did. A buffer the kernel writes only in part can
    still be read where it does not write (a ping-pong stencil reads the border of the array
    it writes, in its next half-step): its poison then reaches the other outputs, and it is
    an input, not an output-only buffer to fill with poison."""
    same_outputs = all(_same_bits(outputs[other], first[other]) for other in first
                       if other != number)
    returned, expected = data.get("returned"), first_data.get("returned")
    same_return = returned == expected or (returned != returned and expected != expected)
    return same_outputs and same_return


def _check_empty_call(case: Case, slot, untouched: bool) -> None:
    """A negative size stays a case only where the baseline writes nothing, told on
    poisoned buffers: on the recorded values, a write of what they already held (zeros over
    a test's ``np.zeros``) would pass unseen, and a candidate's verdict would then depend on
    what the recording's buffer happened to hold."""
    if not untouched:
        raise ReferenceError(_writes_on_empty_call(case, f" (its buffer '{slot.name}', even "
                                                   "where it held the recorded values)"))


def _writes_on_empty_call(case: Case, where: str = "") -> str:
    return (f"the baseline writes on {case.label}{where}: it does not treat it as an empty "
            "call, so what it does there is not defined")


def _equal_elements(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise bitwise equality (NaN payloads included), shaped like ``a``."""
    itemsize = a.dtype.itemsize
    left = np.ascontiguousarray(a).view(np.uint8).reshape(-1, itemsize)
    right = np.ascontiguousarray(b).view(np.uint8).reshape(-1, itemsize)
    return (left == right).all(axis=1).reshape(a.shape)


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether every element of ``a`` has the same bits as in ``b`` (NaN payloads included):
    one pass over the bytes, which a read-only check of a production-sized input needs (the
    per-element mask of :func:`_equal_elements` costs 40x more)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    left = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    right = np.ascontiguousarray(b).reshape(-1).view(np.uint8)
    return bool(np.array_equal(left, right))
