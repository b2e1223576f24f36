"""The normal form of a statement up to renaming: what decontamination compares training statements against
benchmark statements with. Pure string work, no Lean.

    statement_normal_form("∀ (x : ℝ) (h₀ : 2 * x + 3 = 11), x = 4")
    statement_normal_form("∀ (y : ℝ), 2*y + 3 = 11 → y = 4")         # the same string

Tokens (comments dropped, ASCII spellings read as Lean's symbols), the `∀`/`→` telescope (an unused hypothesis
name is a premise), redundant parentheses dropped, and every bound name renamed `#0`, `#1`, … in order of binding.
Two statements with one normal form are equal up to those; coercions, implicit arguments and ascriptions are not
normalised. The rules and what they find on miniF2F: docs/data.md, "Decontamination".
"""

from __future__ import annotations

import re

from leankit.text import mask_comments

_IDENT_CHARS = r"[\w'!?₀-₉ₐ-ₜ]"
_TOKEN = re.compile(
    r"(?P<ident>(?!\d)" + _IDENT_CHARS + r"+(?:\.(?:(?!\d)" + _IDENT_CHARS + r"+|\d+))*)"
    r"|(?P<number>\d+(?:\.\d+)?)"
    r"|(?P<op><->|->|<=|>=|!=|=>|:=)"
    r"|(?P<symbol>\S)"
)
_ALIASES = {"->": "→", "<->": "↔", "<=": "≤", ">=": "≥", "!=": "≠", "λ": "fun", "↦": "=>", "forall": "∀",
            "exists": "∃", "in": "∈", "Real.pi": "π", "√": "Real.sqrt"}
_OPEN = {"(": ")", "[": "]", "{": "}", "⦃": "⦄", "⟨": "⟩"}
_CLOSE = set(_OPEN.values())
_BINDER_HEADS = frozenset({"∀", "∃", "fun", "∑", "∏", "⋃", "⋂", "⨆", "⨅"})
_KEYWORDS = frozenset({"fun", "∈", "if", "then", "else", "let", "have", "show", "from", "by", "at", "with", "match"})
_STOPS_ARROW_SPLIT = _BINDER_HEADS | {"↔"}  # `∃ x, p → q` and `a ↔ b → c`: the arrow is not the top level's


def statement_normal_form(statement: str) -> str:
    """The statement's normal form up to renaming (see the module docstring)."""
    tokens = drop_redundant_parens(_normalise(tokenize(statement)))
    names = _binding_order(tokens)
    renamed = [_rename(token, names) for token in tokens]
    return " ".join(renamed)


def tokenize(text: str) -> list[str]:
    """Identifiers, numbers and symbols of `text` with comments dropped and ASCII spellings replaced."""
    tokens = [match.group() for match in _TOKEN.finditer(mask_comments(text))]
    return [_ALIASES.get(token, token) for token in tokens]


# --------------------------------------------------------------------------------------------- states

_CONTEXT_NAME = re.compile(r"(?<![\w'!?₀-₉ₐ-ₜ.✝⁰-⁹])(?!\d)[\w'!?₀-₉ₐ-ₜ]+(?:✝[⁰-⁹¹²³]*)?")


def state_up_to_names(state: str) -> str:
    """A pretty-printed tactic state (`records.replies.pretty_state`) with the names its goals' contexts introduce
    written `#0`, `#1`, … in the order they are introduced, per goal, wherever they occur in that goal (also as the
    head of `h.1`); an inaccessible name keeps its dagger (`h✝` → `#2✝`): a tactic cannot name it.

        state_up_to_names("x : ℝ\nh₀ : 2 * x = 4\n⊢ x = 2") == state_up_to_names("x : ℝ\nh₁ : 2 * x = 4\n⊢ x = 2")

    Two states with the same form differ only in what their hypotheses and variables are called: a proof of one,
    its names replaced, proves the other (`intro h₀ h₁` and `intro h₁ h₂` reach such a pair). Hypotheses in another
    order, another case tag or another type are another form."""
    return "\n\n".join(_goal_up_to_names(goal) for goal in state.split("\n\n"))


def _goal_up_to_names(goal: str) -> str:
    names: dict[str, str] = {}
    for line in goal.split("\n"):
        if line.startswith(("⊢", "case ")) or " : " not in line:
            continue
        for name in line.split(" : ", 1)[0].split():
            base, dagger, rest = name.partition("✝")
            names.setdefault(name, f"#{len(names)}{dagger}{rest}" if base else name)

    def rename(found: re.Match[str]) -> str:
        return names.get(found.group(), found.group())

    return _CONTEXT_NAME.sub(rename, goal)


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
        group = _bracket_binders(tokens[index], tokens[index + 1 : close])
        if group is None:
            return None
        found.extend(group)
        index = close + 1
    return found


def _bracket_binders(opener: str, inner: list[str]) -> list[tuple[str | None, list[str] | None]] | None:
    """The binders of one bracketed group `(x y : α)`, `{x}`, `[inst : C]` or `[C]` (`inner` is what the brackets
    hold, `opener` the opening one); None when it is no binder group."""
    while len(inner) >= 2 and inner[0] == "{" and _matching(inner, 0) == len(inner) - 1:
        inner = inner[1:-1]  # Lean 3 strict implicit `{{x : α}}`
    colon = _find_depth0(inner, ":")
    if colon < 0:
        if opener == "[":
            return [(None, inner)]
        if inner and all(_is_name(name) for name in inner):
            return [(name, None) for name in inner]
        return None
    names = inner[:colon]
    if not names or not all(_is_name(name) for name in names):
        return None
    return [(name if name != "_" else None, inner[colon + 1 :]) for name in names]


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


# ------------------------------------------------------------------------------------- parentheses

# Lean 4 / Mathlib precedences of the infix operators statements use (higher binds tighter).
_INFIX = {
    "∘": 90, "^": 75, "•": 73, "*": 70, "/": 70, "%": 70, "∩": 70, "\\": 70, "::": 67, "+": 65, "-": 65, "∪": 65,
    "=": 50, "≠": 50, "<": 50, ">": 50, "≤": 50, "≥": 50, "∈": 50, "∉": 50, "⊆": 50, "⊂": 50, "∣": 50, "≡": 50,
    "∧": 35, "×": 35, "∨": 30, "→": 25, "↔": 20,
}
_RIGHT_ASSOCIATIVE = frozenset({"^", "∘", "•", "::", "∧", "∨", "×", "→"})
_LEFT_ASSOCIATIVE = frozenset({"*", "/", "%", "∩", "\\", "+", "-", "∪"})
_NEG = 75  # `-x` reads its argument at 75: `-x ^ 2` is `-(x ^ 2)`, `-a * b` is `(-a) * b`
_NOT = 40
_BIG_OPERATORS = {"∑": 67, "∏": 67}  # `∑ x ∈ s, f x = 3` is `(∑ x ∈ s, f x) = 3`
_APPLICATION = 1024
_NO_NEIGHBOUR = frozenset({"(", "[", "{", "⦃", "⟨", ")", "]", "}", "⦄", "⟩", ",", ":", ":=", "=>", "|"})


def drop_redundant_parens(tokens: list[str]) -> list[str]:
    """`tokens` without the parentheses Lean's precedences make redundant: `(2 ^ 10) % 10` is `2 ^ 10 % 10`,
    `101 ∣ (a - n)` is `101 ∣ a - n`, `m * (-1)` is `m * -1`, `∈ (Finset.range 10),` is `∈ Finset.range 10,`.
    A group is kept whenever its contents hold anything this does not know (`:`, `,`, `|x|`, binders), or when
    dropping it could change what binds to what (an argument of an application, equal precedences)."""
    tokens = list(tokens)
    changed = True
    while changed:
        changed = False
        for start in range(len(tokens)):
            if tokens[start] != "(":
                continue
            close = _matching(tokens, start)
            if close > start + 1 and _redundant(tokens, start, close):
                del tokens[close]
                del tokens[start]
                changed = True
                break
    return tokens


def _redundant(tokens: list[str], start: int, close: int) -> bool:
    inner = _precedence(tokens[start + 1 : close])
    if inner is None:
        return False
    left = tokens[start - 1] if start > 0 else None
    right = tokens[close + 1] if close + 1 < len(tokens) else None
    if right in {".", "!"}:
        return inner >= _APPLICATION and close == start + 2  # `(x).1`, `(n) !`: only a lone atom
    if _is_operand_end(left):  # `f (g x)`: the group is an argument
        return close == start + 2
    left_precedence = _left_precedence(left, tokens, start)
    right_precedence = _right_precedence(right)
    # Equal precedences: `(a * b) % c` is `a * b % c` (left-associative), `x ^ (y ^ 2)` is `x ^ y ^ 2` (right).
    fits_left = inner > left_precedence or (inner == left_precedence and left in _RIGHT_ASSOCIATIVE)
    fits_right = inner > right_precedence or (inner == right_precedence and right in _LEFT_ASSOCIATIVE)
    return fits_left and fits_right


def _precedence(inner: list[str]) -> int | None:
    """How tightly the group's contents bind (their loosest depth-0 operator); None when unknown."""
    lowest = _APPLICATION
    depth = 0
    previous: str | None = None
    binder_open = False  # inside the binder part of `∑ x ∈ s,` / `∀ x,` / `fun x =>`, up to its `,` or `=>`
    for token in inner:
        if token in _OPEN:
            depth += 1
        elif token in _CLOSE:
            depth -= 1
        elif depth == 0 and binder_open:
            binder_open = token not in (",", "=>")
        elif depth == 0:
            if token in _BIG_OPERATORS or token in _BINDER_HEADS:
                lowest = min(lowest, _BIG_OPERATORS.get(token, 0))  # ∀ ∃ fun reach as far as they can
                binder_open = True
            elif token == "-" and not _is_operand_end(previous):
                lowest = min(lowest, _NEG)
            elif token == "¬" and not _is_operand_end(previous):
                lowest = min(lowest, _NOT)
            elif token in _INFIX and _is_operand_end(previous):
                lowest = min(lowest, _INFIX[token])
            elif token in ("!", "↑"):
                pass
            elif not _is_atom(token):
                return None
        previous = token
    return lowest


def _left_precedence(left: str | None, tokens: list[str], start: int) -> int:
    if left is None or left in _NO_NEIGHBOUR:
        return -1
    if left == "-":
        return _NEG if not _is_operand_end(tokens[start - 2] if start > 1 else None) else _INFIX["-"]
    if left == "¬":
        return _NOT
    return _INFIX.get(left, _APPLICATION)


def _right_precedence(right: str | None) -> int:
    if right is None or right in _NO_NEIGHBOUR:
        return -1
    return _INFIX.get(right, _APPLICATION)


def _is_operand_end(token: str | None) -> bool:
    """True when `token` ends an operand (a name, a number, a closing bracket, a postfix `!`)."""
    return token is not None and (token in _CLOSE or token == "!" or _is_atom(token))


def _is_atom(token: str) -> bool:
    """A name (dotted or not, a renamed `#0.1`), or a number."""
    if token in _KEYWORDS:
        return False
    found = _TOKEN.fullmatch(token)
    return token.startswith("#") or (found is not None and found.lastgroup in ("ident", "number"))


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
