"""The pieces the checked world's templates are made of, and how they combine (`leankit.world.templates`).

    piece = PIECES["lin"](dice, names)               # variables taken from `names` (a `Names`)
    instance = compose(dice, [piece_a, piece_b])     # statement ∀ … , H → H → Ga ∧ Gb and its proofs

A piece is one goal with its own variables, hypotheses and closing tactics. `compose` makes a conjunction over
disjoint variables (`intro h₀ h₁ …`, then `constructor` and each piece's tactics), its hypotheses in an order drawn
per instance. Each piece is closed by a different tactic or choice, so no single decision tactic closes a
conjunction and a renamed proof of one combination proves no other (docs/replay-corpus.md, "The checked world").
Tactic texts name hypotheses through placeholders (`{h0}`, `{h1}`), which `compose` replaces by the names `intro`
gives them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from leankit.world.draft import Dice, context

SUBSCRIPTS = "₀₁₂₃₄₅₆₇₈₉"
REAL_NAMES = ("x", "y", "z", "t", "u", "v", "a", "b", "c", "w")
NAT_NAMES = ("n", "m", "k", "j", "i")
SET_NAMES = ("A", "B", "C", "S", "T", "U")


def lit(value: int) -> str:
    """An integer literal as a statement writes it (negative ones parenthesised)."""
    return str(value) if value >= 0 else f"({value})"


class Names:
    """The variable names of one statement, handed out in a drawn order so that no two pieces share one."""

    def __init__(self, dice: Dice) -> None:
        self._free = {"ℝ": dice.shuffle(REAL_NAMES), "ℕ": dice.shuffle(NAT_NAMES), "Set": dice.shuffle(SET_NAMES)}

    def take(self, kind: str) -> str:
        return self._free[kind].pop(0)


@dataclass(frozen=True, slots=True)
class Piece:
    """One goal with its variables (name, type), hypotheses and closing tactics (placeholders `{h0}`, … name the
    piece's hypotheses in order). `grouped`: the goal must be parenthesised inside a conjunction (∨, ∃)."""

    kind: str
    binders: tuple[tuple[str, str], ...]
    hyps: tuple[str, ...]
    goal: str
    steps: tuple[tuple[str, ...], ...]  # alternative tactic scripts, the first the shortest
    grouped: bool = False


PieceBuilder = Callable[[Dice, Names], Piece]


def linear_equation(dice: Dice, var: str, coef: int, value: int) -> str:
    """`coef * var + b = c` (in one of three shapes) true at var = value."""
    b = dice.randint(1, 20)
    shape = dice.randint(0, 2)
    if shape == 0:
        return f"{coef} * {var} + {b} = {lit(coef * value + b)}"
    if shape == 1:
        return f"{coef} * {var} - {b} = {lit(coef * value - b)}"
    return f"{b} + {coef} * {var} = {lit(coef * value + b)}"


def lin(dice: Dice, names: Names) -> Piece:
    """A linear equation over ℝ solved for its variable: `linarith`."""
    x = names.take("ℝ")
    coef, value = dice.randint(2, 9), dice.randint(-6, 12)
    return Piece("lin", ((x, "ℝ"),), (linear_equation(dice, x, coef, value),), f"{x} = {lit(value)}",
                 (("linarith",), ("nlinarith [{h0}]",)))


def nat_lin(dice: Dice, names: Names) -> Piece:
    """A linear equation over ℕ solved for its variable: `omega`."""
    n = names.take("ℕ")
    coef, value, b = dice.randint(2, 9), dice.randint(1, 15), dice.randint(1, 20)
    lhs = dice.choice([f"{coef} * {n} + {b}", f"{b} + {coef} * {n}", f"{n} * {coef} + {b}"])
    return Piece("nat_lin", ((n, "ℕ"),), (f"{lhs} = {coef * value + b}",), f"{n} = {value}", (("omega",),))


def mod(dice: Dice, names: Names) -> Piece:
    """A remainder kept by adding a multiple of the modulus: `omega`."""
    n = names.take("ℕ")
    m = dice.randint(2, 9)
    r, j = dice.randint(0, m - 1), dice.randint(1, 5)
    return Piece("mod", ((n, "ℕ"),), (f"{n} % {m} = {r}",), f"({n} + {j * m}) % {m} = {r}", (("omega",),))


def dvd(dice: Dice, names: Names) -> Piece:
    """Divisibility kept by adding a multiple: `omega`."""
    n = names.take("ℕ")
    k, c = dice.randint(2, 9), dice.randint(1, 6)
    return Piece("dvd", ((n, "ℕ"),), (f"{k} ∣ {n}",), f"{k} ∣ {n} + {c * k}", (("omega",),))


def pos(dice: Dice, names: Names) -> Piece:
    """A positive non-linear expression in two positive reals: `positivity`."""
    x, y = names.take("ℝ"), names.take("ℝ")
    k = dice.randint(1, 9)
    # non-linear shapes only: a linear one would be `linarith`'s, the lin piece's step
    goal = dice.choice([f"0 < {x} * {y} + {k}", f"0 < {x} ^ 2 + {k} * {y}", f"0 < {x} * {y} * {k}"])
    return Piece("pos", ((x, "ℝ"), (y, "ℝ")), (f"0 < {x}", f"0 < {y}"), goal, (("positivity",),))


def sq(dice: Dice, names: Names) -> Piece:
    """The two-variable AM-GM step from the square it comes from: `nlinarith` with that hypothesis as its hint."""
    a, b = names.take("ℝ"), names.take("ℝ")
    k = dice.randint(0, 30)
    goal = f"2 * {a} * {b} ≤ {a} ^ 2 + {b} ^ 2 + {k}" if k else f"2 * {a} * {b} ≤ {a} ^ 2 + {b} ^ 2"
    return Piece("sq", ((a, "ℝ"), (b, "ℝ")), (f"0 ≤ ({a} - {b}) ^ 2",), goal, (("nlinarith [{h0}]",),))


def side(dice: Dice, names: Names) -> Piece:
    """A disjunction of two bounds of which one holds: `left` or `right`, then `linarith`."""
    x = names.take("ℝ")
    coef, value = dice.randint(2, 9), dice.randint(-6, 12)
    low, high = value - dice.randint(1, 6), value + dice.randint(1, 6)
    true_bound, false_bound = f"{x} < {lit(high)}", f"{x} < {lit(low)}"
    if dice.randint(0, 1) == 0:
        true_bound, false_bound = f"{lit(low)} < {x}", f"{lit(high)} < {x}"
    left = dice.randint(0, 1) == 0
    goal = f"{true_bound} ∨ {false_bound}" if left else f"{false_bound} ∨ {true_bound}"
    return Piece("side", ((x, "ℝ"),), (linear_equation(dice, x, coef, value),), goal,
                 (("left" if left else "right", "linarith"),), grouped=True)


def member(dice: Dice, names: Names) -> Piece:
    """Membership in a union of two or three sets from membership in one of them (or in its intersection with
    another set): `left`/`right` down to that set, then `exact` the hypothesis (or its component)."""
    kind = dice.choice(["ℕ", "ℤ"])
    hyp_shape = dice.randint(0, 2)  # y ∈ A, y ∈ A ∩ D, y ∈ D ∩ A (with an intersection, a union of two sets)
    sets = [names.take("Set") for _ in range(dice.randint(2, 3 if hyp_shape == 0 else 2))]
    y = names.take(kind if kind == "ℕ" else "ℝ")
    target = dice.randint(0, len(sets) - 1)
    home = sets[target]
    # `A ∪ B ∪ C` is `(A ∪ B) ∪ C`: reaching set i of n takes `right` for the last, else `left` then the rest
    path: list[str] = []
    size = len(sets)
    while size > 1:
        if target == size - 1:
            path.append("right")
            break
        path.append("left")
        size -= 1
    binders = [(name, f"Set {kind}") for name in sets]
    if hyp_shape == 0:
        hyp, use = f"{y} ∈ {home}", "exact {h0}"
    else:
        other = names.take("Set")
        binders.append((other, f"Set {kind}"))
        hyp, use = ((f"{y} ∈ {home} ∩ {other}", "exact {h0}.1") if hyp_shape == 1
                    else (f"{y} ∈ {other} ∩ {home}", "exact {h0}.2"))
    return Piece("member", (*binders, (y, kind)), (hyp,), f"{y} ∈ {' ∪ '.join(sets)}", ((*path, use),))


def witness(dice: Dice, names: Names) -> Piece:
    """An existential whose witness is the operation's neutral element: `use 0` for a sum, `use 1` for a product,
    then `ring`."""
    x, y = names.take("ℝ"), names.take("ℝ")
    c = dice.randint(2, 9)
    term = dice.choice([x, f"({x} + {c})", f"({x} - {c})", f"{c} * {x}"])
    op, unit = dice.choice([("+", 0), ("*", 1)])
    if op == "+" and term.startswith("("):
        term = term[1:-1]
    value = term[1:-1] if term.startswith("(") else term
    goal = dice.choice([f"∃ {y} : ℝ, {term} {op} {y} = {value}", f"∃ {y} : ℝ, {y} {op} {term} = {value}"])
    return Piece("witness", ((x, "ℝ"),), (), goal, ((f"use {unit}", "ring"),), grouped=True)


def sub(dice: Dice, names: Names) -> Piece:
    """A polynomial evaluated at given values: `subst` both hypotheses (or `rw`), then `norm_num`."""
    x, y = names.take("ℝ"), names.take("ℝ")
    a, b, k = dice.randint(-4, 9), dice.randint(-4, 9), dice.randint(1, 9)
    shape = dice.randint(0, 2)
    if shape == 0:
        lhs, value = f"{x} * {y} + {k}", a * b + k
    elif shape == 1:
        lhs, value = f"{k} * {x} + {y}", k * a + b
    else:
        lhs, value = f"{x} ^ 2 + {y}", a * a + b
    return Piece("sub", ((x, "ℝ"), (y, "ℝ")), (f"{x} = {lit(a)}", f"{y} = {lit(b)}"), f"{lhs} = {lit(value)}",
                 (("subst {h0}", "subst {h1}", "norm_num"), ("rw [{h0}, {h1}]", "norm_num")))


PIECES: dict[str, PieceBuilder] = {builder.__name__: builder for builder in
                                   (lin, nat_lin, mod, dvd, pos, sq, side, member, witness, sub)}


@dataclass(frozen=True, slots=True)
class Composed:
    """A statement made of pieces and its proofs from the binder-form start."""

    statement: str
    proofs: tuple[tuple[str, ...], ...]


def _binder_text(binders: list[tuple[str, str]]) -> str:
    """`(x y : ℝ) (n : ℕ)`: consecutive binders of one type grouped, as Lean prints them (the grouping of
    `draft.context`'s hypothesis lines)."""
    return " ".join(f"({line})" for line in context(*binders))


def compose(dice: Dice, pieces: list[Piece], *, shuffle_hyps: bool = True) -> Composed:
    """`∀ binders, H → … → G₁ ∧ G₂ ∧ …` over the pieces' variables, their hypotheses in a drawn order (the order
    of the pieces with `shuffle_hyps` off), and its proofs: `intro h₀ …`, then for each piece but the last
    `constructor` and the piece's tactics, then the last piece's. One proof per combination of the pieces'
    alternative scripts, the shortest first (at most 4)."""
    owned = [(index, k) for index, piece in enumerate(pieces) for k in range(len(piece.hyps))]
    order = dice.shuffle(owned) if shuffle_hyps else owned
    names = {key: f"h{SUBSCRIPTS[position]}" for position, key in enumerate(order)}
    binders = [binder for piece in pieces for binder in piece.binders]
    goals = [f"({piece.goal})" if piece.grouped and len(pieces) > 1 else piece.goal for piece in pieces]
    premises = "".join(f"{pieces[index].hyps[k]} → " for index, k in order)
    statement = f"∀ {_binder_text(binders)}, {premises}{' ∧ '.join(goals)}"
    intro = [f"intro {' '.join(f'h{SUBSCRIPTS[k]}' for k in range(len(order)))}"] if order else []
    proofs: list[tuple[str, ...]] = [()]
    for index, piece in enumerate(pieces):
        local = {f"h{k}": names[(index, k)] for k in range(len(piece.hyps))}
        lead = ["constructor"] if index < len(pieces) - 1 else []
        proofs = [(*proof, *lead, *(step.format(**local) for step in steps))
                  for proof in proofs for steps in piece.steps]
    proofs.sort(key=len)
    return Composed(statement, tuple((*intro, *proof) for proof in proofs[:4]))
