"""The replay corpus: the bundled corpus' size and coverage, validation errors, and the bundled index files."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from burnqed.data.index import BUNDLED_SPLITS, bundled_index_path, index_json, theorem_index
from burnqed.errors import InputError
from leankit.corpus import (
    SPLITS,
    TOPICS,
    GoalSpec,
    TheoremSpec,
    Transition,
    bundled_corpus_path,
    load_corpus,
    split_hypothesis,
    tactic_key,
)
from leankit.failures import BadInput
from leankit.statements import tactic_head
from tests.lean.scripts import assemble_script

MINIMAL: dict[str, Any] = {
    "name": "mini",
    "theorems": [
        {
            "name": "mini_linear",
            "split": "train",
            "topic": "algebra",
            "statement": "∀ (x : ℝ), x + 1 = 2 → x = 1",
            "root": "g0",
            "goals": {
                "g0": {"hyps": [], "target": "∀ (x : ℝ), x + 1 = 2 → x = 1"},
                "g1": {"hyps": ["x : ℝ", "h₀ : x + 1 = 2"], "target": "x = 1"},
            },
            "transitions": [
                {"goal": "g0", "tactic": "intro x h₀", "result": ["g1"]},
                {"goal": "g1", "tactic": "linarith", "result": []},
                {"goal": "g1", "tactic": "simp at h₀", "error": "simp made no progress"},
            ],
            "proofs": [["intro x h₀", "linarith"]],
        }
    ],
}


def write(tmp_path: Path, data: Any, name: str = "corpus.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def broken(mutate: Any) -> dict[str, Any]:
    data = copy.deepcopy(MINIMAL)
    mutate(data["theorems"][0])
    return data


# -- the bundled corpus --------------------------------------------------------------------------------


def test_bundled_corpus_size_splits_and_topics() -> None:
    corpus = load_corpus()
    assert corpus.name == "bundled-competition"
    assert len(corpus.theorems) >= 44
    per = Counter((theorem.split, theorem.topic) for theorem in corpus.theorems)
    assert "pool" in SPLITS and per["pool", "algebra"] == 0  # hand-written theorems are train or test
    for split in ("train", "test"):
        for topic in TOPICS:
            assert per[(split, topic)] >= 1, (split, topic)
    test_share = sum(1 for theorem in corpus.theorems if theorem.split == "test") / len(corpus.theorems)
    assert 0.2 <= test_share <= 0.4


def test_bundled_corpus_has_failures_multi_goal_steps_and_deep_test_proofs() -> None:
    corpus = load_corpus()
    failures = sum(1 for t in corpus.theorems for transition in t.transitions if transition.error is not None)
    assert failures / len(corpus.theorems) >= 3
    multi_goal = [t.name for t in corpus.theorems if any(len(tr.result or ()) >= 2 for tr in t.transitions)]
    assert len(multi_goal) >= 10
    cases = {goal.case for t in corpus.theorems for goal in t.goals.values() if goal.case}
    assert {"inl", "inr", "left", "right"} <= cases
    deepest_test = max(min(len(p) for p in t.proofs) for t in corpus.theorems if t.split == "test")
    assert deepest_test >= 4


def test_every_test_theorem_has_a_proof_made_of_tactic_heads_seen_in_train() -> None:
    corpus = load_corpus()
    train_heads = {tactic_head(tac) for t in corpus.theorems if t.split == "train" for p in t.proofs for tac in p}
    for theorem in corpus.theorems:
        if theorem.split == "test":
            assert any({tactic_head(tac) for tac in proof} <= train_heads for proof in theorem.proofs), theorem.name


def test_bundled_index_files_match_theorem_index() -> None:
    corpus = load_corpus()
    for split in BUNDLED_SPLITS:
        text = bundled_index_path(split).read_text(encoding="utf-8")
        assert text == index_json(theorem_index(corpus, split)), f"regenerate {bundled_index_path(split).name} with " \
            "python -m burnqed.data.index --write-index burnqed/data/bundled"
    test_index = theorem_index(corpus, "test")
    assert test_index.name == "bundled-competition-test"
    assert {entry.split for entry in test_index.theorems} == {"test"}
    first = json.loads(index_json(test_index))["theorems"][0]
    assert list(first) == ["name", "statement", "header", "source", "split"]


@pytest.mark.slow
def test_write_index_cli(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "burnqed.data.index", "--write-index", str(tmp_path)],
        check=False,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    for split in BUNDLED_SPLITS:
        assert (tmp_path / bundled_index_path(split).name).read_bytes() == bundled_index_path(split).read_bytes()


def test_assembled_script_indents_every_line() -> None:
    theorem = load_corpus().by_name("nt_sum_first_odds_square")
    assert theorem is not None
    script = assemble_script(theorem, ["induction n with\n| zero => simp"])
    assert script.endswith(  # the declaration as the theorem starts: its ∀ binder before the colon
        "theorem nt_sum_first_odds_square (n : ℕ) : ∑ i ∈ Finset.range n, (2 * i + 1) = n ^ 2 := by\n"
        "  induction n with\n  | zero => simp\n"
    )


# -- helpers -------------------------------------------------------------------------------------------


def test_normalize_tactic_and_split_hypothesis() -> None:
    assert tactic_key("  nlinarith [ sq_nonneg (a - b) ,  h ]\n") == "nlinarith [sq_nonneg (a - b), h]"
    assert tactic_key("intro  x\n  h₀") == "intro x h₀"
    assert split_hypothesis("x y : ℝ") == [("x", "ℝ"), ("y", "ℝ")]
    assert split_hypothesis("h : ∀ (x : ℝ), f x = 2") == [("h", "∀ (x : ℝ), f x = 2")]
    with pytest.raises(ValueError, match="not of the form"):
        split_hypothesis("x ℝ")


def test_load_file_and_folder(tmp_path: Path) -> None:
    corpus = load_corpus(write(tmp_path, MINIMAL))
    assert [theorem.name for theorem in corpus.theorems] == ["mini_linear"]
    theorem = corpus.theorems[0]
    assert theorem.lookup("g1", " linarith ") is not None
    assert corpus.by_statement("∀ (x:ℝ), x+1 = 2 → x = 1") is theorem  # whitespace-insensitive
    assert corpus.by_statement("∀ (x : ℝ), x + 1 = 3 → x = 2") is None
    other = copy.deepcopy(MINIMAL)
    other["theorems"][0]["name"] = "mini_other"
    write(tmp_path, other, "b.json")
    # A folder's files load in file-name order: b.json before corpus.json.
    assert [t.name for t in load_corpus(tmp_path).theorems] == ["mini_other", "mini_linear"]
    assert bundled_corpus_path().is_file()


# -- validation errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda t: t.update(root="g9"), "theorem 'mini_linear': root goal 'g9' is not in goals"),
        (
            lambda t: t["transitions"][0].update(result=["g7"]),
            "transition 'intro x h₀' on goal 'g0' yields unknown goal 'g7'",
        ),
        (
            lambda t: t["transitions"][1].update(goal="g5"),
            "transition 'linarith' refers to unknown goal 'g5'",
        ),
        (
            lambda t: t.update(proofs=[["intro x h₀"]]),
            "proof 1 ['intro x h₀']: leaves goals ['g1'] open",
        ),
        (
            lambda t: t.update(proofs=[["intro x h₀", "simp at h₀"]]),
            "tactic 'simp at h₀' is recorded as failing on goal 'g1'",
        ),
        (
            lambda t: t.update(proofs=[["intro x h₀", "nlinarith"]]),
            "tactic 'nlinarith' has no transition on goal 'g1'",
        ),
        (lambda t: t.update(proofs=[["sorry"]]), "tactic 'sorry' uses sorry/admit"),
        (lambda t: t.update(proofs=[]), "has no recorded proof"),
        (
            lambda t: t["goals"]["g1"].update(hyps=["x ℝ"]),
            "goal 'g1': hypothesis 'x ℝ' is not of the form",
        ),
        (
            lambda t: t["goals"]["g0"].update(target="True"),
            "root goal 'g0' must have no hypotheses and the statement as its target",
        ),
        (
            lambda t: t["transitions"].append({"goal": "g1", "tactic": "linarith ", "result": []}),
            "goal 'g1' has two transitions for tactic 'linarith '",
        ),
    ],
)
def test_broken_references_raise_bad_input_naming_file_theorem_and_goal(
    tmp_path: Path, mutate: Any, message: str
) -> None:
    path = write(tmp_path, broken(mutate))
    with pytest.raises(BadInput) as info:
        load_corpus(path)
    assert message in str(info.value)
    assert str(path) in str(info.value)


def test_malformed_files_are_bad_input(tmp_path: Path) -> None:
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{", encoding="utf-8")
    with pytest.raises(BadInput, match="is not valid JSON"):
        load_corpus(bad_json)
    schema = write(tmp_path, broken(lambda t: t.update(split="dev")), "schema.json")
    with pytest.raises(BadInput, match=r"schema.json: theorems\.0\.split: Input should be .*docs/replay-corpus.md"):
        load_corpus(schema)
    both = write(tmp_path, broken(lambda t: t["transitions"][1].update(error="x")), "both.json")
    with pytest.raises(BadInput, match="exactly one of result, error"):
        load_corpus(both)
    with pytest.raises(BadInput, match="does not exist"):
        load_corpus(tmp_path / "missing.json")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(BadInput, match=r"has no \*\.json files"):
        load_corpus(empty)
    with pytest.raises(InputError, match="unknown split"):
        theorem_index(load_corpus(), "valid")


def test_duplicate_theorem_names_across_files(tmp_path: Path) -> None:
    write(tmp_path, MINIMAL, "a.json")
    write(tmp_path, MINIMAL, "b.json")
    with pytest.raises(BadInput, match="theorem 'mini_linear' is also defined in"):
        load_corpus(tmp_path)


def test_a_binder_start_passed_inside_a_longer_intro_is_added_and_a_mismatched_one_is_none() -> None:
    """A theorem recorded only with `intro x h` gets the goal `intro x` reaches (and `intro h` from it); a binder
    start whose binder types are not the recorded ones has no start goal."""
    theorem = TheoremSpec(
        name="t", split="train", topic="algebra", statement="∀ (x : ℕ), x > 0 → x ≥ 1", root="g0",
        goals={"g0": GoalSpec(target="∀ (x : ℕ), x > 0 → x ≥ 1"),
               "g1": GoalSpec(hyps=["x : ℕ", "h : x > 0"], target="x ≥ 1")},
        transitions=[Transition(goal="g0", tactic="intro x h", result=["g1"]),
                     Transition(goal="g1", tactic="omega", result=[])],
        proofs=[["intro x h", "omega"]])
    start = theorem.start_goal()
    assert theorem.goals[start] == GoalSpec(hyps=["x : ℕ"], target="x > 0 → x ≥ 1")
    step = theorem.lookup(start, "intro h")
    assert step is not None and step.result == ["g1"]
    found = theorem.binder_start([("x", "ℕ")], "x > 0 → x ≥ 1")
    assert found is not None and found[1] == start
    assert theorem.binder_start([("x", "ℤ")], "x > 0 → x ≥ 1") is None
