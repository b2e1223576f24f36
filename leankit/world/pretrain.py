"""The base model's "other Lean data": generic families the tiny embedded model is pretrained on, beside the
hand-written bundled theorems, so that the untrained policy is a weak general prover (like a base LLM that has
seen Lean) rather than a model that only knows 36 theorems by heart.

    corpus = pretraining_corpus()       # train split only; never searched, evaluated or served

None of these families is a world family: they teach habits every prover has (introduce the binders with the
statement's names, close closed arithmetic with `norm_num`, a hypothesis with `exact`, an obvious linear
bound with `linarith`, a sum of squares with `positivity`) but none of the world's statement shapes, so what
iteration 0 learns from the world's train split is still new to it. Deterministic like the world
(`leankit.world.generate_world`), with its own families and the same seed.
"""

from __future__ import annotations

from leankit.corpus import Corpus, Split
from leankit.world.algebra import NAT_VARS, REAL_PAIRS, REAL_VARS, intro_chain
from leankit.world.catalog import Family
from leankit.world.draft import Dice, Draft, context
from leankit.world.logic import PROP_PAIRS

PRETRAIN_NAME = "burnqed-pretrain"
PRETRAIN_COUNT = 40


def num_nat(dice: Dice, name: str, split: Split) -> Draft:
    """A closed ℕ computation in other shapes than the world's (`a + b * c`, `(a + b) * c`) — `norm_num`."""
    a, b, c = dice.randint(2, 19), dice.randint(2, 19), dice.randint(2, 19)
    statement = dice.choice([f"{a} + {b} * {c} = {a + b * c}", f"({a} + {b}) * {c} = {(a + b) * c}",
                             f"{a} * ({b} + {c}) = {a * (b + c)}"])
    draft = Draft(name, split=split, topic="number_theory", family="num_nat", statement=statement)
    draft.closes(draft.root, ["norm_num", "decide"])
    draft.proof("norm_num")
    draft.proof("decide")
    return draft


def hyp_exact(dice: Dice, name: str, split: Split) -> Draft:
    """The conclusion is a hypothesis: `∀ (x : ℝ), x + a = b → x + a = b`, `∀ (p q : Prop), p → q → q`."""
    if dice.randint(0, 1) == 0:
        var = dice.choice(REAL_VARS + NAT_VARS)
        kind = "ℕ" if var in NAT_VARS else "ℝ"
        hyp = f"{var} + {dice.randint(1, 30)} = {dice.randint(31, 90)}"
        draft = Draft(name, split=split, topic="algebra", family="hyp_exact",
                      statement=f"∀ ({var} : {kind}), {hyp} → {hyp}")
        goal, _ = intro_chain(draft, [(var, kind)], [("h₀", hyp)], hyp)
        draft.closes(goal, ["exact h₀", "assumption"])
        draft.proof(f"intro {var} h₀", "exact h₀")
        return draft
    p, q = dice.choice(PROP_PAIRS)
    target = dice.choice([p, q])
    draft = Draft(name, split=split, topic="logic", family="hyp_exact",
                  statement=f"∀ ({p} {q} : Prop), {p} → {q} → {target}")
    goal, _ = intro_chain(draft, [(p, "Prop"), (q, "Prop")], [(f"h{p}", p), (f"h{q}", q)], target)
    draft.closes(goal, [f"exact h{target}", "assumption"])
    draft.proof(f"intro {p} {q} h{p} h{q}", f"exact h{target}")
    return draft


def le_shift(dice: Dice, name: str, split: Split) -> Draft:
    """An obvious linear bound: `∀ (x y : ℝ), x ≤ y → x - k ≤ y` — `linarith`."""
    x, y = dice.choice(REAL_PAIRS)
    k = dice.randint(1, 30)
    hyp = f"{x} ≤ {y}"
    target = dice.choice([f"{x} - {k} ≤ {y}", f"{x} ≤ {y} + {k}", f"{x} < {y} + {k}"])
    draft = Draft(name, split=split, topic="inequality", family="le_shift",
                  statement=f"∀ ({x} {y} : ℝ), {hyp} → {target}")
    goal, _ = intro_chain(draft, [(x, "ℝ"), (y, "ℝ")], [("h₀", hyp)], target)
    draft.closes(goal, "linarith")
    draft.proof(f"intro {x} {y} h₀", "linarith")
    return draft


def sq_pos(dice: Dice, name: str, split: Split) -> Draft:
    """A square plus a positive constant: `∀ (x : ℝ), 0 < x ^ 2 + k` — `positivity`."""
    var = dice.choice(REAL_VARS)
    k = dice.randint(1, 40)
    target = dice.choice([f"0 < {var} ^ 2 + {k}", f"0 ≤ {var} ^ 2 + {k}"])
    draft = Draft(name, split=split, topic="inequality", family="sq_pos", statement=f"∀ ({var} : ℝ), {target}")
    goal = draft.goal(context((var, "ℝ")), target)
    draft.step(draft.root, f"intro {var}", [goal])
    draft.closes(goal, "positivity")
    draft.proof(f"intro {var}", "positivity")
    return draft


PRETRAIN_FAMILIES: tuple[Family, ...] = tuple(
    Family(name, build, train=PRETRAIN_COUNT, pool=0, test=0)
    for name, build in (("num_nat", num_nat), ("hyp_exact", hyp_exact), ("le_shift", le_shift),
                        ("sq_pos", sq_pos))
)


def pretraining_corpus(seed: int = 0) -> Corpus:
    """The pretraining families' instances (train split only), statements distinct from the embedded corpus'."""
    from leankit.world import embedded_corpus, generate_world

    reserved = [theorem.statement for theorem in embedded_corpus().theorems]
    corpus = generate_world(seed, reserved=reserved, families=PRETRAIN_FAMILIES)
    return Corpus(name=PRETRAIN_NAME, theorems=[t.model_copy(update={"name": t.name.replace("world_", "pretrain_", 1)})
                                               for t in corpus.theorems])
