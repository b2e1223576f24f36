"""minilean's `lark` LALR parser of Lean 4 expressions into the AST of `minilean.syntax`.

    expr = parse("∀ (x : ℝ), 2 * x + 3 = 11 → x = 4")

The grammar follows Lean 4's notation table (precedences from `Init/Core.lean`, `Init/Prelude.lean` and
Mathlib's set notation): `↔` 20, `→` 25 (right), `∨` 30 (right), `∧` 35 (right), `¬` 40, the relations
`= ≠ < > ≤ ≥ ∈ ∉ ⊆ ∣` 50, `+ - ∪` 65 (left), `* / % ∩ \\` 70 (left), unary `-` 75, `^` 75 (right), application
1024. Binders (`∀`, `∃`, `fun`) extend as far right as possible. Proof terms share the grammar: `⟨a, b⟩`, `h.1`,
`(e : T)`, `?_`, `_`, and `by tac` (cut out before parsing and kept as text in a `By` node, since tactic text is
not a term). Numerals are `[0-9]+` (`Num`) and Lean's scientific literals `2.5`, `2.`, `1e3`, `1.5e-2` (`Sci`,
Lean's `decimalNumberFn`; docs/minilean.md says where minilean's tokenizer is stricter than Lean's).
"""

from __future__ import annotations

import io
import os
import re
import textwrap
from functools import lru_cache
from pathlib import Path
from typing import Any

import lark
from lark import Lark, Token, Transformer, Tree, v_args
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from minilean import cache
from minilean.syntax import DECL_NAME, Anon, App, Ascr, Binder, By, Expr, Hole, Num, Op, Proj, SetLit, Var, scientific

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


_OPTIONS: dict[str, Any] = {"parser": "lalr", "maybe_placeholders": True}


@lru_cache(maxsize=1)
def _parser() -> Lark:
    """The parser, its LALR tables read from the embedded Lean's cache (`minilean.cache`) when a start built them
    before: the key covers the grammar, the options and lark's files."""
    return cache.cached(cache.cache_folder(os.environ), _parser_key, lambda: Lark(_GRAMMAR, **_OPTIONS), _save, _load)


def _parser_key() -> str:
    return cache.input_key([b"parser", _GRAMMAR.encode(), repr(sorted(_OPTIONS.items())).encode()],
                           [Path(lark.__file__).resolve().parent])


def _save(parser: Lark) -> bytes:
    out = io.BytesIO()
    parser.save(out)
    return out.getvalue()


def _load(payload: bytes) -> Lark:
    return Lark.load(io.BytesIO(payload))


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


__all__ = ["MAX_TERM_DEPTH", "ParseError", "TermTooDeep", "cut_by_blocks", "parse"]
