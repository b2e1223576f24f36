"""Shared helpers for minilean's tests: start a goal from a statement and run tactics on the engine."""

from __future__ import annotations

import itertools

from minilean.elaborator import elaborate_prop
from minilean.goals import Goal, TacticError
from minilean.parser import parse
from minilean.tactics import Engine


class Prover:
    """One engine with its own `_uniq` counter; `start` a statement, `run` tactics on the first goal."""

    def __init__(self) -> None:
        self._counter = itertools.count(1)

    def uniq(self) -> str:
        return f"_uniq.{next(self._counter)}"

    def start(self, statement: str) -> tuple[Goal, ...]:
        return (Goal((), elaborate_prop(parse(statement), {}), None, self.uniq()),)

    def run(self, goals: tuple[Goal, ...], tactic: str) -> tuple[Goal, ...]:
        """The goals after `tactic` on the main goal (the others follow); TacticError when it fails."""
        engine = Engine(self.uniq)
        produced = engine.run(goals[:1], tactic)
        if engine.run_info.sorried:
            raise AssertionError("a test script used sorry")
        return produced + goals[1:]

    def closes(self, statement: str, script: list[str]) -> bool:
        """Does the script prove the statement (every goal closed, no sorry)? False on any failure."""
        goals = self.start(statement)
        try:
            for tactic in script:
                if not goals:
                    return False
                goals = self.run(goals, tactic)
        except TacticError:
            return False
        return not goals

    def error(self, goals: tuple[Goal, ...], tactic: str) -> str:
        try:
            self.run(goals, tactic)
        except TacticError as exc:
            return exc.message
        raise AssertionError(f"{tactic!r} was expected to fail")


def prover_closes(statement: str, script: list[str]) -> bool:
    return Prover().closes(statement, script)


__all__ = ["Prover", "TacticError", "prover_closes"]
