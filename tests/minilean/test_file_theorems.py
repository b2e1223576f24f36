"""A theorem declared earlier in a file is usable by name in the later declarations of that file, with its stated
type, as in Lean (`exact name args`, `apply name`, `have := name …`); `#print axioms` and the kernel recheck reach
it. A name the file has not declared yet, or declares later, is still Lean's `unknown identifier`."""

from __future__ import annotations

import json
from typing import Any

import pytest

from leankit.recheck import recheck_command
from minilean.server import Server

LEMMA = "theorem burnqed_lemma_1 (x : ℕ) (h : 0 < x) : 0 < x * x := by positivity\n\n"
CLEAN = "information: 't' depends on axioms: [propext, Classical.choice, Quot.sound]"
SORRY = "information: 't' depends on axioms: [propext, sorryAx, Classical.choice, Quot.sound]"
RECHECK = "information: burnqed kernel recheck: t ok (2 constants)"


def _said(text: str) -> list[list[str]]:
    payload = {"file": text, "readHeader": False, "inheritEnv": False, "sorrys": False, "typeErrorsAsGoals": False,
               "newConstants": True}
    reply: dict[str, Any] = json.loads(Server().handle(f"frontend.process {json.dumps(payload, ensure_ascii=False)}"))
    return [[f"{m['severity']}: {m['data']}" for m in unit["messages"]] for unit in reply["units"]]


def _theorem(proof: str) -> str:
    return (f"theorem t (x : ℕ) (hx : 0 < x) : 0 < x * x := by\n  {proof}\n\n#print axioms t\n\n"
            f"{recheck_command('t')}")


@pytest.mark.parametrize("proof", ["exact burnqed_lemma_1 x hx", "apply burnqed_lemma_1\n  exact hx",
                                   "have := burnqed_lemma_1 x hx\n  exact this", "exact burnqed_lemma_1 _ hx"])
def test_an_earlier_theorem_closes_a_later_goal_by_its_stated_type(proof: str) -> None:
    assert _said(LEMMA + _theorem(proof)) == [[], [], [CLEAN], [RECHECK]]


def test_a_name_not_declared_earlier_is_unknown_as_in_lean() -> None:
    later = _theorem("exact burnqed_lemma_1 x hx").split("\n\n#print")[0] + "\n\n" + LEMMA
    assert _said(later)[0] == ["error: unknown identifier 'burnqed_lemma_1'"]
    assert _said(LEMMA + _theorem("exact burnqed_lemma_2 x hx"))[1] == ["error: unknown identifier 'burnqed_lemma_2'"]


def test_its_stated_type_is_checked_against_the_goal() -> None:
    wrong = "theorem burnqed_lemma_1 (x : ℕ) (h : 0 < x) : 0 < x + x := by omega\n\n"
    said = _said(wrong + _theorem("exact burnqed_lemma_1 x hx"))
    assert said[0] == [] and said[1][0].startswith("error: type mismatch")


def test_a_lemma_left_sorry_shows_in_the_axioms_of_the_theorem_that_uses_it() -> None:
    sorried = LEMMA.replace("positivity", "sorry")
    assert _said(sorried + _theorem("exact burnqed_lemma_1 x hx")) == [
        ["warning: declaration uses 'sorry'"], [], [SORRY], [RECHECK]]
    assert _said(sorried + _theorem("positivity")) == [["warning: declaration uses 'sorry'"], [], [CLEAN],
                                                        ["information: burnqed kernel recheck: t ok (1 constants)"]]


def test_axioms_reach_a_lemma_through_another() -> None:
    chain = (LEMMA.replace("positivity", "sorry")
             + "theorem burnqed_lemma_2 (y : ℕ) (h : 0 < y) : 0 < y * y := by\n  exact burnqed_lemma_1 y h\n\n")
    assert _said(chain + _theorem("exact burnqed_lemma_2 x hx"))[3:] == [
        [SORRY], ["information: burnqed kernel recheck: t ok (3 constants)"]]
