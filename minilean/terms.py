"""Proof terms: the named lemma library and the checker behind `exact`, `apply`, `refine`, `have`, `obtain`,
`linarith [...]` and `rw [...]`.

    checker = TermChecker(goal, run_by=engine.close)         # `run_by` proves `by …` blocks
    new_goals = checker.check(parse("⟨h.2, h.1⟩"), goal.target)

A term's type is a *telescope*: parameters (implicit, explicit value, explicit proof) and a conclusion, with
metavariables `?a` for what application and unification have not fixed yet. A lemma's statement is written in
Lean syntax below and instantiated by first-order matching up to Lean's reducible unfoldings (`a > b` is
`b < a`, `x ∈ A ∩ B` is `x ∈ A ∧ x ∈ B`, `A ⊆ B` is `∀ ⦃a⦄, a ∈ A → a ∈ B`). Every lemma is a true theorem of
Mathlib for the types its class allows (`ring`: ℤ ℚ ℝ, so `sub_nonneg` is refused on ℕ, where it is false).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from minilean.constants import file_theorem
from minilean.defeq import defeq
from minilean.elab import (
    FIELDS,
    INT,
    NAT,
    NUMBER_TYPES,
    PROP,
    Context,
    ElabError,
    Elaborator,
    alpha_eq,
    element_type,
    fresh_name,
    normalize_type,
    subst,
    subst_many,
    type_of,
    unfold,
    whnf,
)
from minilean.goals import Goal, Hyp, make_room, make_room_for, pp_goals
from minilean.syntax import (
    TRUE,
    Anon,
    App,
    Ascr,
    Binder,
    By,
    Expr,
    Hole,
    Num,
    Op,
    Proj,
    Var,
    free_vars,
    parse,
    pp,
)

# name: "class | binders : conclusion". Classes: semiring (ℕ ℤ ℚ ℝ), ring (ℤ ℚ ℝ), field (ℚ ℝ), nat (ℕ),
# int (ℤ), prop (the variables are propositions), set (sets and their elements).
_LEMMAS: dict[str, str] = {
    # order and positivity
    "sq_nonneg": "semiring | (a) : 0 ≤ a ^ 2",
    "pow_two_nonneg": "semiring | (a) : 0 ≤ a ^ 2",
    "mul_self_nonneg": "ring | (a) : 0 ≤ a * a",
    "abs_nonneg": "ring | (a) : 0 ≤ |a|",
    "le_abs_self": "ring | (a) : a ≤ |a|",
    "neg_abs_le": "ring | (a) : -|a| ≤ a",
    "mul_pos": "semiring | {a b} (ha : 0 < a) (hb : 0 < b) : 0 < a * b",
    "mul_nonneg": "semiring | {a b} (ha : 0 ≤ a) (hb : 0 ≤ b) : 0 ≤ a * b",
    "add_pos": "semiring | {a b} (ha : 0 < a) (hb : 0 < b) : 0 < a + b",
    "add_nonneg": "semiring | {a b} (ha : 0 ≤ a) (hb : 0 ≤ b) : 0 ≤ a + b",
    "add_pos_of_pos_of_nonneg": "semiring | {a b} (ha : 0 < a) (hb : 0 ≤ b) : 0 < a + b",
    "pow_pos": "semiring | {a} (H : 0 < a) (n) : 0 < a ^ n",
    "pow_nonneg": "semiring | {a} (H : 0 ≤ a) (n) : 0 ≤ a ^ n",
    "le_refl": "semiring | (a) : a ≤ a",
    "le_rfl": "semiring | {a} : a ≤ a",
    "le_of_lt": "semiring | {a b} (h : a < b) : a ≤ b",
    "le_of_eq": "semiring | {a b} (h : a = b) : a ≤ b",
    "le_trans": "semiring | {a b c} (h₁ : a ≤ b) (h₂ : b ≤ c) : a ≤ c",
    "lt_trans": "semiring | {a b c} (h₁ : a < b) (h₂ : b < c) : a < c",
    "lt_of_lt_of_le": "semiring | {a b c} (h₁ : a < b) (h₂ : b ≤ c) : a < c",
    "lt_of_le_of_lt": "semiring | {a b c} (h₁ : a ≤ b) (h₂ : b < c) : a < c",
    "ne_of_gt": "semiring | {a b} (h : a > b) : a ≠ b",
    "ne_of_lt": "semiring | {a b} (h : a < b) : a ≠ b",
    "lt_irrefl": "semiring | (a) : ¬a < a",
    "not_lt": "semiring | {a b} : ¬a < b ↔ b ≤ a",
    "not_le": "semiring | {a b} : ¬a ≤ b ↔ b < a",
    "le_antisymm": "semiring | {a b} (h₁ : a ≤ b) (h₂ : b ≤ a) : a = b",
    "le_or_lt": "semiring | (a b) : a ≤ b ∨ b < a",
    "lt_or_le": "semiring | (a b) : a < b ∨ b ≤ a",
    "zero_lt_one": "semiring | : 0 < 1",
    "sub_nonneg": "ring | {a b} : 0 ≤ a - b ↔ b ≤ a",
    "sub_pos": "ring | {a b} : 0 < a - b ↔ b < a",
    "abs_lt": "ring | {a b} : |a| < b ↔ -b < a ∧ a < b",
    "abs_le": "ring | {a b} : |a| ≤ b ↔ -b ≤ a ∧ a ≤ b",
    "Nat.zero_le": "nat | (n) : 0 ≤ n",
    "Nat.lt_succ_self": "nat | (n) : n < n + 1",
    "Nat.succ_pos": "nat | (n) : 0 < n + 1",
    "Nat.pos_of_ne_zero": "nat | {n} (h : n ≠ 0) : 0 < n",
    # algebra (equations usable with rw)
    "add_comm": "semiring | (a b) : a + b = b + a",
    "mul_comm": "semiring | (a b) : a * b = b * a",
    "add_assoc": "semiring | (a b c) : a + b + c = a + (b + c)",
    "mul_assoc": "semiring | (a b c) : a * b * c = a * (b * c)",
    "add_zero": "semiring | (a) : a + 0 = a",
    "zero_add": "semiring | (a) : 0 + a = a",
    "mul_one": "semiring | (a) : a * 1 = a",
    "one_mul": "semiring | (a) : 1 * a = a",
    "mul_zero": "semiring | (a) : a * 0 = 0",
    "zero_mul": "semiring | (a) : 0 * a = 0",
    "sub_self": "semiring | (a) : a - a = 0",
    "two_mul": "semiring | (a) : 2 * a = a + a",
    "sq": "semiring | (a) : a ^ 2 = a * a",
    "pow_two": "semiring | (a) : a ^ 2 = a * a",
    "mul_add": "semiring | (a b c) : a * (b + c) = a * b + a * c",
    "add_mul": "semiring | (a b c) : (a + b) * c = a * c + b * c",
    "mul_eq_zero": "semiring | {a b} : a * b = 0 ↔ a = 0 ∨ b = 0",
    "add_sub_cancel_right": "ring | (a b) : a + b - b = a",
    "sub_eq_zero": "ring | {a b} : a - b = 0 ↔ a = b",
    "Nat.add_mul_mod_self_right": "nat | (a b n) : (a + b * n) % n = a % n",
    "Nat.pow_mod": "nat | (a b n) : a ^ b % n = (a % n) ^ b % n",
    "Nat.add_mod": "nat | (a b n) : (a + b) % n = (a % n + b % n) % n",
    "Nat.mul_mod": "nat | (a b n) : a * b % n = a % n * (b % n) % n",
    "abs_of_nonneg": "ring | {a} (h : 0 ≤ a) : |a| = a",
    "abs_of_pos": "ring | {a} (h : 0 < a) : |a| = a",
    "abs_of_neg": "ring | {a} (h : a < 0) : |a| = -a",
    "div_eq_iff": "field | {a b c} (hc : c ≠ 0) : a / c = b ↔ a = b * c",
    "eq_div_iff": "field | {a b c} (hc : c ≠ 0) : a = b / c ↔ a * c = b",
    "le_div_iff₀": "field | {a b c} (hc : 0 < c) : a ≤ b / c ↔ a * c ≤ b",
    "div_le_iff₀": "field | {a b c} (hc : 0 < c) : a / c ≤ b ↔ a ≤ b * c",
    "ge_iff_le": "semiring | {a b} : a ≥ b ↔ b ≤ a",
    "gt_iff_lt": "semiring | {a b} : a > b ↔ b < a",
    "lt_add_one": "semiring | (a) : a < a + 1",
    "two_ne_zero": "semiring | : 2 ≠ 0",
    "pow_lt_pow_left": "semiring | {a b} (h : a < b) (ha : 0 ≤ a) {i} (hi : i ≠ 0) : a ^ i < b ^ i",
    "Set.inter_union_distrib_left": "set | (s t u) : s ∩ (t ∪ u) = s ∩ t ∪ s ∩ u",
    "Nat.mod_lt": "nat | (x) {y} (h : y > 0) : x % y < y",
    "Nat.div_add_mod": "nat | (m k) : k * (m / k) + m % k = m",
    "Nat.le_of_lt_succ": "nat | {m n} (h : m < n + 1) : m ≤ n",
    "Nat.succ_le_of_lt": "nat | {n m} (h : n < m) : n + 1 ≤ m",
    "Nat.lt_irrefl": "nat | (n) : ¬n < n",
    "Int.add_one_le_iff": "int | {a b} : a + 1 ≤ b ↔ a < b",
    "abs_sub_comm": "ring | (a b) : |a - b| = |b - a|",
    "sq_abs": "ring | (a) : |a| ^ 2 = a ^ 2",
    "abs_mul": "ring | (a b) : |a * b| = |a| * |b|",
    "add_sq": "semiring | (a b) : (a + b) ^ 2 = a ^ 2 + 2 * a * b + b ^ 2",
    "sub_sq": "ring | (a b) : (a - b) ^ 2 = a ^ 2 - 2 * a * b + b ^ 2",
    "mul_self_eq_zero": "semiring | {a} : a * a = 0 ↔ a = 0",
    "pow_eq_zero_iff": "semiring | {a} {n} (hn : n ≠ 0) : a ^ n = 0 ↔ a = 0",
    "add_pos_of_nonneg_of_pos": "semiring | {a b} (ha : 0 ≤ a) (hb : 0 < b) : 0 < a + b",
    "mul_lt_mul_of_pos_left": "semiring | {a b c} (h : b < c) (a_pos : 0 < a) : a * b < a * c",
    "lt_of_sub_pos": "ring | {a b} (h : 0 < a - b) : b < a",
    "sub_nonneg_of_le": "ring | {a b} (h : a ≤ b) : 0 ≤ b - a",
    "le_of_sub_nonneg": "ring | {a b} (h : 0 ≤ a - b) : b ≤ a",
    "neg_nonpos": "ring | {a} : -a ≤ 0 ↔ 0 ≤ a",
    "div_pos": "field | {a b} (ha : 0 < a) (hb : 0 < b) : 0 < a / b",
    "div_nonneg": "field | {a b} (ha : 0 ≤ a) (hb : 0 ≤ b) : 0 ≤ a / b",
    "le_total": "semiring | (a b) : a ≤ b ∨ b ≤ a",
    "lt_trichotomy": "semiring | (a b) : a < b ∨ a = b ∨ b < a",
    "Nat.add_mul_mod_self_left": "nat | (a b n) : (a + n * b) % n = a % n",
    "Nat.add_mod_right": "nat | (x z) : (x + z) % z = x % z",
    "Nat.mul_mod_right": "nat | (n k) : n * k % n = 0",
    # divisibility
    "dvd_refl": "semiring | (a) : a ∣ a",
    "dvd_rfl": "semiring | {a} : a ∣ a",
    "dvd_mul_right": "semiring | (a b) : a ∣ a * b",
    "dvd_mul_left": "semiring | (a b) : a ∣ b * a",
    "dvd_add": "semiring | {a b c} (h₁ : a ∣ b) (h₂ : a ∣ c) : a ∣ b + c",
    "Nat.dvd_add": "nat | {k m n} (h₁ : k ∣ m) (h₂ : k ∣ n) : k ∣ m + n",
    "dvd_trans": "semiring | {a b c} (h₁ : a ∣ b) (h₂ : b ∣ c) : a ∣ c",
    "Nat.dvd_refl": "nat | (a) : a ∣ a",
    "one_dvd": "semiring | (a) : 1 ∣ a",
    "dvd_zero": "semiring | (a) : a ∣ 0",
    # logic
    "Or.inl": "prop | {a b} (h : a) : a ∨ b",
    "Or.inr": "prop | {a b} (h : b) : a ∨ b",
    "Or.intro_left": "prop | {a} (b) (h : a) : a ∨ b",
    "Or.intro_right": "prop | {b} (a) (h : b) : a ∨ b",
    "Or.elim": "prop | {a b c} (h : a ∨ b) (left : a → c) (right : b → c) : c",
    "Or.symm": "prop | {a b} (h : a ∨ b) : b ∨ a",
    "Or.comm": "prop | {a b} : a ∨ b ↔ b ∨ a",
    "or_comm": "prop | {a b} : a ∨ b ↔ b ∨ a",
    "And.intro": "prop | {a b} (left : a) (right : b) : a ∧ b",
    "And.left": "prop | {a b} (self : a ∧ b) : a",
    "And.right": "prop | {a b} (self : a ∧ b) : b",
    "And.symm": "prop | {a b} (h : a ∧ b) : b ∧ a",
    "And.comm": "prop | {a b} : a ∧ b ↔ b ∧ a",
    "and_comm": "prop | {a b} : a ∧ b ↔ b ∧ a",
    "and_self_iff": "prop | {a} : a ∧ a ↔ a",
    "or_self_iff": "prop | {a} : a ∨ a ↔ a",
    "Iff.intro": "prop | {a b} (mp : a → b) (mpr : b → a) : a ↔ b",
    "Iff.rfl": "prop | {a} : a ↔ a",
    "Iff.refl": "prop | (a) : a ↔ a",
    "absurd": "prop | {a b} (h₁ : a) (h₂ : ¬a) : b",
    "False.elim": "prop | {C} (h : False) : C",
    "mt": "prop | {a b} (h₁ : a → b) (h₂ : ¬b) : ¬a",
    "Or.resolve_left": "prop | {a b} (h : a ∨ b) (na : ¬a) : b",
    "Or.resolve_right": "prop | {a b} (h : a ∨ b) (nb : ¬b) : a",
    "not_or": "prop | {a b} : ¬(a ∨ b) ↔ ¬a ∧ ¬b",
    "not_and_or": "prop | {a b} : ¬(a ∧ b) ↔ ¬a ∨ ¬b",
    "Classical.em": "prop | (p) : p ∨ ¬p",
    "em": "prop | (p) : p ∨ ¬p",
    "not_not": "prop | {a} : ¬¬a ↔ a",
    "Classical.not_not": "prop | {a} : ¬¬a ↔ a",
    "id": "prop | {a} (h : a) : a",
    "trivial": "prop | : True",
    "True.intro": "prop | : True",
    "Eq.symm": "semiring | {a b} (h : a = b) : b = a",
    "Eq.trans": "semiring | {a b c} (h₁ : a = b) (h₂ : b = c) : a = c",
    "Ne.symm": "semiring | {a b} (h : a ≠ b) : b ≠ a",
    # sets
    "Set.inter_subset_left": "set | {s t} : s ∩ t ⊆ s",
    "Set.inter_subset_right": "set | {s t} : s ∩ t ⊆ t",
    "Set.subset_union_left": "set | {s t} : s ⊆ s ∪ t",
    "Set.subset_union_right": "set | {s t} : t ⊆ s ∪ t",
    "Set.diff_subset": "set | {s t} : s \\ t ⊆ s",
    "Set.Subset.refl": "set | (s) : s ⊆ s",
    "Set.Subset.rfl": "set | {s} : s ⊆ s",
    "subset_refl": "set | (s) : s ⊆ s",
    "Set.Subset.trans": "set | {a b c} (h₁ : a ⊆ b) (h₂ : b ⊆ c) : a ⊆ c",
    "Set.mem_of_mem_inter_left": "set | {x a b} (h : x ∈ a ∩ b) : x ∈ a",
    "Set.mem_of_mem_inter_right": "set | {x a b} (h : x ∈ a ∩ b) : x ∈ b",
    "Set.mem_inter": "set | {x a b} (ha : x ∈ a) (hb : x ∈ b) : x ∈ a ∩ b",
    "Set.mem_union_left": "set | {x a} (b) (h : x ∈ a) : x ∈ a ∪ b",
    "Set.mem_union_right": "set | {x b} (a) (h : x ∈ b) : x ∈ a ∪ b",
    "Set.mem_inter_iff": "set | (x a b) : x ∈ a ∩ b ↔ x ∈ a ∧ x ∈ b",
    "Set.mem_union": "set | (x a b) : x ∈ a ∪ b ↔ x ∈ a ∨ x ∈ b",
    "Set.mem_diff": "set | {s t} (x) : x ∈ s \\ t ↔ x ∈ s ∧ x ∉ t",
    "Set.union_comm": "set | (a b) : a ∪ b = b ∪ a",
    "Set.inter_comm": "set | (a b) : a ∩ b = b ∩ a",
    "Set.inter_self": "set | (a) : a ∩ a = a",
    "Set.union_self": "set | (a) : a ∪ a = a",
}

_CLASS_TYPES = {
    "semiring": NUMBER_TYPES,
    "ring": (INT, *FIELDS),
    "field": FIELDS,
    "nat": (NAT,),
    "int": (INT,),
}


@dataclass
class Param:
    name: str  # the metavariable standing for it (`?a`)
    kind: str  # "implicit", "value" or "proof"
    ty: Expr | None  # the proposition a proof parameter proves; a value's type (None: from the class)
    label: str = ""  # the user-facing binder name (case tag for `apply`)


@dataclass
class Telescope:
    """The type of a partially applied term."""

    params: list[Param]
    concl: Expr
    metas: set[str] = field(default_factory=set)
    assign: dict[str, Expr] = field(default_factory=dict)
    klass: str = ""
    fresh: int = 0
    # proof arguments whose expected type still had metavariables (`Nat.dvd_add h (by norm_num)`): checked once
    # the conclusion has been unified with the expected type, as Lean postpones them
    postponed: list[tuple[Expr, Expr]] = field(default_factory=list)

    def inst(self, expr: Expr) -> Expr:
        return subst_many(expr, {k: v for k, v in self.assign.items()})

    def unassigned(self, expr: Expr) -> set[str]:
        return {name for name in free_vars(self.inst(expr)) if name in self.metas}


_BINDER = re.compile(r"\{([^}]*)\}|\(([^()]*(?:\([^()]*\)[^()]*)*)\)")


def lemma_telescope(name: str) -> Telescope | None:
    spec = _LEMMAS.get(name)
    if spec is None:
        return None
    klass, _, rest = spec.partition(" | ")
    head, _, concl_text = rest.rpartition(" : ") if not rest.startswith(": ") else ("", "", rest[2:])
    params: list[Param] = []
    renaming: dict[str, Expr] = {}
    for match in _BINDER.finditer(head):
        if match.group(1) is not None:
            for var in match.group(1).split():
                renaming[var] = Var(f"?{var}")
                params.append(Param(f"?{var}", "implicit", None, var))
        else:
            inner = match.group(2)
            label, colon, prop_text = inner.partition(" : ")
            if colon:
                prop = subst_many(parse(prop_text), renaming)
                params.append(Param(f"?{label}", "proof", prop, label))
            else:
                for var in inner.split():
                    renaming[var] = Var(f"?{var}")
                    params.append(Param(f"?{var}", "value", None, var))
    concl = subst_many(parse(concl_text), renaming)
    metas = {p.name for p in params if p.kind != "proof"}
    return Telescope(params, concl, metas, {}, klass)


def instance_allowed(tel: Telescope, ctx: Context) -> bool:
    """Do the values assigned to a lemma's variables have a type its class allows (`sub_nonneg` not on ℕ)?"""
    allowed = _CLASS_TYPES.get(tel.klass)
    if allowed is None:
        return True
    for value in tel.assign.values():
        ty = type_of(value, ctx)
        if ty is not None and ty not in allowed:
            return False
    return True


# ---------------------------------------------------------------------------------------------------
# Matching with metavariables.


def match(pattern: Expr, term: Expr, tel: Telescope, ctx: Context, depth: int = 0) -> bool:
    """Extend `tel.assign` so that `pattern` (with metavariables) equals `term`, up to unfolding; on failure
    the assignment is left as it was."""
    saved = dict(tel.assign)
    if _match(pattern, term, tel, ctx, depth):
        return True
    tel.assign.clear()
    tel.assign.update(saved)
    return False


def _match(p: Expr, t: Expr, tel: Telescope, ctx: Context, depth: int) -> bool:
    if depth > 40:
        return False
    if isinstance(p, Var) and p.name in tel.metas:
        bound = tel.assign.get(p.name)
        if bound is None:
            tel.assign[p.name] = t
            return True
        return alpha_eq(bound, t) or defeq(bound, t, ctx)
    if isinstance(p, Num):
        return t == p or (isinstance(t, Ascr) and t.expr == p)
    if isinstance(p, Ascr) and not isinstance(t, Ascr):
        return _match(p.expr, t, tel, ctx, depth + 1)
    if _match_shape(p, t, tel, ctx, depth):
        return True
    unfolded_t = unfold(t, ctx)
    if unfolded_t is not None and _match(p, unfolded_t, tel, ctx, depth + 1):
        return True
    if not (isinstance(p, Var) and p.name in tel.metas):
        unfolded_p = unfold(tel.inst(p), ctx)
        if unfolded_p is not None and _match(unfolded_p, t, tel, ctx, depth + 1):
            return True
    return False


def _match_shape(p: Expr, t: Expr, tel: Telescope, ctx: Context, depth: int) -> bool:
    """`_match` of two operations, applications or binders part by part (the assignment left as it was when they
    do not match), or of two equal terms."""
    if isinstance(p, Op) and isinstance(t, Op) and p.op == t.op and len(p.args) == len(t.args):
        saved = dict(tel.assign)
        if all(_match(a, b, tel, ctx, depth + 1) for a, b in zip(p.args, t.args, strict=True)):
            return True
        tel.assign.clear()
        tel.assign.update(saved)
    elif isinstance(p, App) and isinstance(t, App) and len(p.args) == len(t.args):
        saved = dict(tel.assign)
        if _match(p.fn, t.fn, tel, ctx, depth + 1) and all(
                _match(a, b, tel, ctx, depth + 1) for a, b in zip(p.args, t.args, strict=True)):
            return True
        tel.assign.clear()
        tel.assign.update(saved)
    elif isinstance(p, Binder) and isinstance(t, Binder) and p.kind == t.kind:
        fresh = Var(fresh_name(t.name, free_vars(p) | free_vars(t) | set(ctx)))
        saved = dict(tel.assign)
        if (p.ty is None or t.ty is None or _match(p.ty, t.ty, tel, ctx, depth + 1)) and _match(
                subst(p.body, p.name, fresh), subst(t.body, t.name, fresh), tel, ctx, depth + 1):
            return True
        tel.assign.clear()
        tel.assign.update(saved)
    elif p == t:
        return True
    return False


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
        if tel.klass in _CLASS_TYPES:
            allowed = _CLASS_TYPES[tel.klass]
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


__all__ = [
    "Param",
    "Telescope",
    "TermChecker",
    "lemma_telescope",
    "match",
    "type_mismatch",
]
