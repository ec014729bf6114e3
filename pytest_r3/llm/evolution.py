"""The outer loop: a model proposes source rewrites, the replay server judges them.

Per generation, every island asks the model for children of parents drawn from its part
of the archive. Requests run in background threads while the main thread evaluates the
answers already in: model wait and evaluation overlap. A child that does not parse,
compile or verify goes back with AutoGuide feedback for up to ``repairs`` rounds (the
answers kept in that conversation are cut to ``kept_answer_chars``, so it cannot grow
without bound). A correct child gets a short inner Nevergrad search over its tunables and
pipeline, and the best setting found is what competes for its archive cell.

A request the model endpoint refuses for a reason only the user can fix (a missing or
refused key, an unknown model, a rejected parameter, an unreachable server) stops the loop
at once: ``EvolutionOutcome.stopped`` says what to change and ``fatal`` is set. Every
answer that could not be used is counted by cause in ``Stats.failures`` (with the
evaluation statuses of rewrites that failed); ``Stats.answer_failures`` has the causes only.
"""

from __future__ import annotations

import time
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field

from ..replay.protocol import Candidate, Result
from ..search.parametrization import SearchSpace
from ..search.results import ResultStore, configuration_key
from ..search.tuner import Budget, Tuner
from .archive import Archive, Elite
from .client import LLMClient, Reply
from .feedback import explain
from .parse import parse_answer
from .prompts import repair_messages, rewrite_messages
from .retrieval import ExampleIndex
from .runlog import RunLog, prompt_key

# why an answer could not be used (Reply.cause, and "unparsable": no usable code in it)
ANSWER_CAUSES = ("auth", "not_found", "bad_request", "rate_limited", "timeout", "connection",
                 "server_error", "context_too_long", "malformed", "empty", "truncated",
                 "unparsable")
CUT_MARKER = "[... {count} characters of this answer cut by pytest-r3 ...]"


@dataclass(frozen=True)
class EvolutionSettings:
    generations: int = 3
    islands: int = 2
    children: int = 2            # requests per island per generation
    repairs: int = 2             # feedback rounds for a failing child
    inner_budget: int = 8        # Nevergrad evaluations for each new correct child
    examples: int = 2            # retrieved examples per prompt
    migrate_every: int = 2
    seed: int = 0
    kept_answer_chars: int = 8000  # an answer kept as context in a repair conversation


@dataclass
class Generation:
    index: int
    best_speedup: float
    wall_seconds: float = 0.0
    model_wait_seconds: float = 0.0
    evaluation_seconds: float = 0.0


@dataclass
class Stats:
    proposed: int = 0            # first answers received
    valid_first_try: int = 0     # correct without any repair
    valid_after_repair: int = 0  # correct after one or more repairs
    parse_failures: int = 0
    failures: dict = field(default_factory=dict)  # cause or status -> count, all attempts
    skipped: list = field(default_factory=list)    # reasons the model gave nothing usable
    examples: dict = field(default_factory=dict)  # cause or status -> its first reason

    @property
    def answer_failures(self) -> dict:
        """Answers that could not be used, by cause (auth, timeout, truncated, ...)."""
        return {k: v for k, v in sorted(self.failures.items()) if k in ANSWER_CAUSES}

    @property
    def rewrite_failures(self) -> dict:
        """Rewrites that were evaluated and failed, by status (compile_error, ...)."""
        return {k: v for k, v in sorted(self.failures.items()) if k not in ANSWER_CAUSES}

    def count(self, kind: str, example: str = "") -> None:
        self.failures[kind] = self.failures.get(kind, 0) + 1
        if example and kind not in self.examples:
            self.examples[kind] = " ".join(example.split())[:200]

    def describe_failures(self) -> str:
        """One line a person reads: each cause or status, its count and its first reason."""
        return "; ".join(f"{kind} {count}" + (f" (first: {self.examples[kind]})"
                                              if kind in self.examples else "")
                         for kind, count in sorted(self.failures.items()))


@dataclass
class Attempt:
    island: int
    parent: Elite
    messages: list[dict]
    round: int = 0               # 0: first answer, 1..: repairs
    slot: str = ""               # generation/island/child: the same prompt asked twice is
                                 # two samples, logged and replayed separately

    def key(self, identity: dict) -> str:
        """The answer's key in the run log: the messages, the slot and ``identity``
        (endpoint, model, temperature)."""
        return prompt_key([*self.messages, {"role": "slot", "content": self.slot}], identity)


@dataclass
class EvolutionOutcome:
    best: Elite | None
    generations: list[Generation]
    stats: Stats
    archive: list[dict]
    stopped: str = ""            # why the loop ended early (one line), "" if it did not
    fatal: bool = False          # stopped for a reason only the user can fix (see stopped)


class Evolution:
    def __init__(self, *, kernel: str, entry: str, source: str, source_hash: str, context: str,
                 servers: list, client: LLMClient, space: SearchSpace, store: ResultStore,
                 log: RunLog, examples: ExampleIndex, start: Elite,
                 settings: EvolutionSettings = EvolutionSettings()) -> None:
        self.kernel = kernel
        self.entry = entry
        self.source = source
        self.source_hash = source_hash
        self.context = context
        self.servers = servers
        self.client = client
        self.space = space
        self.store = store
        self.log = log
        self.examples = examples
        self.settings = settings
        self.archive = Archive(settings.islands, settings.seed)
        for island in range(settings.islands):
            self.archive.add(island, start)
        self.stats = Stats()
        self.stopped = ""
        self.identity = client.identity

    def _stop(self, reason: str) -> None:
        if not self.stopped:
            self.stopped = reason
            self.log.event("stopped", reason=reason)

    # -- model requests -----------------------------------------------------------------
    def _ask(self, attempt: Attempt) -> Future | None:
        key = attempt.key(self.identity)
        if key in self.log.answers:  # resuming: the same prompt was answered before
            self.log.event("prompt", key=key, island=attempt.island, round=attempt.round,
                           messages=attempt.messages)
            future: Future = Future()
            future.set_result(Reply(True, self.log.answers[key], reason="from the run log"))
            return future
        if self.client.fatal:
            self._stop(self.client.fatal)
            return None
        why_not = self.client.budget_left()
        if why_not:
            self.stats.skipped.append(why_not)
            return None
        self.log.event("prompt", key=key, island=attempt.island, round=attempt.round,
                       messages=attempt.messages)
        return self.client.submit(attempt.messages)

    def _first_attempt(self, island: int, slot: str) -> Attempt | None:
        parent = self.archive.sample_parent(island)
        if parent is None:
            return None
        inspirations = [(e.summary, e.source)
                        for e in self.archive.inspirations(island, parent)]
        examples = self.examples.top(parent.source + " " + parent.summary,
                                     self.settings.examples)
        messages = rewrite_messages(self.context, parent.source, parent.summary, inspirations,
                                    examples)
        return Attempt(island, parent, messages, slot=slot)

    # -- evaluation ----------------------------------------------------------------------
    def _evaluate(self, candidate: Candidate) -> Result:
        key = configuration_key(self.source_hash, candidate.key())
        stored = self.store.reusable(key, self.settings.seed)
        if stored is not None:
            return stored
        result = self.servers[0].evaluate(candidate)
        self.store.add(key, candidate.as_dict(), result.as_dict(), self.settings.seed)
        return result

    def _inner_search(self, source: str) -> tuple[dict, dict, Result | None]:
        """Best tunables and pipeline for a new correct rewrite (a short Nevergrad run)."""
        if self.settings.inner_budget <= 0:
            return {}, {}, None
        tuner = Tuner(self.kernel, self.source_hash, self.space, self.servers, self.store,
                      budget=Budget(evaluations=self.settings.inner_budget),
                      seed=self.settings.seed, source_text=source, confirm_top=1)
        outcome = tuner.run()
        if outcome.best_candidate is None:
            return {}, {}, None
        best = outcome.best_candidate
        return best.macros, best.pipeline, outcome.best_result

    def _handle(self, attempt: Attempt, reply: Reply, generation: int) -> Attempt | None:
        """Judge one answer; return a repair attempt when one should follow."""
        key = attempt.key(self.identity)
        if reply.cause == "not_sent":  # queued when a fatal failure stopped the client
            return None
        if attempt.round == 0:
            self.stats.proposed += 1
        if not reply.ok:
            self.log.event("answer_failed", key=key, cause=reply.cause, reason=reply.reason,
                           attempts=reply.attempts, seconds=reply.seconds)
            self.stats.count(reply.cause or "model", reply.reason or "")
            if reply.fatal:
                self._stop(reply.reason)
            return None
        if reply.reason != "from the run log":
            self.log.remember_answer(key, reply.text, **self.identity)
        self.log.event("answer", key=key, text=reply.text, seconds=reply.seconds)
        parsed = parse_answer(reply.text, attempt.parent.source, self.entry)
        if parsed.source is None:
            self.stats.parse_failures += 1
            self.stats.count("unparsable", parsed.reason)
            feedback = f"COULD NOT USE THE ANSWER: {parsed.reason}."
            self.log.event("diagnostic", key=key, feedback=feedback)
            return self._repair(attempt, reply.text, feedback)
        candidate = Candidate(source_text=parsed.source,
                              label=f"{self.kernel} gen {generation} island {attempt.island}")
        result = self._evaluate(candidate)
        feedback = explain(result, attempt.parent.speedup)
        self.log.event("result", key=key, status=result.status, feedback=feedback,
                       result=result.as_dict())
        if not result.ok:
            self.stats.count(result.status, next(iter(result.diagnostics), ""))
            return self._repair(attempt, reply.text, feedback)
        if attempt.round == 0:
            self.stats.valid_first_try += 1
        else:
            self.stats.valid_after_repair += 1
        speedup = result.timing.speedup if result.timing is not None else 1.0
        macros, pipeline, tuned = self._inner_search(parsed.source)
        if tuned is not None and tuned.timing is not None and tuned.timing.speedup > speedup:
            speedup = tuned.timing.speedup
        else:
            macros, pipeline = {}, {}
        elite = Elite(parsed.source, 1.0 / speedup, speedup, macros, pipeline, generation,
                      f"{speedup:.2f}x the original")
        added = self.archive.add(attempt.island, elite)
        self.log.event("elite" if added else "not_elite", key=key, speedup=speedup,
                       macros=macros, pipeline=pipeline)
        return None

    def _repair(self, attempt: Attempt, answer: str, feedback: str) -> Attempt | None:
        if attempt.round >= self.settings.repairs or self.stopped:
            return None
        kept = keep_answer(answer, self.settings.kept_answer_chars)
        return Attempt(attempt.island, attempt.parent,
                       repair_messages(attempt.messages, kept, feedback), attempt.round + 1,
                       attempt.slot)

    # -- the loop ------------------------------------------------------------------------
    def run(self) -> EvolutionOutcome:
        generations: list[Generation] = []
        for index in range(1, self.settings.generations + 1):
            if self.stopped:
                break
            started = time.perf_counter()
            wait_before = self.client.usage.wait_seconds
            evaluation = 0.0
            pending: dict[Future, Attempt] = {}
            for island in range(self.settings.islands):
                for child in range(self.settings.children):
                    attempt = self._first_attempt(island, f"g{index}-i{island}-c{child}")
                    future = self._ask(attempt) if attempt else None
                    if future is not None:
                        pending[future] = attempt
            if not pending:
                self._stop("; ".join(sorted(set(self.stats.skipped))) or "nothing to ask")
                break
            while pending:
                done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
                for future in done:
                    attempt = pending.pop(future)
                    eval_started = time.perf_counter()
                    follow_up = self._handle(attempt, future.result(), index)
                    evaluation += time.perf_counter() - eval_started
                    if follow_up is not None:
                        repair = self._ask(follow_up)
                        if repair is not None:
                            pending[repair] = follow_up
            if index % self.settings.migrate_every == 0:
                self.archive.migrate()
            best = self.archive.best()
            generation = Generation(index, best.speedup if best else 1.0,
                                    time.perf_counter() - started,
                                    self.client.usage.wait_seconds - wait_before, evaluation)
            generations.append(generation)
            self.log.event("generation", **generation.__dict__)
        return EvolutionOutcome(self.archive.best(), generations, self.stats,
                                self.archive.cells(), self.stopped,
                                fatal=bool(self.client.fatal))


def keep_answer(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters, its head and (longer) tail kept around a
    marker: the code of an answer usually comes last."""
    if len(text) <= limit:
        return text
    head = limit // 4
    tail = limit - head
    return (f"{text[:head]}\n{CUT_MARKER.format(count=len(text) - limit)}\n"
            f"{text[len(text) - tail:]}")
