"""The subgoal cache's keys and its in-memory store (burnqed/search/subgoal_cache.py)."""

from __future__ import annotations

import pytest

from burnqed.records import Goal, Variable
from burnqed.search.subgoal_cache import SubgoalCache, SubgoalKey, subgoal_key

X = Variable(name="x", type="ℝ")
H = Variable(name="h₁", type="0 < x")


def test_a_key_is_the_context_and_target_up_to_spelling_without_a_drafts_metavariable_values() -> None:
    drafted = Goal(target="0 < x*y", variables=(X, Variable(name="h₁", type="0<x", value="?m.12")))
    written = Goal(target="0 < x * y", variables=(X, H))
    assert subgoal_key(drafted, "import Mathlib") == subgoal_key(written, "import  Mathlib")
    assert subgoal_key(written, "import Mathlib").text == "header import Mathlib\nx : ℝ\nh₁ : 0 < x\n⊢ 0 < x * y"


@pytest.mark.parametrize("other", [
    Goal(target="0 < x * y", variables=(X, Variable(name="h₂", type="0 < x"))),  # a hypothesis renamed
    Goal(target="0 < x * y", variables=(X,)),  # a hypothesis missing
    Goal(target="0 < x * y", variables=(X, Variable(name="h₁", type="0 < x", value="x"))),  # a let's value
    Goal(target="0 ≤ x * y", variables=(X, H)),  # another target
])
def test_a_different_context_or_target_is_a_different_key(other: Goal) -> None:
    assert subgoal_key(other, None) != subgoal_key(Goal(target="0 < x * y", variables=(X, H)), None)


def test_another_header_is_a_different_key() -> None:
    goal = Goal(target="0 < x * y", variables=(X, H))
    assert subgoal_key(goal, "import Mathlib") != subgoal_key(goal, "import Mathlib\nopen Real")


def test_store_then_lookup_counts_and_never_stores_a_proof_twice() -> None:
    cache = SubgoalCache()
    key = subgoal_key(Goal(target="0 < x", variables=(X, H)), None)
    assert cache.lookup(key) == [] and cache.stats.hit_rate == 0.0
    cache.store(key, ["exact h₁"], theorem="t")
    cache.store(key, ["exact h₁"], theorem="u")
    cache.store(key, ["positivity"], theorem="u")
    assert cache.lookup(key) == [["exact h₁"], ["positivity"]]
    cache.record_hit()
    assert (cache.stats.lookups, cache.stats.misses, cache.stats.hits, cache.stats.stored) == (2, 1, 1, 2)
    assert SubgoalCache().stats.hit_rate is None
    with pytest.raises(ValueError, match="empty proof"):
        cache.store(key, [], theorem="t")


def test_a_digest_never_serves_a_key_it_was_not_stored_under() -> None:
    cache = SubgoalCache()
    key = subgoal_key(Goal(target="0 < x", variables=(X, H)), None)
    cache.store(key, ["exact h₁"], theorem="t")
    impostor = SubgoalKey("header \n⊢ False", key.digest)
    assert cache.lookup(impostor) == []
    with pytest.raises(ValueError, match="names two keys"):
        cache.store(impostor, ["simp"], theorem="t")
