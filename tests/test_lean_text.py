"""Lean source as text: comment masking, the bracket scanners and the two word lists."""

from __future__ import annotations

import re

from burnqed.config import DEFAULT_DENY
from burnqed.lean_text import (
    BRACKET_PAIRS,
    NOT_A_PROOF_WORDS,
    OPENER_OF,
    SORRY_WORDS,
    bracket_delta,
    depth0_chars,
    find_depth0,
    mask_comments,
    matching_close,
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
