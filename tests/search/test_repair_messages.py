"""Where Lean's messages on a failed proof land in a repair prompt (docs/search.md, "Repair"): a compile's messages
mapped onto the proof's body (`compile_messages`), the tactic the first error in the body is in (`failing_tactic`),
the cut there and the goal before it, the hybrid feedback; and the repair rounds both engines run (`revise`).

Real Lean's usual shape for a failed proof whose body left goals open is two errors: the body's own, and `unsolved
goals` at the theorem's `by` on the declaration line, spanning the whole body (leanprover-community/repl, test
`incomplete`: `def f (x : Bool) : Nat := by\\n  by_cases x\\n  { apply Nat.succ }` answers `unsolved goals` with
`case pos` at 3:19, the `}`, and with `case neg` at 1:26, the `by`). The declaration's error decides nothing: the
body's error does. These tests pin each rule with exact values; they are also what kills the mutants of
`burnqed/search/repair.py` (scripts/mutation.py), with the repair rounds' rules (`revise`) on a search reduced to
what they read and count."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pytest

from burnqed.config import PolicyConfig, SearchConfig
from burnqed.errors import LeanError, LeanStartError
from burnqed.lean.guard import TacticGuard
from burnqed.lean.inprocess import InProcessReplay
from burnqed.lean.soundness import assemble_proof, body_line, compile_text
from burnqed.lean.start import start_theorem
from burnqed.policy.base import Completion, Sampling, Seeds, refused
from burnqed.records.replies import CompileMessage, CompileResult, CompileUnit, TacticResult, pretty_state
from burnqed.records.results import Edge, EdgeOutcome
from burnqed.records.theorem import Theorem
from burnqed.search.answer import AnswerSlot
from burnqed.search.repair import (
    Failure,
    RepairSettings,
    compile_messages,
    cut_at_error,
    failing_tactic,
    goal_at,
    repair_context_problem,
    repair_prompt_tokens,
    revise,
    tactic_feedback,
    unsolved_feedback,
)
from burnqed.search.root import Root
from burnqed.search.skeleton import EngineCore, Proof
from burnqed.search.usage import CountingLean, UsageMeter
from burnqed.text.feedback import Feedback, FeedbackMessage
from burnqed.text.prompt import PromptFormat, build_repair_prompt
from leankit.corpus import load_corpus
from minilean.replay.replay_server import ReplayServer
from tests.doubles.policy_double import ScriptedPolicy

# The repl test's declaration as a theorem, its body as the top-level tactics, and Lean's two messages on it.
BOOL = Theorem(name="f", signature="(x : Bool) : Nat", header="open Nat")
BOOL_TACTICS = ["by_cases x", "{ apply Nat.succ }"]
CASE_POS = "unsolved goals\ncase pos\nx : Bool\nh✝ : x = true\n⊢ Nat"
CASE_NEG = "unsolved goals\ncase neg\nx : Bool\nh✝ : ¬x = true\n⊢ Nat"


def compiled(theorem: Theorem, tactics: list[str], messages: list[CompileMessage],
             after_print: list[CompileMessage] | None = None) -> tuple[str, CompileResult]:
    """The proof text and a compile result for it: `messages` on the theorem's unit, `after_print` on the
    `#print axioms` unit (which starts where the theorem's ends)."""
    proof = assemble_proof(theorem, tactics)
    assert proof is not None
    text = compile_text(proof, theorem.name, theorem.header)
    units = (CompileUnit(0, text.print_start, tuple(messages)),
             CompileUnit(text.print_start, text.recheck_start, tuple(after_print or ())))
    return proof, CompileResult(units)


def declaration_line(proof: str, tactics: list[str]) -> tuple[int, int]:
    """The compile text's line of the theorem's `:= by` and the column of its `by` (Lean's convention)."""
    first = body_line(proof, tactics)
    assert first is not None
    line = compile_text(proof, "f", None).text.split("\n")[first - 2]
    assert line.endswith(":= by")
    return first - 1, len(line) - 2


def test_real_leans_unsolved_goals_at_by_beside_the_bodys_error_the_body_decides() -> None:
    proof, result = compiled(BOOL, BOOL_TACTICS, [])
    by_line, by_column = declaration_line(proof, BOOL_TACTICS)
    first = by_line + 1
    # As Lean lists them: the body's error first, then the declaration's.
    proof, result = compiled(BOOL, BOOL_TACTICS, [CompileMessage("error", CASE_POS, line=first + 1, column=19),
                                                  CompileMessage("error", CASE_NEG, line=by_line, column=by_column)])
    messages = compile_messages(proof, BOOL_TACTICS, "f", result)
    assert messages == [FeedbackMessage("error", CASE_POS, 2, 17), FeedbackMessage("error", CASE_NEG, 0, None)]
    assert failing_tactic(BOOL_TACTICS, messages) == 1
    assert cut_at_error(BOOL_TACTICS, messages) == (BOOL_TACTICS, messages)
    # In the other order, and with a tactic after the failing one: the same tactic, and the cut drops what follows.
    longer = [*BOOL_TACTICS, "exact 0"]
    flipped = [messages[1], messages[0], FeedbackMessage("error", "unknown tactic", 3, 0)]
    assert failing_tactic(longer, flipped) == 1
    assert cut_at_error(longer, flipped) == (BOOL_TACTICS, flipped[:2])


def test_an_error_on_the_declaration_alone_is_in_no_tactic() -> None:
    alone = [FeedbackMessage("error", CASE_NEG, 0, None), FeedbackMessage("warning", "unused variable", 1, 4)]
    assert failing_tactic(BOOL_TACTICS, alone) is None
    assert cut_at_error(BOOL_TACTICS, alone) == (BOOL_TACTICS, alone)  # nothing to cut at: all of it


# Three top-level tactics, the second three lines long: lines 1, 2-4 and 5 of the body.
TACTICS = ["intro x", "cases x with\n| inl h => simp\n| inr h => omega", "simp"]


@pytest.mark.parametrize(("messages", "index"), [
    ([], None),
    ([FeedbackMessage("error", "e", None, None)], None),  # no position: in no tactic
    ([FeedbackMessage("error", "e", 1, 0)], 0),
    ([FeedbackMessage("error", "e", 2, 2)], 1),  # the first line of a tactic
    ([FeedbackMessage("error", "e", 4, 2)], 1),  # its last line
    ([FeedbackMessage("error", "e", 5, 0)], 2),  # the next tactic's first line
    ([FeedbackMessage("error", "e", 6, 0)], None),  # below the last tactic
    ([FeedbackMessage("error", "late", 5, 0), FeedbackMessage("error", "early", 3, 0)], 1),  # by position
    ([FeedbackMessage("warning", "w", 1, 0), FeedbackMessage("error", "e", 5, 0)], 2),  # a warning decides nothing
    ([FeedbackMessage("information", "i", 1, 0), FeedbackMessage("error", "e", 5, 0)], 2),
    ([FeedbackMessage("error", "unsolved goals", 0, None), FeedbackMessage("error", "e", 5, 0)], 2),
    ([FeedbackMessage("error", "e", None, None), FeedbackMessage("error", "e", 2, 0)], 1),
], ids=["none", "unpositioned", "line-1", "first-line", "last-line", "next-tactic", "below", "position-order",
        "warning-before", "information-before", "declaration-before", "unpositioned-beside"])
def test_the_failing_tactic_is_the_one_the_first_error_in_the_body_is_in(messages: list[FeedbackMessage],
                                                                          index: int | None) -> None:
    assert failing_tactic(TACTICS, messages) == index


def test_the_cut_keeps_the_messages_on_what_it_keeps() -> None:
    messages = [FeedbackMessage("error", "unsolved goals", 0, None), FeedbackMessage("error", "in cases", 4, 2),
                FeedbackMessage("warning", "unused", 5, 0), FeedbackMessage("error", "no position", None, None)]
    assert cut_at_error(TACTICS, messages) == (TACTICS[:2], [messages[0], messages[1], messages[3]])


def test_a_compiles_messages_are_mapped_onto_the_body_and_what_is_not_the_proofs_is_left_out() -> None:
    proof, _ = compiled(BOOL, TACTICS, [])
    by_line, by_column = declaration_line(proof, TACTICS)
    first = by_line + 1
    last = first + 4
    on_theorem = [
        CompileMessage("error", "unsolved goals", line=by_line, column=by_column),  # the declaration: line 0
        CompileMessage("error", "at the start", line=first, column=2),  # the body's first line, column 0
        CompileMessage("warning", "unused h", line=first + 2, column=9),  # kept, its column less the indentation
        CompileMessage("information", "Try this: simp", line=first + 1, column=2),  # not shown
        CompileMessage("error", "no column", line=first + 3, column=None),  # column 0
        CompileMessage("error", "in the margin", line=first + 3, column=1),  # column 0, never negative
        CompileMessage("error", "on the last line", line=last, column=6),
        CompileMessage("error", "no position"),
        CompileMessage("error", "below the body", line=last + 1, column=0),  # no line of the proof
    ]
    after = [CompileMessage("error", "unknown constant 'f'", line=last + 2, column=0)]  # #print axioms: not shown
    proof, result = compiled(BOOL, TACTICS, on_theorem, after)
    assert compile_messages(proof, TACTICS, "f", result) == [
        FeedbackMessage("error", "unsolved goals", 0, None),
        FeedbackMessage("error", "at the start", 1, 0),
        FeedbackMessage("warning", "unused h", 3, 7),
        FeedbackMessage("error", "no column", 4, 0),
        FeedbackMessage("error", "in the margin", 4, 0),
        FeedbackMessage("error", "on the last line", 5, 4),
        FeedbackMessage("error", "no position", None, None),
        FeedbackMessage("error", "below the body", None, None),
    ]


def test_no_messages_when_the_compile_says_nothing_wrong_with_the_proof() -> None:
    proof, _ = compiled(BOOL, TACTICS, [])
    first = declaration_line(proof, TACTICS)[0] + 1
    _, only_after = compiled(BOOL, TACTICS, [CompileMessage("warning", "unused h", line=first, column=2)],
                             [CompileMessage("error", "unknown constant 'f'", line=first + 6, column=0)])
    assert compile_messages(proof, TACTICS, "f", only_after) is None  # a warning, and an error after the proof
    assert compile_messages(proof, TACTICS, "f", None) is None  # no compile
    _, erring = compiled(BOOL, TACTICS, [CompileMessage("error", "e", line=first, column=2)])
    assert compile_messages(proof, TACTICS, "f", erring) == [FeedbackMessage("error", "e", 1, 0)]
    assert compile_messages(proof, ["decide"], "f", erring) is None  # `proof` is not an assembly of these tactics


def test_hybrid_feedback_places_the_error_at_the_failing_tactic_and_unsolved_goals_at_by() -> None:
    goal = "x : ℕ ⊕ ℕ\n⊢ True"
    assert tactic_feedback(TACTICS, 2, "simp made no progress", goal, 512) == Feedback(
        "intro x\ncases x with\n| inl h => simp\n| inr h => omega\nsimp",
        (FeedbackMessage("error", "simp made no progress", 5, 0),), 0, goal)
    assert unsolved_feedback(TACTICS[:1], goal, 512) == Feedback(
        "intro x", (FeedbackMessage("error", f"unsolved goals\n{goal}", 0, None),), 0, None)


def test_a_repair_prompt_and_its_revision_must_fit_below_the_context() -> None:
    """SGLang refuses a prompt whose tokens and max_new_tokens reach the context (burnqed/policy/sglang.py):
    the longest repair prompt and the revision's tokens must stay below it."""
    need = repair_prompt_tokens(PromptFormat.PLAIN_REPAIR, 512, 512) + 512
    search, policy = SearchConfig(repair_rounds=1), PolicyConfig(prompt_format=PromptFormat.PLAIN_TACTIC)
    assert repair_context_problem(search, policy, need + 1) is None
    problem = repair_context_problem(search, policy, need)
    assert problem is not None and f"need {need} tokens; the model's context is {need}:" in problem


# ---------------------------------------------------------------------------- the goal at the first error

class FailingAt(InProcessReplay):
    """The replay server, whose worker fails with `error` when asked `tactic`."""

    def __init__(self, server: ReplayServer, tactic: str, error: LeanError) -> None:
        super().__init__(server)
        self.failing, self.error = tactic, error

    async def tactic(self, state_id: int, tactic: str, goal_id: int | None = None) -> TacticResult:
        if tactic == self.failing:
            raise self.error
        return await super().tactic(state_id, tactic, goal_id)


def goal_on_the_corpus(tactics: list[str], messages: list[FeedbackMessage],
                       failing: tuple[str, LeanError] | None = None) -> str | None:
    """`goal_at` on the replay corpus's `ineq_x_plus_reciprocal_ge_two` (`x : ℝ ⊢ 0 < x → x + 1 / x ≥ 2`), its
    worker failing at `failing[0]` with `failing[1]` when given."""
    corpus = load_corpus()
    spec = corpus.by_name("ineq_x_plus_reciprocal_ge_two")
    assert spec is not None

    async def run() -> str | None:
        server = ReplayServer(corpus)
        lean = InProcessReplay(server) if failing is None else FailingAt(server, *failing)
        root, goals = await start_theorem(lean, Theorem.from_recorded(spec))
        return await goal_at(lean, root, pretty_state(goals), tactics, messages)

    return asyncio.run(run())


def test_the_goal_at_the_first_error_is_replayed_up_to_the_failing_tactic_and_only_then() -> None:
    body_error = FeedbackMessage("error", "linarith failed", 3, 0)
    on_by = FeedbackMessage("error", "unsolved goals", 0, None)
    tactics = ["intro hx", "field_simp", "linarith"]
    # The state `linarith` was tried in: after `intro hx` and `field_simp`, replayed.
    assert goal_on_the_corpus(tactics, [on_by, body_error]) == "x : ℝ\nhx : 0 < x\n⊢ 2 * x ≤ x * x + 1"
    assert goal_on_the_corpus(tactics, [FeedbackMessage("error", "e", 2, 0)]) == "x : ℝ\nhx : 0 < x\n⊢ x + 1 / x ≥ 2"
    # On the declaration alone: no tactic to replay up to (though every tactic would replay).
    assert goal_on_the_corpus(["intro hx", "field_simp"], [on_by]) is None
    # A step before the failing tactic that does not replay (`linarith` fails there): no goal to show.
    assert goal_on_the_corpus(["intro hx", "linarith", "simp"], [FeedbackMessage("error", "e", 3, 0)]) is None
    # The proof closed before the tactic the error is in (`simp`: no goals): no goal to show either.
    closed = ["intro hx", "field_simp", "nlinarith [sq_nonneg (x - 1)]", "simp"]
    assert goal_on_the_corpus(closed, [FeedbackMessage("error", "no goals to be proved", 4, 0)]) is None


def test_the_goals_replay_meeting_a_lean_failure_shows_no_goal_and_a_lean_that_cannot_start_stops_it() -> None:
    at_simp = [FeedbackMessage("error", "e", 3, 0)]
    tactics = ["intro hx", "field_simp", "simp"]
    assert goal_on_the_corpus(tactics, at_simp, ("field_simp", LeanError("the worker died"))) is None
    with pytest.raises(LeanStartError, match="no ready"):
        goal_on_the_corpus(tactics, at_simp, ("field_simp", LeanStartError("no ready. line")))


# ------------------------------------------------------------------------------------------- the repair rounds

CORPUS = load_corpus()
ROUNDS_THEOREM = Theorem(name="t", signature=": True", header="open Nat")


@dataclass(frozen=True)
class Limits:
    """What `revise` reads of a search's settings (`repair.RepairLimits`)."""

    max_proofs: int = 10
    stop_at_first: bool = True
    timeout_s: float = 60.0
    repair: RepairSettings = field(default_factory=lambda: RepairSettings(rounds=2, message_tokens=512))


@dataclass
class Searching:
    """A search that repairs, reduced to what `revise` reads and counts (`repair.Repairing`): its settings, its state
    (`core`: theorem `t`, asked of `policy`, spending on `meter`) and its counters."""

    settings: Limits
    policy: ScriptedPolicy
    sampled: int = 0
    meter: UsageMeter = field(default_factory=lambda: UsageMeter((), CountingLean(InProcessReplay(ReplayServer(
        CORPUS)))))
    repaired: int = 0
    revisions: int = 0
    core: EngineCore[CountingLean] = field(init=False)

    def __post_init__(self) -> None:
        self.core = EngineCore(ROUNDS_THEOREM, AnswerSlot(ROUNDS_THEOREM), "theorem t : True", self.meter.lean,
                               self.policy, TacticGuard(()), None, Root(), "t", self.meter, 0)


class Stopped(UsageMeter):
    """A meter whose clock stands at `seconds`."""

    def __init__(self, seconds: float) -> None:
        super().__init__((), CountingLean(InProcessReplay(ReplayServer(CORPUS))))
        self.seconds = seconds

    def elapsed(self) -> float:
        return self.seconds


def failed(node: int, revision: int, position: int) -> Failure:
    """An attempt that failed at row `node`, at place `revision` of its chain, sampled at `position`."""
    edge = Edge(node_id=node, parent_id=0, depth=1, state_before="⊢ True", tactic=f"wrong {node}", state_after=None,
                outcome=EdgeOutcome.ERROR, error="e", logprob=-1.0, n_tokens=3, score=None, energy=None, lean_ms=0.0,
                gen_ms=0.0, timestamp_ms=0, revision=revision, revises=None)
    return Failure(edge, Feedback(f"wrong {node}", (FeedbackMessage("error", f"e{node}", 1, 0),)), position)


def answering_each() -> ScriptedPolicy:
    """A policy answering the repair prompt of `wrong N` with `fix N` (the prompts kept whole)."""
    return ScriptedPolicy(lambda prompt: [(f"fix {prompt.split('wrong ')[1].split(chr(10))[0]}", -1.0)],
                          key=lambda p: p)


class Checker:
    """`revise`'s check: records each revision (its text, the row it revises, its gen_ms); a revision of a row in
    `again` fails again (a new row, one place further in the chain), one of `proving` is a proof."""

    def __init__(self, search: Searching, again: dict[int, int] | None = None,
                 proving: frozenset[int] = frozenset()) -> None:
        self.search, self.again, self.proving = search, again or {}, proving
        self.calls: list[tuple[str, int, float]] = []

    async def __call__(self, completion: Completion, gen_ms: float, failure: Failure) -> Failure | None:
        node = failure.edge.node_id
        self.calls.append((completion.text, node, gen_ms))
        if node in self.proving:
            self.search.core.proofs.verified.append(Proof(node, "proof", ["fix"], self.search.sampled))
        if node not in self.again:
            return None
        return failed(self.again[node], failure.edge.revision + 1, self.search.sampled)


def by_round_and_position(failure: Failure, round_: int) -> int:
    return 1000 * round_ + failure.position


def rounds(search: Searching, failures: list[Failure], checker: Checker, sampling: Sampling | None = None,
           seed: Callable[[Failure, int], int] | None = by_round_and_position) -> None:
    asyncio.run(revise(search, failures, sampling or Sampling(), seed, checker))


def test_a_repair_round_revises_each_failure_once_in_order_then_those_that_failed_again_within_the_budget() -> None:
    policy = answering_each()
    goedel = RepairSettings(rounds=2, fmt=PromptFormat.DEEPSEEK_REPAIR)  # its prompt says the round
    search = Searching(Limits(max_proofs=5, repair=goedel), policy, sampled=1)
    first = [failed(1, 0, 1), failed(2, 0, 2), failed(3, 1, 3)]
    checker = Checker(search, again={1: 11, 3: 13, 11: 21})
    rounds(search, first, checker, Sampling(n=8, temperature=0.6, max_new_tokens=77, stop=("x",)))
    # Round 1 revises the three; round 2 the two that failed again, as far as the budget goes: one.
    assert [(text, node) for text, node, _ in checker.calls] == [
        ("fix 1\n```", 1), ("fix 2\n```", 2), ("fix 3\n```", 3), ("fix 11\n```", 11)]
    repair = search.settings.repair
    assert policy.calls == [
        [build_repair_prompt(repair.fmt, "theorem t : True", "open Nat", failure.feedback,
                             round_=failure.edge.revision) for failure in first],
        [build_repair_prompt(repair.fmt, "theorem t : True", "open Nat", failed(11, 1, 0).feedback, round_=1)]]
    assert "The proof (Round 1) is not correct." in policy.calls[1][0] and "wrong 11" in policy.calls[1][0]
    # One sample each, the repair format's stop strings, the rest of the search's sampling; the seed of round k's
    # revision of the failure at position p.
    stop = ("```", "<｜end▁of▁sentence｜>")
    assert policy.samplings == [Sampling(n=1, temperature=0.6, max_new_tokens=77, stop=stop)] * 2
    assert policy.seeds == [[[1001], [1002], [1003]], [[2002]]]  # 11 was sampled second
    # Each revision is one proof sampled, its tokens counted; chains started by a fresh attempt's revision.
    assert (search.sampled, search.revisions, search.repaired, search.core.meter.tokens) == (5, 4, 2, 12)
    assert search.core.meter.curve_tokens == [3, 3, 6, 9, 12]  # the curve after each revision
    assert search.core.refusals == []
    # A round's wait shared by its revisions.
    gen = [gen_ms for _, _, gen_ms in checker.calls]
    assert gen[0] == gen[1] == gen[2] > 0 and gen[3] > 0
    assert 3 * gen[0] + gen[3] == pytest.approx(search.core.waits.policy_s * 1000)


def test_repair_stops_after_repair_rounds_rounds() -> None:
    policy = answering_each()
    search = Searching(Limits(max_proofs=10, repair=RepairSettings(rounds=1)), policy)
    checker = Checker(search, again={1: 11})
    rounds(search, [failed(1, 0, 1)], checker)
    assert [node for _, node, _ in checker.calls] == [1] and len(policy.calls) == 1
    assert (search.sampled, search.revisions, search.repaired) == (1, 1, 1)
    off = Searching(Limits(repair=RepairSettings(rounds=0)), answering_each())
    rounds(off, [failed(1, 0, 1)], Checker(off))
    assert off.policy.calls == [] and off.sampled == 0


def test_a_repair_prompt_the_policy_refuses_ends_its_chain_and_counts_as_a_refused_prompt() -> None:
    class Refusing(ScriptedPolicy):
        async def generate(self, prompts: Sequence[str], sampling: Sampling,
                           seeds: Seeds | None = None) -> list[list[Completion]]:
            answered = await super().generate(prompts, sampling, seeds)
            return [refused("too long", sampling.n) if "wrong 2" in prompt else answer
                    for prompt, answer in zip(prompts, answered, strict=True)]

    search = Searching(Limits(), Refusing(answering_each().script, key=lambda p: p))
    checker = Checker(search, again={2: 12})
    rounds(search, [failed(1, 0, 1), failed(2, 0, 2), failed(3, 0, 3)], checker)
    assert [node for _, node, _ in checker.calls] == [1, 3]
    assert search.core.refusals == ["too long"]
    assert (search.sampled, search.revisions, search.repaired, search.core.meter.tokens) == (2, 2, 2, 6)


def test_past_the_first_proof_or_the_time_or_the_budget_no_repair_round_starts() -> None:
    fresh = [failed(1, 0, 1)]
    proved = Searching(Limits(), answering_each())
    proved.core.proofs.verified.append(Proof(7, "proof", ["simp"], 1))
    rounds(proved, fresh, Checker(proved))
    assert proved.policy.calls == []
    anyway = Searching(Limits(stop_at_first=False), answering_each())  # a proof found, the search goes on
    anyway.core.proofs.unverified.append(Proof(7, "proof", ["simp"], 1))
    checker = Checker(anyway)
    rounds(anyway, fresh, checker)
    assert [node for _, node, _ in checker.calls] == [1]
    unverified = Searching(Limits(), answering_each())  # an unverified proof ends a search too
    unverified.core.proofs.unverified.append(Proof(7, "proof", ["simp"], 1))
    rounds(unverified, fresh, Checker(unverified))
    assert unverified.policy.calls == []
    late = Searching(Limits(timeout_s=0.0), answering_each())
    rounds(late, fresh, Checker(late))
    assert late.policy.calls == []
    at_limit = Searching(Limits(timeout_s=60.0), answering_each(), meter=Stopped(60.0))  # the limit itself is past
    rounds(at_limit, fresh, Checker(at_limit))
    assert at_limit.policy.calls == []
    spent = Searching(Limits(max_proofs=3), answering_each(), sampled=3)
    rounds(spent, fresh, Checker(spent))
    assert spent.policy.calls == []
    nothing = Searching(Limits(), answering_each())
    rounds(nothing, [], Checker(nothing))
    assert nothing.policy.calls == []
    unseeded = Searching(Limits(), answering_each())
    rounds(unseeded, fresh, Checker(unseeded), seed=None)
    assert unseeded.policy.seeds == [None] and unseeded.sampled == 1


def test_after_a_revision_proves_the_theorem_the_rounds_revisions_are_counted_not_checked() -> None:
    search = Searching(Limits(), answering_each())
    checker = Checker(search, again={3: 13}, proving=frozenset({2}))
    rounds(search, [failed(1, 0, 1), failed(2, 0, 2), failed(3, 0, 3)], checker)
    assert [node for _, node, _ in checker.calls] == [1, 2]  # the third is sampled, never checked nor revised
    assert (search.sampled, search.revisions, search.repaired, search.core.meter.tokens) == (3, 3, 3, 9)
    assert search.core.meter.curve_tokens == [3, 6, 9] and len(search.policy.calls) == 1


def test_a_policy_that_answers_fewer_prompts_than_it_was_asked_is_an_error_not_a_lost_revision() -> None:
    class Short(ScriptedPolicy):
        async def generate(self, prompts: Sequence[str], sampling: Sampling,
                           seeds: Seeds | None = None) -> list[list[Completion]]:
            return (await super().generate(prompts, sampling, seeds))[:-1]

    search = Searching(Limits(), Short(answering_each().script, key=lambda p: p))
    with pytest.raises(ValueError, match="zip"):
        rounds(search, [failed(1, 0, 1), failed(2, 0, 2)], Checker(search))


def test_a_repair_round_that_runs_out_of_time_samples_nothing() -> None:
    slow = ScriptedPolicy(lambda _: [("trivial", -1.0)], delay_s=5.0, key=lambda p: p)
    search = Searching(Limits(timeout_s=0.05), slow)
    checker = Checker(search)
    rounds(search, [failed(1, 0, 1)], checker)
    assert checker.calls == [] and (search.sampled, search.revisions, search.core.meter.tokens) == (0, 0, 0)
    # the wait is cut at the time left (timeout_s less what the search spent before it), counted as policy time
    assert 0.0 < search.core.waits.policy_s <= search.core.meter.elapsed() < 1.0 and search.core.meter.elapsed() >= 0.05
