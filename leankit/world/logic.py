"""Logic, set and inequality families of the generated world: conjunctions and disjunctions (with `constructor`,
`obtain`, `rcases` branches), set membership and inclusion, squares and positivity over ℝ.

Every family is a function `(dice, name, split) -> Draft` (see `leankit.world.catalog`).
"""

from __future__ import annotations

from leankit.corpus import Split
from leankit.world.algebra import REAL_PAIRS, intro_chain
from leankit.world.draft import Dice, Draft, context

# Names come in alphabetical pairs (see `algebra.REAL_PAIRS` for why so few).
PROP_PAIRS = (("p", "q"), ("p", "r"), ("p", "s"), ("q", "r"), ("q", "s"), ("r", "s"))
SET_PAIRS = (("A", "B"), ("A", "C"), ("B", "C"))
ELEMENTS = (("x", "ℕ"), ("x", "ℤ"), ("x", "ℝ"))


def and_logic(dice: Dice, name: str, split: Split) -> Draft:
    """Conjunctions: `p ∧ q → q ∧ p`, `p ∧ q → p`, `p → q → p ∧ q` — anonymous constructors, `obtain`,
    `constructor` with a branch per side, `tauto`."""
    p, q = dice.choice(PROP_PAIRS)
    shape = dice.randint(0, 4)
    if shape == 0:  # p ∧ q → q ∧ p
        return _and_swap(name, split, p, q)
    if shape in (1, 2):  # p ∧ q → p (or → q)
        return _and_project(name, split, p, q, shape)
    # p → q → p ∧ q (shape 3) or p → q → q ∧ p (shape 4)
    return _and_intro(name, split, p, q, shape)


def _and_swap(name: str, split: Split, p: str, q: str) -> Draft:
    """`p ∧ q → q ∧ p`."""
    hp, hq = f"h{p}", f"h{q}"
    props = [(p, "Prop"), (q, "Prop")]
    target = f"{q} ∧ {p}"
    draft = Draft(name, split=split, topic="logic", family="and_logic",
                  statement=f"∀ ({p} {q} : Prop), {p} ∧ {q} → {target}")
    goal, _ = intro_chain(draft, props, [("h", f"{p} ∧ {q}")], target)
    draft.closes(goal, ["exact ⟨h.2, h.1⟩", "exact And.symm h", "tauto"])
    split_goal = draft.goal(context(*props, (hp, p), (hq, q)), target)
    draft.step(goal, [f"obtain ⟨{hp}, {hq}⟩ := h", f"rcases h with ⟨{hp}, {hq}⟩"], [split_goal])
    draft.closes(split_goal, [f"exact ⟨{hq}, {hp}⟩", "tauto"])
    left = draft.goal(context(*props, ("h", f"{p} ∧ {q}")), q, "left")
    right = draft.goal(context(*props, ("h", f"{p} ∧ {q}")), p, "right")
    draft.step(goal, "constructor", [left, right])
    draft.closes(left, ["exact h.2", "exact h.right"])
    draft.closes(right, ["exact h.1", "exact h.left"])
    draft.fails(left, ["exact h.1", "assumption"])
    s_left = draft.goal(context(*props, (hp, p), (hq, q)), q, "left")
    s_right = draft.goal(context(*props, (hp, p), (hq, q)), p, "right")
    draft.step(split_goal, "constructor", [s_left, s_right])
    draft.closes(s_left, [f"exact {hq}", "assumption"])
    draft.closes(s_right, [f"exact {hp}", "assumption"])
    draft.fails(s_left, [f"exact {hp}"])
    draft.fails(goal, ["exact h", "linarith"])
    draft.proof(f"intro {p} {q} h", "exact ⟨h.2, h.1⟩")
    draft.proof(f"intro {p} {q} h", f"obtain ⟨{hp}, {hq}⟩ := h", "constructor", f"exact {hq}", f"exact {hp}")
    draft.proof(f"intro {p} {q} h", "constructor", "exact h.2", "exact h.1")
    draft.proof(f"intro {p} {q} h", "tauto")
    return draft


def _and_project(name: str, split: Split, p: str, q: str, shape: int) -> Draft:
    """`p ∧ q → p` (shape 1) or `p ∧ q → q` (shape 2)."""
    hp, hq = f"h{p}", f"h{q}"
    props = [(p, "Prop"), (q, "Prop")]
    target, proj, own = (p, "1", hp) if shape == 1 else (q, "2", hq)
    draft = Draft(name, split=split, topic="logic", family="and_logic",
                  statement=f"∀ ({p} {q} : Prop), {p} ∧ {q} → {target}")
    goal, _ = intro_chain(draft, props, [("h", f"{p} ∧ {q}")], target)
    side = "left" if proj == "1" else "right"
    draft.closes(goal, [f"exact h.{proj}", f"exact h.{side}", "tauto"])
    draft.fails(goal, [f"exact h.{'2' if proj == '1' else '1'}", "exact h", "constructor"])
    split_goal = draft.goal(context(*props, (hp, p), (hq, q)), target)
    draft.step(goal, [f"obtain ⟨{hp}, {hq}⟩ := h", f"rcases h with ⟨{hp}, {hq}⟩"], [split_goal])
    draft.closes(split_goal, [f"exact {own}", "assumption", "tauto"])
    draft.proof(f"intro {p} {q} h", f"exact h.{proj}")
    draft.proof(f"intro {p} {q} h", f"obtain ⟨{hp}, {hq}⟩ := h", f"exact {own}")
    draft.proof(f"intro {p} {q} h", "tauto")
    return draft


def _and_intro(name: str, split: Split, p: str, q: str, shape: int) -> Draft:
    """`p → q → p ∧ q` (shape 3) or `p → q → q ∧ p` (shape 4)."""
    hp, hq = f"h{p}", f"h{q}"
    props = [(p, "Prop"), (q, "Prop")]
    first, second = (p, q) if shape == 3 else (q, p)
    h_first, h_second = f"h{first}", f"h{second}"
    target = f"{first} ∧ {second}"
    draft = Draft(name, split=split, topic="logic", family="and_logic",
                  statement=f"∀ ({p} {q} : Prop), {p} → {q} → {target}")
    goal, alt = intro_chain(draft, props, [(hp, p), (hq, q)], target, alt_hyp_names=["h₀", "h₁"])
    assert alt is not None
    draft.closes(goal, [f"exact ⟨{h_first}, {h_second}⟩", f"exact And.intro {h_first} {h_second}", "tauto"])
    draft.closes(alt, ["exact ⟨h₀, h₁⟩" if shape == 3 else "exact ⟨h₁, h₀⟩", "tauto"])
    left = draft.goal(context(*props, (hp, p), (hq, q)), first, "left")
    right = draft.goal(context(*props, (hp, p), (hq, q)), second, "right")
    draft.step(goal, "constructor", [left, right])
    draft.closes(left, [f"exact {h_first}", "assumption"])
    draft.closes(right, [f"exact {h_second}", "assumption"])
    draft.fails(left, [f"exact {h_second}"])
    draft.fails(goal, [f"exact {hp}", "linarith"])
    draft.proof(f"intro {p} {q} {hp} {hq}", f"exact ⟨{h_first}, {h_second}⟩")
    draft.proof(f"intro {p} {q} {hp} {hq}", "constructor", f"exact {h_first}", f"exact {h_second}")
    draft.proof(f"intro {p} {q} {hp} {hq}", "constructor", "assumption", "assumption")
    return draft


def or_comm(dice: Dice, name: str, split: Split) -> Draft:
    """`p ∨ q → q ∨ p` split with `rcases` into `inl`/`inr` branches (or `Or.symm`, `tauto`), and
    `p → p ∨ q` by `left`/`Or.inl` (or `p → q ∨ p` by `right`/`Or.inr`)."""
    p, q = dice.choice(PROP_PAIRS)
    props = [(p, "Prop"), (q, "Prop")]
    shape = dice.randint(0, 5)
    if shape >= 2:  # the hypothesis is one of the two propositions
        return _or_intro(draft_name=name, split=split, props=props, known=p if shape in (2, 3) else q,
                         first=shape in (2, 4))
    hp, hq = f"h{p}", f"h{q}"
    # p ∨ q → q ∨ p
    target = f"{q} ∨ {p}"
    draft = Draft(name, split=split, topic="logic", family="or_comm",
                  statement=f"∀ ({p} {q} : Prop), {p} ∨ {q} → {target}")
    goal, _ = intro_chain(draft, props, [("h", f"{p} ∨ {q}")], target)
    draft.closes(goal, ["exact h.symm", "exact Or.symm h", "tauto"])
    draft.fails(goal, ["exact h", "constructor", "linarith"])
    inl = draft.goal(context(*props, (hp, p)), target, "inl")
    inr = draft.goal(context(*props, (hq, q)), target, "inr")
    draft.step(goal, [f"rcases h with {hp} | {hq}", f"cases' h with {hp} {hq}", f"obtain {hp} | {hq} := h"],
               [inl, inr])
    # `right`/`left` leave one goal, which keeps its parent's case tag.
    inl_r = draft.goal(context(*props, (hp, p)), p, "inl")
    inr_l = draft.goal(context(*props, (hq, q)), q, "inr")
    draft.closes(inl, [f"exact Or.inr {hp}", "tauto"])
    draft.step(inl, "right", [inl_r])
    draft.closes(inl_r, [f"exact {hp}", "assumption"])
    draft.fails(inl, [f"exact Or.inl {hp}", f"exact {hp}"])
    draft.closes(inr, [f"exact Or.inl {hq}", "tauto"])
    draft.step(inr, "left", [inr_l])
    draft.closes(inr_l, [f"exact {hq}", "assumption"])
    draft.fails(inr, [f"exact Or.inr {hq}", f"exact {hq}"])
    draft.proof(f"intro {p} {q} h", "exact h.symm")
    draft.proof(f"intro {p} {q} h", f"rcases h with {hp} | {hq}", f"exact Or.inr {hp}", f"exact Or.inl {hq}")
    draft.proof(f"intro {p} {q} h", f"rcases h with {hp} | {hq}", "right", f"exact {hp}", "left",
                f"exact {hq}")
    draft.proof(f"intro {p} {q} h", f"cases' h with {hp} {hq}", "tauto", "tauto")
    return draft


def _or_intro(*, draft_name: str, split: Split, props: list[tuple[str, str]], known: str, first: bool) -> Draft:
    """`known → known ∨ other` (by `left`) or `known → other ∨ known` (by `right`)."""
    (p, _), (q, _) = props
    other = q if known == p else p
    h = f"h{known}"
    target = f"{known} ∨ {other}" if first else f"{other} ∨ {known}"
    side, inject, wrong = ("left", "Or.inl", "Or.inr") if first else ("right", "Or.inr", "Or.inl")
    draft = Draft(draft_name, split=split, topic="logic", family="or_comm",
                  statement=f"∀ ({p} {q} : Prop), {known} → {target}")
    goal, _ = intro_chain(draft, props, [(h, known)], target)
    chosen = draft.goal(context(*props, (h, known)), known)
    draft.closes(goal, [f"exact {inject} {h}", "tauto"])
    draft.step(goal, side, [chosen])
    draft.closes(chosen, [f"exact {h}", "assumption"])
    draft.fails(goal, [f"exact {wrong} {h}", f"exact {h}"])
    draft.proof(f"intro {p} {q} {h}", f"exact {inject} {h}")
    draft.proof(f"intro {p} {q} {h}", side, f"exact {h}")
    draft.proof(f"intro {p} {q} {h}", "tauto")
    return draft


def _set_binders(dice: Dice) -> tuple[str, str, str, str, list[tuple[str, str]]]:
    a, b = dice.choice(SET_PAIRS)
    element, kind = dice.choice(ELEMENTS)
    return a, b, element, kind, [(a, f"Set {kind}"), (b, f"Set {kind}")]


def set_mem(dice: Dice, name: str, split: Split) -> Draft:
    """Membership: `x ∈ A ∩ B → x ∈ A`, `x ∈ A → x ∈ A ∪ B`, `x ∈ A ∩ B → x ∈ B ∩ A`."""
    a, b, x, kind, sets = _set_binders(dice)
    binders = [*sets, (x, kind)]
    shape = dice.randint(0, 3)
    head = f"∀ ({a} {b} : Set {kind}) ({x} : {kind}), "
    if shape <= 1:  # x ∈ A ∩ B → x ∈ A (or B)
        hyp = f"{x} ∈ {a} ∩ {b}"
        target, proj = (f"{x} ∈ {a}", "1") if shape == 0 else (f"{x} ∈ {b}", "2")
        draft = Draft(name, split=split, topic="sets", family="set_mem", statement=f"{head}{hyp} → {target}")
        goal, _ = intro_chain(draft, binders, [("h", hyp)], target)
        lemma = "Set.mem_of_mem_inter_left" if proj == "1" else "Set.mem_of_mem_inter_right"
        draft.closes(goal, [f"exact h.{proj}", f"exact {lemma} h"])
        draft.fails(goal, [f"exact h.{'2' if proj == '1' else '1'}", "exact h", "linarith"])
        parts = draft.goal(context(*binders, ("h₁", f"{x} ∈ {a}"), ("h₂", f"{x} ∈ {b}")), target)
        draft.step(goal, ["obtain ⟨h₁, h₂⟩ := h", "rcases h with ⟨h₁, h₂⟩"], [parts])
        draft.closes(parts, [f"exact h{'₁' if proj == '1' else '₂'}", "assumption"])
        draft.proof(f"intro {a} {b} {x} h", f"exact h.{proj}")
        draft.proof(f"intro {a} {b} {x} h", "obtain ⟨h₁, h₂⟩ := h", f"exact h{'₁' if proj == '1' else '₂'}")
        draft.proof(f"intro {a} {b} {x} h", f"exact {lemma} h")
        return draft
    if shape == 2:  # x ∈ A → x ∈ A ∪ B
        hyp, target = f"{x} ∈ {a}", f"{x} ∈ {a} ∪ {b}"
        draft = Draft(name, split=split, topic="sets", family="set_mem", statement=f"{head}{hyp} → {target}")
        goal, _ = intro_chain(draft, binders, [("h", hyp)], target)
        draft.closes(goal, ["exact Or.inl h", f"exact Set.mem_union_left {b} h"])
        draft.fails(goal, ["exact Or.inr h", "exact h", "linarith"])
        draft.proof(f"intro {a} {b} {x} h", "exact Or.inl h")
        draft.proof(f"intro {a} {b} {x} h", f"exact Set.mem_union_left {b} h")
        return draft
    hyp, target = f"{x} ∈ {a} ∩ {b}", f"{x} ∈ {b} ∩ {a}"  # x ∈ A ∩ B → x ∈ B ∩ A
    draft = Draft(name, split=split, topic="sets", family="set_mem", statement=f"{head}{hyp} → {target}")
    goal, _ = intro_chain(draft, binders, [("h", hyp)], target)
    draft.closes(goal, ["exact ⟨h.2, h.1⟩"])
    draft.fails(goal, ["exact h", "exact ⟨h.1, h.2⟩"])
    parts = draft.goal(context(*binders, ("h₁", f"{x} ∈ {a}"), ("h₂", f"{x} ∈ {b}")), target)
    draft.step(goal, ["obtain ⟨h₁, h₂⟩ := h", "rcases h with ⟨h₁, h₂⟩"], [parts])
    draft.closes(parts, ["exact ⟨h₂, h₁⟩"])
    draft.fails(parts, ["exact ⟨h₁, h₂⟩"])
    draft.proof(f"intro {a} {b} {x} h", "exact ⟨h.2, h.1⟩")
    draft.proof(f"intro {a} {b} {x} h", "obtain ⟨h₁, h₂⟩ := h", "exact ⟨h₂, h₁⟩")
    return draft


def set_subset(dice: Dice, name: str, split: Split) -> Draft:
    """Inclusions: `A ∩ B ⊆ A`, `A ⊆ A ∪ B` — introduce an element (`intro x h`), then membership."""
    a, b, x, kind, sets = _set_binders(dice)
    shape = dice.randint(0, 3)
    if shape <= 1:
        left, target, proj = f"{a} ∩ {b}", (a if shape == 0 else b), ("1" if shape == 0 else "2")
        closer, lemma = f"exact h.{proj}", ("Set.inter_subset_left" if shape == 0 else "Set.inter_subset_right")
        wrong = f"exact h.{'2' if proj == '1' else '1'}"
    else:
        left, target = (a, f"{a} ∪ {b}") if shape == 2 else (b, f"{a} ∪ {b}")
        closer = "exact Or.inl h" if shape == 2 else "exact Or.inr h"
        lemma = "Set.subset_union_left" if shape == 2 else "Set.subset_union_right"
        wrong = "exact Or.inr h" if shape == 2 else "exact Or.inl h"
    inclusion = f"{left} ⊆ {target}"
    draft = Draft(name, split=split, topic="sets", family="set_subset",
                  statement=f"∀ ({a} {b} : Set {kind}), {inclusion}")
    opened = draft.goal(context(*sets), inclusion)
    draft.step(draft.root, [f"intro {a} {b}", f"rintro {a} {b}"], [opened])
    element = draft.goal(context(*sets, (x, kind), ("h", f"{x} ∈ {left}")), f"{x} ∈ {target}")
    draft.step(opened, f"intro {x} h", [element])
    draft.step(draft.root, f"intro {a} {b} {x} h", [element])
    named = draft.goal(context(*sets, (x, kind), ("hx", f"{x} ∈ {left}")), f"{x} ∈ {target}")
    draft.step(opened, f"intro {x} hx", [named])
    draft.step(draft.root, f"intro {a} {b} {x} hx", [named])
    draft.closes(named, [closer.replace(" h", " hx")])
    draft.closes(opened, [f"exact {lemma}", f"exact fun {x} h => {closer.removeprefix('exact ')}"])
    draft.fails(opened, ["linarith", "exact h", "constructor"])
    draft.closes(element, [closer])
    draft.fails(element, [wrong, "exact h", "linarith"])
    draft.proof(f"intro {a} {b}", f"intro {x} h", closer)
    draft.proof(f"intro {a} {b} {x} h", closer)
    draft.proof(f"intro {a} {b}", f"exact {lemma}")
    return draft


def sq_ineq(dice: Dice, name: str, split: Split) -> Draft:
    """Two-variable square inequalities over ℝ: `nlinarith [sq_nonneg (a - b)]` (or `positivity` on
    `0 ≤ (a - b) ^ 2`); `linarith` alone fails."""
    a, b = dice.choice(REAL_PAIRS)
    shape = dice.randint(0, 4)
    k = dice.randint(1, 9)
    targets = [
        f"2 * {a} * {b} ≤ {a} ^ 2 + {b} ^ 2 + {k}",
        f"{a} * {b} ≤ ({a} ^ 2 + {b} ^ 2) / 2 + {k}",
        f"{k} * {a} * {b} ≤ {k} * ({a} ^ 2 + {b} ^ 2) / 2",
        f"({a} + {b}) ^ 2 ≤ 2 * ({a} ^ 2 + {b} ^ 2) + {k}",
        f"0 ≤ ({a} - {b}) ^ 2 + {k}",
    ]
    target = targets[shape]
    draft = Draft(name, split=split, topic="inequality", family="sq_ineq",
                  statement=f"∀ ({a} {b} : ℝ), {target}")
    goal = draft.goal(context((a, "ℝ"), (b, "ℝ")), target)
    draft.step(draft.root, [f"intro {a} {b}", f"rintro {a} {b}"], [goal])
    hints = [f"nlinarith [sq_nonneg ({a} - {b})]", f"nlinarith [sq_nonneg ({b} - {a})]",
             f"nlinarith [sq_nonneg ({a} - {b}), sq_nonneg ({a} + {b})]"]
    draft.closes(goal, hints)
    draft.fails(goal, ["linarith"])
    draft.proof(f"intro {a} {b}", hints[0])
    draft.proof(f"intro {a} {b}", hints[2])
    if shape == 4:
        draft.closes(goal, ["positivity"])
        draft.proof(f"intro {a} {b}", "positivity")
    else:
        draft.fails(goal, ["positivity"])
    return draft


def pos_ineq(dice: Dice, name: str, split: Split) -> Draft:
    """∀ (a b : ℝ), 0 < a → 0 < b → 0 < f a b — `positivity` (it uses the hypotheses on atoms), or
    `nlinarith [mul_pos h₀ h₁]`."""
    a, b = dice.choice(REAL_PAIRS)
    shape = dice.randint(0, 3)
    k = dice.randint(1, 9)
    bodies = [f"{a} * {b}", f"{a} * {b} + {k} * {a}", f"{a} + {k} * {b}", f"{k} * {a} * {b} + {b}"]
    body = bodies[shape]
    h0, h1 = f"0 < {a}", f"0 < {b}"
    target = f"0 < {body}"
    draft = Draft(name, split=split, topic="inequality", family="pos_ineq",
                  statement=f"∀ ({a} {b} : ℝ), {h0} → {h1} → {target}")
    goal, _ = intro_chain(draft, [(a, "ℝ"), (b, "ℝ")], [("h₀", h0), ("h₁", h1)], target)
    # nlinarith multiplies the hypotheses in pairs, so it finds 0 < a * b by itself.
    closers = ["positivity", "nlinarith [mul_pos h₀ h₁]", "nlinarith", "nlinarith [h₀, h₁]"]
    if shape == 0:
        closers.append("exact mul_pos h₀ h₁")
    if shape == 2:
        closers.append("linarith")
    else:
        draft.fails(goal, ["linarith"])
    draft.closes(goal, closers)
    draft.fails(goal, ["exact h₀", "omega", "decide"])
    draft.proof(f"intro {a} {b} h₀ h₁", "positivity")
    draft.proof(f"intro {a} {b} h₀ h₁", "nlinarith [mul_pos h₀ h₁]")
    return draft
