"""Hybrid search of a theorem whose answer is open (docs/search.md, "Answers", "Hybrid search"): made-up problems in
PutnamBench's form, on minilean in process (it elaborates `abbrev putnam_easy_solution : ℕ := VALUE` and unfolds it in
`norm_num [putnam_easy_solution]`, so a wrong answer really fails) and on the strict Pantograph double at 0.3.4 and at
the newest supported version, with scripted completions.

The open root asks the answer prompt; each distinct answer roots the trie of the theorem it fills, where the proof is
replayed; a proof counts only under the answer it was verified with; an answer left `sorry` or smuggling
`native_decide` never reaches Lean; the open root is sampled again when every node was expanded; a killed search
resumes to the uninterrupted one's result; a revision is replayed in the trie of its answer.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from burnqed.config import Config, LeanConfig
from burnqed.lean.env import LeanEnv
from burnqed.lean.guard import TacticGuard
from burnqed.lean.inprocess import InProcessReplay
from burnqed.policy.base import Sampling, expansion_seeds
from burnqed.records.enums import SearchMode
from burnqed.records.results import EdgeOutcome, Label
from burnqed.records.theorem import Answer, AnswerTask, Theorem
from burnqed.search.hybrid import prove_hybrid
from burnqed.search.hybrid_settings import HybridSettings
from burnqed.search.journal import FileJournal, NodeRecord
from burnqed.search.modes import mode_refusal, prove_theorem
from burnqed.search.repair import RepairSettings
from burnqed.search.step import SearchOutcome
from burnqed.stages.search import settings_from_config
from burnqed.storage import Store
from burnqed.text.prompt import PromptFormat
from leankit.recheck import recheck_command
from leankit.version import SUPPORTED, PantographVersion
from minilean.server import Server
from tests.doubles.line_servers import DoubleServer
from tests.doubles.policy_double import ScriptedPolicy
from tests.search.test_hybrid import Killed, KillingJournal

GUARD = TacticGuard.from_config(LeanConfig())
VERSIONS = ["0.3.4", str(SUPPORTED[-1])]
SLOT = "putnam_easy_solution"
OPEN = Theorem(name="putnam_easy", signature=": 1 + 1 = putnam_easy_solution", docstring="What is 1 + 1",
               header=f"abbrev {SLOT} : ℕ := sorry\n-- 2", source="putnam",
               answer=Answer(name=SLOT, type="ℕ", task=AnswerTask.PRODUCED, reference="2"))
THEOREM = "/-- What is 1 + 1 -/\ntheorem putnam_easy : 1 + 1 = putnam_easy_solution := by\n"
PROOF = "  norm_num [putnam_easy_solution]"
ROOT = "⊢ 1 + 1 = putnam_easy_solution"
ANSWER_PROMPT = ("<｜User｜>Complete the following Lean 4 code:\n\n```lean4\n"
                 f"abbrev {SLOT} : ℕ := sorry\n\n{THEOREM}  sorry\n```<｜Assistant｜>```lean4\nabbrev {SLOT} : ℕ :=")
SETTINGS = HybridSettings(fmt=PromptFormat.DEEPSEEK_PROOF, sampling=Sampling(stop=("```",)), num_proofs=2,
                          min_proofs=1, max_tokens=256, min_tokens=128, max_proofs=8, timeout_s=30.0)


def completion(answer: str, proof: str = PROOF) -> str:
    """What a model writes after an answer prompt's prime (`… :=`): the answer, the theorem again, the proof."""
    return f" {answer}\n\n{THEOREM}{proof}\n```"


def filled(answer: str, proof: str = PROOF) -> str:
    """The file stored for a proof of OPEN with `answer`: its header with the slot filled, the theorem, the proof."""
    return f"abbrev {SLOT} : ℕ := ({answer})\n-- 2\n\n{THEOREM}{proof}\n"


def proof_prompt(answer: str, state: str = ROOT) -> str:
    """The proof-from-state prompt at a node of `answer`'s trie: the file with the answer filled (no reference
    comment), then the state."""
    return (f"<｜User｜>Complete the following Lean 4 code:<｜Assistant｜>```lean4\nabbrev {SLOT} : ℕ := ({answer})\n\n"
            f"{THEOREM}  /- tactic state:\n    {state}\n  -/\n")


class MiniLean:
    """minilean's server as a line server for `InProcessReplay` (a restart is a new server)."""

    def __init__(self) -> None:
        self.server = Server()
        self.starts = 0

    @property
    def version(self) -> PantographVersion:
        return self.server.version

    def handle(self, line: str) -> str:
        self.starts += line.startswith("frontend.process") and "sorrys" in line and "#print" not in line
        return self.server.handle(line)

    def restart(self) -> None:
        self.server = Server()


def scripted(answers: list[list[str]], proofs: Callable[[str], list[str]] = lambda _: []) -> ScriptedPolicy:
    """The answer prompt gets `answers` in turn (nothing once they run out), a proof prompt `proofs(prompt)`; every
    completion has log-prob −0.3 and 3 tokens."""
    stream = iter(answers)

    def script(prompt: str) -> list[tuple[str, float]]:
        texts = next(stream, []) if prompt == ANSWER_PROMPT else proofs(prompt)
        return [(text, -0.3) for text in texts]

    return ScriptedPolicy(script, key=lambda prompt: prompt)


def run(policy: ScriptedPolicy, settings: HybridSettings = SETTINGS, lean: LeanEnv | None = None) -> SearchOutcome:
    return asyncio.run(prove_hybrid(OPEN, lean or InProcessReplay(MiniLean()), policy, settings, GUARD))


def rows(outcome: SearchOutcome) -> list[tuple[object, ...]]:
    return [(e.node_id, e.parent_id, e.state_before, e.tactic, e.outcome, e.error, e.n_tokens, e.label)
            for e in outcome.edges]


def test_two_answers_root_two_tries_and_only_the_proof_under_the_right_one_counts() -> None:
    policy = scripted([[completion("3"), completion("2")]])
    outcome = run(policy)
    result = outcome.result
    assert result.proved and result.answer == "2" and result.proof == filled("2")
    assert (result.proofs_sampled, result.budget_at_proof, result.tokens, result.nodes_expanded) == (2, 2, 6, 1)
    assert policy.calls == [[ANSWER_PROMPT]]
    # node 1: answer 3's root, where minilean's norm_num leaves `2 = 3`; node 3: answer 2's, where it closes
    assert rows(outcome) == [
        (2, 1, ROOT, "norm_num [putnam_easy_solution]", EdgeOutcome.ERROR, "error: unsolved goals", 3, Label.NEGATIVE),
        (4, 3, ROOT, "norm_num [putnam_easy_solution]", EdgeOutcome.CLOSED, None, 3, Label.POSITIVE),
    ]


def test_the_open_root_samples_new_answers_once_every_node_was_expanded() -> None:
    # Round 1: answer 3 fails. Round 2: answer 3's root, the only unexpanded node, fails again. Round 3: every node
    # was expanded; the open root (every completion went past it: Q = 1) outranks answer 3's root (Q = 0) and is
    # asked again, its samples numbered on, and answers 2.
    policy = scripted([[completion("3")], [completion("2")]], lambda prompt: ["decide"])
    settings = dataclasses.replace(SETTINGS, num_proofs=1, seed=7)
    outcome = run(policy, settings)
    result = outcome.result
    assert result.proved and result.answer == "2" and result.proof == filled("2")
    assert (result.nodes_expanded, result.proofs_sampled, result.budget_at_proof, result.tokens) == (3, 3, 3, 9)
    assert policy.calls == [[ANSWER_PROMPT], [proof_prompt("3")], [ANSWER_PROMPT]]
    assert policy.seeds == [expansion_seeds(7, "putnam_easy", [0], 1, first_sample=0),
                            expansion_seeds(7, "putnam_easy", [1], 1),
                            expansion_seeds(7, "putnam_easy", [0], 1, first_sample=2)]
    assert [(e.parent_id, e.tactic, e.outcome) for e in outcome.edges] == [
        (1, "norm_num [putnam_easy_solution]", EdgeOutcome.ERROR), (1, "decide", EdgeOutcome.ERROR),
        (4, "norm_num [putnam_easy_solution]", EdgeOutcome.CLOSED)]


def test_a_killed_search_resumes_each_answers_trie_to_the_uninterrupted_result(tmp_path: Path, store: Store) -> None:
    def policy() -> ScriptedPolicy:
        return scripted([[completion("3")], [completion("2")]], lambda prompt: ["decide"])

    settings = dataclasses.replace(SETTINGS, num_proofs=1)
    full = run(policy(), settings)
    prefix = str(tmp_path / "shard")
    with pytest.raises(Killed):
        run(policy(), dataclasses.replace(settings, journal=KillingJournal(prefix, 1, store=store)))
    records = FileJournal(prefix, store=store).load("putnam_easy")
    assert [[(n.id, n.parent, n.state, n.answer) for n in r.nodes] for r in records] == [
        [(0, None, "", None)], [(1, 0, ROOT, "3")]]
    # round 1's answer prompt was the killed run's: the resumed run's first one is round 3's
    again, lean = scripted([[completion("2")]], lambda prompt: ["decide"]), MiniLean()
    journal = FileJournal(prefix, store=store)
    resumed = run(again, dataclasses.replace(settings, journal=journal), InProcessReplay(lean))
    assert again.calls == [[proof_prompt("3")], [ANSWER_PROMPT]]
    assert lean.starts == 2  # answer 3's theorem rebuilt on the new worker, then answer 2's
    keep = ("proved", "answer", "proof", "proofs_sampled", "budget_at_proof", "tokens", "nodes_expanded")
    assert {k: getattr(resumed.result, k) for k in keep} == {k: getattr(full.result, k) for k in keep} == {
        "proved": True, "answer": "2", "proof": filled("2"), "proofs_sampled": 3, "budget_at_proof": 3, "tokens": 9,
        "nodes_expanded": 3}
    assert [(e.node_id, e.parent_id, e.tactic, e.outcome, e.label) for e in resumed.edges] == [
        (e.node_id, e.parent_id, e.tactic, e.outcome, e.label) for e in full.edges]


@pytest.mark.parametrize(("answer", "counted", "why"), [
    ("2", True, None),  # honest: re-checked in answer 2's theorem, counted
    ("3", False, "replayed from the theorem's start, its path does not close the goal in Lean"),  # norm_num: 2 = 3
    ("sorry", False, "its answer is refused: "),  # never reaches Lean
    ("2) (instance", False, "its answer is refused: "),  # not one term: refused, never filled into a prompt
])
def test_a_resumed_forest_counts_a_journals_proof_only_under_the_answer_lean_checks_again(
        answer: str, counted: bool, why: str | None, tmp_path: Path, store: Store) -> None:
    prefix = str(tmp_path / "shard")
    with pytest.raises(Killed):  # killed right after round 1, which proved answer 2
        run(scripted([[completion("2")]]), dataclasses.replace(SETTINGS, num_proofs=1,
                                                                journal=KillingJournal(prefix, 1, store=store)))
    (last,) = Path(prefix).glob("_inflight/*/round-000001.json")
    last.write_text(last.read_text().replace('"answer":"2"', f'"answer":"{answer}"'))
    silent = scripted([])
    result = run(silent, dataclasses.replace(SETTINGS, num_proofs=1, max_rounds=3,
                                             journal=FileJournal(prefix, store=store))).result
    assert result.proved is counted and result.rejected_proofs == (0 if counted else 1)
    if counted:
        assert (result.answer, result.proof, result.detail) == ("2", filled("2"), None)
    else:
        assert result.proof is None and result.detail is not None
        assert result.detail.startswith(f"a proof its journal holds (row 2) did not check again: {why}")


def test_the_journal_writes_an_answer_only_on_an_answers_root() -> None:
    plain = NodeRecord(id=0, parent=None, depth=0, tactic=None, state="⊢ p", targets=["p"], prior=0.0, unchanged=0,
                       haves=0)
    assert plain.model_dump_json() == ('{"id":0,"parent":null,"depth":0,"tactic":null,"state":"⊢ p","targets":["p"],'
                                       '"prior":0.0,"unchanged":0,"haves":0}')
    rooted = plain.model_copy(update={"answer": "2"})
    assert json.loads(rooted.model_dump_json())["answer"] == "2"
    assert NodeRecord.model_validate_json(rooted.model_dump_json()) == rooted


def test_a_revision_is_replayed_in_the_trie_of_its_answer() -> None:
    # answer 2 with `linarith` (an abbrev is an atom to it: it fails); the revision restates only the theorem, so it
    # keeps answer 2 and is replayed from that answer's root
    def revise(prompt: str) -> list[str]:
        return [f" \n\n{THEOREM}{PROOF}\n```"] if "is not correct" in prompt else []

    policy = scripted([[completion("2", "  linarith")]], revise)
    settings = dataclasses.replace(SETTINGS, num_proofs=1,
                                   repair=RepairSettings(rounds=1, fmt=PromptFormat.DEEPSEEK_REPAIR))
    outcome = run(policy, settings)
    result = outcome.result
    assert result.proved and result.answer == "2" and result.proof == filled("2")
    assert (result.revision_at_proof, result.revisions, result.proofs_sampled, result.tokens) == (1, 1, 2, 6)
    assert [(e.node_id, e.parent_id, e.tactic, e.outcome, e.revision, e.revises) for e in outcome.edges] == [
        (2, 1, "linarith", EdgeOutcome.ERROR, 0, None),
        (3, 1, "norm_num [putnam_easy_solution]", EdgeOutcome.CLOSED, 1, 2)]
    assert len(policy.calls) == 2 and policy.calls[0] == [ANSWER_PROMPT]
    (shown,) = policy.calls[1]
    assert f"<｜Assistant｜>```lean4\nabbrev {SLOT} : ℕ := (2)\n\n{THEOREM}  linarith\n```" in shown
    assert "-- 2" not in shown


def test_hybrid_mode_searches_an_open_answer_and_step_mode_still_refuses_it() -> None:
    assert mode_refusal(OPEN, SearchMode.HYBRID) is None
    assert mode_refusal(OPEN, SearchMode.STEP) == (
        "its answer putnam_easy_solution is open (to be produced) and step mode searches tactics from a goal that "
        "needs it: search it in whole or hybrid mode")
    outcome = asyncio.run(prove_theorem(OPEN, InProcessReplay(MiniLean()), scripted([[completion("2")]]), SETTINGS,
                                        GUARD))
    assert outcome.result.proved and outcome.result.answer == "2"


# ------------------------------------------------------------------------------ the strict Pantograph double


def on_double(version: str, answers: list[str], log: Path) -> tuple[SearchOutcome, ScriptedPolicy]:
    """Hybrid search of OPEN on the double at `version`, the answer prompt answered `answers` in one request."""
    policy = scripted([answers])
    settings = dataclasses.replace(SETTINGS, num_proofs=len(answers), max_proofs=len(answers))
    lean = InProcessReplay(DoubleServer(version, log=log))
    return asyncio.run(prove_hybrid(OPEN, lean, policy, settings, GUARD)), policy


def sent(log: Path, command: str) -> list[str]:
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    return [line.split(" ", 1)[1] for line in lines if line.startswith(f"{command} ")]


@pytest.mark.slow
@pytest.mark.parametrize("version", VERSIONS)
def test_on_the_double_a_right_answer_with_its_proof_counts_and_the_whole_file_is_stored(version: str,
                                                                                       tmp_path: Path) -> None:
    proof = f"{PROOF}\n  done"  # the double's tactics leave a goal `after …`; `done` closes it
    outcome, policy = on_double(version, [completion("2", proof)], tmp_path / "log")
    result = outcome.result
    assert result.proved and result.answer == "2" and result.proof == filled("2", proof)
    assert (result.proofs_sampled, result.budget_at_proof, result.tokens) == (1, 1, 3)
    assert policy.calls == [[ANSWER_PROMPT]]
    compiled = [str(json.loads(payload)["file"]) for payload in sent(tmp_path / "log", "frontend.process")]
    assert f"{filled('2', proof)}\n#print axioms putnam_easy\n\n{recheck_command('putnam_easy')}" in compiled
    assert [(e.tactic, e.outcome) for e in outcome.edges] == [
        ("norm_num [putnam_easy_solution]", EdgeOutcome.OK), ("done", EdgeOutcome.CLOSED)]


@pytest.mark.slow
@pytest.mark.parametrize("version", VERSIONS)
def test_on_the_double_an_answer_left_sorry_or_smuggling_native_decide_never_counts(version: str,
                                                                                   tmp_path: Path) -> None:
    smuggled = "if (by native_decide : 1 + 1 = 2) then 2 else 0"
    answers = [completion("sorry", f"{PROOF}\n  done"), completion("(sorry : ℕ) -- a comment", f"{PROOF}\n  done"),
               completion(smuggled, f"{PROOF}\n  done")]
    outcome, _ = on_double(version, answers, tmp_path / "log")
    assert not outcome.result.proved and outcome.result.answer is None
    assert (outcome.result.proofs_sampled, outcome.result.tokens) == (3, 9)
    assert [(e.parent_id, e.outcome, e.error) for e in outcome.edges] == [
        (0, EdgeOutcome.REFUSED, "the answer is left `sorry`"), (0, EdgeOutcome.REFUSED, "the answer is left `sorry`"),
        (0, EdgeOutcome.REFUSED, f"the answer {smuggled!r} is denied: matches deny pattern '\\\\bnative_decide\\\\b'")]
    assert sent(tmp_path / "log", "frontend.process") == sent(tmp_path / "log", "goal.tactic") == []  # no Lean


@pytest.mark.parametrize(("family", "cot", "asked"), [
    ("deepseek-tactic", False, PromptFormat.DEEPSEEK_WHOLE), ("deepseek-tactic", True, PromptFormat.DEEPSEEK_WHOLE_COT),
    ("plain-tactic", False, PromptFormat.PLAIN_WHOLE)])
def test_the_open_root_is_asked_in_the_whole_format_of_the_configured_family(family: str, cot: bool,
                                                                             asked: PromptFormat) -> None:
    cfg = Config.model_validate({"policy": {"prompt_format": family, "cot": cot}, "search": {"mode": "hybrid"}})
    settings = settings_from_config(cfg.search, cfg.policy)
    assert isinstance(settings, HybridSettings) and settings.whole_fmt is asked
