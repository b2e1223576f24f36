"""Lean `Name`s as text: how Lean reads one (`String.toName`), how it writes one (`Name.toString`, which escapes
components that are not identifiers with `«»`), how each Pantograph version puts goal and hypothesis names on the
wire, and how burnqed shows them: as Lean's goal display (`Meta.ppGoal`) writes them.

    name = LeanName.parse("a.«b c».d")            # LeanName(("a", "b c", "d"))
    str(name)                                     # 'a.«b c».d'      Name.toString
    wire_name("«a b»", PantographVersion(0, 3, 4))  # '"«a b»"'       serializeName before 0.3.15
    shown_name('"«a b»"')                          # '«a b»'          what `⊢` displays show

Read from Lean's and Pantograph's source (docs/lean.md, "Names", names the functions and commits): up to 0.3.14 a
name on the wire is a string, quoted when it holds `«`; from 0.3.15 a `Name`. Inaccessible names (`x✝`), names
with macro scopes and pseudo-syntax are never escaped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from leankit.version import PantographVersion

ID_BEGIN_ESCAPE, ID_END_ESCAPE = "«", "»"
INACCESSIBLE = "✝"
MACRO_SCOPE = "_@"  # `<name>._@.<module>._hyg.<scopes>`: the component that starts a name's macro scopes


def is_letter_like(c: str) -> bool:
    """`Lean.isLetterLike`: Greek (but λ, Π, Σ), Coptic, polytonic Greek, the letter-like block, math letters."""
    v = ord(c)
    return ((0x3B1 <= v <= 0x3C9 and v != 0x3BB) or (0x391 <= v <= 0x3A9 and v not in (0x3A0, 0x3A3))
            or 0x3CA <= v <= 0x3FB or 0x1F00 <= v <= 0x1FFE or 0x2100 <= v <= 0x214F or 0x1D49C <= v <= 0x1D59F)


def is_subscript_alnum(c: str) -> bool:
    """`Lean.isSubScriptAlnum`: subscript digits (₀…₉), letters (ₐ…ₜ) and ᵢ…ᵪ."""
    v = ord(c)
    return 0x2080 <= v <= 0x2089 or 0x2090 <= v <= 0x209C or 0x1D62 <= v <= 0x1D6A


def _ascii_alpha(c: str) -> bool:
    return c.isascii() and c.isalpha()  # Lean's Char.isAlpha is ASCII only


def is_id_first(c: str) -> bool:
    return _ascii_alpha(c) or c == "_" or is_letter_like(c)


def is_id_rest(c: str) -> bool:
    return ((c.isascii() and c.isalnum()) or c in "_'!?" or is_letter_like(c) or is_subscript_alnum(c))


def escape_part(s: str) -> str | None:
    """`Name.escapePart`: an identifier as it is, otherwise `«s»`; None when `s` holds `»` (cannot be escaped)."""
    if s and is_id_first(s[0]) and all(is_id_rest(c) for c in s[1:]):
        return s
    if ID_END_ESCAPE in s:
        return None
    return f"{ID_BEGIN_ESCAPE}{s}{ID_END_ESCAPE}"


Component = str | int


@dataclass(frozen=True, slots=True)
class LeanName:
    """A hierarchical Lean `Name`: its components from the root, strings or numbers; () is `anonymous`."""

    parts: tuple[Component, ...] = ()

    @classmethod
    def simple(cls, text: str) -> LeanName:
        """`Name.mkSimple`: one string component, whatever it holds (`«a.b»` is `LeanName.simple("a.b")`)."""
        return cls((text,))

    @classmethod
    def parse(cls, text: str) -> LeanName:
        """`String.toName` (as `FromJson Name` reads a request): dot-separated identifiers, `«…»` escapes and
        numbers; anything else (a stray character, an unclosed `«`, a trailing dot) is `anonymous` (())."""
        parts: list[Component] = []
        i, n = 0, len(text)
        if not text:
            return cls()
        while True:
            if i >= n:
                return cls()  # empty part (`a.` or ``): Lean's splitNameLitAux gives up
            c = text[i]
            if c == ID_BEGIN_ESCAPE:
                end = text.find(ID_END_ESCAPE, i + 1)
                if end < 0:
                    return cls()
                parts.append(text[i + 1:end])
                i = end + 1
            elif is_id_first(c):
                j = i + 1
                while j < n and is_id_rest(text[j]):
                    j += 1
                parts.append(text[i:j])
                i = j
            elif c.isascii() and c.isdigit():
                j = i + 1
                while j < n and text[j].isascii() and text[j].isdigit():
                    j += 1
                parts.append(int(text[i:j]))
                i = j
            else:
                return cls()
            if i == n:
                return cls(tuple(parts))
            if text[i] != ".":
                return cls()
            i += 1

    @property
    def anonymous(self) -> bool:
        return not self.parts

    @property
    def inaccessible(self) -> bool:
        """`Name.isInaccessibleUserName`: the last string component holds `✝` or is `_inaccessible`."""
        for part in reversed(self.parts):
            if isinstance(part, str):
                return INACCESSIBLE in part or part == "_inaccessible"
        return False

    @property
    def has_macro_scopes(self) -> bool:
        """`Name.hasMacroScopes`: the last string component is `_hyg`."""
        for part in reversed(self.parts):
            if isinstance(part, str):
                return part == "_hyg"
        return False

    def erase_macro_scopes(self) -> LeanName:
        """`Name.eraseMacroScopes`: the name before its `_@` component (itself when it has no macro scopes)."""
        if not self.has_macro_scopes or MACRO_SCOPE not in self.parts:
            return self
        return LeanName(self.parts[: self.parts.index(MACRO_SCOPE)])

    def append_after(self, suffix: str) -> LeanName:
        """`Name.appendAfter`: `suffix` added to the last string component (how `sanitizeNames` makes `x✝`)."""
        if not self.parts or not isinstance(self.parts[-1], str):
            return LeanName((*self.parts, suffix))
        return LeanName((*self.parts[:-1], self.parts[-1] + suffix))

    def _pseudo_syntax(self) -> bool:
        root = self.parts[0] if self.parts else None
        return self.parts == ("_",) or (isinstance(root, str) and root.startswith(("#", "?")))

    def __str__(self) -> str:
        """`Name.toString` (escape on): components joined by `.`, each escaped unless the whole name is
        inaccessible, has macro scopes or is pseudo-syntax."""
        if not self.parts:
            return "[anonymous]"
        escape = not (self.inaccessible or self.has_macro_scopes or self._pseudo_syntax())
        out = []
        for part in self.parts:
            if isinstance(part, int):
                out.append(str(part))
            else:
                out.append((escape_part(part) or part) if escape else part)
        return ".".join(out)


def wire_name(text: str, version: PantographVersion) -> str:
    """The `userName` Pantograph `version` sends for a name Lean writes as `text` (`str(LeanName)`): from 0.3.15 the
    text itself (`ToJson Name`), before it wrapped in `"` when it holds `«` (`serializeName`)."""
    if version.lean_names or ID_BEGIN_ESCAPE not in text:
        return text
    return f'"{text}"'


def case_wire_name(name: LeanName, version: PantographVersion) -> str:
    """A goal's `userName` (its case) as Pantograph `version` sends it: from 0.3.15 without macro scopes
    (`eraseMacroScopes`), before with them."""
    return wire_name(str(name.erase_macro_scopes() if version.lean_names else name), version)


def shown_name(wire: str, *, case: bool = False) -> str:
    """A goal's or hypothesis's name as Lean's goal display writes it, from its `userName` on the wire of any
    version: the quotes Pantograph put around an escaped name before 0.3.15 removed, and a case name's macro
    scopes erased (the display writes `case h`, never `case h._@.M._hyg.3`)."""
    text = wire
    if len(text) >= 2 and text[0] == text[-1] == '"' and ID_BEGIN_ESCAPE in text:
        text = text[1:-1]
    if case and f".{MACRO_SCOPE}." in text:
        text = text[: text.index(f".{MACRO_SCOPE}.")]
    return text


def name_problem(value: object) -> str | None:
    """Why `FromJson Name` refuses a request field's value (Lean's message), or None when it reads a name."""
    if not isinstance(value, str):
        return "String expected"
    if value == "[anonymous]" or not LeanName.parse(value).anonymous:
        return None
    return f"expected a `Name`, got '{json.dumps(value, ensure_ascii=False)}'"
