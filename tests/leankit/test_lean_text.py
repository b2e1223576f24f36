"""Lean source as text: comments and literals as Lean reads them, comment masking, statements as users write
them, the bracket scanners and the two word lists."""

from __future__ import annotations

import re

import pytest

from burnqed.config import DEFAULT_DENY
from leankit.text import (
    BLOCK_COMMENT,
    BRACKET_PAIRS,
    DOC_COMMENT,
    LINE_COMMENT,
    LITERAL,
    MODULE_DOC,
    NOT_A_PROOF_WORDS,
    OPENER_OF,
    SORRY_WORDS,
    Region,
    Statement,
    append_code,
    block_comment_end,
    bracket_delta,
    code_chars,
    depth0_chars,
    doc_comment,
    doc_comment_before,
    doc_comment_problem,
    doc_comments,
    doc_text,
    ends_getelem,
    find_depth0,
    literal_problem,
    mask_comments,
    matching_close,
    read_as_lean,
    read_statement,
    read_two_ways,
    regions,
)


def test_mask_comments_keeps_columns_newlines_and_strings() -> None:
    text = 'simp -- sorry\n/- a /- nested -/ comment -/ exact "-- not a comment"'
    masked = mask_comments(text)
    assert len(masked) == len(text) and masked.count("\n") == 1
    comment = "/- a /- nested -/ comment -/"
    assert masked == "simp" + " " * len(" -- sorry") + "\n" + " " * len(comment) + ' exact "-- not a comment"'
    assert mask_comments("/- unterminated") == " " * len("/- unterminated")


def test_brackets_pair_up_both_ways() -> None:
    assert all(OPENER_OF[close] == opener for opener, close in BRACKET_PAIRS.items())
    assert bracket_delta('f (a ⟨b, c⟩ "(" [') == 2
    assert "".join(char for _, char in depth0_chars('a (b c) "d" e')) == "a   e"


def test_sorry_words_are_leans_and_cheat_is_no_proof_either() -> None:
    assert SORRY_WORDS.search("exact sorry") and SORRY_WORDS.search("admit")
    assert SORRY_WORDS.search("cheat") is None  # Lean 4 has no `cheat`: the replay server must not answer hasSorry
    assert NOT_A_PROOF_WORDS.search("cheat") and NOT_A_PROOF_WORDS.search("exact sorry")
    for word in ("sorry_lemma", "h.sorry", "cheat'", "admits"):
        assert NOT_A_PROOF_WORDS.search(word) is None, word
    # The guard refuses every word that makes a proof no proof.
    for word in ("sorry", "admit", "cheat"):
        assert any(re.search(pattern, word) for pattern in DEFAULT_DENY), word


def test_find_depth0_skips_brackets_and_strings_and_starts_fresh_at_start() -> None:
    text = '(a : T) {s : "x : y"} : U := by simp'
    assert find_depth0(text, ":") == 22  # the binders' colons are inside brackets, the string's inside quotes
    assert find_depth0(text, ":", not_followed_by="=") == 22
    assert find_depth0(text, ":=") == 26
    assert find_depth0("a := b : c", ":", not_followed_by="=") == 7  # `:=` is not a type colon
    assert find_depth0("(a : b", ":") == -1  # never closed: everything after `(` is inside
    assert find_depth0("(a : b", ":", 1) == 3  # scanning from 1, the `(` is behind: depth 0 there
    assert find_depth0("ab", ":") == -1


def test_matching_close_counts_every_bracket_kind() -> None:
    assert matching_close("(a [b] ⟨c⟩) d") == 10
    assert matching_close("x {y} z", 2) == 4
    assert matching_close("(a (b)") == -1  # never closed


# ------------------------------------------------------------------------ comments and literals, as Lean reads them


def test_regions_are_lean_comments_and_literals() -> None:
    text = "a -- x\n/- b /- c -/ -/ /-- d -/ /-! e -/ \"-- f\" 'g' «-- h» r#\"i\"# k"
    assert [(r.kind, text[r.start : r.end]) for r in regions(text)] == [
        (LINE_COMMENT, "-- x"), (BLOCK_COMMENT, "/- b /- c -/ -/"), (DOC_COMMENT, "/-- d -/"),
        (MODULE_DOC, "/-! e -/"), (LITERAL, '"-- f"'), (LITERAL, "'g'"), (LITERAL, "«-- h»"),
        (LITERAL, 'r#"i"#')]
    # A quote inside a comment opens no string; a prime after a name is part of it (`h'`, `f⁻¹'`), no literal.
    assert [r.kind for r in regions("-- don't \"quote\nh' = f ⁻¹' s")] == [LINE_COMMENT]
    # A character literal holding a double quote does not open a string (the comment after it is one).
    assert [r.kind for r in regions("'\"' = c -- note")] == [LITERAL, LINE_COMMENT]
    assert mask_comments("'\"' -- c") == "'\"'     "
    assert "".join(c for _, c in code_chars("f '(' \"(\" «(» x")) == "f    x"
    assert [r.closed for r in regions('a /- b "c')] == [False]
    assert [(r.kind, r.closed) for r in regions('"a -- b')] == [(LITERAL, False)]


# Where a token starts decides what opens, as Lean's `tokenFn` reads it: a numeral ends before a quote or a raw
# string's `r` (`1'"'` is `1` and the character literal `'"'`), a name runs on through `'`, `!` and `?`, and a doc
# comment's body starts after its `/--`.
@pytest.mark.parametrize(("text", "read"), [
    ("exact 1'\"'\n#eval 1 --\"", [(LITERAL, "'\"'"), (LINE_COMMENT, '--"')]),
    ('exact 2r"\\" open Real --"', [(LITERAL, 'r"\\"'), (LINE_COMMENT, '--"')]),
    ("x.1'\"' -- c", [(LITERAL, "'\"'"), (LINE_COMMENT, "-- c")]),
    ("'a''b'", [(LITERAL, "'a'"), (LITERAL, "'b'")]),
    ("«x»'y'", [(LITERAL, "«x»"), (LITERAL, "'y'")]),
    ("h!'\"' -- c\"", [(LITERAL, '"\' -- c"')]),
    ("2x'\"' c\"", [(LITERAL, '"\' c"')]),
    ('ar"b" -- c', [(LITERAL, '"b"'), (LINE_COMMENT, "-- c")]),
    ("⟨h'v', h''⟩ -- c", [(LINE_COMMENT, "-- c")]),
    ('simp /--/ " -/\n#eval 1 --"', [(DOC_COMMENT, '/--/ " -/'), (LINE_COMMENT, '--"')]),
    ("simp /-/- -/ #eval 1 -- -/", [(BLOCK_COMMENT, "/-/- -/"), (LINE_COMMENT, "-- -/")]),
    ("exact h-- c", [(LINE_COMMENT, "-- c")]),
    ("xs[i]'h' 'a' -- c", [(LITERAL, "'a'"), (LINE_COMMENT, "-- c")]),   # core's `]'`, then the name `h'`
])
def test_a_quote_or_comment_opens_only_where_lean_starts_a_token(text: str, read: list[tuple[str, str]]) -> None:
    assert [(r.kind, text[r.start : r.end]) for r in regions(text)] == read
    assert read_two_ways(text) is None


@pytest.mark.parametrize(("text", "at"), [
    ("(!'\"') set_option x 1 in simp --\"", 2),   # `!'` is no token of core Lean: a literal; a table may have one
    ("rw [<--1] -- c", 5),                        # `<-` then `-1`, or `<` then a comment
    ("{ x //-1 < 0 } -/", 5),                     # Mathlib's `//` then `-1`, or `/` then a block comment
    ("f ''s' c", 3),                              # Mathlib's image token `''`, or a literal `'s'`
    ("#check'\"' -- \"", 6),                          # `#check` a token, then the literal `'"'`; or a name `check'`
])
def test_an_opener_glued_to_a_symbol_is_read_both_ways(text: str, at: int) -> None:
    """After a symbol character Lean's token table decides; the two readings differ, and where is said."""
    assert list(regions(text)) != list(regions(text, glued=True))
    assert read_two_ways(text) == at


def test_by_default_an_opener_glued_to_a_symbol_opens_and_glued_it_ends_the_symbol() -> None:
    """Core Lean's reading first (`⁻¹` is no token of core: the quote opens `'"'`); with `glued=True` the quote ends
    Mathlib's `⁻¹'` and the `"` opens a string left open (the mutation run of the linear reader: no test said which
    reading was the default)."""
    assert list(regions("x ⁻¹'\"'")) == [Region(LITERAL, 4, 7, True)]
    assert list(regions("x ⁻¹'\"'", glued=True)) == [Region(LITERAL, 5, 7, False)]
    assert list(regions("<--1")) == [Region(LINE_COMMENT, 1, 4, True)]
    assert list(regions("<--1", glued=True)) == []


@pytest.mark.parametrize(("written", "code", "docstring"), [
    ("∀ (a b : Nat), a + b = b + a  -- copy 0", "∀ (a b : Nat), a + b = b + a", None),
    ("∀ (a b : Nat), /- the sum -/ a + b = b + a", "∀ (a b : Nat), a + b = b + a", None),
    ("∀ (a b : Nat), a + /- outer /- inner -/ still -/ b = b + a", "∀ (a b : Nat), a + b = b + a", None),
    ("/-- The sum commutes. -/\n∀ (a b : Nat), a + b = b + a", "∀ (a b : Nat), a + b = b + a", "The sum commutes."),
    ("∀ (a : Nat) -- the first\n  (b : Nat),\n  a + b = b + a", "∀ (a : Nat)\n  (b : Nat),\n  a + b = b + a", None),
    ("∀ (a : Nat)\n  -- a line of its own\n  (b : Nat), a = b", "∀ (a : Nat)\n  (b : Nat), a = b", None),
    ('∀ (s : String), s ++ "--" = s ++ "--"', '∀ (s : String), s ++ "--" = s ++ "--"', None),
    ("a/- no space -/b", "a b", None),
    ("a /- x -/ /- y -/ b", "a b", None),
    ("  /- x -/ a", "a", None),
    ("x ∈ S /-! module -/ ∧ y /-- not leading -/ = 1", "x ∈ S ∧ y = 1", None),
    ("/-- a doc\n  on two lines -/ p", "p", "a doc\n  on two lines"),
    ("/---/ p", "p", None),
])
def test_a_statement_is_read_without_its_comments(written: str, code: str, docstring: str | None) -> None:
    assert read_statement(written) == Statement(code, docstring, None)


def test_what_a_statement_leaves_open_is_named() -> None:
    assert read_statement("p /- never closed").unterminated == BLOCK_COMMENT
    assert read_statement('p = "never closed').unterminated == "string literal"
    assert read_statement("/-- doc never closed").unterminated == DOC_COMMENT
    assert read_statement("p\r\n-- c\r\n∧ q") == Statement("p\n∧ q", None, None)  # CRLF normalised


def test_code_goes_after_a_declaration_on_its_line_unless_a_line_comment_ends_it() -> None:
    assert append_code("theorem t : p  ", ":= by sorry") == "theorem t : p := by sorry"
    assert append_code("theorem t : p -- note", ":= by sorry") == "theorem t : p -- note\n  := by sorry"
    assert append_code('theorem t : s = "--"', ":= by") == 'theorem t : s = "--" := by'
    assert append_code("theorem t : p -- note\n  ∧ q", ":= by") == "theorem t : p -- note\n  ∧ q := by"


def test_a_docstring_is_attached_as_lean_attaches_it() -> None:
    text = "open Real\n\n/-- Its doc. -/\n@[simp]\ntheorem t : p := rfl\n/-- Another. -/ -- a comment\ntheorem u : q"
    found = doc_comment_before(text, text.index("@[simp]"))
    assert found is not None and doc_text(text, found) == "Its doc."
    assert doc_comment_before(text, text.index("theorem t")) is None  # the attribute stands between them
    assert doc_comment_before(text, text.index("theorem u")) is None  # a comment stands between them
    assert doc_comment_before(text, text.index("@[simp]"), doc_comments(text)) == found
    assert doc_comment(" x ") == "/--  x  -/"
    assert doc_comment_problem("a /- nested -/ b") is None
    assert doc_comment_problem("ends -/ early") == "it holds a `-/` that would end the doc comment early"
    assert doc_comment_problem("opens /- forever") == "it opens a `/-` comment it never closes"


def test_after_cores_getelem_token_the_name_takes_its_quotes() -> None:
    """`]'` is a token of core Lean (`xs[i]'h`), so the name after it starts a token: `ht'`, `h'a'` are names; after a
    `]` that may end Mathlib's `]]` the quote is read by the token table, and after `]'` a second quote opens a
    literal."""
    for text in ("xs[t]'ht'", "xs[t]'h'", "xs[0]'h' x", "xs[(t)]'h₁' x", "xs[t]'h'a' y", "xs[i']'h'''"):
        assert literal_problem(text) is None, text
        assert read_two_ways(text) is None, text
        assert not list(regions(text)), text
    assert ends_getelem("xs[t]'h", 5) and not ends_getelem("]'h", 1) and not ends_getelem("x]''", 2)
    assert read_two_ways("xs[[a, b]]'h' x") == 10
    assert literal_problem("xs[t]''\" #eval 1 --\"") == (
        "has a quote at '\\'\" #eval' that Lean reads as a character literal it cannot close")
    assert read_two_ways("x +]'h' y") == 4  # a `]` after a symbol: the token table decides


@pytest.mark.parametrize(("text", "problem"), [
    ("'ainstance : X'", "has a quote at \"'ainstan\" that Lean reads as a character literal it cannot close"),
    ("exact \"abc", "leaves a string open at '\"abc'"),
    ("exact \"abcdefghijklmnop", "leaves a string open at '\"abcdefghijk'"),  # twelve characters shown
    ("simp /- x", "leaves a block comment open at '/- x'"),
    ("exact \"\\q\"", "has an escape Lean does not read at '\\\\q\"'"),
    ("exact \"a\\qwxyz\"", "has an escape Lean does not read at '\\\\qwx'"),  # after one character; 4 shown
    ("exact →o' bopen X", "has a quote at \"' bopen \" that Lean reads as a character literal it cannot close"),
])
def test_literal_problem_names_where_lean_breaks_off(text: str, problem: str) -> None:
    """From the text's first character (a quote there too), each reason with the place it is at."""
    assert literal_problem(text) == problem


@pytest.mark.parametrize("text", ["h'x'", "h'x' →", "a'b' c'd'"])
def test_a_name_at_the_texts_start_keeps_its_primes(text: str) -> None:
    """A name read back to the text's start, and no further: a symbol at its end glues nothing to it."""
    assert list(regions(text)) == [] and read_two_ways(text) is None and literal_problem(text) is None


@pytest.mark.parametrize(("text", "found"), [
    ("(h : x + = 3) : x = 3", (7, "+ =")),
    ("a ≤\n  ≥ b", (2, "≤ ≥")),
    ("x = 3 -- a + = b in a comment", None),
    ('s = "+ ="', None),                       # a literal
    ("f : ℕ →+* ℕ", None),                     # Mathlib's ring-hom arrow: one token
    ("(α : Type*) (a b : α) : a = b", None),
    ("a * -b = - a * b", None),                # `-` opens a term
    ("¬ a ∧ ¬ b", None),
    ("n ! = 6", None),                         # Mathlib's factorial: `!` is no INFIX_ONLY operator
    ("{x | x > 0} = ∅", None),
])
def test_adjacent_operators_are_a_parse_error_whatever_notation(text: str, found: tuple[int, str] | None) -> None:
    from leankit.text import adjacent_operators

    assert adjacent_operators(text) == found


def test_a_quote_then_a_backslash_after_a_name_glued_to_a_symbol_is_a_literal_lean_cannot_close() -> None:
    """After Mathlib's `→o` the quote may start Lean's character literal, which reads `\\ ` as an escape and fails
    there, whatever follows (the mutation run of the linear reader: no test had a backslash then a blank)."""
    text = "x →o'\\ y"
    assert literal_problem(text) == (f"has a quote at {text[4:]!r} that Lean reads as a character literal it "
                                     "cannot close")
    assert literal_problem("x →o'\\n' y") is None  # a character literal that closes


def test_a_block_comment_nests_and_closes_at_adjacent_openers_and_closers() -> None:
    """`/-` and `-/` right after one another, inside a comment (the mutation run of the linear reader: a step past a
    nested opener or a closer was read by no test)."""
    assert block_comment_end("/- /--/ -/ x", 0) == 10  # `/-` then `-/` at once: one level in and out
    assert block_comment_end("/- /- -/-/ x", 0) == 10  # two closers back to back
    assert block_comment_end("/- /-/- -/ -/ -/ x", 0) == 16  # two openers back to back: three levels


@pytest.mark.parametrize("text", ["simp -- see {x} and \\q", "/- {x} \\q -/ simp", "exact '{'", "exact «{x}»"])
def test_braces_and_backslashes_outside_a_string_are_no_literal_problem(text: str) -> None:
    """Only a string's escapes and `{` are read (the mutation run of the linear reader: no test had a comment, a
    character literal or an escaped name holding them)."""
    assert literal_problem(text) is None


@pytest.mark.parametrize(("tactic", "read"), [
    ("«debug».«skipKernelTC» x", "debug.skipKernelTC x"),  # at the text's start
    ("set_option «maxRecDepth» 1", "set_option maxRecDepth 1"),
    ("exact «h»' «", "exact h' «"),  # a `«` never closed stays as written
    ("a «» «b»", "a  b"),  # an empty one too
])
def test_read_as_lean_writes_escaped_names_plainly(tactic: str, read: str) -> None:
    """(The mutation run of the linear reader: no test of the reader had an escape at the text's start.)"""
    assert read_as_lean(tactic) == read
