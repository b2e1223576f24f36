"""Nothing false is provable, shown on random statements of the fragment.

The test generates statements `∀ (x y : T), H₁ → H₂ → C` over ℕ, ℤ and ℝ (linear and quadratic terms, ℕ
subtraction, division and remainder, divisibility, ∧ ∨ ¬), decides each one *independently of minilean*
with this module's own evaluator (Lean's semantics: truncated ℕ subtraction, Euclidean division, `x / 0 = 0`)
on a finite grid of values, and runs random tactic scripts from minilean's tactic set on it, the decision
tactics included. A statement with a counterexample on the grid is false: no script may close it. Half of the
statements are near misses of true ones (a constant off by one, `≤` made strict, a sign flipped), the shapes a
prover is most tempted to "prove". The generator is seeded (same statements every run) and bounded (seconds).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import pytest

from tests.minilean.helpers import Prover

# Seconds, not milliseconds: many scripts with z3 calls / subprocesses (`pytest -m "not slow"` skips them).
pytestmark = pytest.mark.slow

Value = int | Fraction


@dataclass(frozen=True)
class Term:
    """A term with its Lean text and its value under an assignment."""

    text: str
    value: Callable[[dict[str, Value]], Value]


@dataclass(frozen=True)
class Prop:
    text: str
    holds: Callable[[dict[str, Value]], bool]


def _ediv(a: int, b: int) -> int:
    if b == 0:
        return 0
    r = a % abs(b)
    return (a - r) // b


def _emod(a: int, b: int) -> int:
    return a if b == 0 else a % abs(b)


class Generator:
    def __init__(self, rng: random.Random, ty: str, names: tuple[str, ...]) -> None:
        self.rng = rng
        self.ty = ty
        self.names = names

    def num(self, low: int = 0, high: int = 6) -> Term:
        k = self.rng.randint(low, high)
        value: Value = Fraction(k) if self.ty == "ℝ" else k
        return Term(str(k), lambda env: value)

    def atom(self) -> Term:
        if self.rng.random() < 0.7:
            name = self.rng.choice(self.names)
            return Term(name, lambda env: env[name])
        return self.num()

    def term(self, depth: int = 2) -> Term:
        if depth == 0 or self.rng.random() < 0.3:
            return self.atom()
        ops = ["+", "-", "*", "^2"]
        if self.ty != "ℝ":
            ops += ["%", "/"]
        else:
            ops += ["/"]
        op = self.rng.choice(ops)
        a = self.term(depth - 1)
        if op == "^2":
            return Term(f"({a.text}) ^ 2", lambda env: a.value(env) ** 2)
        if op in ("%", "/") and self.ty != "ℝ":
            k = self.rng.randint(1, 4)
            if op == "%":
                return Term(f"({a.text}) % {k}", lambda env: _emod(int(a.value(env)), k))
            return Term(f"({a.text}) / {k}", lambda env: _ediv(int(a.value(env)), k))
        b = self.term(depth - 1)
        if op == "/":
            return Term(f"({a.text}) / ({b.text})",
                        lambda env: Fraction(0) if b.value(env) == 0 else Fraction(a.value(env)) / b.value(env))
        if op == "+":
            return Term(f"({a.text}) + ({b.text})", lambda env: a.value(env) + b.value(env))
        if op == "*":
            return Term(f"({a.text}) * ({b.text})", lambda env: a.value(env) * b.value(env))
        if self.ty == "ℕ":
            return Term(f"({a.text}) - ({b.text})", lambda env: max(a.value(env) - b.value(env), 0))
        return Term(f"({a.text}) - ({b.text})", lambda env: a.value(env) - b.value(env))

    def atom_prop(self) -> Prop:
        a, b = self.term(), self.term()
        op = self.rng.choice(["=", "≠", "<", "≤", ">", "≥"] + (["∣"] if self.ty != "ℝ" else []))
        if op == "∣":
            k = self.rng.randint(1, 4)
            return Prop(f"{k} ∣ {a.text}", lambda env: int(a.value(env)) % k == 0)
        return Prop(f"{a.text} {op} {b.text}", lambda env: _compare(op, a.value(env), b.value(env)))

    def prop(self, depth: int = 1) -> Prop:
        if depth == 0 or self.rng.random() < 0.5:
            return self.atom_prop()
        kind = self.rng.choice(["∧", "∨", "¬"])
        p = self.prop(depth - 1)
        if kind == "¬":
            return Prop(f"¬({p.text})", lambda env: not p.holds(env))
        q = self.prop(depth - 1)
        if kind == "∧":
            return Prop(f"({p.text}) ∧ ({q.text})", lambda env: p.holds(env) and q.holds(env))
        return Prop(f"({p.text}) ∨ ({q.text})", lambda env: p.holds(env) or q.holds(env))


def _compare(op: str, a: Value, b: Value) -> bool:
    return {"=": a == b, "≠": a != b, "<": a < b, "≤": a <= b, ">": a > b, "≥": a >= b}[op]


@dataclass(frozen=True)
class Statement:
    text: str
    ty: str
    names: tuple[str, ...]
    hyps: tuple[Prop, ...]
    concl: Prop

    def counterexample(self) -> dict[str, Value] | None:
        grid: list[Value]
        if self.ty == "ℕ":
            grid = list(range(0, 9))
        elif self.ty == "ℤ":
            grid = list(range(-5, 6))
        else:
            grid = sorted({Fraction(n, d) for n in range(-6, 7) for d in (1, 2, 3)})
        for values in itertools.product(grid, repeat=len(self.names)):
            env = dict(zip(self.names, values, strict=True))
            if all(h.holds(env) for h in self.hyps) and not self.concl.holds(env):
                return env
        return None


def _nsub(a: Value, b: Value) -> Value:
    return max(a - b, 0)


def _rdiv(a: Value, b: Value) -> Value:
    return Fraction(0) if b == 0 else Fraction(a) / b


# Near misses: true templates made false by one small change, each with its meaning written in Python with
# Lean's semantics (checked on the grid like the rest).
E = dict[str, Value]
NEAR_MISSES: list[tuple[str, tuple[str, ...], list[Prop], Prop]] = [
    ("ℝ", ("x",), [Prop("2 * x + 3 = 11", lambda e: 2 * e["x"] + 3 == 11)], Prop("x = 5", lambda e: e["x"] == 5)),
    ("ℝ", ("x", "y"), [Prop("x + y = 10", lambda e: e["x"] + e["y"] == 10),
                       Prop("x - y = 2", lambda e: e["x"] - e["y"] == 2)],
     Prop("x = 6 ∧ y = 5", lambda e: e["x"] == 6 and e["y"] == 5)),
    ("ℝ", ("x", "y"), [],
     Prop("2 * x * y < x ^ 2 + y ^ 2", lambda e: 2 * e["x"] * e["y"] < e["x"] ** 2 + e["y"] ** 2)),
    ("ℝ", ("x",), [], Prop("2 * x < x ^ 2 + 1", lambda e: 2 * e["x"] < e["x"] ** 2 + 1)),
    ("ℝ", ("x", "y"), [Prop("0 ≤ x", lambda e: e["x"] >= 0), Prop("x ≤ y", lambda e: e["x"] <= e["y"])],
     Prop("x ^ 2 < y ^ 2", lambda e: e["x"] ** 2 < e["y"] ** 2)),
    ("ℝ", ("x", "y"), [Prop("0 < x", lambda e: e["x"] > 0), Prop("0 ≤ y", lambda e: e["y"] >= 0)],
     Prop("0 < x * y", lambda e: e["x"] * e["y"] > 0)),
    ("ℝ", ("x",), [Prop("x ^ 2 = 4", lambda e: e["x"] ** 2 == 4)], Prop("x = 2", lambda e: e["x"] == 2)),
    ("ℝ", ("x",), [Prop("x ≠ 0", lambda e: e["x"] != 0)],
     Prop("x / x = 1 ∧ x > 0", lambda e: _rdiv(e["x"], e["x"]) == 1 and e["x"] > 0)),
    ("ℤ", ("n",), [Prop("n % 2 = 1", lambda e: _emod(int(e["n"]), 2) == 1)],
     Prop("(n + 1) % 4 = 0", lambda e: _emod(int(e["n"]) + 1, 4) == 0)),
    ("ℤ", ("n",), [Prop("3 ∣ n", lambda e: int(e["n"]) % 3 == 0)], Prop("3 ∣ n + 2", lambda e: (e["n"] + 2) % 3 == 0)),
    ("ℤ", ("x", "y"), [Prop("x < y", lambda e: e["x"] < e["y"])], Prop("x + 2 ≤ y", lambda e: e["x"] + 2 <= e["y"])),
    ("ℤ", ("n",), [], Prop("n ^ 2 ≥ n + 1", lambda e: e["n"] ** 2 >= e["n"] + 1)),
    ("ℕ", ("n",), [], Prop("n - 1 + 1 = n", lambda e: _nsub(e["n"], 1) + 1 == e["n"])),
    ("ℕ", ("a", "b"), [Prop("b ≤ a + 1", lambda e: e["b"] <= e["a"] + 1)],
     Prop("a - b + b = a", lambda e: _nsub(e["a"], e["b"]) + e["b"] == e["a"])),
    ("ℕ", ("n",), [Prop("n % 3 = 2", lambda e: _emod(int(e["n"]), 3) == 2)],
     Prop("(n + 4) % 3 = 0", lambda e: _emod(int(e["n"]) + 4, 3) == 0)),
    ("ℕ", ("n",), [Prop("4 ∣ n", lambda e: e["n"] % 4 == 0)], Prop("8 ∣ n + 8", lambda e: (e["n"] + 8) % 8 == 0)),
    ("ℕ", ("n",), [], Prop("n / 2 * 2 = n", lambda e: _ediv(int(e["n"]), 2) * 2 == e["n"])),
    ("ℕ", ("m", "n"), [Prop("m < n", lambda e: e["m"] < e["n"])],
     Prop("m * m < n", lambda e: e["m"] * e["m"] < e["n"])),
]


# The true statements the near misses were made from: the same scripts must prove some of them, or the
# test would pass for a prover that proves nothing.
TRUE_TEMPLATES: list[tuple[str, tuple[str, ...], list[Prop], Prop]] = [
    ("ℝ", ("x",), [Prop("2 * x + 3 = 11", lambda e: 2 * e["x"] + 3 == 11)], Prop("x = 4", lambda e: e["x"] == 4)),
    ("ℝ", ("x", "y"), [Prop("x + y = 10", lambda e: e["x"] + e["y"] == 10),
                       Prop("x - y = 2", lambda e: e["x"] - e["y"] == 2)],
     Prop("x = 6 ∧ y = 4", lambda e: e["x"] == 6 and e["y"] == 4)),
    ("ℝ", ("x", "y"), [],
     Prop("2 * x * y ≤ x ^ 2 + y ^ 2", lambda e: 2 * e["x"] * e["y"] <= e["x"] ** 2 + e["y"] ** 2)),
    ("ℝ", ("x", "y"), [Prop("0 < x", lambda e: e["x"] > 0), Prop("0 < y", lambda e: e["y"] > 0)],
     Prop("0 < x * y", lambda e: e["x"] * e["y"] > 0)),
    ("ℤ", ("x", "y"), [Prop("x < y", lambda e: e["x"] < e["y"])], Prop("x + 1 ≤ y", lambda e: e["x"] + 1 <= e["y"])),
    ("ℤ", ("n",), [Prop("3 ∣ n", lambda e: int(e["n"]) % 3 == 0)], Prop("3 ∣ n + 3", lambda e: (e["n"] + 3) % 3 == 0)),
    ("ℕ", ("n",), [Prop("1 ≤ n", lambda e: e["n"] >= 1)],
     Prop("n - 1 + 1 = n", lambda e: _nsub(e["n"], 1) + 1 == e["n"])),
    ("ℕ", ("n",), [Prop("n % 3 = 2", lambda e: _emod(int(e["n"]), 3) == 2)],
     Prop("(n + 4) % 3 = 0", lambda e: _emod(int(e["n"]) + 4, 3) == 0)),
]


def _from_table(rng: random.Random, table: list[tuple[str, tuple[str, ...], list[Prop], Prop]]) -> Statement:
    ty, names, hyps, concl = rng.choice(table)
    return _statement(ty, names, tuple(hyps), concl)


def _statement(ty: str, names: tuple[str, ...], hyps: tuple[Prop, ...], concl: Prop) -> Statement:
    binders = f"∀ ({' '.join(names)} : {ty})"
    body = " → ".join([*(f"({h.text})" for h in hyps), concl.text])
    return Statement(f"{binders}, {body}", ty, names, hyps, concl)


def _random_statement(rng: random.Random) -> Statement:
    ty = rng.choice(["ℕ", "ℤ", "ℝ"])
    names = rng.choice([("x",), ("x", "y")])
    gen = Generator(rng, ty, names)
    hyps = tuple(gen.prop(0) for _ in range(rng.randint(0, 2)))
    return _statement(ty, names, hyps, gen.prop(1))


FINISHERS = [
    "linarith", "nlinarith", "nlinarith [sq_nonneg (x - y), sq_nonneg (x + y), sq_nonneg x]", "positivity", "omega",
    "decide", "norm_num", "simp", "tauto", "ring", "rfl", "assumption", "contradiction", "trivial",
    "exact h₀", "exact h₁", "linarith [h₀, h₁]", "nlinarith [h₀, h₁]", "norm_num [h₀]", "simp [h₀, h₁]",
    "constructor <;> linarith", "exact ⟨by linarith, by nlinarith⟩",
]
STEPS = [
    "constructor", "left", "right", "exfalso", "push_neg", "rcases h₀ with h | h", "obtain ⟨a, b⟩ := h₀",
    "simp at h₀", "norm_num at h₀", "rw [h₀]", "subst h₀", "by_contra hc", "push_neg at h₀", "cases h₀",
    "have h₂ := h₀", "nlinarith [h₀]", "omega", "linarith",
]


def _scripts(rng: random.Random, statement: Statement, count: int) -> list[list[str]]:
    hyp_names = ["h₀", "h₁"][: len(statement.hyps)]
    intro = f"intro {' '.join([*statement.names, *hyp_names])}"
    scripts = []
    for _ in range(count):
        script = [intro]
        # a third of the scripts go straight to a finisher, the others take up to two steps first
        for _ in range(rng.choice([0, 0, 1, 2])):
            script.append(rng.choice(STEPS))
        script.append(f"all_goals {rng.choice(FINISHERS)}" if rng.random() < 0.5 else rng.choice(FINISHERS))
        scripts.append(script)
    return scripts


def test_random_false_statements_are_never_proved():
    rng = random.Random(20261122)
    prover = Prover()
    false_checked = 0
    true_proved = 0
    for index in range(96):
        kind = index % 3
        statement = (_from_table(rng, NEAR_MISSES) if kind == 0 else _random_statement(rng) if kind == 1
                     else _from_table(rng, TRUE_TEMPLATES))
        try:
            prover.start(statement.text)
        except Exception as exc:  # a generated text minilean cannot elaborate is a bug of the generator or parser
            raise AssertionError(f"cannot start {statement.text}: {exc}") from exc
        witness = statement.counterexample()
        for script in _scripts(rng, statement, 5):
            proved = prover.closes(statement.text, script)
            if witness is not None:
                assert not proved, f"proved a false statement: {statement.text} by {script} (counterexample {witness})"
            else:
                true_proved += proved
        false_checked += witness is not None
    # the test has teeth: many false statements were attacked, and the same scripts do prove true ones
    assert false_checked >= 35
    assert true_proved >= 5, true_proved


def test_every_true_template_is_proved_by_some_finisher():
    prover = Prover()
    for ty, names, hyps, concl in TRUE_TEMPLATES:
        statement = _statement(ty, names, tuple(hyps), concl)
        assert statement.counterexample() is None, statement.text
        intro = f"intro {' '.join([*names, *['h₀', 'h₁'][: len(hyps)]])}"
        assert any(prover.closes(statement.text, [intro, finisher]) for finisher in FINISHERS), statement.text


def test_the_decision_tactics_alone_never_prove_a_false_statement():
    rng = random.Random(7)
    prover = Prover()
    attacked = 0
    for _ in range(80):
        statement = _random_statement(rng)
        if statement.counterexample() is None:
            continue
        attacked += 1
        hyp_names = ["h₀", "h₁"][: len(statement.hyps)]
        intro = f"intro {' '.join([*statement.names, *hyp_names])}"
        for tactic in ("linarith", "nlinarith", "omega", "positivity", "tauto", "norm_num", "decide", "simp"):
            assert not prover.closes(statement.text, [intro, tactic]), (statement.text, tactic)
    assert attacked >= 25


def _random_formula(rng: random.Random, atoms: tuple[str, ...], depth: int) -> tuple[str, Callable[[dict[str, bool]],
                                                                                               bool]]:
    """A random propositional formula (Lean text, truth function) over `atoms`."""
    if depth == 0 or rng.random() < 0.25:
        name = rng.choice(atoms)
        return name, lambda v: v[name]
    kind = rng.choice(["∧", "∨", "→", "↔", "¬"])
    a_text, a = _random_formula(rng, atoms, depth - 1)
    if kind == "¬":
        return f"¬({a_text})", lambda v: not a(v)
    b_text, b = _random_formula(rng, atoms, depth - 1)
    truth = {"∧": lambda v: a(v) and b(v), "∨": lambda v: a(v) or b(v), "→": lambda v: (not a(v)) or b(v),
             "↔": lambda v: a(v) == b(v)}[kind]
    return f"({a_text}) {kind} ({b_text})", truth


LOGIC_SCRIPTS = [
    ["tauto"], ["intro p q r", "tauto"], ["intro p q r h", "exact h"], ["intro p q r h", "constructor <;> tauto"],
    ["intro p q r h", "rcases h with h | h <;> tauto"], ["intro p q r h", "left; tauto"],
    ["intro p q r h", "right; tauto"],
    ["intro p q r h", "obtain ⟨a, b⟩ := h", "tauto"], ["intro p q r h", "by_contra hc", "push_neg at hc", "tauto"],
    ["intro p q r h", "exfalso", "tauto"], ["intro p q r h", "exact h.1"], ["intro p q r h", "simp at h", "tauto"],
    ["intro p q r h", "simp [h]"], ["intro p q r h", "contradiction"], ["intro p q r h", "cases h <;> assumption"],
    ["intro p q r h", "apply h", "tauto"], ["intro p q r h", "exact fun x => h"], ["intro p q r h", "decide"],
]


def test_random_propositional_statements_are_proved_only_when_tautologies():
    rng = random.Random(11)
    prover = Prover()
    atoms = ("p", "q", "r")
    rows = [dict(zip(atoms, bits, strict=True)) for bits in itertools.product([False, True], repeat=3)]
    refuted = proved = 0
    for _ in range(40):
        hyp_text, hyp = _random_formula(rng, atoms, 2)
        concl_text, concl = _random_formula(rng, atoms, 2)
        statement = f"∀ (p q r : Prop), ({hyp_text}) → {concl_text}"
        valid = all((not hyp(row)) or concl(row) for row in rows)
        for script in LOGIC_SCRIPTS:
            closed = prover.closes(statement, script)
            assert valid or not closed, (statement, script)
            proved += closed
        refuted += not valid
    assert refuted >= 10 and proved >= 10, (refuted, proved)


def test_random_set_statements_are_proved_only_when_true():
    rng = random.Random(5)
    prover = Prover()
    ops: dict[str, Callable[[bool, bool], bool]] = {
        "∩": lambda a, b: a and b, "∪": lambda a, b: a or b, "\\": lambda a, b: a and not b}
    refuted = proved = 0
    for _ in range(30):
        op1, op2 = rng.choice(list(ops)), rng.choice(list(ops))
        left, right = rng.sample(["A", "B", "C"], 2), rng.sample(["A", "B", "C"], 2)
        statement = (f"∀ (A B C : Set ℕ) (x : ℕ), x ∈ {left[0]} {op1} {left[1]} → "
                     f"x ∈ {right[0]} {op2} {right[1]}")
        valid = True
        for bits in itertools.product([False, True], repeat=3):
            member = dict(zip("ABC", bits, strict=True))
            if ops[op1](member[left[0]], member[left[1]]) and not ops[op2](member[right[0]], member[right[1]]):
                valid = False
        subset = f"∀ (A B C : Set ℕ), {left[0]} {op1} {left[1]} ⊆ {right[0]} {op2} {right[1]}"
        for text in (statement, subset):
            intro = "intro A B C x h"
            scripts = ([intro, "tauto"], [intro, "simp at h ⊢", "tauto"], [intro, "exact h.1"],
                       [intro, "exact Or.inl h.1"], [intro, "constructor <;> simp_all"], [intro, "exact ⟨h.1, h.2⟩"],
                       [intro, "rcases h with h | h", "exact Or.inr h", "exact Or.inl h"],
                       ["intro A B C", "exact Set.inter_subset_left"], ["intro A B C", "simp"],
                       [intro, "left; exact h.2"])
            for script in scripts:
                closed = prover.closes(text, script)
                assert valid or not closed, (text, script)
                proved += closed
        refuted += not valid
    assert refuted >= 10 and proved >= 5, (refuted, proved)
