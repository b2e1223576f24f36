"""The templates of the checked world (`burnqed.world.checked`): statements over arithmetic and logic whose proofs
minilean checks, each a function `dice -> Instance`.

A template is **taught** (instances in train, pool and test: its proofs are SFT data) or **held out** (instances
only in test: no proof of its shape is ever trained on). Held-out templates combine steps that taught templates
teach (a linear system's `constructor` + `linarith` under an `rcases` split, an `∃` witness whose conditions are
a conjunction); the tests check that every tactic head of a held-out proof occurs in some taught proof. **Trap**
templates are false statements (a near miss of a taught shape): nothing may prove them, and the tests decide
each one independently of minilean with its recorded counterexample.

Proofs are written from the binder-form start the client uses (`theorem NAME (x : ℝ) : H → C := by …`: the
leading ∀ binders are in context, the hypotheses are introduced by the proof), one tactic per step. Statements
and tactics are ordinary Lean 4 + Mathlib (minilean's fragment, docs/minilean.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from burnqed.world.draft import Dice

Role = Literal["taught", "held_out", "trap"]
Topic = Literal["algebra", "inequality", "number_theory", "logic", "sets"]

REALS = ("x", "z", "t", "u")
REAL_PAIRS = (("x", "y"), ("a", "b"))
NATS = ("n", "m")
PROPS = (("p", "q"), ("p", "r"), ("q", "r"))
PROP_TRIPLES = (("p", "q", "r"), ("a", "b", "c"))
PROP_NAMES = (("p", "q", "r", "s", "t"), ("a", "b", "c", "d", "e"))
SUBSCRIPTS = "₀₁₂₃₄₅₆₇₈₉"
SETS = (("A", "B"), ("S", "T"))
SET_TRIPLES = (("A", "B", "C"), ("S", "T", "U"))


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


def lit(value: int) -> str:
    """An integer literal as a statement writes it (negative ones parenthesised)."""
    return str(value) if value >= 0 else f"({value})"


def _proofs(*scripts: list[str]) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(script) for script in scripts)


def _linear(dice: Dice, var: str, coef: int, value: int) -> str:
    """`coef * var + b = c` (in one of three shapes) true at var = value."""
    b = dice.randint(1, 20)
    shape = dice.randint(0, 2)
    if shape == 0:
        return f"{coef} * {var} + {b} = {lit(coef * value + b)}"
    if shape == 1:
        return f"{coef} * {var} - {b} = {lit(coef * value - b)}"
    return f"{b} + {coef} * {var} = {lit(coef * value + b)}"


def _system(dice: Dice) -> tuple[str, str, int, int, str, str]:
    """Two independent linear equations in a pair over ℝ with an integer solution: (x, y, s, t, e₁, e₂)."""
    x, y = dice.choice(REAL_PAIRS)
    s, t = dice.randint(-5, 9), dice.randint(-5, 9)
    shapes = [
        (f"{x} + {y} = {lit(s + t)}", f"{x} - {y} = {lit(s - t)}"),
        (f"2 * {x} + {y} = {lit(2 * s + t)}", f"{x} + {y} = {lit(s + t)}"),
        (f"{x} + 2 * {y} = {lit(s + 2 * t)}", f"{x} - {y} = {lit(s - t)}"),
        (f"3 * {x} - {y} = {lit(3 * s - t)}", f"{x} + {y} = {lit(s + t)}"),
    ]
    e1, e2 = dice.choice(shapes)
    return x, y, s, t, e1, e2


# ------------------------------------------------------------------------------------------------ taught


def lin_eq(dice: Dice) -> Instance:
    x = dice.choice(REALS)
    coef, value = dice.randint(2, 9), dice.randint(-6, 12)
    statement = f"∀ ({x} : ℝ), {_linear(dice, x, coef, value)} → {x} = {lit(value)}"
    return Instance(statement, _proofs(["intro h₀", "linarith"], ["intro h₀", "nlinarith [h₀]"]))


def nat_lin(dice: Dice) -> Instance:
    n = dice.choice(NATS)
    coef, value, b = dice.randint(2, 9), dice.randint(1, 15), dice.randint(1, 20)
    lhs = dice.choice([f"{coef} * {n} + {b}", f"{b} + {coef} * {n}", f"{n} * {coef} + {b}"])
    statement = f"∀ ({n} : ℕ), {lhs} = {coef * value + b} → {n} = {value}"
    return Instance(statement, _proofs(["intro h₀", "omega"], ["intro h₀", "linarith"]))


def lin_sum(dice: Dice) -> Instance:
    x, y, s, t, e1, e2 = _system(dice)
    target = dice.choice([f"{x} = {lit(s)}", f"{y} = {lit(t)}"])
    return Instance(f"∀ ({x} {y} : ℝ), {e1} → {e2} → {target}", _proofs(["intro h₀ h₁", "linarith"]))


def lin_sys(dice: Dice) -> Instance:
    x, y, s, t, e1, e2 = _system(dice)
    statement = f"∀ ({x} {y} : ℝ), {e1} → {e2} → {x} = {lit(s)} ∧ {y} = {lit(t)}"
    return Instance(statement, _proofs(["intro h₀ h₁", "constructor", "linarith", "linarith"],
                                       ["intro h₀ h₁", "refine ⟨?_, ?_⟩", "linarith", "linarith"]))


def sub_chain(dice: Dice) -> Instance:
    x, y = dice.choice(REAL_PAIRS)
    a, b, k = dice.randint(-4, 9), dice.randint(-4, 9), dice.randint(1, 9)
    shape = dice.randint(0, 2)
    if shape == 0:
        lhs, value = f"{x} * {y} + {k}", a * b + k
    elif shape == 1:
        lhs, value = f"{k} * {x} + {y}", k * a + b
    else:
        lhs, value = f"{x} ^ 2 + {y}", a * a + b
    statement = f"∀ ({x} {y} : ℝ), {x} = {lit(a)} → {y} = {lit(b)} → {lhs} = {lit(value)}"
    return Instance(statement, _proofs(["intro h₀ h₁", "subst h₀", "subst h₁", "norm_num"],
                                       ["intro h₀ h₁", "rw [h₀, h₁]", "norm_num"]))


def arith_pair(dice: Dice) -> Instance:
    a, b, c = dice.randint(2, 30), dice.randint(2, 30), dice.randint(1, 50)
    m = dice.randint(3, 11)
    d = dice.randint(10, 99)
    statement = f"{a} * {b} + {c} = {a * b + c} ∧ {d} % {m} = {d % m}"
    return Instance(statement, _proofs(["constructor", "norm_num", "norm_num"], ["constructor", "rfl", "rfl"]))


def sq_ineq(dice: Dice) -> Instance:
    a, b = dice.choice(REAL_PAIRS)
    k = dice.randint(0, 30)
    statement = f"∀ ({a} {b} : ℝ), 0 ≤ {k} → 2 * {a} * {b} ≤ {a} ^ 2 + {b} ^ 2 + {k}"
    return Instance(statement, _proofs(["intro h₀", f"nlinarith [sq_nonneg ({a} - {b})]"]))


def _props(dice: Dice, low: int, high: int) -> list[str]:
    return list(dice.choice(PROP_NAMES)[: dice.randint(low, high)])


def _conj(parts: list[str]) -> str:
    return " ∧ ".join(parts)


def _binders(props: list[str]) -> str:
    return f"({' '.join(props)} : Prop)"


def _build_conj(names: list[str]) -> list[str]:
    """`constructor` / `exact` steps proving a right-nested conjunction from hypotheses `names`."""
    steps: list[str] = []
    for name in names[:-1]:
        steps += ["constructor", f"exact {name}"]
    return [*steps, f"exact {names[-1]}"]


def _reach_disjunct(position: int, length: int, hyp: str) -> list[str]:
    """`right`/`left` steps into disjunct `position` of a right-nested disjunction of `length`, then `exact`."""
    steps = ["right"] * position
    if position < length - 1:
        steps.append("left")
    return [*steps, f"exact {hyp}"]


def and_comm(dice: Dice) -> Instance:
    props = _props(dice, 2, 4)
    picked = dice.sample(props, 2)
    hyps = [f"h{SUBSCRIPTS[i]}" for i in range(len(props))]
    pattern = ", ".join(hyps)
    chosen = [hyps[props.index(p)] for p in picked]
    statement = f"∀ {_binders(props)}, {_conj(props)} → {_conj(picked)}"
    return Instance(statement, _proofs(["intro h", f"obtain ⟨{pattern}⟩ := h", f"exact ⟨{', '.join(chosen)}⟩"],
                                       ["intro h", f"obtain ⟨{pattern}⟩ := h", *_build_conj(chosen)]))


def or_comm(dice: Dice) -> Instance:
    props = _props(dice, 2, 4)
    p, q = props[0], props[1]
    conclusion = dice.shuffle(props) if len(props) > 2 else [q, p]
    statement = f"∀ {_binders(props)}, {p} ∨ {q} → {' ∨ '.join(conclusion)}"
    proof = ["intro h", "rcases h with h₀ | h₀",
             *_reach_disjunct(conclusion.index(p), len(conclusion), "h₀"),
             *_reach_disjunct(conclusion.index(q), len(conclusion), "h₀")]
    return Instance(statement, _proofs(proof))


def and_intro(dice: Dice) -> Instance:
    props = _props(dice, 2, 4)
    hyps = [f"h{SUBSCRIPTS[i]}" for i in range(len(props))]
    picked = dice.sample(range(len(props)), dice.randint(2, len(props)))
    statement = f"∀ {_binders(props)}, {' → '.join(props)} → {_conj([props[i] for i in picked])}"
    names = [hyps[i] for i in picked]
    return Instance(statement, _proofs([f"intro {' '.join(hyps)}", *_build_conj(names)],
                                       [f"intro {' '.join(hyps)}", f"exact ⟨{', '.join(names)}⟩"]))


def imp_chain(dice: Dice) -> Instance:
    props = _props(dice, 3, 5)
    links = [(props[i], props[i + 1]) for i in range(len(props) - 1)]
    order = dice.shuffle(range(len(links)))
    premises = [f"({links[i][0]} → {links[i][1]})" for i in order]
    statement = f"∀ {_binders(props)}, {' → '.join(premises)} → {props[0]} → {props[-1]}"
    hyps = [f"h{SUBSCRIPTS[i]}" for i in range(len(links) + 1)]
    by_link = {link: hyps[position] for position, link in enumerate(order)}
    applies = [f"apply {by_link[i]}" for i in reversed(range(len(links)))]
    term = hyps[-1]
    for i in range(len(links)):
        term = f"{by_link[i]} {term}" if i == 0 else f"{by_link[i]} ({term})"
    return Instance(statement, _proofs([f"intro {' '.join(hyps)}", *applies, f"exact {hyps[-1]}"],
                                       [f"intro {' '.join(hyps)}", f"exact {term}"]))


def set_inter(dice: Dice) -> Instance:
    names = list(dice.choice(SET_TRIPLES)[: dice.randint(2, 3)])
    ty = dice.choice(["ℕ", "ℤ"])
    paths = {2: [".1", ".2"], 3: [".1.1", ".1.2", ".2"]}[len(names)]
    index = dice.randint(0, len(names) - 1)
    statement = (f"∀ ({' '.join(names)} : Set {ty}) (x : {ty}), x ∈ {' ∩ '.join(names)} → "
                 f"x ∈ {names[index]}")
    return Instance(statement, _proofs(["intro h", f"exact h{paths[index]}"]))


def set_union(dice: Dice) -> Instance:
    names = list(dice.choice(SET_TRIPLES)[: dice.randint(2, 3)])
    ty = dice.choice(["ℕ", "ℤ"])
    steps = {2: [["left"], ["right"]], 3: [["left", "left"], ["left", "right"], ["right"]]}[len(names)]
    index = dice.randint(0, len(names) - 1)
    statement = (f"∀ ({' '.join(names)} : Set {ty}) (x : {ty}), x ∈ {names[index]} → "
                 f"x ∈ {' ∪ '.join(names)}")
    return Instance(statement, _proofs(["intro h", *steps[index], "exact h"]))


def exists_lin(dice: Dice) -> Instance:
    x = dice.choice(REALS)
    coef, value = dice.randint(2, 9), dice.randint(-6, 12)
    statement = f"∃ {x} : ℝ, {_linear(dice, x, coef, value)}"
    return Instance(statement, _proofs([f"use {lit(value)}", "norm_num"]))


def pos_mul(dice: Dice) -> Instance:
    x, y = dice.choice(REAL_PAIRS)
    k = dice.randint(1, 9)
    target = dice.choice([f"0 < {x} * {y} + {k}", f"0 < {k} * {x} + {y}", f"0 < {x} * {y} * {k}"])
    statement = f"∀ ({x} {y} : ℝ), 0 < {x} → 0 < {y} → {target}"
    return Instance(statement, _proofs(["intro h₀ h₁", "positivity"]))


def mod_add(dice: Dice) -> Instance:
    n = dice.choice(NATS)
    m = dice.randint(2, 9)
    r, j = dice.randint(0, m - 1), dice.randint(1, 5)
    statement = f"∀ ({n} : ℕ), {n} % {m} = {r} → ({n} + {j * m}) % {m} = {r}"
    return Instance(statement, _proofs(["intro h₀", "omega"]))


def dvd_add(dice: Dice) -> Instance:
    n = dice.choice(NATS)
    k, c = dice.randint(2, 9), dice.randint(1, 6)
    statement = f"∀ ({n} : ℕ), {k} ∣ {n} → {k} ∣ {n} + {c * k}"
    return Instance(statement, _proofs(["intro h₀", "omega"]))


def lt_chain(dice: Dice) -> Instance:
    x, y = dice.choice(REAL_PAIRS)
    z = "z"
    a = dice.randint(0, 6)
    b = a + dice.randint(0, 4)
    statement = f"∀ ({x} {y} {z} : ℝ), {x} < {y} → {y} < {z} + {a} → {x} < {z} + {b}"
    return Instance(statement, _proofs(["intro h₀ h₁", "linarith"]))


def or_roots(dice: Dice) -> Instance:
    x = dice.choice(REALS)
    a = dice.randint(-5, 6)
    b = a + dice.randint(1, 5)
    statement = (f"∀ ({x} : ℝ), {x} = {lit(a)} ∨ {x} = {lit(b)} → "
                 f"{x} ^ 2 - {lit(a + b)} * {x} + {lit(a * b)} = 0")
    return Instance(statement, _proofs(["intro h", "rcases h with h₀ | h₀", "subst h₀", "norm_num", "subst h₀",
                                        "norm_num"],
                                       ["intro h", "rcases h with h₀ | h₀", "rw [h₀]", "norm_num", "rw [h₀]",
                                        "norm_num"]))


def not_lt(dice: Dice) -> Instance:
    x = dice.choice(REALS)
    a = dice.randint(-5, 9)
    b = a - dice.randint(0, 4)
    statement = f"∀ ({x} : ℝ), {lit(a)} < {x} → ¬{x} < {lit(b)}"
    return Instance(statement, _proofs(["intro h₀ h₁", "linarith"]))


def sq_pos(dice: Dice) -> Instance:
    x = dice.choice(REALS)
    k = dice.randint(1, 30)
    statement = f"∀ ({x} : ℝ), 0 < {x} → 0 < {x} ^ 2 + {k} * {x}"
    return Instance(statement, _proofs(["intro h₀", "positivity"], ["intro h₀", "nlinarith [h₀]"]))


def iff_lin(dice: Dice) -> Instance:
    x = dice.choice(REALS)
    coef, value = dice.randint(2, 9), dice.randint(-6, 12)
    statement = f"∀ ({x} : ℝ), {_linear(dice, x, coef, value)} ↔ {x} = {lit(value)}"
    return Instance(statement, _proofs(["constructor", "intro h₀", "linarith", "intro h₀", "linarith"]))


def and_elim_lin(dice: Dice) -> Instance:
    x, y = dice.choice(REAL_PAIRS)
    a, b = dice.randint(-5, 9), dice.randint(-5, 9)
    statement = f"∀ ({x} {y} : ℝ), {x} = {lit(a)} ∧ {y} = {lit(b)} → {x} + {y} = {lit(a + b)}"
    return Instance(statement, _proofs(["intro h", "obtain ⟨h₀, h₁⟩ := h", "linarith"]))


def or_bound(dice: Dice) -> Instance:
    x = dice.choice(REALS)
    a = dice.randint(-5, 6)
    b = a + dice.randint(1, 5)
    m = b + dice.randint(0, 3)
    statement = f"∀ ({x} : ℝ), {x} = {lit(a)} ∨ {x} = {lit(b)} → {x} ≤ {lit(m)}"
    return Instance(statement, _proofs(["intro h", "rcases h with h₀ | h₀", "linarith", "linarith"]))


def nat_bound(dice: Dice) -> Instance:
    n = dice.choice(NATS)
    a, k = dice.randint(2, 12), dice.randint(2, 7)
    c = k * (a - 1) + dice.randint(1, 5)
    statement = f"∀ ({n} : ℕ), {n} < {a} → {k} * {n} < {c}"
    return Instance(statement, _proofs(["intro h₀", "omega"]))


def exists_nat(dice: Dice) -> Instance:
    n = dice.choice(NATS)
    coef, value, b = dice.randint(2, 9), dice.randint(1, 15), dice.randint(1, 20)
    statement = f"∃ {n} : ℕ, {coef} * {n} + {b} = {coef * value + b}"
    return Instance(statement, _proofs([f"refine ⟨{value}, ?_⟩", "norm_num"]))


# ------------------------------------------------------------------------------------------------ held out


def lin_sys3(dice: Dice) -> Instance:
    x, y, s, t, e1, e2 = _system(dice)
    statement = f"∀ ({x} {y} : ℝ), {e1} → {e2} → {x} = {lit(s)} ∧ {y} = {lit(t)} ∧ {x} + {y} = {lit(s + t)}"
    return Instance(statement, _proofs(["intro h₀ h₁", "constructor", "linarith", "constructor", "linarith",
                                        "linarith"]))


def and_sys(dice: Dice) -> Instance:
    x, y, s, t, e1, e2 = _system(dice)
    target = dice.choice([f"{x} = {lit(s)}", f"{y} = {lit(t)}"])
    statement = f"∀ ({x} {y} : ℝ), {e1} ∧ {e2} → {target}"
    return Instance(statement, _proofs(["intro h", "obtain ⟨h₀, h₁⟩ := h", "linarith"]))


def or_nat_mod(dice: Dice) -> Instance:
    n = dice.choice(NATS)
    m = dice.randint(2, 5)
    a = dice.randint(0, 12)
    b = a + m * dice.randint(1, 4)
    statement = f"∀ ({n} : ℕ), {n} = {a} ∨ {n} = {b} → {n} % {m} = {a % m}"
    return Instance(statement, _proofs(["intro h", "rcases h with h₀ | h₀", "subst h₀", "norm_num", "subst h₀",
                                        "norm_num"],
                                       ["intro h", "rcases h with h₀ | h₀", "omega", "omega"]))


def exists_pos(dice: Dice) -> Instance:
    x = dice.choice(REALS)
    coef, value = dice.randint(2, 9), dice.randint(1, 12)
    statement = f"∃ {x} : ℝ, 0 < {x} ∧ {_linear(dice, x, coef, value)}"
    return Instance(statement, _proofs([f"use {value}", "constructor", "norm_num", "norm_num"]))


def inter_union(dice: Dice) -> Instance:
    a, b, c = dice.choice(SET_TRIPLES)
    ty = dice.choice(["ℕ", "ℤ"])
    statement = f"∀ ({a} {b} {c} : Set {ty}) (x : {ty}), x ∈ {a} ∩ {b} → x ∈ {a} ∪ {c}"
    return Instance(statement, _proofs(["intro h", "left", "exact h.1"]))


def and_or(dice: Dice) -> Instance:
    props = _props(dice, 3, 4)
    known = props[: dice.randint(2, len(props) - 1)]
    hyps = [f"h{SUBSCRIPTS[i]}" for i in range(len(known))]
    pick = dice.randint(0, len(known) - 1)
    others = [p for p in props if p not in known]
    conclusion = dice.shuffle([known[pick], *others])
    statement = f"∀ {_binders(props)}, {_conj(known)} → {' ∨ '.join(conclusion)}"
    reach = _reach_disjunct(conclusion.index(known[pick]), len(conclusion), hyps[pick])
    return Instance(statement, _proofs(["intro h", f"obtain ⟨{', '.join(hyps)}⟩ := h", *reach]))


def or_interval(dice: Dice) -> Instance:
    x = dice.choice(REALS)
    a = dice.randint(-5, 6)
    b = a + dice.randint(1, 5)
    statement = f"∀ ({x} : ℝ), {x} = {lit(a)} ∨ {x} = {lit(b)} → {lit(a)} ≤ {x} ∧ {x} ≤ {lit(b)}"
    return Instance(statement, _proofs(["intro h", "rcases h with h₀ | h₀", "constructor", "linarith", "linarith",
                                        "constructor", "linarith", "linarith"]))


def iff_nat(dice: Dice) -> Instance:
    n = dice.choice(NATS)
    coef, value, b = dice.randint(2, 9), dice.randint(1, 15), dice.randint(1, 20)
    statement = f"∀ ({n} : ℕ), {coef} * {n} + {b} = {coef * value + b} ↔ {n} = {value}"
    return Instance(statement, _proofs(["constructor", "intro h₀", "omega", "intro h₀", "omega"]))


def pos_and(dice: Dice) -> Instance:
    x, y = dice.choice(REAL_PAIRS)
    k = dice.randint(1, 9)
    statement = f"∀ ({x} {y} : ℝ), 0 < {x} → 0 < {y} → 0 < {x} * {y} ∧ 0 < {x} + {k} * {y}"
    return Instance(statement, _proofs(["intro h₀ h₁", "constructor", "positivity", "positivity"]))


def sub_lt(dice: Dice) -> Instance:
    x, y = dice.choice(REAL_PAIRS)
    a, b = dice.randint(-4, 9), dice.randint(-4, 9)
    c = a * b + dice.randint(1, 9)
    statement = f"∀ ({x} {y} : ℝ), {x} = {lit(a)} → {y} = {lit(b)} → {x} * {y} < {lit(c)}"
    return Instance(statement, _proofs(["intro h₀ h₁", "subst h₀", "subst h₁", "norm_num"],
                                       ["intro h₀ h₁", "rw [h₀, h₁]", "norm_num"]))


def mod_dvd(dice: Dice) -> Instance:
    n = dice.choice(NATS)
    m = dice.randint(2, 9)
    r, j = dice.randint(0, m - 1), dice.randint(1, 5)
    k = dice.randint(2, 7)
    statement = f"∀ ({n} : ℕ), {n} % {m} = {r} → {k} ∣ {n} → ({n} + {j * m}) % {m} = {r} ∧ {k} ∣ {n} + {k}"
    return Instance(statement, _proofs(["intro h₀ h₁", "constructor", "omega", "omega"]))


def exists_nat_mod(dice: Dice) -> Instance:
    n = dice.choice(NATS)
    m = dice.randint(3, 9)
    r = dice.randint(0, m - 1)
    d = dice.randint(5, 30)
    value = d + 1 + (r - d - 1) % m
    statement = f"∃ {n} : ℕ, {n} % {m} = {r} ∧ {d} < {n}"
    return Instance(statement, _proofs([f"refine ⟨{value}, ?_, ?_⟩", "norm_num", "norm_num"],
                                       [f"use {value}", "constructor", "norm_num", "norm_num"]))


def imp_and(dice: Dice) -> Instance:
    props = _props(dice, 3, 4)
    source, targets = props[0], dice.shuffle(props[1:])
    premises = [f"({source} → {target})" for target in props[1:]]
    hyps = [f"h{SUBSCRIPTS[i]}" for i in range(len(premises) + 1)]
    statement = f"∀ {_binders(props)}, {' → '.join(premises)} → {source} → {_conj(targets)}"
    terms = [f"{hyps[props.index(target) - 1]} {hyps[-1]}" for target in targets]
    return Instance(statement, _proofs([f"intro {' '.join(hyps)}", *_build_conj(terms)]))


def or_lin(dice: Dice) -> Instance:
    x = dice.choice(REALS)
    coef, value = dice.randint(2, 9), dice.randint(-6, 12)
    statement = f"∀ ({x} : ℝ), {_linear(dice, x, coef, value)} ∨ {x} = {lit(value)} → {x} = {lit(value)}"
    return Instance(statement, _proofs(["intro h", "rcases h with h₀ | h₀", "linarith", "exact h₀"]))


def sys_ne(dice: Dice) -> Instance:
    x, y, s, _, e1, e2 = _system(dice)
    other = s + dice.choice([-2, -1, 1, 2])
    statement = f"∀ ({x} {y} : ℝ), {e1} → {e2} → {x} ≠ {lit(other)}"
    return Instance(statement, _proofs(["intro h₀ h₁ h₂", "linarith"]))


def sq_and(dice: Dice) -> Instance:
    a, b = dice.choice(REAL_PAIRS)
    k = dice.randint(1, 9)
    statement = f"∀ ({a} {b} : ℝ), 0 ≤ {k} → 2 * {a} * {b} ≤ {a} ^ 2 + {b} ^ 2 + {k} ∧ 0 < {a} ^ 2 + {k}"
    return Instance(statement, _proofs(["intro h₀", "constructor", f"nlinarith [sq_nonneg ({a} - {b})]",
                                        "positivity"]))


def dvd_and(dice: Dice) -> Instance:
    n = dice.choice(NATS)
    k, c, d = dice.randint(2, 9), dice.randint(1, 6), dice.randint(1, 6)
    statement = f"∀ ({n} : ℕ), {k} ∣ {n} → {k} ∣ {n} + {c * k} ∧ {k} ∣ {n} + {d * k}"
    return Instance(statement, _proofs(["intro h₀", "constructor", "omega", "omega"]))


def set_and(dice: Dice) -> Instance:
    names = list(dice.choice(SET_TRIPLES)[: dice.randint(2, 3)])
    ty = dice.choice(["ℕ", "ℤ"])
    hyps = [f"h{SUBSCRIPTS[i]}" for i in range(len(names))]
    premises = " → ".join(f"x ∈ {name}" for name in names)
    statement = f"∀ ({' '.join(names)} : Set {ty}) (x : {ty}), {premises} → x ∈ {' ∩ '.join(names)}"
    if len(names) == 2:
        steps = ["constructor", "exact h₀", "exact h₁"]
    else:
        steps = ["constructor", "constructor", "exact h₀", "exact h₁", "exact h₂"]
    return Instance(statement, _proofs([f"intro {' '.join(hyps)}", *steps]))


def chain_sub(dice: Dice) -> Instance:
    x, y = dice.choice(REAL_PAIRS)
    a, k = dice.randint(-4, 9), dice.randint(1, 6)
    statement = (f"∀ ({x} {y} : ℝ), {x} = {lit(a)} → {y} = {x} + {k} → "
                 f"{y} = {lit(a + k)} ∧ {x} + {y} = {lit(2 * a + k)}")
    return Instance(statement, _proofs(["intro h₀ h₁", "constructor", "linarith", "linarith"],
                                       ["intro h₀ h₁", "subst h₀", "subst h₁", "constructor", "norm_num",
                                        "norm_num"]))


# ------------------------------------------------------------------------------------------------ traps


def trap_lin(dice: Dice) -> Instance:
    x = dice.choice(REALS)
    coef, value = dice.randint(2, 9), dice.randint(-6, 12)
    wrong = value + dice.choice([-1, 1])
    statement = f"∀ ({x} : ℝ), {_linear(dice, x, coef, value)} → {x} = {lit(wrong)}"
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


def _t(build: Callable[[Dice], Instance], topic: Topic, role: Role) -> Template:
    return Template(build.__name__, topic, role, build)


TEMPLATES: tuple[Template, ...] = (
    _t(lin_eq, "algebra", "taught"),
    _t(nat_lin, "number_theory", "taught"),
    _t(lin_sum, "algebra", "taught"),
    _t(lin_sys, "algebra", "taught"),
    _t(sub_chain, "algebra", "taught"),
    _t(arith_pair, "number_theory", "taught"),
    _t(sq_ineq, "inequality", "taught"),
    _t(and_comm, "logic", "taught"),
    _t(or_comm, "logic", "taught"),
    _t(and_intro, "logic", "taught"),
    _t(imp_chain, "logic", "taught"),
    _t(set_inter, "sets", "taught"),
    _t(set_union, "sets", "taught"),
    _t(exists_lin, "algebra", "taught"),
    _t(pos_mul, "inequality", "taught"),
    _t(mod_add, "number_theory", "taught"),
    _t(dvd_add, "number_theory", "taught"),
    _t(lt_chain, "inequality", "taught"),
    _t(or_roots, "algebra", "taught"),
    _t(not_lt, "inequality", "taught"),
    _t(sq_pos, "inequality", "taught"),
    _t(iff_lin, "algebra", "taught"),
    _t(and_elim_lin, "algebra", "taught"),
    _t(or_bound, "inequality", "taught"),
    _t(nat_bound, "number_theory", "taught"),
    _t(exists_nat, "number_theory", "taught"),
    _t(lin_sys3, "algebra", "held_out"),
    _t(and_sys, "algebra", "held_out"),
    _t(or_nat_mod, "number_theory", "held_out"),
    _t(exists_pos, "algebra", "held_out"),
    _t(inter_union, "sets", "held_out"),
    _t(and_or, "logic", "held_out"),
    _t(or_interval, "inequality", "held_out"),
    _t(iff_nat, "number_theory", "held_out"),
    _t(pos_and, "inequality", "held_out"),
    _t(sub_lt, "algebra", "held_out"),
    _t(mod_dvd, "number_theory", "held_out"),
    _t(exists_nat_mod, "number_theory", "held_out"),
    _t(imp_and, "logic", "held_out"),
    _t(or_lin, "algebra", "held_out"),
    _t(sys_ne, "algebra", "held_out"),
    _t(sq_and, "inequality", "held_out"),
    _t(dvd_and, "number_theory", "held_out"),
    _t(set_and, "sets", "held_out"),
    _t(chain_sub, "algebra", "held_out"),
    _t(trap_lin, "algebra", "trap"),
    _t(trap_or, "logic", "trap"),
    _t(trap_mod, "number_theory", "trap"),
    _t(trap_sq, "inequality", "trap"),
)
