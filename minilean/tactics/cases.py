"""Tactics that destructure a local: `rcases` patterns (`⟨a, b⟩`, `h | h`, `rfl`, `-`), `obtain`, `cases` (with
its `with | inl h => …` alternatives) and Mathlib's `cases'`.

    tac_rcases(engine, goal, "h with ⟨x, hx⟩ | h")
"""

from __future__ import annotations

import re

from leankit.text import matching_close
from minilean.elab import subst, whnf
from minilean.elaborator import Elaborator
from minilean.goals import (
    Goal,
    Hyp,
    TacticError,
    add_local,
    child_tag,
    make_room,
    make_room_for,
    pp_goal,
    pp_goals,
    take_hyp,
)
from minilean.parser import parse
from minilean.syntax import FALSE, Binder, Expr, Op, Var, pp
from minilean.tactics.base import TacticEngine
from minilean.tactics.context import (
    _fresh_mvar,
    _hidden,
    _hyp_of_term,
    _rename_inaccessible,
    _take_hyp,
    whnf_connective,
)
from minilean.tactics.rewrite import _subst
from minilean.tactics.script import _CLOSE, _OPEN, split_top

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
        return _rcases_tuple(engine, goal, hyp_name, ty, list(pattern[1]), tag_style)  # type: ignore[call-overload]
    if kind == "alts":
        return _rcases_alts(engine, goal, hyp_name, ty, list(pattern[1]), tag_style)  # type: ignore[call-overload]
    raise TacticError("rcases: unsupported pattern")


def _rcases_tuple(engine: TacticEngine, goal: Goal, hyp_name: str, ty: Expr, pats: list[Pattern],
                  tag_style: str) -> list[Goal]:
    """`⟨p₁, p₂, …⟩` on a conjunction, an `↔` (its two implications) or an existential; on a disjunction the
    alternatives, on anything else the first pattern."""
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
        return _rcases_witness(engine, rest, head, pats, tag_style)
    assert isinstance(head, Op)
    a, b = head.args
    if head.op == "↔":
        a, b = Op("→", (a, b)), Op("→", (b, a))
    left_name, right_name = _hidden(rest, "left"), _hidden(rest, "right")
    room = add_local(rest, left_name, a, engine.uniq())
    room = add_local(room, right_name, b, engine.uniq())
    remaining: Pattern = ("tuple", pats[1:]) if len(pats) > 2 else pats[1]
    goals: list[Goal] = []
    for g in rcases(engine, room, left_name, pats[0], tag_style):
        goals.extend(rcases(engine, g, right_name, remaining, tag_style))
    return goals


def _rcases_witness(engine: TacticEngine, rest: Goal, head: Binder, pats: list[Pattern],
                    tag_style: str) -> list[Goal]:
    """`⟨x, p…⟩` on `∃ x, P x` (`rest`: the goal without the hypothesis): the witness and its property as locals."""
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


def _rcases_alts(engine: TacticEngine, goal: Goal, hyp_name: str, ty: Expr, pats: list[Pattern],
                 tag_style: str) -> list[Goal]:
    """`p₁ | p₂ | …` on a disjunction: one goal per side, tagged `inl` and `inr`."""
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
