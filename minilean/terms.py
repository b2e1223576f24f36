"""Proof terms: the checker behind `exact`, `apply`, `refine`, `have`, `obtain`, `linarith [...]` and `rw [...]`.

    checker = TermChecker(goal, run_by=engine.close)         # `run_by` proves `by …` blocks
    new_goals = checker.check(parse("⟨h.2, h.1⟩"), goal.target)

A term's type is a *telescope*: parameters (implicit, explicit value, explicit proof) and a conclusion, with
metavariables `?a` for what application and unification have not fixed yet. A lemma of the library
(`minilean.lemmas`) is instantiated by first-order matching up to Lean's reducible unfoldings (`a > b` is
`b < a`, `x ∈ A ∩ B` is `x ∈ A ∧ x ∈ B`, `A ⊆ B` is `∀ ⦃a⦄, a ∈ A → a ∈ B`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable

from minilean.constants import file_theorem
from minilean.defeq import defeq
from minilean.elab import (
    NUMBER_TYPES,
    PROP,
    Context,
    ElabError,
    element_type,
    normalize_type,
    subst,
    subst_many,
    type_of,
    unfold,
    whnf,
)
from minilean.elaborator import Elaborator
from minilean.goals import Goal, Hyp, make_room, make_room_for, pp_goals
from minilean.lemmas import CLASS_TYPES, Param, Telescope, lemma_telescope, match
from minilean.syntax import TRUE, Anon, App, Ascr, Binder, By, Expr, Hole, Op, Proj, Var, free_vars, pp

# ---------------------------------------------------------------------------------------------------
# The checker.


def _structure_field(head: Expr | None, name: str) -> Expr | None:
    """What `h.1`, `h.2`, `h.left`, `h.right`, `h.mp`, `h.mpr`, `h.symm` prove of `h : a ∧ b` or `h : a ↔ b`."""
    if isinstance(head, Op) and head.op == "∧":
        if name in ("1", "left"):
            return head.args[0]
        if name in ("2", "right"):
            return head.args[1]
        if name == "symm":
            return Op("∧", (head.args[1], head.args[0]))
    if isinstance(head, Op) and head.op == "↔":
        if name in ("1", "mp"):
            return Op("→", head.args)
        if name in ("2", "mpr"):
            return Op("→", (head.args[1], head.args[0]))
        if name == "symm":
            return Op("↔", (head.args[1], head.args[0]))
    return None


def _relation_field(concl: Expr, name: str) -> Expr | None:
    """What `h.symm` (of `=`, `≠`, `∨`), `h.le`, `h.ne` and `h.ne'` (of `<`, `>`) prove."""
    if isinstance(concl, Op) and name == "symm" and concl.op in ("=", "≠", "∨"):
        return Op(concl.op, (concl.args[1], concl.args[0]))
    if isinstance(concl, Op) and concl.op in ("<", ">") and name == "le":
        return Op("≤" if concl.op == "<" else "≥", concl.args)
    if isinstance(concl, Op) and concl.op in ("<", ">") and name in ("ne", "ne'"):
        a, b = concl.args if concl.op == "<" else (concl.args[1], concl.args[0])
        return Op("≠", (a, b) if name == "ne" else (b, a))
    return None


def _chaining_field(tel: Telescope, concl: Expr, name: str) -> bool:
    """`h.trans` (of an order, `=`, `⊆`, `∣`) and `h.elim` (of `∨`) made into `tel`, with the parameters they
    take; False for another field."""
    if isinstance(concl, Op) and concl.op in ("≤", "<", "=", "⊆", "∣") and name == "trans":
        tel.fresh += 1
        meta = f"?c#{tel.fresh}"
        tel.metas.add(meta)
        a, b = concl.args
        tel.params = [Param(f"?h#{tel.fresh}", "proof", Op(concl.op, (b, Var(meta))), "h")]
        tel.concl = Op(concl.op, (a, Var(meta)))
        return True
    if isinstance(concl, Op) and concl.op == "∨" and name == "elim":
        tel.fresh += 1
        meta = f"?c#{tel.fresh}"
        tel.metas.add(meta)
        tel.params = [Param(f"?l#{tel.fresh}", "proof", Op("→", (concl.args[0], Var(meta))), "left"),
                      Param(f"?r#{tel.fresh}", "proof", Op("→", (concl.args[1], Var(meta))), "right")]
        tel.concl = Var(meta)
        return True
    return False


def type_mismatch(term: Expr, actual: Expr, expected: Expr) -> str:
    return (f"type mismatch\n  {pp(term)}\nhas type\n  {pp(actual)} : Prop\nbut is expected to have type\n"
            f"  {pp(expected)} : Prop")


class TermChecker:
    """Checks proof terms in a goal's local context. `run_by(goal)` must close `goal` (for `by` blocks) or raise
    TacticError; `uniq()` names new locals and goals; `holes` allows `?_` (refine), collecting new goals."""

    def __init__(self, goal: Goal, run_by: Callable[[Goal], None], uniq: Callable[[], str],
                 holes: bool = False) -> None:
        self.goal = goal
        self.run_by = run_by
        self.uniq = uniq
        self.holes = holes
        # goals left by `?_` holes met while checking arguments of applications (refine)
        self.collected: list[Goal] = []

    @property
    def ctx(self) -> Context:
        return self.goal.ctx

    def elab_prop(self, expr: Expr) -> Expr:
        return Elaborator(self.ctx).prop(expr)

    def _with_local(self, name: str, ty: Expr) -> TermChecker:
        goal = make_room(self.goal, name)
        goal = Goal((*goal.hyps, Hyp(name, ty, self.uniq())), goal.target, goal.case, goal.mvar)
        return TermChecker(goal, self.run_by, self.uniq, self.holes)

    # -- inference ------------------------------------------------------------------------------

    def infer(self, term: Expr) -> Telescope:
        if isinstance(term, Var):
            return self._infer_name(term)
        if isinstance(term, App):
            # `h.trans h₂` reaches here as App(Var("h.trans"), …): the head resolves the field notation
            tel = self.infer(term.fn)
            for arg in term.args:
                self._apply_arg(tel, arg)
            return tel
        if isinstance(term, Proj):
            return self._project(self.infer(term.expr), term)
        if isinstance(term, Ascr):
            ty = self.elab_prop(term.ty)
            self.check(term.expr, ty)
            return Telescope([], ty)
        if isinstance(term, Anon):
            raise ElabError(f"invalid constructor ⟨...⟩, expected type must be known\n  {pp(term)}")
        if isinstance(term, Hole):
            raise ElabError("don't know how to synthesize placeholder")
        raise ElabError(f"cannot infer the type of\n  {pp(term)}")

    def _infer_name(self, term: Var) -> Telescope:
        """A local hypothesis, a lemma, an earlier theorem of the file, or a field notation on one (`h.trans`,
        `h.1.le`)."""
        hyp = self.goal.lookup(term.name)
        if hyp is not None:
            if hyp.ty in NUMBER_TYPES or element_type(hyp.ty) is not None or hyp.ty == PROP:
                raise ElabError(f"type mismatch\n  {term.name}\nhas type\n  {pp(hyp.ty)} : Type\nbut is "
                                "expected to have type a proposition")
            return Telescope([], hyp.ty)
        lemma = lemma_telescope(term.name)
        if lemma is not None:
            return lemma
        earlier = file_theorem(term.name)
        if earlier is not None:
            return Telescope([], earlier)
        if "." in term.name:
            head, _, rest = term.name.partition(".")
            if self.goal.lookup(head) is not None or lemma_telescope(head) is not None:
                base: Expr = Var(head)
                for part in rest.split("."):
                    base = Proj(base, part)
                return self.infer(base)
            # `h₀.trans h₁` written with a lemma namespace prefix is handled above; otherwise unknown
        if term.name in ("rfl", "trivial"):
            raise ElabError(f"invalid use of `{term.name}` without an expected type")
        raise ElabError(f"unknown identifier '{term.name}'")

    def _peel(self, tel: Telescope) -> bool:
        """Turn the head of the conclusion (`∀`, `→`, `¬`, `⊆`) into a parameter; False if there is none."""
        concl = tel.inst(tel.concl)
        for _ in range(8):
            if isinstance(concl, Binder) and concl.kind == "∀":
                tel.fresh += 1
                meta = f"?{concl.name}#{tel.fresh}"
                tel.metas.add(meta)
                tel.params.append(Param(meta, "value", concl.ty, concl.name))
                tel.concl = subst(concl.body, concl.name, Var(meta))
                return True
            if isinstance(concl, Op) and concl.op == "→":
                tel.fresh += 1
                # an arrow's premise has no user-facing binder name: `apply` leaves its goal untagged
                tel.params.append(Param(f"?h#{tel.fresh}", "proof", concl.args[0], ""))
                tel.concl = concl.args[1]
                return True
            step = unfold(concl, self.ctx)
            if step is None:
                return False
            if isinstance(concl, Op) and concl.op == "⊆":
                # `A ⊆ B` is `∀ ⦃a⦄, a ∈ A → a ∈ B`: the element is strict-implicit
                assert isinstance(step, Binder)
                tel.fresh += 1
                meta = f"?{step.name}#{tel.fresh}"
                tel.metas.add(meta)
                tel.params.append(Param(meta, "implicit", step.ty, step.name))
                tel.concl = subst(step.body, step.name, Var(meta))
                return True
            concl = step
        return False

    def _apply_arg(self, tel: Telescope, arg: Expr) -> None:
        while True:
            if not tel.params and not self._peel(tel):
                raise ElabError(f"function expected\n  {pp(tel.inst(tel.concl))}")
            param = tel.params.pop(0)
            if param.kind == "implicit":
                continue
            break
        if param.kind == "value" and isinstance(arg, Hole) and arg.name == "_":
            return  # `le_refl _`: the metavariable stays, to be fixed by unification with the expected type
        if param.kind == "value":
            expected = param.ty if param.ty is not None and param.ty != Var("?") else None
            if expected is not None:
                expected = tel.inst(expected)
                if tel.unassigned(expected):
                    expected = None
            elaborator = Elaborator(self.ctx)
            if expected is None and elaborator.infer_type(arg) is None:
                # a bare numeral (`le_or_lt 0 x`): its type comes from the other arguments, as Lean's unifier
                # postpones it; the instance is elaborated (numerals typed) once everything is assigned
                tel.assign[param.name] = arg
                return
            tel.assign[param.name] = elaborator.value(arg, expected)
            return
        assert param.ty is not None
        wanted = tel.inst(param.ty)
        if not tel.unassigned(wanted):
            self.collected.extend(self.check(arg, self._elab_instance(tel, wanted)))
            return
        if isinstance(arg, (By, Anon, Hole, Binder)) or (isinstance(arg, Var) and arg.name in ("rfl", "trivial")):
            tel.postponed.append((arg, param.ty))
            return
        actual = self.infer_prop(arg)
        if not match(param.ty, actual, tel, self.ctx):
            raise ElabError(
                f"application type mismatch\n  {pp(arg)}\nargument\n  {pp(arg)}\nhas type\n  {pp(actual)} : "
                f"Prop\nbut is expected to have type\n  {pp(wanted)} : Prop")

    def peel_value(self, tel: Telescope) -> bool:
        """Turn a leading value or implicit parameter into a metavariable left to matching (`rw [add_comm]`);
        False when the next parameter is a proof or there is none."""
        if tel.params and tel.params[0].kind in ("value", "implicit"):
            tel.params.pop(0)
            return True
        concl = tel.inst(tel.concl)
        if not tel.params and isinstance(concl, Binder) and concl.kind == "∀":
            return self._peel(tel) and self.peel_value(tel)
        return False

    def infer_prop(self, term: Expr) -> Expr:
        """The proposition a term proves, fully applied (implicit arguments must be determined). Holes are
        refused here: their goals would have nowhere to go."""
        before = len(self.collected)
        tel = self.infer(term)
        prop = self._finish(tel, term, None)
        if len(self.collected) > before:
            raise ElabError("don't know how to synthesize placeholder")
        return prop

    def _elab_instance(self, tel: Telescope, expr: Expr) -> Expr:
        """An instantiated lemma statement elaborated in the local context (numerals typed), after checking that
        its values have a type the lemma's class allows."""
        if tel.klass in CLASS_TYPES:
            allowed = CLASS_TYPES[tel.klass]
            for meta, value in tel.assign.items():
                ty = type_of(value, self.ctx)
                if ty is not None and ty not in allowed:
                    raise ElabError(f"failed to synthesize\n  {_instance_name(tel.klass)} {pp(ty)}\n"
                                    f"(while instantiating {meta.lstrip('?').split('#')[0]})")
        if not tel.klass:
            return expr
        # Lemma statements are written with bare numerals: give them the types of the instantiated values.
        return Elaborator(self.ctx).prop(expr)

    def _finish(self, tel: Telescope, term: Expr, expected: Expr | None) -> Expr:
        # Explicit parameters no argument was given for stay in the type (`h.elim : (p → c) → (q → c) → c`):
        # the term is a function, not a proof of its conclusion.
        folded = tel.concl
        for param in reversed([p for p in tel.params if p.kind != "implicit"]):
            if param.kind == "proof":
                assert param.ty is not None
                folded = Op("→", (param.ty, folded))
            else:
                folded = Binder("∀", param.name, param.ty if param.ty is not None else Var("?α"), folded)
        concl = tel.inst(folded)
        if expected is not None and tel.unassigned(concl):
            if not match(folded, expected, tel, self.ctx):
                raise ElabError(type_mismatch(term, _show_metas(concl, tel), expected))
            concl = tel.inst(folded)
        missing = tel.unassigned(concl) | {
            p.name for p in tel.params if p.kind == "implicit" and p.name in tel.metas and p.name not in tel.assign
            and p.name in free_vars(tel.concl)}
        if missing:
            raise ElabError(f"don't know how to synthesize implicit argument\n  {pp(term)}\ncontext:\n"
                            f"{pp_goals((self.goal,))}")
        self._check_postponed(tel)
        return self._elab_instance(tel, concl)

    def _check_postponed(self, tel: Telescope) -> None:
        while tel.postponed:
            arg, pattern = tel.postponed.pop(0)
            wanted = tel.inst(pattern)
            if tel.unassigned(wanted):
                raise ElabError(f"don't know how to synthesize placeholder for argument\n  {pp(arg)}")
            self.collected.extend(self.check(arg, self._elab_instance(tel, wanted)))

    def _project(self, base: Telescope, proj: Proj) -> Telescope:
        concl = self._finish(base, proj.expr, None) if not base.unassigned(base.concl) else base.inst(base.concl)
        head = whnf_for_proj(concl, self.ctx)
        name = proj.field
        tel = Telescope([], concl, set(base.metas), dict(base.assign), base.klass, base.fresh)
        projected = _structure_field(head, name)
        if projected is None:
            projected = _relation_field(concl, name)
        if projected is not None:
            tel.concl = projected
            return tel
        if _chaining_field(tel, concl, name):
            return tel
        # generalized field notation: `h.resolve_left hp` is `Or.resolve_left h hp` (h fills the first explicit
        # argument of the structure's own type)
        lemma = lemma_telescope(f"{_structure(concl)}.{name}")
        if lemma is not None:
            self._apply_arg(lemma, proj.expr)
            return lemma
        raise ElabError(f"invalid field '{name}', the environment does not contain '{_structure(concl)}.{name}'\n"
                        f"  {pp(proj.expr)}\nhas type\n  {pp(concl)}")

    # -- checking against an expected type -----------------------------------------------------

    def check(self, term: Expr, expected: Expr) -> list[Goal]:
        """Check `term : expected`; the new goals `?_` holes leave (refine)."""
        if isinstance(term, Hole):
            if term.name == "?_" and self.holes:
                return [Goal(self.goal.hyps, expected, None, self.uniq())]
            raise ElabError(f"don't know how to synthesize placeholder\ncontext:\n"
                            f"{pp_goals((Goal(self.goal.hyps, expected, None, ''),))}")
        if isinstance(term, By):
            self.run_by(Goal(self.goal.hyps, expected, None, self.uniq()))
            return []
        if isinstance(term, Var) and term.name == "rfl":
            head = whnf(expected, self.ctx)
            if isinstance(head, Op) and head.op in ("=", "↔") and defeq(head.args[0], head.args[1], self.ctx):
                return []
            raise ElabError(type_mismatch(term, _rfl_type(head), expected))
        if isinstance(term, Var) and term.name in ("trivial", "True.intro"):
            if expected == TRUE:
                return []
            raise ElabError(type_mismatch(term, TRUE, expected))
        if isinstance(term, Anon):
            return self._check_anon(term, expected)
        if isinstance(term, Binder) and term.kind == "fun":
            return self._check_fun(term, expected)
        before = len(self.collected)
        tel = self.infer(term)
        actual = self._finish(tel, term, expected)
        if not defeq(actual, expected, self.ctx):
            raise ElabError(type_mismatch(term, actual, expected))
        new = self.collected[before:]
        del self.collected[before:]
        return new

    def _check_anon(self, term: Anon, expected: Expr) -> list[Goal]:
        head = whnf(expected, self.ctx)
        args = term.args
        if isinstance(head, Op) and head.op in ("∧", "↔") and len(args) >= 2:
            rest: Expr = Anon(args[1:]) if len(args) > 2 else args[1]
            if head.op == "∧":
                return [*self.check(args[0], head.args[0]), *self.check(rest, head.args[1])]
            a, b = head.args
            return [*self.check(args[0], Op("→", (a, b))), *self.check(rest, Op("→", (b, a)))]
        if isinstance(head, Binder) and head.kind == "∃" and len(args) >= 2:
            assert head.ty is not None
            witness = Elaborator(self.ctx).value(args[0], head.ty)
            rest = Anon(args[1:]) if len(args) > 2 else args[1]
            return self.check(rest, subst(head.body, head.name, witness))
        raise ElabError(f"invalid constructor ⟨...⟩, expected type must be an inductive type with only one "
                        f"constructor \n  {pp(expected)}")

    def _check_fun(self, term: Binder, expected: Expr) -> list[Goal]:
        if self.goal.lookup(term.name) is not None:
            # `fun x => …` with a local `x` in scope: the old `x` becomes `x✝` (in the expected type too), so the
            # binder cannot capture it
            room, (expected,) = make_room_for(self.goal, term.name, expected)
            shadowed = self._at(room)
            return shadowed._check_fun_fresh(term, expected)
        return self._check_fun_fresh(term, expected)

    def _at(self, goal: Goal) -> TermChecker:
        """The same checker in another local context."""
        other = copy.copy(self)
        other.goal = goal
        other.collected = []
        return other

    def _check_fun_fresh(self, term: Binder, expected: Expr) -> list[Goal]:
        head = whnf(expected, self.ctx) if not (isinstance(expected, Binder) and expected.kind == "∀") else expected
        if isinstance(head, Binder) and head.kind == "∀":
            assert head.ty is not None
            if term.ty is not None and normalize_type(term.ty) != head.ty:
                raise ElabError(f"type mismatch in binder {term.name}")
            inner = self._with_local(term.name, head.ty)
            return inner.check(term.body, subst(head.body, head.name, Var(term.name)))
        if isinstance(head, Op) and head.op == "→":
            premise = head.args[0]
            if term.ty is not None and not defeq(self.elab_prop(term.ty), premise, self.ctx):
                raise ElabError(f"type mismatch in binder {term.name}")
            inner = self._with_local(term.name, premise)
            return inner.check(term.body, head.args[1])
        raise ElabError(f"type mismatch\n  {pp(term)}\nhas a function type\nbut is expected to have type\n"
                        f"  {pp(expected)} : Prop")

    # -- apply ----------------------------------------------------------------------------------

    def apply(self, term: Expr, target: Expr) -> list[tuple[str, Expr]]:
        """`apply term`: the premises left as new goals (case tag, proposition), in order."""
        tel = self.infer(term)
        for _ in range(12):
            snapshot = (list(tel.params), tel.concl, dict(tel.assign), set(tel.metas), tel.fresh)
            if match(tel.concl, target, tel, self.ctx):
                result = self._elab_instance(tel, tel.inst(tel.concl))
                if not defeq(result, target, self.ctx):
                    raise ElabError(type_mismatch(term, result, target))
                self._check_postponed(tel)
                pending = [p for p in tel.params if p.kind == "proof"]
                values = [p for p in tel.params if p.kind != "proof" and p.name not in tel.assign
                          and any(p.name in free_vars(q.ty) for q in pending if q.ty is not None)]
                if values:
                    raise ElabError(f"don't know how to synthesize implicit argument\n  {pp(term)}")
                holes = [(g.case or "", g.target) for g in self.collected]
                self.collected.clear()
                return [*holes, *((p.label, self._elab_instance(tel, tel.inst(p.ty)) if p.ty is not None else TRUE)
                                  for p in pending)]
            tel.params, tel.concl, tel.assign, tel.metas, tel.fresh = snapshot
            if not self._peel(tel):
                break
        full = lemma_or_local_type(self, term)
        raise ElabError(f"tactic 'apply' failed, could not unify the conclusion of `{pp(term)}`\n  "
                        f"{pp(full)}\nwith the goal\n  {pp(target)}")


def lemma_or_local_type(checker: TermChecker, term: Expr) -> Expr:
    try:
        tel = checker.infer(term)
    except ElabError:
        return term
    return tel.inst(tel.concl)


def _show_metas(expr: Expr, tel: Telescope) -> Expr:
    """Unassigned metavariables as Lean prints them (`?m.1`, `?m.2`, …)."""
    names = sorted(tel.unassigned(expr))
    return subst_many(expr, {name: Var(f"?m.{index}") for index, name in enumerate(names, start=1)})


def whnf_for_proj(prop: Expr, ctx: Context) -> Expr:
    """Unfold until the head is `∧` or `↔` (for `.1`, `.2`, `.mp`, …), else return `prop` unchanged."""
    current = prop
    for _ in range(16):
        if isinstance(current, Op) and current.op in ("∧", "↔"):
            return current
        step = unfold(current, ctx)
        if step is None:
            return prop
        current = step
    return prop


def _structure(prop: Expr) -> str:
    if isinstance(prop, Op):
        return {"∧": "And", "∨": "Or", "↔": "Iff", "=": "Eq", "≠": "Ne", "<": "LT.lt", "≤": "LE.le",
                "∈": "Membership.mem",
                "⊆": "HasSubset.Subset", "¬": "Not", "→": "Function"}.get(prop.op, "Prop")
    return "Prop"


def _instance_name(klass: str) -> str:
    return {"ring": "Ring", "field": "Field", "nat": "Nat", "int": "Int"}.get(klass, "Semiring")


def _rfl_type(head: Expr) -> Expr:
    if isinstance(head, Op) and head.op in ("=", "↔"):
        return Op(head.op, (head.args[0], head.args[0]))
    return Op("=", (Var("?a"), Var("?a")))


__all__ = ["TermChecker", "type_mismatch"]
