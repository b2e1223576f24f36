"""The sketch format's grammar (burnqed.text.sketch_grammar): every text it derives is a sketch the reader accepts,
the world's sketches are texts it derives, and xgrammar reads its EBNF as the same language (through xgrammar's
documented API: a compiler over an empty vocabulary, a matcher fed strings)."""

from __future__ import annotations

import random
from functools import cache
from typing import Any

import pytest

from burnqed.config import LeanConfig
from burnqed.text.sketch import Sketch, read_sketch, sketch_of_proof
from burnqed.text.sketch_grammar import FENCE, INDENT, NAME_CHARS, SketchGrammar, sketch_grammar
from leankit.world.checked import build_world

xgrammar = pytest.importorskip("xgrammar")

VARIANTS: dict[str, dict[str, Any]] = {"flat": {}, "balanced": {"balanced": True}, "two holes": {"max_holes": 2}}


@cache
def grammar(variant: str) -> SketchGrammar:
    return sketch_grammar(**VARIANTS[variant])


@cache
def compiled(variant: str) -> Any:
    return xgrammar.GrammarCompiler(xgrammar.TokenizerInfo([])).compile_grammar(grammar(variant).ebnf)


def derives(variant: str, text: str) -> bool:
    """Whether xgrammar's matcher takes `text` whole and the grammar is complete there."""
    matcher = xgrammar.GrammarMatcher(compiled(variant))
    return bool(matcher.accept_string(text)) and bool(matcher.is_completed())


def completion(body: str) -> str:
    """A sketch body as the planner writes it: each line at the prompt's indentation, then the closing fence."""
    return "".join(f"{INDENT}{line}\n" for line in body.splitlines()) + FENCE


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_text_the_grammar_derives_is_a_sketch_the_reader_accepts(variant: str) -> None:
    rng = random.Random(0)
    chosen = grammar(variant)
    holes = set()
    for _ in range(150):
        text = chosen.sample(rng)
        assert len(text) <= chosen.longest
        assert derives(variant, text), text  # the EBNF xgrammar reads is the language `sample` draws from
        read = read_sketch(text.removesuffix(FENCE))
        assert isinstance(read, Sketch), (text, read)
        holes.add(len(read.holes))
    assert holes == set(range(1, chosen.max_holes + 1))  # every hole count up to the cap was drawn


@pytest.mark.parametrize("variant", ["flat", "balanced"])
def test_the_worlds_sketches_are_texts_the_grammar_derives(variant: str) -> None:
    worlds = [build_world(seed, sketches=True, deep_sketches=True) for seed in (0, 1)]
    bodies = {sketch.body for world in worlds for theorem in world.theorems
              for proof in theorem.proofs if (sketch := sketch_of_proof("\n".join(proof))) is not None}
    assert len(bodies) > 20 and any("have hab :" in body for body in bodies)  # the deep family's names too
    refused = [body for body in bodies if not derives(variant, completion(body))]
    assert refused == []


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("have hx : x = 3 := by sorry\nhave hx : x = 4 := by sorry", "a name written twice"),
        ("have hx : x = 3 := by sorry\nhave hy : x = 4 := by sorry\nhave hx : x = 5 := by sorry", "not monotone"),
        ("have hab : x = 3 := by sorry\nhave hac : x = 4 := by sorry", "two names of one first character"),
        ("have h₁ := by sorry", "no statement"),
        ("have h₁ :  := by sorry", "a blank statement"),
        ("have h₁ : sorry = 1 := by sorry", "a sorry in a statement"),
        ("have h₁ : x = 1 := by sorry\nexact sorryAx _", "a sorry outside a hole"),
        ("have h₁ : x = 1 := by sorry\nadmit", "admit"),
        ("have h₁ : x = 1 := by sorry\nlinarith -- done", "a comment"),
        ("have h₁ : x = 1 := by\n  sorry", "a hole over two lines"),
        ("have this : x = 1 := by sorry", "a name Lean gives itself"),
        ("linarith", "no hole"),
        ('have h₁ : x = 1 := by sorry\nsimp [show "a" = "a" from rfl]', "a string"),
        ("have h₁ : x := 1 := by sorry", "a := in a statement"),
    ],
)
def test_what_the_reader_refuses_or_lean_misreads_the_grammar_cannot_derive(body: str, why: str) -> None:
    assert not derives("flat", completion(body)), why


def test_balanced_brackets_come_in_pairs_one_level_deep() -> None:
    assert derives("flat", completion("have h₁ : f (x = 1 := by sorry"))
    assert not derives("balanced", completion("have h₁ : f (x = 1 := by sorry"))
    assert not derives("balanced", completion("have h₁ : x = 1 := by sorry\nnlinarith [h₁]]"))
    assert derives("balanced", completion("have h₁ : (x + 1) * y = 4 := by sorry\nnlinarith [h₁, h₀]\nexact ⟨h₀, h₁⟩"))
    assert not derives("balanced", completion("have h₁ : x = 1 := by sorry\nnlinarith [sq_nonneg (x - 1)]"))


def test_the_hole_cap_and_the_name_order() -> None:
    three = "have ha : a = 1 := by sorry\nhave hb : b = 1 := by sorry\nhave hc : c = 1 := by sorry"
    assert derives("flat", completion(three))
    assert not derives("two holes", completion(three))
    assert derives("two holes", completion("have hn : n = 1 := by sorry\nhave hm : m = 1 := by sorry"))
    assert NAME_CHARS.index("₁") < NAME_CHARS.index("₂") < NAME_CHARS.index("a")


def test_the_grammar_admits_no_text_lean_max_text_chars_refuses() -> None:
    default = LeanConfig().max_text_chars
    assert sketch_grammar().longest <= default and sketch_grammar(balanced=True).longest <= default
    small = sketch_grammar(max_text_chars=5000, balanced=True)
    one_more = sketch_grammar(max_atoms=small.max_atoms + 1, max_text_chars=10**9, balanced=True)
    assert small.longest <= 5000 < one_more.longest  # the most atoms a line that fit
    assert sketch_grammar().max_atoms == 120 and small.max_atoms == 8  # the atoms a line shrink to fit
    with pytest.raises(ValueError, match=r"lean.max_text_chars \(300\) is too small"):
        sketch_grammar(max_text_chars=300)
    with pytest.raises(ValueError, match="caps out of range"):
        sketch_grammar(max_holes=len(NAME_CHARS) + 1)
