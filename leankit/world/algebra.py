"""Algebra and number-theory families of the generated world: linear equations over ℝ and ℕ, linear systems,
substitution chains, case splits on `x = a ∨ x = b`, closed ℕ arithmetic, divisibility and remainders.

Every family is a function `(dice, name, split) -> Draft` (see `leankit.world.catalog`). Statements and
tactics are ordinary Lean 4 + Mathlib: each recorded success is a tactic Lean accepts on that goal, each
recorded failure one it rejects.
"""

from __future__ import annotations

from leankit.corpus import Split
from leankit.world.draft import Dice, Draft, context, literal

# Few, conventional names: the tiny embedded model copies a name from the statement into `intro` reliably only
# when it has seen it there often; pairs always come in this order.
REAL_VARS = ("x", "z", "t", "u")  # single variables: none starts a pair, so `∀ (x :` never reads as `∀ (x y :`
REAL_PAIRS = (("x", "y"), ("a", "b"))
NAT_VARS = ("n", "m")


def intro_chain(
    draft: Draft,
    binders: list[tuple[str, str]],
    hyps: list[tuple[str, str]],
    target: str,
    *,
    alt_hyp_names: list[str] | None = None,
) -> tuple[str, str | None]:
    """Record the ways to introduce `binders` then `hyps` at the root; returns the goal with everything in
    context, and with `alt_hyp_names` the goal whose hypotheses carry those names instead (else None).
    `intro v… h…` and `rintro v… h…` in one step, or `intro v…` then `intro h…`; with `alt_hyp_names`, also
    `intro v… h'…`."""
    names = [name for name, _ in binders]
    hyp_targets = [type_ for _, type_ in hyps]
    full = draft.goal(context(*binders, *hyps), target)
    all_names = " ".join([*names, *(name for name, _ in hyps)])
    draft.step(draft.root, [f"intro {all_names}", f"rintro {all_names}"], [full])
    if hyps:
        middle = draft.goal(context(*binders), " → ".join([*hyp_targets, target]))
        draft.step(draft.root, f"intro {' '.join(names)}", [middle])
        draft.step(middle, f"intro {' '.join(name for name, _ in hyps)}", [full])
    if alt_hyp_names is None:
        return full, None
    alt_hyps = list(zip(alt_hyp_names, hyp_targets, strict=True))
    alt = draft.goal(context(*binders, *alt_hyps), target)
    draft.step(draft.root, f"intro {' '.join([*names, *alt_hyp_names])}", [alt])
    return full, alt


def _linear_lhs(dice: Dice, var: str, coef: int) -> tuple[str, int]:
    """`coef * var ± b` in one of three shapes, and the constant's contribution (lhs = coef·var + offset)."""
    b = dice.randint(1, 20)
    shape = dice.randint(0, 2)
    if shape == 0:
        return f"{coef} * {var} + {b}", b
    if shape == 1:
        return f"{coef} * {var} - {b}", -b
    return f"{b} + {coef} * {var}", b


def lin_eq(dice: Dice, name: str, split: Split) -> Draft:
    """∀ (x : ℝ), a * x + b = c → x = s — `intro x h₀` then `linarith`."""
    var = dice.choice(REAL_VARS)
    coef = dice.randint(2, 9)
    value = dice.randint(-6, 12)
    lhs, offset = _linear_lhs(dice, var, coef)
    equation = f"{lhs} = {literal(coef * value + offset)}"
    target = f"{var} = {literal(value)}"
    draft = Draft(name, split=split, topic="algebra", family="lin_eq",
                  statement=f"∀ ({var} : ℝ), {equation} → {target}")
    goal, alt = intro_chain(draft, [(var, "ℝ")], [("h₀", equation)], target, alt_hyp_names=["h"])
    draft.closes(goal, ["linarith", "linarith [h₀]", "nlinarith [h₀]"])
    draft.fails(goal, ["omega", "decide", "positivity", "exact h₀"])
    assert alt is not None
    draft.closes(alt, ["linarith", "linarith [h]"])
    draft.fails(draft.root, ["omega"])
    draft.proof(f"intro {var} h₀", "linarith")
    draft.proof(f"intro {var} h₀", "nlinarith [h₀]")
    draft.proof(f"intro {var}", "intro h₀", "linarith")
    draft.proof(f"intro {var} h", "linarith")
    return draft


def nat_lin(dice: Dice, name: str, split: Split) -> Draft:
    """∀ (n : ℕ), a * n + b = c → n = s — `intro n h₀` then `omega` (or `linarith`)."""
    var = dice.choice(NAT_VARS)
    coef = dice.randint(2, 9)
    value = dice.randint(1, 15)
    b = dice.randint(1, 20)
    lhs = dice.choice([f"{coef} * {var} + {b}", f"{b} + {coef} * {var}", f"{var} * {coef} + {b}"])
    equation = f"{lhs} = {coef * value + b}"
    target = f"{var} = {value}"
    draft = Draft(name, split=split, topic="number_theory", family="nat_lin",
                  statement=f"∀ ({var} : ℕ), {equation} → {target}")
    goal, alt = intro_chain(draft, [(var, "ℕ")], [("h₀", equation)], target, alt_hyp_names=["h"])
    draft.closes(goal, ["omega", "linarith"])
    draft.fails(goal, ["decide", "positivity", "exact h₀"])
    assert alt is not None
    draft.closes(alt, ["omega", "linarith"])
    draft.proof(f"intro {var} h₀", "omega")
    draft.proof(f"intro {var} h₀", "linarith")
    draft.proof(f"intro {var}", "intro h₀", "omega")
    return draft


def _two_equations(dice: Dice) -> tuple[str, str, int, int, str, str]:
    """Two independent linear equations in x, y over ℝ with an integer solution: (x, y, s, t, e₁, e₂)."""
    x, y = dice.choice(REAL_PAIRS)
    s, t = dice.randint(-5, 9), dice.randint(-5, 9)
    shapes = [
        (f"{x} + {y}", s + t, f"{x} - {y}", s - t),
        (f"2 * {x} + {y}", 2 * s + t, f"{x} + {y}", s + t),
        (f"{x} + 2 * {y}", s + 2 * t, f"{x} - {y}", s - t),
        (f"3 * {x} - {y}", 3 * s - t, f"{x} + {y}", s + t),
    ]
    lhs1, rhs1, lhs2, rhs2 = dice.choice(shapes)
    return x, y, s, t, f"{lhs1} = {literal(rhs1)}", f"{lhs2} = {literal(rhs2)}"


def lin_sum(dice: Dice, name: str, split: Split) -> Draft:
    """∀ (x y : ℝ), x + y = a → x - y = b → x = s — two hypotheses, one `linarith`."""
    x, y, s, t, e1, e2 = _two_equations(dice)
    target = dice.choice([f"{x} = {literal(s)}", f"{y} = {literal(t)}"])
    draft = Draft(name, split=split, topic="algebra", family="lin_sum",
                  statement=f"∀ ({x} {y} : ℝ), {e1} → {e2} → {target}")
    goal, _ = intro_chain(draft, [(x, "ℝ"), (y, "ℝ")], [("h₀", e1), ("h₁", e2)], target)
    draft.closes(goal, ["linarith", "linarith [h₀, h₁]", "nlinarith [h₀, h₁]"])
    draft.fails(goal, ["omega", "decide", "positivity"])
    draft.proof(f"intro {x} {y} h₀ h₁", "linarith")
    draft.proof(f"intro {x} {y} h₀ h₁", "nlinarith [h₀, h₁]")
    draft.proof(f"intro {x} {y}", "intro h₀ h₁", "linarith")
    return draft


def lin_sys(dice: Dice, name: str, split: Split) -> Draft:
    """∀ (x y : ℝ), e₁ → e₂ → x = s ∧ y = t — `constructor`, then `linarith` on each side."""
    x, y, s, t, e1, e2 = _two_equations(dice)
    left, right = f"{x} = {literal(s)}", f"{y} = {literal(t)}"
    target = f"{left} ∧ {right}"
    draft = Draft(name, split=split, topic="algebra", family="lin_sys",
                  statement=f"∀ ({x} {y} : ℝ), {e1} → {e2} → {target}")
    hyps = context((x, "ℝ"), (y, "ℝ"), ("h₀", e1), ("h₁", e2))
    goal, _ = intro_chain(draft, [(x, "ℝ"), (y, "ℝ")], [("h₀", e1), ("h₁", e2)], target)
    g_left = draft.goal(hyps, left, "left")
    g_right = draft.goal(hyps, right, "right")
    draft.step(goal, "constructor", [g_left, g_right])
    draft.closes(goal, ["exact ⟨by linarith, by linarith⟩", "refine ⟨by linarith, by linarith⟩",
                        "constructor <;> linarith"])
    draft.fails(goal, ["linarith", "omega", "decide"])
    for side in (g_left, g_right):
        draft.closes(side, ["linarith", "linarith [h₀, h₁]", "nlinarith [h₀, h₁]"])
        draft.fails(side, ["omega", "decide"])
    draft.proof(f"intro {x} {y} h₀ h₁", "constructor", "linarith", "linarith")
    draft.proof(f"intro {x} {y} h₀ h₁", "exact ⟨by linarith, by linarith⟩")
    draft.proof(f"intro {x} {y} h₀ h₁", "constructor <;> linarith")
    return draft


def sub_chain(dice: Dice, name: str, split: Split) -> Draft:
    """∀ (x y : ℝ), x = a → y = b → f x y = c — rewrite (or substitute) both, then `norm_num`."""
    x, y = dice.choice(REAL_PAIRS)
    a, b = dice.randint(1, 9), dice.randint(1, 9)
    shapes = [
        ("{x} * {y}", a * b, True), ("{x} + {y}", a + b, False), ("{x} - {y}", a - b, False),
        ("2 * {x} + {y}", 2 * a + b, False), ("{x} * {y} + {x}", a * b + a, True),
        ("{x} ^ 2 + {y}", a * a + b, True),
    ]
    template, value, nonlinear = dice.choice(shapes)

    def expr(xv: str, yv: str) -> str:
        return template.format(x=xv, y=yv)

    h0, h1 = f"{x} = {a}", f"{y} = {b}"
    target = f"{expr(x, y)} = {literal(value)}"
    draft = Draft(name, split=split, topic="algebra", family="sub_chain",
                  statement=f"∀ ({x} {y} : ℝ), {h0} → {h1} → {target}")
    goal, _ = intro_chain(draft, [(x, "ℝ"), (y, "ℝ")], [("h₀", h0), ("h₁", h1)], target)
    everything = context((x, "ℝ"), (y, "ℝ"), ("h₀", h0), ("h₁", h1))
    numeric = f"{expr(str(a), str(b))} = {literal(value)}"
    # rw keeps the hypotheses; subst removes the variable and its equation.
    g_rw_x = draft.goal(everything, f"{expr(str(a), y)} = {literal(value)}")
    g_rw = draft.goal(everything, numeric)
    g_sub_x = draft.goal(context((y, "ℝ"), ("h₁", h1)), f"{expr(str(a), y)} = {literal(value)}")
    g_sub = draft.goal([], numeric)
    draft.step(goal, "rw [h₀, h₁]", [g_rw])
    draft.step(goal, "rw [h₀]", [g_rw_x])
    draft.step(g_rw_x, "rw [h₁]", [g_rw])
    draft.step(goal, "subst h₀", [g_sub_x])
    draft.step(g_sub_x, "subst h₁", [g_sub])
    draft.closes(goal, ["norm_num [h₀, h₁]"])
    draft.closes(g_rw_x, ["norm_num [h₁]"])
    draft.closes(g_sub_x, ["norm_num [h₁]"])
    draft.closes(g_rw, "norm_num")
    draft.closes(g_sub, "norm_num")
    if nonlinear:
        draft.fails(goal, ["linarith"])
    else:
        draft.closes(goal, ["linarith"])
    draft.fails(goal, ["omega", "decide"])
    draft.proof(f"intro {x} {y} h₀ h₁", "rw [h₀, h₁]", "norm_num")
    draft.proof(f"intro {x} {y} h₀ h₁", "norm_num [h₀, h₁]")
    draft.proof(f"intro {x} {y} h₀ h₁", "subst h₀", "subst h₁", "norm_num")
    draft.proof(f"intro {x} {y} h₀ h₁", "rw [h₀]", "rw [h₁]", "norm_num")
    return draft


def or_cases(dice: Dice, name: str, split: Split) -> Draft:
    """∀ (x : ℝ), x = a ∨ x = b → x ^ 2 - (a + b) * x + a * b = 0 — split the disjunction, rewrite, `norm_num`."""
    var = dice.choice(REAL_VARS)
    a, b = dice.sample(range(1, 8), 2)
    disjunction = f"{var} = {a} ∨ {var} = {b}"

    def poly(v: str) -> str:
        return f"{v} ^ 2 - {a + b} * {v} + {a * b} = 0"

    target = poly(var)
    draft = Draft(name, split=split, topic="algebra", family="or_cases",
                  statement=f"∀ ({var} : ℝ), {disjunction} → {target}")
    goal, _ = intro_chain(draft, [(var, "ℝ")], [("h₀", disjunction)], target)
    splits = {("h", "h"): ["rcases h₀ with h | h", "cases' h₀ with h h", "obtain h | h := h₀"],
              ("h₁", "h₁"): ["rcases h₀ with h₁ | h₁", "obtain h₁ | h₁ := h₀"],
              ("h₁", "h₂"): ["rcases h₀ with h₁ | h₂", "cases' h₀ with h₁ h₂", "obtain h₁ | h₂ := h₀"]}
    for names, tactics in splits.items():
        cases = []
        for hyp, tag, value in zip(names, ("inl", "inr"), (a, b), strict=True):
            case = draft.goal(context((var, "ℝ"), (hyp, f"{var} = {value}")), target, tag)
            rewritten = draft.goal(context((var, "ℝ"), (hyp, f"{var} = {value}")), poly(str(value)), tag)
            substituted = draft.goal([], poly(str(value)), tag)
            draft.step(case, f"rw [{hyp}]", [rewritten])
            draft.step(case, f"subst {hyp}", [substituted])
            draft.closes(case, f"norm_num [{hyp}]")
            draft.fails(case, ["linarith", "decide"])
            draft.closes(rewritten, "norm_num")
            draft.closes(substituted, "norm_num")
            cases.append(case)
        draft.step(goal, tactics, cases)
    draft.closes(goal, "rcases h₀ with h | h <;> norm_num [h]")
    draft.fails(goal, ["linarith", "nlinarith"])
    draft.proof(f"intro {var} h₀", "rcases h₀ with h | h", "rw [h]", "norm_num", "rw [h]", "norm_num")
    draft.proof(f"intro {var} h₀", "rcases h₀ with h | h", "norm_num [h]", "norm_num [h]")
    draft.proof(f"intro {var} h₀", "cases' h₀ with h h", "subst h", "norm_num", "subst h", "norm_num")
    draft.proof(f"intro {var} h₀", "rcases h₀ with h | h <;> norm_num [h]")
    return draft


def arith(dice: Dice, name: str, split: Split) -> Draft:
    """A closed ℕ computation (`a * b + c = d`, a remainder, a power) — `norm_num`, `decide`, `rfl`, `simp`."""
    a, b, c = dice.randint(3, 29), dice.randint(3, 29), dice.randint(1, 50)
    shape = dice.randint(0, 3)
    omega_ok = True
    if shape == 0:
        statement = f"{a} * {b} + {c} = {a * b + c}"
    elif shape == 1:
        m = dice.randint(3, 11)
        statement = f"({a} * {b} + {c}) % {m} = {(a * b + c) % m}"
    elif shape == 2:
        e = dice.randint(2, 4)
        base = dice.randint(2, 9)
        statement = f"{base} ^ {e} + {c} = {base ** e + c}"
        omega_ok = False  # omega does not evaluate powers
    else:
        statement = f"{a * b + c} - {a} * {b} = {c}"
    draft = Draft(name, split=split, topic="number_theory", family="arith", statement=statement)
    closers = ["norm_num", "decide", "rfl", "simp"] + (["omega"] if omega_ok else [])
    draft.closes(draft.root, closers)
    draft.fails(draft.root, ["intro h", "positivity"])
    draft.proof("norm_num")
    draft.proof("decide")
    draft.proof("rfl")
    return draft


def dvd_omega(dice: Dice, name: str, split: Split) -> Draft:
    """∀ (n : ℕ), k ∣ n → k ∣ n + c with c a multiple of k — `omega`, or `Nat.dvd_add`."""
    var = dice.choice(NAT_VARS)
    k = dice.randint(2, 9)
    c = k * dice.randint(1, 9)
    hyp, target = f"{k} ∣ {var}", f"{k} ∣ {var} + {c}"
    draft = Draft(name, split=split, topic="number_theory", family="dvd_omega",
                  statement=f"∀ ({var} : ℕ), {hyp} → {target}")
    goal, alt = intro_chain(draft, [(var, "ℕ")], [("h₀", hyp)], target, alt_hyp_names=["h"])
    remaining = draft.goal(context((var, "ℕ"), ("h₀", hyp)), f"{k} ∣ {c}")
    draft.closes(goal, ["omega", "exact Nat.dvd_add h₀ (by norm_num)", "exact dvd_add h₀ (by norm_num)"])
    draft.step(goal, "apply Nat.dvd_add h₀", [remaining])
    draft.closes(remaining, ["norm_num", "decide"])
    draft.fails(goal, ["linarith", "decide"])
    assert alt is not None
    draft.closes(alt, ["omega", "exact Nat.dvd_add h (by norm_num)"])
    draft.proof(f"intro {var} h₀", "omega")
    draft.proof(f"intro {var} h₀", "apply Nat.dvd_add h₀", "norm_num")
    draft.proof(f"intro {var} h", "omega")
    return draft


def mod_omega(dice: Dice, name: str, split: Split) -> Draft:
    """∀ (n : ℕ), n % m = r → (n + j * m) % m = r — `omega`, or rewrite with `Nat.add_mul_mod_self_right`."""
    var = dice.choice(NAT_VARS)
    m = dice.randint(2, 9)
    r = dice.randint(0, m - 1)
    j = dice.randint(1, 9)
    hyp, target = f"{var} % {m} = {r}", f"({var} + {j} * {m}) % {m} = {r}"
    draft = Draft(name, split=split, topic="number_theory", family="mod_omega",
                  statement=f"∀ ({var} : ℕ), {hyp} → {target}")
    goal, alt = intro_chain(draft, [(var, "ℕ")], [("h₀", hyp)], target, alt_hyp_names=["h"])
    rewritten = draft.goal(context((var, "ℕ"), ("h₀", hyp)), hyp)
    # `Nat.add_mul_mod_self_right` is a simp lemma: simp rewrites the goal to the hypothesis.
    draft.closes(goal, ["omega", "norm_num [h₀]", "simp [h₀]"])
    draft.step(goal, "rw [Nat.add_mul_mod_self_right]", [rewritten])
    draft.closes(rewritten, ["exact h₀", "omega", "assumption"])
    draft.fails(goal, ["linarith", "decide"])
    assert alt is not None
    draft.closes(alt, ["omega"])
    draft.proof(f"intro {var} h₀", "omega")
    draft.proof(f"intro {var} h₀", "rw [Nat.add_mul_mod_self_right]", "exact h₀")
    draft.proof(f"intro {var} h", "omega")
    return draft
