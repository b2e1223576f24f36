"""minilean elaborates files whose header defines constants (`def`, `abbrev`, `noncomputable`), PutnamBench's answer
slots included, as Lean and Pantograph do: the constants are declared and seen by later statements and by the goal
states started under them, each tactic unfolds them as Lean's does, a value left `sorry` shows in `#print axioms`,
`frontend.distil` couples it to the theorem, and a wrong answer proves nothing. Made-up problems only (PutnamBench's
README's `putnam_easy` form)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from leankit.recheck import recheck_command
from leankit.version import PantographVersion
from minilean.server import SUPPORTED, Server

V034 = PantographVersion.parse("0.3.4")
NEWEST = SUPPORTED[-1]  # 0.3.6: the newest Pantograph minilean emulates
SLOT = "abbrev putnam_easy_solution : ℕ := sorry\n-- 2\n/-- What is 1 + 1 -/\n"
STATEMENT = "theorem putnam_easy : 1 + 1 = putnam_easy_solution"
CLEAN = "'putnam_easy' depends on axioms: [propext, Classical.choice, Quot.sound]"
SORRY = "'putnam_easy' depends on axioms: [propext, sorryAx, Classical.choice, Quot.sound]"


def _send(server: Server, command: str, payload: dict[str, Any]) -> dict[str, Any]:
    reply: dict[str, Any] = json.loads(server.handle(f"{command} {json.dumps(payload, ensure_ascii=False)}"))
    return reply


def _process(server: Server, text: str, *, sorrys: bool = False, inherit: bool = False) -> list[dict[str, Any]]:
    reply = _send(server, "frontend.process", {"file": text, "readHeader": False, "inheritEnv": inherit,
                                               "sorrys": sorrys, "typeErrorsAsGoals": False, "newConstants": True})
    units: list[dict[str, Any]] = reply["units"]
    return units


def _said(units: list[dict[str, Any]]) -> list[list[str]]:
    """Each unit's messages as `severity: text`."""
    return [[f"{m['severity']}: {m['data']}" for m in unit["messages"]] for unit in units]


def _compile(answer: str, proof: str, keyword: str = "abbrev", version: PantographVersion = V034) -> list[list[str]]:
    text = (f"{keyword} putnam_easy_solution : ℕ := {answer}\n{STATEMENT} := by {proof}\n"
            f"#print axioms putnam_easy\n{recheck_command('putnam_easy')}")
    return _said(_process(Server(version=version), text))


@pytest.mark.parametrize("version", [V034, NEWEST])
def test_a_right_answer_compiles_with_clean_axioms_and_the_recheck_counts_the_definition(
        version: PantographVersion) -> None:
    assert _compile("2", "decide", version=version) == [
        [], [], [f"information: {CLEAN}"], ["information: burnqed kernel recheck: putnam_easy ok (2 constants)"]]


@pytest.mark.parametrize(("keyword", "proof"), [
    ("abbrev", "decide"), ("abbrev", "rfl"), ("abbrev", "norm_num"), ("abbrev", "simp"),
    ("abbrev", "unfold putnam_easy_solution; rfl"), ("abbrev", "rw [putnam_easy_solution]; rfl"),
    ("def", "decide"), ("def", "rfl"), ("def", "unfold putnam_easy_solution; rfl"),
    ("def", "rw [putnam_easy_solution]; rfl"), ("def", "simp [putnam_easy_solution]"),
    ("def", "norm_num [putnam_easy_solution]"), ("def", "exact rfl")])
def test_each_tactic_sees_through_a_definition_as_lean_does(keyword: str, proof: str) -> None:
    assert _compile("2", proof, keyword)[:3] == [[], [], [f"information: {CLEAN}"]]


@pytest.mark.parametrize("proof", ["norm_num", "simp"])
def test_simp_and_norm_num_leave_a_def_folded(proof: str) -> None:
    """They unify at reducible transparency: an `abbrev` unfolds there, a `def` does not."""
    said = _compile("2", proof, "def")
    assert said[1] == ["error: unsolved goals\n⊢ 2 = putnam_easy_solution"]
    assert said[2] == [f"information: {SORRY}"]


@pytest.mark.parametrize(("proof", "error"), [
    ("decide", "tactic 'decide' proved that the proposition\n  1 + 1 = putnam_easy_solution\nis false"),
    ("norm_num", "unsolved goals\n⊢ 2 = putnam_easy_solution"),
    ("unfold putnam_easy_solution", "unsolved goals\n⊢ 1 + 1 = 3"),
    ("rfl", "The rfl tactic failed. Possible reasons:\n- The goal is not a reflexive relation (neither `=` nor a "
            "relation with a @[refl] lemma).\n- The arguments of the relation are not equal.\nTry using the "
            "reflexivity lemma for your relation explicitly, e.g. `exact Eq.refl _` or\n`exact HEq.rfl` etc.\n"
            "⊢ 1 + 1 = putnam_easy_solution")])
def test_a_wrong_answer_does_not_prove(proof: str, error: str) -> None:
    said = _compile("3", proof)
    assert said[1] == [f"error: {error}"]
    assert said[2] == [f"information: {SORRY}"]
    assert said[3] == ["error: (kernel) declaration has metavariables 'putnam_easy'"]


def test_the_answer_written_in_compiles() -> None:
    text = (f"theorem putnam_easy : 1 + 1 = ((2) : ℕ) := by decide\n#print axioms putnam_easy\n"
            f"{recheck_command('putnam_easy')}")
    assert _said(_process(Server(), text)) == [
        [], [f"information: {CLEAN}"], ["information: burnqed kernel recheck: putnam_easy ok (1 constants)"]]


def test_an_answer_left_sorry_is_in_print_axioms_of_every_theorem_using_it() -> None:
    text = ("abbrev putnam_easy_solution : ℕ := sorry\ntheorem t : putnam_easy_solution = putnam_easy_solution := by "
            f"rfl\n#print axioms t\n#print axioms putnam_easy_solution\n{recheck_command('t')}")
    units = _process(Server(), text)
    assert _said(units) == [
        ["warning: declaration uses 'sorry'"], [],
        ["information: 't' depends on axioms: [propext, sorryAx, Classical.choice, Quot.sound]"],
        ["information: 'putnam_easy_solution' depends on axioms: [sorryAx]"],
        ["information: burnqed kernel recheck: t ok (2 constants)"]]
    assert [unit["newConstants"] for unit in units] == [["putnam_easy_solution"], ["t"], [], [], []]


def test_the_recheck_counts_every_definition_reached() -> None:
    text = ("def g (n : ℕ) : ℕ := n * 2\nnoncomputable def f (n : ℕ) : ℕ := g n + 1\ndef unused : ℕ := 5\n"
            "theorem t : f 3 = 7 := by decide\n#print axioms t\n" + recheck_command("t"))
    assert _said(_process(Server(), text))[4:] == [
        ["information: 't' depends on axioms: [propext, Classical.choice, Quot.sound]"],
        ["information: burnqed kernel recheck: t ok (3 constants)"]]


def test_the_recheck_is_answered_only_for_its_exact_text() -> None:
    changed = recheck_command("t").replace("cursor + 1", "cursor + 2")
    said = _said(_process(Server(), f"theorem t : 1 + 1 = 2 := by decide\n{changed}"))
    assert said[1] == ["error: minilean: only `theorem`, `lemma`, `example`, `def`, `abbrev`, `open`, `set_option` "
                       "and `#print axioms` are in minilean's fragment"]


@pytest.mark.parametrize("version", [V034, NEWEST])
def test_sorrys_make_a_goal_of_the_definition_and_the_theorem_state_sees_it(version: PantographVersion) -> None:
    """Pantograph 0.3.4's collectSorrys: the definition's `sorry` term is a goal of its type (no name); the theorem's
    state keeps the environment it was made in, so tactics on it see the constant the REPL's environment lacks."""
    server = Server(version=version)
    units = _process(server, f"{SLOT}{STATEMENT} := by sorry\n", sorrys=True)
    assert [(unit["goalStateId"], [g["target"]["pp"] for g in unit["goals"]], unit["goalSrcBoundaries"],
             "userName" in unit["goals"][0]) for unit in units] == [
        (0, ["ℕ"], [[37, 42]], False), (1, ["1 + 1 = putnam_easy_solution"], [[126, 131]], False)]
    assert _said(units) == [["warning: declaration uses 'sorry'"], ["warning: declaration uses 'sorry'"]]
    failed = _send(server, "goal.tactic", {"stateId": 1, "goalId": 0, "tactic": "decide"})
    assert failed["messages"][0]["data"] == (
        "tactic 'decide' failed for proposition\n  1 + 1 = putnam_easy_solution\nsince its 'Decidable' instance did "
        "not reduce to 'isTrue' or 'isFalse'.")
    assert _send(server, "goal.start", {"expr": "putnam_easy_solution = 2"}) == {
        "error": "elab", "desc": "unknown identifier 'putnam_easy_solution'"}


def test_tactics_unfold_a_helper_definition_of_the_started_file() -> None:
    server = Server()
    units = _process(server, "def f (n : ℕ) : ℕ := n + 1\ntheorem p (n : ℕ) : f n = n + 1 := by sorry", sorrys=True)
    state = units[1]["goalStateId"]
    unfolded = _send(server, "goal.tactic", {"stateId": state, "goalId": 0, "tactic": "unfold f"})
    assert [g["target"]["pp"] for g in unfolded["goals"]] == ["n + 1 = n + 1"]
    for closing in ("simp [f]", "rw [f]", "rfl"):
        assert _send(server, "goal.tactic", {"stateId": state, "goalId": 0, "tactic": closing})["goals"] == []
    assert _send(server, "goal.tactic", {"stateId": state, "goalId": 0, "tactic": "simp"})["messages"][0]["data"] \
        == "simp made no progress"
    assert _send(server, "goal.tactic", {"stateId": unfolded["nextStateId"], "goalId": 0, "tactic": "unfold f"})[
        "messages"][0]["data"] == "tactic 'unfold' failed to unfold 'f' at\n  n + 1 = n + 1"
    assert _send(server, "goal.tactic", {"stateId": state, "goalId": 0, "tactic": "unfold g"})[
        "messages"][0]["data"] == "unknown constant 'g'"


def test_distil_couples_a_sorry_answer_to_the_theorem() -> None:
    """PyPantograph's test_distil_coupled: one target, the definition's goal named by it, then the theorem's with
    the hole `?NAME`; filling the hole with the answer leaves the theorem about it."""
    server = Server(version=NEWEST)
    reply = _send(server, "frontend.distil", {"file": f"{SLOT}{STATEMENT} := by sorry\n", "ignoreValues": False})
    assert [[(g.get("userName"), g["target"]["pp"]) for g in target["goals"]] for target in reply["targets"]] == [
        [("putnam_easy_solution", "ℕ"), (None, "1 + 1 = ?putnam_easy_solution")]]
    filled = _send(server, "goal.tactic", {"stateId": 0, "goalId": 0, "tactic": "exact 2"})
    assert [g["target"]["pp"] for g in filled["goals"]] == ["1 + 1 = 2"]
    assert _send(server, "goal.tactic", {"stateId": 1, "goalId": 0, "tactic": "decide"})["goals"] == []
    assert _send(server, "goal.tactic", {"stateId": 0, "goalId": 0, "tactic": "decide"})["messages"][0]["data"] == (
        "minilean: only `exact` fills a goal of type ℕ (a value, not a proposition)")
    coupled = _send(server, "frontend.distil", {
        "file": "def f : ℕ → ℕ := sorry\ntheorem property (n : ℕ) : f n = n := sorry", "ignoreValues": False})
    assert [[(g.get("userName"), [v["userName"] for v in g["vars"]], g["target"]["pp"]) for g in target["goals"]]
            for target in coupled["targets"]] == [[("f", [], "ℕ → ℕ"), (None, ["n"], "?f n = n")]]
    ignored = _send(server, "frontend.distil", {"file": f"{SLOT}{STATEMENT} := by sorry\n", "ignoreValues": True})
    assert [[g["target"]["pp"] for g in target["goals"]] for target in ignored["targets"]] == [
        ["1 + 1 = putnam_easy_solution"]]


def test_a_given_answer_starts_one_goal_under_distil() -> None:
    server = Server(version=NEWEST)
    text = f"abbrev putnam_easy_solution : ℕ := 2\n{STATEMENT} := by sorry\n"
    reply = _send(server, "frontend.distil", {"file": text, "ignoreValues": False})
    assert [[g["target"]["pp"] for g in target["goals"]] for target in reply["targets"]] == [
        ["1 + 1 = putnam_easy_solution"]]
    assert _send(server, "goal.tactic", {"stateId": 0, "goalId": 0, "tactic": "norm_num"})["goals"] == []


@pytest.mark.parametrize("version", [V034, NEWEST])
def test_a_constant_the_repl_environment_has_is_already_declared(version: PantographVersion) -> None:
    server = Server(version=version)
    start = f"abbrev putnam_easy_solution : ℕ := 2\n{STATEMENT} := by sorry\n"
    for _ in range(2):  # without inheritEnv nothing is declared in the REPL's environment: it works twice
        assert _said(_process(server, start, sorrys=True)) == [[], ["warning: declaration uses 'sorry'"]]
    assert _said(_process(server, "abbrev putnam_easy_solution : ℕ := 2\n", inherit=True)) == [[]]
    said = _said(_process(server, start, sorrys=True))
    assert said == [["error: 'putnam_easy_solution' has already been declared"], ["warning: declaration uses 'sorry'"]]
    started = _send(server, "goal.start", {"expr": "putnam_easy_solution = 2"})
    assert _send(server, "goal.tactic", {"stateId": started["stateId"], "goalId": 0, "tactic": "rfl"})["goals"] == []


def test_a_definition_outside_the_fragment_is_an_error_at_its_name() -> None:
    said = _said(_process(Server(), "def sol : ℕ := by exact 2\ntheorem t : sol = 2 := by rfl"))
    assert said == [["error: minilean: a definition's value by tactics is outside minilean's fragment"],
                    ["error: unknown identifier 'sol'"]]


# ------------------------------------------- `decl_name%`, `if … then … else`, `==` (the answer check, issue 87)

NAMED = "if decl_name% == `putnam_easy_solution then 2 else 3"


@pytest.mark.parametrize(("answer", "proof", "said"), [
    # `decl_name%` is the declaration being elaborated: the slot's abbrev, where the name matches
    (f"({NAMED})", "decide", []),
    (f"({NAMED})", "rfl", []),
    # the same text in the theorem's statement names the theorem: 3 there
    ("(2)", "decide", ["error: tactic 'decide' proved that the proposition\n  (if (`putnam_easy == "
                       "`putnam_easy_solution) = true then 2 else 3) = putnam_easy_solution\nis false"]),
    # a proposition as the condition (decided), a `Bool` as one (`b = true`), `==` on numbers
    ("(if 2 < 3 then 2 else 7)", "decide", []),
    ("(if (1 == 2) then 7 else 2)", "decide", []),
    ("(if `a == `a.b then 7 else 2)", "rfl", []),
])
def test_decl_name_names_the_declaration_elaborated_and_if_decides_its_condition(answer: str, proof: str,
                                                                                said: list[str]) -> None:
    statement = STATEMENT if answer != "(2)" else f"theorem putnam_easy : ({NAMED}) = putnam_easy_solution"
    text = f"abbrev putnam_easy_solution : ℕ := {answer}\n{statement} := by {proof}\n"
    assert _said(_process(Server(version=V034), text)) == [[], said]


def test_decl_name_outside_a_declaration_and_beq_without_an_instance_are_lean_errors() -> None:
    server = Server(version=V034)
    started = _send(server, "goal.start", {"expr": "decl_name% = `x"})
    assert started == {"error": "elab", "desc": "invalid `decl_name%` macro, the declaration name is not available"}
    units = _process(server, "theorem t : (({1} : Set ℕ) == {1}) = true := by decide\n")
    assert _said(units)[0][0].startswith("error: failed to synthesize\n  BEq (Set ℕ)")
    # unfolded, the constant is the value its own declaration elaborated: 2, not 3
    units = _process(server, f"abbrev putnam_easy_solution : ℕ := ({NAMED})\ntheorem t : putnam_easy_solution ≠ 3 := "
                             "by\n  unfold putnam_easy_solution\n  decide\n")
    assert _said(units) == [[], []]
