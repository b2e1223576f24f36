"""The tactic engine: Lean 4 tactic scripts run on goals, with Lean's behaviour and messages.

    engine = Engine(uniq=counter)
    goals = engine.run((goal,), "intro x h₀")          # raises TacticError with Lean's message

A script splits as Lean parses a tactic sequence (lines at the base indentation, `;`, `<;>`, `·`, `(t)`, `case`,
`next`, `all_goals`, `any_goals`, `try`, `first`, `repeat`); the tactics themselves are in `_TACTICS`. The decision
tactics call z3 through `minilean.arith` on exactly the facts the real tactic collects. docs/minilean.md, "Tactics
and their scope", gives each tactic's behaviour and message and says which texts are approximated.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

from leankit.text import matching_close
from minilean.arith import (
    Z3_TIMEOUT_MS,
    closed_value,
    linarith_refutes,
    omega_proves,
    omega_relevant,
    tauto_proves,
)
from minilean.constants import active
from minilean.defeq import defeq, delta
from minilean.elab import (
    INT,
    NAT,
    NUMBER_TYPES,
    ElabError,
    Elaborator,
    alpha_eq,
    element_type,
    is_type,
    subst,
    subst_many,
    type_of,
    unfold,
    whnf,
)
from minilean.goals import (
    Goal,
    Hyp,
    TacticError,
    add_local,
    child_tag,
    make_room,
    make_room_for,
    number_inaccessible,
    pp_goal,
    pp_goals,
    take_hyp,
)
from minilean.simp import Rule, rewrite_first, simplify
from minilean.syntax import FALSE, TRUE, App, Binder, Expr, Hole, Num, Op, ParseError, Var, free_vars, parse, pp
from minilean.terms import Param, Telescope, TermChecker, type_mismatch

MAX_DEPTH = 64

_RFL_FAILED = (
    "The rfl tactic failed. Possible reasons:\n- The goal is not a reflexive relation (neither `=` nor a relation "
    "with a @[refl] lemma).\n- The arguments of the relation are not equal.\nTry using the reflexivity lemma for "
    "your relation explicitly, e.g. `exact Eq.refl _` or\n`exact HEq.rfl` etc.\n"
)
_FREE_VARS = ("Expected type must not contain free variables\n  {}\n\nHint: Use the `+revert` option to "
              "automatically clean up and revert free variables")
# Tactics real Lean/Mathlib has that minilean does not implement: answered as a failure, never a success.
OUTSIDE_FRAGMENT = frozenset({
    "induction", "induction'", "field_simp", "gcongr", "polyrith", "aesop", "simp_all", "interval_cases",
    "fin_cases", "norm_cast", "push_cast", "exact_mod_cast", "zify", "qify", "lift", "delta", "conv", "set",
    "generalize", "by_cases", "split", "split_ifs", "abel", "group", "nth_rewrite", "nth_rw", "simp_rw",
    "rw_mod_cast", "congr", "funext", "apply_fun", "choose", "peel", "bound", "ring1", "noncomm_ring", "module",
    "linear_combination", "apply?", "simpa", "refine'", "suffices", "show_term", "constructorm", "casesm",
    "cases_type", "rename_i", "clear", "revert", "symm", "trans", "change", "injection", "infer_instance",
    "and_intros", "contrapose", "contrapose!", "absurd", "native_decide", "norm_num1", "let"})


@dataclass
class Run:
    """What one tactic request did besides changing goals."""

    sorried_goals: list[Goal] = field(default_factory=list)  # goals closed by `sorry`/`admit`
    sleep_ms: int = 0

    @property
    def sorried(self) -> bool:
        return bool(self.sorried_goals)


class TacticEngine(Protocol):
    """What a tactic uses of the engine running it (`Engine`): its scripts, term checks, new goals and names."""

    uniq: Callable[[], str]
    timeout_ms: int
    run_info: Run

    def run(self, goals: tuple[Goal, ...], text: str) -> tuple[Goal, ...]: ...

    def check_term(self, goal: Goal, term: Expr, expected: Expr, holes: bool = False) -> list[Goal]: ...

    def infer_term(self, goal: Goal, term: Expr) -> Expr: ...

    def new_goal(self, goal: Goal, target: Expr, tag: str | None = None,
                 hyps: tuple[Hyp, ...] | None = None) -> Goal: ...


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
            errors = []
            for alternative in split_top(first.group(1), "|"):
                try:
                    return self.run(goals, alternative)
                except TacticError as exc:
                    errors.append(exc.message)
            raise TacticError(errors[-1] if errors else "first: no alternative")
        # `· t; u` focuses the whole sequence after the bullet
        if stripped[0] in "·." and (len(stripped) == 1 or stripped[1] in " \n"):
            if not goals:
                raise TacticError("no goals to be proved")
            inner = self.run((goals[0],), stripped[1:])
            if inner:
                raise TacticError(f"unsolved goals\n{pp_goals(inner)}")
            return goals[1:]
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


class _ByAwareChecker(TermChecker):
    """A TermChecker whose `by …` blocks run on the engine."""

    def __init__(self, goal: Goal, engine: TacticEngine, holes: bool) -> None:
        super().__init__(goal, lambda g: None, engine.uniq, holes)
        self.engine = engine

    def _with_local(self, name: str, ty: Expr) -> TermChecker:
        goal = make_room(self.goal, name)
        goal = Goal((*goal.hyps, Hyp(name, ty, self.uniq())), goal.target, goal.case, goal.mvar)
        return _ByAwareChecker(goal, self.engine, self.holes)

    def check(self, term: Expr, expected: Expr) -> list[Goal]:
        from minilean.syntax import By

        if isinstance(term, Var) and term.name in ("sorry", "admit"):
            # `exact sorry` closes the goal and marks the proof (hasSorry, sorryAx), like the tactic
            self.engine.run_info.sorried_goals.append(Goal(self.goal.hyps, expected, None, self.uniq()))
            return []
        if isinstance(term, By):
            sub = Goal(self.goal.hyps, expected, None, self.uniq())
            remaining = self.engine.run((sub,), term.text)
            if remaining:
                raise TacticError(f"unsolved goals\n{pp_goals(remaining)}")
            return []
        return super().check(term, expected)


# ---------------------------------------------------------------------------------------------------
# Script splitting.

_OPEN = "([{⟨"
_CLOSE = ")]}⟩"


def split_top(text: str, sep: str) -> list[str]:
    """Split at `sep` outside brackets (`;` never splits `<;>`)."""
    parts: list[str] = []
    depth = 0
    start = 0
    index = 0
    while index < len(text):
        char = text[index]
        if char in _OPEN:
            depth += 1
        elif char in _CLOSE:
            depth -= 1
        elif depth == 0 and text.startswith(sep, index):
            if sep == ";" and (text.startswith("<;>", index - 1) or text.startswith(";>", index)):
                index += 1
                continue
            if sep == "|" and text.startswith("|>", index):
                index += 1
                continue
            parts.append(text[start:index])
            index += len(sep)
            start = index
            continue
        index += 1
    parts.append(text[start:])
    return parts


def split_blocks(text: str) -> list[str]:
    """Top-level tactics of a multi-line script: a line at the base indentation starts one; deeper lines and
    lines inside open brackets continue it."""
    lines = [line for line in text.split("\n") if line.strip()]
    if len(lines) <= 1:
        return [text]
    base = min(len(line) - len(line.lstrip(" ")) for line in lines)
    blocks: list[list[str]] = []
    depth = 0
    for line in lines:
        indent = len(line) - len(line.lstrip(" "))
        if blocks and (indent > base or depth > 0 or line.lstrip().startswith("|")):
            blocks[-1].append(line[base:])
        else:
            blocks.append([line[base:]])
        depth += sum(line.count(c) for c in _OPEN) - sum(line.count(c) for c in _CLOSE)
    return ["\n".join(block) for block in blocks]


def _strip_comments(text: str) -> str:
    return re.sub(r"--[^\n]*", "", text)


def _rename_inaccessible(goal: Goal, names: list[str]) -> Goal:
    """`case tag x h => …`: the last inaccessible locals take the given names (in order)."""
    hyps = list(goal.hyps)
    target = goal.target
    positions = [i for i, h in enumerate(hyps) if h.inaccessible][-len(names):]
    for index, name in zip(positions, names, strict=False):
        old = hyps[index].name
        hyps = [replace(h, ty=subst(h.ty, old, Var(name))) for h in hyps]
        hyps[index] = replace(hyps[index], name=name)
        target = subst(target, old, Var(name))
    return Goal(tuple(hyps), target, goal.case, goal.mvar)


# ---------------------------------------------------------------------------------------------------
# Tactic implementations. Each takes (engine, goal, rest-of-text) and returns the goals replacing `goal`.


def _names(rest: str) -> list[str]:
    return rest.split()


def _intro_one(engine: TacticEngine, goal: Goal, name: str | None) -> Goal:
    target = goal.target
    for _ in range(8):
        if isinstance(target, Binder) and target.kind == "∀":
            assert target.ty is not None
            chosen = name if name not in (None, "_") else _hidden(goal, target.name)
            # an older local named `chosen` becomes `chosen✝` (also inside the binder's type and body)
            room = make_room(goal, chosen)
            binder = room.target
            assert isinstance(binder, Binder)
            new_target = subst(binder.body, binder.name, Var(chosen))
            return add_local(room, chosen, target.ty, engine.uniq(), new_target)
        if isinstance(target, Op) and target.op == "→":
            chosen = name if name not in (None, "_") else _hidden(goal, "a")
            room = make_room(goal, chosen)
            premise, conclusion = room.target.args if isinstance(room.target, Op) else target.args
            return add_local(room, chosen, premise, engine.uniq(), conclusion)
        step = unfold(target, goal.ctx)
        if step is None:
            break
        target = step
        goal = Goal(goal.hyps, step, goal.case, goal.mvar)
    raise TacticError(f"tactic 'introN' failed, insufficient number of binders\n{pp_goal(goal)}")


def _hidden(goal: Goal, base: str) -> str:
    from minilean.goals import inaccessible_name

    return inaccessible_name(base, {h.name for h in goal.hyps})


def _fresh_mvar(engine: TacticEngine, goal: Goal) -> Goal:
    return Goal(goal.hyps, goal.target, goal.case, engine.uniq())


def tac_intro(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    if any(c in rest for c in "⟨(|"):
        return tac_rintro(engine, goal, rest)
    names: list[str | None] = list(_names(rest)) or [None]
    for name in names:
        goal = _intro_one(engine, goal, name)
    return (_fresh_mvar(engine, goal),)


def tac_intros(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    names = _names(rest)
    if names:
        for name in names:
            goal = _intro_one(engine, goal, name)
        return (_fresh_mvar(engine, goal),)
    while (isinstance(goal.target, Binder) and goal.target.kind == "∀") or (
            isinstance(goal.target, Op) and goal.target.op == "→"):
        goal = _intro_one(engine, goal, None)
    return (_fresh_mvar(engine, goal),)


# rcases patterns: ("name", n) | ("hole",) | ("rfl",) | ("tuple", [pats]) | ("alts", [pats])
Pattern = tuple[object, ...]


def parse_pattern(text: str) -> Pattern:
    text = text.strip()
    alternatives = split_top(text, "|")
    if len(alternatives) > 1:
        return ("alts", [parse_pattern(a) for a in alternatives])
    if text.startswith("⟨") and matching_close(text) == len(text) - 1:
        inner = text[1:-1]
        return ("tuple", [parse_pattern(p) for p in split_top(inner, ",")] if inner.strip() else [])
    if text.startswith("(") and matching_close(text) == len(text) - 1:
        return parse_pattern(text[1:-1])
    if text == "_":
        return ("hole",)
    if text == "rfl":
        return ("rfl",)
    if text == "-":
        return ("clear",)
    if re.fullmatch(r"[^\s⟨⟩(),|]+", text):
        return ("name", text)
    raise TacticError(f"unexpected token in rcases pattern: {text}")


def _split_patterns(text: str) -> list[Pattern]:
    """`x ⟨a, b⟩ (h | h)` → three patterns (space-separated at bracket depth 0)."""
    patterns: list[Pattern] = []
    depth = 0
    start = 0
    for index, char in enumerate(text + " "):
        if char in _OPEN:
            depth += 1
        elif char in _CLOSE:
            depth -= 1
        elif char.isspace() and depth == 0:
            piece = text[start:index].strip()
            if piece:
                patterns.append(parse_pattern(piece))
            start = index + 1
    return patterns


def _take_hyp(goal: Goal, name: str) -> tuple[Goal, Hyp]:
    hyp = goal.lookup(name)
    if hyp is None:
        raise TacticError(f"unknown identifier '{name}'")
    return Goal(tuple(h for h in goal.hyps if h.uniq != hyp.uniq), goal.target, goal.case, goal.mvar), hyp


def rcases(engine: TacticEngine, goal: Goal, hyp_name: str, pattern: Pattern, tag_style: str = "rcases") -> list[Goal]:
    """Destructure the local `hyp_name` of `goal` by `pattern`; the goals that remain."""
    kind = pattern[0]
    hyp = goal.lookup(hyp_name)
    assert hyp is not None
    if kind == "name":
        new_name = str(pattern[1])
        if new_name == hyp_name:
            return [goal]
        # rename the old `new_name` everywhere first (this hypothesis' type included), then take it out
        room, moved = take_hyp(make_room(goal, new_name), hyp.uniq)
        return [Goal((*room.hyps, Hyp(new_name, moved.ty, hyp.uniq)), room.target, room.case, room.mvar)]
    if kind == "hole":
        rest, _ = _take_hyp(goal, hyp_name)
        hidden = _hidden(rest, hyp_name)
        return [Goal((*rest.hyps, Hyp(hidden, hyp.ty, hyp.uniq)), rest.target, rest.case, rest.mvar)]
    if kind == "clear":
        rest, _ = _take_hyp(goal, hyp_name)
        return [rest]
    if kind == "rfl":
        return list(_subst(engine, goal, hyp_name))
    ty = hyp.ty
    if ty == FALSE:
        return []
    if kind == "tuple":
        pats = list(pattern[1])  # type: ignore[call-overload]
        if len(pats) == 0:
            return [goal]
        if len(pats) == 1:
            return rcases(engine, goal, hyp_name, pats[0], tag_style)
        head = whnf_connective(ty, goal, ("∧", "↔", "∃"))
        if head is None:
            if isinstance(whnf(ty, goal.ctx), Op) and whnf(ty, goal.ctx).op == "∨":  # type: ignore[union-attr]
                return rcases(engine, goal, hyp_name, ("alts", pats), tag_style)
            # rcases ignores surplus tuple components on a non-structure
            return rcases(engine, goal, hyp_name, pats[0], tag_style)
        rest, _ = _take_hyp(goal, hyp_name)
        if isinstance(head, Binder):
            assert head.ty is not None
            first_pat = pats[0]
            var = str(first_pat[1]) if first_pat[0] == "name" else _hidden(rest, head.name)
            # the witness' name may shadow a local the body mentions: rename that one first
            room, (renamed,) = make_room_for(rest, var, head)
            assert isinstance(renamed, Binder)
            body = subst(renamed.body, renamed.name, Var(var))
            left_name = _hidden(room, "h")
            room = add_local(room, var, head.ty, engine.uniq())
            room = add_local(room, left_name, body, engine.uniq())
            remaining: Pattern = ("tuple", pats[1:]) if len(pats) > 2 else pats[1]
            return rcases(engine, room, left_name, remaining, tag_style)
        assert isinstance(head, Op)
        a, b = head.args
        if head.op == "↔":
            a, b = Op("→", (a, b)), Op("→", (b, a))
        left_name, right_name = _hidden(rest, "left"), _hidden(rest, "right")
        room = add_local(rest, left_name, a, engine.uniq())
        room = add_local(room, right_name, b, engine.uniq())
        remaining = ("tuple", pats[1:]) if len(pats) > 2 else pats[1]
        goals: list[Goal] = []
        for g in rcases(engine, room, left_name, pats[0], tag_style):
            goals.extend(rcases(engine, g, right_name, remaining, tag_style))
        return goals
    if kind == "alts":
        pats = list(pattern[1])  # type: ignore[call-overload]
        head = whnf_connective(ty, goal, ("∨",))
        if head is None:
            if len(pats) == 1:
                return rcases(engine, goal, hyp_name, pats[0], tag_style)
            raise TacticError(f"rcases: the type\n  {pp(ty)}\nis not an inductive datatype with two constructors")
        assert isinstance(head, Op)
        rest, _ = _take_hyp(goal, hyp_name)
        left_name = _hidden(rest, "h")
        inl = add_local(rest, left_name, head.args[0], engine.uniq())
        inr = add_local(rest, left_name, head.args[1], engine.uniq())
        inl = Goal(inl.hyps, inl.target, child_tag(goal.case, "inl"), engine.uniq())
        inr = Goal(inr.hyps, inr.target, child_tag(goal.case, "inr"), engine.uniq())
        right_pat: Pattern = ("alts", pats[1:]) if len(pats) > 2 else pats[1] if len(pats) > 1 else ("hole",)
        return [*rcases(engine, inl, left_name, pats[0], tag_style),
                *rcases(engine, inr, left_name, right_pat, tag_style)]
    raise TacticError("rcases: unsupported pattern")


def whnf_connective(ty: Expr, goal: Goal, ops: tuple[str, ...]) -> Expr | None:
    current = ty
    for _ in range(16):
        if isinstance(current, Op) and current.op in ops:
            return current
        if isinstance(current, Binder) and current.kind in ops:
            return current
        step = unfold(current, goal.ctx)
        if step is None:
            return None
        current = step
    return None


def tac_rintro(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    patterns = _split_patterns(rest)
    if not patterns:
        raise TacticError("rintro: expected a pattern")
    goals = [goal]
    for pattern in patterns:
        new_goals: list[Goal] = []
        for g in goals:
            if pattern[0] == "name":
                new_goals.append(_intro_one(engine, g, str(pattern[1])))
                continue
            if pattern[0] == "hole":
                new_goals.append(_intro_one(engine, g, None))
                continue
            introduced = _intro_one(engine, g, _hidden(g, "h"))
            new_goals.extend(rcases(engine, introduced, introduced.hyps[-1].name, pattern))
        goals = new_goals
    return tuple(_fresh_mvar(engine, g) for g in goals)


def _hyp_of_term(engine: TacticEngine, goal: Goal, text: str) -> tuple[Goal, str]:
    """A local holding the term `text`'s proof: the local itself, or a new inaccessible one."""
    text = text.strip()
    if re.fullmatch(r"[^\s().⟨⟩]+", text) and goal.lookup(text) is not None:
        return goal, text
    prop = engine.infer_term(goal, parse(text))
    name = _hidden(goal, "h")
    return add_local(goal, name, prop, engine.uniq()), name


def tac_rcases(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    term, sep, pattern = rest.partition(" with ")
    goal, name = _hyp_of_term(engine, goal, term)
    if not sep:
        return tuple(_fresh_mvar(engine, g) for g in rcases(engine, goal, name, ("hole",)))
    return tuple(_fresh_mvar(engine, g) for g in rcases(engine, goal, name, parse_pattern(pattern)))


def tac_obtain(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    match_ = re.match(r"(.*?)\s*(?::(?!=)\s*(.*?))?\s*:=\s*(.*)$", rest, re.DOTALL)
    if match_ is None:
        pattern_text, _, ty_text = rest.partition(":")
        if not ty_text.strip():
            raise TacticError("obtain: expected `:=`")
        prop = Elaborator(goal.ctx).prop(parse(ty_text))
        side = engine.new_goal(goal, prop)
        name = _hidden(goal, "h")
        main = add_local(goal, name, prop, engine.uniq())
        return (side, *(_fresh_mvar(engine, g) for g in rcases(engine, main, name, parse_pattern(pattern_text))))
    pattern_text, ty_text, term_text = match_.group(1), match_.group(2), match_.group(3)
    if ty_text:
        prop = Elaborator(goal.ctx).prop(parse(ty_text))
        new_goals = engine.check_term(goal, parse(term_text), prop)
        if new_goals:
            raise TacticError("obtain: the proof has holes")
        name = _hidden(goal, "h")
        goal = add_local(goal, name, prop, engine.uniq())
    else:
        goal, name = _hyp_of_term(engine, goal, term_text)
    return tuple(_fresh_mvar(engine, g) for g in rcases(engine, goal, name, parse_pattern(pattern_text)))


def tac_cases(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    """Lean 4 `cases h`: constructors' fields become inaccessible locals (`h✝`), tags `inl`/`inr`/`intro`.
    `cases h with | inl hp => tac | inr hq => tac`: each alternative names its fields and must close its goal."""
    match_ = re.match(r"(.*?)\s+with\b(.*)$", rest, re.DOTALL)
    if match_ is not None:
        return _cases_with(engine, goal, match_.group(1), match_.group(2))
    goal, name = _hyp_of_term(engine, goal, rest)
    hyp = goal.lookup(name)
    assert hyp is not None
    head = whnf_connective(hyp.ty, goal, ("∨", "∧", "↔", "∃"))
    if hyp.ty == FALSE:
        return ()
    if head is None:
        raise TacticError(f"tactic 'induction' failed, major premise type is not an inductive type \n  {pp(hyp.ty)}\n"
                          f"{pp_goal(goal)}")
    rest_goal, _ = _take_hyp(goal, name)
    if isinstance(head, Op) and head.op == "∨":
        results = []
        for tag, part in (("inl", head.args[0]), ("inr", head.args[1])):
            g = add_local(rest_goal, _hidden(rest_goal, "h"), part, engine.uniq())
            results.append(Goal(g.hyps, g.target, child_tag(goal.case, tag), engine.uniq()))
        return tuple(results)
    if isinstance(head, Binder):
        assert head.ty is not None
        w = _hidden(rest_goal, "w")
        g = add_local(rest_goal, w, head.ty, engine.uniq())
        g = add_local(g, _hidden(g, "h"), subst(head.body, head.name, Var(w)), engine.uniq())
        return (Goal(g.hyps, g.target, child_tag(goal.case, "intro"), engine.uniq()),)
    assert isinstance(head, Op)
    a, b = head.args
    if head.op == "↔":
        a, b = Op("→", (a, b)), Op("→", (b, a))
    g = add_local(rest_goal, _hidden(rest_goal, "left" if head.op == "∧" else "mp"), a, engine.uniq())
    g = add_local(g, _hidden(g, "right" if head.op == "∧" else "mpr"), b, engine.uniq())
    return (Goal(g.hyps, g.target, child_tag(goal.case, "intro"), engine.uniq()),)


def _cases_with(engine: TacticEngine, goal: Goal, term: str, alternatives_text: str) -> tuple[Goal, ...]:
    goals = list(tac_cases(engine, goal, term))
    alternatives = [alt.strip() for alt in split_top(alternatives_text.strip(), "|") if alt.strip()]
    done: set[int] = set()
    for alternative in alternatives:
        head, arrow, body = alternative.partition("=>")
        if not arrow:
            raise TacticError("unexpected token; expected '=>'")
        words = head.split()
        if not words:
            raise TacticError("unexpected token '=>'; expected identifier")
        tag, names = words[0], words[1:]
        index = next((i for i, g in enumerate(goals) if g.case is not None and g.case.split(".")[-1] == tag), None)
        if index is None or index in done:
            raise TacticError(f"invalid alternative name '{tag}'")
        done.add(index)
        target = _rename_inaccessible(goals[index], names) if names else goals[index]
        remaining = engine.run((target,), body)
        if remaining:
            raise TacticError(f"unsolved goals\n{pp_goals(remaining)}")
    missing = [g.case.split(".")[-1] for i, g in enumerate(goals) if i not in done and g.case]
    if missing:
        raise TacticError(f"alternative '{missing[0]}' has not been provided")
    return ()


def tac_cases_prime(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    """Mathlib `cases' h with a b`."""
    term, _, names_text = rest.partition(" with ")
    names = names_text.split()
    goal, name = _hyp_of_term(engine, goal, term)
    hyp = goal.lookup(name)
    assert hyp is not None
    head = whnf_connective(hyp.ty, goal, ("∨", "∧", "↔", "∃"))
    if head is None:
        raise TacticError(f"tactic 'induction' failed, major premise type is not an inductive type \n  {pp(hyp.ty)}")
    if isinstance(head, Op) and head.op == "∨":
        left = names[0] if names else "_"
        right = names[1] if len(names) > 1 else "_"
        pattern: Pattern = ("alts", [("name", left) if left != "_" else ("hole",),
                                     ("name", right) if right != "_" else ("hole",)])
    else:
        pattern = ("tuple", [("name", n) if n != "_" else ("hole",) for n in (names or ["_", "_"])] +
                   ([("hole",)] if len(names) == 1 else []))
    return tuple(_fresh_mvar(engine, g) for g in rcases(engine, goal, name, pattern))


def tac_constructor(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    """Lean's `constructor`: the first constructor of the target's inductive type that applies (`And.intro`,
    `Iff.intro`, `Or.inl`, `Eq.refl`, `True.intro`); a target that is no inductive type, or none that applies,
    fails with Lean's two messages."""
    head = whnf_connective(goal.target, goal, ("∧", "↔", "∨", "∃", "="))
    if goal.target == TRUE:
        return ()
    if isinstance(head, Op) and head.op == "∧":
        return (engine.new_goal(goal, head.args[0], "left"), engine.new_goal(goal, head.args[1], "right"))
    if isinstance(head, Op) and head.op == "↔":
        a, b = head.args
        return (engine.new_goal(goal, Op("→", (a, b)), "mp"), engine.new_goal(goal, Op("→", (b, a)), "mpr"))
    if isinstance(head, Op) and head.op == "∨":
        return (engine.new_goal(goal, head.args[0], "h"),)  # Or.inl applies first
    if isinstance(head, Op) and head.op == "=":
        if defeq(head.args[0], head.args[1], goal.ctx):
            return ()
        raise TacticError(f"tactic 'constructor' failed, no applicable constructor found\n{pp_goal(goal)}")
    if isinstance(head, Binder):
        # Exists.intro leaves the witness as a metavariable goal, which minilean does not represent
        raise TacticError("minilean: `constructor` on `∃` would leave the witness as a metavariable goal, which "
                          "minilean does not represent; use `use` or `refine ⟨w, ?_⟩`")
    if goal.target == FALSE:
        raise TacticError(f"tactic 'constructor' failed, no applicable constructor found\n{pp_goal(goal)}")
    raise TacticError(f"tactic 'constructor' failed, target is not an inductive datatype\n{pp_goal(goal)}")


def _left_right(engine: TacticEngine, goal: Goal, side: int) -> tuple[Goal, ...]:
    head = whnf_connective(goal.target, goal, ("∨",))
    if not isinstance(head, Op):
        name = "left" if side == 0 else "right"
        raise TacticError(f"{name} tactic works for inductive types with exactly 2 constructors\n{pp_goal(goal)}")
    return (engine.new_goal(goal, head.args[side], "h"),)


def tac_left(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    return _left_right(engine, goal, 0)


def tac_right(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    return _left_right(engine, goal, 1)


def tac_exfalso(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    return (engine.new_goal(goal, FALSE),)


def tac_exact(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    if not rest:
        raise TacticError("unexpected end of input; expected term")
    engine.check_term(goal, parse(rest), goal.target)
    return ()


def tac_refine(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    new_goals = engine.check_term(goal, parse(rest), goal.target, holes=True)
    return tuple(Goal(g.hyps, g.target, goal.case, g.mvar) for g in new_goals)


def tac_apply(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    term = parse(rest)
    checker = _ByAwareChecker(goal, engine, False)
    try:
        premises = checker.apply(term, goal.target)
    except ElabError as exc:
        if exc.message.startswith("tactic 'apply' failed"):
            raise TacticError(f"{exc.message}\n{pp_goal(goal)}") from None
        raise
    return tuple(engine.new_goal(goal, prop, label or None) for label, prop in premises)


def tac_use(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    witnesses = split_top(rest, ",")
    target = goal.target
    for witness in witnesses:
        head = whnf_connective(target, goal, ("∃",))
        if not isinstance(head, Binder):
            raise TacticError(f"use: the goal is not an existential\n{pp_goal(goal)}")
        assert head.ty is not None
        value = Elaborator(goal.ctx).value(parse(witness), head.ty)
        target = subst(head.body, head.name, value)
    new = engine.new_goal(goal, target, "h")
    # `use` discharges the rest with `rfl`/`trivial`/`assumption` when that works
    if _discharge(new):
        return ()
    return (new,)


def _discharge(goal: Goal) -> bool:
    target = goal.target
    if target == TRUE:
        return True
    if isinstance(target, Op) and target.op == "=" and defeq(target.args[0], target.args[1], goal.ctx):
        return True
    return any(defeq(h.ty, target, goal.ctx) for h in goal.hyps if not is_type(h.ty))


def tac_exists(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    goals = tac_use(engine, goal, rest)
    result: list[Goal] = []
    for g in goals:
        try:
            result.extend(tac_trivial(engine, g, ""))
        except TacticError:
            result.append(g)
    return tuple(result)


def tac_assumption(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    for hyp in reversed(goal.hyps):
        if not is_type(hyp.ty) and defeq(hyp.ty, goal.target, goal.ctx):
            return ()
    raise TacticError(f"tactic 'assumption' failed\n{pp_goal(goal)}")


def tac_contradiction(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    props = [h.ty for h in goal.hyps if not is_type(h.ty)]
    for prop in props:
        if prop == FALSE:
            return ()
        if isinstance(prop, Op) and prop.op == "≠" and alpha_eq(prop.args[0], prop.args[1]):
            return ()
        if isinstance(prop, Op) and prop.op == "¬" and isinstance(prop.args[0], Op) and prop.args[0].op == "=" \
                and alpha_eq(*prop.args[0].args):
            return ()
        value = closed_value(prop, goal.ctx)
        if value is not None and value[0] is False and isinstance(prop, Op) and prop.op == "=" \
                and type_of(prop.args[0], goal.ctx) in (NAT, INT, None):
            return ()  # distinct literals: `Nat` constructors differ
        negated = Op("¬", (prop,))
        if any(defeq(other, negated, goal.ctx) for other in props):
            return ()
    raise TacticError(f"tactic 'contradiction' failed\n{pp_goal(goal)}")


def tac_trivial(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    if _discharge(goal):
        return ()
    try:
        return tac_decide(engine, goal, "")
    except TacticError:
        pass
    head = whnf_connective(goal.target, goal, ("∧",))
    if isinstance(head, Op):
        left = tac_trivial(engine, engine.new_goal(goal, head.args[0]), "")
        right = tac_trivial(engine, engine.new_goal(goal, head.args[1]), "")
        if not left and not right:
            return ()
    raise TacticError(f"The rfl tactic failed. Possible reasons:\n{pp_goal(goal)}")


def tac_rfl(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    target = whnf(goal.target, goal.ctx)
    if isinstance(target, Op) and target.op in ("=", "↔", "≤", "⊆", "∣") and defeq(target.args[0], target.args[1],
                                                                                  goal.ctx):
        return ()
    raise TacticError(_RFL_FAILED + pp_goal(goal))


def tac_decide(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    locals_used = free_vars(goal.target) & {hyp.name for hyp in goal.hyps}
    if locals_used:
        raise TacticError(_FREE_VARS.format(pp(goal.target)))
    # the kernel's evaluation unfolds every definition; one whose value is `sorry` leaves the instance stuck
    target = delta(goal.target, goal.ctx)
    if free_vars(target) & set(active()):
        raise TacticError(f"tactic 'decide' failed for proposition\n  {pp(goal.target)}\nsince its 'Decidable' "
                          "instance did not reduce to 'isTrue' or 'isFalse'.")
    if _mentions_field(target, goal):
        raise TacticError(f"failed to synthesize\n  Decidable ({pp(target)})\nAdditional diagnostic information may "
                          "be available using the `set_option diagnostics true` command.")
    value = closed_value(target, goal.ctx)
    if value is None:
        raise TacticError(f"failed to synthesize\n  Decidable ({pp(target)})\nAdditional diagnostic information may "
                          "be available using the `set_option diagnostics true` command.")
    if value[0] is True:
        return ()
    raise TacticError(f"tactic 'decide' proved that the proposition\n  {pp(goal.target)}\nis false")


def _mentions_field(expr: Expr, goal: Goal) -> bool:
    from minilean.elab import FIELDS
    from minilean.syntax import Ascr

    if isinstance(expr, Ascr):
        return expr.ty in FIELDS
    if isinstance(expr, Op):
        return any(_mentions_field(a, goal) for a in expr.args)
    if isinstance(expr, Binder):
        return expr.ty in FIELDS or _mentions_field(expr.body, goal)
    return False


def tac_unfold(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    """`unfold f g (at h)`: each constant replaced by its value where it occurs (applications beta-reduced), one
    name after another, as Lean's `unfold` delta-expands a non-recursive definition."""
    names_text, locations = _split_at(rest)
    names = names_text.split()
    if not names:
        raise TacticError("unexpected end of input; expected identifier")
    for name in names:
        if name not in active() or goal.lookup(name) is not None:
            raise TacticError(f"unknown constant '{name}'")
        if locations is None or "⊢" in locations:
            target = delta(goal.target, goal.ctx, names=frozenset({name}))
            if target == goal.target:
                raise TacticError(f"tactic 'unfold' failed to unfold '{name}' at\n  {pp(goal.target)}")
            goal = Goal(goal.hyps, target, goal.case, goal.mvar)
        for location in [loc for loc in (locations or []) if loc != "⊢"]:
            hyp = goal.lookup(location)
            if hyp is None:
                raise TacticError(f"unknown identifier '{location}'")
            ty = delta(hyp.ty, goal.ctx, names=frozenset({name}))
            if ty == hyp.ty:
                raise TacticError(f"tactic 'unfold' failed to unfold '{name}' at\n  {pp(hyp.ty)}")
            goal = Goal(tuple(Hyp(h.name, ty, engine.uniq()) if h.uniq == hyp.uniq else h for h in goal.hyps),
                        goal.target, goal.case, goal.mvar)
    return (_fresh_mvar(engine, goal),)


def tac_have(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    match_ = re.match(r"(?:([^\s:]+)\s*)?(?::(?!=)\s*(.*?))?\s*(?::=\s*(.*))?$", rest, re.DOTALL)
    if match_ is None or (match_.group(2) is None and match_.group(3) is None):
        raise TacticError("unexpected syntax in `have`")
    name = match_.group(1) or "this"
    ty_text, term_text = match_.group(2), match_.group(3)
    if ty_text is not None:
        prop = Elaborator(goal.ctx).prop(parse(ty_text))
        if term_text is None:
            side = engine.new_goal(goal, prop)
            room, (shown,) = make_room_for(goal, name, prop)
            main = add_local(room, name, shown, engine.uniq())
            return (side, _fresh_mvar(engine, main))
        extra = engine.check_term(goal, parse(term_text), prop, holes=True)
    else:
        assert term_text is not None
        prop = engine.infer_term(goal, parse(term_text))
        extra = []
    room, (shown,) = make_room_for(goal, name, prop)
    main = add_local(room, name, shown, engine.uniq())
    return (*(Goal(g.hyps, g.target, goal.case, g.mvar) for g in extra), _fresh_mvar(engine, main))


def tac_show(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    prop = Elaborator(goal.ctx).prop(parse(rest))
    if not defeq(prop, goal.target, goal.ctx):
        raise TacticError(type_mismatch(Var("this"), prop, goal.target).replace("type mismatch\n  this",
                                                                               "type mismatch"))
    return (Goal(goal.hyps, prop, goal.case, engine.uniq()),)


def tac_specialize(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    term = parse(rest)
    head = term
    from minilean.syntax import App

    while isinstance(head, App):
        head = head.fn
    if not isinstance(head, Var) or goal.lookup(head.name) is None:
        raise TacticError("'specialize' requires a term of the form `h x_1 .. x_n` where `h` appears in the local "
                          "context")
    prop = engine.infer_term(goal, term)
    hyps = tuple(Hyp(h.name, prop, engine.uniq()) if h.name == head.name else h for h in goal.hyps)
    moved = tuple(h for h in hyps if h.name != head.name) + tuple(h for h in hyps if h.name == head.name)
    return (Goal(moved, goal.target, goal.case, engine.uniq()),)


def _subst(engine: TacticEngine, goal: Goal, name: str) -> tuple[Goal, ...]:
    hyp = goal.lookup(name)
    if hyp is None:
        raise TacticError(f"unknown identifier '{name}'")
    if is_type(hyp.ty):
        # `subst x`: find an equation `x = e` or `e = x`
        for other in reversed(goal.hyps):
            if isinstance(other.ty, Op) and other.ty.op == "=" and Var(name) in other.ty.args:
                return _subst(engine, goal, other.name)
        raise TacticError(f"tactic 'subst' failed, did not find equation for eliminating '{name}'")
    ty = hyp.ty
    if not (isinstance(ty, Op) and ty.op == "="):
        raise TacticError(f"tactic 'subst' failed, invalid equality proof, it is not of the form (x = t) or (t = x)\n"
                          f"  {pp(ty)}\n{pp_goal(goal)}")
    lhs, rhs = ty.args
    # Lean eliminates the variable on the right first (`h : a = x` replaces x by a), else the left one
    for var, value in ((rhs, lhs), (lhs, rhs)):
        if isinstance(var, Var) and var.name in goal.ctx and is_type(goal.ctx[var.name]) \
                and var.name not in free_vars(value):
            rest = tuple(h for h in goal.hyps if h.uniq != hyp.uniq and h.name != var.name)
            new_hyps = tuple(replace(h, ty=subst(h.ty, var.name, value)) for h in rest)
            return (Goal(new_hyps, subst(goal.target, var.name, value), goal.case, engine.uniq()),)
    raise TacticError(f"tactic 'subst' failed, invalid equality proof, it is not of the form (x = t) or (t = x)\n"
                      f"  {pp(ty)}\n{pp_goal(goal)}")


def tac_subst(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    goals: tuple[Goal, ...] = (goal,)
    for name in rest.split():
        goals = tuple(g for goal_ in goals for g in _subst(engine, goal_, name))
    return goals


def _split_at(rest: str) -> tuple[str, list[str] | None]:
    """`[…] at h₁ h₂` → (`[…]`, ["h₁", "h₂"]); `at ⊢` targets the goal."""
    depth = 0
    for index in range(len(rest)):
        char = rest[index]
        if char in _OPEN:
            depth += 1
        elif char in _CLOSE:
            depth -= 1
        elif depth == 0 and re.match(r"\bat\b", rest[index:]) and (index == 0 or rest[index - 1].isspace()):
            return rest[:index].strip(), rest[index + 2:].split()
    return rest.strip(), None


def _rule_list(text: str) -> list[tuple[bool, str]]:
    text = text.strip()
    if not text:
        return []
    if not (text.startswith("[") and text.endswith("]")):
        raise TacticError(f"unexpected token; expected '['\n  {text}")
    items = []
    for raw in split_top(text[1:-1], ","):
        item = raw.strip()
        if not item:
            continue
        reverse = item.startswith("←") or item.startswith("<-")
        items.append((reverse, item.lstrip("←<-").strip()))
    return items


def _make_rule(engine: TacticEngine, goal: Goal, text: str, reverse: bool, props: bool = False) -> Rule:
    """The rewrite rule a term gives: an equation or iff (with metavariables for a lemma's variables); with
    `props` (simp) a proof of another proposition `p` gives `p = True`; `rw` refuses it. A constant with a value
    gives its equation (`f.eq_1 : ∀ n, f n = n + 1`)."""
    equation = _constant_equation(goal, text)
    if equation is not None:
        return Rule(equation.rhs, equation.lhs, equation.tel) if reverse else equation
    term = parse(text)
    checker = _ByAwareChecker(goal, engine, False)
    tel = checker.infer(term)
    while checker.peel_value(tel):
        pass
    concl = tel.inst(tel.concl)
    if tel.unassigned(concl) or tel.params:
        lhs_rhs = _eq_sides(tel.concl, goal)
        if lhs_rhs is None:
            raise TacticError(f"invalid rewrite argument, the equation expected\n  {pp(concl)}")
        lhs, rhs = lhs_rhs
        if any(p.kind == "proof" for p in tel.params):
            raise TacticError("minilean: rewriting with a conditional lemma is outside minilean's fragment")
        return Rule(rhs, lhs, tel) if reverse else Rule(lhs, rhs, tel)
    prop = checker._elab_instance(tel, concl) if tel.klass else concl
    sides = _eq_sides(prop, goal)
    if sides is None:
        if not props:
            raise TacticError(f"invalid rewrite argument, the equation expected\n  {pp(prop)}")
        return _hyp_rule(prop)
    lhs, rhs = sides
    return Rule(rhs, lhs) if reverse else Rule(lhs, rhs)


def _constant_equation(goal: Goal, text: str) -> Rule | None:
    """The equation of the visible constant `text` that has a value (its parameters as metavariables); None for any
    other term (a local of that name shadows the constant)."""
    constant = active().get(text)
    if constant is None or constant.value is None or goal.lookup(text) is not None:
        return None
    if not constant.params:
        return Rule(Var(text), constant.value)
    metas = {name: Var(f"?{name}") for name, _ in constant.params}
    lhs = App(Var(text), tuple(metas.values()))
    rhs = subst_many(constant.value, metas)
    params = [Param(f"?{name}", "value", ty, name) for name, ty in constant.params]
    return Rule(lhs, rhs, Telescope(params, Op("=", (lhs, rhs)), {p.name for p in params}))


def _eq_sides(prop: Expr, goal: Goal) -> tuple[Expr, Expr] | None:
    if isinstance(prop, Op) and prop.op in ("=", "↔"):
        return prop.args[0], prop.args[1]
    return None


def tac_rw(engine: TacticEngine, goal: Goal, rest: str, close_with_assumption: bool = False) -> tuple[Goal, ...]:
    rules_text, locations = _split_at(rest)
    rules = _rule_list(rules_text)
    if not rules:
        raise TacticError("unexpected token; expected '['")
    for reverse, text in rules:
        rule = _make_rule(engine, goal, text, reverse)
        if locations is None or "⊢" in locations:
            new_target = rewrite_first(goal.target, rule, goal.ctx)
            if new_target is None:
                raise TacticError(
                    "tactic 'rewrite' failed, did not find instance of the pattern in the target expression\n"
                    f"  {pp(rule.tel.inst(rule.lhs) if rule.tel else rule.lhs)}\n{pp_goal(goal)}")
            goal = Goal(goal.hyps, new_target, goal.case, goal.mvar)
        for location in [loc for loc in (locations or []) if loc != "⊢"]:
            hyp = goal.lookup(location)
            if hyp is None:
                raise TacticError(f"unknown identifier '{location}'")
            new_ty = rewrite_first(hyp.ty, rule, goal.ctx)
            if new_ty is None:
                raise TacticError(
                    "tactic 'rewrite' failed, did not find instance of the pattern in the target expression\n"
                    f"  {pp(rule.tel.inst(rule.lhs) if rule.tel else rule.lhs)}\n{pp_goal(goal)}")
            goal = Goal(tuple(Hyp(h.name, new_ty, engine.uniq()) if h.uniq == hyp.uniq else h for h in goal.hyps),
                        goal.target, goal.case, goal.mvar)
    goal = _fresh_mvar(engine, goal)
    # rw closes the goal with `rfl` when it can (syntactically equal sides)
    target = goal.target
    if isinstance(target, Op) and target.op in ("=", "↔") and alpha_eq(target.args[0], target.args[1]):
        return ()
    if target == TRUE:
        return ()
    if close_with_assumption:
        return tac_assumption(engine, goal, "")
    return (goal,)


def tac_rwa(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    return tac_rw(engine, goal, rest, close_with_assumption=True)


def _simp_rules(engine: TacticEngine, goal: Goal, rules_text: str) -> list[Rule]:
    rules: list[Rule] = []
    for reverse, text in _rule_list(rules_text):
        if text == "*":
            for hyp in goal.hyps:
                if not is_type(hyp.ty):
                    rules.append(_hyp_rule(hyp.ty))
            continue
        rules.append(_make_rule(engine, goal, text, reverse, props=True))
    return rules


def _hyp_rule(prop: Expr) -> Rule:
    if isinstance(prop, Op) and prop.op in ("=", "↔"):
        return Rule(prop.args[0], prop.args[1])
    if isinstance(prop, Op) and prop.op == "¬":
        return Rule(prop.args[0], FALSE)
    if isinstance(prop, Op) and prop.op == "≠":
        return Rule(Op("=", prop.args), FALSE)
    return Rule(prop, TRUE)


def _simp_like(engine: TacticEngine, goal: Goal, rest: str, *, default_set: bool, numerals: str,
               name: str) -> tuple[Goal, ...]:
    rest = re.sub(r"^(?:\(config\s*:=[^)]*\)|only)\s*", "", rest) if name == "simp" else rest
    rules_text, locations = _split_at(rest)
    rules = _simp_rules(engine, goal, rules_text)
    progress = False
    if locations is None or "⊢" in locations:
        new_target = simplify(goal.target, rules, goal.ctx, default_set=default_set, numerals=numerals)
        if new_target != goal.target:
            progress = True
            if new_target == TRUE:
                return ()
            goal = Goal(goal.hyps, new_target, goal.case, goal.mvar)
    for location in [loc for loc in (locations or []) if loc != "⊢"]:
        hyp = goal.lookup(location)
        if hyp is None:
            raise TacticError(f"unknown identifier '{location}'")
        own_rules = [r for r in rules if not (r.tel is None and alpha_eq(r.lhs, hyp.ty))]
        new_ty = simplify(hyp.ty, own_rules, goal.ctx, default_set=default_set, numerals=numerals)
        if new_ty == hyp.ty:
            continue
        progress = True
        if new_ty == FALSE:
            return ()
        if new_ty == TRUE:
            goal = Goal(tuple(h for h in goal.hyps if h.uniq != hyp.uniq), goal.target, goal.case, goal.mvar)
            continue
        goal = Goal(tuple(Hyp(h.name, new_ty, engine.uniq()) if h.uniq == hyp.uniq else h for h in goal.hyps),
                    goal.target, goal.case, goal.mvar)
    if (locations is None or "⊢" in locations) and _closes_through_abbrevs(goal, rules, default_set, numerals):
        return ()
    if not progress:
        raise TacticError("simp made no progress")
    if goal.target == FALSE and name == "norm_num" and locations is None:
        raise TacticError(f"unsolved goals\n{pp_goal(goal)}")
    return (_fresh_mvar(engine, goal),)


def _closes_through_abbrevs(goal: Goal, rules: list[Rule], default_set: bool, numerals: str) -> bool:
    """simp and norm_num unify at reducible transparency, which sees through an `abbrev` (`rfl` closes `2 = sol`
    for `abbrev sol : ℕ := 2`, a `def` stays opaque): the target closes when it does with the abbrevs unfolded."""
    unfolded = delta(goal.target, goal.ctx, reducible_only=True)
    return unfolded != goal.target and simplify(unfolded, rules, goal.ctx, default_set=default_set,
                                                 numerals=numerals) == TRUE


def tac_simp(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    only = re.match(r"only\b", rest.strip()) is not None
    return _simp_like(engine, goal, rest.strip(), default_set=not only, numerals="int", name="simp")


def tac_norm_num(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    return _simp_like(engine, goal, rest.strip(), default_set=True, numerals="all", name="norm_num")


def tac_simp_arith(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    return _simp_like(engine, goal, rest.strip(), default_set=True, numerals="all", name="simp")


def _extra_facts(engine: TacticEngine, goal: Goal, rest: str) -> list[Expr]:
    rest = rest.strip()
    rest = re.sub(r"^\(config\s*:=[^)]*\)\s*", "", rest)
    if not rest:
        return []
    if not (rest.startswith("[") and rest.endswith("]")):
        raise TacticError(f"unexpected token; expected '['\n  {rest}")
    return [engine.infer_term(goal, parse(item)) for item in split_top(rest[1:-1], ",") if item.strip()]


def _negated_goal_hyp(target: Expr, ctx: dict[str, Expr]) -> Expr | None:
    """The hypothesis `a✝` linarith adds: the negated goal, as Mathlib prints it. Mathlib negates through `not_lt`
    and `not_le`, which turn the sides around (`a < b` gives `b ≤ a`, `a ≤ b` gives `b < a`); `≥` and `>` are
    `≤` and `<` read backwards, so their negations read forwards (`a ≥ b` gives `a < b`); an equation is proved
    as two inequalities, the first failing one shown (`a = b`: `a < b`)."""
    if isinstance(target, Op):
        a, b = target.args if len(target.args) == 2 else (None, None)
        if a is None or b is None:
            return None
        turned = {"<": ("≤", (b, a)), "≤": ("<", (b, a)), ">": ("≤", (a, b)), "≥": ("<", (a, b)),
                  "=": ("<", (a, b))}
        if target.op in turned:
            op, args = turned[target.op]
            return Op(op, args)
    return None


def _linarith(engine: TacticEngine, goal: Goal, rest: str, products: bool) -> tuple[Goal, ...]:
    extra = _extra_facts(engine, goal, rest)
    ctx = dict(goal.ctx)
    facts = [h.ty for h in goal.hyps if not is_type(h.ty)] + extra
    target = goal.target
    order_goal = isinstance(target, Op) and target.op in ("<", "≤", ">", "≥", "=") and (
        type_of(target.args[0], ctx) or type_of(target.args[1], ctx) or NAT) in NUMBER_TYPES
    goal_for_z3 = target if order_goal else None
    if linarith_refutes(facts, goal_for_z3, ctx, products=products, timeout_ms=engine.timeout_ms):
        return ()
    negated = _negated_goal_hyp(target, ctx) if order_goal else None
    hyps = goal.hyps
    if negated is not None:
        hyps = (*hyps, Hyp("a✝", negated, ""))
    shown = Goal(hyps, FALSE, goal.case, goal.mvar)
    # Mathlib: `throwError "linarith failed to find a contradiction\n{g}\n{e.toMessageData}"`, the oracle's own error
    # being `failed` (Mathlib/Tactic/Linarith/Frontend.lean).
    raise TacticError(f"linarith failed to find a contradiction\n{pp_goal(shown)}\nfailed")


def tac_linarith(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    return _linarith(engine, goal, rest, products=False)


def tac_nlinarith(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    return _linarith(engine, goal, rest, products=True)


def tac_omega(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    ctx = dict(goal.ctx)
    facts = [h.ty for h in goal.hyps if not is_type(h.ty) and omega_relevant(h.ty, ctx)]
    target = goal.target if omega_relevant(goal.target, ctx) else FALSE
    if omega_proves(facts, target, ctx, timeout_ms=engine.timeout_ms):
        return ()
    if not facts and target == FALSE:
        raise TacticError("omega could not prove the goal:\nNo usable constraints found for the hypotheses and goal.")
    listing = "\n".join(f"  {pp(f)}" for f in [*facts, Op("¬", (target,))] if f != Op("¬", (FALSE,)))
    raise TacticError(f"omega could not prove the goal:\na possible counterexample may satisfy the constraints\n"
                      f"{listing}")


def tac_tauto(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    # tauto introduces first (`intros`), then decides the propositional structure
    while (isinstance(goal.target, Binder) and goal.target.kind == "∀") or (
            isinstance(goal.target, Op) and goal.target.op in ("→", "¬")):
        goal = number_inaccessible(_intro_one(engine, goal, None))
    facts = [h.ty for h in goal.hyps if not is_type(h.ty)]
    if tauto_proves(facts, goal.target, goal.ctx, timeout_ms=engine.timeout_ms):
        return ()
    raise TacticError("tauto failed to solve some goals.")


def tac_ring(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    from minilean.arith import Atoms, to_poly

    target = goal.target
    if isinstance(target, Op) and target.op == "=":
        ty = type_of(target.args[0], goal.ctx) or type_of(target.args[1], goal.ctx) or NAT
        if ty in NUMBER_TYPES:
            atoms = Atoms()
            lhs = to_poly(target.args[0], goal.ctx, atoms, ty)
            rhs = to_poly(target.args[1], goal.ctx, atoms, ty)
            if lhs == rhs:
                return ()
    raise TacticError(f"ring failed, ring_nf subsidiary goal\n{pp_goal(goal)}")


def tac_positivity(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    target = goal.target
    want: str | None = None
    term: Expr | None = None
    if isinstance(target, Op) and len(target.args) == 2:
        a, b = target.args
        if target.op in ("<", "≤") and _is_zero(a):
            want, term = ("pos" if target.op == "<" else "nonneg"), b
        elif target.op in (">", "≥") and _is_zero(b):
            want, term = ("pos" if target.op == ">" else "nonneg"), a
        elif target.op == "≠" and _is_zero(b):
            want, term = "nonzero", a
    if want is None or term is None:
        raise TacticError("not a positivity goal")
    got = _positivity(term, goal)
    if got == "pos" or (got == "nonneg" and want == "nonneg") or (got == "nonzero" and want == "nonzero"):
        return ()
    if got == "nonneg" and want == "pos":
        raise TacticError("failed to prove positivity, but it would be possible to prove nonnegativity if desired")
    raise TacticError(f"failed to prove positivity/nonnegativity/nonzeroness\n{pp_goal(goal)}")


def _is_zero(expr: Expr) -> bool:
    from minilean.syntax import Ascr

    return (isinstance(expr, Ascr) and expr.expr == Num(0)) or expr == Num(0)


def _positivity(expr: Expr, goal: Goal) -> str | None:
    """"pos", "nonneg", "nonzero" or None, by Mathlib's positivity extensions (syntactic, hypotheses for atoms)."""
    from minilean.syntax import Ascr

    ty = type_of(expr, goal.ctx)
    if isinstance(expr, Ascr) and isinstance(expr.expr, Num):
        return "pos" if expr.expr.value > 0 else "nonneg"
    if isinstance(expr, Op):
        op = expr.op
        parts = [_positivity(a, goal) for a in expr.args] if op != "^" else []
        if op == "+":
            a, b = parts
            if "pos" in (a, b) and a in ("pos", "nonneg") and b in ("pos", "nonneg"):
                return "pos"
            if a in ("pos", "nonneg") and b in ("pos", "nonneg"):
                return "nonneg"
        if op in ("*", "/"):
            a, b = parts
            if a == "pos" and b == "pos":
                return "pos" if not (op == "/" and ty in (NAT, INT)) else "nonneg"
            if a in ("pos", "nonneg") and b in ("pos", "nonneg"):
                return "nonneg"
            if a in ("pos", "nonzero") and b in ("pos", "nonzero") and op == "*":
                return "nonzero"
        if op == "^":
            base = _positivity(expr.args[0], goal)
            exponent = closed_value(expr.args[1], goal.ctx)
            if base == "pos":
                return "pos"
            if exponent is not None and isinstance(exponent[0], int) and exponent[0] % 2 == 0:
                return "pos" if base == "nonzero" else "nonneg"
            if base == "nonneg":
                return "nonneg"
            if base == "nonzero":
                return "nonzero"
        if op == "abs":
            inner = parts[0]
            return "pos" if inner in ("pos", "nonzero") else "nonneg"
        if op in ("-", "%") and ty == NAT:
            return "nonneg"
    if isinstance(expr, Var) or not isinstance(expr, Op):
        found: str | None = "nonneg" if ty == NAT else None
        for hyp in goal.hyps:
            prop = hyp.ty
            if not isinstance(prop, Op) or len(prop.args) != 2:
                continue
            lhs, rhs = prop.args
            if (prop.op == "<" and _is_zero(lhs) and rhs == expr) or (prop.op == ">" and _is_zero(rhs) and lhs == expr):
                return "pos"
            if (prop.op == "≤" and _is_zero(lhs) and rhs == expr) or (prop.op == "≥" and _is_zero(rhs) and lhs == expr):
                found = "nonneg"
            if prop.op == "≠" and lhs == expr and _is_zero(rhs) and found is None:
                found = "nonzero"
        return found
    return None


def tac_ext(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    target = goal.target
    if not (isinstance(target, Op) and target.op == "="):
        raise TacticError(f"ext: no applicable extensionality theorem found for\n  {pp(target)}")
    ty = type_of(target.args[0], goal.ctx) or type_of(target.args[1], goal.ctx)
    elem = element_type(ty) if ty is not None else None
    if elem is None:
        raise TacticError(f"ext: no applicable extensionality theorem found for\n  {pp(ty) if ty else '?'}")
    names = rest.split()
    name = names[0] if names else _hidden(goal, "x")
    room = make_room(goal, name)
    a, b = room.target.args if isinstance(room.target, Op) else target.args
    x = Var(name)
    new = add_local(room, name, elem, engine.uniq(), Op("↔", (Op("∈", (x, a)), Op("∈", (x, b)))))
    return (Goal(new.hyps, new.target, child_tag(goal.case, "h"), engine.uniq()),)


def tac_by_contra(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    name = rest.split(maxsplit=1)[0] if rest.split() else _hidden(goal, "h")
    room = make_room(goal, name)
    return (add_local(Goal(room.hyps, FALSE, goal.case, engine.uniq()), name, Op("¬", (room.target,)),
                      engine.uniq()),)


def _push_neg(expr: Expr, ctx: dict[str, Expr]) -> Expr:
    if isinstance(expr, Op) and expr.op == "¬":
        inner = expr.args[0]
        if isinstance(inner, Op):
            if inner.op == "¬":
                return _push_neg(inner.args[0], ctx)
            if inner.op == "∧":
                return Op("→", (_push_neg(inner.args[0], ctx), _push_neg(Op("¬", (inner.args[1],)), ctx)))
            if inner.op == "∨":
                return Op("∧", (_push_neg(Op("¬", (inner.args[0],)), ctx), _push_neg(Op("¬", (inner.args[1],)), ctx)))
            if inner.op == "→":
                return Op("∧", (_push_neg(inner.args[0], ctx), _push_neg(Op("¬", (inner.args[1],)), ctx)))
            flip = {"<": "≤", "≤": "<", ">": "≥", "≥": ">"}
            if inner.op in flip:
                a, b = inner.args
                return Op(flip[inner.op], (b, a))
            if inner.op == "=":
                return Op("≠", inner.args)
            if inner.op == "≠":
                return Op("=", inner.args)
        if isinstance(inner, Binder) and inner.kind in ("∀", "∃"):
            kind = "∃" if inner.kind == "∀" else "∀"
            inner_ctx = {**ctx, inner.name: inner.ty} if inner.ty is not None else ctx
            return Binder(kind, inner.name, inner.ty, _push_neg(Op("¬", (inner.body,)), inner_ctx))
        return expr
    if isinstance(expr, Op) and expr.op in ("∧", "∨", "→", "↔"):
        return Op(expr.op, tuple(_push_neg(a, ctx) for a in expr.args))
    if isinstance(expr, Binder) and expr.kind in ("∀", "∃"):
        inner_ctx = {**ctx, expr.name: expr.ty} if expr.ty is not None else ctx
        return Binder(expr.kind, expr.name, expr.ty, _push_neg(expr.body, inner_ctx))
    return expr


def tac_push_neg(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    _, locations = _split_at(rest)
    changed = False
    if locations is None or "⊢" in locations:
        new = _push_neg(goal.target, dict(goal.ctx))
        changed = new != goal.target
        goal = Goal(goal.hyps, new, goal.case, goal.mvar)
    for location in [loc for loc in (locations or []) if loc != "⊢"]:
        hyp = goal.lookup(location)
        if hyp is None:
            raise TacticError(f"unknown identifier '{location}'")
        new_ty = _push_neg(hyp.ty, dict(goal.ctx))
        changed = changed or new_ty != hyp.ty
        goal = Goal(tuple(Hyp(h.name, new_ty, engine.uniq()) if h.uniq == hyp.uniq else h for h in goal.hyps),
                    goal.target, goal.case, goal.mvar)
    if not changed:
        raise TacticError("push_neg made no progress")
    return (_fresh_mvar(engine, goal),)


_TRANS = {("=", "="): "=", ("=", "<"): "<", ("<", "="): "<", ("=", "≤"): "≤", ("≤", "="): "≤",
          ("≤", "≤"): "≤", ("≤", "<"): "<", ("<", "≤"): "<", ("<", "<"): "<",
          ("=", ">"): ">", (">", "="): ">", ("=", "≥"): "≥", ("≥", "="): "≥", ("≥", "≥"): "≥",
          ("≥", ">"): ">", (">", "≥"): ">", (">", ">"): ">", ("=", "↔"): "↔", ("↔", "↔"): "↔"}


def tac_calc(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    """`calc a = b := proof` then `_ ≤ c := proof` lines: each step is checked, the relations compose by
    Lean's `Trans` instances, and the composite must be the goal."""
    steps = [line.strip() for line in rest.split("\n") if line.strip()]
    if not steps:
        raise TacticError("unexpected end of input; expected term")
    first_lhs: Expr | None = None
    previous: Expr | None = None
    relation = ""
    for step in steps:
        pieces = split_top(step, ":=")
        if len(pieces) < 2:
            raise TacticError(f"invalid 'calc' step, expected `term := proof`\n  {step}")
        rel_text, proof_text = pieces[0], ":=".join(pieces[1:])
        rel = parse(rel_text)
        if not (isinstance(rel, Op) and rel.op in ("=", "<", "≤", ">", "≥", "↔")):
            raise TacticError(f"invalid 'calc' step, relation expected\n  {rel_text.strip()}")
        lhs, rhs = rel.args
        if isinstance(lhs, Hole):
            if previous is None:
                raise TacticError("invalid 'calc' step, the first step cannot start with `_`")
            lhs = previous
        elif previous is not None and not defeq(Elaborator(goal.ctx).value(lhs, type_of(previous, goal.ctx)),
                                                previous, goal.ctx):
            raise TacticError(f"invalid 'calc' step, left-hand side is\n  {pp(lhs)}\nprevious right-hand side is\n"
                              f"  {pp(previous)}")
        step_prop = Elaborator(goal.ctx).prop(Op(rel.op, (lhs, rhs)))
        assert isinstance(step_prop, Op)
        if engine.check_term(goal, parse(proof_text), step_prop):
            raise TacticError("invalid 'calc' step, the proof has holes")
        if first_lhs is None:
            first_lhs, relation = step_prop.args[0], step_prop.op
        else:
            composed = _TRANS.get((relation, step_prop.op))
            if composed is None:
                raise TacticError(f"invalid 'calc' step, failed to synthesize `Trans` instance for {relation} and "
                                  f"{step_prop.op}")
            relation = composed
        previous = step_prop.args[1]
    assert first_lhs is not None and previous is not None
    result = Op(relation, (first_lhs, previous))
    if not defeq(result, goal.target, goal.ctx):
        raise TacticError(type_mismatch(Var("calc"), result, goal.target).replace("type mismatch\n  calc",
                                                                                  "invalid 'calc' step, type mismatch"))
    return ()


def tac_exact_search(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    """`exact?` searches Mathlib; minilean has no library search, so it answers as Lean does when none is found."""
    raise TacticError("`exact?` could not close the goal. Try `apply?` to see partial suggestions.")


def tac_sorry(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    engine.run_info.sorried_goals.append(goal)
    return ()


def tac_sleep(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    engine.run_info.sleep_ms += min(int(rest or "0"), 600_000) if rest.strip().isdigit() else 0
    return (goal,)


def tac_ring_nf(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    try:
        return tac_ring(engine, goal, rest)
    except TacticError:
        raise TacticError("ring_nf failed") from None


_TACTICS: dict[str, Callable[[TacticEngine, Goal, str], tuple[Goal, ...]]] = {
    "intro": tac_intro,
    "intros": tac_intros,
    "rintro": tac_rintro,
    "rcases": tac_rcases,
    "obtain": tac_obtain,
    "cases": tac_cases,
    "cases'": tac_cases_prime,
    "constructor": tac_constructor,
    "left": tac_left,
    "right": tac_right,
    "exfalso": tac_exfalso,
    "exact": tac_exact,
    "refine": tac_refine,
    "apply": tac_apply,
    "use": tac_use,
    "exists": tac_exists,
    "assumption": tac_assumption,
    "contradiction": tac_contradiction,
    "trivial": tac_trivial,
    "rfl": tac_rfl,
    "decide": tac_decide,
    "unfold": tac_unfold,
    "have": tac_have,
    "show": tac_show,
    "specialize": tac_specialize,
    "subst": tac_subst,
    "rw": tac_rw,
    "rewrite": tac_rw,
    "rwa": tac_rwa,
    "simp": tac_simp,
    "dsimp": tac_simp,
    "simp_arith": tac_simp_arith,
    "norm_num": tac_norm_num,
    "linarith": tac_linarith,
    "nlinarith": tac_nlinarith,
    "positivity": tac_positivity,
    "omega": tac_omega,
    "tauto": tac_tauto,
    "ring": tac_ring,
    "ring_nf": tac_ring_nf,
    "ext": tac_ext,
    "calc": tac_calc,
    "exact?": tac_exact_search,
    "by_contra": tac_by_contra,
    "push_neg": tac_push_neg,
    "sorry": tac_sorry,
    "admit": tac_sorry,
    "sleep": tac_sleep,
}

TACTIC_NAMES = frozenset(_TACTICS)
