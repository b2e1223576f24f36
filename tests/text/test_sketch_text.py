"""The sketch a verified proof is (`text.sketch.sketch_of_proof`) and a proved subgoal as a theorem of its own
(`subgoal_declaration`, `Goal.from_pretty`): what SFT's sketch and subgoal examples are built from
(docs/training.md, "Sketch examples"). Pure text: exact expected values."""

from __future__ import annotations

import pytest

from burnqed.records.replies import Goal, Variable
from burnqed.text.sketch import Hole, Unrenderable, read_sketch, sketch_of_proof, subgoal_declaration, subgoal_name


def test_each_top_level_have_s_proof_becomes_sorry_and_the_rest_is_kept() -> None:
    proof = ("have h₁ : 0 < x := by positivity\n"
             "have h₂ : 0 < y := by\n"
             "  nlinarith [sq_nonneg y]\n"
             "  -- a comment inside the proof goes with it\n"
             "  linarith\n"
             "nlinarith [h₁, h₂]")
    sketch = sketch_of_proof(proof)
    assert sketch is not None
    assert sketch.body == "have h₁ : 0 < x := by sorry\nhave h₂ : 0 < y := by sorry\nnlinarith [h₁, h₂]"
    assert sketch.holes == (Hole("h₁", "0 < x"), Hole("h₂", "0 < y"))
    assert sketch == read_sketch(sketch.body)  # what search reads back from the planner's completion


def test_an_indented_proof_is_dedented_and_its_comments_outside_the_haves_stay() -> None:
    proof = ("    intro x hx\n"
             "    -- the key fact first\n"
             "    have key : x ^ 2 ≥ 0 := sq_nonneg x -- a term proof\n"
             "    /- then the bound -/\n"
             "    have bound : x + 1 > 0 :=\n"
             "      by linarith\n"
             "    nlinarith [key, bound]")
    sketch = sketch_of_proof(proof)
    assert sketch is not None
    assert sketch.body == ("intro x hx\n"
                           "-- the key fact first\n"
                           "have key : x ^ 2 ≥ 0 := by sorry\n"
                           "/- then the bound -/\n"
                           "have bound : x + 1 > 0 := by sorry\n"
                           "nlinarith [key, bound]")


def test_a_statement_over_several_lines_is_kept_whole() -> None:
    proof = "have h : ∀ n : ℕ,\n    n + 0 = n := by\n  intro n\n  simp\nexact h 3"
    sketch = sketch_of_proof(proof)
    assert sketch is not None
    assert sketch.body == "have h : ∀ n : ℕ,\n    n + 0 = n := by sorry\nexact h 3"
    assert sketch.holes == (Hole("h", "∀ n : ℕ, n + 0 = n"),)


def test_nested_haves_stay_inside_their_tactic_and_only_top_level_ones_are_holes() -> None:
    proof = ("have outer : 0 < x := by\n"
             "  have inner : 0 ≤ x := le_of_lt hx\n"
             "  positivity\n"
             "constructor\n"
             "· have left : 1 = 1 := rfl\n"
             "  exact left\n"
             "· linarith [outer]")
    sketch = sketch_of_proof(proof)
    assert sketch is not None
    assert sketch.body == ("have outer : 0 < x := by sorry\n"
                           "constructor\n"
                           "· have left : 1 = 1 := rfl\n"
                           "  exact left\n"
                           "· linarith [outer]")
    assert [hole.name for hole in sketch.holes] == ["outer"]


@pytest.mark.parametrize("proof", [
    "have : 0 < x := by positivity\nlinarith",  # Lean names it `this`: no hole of a name of its own
    "have this : 0 < x := by positivity\nlinarith",
    "have _h : 0 < x := by positivity\nlinarith",
    "have h := mul_pos hx hy\nlinarith",  # no statement to plan
    "have h (n : ℕ) : 0 ≤ n := Nat.zero_le n\nsimp",  # binders: not the hole form
    "intro x\nsimp",
    "constructor\n· have h : 1 = 1 := rfl\n  exact h\n· rfl",  # a have, but not at the top level
], ids=["anonymous", "this", "underscore", "untyped", "binders", "none", "nested-only"])
def test_a_proof_without_a_named_top_level_have_is_no_sketch(proof: str) -> None:
    assert sketch_of_proof(proof) is None


def test_haves_that_are_no_hole_stay_proved_beside_the_holes() -> None:
    sketch = sketch_of_proof("have : 0 < x := by positivity\nhave h : 0 < y := by positivity\nnlinarith")
    assert sketch is not None
    assert sketch.body == "have : 0 < x := by positivity\nhave h : 0 < y := by sorry\nnlinarith"
    assert sketch.holes == (Hole("h", "0 < y"),)


def test_two_haves_of_one_name_are_no_sketch_search_would_send() -> None:
    assert sketch_of_proof("have h : 0 < x := by positivity\nhave h : 0 < y := by positivity\nnlinarith") is None


def test_a_goal_reads_back_from_what_pretty_prints() -> None:
    goal = Goal("0 < x ^ 2 +\n    1", (Variable("x", "ℝ"), Variable("y", "ℝ"), Variable("h₀", "0 < x"),
                                       Variable("h₁", "0 < x * y", "?m.5"), Variable("a✝", "ℕ", inaccessible=True)),
                case="h")
    assert goal.pretty() == "case h\nx y : ℝ\nh₀ : 0 < x\nh₁ : 0 < x * y := ?m.5\na✝ : ℕ\n⊢ 0 < x ^ 2 +\n    1"
    assert Goal.from_pretty(goal.pretty()) == goal
    with pytest.raises(ValueError, match="several goals"):
        Goal.from_pretty("⊢ p\n\n⊢ q")
    with pytest.raises(ValueError, match="no `⊢` line"):
        Goal.from_pretty("x : ℕ")


def test_a_subgoal_is_declared_with_its_context_as_binders() -> None:
    goal = Goal.from_pretty("x y : ℝ\nh₀ : 0 < x\nh₁ : 0 < x * y := ?m.5\n⊢ 0 < x ^ 2 + x *\n    y")
    assert subgoal_name("mathd_algebra_48", "h₂") == "mathd_algebra_48.h₂"
    assert subgoal_declaration("mathd_algebra_48.h₂", goal) == (
        "theorem mathd_algebra_48.h₂ (x y : ℝ) (h₀ : 0 < x) (h₁ : 0 < x * y) : 0 < x ^ 2 + x * y")
    assert subgoal_declaration("t.h", Goal.from_pretty("⊢ 1 + 1 = 2")) == "theorem t.h : 1 + 1 = 2"
    assert subgoal_declaration("t.h", Goal.from_pretty("f : ℕ → Option ℕ\nh : (f 0).get? = none\n⊢ True")) == (
        "theorem t.h (f : ℕ → Option ℕ) (h : (f 0).get? = none) : True")


@pytest.mark.parametrize(("goal", "why"), [
    ("x✝ : ℕ\n⊢ x✝ = x✝", "the hypothesis x✝ is inaccessible: no binder can name it"),
    ("α : Type\ninst✝ : Fintype α\n⊢ True", "the hypothesis inst✝ is inaccessible: no binder can name it"),
    ("n : ℕ := 5\n⊢ n = 5", "the hypothesis n has a value (5): a binder has none"),
    ("α : Sort ?u.12\n⊢ True", "the type of α names what no declaration can write: Sort ?u.12"),
    ("x : ℕ\n⊢ x = ?m.3", "the target names what no declaration can write: x = ?m.3"),
], ids=["inaccessible", "instance", "let-value", "universe-metavariable", "metavariable"])
def test_what_no_declaration_can_state_is_unrenderable(goal: str, why: str) -> None:
    with pytest.raises(Unrenderable) as caught:
        subgoal_declaration("t.h", Goal.from_pretty(goal))
    assert str(caught.value) == why
