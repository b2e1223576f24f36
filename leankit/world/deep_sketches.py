"""The deep sketch family of the checked world: statements whose facts themselves need a decomposition, so a planner
that stops at one level cannot prove them and recursion and sharing can matter (docs/replay-corpus.md, "The deep
sketch family"). Off unless asked for (`build_world(seed, deep_sketches=True)`); no other theorem changes.

    situation = deep_triple(Dice(0, "checked:sketch_deep_triple"))   # three reals, four statements
    situation.instances[3].proofs[0]    # the nested proof: each `have` proved by its own `have`s

A situation pins three reals `a b c` by a linear equation each (`linarith`: a **leaf** fact `ha : a = 2`). A
**product** fact `hab : a ^ 2 * b = 12` is degree 3 (no decision tactic reaches it in one step) and is proved by two
leaves, `subst` and `norm_num`. Its statements, one context (the binders and `h₀ h₁ h₂`) for all four:

- depth 1: `a * b * c = v` from the leaves `ha hb hc` (as the sketch family's);
- depth 2: `a ^ 2 * b + b ^ 2 * c = s` from the products `hab hbc` (`linarith`), and `b ^ 2 * c + c ^ 2 * a = t`
  from `hbc hca`: each product needs its own two leaves;
- depth 3: `(a ^ 2 * b + b ^ 2 * c) * (c ^ 2 * a) = s * w` from `hs` (the first depth-2 statement's conclusion, two
  products deep) and `hca` (`rw [hs, hca]`, `norm_num`).

So `hbc` is a fact of both depth-2 statements, `hab` of the first and (inside `hs`) of the depth-3 one, `hca` of the
second and the depth-3 one: facts shared across the theorems of a situation. Each statement's first proof is the
nested one (a fact's proof is its own `have`s, `subst`, `norm_num`); its second the flat route (every leaf, `subst`,
`norm_num`).

**Shared situations** (`SHARED_TEMPLATES`, `build_world(seed, deep_sketches=True, deep_shared=True)`, appended after
the family; off otherwise): the same situations, each across the split (`SHARED_LAYOUT`): its depth-1 and first
depth-2 statements are training theorems, its second depth-2 and depth-3 statements test theorems. The depth-3
statement's fact `hs` is the training depth-2 statement's conclusion, proved by that statement's facts `hab` and
`hbc` in the same context: what a lemma library built on the training split can serve a test theorem. The family's
own situations share nothing across splits (each draws its own reals and equations).
"""

from __future__ import annotations

from collections.abc import Mapping

from leankit.corpus import Split
from leankit.world.draft import Dice, context
from leankit.world.pieces import linear_equation
from leankit.world.sketches import Fact, Situation, SketchTemplate
from leankit.world.templates import Instance

__all__ = ["DEEP_COUNTS", "DEEP_TEMPLATES", "SHARED_LAYOUT", "SHARED_TEMPLATES", "deep_triple"]

DEEP_COUNTS: Mapping[Split, int] = {"train": 2, "pool": 1, "test": 2}  # situations per split, four theorems each
SHARED_LAYOUT: tuple[Split, ...] = ("train", "train", "test", "test")  # a shared situation's statements' splits
_HYPS = ("h₀", "h₁", "h₂")


def _indent(lines: list[str]) -> list[str]:
    return [f"  {line}" if line else line for line in lines]


def _have(fact: Fact, proof: list[str]) -> str:
    """`have NAME : P := by` and the proof's lines two columns deeper: one top-level tactic."""
    return "\n".join([f"have {fact.name} : {fact.statement} := by", *_indent("\n".join(proof).split("\n"))])


def _product(first: Fact, second: Fact, name: str, values: Mapping[str, int], a: str, b: str) -> tuple[Fact, str]:
    """The fact `a ^ 2 * b = v` and its nested proof (its two leaves, `subst`, `norm_num`)."""
    value = values[a] ** 2 * values[b]
    fact = Fact(name, f"{a} ^ 2 * {b} = {value}", "")
    proof = _have(fact, [first.step, second.step, f"subst {first.name} {second.name}", "norm_num"])
    return fact, proof


def deep_triple(dice: Dice) -> Situation:
    """Three reals, each pinned by a linear equation; four statements of depth 1, 2, 2 and 3 (module docstring)."""
    names = dice.choice((("x", "y", "z"), ("a", "b", "c")))
    values = {name: dice.choice([v for v in range(-3, 5) if v not in (0, 1)]) for name in names}
    equations = [linear_equation(dice, name, dice.randint(2, 9), values[name]) for name in names]
    leaves = {name: Fact(f"h{name}", f"{name} = {values[name]}", "linarith") for name in names}
    a, b, c = names
    ab, ab_proof = _product(leaves[a], leaves[b], f"h{a}{b}", values, a, b)
    bc, bc_proof = _product(leaves[b], leaves[c], f"h{b}{c}", values, b, c)
    ca, ca_proof = _product(leaves[c], leaves[a], f"h{c}{a}", values, c, a)
    s_value = values[a] ** 2 * values[b] + values[b] ** 2 * values[c]
    t_value = values[b] ** 2 * values[c] + values[c] ** 2 * values[a]
    w_value = values[c] ** 2 * values[a]
    s_expr = f"{a} ^ 2 * {b} + {b} ^ 2 * {c}"
    hs = Fact("hs", f"{s_expr} = {s_value}", "")
    hs_proof = _have(hs, [ab_proof, bc_proof, "linarith"])
    binders = " ".join(f"({line})" for line in context(*((name, "ℝ") for name in names)))
    opening = f"intro {' '.join(_HYPS)}"
    flat = (opening, *(leaf.step for leaf in leaves.values()), f"subst {' '.join(f'h{n}' for n in names)}",
            "norm_num")
    shapes = (
        (f"{a} * {b} * {c} = {values[a] * values[b] * values[c]}",
         (opening, *(leaf.step for leaf in leaves.values()), *(f"subst h{n}" for n in names), "norm_num")),
        (f"{s_expr} = {s_value}", (opening, ab_proof, bc_proof, "linarith")),
        (f"{b} ^ 2 * {c} + {c} ^ 2 * {a} = {t_value}", (opening, bc_proof, ca_proof, "linarith")),
        (f"({s_expr}) * ({c} ^ 2 * {a}) = {s_value * w_value}",
         (opening, hs_proof, ca_proof, f"rw [{hs.name}, {ca.name}]", "norm_num")),
    )
    premises = "".join(f"{equation} → " for equation in equations)
    instances = tuple(Instance(f"∀ {binders}, {premises}{conclusion}", (nested, flat))
                      for conclusion, nested in shapes)
    return Situation((*leaves.values(), ab, bc, ca, hs), instances)


DEEP_TEMPLATES: tuple[SketchTemplate, ...] = (
    SketchTemplate("sketch_deep_triple", "algebra", deep_triple, DEEP_COUNTS),
)

SHARED_TEMPLATES: tuple[SketchTemplate, ...] = (
    SketchTemplate("sketch_deep_shared", "algebra", deep_triple, {"test": 2}, SHARED_LAYOUT),
)
