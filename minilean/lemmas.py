"""The named lemma library and its telescopes, and first-order matching with metavariables.

    tel = lemma_telescope("mul_pos")      # {a b} (ha : 0 < a) (hb : 0 < b) : 0 < a * b, with ?a ?b
    match(tel.concl, target, tel, ctx)   # assigns ?a ?b so that the conclusion is `target`, up to unfolding

A lemma's statement is written in Lean syntax below; every lemma is a true theorem of Mathlib for the types its
class allows (`ring`: ℤ ℚ ℝ, so `sub_nonneg` is refused on ℕ, where it is false). `minilean.terms` checks proof
terms against these telescopes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from minilean.defeq import defeq
from minilean.elab import (
    FIELDS,
    INT,
    NAT,
    NUMBER_TYPES,
    Context,
    alpha_eq,
    fresh_name,
    subst,
    subst_many,
    type_of,
    unfold,
)
from minilean.parser import parse
from minilean.syntax import App, Ascr, Binder, Expr, Num, Op, Var, free_vars

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

CLASS_TYPES = {
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
    allowed = CLASS_TYPES.get(tel.klass)
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


__all__ = ["CLASS_TYPES", "Param", "Telescope", "instance_allowed", "lemma_telescope", "match"]
