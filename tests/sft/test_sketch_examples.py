"""SFT's sketch examples (docs/training.md, "Sketch examples"): the sketch a verified proof is and a sketch search's
verified sketch train the planner's format with the prompt sketch search sends (`build_sketch_prompt`), the subgoals
of verified sketches train as theorems of their own (deduplicated by the subgoal key, the ones no declaration can
state counted; a sketch that did not verify gives none), a subgoal's declaration starts in Lean at exactly the state
its prompt shows, the data's replayed proofs give sketches at iteration 0, and sft.json counts them all."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from transformers import TrainerCallback

from burnqed.config import SftConfig
from burnqed.data.pairs import THEOREMS_FILE, TacticPair
from burnqed.errors import InputError
from burnqed.lean.inprocess import InProcessReplay
from burnqed.records.enums import DeclarationForm, SearchMode
from burnqed.records.replies import Goal, pretty_state
from burnqed.records.results import Edge, SketchAttempt, SketchOutcome, SubgoalAttempt, SubgoalSource, TheoremResult
from burnqed.records.theorem import Theorem, TheoremIndex
from burnqed.sft.data import BASE, SUBGOAL, TRAJECTORY, SftPair, base_sketches, mix_pairs, read_base_proofs
from burnqed.sft.examples import read_sketch_examples
from burnqed.sft.train import SftRequest, run_sft
from burnqed.storage import Store
from burnqed.text.prompt import (
    PromptFormat,
    build_completion,
    build_prompt,
    build_sketch_prompt,
    build_statement_prompt,
    sketch_format,
)
from burnqed.text.sketch import Sketch, read_sketch, subgoal_declaration
from leankit.version import PantographVersion
from tests.doubles.line_servers import MiniLean
from tests.sft.helpers import write_data_folder
from tests.trajectory.factories import result, write_trajectory

HEADER = "open Real"
DECLARATION = "theorem two_facts (x y : ℝ) (h₀ : 0 < x) (h₁ : 0 < y) : 0 < x * y + x"
CONTEXT = "x y : ℝ\nh₀ : 0 < x\nh₁ : 0 < y"
PLAN = "have hxy : 0 < x * y := by sorry\nhave hx : 0 < x := by sorry\nnlinarith [hxy, hx]"
HXY = SubgoalAttempt(name="hxy", statement="0 < x * y", goal=f"{CONTEXT}\n⊢ 0 < x * y", proved=True,
                     tactics=["positivity"], source=SubgoalSource.SEARCH, spent=3)
HX = SubgoalAttempt(name="hx", statement="0 < x", goal=f"{CONTEXT}\nhxy : 0 < x * y\n⊢ 0 < x", proved=True,
                    tactics=["have := h₀", "exact h₀"], source=SubgoalSource.SEARCH, spent=2)
HXY_DECLARATION = "theorem two_facts.hxy (x y : ℝ) (h₀ : 0 < x) (h₁ : 0 < y) : 0 < x * y"
HX_DECLARATION = "theorem two_facts.hx (x y : ℝ) (h₀ : 0 < x) (h₁ : 0 < y) (hxy : 0 < x * y) : 0 < x"
STEP_DECLARATION = "theorem by_steps : ∀ x : ℝ, 0 < x → 0 < x + x ^ 2"


def sketch_result() -> TheoremResult:
    """A sketch search of `two_facts`: a first plan whose `hx` failed (its `hy` proved, but the sketch never
    compiled), then a re-plan that kept `hxy` and proved `hx`, verified."""
    hy = SubgoalAttempt(name="hy", statement="0 < y", goal=f"{CONTEXT}\n⊢ 0 < y", proved=True, tactics=["exact h₁"],
                        source=SubgoalSource.SEARCH, spent=1)
    first = SketchAttempt(round=0, body=f"{PLAN}\nhave hy : 0 < y := by sorry", outcome=SketchOutcome.ELABORATED,
                          subgoals=[HXY, HX.model_copy(update={"proved": False, "tactics": [], "source": None,
                                                               "detail": "exhausted"}), hy], tokens=40)
    second = SketchAttempt(round=1, body=PLAN, outcome=SketchOutcome.ELABORATED, verified=True, tokens=30,
                           subgoals=[HXY.model_copy(update={"source": SubgoalSource.KEPT, "spent": 0}), HX])
    assembled = ["have hxy : 0 < x * y := by\n  positivity", "have hx : 0 < x := by\n  have := h₀\n  exact h₀",
                 "nlinarith [hxy, hx]"]
    return result("two_facts", True, mode=SearchMode.SKETCH, declaration=DECLARATION, header=HEADER,
                  tactics=assembled, sketches=[first, second], nodes_expanded=7)


CARD = "α : Type\ninst✝ : Fintype α\n⊢ 0 < Fintype.card α + 1"


def instance_result(name: str) -> TheoremResult:
    """A verified sketch whose subgoal's context holds an anonymous instance: no declaration can state it."""
    hole = SubgoalAttempt(name="hc", statement="0 < Fintype.card α + 1", goal=CARD, proved=True, tactics=["omega"],
                          source=SubgoalSource.SEARCH, spent=1)
    sketch = SketchAttempt(round=0, body="have hc : 0 < Fintype.card α + 1 := by sorry\nexact hc",
                           outcome=SketchOutcome.ELABORATED, verified=True, subgoals=[hole])
    return result(name, True, mode=SearchMode.SKETCH, declaration=f"theorem {name} (α : Type) [Fintype α] : "
                  "0 < Fintype.card α + 1", tactics=["have hc : 0 < Fintype.card α + 1 := by\n  omega", "exact hc"],
                  sketches=[sketch])


def trajectory(tmp_path: Path, store: Store) -> str:
    """Trajectories of a sketch search and of other searches: a step proof with a top-level have, a whole proof with
    none, an open answer's proof (its header's slot `sorry`), a proof recorded without its declaration, a failure."""
    uri = f"file://{tmp_path}/traj"
    theorems: list[tuple[TheoremResult, list[Edge]]] = [
        (sketch_result(), []), (instance_result("card_pos"), []), (instance_result("card_pos_again"), []),
        (result("by_steps", True, mode=SearchMode.STEP, declaration=STEP_DECLARATION,
                tactics=["intro x hx", "-- first the square\nhave sq : 0 ≤ x ^ 2 := by positivity", "linarith"]), []),
        (result("no_have", True, mode=SearchMode.WHOLE, declaration="theorem no_have : 1 = 1", tactics=["rfl"]), []),
        (result("open_answer", True, mode=SearchMode.WHOLE, declaration="theorem open_answer : ans = 2",
                header="abbrev ans : ℕ := sorry", tactics=["have h : ans = 2 := rfl", "exact h"]), []),
        (result("undeclared", True, mode=SearchMode.STEP, tactics=["have h : 1 = 1 := rfl", "exact h"]), []),
        (result("failed", False, mode=SearchMode.SKETCH, declaration="theorem failed : False",
                sketches=[SketchAttempt(round=0, body="have h : False := by sorry\nexact h",
                                        outcome=SketchOutcome.ELABORATED, subgoals=[
                                            SubgoalAttempt(name="h", statement="False", goal="⊢ False",
                                                           proved=False, detail="exhausted")])]), []),
    ]
    write_trajectory(uri, theorems, run_id="iter0", store=store)
    return uri


def test_verified_proofs_and_sketches_and_proved_subgoals_are_the_examples(tmp_path: Path, store: Store) -> None:
    found = read_sketch_examples([trajectory(tmp_path, store)], store=store)
    hx_proof = "have := h₀\nexact h₀"
    card = "have hc : 0 < Fintype.card α + 1 := by sorry\nexact hc"
    assert found.examples == [
        # the step proof's top-level have, its comment kept
        SftPair("by_steps", "", "intro x hx\n-- first the square\nhave sq : 0 ≤ x ^ 2 := by sorry\nlinarith",
                TRAJECTORY, "sketch", None, STEP_DECLARATION),
        # verified sketches whose subgoal cannot be declared still train the planner
        SftPair("card_pos", "", card, TRAJECTORY, "sketch", None, "theorem card_pos (α : Type) [Fintype α] : "
                "0 < Fintype.card α + 1"),
        SftPair("card_pos_again", "", card, TRAJECTORY, "sketch", None, "theorem card_pos_again (α : Type) "
                "[Fintype α] : 0 < Fintype.card α + 1"),
        # the sketch search's verified sketch as the planner wrote it (not a second one read back from its proof)
        SftPair("two_facts", "", PLAN, TRAJECTORY, "sketch", HEADER, DECLARATION),
        # each subgoal of the verified sketch once, as a theorem of its own (the first plan's hy never compiled)
        SftPair("two_facts", HXY.goal, "positivity", SUBGOAL, "tactic", None, DECLARATION),
        SftPair("two_facts", HXY.goal, "positivity", SUBGOAL, "proof", None, DECLARATION),
        SftPair("two_facts", "", "positivity", SUBGOAL, "whole", HEADER, HXY_DECLARATION),
        SftPair("two_facts", HX.goal, "have := h₀", SUBGOAL, "tactic", None, DECLARATION),
        SftPair("two_facts", HX.goal, hx_proof, SUBGOAL, "proof", None, DECLARATION),
        SftPair("two_facts", "", hx_proof, SUBGOAL, "whole", HEADER, HX_DECLARATION),
    ]
    assert found.subgoals_skipped == 1  # hc, an inaccessible instance: one subgoal key in both theorems, counted once


@pytest.mark.parametrize("fmt", [PromptFormat.PLAIN_TACTIC, PromptFormat.DEEPSEEK_TACTIC, PromptFormat.DEEPSEEK_PROOF])
def test_a_sketch_example_s_prompt_is_the_one_sketch_search_sends(tmp_path: Path, store: Store,
                                                                  fmt: PromptFormat) -> None:
    examples = read_sketch_examples([trajectory(tmp_path, store)], store=store).examples
    sketches = [example for example in examples if example.variant == "sketch"]
    planner = sketch_format(fmt)
    for example in sketches:
        assert example.prompt(fmt) == (planner, build_sketch_prompt(planner, example.declaration or "",
                                                                    example.header))
        assert isinstance(read_sketch(example.tactic), Sketch)  # each completion reads back as a sketch
    if fmt is PromptFormat.PLAIN_TACTIC:
        assert sketches[3].prompt(fmt)[1] == (
            "Sketch a proof of the following Lean 4 code: state the intermediate facts it needs as "
            "`have NAME : P := by sorry`, then close the goal from them:\n```lean4\n"
            f"{DECLARATION} := by\n")
        assert build_completion(planner, sketches[3].tactic) == (
            "  have hxy : 0 < x * y := by sorry\n  have hx : 0 < x := by sorry\n  nlinarith [hxy, hx]\n```")


def test_a_subgoal_s_prompts_are_its_searchs_and_its_whole_prompt_states_it_as_a_theorem(tmp_path: Path,
                                                                                         store: Store) -> None:
    examples = read_sketch_examples([trajectory(tmp_path, store)], store=store).examples
    step, proof = (e for e in examples if e.origin == SUBGOAL and e.state_before == HXY.goal)
    (whole,) = (e for e in examples if e.origin == SUBGOAL and e.declaration == HXY_DECLARATION)
    fmt = PromptFormat.DEEPSEEK_TACTIC
    # From its state, the theorem's declaration above it: byte for byte what sketch search's subgoal search sends.
    assert step.prompt(fmt) == (fmt, build_prompt(fmt, HXY.goal, DECLARATION))
    assert proof.prompt(fmt) == (PromptFormat.DEEPSEEK_PROOF, build_prompt(PromptFormat.DEEPSEEK_PROOF, HXY.goal,
                                                                         DECLARATION))
    assert whole.prompt(fmt) == (PromptFormat.DEEPSEEK_WHOLE, build_statement_prompt(PromptFormat.DEEPSEEK_WHOLE,
                                                                                     HXY_DECLARATION, HEADER))
    assert step.prompt(PromptFormat.PLAIN_TACTIC)[1] == (
        "Complete the following Lean 4 code with the next tactic:\n```lean4\n"
        f"{DECLARATION} := by\n  /- tactic state:\n    x y : ℝ\n    h₀ : 0 < x\n    h₁ : 0 < y\n"
        "    ⊢ 0 < x * y\n  -/\n")


@pytest.mark.slow  # minilean in process: about 0.4 s
def test_a_subgoal_s_declaration_starts_at_the_state_its_prompts_show_and_its_proof_closes_it() -> None:
    """Against minilean: a sketch's subgoals, written as Lean printed them (`SubgoalAttempt.goal`), declared as
    theorems, start at exactly that state; the proof the subgoal's search found proves the declared theorem."""
    theorem = "theorem t (x y : ℝ) (h₀ : 0 < x) (h₁ : 0 < y) : 0 < x * y + x"

    async def go() -> list[tuple[str, str, bool]]:
        lean = InProcessReplay(MiniLean(version=PantographVersion.parse("0.3.4")))
        plan = read_sketch(PLAN)
        assert isinstance(plan, Sketch)
        drafted = await lean.draft_sketch(await lean.start_theorem("", theorem), plan)
        seen = []
        for subgoal, proof in zip(drafted.subgoals, ("positivity", "exact h₀"), strict=True):
            text = pretty_state((subgoal.goal,))
            declaration = subgoal_declaration(f"t.{subgoal.name}", Goal.from_pretty(text))
            start = await lean.start_theorem("", declaration)
            closed = await lean.tactic(start, proof)
            seen.append((text, pretty_state(await lean.goals(start)), closed.goals == ()))
        return seen

    assert asyncio.run(go()) == [(HXY.goal, HXY.goal, True), (HX.goal, HX.goal, True)]


def test_iteration_zero_gives_the_sketches_of_the_data_s_replayed_proofs(tmp_path: Path) -> None:
    index = TheoremIndex(name="data", theorems=[Theorem(name="sq", statement="∀ (x : ℕ), 0 ≤ x * x", header=HEADER),
                                                Theorem(name="flat", statement="1 = 1")])
    (tmp_path / THEOREMS_FILE).write_text(index.model_dump_json(), encoding="utf-8")
    base = [TacticPair("sq", "test", "train", "⊢ ∀ (x : ℕ), 0 ≤ x * x", "intro x", "x : ℕ\n⊢ 0 ≤ x * x", 0),
            TacticPair("sq", "test", "train", "x : ℕ\n⊢ 0 ≤ x * x", "have h : 0 ≤ x * x := Nat.zero_le _",
                       "x : ℕ\nh : 0 ≤ x * x\n⊢ 0 ≤ x * x", 1),
            TacticPair("sq", "test", "train", "x : ℕ\nh : 0 ≤ x * x\n⊢ 0 ≤ x * x", "exact h", "no goals", 2),
            TacticPair("flat", "test", "train", "⊢ 1 = 1", "rfl", "no goals", 0)]
    sketches = base_sketches(read_base_proofs(tmp_path, base, DeclarationForm.BINDER))
    assert sketches == [SftPair("sq", "", "intro x\nhave h : 0 ≤ x * x := by sorry\nexact h", BASE, "sketch", HEADER,
                                "theorem sq (x : ℕ) : 0 ≤ x * x")]
    zero = mix_pairs(base, [], iteration=0, base_subsample=10, positive_upsample=3, eval_fraction=0.0, seed=0,
                     base_sketch_examples=sketches)
    assert ([p.variant for p in zero.train], zero.sketch_examples, zero.proof_examples) == (["tactic"] * 4 + ["sketch"],
                                                                                           1, 0)


def test_sketch_and_subgoal_examples_are_held_out_upsampled_and_counted_apart() -> None:
    """From iteration 1 they join the positives: upsampled, left out with their theorem when it is held out, and
    counted as sketch and subgoal examples (a subgoal's tactic example is no trajectory positive)."""
    base = [TacticPair("t", "test", "train", "⊢ p", "simp", None, 0), TacticPair("v", "test", "valid", "⊢ q", "simp",
                                                                                  None, 0)]
    positives = [SftPair("t", "⊢ p", "simp", TRAJECTORY),
                 SftPair("t", "", PLAN, TRAJECTORY, "sketch", declaration="theorem t : p"),
                 SftPair("t", HXY.goal, "positivity", SUBGOAL, declaration="theorem t : p"),
                 SftPair("t", "", "positivity", SUBGOAL, "whole", declaration=HXY_DECLARATION),
                 SftPair("v", "", PLAN, TRAJECTORY, "sketch", declaration="theorem v : q")]
    one = mix_pairs(base, positives, iteration=1, base_subsample=10, positive_upsample=2, eval_fraction=0.0, seed=0)
    assert (one.positives, one.proof_examples, one.sketch_examples, one.subgoal_examples, one.positives_held_out) == (
        1, 0, 1, 2, 1)
    assert len(one.train) == 1 + 4 * 2


@pytest.mark.slow  # three SFT runs of the tiny model, a step or two each
def test_sft_json_counts_the_sketch_and_subgoal_examples_and_the_skipped_subgoals(tmp_path: Path,
                                                                                   tiny_model_dir: Path,
                                                                                   store: Store) -> None:
    write_data_folder(tmp_path / "data")
    uri = trajectory(tmp_path, store)
    cfg = SftConfig(base_model=str(tiny_model_dir), device="cpu", max_steps=1, warm_steps=1, later_epochs=0,
                    positive_upsample=2)

    def counts(name: str, sketch_examples: bool) -> tuple[int, int, int, int, int]:
        request = SftRequest(iteration=1, data=str(tmp_path / "data"), output=str(tmp_path / name),
                             trajectories=(uri,))
        made = run_sft(request, cfg, PromptFormat.PLAIN_TACTIC, echo=lambda _: None, store=store,
                       sketch_examples=sketch_examples).record.data_counts
        return (made.train_examples, made.positives, made.sketch_examples, made.subgoal_examples,
                made.subgoals_skipped)

    plain = counts("plain", False)
    assert plain[2:] == (0, 0, 0)
    sketched = counts("sketched", True)
    assert sketched[1:] == (plain[1], 4, 6, 1)
    assert sketched[0] == plain[0] + (4 + 6) * 2  # upsampled like the positives

    # A run's checkpoints name the sketch examples when they train: a run without them does not resume those.
    class Crash(TrainerCallback):
        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            raise KeyboardInterrupt("a crash right after the first checkpoint")

    crashed = SftRequest(iteration=1, data=str(tmp_path / "data"), output=str(tmp_path / "crashed"),
                         trajectories=(uri,))
    with pytest.raises(KeyboardInterrupt):
        run_sft(crashed, cfg.model_copy(update={"max_steps": 2, "save_steps": 1}), PromptFormat.PLAIN_TACTIC,
                echo=lambda _: None, store=store, sketch_examples=True, callbacks=[Crash()])
    with pytest.raises(InputError) as refused:
        run_sft(crashed, cfg.model_copy(update={"max_steps": 2, "save_steps": 1}), PromptFormat.PLAIN_TACTIC,
                echo=lambda _: None, store=store)
    assert str(refused.value) == (f"checkpoints in {tmp_path}/crashed-checkpoints were written under other settings: "
                                  "sketch examples was true, is unset; resume with the same ones, or pass --force to "
                                  "start over (deletes them)")
