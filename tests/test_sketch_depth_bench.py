"""benchmarks/sketch_depth.py on one situation of the world's deep sketch family (four theorems: depth 1, 2, 2, 3),
searched in minilean with its scripted planner: one level proves the depth-1 statement only, the tree and the graph
decompose the deeper ones, and the graph, sharing what it proved inside a theorem, proves more within the budget with
fewer Lean calls where both prove."""

from __future__ import annotations

import asyncio

import pytest

from benchmarks import sketch_depth


@pytest.mark.slow
def test_one_situation_at_equal_budget_recursion_proves_the_deep_statements_and_sharing_saves_lean_calls(
        capsys: pytest.CaptureFixture[str]) -> None:
    theorems = sketch_depth.deep_family(0, "test")[:4]
    arms = asyncio.run(sketch_depth.run_arms(theorems, 60))
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
    assert sketch_depth.main(["--limit", "4"]) == 0
    printed = capsys.readouterr().out
    assert "graph ÷ tree on the 3 theorems both solved: Lean calls" in printed
