"""Lean 4 expressions of minilean's fragment: the AST and Lean's pretty printer (`minilean.parser` reads text
into it).

    expr = parse("∀ (x : ℝ), 2 * x + 3 = 11 → x = 4")
    pp(expr)                                  # "∀ (x : ℝ), 2 * x + 3 = 11 → x = 4"

The printer parenthesises by Lean 4's notation table, the parser's (precedences from `Init/Core.lean`,
`Init/Prelude.lean` and Mathlib's set notation), so `pp(parse(pp(e))) == pp(e)`. Numerals are `Num` and Lean's
scientific literals `Sci`; a `by tac` block is kept as text in a `By` node.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

# ---------------------------------------------------------------------------------------------------
# The AST. Frozen dataclasses: structural equality is syntactic equality (bound names included).


@dataclass(frozen=True, slots=True)
class Var:
    name: str


@dataclass(frozen=True, slots=True)
class Num:
    value: int


@dataclass(frozen=True, slots=True)
class Sci:
    """A scientific literal (`2.5`, `0.25`, `1e3`, `1.5e-2`), kept as Lean keeps it: `OfScientific.ofScientific
    mantissa negative exponent`, worth `mantissa * 10 ^ -exponent` if `negative` else `mantissa * 10 ^ exponent`
    (`2.5` is `(25, True, 1)`, `1e3` `(1, False, 3)`; `Lean.Syntax.decodeScientificLitVal?`). `2.5` and `2.50` are
    two terms, as in Lean. Its value is exact (`value()`), as Mathlib's `OfScientific` on ℚ/ℝ is."""

    mantissa: int
    negative: bool
    exponent: int

    def value(self) -> Fraction:
        """The exact rational; ValueError when the power of ten is too large to compute in a reply's time."""
        if self.exponent > MAX_SCIENTIFIC_EXPONENT:
            raise ValueError(f"10 ^ {self.exponent} is over minilean's limit of 10 ^ {MAX_SCIENTIFIC_EXPONENT}")
        scale = 10 ** self.exponent
        return Fraction(self.mantissa, scale) if self.negative else Fraction(self.mantissa * scale)


# The largest power of ten a scientific literal's value is computed with (`1e4096`); a larger one stays a symbol
# (no tactic evaluates it), so a reply stays fast, as `minilean.arith` keeps huge powers symbolic.
MAX_SCIENTIFIC_EXPONENT = 4096


def scientific(text: str) -> Sci:
    """The literal `text` (Lean's `scientificLit` token: digits, then `.` and optional digits and/or `e`/`E`, an
    optional sign and digits) as Lean decodes it."""
    match = _SCIENTIFIC.fullmatch(text)
    if match is None:
        raise ValueError(f"not a scientific literal: {text!r}")
    whole, fraction, sign, power = match.group("whole", "fraction", "sign", "power")
    digits = fraction or ""
    mantissa, shift = int(whole + digits), len(digits)
    if power is None:
        return Sci(mantissa, True, shift)  # `2.5`, and `2.` (Lean's `(2, true, 0)`)
    exponent = int(power)
    if sign == "-":
        return Sci(mantissa, True, exponent + shift)
    if exponent >= shift:
        return Sci(mantissa, False, exponent - shift)
    return Sci(mantissa, True, shift - exponent)


_SCIENTIFIC = re.compile(r"(?P<whole>[0-9]+)(?=[.eE])(?:\.(?P<fraction>[0-9]*))?"
                         r"(?:[eE](?P<sign>[-+]?)(?P<power>[0-9]+))?")


def pp_scientific(sci: Sci) -> str:
    """Lean's delaborator (`delabOfScientific`): the point inside the mantissa's digits, else `0.` before them,
    else the exponent written out (`2.5`, `0.25`, `1e3`, `15e-4` for `(15, True, 4)`)."""
    digits = str(sci.mantissa)
    if sci.negative and sci.exponent == len(digits):
        return f"0.{digits}"
    if sci.negative and sci.exponent < len(digits):
        return f"{digits[:len(digits) - sci.exponent]}.{digits[len(digits) - sci.exponent:]}"
    return f"{digits}e{'-' if sci.negative else ''}{sci.exponent}"


@dataclass(frozen=True, slots=True)
class Op:
    """A binary or unary operator: `+ - * / % ^ = ≠ < > ≤ ≥ ∣ ∈ ∉ ⊆ ∩ ∪ \\ ∧ ∨ → ↔`, `neg`, `¬`, `abs`."""

    op: str
    args: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class App:
    fn: Expr
    args: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Binder:
    """`∀ (name : ty), body`, `∃ name, body`, `fun name => body`, `{name | body}` (kind `setOf`)."""

    kind: str
    name: str
    ty: Expr | None
    body: Expr


@dataclass(frozen=True, slots=True)
class Anon:
    """The anonymous constructor `⟨a, b, …⟩`."""

    args: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Proj:
    """`e.1`, `e.2`, `(h x).left`: a projection or generalized field notation on a non-identifier."""

    expr: Expr
    field: str


@dataclass(frozen=True, slots=True)
class Ascr:
    """`(e : T)`."""

    expr: Expr
    ty: Expr


@dataclass(frozen=True, slots=True)
class SetLit:
    """`{a, b, c}` (a finite set) or `∅` (no elements)."""

    elems: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Hole:
    """`_` or `?_`."""

    name: str


@dataclass(frozen=True, slots=True)
class By:
    """`by tac` inside a term: the tactic text, run when the term is elaborated."""

    text: str


Expr = Var | Num | Sci | Op | App | Binder | Anon | Proj | Ascr | SetLit | Hole | By

ARITH_OPS = ("+", "-", "*", "/", "%", "^")
REL_OPS = ("=", "≠", "<", ">", "≤", "≥", "∣", "∈", "∉", "⊆")
SET_OPS = ("∩", "∪", "\\")
LOGIC_OPS = ("∧", "∨", "→", "↔")

TRUE = Var("True")
FALSE = Var("False")
PROP = Var("Prop")
# `decl_name%`: the name of the declaration being elaborated, which elaboration writes in as a name literal.
DECL_NAME = Var("decl_name%")


def is_name_literal(expr: Expr) -> bool:
    """`` `foo ``: Lean's quoted name, a value of type `Lean.Name` (the name after the backquote)."""
    return isinstance(expr, Var) and expr.name.startswith("`")


# ---------------------------------------------------------------------------------------------------
# Pretty printing, as Lean's delaborator prints these expressions (pp.numericTypes off, binder groups,
# binder predicates for `∈`, proofs of props elided in binders as `→`).

_INFIX: dict[str, tuple[int, str]] = {
    "↔": (20, "none"), "→": (25, "right"), "∨": (30, "right"), "∧": (35, "right"),
    "=": (50, "none"), "==": (50, "none"), "≠": (50, "none"), "<": (50, "none"), ">": (50, "none"), "≤": (50, "none"),
    "≥": (50, "none"), "∣": (50, "none"), "∈": (50, "none"), "∉": (50, "none"), "⊆": (50, "none"),
    "+": (65, "left"), "-": (65, "left"), "∪": (65, "left"),
    "*": (70, "left"), "/": (70, "left"), "%": (70, "left"), "∩": (70, "left"), "\\": (70, "left"),
    "^": (75, "right"),
}
MAX_PREC = 1024


def free_vars(expr: Expr) -> frozenset[str]:
    """Names occurring free in `expr`."""
    if isinstance(expr, Var):
        return frozenset() if expr.name in _CONSTANTS or is_name_literal(expr) else frozenset((expr.name,))
    if isinstance(expr, Binder):
        inner = free_vars(expr.body) - {expr.name}
        return inner | (free_vars(expr.ty) if expr.ty is not None else frozenset())
    if isinstance(expr, (Op, Anon, SetLit)):
        parts = expr.args if not isinstance(expr, SetLit) else expr.elems
        return frozenset().union(*(free_vars(a) for a in parts))
    if isinstance(expr, App):
        return free_vars(expr.fn).union(*(free_vars(a) for a in expr.args))
    if isinstance(expr, Proj):
        return free_vars(expr.expr)
    if isinstance(expr, Ascr):
        return free_vars(expr.expr) | free_vars(expr.ty)
    return frozenset()


# Names that are never local variables: the fragment's types and the propositions True/False.
_CONSTANTS = frozenset({"ℕ", "ℤ", "ℚ", "ℝ", "Prop", "Type", "Nat", "Int", "Rat", "Real", "Set", "True", "False",
                        "Bool", "true", "false", "Lean.Name", DECL_NAME.name})


def _prec(expr: Expr) -> int:
    if isinstance(expr, Op):
        if expr.op in _INFIX:
            return _INFIX[expr.op][0]
        if expr.op == "¬":
            return 40
        if expr.op == "neg":
            return 75
        if expr.op == "ite":
            return 0  # `if … then … else …` extends as far right as it can, as a binder does
        return MAX_PREC
    if isinstance(expr, Binder) and expr.kind != "setOf":
        return 0
    if isinstance(expr, App):
        return MAX_PREC - 1
    if isinstance(expr, Num) and expr.value < 0:
        return 75
    return MAX_PREC


def _wrap(expr: Expr, need: int) -> str:
    text = pp(expr)
    return f"({text})" if _prec(expr) < need else text


def _binder_groups(expr: Expr) -> tuple[list[tuple[list[str], Expr | None]], Expr]:
    """Consecutive `∀`/`∃` binders of one kind with the same type, and the body after them."""
    assert isinstance(expr, Binder)
    kind = expr.kind
    groups: list[tuple[list[str], Expr | None]] = []
    current: Expr = expr
    while isinstance(current, Binder) and current.kind == kind:
        if kind == "∀" and _is_arrow(current):
            break
        if groups and groups[-1][1] == current.ty:
            groups[-1][0].append(current.name)
        else:
            groups.append(([current.name], current.ty))
        current = current.body
        if kind == "∀" and _is_binder_pred(current):
            break
    return groups, current


def _is_arrow(binder: Binder) -> bool:
    """`∀ (h : p), q` where `h` is unused and `p` a proposition prints as `p → q` (we only build such
    binders for proposition-typed names that the body does not mention)."""
    return binder.ty is not None and binder.name not in free_vars(binder.body) and is_prop_like(binder.ty)


def is_prop_like(ty: Expr) -> bool:
    """A syntactic guess used only for printing: types (ℝ, Set ℕ, Prop, ℝ → ℝ) are not propositions."""
    if isinstance(ty, Var):
        return ty.name not in TYPE_NAMES
    if isinstance(ty, App) and isinstance(ty.fn, Var) and ty.fn.name in ("Set", "Finset"):
        return False
    if isinstance(ty, Op) and ty.op == "→":
        return is_prop_like(ty.args[1])
    return True


TYPE_NAMES = frozenset({"ℕ", "ℤ", "ℚ", "ℝ", "Prop", "Type", "Nat", "Int", "Rat", "Real"})


def _is_binder_pred(expr: Expr) -> bool:
    return False


_BINDER_PREDICATES = ("∈", "∉", "⊆", ">", "≥", "<", "≤", "≠")


def _pp_binder(expr: Binder) -> str:
    if expr.kind == "setOf":
        return f"{{{expr.name} | {pp(expr.body)}}}"
    if expr.kind == "fun":
        return f"fun {expr.name} => {pp(expr.body)}"
    if expr.kind == "∀":
        if _is_arrow(expr):
            assert expr.ty is not None
            return f"{_wrap(expr.ty, 26)} → {pp(expr.body)}"
        # `∀ x, x ∈ A → P` prints with the binder predicate: `∀ x ∈ A, P` (Mathlib's delaborator, also for
        # `> ≥ < ≤ ≠ ∉ ⊆`).
        body = expr.body
        if (
            isinstance(body, Op) and body.op == "→" and isinstance(body.args[0], Op)
            and body.args[0].op in _BINDER_PREDICATES and body.args[0].args[0] == Var(expr.name)
            and expr.name not in free_vars(body.args[0].args[1])
        ):
            pred = body.args[0]
            return f"∀ {expr.name} {pred.op} {_wrap(pred.args[1], 51)}, {pp(body.args[1])}"
    if expr.kind == "∃":
        body = expr.body
        if (
            isinstance(body, Op) and body.op == "∧" and isinstance(body.args[0], Op)
            and body.args[0].op in _BINDER_PREDICATES and body.args[0].args[0] == Var(expr.name)
            and expr.name not in free_vars(body.args[0].args[1])
        ):
            pred = body.args[0]
            return f"∃ {expr.name} {pred.op} {_wrap(pred.args[1], 51)}, {pp(body.args[1])}"
    groups, body = _binder_groups(expr)
    if expr.kind == "∃":
        # Lean prints `∃ x y, P` without binder types.
        names = " ".join(name for names, _ in groups for name in names)
        return f"∃ {names}, {pp(body)}"
    parts = [f"({' '.join(names)} : {pp(ty)})" if ty is not None else " ".join(names) for names, ty in groups]
    return f"∀ {' '.join(parts)}, {pp(body)}"


def _pp_operation(expr: Op) -> str:
    """An infix operator with the parentheses its precedence needs, or a prefix one, `|x|`, `if … then … else`."""
    if expr.op in _INFIX:
        prec, assoc = _INFIX[expr.op]
        left_need = prec if assoc == "left" else prec + 1
        right_need = prec if assoc == "right" else prec + 1
        lhs, rhs = expr.args
        right = pp(rhs) if isinstance(rhs, Binder) and rhs.kind != "setOf" else _wrap(rhs, right_need)
        return f"{_wrap(lhs, left_need)} {expr.op} {right}"
    if expr.op == "¬":
        return f"¬{_wrap(expr.args[0], 40)}"
    if expr.op == "neg":
        return f"-{_wrap(expr.args[0], 75)}"
    if expr.op == "abs":
        return f"|{pp(expr.args[0])}|"
    if expr.op == "ite":
        cond, then, other = expr.args
        return f"if {pp(cond)} then {pp(then)} else {pp(other)}"
    raise ValueError(f"unknown operator {expr.op}")


def pp(expr: Expr) -> str:
    """Lean's pretty-printed form of `expr`."""
    if isinstance(expr, (Var, Num, Sci, Hole)):
        return _pp_atom(expr)
    if isinstance(expr, Op):
        return _pp_operation(expr)
    if isinstance(expr, App):
        return " ".join([_wrap(expr.fn, MAX_PREC - 1), *(_wrap(a, MAX_PREC) for a in expr.args)])
    if isinstance(expr, Binder):
        return _pp_binder(expr)
    if isinstance(expr, Anon):
        return f"⟨{', '.join(pp(a) for a in expr.args)}⟩"
    if isinstance(expr, Proj):
        return f"{_wrap(expr.expr, MAX_PREC)}.{expr.field}"
    if isinstance(expr, Ascr):
        # pp.numericTypes is off: `(2 : ℝ)` prints as `2`, `(2.5 : ℝ)` as `2.5`.
        if isinstance(expr.expr, (Num, Sci)):
            return pp(expr.expr)
        return f"({pp(expr.expr)} : {pp(expr.ty)})"
    if isinstance(expr, SetLit):
        return "∅" if not expr.elems else f"{{{', '.join(pp(e) for e in expr.elems)}}}"
    return f"by {expr.text}"


def _pp_atom(expr: Var | Num | Sci | Hole) -> str:
    if isinstance(expr, (Var, Hole)):
        return expr.name
    if isinstance(expr, Num):
        return str(expr.value)
    return pp_scientific(expr)
