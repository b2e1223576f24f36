"""The RL stage's repair prompts (docs/training.md, "GRPO stage"): with search.repair_rounds > 0 its rows hold, of each
theorem with a failed proof recorded in the --trajectories, one repair prompt, byte for byte the one whole and hybrid
search sent to revise that failed proof (each format family, each declaration form, a chain's later rounds); with
search.repair_rounds = 0 the rows are the whole prompts alone, as they were; the draw is seeded, one per theorem, and
leaves out a search of another statement and an open answer; what changes the rows changes the stage's identity."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from burnqed.config import Config, PolicyConfig, RlConfig, SearchConfig
from burnqed.errors import InputError
from burnqed.lean.inprocess import InProcessReplay
from burnqed.policy.base import Sampling
from burnqed.records.enums import DeclarationForm, SearchMode
from burnqed.records.theorem import Theorem
from burnqed.rl.failures import FailedProof, FailedProofs, pick_failed_proofs, read_failed_proofs
from burnqed.rl.grpo import RlRequest, RlSettings, checkpoint_settings, select_theorems, with_failed_proofs
from burnqed.rl.reward import LeanReward
from burnqed.runner.reuse import rl_inputs
from burnqed.search.hybrid import prove_hybrid
from burnqed.search.hybrid_settings import HybridSettings
from burnqed.search.repair import RepairSettings
from burnqed.search.skeleton import SearchOutcome
from burnqed.search.whole import WholeSettings, prove_whole, whole_prompt
from burnqed.storage import Store
from burnqed.text.feedback import Feedback
from burnqed.text.prompt import PromptFormat, format_for, repair_format
from minilean.replay.replay_server import ReplayServer
from tests.doubles.policy_double import ScriptedPolicy
from tests.rl.helpers import failed_search, feedback
from tests.search.test_answers import OPEN
from tests.sft.test_prompt_identity import CORPUS, GUARD, REST, WRONG, _theorem
from tests.trajectory.factories import write_trajectory

PROOF = REST["⊢ 0 < x → x + 1 / x ≥ 2"]
AGAIN = "intro hx\nnlinarith"  # a revision that fails too (another message), so the chain reaches its second round
FAMILIES = {"plain": PromptFormat.PLAIN_TACTIC, "deepseek": PromptFormat.DEEPSEEK_TACTIC}


def is_repair(prompt: str) -> bool:
    return prompt.startswith("This Lean 4 proof does not compile:") or "is not correct. Following is" in prompt


def chain(prompt: str) -> list[tuple[str, float]]:
    """The policy: a fresh attempt fails (WRONG), its first revision fails again (AGAIN), the second proves it."""
    if not is_repair(prompt):
        return [(WRONG, -1.0)]
    return [(PROOF if "nlinarith" in prompt else AGAIN, -1.0)]


def search(mode: SearchMode, family: str, form: DeclarationForm, theorem: Theorem,
           policy: ScriptedPolicy) -> SearchOutcome:
    """One search of `theorem` as `burnqed search` configures it for `mode` (stages.search), two repair rounds."""
    env = InProcessReplay(ReplayServer(CORPUS))
    fmt = format_for(FAMILIES[family], mode)
    repair = RepairSettings(rounds=2, message_tokens=512, fmt=repair_format(FAMILIES[family]))
    if mode is SearchMode.HYBRID:
        return asyncio.run(prove_hybrid(theorem, env, policy, HybridSettings(
            fmt=fmt, form=form, sampling=Sampling(stop=("```",)), num_proofs=1, min_proofs=1, repair=repair), GUARD))
    return asyncio.run(prove_whole(theorem, env, policy, WholeSettings(
        fmt=fmt, form=form, max_proofs=3, sampling=Sampling(n=1, stop=("```",)), repair=repair), GUARD))


def config(family: str, form: DeclarationForm, repair_rounds: int, seed: int = 0) -> Config:
    return Config(policy=PolicyConfig(prompt_format=FAMILIES[family], declaration_form=form),
                  search=SearchConfig(repair_rounds=repair_rounds), rl=RlConfig(seed=seed))


def rows(theorems: list[Theorem], trajectories: list[str], cfg: Config, store: Store) -> list[dict[str, str]]:
    """The rows `burnqed rl` trains on (its selection, then `LeanReward.rows()`), 'all' theorems."""
    settings = RlSettings.from_config(cfg)
    selection = with_failed_proofs(select_theorems(theorems, "all", set()), trajectories, settings, store=store)
    return LeanReward(selection.theorems, lambda: pytest.fail("no pool is opened"), settings.guard, settings.reward,
                      selection.failed).rows()


@pytest.mark.parametrize("header", [False, True], ids=["no-header", "header"])
@pytest.mark.parametrize("form", list(DeclarationForm))
@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("mode", [SearchMode.WHOLE, SearchMode.HYBRID])
def test_every_repair_row_is_a_repair_prompt_the_search_sent_for_that_failed_proof(
        tmp_path: Path, store: Store, mode: SearchMode, family: str, form: DeclarationForm, header: bool) -> None:
    theorem = _theorem(signature=False, header=header)
    policy = ScriptedPolicy(chain, key=lambda prompt: prompt)
    outcome = search(mode, family, form, theorem, policy)
    assert outcome.result.proved and outcome.result.revision_at_proof == 2, outcome.result
    sent = [prompt for call in policy.calls for prompt in call if is_repair(prompt)]
    assert len(sent) == 2  # round 0's revision of the fresh attempt, round 1's of that revision
    uri = f"file://{tmp_path}/traj"
    write_trajectory(uri, [(outcome.result, outcome.edges)], store=store)
    found = read_failed_proofs([uri], [theorem], store=store)
    assert [(f.revision, f.feedback.proof) for f in found.by_theorem[theorem.name]] == [(0, WRONG), (1, AGAIN)]
    settings = RlSettings.from_config(config(family, form, repair_rounds=1))
    reward = LeanReward([theorem], lambda: pytest.fail("no pool"), settings.guard, settings.reward,
                        found.by_theorem[theorem.name])
    whole = whole_prompt(theorem, settings.reward.fmt, form)
    assert reward.rows() == [{"prompt": whole, "theorem": theorem.name},
                             *({"prompt": prompt, "theorem": theorem.name} for prompt in sent)]
    # What the stage serves: one of them, byte for byte.
    served = rows([theorem], [uri], config(family, form, repair_rounds=1), store)
    assert served[0] == {"prompt": whole, "theorem": theorem.name} and len(served) == 2
    assert served[1]["prompt"] in sent


def test_with_repair_rounds_zero_the_rows_are_the_whole_prompts_alone(tmp_path: Path, store: Store) -> None:
    theorem = _theorem(signature=False, header=True)
    policy = ScriptedPolicy(chain, key=lambda prompt: prompt)
    outcome = search(SearchMode.WHOLE, "plain", DeclarationForm.BINDER, theorem, policy)
    uri = f"file://{tmp_path}/traj"
    write_trajectory(uri, [(outcome.result, outcome.edges)], store=store)
    cfg = config("plain", DeclarationForm.BINDER, repair_rounds=0)
    settings = RlSettings.from_config(cfg)
    assert settings.reward.repair is None
    selection = with_failed_proofs(select_theorems([theorem], "all", set()), [uri], settings, store=store)
    assert selection == select_theorems([theorem], "all", set()) and selection.failed == ()
    assert rows([theorem], [uri], cfg, store) == [
        {"prompt": whole_prompt(theorem, PromptFormat.PLAIN_WHOLE, DeclarationForm.BINDER), "theorem": theorem.name}]
    on = rows([theorem], [uri], config("plain", DeclarationForm.BINDER, repair_rounds=1), store)
    assert len(on) == 2 and on[1]["prompt"].startswith("This Lean 4 proof does not compile:")


# ------------------------------------------------------------------------------------------------ the draw

A = Theorem(name="a_eq", statement="2 + 2 = 4", header="import Mathlib")
B = Theorem(name="b_eq", statement="3 * 2 = 6", header="import Mathlib")
C = Theorem(name="c_eq", statement="1 + 1 = 2", header="import Mathlib")


def test_one_failed_proof_per_theorem_is_drawn_seeded_and_another_statement_or_an_open_answer_gives_none(
        tmp_path: Path, store: Store) -> None:
    uri = f"file://{tmp_path}/traj"
    proofs = [f"simp_{i}" for i in range(6)]
    moved = B.model_copy(update={"statement": "3 * 2 = 7"})
    write_trajectory(uri, [failed_search(A, proofs), failed_search(B, ["simp"], shown=moved),
                           failed_search(OPEN, ["norm_num"]), failed_search(C, ["rfl", "rfl"])], store=store)
    found = read_failed_proofs([uri], [A, B, C, OPEN], store=store)
    # Distinct by (round, record), each theorem's sorted; B's search showed another statement, OPEN's answer is open.
    assert {name: [f.feedback.proof for f in failed] for name, failed in found.by_theorem.items()} == {
        "a_eq": sorted(proofs), "c_eq": ["rfl"]}
    assert (found.other_statement, found.open_answer, len(found)) == (1, 1, 7)
    draws = [pick_failed_proofs(found, seed) for seed in range(8)]
    assert all([f.theorem for f in draw] == ["a_eq", "c_eq"] for draw in draws)
    assert pick_failed_proofs(found, 3) == draws[3]  # the same seed, the same draw
    assert len({draw[0].feedback.proof for draw in draws}) > 1  # a draw, not the first
    # A theorem's draw depends on no other theorem's failures.
    alone = FailedProofs({"a_eq": found.by_theorem["a_eq"]})
    assert [pick_failed_proofs(alone, seed)[0] for seed in range(8)] == [draw[0] for draw in draws]
    settings = RlSettings.from_config(Config(search=SearchConfig(repair_rounds=1), rl=RlConfig(seed=3)))
    selection = with_failed_proofs(select_theorems([A, B, C], "all", set()), [uri], settings, store=store)
    assert selection.failed == tuple(draws[3])
    assert [row["theorem"] for row in LeanReward([A, B, C], lambda: pytest.fail("no pool"), settings.guard,
                                                 settings.reward, selection.failed).rows()] == [
        "a_eq", "b_eq", "c_eq", "a_eq", "c_eq"]


def test_a_failed_proof_of_an_open_answer_or_of_another_theorem_is_refused() -> None:
    settings = RlSettings.from_config(Config(search=SearchConfig(repair_rounds=1)))
    failure = FailedProof("putnam_easy", Feedback.from_json(feedback("simp")), 0)
    with pytest.raises(InputError, match="whose answer is open"):
        LeanReward([OPEN], lambda: pytest.fail("no pool"), settings.guard, settings.reward, [failure])
    with pytest.raises(InputError, match="a failed proof of theorem 'putnam_easy', which the reward was not given"):
        LeanReward([A], lambda: pytest.fail("no pool"), settings.guard, settings.reward, [failure])
    off = RlSettings.from_config(Config())
    with pytest.raises(InputError, match=r"without a repair format"):
        LeanReward([A], lambda: pytest.fail("no pool"), off.guard, off.reward,
                   [FailedProof("a_eq", failure.feedback, 0)])


# ------------------------------------------------------------------------------------------------ identity


def test_whether_repair_prompts_are_served_enters_the_stage_identity_and_the_checkpoints(
        tmp_path: Path, store: Store) -> None:
    from burnqed.records.theorem import TheoremIndex
    from burnqed.sft.manifests import SftRecord

    index = TheoremIndex(name="t", theorems=[A, C])

    def made(**search: object) -> dict[str, object]:
        return rl_inputs(Config(search=SearchConfig(**search)), store, sft=str(tmp_path / "sft"), index=index,
                         trajectories=(), iteration=1).settings

    off, one, two = made(), made(repair_rounds=1), made(repair_rounds=2)
    assert "repair prompts" not in off and one["repair prompts"] == "plain-repair"
    assert {k: v for k, v in one.items() if k != "repair prompts"} == off
    assert one == two  # how many rounds search runs changes no row: only whether repair prompts are served
    deepseek = rl_inputs(Config(search=SearchConfig(repair_rounds=1), policy=PolicyConfig(
        prompt_format=PromptFormat.DEEPSEEK_TACTIC, cot=True)), store, sft=str(tmp_path / "sft"), index=index,
        trajectories=(), iteration=1).settings
    assert deepseek["repair prompts"] == "deepseek-repair-cot"
    # The checkpoints belong to the failed proofs drawn too: another draw is another run.
    record = cast("SftRecord", SimpleNamespace(method="full"))  # all checkpoint_settings reads of it
    request = RlRequest(iteration=1, sft=str(tmp_path / "sft"), output=str(tmp_path / "rl"))
    settings = RlSettings.from_config(Config(search=SearchConfig(repair_rounds=1)))
    selection = select_theorems([A, C], "all", set())
    first = FailedProof("a_eq", Feedback.from_json(feedback("simp")), 0)
    other = FailedProof("a_eq", Feedback.from_json(feedback("rfl")), 0)
    bare = checkpoint_settings(request, RlSettings.from_config(Config()), record, selection)
    drawn = checkpoint_settings(request, settings, record, replace(selection, failed=(first,)))
    again = checkpoint_settings(request, settings, record, replace(selection, failed=(other,)))
    assert "repair format" not in bare and "failed proofs" not in bare
    assert drawn["repair format"] == "plain-repair" and drawn["failed proofs"] != again["failed proofs"]
    assert {k: v for k, v in drawn.items() if k not in ("repair format", "failed proofs")} == bare
