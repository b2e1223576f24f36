"""The search tree of one theorem: ids, paths, the frontier's order, the seen-state table."""

from __future__ import annotations

from burnqed.records.replies import Goal
from burnqed.search.tree import Node, SearchTree


def node(node_id: int, parent: Node | None, tactic: str | None, state: str, score: float = 0.0) -> Node:
    depth = 0 if parent is None else parent.depth + 1
    return Node(node_id, parent, depth, tactic, state, (Goal(state),), state_id=node_id, generation=1, score=score)


def test_path_is_the_tactics_from_the_root_in_order() -> None:
    root = node(0, None, None, "⊢ p")
    a = node(1, root, "intro h", "h : q ⊢ p")
    b = node(2, a, "apply f", "h : q ⊢ r")
    assert root.path() == []
    assert a.path() == ["intro h"]
    assert b.path() == ["intro h", "apply f"]


def test_new_ids_count_up_from_one_past_the_root() -> None:
    tree = SearchTree(node(0, None, None, "⊢ p"))
    assert [tree.new_id(), tree.new_id(), tree.new_id()] == [1, 2, 3]


def test_pop_takes_the_best_scores_first_and_older_nodes_on_ties() -> None:
    root = node(0, None, None, "⊢ p", score=0.0)
    tree = SearchTree(root)
    assert tree.pop(1, max_depth=10) == [root]
    root.expanded = True
    children = [node(tree.new_id(), root, f"t{i}", f"⊢ s{i}", score=s) for i, s in enumerate([-2.0, -0.5, -0.5, -1.0])]
    for child in children:
        tree.add(child)
    popped = tree.pop(3, max_depth=10)
    assert [n.tactic for n in popped] == ["t1", "t2", "t3"]  # -0.5 (id 2), -0.5 (id 3), -1.0
    assert [n.tactic for n in tree.pop(5, max_depth=10)] == ["t0"]
    assert tree.pop(1, max_depth=10) == []


def test_pop_drops_expanded_dead_and_too_deep_nodes() -> None:
    root = node(0, None, None, "⊢ p")
    tree = SearchTree(root)
    root.expanded = True
    dead = node(tree.new_id(), root, "a", "⊢ a", score=3.0)
    dead.dead = True
    deep = node(tree.new_id(), root, "b", "⊢ b", score=2.0)
    ok = node(tree.new_id(), root, "c", "⊢ c", score=1.0)
    for child in (dead, deep, ok):
        tree.add(child)
    assert tree.pop(2, max_depth=1) == []  # depth 1 is not below max_depth 1: the children are dropped
    tree2 = SearchTree(node(0, None, None, "⊢ p"))
    tree2.root.expanded = True
    for child in (dead, deep, ok):
        tree2.add(child)
    assert tree2.pop(5, max_depth=2) == [deep, ok]  # the root was expanded, the dead node is skipped
    assert len(tree2) == 0


def test_seen_states_are_tracked_from_the_root_on() -> None:
    root = node(0, None, None, "⊢ p")
    tree = SearchTree(root)
    assert not tree.is_new_state("⊢ p")
    child = node(tree.new_id(), root, "t", "⊢ q")
    assert tree.is_new_state("⊢ q")
    tree.add(child)
    assert not tree.is_new_state("⊢ q")
    assert tree.nodes == {0: root, 1: child} and list(tree.seen.values()) == [root, child]
    assert len(tree) == 2


def test_a_state_renamed_is_not_new() -> None:
    # `intro h₁ h₂` after `intro h₀ h₁`: the same state up to the hypotheses' names (their proofs are each other's,
    # renamed) is not pushed again; another hypothesis order, or an inaccessible name, is a new state.
    root = node(0, None, None, "x : ℝ\n⊢ 0 < x → x ≠ 2 → 0 < x ^ 2")
    tree = SearchTree(root)
    tree.add(node(tree.new_id(), root, "intro h₀ h₁", "x : ℝ\nh₀ : 0 < x\nh₁ : x ≠ 2\n⊢ 0 < x ^ 2"))
    assert not tree.is_new_state("x : ℝ\nh₁ : 0 < x\nh₂ : x ≠ 2\n⊢ 0 < x ^ 2")
    assert not tree.is_new_state("y : ℝ\nh : 0 < y\nk : y ≠ 2\n⊢ 0 < y ^ 2")
    assert tree.is_new_state("x : ℝ\nh₁ : x ≠ 2\nh₀ : 0 < x\n⊢ 0 < x ^ 2")
    assert tree.is_new_state("x : ℝ\nh₀ : 0 < x\nh₁✝ : x ≠ 2\n⊢ 0 < x ^ 2")
    assert not tree.is_new_state("x : ℝ\n⊢ 0 < x → x ≠ 2 → 0 < x ^ 2")


def test_a_requeued_node_pops_again_at_its_new_priority_and_only_once() -> None:
    root = node(0, None, None, "⊢ p", score=0.0)
    tree = SearchTree(root)
    assert tree.pop(1, max_depth=10) == [root]
    root.expanded, root.visits = True, 1
    child = node(tree.new_id(), root, "t", "⊢ q", score=-0.5)
    tree.add(child)
    tree.requeue(root, -1.0)
    assert tree.pop(5, max_depth=10) == [child, root]  # the child (-0.5) before the root put back at -1.0
    root.visits = 2
    tree.requeue(root, -2.0)
    tree.requeue(child, 0.0)  # pushed with the child's visits (0) although it was expanded: a stale entry
    child.expanded = True
    assert tree.pop(5, max_depth=10) == [root]
    assert tree.pop(5, max_depth=10) == []
