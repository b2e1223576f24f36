"""Building blocks of the generated world: a seeded dice, Lean-style contexts, and `Draft`, the builder of
one corpus theorem (goals, transitions, proofs).

    dice = Dice(seed=0, label="lin_eq")   # BLAKE2b of (seed, label, counter): the same world on every platform
    draft = Draft("world_lin_eq_000", split="train", topic="algebra", family="lin_eq",
                  statement="∀ (x : ℝ), 2 * x + 3 = 11 → x = 4")
    g1 = draft.goal(context(("x", "ℝ"), ("h₀", "2 * x + 3 = 11")), "x = 4")
    draft.step(draft.root, ["intro x h₀", "rintro x h₀"], [g1])
    draft.closes(g1, ["linarith", "nlinarith [h₀]"])
    draft.fails(g1, ["omega", "decide"])  # messages from `wrong_message`, as the replay server answers them
    draft.proof("intro x h₀", "linarith")
    spec = draft.build()                   # a validated `TheoremSpec`
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import TypeVar

from leankit.corpus import GoalSpec, Split, TheoremSpec, Topic, Transition
from leankit.world.messages import identifiers, linarith_failure, local_names, tactic_error

T = TypeVar("T")


class Dice:
    """A deterministic random source: BLAKE2b of (seed, label, draw number)."""

    def __init__(self, seed: int, label: str) -> None:
        self._prefix = f"{seed}\0{label}\0".encode()
        self._draws = 0

    def _next(self) -> int:
        digest = hashlib.blake2b(self._prefix + str(self._draws).encode(), digest_size=8).digest()
        self._draws += 1
        return int.from_bytes(digest, "big")

    def randint(self, low: int, high: int) -> int:
        """An integer in [low, high] (the modulo bias of a 64-bit draw is negligible here)."""
        if high < low:
            raise ValueError(f"empty range [{low}, {high}]")
        return low + self._next() % (high - low + 1)

    def choice(self, items: Sequence[T]) -> T:
        return items[self.randint(0, len(items) - 1)]

    def sample(self, items: Sequence[T], k: int) -> list[T]:
        """k distinct items, in draw order."""
        pool = list(items)
        return [pool.pop(self.randint(0, len(pool) - 1)) for _ in range(k)]

    def shuffle(self, items: Sequence[T]) -> list[T]:
        return self.sample(items, len(items))


def context(*entries: tuple[str, str]) -> list[str]:
    """Hypothesis lines as Lean prints them: consecutive names of one type share a line (`x y : ℝ`)."""
    lines: list[tuple[list[str], str]] = []
    for name, type_ in entries:
        if lines and lines[-1][1] == type_:
            lines[-1][0].append(name)
        else:
            lines.append(([name], type_))
    return [f"{' '.join(names)} : {type_}" for names, type_ in lines]


def literal(value: int) -> str:
    """An integer as it appears in a statement (Lean prints negative literals as `-3`)."""
    return str(value)


def wrong_message(goal: GoalSpec, tactic: str) -> str:
    """The error Lean gives for `tactic` failing on `goal`.

    Exact texts where they are known from Lean and Mathlib sources: `decide` on a goal with free variables
    (Lean's `preprocessPropToDecide`), `linarith` (Mathlib prints the negated goal); the rest as the replay
    server answers unknown tactics (`leankit.world.messages.tactic_error`).
    """
    head = tactic.split(maxsplit=1)[0]
    if head == "decide" and local_names(goal) & set(identifiers(goal.target)):
        return (
            f"Expected type must not contain free variables\n  {goal.target}\n\n"
            "Hint: Use the `+revert` option to automatically clean up and revert free variables"
        )
    if head in ("linarith", "nlinarith"):
        return linarith_failure(goal)
    return tactic_error(goal, tactic)


class Draft:
    """One theorem under construction. Goals are deduplicated: the same (hypotheses, target, case) is the same
    goal id, so two tactics that lead to the same state share it (as Lean's states would compare equal)."""

    def __init__(self, name: str, *, split: Split, topic: Topic, family: str, statement: str) -> None:
        self.name = name
        self.split = split
        self.topic = topic
        self.family = family
        self.statement = statement
        self._goals: dict[str, GoalSpec] = {}
        self._ids: dict[tuple[tuple[str, ...], str, str | None], str] = {}
        self._transitions: dict[tuple[str, str], Transition] = {}
        self._proofs: list[list[str]] = []
        self.root = self.goal([], statement)

    def goal(self, hyps: Iterable[str], target: str, case: str | None = None) -> str:
        """The id of the goal `hyps ⊢ target` (tagged `case`), created on first use."""
        key = (tuple(hyps), target, case)
        found = self._ids.get(key)
        if found is None:
            found = self._ids[key] = f"g{len(self._goals)}"
            self._goals[found] = GoalSpec(hyps=list(key[0]), target=target, case=case)
        return found

    def spec(self, goal: str) -> GoalSpec:
        return self._goals[goal]

    def step(self, goal: str, tactics: str | Sequence[str], children: Sequence[str]) -> None:
        """Each of `tactics` turns `goal` into `children` (in Lean's order; `[]` closes it)."""
        for tactic in [tactics] if isinstance(tactics, str) else tactics:
            self._add(Transition(goal=goal, tactic=tactic, result=list(children)))

    def closes(self, goal: str, tactics: str | Sequence[str]) -> None:
        self.step(goal, tactics, [])

    def fails(self, goal: str, tactics: str | Sequence[str]) -> None:
        """Each of `tactics` fails on `goal` with the message Lean gives (`wrong_message`)."""
        for tactic in [tactics] if isinstance(tactics, str) else tactics:
            self._add(Transition(goal=goal, tactic=tactic, error=wrong_message(self._goals[goal], tactic)))

    def proof(self, *tactics: str) -> None:
        self._proofs.append(list(tactics))

    def _add(self, transition: Transition) -> None:
        key = (transition.goal, transition.tactic)
        known = self._transitions.get(key)
        if known is not None and known != transition:
            raise ValueError(f"{self.name}: tactic {transition.tactic!r} on {transition.goal} recorded with two "
                             "different outcomes")
        self._transitions[key] = transition  # the same transition again (a shared goal) is recorded once

    def build(self) -> TheoremSpec:
        return TheoremSpec(
            name=self.name,
            split=self.split,
            topic=self.topic,
            family=self.family,
            source=WORLD_SOURCE,
            header="import Mathlib",
            statement=self.statement,
            root=self.root,
            goals=dict(self._goals),
            transitions=list(self._transitions.values()),
            proofs=[list(proof) for proof in self._proofs],
        )


WORLD_SOURCE = "burnqed-world"
