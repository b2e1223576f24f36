"""benchmarks/sketch_depth.py on one situation of the world's deep sketch family (four theorems: depth 1, 2, 2, 3),
searched in minilean with its scripted planner: one level proves the depth-1 statement only, the tree and the graph
decompose the deeper ones, and the graph, sharing what it proved inside a theorem, proves more within the budget with
fewer Lean calls where both prove. The four arms and the library arm on the default splits run once for the module
(`arms`, `separate`): the benchmark's `main` prints them, its two runs checked to be asked for the same theorems and
budget."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from benchmarks import sketch_depth
from burnqed.data.decontaminate import ROUTE_EVAL, Benchmark
from burnqed.eval.lemma_library import held_lemmas
from burnqed.records.theorem import Theorem
from burnqed.storage import Store
from leankit.world.checked import WorldTheorem

TEST, TRAIN = sketch_depth.deep_family(0, "test")[:4], sketch_depth.deep_family(0, "train")[:4]
Family = Sequence[tuple[Theorem, WorldTheorem]]


@pytest.fixture(scope="module")
def arms() -> list[sketch_depth.Arm]:
    """The four arms without a library on the first four test theorems, at 60 units."""
    return asyncio.run(sketch_depth.run_arms(TEST, 60))


@pytest.fixture(scope="module")
def separate(tmp_path_factory: pytest.TempPathFactory) -> sketch_depth.LibraryArm:
    """The library arm of the default family (a test situation shares no goal with a training one), at 60 units."""
    folder = tmp_path_factory.mktemp("separate")
    return asyncio.run(sketch_depth.run_library_arm(TRAIN, TEST, 60, Store(cache_dir=None), str(folder / "separate")))


def names(theorems: Family) -> list[str]:
    return [theorem.name for theorem, _ in theorems]


@pytest.mark.slow
def test_one_situation_at_equal_budget_recursion_proves_the_deep_statements_and_sharing_saves_lean_calls(
        arms: list[sketch_depth.Arm], separate: sketch_depth.LibraryArm, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert [arm.label for arm in arms] == ["no decomposition", "one level", "tree", "graph"]
    assert [[r.proved for r in arm.results] for arm in arms] == [
        [False] * 4, [True, False, False, False], [True, True, True, False], [True] * 4]
    assert [[r.lean_calls for r in arm.results] for arm in arms] == [
        [6, 6, 6, 6], [18, 32, 32, 32], [24, 116, 116, 202], [21, 68, 68, 110]]
    assert [[r.budget_at_proof for r in arm.results] for arm in arms] == [
        [None] * 4, [5, None, None, None], [9, 35, 35, None], [6, 15, 15, 23]]
    tree, graph = arms[2].results, arms[3].results
    assert all(g.lean_calls < t.lean_calls for t, g in zip(tree[1:3], graph[1:3], strict=True))
    # the depth-3 statement's graph: three levels of goals, its shared places replayed
    deep = graph[3].lemma_graph
    assert deep is not None and max(goal.level for goal in deep.goals) == 3 and deep.shared > 0
    asked: list[tuple[object, ...]] = []

    async def held_arms(theorems: Family, budget: int) -> list[sketch_depth.Arm]:
        asked.append(("arms", names(theorems), budget))
        return arms

    async def held_library(train: Family, theorems: Family, budget: int, *_: object) -> sketch_depth.LibraryArm:
        asked.append(("library", names(train), names(theorems), budget))
        return separate

    monkeypatch.setattr(sketch_depth, "run_arms", held_arms)
    monkeypatch.setattr(sketch_depth, "run_library_arm", held_library)
    assert sketch_depth.main(["--limit", "4"]) == 0
    assert asked == [("arms", names(TEST), 60), ("library", names(TRAIN), names(TEST), 60)]
    printed = capsys.readouterr().out
    assert "graph ÷ tree on the 3 theorems both solved: Lean calls" in printed
    assert "graph + library        4" in printed and "hits 0 (exact key 0, closed key 0)" in printed
    assert "9 lemmas written, 9 entries frozen; held out of the test eval: 0" in printed


@pytest.mark.slow
def test_the_library_from_the_training_split_serves_a_situation_shared_across_the_split_and_nothing_else(
        separate: sketch_depth.LibraryArm, tmp_path: Path) -> None:
    # The default family: a test situation shares no goal with a training one (its own reals and equations, and a
    # closed key closes over every hypothesis): the library is asked and never offers, the graph's figures unchanged.
    assert (separate.written, len(separate.library.entries), separate.held) == (9, 9, {})
    assert separate.source.stats.lookups > 0 and separate.source.stats.offered == 0
    assert [r.lean_calls for r in separate.arm.results] == [21, 68, 68, 110]
    # Shared situations: the training split holds a situation's depth-1 and first depth-2 statements, the test split
    # its second depth-2 and depth-3 ones; the depth-3 statement's lemma `hs` is the first depth-2 statement's
    # conclusion, whose two product facts the library holds under the same exact key.
    train, test = sketch_depth.deep_family(0, "train", shared=True), sketch_depth.deep_family(0, "test", shared=True)
    assert [len(train), len(test)] == [4, 4]
    graph = [asyncio.run(sketch_depth.search(theorem, recorded, sketch_depth.settings_of(60)[3]))
             for theorem, recorded in test]
    shared = asyncio.run(sketch_depth.run_library_arm(train, test, 60, Store(cache_dir=None), str(tmp_path / "lib")))
    assert (shared.written, shared.held) == (10, {})
    assert [(c.exact, c.closed) for c in shared.counted] == [(0, 0), (2, 0), (0, 0), (2, 0)]
    assert shared.source.stats.as_dict() == {"lookups": 36, "offered": 4, "hits": 4, "rejected": 0, "refused": 0}
    assert [r.proved for r in shared.arm.results] == [True] * 4
    assert [r.lean_calls for r in graph] == [68, 110, 68, 110]
    assert [r.lean_calls for r in shared.arm.results] == [68, 76, 68, 76]
    assert [r.budget_at_proof for r in graph] == [15, 23, 15, 23]
    assert [r.budget_at_proof for r in shared.arm.results] == [15, 13, 15, 13]
    assert [len(r.lemmas_used()) for r in shared.arm.results] == [0, 2, 0, 2]
    # Decontamination as an eval derives it: an eval of the training theorems the entries came from holds them all.
    held = held_lemmas(shared.library, Benchmark(ROUTE_EVAL, "train", tuple(theorem for theorem, _ in train)))
    assert len(held) == 10 and all("a theorem of train" in why for why in held.values())
