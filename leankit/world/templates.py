"""The templates of the checked world (`leankit.world.checked`): statements over arithmetic, logic and sets whose
proofs minilean checks, each a `Template` whose `build(dice)` draws an `Instance`.

    template = next(t for t in TEMPLATES if t.role == "held_out")
    instance = template.build(Dice(0, "checked:" + template.name))   # statement, proofs, counterexample (traps)

A template is one piece (`leankit.world.pieces`, a *lesson*) or a conjunction of two or three; its `role` says
where its instances go: taught (train and pool), explored (pool only: search must find their proofs), held out
(test only: combinations no train or pool theorem has, every step taught) or trap (a false near miss, in every
split). Proofs start from the binder-form start, one tactic per step; statements and tactics are Lean 4 +
Mathlib in minilean's fragment. The roles' counts and why: docs/replay-corpus.md, "The checked world".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from leankit.corpus import Split
from leankit.world.draft import Dice
from leankit.world.pieces import PIECES, Names, compose, linear_equation, lit

Role = Literal["taught", "explored", "held_out", "trap", "sketch"]  # sketch: leankit.world.sketches
Topic = Literal["algebra", "inequality", "number_theory", "logic", "sets"]

REALS = ("x", "z", "t", "u")
REAL_PAIRS = (("x", "y"), ("a", "b"))
NATS = ("n", "m")
PROPS = (("p", "q"), ("p", "r"), ("q", "r"))

# Instances per split: a taught template is trained on (train: its proofs are SFT data; pool: searched) and never
# tested, a held-out one only tested. Every world test theorem is new: its template is in no train or pool theorem.
TAUGHT_COUNTS: Mapping[Split, int] = {"train": 6, "pool": 1, "test": 0}
EXPLORED_COUNTS: Mapping[Split, int] = {"train": 0, "pool": 2, "test": 0}
HELD_OUT_COUNTS: Mapping[Split, int] = {"train": 0, "pool": 0, "test": 2}


@dataclass(frozen=True, slots=True)
class Instance:
    """One statement (∀-form) and its proofs from the binder-form start; a trap has no proof and a
    counterexample instead: values of the ∀ binders (numbers, or `True`/`False` for propositions) under which
    every hypothesis holds and the conclusion does not."""

    statement: str
    proofs: tuple[tuple[str, ...], ...] = ()
    counterexample: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Template:
    name: str
    topic: Topic
    role: Role
    build: Callable[[Dice], Instance]
    counts: Mapping[Split, int] = field(default_factory=dict)  # instances per split; traps take turns instead


def _pieces(kinds: tuple[str, ...]) -> Callable[[Dice], Instance]:
    def build(dice: Dice) -> Instance:
        names = Names(dice)
        composed = compose(dice, [PIECES[kind](dice, names) for kind in kinds])
        return Instance(composed.statement, composed.proofs)

    return build


_TOPICS: dict[str, Topic] = {"lin": "algebra", "nat_lin": "number_theory", "mod": "number_theory",
                             "dvd": "number_theory", "pos": "inequality", "sq": "inequality", "side": "inequality",
                             "member": "sets", "witness": "logic", "sub": "algebra"}


def _template(kinds: tuple[str, ...], role: Role, counts: Mapping[Split, int]) -> Template:
    return Template("_".join(kinds), _TOPICS[kinds[0]], role, _pieces(kinds), counts)


LESSONS: tuple[tuple[str, ...], ...] = tuple((kind,) for kind in PIECES)
# Each piece comes first in one taught pair and second in another; three taught triples show a second `constructor`.
TAUGHT: tuple[tuple[str, ...], ...] = (
    ("lin", "mod"), ("mod", "pos"), ("pos", "member"), ("member", "sub"), ("sub", "dvd"), ("dvd", "side"),
    ("side", "witness"), ("witness", "nat_lin"), ("nat_lin", "sq"), ("sq", "lin"),
    ("mod", "side", "member"), ("sq", "witness", "dvd"), ("member", "lin", "sub"),
)
# Pool-only combinations (search must find their proofs): none is a held-out one or the first two pieces of a
# held-out triple. A proof search finds for one may still prove a held-out theorem once renamed, where generic
# tactics close both (`omega` then `tauto` proves (mod, member) and (nat_lin, member) alike): the retrieval
# baseline of benchmarks/learning.py counts such replays.
EXPLORED: tuple[tuple[str, ...], ...] = (
    ("mod", "member"), ("pos", "witness"), ("side", "dvd"), ("sub", "lin"), ("member", "mod"), ("dvd", "sq"),
    ("witness", "pos"), ("nat_lin", "side"), ("lin", "pos"), ("sq", "nat_lin"),
    ("pos", "member", "lin"), ("nat_lin", "witness", "member"),
)
# New orders and combinations. Each has a piece whose step depends on the instance (which side of a disjunction,
# which set and hypothesis, which witness) or pairs step kinds no taught template pairs: the ℕ pieces (`omega`) and
# the `nlinarith`-closable ones (lin, pos, sq) prove one another's goals, so (ℕ, lin) would be a renamed
# (ℕ, sq) proof away from a taught pair.
HELD_OUT: tuple[tuple[str, ...], ...] = (
    ("pos", "side"), ("member", "dvd"), ("sub", "side"), ("side", "member"), ("member", "witness"), ("sq", "member"),
    ("lin", "witness"), ("side", "sq"), ("member", "nat_lin"), ("witness", "sub"), ("sub", "member"),
    ("mod", "witness"), ("nat_lin", "member"), ("lin", "side"), ("member", "pos"), ("witness", "side"),
    ("sq", "side"), ("witness", "lin"), ("side", "lin"),
    ("lin", "member", "mod"), ("side", "pos", "nat_lin"), ("sub", "witness", "dvd"), ("mod", "sq", "side"),
    ("pos", "sub", "member"), ("dvd", "witness", "lin"), ("witness", "member", "sq"), ("side", "mod", "witness"),
)


def trap_lin(dice: Dice) -> Instance:
    x = dice.choice(REALS)
    coef, value = dice.randint(2, 9), dice.randint(-6, 12)
    wrong = value + dice.choice([-1, 1])
    statement = f"∀ ({x} : ℝ), {linear_equation(dice, x, coef, value)} → {x} = {lit(wrong)}"
    return Instance(statement, counterexample={x: str(value)})


def trap_or(dice: Dice) -> Instance:
    p, q = dice.choice(PROPS)
    conclusion = dice.choice([p, f"{p} ∧ {q}", f"{q} ∧ {p}"])
    statement = f"∀ ({p} {q} : Prop), {p} ∨ {q} → {conclusion}"
    return Instance(statement, counterexample={p: "False", q: "True"})


def trap_mod(dice: Dice) -> Instance:
    n = dice.choice(NATS)
    m = dice.randint(3, 9)
    r, j = dice.randint(0, m - 1), dice.randint(1, m - 1)
    statement = f"∀ ({n} : ℕ), {n} % {m} = {r} → ({n} + {j}) % {m} = {r}"
    return Instance(statement, counterexample={n: str(r)})


def trap_sq(dice: Dice) -> Instance:
    a, b = dice.choice(REAL_PAIRS)
    k = dice.randint(1, 9)
    statement = f"∀ ({a} {b} : ℝ), 2 * {a} * {b} ≤ {a} ^ 2 + {b} ^ 2 - {k}"
    return Instance(statement, counterexample={a: "0", b: "0"})

def trap_pair(dice: Dice) -> Instance:
    """A taught pair with one false conjunct: the ℝ solution moved by one, beside a true remainder."""
    x, n = dice.choice(REALS), dice.choice(NATS)
    coef, value = dice.randint(2, 9), dice.randint(-6, 12)
    b = dice.randint(1, 20)
    m = dice.randint(2, 9)
    r, j = dice.randint(0, m - 1), dice.randint(1, 5)
    wrong = value + dice.choice([-1, 1])
    statement = (f"∀ ({x} : ℝ) ({n} : ℕ), {coef} * {x} + {b} = {lit(coef * value + b)} → {n} % {m} = {r} → "
                 f"{x} = {lit(wrong)} ∧ ({n} + {j * m}) % {m} = {r}")
    return Instance(statement, counterexample={x: str(value), n: str(r)})


def _trap(build: Callable[[Dice], Instance], topic: Topic) -> Template:
    return Template(build.__name__, topic, "trap", build)


TEMPLATES: tuple[Template, ...] = (
    *(_template(kinds, "taught", TAUGHT_COUNTS) for kinds in (*LESSONS, *TAUGHT)),
    *(_template(kinds, "explored", EXPLORED_COUNTS) for kinds in EXPLORED),
    *(_template(kinds, "held_out", HELD_OUT_COUNTS) for kinds in HELD_OUT),
    _trap(trap_lin, "algebra"),
    _trap(trap_or, "logic"),
    _trap(trap_mod, "number_theory"),
    _trap(trap_sq, "inequality"),
    _trap(trap_pair, "algebra"),
)
