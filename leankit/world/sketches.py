"""The sketch family of the checked world: statements whose natural proof first establishes two or three independent
facts with `have NAME : P := by …` and concludes from them, several statements to one situation (the same binders
and hypotheses), so one fact is a subgoal of several theorems (docs/replay-corpus.md, "The sketch family").

    template = SKETCH_TEMPLATES[0]
    situation = template.build(Dice(0, "checked:" + template.name))   # a `Situation`: its facts, 3 statements
    situation.instances[0].proofs[0]
    # ('intro h₀ h₁', 'have hx : x = 3 := by linarith', 'have hy : y = 4 := by linarith', 'subst hx hy', 'norm_num')

A situation pins each variable by a linear equation of its own (ℝ: `linarith`, ℕ: `omega`, the world's lin and
nat_lin steps); its statements share the hypotheses, in one order, and conclude a value of a degree-3 polynomial in
every variable, which no decision tactic after `intro` reaches (`nlinarith` multiplies hypotheses in pairs only,
`omega` is linear): the route is a fact per variable, then `subst` and `norm_num`. Every statement of a situation has
the same hypotheses and fact names, so a sketch's hole `hx : x = 3` has the same context (the binders, the hypotheses,
the facts before it) in each. The family is off by default (`data.world_sketches`): `build_world(seed,
sketches=True)` appends it after the templates, leaving every other theorem as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from leankit.corpus import Split
from leankit.world.draft import Dice, context
from leankit.world.pieces import linear_equation
from leankit.world.templates import Instance, Topic

SUBSCRIPTS = "₀₁₂"
STATEMENTS_PER_SITUATION = 3
# Situations per split: each gives STATEMENTS_PER_SITUATION theorems, all in that split (so a test run meets
# each of its facts in three theorems: the subgoal cache's hits are measurable on the test split alone).
SKETCH_COUNTS: Mapping[Split, int] = {"train": 3, "pool": 1, "test": 2}


@dataclass(frozen=True, slots=True)
class Fact:
    """One `have` of a situation: its name, statement and the tactic proving it from the hypotheses."""

    name: str
    statement: str
    tactic: str

    @property
    def step(self) -> str:
        return f"have {self.name} : {self.statement} := by {self.tactic}"


@dataclass(frozen=True, slots=True)
class Situation:
    """A situation's facts and its statements (each an `Instance` with its proofs)."""

    facts: tuple[Fact, ...]
    instances: tuple[Instance, ...]


@dataclass(frozen=True, slots=True)
class SketchTemplate:
    """A kind of situation: `counts` situations per split, each of STATEMENTS_PER_SITUATION theorems (`splits`: each
    statement's own split instead, by its place in the situation: one situation across splits)."""

    name: str
    topic: Topic
    build: Callable[[Dice], Situation]
    counts: Mapping[Split, int]
    splits: tuple[Split, ...] | None = None


def _literal(value: int) -> str:
    """A value as Lean prints it in a hypothesis or a goal (`x = -2`)."""
    return str(value)


# Degree-3 conclusions (as `str.format` texts over the variables, and their value), each using every variable.
_PAIR_SHAPES: tuple[tuple[str, Callable[[int, int], int]], ...] = (
    ("{a} ^ 2 * {b}", lambda a, b: a * a * b),
    ("{a} * {b} ^ 2", lambda a, b: a * b * b),
    ("{a} * {b} * ({a} + {b})", lambda a, b: a * b * (a + b)),
    ("{a} ^ 3 + {b}", lambda a, b: a ** 3 + b),
    ("{a} ^ 2 * {b} + {b}", lambda a, b: a * a * b + b),
)
_TRIPLE_SHAPES: tuple[tuple[str, Callable[[int, int, int], int]], ...] = (
    ("{a} * {b} * {c}", lambda a, b, c: a * b * c),
    ("{a} * {b} * {c} + {a}", lambda a, b, c: a * b * c + a),
    ("{a} ^ 2 * {c} + {b}", lambda a, b, c: a * a * c + b),
    ("{a} * {b} ^ 2 - {c}", lambda a, b, c: a * b * b - c),
)


def _nat_equation(dice: Dice, n: str, value: int) -> str:
    coef, b = dice.randint(2, 9), dice.randint(1, 20)
    lhs = dice.choice([f"{coef} * {n} + {b}", f"{b} + {coef} * {n}", f"{n} * {coef} + {b}"])
    return f"{lhs} = {coef * value + b}"


def _situation(names: tuple[str, ...], kind: str, equations: list[str], values: list[int], tactic: str,
               shapes: list[tuple[str, Callable[..., int]]]) -> Situation:
    """The statements `∀ (names : kind), eq₀ → … → shape = value` for each shape, and their proofs."""
    facts = tuple(Fact(f"h{name}", f"{name} = {_literal(value)}", tactic)
                  for name, value in zip(names, values, strict=True))
    hyps = [f"h{SUBSCRIPTS[k]}" for k in range(len(equations))]
    binders = " ".join(f"({line})" for line in context(*((name, kind) for name in names)))
    premises = "".join(f"{equation} → " for equation in equations)
    fact_names = " ".join(fact.name for fact in facts)
    instances = []
    for shape, value_of in shapes:
        conclusion = f"{shape.format(**dict(zip('abc', names, strict=False)))} = {_literal(value_of(*values))}"
        opening = (f"intro {' '.join(hyps)}", *(fact.step for fact in facts))
        proofs = ((*opening, f"subst {fact_names}", "norm_num"),
                  (*opening, *(f"subst {fact.name}" for fact in facts), "norm_num"))
        instances.append(Instance(f"∀ {binders}, {premises}{conclusion}", proofs))
    return Situation(facts, tuple(instances))


def _nonzero(dice: Dice, low: int, high: int) -> int:
    return dice.choice([value for value in range(low, high + 1) if value != 0])


def real_pair(dice: Dice) -> Situation:
    """Two reals, each pinned by a linear equation (`linarith`)."""
    names = dice.choice((("x", "y"), ("a", "b")))
    values = [_nonzero(dice, -4, 6) for _ in names]
    equations = [linear_equation(dice, name, dice.randint(2, 9), value) for name, value in zip(names, values,
                                                                                                 strict=True)]
    shapes = dice.sample(_PAIR_SHAPES, STATEMENTS_PER_SITUATION)
    return _situation(names, "ℝ", equations, values, "linarith", shapes)


def real_triple(dice: Dice) -> Situation:
    """Three reals, each pinned by a linear equation (`linarith`)."""
    names = dice.choice((("x", "y", "z"), ("a", "b", "c")))
    values = [_nonzero(dice, -3, 5) for _ in names]
    equations = [linear_equation(dice, name, dice.randint(2, 9), value) for name, value in zip(names, values,
                                                                                                 strict=True)]
    shapes = dice.sample(_TRIPLE_SHAPES, STATEMENTS_PER_SITUATION)
    return _situation(names, "ℝ", equations, values, "linarith", shapes)


def nat_pair(dice: Dice) -> Situation:
    """Two naturals, each pinned by a linear equation (`omega`)."""
    names = dice.choice((("n", "m"), ("m", "k")))
    values = [dice.randint(1, 7) for _ in names]
    equations = [_nat_equation(dice, name, value) for name, value in zip(names, values, strict=True)]
    shapes = dice.sample(_PAIR_SHAPES, STATEMENTS_PER_SITUATION)
    return _situation(names, "ℕ", equations, values, "omega", shapes)


SKETCH_TEMPLATES: tuple[SketchTemplate, ...] = (
    SketchTemplate("sketch_real_pair", "algebra", real_pair, SKETCH_COUNTS),
    SketchTemplate("sketch_real_triple", "algebra", real_triple, SKETCH_COUNTS),
    SketchTemplate("sketch_nat_pair", "number_theory", nat_pair, SKETCH_COUNTS),
)

__all__ = ["SKETCH_COUNTS", "SKETCH_TEMPLATES", "STATEMENTS_PER_SITUATION", "Fact", "Situation", "SketchTemplate"]
