"""Compiler-feedback repair (docs/search.md, "Repair"): the repair rounds of whole and hybrid search, what a repair
prompt shows of a failed proof, and the check that repair prompts fit the model's context.

    await revise(search, failures, sampling, seed, check)    # the rounds, after an engine's batch of attempts
    messages = compile_messages(proof, tactics, name, verdict.result)     # whole mode (None: nothing to say)
    goal = await goal_at(lean, root_id, root_state, tactics, messages)    # the goal at the first error
    feedback = cap_messages(messages, join_tactics(tactics, indent=""), settings.message_tokens, goal)
    feedback = tactic_feedback(tactics, failing, error, goal, settings.message_tokens)   # hybrid mode
    prompt = repair_prompt(settings.fmt, theorem, declaration, feedback, edge.revision, answer)   # what is sent
    if sends_repair_prompts(cfg.search):                                   # before work
        problem = repair_context_problem(cfg.search, cfg.policy, context)
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from burnqed.errors import LeanError, LeanStartError
from burnqed.lean.env import LeanEnv
from burnqed.lean.soundness import body_line, compile_text
from burnqed.policy.base import Completion, Sampling, ask, context_problem
from burnqed.records.enums import SearchMode
from burnqed.records.replies import CompileResult, TacticKind, pretty_state
from burnqed.records.results import Edge
from burnqed.records.theorem import Theorem
from burnqed.search.answer import AnswerSlot
from burnqed.search.skeleton import EngineCore, ask_within
from burnqed.search.usage import CountingLean
from burnqed.text.completion import join_tactics
from burnqed.text.feedback import Feedback, FeedbackMessage, cap_messages
from burnqed.text.prompt import BLOCK_INDENT, PromptFormat, build_repair_prompt, repair_format, stop_strings

if TYPE_CHECKING:
    from burnqed.config import PolicyConfig, SearchConfig

_SHOWN = ("error", "warning")


@dataclass(frozen=True, slots=True)
class RepairSettings:
    """`search.repair_rounds` and `search.repair_message_tokens`, and the repair format of the search's family."""

    rounds: int = 0  # revisions per failed attempt, one after the other (0: no repair)
    message_tokens: int = 512  # the cap on Lean's messages and the goal a repair prompt shows (burnqed.text.feedback)
    fmt: PromptFormat = PromptFormat.PLAIN_REPAIR
    cut: bool = False  # search.repair_cut_at_error: show a failed proof only up to the tactic its first error is in

    @property
    def on(self) -> bool:
        return self.rounds > 0


@dataclass(frozen=True, slots=True)
class Failure:
    """An attempt that failed with Lean's messages: the row holding its feedback, what a repair prompt shows of it,
    and its position in the sample order."""

    edge: Edge
    feedback: Feedback
    position: int
    answer: str | None = None  # the answer the attempt gave an open answer slot (kept by a revision that gives none)


class RepairLimits(Protocol):
    """The settings of a search that repairs (`WholeSettings`, `HybridSettings`) that its repair rounds obey."""

    @property
    def max_proofs(self) -> int: ...
    @property
    def stop_at_first(self) -> bool: ...
    @property
    def timeout_s(self) -> float: ...
    @property
    def repair(self) -> RepairSettings: ...


class Repairing(Protocol):
    """A search that repairs (`WholeSearch`, `HybridSearch`): what `revise` reads, and the counters it adds to. Of
    its `core` it reads the theorem, declaration and policy and adds to the proofs' limits, the meter, the refusals
    (every prompt the policy refused, its reason: `rejected_prompts`) and the waits (where the policy's time is
    booked)."""

    @property
    def settings(self) -> RepairLimits: ...
    @property
    def core(self) -> EngineCore[CountingLean]: ...

    sampled: int  # proofs sampled (the budget): every revision is one
    repaired: int  # fresh attempts revised (repair chains started)
    revisions: int  # revisions sampled


def past_limits(search: Repairing) -> bool:
    """A proof was found (stop_at_first) or the time is up: what is sampled now is counted, not checked."""
    settings, core = search.settings, search.core
    return (settings.stop_at_first and core.proofs.found()) or core.meter.elapsed() >= settings.timeout_s


async def revise(search: Repairing, failures: list[Failure], sampling: Sampling,
                 seed: Callable[[Failure, int], int] | None,
                 check: Callable[[Completion, float, Failure], Awaitable[Failure | None]]) -> None:
    """The repair rounds after a batch of attempts (docs/search.md, "Repair"). Each round, until the search is past
    its limits or its budget: one repair prompt per failed attempt, in their order, as many as the budget has left,
    in one policy request within the time left (`sampling` with one sample each, seeded `seed(failure, round)`); each
    revision is one proof sampled, checked by `check` when the search is not past its limits, and the revisions that
    failed again are revised in the next round, up to `repair.rounds`. A repair prompt the policy refused ends its
    chain, its reason added to the search's `core.refusals`."""
    settings, core = search.settings, search.core
    repair = settings.repair
    for round_ in range(1, repair.rounds + 1):
        if not failures or past_limits(search) or search.sampled >= settings.max_proofs:
            return
        asked = dataclasses.replace(sampling, n=1, stop=stop_strings(repair.fmt))
        batch = failures[: settings.max_proofs - search.sampled]
        prompts = [repair_prompt(repair.fmt, core.theorem, core.declaration, failure.feedback, failure.edge.revision,
                                 failure.answer) for failure in batch]
        seeds = None if seed is None else [[seed(failure, round_)] for failure in batch]
        answer = await ask_within(core, settings.timeout_s, functools.partial(ask, core.policy, prompts, asked, seeds))
        if answer is None:
            return
        gen_ms = answer.seconds * 1000 / len(batch)
        failures = []
        for index, (failure, _) in enumerate(zip(batch, answer.asked, strict=True)):  # one answer a prompt asked
            if answer.refusal(index) is not None:  # recorded: a refused revision ends only its chain
                continue
            for completion in answer.take(index):  # each one's tokens counted as it is taken
                search.sampled += 1
                search.revisions += 1
                search.repaired += failure.edge.revision == 0
                if not past_limits(search):
                    revised = await check(completion, gen_ms, failure)
                    if revised is not None:
                        failures.append(revised)
                core.meter.reach(search.sampled)


def repair_prompt(fmt: PromptFormat, theorem: Theorem, declaration: str | None, feedback: Feedback, round_: int,
                  answer: str | None = None) -> str:
    """The prompt a failed proof of `theorem` is revised with (`fmt` a repair format): `declaration` as the theorem's
    whole prompt shows it, `feedback` the failed proof and Lean's messages on it as the trajectory row records them,
    `round_` its place in its repair chain (the row's `revision`), `answer` the failed attempt's for an open answer
    slot (`text.prompt.build_repair_prompt`). The one place it is built: `revise` sends it, and the RL stage serves
    it (`rl.reward.LeanReward`)."""
    return build_repair_prompt(fmt, declaration or "", theorem.header, feedback, round_=round_,
                               slot=AnswerSlot(theorem).name,
                               answer=answer)


def repair_prompt_tokens(fmt: PromptFormat, proof_tokens: int, message_tokens: int) -> int:
    """The tokens of the longest repair prompt a configuration builds, less the theorem's own text (its declaration
    and header, which each theorem brings): the format's own text (counted in UTF-8 bytes, which no byte-level
    tokenizer encodes in more tokens), the failed proof at the token limit it was generated under, Lean's messages
    and the goal at their cap. A hybrid attempt's path before its completion, and a theorem's text, come on top: a
    prompt they make too long is refused alone at run time (docs/search.md, "Prompts too long for the model")."""
    empty = build_repair_prompt(fmt, "", None, Feedback("", ()))
    return len(empty.encode("utf-8")) + proof_tokens + message_tokens


def sends_repair_prompts(search: SearchConfig, modes: Iterable[SearchMode] = ()) -> bool:
    """Whether the searches of `search.mode` (and of `modes`: eval's) send repair prompts: repair is on and one of
    them is a whole or hybrid search."""
    return search.repair_rounds > 0 and any(mode != SearchMode.STEP for mode in (search.mode, *modes))


def repair_context_problem(search: SearchConfig, policy: PolicyConfig, context: int | None) -> str | None:
    """Why the longest repair prompt of this configuration (`repair_prompt_tokens` in `repair_format`), with the
    revision's search.proof_max_tokens new tokens, does not fit the model's `context` (SGLang's rule,
    `policy.base.context_problem`); None when it fits or the context is unknown. The check before work of a
    configuration that `sends_repair_prompts`: `burnqed search` and `eval` with the served model's context,
    `burnqed render` with the sidecar's."""
    fmt = repair_format(policy.prompt_format, cot=policy.cot)
    proof_tokens, message_tokens = search.proof_max_tokens, search.repair_message_tokens
    prompt = repair_prompt_tokens(fmt, proof_tokens, message_tokens)
    if context is None or context_problem(prompt, proof_tokens, context) is None:
        return None
    need = prompt + proof_tokens
    return (f"search.repair_rounds: the longest repair prompt this configuration builds ({prompt} tokens: the failed "
            f"proof at search.proof_max_tokens {proof_tokens}, Lean's messages at search.repair_message_tokens "
            f"{message_tokens}, {fmt}'s own text {prompt - proof_tokens - message_tokens}) and the revision's "
            f"{proof_tokens} new tokens need {need} tokens; the model's context is {context}: lower "
            "search.proof_max_tokens or search.repair_message_tokens, serve a longer context, or set "
            "search.repair_rounds = 0")


def compile_messages(proof: str, tactics: Sequence[str], name: str,
                     result: CompileResult | None) -> list[FeedbackMessage] | None:
    """Lean's messages on a whole proof that did not verify, mapped onto its body (`join_tactics(tactics, indent="")`);
    None when the compile gave no error on the proof (nothing to revise with: an axiom or recheck failure, a reply
    without units, no compile at all)."""
    first = body_line(proof, tactics) if result is not None else None
    if result is None or first is None:
        return None
    end = first + join_tactics(tactics, indent="").count("\n")
    print_start = compile_text(proof, name, index_header=None).print_start  # only where `#print axioms` starts
    messages: list[FeedbackMessage] = []
    for unit in result.units:
        if unit.start >= print_start:
            continue
        for message in unit.messages:
            if message.severity not in _SHOWN:
                continue
            line: int | None = None
            column: int | None = None
            if message.line is not None and first <= message.line <= end:
                line = message.line - first + 1
                column = max((message.column or 0) - len(BLOCK_INDENT), 0)
            elif message.line is not None and message.line < first:
                line = 0  # on the declaration (Lean puts `unsolved goals` at `by`)
            messages.append(FeedbackMessage(message.severity, message.text, line, column))
    return messages if any(m.severity == "error" for m in messages) else None


def tactic_feedback(tactics: Sequence[str], failing: int, error: str, goal: str, budget: int) -> Feedback:
    """A hybrid attempt that failed at `tactics[failing]` (the attempt's whole proof from the theorem's start) with
    Lean's `error`, tried in the state `goal`."""
    line = 1 + sum(len(tactic.strip("\n").split("\n")) for tactic in tactics[:failing])
    body = join_tactics(tactics, indent="")
    return cap_messages([FeedbackMessage("error", error, line, 0)], body, budget, goal)


def unsolved_feedback(tactics: Sequence[str], goal: str, budget: int) -> Feedback:
    """A hybrid attempt whose every tactic succeeded with goals left: Lean's `unsolved goals` at the theorem's `by`."""
    body = join_tactics(tactics, indent="")
    return cap_messages([FeedbackMessage("error", f"unsolved goals\n{goal}", 0, None)], body, budget)


def cut_at_error(tactics: Sequence[str],
                 messages: Sequence[FeedbackMessage]) -> tuple[list[str], list[FeedbackMessage]]:
    """A failed proof up to the top-level tactic its first error in the body is in (`search.repair_cut_at_error`,
    `failing_tactic`), and the messages on what is kept (those on the declaration or without a position too); all of
    it when no error is in a tactic. The failed proofs a step search records end there too."""
    index = failing_tactic(tactics, messages)
    if index is None:
        return list(tactics), list(messages)
    kept = list(tactics[: index + 1])
    last = sum(len(tactic.strip("\n").split("\n")) for tactic in kept)
    return kept, [m for m in messages if m.line is None or m.line <= last]


def failed_proof_feedback(tactics: Sequence[str], messages: Sequence[FeedbackMessage], repair: RepairSettings,
                          goal: str | None) -> Feedback:
    """What a row records of a failed proof with Lean's `messages` on it: the proof (cut at its first error with
    `repair.cut`) and the messages on what is shown, capped at `repair.message_tokens`, with the goal at the error."""
    shown, kept = cut_at_error(tactics, messages) if repair.cut else (list(tactics), list(messages))
    return cap_messages(kept, join_tactics(shown, indent=""), repair.message_tokens, goal)


def failing_tactic(tactics: Sequence[str], messages: Sequence[FeedbackMessage]) -> int | None:
    """The index of the top-level tactic the first error in the proof's body (in position order) is in; None when
    no error is in a tactic. An error on the declaration (line 0) decides nothing: Lean recovers from an error in a
    `·` block or a nested `by` and goes on, and puts `unsolved goals` at the theorem's `by` for the goals the body
    left open, beside the body's error."""
    lines = [m.line for m in messages if m.severity == "error" and m.line is not None and m.line >= 1]
    if not lines:
        return None
    line, start = min(lines), 1
    for index, tactic in enumerate(tactics):
        size = len(tactic.strip("\n").split("\n"))
        if start <= line < start + size:
            return index
        start += size
    return None


async def goal_at(lean: LeanEnv, root: int, root_state: str, tactics: Sequence[str],
                  messages: Sequence[FeedbackMessage]) -> str | None:
    """The goal Lean has before the tactic the first error in the body is in (`failing_tactic`), by replaying the
    tactics before it from the theorem's start `root` (whose goals print as `root_state`); None when there is no
    such tactic or a step does not replay (whole-file and tactic-by-tactic elaboration can differ)."""
    index = failing_tactic(tactics, messages)
    if index is None:
        return None
    state, shown = root, root_state
    try:
        for tactic in tactics[:index]:
            result = await lean.tactic(state, tactic)
            if result.kind is not TacticKind.SUCCESS or result.state_id is None or not result.goals:
                return None
            state, shown = result.state_id, pretty_state(result.goals)
    except LeanStartError:
        raise
    except LeanError:
        return None
    return shown
