"""The lemma library's poison gate (docs/search.md, "The lemma library"), end to end against minilean in this
process: sketch search asks a frozen library for a hole before searching it; honest entries close the hole by its
exact key and by its closed key (renamed), re-checked in Lean with their calls counted and listed by the counted
proof; planted entries (another environment or header, `sorry`, `native_decide`, a custom axiom, a local notation,
the goal itself, a false lemma with a forged proof) are never accepted, each refusal with its reason.

Where minilean cannot elaborate a poison (a command such as `axiom` or `notation`, `native_decide`: outside its
fragment, docs/minilean.md), the refusal before Lean is what is tested: the guard, the environment and the keys refuse
those entries before any request, so what minilean would make of them never matters."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from burnqed.config import LeanConfig
from burnqed.data.decontaminate import HELD_OUT_SPLITS as DATA_HELD_OUT_SPLITS
from burnqed.data.decontaminate import ROUTE_EVAL, Benchmark
from burnqed.eval.lemma_library import HELD_PROVENANCE, held_lemmas
from burnqed.lean.guard import TacticGuard
from burnqed.lean.inprocess import InProcessReplay
from burnqed.policy.base import Sampling
from burnqed.records.replies import Goal, Variable
from burnqed.records.results import SubgoalSource, TheoremResult
from burnqed.records.theorem import Theorem
from burnqed.search.lemmas import (
    EXTRA_AXIOMS,
    FOREIGN_ENVIRONMENT,
    FOREIGN_HEADER,
    HELD_OUT_SPLITS,
    KEY_MISMATCH,
    MAX_ENTRY_BYTES,
    RESTATES,
    LemmaEntry,
    LemmaLibrary,
    LemmaWriter,
    LibrarySource,
    Provenance,
    entry_of,
    open_library,
    training_held,
    write_lemmas,
)
from burnqed.search.sketch_settings import SketchSettings
from burnqed.search.sketching import prove_sketch
from burnqed.search.step import StepSettings
from burnqed.search.subgoal_cache import CacheEnvironment
from burnqed.storage import Store
from leankit.version import PantographVersion
from tests.doubles.line_servers import MiniLean
from tests.doubles.policy_double import ScriptedPolicy

pytestmark = pytest.mark.usefixtures("minilean_in_process")

GUARD = TacticGuard.from_config(LeanConfig())
ENV = CacheEnvironment(lean={"timeout_s": 30}, pantograph_version="0.3.4", toolchain=None)
THEOREM = Theorem(name="t", signature="(x y : ℝ) (h₀ : 0 < x) (h₁ : 0 < y) : 0 < x * y + x")
BENCHMARK = Benchmark(ROUTE_EVAL, "bench", (THEOREM,))
CONTEXT = (Variable("x", "ℝ"), Variable("y", "ℝ"), Variable("h₀", "0 < x"), Variable("h₁", "0 < y"))
HOLE = Goal("0 < x * y", CONTEXT)  # `have hxy : 0 < x * y := by sorry`, as minilean prints it
TRAIN = Provenance(theorem="train_1", statement="∀ (a : ℝ), 0 < a → 0 < a * a", split="train", iteration=1)
SKETCH = "have hxy : 0 < x * y := by sorry\nnlinarith [hxy, h₀]"
NOT_A_PROOF = "have hq : (1 : ℝ) = 1 := by norm_num"  # every subgoal search's answer: a new state, never a proof


def planner(sketch: str) -> ScriptedPolicy:
    def answer(prompt: str) -> list[tuple[str, float]]:
        return [(sketch if prompt.startswith("Sketch a proof") else NOT_A_PROOF, -0.5)]

    return ScriptedPolicy(answer, key=lambda prompt: prompt, tokens=len)


def search(source: LibrarySource, sketch: str = SKETCH) -> TheoremResult:
    settings = SketchSettings(sampling=Sampling(n=1, stop=("```",)), max_nodes=4, sketch_rounds=0,
                              subgoal=StepSettings(sampling=Sampling(n=1), revisits=0), lemmas=source)
    lean = InProcessReplay(MiniLean(version=PantographVersion.parse("0.3.4")))
    return asyncio.run(prove_sketch(THEOREM, lean, planner(sketch), settings, GUARD)).result


def entry(tactics: list[str], goal: Goal = HOLE, **changes: object) -> LemmaEntry:
    made = entry_of(goal, None, tactics, ENV, TRAIN)
    return made.model_copy(update=changes) if changes else made


def source_of(*entries: LemmaEntry) -> LibrarySource:
    library = LemmaLibrary.of(entries)
    return library.source(ENV, GUARD, held_lemmas(library, BENCHMARK))


# ------------------------------------------------------------------------------------------------ honest


def test_an_entry_under_the_holes_exact_key_is_replayed_in_place_and_listed_by_the_counted_proof() -> None:
    honest = entry(["nlinarith [h₀, h₁]"])
    without = search(source_of())
    source = source_of(honest)
    result = search(source)
    assert result.proved, result.detail
    [subgoal] = result.sketches[0].subgoals
    assert (subgoal.source, subgoal.tactics, subgoal.lemma) == (
        SubgoalSource.LIBRARY, ["nlinarith [h₀, h₁]"], f"library {honest.name}: theorem train_1, split train, "
        "iteration 1")
    assert result.lemmas_used() == [honest.origin]
    assert (source.stats.hits, source.stats.rejected, source.refused) == (1, 0, {})
    # The replay costs no unit (the planner's request is the one), and its Lean calls are counted; without the
    # library the hole is searched (one expansion of its share) and not proved.
    assert (result.nodes_expanded, without.nodes_expanded, without.proved) == (1, 2, False)
    assert (result.lean_calls, without.lean_calls) == (5, 4)


def test_an_entry_of_the_same_fact_over_other_names_is_offered_renamed_by_its_closed_key() -> None:
    other = Goal("0 < a * b", (Variable("a", "ℝ"), Variable("b", "ℝ"), Variable("ha", "0 < a"),
                               Variable("hb", "0 < b")))
    renamed = entry(["nlinarith [ha, hb]"], goal=other)
    source = source_of(renamed)
    result = search(source)
    assert result.proved, result.detail
    [subgoal] = result.sketches[0].subgoals
    assert (subgoal.source, subgoal.tactics, subgoal.lemma) == (SubgoalSource.LIBRARY, ["nlinarith [h₀, h₁]"],
                                                                renamed.origin)


# ------------------------------------------------------------------------------------------------ poison


def test_no_planted_entry_is_ever_accepted_and_each_refusal_says_why() -> None:
    planted = {
        "environment": entry(["nlinarith [h₀, h₁]"], environment=ENV.model_copy(update={"lean_version": "v4.20.0"})),
        "sorry": entry(["sorry"]),
        "native_decide": entry(["native_decide"]),
        "axiom at insert": entry(["nlinarith [h₀, h₁]"], axioms=["propext", "my_axiom"]),
        "axiom declared": entry(["axiom my_axiom : ∀ a b : ℝ, 0 < a * b", "exact my_axiom x y"]),
        "notation in the header": entry_of(HOLE, 'local notation a " ⊕ " b => a * b', ["nlinarith [h₀, h₁]"], ENV,
                                           TRAIN),
        "notation in the proof": entry(['local notation a " ⊕ " b => a + b', "nlinarith [h₀, h₁]"]),
        "a forged statement": entry(["nlinarith [h₀, h₁]"], target="0 < x * y ∨ 1 = 2"),
        "held out": entry(["nlinarith [h₀, h₁]"], provenance=TRAIN.model_copy(update={"theorem": "test_9",
                                                                                       "split": "test"})),
    }
    source = source_of(*planted.values())
    result = search(source)
    assert not result.proved and source.stats.hits == 0
    assert all(s.source is not SubgoalSource.LIBRARY for sketch in result.sketches for s in sketch.subgoals)
    deny = "tactic {!r} on the path is denied: matches deny pattern {!r}"
    command = ("tactic {!r} on the path is denied: holds the command keyword {!r}: Lean would run a command of its "
               "own there")
    assert {name: source.refused.get(made.name) for name, made in planted.items()} == {
        "environment": FOREIGN_ENVIRONMENT,
        "sorry": "its proof is refused: " + deny.format("sorry", r"\bsorry\b"),
        "native_decide": "its proof is refused: " + deny.format("native_decide", r"\bnative_decide\b"),
        "axiom at insert": EXTRA_AXIOMS.format(axioms="my_axiom"),
        "axiom declared": "its proof is refused: " + command.format(
            "axiom my_axiom : ∀ a b : ℝ, 0 < a * b", "axiom"),
        "notation in the header": FOREIGN_HEADER,
        "notation in the proof": "its proof is refused: " + command.format(
            'local notation a " ⊕ " b => a + b', "local"),
        "a forged statement": KEY_MISMATCH.format(which="exact"),
        "held out": HELD_PROVENANCE.format(theorem="test_9", why="test split"),
    }
    assert (source.stats.refused, source.stats.offered, source.stats.rejected) == (9, 0, 0)


def test_the_goal_itself_is_never_its_own_lemma() -> None:
    """A sketch that restates the theorem as its hole, and an entry (from a training theorem, with a proof Lean
    would accept) of that very statement: the decontamination holds it out before Lean."""
    itself = Goal("0 < x * y + x", CONTEXT)
    planted = entry(["nlinarith [h₀, h₁]"], goal=itself)
    source = source_of(planted)
    result = search(source, "have h : 0 < x * y + x := by sorry\nexact h")
    assert not result.proved and source.stats.hits == 0
    assert source.refused == {planted.name: RESTATES.format(theorem="t", benchmark="bench")}


def test_a_false_lemma_with_a_forged_proof_is_rejected_by_lean_and_offered_once() -> None:
    """Its keys are its statement's and nothing refuses it before Lean: Lean rejects the forged proof on the hole."""
    false = Goal("0 > x", CONTEXT)
    forged = entry(["linarith"], goal=false)
    source = source_of(forged)
    result = search(source, "have hf : 0 > x := by sorry\nlinarith [hf, h₀]")
    assert not result.proved and (source.stats.hits, source.stats.rejected, source.stats.offered) == (0, 1, 1)
    assert source.refused == {}
    [subgoal] = result.sketches[0].subgoals
    assert (subgoal.proved, subgoal.lemma) == (False, None)


# ------------------------------------------------------------------------------------------------ storage


def test_a_library_is_frozen_when_opened_and_its_digest_names_what_it_held(tmp_path: Path, store: Store) -> None:
    uri = str(tmp_path / "library")
    writer = LemmaWriter(store, uri)
    first = entry(["nlinarith [h₀, h₁]"])
    assert writer.add(first) and not writer.add(first)
    (tmp_path / "library" / "planted.json").write_text("{not json", encoding="utf-8")
    (tmp_path / "library" / "huge.json").write_text(" " * (MAX_ENTRY_BYTES + 1), encoding="utf-8")  # never read
    frozen = LemmaLibrary.open(store, uri)
    assert [e.digest for e in frozen.entries] == [first.digest] and frozen.unreadable == ("huge.json", "planted.json")
    later = entry(["positivity"])
    assert LemmaWriter(store, uri).add(later)
    assert [e.digest for e in frozen.entries] == [first.digest]  # written after the eval started: never served
    reopened = LemmaLibrary.open(store, uri)
    assert reopened.digest != frozen.digest and len(reopened.entries) == 2
    source = open_library(uri, store, ENV, GUARD, lambda library: held_lemmas(library, BENCHMARK))
    assert source is not None
    unreadable = "the entry does not parse as a lemma library entry (or its name is not its digest)"
    assert source.refused == {"huge.json": unreadable, "planted.json": unreadable}


def test_the_search_stage_writes_the_lemmas_of_counted_proofs_on_training_theorems_only(tmp_path: Path,
                                                                                       store: Store) -> None:
    result = search(source_of(entry(["nlinarith [h₀, h₁]"])))
    uri = str(tmp_path / "library")
    train = THEOREM.model_copy(update={"split": "train"})
    assert write_lemmas(LemmaWriter(store, uri), [result], {"t": THEOREM.model_copy(update={"split": "test"})},
                        ENV, iteration=3) == 0
    assert write_lemmas(LemmaWriter(store, uri), [result], {"t": train}, ENV, iteration=3) == 1
    [written] = LemmaLibrary.open(store, uri).entries
    assert (written.goal, written.tactics, written.provenance.theorem, written.provenance.split,
            written.provenance.iteration) == (HOLE, ["nlinarith [h₀, h₁]"], "t", "train", 3)
    assert dataclasses.asdict(source_of(written).stats) == {"lookups": 0, "offered": 0, "hits": 0, "rejected": 0,
                                                           "refused": 0}


def test_a_search_of_training_theorems_holds_out_test_and_valid_lemmas_and_the_theorems_searched() -> None:
    """The search stage cannot read the data stage (a layer above): its splits are the data stage's, and it holds out
    by the same normal form."""
    assert HELD_OUT_SPLITS == DATA_HELD_OUT_SPLITS
    honest = entry(["nlinarith [h₀, h₁]"])
    valid = entry(["positivity"], provenance=TRAIN.model_copy(update={"theorem": "v_1", "split": "valid"}))
    itself = entry(["nlinarith [h₀, h₁]"], goal=Goal("0 < x * y + x", CONTEXT))
    library = LemmaLibrary.of([honest, valid, itself])
    assert training_held(library, [THEOREM]) == {
        valid.digest: "made from v_1, a valid theorem: it serves no problem",
        itself.digest: "its statement restates t of the theorems searched: a benchmark theorem is never a lemma"}
    unnamed = entry(["positivity"], provenance=TRAIN.model_copy(update={"theorem": "bad name"}))
    assert held_lemmas(LemmaLibrary.of([unnamed]), BENCHMARK) == {unnamed.digest: HELD_PROVENANCE.format(
        theorem="bad name", why="its provenance is no theorem the decontamination can read")}
    assert held_lemmas(library, BENCHMARK) == {
        valid.digest: "made from v_1, a valid theorem: it serves no problem",
        itself.digest: "its statement restates t of bench: a benchmark theorem is never a lemma"}
