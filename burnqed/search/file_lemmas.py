"""Which holes of a sketch's assembled proof become lemmas of its file (docs/search.md, "One file"): a hole whose goal
appears at more than one place of the sketch (by its closed key), or one a library entry closed by its closed key,
is declared once before the theorem as `theorem burnqed_lemma_<k> (hypotheses) : target` with the proof Lean
closed it with, and each of its places is closed by `exact burnqed_lemma_<k>` applied to that place's hypotheses.

    proofs, lemmas = lift_holes(holes, theorem.header)     # holes: each place's goal, proof and whether to lift it
    body = sketch.filled(proofs)                           # the theorem's body, each lifted place one `exact`
    assemble_proof(theorem, split_proof(body), lemmas)     # header, lemmas in order, theorem

A hole stays inline when its goal cannot be restated as a lemma's binders: a hypothesis Lean made inaccessible
(`a✝`), one with a value (`let`), or two of the same name (the earlier one cannot be passed by name).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from burnqed.lean.soundness import FileLemma
from burnqed.records.replies import Goal
from burnqed.search.goal_keys import closed_key

_PLAIN_NAME = re.compile(r"[^\W\d][\w'!?₀-₉ₐ-ₜ]*", re.UNICODE)  # a hypothesis name written as it is


@dataclass(frozen=True, slots=True)
class Hole:
    """One place of a sketch's assembled proof: the goal Lean gave it (None when not known), the tactics that closed
    it there, and whether it must be lifted (a library entry's proof by its closed key)."""

    goal: Goal | None
    tactics: Sequence[str]
    lift: bool = False


def restatable(goal: Goal | None) -> bool:
    """Whether `goal` can be written as a lemma's binders and type: every hypothesis named as written, distinct, no
    value."""
    if goal is None:
        return False
    names = [variable.name for variable in goal.variables]
    return len(set(names)) == len(names) and all(
        not variable.inaccessible and variable.value is None and _PLAIN_NAME.fullmatch(variable.name)
        for variable in goal.variables)


def statement_of(goal: Goal) -> str:
    """The lemma statement of `goal`: each hypothesis a binder `(name : type)` in context order, then ` : target`."""
    binders = " ".join(f"({variable.name} : {variable.type})" for variable in goal.variables)
    return f"{binders} : {goal.target}" if binders else f": {goal.target}"


def lift_holes(holes: Sequence[Hole], header: str | None) -> tuple[list[list[str]], tuple[FileLemma, ...]]:
    """Each hole's proof in the theorem's body and the file's lemmas: the holes of one closed key lifted together
    when there are several, or one of them must be (`Hole.lift`), and each of them is restatable; the lemma's proof
    the first such hole's tactics (Lean closed that goal with them, under its names), numbered in order of first
    place. The others keep their tactics."""
    keys = [closed_key(hole.goal, header).text if restatable(hole.goal) and hole.goal is not None else None
            for hole in holes]
    lifted: dict[str, FileLemma] = {}
    proofs: list[list[str]] = []
    for hole, key in zip(holes, keys, strict=True):
        places = [other for other, other_key in zip(holes, keys, strict=True) if other_key == key]
        if key is None or hole.goal is None or not (len(places) > 1 or any(other.lift for other in places)):
            proofs.append(list(hole.tactics))
            continue
        if key not in lifted:
            first = places[0]
            assert first.goal is not None
            lifted[key] = FileLemma(len(lifted) + 1, statement_of(first.goal), tuple(first.tactics))
        arguments = "".join(f" {variable.name}" for variable in hole.goal.variables)
        proofs.append([f"exact {lifted[key].name}{arguments}"])
    return proofs, tuple(lifted.values())


__all__ = ["Hole", "lift_holes", "restatable", "statement_of"]
