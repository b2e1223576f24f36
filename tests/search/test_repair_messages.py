"""Where Lean's messages on a failed proof land in a repair prompt (docs/search.md, "Repair"): a compile's messages
mapped onto the proof's body (`compile_messages`), the tactic the first error in the body is in (`failing_tactic`),
the cut there and the goal before it, the hybrid feedback, and the repair round's request that runs out of time.

Real Lean's usual shape for a failed proof whose body left goals open is two errors: the body's own, and `unsolved
goals` at the theorem's `by` on the declaration line, spanning the whole body (leanprover-community/repl, test
`incomplete`: `def f (x : Bool) : Nat := by\\n  by_cases x\\n  { apply Nat.succ }` answers `unsolved goals` with
`case pos` at 3:19, the `}`, and with `case neg` at 1:26, the `by`). The declaration's error decides nothing: the
body's error does. These tests pin each rule with exact values; they are also what kills the mutants of
`burnqed/search/repair.py` (scripts/mutation.py)."""

from __future__ import annotations

import asyncio

import pytest

from burnqed.errors import LeanError, LeanStartError
from burnqed.lean.inprocess import InProcessReplay
from burnqed.lean.soundness import assemble_proof, body_line, compile_text
from burnqed.lean.start import start_theorem
from burnqed.policy.base import Sampling
from burnqed.records import (
    CompileMessage,
    CompileResult,
    CompileUnit,
    Edge,
    EdgeOutcome,
    TacticResult,
    Theorem,
    pretty_state,
)
from burnqed.search.repair import (
    RepairSettings,
    compile_messages,
    cut_at_error,
    failing_tactic,
    goal_at,
    repair_context_problem,
    repair_prompt_tokens,
    request_revisions,
    tactic_feedback,
    unsolved_feedback,
)
from burnqed.text.feedback import Feedback, FeedbackMessage
from burnqed.text.prompt import PromptFormat
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
    text = compile_text(proof, theorem.name)
    units = (CompileUnit(0, text.print_start, tuple(messages)),
             CompileUnit(text.print_start, text.recheck_start, tuple(after_print or ())))
    return proof, CompileResult(units)


def declaration_line(proof: str, tactics: list[str]) -> tuple[int, int]:
    """The compile text's line of the theorem's `:= by` and the column of its `by` (Lean's convention)."""
    first = body_line(proof, tactics)
    assert first is not None
    line = compile_text(proof, "f").text.split("\n")[first - 2]
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


def test_a_repair_round_that_runs_out_of_time_gives_no_answers() -> None:
    edge = Edge(node_id=1, parent_id=0, depth=1, state_before="⊢ True", tactic="simp", state_after=None,
                outcome=EdgeOutcome.ERROR, error="e", logprob=-1.0, n_tokens=1, score=None, energy=None, lean_ms=0.0,
                gen_ms=0.0, timestamp_ms=0)
    feedback = Feedback("simp", (FeedbackMessage("error", "e", 1, 0),))
    slow = ScriptedPolicy(lambda _: [("trivial", -1.0)], delay_s=5.0, key=lambda p: p)
    answers, waited = asyncio.run(request_revisions(slow, RepairSettings(rounds=1), "theorem t : True", None,
                                                    [(edge, feedback)], Sampling(), None, 0.05))
    assert answers is None and 0.05 <= waited < 1.0
    quick = ScriptedPolicy(lambda _: [("trivial", -1.0)], key=lambda p: p)
    answers, _ = asyncio.run(request_revisions(quick, RepairSettings(rounds=1), "theorem t : True", None,
                                               [(edge, feedback)], Sampling(), None, 5.0))
    assert answers is not None and [[c.text for c in row] for row in answers] == [["trivial\n```"]]


def test_a_repair_prompt_and_its_revision_must_fit_below_the_context() -> None:
    """SGLang refuses a prompt whose tokens and max_new_tokens reach the context (burnqed/policy/sglang.py):
    the longest repair prompt and the revision's tokens must stay below it."""
    need = repair_prompt_tokens(PromptFormat.PLAIN_REPAIR, 512, 512) + 512
    assert repair_context_problem(PromptFormat.PLAIN_REPAIR, 512, 512, need + 1) is None
    problem = repair_context_problem(PromptFormat.PLAIN_REPAIR, 512, 512, need)
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
        root, goals = await start_theorem(lean, spec.as_theorem())
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
