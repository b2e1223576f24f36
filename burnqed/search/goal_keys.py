"""The two keys of a goal in sketch search, and the lookup point a lemma source answers (docs/search.md, "Recursive
sketches"): the **exact** key is the subgoal cache's (`subgoal_cache.subgoal_key`: the header, every hypothesis by
name and the target, in normal form); the **closed** key is the goal's ∀-closure with its binder names normalised
(the k-th hypothesis is `_k` wherever it is named), so one fact stated over other names has one closed key.

    exact, closed = subgoal_key(goal, header), closed_key(goal, header)
    closed_key_of([("x", "ℝ"), ("h₀", "0 < x")], "0 < x ^ 2", header)   # a goal not elaborated yet (a hole's text)
    translate(["nlinarith [h₀]"], proved_goal, goal)   # a proof of one goal, its hypotheses named as `goal` names them
    candidates = lemmas.lemma_candidates(exact, closed, goal, limit)   # `LemmaSource`: proofs to replay on a hole

A key is a candidate's address only: whatever a lookup gives is replayed on the goal in Lean and counts only when
Lean closes it. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from burnqed.records.replies import Goal
from burnqed.search.subgoal_cache import SubgoalKey, key_digest, normal_part

__all__ = ["LemmaCandidate", "LemmaSource", "closed_key", "closed_key_of", "rename", "translate"]

# An identifier as the renaming reads one: a letter or `_` first, then word characters, `'`, `!`, `?`; not after a
# `.` (a projection `h.1` or a field `x.le` is not the hypothesis `1`/`le`). One linear scan of the text.
_NAME = re.compile(r"(?<![\w'.!?])[^\W\d][\w'!?]*")
_ASSIGNED_HOLE = re.compile(r"\?m\.\d+")  # a draft's value of an earlier hole (subgoal_cache drops it too)


def rename(text: str, names: Mapping[str, str]) -> str:
    """`text` with every identifier that `names` maps written as its image (whole identifiers only)."""
    return _NAME.sub(lambda found: names.get(found.group(0), found.group(0)), text)


def closed_key_of(variables: Sequence[tuple[str, str]], target: str, header: str | None) -> SubgoalKey:
    """The closed key of the goal `variables ⊢ target` (each variable `(name, type)`, in context order) under
    `header`: `∀ (_0 : T₀) (_1 : T₁) …, target` with every hypothesis named by its place, each part in normal form."""
    names: dict[str, str] = {}
    lines = [f"header {' '.join((header or '').split())}"]
    for index, (name, type_) in enumerate(variables):
        lines.append(f"∀ _{index} : {normal_part(rename(type_, names))}")
        names[name] = f"_{index}"  # a later hypothesis of the same name shadows it: the later place wins
    lines.append(f"⊢ {normal_part(rename(target, names))}")
    text = "\n".join(lines)
    return SubgoalKey(text, key_digest(text))


def closed_key(goal: Goal, header: str | None) -> SubgoalKey:
    """The closed key of `goal` as Lean printed it (a `let` value is part of its hypothesis' type, as `subgoal_key`
    keeps it; a draft's `?m.N` value of an earlier hole is dropped)."""
    variables = []
    for variable in goal.variables:
        value = variable.value
        shown = variable.type
        if value is not None and not _ASSIGNED_HOLE.fullmatch(value.strip()):
            shown = f"{variable.type} := {value}"
        variables.append((variable.name, shown))
    return closed_key_of(variables, goal.target, header)


def translate(tactics: Sequence[str], proved: Goal, goal: Goal) -> list[str] | None:
    """A proof of `proved` as a proof to try on `goal` (of the same closed key): each hypothesis name of `proved`
    written as `goal` names the hypothesis in its place. None when the two contexts differ in length (no place-wise
    renaming). The result is a candidate: Lean decides whether it closes `goal`."""
    if len(proved.variables) != len(goal.variables):
        return None
    names = {old.name: new.name for old, new in zip(proved.variables, goal.variables, strict=True)
             if old.name != new.name}
    if not names:
        return list(tactics)
    placeholders = {old: f"\x00{index}\x00" for index, old in enumerate(names)}  # swaps (h₀ ↔ h₁) stay swaps
    back = {f"\x00{index}\x00": names[old] for index, old in enumerate(names)}
    return [_restore(rename(tactic, placeholders), back) for tactic in tactics]


def _restore(text: str, back: Mapping[str, str]) -> str:
    return re.sub("\x00\\d+\x00", lambda found: back[found.group(0)], text)


@dataclass(frozen=True, slots=True)
class LemmaCandidate:
    """A proof a lemma source offers for a hole: its tactics (replayed on the hole as they are) and where it comes
    from (shown in the lemma graph: e.g. the library entry's theorem and split)."""

    tactics: tuple[str, ...]
    origin: str
    closed: bool = False  # offered by the closed key (renamed), not the exact one: a lemma of the file when it counts


class LemmaSource(Protocol):
    """What sketch search asks before a hole's own search (after the proofs its own graph and the subgoal cache
    give): proofs of the hole's goal, by its exact and its closed key. Called off the event loop (a thread), as the
    subgoal cache is. Each candidate is replayed on the hole in Lean (its Lean calls counted, no budget unit) and
    counts only when Lean closes the hole; `lemma_outcome` is told which."""

    def lemma_candidates(self, exact: SubgoalKey, closed: SubgoalKey, goal: Goal,
                         limit: int) -> Sequence[LemmaCandidate]:
        """At most `limit` proofs to try on `goal` (as Lean printed it), best first."""
        ...

    def lemma_outcome(self, candidate: LemmaCandidate, exact: SubgoalKey, accepted: bool) -> None:
        """Lean closed the hole with `candidate` (`accepted`) or did not."""
        ...
