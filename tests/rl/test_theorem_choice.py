"""Which theorems train (docs/training.md, "GRPO stage"; docs/data.md, "Decontamination"): `burnqed rl` without
--split takes the train split (the embedded index's without --theorems) and prompts no test theorem; a test or
benchmark theorem given to it (its split, a benchmark theorem's name, a restated benchmark statement) is refused by
name before any work, as are those in `sft`'s and `train-ebm`'s inputs; an SFT output never trained on whole proofs
is said before RL starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from burnqed.config import Config
from burnqed.data.decontaminate import Benchmark, HeldOut, held_out_names, held_out_theorems
from burnqed.data.index import embedded_index
from burnqed.data.theorems import check_rl_theorems, check_training_inputs, rl_index
from burnqed.errors import InputError
from burnqed.records.theorem import Theorem
from burnqed.rl.grpo import untrained_format
from burnqed.sft.manifests import EXPORT_RECORD, SFT_RECORD, DataCounts, ExportRecord, SftRecord, trained_formats
from burnqed.storage import Store
from burnqed.text.prompt import PromptFormat
from tests.processes import burnqed_in_process
from tests.rl.helpers import build_policy, write_index
from tests.shared import shared_artifact
from tests.trajectory.factories import simple_theorem, write_trajectory

# The embedded test split's first theorem (leankit's bundled corpus) and its statement.
TEST_THEOREM = "algebra_quadratic_roots_2_3"
TEST_STATEMENT = "∀ (x : ℝ), x ^ 2 - 5 * x + 6 = 0 → x = 2 ∨ x = 3"
REFUSED_TEST_SPLIT = (
    "error: rl: 71 of its 247 theorems are test or benchmark theorems, which never train: algebra_quadratic_roots_2_3 "
    "(test split), algebra_ratio_clear_denominator (test split), algebra_sum_product_squares (test split), "
    "ineq_x_plus_reciprocal_ge_two (test split), ineq_two_x_le_sq_plus_one (test split), ineq_nat_le_square (test "
    "split), nt_gcd_12_18 (test split), nt_dvd_trans (test split) and 63 more")


def test_without_theorems_rl_takes_the_embedded_train_split(store: Store) -> None:
    index = rl_index(None, None, Config(), store=store)
    assert index.name == "embedded-train" and len(index.theorems) == 176
    assert {t.split for t in index.theorems} == {"train"}
    assert check_rl_theorems(index, Config(), store=store) == (
        "decontamination: rl: none of its 176 theorems is a test or benchmark theorem (compared with embedded-test, "
        "71 theorems)")


def test_without_split_an_index_gives_its_train_split_and_one_without_splits_all(tmp_path: Path,
                                                                                 store: Store) -> None:
    split = write_index(tmp_path / "split.json", [Theorem(name="a", statement="1 = 1", split="train"),
                                                  Theorem(name="b", statement="2 = 2", split="pool"),
                                                  Theorem(name="c", statement="3 = 3", split="test")])
    assert [t.name for t in rl_index(str(split), None, Config(), store=store).theorems] == ["a"]
    assert [t.name for t in rl_index(str(split), "train,pool", Config(), store=store).theorems] == ["a", "b"]
    plain = write_index(tmp_path / "plain.json", [Theorem(name="a", statement="1 = 1"),
                                                  Theorem(name="b", statement="2 = 2")])
    assert [t.name for t in rl_index(str(plain), None, Config(), store=store).theorems] == ["a", "b"]


def test_a_test_or_benchmark_theorem_is_held_out_by_split_name_or_statement() -> None:
    bench = Benchmark("pipeline.benchmark", "MyBench", (Theorem(name="bench_one", statement="∀ (n : ℕ), n + 0 = n"),
                                                        Theorem(name="bench_two", statement="2 + 2 = 4")))
    given = [Theorem(name="fine", statement="3 * 2 = 6", split="train"),
             Theorem(name="held", statement="5 = 5", split="test"),
             Theorem(name="bench_two", statement="7 = 7", split="train"),  # a benchmark name, another statement
             Theorem(name="renamed", statement="∀ (m : ℕ), m + 0 = m")]  # bench_one up to renaming
    assert held_out_theorems(given, bench) == [HeldOut("held", "test split"),
                                               HeldOut("bench_two", "a theorem of MyBench"),
                                               HeldOut("renamed", "restates bench_one of MyBench")]
    assert held_out_names(["fine", "bench_one", "bench_one"], bench) == [HeldOut("bench_one", "a theorem of MyBench")]


def test_rl_refuses_test_theorems_by_name_before_work(tmp_path: Path) -> None:
    output = tmp_path / "rl"
    done = burnqed_in_process("rl", "--sft", str(tmp_path / "no-sft"), "--split", "train,test", "--output",
                              str(output))
    assert done.returncode == 2
    assert done.stderr.strip() == REFUSED_TEST_SPLIT
    assert not output.exists() and not (tmp_path / "rl-checkpoints").exists()
    # A benchmark theorem by name, and one restating a benchmark statement under another name, in a train split.
    index = write_index(tmp_path / "mine.json", [
        Theorem(name="mine", statement="3 * 2 = 6", split="train"),
        Theorem(name="nt_gcd_12_18", statement="7 = 7", split="train"),
        Theorem(name="my_copy", statement=TEST_STATEMENT, split="train")])
    done = burnqed_in_process("rl", "--sft", str(tmp_path / "no-sft"), "--theorems", str(index), "--output",
                              str(output))
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "error: rl: 2 of its 3 theorems are test or benchmark theorems, which never train: nt_gcd_12_18 (a theorem of "
        f"embedded-test), my_copy (restates {TEST_THEOREM} of embedded-test)")
    assert not output.exists()


def test_sft_and_train_ebm_inputs_holding_benchmark_theorems_are_refused(tmp_path: Path, store: Store) -> None:
    data = tmp_path / "data"
    data.mkdir()
    write_index(data / "theorems.json", [Theorem(name="fine", statement="3 * 2 = 6", split="train"),
                                         Theorem(name="my_copy", statement=TEST_STATEMENT, split="train"),
                                         Theorem(name=TEST_THEOREM, statement=TEST_STATEMENT, split="test")])
    clean = str(tmp_path / "clean")
    write_trajectory(clean, [simple_theorem("fine"), simple_theorem("other")], store=store)
    assert check_training_inputs("train-ebm", Config(), store, trajectories=[clean]) == (
        "decontamination: train-ebm --trajectories: none of its 2 theorems is a test or benchmark theorem (compared "
        "with embedded-test, 71 theorems)")
    with pytest.raises(InputError) as refused:
        check_training_inputs("sft", Config(), store, data=str(data), trajectories=[clean])
    assert str(refused.value) == ("sft --data and --trajectories: 1 of its 3 theorems are test or benchmark theorems, "
                                  f"which never train: my_copy (restates {TEST_THEOREM} of embedded-test)")
    evaluated = str(tmp_path / "eval-trajectories")  # an eval's trajectories: the benchmark's theorems searched
    write_trajectory(evaluated, [simple_theorem(TEST_THEOREM), simple_theorem("fine")], store=store)
    done = burnqed_in_process("train-ebm", "--trajectories", evaluated, "--output", str(tmp_path / "ebm"))
    assert done.returncode == 2
    assert done.stderr.strip() == ("error: train-ebm --trajectories: 1 of its 2 theorems are test or benchmark "
                                   f"theorems, which never train: {TEST_THEOREM} (a theorem of embedded-test)")
    assert not (tmp_path / "ebm").exists()


def sft_record(folder: Path, *, proofs: int = 0, sketches: int = 0, init: Path | None = None) -> Path:
    """An SFT output's record alone (what `trained_formats` reads), counting `proofs` proof and `sketches` sketch
    examples, warm-started from `init`."""
    counts = DataCounts(train_examples=1, eval_examples=0, base_pairs=1, positives=0, positive_upsample=1,
                        positives_held_out=0, too_long=0, eval_source="none", rows=1, tokens=1, supervised_tokens=1,
                        proof_examples=proofs, sketch_examples=sketches)
    record = SftRecord(method="full", base_model=None, base_fingerprint="sha256:0", base_dtype="float32",
                       init=None if init is None else str(init), iteration=0 if init is None else 1, data="data",
                       trajectories=[], prompt_format=PromptFormat.PLAIN_TACTIC, seed=0, steps=1, learning_rate=1e-3,
                       resumed_from_step=None, train_loss=None, first_train_loss=None, eval_loss=None,
                       data_counts=counts, adapter_rank=None, trainable_params=0, total_params=0, train_seconds=0.0,
                       tokens_per_second=None, device="cpu", history=[], written_at="2026-01-01T00:00:00Z")
    folder.mkdir(parents=True)
    (folder / SFT_RECORD).write_text(record.model_dump_json(), encoding="utf-8")
    return folder


def test_an_sft_output_never_trained_on_whole_proofs_is_said_before_rl(tmp_path: Path, store: Store) -> None:
    tactics = sft_record(tmp_path / "tactics")
    assert untrained_format(str(tactics), store=store) == (
        f"warning: rl: --sft {tactics} was never trained on whole proofs (sft.json counts no proof example: "
        "sft.proof_examples was off), the format RL prompts: expect reward 0 on every step unless its base model "
        "writes whole proofs; train SFT with sft.proof_examples = true")
    # A warm start of an SFT that trained proofs learned them, though its own iteration found none.
    proofs = sft_record(tmp_path / "proofs", proofs=4)
    later = sft_record(tmp_path / "later", init=proofs)
    assert untrained_format(str(later), store=store) is None
    found = trained_formats(str(later), store=store)
    assert found is not None and (found.proofs, found.sketches, found.sft) == (True, False, str(later))
    # An export is read through its record's source; a folder with no record is not known.
    export = tmp_path / "export"
    export.mkdir()
    (export / EXPORT_RECORD).write_text(ExportRecord(
        source=str(tmp_path / "sketches"), method="full", base_model=None, dtype="float32", params=1, files={},
        max_logit_diff=None, probe_state="⊢ True", probe_tactic="trivial",
        written_at="2026-01-01T00:00:00Z").model_dump_json(), encoding="utf-8")
    sft_record(tmp_path / "sketches", sketches=2)
    found = trained_formats(str(export), store=store)
    assert found is not None and (found.proofs, found.sketches, found.sft) == (False, True, str(tmp_path / "sketches"))
    assert trained_formats(str(tmp_path / "no-model"), store=store) is None
    assert trained_formats("org/hub-model", store=store) is None


@pytest.mark.slow
@pytest.mark.timeout(300)  # the policy (built once per run), and rl training two steps in this process (`cli`)
def test_rl_with_no_theorems_prompts_no_test_theorem(tiny_model_dir: Path, tmp_path: Path,
                                                     tmp_path_factory: pytest.TempPathFactory) -> None:
    policy = shared_artifact(tmp_path_factory, "rl-policy", lambda folder: build_policy(tiny_model_dir,
                                                                                         folder / "sft")) / "sft"
    output = tmp_path / "rl"
    done = burnqed_in_process("rl", "--sft", str(policy), "--output", str(output), "--set", "rl.max_steps=2",
                              "--set", "rl.num_generations=2", "--set", "rl.max_completion_tokens=12", "--set",
                              "rl.prompts_per_step=8")
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if line.startswith(("decontamination:", "warning:"))]
    assert said == [
        "decontamination: rl: none of its 176 theorems is a test or benchmark theorem (compared with embedded-test, "
        "71 theorems)",
        f"warning: rl: --sft {policy} was never trained on whole proofs (sft.json counts no proof example: "
        "sft.proof_examples was off), the format RL prompts: expect reward 0 on every step unless its base model "
        "writes whole proofs; train SFT with sft.proof_examples = true"]
    assert json.loads((output / "rl.json").read_text(encoding="utf-8"))["theorems"] == 176
    prompted = {json.loads(line)["theorem"] for line in (output / "rollouts.jsonl").read_text().splitlines()}
    train = {t.name for t in embedded_index("train").theorems}
    test = {t.name for t in embedded_index("test").theorems}
    assert len(prompted) == 16 and prompted <= train and not prompted & test
