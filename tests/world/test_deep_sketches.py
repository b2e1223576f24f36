"""The checked world's deep sketch family (leankit.world.deep_sketches): off unless asked for and appended last, every
other theorem unchanged; its facts need a decomposition of their own (no decision tactic proves a product fact in one
step), its statements reach depth 2 and 3, facts recur across a situation's theorems, and every recorded proof, nested
and flat, compiles in minilean."""

from __future__ import annotations

import re
from collections import Counter

from leankit.world.checked import build_world, embedded_world
from leankit.world.deep_sketches import DEEP_TEMPLATES, SHARED_LAYOUT
from minilean.server import Server
from tests.world.test_checked import _compiles

WITH_SKETCHES = embedded_world(0, sketches=True)
WITH_DEEP = embedded_world(0, sketches=True, deep_sketches=True)
DEEP = WITH_DEEP.theorems[len(WITH_SKETCHES.theorems):]
HAVE = re.compile(r"^( *)have (\S+) : (.+?) := by", re.MULTILINE)


def depth(proof: list[str]) -> int:
    """How deep the proof's `have`s nest: 1 for facts proved in one step, 2 for a fact proved by facts, …"""
    return max((len(found.group(1)) // 2 + 1 for step in proof for found in HAVE.finditer(step)), default=0)


def test_the_deep_family_is_off_unless_asked_for_and_appends_last() -> None:
    assert WITH_DEEP.theorems[:len(WITH_SKETCHES.theorems)] == WITH_SKETCHES.theorems
    assert build_world(0).theorems == build_world(0, deep_sketches=False).theorems
    assert {t.role for t in DEEP} == {"sketch"} and {t.template for t in DEEP} == {"sketch_deep_triple"}
    assert Counter(t.split for t in DEEP) == {split: count * 4 for split, count in DEEP_TEMPLATES[0].counts.items()}
    assert len({t.name for t in WITH_DEEP.theorems}) == len(WITH_DEEP.theorems)


def test_a_situation_reaches_depth_one_two_and_three_and_shares_its_facts() -> None:
    test = [t for t in DEEP if t.split == "test"]
    for situation in (test[:4], test[4:8]):
        assert [depth(t.proofs[0]) for t in situation] == [1, 2, 2, 3]
        assert [depth(t.proofs[1]) for t in situation] == [1, 1, 1, 1]  # the flat route
        facts = [{found.group(3) for step in t.proofs[0] for found in HAVE.finditer(step)} for t in situation]
        # the depth-2 statements share a product fact; the depth-3 one holds the first one's conclusion as a fact
        shared = facts[1] & facts[2]  # the three leaves and the product b ^ 2 * c
        assert len(shared) == 4 and sum(" ^ 2 * " in fact for fact in shared) == 1
        conclusion = situation[1].statement.rsplit(" → ", 1)[1]
        assert conclusion in facts[3] and facts[1] <= facts[3]


def test_no_decision_tactic_proves_a_product_fact_in_one_step_but_its_nested_proof_does() -> None:
    server = Server()
    theorem = next(t for t in DEEP if t.split == "test" and depth(t.proofs[0]) == 2)
    intro, product = theorem.proofs[0][0], theorem.proofs[0][1]  # `have hab : a ^ 2 * b = v := by` and its proof
    found = HAVE.match(product)
    assert found is not None
    alone = theorem.model_copy(update={"statement": f"{theorem.statement.rsplit(' → ', 1)[0]} → {found.group(3)}"})
    for tactic in ("nlinarith", "linarith", "norm_num", "positivity", "nlinarith [h₀, h₁, h₂]"):
        assert not _compiles(server, alone, [intro, tactic]), tactic
        server.reset({})
    assert _compiles(server, alone, [intro, *(line.removeprefix("  ") for line in product.split("\n")[1:])])


def test_every_recorded_proof_of_the_deep_family_compiles_in_minilean() -> None:
    server = Server()
    for theorem in DEEP:
        for proof in theorem.proofs:
            assert _compiles(server, theorem, proof), (theorem.name, proof)
        server.reset({})


def test_shared_situations_span_the_train_and_test_splits_and_append_last() -> None:
    deep = build_world(0, sketches=True, deep_sketches=True)
    world = build_world(0, sketches=True, deep_sketches=True, deep_shared=True)
    assert world.theorems[:len(deep.theorems)] == deep.theorems
    shared = world.theorems[len(deep.theorems):]
    assert [t.split for t in shared] == list(SHARED_LAYOUT) * 2 == ["train", "train", "test", "test"] * 2
    assert {t.template for t in shared} == {"sketch_deep_shared"} and len({t.name for t in world.theorems}) == len(
        world.theorems)
    server = Server()
    for situation in (shared[:4], shared[4:]):
        assert [depth(t.proofs[0]) for t in situation] == [1, 2, 2, 3]
        assert len({t.statement.rsplit(" → ", 1)[0] for t in situation}) == 1  # one context: the same reals
        # the test depth-3 statement's first fact is the training depth-2 statement's conclusion, proved by its facts
        facts = [{found.group(3) for step in t.proofs[0] for found in HAVE.finditer(step)} for t in situation]
        assert situation[1].statement.rsplit(" → ", 1)[1] in facts[3] and facts[1] <= facts[3]
        for theorem in situation:
            assert _compiles(server, theorem, theorem.proofs[0]), theorem.name
            server.reset({})
