"""Compiler-feedback repair (docs/search.md, "Repair"): what whole and hybrid search need to revise a failed proof
with Lean's own messages.

    settings = RepairSettings(rounds=1, message_tokens=512, fmt=PromptFormat.PLAIN_REPAIR)
    messages = compile_messages(proof, tactics, name, verdict.result)     # whole mode (None: nothing to say)
    goal = await goal_at(lean, root_id, root_state, tactics, messages)    # the goal at the first error
    feedback = cap_messages(messages, join_tactics(tactics, indent=""), settings.message_tokens, goal)
    feedback = tactic_feedback(tactics, failing, error, goal, settings.message_tokens)   # hybrid mode
    prompt = settings.prompt(declaration, header, feedback, round_=0)

`repair_context_problem` is the check before work (`burnqed search` and `eval` once the policy is up, `burnqed render`
with the served model's context from the configuration): the longest repair prompt the configuration can build and
the revision's tokens must fit the model's context.

A whole proof's messages come from its compile (`frontend.process`): the errors and warnings of the units before
`#print axioms` (the header's and the theorem's), their lines mapped onto the proof's body by the compile text's
layout (`soundness.body_line`), their columns less the body's indentation; a message on the declaration is at line 0
(the theorem's `:= by`). A hybrid attempt fails at one tactic (`goal.tactic`): its error is placed at that tactic's
first line, and the goal at the first error is the state the tactic was tried in. Both are capped by the same rule
(`burnqed.text.feedback.cap_messages`). Whole search asks Lean for the goal at the first error by replaying, from the
theorem's start, the top-level tactics before the one the first error in the body is in (each a counted Lean
request; an error on the declaration, Lean's `unsolved goals` at `by`, decides nothing: `failing_tactic`); a step
that fails there (whole-file and tactic-by-tactic elaboration can differ) leaves the goal out.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass

from burnqed.errors import LeanError, LeanStartError
from burnqed.lean.env import LeanEnv
from burnqed.lean.soundness import body_line, compile_text
from burnqed.policy.base import Completion, Policy, Sampling, Seeds, ask
from burnqed.records import CompileResult, Edge, TacticKind, pretty_state
from burnqed.text.completion import join_tactics
from burnqed.text.feedback import Feedback, FeedbackMessage, cap_messages
from burnqed.text.prompt import BLOCK_INDENT, PromptFormat, build_repair_prompt, stop_strings

_SHOWN = ("error", "warning")


@dataclass(frozen=True, slots=True)
class RepairSettings:
    """`search.repair_rounds` and `search.repair_message_tokens`, and the repair format of the search's family."""

    rounds: int = 0  # revisions per failed attempt, one after the other (0: no repair, today's search)
    message_tokens: int = 512  # the cap on Lean's messages and the goal a repair prompt shows (burnqed.text.feedback)
    fmt: PromptFormat = PromptFormat.PLAIN_REPAIR
    cut: bool = False  # search.repair_cut_at_error: show a failed proof only up to the tactic its first error is in

    @property
    def on(self) -> bool:
        return self.rounds > 0

    def prompt(self, declaration: str, header: str | None, feedback: Feedback, round_: int) -> str:
        return build_repair_prompt(self.fmt, declaration, header, feedback, round_=round_)


async def request_revisions(policy: Policy, repair: RepairSettings, declaration: str, header: str | None,
                            failures: Sequence[tuple[Edge, Feedback]], sampling: Sampling, seeds: Seeds | None,
                            time_left: float) -> tuple[list[list[Completion]] | None, float]:
    """One repair round's request: a repair prompt per failed proof (its row, which says its place in its chain,
    and its feedback), one sample each, in one policy call within `time_left` seconds. The answers, None when the time
    ran out, and the seconds waited for the policy."""
    prompts = [repair.prompt(declaration, header, feedback, edge.revision) for edge, feedback in failures]
    asked = dataclasses.replace(sampling, n=1, stop=stop_strings(repair.fmt))
    started = time.perf_counter()
    try:
        async with asyncio.timeout(max(time_left, 0.0)):
            answers = await ask(policy, prompts, asked, seeds)
    except TimeoutError:
        return None, time.perf_counter() - started
    return answers, time.perf_counter() - started


def repair_prompt_tokens(fmt: PromptFormat, proof_tokens: int, message_tokens: int) -> int:
    """The tokens of the longest repair prompt a configuration builds, less the theorem's own text (its declaration
    and header, which each theorem brings): the format's own text (counted in UTF-8 bytes, which no byte-level
    tokenizer encodes in more tokens), the failed proof at the token limit it was generated under, Lean's messages
    and the goal at their cap. A hybrid attempt's path before its completion, and a theorem's text, come on top: a
    prompt they make too long is refused alone at run time (docs/search.md, "Prompts too long for the model")."""
    empty = build_repair_prompt(fmt, "", None, Feedback("", ()))
    return len(empty.encode("utf-8")) + proof_tokens + message_tokens


def repair_context_problem(fmt: PromptFormat, proof_tokens: int, message_tokens: int,
                           context: int | None) -> str | None:
    """Why no repair prompt of this configuration could be answered within the model's `context` (tokens), with
    the revision's `proof_tokens` new tokens; None when it fits or the context is unknown."""
    prompt = repair_prompt_tokens(fmt, proof_tokens, message_tokens)
    need = prompt + proof_tokens
    if context is None or need < context:
        return None
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
    print_start = compile_text(proof, name).print_start
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
    such tactic or a step does not replay (module docstring)."""
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
