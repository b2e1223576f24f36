"""minilean reads Lean 4's scientific literals (`2.5`, `0.25`, `1e3`, `1.5e-2`) as Lean does: the token of
`Lean.Parser.decimalNumberFn`, decoded to `OfScientific.ofScientific mantissa negative exponent`
(`decodeScientificLitVal?`), printed by `delabOfScientific`, an exact rational on ℚ/ℝ (Mathlib's instance on
division rings, which `norm_num` evaluates), `failed to synthesize OfScientific ℕ` on ℕ/ℤ, and refused where Lean
would make it a `Float` (docs/minilean.md, "The fragment").
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from minilean.elab import REAL, ElabError
from minilean.elaborator import elaborate_prop
from minilean.goals import pp_goal
from minilean.parser import ParseError, parse
from minilean.syntax import MAX_SCIENTIFIC_EXPONENT, Ascr, Op, Proj, Sci, Var, pp
from tests.minilean.helpers import Prover

DIAGNOSTICS = "Additional diagnostic information may be available using the `set_option diagnostics true` command."


@pytest.mark.parametrize(("text", "decoded", "printed", "value"), [
    ("2.5", Sci(25, True, 1), "2.5", Fraction(5, 2)),
    ("0.25", Sci(25, True, 2), "0.25", Fraction(1, 4)),
    ("1e3", Sci(1, False, 3), "1e3", Fraction(1000)),
    ("1.5e-2", Sci(15, True, 3), "15e-3", Fraction(3, 200)),  # Lean's delaborator prints it so
    ("2.", Sci(2, True, 0), "2.", Fraction(2)),  # a point with no digits after it is still one (Lean's tokenizer)
    ("2.e3", Sci(2, False, 3), "2e3", Fraction(2000)),
    ("25e-1", Sci(25, True, 1), "2.5", Fraction(5, 2)),
    ("1E+2", Sci(1, False, 2), "1e2", Fraction(100)),
    ("1.5e1", Sci(15, False, 0), "15e0", Fraction(15)),
    ("2.50", Sci(250, True, 2), "2.50", Fraction(5, 2)),  # another term than `2.5`, the same value
    ("0.001", Sci(1, True, 3), "1e-3", Fraction(1, 1000)),
])
def test_a_literal_is_decoded_printed_and_valued_as_lean_does(text: str, decoded: Sci, printed: str,
                                                              value: Fraction) -> None:
    assert parse(text) == decoded
    assert pp(decoded) == printed
    assert parse(printed) == decoded  # the printed form reads back as the same term
    assert decoded.value() == value


def test_the_tokenizer_keeps_numerals_projections_and_refuses_what_lean_refuses() -> None:
    assert parse("x = 2.5") == Op("=", (Var("x"), Sci(25, True, 1)))
    assert pp(parse("-2.5 * x")) == "-2.5 * x"
    assert parse("h.1.2") == Proj(Proj(Var("h"), "1"), "2")  # a field index is digits only, as Lean's `fieldIdx`
    for text in ("2e", "2.5e+", "3eq"):
        with pytest.raises(ParseError, match=r"^missing exponent digits in scientific literal$"):
            parse(text)
    with pytest.raises(ParseError, match=r"^unexpected token '\.'; expected term$"):
        parse(".5")  # no digit before the point: no number in Lean either
    with pytest.raises(ValueError, match=f"over minilean's limit of 10 \\^ {MAX_SCIENTIFIC_EXPONENT}"):
        Sci(1, False, MAX_SCIENTIFIC_EXPONENT + 1).value()


def test_elaboration_gives_it_the_field_and_refuses_nat_int_and_float() -> None:
    assert elaborate_prop(parse("x = 2.5"), {"x": REAL}) == Op("=", (Var("x"), Ascr(Sci(25, True, 1), REAL)))
    for statement, ty in (("(2.5 : ℕ) = 2", "ℕ"), ("(2.5 : ℤ) = 2", "ℤ"), ("∀ n : ℕ, n = 2.5", "ℕ")):
        with pytest.raises(ElabError) as caught:
            elaborate_prop(parse(statement), {})
        assert caught.value.message == f"failed to synthesize\n  OfScientific {ty}\n{DIAGNOSTICS}"
    with pytest.raises(ElabError) as caught:
        elaborate_prop(parse("2.5 = 5 / 2"), {})
    assert caught.value.message == (
        "minilean: nothing fixes the type of 2.5, so Lean elaborates its scientific literal as a `Float` (the default "
        "`OfScientific` instance); `Float` is outside minilean's fragment (write the type, as in `(2.5 : ℝ)`)")
    with pytest.raises(ElabError) as caught:
        elaborate_prop(parse("(2 : ℝ) ^ 2.5 = 1"), {})
    assert caught.value.message == ("minilean: the exponent 2.5 is a scientific literal (a real power, `Real.rpow`), "
                                    "which is outside minilean's fragment")


@pytest.mark.parametrize(("statement", "script", "closes"), [
    ("(5 / 2 : ℝ) = 2.5", ["norm_num"], True),
    ("(2.5 : ℝ) ≠ 3", ["norm_num"], True),
    ("(1e3 : ℝ) = 1000", ["norm_num"], True),
    ("(1.5e-2 : ℚ) = 3 / 200", ["norm_num"], True),
    ("(2.5 : ℚ) = 2.50", ["norm_num"], True),
    ("(2.5 : ℝ) = 3", ["norm_num"], False),
    ("(3 : ℝ) = 2.5", ["norm_num"], False),
    ("(2.5 : ℝ) = 2.5", ["rfl"], True),
    ("(5 / 2 : ℝ) = 2.5", ["rfl"], False),  # not by definitional unfolding: Real's division is no computation
    ("(2.5 : ℚ) = 2.50", ["rfl"], False),  # two literals, two terms
    ("(5 / 2 : ℝ) = 2.5", ["simp"], False),  # simp folds ℕ/ℤ literals only (norm_num evaluates the rest)
    ("∀ x : ℝ, x = 2.5 → 2 * x = 5", ["intro x h", "rw [h]", "norm_num"], True),
    ("∀ x : ℝ, x = 2.5 → 2 * x = 5", ["intro x h", "linarith"], True),
    ("∀ x : ℝ, x = 2.5 → 2 * x = 6", ["intro x h", "linarith"], False),
    ("(0 : ℝ) < 0.25", ["positivity"], True),
    (f"(1e{MAX_SCIENTIFIC_EXPONENT} : ℝ) > 1e{MAX_SCIENTIFIC_EXPONENT - 1}", ["norm_num"], True),
    # over the limit the literal stays a symbol: nothing evaluates it, so nothing false is proved with it
    (f"(1e{MAX_SCIENTIFIC_EXPONENT + 1} : ℝ) = 2", ["norm_num"], False),
])
def test_tactics_decide_it_as_an_exact_rational(statement: str, script: list[str], closes: bool) -> None:
    assert Prover().closes(statement, script) is closes


def test_decide_refuses_the_reals_and_norm_num_writes_the_literal_as_its_rational() -> None:
    prover = Prover()
    goals = prover.start("(5 / 2 : ℝ) = 2.5")
    assert prover.error(goals, "decide") == f"failed to synthesize\n  Decidable (5 / 2 = 2.5)\n{DIAGNOSTICS}"
    goals = prover.run(prover.start("∀ x : ℝ, x = 2.5 → x < 3"), "intro x h")
    assert pp_goal(goals[0]) == "x : ℝ\nh : x = 2.5\n⊢ x < 3"
    assert pp_goal(prover.run(goals, "norm_num at h")[0]) == "x : ℝ\nh : x = 5 / 2\n⊢ x < 3"
