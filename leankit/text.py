"""Lean source as text, the way every part of burnqed and the embedded Lean reads it: brackets, comments, literals,
declaration keywords and the words that make a proof no proof (statements as users write them: `leankit.statements`).
Pure string work.

    mask_comments("simp -- uses sorry")          # "simp              ": columns and newlines kept
    NOT_A_PROOF_WORDS.search("exact cheat")      # a match: the data stage drops such a proof
    SORRY_WORDS.search("exact cheat")            # None: Lean 4 has no `cheat`, it is an unknown identifier

`regions` is the one reader of comments and literals, as Lean's tokenizer reads them (`read_two_ways`: where that
reading depends on the notation tokens in scope); the bracket scanners
(`depth0_chars`, `find_depth0`, `bracket_delta`, `matching_close`), `read_as_lean` and `leankit.statements`
are built on it. What it reads and why two word lists: docs/lean.md,
"Lean source as text".
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import NamedTuple

BRACKET_PAIRS: dict[str, str] = {"(": ")", "[": "]", "{": "}", "⟨": "⟩", "⦃": "⦄"}
OPEN_BRACKETS = "".join(BRACKET_PAIRS)
CLOSE_BRACKETS = "".join(BRACKET_PAIRS.values())
OPENER_OF: dict[str, str] = {close: opener for opener, close in BRACKET_PAIRS.items()}

# Words Lean 4 elaborates to `sorryAx`: a tactic that uses one closes its goal with `hasSorry`.
SORRY_WORDS = re.compile(r"(?<![\w.'])(sorry|admit)(?![\w'])")
# Words that make a written proof no proof (see the module docstring for `cheat`).
NOT_A_PROOF_WORDS = re.compile(r"(?<![\w.'])(sorry|admit|cheat)(?![\w'])")

# The modifiers that may precede a declaration keyword, and the keywords of a theorem.
DECLARATION_MODIFIERS: tuple[str, ...] = ("private", "protected", "noncomputable", "nonrec", "unsafe", "partial")
THEOREM_KEYWORDS: tuple[str, ...] = ("theorem", "lemma", "example")
MODIFIERS_PATTERN = r"(?:(?:" + "|".join(DECLARATION_MODIFIERS) + r")\s+)*"
ATTRIBUTE_PATTERN = r"(?:@\[[^\]\n]*\][ \t]*\n?[ \t]*)?"  # one `@[simp]`-style attribute, on its own line or not

# Lean 4's identifier characters (`isIdFirst`, `isIdRest`, `isLetterLike`, `isSubScriptAlnum` in Init/Meta/Defs.lean)
# as every supported Lean reads them: ASCII letters, Greek but λ Π Σ, Coptic, polytonic Greek, the letter-like
# block (ℕ, ℝ) and the mathematical alphanumerics (𝒜); `'`, `!`, `?`, digits and subscripts after the first. Lean
# releases of 2025 on also take Latin-1 letters (é); the Lean of a v4.9-era Mathlib does not, so they are left out.
LETTER_LIKE = (
    r"\u03b1-\u03ba\u03bc-\u03c9"  # lower Greek but λ
    r"\u0391-\u039f\u03a1\u03a2\u03a4-\u03a9"  # upper Greek but Π and Σ
    r"\u03ca-\u03fb\u1f00-\u1ffe\u2100-\u214f\U0001d49c-\U0001d59f"
)
SUBSCRIPT = r"\u2080-\u2089\u2090-\u209c\u1d62-\u1d6a"
ID_FIRST = rf"[A-Za-z_{LETTER_LIKE}]"  # one character that may start a name
ID_REST = rf"[A-Za-z0-9_'!?{LETTER_LIKE}{SUBSCRIPT}]"  # one character that may continue it
# A numeric literal as Lean's `numberFnAux` reads one: hexadecimal, binary, octal, decimal or scientific.
NUMERAL = re.compile(r"0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+|[0-9][0-9_]*(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")

# Where a comment or a literal may open: a string, a line or block comment, a character literal, an escaped
# identifier `«…»`, a raw string `r"…"`/`r#"…"#`. A quote, a raw string's `r` and a comment opener open one only
# where a token starts (`_Names.token_start`): `h'` and `ar"` continue a name, `2'x'` and `2r"…"` do not.
_SPECIAL = re.compile(r"""["'«]|--|/-|r#*\"""")
_ID_FIRST_CHAR = re.compile(ID_FIRST)
_ID_REST_CHAR = re.compile(ID_REST)
# Characters that no token runs from into a name: blanks, brackets, punctuation and ASCII operators (a token `*b` or
# `/p` would break `a*b` and `x/p'`). After any other symbol one may: core's `#eval`, Mathlib's `→o`, `≃r`, `→L[`.
_ENDS_TOKENS = frozenset(".,;:|()[]{}⟨⟩⦃⦄+-*/^<>=&~%@$`\"\\")
_NOT_NEWLINE = re.compile(r"[^\n]")
_QUOTES = re.compile("'+")
_ESCAPE = re.compile(r"""\\(?:[\\"'nrt]|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4})""")  # Lean's `quotedCharCoreFn`
# A character literal as Lean's `charLitFnAux` reads one: one character or one escape, then the closing quote.
_CHAR_LITERAL = re.compile(rf"""'(?:{_ESCAPE.pattern}|[^\\\n'])'""")
_RAW_STRING_OPEN = re.compile(r'r(#*)"')
_BLOCK_MARK = re.compile("/-|-/")  # what opens and closes a nested block comment

# What a region of Lean source is (`regions`): comments of four kinds, or a literal.
LINE_COMMENT = "line comment"  # `-- …` up to the end of its line (the newline is not part of it)
BLOCK_COMMENT = "block comment"  # `/- … -/`, nested
DOC_COMMENT = "doc comment"  # `/-- … -/`: a declaration's docstring (a token to Lean, not whitespace)
MODULE_DOC = "module doc"  # `/-! … -/`
LITERAL = "literal"  # a string, raw string or character literal, or an escaped identifier `«…»`
COMMENT_KINDS = frozenset({LINE_COMMENT, BLOCK_COMMENT, DOC_COMMENT, MODULE_DOC})


class Region(NamedTuple):
    """A comment or literal of a text: text[start:end]; `closed` is False when it runs to the end of the text
    unterminated (a line comment is always closed)."""

    kind: str
    start: int
    end: int
    closed: bool = True

    @property
    def is_comment(self) -> bool:
        return self.kind in COMMENT_KINDS


def normalize_newlines(text: str) -> str:
    """CRLF and lone CR line ends as `\\n`."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _block_end(text: str, start: int) -> tuple[int, bool]:
    """Index just past the (nested) block comment opening at `start`, and whether it is closed. The body starts
    after the third character, as Lean reads it: a doc comment's after its `/--` or `/-!` (`commentBody`), another's
    after `/-` and the character `whitespace` looks at to tell the two apart, so `/--/ … -/` and `/-/- -/` are one
    comment each."""
    depth = 1
    index = start + 3  # Lean's `whitespace` reads the character after `/-` before the body: `/-/- -/` is one comment
    while (found := _BLOCK_MARK.search(text, index)) is not None:  # the next `/-` or `-/`, `/-` first at a tie
        index = found.end()
        depth += 1 if found.group() == "/-" else -1
        if depth == 0:
            return index, True
    return len(text), False  # unterminated: the rest is comment


def block_comment_end(text: str, start: int) -> int:
    """Index just past the (nested) `/- … -/` comment opening at `start`; len(text) when unterminated."""
    return _block_end(text, start)[0]


def _string_end(text: str, start: int) -> tuple[int, bool]:
    index = start
    while index < len(text):
        char = text[index]
        if char == "\\":
            index += 2
            continue
        index += 1
        if char == '"':
            return index, True
    return len(text), False


def string_end(text: str, start: int) -> int:
    """Index just past the closing quote of a string literal whose body starts at `start` (len(text) when
    unterminated); a backslash escapes the next character."""
    return _string_end(text, start)[0]


def glues_to_name(char: str) -> bool:
    """Whether a token may run from the symbol `char` into the name written right after it (`#eval`, Mathlib's
    `→o`): `#` and the symbols beyond ASCII that are no bracket (`_ENDS_TOKENS`)."""
    if char.isspace() or char in _ENDS_TOKENS or _ID_REST_CHAR.match(char):
        return False
    return char == "#" or ord(char) > 127


def ends_getelem(text: str, index: int) -> bool:
    """Whether the quote at text[index] ends core Lean's token `]'` (`Init/GetElem.lean`: `syntax term noWs "["
    withoutPosition(term) "]'" term:max`, `xs[i]'h`): in every token table, so the name after it starts a token
    (`xs[t]'ht'` is `]'` and the name `ht'`). Only after a `]` that follows a name's or numeral's character or `)`,
    where no token ends (Mathlib's `]]`, `[[a, b]]` under `open Interval`, would take the `]`), and before no second
    quote (`]''"`: after `]'` the next quote starts a literal)."""
    return (index >= 2 and text.startswith("]'", index - 1) and text[index + 1 : index + 2] != "'"
            and (text[index - 2] == ")" or _ID_REST_CHAR.match(text, index - 2) is not None))


class _Names:
    """Where the runs of name characters (`ID_REST`) of one text start, for the questions one scan asks from left to
    right (`regions`, `literal_problem`): where a token starts, whether a name is glued to a symbol. Each character
    is walked over once, whatever the text: a run of `'` (a legal name) or of a numeral's digits is not walked again
    for each quote in it, so a scan is linear in its text. Asked out of order, it walks from the start again (the
    same answers, at a run's cost). It is asked where an opener stands (a quote, `«`, a raw string's `r`, `--`,
    `/-`): no numeral runs on across that character, so the numerals read up to one place stand for a later one."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0  # the index last asked about
        self.run = 0  # where the run of name characters that ends at `at` starts
        self.walked_from = -1  # the name start whose numerals `token_start` walked last
        self.walked = 0  # how far that walk went (`stop`: where it stopped, at what no numeral opens)
        self.stop = False

    def name_start(self, index: int, floor: int) -> int:
        """Where the run of name characters that ends at `index` starts, not before `floor`."""
        if index < self.at:
            self.at = self.run = 0  # asked out of order: from the start again
        start = index
        while start > self.at and _ID_REST_CHAR.match(self.text[start - 1]) and not ends_getelem(self.text, start - 1):
            start -= 1
        if start == self.at:
            start = self.run  # the run went on before `at`: it starts where that run did
        self.at, self.run = index, start
        return max(start, floor)

    def token_start(self, index: int, floor: int) -> bool | None:
        """Whether a token starts at text[index] as Lean's tokenizer reads text[floor:] (`floor`: the text's start or
        a comment's or literal's end): True at `floor`, after a blank, after a numeral (`2'x'` is `2` and a character
        literal) or after a name the character cannot continue (`h--`); False inside a name (`h'`, `ar"`, `x/p'`);
        None after a symbol character or in a name glued to one (`glues_to_name`), where Lean's token table decides
        (`⁻¹'`, `#eval` and Mathlib's `→o` are tokens)."""
        text = self.text
        if index <= floor or text[index - 1].isspace():
            return True
        start = self.name_start(index, floor)
        if start == index or (start > floor and glues_to_name(text[start - 1])):
            return None
        if self.walked_from != start or self.walked > index:
            self.walked_from, self.walked, self.stop = start, start, False
        while not self.stop and self.walked < index:  # the numerals that open the name, each read once
            numeral = None if _ID_FIRST_CHAR.match(text, self.walked) else NUMERAL.match(text, self.walked, index)
            if numeral is None:
                self.stop = True
            else:
                self.walked = numeral.end()
        if not self.stop or self.walked == index:
            return True
        if _ID_FIRST_CHAR.match(text, self.walked):  # a name runs on to `index` and takes what may continue it
            return _ID_REST_CHAR.match(text, index) is None
        return None  # `!`, `?`, `'` or a subscript opening a token: a symbol

    def glued_name(self, index: int, floor: int) -> bool:
        """Whether text[:index] ends with a name (from a character that may start one) glued to a symbol a token may
        run from into it (`glues_to_name`: `↑i`, `→o`); not a run of `'`, `!` or `?` (`]''`, `(!'`), each a token's
        start."""
        start = self.name_start(index, floor)
        return (floor < start < index and glues_to_name(self.text[start - 1])
                and _ID_FIRST_CHAR.match(self.text, start) is not None)


def _literal_at(text: str, index: int) -> Region | None:
    """The literal that opens at `index`, a token's start (Lean's `tokenFn`: a quote, `«`, a raw string's `r`, or a
    `'` that reads as a character literal); None when none does."""
    char = text[index]
    if char == '"':
        end, closed = _string_end(text, index + 1)
        return Region(LITERAL, index, end, closed)
    if char == "«":
        close = text.find("»", index + 1)
        return Region(LITERAL, index, len(text) if close < 0 else close + 1, close >= 0)
    if char == "'":
        found = _CHAR_LITERAL.match(text, index)  # `'a` alone is no literal, nor `''` (Mathlib's image token)
        return None if found is None else Region(LITERAL, index, found.end())
    raw = _RAW_STRING_OPEN.match(text, index)
    if raw is None:
        return None
    closing = '"' + raw.group(1)  # no escapes in a raw string: it ends at the first quote with as many #
    close = text.find(closing, raw.end())
    return Region(LITERAL, index, len(text) if close < 0 else close + len(closing), close >= 0)


def regions(text: str, *, glued: bool = False) -> Iterator[Region]:
    """The comments and literals of `text`, in order: THE reader of Lean source behind every scanner here. As
    Lean reads it: `--` inside a string or `«…»` is no comment, a quote inside a comment opens no string,
    block comments nest, `/--` and `/-!` are doc comments, and a quote, raw string or comment opens only where a
    token starts. Right after a symbol character Lean's token table decides: by default the opener opens (core
    Lean's reading); `glued=True` reads it as the end of the symbol's token (Mathlib's `⁻¹'`, the `<-` of `<--`).
    `read_two_ways` compares the two."""
    index = floor = 0
    names = _Names(text)
    while True:
        found = _SPECIAL.search(text, index)
        if found is None:
            return
        start = found.start()
        token = found.group()
        region: Region | None = None
        starts = True if token in ('"', "«") else names.token_start(start, floor)
        if token == "'" and ends_getelem(text, start):
            starts = False  # core's `]'`: no literal opens in any reading
        if starts is False and token == "'":  # inside a name, and so is every quote of its run (`h'''`): past them
            index = _QUOTES.match(text, start).end()  # type: ignore[union-attr]
            continue
        if starts is None:
            starts = not glued
        if not starts:
            pass
        elif token == "--":
            newline = text.find("\n", start)
            region = Region(LINE_COMMENT, start, len(text) if newline == -1 else newline)
        elif token == "/-":
            end, closed = _block_end(text, start)
            kind = {"-": DOC_COMMENT, "!": MODULE_DOC}.get(text[start + 2 : start + 3], BLOCK_COMMENT)
            region = Region(kind, start, end, closed)
        else:
            region = _literal_at(text, start)
        if region is None:
            index = start + 1
            continue
        yield region
        index = floor = region.end


def read_two_ways(text: str) -> int | None:
    """Where Lean's reading of `text` depends on the notation tokens in scope: the offset of the first comment or
    literal that one reading of `regions` opens and the other does not (`x ⁻¹'"'`, `<--`, `//-`), or None when both
    agree (then every token table reads the comments and literals the same way). Untrusted text that Lean may read
    two ways is refused (`burnqed.lean.guard`)."""
    plain = list(regions(text))
    glued = list(regions(text, glued=True))
    for one, other in zip(plain, glued, strict=False):
        if one != other:
            return min(one.start, other.start)
    if len(plain) == len(glued):
        return None
    return max(plain, glued, key=len)[min(len(plain), len(glued))].start  # the first one the other lacks


_PRIMED_TOKENS = ("]", "⁻¹", "∑", "∏")  # before `'` in the tokens ending with one: core's `]'`, Mathlib's `⁻¹'`, `∑'`


def literal_problem(text: str) -> str | None:
    """Why Lean's tokenizer would break off inside a comment or literal of `text`, or None: one left open, a string
    escape Lean does not know (`"\\q"`, a line continuation too), or a quote where Lean starts a character literal
    that is none (`'ab'`, `'" x`, `'\\q'`: at a token's start, or after a symbol other than core's `]'` and
    Mathlib's `⁻¹'`; Mathlib's `f '' s` passes, `''"` does not). After such an error Lean's parser reads on from
    where the token broke, so what these readers took for the inside of a literal is code to Lean there (`'aopen X'`
    runs `open X`). And a string holding `{`: an interpolated string's (`s!"…"`, `throwError "…"`) `{…}` is code."""
    floor = 0
    names = _Names(text)
    for region in [*regions(text), None]:
        problem = _broken_quote(names, floor, len(text) if region is None else region.start)
        if problem is not None or region is None:
            return problem
        body = text[region.start : region.end]
        if not region.closed:
            return f"leaves a {'string' if region.kind == LITERAL else region.kind} open at {body[:12]!r}"
        if region.kind == LITERAL and body[0] == '"':
            problem = _escape_problem(body)
            if problem is not None:
                return problem
            if "{" in body:
                return "has a string holding `{`: an interpolated string's `{…}` is code Lean runs"
        floor = region.end
    return None


def _broken_quote(names: _Names, floor: int, stop: int) -> str | None:
    """`literal_problem`'s quotes in text[floor:stop] (`names.text`), code between two regions (`floor`: the first
    one's end)."""
    text = names.text
    index = floor
    while (index := text.find("'", index, stop)) >= 0:
        if text.startswith("''", index) and text[index + 2 : index + 3] in ("", " ", "\n"):
            index += 2  # Mathlib's image `f '' s`; whatever core Lean makes of it, nothing after hides in a literal
            continue
        starts = names.token_start(index, floor)
        if starts is False:  # inside a name, and so is every quote of its run (`h'''`): past them
            index = _QUOTES.match(text, index).end()  # type: ignore[union-attr]
            continue
        if starts is None and text.endswith(_PRIMED_TOKENS, floor, index):
            starts = False  # `xs[i]'h` (core's getElem with its proof), `f ⁻¹' s`, `∑' i` (Mathlib's)
        if starts is None and names.glued_name(index, floor):  # a name glued to a symbol (`↑i'`, `→o'`): dangerous
            starts = _resumes_in_a_name(text, index)  # only where Lean's resumption splits these readers' name
        if starts is not False:  # `charLitFnAux` reads two characters before it fails: `'" #eval …` runs
            return f"has a quote at {text[index : index + 8]!r} that Lean reads as a character literal it cannot close"
        index += 1
    return None


def _resumes_in_a_name(text: str, index: int) -> bool:
    """For a quote ending a name glued to a symbol (`→o'…`, where Mathlib's token may take the name's start): whether
    Lean, reading a character literal there that does not close, resumes inside a name these readers read whole
    (`→o' bopen X` resumes at `open`); `'` followed by `\\` too."""
    after = text[index + 1 : index + 3]
    if after[:1] == "\\":
        return True
    return len(after) == 2 and "'" not in after and _ID_REST_CHAR.match(after[1]) is not None


def _escape_problem(body: str) -> str | None:
    """`literal_problem`'s escapes of the string literal `body` (its quotes included)."""
    index = 1
    while index < len(body) - 1:
        if body[index] != "\\":
            index += 1
            continue
        escape = _ESCAPE.match(body, index)
        if escape is None:
            return f"has an escape Lean does not read at {body[index:index + 4]!r}"
        index = escape.end()
    return None


def mask_comments(text: str) -> str:
    """`--` and (nested) `/- -/` comments replaced by spaces, newlines and columns kept; literals untouched (a
    `--` inside a string literal is no comment)."""
    if "--" not in text and "/-" not in text:
        return text
    out: list[str] = []
    index = 0
    for region in regions(text):
        if region.is_comment:
            out.append(text[index : region.start])
            out.append(_NOT_NEWLINE.sub(" ", text[region.start : region.end]))
            index = region.end
    out.append(text[index:])
    return "".join(out)


def code_chars(text: str) -> Iterator[tuple[int, str]]:
    """(index, char) of every character outside literals (strings, character literals, `«…»`; their quotes
    excluded). Comments are not skipped (mask them first), but nothing inside one opens a literal."""
    index = 0
    for region in regions(text):
        if region.is_comment:
            continue
        for offset, char in enumerate(text[index : region.start]):
            yield index + offset, char
        index = region.end
    for offset, char in enumerate(text[index:]):
        yield index + offset, char


def depth0_chars(text: str) -> Iterator[tuple[int, str]]:
    """(index, char) of every character outside string literals and brackets (a stray closer is ignored)."""
    depth = 0
    for index, char in code_chars(text):
        if char in OPEN_BRACKETS:
            depth += 1
        elif char in CLOSE_BRACKETS:
            depth = max(0, depth - 1)
        elif depth == 0:
            yield index, char


def find_depth0(text: str, needle: str, start: int = 0, *, not_followed_by: str = "") -> int:
    """Index of the first `needle` outside string literals and brackets, scanning from `start` (at depth 0 there),
    that is not followed by `not_followed_by`; -1 if none. `find_depth0("(a : T) : U", ":")` is 8."""
    for index, _ in depth0_chars(text[start:]):
        at = start + index
        if text.startswith(needle, at) and not (
            not_followed_by and text.startswith(not_followed_by, at + len(needle))
        ):
            return at
    return -1


def matching_close(text: str, start: int = 0) -> int:
    """Index of the bracket that closes the one at `start` (every bracket counted, string literals not looked
    at: binder lists have none); -1 when it is never closed."""
    depth = 0
    for index in range(start, len(text)):
        char = text[index]
        if char in OPEN_BRACKETS:
            depth += 1
        elif char in CLOSE_BRACKETS:
            depth -= 1
            if depth == 0:
                return index
    return -1


def bracket_delta(line: str) -> int:
    """Opening minus closing brackets outside string literals."""
    delta = 0
    for _, char in code_chars(line):
        if char in OPEN_BRACKETS:
            delta += 1
        elif char in CLOSE_BRACKETS:
            delta -= 1
    return delta


def read_as_lean(tactic: str) -> str:
    """The tactic with every `«…»`-escaped identifier component written plainly, as Lean reads the name
    (`«debug».skipKernelTC` is the option `debug.skipKernelTC`), so the deny list cannot be dodged by escaping."""
    out: list[str] = []
    index = 0
    while (start := tactic.find("«", index)) >= 0:
        close = tactic.find("»", start + 1)
        if close < 0:
            break  # no `»` after this `«`, nor after any later one (a pattern's search would try each: quadratic)
        out += [tactic[index:start], tactic[start + 1 : close]]
        index = close + 1
    out.append(tactic[index:])
    return "".join(out)


def doc_comment(docstring: str) -> str:
    """The doc comment restating `docstring` (`/-- … -/`), written before a declaration on its own line."""
    return f"/-- {docstring} -/"


def doc_comment_problem(docstring: str) -> str | None:
    """Why `docstring` cannot be restated as one doc comment (a `-/` that would end it early, a `/-` never
    closed), or None."""
    restated = doc_comment(docstring)
    end, closed = _block_end(restated, 0)
    if not closed:
        return "it opens a `/-` comment it never closes"
    if end != len(restated):
        return "it holds a `-/` that would end the doc comment early"
    return None
