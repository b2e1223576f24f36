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

from burnqed.config import LeanConfig
from burnqed.lean.corpus import load_corpus
from burnqed.lean.guard import TacticGuard
from burnqed.lean.inprocess import InProcessReplay
from burnqed.policy.base import Completion, Sampling, Seeds
from burnqed.prompt import DeclarationForm, PromptFormat, SearchMode, format_for, format_state_comment
from burnqed.records import Theorem
from burnqed.search.hybrid import HybridSettings, prove_hybrid
from burnqed.search.step import SearchOutcome, StepSettings, prove
from burnqed.search.whole import WholeSettings, prove_whole
from burnqed.sft.data import read_positives, read_proof_examples
from burnqed.storage import Store
from minilean.replay.server import ReplayServer
from tests.doubles.policy_double import ScriptedPolicy
from tests.trajectory.factories import write_trajectory

CORPUS = load_corpus()
GUARD = TacticGuard.from_config(LeanConfig())
NAME = "ineq_x_plus_reciprocal_ge_two"
FIX = "nlinarith [sq_nonneg (x - 1)]"
# The next step from each state (by its last line): the recorded proof of NAME from its binder-form start
# (`x : ℝ ⊢ 0 < x → x + 1 / x ≥ 2`).
NEXT = {"⊢ 0 < x → x + 1 / x ≥ 2": "intro hx", "⊢ x + 1 / x ≥ 2": "field_simp", "⊢ 2 * x ≤ x * x + 1": FIX}
REST = {"⊢ 0 < x → x + 1 / x ≥ 2": f"intro hx\nfield_simp\n{FIX}", "⊢ x + 1 / x ≥ 2": f"field_simp\n{FIX}",
        "⊢ 2 * x ≤ x * x + 1": FIX}


class Recorder(ScriptedPolicy):
    """A scripted policy keeping every raw prompt it was sent."""

    def __init__(self, mode: SearchMode) -> None:
        def answer(key: str) -> list[tuple[str, float]]:
            if mode is SearchMode.WHOLE:
                return [(REST["⊢ 0 < x → x + 1 / x ≥ 2"], -1.0)]
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
    base = spec.as_theorem()
    update: dict[str, str] = {}
    if signature:
        update["signature"] = "(x : ℝ) : 0 < x → x + 1 / x ≥ 2"
    if header:
        update["header"] = "open Real"
    return base.model_copy(update=update)


def _search(mode: SearchMode, theorem: Theorem, form: DeclarationForm, policy: Recorder) -> SearchOutcome:
    env = InProcessReplay(ReplayServer(CORPUS))
    fmt = format_for(PromptFormat.PLAIN_TACTIC, mode)
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
    variant = {SearchMode.STEP: "tactic", SearchMode.HYBRID: "proof", SearchMode.WHOLE: "whole"}[mode]
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
