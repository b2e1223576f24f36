"""Builders for the RL stage's tests: a small theorem index minilean decides, an SFT output (full method) of the
tiny model taught for a few seconds to answer those theorems' whole prompts with a short proof sometimes, so that a
group of rollouts holds both rewards and GRPO has an advantage to follow, and a whole search's record of failed proofs
with Lean's messages (what RL's repair prompts revise)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from burnqed.records.enums import DeclarationForm, SearchMode
from burnqed.records.results import Edge, EdgeOutcome, TheoremResult
from burnqed.records.theorem import Theorem
from burnqed.search.whole import whole_prompt
from burnqed.sft.manifests import SFT_RECORD, DataCounts, SftRecord, model_fingerprint
from burnqed.text.feedback import Feedback, FeedbackMessage
from burnqed.text.prompt import PromptFormat
from tests.trajectory.factories import result

FMT = PromptFormat.PLAIN_WHOLE  # the whole format of the default policy.prompt_format (plain-tactic)
THEOREMS = [Theorem(name="two_plus_two", statement="2 + 2 = 4", header="import Mathlib"),
            Theorem(name="n_add_zero", statement="∀ (n : ℕ), n + 0 = n", header="import Mathlib"),
            Theorem(name="three_times_two", statement="3 * 2 = 6", header="import Mathlib")]
# Proofs to teach (one right for its theorem, one wrong), so sampling at temperature 1 gives both rewards.
TAUGHT = {"two_plus_two": ["  norm_num\n```", "  simp\n```"], "n_add_zero": ["  intro n\n  simp\n```", "  rfl\n```"],
          "three_times_two": ["  norm_num\n```", "  rfl\n```"]}


def failed_search(theorem: Theorem, proofs: list[str], *, shown: Theorem | None = None,
                  revision: int = 0) -> tuple[TheoremResult, list[Edge]]:
    """A whole search's result for `theorem` (showing `shown`'s declaration and header: the theorem's by default) and
    a row per failed proof, each with Lean's message on its first line as search records it (`feedback`)."""
    shows = shown or theorem
    rows = [Edge(node_id=node, parent_id=0, depth=1, state_before="", tactic=proof, state_after=None,
                 outcome=EdgeOutcome.ERROR, error="not counted", logprob=0.0, n_tokens=1, score=None, energy=None,
                 lean_ms=0.0, gen_ms=0.0, timestamp_ms=0, revision=revision, feedback=feedback(proof))
            for node, proof in enumerate(proofs, start=1)]
    found = result(theorem.name, mode=SearchMode.WHOLE, declaration=shows.declaration(DeclarationForm.FORALL),
                   header=shows.header, edges=len(rows))
    return found, rows


def feedback(proof: str) -> str:
    """The feedback record of `proof` failing with one error on its first line."""
    return Feedback(proof, (FeedbackMessage("error", f"{proof} failed", 1, 0),)).to_json()


def write_index(path: Path, theorems: list[Theorem] = THEOREMS) -> Path:
    path.write_text(json.dumps({"name": "rl-tests", "theorems": [t.model_dump(mode="json", exclude_none=True)
                                                                 for t in theorems]}), encoding="utf-8")
    return path


def build_policy(tiny: Path, folder: Path, steps: int = 40) -> Path:
    """An SFT output (method full, sft.json as `burnqed sft` writes it) of the tiny model fine-tuned on TAUGHT."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(tiny)
    model = AutoModelForCausalLM.from_pretrained(tiny, dtype=torch.float32)
    texts = [whole_prompt(t, FMT, DeclarationForm.BINDER) + proof for t in THEOREMS for proof in TAUGHT[t.name]]
    batch = tokenizer(texts, return_tensors="pt", padding=True)
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        loss = model(**batch, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    folder.mkdir(parents=True)
    model.save_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(tiny / name, folder / name)
    record = SftRecord(
        method="full", base_model=None, base_fingerprint=model_fingerprint(tiny), base_dtype="float32", init=None,
        iteration=0, data="rl-tests", trajectories=[], prompt_format=PromptFormat.PLAIN_TACTIC, seed=0, steps=steps,
        learning_rate=3e-3, resumed_from_step=None, train_loss=float(loss.detach()), first_train_loss=None,
        eval_loss=None,
        data_counts=DataCounts(train_examples=len(texts), eval_examples=0, base_pairs=0, positives=0,
                               positive_upsample=1, positives_held_out=0, too_long=0, eval_source="none", rows=0,
                               tokens=0, supervised_tokens=0),
        adapter_rank=None, trainable_params=0, total_params=0, train_seconds=0.0, tokens_per_second=None,
        device="cpu", history=[], written_at="2026-01-01T00:00:00Z")
    (folder / SFT_RECORD).write_text(record.model_dump_json(indent=2), encoding="utf-8")
    return folder
