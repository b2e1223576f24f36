"""Lean `Name`s as Pantograph sends them and as burnqed shows them: Lean's `Name.toString` (escapes with `«»` the
components that are not identifiers, never an inaccessible name), the wire of each version (before 0.3.15 an
escaped name comes wrapped in `"` quotes and a case keeps its macro scopes; from 0.3.15 names are `ToJson Name`),
the request fields that became names, and the goals a model sees, identical from the strict doubles of 0.3.4 and
the newest version."""

from __future__ import annotations

import asyncio

import pytest

from burnqed.lean.inprocess import InProcessReplay
from burnqed.lean.protocol import parse_goal
from burnqed.records.replies import TacticKind, pretty_state
from burnqed.text.prompt import PromptFormat, build_prompt
from leankit.names import LeanName, case_wire_name, name_problem, shown_name, wire_name
from leankit.version import PantographVersion
from minilean.schema import request_problem
from tests.doubles.line_servers import DoubleServer

V = PantographVersion.parse
OLD, NEW = V("0.3.4"), V("0.3.15")

# (the name Lean reads from source or builds, what Name.toString writes = Lean's goal display)
NAMES = [
    (LeanName.parse("h₀"), "h₀"),  # subscript digits are identifier characters
    (LeanName.parse("«h₀»"), "h₀"),  # an escape that was not needed is not written back
    (LeanName.parse("a.b"), "a.b"),  # two components
    (LeanName.simple("a.b"), "«a.b»"),  # one component holding a dot
    (LeanName.parse("«a b»"), "«a b»"),  # a space
    (LeanName.simple("1h"), "«1h»"),  # not an identifier start
    (LeanName.parse("h'"), "h'"),
    (LeanName.simple("x✝"), "x✝"),  # inaccessible (sanitizeNames): never escaped
    (LeanName.simple("x✝¹"), "x✝¹"),
    (LeanName.simple("a b").append_after("✝"), "a b✝"),  # inaccessible too, though its stem needs escaping
    (LeanName.parse("a.b").append_after("✝"), "a.b✝"),
    (LeanName(("h", "_@", "Mathlib", "Tactic", "_hyg", 12)), "h._@.Mathlib.Tactic._hyg.12"),  # macro scopes
    (LeanName(("_uniq", 31)), "_uniq.31"),  # metavariable and free-variable ids
    (LeanName.simple("_"), "_"),  # pseudo-syntax
]


@pytest.mark.parametrize(("name", "written"), NAMES)
def test_names_are_written_as_lean_writes_them(name: LeanName, written: str) -> None:
    assert str(name) == written


@pytest.mark.parametrize(("text", "parts"), [
    ("h₀", ("h₀",)), ("a.«b c».d", ("a", "b c", "d")), ("Nat.add_comm", ("Nat", "add_comm")),
    ("a.1.b", ("a", 1, "b")), ("α'", ("α'",)),
    ("1abc", ()), ("a.", ()), ("", ()), ("x✝", ()), ("a b", ()), ("«open", ()), ("λx", ()),
])
def test_names_are_read_as_string_to_name_reads_them(text: str, parts: tuple[str | int, ...]) -> None:
    assert LeanName.parse(text).parts == parts


@pytest.mark.parametrize(("name", "written"), NAMES)
def test_each_version_sends_a_hypothesis_name_and_burnqed_shows_what_lean_displays(name: LeanName,
                                                                                      written: str) -> None:
    old, new = wire_name(str(name), OLD), wire_name(str(name), NEW)
    assert new == written  # ToJson Name = Name.toString
    assert old == (f'"{written}"' if "«" in written else written)  # serializeName's quotes
    assert shown_name(old) == shown_name(new) == written


def test_a_case_keeps_its_macro_scopes_only_before_0_3_15_and_is_shown_without() -> None:
    hygienic = LeanName(("inl", "_@", "Mathlib", "Tactic", "_hyg", 7))
    assert case_wire_name(hygienic, OLD) == "inl._@.Mathlib.Tactic._hyg.7"
    assert case_wire_name(hygienic, NEW) == "inl"
    assert shown_name("inl._@.Mathlib.Tactic._hyg.7", case=True) == shown_name("inl", case=True) == "inl"
    assert case_wire_name(LeanName.simple("a b"), OLD) == '"«a b»"'
    assert case_wire_name(LeanName.simple("a b"), NEW) == shown_name('"«a b»"', case=True) == "«a b»"


def test_goals_of_both_versions_parse_to_the_display_lean_shows() -> None:
    def goal_of(version: PantographVersion) -> dict[str, object]:
        names = [LeanName.parse("h₀"), LeanName.simple("a b"), LeanName.simple("x✝")]
        return {"vars": [{"userName": wire_name(str(n), version), "type": {"pp": "ℕ"}, "name": f"_uniq.{i}",
                          "isInaccessible": n.inaccessible} for i, n in enumerate(names)],
                "target": {"pp": "«a b» = h₀"}, "name": "_uniq.9", "fragment": "tactic",
                "userName": case_wire_name(LeanName(("succ", "_@", "M", "_hyg", 3)), version)}

    old, new = parse_goal(goal_of(OLD)), parse_goal(goal_of(NEW))
    assert old == new
    assert old.pretty() == "case succ\nh₀ «a b» x✝ : ℕ\n⊢ «a b» = h₀"
    assert [v.inaccessible for v in old.variables] == [False, False, True]


@pytest.mark.parametrize(("version", "command", "payload", "problem"), [
    ("0.3.15", "goal.start", {"copyFrom": "1abc"}, "GoalStart.copyFrom: expected a `Name`, got '\"1abc\"'"),
    ("0.3.15", "goal.start", {"expr": "True", "levels": ["u", ""]}, "GoalStart.levels?: expected a `Name`, "
                                                                    "got '\"\"'"),
    ("0.3.15", "goal.tactic", {"stateId": 0, "have": "p", "binderName": "h h"},
     "GoalTactic.binderName?: expected a `Name`, got '\"h h\"'"),
    ("0.3.16", "goal.print", {"stateId": 0, "extraMVars": ["_uniq.3", "?m"]},
     "GoalPrint.extraMVars?: expected a `Name`, got '\"?m\"'"),
    ("0.3.15", "frontend.distil", {"file": "", "ignoreValues": False, "binderName": "«x"},
     "FrontendDistil.binderName?: expected a `Name`, got '\"«x\"'"),
])
def test_name_fields_of_requests_are_read_as_names_from_0_3_15(version: str, command: str,
                                                               payload: dict[str, object], problem: str) -> None:
    assert request_problem(V(version), command, payload) == f"Pantograph.Protocol.{problem}"
    assert request_problem(V("0.3.14"), command, payload) is None  # strings before: any text is taken


@pytest.mark.parametrize(("command", "payload"), [
    ("goal.start", {"copyFrom": "Nat.add_comm", "levels": ["u", "[anonymous]"]}),
    ("goal.tactic", {"stateId": 0, "have": "p", "binderName": "«h h»"}),
    ("goal.print", {"stateId": 0, "extraMVars": ["_uniq.3"]}),
    ("frontend.distil", {"file": "", "ignoreValues": False, "binderName": "h₀"}),
])
def test_names_lean_reads_pass(command: str, payload: dict[str, object]) -> None:
    assert request_problem(NEW, command, payload) is None
    refused = request_problem(NEW, "goal.start", {"copyFrom": 3})
    assert refused == "Pantograph.Protocol.GoalStart.copyFrom: String expected"


def test_name_problem_speaks_lean() -> None:
    assert name_problem("Nat.add_comm") is None and name_problem("[anonymous]") is None
    assert name_problem(["a"]) == "String expected"
    assert name_problem("a b") == "expected a `Name`, got '\"a b\"'"


@pytest.mark.parametrize("version", ["0.3.4", "0.3.15", "0.3.16"])
def test_the_model_sees_the_same_goals_from_the_doubles_of_0_3_4_and_the_newest(version: str) -> None:
    """The strict double sends each version's names; the start, a tactic's hypotheses and a case read the same."""
    async def run() -> tuple[str, str, str]:
        lean = InProcessReplay(DoubleServer(version))  # what the client reads of the names is the subject
        state = await lean.start_theorem("", "theorem t (n : ℕ) (h₀ : 0 < n) («a b» «h₁» : ℕ) : «a b» = h₁")
        (start,) = await lean.goals(state)
        named = await lean.tactic(state, "hyps x✝ «a b» a.b «a.b» h₀ y✝¹")
        assert named.kind is TacticKind.SUCCESS
        assert (await lean.tactic(named.state_id or 0, "uses «a b» h₀")).kind is TacticKind.SUCCESS
        assert (await lean.tactic(named.state_id or 0, "uses x✝")).kind is TacticKind.ERROR  # inaccessible
        tagged = await lean.tactic(state, "tagged inl hyg")
        return pretty_state((start,)), pretty_state(named.goals), pretty_state(tagged.goals)

    start, named, tagged = asyncio.run(run())
    assert start == "n : ℕ\nh₀ : 0 < n\n«a b» h₁ : ℕ\n⊢ «a b» = h₁"
    assert named == "x✝ «a b» a.b «a.b» h₀ y✝¹ : ℕ\n⊢ after hyps x✝ «a b» a.b «a.b» h₀ y✝¹"
    assert tagged.splitlines()[0] == "case inl"
    prompt = build_prompt(PromptFormat.PLAIN_TACTIC, named)
    assert "x✝ «a b» a.b «a.b» h₀ y✝¹ : ℕ" in prompt and '"«' not in prompt and "«x✝»" not in prompt
