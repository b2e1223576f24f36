"""The normal form of a statement up to renaming: what decontamination compares training statements against
benchmark statements with (docs/data.md, "Decontamination"). Pure string work, no Lean.

    statement_normal_form("∀ (x : ℝ) (h₀ : 2 * x + 3 = 11), x = 4")
    statement_normal_form("∀ (y : ℝ), 2*y + 3 = 11 → y = 4")         # the same string

How the form is made:
1. Tokens: comments are dropped and the text is cut into identifiers (`Real.sqrt`, `h₀.1`, `n!`), numbers and
   symbols, joined by single spaces, so spacing and line breaks never count. ASCII spellings become Lean's
   symbols (`->` →, `<=` ≤, `>=` ≥, `!=` ≠, `<->` ↔, `λ` fun, `↦` =>, `forall` ∀, `exists` ∃), and `in` becomes
   `∈` (`∑ x in s` and `∑ x ∈ s` are one notation).
2. Telescope: the leading `∀` binders and top-level `→` premises are read one by one (`(a b : T)` is two
   binders; implicit, strict-implicit and explicit brackets are not told apart). A named binder whose name is
   never used later is a premise: `(h₀ : P), Q` and `P → Q` are the same statement. Every binder type, premise
   and the conclusion is normalised the same way, recursively, after outer parentheses are removed, and written
   back as `∀ ( v : T ) ,` or `( P ) →`.
3. Renaming: every name in a binding position — the telescope's binders and the names bound inside the terms by
   `∀ ∃ ∃! fun ∑ ∏ ⋃ ⋂ ⨆ ⨅` and set-builder `{x | …}` / `{x : T | …}` — becomes `#0`, `#1`, … in the order of
   its first binding, everywhere it occurs (also as the head of `h.1`). Free names (constants, `π`) stay.

Two statements with the same normal form are equal up to the names of bound variables and hypotheses and the
binder/arrow spelling of hypotheses. Coercion arrows, implicit arguments and type ascriptions Lean would infer
are not normalised: statements that differ there are different here (they may elaborate differently, too).
"""

from __future__ import annotations

import re

from burnqed.lean.text import mask_comments

_IDENT_CHARS = r"[\w'!?₀-₉ₐ-ₜ]"
_TOKEN = re.compile(
    r"(?P<ident>(?!\d)" + _IDENT_CHARS + r"+(?:\.(?:(?!\d)" + _IDENT_CHARS + r"+|\d+))*)"
    r"|(?P<number>\d+(?:\.\d+)?)"
    r"|(?P<op><->|->|<=|>=|!=|=>|:=)"
    r"|(?P<symbol>\S)"
)
_ALIASES = {"->": "→", "<->": "↔", "<=": "≤", ">=": "≥", "!=": "≠", "λ": "fun", "↦": "=>", "forall": "∀",
            "exists": "∃", "in": "∈"}
_OPEN = {"(": ")", "[": "]", "{": "}", "⦃": "⦄", "⟨": "⟩"}
_CLOSE = set(_OPEN.values())
_BINDER_HEADS = frozenset({"∀", "∃", "fun", "∑", "∏", "⋃", "⋂", "⨆", "⨅"})
_KEYWORDS = frozenset({"fun", "∈", "if", "then", "else", "let", "have", "show", "from", "by", "at", "with", "match"})
_STOPS_ARROW_SPLIT = _BINDER_HEADS | {"↔"}  # `∃ x, p → q` and `a ↔ b → c`: the arrow is not the top level's


def statement_normal_form(statement: str) -> str:
    """The statement's normal form up to renaming (see the module docstring)."""
    tokens = _normalise(tokenize(statement))
    names = _binding_order(tokens)
    renamed = [_rename(token, names) for token in tokens]
    return " ".join(renamed)


def tokenize(text: str) -> list[str]:
    """Identifiers, numbers and symbols of `text` with comments dropped and ASCII spellings replaced."""
    tokens = [match.group() for match in _TOKEN.finditer(mask_comments(text))]
    return [_ALIASES.get(token, token) for token in tokens]


# ------------------------------------------------------------------------------------------- telescope


def _normalise(tokens: list[str]) -> list[str]:
    """The telescope of `tokens` written back in one spelling (binder types, premises and conclusion
    normalised recursively)."""
    entries: list[tuple[str | None, list[str] | None]] = []  # (binder name or None for a premise, type)
    rest = _strip_parens(tokens)
    while rest:
        if rest[0] == "∀":
            comma = _find_depth0(rest, ",", 1)
            binders = _binders(rest[1:comma]) if comma > 0 else None
            if binders is None:
                break
            entries.extend(binders)
            rest = _strip_parens(rest[comma + 1 :])
            continue
        arrow = _top_level_arrow(rest)
        if arrow < 0:
            break
        entries.append((None, rest[:arrow]))
        rest = _strip_parens(rest[arrow + 1 :])
    out: list[str] = []
    for position, (name, type_) in enumerate(entries):
        later = {token.split(".", 1)[0] for _, t in entries[position + 1 :] if t for token in t} | {
            token.split(".", 1)[0] for token in rest}
        if name is not None and (name in later or type_ is None):
            out.extend(["∀", "(", name, *([":", *_normalise(type_)] if type_ else []), ")", ","])
        elif type_ is not None:
            out.extend(["(", *_normalise(type_), ")", "→"])
    return out + rest


def _binders(tokens: list[str]) -> list[tuple[str | None, list[str] | None]] | None:
    """The binders of one `∀ … ,` as (name, type) pairs; an anonymous instance binder is (None, type);
    None when the text is no binder list (a binder predicate `x ∈ S`)."""
    if not tokens:
        return None
    if tokens[0] not in _OPEN:
        colon = _find_depth0(tokens, ":")
        names = tokens if colon < 0 else tokens[:colon]
        if not names or not all(_is_name(name) for name in names):
            return None
        type_ = None if colon < 0 else tokens[colon + 1 :]
        return [(name, type_) for name in names]
    found: list[tuple[str | None, list[str] | None]] = []
    index = 0
    while index < len(tokens):
        if tokens[index] not in _OPEN:
            return None
        close = _matching(tokens, index)
        if close < 0:
            return None
        inner = tokens[index + 1 : close]
        while len(inner) >= 2 and inner[0] == "{" and _matching(inner, 0) == len(inner) - 1:
            inner = inner[1:-1]  # Lean 3 strict implicit `{{x : α}}`
        colon = _find_depth0(inner, ":")
        if colon < 0:
            if tokens[index] == "[":
                found.append((None, inner))
            elif inner and all(_is_name(name) for name in inner):
                found.extend((name, None) for name in inner)
            else:
                return None
        else:
            names = inner[:colon]
            if not names or not all(_is_name(name) for name in names):
                return None
            found.extend((name if name != "_" else None, inner[colon + 1 :]) for name in names)
        index = close + 1
    return found


def _top_level_arrow(tokens: list[str]) -> int:
    """Index of the first depth-0 `→` that is the statement's own implication, or -1."""
    depth = 0
    for index, token in enumerate(tokens):
        if token in _OPEN:
            depth += 1
        elif token in _CLOSE:
            depth = max(0, depth - 1)
        elif depth == 0:
            if token in _STOPS_ARROW_SPLIT:
                return -1
            if token == "→":
                return index if index > 0 else -1
    return -1


# -------------------------------------------------------------------------------------------- renaming


def _binding_order(tokens: list[str]) -> dict[str, str]:
    """Bound name → canonical name, in the order of each name's first binding position."""
    names: dict[str, str] = {}

    def bind(name: str) -> None:
        if _is_name(name) and name != "_" and name not in names:
            names[name] = f"#{len(names)}"

    for index, token in enumerate(tokens):
        if token in _BINDER_HEADS:
            position = index + 1
            while position < len(tokens):
                current = tokens[position]
                if current == "!":  # ∃!
                    position += 1
                elif current in _OPEN:
                    close = _matching(tokens, position)
                    if close < 0:
                        break
                    inner = tokens[position + 1 : close]
                    colon = _find_depth0(inner, ":")
                    for name in inner[: colon if colon >= 0 else len(inner)]:
                        bind(name)
                    position = close + 1
                elif _is_name(current):
                    bind(current)
                    position += 1
                else:
                    break
        elif token == "{" and index + 2 < len(tokens) and tokens[index + 2] in ("|", ":") and _is_name(
            tokens[index + 1]
        ):
            bind(tokens[index + 1])
    return names


def _rename(token: str, names: dict[str, str]) -> str:
    head, dot, tail = token.partition(".")
    if head in names:
        return names[head] + dot + tail
    return token


# ----------------------------------------------------------------------------------------------- tokens


def _is_name(token: str) -> bool:
    return token not in _KEYWORDS and re.fullmatch(r"(?!\d)" + _IDENT_CHARS + "+", token) is not None


def _matching(tokens: list[str], start: int) -> int:
    depth = 0
    for index in range(start, len(tokens)):
        if tokens[index] in _OPEN:
            depth += 1
        elif tokens[index] in _CLOSE:
            depth -= 1
            if depth == 0:
                return index
    return -1


def _find_depth0(tokens: list[str], needle: str, start: int = 0) -> int:
    depth = 0
    for index in range(start, len(tokens)):
        token = tokens[index]
        if token in _OPEN:
            depth += 1
        elif token in _CLOSE:
            depth = max(0, depth - 1)
        elif depth == 0 and token == needle:
            return index
    return -1


def _strip_parens(tokens: list[str]) -> list[str]:
    while len(tokens) >= 2 and tokens[0] == "(" and _matching(tokens, 0) == len(tokens) - 1:
        tokens = tokens[1:-1]
    return tokens
