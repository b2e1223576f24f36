"""Which holes of a sketch's assembled proof become lemmas of its file (docs/search.md, "One file"): a hole whose goal
appears at more than one place of the proof, at any level (by its closed key), or one a library entry closed by its
closed key, is declared once before the theorem as `theorem burnqed_lemma_<k> (hypotheses) : target` with the proof
Lean closed it with (after the lemmas that proof uses), and each of its places is closed by `exact burnqed_lemma_<k>`
applied to that place's hypotheses.

    proofs, lemmas = lift_holes(holes, theorem.header)     # holes: each place's goal, proof and whether to lift it
    body = sketch.filled(proofs)                           # the theorem's body, each lifted place one `exact`
    assemble_proof(theorem, split_proof(body), lemmas)     # header, lemmas in order, theorem

A hole stays inline when its goal cannot be restated as a lemma's binders: a hypothesis Lean made inaccessible
(`a✝`), one with a value (`let`), or two of the same name (the earlier one cannot be passed by name).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from burnqed.lean.declared_lemmas import FileLemma
from burnqed.records.replies import Goal
from burnqed.search.goal_keys import closed_key
from burnqed.text.completion import split_proof
from burnqed.text.sketch import Sketch

_PLAIN_NAME = re.compile(r"[^\W\d][\w'!?₀-₉ₐ-ₜ]*", re.UNICODE)  # a hypothesis name written as it is


@dataclass(frozen=True, slots=True)
class Hole:
    """One place of a sketch's assembled proof: the goal Lean gave it (None when not known), the tactics that closed
    it there, whether it must be lifted (a library entry's proof by its closed key), and the sketch that closed it
    when it was planned again (`search.sketch_depth`), with that sketch's own holes."""

    goal: Goal | None
    tactics: Sequence[str]
    lift: bool = False
    inner: Inner | None = None


@dataclass(frozen=True, slots=True)
class Inner:
    """The sketch a hole was planned again into, and its holes in order."""

    sketch: Sketch
    holes: tuple[Hole, ...]


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
    """Each hole's proof in the theorem's body and the file's lemmas. The holes of one closed key, at any level, are
    lifted together when there are several or one must be (`Hole.lift`), each of them restatable; a lemma's proof is
    its first place's (a hole planned again: its sketch filled with its own holes' proofs, those lifted in turn), and
    the lemmas are numbered as they are made, so a lemma comes after every lemma its proof uses. The other holes keep
    their tactics (a hole planned again: its sketch filled)."""
    places: Counter[str] = Counter()
    must: set[str] = set()
    for hole in _every(holes):
        key = _key(hole, header)
        if key is not None:
            places[key] += 1
            must.update([key] if hole.lift else [])
    lifted: dict[str, FileLemma] = {}

    def proofs_of(level: Sequence[Hole]) -> list[list[str]]:
        proofs: list[list[str]] = []
        for hole in level:
            tactics = list(hole.tactics) if hole.inner is None else split_proof(
                hole.inner.sketch.filled(proofs_of(hole.inner.holes)), split_have=False)
            key = _key(hole, header)
            if key is None or hole.goal is None or not (places[key] > 1 or key in must):
                proofs.append(tactics)
                continue
            if key not in lifted:
                lifted[key] = FileLemma(len(lifted) + 1, statement_of(hole.goal), tuple(tactics))
            arguments = "".join(f" {variable.name}" for variable in hole.goal.variables)
            proofs.append([f"exact {lifted[key].name}{arguments}"])
        return proofs

    proofs = proofs_of(holes)
    return proofs, tuple(lifted.values())


def _every(holes: Sequence[Hole]) -> list[Hole]:
    """The holes and those of the sketches they were planned into, at every level."""
    found: list[Hole] = []
    for hole in holes:
        found.append(hole)
        if hole.inner is not None:
            found.extend(_every(hole.inner.holes))
    return found


def _key(hole: Hole, header: str | None) -> str | None:
    """The closed key of a restatable hole's goal, else None."""
    return closed_key(hole.goal, header).text if hole.goal is not None and restatable(hole.goal) else None


__all__ = ["Hole", "Inner", "lift_holes", "restatable", "statement_of"]
