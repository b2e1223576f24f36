"""States, goals, labels and negatives from trajectories (burnqed/ebm/sampling.py)."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest

from burnqed.ebm.sampling import (
    GroupShape,
    NegativeSampler,
    build_dataset,
    check_trainable,
    fixed_groups,
    quotas,
)
from burnqed.errors import InputError
from burnqed.records.results import Edge
from burnqed.records.theorem import stable_split
from burnqed.trajectory.schema import theorems_to_table
from tests.doubles.ebm_doubles import proved_tree, unproved_tree

RATIOS = (0.6, 0.3, 0.1)


def table(*theorems: tuple[str, list[Edge]]) -> object:
    return theorems_to_table("run", 0, list(theorems))


def texts(data: object, indexes: object) -> list[str]:
    return [data.states[i].text for i in indexes]  # type: ignore[attr-defined]


def test_states_goals_labels_depths_and_siblings() -> None:
    data = build_dataset([table(("A", proved_tree()), ("B", unproved_tree()))], valid_fraction=0.0)
    a, b = data.theorems["A"], data.theorems["B"]
    assert (a.goal, b.goal) == ("state 0", "state 0")
    assert texts(data, a.positives) == ["state 1", "state 4"]
    assert texts(data, a.negatives) == ["state 2", "state 6"]
    assert (texts(data, b.positives), texts(data, b.negatives)) == ([], ["state 1", "state 2"])
    anchors = data.anchors("train")
    assert [(texts(data, [x.state])[0], x.depth, x.remaining, texts(data, x.siblings)) for x in anchors] == [
        ("state 1", 1, 2, ["state 2"]), ("state 4", 2, 1, ["state 6"]),
    ]
    assert data.edges == 8 and len(data.states) == 6
    assert sorted(data.texts()) == sorted({"state 0", "state 1", "state 2", "state 4", "state 6"})


def test_a_state_positive_in_any_search_is_never_a_negative() -> None:
    # The same theorem searched twice (two prefixes): "state 2" is off the proof in the first search but on
    # it in the second, where "state 1" is off it.
    second = proved_tree()
    for e in second:  # swap the roles of nodes 1 and 2
        if e.state_after == "state 1":
            e.state_after = "state 2"
        elif e.state_after == "state 2":
            e.state_after = "state 1"
    data = build_dataset([table(("A", proved_tree())), table(("A", second))], valid_fraction=0.0)
    assert texts(data, data.theorems["A"].positives) == ["state 1", "state 2", "state 4"]
    assert texts(data, data.theorems["A"].negatives) == ["state 6"]
    assert all(not data.states[i].positive for i in data.theorems["A"].negatives)
    assert [texts(data, x.siblings) for x in data.anchors("train")] == [[], [], ["state 6"]]


def test_two_searches_of_a_theorem_in_one_merged_prefix_keep_their_own_trees() -> None:
    # A merged prefix holds iteration 0's search and its noise pass (two run ids): their node ids collide. The
    # noise pass's tree has the same shape but other states, and no proof.
    search = theorems_to_table("iter0", 0, [("A", proved_tree())])
    noise = theorems_to_table("iter0-noise", 0, [("A", unproved_tree("noise "))])
    data = build_dataset([pa.concat_tables([search, noise])], valid_fraction=0.0)
    a = data.theorems["A"]
    assert texts(data, a.positives) == ["state 1", "state 4"]
    assert sorted(texts(data, a.negatives)) == ["noise state 1", "noise state 2", "state 2", "state 6"]
    # the noise pass's node 1 and 2 are not state 1's siblings, and every remaining count is a real distance
    assert [(texts(data, [x.state])[0], x.remaining, texts(data, x.siblings)) for x in data.anchors("train")] == [
        ("state 1", 2, ["state 2"]), ("state 4", 1, ["state 6"]),
    ]
    assert [(d.children, d.on_path) for d in data.decisions] == [
        ((a.positives[0], a.negatives[0]), (True, False)),
        ((a.positives[1], a.negatives[1]), (True, False)),
    ]


def test_a_state_equal_to_a_positive_up_to_names_is_positive() -> None:
    # `intro h₁` off the proof reaches the proof's `intro h₀` state renamed: the same proof closes it, so it is a
    # positive (as far from the proof as its twin) and no negative; a state that differs beyond names stays negative.
    edges = proved_tree()
    texts_by_node = {1: "x : ℝ\nh₀ : 0 < x\n⊢ 0 < x ^ 2", 2: "x : ℝ\nh₁ : 0 < x\n⊢ 0 < x ^ 2",
                     4: "x : ℝ\nh₀ : 0 < x\n⊢ 0 < x * x", 6: "x : ℝ\nh₀ : x < 0\n⊢ 0 < x * x"}
    for e in edges:
        e.state_before = texts_by_node.get(e.parent_id, "⊢ ∀ x : ℝ, 0 < x → 0 < x ^ 2")
        if e.state_after:
            e.state_after = texts_by_node[e.node_id]
    data = build_dataset([table(("A", edges))], valid_fraction=0.0)
    a = data.theorems["A"]
    assert texts(data, a.positives) == [texts_by_node[1], texts_by_node[2], texts_by_node[4]]
    assert texts(data, a.negatives) == [texts_by_node[6]]
    anchors = {texts(data, [x.state])[0]: (x.remaining, texts(data, x.siblings)) for x in data.anchors("train")}
    assert anchors == {texts_by_node[1]: (2, []), texts_by_node[2]: (2, []), texts_by_node[4]: (1, [texts_by_node[6]])}
    # the root's two children are both on the path now: no decision there
    assert [d.depth for d in data.decisions] == [2]


def test_quotas_follow_the_ratios() -> None:
    assert quotas(7, RATIOS) == (4, 2, 1)
    assert quotas(10, RATIOS) == (6, 3, 1)
    assert quotas(4, (1.0, 1.0, 0.0)) == (2, 2, 0)
    assert quotas(3, (0.0, 0.0, 2.0)) == (0, 0, 3)


def test_a_short_pool_hands_its_shortfall_to_the_next() -> None:
    data = build_dataset([table(("A", proved_tree()), ("B", unproved_tree()))], valid_fraction=0.0)
    sampler = NegativeSampler(data, "train", GroupShape(4, RATIOS), seed=0)
    anchor = data.anchors("train")[0]  # state 1 of A: one sibling (state 2), one more same-theorem (state 6)
    group = sampler.group(anchor)
    # quotas (2, 1, 1): one sibling, its shortfall to the same theorem (one there), the rest to B
    assert texts(data, group[:3]) == ["state 1", "state 2", "state 6"]
    assert sorted(texts(data, group[3:])) == ["state 1", "state 2"]
    assert [data.states[i].theorem for i in group[3:]] == ["B", "B"]
    # Pools too small for K: the rest repeats negatives already drawn.
    sampler = NegativeSampler(data, "train", GroupShape(10, RATIOS), seed=0)
    group = sampler.group(anchor)
    assert len(group) == 11 and group[0] == anchor.state
    assert set(group[1:]) == {i for i, s in enumerate(data.states) if not (s.theorem == "A" and s.positive)}


def wide_theorem(name: str, siblings: int) -> list[Edge]:
    """root ─1 (proof) ─ closed; root ─ siblings 2..siblings+1; 1 ─ children that are not on the proof."""
    from burnqed.records.results import EdgeOutcome
    from burnqed.trajectory.labels import label_edges
    from tests.trajectory.factories import edge

    edges = [edge(1, 0)] + [edge(i, 0) for i in range(2, siblings + 2)]
    edges += [edge(100 + i, 1, depth=2) for i in range(10)] + [edge(200, 1, EdgeOutcome.CLOSED, depth=2)]
    for e in edges:
        if e.state_after:
            e.state_after = f"{name} {e.node_id}"
        e.state_before = f"{name} {e.parent_id}"
    label_edges(edges, [200], True)
    return edges


def test_large_pools_give_exactly_the_ratios() -> None:
    data = build_dataset([table(("A", wide_theorem("A", 10)), ("B", wide_theorem("B", 10)),
                                ("C", wide_theorem("C", 10)))], valid_fraction=0.0)
    sampler = NegativeSampler(data, "train", GroupShape(7, RATIOS), seed=1)
    anchor = next(x for x in data.anchors("train") if x.theorem == "A")
    for _ in range(20):
        group = sampler.group(anchor)
        kinds = Counter(
            "sibling" if i in anchor.siblings else ("same" if data.states[i].theorem == "A" else "other")
            for i in group[1:]
        )
        assert kinds == Counter({"sibling": 4, "same": 2, "other": 1})
        assert len(set(group)) == 8 and not any(data.states[i].positive and data.states[i].theorem == "A"
                                                for i in group[1:])


def test_the_split_is_by_theorem() -> None:
    names = [f"thm_{k}" for k in range(40)]
    data = build_dataset([table(*((n, proved_tree()) for n in names))], valid_fraction=0.3)
    valid = {n for n in names if stable_split(n, 0.3) == "valid"}
    assert 0 < len(valid) < 40
    assert {t.name for t in data.theorems.values() if t.split == "valid"} == valid
    assert {x.theorem for x in data.anchors("valid")} == valid
    assert {x.theorem for x in data.anchors("train")} == set(names) - valid
    groups = fixed_groups(data, "valid", GroupShape(5, RATIOS), seed=0)
    assert len(groups) == len(data.anchors("valid"))
    assert all(data.states[i].theorem in valid for g in groups for i in g)  # negatives stay in the split
    assert groups == fixed_groups(data, "valid", GroupShape(5, RATIOS), seed=0)  # fixed for a seed


def test_trajectories_without_proofs_cannot_train_an_ebm() -> None:
    data = build_dataset([table(("A", unproved_tree()), ("B", unproved_tree()))], valid_fraction=0.0)
    with pytest.raises(InputError, match="a trajectory with zero proofs cannot train an EBM"):
        check_trainable(data, ["runs/t"])
    one = build_dataset([table(("A", proved_tree()))], valid_fraction=0.0)
    check_trainable(one, ["runs/t"])  # two positives, two negatives: enough
    with pytest.raises(InputError, match="hold no edges"):
        check_trainable(build_dataset([table()], valid_fraction=0.0), ["runs/t"])


def test_farther_positives_come_first_and_take_the_sibling_quota() -> None:
    data = build_dataset([table(("A", proved_tree()), ("B", unproved_tree()))], valid_fraction=0.0)
    anchors = {texts(data, [x.state])[0]: x for x in data.anchors("train")}
    near, far = anchors["state 4"], anchors["state 1"]  # one tactic from the proof, and two
    group = NegativeSampler(data, "train", GroupShape(4, RATIOS, farther=2), seed=0).group(near)
    # state 1 is the only positive farther from the proof; quotas (2, 1, 1) less its slot: (1, 1, 1)
    assert texts(data, group[:4]) == ["state 4", "state 1", "state 6", "state 2"]
    assert data.states[group[4]].theorem == "B" and len(group) == 5
    # no positive is farther than the farthest: its group is drawn as without farther negatives
    with_farther = NegativeSampler(data, "train", GroupShape(4, RATIOS, farther=2), seed=3)
    without = NegativeSampler(data, "train", GroupShape(4, RATIOS), seed=3)
    assert with_farther.group(far) == without.group(far)
    assert not any(data.states[i].positive and data.states[i].theorem == "A" for i in without.group(near)[1:])


def test_farther_negatives_past_the_sibling_quota_take_the_next_pools() -> None:
    data = build_dataset([table(("A", proved_tree()), ("B", unproved_tree()))], valid_fraction=0.0)
    near = next(x for x in data.anchors("train") if texts(data, [x.state]) == ["state 4"])
    sampler = NegativeSampler(data, "train", GroupShape(2, (1.0, 0.0, 1.0), farther=2), seed=0)
    # quotas (1, 0, 1); one farther positive takes the sibling's slot, the other theorem keeps its one
    group = sampler.group(near)
    assert texts(data, group[:2]) == ["state 4", "state 1"] and data.states[group[2]].theorem == "B"
    # more farther negatives than the group has: all of them may be farther, never more
    assert NegativeSampler(data, "train", GroupShape(2, RATIOS, farther=5), seed=0).farther == 2
