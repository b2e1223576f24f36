"""RL's rollouts kept as a whole-mode trajectory (`burnqed.rl.rollouts`, docs/trajectories.md, "RL rollouts"): one
search per theorem, a row per distinct proof; the next iteration's SFT reads a verified rollout as its theorem's whole
example, a failed one with Lean's messages as a repair example when the theorem has a verified proof, and a failed one
as no positive at all."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from burnqed.config import LeanConfig, SftConfig
from burnqed.lean.guard import TacticGuard
from burnqed.records.enums import DeclarationForm
from burnqed.records.results import EdgeOutcome, Label
from burnqed.rl.records import Rollout
from burnqed.rl.rollouts import rollout_searches, write_rollouts
from burnqed.search.whole import whole_prompt
from burnqed.sft.examples import read_positives, read_proof_examples, read_repair_examples
from burnqed.sft.train import SftRequest, run_sft
from burnqed.storage import Store
from burnqed.text.feedback import Feedback, FeedbackMessage
from burnqed.text.prompt import PromptFormat
from burnqed.trajectory.reader import read_edges, read_results
from tests.rl.helpers import FMT, THEOREMS
from tests.sft.helpers import write_data_folder

FORM = DeclarationForm.BINDER
PROMPTS = {t.name: whole_prompt(t, FMT, FORM) for t in THEOREMS}
FAILED = Feedback("simp", (FeedbackMessage("error", "simp made no progress", 1, 0),)).to_json()
UNPROVED = Feedback("rfl", (FeedbackMessage("error", "The rfl tactic failed", 1, 0),)).to_json()


def rollout(step: int, theorem: str, completion: str, reward: float, *, feedback: str | None = None,
            prompt: str | None = None) -> Rollout:
    return Rollout(step=step, theorem=theorem, prompt=PROMPTS[theorem] if prompt is None else prompt,
                   completion=completion, reward=reward, reason="" if reward else "error: failed", tokens=3,
                   feedback=feedback)


# two_plus_two: a failure with Lean's messages, then a verified proof sampled twice; n_add_zero: one failure with
# messages and no proof; a completion of another prompt (a repair prompt's), left out; three_times_two: not prompted.
ROLLOUTS = [rollout(1, "two_plus_two", "  simp\n```", 0.0, feedback=FAILED),
            rollout(1, "two_plus_two", "  norm_num\n```", 1.0),
            rollout(1, "n_add_zero", "  rfl\n```", 0.0, feedback=UNPROVED),
            rollout(2, "two_plus_two", "  norm_num\n```", 1.0),
            rollout(2, "n_add_zero", "  sorry\n```", 0.0, prompt="a repair prompt")]


def write(uri: str, store: Store) -> None:
    searches, left_out = rollout_searches(ROLLOUTS, {t.name: t for t in THEOREMS}, fmt=FMT, form=FORM,
                                          guard=TacticGuard.from_config(LeanConfig()))
    assert left_out == 1
    write_rollouts(uri, searches, run_id="iter0-rl", iteration=0, left_out=left_out, store=store)


def test_rollouts_are_one_whole_search_per_theorem_a_row_per_distinct_proof(tmp_path: Path, store: Store) -> None:
    uri = f"file://{tmp_path}/rollouts"
    write(uri, store)
    results = read_results(uri, store=store)
    assert [(r.name, r.mode.value, r.proved, r.proofs_sampled, r.budget_at_proof, r.edges, r.tactics, r.tokens,
             r.failure_reason) for r in results] == [
        ("two_plus_two", "whole", True, 3, 2, 2, ["norm_num"], 9, None),
        ("n_add_zero", "whole", False, 1, None, 1, [], 3, "max_proofs")]
    assert results[0].declaration == "theorem two_plus_two : 2 + 2 = 4" and results[0].header == "import Mathlib"
    rows = read_edges(uri, ["theorem", "node_id", "parent_id", "depth", "state_before", "tactic", "outcome", "label",
                            "feedback", "logprob"], store=store).to_pylist()
    assert [(r["theorem"], r["node_id"], r["parent_id"], r["depth"], r["state_before"], r["tactic"], r["outcome"],
             r["label"], r["feedback"]) for r in rows] == [
        ("n_add_zero", 1, 0, 1, "", "rfl", EdgeOutcome.ERROR.value, Label.NEGATIVE.value, UNPROVED),
        ("two_plus_two", 1, 0, 1, "", "simp", EdgeOutcome.ERROR.value, Label.NEGATIVE.value, FAILED),
        ("two_plus_two", 2, 0, 1, "", "norm_num", EdgeOutcome.CLOSED.value, Label.POSITIVE.value, None)]
    assert all(math.isnan(r["logprob"]) for r in rows)  # not recorded per rollout: never a made-up 0


def test_sft_reads_a_verified_rollout_as_a_whole_example_and_a_failed_one_as_a_repair_example(
        tmp_path: Path, store: Store) -> None:
    uri = f"file://{tmp_path}/rollouts"
    write(uri, store)
    proofs = read_proof_examples([uri], store=store)
    # One whole example of the verified proof (no "proof" example: the row records no state for a prompt to show),
    # and the repair of the failure that has a verified proof to revise into; the unproved theorem's failure: none.
    assert [(p.theorem, p.variant, p.tactic, p.declaration, p.feedback) for p in proofs] == [
        ("two_plus_two", "whole", "norm_num", "theorem two_plus_two : 2 + 2 = 4", None),
        ("two_plus_two", "repair", "norm_num", "theorem two_plus_two : 2 + 2 = 4", FAILED)]
    assert [(p.theorem, p.feedback) for p in read_repair_examples([uri], store=store)] == [("two_plus_two", FAILED)]
    assert read_positives([uri], store=store) == []  # whole proofs are no tactic pairs


@pytest.mark.slow
def test_an_iteration_one_sft_trains_the_verified_rollout_and_no_failed_one(tmp_path: Path, tiny_model_dir: Path,
                                                                           store: Store) -> None:
    uri = f"file://{tmp_path}/rollouts"
    write(uri, store)
    write_data_folder(tmp_path / "data")
    cfg = SftConfig(base_model=str(tiny_model_dir), device="cpu", batch_size=2, max_steps=1, warmup_steps=0,
                    logging_steps=1, eval_steps=1, save_steps=1, base_subsample=4, positive_upsample=3)
    outcome = run_sft(SftRequest(data=str(tmp_path / "data"), output=str(tmp_path / "sft"), iteration=1,
                                 trajectories=(uri,)), cfg, PromptFormat.PLAIN_TACTIC, echo=lambda _: None,
                      store=store, proof_examples=True)
    counts = outcome.record.data_counts
    # 4 base pairs, the verified rollout's whole example and the failure's repair example, each upsampled 3 times;
    # neither failure is a positive (tactic pair) or a proof example.
    assert (counts.positives, counts.proof_examples, counts.repair_examples) == (0, 1, 1)
    assert (counts.base_pairs, counts.train_examples) == (4, 4 + 3 * 2)
