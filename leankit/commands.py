"""Lean source as Lean's parser splits it: tokens, and where each command starts. A command may start at any column,
on the same line as a term: a term ends at the first token that cannot continue it, and a command keyword then opens
the next command (`abbrev X : ℕ := 1  instance(priority:=high)e : …` is two commands). Pure string work.

    [t.text for t in tokens("def«x» : ℕ := 1")]        # ["def", "x", ":", "ℕ", ":=", "1"]: `«x»` is a name
    [t.text for t in command_tokens("1\n  instance(priority:=high)e")]   # ["instance"]
    command_starts("open Real\nabbrev s : ℝ := sorry\n")                  # [0, 10]: two commands
    term_problem("1 + 1")                              # None: one term, fit for `:= (1 + 1)`
    term_problem("1) (2")                              # "… closes a bracket it never opened …"

Identifiers are read with Lean's character classes (`isIdFirst`, `isIdRest`, letter-like symbols, subscripts); a
name is a keyword only when the whole dotted name is one (`foo.def`, `def'` and `«def»` are names). Comments and
literals come from `leankit.text.regions`. The keywords are those of Lean 4's command parsers, Batteries' and
Mathlib's (docs/lean.md, "Lean source as text"): a Mathlib keyword used as a plain name without Mathlib is read as
a keyword here, which is the stricter reading. What the parser does after a parse error does not matter: a file
with an error never counts.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import NamedTuple

from leankit.text import (
    BRACKET_PAIRS,
    DOC_COMMENT,
    ID_FIRST,
    ID_REST,
    LITERAL,
    MODULE_DOC,
    NUMERAL,
    OPENER_OF,
    glues_to_name,
    literal_problem,
    read_two_ways,
    regions,
)

# The tokens that open a declaration or another command in Lean 4 core, Batteries and Mathlib. `import` opens the
# header. `deriving` opens a command only as `deriving instance` (after a structure it belongs to it). Kept by hand;
# `scripts/command_keywords.py` reads the command declarations out of the sources and prints any head missing here
# (docs/results.md, "The command words, scanned from the sources").
DECLARATION_KEYWORDS: frozenset[str] = frozenset({
    "abbrev", "def", "theorem", "lemma", "example", "instance", "axiom", "opaque", "structure", "class", "inductive",
    "coinductive", "mutual", "irreducible_def", "alias", "proof_wanted", "recall", "simproc", "dsimproc",
    "simproc_decl", "dsimproc_decl", "builtin_simproc", "builtin_dsimproc", "builtin_simproc_decl",
    "builtin_dsimproc_decl",
})
OTHER_COMMAND_KEYWORDS: frozenset[str] = frozenset({
    "import", "open", "export", "namespace", "section", "end", "variable", "variable?", "universe", "include", "omit",
    "set_option", "attribute", "notation", "notation3", "infix", "infixl", "infixr", "prefix", "postfix", "macro",
    "macro_rules", "syntax", "elab", "elab_rules", "declare_syntax_cat", "binder_predicate", "unif_hint",
    "initialize", "builtin_initialize", "add_decl_doc", "register_option", "register_builtin_option",
    "register_simp_attr", "register_label_attr", "declare_simp_like_tactic", "initialize_simps_projections",
    "assert_not_exists", "assert_not_imported", "suppress_compilation", "unsuppress_compilation", "run_cmd",
    "run_elab", "run_meta", "grind_pattern", "library_note", "compile_inductive", "compile_def", "seal", "unseal",
    "init_quot", "mk_iff_of_inductive_prop", "declare_aesop_rule_sets", "add_aesop_rules", "erase_aesop_rules",
    "deriving", "set_premise_selector", "test_extern", "declare_config_elab", "register_tactic_tag",
    "show_panel_widgets", "register_linter_set", "recommended_spelling", "register_error_explanation",
    "gen_injective_theorems", "variables", "library_note2", "norm_cast_add_elim", "set_library_suggestions",
    "extend_docs", "initialize_simps_projections?", "register_hint", "assert_exists", "deprecated_module",
    "lrat_proof", "name_poly_vars", "with_weak_namespace", "whatsnew", "sudo", "unset_option", "register_try?_tactic",
    "simproc_pattern", "grind_propagator", "declare_command_config_elab", "tactic_extension", "theorem_wanted",
    "def_wanted", "instance_wanted",
    # a fifth reading (core's Parser/Command.lean, Init, Lean.Meta; Mathlib's `#help command` over 2024-2026)
    "docs_to_verso", "cbv_simproc", "cbv_simproc_decl", "builtin_cbv_simproc",
    "builtin_cbv_simproc_decl", "cbv_simproc_pattern", "builtin_cbv_simproc_pattern", "builtin_simproc_pattern",
    "builtin_grind_propagator", "grind_annotated", "register_grind_attr", "register_sym_simp_attr", "reprove",
    "declare_uint_theorems", "declare_bitwise_uint_theorems", "declare_int_theorems", "declare_bitwise_int_theorems",
    "declare_uint_simprocs", "declare_sint_simprocs", "elab_stx_quot", "def_eval_config_item",
    "declare_config_getter", "declare_eval_bin", "register_sym_simp", "register_sym_dsimp", "init_grind_norm",
    "reset_grind_attrs", "deprecate", "guard_min_heartbeats", "count_heartbeats", "insert_to_additive_translation",
    "to_dual_insert_cast", "to_dual_insert_cast_fun", "assert_no_sorry", "recall?", "name_power_vars",
    "unlock_limits", "deprecated_syntax", "declare_core_config_elab", "declare_term_config_elab",
    "declare_config_elab_legacy", "declare_command_config_elab_legacy", "declare_eval_bin_bitwise",
    "declare_eval_bin_bool_pred", "to_additive_name_hint", "to_dual_name_hint", "aux_def", "end_local_scope",
    "stop_at_first_error", "register_aesop_check_option", "declare_aesop_exception", "make_elab_grind_config",
})
# Tokens that stand before a command's keyword and belong to it: declaration modifiers and attribute kinds.
MODIFIERS: frozenset[str] = frozenset({"private", "protected", "noncomputable", "unsafe", "partial", "nonrec",
                                       "local", "scoped", "public", "meta"})  # the last two: the module system's
COMMAND_KEYWORDS: frozenset[str] = DECLARATION_KEYWORDS | OTHER_COMMAND_KEYWORDS | MODIFIERS
_LONGEST_KEYWORD = max(map(len, COMMAND_KEYWORDS))  # a name's tail longer than this is no keyword

# Token kinds.
IDENT = "ident"
KEYWORD = "keyword"
SYMBOL = "symbol"
NUMBER = "number"
STRING = "string"
DOC = "doc"  # a `/-- … -/` doc comment (a token to Lean, unlike other comments)
MODULE = "module doc"  # a `/-! … -/` module doc: a command of its own

_IDENT = re.compile(rf"{ID_FIRST}{ID_REST}*(?:\.{ID_FIRST}{ID_REST}*)*")
_HASH_COMMAND = re.compile(rf"#{ID_FIRST}{ID_REST}*")  # #eval, #print, #check, #exit, … (`#[` is an array)
_SPACE = re.compile(r"\s+")
# What Lean's numeral may run on into after these readers end it (`numberFnAux`: `0x`, `0b`, `0o`, `1e`, `1E` take the
# letter and fail without a digit after it), and any other letter or digit with them: Lean ends `1opened` where these
# readers do, but which letters continue a numeral has changed with Lean's releases (the scientific `1e5`), and no
# honest text glues a name to a numeral. Not `!`, `?`, `'` or a subscript: no numeral reader of Lean takes one and
# none starts a name, so the numeral ends before it as before `)` (`5!` is Mathlib's `Nat.factorial 5` as `(n)!` and
# `n !` are; `2'x'` is `2` and a character literal, `leankit.text`).
_GLUED_TO_NUMERAL = re.compile(rf"{ID_FIRST}|[0-9]")
# `5.e…` with no exponent digits: Lean reads `5.` and then the exponent (`decimalNumberFn`'s `parseOptExp`) and stops
# at the missing digit; these readers read `5`, `.`, a name.
_EMPTY_EXPONENT = re.compile(r"\.[eE](?![+-]?[0-9])")
_ID_REST_CHAR = re.compile(ID_REST)


class Token(NamedTuple):
    """One token of Lean source: its kind, its text as written, its span (character offsets) and, for a name, the
    name as Lean reads it (`«x»` components written plainly)."""

    kind: str
    text: str
    start: int
    end: int
    name: str = ""


class Command(NamedTuple):
    """One command as Lean's parser reads it: text[start:end] (blanks after it excluded) and the keyword that
    makes it one (`def`, `open`, `#eval`, `/-!`, …)."""

    start: int
    end: int
    keyword: str


def _code_tokens(text: str, start: int, end: int) -> Iterator[Token]:
    """The tokens of text[start:end], which holds no comment and no literal."""
    index = start
    while index < end:
        space = _SPACE.match(text, index, end)
        if space is not None:
            index = space.end()
            continue
        found = _IDENT.match(text, index, end)
        if found is not None:
            word = found.group()
            kind = KEYWORD if word in COMMAND_KEYWORDS else IDENT
            yield Token(kind, word, index, found.end(), word)
            index = found.end()
            continue
        found = NUMERAL.match(text, index, end) or _HASH_COMMAND.match(text, index, end)
        if found is not None:
            word = found.group()
            yield Token(NUMBER, word, index, found.end()) if word[0] != "#" else Token(KEYWORD, word, index,
                                                                                        found.end(), word)
            index = found.end()
            continue
        length = 2 if text.startswith(("@[", ":="), index) else 1
        yield Token(SYMBOL, text[index : index + length], index, index + length)
        index += length


def _pieces(text: str) -> Iterator[Token]:
    """The tokens of `text` before escaped names are joined with their dotted neighbours."""
    index = 0
    for region in regions(text):
        yield from _code_tokens(text, index, region.start)
        index = region.end
        body = text[region.start : region.end]
        if region.kind == LITERAL and body[0] == "«":
            yield Token(IDENT, body, region.start, region.end, body[1:-1] if region.closed else body[1:])
        elif region.kind == DOC_COMMENT:
            yield Token(DOC, body, region.start, region.end)
        elif region.kind == MODULE_DOC:
            yield Token(MODULE, body, region.start, region.end)
        elif region.kind == LITERAL:
            yield Token(STRING, body, region.start, region.end)
    yield from _code_tokens(text, index, len(text))


def tokens(text: str) -> Iterator[Token]:
    """Lean's tokens of `text`, in order, comments skipped (a doc comment or a module doc is a token). An escaped
    name `«…»` is a name (never a keyword), one with the dotted parts written next to it (`foo.«bar».baz`): its parts
    are joined once, where it ends (a chain of escaped parts costs its length, not its length squared)."""
    first: Token | None = None  # a name that what follows may continue: its first piece
    names: list[str] = []  # the names of its parts
    end = 0  # where it ends
    dot: Token | None = None  # the `.` right after it
    for piece in _pieces(text):
        if first is not None and piece.start == (end if dot is None else dot.end):
            if dot is None and piece.text == ".":
                dot = piece
                continue
            escaped = piece.text[0] == "«" or text[end - 1] == "»"
            if dot is not None and piece.kind in (IDENT, KEYWORD) and escaped:
                names.append(piece.name)
                end, dot = piece.end, None
                continue
        if first is not None:
            yield _name_token(text, first, names, end)
            if dot is not None:
                yield dot
        first, names, end, dot = (piece, [piece.name], piece.end, None) if piece.kind in (IDENT, KEYWORD) else (
            None, [], 0, None)
        if first is None:
            yield piece
    if first is not None:
        yield _name_token(text, first, names, end)
        if dot is not None:
            yield dot


def _name_token(text: str, first: Token, names: list[str], end: int) -> Token:
    """The name held by `tokens`: its first piece alone, or its parts joined."""
    if len(names) == 1:
        return first
    return Token(IDENT, text[first.start : end], first.start, end, ".".join(names))


def _opens_command(token: Token) -> bool:
    """Whether `token` is a command keyword wherever it stands (a modifier included; `deriving` alone is not)."""
    return (token.kind == KEYWORD and token.text != "deriving") or token.kind == MODULE or token.text == "@["


def command_tokens(text: str) -> list[Token]:
    """The tokens of `text` that open a command, or stand before one as its modifier, wherever they stand: no term or
    tactic holds one (`deriving instance`, `@[…]` and a `/-! … -/` module doc included)."""
    found: list[Token] = []
    listed = list(tokens(text))
    for at, token in enumerate(listed):
        if token.text == "deriving":
            if at + 1 < len(listed) and listed[at + 1].text == "instance":
                found.append(token)
        elif _opens_command(token):
            found.append(token)
    return found


def _skip_brackets(listed: list[Token], at: int) -> int:
    """The index just past the bracket group opening at listed[at] (`@[` or `[`), or len(listed)."""
    depth = 0
    for index in range(at, len(listed)):
        text = listed[index].text
        if text in ("@[", "[") and listed[index].kind == SYMBOL:
            depth += 1
        elif text == "]" and listed[index].kind == SYMBOL:
            depth -= 1
            if depth == 0:
                return index + 1
    return len(listed)


def _prefix_end(listed: list[Token], at: int) -> int:
    """The index of the first token after the run of command prefixes (doc comments, `@[…]`, modifiers) that
    starts at listed[at]; `at` itself when listed[at] is none."""
    index = at
    while index < len(listed):
        token = listed[index]
        if token.kind == DOC or (token.kind == KEYWORD and token.text in MODIFIERS):
            index += 1
        elif token.text == "@[" and token.kind == SYMBOL:
            index = _skip_brackets(listed, index)
        else:
            return index
    return index


def _head(listed: list[Token], at: int) -> bool:
    """Whether listed[at] is the keyword a command is named by (a modifier is not; `deriving` only before
    `instance`)."""
    token = listed[at]
    if token.kind != KEYWORD or token.text in MODIFIERS:
        return False
    return token.text != "deriving" or (at + 1 < len(listed) and listed[at + 1].text == "instance")


def _body_start(listed: list[Token], at: int, keyword: str) -> int:
    """Where the scan goes on after a command's keyword (listed[at] is the token after it): past the tokens that are
    part of the command although they are keywords or brackets of their own."""
    following = listed[at].text if at < len(listed) else ""
    if keyword == "mutual":  # one command up to its `end`
        while at < len(listed) and not (listed[at].kind == KEYWORD and listed[at].text == "end"):
            at += 1
        return at + 1
    if keyword == "attribute" and following == "[":
        return _skip_brackets(listed, at)
    if (keyword, following) in {("class", "inductive"), ("class", "abbrev"), ("open", "scoped"),
                                ("deriving", "instance")}:
        return at + 1
    return at


def commands(text: str) -> list[Command]:
    """The commands of `text` as Lean's parser reads a text that parses without error: each starts at a command
    keyword wherever it stands, with its prefixes (doc comment, `@[…]`, modifiers), and a command after `… in`
    is one with it; `attribute […]` holds no command, `mutual … end` is one, and so are `class inductive`,
    `deriving instance` and `open scoped`. Text before the first command keyword (none in a well-formed file) is
    a command of its own, keyword ""."""
    listed = list(tokens(text))
    starts: list[tuple[int, str]] = []
    at = 0
    joined = False  # the command keyword next belongs to the command before it (`open Foo in theorem …`)
    while at < len(listed):
        token = listed[at]
        after = _prefix_end(listed, at)
        keyword = ""
        if token.kind == MODULE:
            keyword, after = token.text[:3], at
        elif after < len(listed) and _head(listed, after):
            keyword = listed[after].text
        if keyword:
            if not joined or not starts:
                starts.append((token.start, keyword))
            joined = False
            at = _body_start(listed, after + 1, keyword)
            continue
        if not starts:
            starts.append((token.start, ""))
        joined = token.kind == IDENT and token.text == "in"
        at = _skip_brackets(listed, at) if token.text == "@[" and token.kind == SYMBOL else at + 1
    if not starts:
        return []
    ends = [start for start, _ in starts[1:]] + [len(text)]
    return [Command(start, start + len(text[start:end].rstrip()), keyword)
            for (start, keyword), end in zip(starts, ends, strict=True)]


def command_starts(text: str) -> list[int]:
    """Where each command of `text` starts (character offsets; `commands`)."""
    return [command.start for command in commands(text)]


def lexical_problem(text: str) -> str | None:
    """Why Lean may read `text` otherwise than these readers do, or None: where its tokenizer breaks off inside a
    token, its parser reads on from there, so what lay inside the token is code to Lean (`leankit.text.literal_problem`:
    a literal left open, an unknown escape, a quote that is no character literal; a numeral glued to a name, `0xopen`,
    `0bend`, `1eopen`, `5.eopen`, where Lean stops after `0x`, `1e` or `5.e`, but not `5!`: `_numeral_problem`); or
    where the reading depends on the notation tokens in scope (`leankit.text.read_two_ways`; a name glued to a symbol
    and ending in a command keyword, `→oopen`). Model text with any of these is refused (`burnqed.lean.guard`)."""
    problem = literal_problem(text)
    if problem is not None:
        return problem
    place = read_two_ways(text)
    if place is not None:
        return (f"has a quote or comment opener glued to a symbol at {text[max(0, place - 2):place + 3]!r}: Lean "
                "reads it by the notation tokens in scope (put a space before it)")
    for token in tokens(text):
        problem = _numeral_problem(text, token) if token.kind == NUMBER else None
        if problem is not None:
            return problem
        if token.kind == IDENT and token.start > 0 and glues_to_name(text[token.start - 1]):
            head = token.text.split(".")[0]  # a token such as Mathlib's `→o` may take the name's first letters
            if any(head[cut:] in COMMAND_KEYWORDS for cut in range(max(1, len(head) - _LONGEST_KEYWORD), len(head))):
                shown = text[token.start - 1 : token.end]
                return f"has a name glued to a symbol at {shown!r}: a notation token may end in it, before a command"
    return None


def _numeral_problem(text: str, token: Token) -> str | None:
    """Why Lean may end the numeral `token` elsewhere than these readers do, or None (`lexical_problem`): a letter or
    digit glued after it (`0xopen`, `1eopen`: Lean stops after `0x`, `1e`), a `_` ending it (Lean needs a digit after
    one), or `.e` with no exponent digits after a numeral that is no field index (`5.eopen`; `h.2.elim` is the field
    `2` of `h`, read by Lean's `fieldIdx`, which takes digits only). A `!`, `?`, `'` or subscript glued after it is
    none (`5!`, `2 * 3!`)."""
    shown = text[token.start : token.end + 4]
    if _GLUED_TO_NUMERAL.match(text, token.end):
        return f"has a numeral glued to a name at {shown!r}: Lean's numeral may end elsewhere"
    if token.text.endswith("_"):
        return f"has a numeral ending in `_` at {shown!r}: Lean's numeral needs a digit after it"
    before = text[max(0, token.start - 2) : token.start]  # `h.2`, `(x).2`: a field index
    field = len(before) == 2 and before[1] == "." and (before[0] in ")]}⟩»" or bool(_ID_REST_CHAR.match(before[0])))
    if not field and _EMPTY_EXPONENT.match(text, token.end):
        return f"has a numeral glued to a name at {text[token.start : token.end + 6]!r}: Lean reads an exponent there"
    return None


def term_problem(value: str) -> str | None:
    """Why `value` cannot stand as one term inside `(VALUE)` where Lean reads a command's term, or None: it is
    empty, leaves a comment or literal open, holds a doc comment, a command keyword (a term ends before one and
    the command runs) or brackets that do not pair as Lean reads them."""
    if not value.strip():
        return "it is empty"
    for region in regions(value):
        if not region.closed:
            what = "string or name literal" if region.kind == LITERAL else region.kind
            return f"it leaves a {what} open at character {region.start}"
    listed = list(tokens(value))
    for token in listed:
        if token.kind in (DOC, MODULE):
            return f"it holds a {'doc comment' if token.kind == DOC else 'module doc'} (no part of a term)"
        if token.kind == KEYWORD or token.text == "@[":
            return f"it holds the command keyword {token.text!r} (Lean ends the term there and runs a command)"
    return bracket_problem(listed)


def bracket_problem(listed: list[Token]) -> str | None:
    """Why the brackets of these tokens do not pair (a closer before its opener, another kind, one left open), or
    None."""
    stack: list[Token] = []
    for token in listed:
        if token.kind != SYMBOL:
            continue
        if token.text in BRACKET_PAIRS:
            stack.append(token)
        elif token.text in OPENER_OF:
            if not stack:
                return f"it closes a bracket {token.text!r} it never opened (character {token.start})"
            opener = stack.pop()
            if BRACKET_PAIRS[opener.text] != token.text:
                return (f"it closes {opener.text!r} (character {opener.start}) with {token.text!r} (character "
                        f"{token.start})")
    if stack:
        return f"it leaves {stack[-1].text!r} open (character {stack[-1].start})"
    return None
