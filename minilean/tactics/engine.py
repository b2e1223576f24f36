"""The tactic engine: Lean 4 tactic scripts run on goals, with Lean's behaviour and messages.

    engine = Engine(uniq=counter)
    goals = engine.run((goal,), "intro x h₀")          # raises TacticError with Lean's message

A script splits as Lean parses a tactic sequence (lines at the base indentation, `;`, `<;>`, `·`, `(t)`, `case`,
`next`, `all_goals`, `any_goals`, `try`, `first`, `repeat`); the tactics themselves are in `table._TACTICS`.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from leankit.text import matching_close
from minilean.elab import ElabError
from minilean.goals import Goal, Hyp, TacticError, child_tag, number_inaccessible, pp_goals
from minilean.parser import ParseError
from minilean.procedures import Z3_TIMEOUT_MS
from minilean.syntax import Expr
from minilean.tactics.base import Run, _ByAwareChecker
from minilean.tactics.context import _rename_inaccessible
from minilean.tactics.script import _strip_comments, split_blocks, split_top
from minilean.tactics.table import _TACTICS

MAX_DEPTH = 64

# Tactics real Lean/Mathlib has that minilean does not implement: answered as a failure, never a success.
OUTSIDE_FRAGMENT = frozenset({
    "induction", "induction'", "field_simp", "gcongr", "polyrith", "aesop", "simp_all", "interval_cases",
    "fin_cases", "norm_cast", "push_cast", "exact_mod_cast", "zify", "qify", "lift", "delta", "conv", "set",
    "generalize", "by_cases", "split", "split_ifs", "abel", "group", "nth_rewrite", "nth_rw", "simp_rw",
    "rw_mod_cast", "congr", "funext", "apply_fun", "choose", "peel", "bound", "ring1", "noncomm_ring", "module",
    "linear_combination", "apply?", "simpa", "refine'", "suffices", "show_term", "constructorm", "casesm",
    "cases_type", "rename_i", "clear", "revert", "symm", "trans", "change", "injection", "infer_instance",
    "and_intros", "contrapose", "contrapose!", "absurd", "native_decide", "norm_num1", "let"})


class Engine:
    """Runs tactic text on goals; `uniq()` names new goals and locals (`_uniq.N`)."""

    def __init__(self, uniq: Callable[[], str], timeout_ms: int = Z3_TIMEOUT_MS) -> None:
        self.uniq = uniq
        self.timeout_ms = timeout_ms
        self.run_info = Run()
        self._depth = 0

    # -- scripts --------------------------------------------------------------------------------

    def run(self, goals: tuple[Goal, ...], text: str) -> tuple[Goal, ...]:
        """Run a tactic script on `goals` (the first is the main goal)."""
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise TacticError("maximum recursion depth has been reached\nuse `set_option maxRecDepth <num>` "
                                  "to increase limit")
            return self._run(goals, text)
        finally:
            self._depth -= 1

    def _run(self, goals: tuple[Goal, ...], text: str) -> tuple[Goal, ...]:
        text = _strip_comments(text)
        blocks = split_blocks(text)
        if len(blocks) > 1:
            for block in blocks:
                goals = self.run(goals, block)
            return goals
        stripped = text.strip()
        if not stripped:
            return goals
        combinator = re.match(r"(all_goals|any_goals|try|focus|repeat|iterate\s+\d+)\s+(.*)$", stripped, re.DOTALL)
        if combinator is not None:
            return self._combinator(goals, combinator.group(1), combinator.group(2))
        first = re.match(r"first\s*\|(.*)$", stripped, re.DOTALL)
        if first is not None:
            return self._first(goals, first.group(1))
        # `· t; u` focuses the whole sequence after the bullet
        if stripped[0] in "·." and (len(stripped) == 1 or stripped[1] in " \n"):
            if not goals:
                raise TacticError("no goals to be proved")
            inner = self.run((goals[0],), stripped[1:])
            if inner:
                raise TacticError(f"unsolved goals\n{pp_goals(inner)}")
            return goals[1:]
        return self._sequence(goals, stripped)

    def _first(self, goals: tuple[Goal, ...], alternatives: str) -> tuple[Goal, ...]:
        """`first | t | u`: the first alternative that succeeds; the last one's error when none does."""
        errors = []
        for alternative in split_top(alternatives, "|"):
            try:
                return self.run(goals, alternative)
            except TacticError as exc:
                errors.append(exc.message)
        raise TacticError(errors[-1] if errors else "first: no alternative")

    def _sequence(self, goals: tuple[Goal, ...], stripped: str) -> tuple[Goal, ...]:
        """`t; u`, `t <;> u`, `(t)`, `case`/`next`, `skip`, `done`, or one tactic on the first goal."""
        pieces = [p for p in split_top(stripped, ";") if p.strip()]
        if len(pieces) > 1:
            for piece in pieces:
                goals = self.run(goals, piece)
            return goals
        alternatives = split_top(stripped, "<;>")
        if len(alternatives) > 1:
            if not goals:
                raise TacticError("no goals to be proved")
            current = self.run((goals[0],), alternatives[0])
            for piece in alternatives[1:]:
                current = tuple(g for goal in current for g in self.run((goal,), piece))
            return current + goals[1:]
        if stripped.startswith("(") and matching_close(stripped) == len(stripped) - 1:
            return self.run(goals, stripped[1:-1])
        case = re.match(r"(case|next)\b\s*([^=]*?)\s*=>\s*(.*)$", stripped, re.DOTALL)
        if case is not None:
            return self._case(goals, case.group(1), case.group(2), case.group(3))
        if stripped in ("skip",):
            return goals
        if stripped == "done":
            if goals:
                raise TacticError(f"unsolved goals\n{pp_goals(goals)}")
            return goals
        if not goals:
            raise TacticError("no goals to be proved")
        return tuple(number_inaccessible(g) for g in self._tactic(goals[0], stripped)) + goals[1:]

    def _combinator(self, goals: tuple[Goal, ...], name: str, body: str) -> tuple[Goal, ...]:
        if name == "try":
            try:
                return self.run(goals, body)
            except TacticError:
                return goals
        if name == "focus":
            if not goals:
                raise TacticError("no goals to be proved")
            return self.run((goals[0],), body) + goals[1:]
        if name == "repeat" or name.startswith("iterate"):
            return self._repeat(goals, name, body)
        return self._each_goal(goals, name, body)

    def _repeat(self, goals: tuple[Goal, ...], name: str, body: str) -> tuple[Goal, ...]:
        """`repeat t` (up to 32 times, until it fails or changes nothing) and `iterate n t` (a failure fails)."""
        limit = int(name.split()[1]) if name.startswith("iterate") else 32
        for _ in range(limit):
            try:
                new = self.run(goals, body)
            except TacticError:
                if name.startswith("iterate"):
                    raise
                break
            if new == goals:
                break
            goals = new
        return goals

    def _each_goal(self, goals: tuple[Goal, ...], name: str, body: str) -> tuple[Goal, ...]:
        """`all_goals t` (every goal must succeed) and `any_goals t` (at least one)."""
        result: list[Goal] = []
        progressed = False
        errors: list[str] = []
        for goal in goals:
            try:
                result.extend(self.run((goal,), body))
                progressed = True
            except TacticError as exc:
                if name == "all_goals":
                    raise
                errors.append(exc.message)
                result.append(goal)
        if not progressed and goals:
            raise TacticError(errors[0] if errors else f"{name} failed")
        return tuple(result)

    def _case(self, goals: tuple[Goal, ...], keyword: str, tag: str, body: str) -> tuple[Goal, ...]:
        if not goals:
            raise TacticError("no goals to be proved")
        index = 0
        goal_list = list(goals)
        if keyword == "case":
            words = tag.split()
            wanted = words[0] if words else ""
            matches = [i for i, g in enumerate(goals) if g.case is not None and (
                g.case == wanted or g.case.split(".")[-1] == wanted or g.case.endswith("." + wanted))]
            if not matches:
                raise TacticError(f"Case tag '{wanted}' not found.\n\nAvailable tags: "
                                  + ", ".join(f"'{g.case}'" for g in goals if g.case))
            index = matches[0]
            # `case inl h => …` renames the inaccessible locals from the last one backwards
            names = words[1:]
            if names:
                goal_list[index] = _rename_inaccessible(goal_list[index], names)
        inner = self.run((goal_list[index],), body)
        if inner:
            raise TacticError(f"unsolved goals\n{pp_goals(inner)}")
        return tuple(goal_list[:index] + goal_list[index + 1 :])

    # -- single tactics -------------------------------------------------------------------------

    def _tactic(self, goal: Goal, text: str) -> tuple[Goal, ...]:
        head_match = re.match(r"[A-Za-z_][\w'!?]*", text)
        head = head_match.group(0) if head_match else text.split(maxsplit=1)[0]
        rest = text[len(head):].strip()
        handler = _TACTICS.get(head)
        if handler is not None:
            try:
                return handler(self, goal, rest)
            except ElabError as exc:
                raise TacticError(exc.message) from None
            except ParseError as exc:
                raise TacticError(f"unexpected syntax: {exc.message}") from None
        if head in OUTSIDE_FRAGMENT:
            raise TacticError(f"minilean: `{head}` is a Lean tactic outside minilean's fragment (docs/minilean.md)")
        raise TacticError(f"unknown tactic '{head}'")

    # helpers used by tactics

    def check_term(self, goal: Goal, term: Expr, expected: Expr, holes: bool = False) -> list[Goal]:
        checker = _ByAwareChecker(goal, self, holes)
        return checker.check(term, expected)

    def infer_term(self, goal: Goal, term: Expr) -> Expr:
        return _ByAwareChecker(goal, self, False).infer_prop(term)

    def new_goal(self, goal: Goal, target: Expr, tag: str | None = None, hyps: tuple[Hyp, ...] | None = None) -> Goal:
        return Goal(goal.hyps if hyps is None else hyps, target, child_tag(goal.case, tag), self.uniq())
