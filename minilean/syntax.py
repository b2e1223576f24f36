"""Lean 4 expressions of minilean's fragment: the AST, a `lark` LALR parser and Lean's pretty printer.

    expr = parse("∀ (x : ℝ), 2 * x + 3 = 11 → x = 4")
    pp(expr)                                  # "∀ (x : ℝ), 2 * x + 3 = 11 → x = 4"

The grammar follows Lean 4's notation table (precedences from `Init/Core.lean`, `Init/Prelude.lean` and
Mathlib's set notation): `↔` 20, `→` 25 (right), `∨` 30 (right), `∧` 35 (right), `¬` 40, the relations
`= ≠ < > ≤ ≥ ∈ ∉ ⊆ ∣` 50, `+ - ∪` 65 (left), `* / % ∩ \\` 70 (left), unary `-` 75, `^` 75 (right), application
1024. Binders (`∀`, `∃`, `fun`) extend as far right as possible. The printer parenthesises by the same table,
so `pp(parse(pp(e))) == pp(e)`. Proof terms share the grammar: `⟨a, b⟩`, `h.1`, `(e : T)`, `?_`, `_`, and
`by tac` (cut out before parsing and kept as text in a `By` node, since tactic text is not a term). Numerals are
`[0-9]+` (`Num`) and Lean's scientific literals `2.5`, `2.`, `1e3`, `1.5e-2` (`Sci`, Lean's `decimalNumberFn`;
docs/minilean.md says where minilean's tokenizer is stricter than Lean's).
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

from lark import Lark, Token, Transformer, Tree, v_args
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

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
# The grammar.

_GRAMMAR = r"""
?start: expr

?expr: iff
     | quant

quant: "∀" binders "," expr        -> forall_
     | "∃" binders "," expr        -> exists_
     | ("fun" | "λ") fun_binders ("=>" | "↦") expr -> lam
     | "if" expr "then" expr "else" expr -> ite

?iff: imp
    | imp "↔" imp_r               -> iff

?imp: disj
    | disj "→" imp_r              -> arrow
?imp_r: imp | quant

?disj: conj
     | conj "∨" disj_r            -> or_
?disj_r: disj | quant

?conj: neg
     | neg "∧" conj_r             -> and_
?conj_r: conj | quant

?neg: rel
    | "¬" neg                     -> not_

?rel: sum
    | sum RELOP sum               -> rel

?sum: prod
    | sum ADDOP prod              -> binop

?prod: unary
     | prod MULOP unary           -> binop

?unary: pow
      | "-" unary                 -> neg

?pow: app
    | app "^" unary               -> pow

?app: atom
    | app atom                    -> app
    | "|" expr "|"                -> abs_

?atom: IDENT                      -> ident
     | NUMBER                     -> number
     | SCIENTIFIC                 -> scientific
     | DECL_NAME                  -> decl_name
     | NAME_LIT                   -> name_lit
     | "(" expr ")"
     | "(" expr ":" expr ")"      -> ascr
     | "⟨" [expr ("," expr)*] "⟩"  -> anon
     | "{" IDENT "|" expr "}"     -> setof
     | "{" IDENT ":" IDENT "|" expr "}" -> setof_typed
     | "{" expr ("," expr)* "}"   -> setlit
     | "∅"                        -> empty
     | atom "." NUMBER            -> proj
     | atom "." IDENT             -> proj
     | "?_"                       -> hole_q
     | "_"                        -> hole

binders: bgroup+ [":" expr]               -> bgroups
       | IDENT RELOP sum                  -> bpred

bgroup: "(" IDENT+ ":" expr ")"
      | IDENT                             -> bgroup_bare

fun_binders: IDENT+                       -> fbare
           | "(" IDENT+ ":" expr ")"      -> ftyped

RELOP: "==" | "=" | "≠" | "<" | ">" | "≤" | "≥" | "∣" | "∈" | "∉" | "⊆"
ADDOP: "+" | "-" | "∪"
MULOP: "*" | "/" | "%" | "∩" | "\\"
IDENT: /@IDENT@/
DECL_NAME.3: "decl_name%"
NAME_LIT: /`@NAME@/
NUMBER: /[0-9]+/
SCIENTIFIC.2: /[0-9]+(\.[0-9]*([eE][-+]?[0-9]+)?|[eE][-+]?[0-9]+)/
COMMENT: /--[^\n]*/
%import common.WS
%ignore WS
%ignore COMMENT
"""


# Lean identifiers: letters (Greek except λ), subscripts, `'`, `!`, `?`, dotted components; `✝` only for
# the names minilean gives inaccessible locals (users cannot type it in Lean either).
_IDENT = ("(?!(fun|λ|by|if|then|else)\\b)[A-Za-z_α-κμ-ωΑ-Ωℕℤℚℝ𝔽][A-Za-z_0-9'!?α-ωΑ-Ω₀-₉ₐ-ₜ✝]*"
          "(\\.[A-Za-z_α-κμ-ω][A-Za-z_0-9'!?α-ωΑ-Ω₀-₉ₐ-ₜ]*)*")
# A name literal's name (`` `foo.bar ``, Lean's `Name`), any identifier (a keyword too: `` `if `` is a name).
_NAME = "[A-Za-z_α-κμ-ωΑ-Ω][A-Za-z_0-9'!?α-ωΑ-Ω₀-₉ₐ-ₜ]*(\\.[A-Za-z_α-κμ-ω][A-Za-z_0-9'!?α-ωΑ-Ω₀-₉ₐ-ₜ]*)*"
_GRAMMAR = _GRAMMAR.replace("@IDENT@", _IDENT).replace("@NAME@", _NAME)


class ParseError(Exception):
    """A parse failure: `column` is the 0-based codepoint offset in the parsed text, `message` Lean-like."""

    def __init__(self, message: str, column: int) -> None:
        super().__init__(message)
        self.message = message
        self.column = column


# The deepest parse tree `parse` reads. Every step after the parse (building the AST, elaborating, printing, the
# tactics) walks a term recursively, a few Python frames per level, under the server's recursion limit of 10,000
# (`minilean.server.main`): a flat chain such as `1 + 1 + … = n` nests one level per operator, and at about 5,000
# levels the first of those walks ran out of frames. 2,000 leaves room for the tactics (norm_num, simp, decide on a
# 3,000-term sum still answer) and is far above any real statement (miniF2F's deepest are a few dozen levels).
MAX_TERM_DEPTH = 2_000


class TermTooDeep(ParseError):
    """A term whose parse tree is deeper than `MAX_TERM_DEPTH`: refused before anything walks it."""

    def __init__(self, depth: int) -> None:
        super().__init__(f"minilean: this term nests {depth:,} levels deep, over minilean's limit of "
                         f"{MAX_TERM_DEPTH:,} levels (each operator of an unbracketed chain such as `1 + 1 + …` or "
                         "`p ∧ q ∧ …` is one level)", 0)
        self.depth = depth


def _tree_depth(tree: Tree[Token]) -> int:
    """The depth of a lark parse tree, walked without recursion."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in node.children if isinstance(child, Tree))
    return deepest


def _ident(name: str) -> Expr:
    return Var(name)


@v_args(inline=True)
class _Build(Transformer[Token, Expr]):
    def __init__(self, holes: dict[str, str]) -> None:
        super().__init__()
        self.holes = holes

    def ident(self, token: Token) -> Expr:
        name = str(token)
        if name in self.holes:
            return By(self.holes[name])
        return _ident(name)

    def number(self, token: Token) -> Expr:
        return Num(int(token))

    def scientific(self, token: Token) -> Expr:
        return scientific(str(token))

    def decl_name(self, token: Token) -> Expr:
        return DECL_NAME

    def name_lit(self, token: Token) -> Expr:
        return Var(str(token))  # `` `foo ``: a constant of type `Lean.Name` (`is_name_literal`)

    def ite(self, cond: Expr, then: Expr, other: Expr) -> Expr:
        return Op("ite", (cond, then, other))

    def ascr(self, expr: Expr, ty: Expr) -> Expr:
        return Ascr(expr, ty)

    def anon(self, *args: Expr | None) -> Expr:
        return Anon(tuple(a for a in args if a is not None))

    def abs_(self, expr: Expr) -> Expr:
        return Op("abs", (expr,))

    def setof(self, name: Token, body: Expr) -> Expr:
        return Binder("setOf", str(name), None, body)

    def setof_typed(self, name: Token, ty: Token, body: Expr) -> Expr:
        return Binder("setOf", str(name), Var(str(ty)), body)

    def setlit(self, *elems: Expr) -> Expr:
        return SetLit(tuple(elems))

    def empty(self) -> Expr:
        return SetLit(())

    def proj(self, expr: Expr, field: Token) -> Expr:
        return Proj(expr, str(field))

    def hole_q(self) -> Expr:
        return Hole("?_")

    def hole(self) -> Expr:
        return Hole("_")

    def app(self, fn: Expr, arg: Expr) -> Expr:
        if isinstance(fn, App):
            return App(fn.fn, (*fn.args, arg))
        return App(fn, (arg,))

    def pow(self, base: Expr, exponent: Expr) -> Expr:
        return Op("^", (base, exponent))

    def neg(self, arg: Expr) -> Expr:
        return Op("neg", (arg,))

    def binop(self, lhs: Expr, op: Token, rhs: Expr) -> Expr:
        return Op(str(op), (lhs, rhs))

    def rel(self, lhs: Expr, op: Token, rhs: Expr) -> Expr:
        return Op(str(op), (lhs, rhs))

    def not_(self, arg: Expr) -> Expr:
        return Op("¬", (arg,))

    def and_(self, lhs: Expr, rhs: Expr) -> Expr:
        return Op("∧", (lhs, rhs))

    def or_(self, lhs: Expr, rhs: Expr) -> Expr:
        return Op("∨", (lhs, rhs))

    def arrow(self, lhs: Expr, rhs: Expr) -> Expr:
        return Op("→", (lhs, rhs))

    def iff(self, lhs: Expr, rhs: Expr) -> Expr:
        return Op("↔", (lhs, rhs))

    # Binders produce (name, type, predicate) triples; the quantifier nests them.
    def bgroup(self, *items: Any) -> list[tuple[str, Expr | None, Expr | None]]:
        *names, ty = items
        return [(str(n), ty, None) for n in names]

    def bgroup_bare(self, name: Token) -> list[tuple[str, Expr | None, Expr | None]]:
        return [(str(name), None, None)]

    def bgroups(self, *items: Any) -> list[tuple[str, Expr | None, Expr | None]]:
        *groups, ty = items
        flat = [item for group in groups for item in group]
        if ty is not None:
            # `∀ x y : ℝ, P`: the type applies to the bare names.
            return [(name, ty if own is None else own, pred) for name, own, pred in flat]
        return flat

    def bpred(self, name: Token, op: Token, bound: Expr) -> list[tuple[str, Expr | None, Expr | None]]:
        return [(str(name), None, Op(str(op), (Var(str(name)), bound)))]

    def fbare(self, *names: Token) -> list[tuple[str, Expr | None, Expr | None]]:
        return [(str(n), None, None) for n in names]

    def ftyped(self, *items: Any) -> list[tuple[str, Expr | None, Expr | None]]:
        *names, ty = items
        return [(str(n), ty, None) for n in names]

    def _quant(self, kind: str, binders: list[tuple[str, Expr | None, Expr | None]], body: Expr) -> Expr:
        for name, ty, pred in reversed(binders):
            if pred is not None:
                body = Op("→" if kind == "∀" else "∧", (pred, body))
            body = Binder(kind, name, ty, body)
        return body

    def forall_(self, binders: Any, body: Expr) -> Expr:
        return self._quant("∀", binders, body)

    def exists_(self, binders: Any, body: Expr) -> Expr:
        return self._quant("∃", binders, body)

    def lam(self, binders: Any, body: Expr) -> Expr:
        return self._quant("fun", binders, body)


@lru_cache(maxsize=1)
def _parser() -> Lark:
    return Lark(_GRAMMAR, parser="lalr", maybe_placeholders=True)


_BY = re.compile(r"(?<![\w.'])by\b")
_OPENERS = {"(": ")", "[": "]", "{": "}", "⟨": "⟩"}


def cut_by_blocks(text: str) -> tuple[str, dict[str, str]]:
    """Replace every `by …` in a term by a placeholder identifier; the tactic text runs to the first `,`,
    closing bracket or end at bracket depth 0 (as Lean's `by` inside `⟨…, …⟩` or `(…)` does)."""
    holes: dict[str, str] = {}
    out: list[str] = []
    index = 0
    while True:
        match = _BY.search(text, index)
        if match is None:
            out.append(text[index:])
            break
        out.append(text[index : match.start()])
        # `(by tac : T)`: the type ascription ends the block (a `:` is no tactic token there)
        ascribed = text[: match.start()].rstrip().endswith("(")
        depth = 0
        end = match.end()
        while end < len(text):
            char = text[end]
            if char in _OPENERS:
                depth += 1
            elif char in _OPENERS.values():
                if depth == 0:
                    break
                depth -= 1
            elif depth == 0 and (char == "," or (ascribed and char == ":" and not text.startswith(":=", end))):
                break
            end += 1
        name = f"__byblock{len(holes)}"
        holes[name] = _block_text(text[match.end() : end])
        # Keep the width so error columns stay right.
        out.append(name.ljust(end - match.start()))
        index = end
    return "".join(out), holes


def _block_text(block: str) -> str:
    """A `by` block's tactics as a script: a block whose `by` ends its line is the lines below, dedented to their
    least indentation (so a nested `have … := by` block keeps its own lines deeper than the tactics around it, as
    Lean reads them); a block that starts on the `by` line, stripped."""
    first, _, rest = block.partition("\n")
    if first.strip() or not rest.strip():
        return block.strip()
    return textwrap.dedent(rest).strip()


# A number that runs into `e`/`E` with no exponent digits after it (`2e`, `2.5e+`, `3eq`): Lean's tokenizer reads a
# scientific literal there and fails (`decimalNumberFn`); digits inside a name (`x2e`) or a field index are no number.
_NO_EXPONENT = re.compile(r"(?<![\w.'])[0-9]+(?:\.[0-9]*)?[eE](?![-+]?[0-9])")


def parse(text: str) -> Expr:
    """The expression `text` denotes; ParseError with Lean-like wording otherwise (`TermTooDeep`, a ParseError,
    when its tree is deeper than `MAX_TERM_DEPTH`)."""
    source, holes = cut_by_blocks(text)
    if not source.strip():
        raise ParseError("unexpected end of input", len(text))
    bad_number = _NO_EXPONENT.search(source)
    if bad_number is not None:
        raise ParseError("missing exponent digits in scientific literal", bad_number.end())
    try:
        tree = _parser().parse(source)
    except UnexpectedEOF:
        raise ParseError("unexpected end of input", len(text)) from None
    except UnexpectedCharacters as exc:
        position = exc.pos_in_stream or 0
        raise ParseError(f"unexpected token '{source[position]}'; expected term", exc.column - 1) from None
    except UnexpectedToken as exc:
        if exc.token.type == "$END":
            raise ParseError("unexpected end of input", len(text)) from None
        column = (exc.column - 1) if isinstance(exc.column, int) else 0
        raise ParseError(f"unexpected token '{exc.token}'; expected term", column) from None
    except (UnexpectedInput, LarkError) as exc:
        raise ParseError(f"unexpected input: {exc}", 0) from None
    depth = _tree_depth(tree)
    if depth > MAX_TERM_DEPTH:
        raise TermTooDeep(depth)
    result = _Build(holes).transform(tree)
    assert not isinstance(result, Token)
    return result


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
