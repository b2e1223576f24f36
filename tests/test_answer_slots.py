"""leankit.answer on PutnamBench's files as published and on made-up problems in their form; records.Theorem's
answer slot."""

from __future__ import annotations

import pytest

from burnqed.records import Answer, AnswerTask, Theorem
from leankit.answer import answer_slot, drop_slot, fill_slot, find_slots, inline_answer, reference_answer, split_at_slot
from tests.putnambench import putnam_names, putnam_text

EASY = "abbrev putnam_easy_solution : ℕ := sorry\n-- 2\n"


def test_every_putnambench_slot_is_found_with_its_reference_answer() -> None:
    slotted = {name: find_slots(putnam_text(name)) for name in putnam_names()}
    with_slot = {name: slots for name, slots in slotted.items() if slots}
    assert len(with_slot) == 346
    assert all(len(slots) == 1 for slots in with_slot.values())
    assert all(reference_answer(putnam_text(name), slots[0].name) for name, slots in with_slot.items())
    # `def tetration : ℕ → ℕ → ℕ` with equations is no slot, and no later `:= sorry` is read as its value
    assert find_slots(putnam_text("putnam_1997_b5")) == []


def test_a_slot_its_reference_and_the_three_forms() -> None:
    slot = answer_slot(EASY, "1 + 1 = putnam_easy_solution")
    assert slot is not None and (slot.name, slot.type, slot.keyword) == ("putnam_easy_solution", "ℕ", "abbrev")
    assert reference_answer(EASY, slot.name) == "2"
    assert fill_slot(EASY, slot.name, "2") == "abbrev putnam_easy_solution : ℕ := 2\n-- 2\n"
    assert split_at_slot(EASY, slot.name) == ("abbrev putnam_easy_solution : ℕ :=", "\n-- 2\n")
    assert drop_slot("open Real\n" + EASY + "def f : ℕ := 1", slot.name) == "open Real\ndef f : ℕ := 1"
    assert inline_answer("1 + 1 = putnam_easy_solution ∧ putnam_easy_solution' = 0", slot, "2") == \
        "1 + 1 = ((2) : ℕ) ∧ putnam_easy_solution' = 0"
    assert answer_slot(EASY, "1 + 1 = 2") is None  # a slot the statement does not use is no answer


def test_a_value_of_several_lines_is_indented_under_its_definition() -> None:
    assert fill_slot(EASY, "putnam_easy_solution", "fun n =>\nn + 1") == \
        "abbrev putnam_easy_solution : ℕ := fun n =>\n  n + 1\n-- 2\n"


def test_a_theorem_is_filled_once() -> None:
    theorem = Theorem(name="putnam_easy", signature=": 1 + 1 = putnam_easy_solution", header=EASY.strip(),
                      answer=Answer(name="putnam_easy_solution", type="ℕ", task=AnswerTask.PRODUCED, reference="2"))
    assert theorem.answer_open
    filled = theorem.with_answer(" 2 ")
    assert filled.header == "abbrev putnam_easy_solution : ℕ := 2\n-- 2"
    assert filled.answer is not None and filled.answer.value == "2" and not filled.answer_open
    with pytest.raises(ValueError, match="no open answer slot"):
        filled.with_answer("3")
