"""Whole-proof search of one theorem (pass@N; docs/search.md, "Whole-proof search" and "Repair").

    outcome = await prove_whole(theorem, lean, policy, WholeSettings(max_proofs=64), guard)

Proofs are sampled from the statement (`build_statement_prompt`) in requests of `sampling.n` until `max_proofs` were
sampled, the time is up or (`stop_at_first`) one verified. Each distinct proof is checked once, in sample order: the
tactic guard, then the compile (`lean.soundness.check_proof_text`), the only evidence a whole proof counts on. With
`settings.repair.rounds` > 0 the proofs of a request that failed with Lean's messages are revised after it
(`search.repair.revise`). The budget unit is proofs sampled; each distinct proof is a row, a child of the root.

    prompt = whole_prompt(theorem, fmt, form)                     # what the policy is sent
    attempt = read_whole(theorem, fmt, completion.text, guard)   # a completion read as whole mode reads it
    verdict = await check_whole(lean, theorem, attempt)           # the compile of an attempt the guard let through

`whole_prompt`, `read_whole` and `check_whole` are the one place a theorem's whole prompt is built and a completion
becomes a counted whole proof: whole search calls them, and so does every other reader of whole completions.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from burnqed.lean.declared_lemmas import FileLemma
from burnqed.lean.env import LeanEnv
from burnqed.lean.guard import TacticGuard, read_off_loop
from burnqed.lean.soundness import Verdict, assemble_proof, check_path, check_proof_text
from burnqed.lean.start import start_theorem
from burnqed.policy.base import Completion, Policy, Sampling, ask, expansion_seeds, sample_seed
from burnqed.records.enums import DeclarationForm, SearchMode
from burnqed.records.replies import first_line, pretty_state
from burnqed.records.results import Edge, EdgeOutcome, FailureReason
from burnqed.records.theorem import Theorem
from burnqed.search.answer import AnswerSlot, read_attempt
from burnqed.search.repair import (
    Failure,
    RepairSettings,
    compile_messages,
    failed_proof_feedback,
    goal_at,
    past_limits,
    revise,
)
from burnqed.search.skeleton import (
    EngineCore,
    Place,
    Proof,
    SearchOutcome,
    Spent,
    ask_within,
    final_result,
    run_search,
)
from burnqed.search.usage import CountingLean
from burnqed.text.completion import extract_completion, join_tactics, normalize_tactic, split_proof
from burnqed.text.prompt import PromptFormat, build_statement_prompt


@dataclass(frozen=True, slots=True)
class WholeSettings:
    """Plain settings of whole mode (built from `SearchConfig` + `PolicyConfig` by `burnqed.stages.search`)."""

    fmt: PromptFormat = PromptFormat.PLAIN_WHOLE
    form: DeclarationForm = DeclarationForm.BINDER  # how the prompts show the theorem's declaration
    sampling: Sampling = field(default_factory=lambda: Sampling(n=8, max_new_tokens=512, stop=("```",)))
    max_proofs: int = 64
    timeout_s: float = 300.0
    stop_at_first: bool = True
    marks: tuple[int, ...] = ()  # budgets (proofs sampled) at which to record what was spent
    seed: int | None = None  # policy.seed: proof k of a theorem samples with `sample_seed(seed, name, 0, k, attempt)`
    attempt: int = 0  # which search of each theorem this is (eval's pass k): part of the seeds
    repair: RepairSettings = field(default_factory=RepairSettings)  # search.repair_*: revisions of failed proofs


class WholeSearch:
    """One theorem's whole-proof search; `run()` once."""

    def __init__(self, theorem: Theorem, lean: LeanEnv, policy: Policy, settings: WholeSettings,
                 guard: TacticGuard) -> None:
        self.core = EngineCore.of(theorem, CountingLean(lean), policy, guard, settings.form,
                                  settings.marks)  # proofs: verified only (only the compile counts a whole proof)
        self.settings = settings
        self.checked: set[str] = set()  # normalised bodies already checked
        self.sampled = 0  # the budget; the proofs' budget
        self.repaired = 0  # fresh proofs revised (repair chains started)
        self.revisions = 0
        self.root_state = ""
        self.root_id = 0

    async def run(self) -> SearchOutcome:
        if self.core.theorem.statement is None:
            return self._finish(FailureReason.START_ERROR, "whole mode needs the theorem's statement (it prompts with "
                                "it and compiles it); this theorem names only a constant to copy")
        return await run_search(self._start, self._loop, self._finish)

    async def _start(self) -> None:
        if not self.core.slot.started:  # each attempt is the theorem with its own answer: compiled whole
            return
        started = time.perf_counter()
        try:
            self.root_id, goals = await start_theorem(self.core.lean, self.core.theorem)
            self.root_state = pretty_state(goals)
        finally:
            self.core.waits.lean_s += time.perf_counter() - started

    async def _loop(self) -> FailureReason | None:
        settings = self.settings
        prompt = whole_prompt(self.core.theorem, settings.fmt, settings.form)
        seed = settings.seed
        revision_seed = None if seed is None else (  # round k's revision of the proof at position p
            lambda failure, round_: sample_seed(seed, self.core.theorem.name, round_, failure.position,
                                                settings.attempt))
        while True:
            stop = self.core.proofs.limit(settings.stop_at_first, self.core.meter.elapsed(), settings.timeout_s,
                                          self.sampled, settings.max_proofs, FailureReason.MAX_PROOFS)
            if stop is not None:
                return stop.reason
            n = min(settings.sampling.n, settings.max_proofs - self.sampled)
            seeds = expansion_seeds(settings.seed, self.core.theorem.name, [0], n, first_sample=self.sampled,
                                    attempt=settings.attempt)
            sampling = dataclasses.replace(settings.sampling, n=n)
            answer = await ask_within(self.core, settings.timeout_s,
                                      functools.partial(ask, self.core.policy, [prompt], sampling, seeds),
                                      places=[Place(0, 1, self.root_state)], new_id=lambda: len(self.core.edges) + 1)
            if answer is None:
                return self.core.proofs.ending(FailureReason.TIMEOUT)
            if answer.refusal() is not None:  # the statement prompt does not fit: every request would be refused
                return self.core.proofs.ending(FailureReason.PROMPT_REJECTED)
            (asked,) = answer.asked
            if not asked:  # asked again, it would answer nothing again
                return self.core.proofs.ending(FailureReason.EXHAUSTED)
            failures = await self._check_all(answer.take(), answer.seconds * 1000 / len(asked))
            await revise(self, failures, settings.sampling, revision_seed,
                         lambda completion, gen_ms, failure: self._check(completion, gen_ms, revises=failure.edge,
                                                                         kept=failure.answer))

    async def _check_all(self, completions: Iterable[Completion], gen_ms: float) -> list[Failure]:
        """Check the request's proofs in sample order; after a verified one (stop_at_first) the rest are only
        counted: they were generated, but a search stopped at the proof never looks at them. The proofs that
        failed with Lean's messages, when repair is on."""
        failures = []
        for completion in completions:  # each one's tokens counted as it is taken
            self.sampled += 1
            if not past_limits(self):
                failure = await self._check(completion, gen_ms)
                if failure is not None:
                    failures.append(failure)
            self.core.meter.reach(self.sampled)
        return failures

    async def _check(self, completion: Completion, gen_ms: float, revises: Edge | None = None,
                     kept: str | None = None) -> Failure | None:
        """Check one proof (a revision of `revises`' proof when given, whose answer was `kept`); the failure when it
        failed with Lean's messages and repair is on."""
        fmt = self.settings.fmt if revises is None else self.settings.repair.fmt
        attempt = await read_off_loop(completion.text, lambda: read_whole(self.core.theorem, fmt, completion.text,
                                                                          self.core.guard, kept=kept))
        answer, tactics = attempt.answer, attempt.tactics
        if not attempt.key.strip("\0") or attempt.key in self.checked:
            return None
        self.checked.add(attempt.key)
        edge = Edge(
            node_id=len(self.core.edges) + 1, parent_id=0, depth=1, state_before=self.root_state, tactic=attempt.body,
            state_after=None, outcome=EdgeOutcome.ERROR, error=None, logprob=completion.logprob,
            n_tokens=completion.n_tokens, score=None, energy=None, lean_ms=0.0, gen_ms=gen_ms,
            timestamp_ms=int(time.time() * 1000),
            revision=0 if revises is None else revises.revision + 1,
            revises=None if revises is None else revises.node_id,
        )
        self.core.edges.append(edge)
        if attempt.refusal is not None:
            edge.outcome, edge.error = EdgeOutcome.REFUSED, first_line(attempt.refusal)
            self.core.proofs.rejected += 1
            return None
        started = time.perf_counter()
        verdict = await check_whole(self.core.lean, self.core.theorem, attempt)
        proof = verdict.proof
        assert proof is not None  # the statement exists (checked in run)
        elapsed = time.perf_counter() - started
        self.core.waits.lean_s += elapsed
        edge.lean_ms = elapsed * 1000
        if verdict.verified:
            edge.outcome, edge.state_after = EdgeOutcome.CLOSED, ""
            self.core.proofs.verified.append(Proof(edge.node_id, proof, tactics, self.sampled, edge.revision, answer))
            return None
        edge.error = f"not counted: {first_line(verdict.reason)}"
        self.core.proofs.rejected += 1
        if not self.settings.repair.on:
            return None
        messages = compile_messages(proof, tactics, self.core.theorem.name, verdict.result)
        if messages is None:
            return None
        goal = None
        if self.core.slot.started:  # an open answer's attempts have no started goal to replay from
            started = time.perf_counter()
            goal = await goal_at(self.core.lean, self.root_id, self.root_state, tactics, messages)
            self.core.waits.lean_s += time.perf_counter() - started
        feedback = failed_proof_feedback(tactics, messages, self.settings.repair, goal)
        edge.feedback = feedback.to_json()
        return Failure(edge, feedback, self.sampled, answer)

    def _finish(self, reason: FailureReason | None, detail: str | None) -> SearchOutcome:
        if not self.core.proofs.verified and reason is FailureReason.PROMPT_REJECTED and self.core.refusals:
            # the statement's prompt (a repair prompt's refusal ends only its chain)
            detail = f"the policy refused the statement prompt: {first_line(self.core.refusals[-1])}"
        result = final_result(self.core, SearchMode.WHOLE, (reason, detail), Spent.of(self.core),
                              proofs_sampled=self.sampled, repaired=self.repaired, revisions=self.revisions)
        return SearchOutcome(result, self.core.edges)


def whole_prompt(theorem: Theorem, fmt: PromptFormat, form: DeclarationForm) -> str:
    """The prompt whole mode samples `theorem`'s proofs from (`fmt` a whole format, `form` how it shows the
    declaration): the statement prompt, or for an open answer the answer prompt, which shows the file with its slot
    open (`text.prompt.build_statement_prompt`)."""
    return build_statement_prompt(fmt, theorem.declaration(form) or "", theorem.header, slot=AnswerSlot(theorem).name)


@dataclass(frozen=True, slots=True)
class WholeAttempt:
    """One completion of a whole prompt, read: its proof body and top-level tactics, the answer it gives an open slot,
    the theorem it is compiled as (the slot filled with that answer), or why it is refused before Lean sees it."""

    body: str  # the proof body as read (the row's tactic)
    tactics: list[str]  # its top-level tactics (a `have … := by` block stays one)
    theorem: Theorem  # what is compiled: the theorem, its open slot filled with `answer`
    answer: str | None = None  # the value it gives the theorem's open answer slot
    refusal: str | None = None  # why it is no proof before Lean sees it (the answer read, the tactic guard)
    # the lemmas the file declares before the theorem (sketch search's lifted holes; `lean.soundness.check_lemmas`
    # read them before the attempt was made)
    lemmas: tuple[FileLemma, ...] = ()

    @property
    def proof(self) -> str | None:
        """The file compiled and stored (`lean.soundness.assemble_proof`); None when the theorem has no statement."""
        return assemble_proof(self.theorem, self.tactics, self.lemmas)

    @property
    def key(self) -> str:
        """What makes two attempts the same proof: the normalised body (and the answer, for an open slot); "" (or
        only the separator) when the completion has no proof."""
        body = normalize_tactic(self.body)
        return body if self.answer is None else f"{' '.join(self.answer.split())}\0{body}"


def read_whole(theorem: Theorem, fmt: PromptFormat, raw: str, guard: TacticGuard, *,
               kept: str | None = None) -> WholeAttempt:
    """The attempt a completion `raw` of a whole or repair prompt (format `fmt`) makes at `theorem`, as whole mode
    reads it: for an open answer the answer and the theorem restated (`search.answer.read_attempt`; `kept`, the answer
    of the attempt a repair revises), else the proof body (`text.completion.extract_completion`); refused when the
    answer is no answer or the guard denies a tactic (`lean.soundness.check_path`), or unread when over the cap
    (`TacticGuard.over_cap`)."""
    over = guard.over_cap(raw)
    if over is not None:
        return WholeAttempt("", [], theorem, None, f"the completion has {over}")
    answer, refusal, compiled = None, None, theorem
    if AnswerSlot(theorem).open:  # the completion writes the answer and the proof (search.answer)
        read = read_attempt(theorem, fmt, raw, guard, kept=kept)
        body, answer, refusal = join_tactics(read.tactics, indent=""), read.answer, read.refusal
        compiled = read.theorem or theorem
    else:
        body = extract_completion(fmt, raw)
    tactics = split_proof(body, split_have=False)
    if refusal is None:
        allowed = check_path(tactics, guard)
        refusal = None if allowed.ok else allowed.reason
    return WholeAttempt(body, tactics, compiled, answer, refusal)


async def check_whole(lean: LeanEnv, theorem: Theorem, attempt: WholeAttempt) -> Verdict:
    """The compile of an attempt at `theorem` that `read_whole` did not refuse: its file (`assemble_proof`) through
    `lean.soundness.check_proof_text` (its shape pinned to `theorem`'s header, the index's, declared, the standard
    axioms only, the kernel recheck). A refused attempt or a theorem without a statement is a failed verdict, never
    compiled."""
    if attempt.refusal is not None:
        return Verdict(False, attempt.refusal)
    proof = attempt.proof
    if proof is None:
        return Verdict(False, "cannot compile: the theorem has no statement to restate")
    return await check_proof_text(lean, theorem.name, proof, index_header=theorem.header,
                                  header=attempt.theorem.header, lemmas=attempt.lemmas)


async def prove_whole(theorem: Theorem, lean: LeanEnv, policy: Policy, settings: WholeSettings,
                      guard: TacticGuard) -> SearchOutcome:
    """Search one theorem in whole mode; never raises for domain failures (they are the result)."""
    return await WholeSearch(theorem, lean, policy, settings, guard).run()
