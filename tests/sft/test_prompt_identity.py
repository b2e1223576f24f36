"""SFT rebuilds, byte for byte, the prompts every search mode sent: for each mode, declaration form and set of the
theorem's optional fields (an explicit signature, a header), the prompt of every training example read back from
the search's trajectory is one the search really sent, also for a statement written with a docstring and a
comment. SFT reads the declaration the search recorded in its result; nothing is parsed back out of the proof
text."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from burnqed.config import LeanConfig, PolicyConfig
from burnqed.lean.guard import TacticGuard
from burnqed.lean.inprocess import InProcessReplay
from burnqed.policy.base import Completion, Sampling, Seeds
from burnqed.records.enums import DeclarationForm, SearchMode
from burnqed.records.theorem import Theorem
from burnqed.search.hybrid import prove_hybrid
from burnqed.search.hybrid_settings import HybridSettings
from burnqed.search.modes import MODES
from burnqed.search.repair import RepairSettings
from burnqed.search.sketch_settings import SketchSettings
from burnqed.search.sketching import prove_sketch
from burnqed.search.step import SearchOutcome, StepSettings, prove
from burnqed.search.whole import WholeSettings, prove_whole
from burnqed.sft.examples import read_positives, read_proof_examples
from burnqed.storage import Store
from burnqed.text.prompt import PromptFormat, format_state_comment
from leankit.corpus import load_corpus
from minilean.replay.replay_server import ReplayServer
from tests.doubles.line_servers import DoubleServer
from tests.doubles.policy_double import ScriptedPolicy
from tests.trajectory.factories import write_trajectory

CORPUS = load_corpus()
GUARD = TacticGuard.from_config(LeanConfig())
NAME = "ineq_x_plus_reciprocal_ge_two"
FIX = "nlinarith [sq_nonneg (x - 1)]"
# The next step from each state (by its last line): the recorded proof of NAME from its binder-form start
# (`x : ℝ ⊢ 0 < x → x + 1 / x ≥ 2`).
NEXT = {"⊢ 0 < x → x + 1 / x ≥ 2": "intro hx", "⊢ x + 1 / x ≥ 2": "field_simp", "⊢ 2 * x ≤ x * x + 1": FIX}
SKETCH = "have h : 0 < x → x + 1 / x ≥ 2 := by sorry\nexact h"
REST = {"⊢ 0 < x → x + 1 / x ≥ 2": f"intro hx\nfield_simp\n{FIX}", "⊢ x + 1 / x ≥ 2": f"field_simp\n{FIX}",
        "⊢ 2 * x ≤ x * x + 1": FIX}


class Recorder(ScriptedPolicy):
    """A scripted policy keeping every raw prompt it was sent."""

    def __init__(self, mode: SearchMode) -> None:
        def answer(key: str) -> list[tuple[str, float]]:
            if mode is SearchMode.WHOLE:
                return [(REST["⊢ 0 < x → x + 1 / x ≥ 2"], -1.0)]
            if mode is SearchMode.SKETCH:  # the planner: one hole, the goal; its search: the strict double closes FIX
                return [(SKETCH if key.startswith("Sketch a proof") else FIX, -1.0)]
            table = NEXT if mode is SearchMode.STEP else REST
            goal = [line.strip() for line in key.split("\n") if line.strip().startswith("⊢")][-1]
            return [(table[goal], -1.0)]

        super().__init__(answer, key=lambda prompt: prompt)
        self.prompts: list[str] = []

    async def generate(self, prompts: Sequence[str], sampling: Sampling,
                       seeds: Seeds | None = None) -> list[list[Completion]]:
        self.prompts.extend(prompts)
        return await super().generate(prompts, sampling, seeds)


def _theorem(signature: bool, header: bool) -> Theorem:
    spec = CORPUS.by_name(NAME)
    assert spec is not None
    base = Theorem.from_recorded(spec)
    update: dict[str, str] = {}
    if signature:
        update["signature"] = "(x : ℝ) : 0 < x → x + 1 / x ≥ 2"
    if header:
        update["header"] = "open Real"
    return base.model_copy(update=update)


def _search(mode: SearchMode, theorem: Theorem, form: DeclarationForm, policy: Recorder) -> SearchOutcome:
    env = InProcessReplay(ReplayServer(CORPUS))
    fmt = MODES[mode].fmt(PolicyConfig(prompt_format=PromptFormat.PLAIN_TACTIC))  # the format the mode sends
    if mode is SearchMode.SKETCH:  # the replay server elaborates no sketch: the strict double, FIX closing a goal
        subgoal = StepSettings(fmt=PromptFormat.PLAIN_TACTIC, form=form, sampling=Sampling(n=1))
        return asyncio.run(prove_sketch(theorem, InProcessReplay(DoubleServer("0.3.4", (FIX,))), policy, SketchSettings(
            fmt=fmt, form=form, sampling=Sampling(n=1, stop=("```",)), subgoal=subgoal, max_nodes=4), GUARD))
    if mode is SearchMode.STEP:
        return asyncio.run(prove(theorem, env, policy, StepSettings(fmt=fmt, form=form, sampling=Sampling(n=1),
                                                                     max_nodes=10), GUARD))
    if mode is SearchMode.HYBRID:
        return asyncio.run(prove_hybrid(theorem, env, policy, HybridSettings(fmt=fmt, form=form,
                                                                             sampling=Sampling(stop=("```",))), GUARD))
    return asyncio.run(prove_whole(theorem, env, policy, WholeSettings(fmt=fmt, form=form, max_proofs=1,
                                                                       sampling=Sampling(n=1, stop=("```",))), GUARD))


@pytest.mark.parametrize("header", [False, True], ids=["no-header", "header"])
@pytest.mark.parametrize("signature", [False, True], ids=["derived-signature", "signature"])
@pytest.mark.parametrize("form", list(DeclarationForm))
@pytest.mark.parametrize("mode", list(SearchMode))
def test_every_training_prompt_is_one_the_search_sent(tmp_path: Path, store: Store, mode: SearchMode,
                                                       form: DeclarationForm, signature: bool, header: bool) -> None:
    _check_prompts(tmp_path, store, mode, form, _theorem(signature, header))


@pytest.mark.parametrize("form", list(DeclarationForm))
@pytest.mark.parametrize("mode", list(SearchMode))
def test_a_docstring_and_comments_reach_training_prompts_as_the_search_sent_them(
        tmp_path: Path, store: Store, mode: SearchMode, form: DeclarationForm) -> None:
    base = _theorem(signature=False, header=True)
    theorem = Theorem.model_validate({**base.model_dump(), "statement": (
        f"/-- The sum of a positive real and its reciprocal. -/\n{base.statement}  -- copy 0")})
    assert theorem.statement == base.statement and theorem.docstring is not None
    shown = _check_prompts(tmp_path, store, mode, form, theorem)
    assert shown.startswith("/-- The sum of a positive real and its reciprocal. -/\ntheorem ")


def _check_prompts(tmp_path: Path, store: Store, mode: SearchMode, form: DeclarationForm, theorem: Theorem) -> str:
    """Search `theorem`, then check every training prompt read back is one the search sent; the declaration shown."""
    policy = Recorder(mode)
    outcome = _search(mode, theorem, form, policy)
    assert outcome.result.proved, outcome.result.detail
    assert outcome.result.declaration == theorem.declaration(form)
    assert outcome.result.header == theorem.header
    uri = f"file://{tmp_path}/traj"
    write_trajectory(uri, [(outcome.result, outcome.edges)], store=store)
    examples = [*read_positives([uri], store=store), *read_proof_examples([uri], store=store)]
    # The variant whose prompts this mode sends (the others train the other modes' formats).
    # (sketch mode's: its subgoals' step searches; its sketch rows are no tactic examples)
    variant = {SearchMode.STEP: "tactic", SearchMode.HYBRID: "proof", SearchMode.WHOLE: "whole",
               SearchMode.SKETCH: "tactic"}[mode]
    own = [example for example in examples if example.variant == variant]
    assert own
    sent = set(policy.prompts)
    asked = [example for example in own if example.variant == "whole"
             or any(format_state_comment(example.state_before) in p for p in sent)]
    assert asked  # at least the root's example: the state (or, whole, the declaration) the search was asked about
    for example in asked:
        _, prompt = example.prompt(PromptFormat.PLAIN_TACTIC)
        assert prompt in sent, (example, sorted(sent))
    # The declaration shown is the form asked for: binder form puts the binders before the colon.
    shown = theorem.declaration(form) or ""
    assert all(shown in prompt for prompt in sent)
    assert ("(x : ℝ) :" in shown) is (form is DeclarationForm.BINDER)
    return shown


# ------------------------------------------------------------------------------------------------- repair

WRONG = "intro hx\nlinarith"  # `linarith` fails at `x + 1 / x ≥ 2`: Lean's message, then a revision proves it


class RepairRecorder(Recorder):
    """A policy whose first answer to the theorem fails (`WRONG`) and whose answer to a repair prompt is the proof."""

    def __init__(self, mode: SearchMode) -> None:
        super().__init__(mode)

        def answer(key: str) -> list[tuple[str, float]]:
            if key.startswith("This Lean 4 proof does not compile:"):
                return [(REST["⊢ 0 < x → x + 1 / x ≥ 2"], -1.0)]
            return [(WRONG, -1.0)]

        self.script = answer


def _repair_search(mode: SearchMode, theorem: Theorem, form: DeclarationForm, policy: Recorder) -> SearchOutcome:
    env = InProcessReplay(ReplayServer(CORPUS))
    fmt = MODES[mode].fmt(PolicyConfig(prompt_format=PromptFormat.PLAIN_TACTIC))  # the format the mode sends
    repair = RepairSettings(rounds=1, message_tokens=512)
    if mode is SearchMode.STEP:
        # Step search revises nothing: `linarith` at the root fails and keeps its feedback; the proof follows.
        return asyncio.run(prove(theorem, env, policy, StepSettings(fmt=fmt, form=form, sampling=Sampling(n=1),
                                                                     max_nodes=10, revisits=1, feedback_tokens=512),
                                GUARD))
    if mode is SearchMode.HYBRID:
        return asyncio.run(prove_hybrid(theorem, env, policy, HybridSettings(
            fmt=fmt, form=form, sampling=Sampling(stop=("```",)), num_proofs=1, min_proofs=1, repair=repair), GUARD))
    return asyncio.run(prove_whole(theorem, env, policy, WholeSettings(
        fmt=fmt, form=form, max_proofs=2, sampling=Sampling(n=1, stop=("```",)), repair=repair), GUARD))


class StepRecorder(Recorder):
    """Step mode: `linarith` first at the root (Lean rejects it), then the recorded proof."""

    def __init__(self) -> None:
        super().__init__(SearchMode.STEP)
        first = {"⊢ 0 < x → x + 1 / x ≥ 2": "linarith"}
        self.tried: set[str] = set()

        def answer(key: str) -> list[tuple[str, float]]:
            goal = [line.strip() for line in key.split("\n") if line.strip().startswith("⊢")][-1]
            if goal in first and goal not in self.tried:
                self.tried.add(goal)
                return [(first[goal], -1.0)]
            return [(NEXT[goal], -1.0)]

        self.script = answer


@pytest.mark.parametrize("header", [False, True], ids=["no-header", "header"])
@pytest.mark.parametrize("form", list(DeclarationForm))
@pytest.mark.parametrize("mode", [SearchMode.WHOLE, SearchMode.HYBRID])
def test_every_repair_example_is_a_repair_prompt_the_search_sent(tmp_path: Path, store: Store, mode: SearchMode,
                                                                 form: DeclarationForm, header: bool) -> None:
    theorem = _theorem(signature=False, header=header)
    policy = RepairRecorder(mode)
    outcome = _repair_search(mode, theorem, form, policy)
    assert outcome.result.proved and outcome.result.revision_at_proof == 1, outcome.result
    assert (outcome.result.repaired, outcome.result.revisions) == (1, 1)
    uri = f"file://{tmp_path}/traj"
    write_trajectory(uri, [(outcome.result, outcome.edges)], store=store)
    repairs = [example for example in read_proof_examples([uri], store=store) if example.variant == "repair"]
    assert len(repairs) == 1
    sent = [prompt for prompt in policy.prompts if prompt.startswith("This Lean 4 proof does not compile:")]
    assert len(sent) == 1
    variant, prompt = repairs[0].prompt(PromptFormat.PLAIN_TACTIC)
    assert variant is PromptFormat.PLAIN_REPAIR and prompt == sent[0]
    # The failed proof, its message at `linarith`'s place (line 3 of the shown block, column 2) and the goal there.
    assert "  intro hx\n  linarith\n```\nLean's messages:\n3:2: error: linarith failed" in prompt
    assert "The goal at the first error:\nx : ℝ\nhx : 0 < x\n⊢ x + 1 / x ≥ 2\n" in prompt
    # → the revision that verified (the recorded proof).
    assert repairs[0].tactic == REST["⊢ 0 < x → x + 1 / x ≥ 2"]


def test_step_search_feedback_trains_the_repair_format_with_the_prompt_a_repair_would_send(
        tmp_path: Path, store: Store) -> None:
    theorem = _theorem(signature=False, header=False)
    policy = StepRecorder()
    outcome = _repair_search(SearchMode.STEP, theorem, DeclarationForm.BINDER, policy)
    assert outcome.result.proved and outcome.result.revisions == 0
    uri = f"file://{tmp_path}/traj"
    write_trajectory(uri, [(outcome.result, outcome.edges)], store=store)
    repairs = [example for example in read_proof_examples([uri], store=store) if example.variant == "repair"]
    assert len(repairs) == 1
    _, prompt = repairs[0].prompt(PromptFormat.PLAIN_TACTIC)
    declaration = theorem.declaration(DeclarationForm.BINDER)
    assert prompt == (
        f"This Lean 4 proof does not compile:\n```lean4\n{declaration} := by\n  linarith\n```\nLean's messages:\n"
        "2:2: error: linarith failed to find a contradiction\nx : ℝ\n⊢ False\n"
        f"The goal at the first error:\nx : ℝ\n⊢ 0 < x → x + 1 / x ≥ 2\n"
        f"Complete the following Lean 4 code:\n```lean4\n{declaration} := by\n")
    assert repairs[0].tactic == REST["⊢ 0 < x → x + 1 / x ≥ 2"]
