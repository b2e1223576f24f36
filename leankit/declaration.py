"""Lean declarations as text: header, name, binders, type and body of `theorem … := …`, and the index's ∀-form
statement. Pure string work: the one declaration parser of data preparation and the replay server's frontend.

    decl = parse_declaration("import Mathlib\\n\\ntheorem t (x : ℝ) (h : 0 < x) : x ^ 2 > 0 := by positivity")
    decl.statement      # "∀ (x : ℝ) (h : 0 < x), x ^ 2 > 0"   (the theorem index statement)
    decl.binders        # "(x : ℝ) (h : 0 < x)"                (with the type: the index signature)
    decl.header         # "import Mathlib"
    decl.has_proof      # True ("by sorry", "by" and "sorry" bodies are no proof)
    proof_tactics(decl) # ["positivity"]: a theorem starts as written, so its proof replays with no `intro`

Comments are masked (columns kept) before anything is parsed; the doc comment right before a declaration is its
`docstring`; files split into commands at the column-0 keywords of `COMMAND_START` (docs/data.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from leankit.proof_text import split_proof
from leankit.statements import doc_comment_before, doc_text
from leankit.text import (
    ATTRIBUTE_PATTERN,
    CLOSE_BRACKETS,
    MODIFIERS_PATTERN,
    NOT_A_PROOF_WORDS,
    OPEN_BRACKETS,
    THEOREM_KEYWORDS,
    code_chars,
    depth0_chars,
    find_depth0,
    mask_comments,
    matching_close,
    normalize_newlines,
)

# A theorem, lemma or example declaration's head: its attributes, modifiers and keyword (`leanfile` finds the
# declarations of a file with it).
DECLARATION_HEAD = ATTRIBUTE_PATTERN + MODIFIERS_PATTERN + "(" + "|".join(THEOREM_KEYWORDS) + r")(?![\w'])"
_DECLARATION = re.compile(r"^[ \t]*" + DECLARATION_HEAD, re.MULTILINE)
_DECLARATION_HERE = re.compile(r"[ \t]*" + DECLARATION_HEAD)
_NAME = re.compile(r"\s+([^\s(\[{⟨⦃:]+)")
_PLACEHOLDER_BODY = re.compile(r"^(?:by)?\s*(?:sorry)?$")
# Terms of a statement that own the next `:=` at their depth: `let x := v; b` (`letI`, `let rec`, `let_fun`) and
# `have h : T := v; b` (`haveI`). A `:=` inside brackets (a structure instance `{ x := 1 }`, a default argument
# `(n : ℕ := 3)`, `⟨…⟩`) is never at depth 0; `show T from e` and `suffices h : T from e` own none.
_OWNS_ASSIGN = re.compile(r"(?<![\w'.])(?:let|letI|let_fun|have|haveI)(?![\w'!?])")


@dataclass(frozen=True, slots=True)
class Declaration:
    """One `theorem`/`lemma`/`example` as text (comments removed, whitespace collapsed in the signature)."""

    header: str | None  # the commands before the declaration (imports, open, set_option), or None
    name: str | None  # the declared name; None for `example`
    binders: str  # the binders before the colon, e.g. "(x : ℝ) (h : 0 < x)"; "" when there are none
    type: str  # the type after the colon
    body: str | None  # the text after `:=` (None when the declaration has no `:=`)
    source: str  # the original text from the declaration keyword on (what `split_proof` reads)
    keyword: str = "theorem"  # theorem | lemma | example
    # Offsets in the text parsed (after `parse_declaration`'s newline and tab normalisation): the declared name
    # ((-1, -1) for `example`), the `:=` (-1 when there is none).
    name_span: tuple[int, int] = (-1, -1)
    assign: int = -1
    docstring: str | None = None  # the text of the `/-- … -/` right before the declaration (its attribute)
    # Where the name, binders and type stand in `source`: from after the keyword to the `:=` ((-1, -1) without one).
    source_statement: tuple[int, int] = (-1, -1)

    @property
    def statement(self) -> str:
        """The ∀-form type: `∀ BINDERS, TYPE`, or the type itself when there are no binders."""
        return f"∀ {self.binders}, {self.type}" if self.binders else self.type

    @property
    def signature(self) -> str:
        """The binder form as written after the name: `(x : ℝ) (h : 0 < x) : T`, or `: T` without binders
        (`records.theorem.Theorem.signature`)."""
        return f"{self.binders} : {self.type}" if self.binders else f": {self.type}"

    @property
    def binder_names(self) -> list[str]:
        """The names the binders introduce, in order (`_` for an anonymous instance binder)."""
        return binder_names(self.binders)

    @property
    def has_proof(self) -> bool:
        """True when the body is a proof: not missing, empty, `by` alone or `sorry`."""
        if self.body is None:
            return False
        return _PLACEHOLDER_BODY.match(" ".join(self.body.split())) is None


def uses_sorry(text: str) -> bool:
    """True when `text` (comments ignored) uses `sorry`, `admit` or `cheat` as a word (the whole theorem is then
    dropped: `leankit.text.NOT_A_PROOF_WORDS`)."""
    return NOT_A_PROOF_WORDS.search(mask_comments(text)) is not None


def parse_declaration(text: str, name: str | None = None) -> Declaration | None:
    """The declaration in `text` (the one named `name` when given and present, else the first), or None
    when there is none or its signature has no type."""
    normalized = text.replace("\r\n", "\n").replace("\r", "\n").expandtabs(2)
    masked = mask_comments(normalized)
    matches = list(_DECLARATION.finditer(masked))
    if not matches:
        return None
    chosen = matches[0]
    if name is not None:
        for match in matches:
            found = _NAME.match(masked, match.end())
            if match.group(1) != "example" and found is not None and found.group(1) == name:
                chosen = match
                break
    return _parse_at(normalized, masked, chosen)


def declaration_in(text: str) -> Declaration | None:
    """The declaration that opens `text` (one command of a file: its docstring, attribute or keyword first), read
    as it is (no newline or tab normalisation, so offsets are the text's own); None when `text` opens no
    declaration or it has no type."""
    masked = mask_comments(text)
    match = _DECLARATION.match(masked, _first_line(masked))
    return None if match is None else _parse_at(text, masked, match)


def is_declaration(text: str) -> bool:
    """`text` opens a `theorem`/`lemma`/`example` (whether or not it parses; comments before it, a docstring
    among them, are no part of it)."""
    masked = mask_comments(text)
    return _DECLARATION.match(masked, _first_line(masked)) is not None


def _first_line(masked: str) -> int:
    """Where the line of the first non-blank character of a comment-masked text starts."""
    first = len(masked) - len(masked.lstrip())
    return masked.rfind("\n", 0, first) + 1


def _parse_at(text: str, masked: str, match: re.Match[str]) -> Declaration | None:
    position = match.end()
    declared: str | None = None
    name_span = (-1, -1)
    if match.group(1) != "example":
        found = _NAME.match(masked, position)
        if found is None:
            return None
        declared = found.group(1)
        name_span = (found.start(1), found.end(1))
        position = found.end()
    colon = find_depth0(masked, ":", position, not_followed_by="=")
    if colon < 0:
        return None
    assign = declaration_assign(masked, colon + 1)
    end = _next_command(masked, position)
    if assign >= end:
        assign = -1
    body = masked[assign + 2 : end] if assign >= 0 else None
    binders = _one_line(masked, position, colon)
    type_ = _one_line(masked, colon + 1, assign if assign >= 0 else end)
    if not type_:
        return None
    preamble = [line.rstrip() for line in masked[: match.start()].split("\n") if line.strip()]
    opening = match.start() + len(match.group()) - len(match.group().lstrip())  # its attribute, modifier or keyword
    doc = doc_comment_before(text, opening)
    raw = text[match.start() : end]
    source_start = match.start() + len(raw) - len(raw.lstrip())
    return Declaration(
        header="\n".join(preamble) or None,
        name=declared,
        binders=binders,
        type=type_,
        body=body,
        source=raw.strip(),
        keyword=match.group(1),
        name_span=name_span,
        assign=assign,
        docstring=doc_text(text, doc) if doc is not None else None,
        source_statement=(match.end() - source_start, assign - source_start) if assign >= 0 else (-1, -1),
    )


def declaration_assign(masked: str, start: int) -> int:
    """Where the declaration's `:=` is in a comment-masked text, scanning its type from `start` (after the colon):
    the first `:=` at bracket depth 0 that no `let`/`have` of the type owns (each owns the next one at depth 0, so
    `: let (a, b) := p; a = b := by …` has its `:=` after `b`); -1 when there is none."""
    owed = 0
    for index, char in depth0_chars(masked[start:]):
        at = start + index
        if char == ":" and masked.startswith(":=", at):
            if not owed:
                return at
            owed -= 1
        elif char in "lh" and _OWNS_ASSIGN.match(masked, at):
            owed += 1
    return -1


def _one_line(masked: str, start: int, end: int) -> str:
    """`masked[start:end]` on one line, whitespace collapsed. A line break that ends a `let`/`have` value (the next
    line starts at or left of the keyword's column: Lean reads no argument of the value there) is written `;`, which
    Lean reads the same; collapsed to a space, the next line would be read as an argument of the value."""
    text = masked[start:end]
    code = {index for index, _ in code_chars(text)}
    breaks = sorted({at for found in _OWNS_ASSIGN.finditer(text) if found.start() in code
                     and (at := _value_break(masked, start + found.start(), end)) >= 0})
    pieces: list[str] = []
    last = start
    for at in breaks:
        pieces.append(masked[last:at] + ";")
        last = at
    pieces.append(masked[last:end])
    return " ".join("".join(pieces).split())


def _value_break(masked: str, keyword: int, end: int) -> int:
    """Where the line break that ends the value of the `let`/`have` at `keyword` is (before `end`), or -1 when its
    value ends otherwise (a `;`, a closing bracket, `end`)."""
    column = keyword - (masked.rfind("\n", 0, keyword) + 1)
    depth = 0
    assign = -1  # where the keyword's `:=` is
    valued = False  # the value has begun
    for index, char in code_chars(masked[keyword:end]):
        at = keyword + index
        if assign >= 0 and at > assign + 1 and not char.isspace():
            valued = True
        if char in OPEN_BRACKETS:
            depth += 1
        elif char in CLOSE_BRACKETS:
            depth -= 1
            if depth < 0:
                return -1
        elif depth == 0 and assign < 0 and masked.startswith(":=", at):
            assign = at
        elif depth == 0 and valued and char == ";":
            return -1
        elif depth == 0 and valued and char == "\n":
            rest = masked[at + 1 : end]
            indent = len(rest) - len(rest.lstrip(" "))
            if rest.strip() and rest[indent] != "\n" and indent <= column:
                return at
    return -1


def binder_names(binders: str) -> list[str]:
    """Names introduced by a binder list: `(a b : ℝ) {n : ℕ} [Fintype α] (h : a < b)` → a, b, n, _, h."""
    names: list[str] = []
    index = 0
    while index < len(binders):
        char = binders[index]
        if char.isspace():
            index += 1
            continue
        if char in OPEN_BRACKETS:
            close = matching_close(binders, index)
            if close < 0:
                close = len(binders)  # never closed: the rest of the list is this binder
            inner = binders[index + 1 : close]
            if char == "{" and inner.startswith("{") and inner.endswith("}"):
                inner = inner[1:-1]  # Lean 3 style strict implicit `{{x : α}}`
            head, sep, _ = _split_depth0(inner, ":")
            if char == "[":
                names.append(head.strip() if sep and head.strip() else "_")
            else:
                names.extend(head.split() if sep else inner.split())
            index = close + 1
            continue
        end = index
        while end < len(binders) and not binders[end].isspace() and binders[end] not in OPEN_BRACKETS:
            end += 1
        names.append(binders[index:end])  # an untyped binder `x`
        index = end
    return names


def binder_hypotheses(binders: str) -> list[str] | None:
    """The hypotheses a binder list puts in context, as `names : type`: `(x y : ℝ) {n : ℕ} [Fintype α]
    [inst : Foo α] (h : 0 < x)` → `x y : ℝ`, `n : ℕ`, `inst : Foo α`, `h : 0 < x` (an anonymous instance binder
    adds no named hypothesis). None when a binder is not bracketed or not closed."""
    hyps: list[str] = []
    rest = binders.strip()
    while rest:
        if rest[0] not in OPEN_BRACKETS:
            return None
        close = matching_close(rest)
        if close < 0:
            return None
        inner, rest = rest[1:close], rest[close + 1 :].strip()
        names, sep, type_ = _split_depth0(inner, ":")
        if sep:
            hyps.append(f"{' '.join(names.split())} : {' '.join(type_.split())}")
    return hyps


def proof_tactics(decl: Declaration) -> list[str]:
    """The tactics that replay `decl`'s proof from its start (the declaration as written: binders in context): the
    body's top-level tactics (`tactic_text.split_proof`, `have … := by` blocks split). Empty when there is no
    proof."""
    if not decl.has_proof:
        return []
    # The statement blanked (columns kept), so the proof starts at the declaration's `:=`, not a `let`'s.
    begin, assign = decl.source_statement
    blank = re.sub(r"[^\n]", " ", decl.source[begin:assign])
    return split_proof(decl.source[:begin] + blank + decl.source[assign:])


def body_tactics(text: str) -> list[str]:
    """The tactics of a bare proof body (`nlinarith [...]`, `by simp`) written for a theorem's declaration (its
    binders in context)."""
    return split_proof(text)


def _split_depth0(text: str, needle: str) -> tuple[str, str, str]:
    index = find_depth0(text, needle, not_followed_by="=")
    if index < 0:
        return text, "", ""
    return text[:index], needle, text[index + len(needle) :]


COMMAND_KEYWORDS: tuple[str, ...] = (
    "private", "protected", "noncomputable", "nonrec", "unsafe", "partial", "theorem", "lemma", "example", "def",
    "abbrev", "instance", "end", "namespace", "section", "import", "prelude", "open", "set_option", "variable",
    "universe", "attribute", "local", "scoped", "notation", "infix", "infixl", "infixr", "prefix", "postfix",
    "macro", "macro_rules", "syntax", "elab", "structure", "class", "inductive", "axiom", "opaque", "mutual",
    "export", "run_cmd",
)
# A command starts at column 0 with one of these (or an attribute, or a `#`-command such as `#print`).
COMMAND_START = re.compile(r"^(?:@\[|#\w|(?:" + "|".join(COMMAND_KEYWORDS) + r")(?![\w']))", re.MULTILINE)
_COMMAND = COMMAND_START
_IMPORT_LINE = re.compile(r"^[ \t]*import(?![\w'])")


def strip_imports(header: str | None) -> str | None:
    """A header as the theorem index keeps it: comments and `import` lines removed, blank lines dropped,
    everything else (open, set_option, namespace, definitions) kept in order; None when nothing is left."""
    if header is None:
        return None
    lines = [line.rstrip() for line in mask_comments(normalize_newlines(header)).split("\n")]
    kept = [line for line in lines if line.strip() and not _IMPORT_LINE.match(line)]
    return "\n".join(kept) or None


def declaration_at(masked: str, start: int) -> bool:
    """True when a theorem, lemma or example declaration starts at `start` of `masked` (a line start, or where a
    declaration follows `… in` on its line), after blanks."""
    return _DECLARATION_HERE.match(masked, start) is not None


def command_starts(masked: str) -> list[int]:
    """Where each column-0 command of a (comment-masked) Lean file starts, in order."""
    return [found.start() for found in _COMMAND.finditer(masked)]


def _next_command(masked: str, start: int) -> int:
    """Where the next column-0 command starts (the end of this declaration)."""
    found = _COMMAND.search(masked, start)
    return len(masked) if found is None else found.start()


# ---------------------------------------------------------------------------------------------------
# Namespaces in a header. Inside `namespace Ns`, `theorem name` declares `Ns.name`, and `theorem Ns.name` would
# declare `Ns.Ns.name`. burnqed names a theorem by the constant Lean declares and restates it as `theorem NAME`
# under its header (the start and the compile), so a header keeps no open namespace: `namespace Ns` becomes
# `namespace Ns` + `end Ns` (Lean registers a namespace when a `namespace` command opens it, and `open Ns` of a
# namespace nothing registered is Lean's error `unknown namespace`), then `section` + `open Ns` (the namespace's
# names still resolve); its `end Ns` becomes `end`, and the theorem is named `Ns.name`. One rewrite, used by
# `.lean` files (`burnqed.data.leanfile`) and by every theorem record (`records.theorem.Theorem`: a header from a
# jsonl row or an index).

_SCOPE_COMMAND = re.compile(r"^(namespace|section|end)(?![\w'])\s*([^\s]*)")


def track_scope(scopes: list[list[str]], command: str) -> str:
    """Follow a `namespace`/`section`/`end` command (`scopes`: the open namespaces' name parts, [] for a
    section) and return its text for a header; any other command is returned as it is."""
    found = _SCOPE_COMMAND.match(command)
    if found is None:
        return command
    keyword, name = found.group(1), found.group(2)
    if keyword == "namespace":
        scopes.append(name.split("."))
        full = ".".join(part for scope in scopes for part in scope)
        return f"namespace {full}\nend {full}\nsection\nopen {full}"
    if keyword == "section":
        scopes.append([])
        return command
    closed = scopes.pop() if scopes else []
    return "end" if closed else command


def _registers(line: str, following: str) -> bool:
    """`line` is `namespace Ns` and `following` its `end Ns`: the pair that registers Ns, kept as it is."""
    found = _SCOPE_COMMAND.match(line)
    return found is not None and found.group(1) == "namespace" and following == f"end {found.group(2)}"


def qualified_name(name: str, scopes: list[list[str]]) -> str:
    """The constant `theorem name` declares with `scopes` open (`_root_.x` is `x`)."""
    if name.startswith("_root_."):
        return name.removeprefix("_root_.")
    parts = [part for scope in scopes for part in scope]
    return ".".join([*parts, name])


def scoped_header(header: str | None, name: str) -> tuple[str | None, str]:
    """`header` with its namespaces written as sections that open them, and the constant `theorem name` declares
    after the original header (see above). A name that already starts with the open namespaces is taken as
    qualified (an index names theorems by their constant). Unchanged when the header opens no namespace;
    applying it twice changes nothing more."""
    if header is None:
        return None, name
    lines = normalize_newlines(header).split("\n")
    masked = mask_comments("\n".join(lines)).split("\n")
    if not any(_SCOPE_COMMAND.match(line.strip()) and line.strip().startswith("namespace") for line in masked):
        return header, name
    scopes: list[list[str]] = []
    out: list[str] = []
    registering = False  # the line is the `end Ns` of a `namespace Ns` that only registers Ns (written above)
    for index, (line, code) in enumerate(zip(lines, masked, strict=True)):
        stripped = code.strip()
        if registering or _registers(stripped, masked[index + 1].strip() if index + 1 < len(masked) else ""):
            registering = not registering
            out.append(line)
            continue
        out.append(track_scope(scopes, stripped) if _SCOPE_COMMAND.match(stripped) else line)
    prefix = ".".join(part for scope in scopes for part in scope)
    if prefix and not name.startswith(f"{prefix}.") and not name.startswith("_root_."):
        name = qualified_name(name, scopes)
    elif name.startswith("_root_."):
        name = name.removeprefix("_root_.")
    return "\n".join(out), name
