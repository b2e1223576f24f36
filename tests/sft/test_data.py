"""SFT data: positives come from the state before the tactic, the training prompt is the search prompt (to the
token), the loss covers exactly completion + stop marker + EOS, packed examples never see each other, and
bad inputs fail with one InputError."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from burnqed.config import LeanConfig, SearchConfig, SftConfig
from burnqed.config.sft import proofs_kept
from burnqed.data.pairs import PAIRS_FILE, THEOREMS_FILE, TacticPair, corpus_pairs
from burnqed.errors import InputError
from burnqed.lean.guard import TacticGuard
from burnqed.lean.inprocess import InProcessReplay
from burnqed.policy.base import Completion, Sampling, Seeds
from burnqed.records.enums import DeclarationForm, SearchMode
from burnqed.records.results import Edge, EdgeOutcome
from burnqed.records.theorem import Theorem, TheoremIndex
from burnqed.search.step import StepSettings, prove
from burnqed.sft.data import (
    IGNORE_INDEX,
    TRAJECTORY,
    PackedRowsCollator,
    SftPair,
    build_dataset,
    encode_pairs,
    mix_pairs,
    read_base_proofs,
)
from burnqed.sft.examples import read_positives, read_proof_examples, read_repair_examples
from burnqed.sft.model import load_for_training, load_tokenizer
from burnqed.sft.train import SftRequest, run_sft
from burnqed.sft.trainer import build_trainer, plan_training
from burnqed.storage import Store
from burnqed.text.feedback import Feedback, FeedbackMessage
from burnqed.text.prompt import PromptFormat, build_completion, build_prompt
from burnqed.trajectory.labels import label_edges
from leankit.corpus import load_corpus
from minilean.replay.replay_server import ReplayServer
from tests.doubles.policy_double import ScriptedPolicy, corpus_oracle, state_of
from tests.search.helpers import as_forall_declaration
from tests.sft.helpers import write_data_folder
from tests.trajectory.factories import edge, result, write_trajectory

FMT = PromptFormat.PLAIN_TACTIC
CORPUS = load_corpus()


def pair(theorem: str, split: str, n: int = 0) -> TacticPair:
    return TacticPair(theorem, "test", split, f"⊢ goal {theorem} {n}", f"tactic {n}", None, n)


# ------------------------------------------------------------------------------------ positives


def test_positives_are_state_before_and_tactic_of_positive_edges(tmp_path: Path, store: Store) -> None:
    from burnqed.trajectory.labels import label_edges

    # root --tactic 1--> node 1 --tactic 3--> closed; root --tactic 2--> error (negative sibling).
    edges = [edge(1, 0), edge(2, 0, EdgeOutcome.ERROR), edge(3, 1, EdgeOutcome.CLOSED, depth=2)]
    label_edges(edges, [3], proved=True)
    unproved = [edge(1, 0), edge(2, 1, depth=2)]  # accepted by Lean, no proof: unknown, not positive
    label_edges(unproved, [], proved=False)
    first = f"file://{tmp_path}/iter_0"
    write_trajectory(first, [(result("thm_a", True, edges=3, depth=2), edges),
                             (result("thm_b", False, edges=2), unproved)], store=store)
    # The same positive found again in a later iteration counts once.
    again = [edge(1, 0, EdgeOutcome.CLOSED)]
    label_edges(again, [1], proved=True)
    second = f"file://{tmp_path}/iter_1"
    write_trajectory(second, [(result("thm_a", True, edges=1, depth=1), again)], iteration=1, store=store)

    positives = read_positives([first, second], store=store)

    assert positives == [
        SftPair("thm_a", "state 0", "tactic 1", TRAJECTORY),  # the root state, never "state 1" (after)
        SftPair("thm_a", "state 1", "tactic 3", TRAJECTORY),
    ]


def test_positives_need_an_existing_trajectory(tmp_path: Path, store: Store) -> None:
    with pytest.raises(InputError, match="no trajectory data"):
        read_positives([str(tmp_path / "missing")], store=store)


def _two_iterations(tmp_path: Path, store: Store) -> list[str]:
    """thm_a: proved twice at iteration 0 (`tactic 2` alone; `tactic 1` then `tactic 3`) and once at iteration 1
    (`tactic 1` then `tactic 4`); thm_c: once at each, by one tactic as long as the other."""
    declared: dict[str, Any] = {"declaration": "theorem a : True", "tactics": ["tactic 2"]}
    a0 = [edge(1, 0), edge(2, 0, EdgeOutcome.CLOSED), edge(3, 1, EdgeOutcome.CLOSED, depth=2)]
    label_edges(a0, [2, 3], proved=True)
    c0 = [edge(1, 0, EdgeOutcome.CLOSED)]
    label_edges(c0, [1], proved=True)
    first = f"file://{tmp_path}/iter_0"
    write_trajectory(first, [(result("thm_a", True, edges=3, depth=2, **declared), a0),
                             (result("thm_c", True, edges=1, depth=1), c0)], store=store)
    a1 = [edge(1, 0), edge(4, 1, EdgeOutcome.CLOSED, depth=2)]
    label_edges(a1, [4], proved=True)
    c1 = [edge(2, 0, EdgeOutcome.CLOSED)]
    label_edges(c1, [2], proved=True)
    second = f"file://{tmp_path}/iter_1"
    write_trajectory(second, [(result("thm_a", True, edges=2, depth=2, **declared), a1),
                              (result("thm_c", True, edges=1, depth=1), c1)], iteration=1, store=store)
    return [first, second]


def test_one_proof_per_theorem_keeps_the_shortest_or_the_newest(tmp_path: Path, store: Store) -> None:
    """`sft.proofs_per_theorem`: every proof's positives, or one proof's: the shortest (a tie of rows and characters
    goes to the newest) or the newest (the last iteration's)."""
    uris = _two_iterations(tmp_path, store)

    def kept(keep: Any) -> list[tuple[str, str, str]]:
        return [(p.theorem, p.state_before, p.tactic) for p in read_positives(uris, store=store, keep=keep)]

    assert kept("all") == [("thm_a", "state 0", "tactic 1"), ("thm_a", "state 0", "tactic 2"),
                           ("thm_a", "state 1", "tactic 3"), ("thm_c", "state 0", "tactic 1"),
                           ("thm_a", "state 1", "tactic 4"), ("thm_c", "state 0", "tactic 2")]
    assert kept("shortest") == [("thm_a", "state 0", "tactic 2"), ("thm_c", "state 0", "tactic 2")]
    assert kept("newest") == [("thm_a", "state 0", "tactic 1"), ("thm_a", "state 1", "tactic 4"),
                              ("thm_c", "state 0", "tactic 2")]


def test_one_proof_per_theorem_gives_its_proof_examples_and_refuses_a_sketch_proof(tmp_path: Path,
                                                                                     store: Store) -> None:
    uris = _two_iterations(tmp_path, store)
    examples = read_proof_examples(uris, store=store, keep="newest")
    assert [(p.theorem, p.variant, p.state_before, p.tactic) for p in examples if p.theorem == "thm_a"] == [
        ("thm_a", "whole", "", "tactic 1\ntactic 4"),  # the chosen proof's rows, not the result's first proof
        ("thm_a", "proof", "state 0", "tactic 1\ntactic 4"), ("thm_a", "proof", "state 1", "tactic 4")]
    shortest = read_proof_examples(uris, store=store, keep="shortest")
    assert [(p.variant, p.state_before, p.tactic) for p in shortest if p.theorem == "thm_a"] == [
        ("whole", "", "tactic 2"), ("proof", "state 0", "tactic 2")]
    sketched = [edge(1, 0), edge(2, 1, EdgeOutcome.CLOSED, depth=2)]
    label_edges(sketched, [2], proved=True)
    later = f"file://{tmp_path}/iter_2"
    write_trajectory(later, [(result("thm_s", True, edges=2, depth=2, mode=SearchMode.SKETCH), sketched)],
                     iteration=2, store=store)
    with pytest.raises(InputError, match="theorem 'thm_s' was proved by a sketch search"):
        read_positives([*uris, later], store=store, keep="shortest")
    assert len(read_positives([*uris, later], store=store)) == 7  # "all" trains on it: the 6 above, its subgoal's
    # unset, the setting reads the search mode: the shortest proof, every proof of a sketch-mode run
    assert [proofs_kept(SftConfig(proofs_per_theorem=keep), SearchConfig(mode=mode))
            for keep in (None, "newest") for mode in (SearchMode.STEP, SearchMode.SKETCH)] == [
        "shortest", "all", "newest", "newest"]


def test_mixing_upsamples_positives_subsamples_base_and_holds_out_eval_and_test_theorems() -> None:
    base = [pair(f"t{i}", "train", i) for i in range(6)] + [pair("v", "valid"), pair("x", "test")]
    positives = [SftPair("t0", "s0", "a", TRAJECTORY), SftPair("v", "s1", "b", TRAJECTORY),
                 SftPair("x", "s2", "c", TRAJECTORY), SftPair("new", "s3", "d", TRAJECTORY)]

    zero = mix_pairs(base, [], iteration=0, base_subsample=2, positive_upsample=3, eval_fraction=0.5, seed=0)
    assert [p.theorem for p in zero.train] == [f"t{i}" for i in range(6)]  # iteration 0: every train pair
    assert [p.theorem for p in zero.eval] == ["v"] and zero.eval_source == "valid-split"

    one = mix_pairs(base, positives, iteration=1, base_subsample=2, positive_upsample=3, eval_fraction=0.5, seed=0)
    origins = sorted((p.origin, p.tactic) for p in one.train)
    assert len([o for o in origins if o[0] == "base"]) == 2
    assert [o for o in origins if o[0] == TRAJECTORY] == [(TRAJECTORY, "a")] * 3 + [(TRAJECTORY, "d")] * 3
    assert (one.base_pairs, one.positives, one.positives_held_out) == (2, 2, 2)
    again = mix_pairs(base, positives, iteration=1, base_subsample=2, positive_upsample=3, eval_fraction=0.5, seed=0)
    assert again.train == one.train  # seeded
    # Proof and repair examples are upsampled like the positives and counted apart; a held-out theorem's are dropped.
    feedback = '{"proof":"simp","messages":[["error","simp made no progress",1,0]],"cut":0,"goal":null}'
    examples = [SftPair("t1", "", "ring", TRAJECTORY, "whole", declaration="theorem t1 : p"),
                SftPair("t1", "", "ring", TRAJECTORY, "repair", declaration="theorem t1 : p", feedback=feedback),
                SftPair("v", "", "ring", TRAJECTORY, "repair", declaration="theorem v : p", feedback=feedback)]
    mixed = mix_pairs(base, [*positives, *examples], iteration=1, base_subsample=2, positive_upsample=3,
                      eval_fraction=0.5, seed=0)
    assert (mixed.positives, mixed.proof_examples, mixed.repair_examples) == (2, 1, 1)
    assert sum(1 for p in mixed.train if p.variant == "repair") == 3

    no_valid = [p for p in base if p.split != "valid"]
    hashed = mix_pairs(no_valid, [], iteration=0, base_subsample=0, positive_upsample=1, eval_fraction=0.5, seed=0)
    assert hashed.eval_source == "hashed-train"
    assert {p.theorem for p in hashed.eval}.isdisjoint({p.theorem for p in hashed.train})
    assert len(hashed.eval) + len(hashed.train) == 6


# -------------------------------------------------------------------------- prompt = search prompt


class RecordingPolicy(ScriptedPolicy):
    """The corpus oracle, keeping every raw prompt search sends."""

    def __init__(self) -> None:
        super().__init__(corpus_oracle(CORPUS))
        self.prompts: list[str] = []

    async def generate(self, prompts: Sequence[str], sampling: Sampling,
                       seeds: Seeds | None = None) -> list[list[Completion]]:
        self.prompts.extend(prompts)
        return await super().generate(prompts, sampling, seeds)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", [PromptFormat.PLAIN_TACTIC, PromptFormat.DEEPSEEK_TACTIC])
def test_training_prompt_is_byte_identical_to_the_search_prompt(tmp_path: Path, tiny_model_dir: Path,
                                                                fmt: PromptFormat, store: Store) -> None:
    spec = CORPUS.by_name("algebra_2x_plus_3_eq_11")
    assert spec is not None
    policy = RecordingPolicy()
    settings = StepSettings(fmt=fmt, sampling=Sampling(n=8), max_nodes=20, timeout_s=30.0)
    outcome = asyncio.run(prove(Theorem.from_recorded(spec), InProcessReplay(ReplayServer(CORPUS)), policy, settings,
                                TacticGuard.from_config(LeanConfig())))
    assert outcome.result.proved
    uri = f"file://{tmp_path}/traj"
    write_trajectory(uri, [(outcome.result, outcome.edges)], store=store)
    positives = read_positives([uri], store=store)
    # The theorem starts as written (`x` in context): its proof introduces the hypothesis alone.
    assert [p.tactic for p in positives] == outcome.result.tactics == ["intro h₀", "linarith"]

    tokenizer = load_tokenizer(tiny_model_dir)
    rows = encode_pairs(tokenizer, fmt, positives)
    for positive, row in zip(positives, rows, strict=True):
        sent = [p for p in policy.prompts if state_of(p) == positive.state_before]
        assert len(set(sent)) == 1  # the one prompt search sent for this state
        prompt_ids = row.input_ids[: row.prompt_length]
        assert prompt_ids == tokenizer(sent[0])["input_ids"]  # token for token what the policy got
        decoded = tokenizer.decode(prompt_ids, skip_special_tokens=True)
        assert decoded == sent[0] == build_prompt(fmt, positive.state_before, positive.declaration)


class PromptLog(ScriptedPolicy):
    """A scripted policy keeping every raw prompt."""

    def __init__(self, script: Any, **kwargs: Any) -> None:
        super().__init__(script, **kwargs)
        self.prompts: list[str] = []

    async def generate(self, prompts: Sequence[str], sampling: Sampling,
                       seeds: Seeds | None = None) -> list[list[Completion]]:
        self.prompts.extend(prompts)
        return await super().generate(prompts, sampling, seeds)


@pytest.mark.slow
def test_verified_proofs_train_the_proof_formats_with_the_prompts_search_sends(
    tmp_path: Path, tiny_model_dir: Path, store: Store
) -> None:
    from burnqed.search.hybrid import prove_hybrid
    from burnqed.search.hybrid_settings import HybridSettings
    from burnqed.search.whole import WholeSettings, prove_whole
    from tests.doubles.policy_double import declaration_of

    spec = CORPUS.by_name("ineq_x_plus_reciprocal_ge_two")
    assert spec is not None
    fix = "nlinarith [sq_nonneg (x - 1)]"
    table = {"⊢ ∀ (x : ℝ), 0 < x → x + 1 / x ≥ 2": "intro x hx\nfield_simp\nlinarith",
             "⊢ x + 1 / x ≥ 2": "field_simp\nlinarith", "⊢ 2 * x ≤ x * x + 1": fix}
    hybrid = PromptLog(lambda state: [(table[state.split("\n")[-1]], -1.0)])
    guard = TacticGuard.from_config(LeanConfig())
    found = asyncio.run(prove_hybrid(as_forall_declaration(spec), InProcessReplay(ReplayServer(CORPUS)), hybrid,
                                     HybridSettings(sampling=Sampling(stop=("```",))), guard))
    whole = PromptLog(lambda _: [(f"intro x hx\nfield_simp\n{fix}", -1.0)], key=declaration_of)
    by_whole = asyncio.run(prove_whole(as_forall_declaration(spec), InProcessReplay(ReplayServer(CORPUS)), whole,
                                       WholeSettings(sampling=Sampling(n=1, stop=("```",)), max_proofs=1), guard))
    assert found.result.proved and by_whole.result.proved
    uri = f"file://{tmp_path}/traj"
    write_trajectory(uri, [(found.result, found.edges), (by_whole.result.model_copy(update={"name": "w"}),
                                                         by_whole.edges)], store=store)
    # Whole-mode rows are whole proofs: never tactic pairs. Hybrid rows are.
    assert [(p.theorem, p.tactic) for p in read_positives([uri], store=store)] == [
        (spec.name, "intro x hx"), (spec.name, "field_simp"), (spec.name, fix)]
    examples = read_proof_examples([uri], store=store)
    body = f"intro x hx\nfield_simp\n{fix}"
    assert sorted((p.theorem, p.variant, p.tactic) for p in examples) == sorted([
        (spec.name, "whole", body), (spec.name, "proof", body), (spec.name, "proof", f"field_simp\n{fix}"),
        (spec.name, "proof", fix),
    ])  # "w"'s examples (its root state → body, its declaration → body) are the same as the hybrid's: each result
    # records the declaration its prompts showed, and both searches showed the same one
    tokenizer = load_tokenizer(tiny_model_dir)
    rows = encode_pairs(tokenizer, FMT, examples)
    sent = {*hybrid.prompts, *whole.prompts}
    for example, row in zip(examples, rows, strict=True):
        prompt = tokenizer.decode(row.input_ids[: row.prompt_length], skip_special_tokens=True)
        assert prompt in sent, example  # the exact prompt a hybrid or whole search sent for it
        completion = tokenizer.decode(row.input_ids[row.prompt_length :], skip_special_tokens=True)
        assert completion == build_completion(PromptFormat.PLAIN_PROOF, example.tactic)


# ------------------------------------------------------------------------------------------- masking


def _segments(batch: dict[str, Any]) -> list[tuple[list[int], list[int]]]:
    """(input ids, labels) of every example in a collated batch, split where position ids restart."""
    out: list[tuple[list[int], list[int]]] = []
    for ids, labels, positions in zip(batch["input_ids"].tolist(), batch["labels"].tolist(),
                                      batch["position_ids"].tolist(), strict=True):
        starts = [i for i, p in enumerate(positions) if p == 0] + [len(positions)]
        for a, b in itertools.pairwise(starts):
            if b - a > 1:  # a single pad token is its own "sequence"
                out.append((ids[a:b], labels[a:b]))
    return out


@pytest.mark.slow
@pytest.mark.parametrize(("packing", "varlen"), [(True, False), (False, False), (True, True)])
def test_supervised_positions_are_exactly_completion_stop_marker_and_eos(tiny_model_dir: Path, packing: bool,
                                                                          varlen: bool) -> None:
    pairs = [SftPair(p.theorem, p.state_before, p.tactic) for p in corpus_pairs(limit=12) if p.split != "test"]
    cfg = SftConfig(base_model=str(tiny_model_dir), device="cpu", batch_size=3, packing=packing, max_length=256,
                    attn_implementation="flash_attention_2" if varlen else None)
    policy = load_for_training("full", tiny_model_dir, None, cfg.model_copy(update={"attn_implementation": None}),
                               "cpu", False)
    tokenizer = policy.tokenizer
    dataset, stats = build_dataset(encode_pairs(tokenizer, FMT, pairs), max_length=256, packing=packing, seed=0)
    assert stats.examples == len(pairs) and stats.too_long == 0
    plan = plan_training(cfg, 0, warm=False)
    assert plan.varlen is varlen
    trainer = build_trainer(policy, dataset, None, cfg=cfg, plan=plan, output_dir=Path("/nonexistent"))
    assert isinstance(trainer.data_collator, PackedRowsCollator) is not varlen
    expected = {(build_prompt(FMT, p.state_before), build_completion(FMT, p.tactic) + tokenizer.eos_token)
                for p in pairs}

    seen = []
    for start in range(0, len(dataset), 3):
        batch = trainer.data_collator([dataset[i] for i in range(start, min(start + 3, len(dataset)))])
        assert "attention_mask" not in batch  # masks come from position ids: no cross-example attention
        for ids, labels in _segments(batch):
            prompt_len = next(i for i, label in enumerate(labels) if label != IGNORE_INDEX)
            supervised = [label for label in labels if label != IGNORE_INDEX]
            assert supervised == ids[prompt_len:]  # contiguous: everything after the prompt, nothing before
            assert ids[0] == tokenizer.bos_token_id
            seen.append((tokenizer.decode(ids[1:prompt_len]), tokenizer.decode(supervised)))
    assert sorted(seen) == sorted(expected)
    assert seen[0][1].endswith("\n```<|eos|>")


@pytest.mark.slow
def test_packed_examples_do_not_attend_to_each_other(tiny_model_dir: Path) -> None:
    import torch

    cfg = SftConfig(base_model=str(tiny_model_dir), device="cpu")
    policy = load_for_training("full", tiny_model_dir, None, cfg, "cpu", False)
    pairs = [SftPair(p.theorem, p.state_before, p.tactic) for p in corpus_pairs(limit=4)]
    rows = encode_pairs(policy.tokenizer, FMT, pairs)
    dataset, _ = build_dataset(rows, max_length=512, packing=False, seed=0)
    trainer = build_trainer(policy, dataset, None, cfg=cfg, plan=plan_training(cfg, 0, warm=False),
                            output_dir=Path("/nonexistent"))
    collate = trainer.data_collator
    packed = collate([{"input_ids": [t for r in rows for t in r.input_ids],
                       "labels": [t for r in rows for t in r.labels],
                       "seq_lengths": [len(r.input_ids) for r in rows]}])
    singles = [collate([{"input_ids": r.input_ids, "labels": r.labels}]) for r in rows]
    model = trainer.model.eval()
    with torch.inference_mode():
        # The trainer's own loss (TRL's compute_loss) on the packed row = the token-weighted mean of the
        # examples' losses computed alone.
        together = float(trainer.compute_loss(model, dict(packed)))
        alone = [float(trainer.compute_loss(model, dict(single))) for single in singles]
        weights = [len(r.input_ids) - r.prompt_length for r in rows]
        assert together == pytest.approx(sum(a * w for a, w in zip(alone, weights, strict=True)) / sum(weights),
                                         abs=1e-5)
        # And position by position: the logits of each packed example are those it gets alone.
        logits = model(**packed, use_cache=False).logits[0]
        offset = 0
        for row in rows:
            single = model(input_ids=torch.tensor([row.input_ids]), use_cache=False).logits[0]
            assert torch.allclose(logits[offset : offset + len(row.input_ids)], single, atol=1e-5)
            offset += len(row.input_ids)


# --------------------------------------------------------------------------------------- bad input


def _run(tmp_path: Path, tiny_model_dir: Path, data: Path, *, store: Store, **cfg: Any) -> None:
    run_sft(SftRequest(iteration=0, data=str(data), output=str(tmp_path / "sft")),
            SftConfig(base_model=str(tiny_model_dir), device="cpu", max_steps=2, **cfg), FMT, store=store)


def test_missing_data_folder_is_one_input_error(tmp_path: Path, tiny_model_dir: Path, store: Store) -> None:
    with pytest.raises(InputError, match="does not exist"):
        _run(tmp_path, tiny_model_dir, tmp_path / "nowhere", store=store)
    assert not (tmp_path / "sft").exists()


def test_pairs_file_lacking_a_column_is_one_input_error(tmp_path: Path, tiny_model_dir: Path, store: Store) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    table = pa.table({"theorem": ["t"], "source": ["s"], "split": ["train"], "tactic": ["simp"],
                      "state_after": [None], "depth": pa.array([0], pa.int32())})
    pq.write_table(table, folder / PAIRS_FILE)
    with pytest.raises(InputError, match="lack column\\(s\\) state_before"):
        _run(tmp_path, tiny_model_dir, folder, store=store)


def test_zero_pairs_after_filtering_is_one_input_error(tmp_path: Path, tiny_model_dir: Path, store: Store) -> None:
    only_held_out = [p for p in corpus_pairs() if p.split != "train"]
    data = write_data_folder(tmp_path / "data", only_held_out)
    with pytest.raises(InputError, match="no training pairs left after filtering"):
        _run(tmp_path, tiny_model_dir, data, store=store)
    with pytest.raises(InputError, match=r"longer than sft\.max_length=16"):
        _run(tmp_path, tiny_model_dir, write_data_folder(tmp_path / "data2"), max_length=16, store=store)
    assert not (tmp_path / "sft").exists() and not (tmp_path / "sft-checkpoints").exists()


@pytest.mark.parametrize(("iteration", "trajectories", "init", "message"), [
    (0, ("t",), None, "--trajectories is for iterations ≥ 1"),
    (0, (), "i", "--init is for iterations ≥ 1"),
    (1, (), None, "give --trajectories"),
])
def test_flags_must_fit_the_iteration(tmp_path: Path, iteration: int, trajectories: tuple[str, ...],
                                     init: str | None, message: str, store: Store) -> None:
    request = SftRequest(iteration=iteration, data=str(tmp_path), output=str(tmp_path / "o"),
                         trajectories=trajectories, init=init)
    with pytest.raises(InputError, match=message):
        run_sft(request, SftConfig(), FMT, store=store)


def test_repair_examples_take_the_first_failure_at_each_state_of_a_verified_proof(tmp_path: Path,
                                                                                    store: Store) -> None:
    # A step search: two tactics fail at the root, one at the node the proof goes through, one at a node off it.
    def failed(node: int, parent: int, text: str) -> Edge:
        row = edge(node, parent, EdgeOutcome.ERROR, depth=2 if parent else 1)
        row.feedback = Feedback(text, (FeedbackMessage("error", f"{text} failed", 1, 0),)).to_json()
        return row

    rows = [failed(1, 0, "first"), failed(2, 0, "second"), edge(3, 0), edge(4, 0), failed(5, 3, "on the path"),
            failed(6, 4, "off the path"), edge(7, 3, EdgeOutcome.CLOSED, depth=2)]
    label_edges(rows, [7], True)
    proved = result("t", True, edges=len(rows), depth=2, mode=SearchMode.STEP, declaration="theorem t : p",
                    tactics=["tactic 3", "tactic 7"])
    uri = f"file://{tmp_path}/traj"
    write_trajectory(uri, [(proved, rows)], store=store)
    examples = read_repair_examples([uri], store=store)
    assert [Feedback.from_json(e.feedback or "").proof for e in examples] == ["first", "on the path"]
    assert {e.tactic for e in examples} == {"tactic 3\ntactic 7"}


# ------------------------------------------------------------------------------------ the data's replayed proofs


def step(theorem: str, before: str, tactic: str, after: str | None, depth: int, split: str = "train") -> TacticPair:
    return TacticPair(theorem, "test", split, before, tactic, after, depth)


def test_a_whole_example_is_the_first_replayed_proof_of_each_stated_theorem(tmp_path: Path) -> None:
    """`read_base_proofs` joins each theorem's first chain of pairs from depth 0 to no goals, each pair taken at the
    state the one before left, with the declaration and header of its index entry; a theorem whose pairs close no
    chain (a state after unknown, a proof cut short) or that has no statement gives none."""
    index = TheoremIndex(name="data", theorems=[
        Theorem(name="two_step", statement="∀ (x : ℕ), x = x", header="open Nat"),
        Theorem(name="unknown_after", statement="1 = 1"),
        Theorem(name="cut_short", statement="2 = 2"),
        Theorem(name="no_statement"),
    ])
    (tmp_path / THEOREMS_FILE).write_text(index.model_dump_json(), encoding="utf-8")
    base = [
        # a first proof that dead-ends at depth 1 in this file (its closing pair was a duplicate of another proof's),
        step("two_step", "⊢ ∀ (x : ℕ), x = x", "intros", "x : ℕ\n⊢ x = x", 0),
        step("two_step", "x : ℕ\n⊢ x = x", "skip", "x : ℕ\n⊢ x = x", 1),
        # then one that closes: intro x, then rfl at the state it left
        step("two_step", "⊢ ∀ (x : ℕ), x = x", "intro x", "x✝ : ℕ\n⊢ x✝ = x✝", 0),
        step("two_step", "x✝ : ℕ\n⊢ x✝ = x✝", "rfl", "no goals", 1),
        step("two_step", "x✝ : ℕ\n⊢ x✝ = x✝", "simp", "no goals", 1),  # another proof's: the first is taken
        step("unknown_after", "⊢ 1 = 1", "rfl", None, 0),
        step("cut_short", "⊢ 2 = 2", "skip", "⊢ 2 = 2", 0),
        step("no_statement", "⊢ True", "trivial", "no goals", 0),
    ]
    examples = read_base_proofs(tmp_path, base, DeclarationForm.BINDER)
    assert examples == [SftPair("two_step", "", "intro x\nrfl", "base", "whole", "open Nat",
                                "theorem two_step (x : ℕ) : x = x")]
    assert read_base_proofs(tmp_path, base, DeclarationForm.FORALL)[0].declaration == \
        "theorem two_step : ∀ (x : ℕ), x = x"
    assert read_base_proofs(tmp_path / "missing", base, DeclarationForm.BINDER) == []  # no index: no declarations


def test_iteration_zero_trains_the_whole_examples_of_its_train_theorems_and_counts_them() -> None:
    """At iteration 0 the data's whole examples join every base train pair, those of held-out and test theorems
    left out, and count as proof examples; from iteration 1 the trajectories' proofs give them instead."""
    base = [pair(f"t{i}", "train", i) for i in range(3)] + [pair("v", "valid"), pair("x", "test")]
    whole = [SftPair(name, "", "rfl", "base", "whole", declaration=f"theorem {name} : p") for name in ("t1", "v", "x")]
    zero = mix_pairs(base, [], iteration=0, base_subsample=10, positive_upsample=3, eval_fraction=0.5, seed=0,
                     base_proofs=whole)
    assert [(p.theorem, p.variant) for p in zero.train] == [("t0", "tactic"), ("t1", "tactic"), ("t2", "tactic"),
                                                             ("t1", "whole")]
    assert (zero.base_pairs, zero.proof_examples, [p.theorem for p in zero.eval]) == (3, 1, ["v"])
    one = mix_pairs(base, [], iteration=1, base_subsample=10, positive_upsample=3, eval_fraction=0.5, seed=0,
                    base_proofs=whole)
    assert ([p.variant for p in one.train], one.proof_examples) == (["tactic"] * 3, 0)


def test_a_proof_through_its_files_lemmas_is_no_whole_example(tmp_path: Path, store: Store) -> None:
    """A counted proof whose file declares lemmas (`burnqed_lemma_<k>`: sketch search with a lemma graph or a library)
    closes its holes by those lemmas: its tactics alone prove nothing, so neither a whole example nor a repair target
    is made of them; a proof of its own stays one."""
    declaration = "theorem t (a : Nat) (h : a = 1) : a = 1"
    through = result("through", True, declaration=declaration, tactics=["exact burnqed_lemma_1 a h"])
    alone = result("alone", True, declaration=declaration.replace("theorem t", "theorem u"), tactics=["exact h"])
    uri = f"file://{tmp_path}/traj"
    write_trajectory(uri, [(through, []), (alone, [])], store=store)
    examples = read_proof_examples([uri], store=store)
    assert [(p.theorem, p.variant, p.tactic) for p in examples] == [("alone", "whole", "exact h")]
