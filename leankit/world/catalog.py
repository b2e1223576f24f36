"""The families of the generated world and how many instances each puts in train, pool and test.

Two kinds of family:

- **taught** families have train instances (their proofs are SFT data at iteration 0), pool instances and
  test instances;
- **search-only** families have no train instance: only pool (statements whose proofs search must find) and
  test. Iteration 0's policy has never seen a proof of them; what iteration 1 knows about them comes from the
  proofs iteration 0's search (and its noise pass) found in the pool. They reuse the taught families'
  tactics in new combinations (a linear system needs `constructor` from logic and `linarith` from algebra).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from leankit.corpus import Split
from leankit.world import algebra, logic
from leankit.world.draft import Dice, Draft

Builder = Callable[[Dice, str, Split], Draft]


@dataclass(frozen=True, slots=True)
class Family:
    """A template and its instance counts per split."""

    name: str
    build: Builder
    train: int
    pool: int
    test: int

    @property
    def taught(self) -> bool:
        return self.train > 0


def _taught(name: str, build: Builder) -> Family:
    return Family(name, build, train=TAUGHT_TRAIN, pool=TAUGHT_POOL, test=TEST)


def _search_only(name: str, build: Builder) -> Family:
    return Family(name, build, train=0, pool=SEARCH_ONLY_POOL, test=TEST)


TAUGHT_TRAIN = 16
TAUGHT_POOL = 6
SEARCH_ONLY_POOL = 10
TEST = 5

FAMILIES: tuple[Family, ...] = (
    _taught("lin_eq", algebra.lin_eq),
    _taught("nat_lin", algebra.nat_lin),
    _taught("lin_sum", algebra.lin_sum),
    _taught("sub_chain", algebra.sub_chain),
    _taught("arith", algebra.arith),
    _taught("sq_ineq", logic.sq_ineq),
    _taught("and_logic", logic.and_logic),
    _taught("or_comm", logic.or_comm),
    _taught("set_mem", logic.set_mem),
    _search_only("lin_sys", algebra.lin_sys),
    _search_only("or_cases", algebra.or_cases),
    _search_only("dvd_omega", algebra.dvd_omega),
    _search_only("mod_omega", algebra.mod_omega),
    _search_only("pos_ineq", logic.pos_ineq),
    _search_only("set_subset", logic.set_subset),
)
