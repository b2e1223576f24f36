"""What counts as a proof, end to end: the search against the strict Pantograph double at 0.3.4 (messages as objects)
and 0.3.2 (goalId required, messages as strings), on a real pipe for the honest proof (its version detected with
`--version`, what went over the wire), the double in the test's process for the routes that must not count (the same
client code reads the same replies: tests/doubles/line_servers.py).

Honest proofs count with the default settings; a metaprogram that adds an axiom (`by_elab` … `addDecl`),
`decide +native` (Lean.ofReduceBool) and a compile reply that declares nothing never count, with
`search.verify` on or off, whether the guard refuses them first (the default deny list) or lets them reach
Lean (an empty deny list: then the axiom check, or the missing compile, stops them).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from burnqed.config import LeanConfig, SearchConfig
from burnqed.lean.client import LeanWorker
from burnqed.lean.guard import TacticGuard
from burnqed.lean.inprocess import InProcessReplay
from burnqed.policy.base import Sampling
from burnqed.records.results import EdgeOutcome, FailureReason, Label
from burnqed.records.theorem import Theorem
from burnqed.search.step import SearchOutcome, StepSettings, prove
from leankit.corpus import load_corpus
from leankit.recheck import recheck_command
from leankit.version import PantographVersion
from minilean.replay.replay_server import ReplayServer
from tests.conftest import double_argv
from tests.doubles.line_servers import DoubleServer
from tests.doubles.policy_double import ScriptedPolicy

DEFAULT_GUARD = TacticGuard.from_config(LeanConfig())
OPEN_GUARD = TacticGuard([], builtin=False)  # as if every rule missed a spelling: only Lean's evidence is left
THEOREM = Theorem(name="two_plus_two", statement="2 + 2 = 4", header="import Mathlib\nopen Nat")

HONEST = "done"
BY_ELAB = ("exact (by_elab do Lean.addDecl (.axiomDecl {name := `smuggled_false, levelParams := [], "
           "type := .const `False [], isUnsafe := false}); return .app (.const `False.elim [1]) (.const "
           "`smuggled_false []))")
NATIVE = "decide +native"
EMPTY = "done emptycompile"  # the double answers this file's compile with {"units": []}

# tactic -> (why it never counts with the compile on, with the open guard)
FALSE_ROUTES = {
    BY_ELAB: "beyond Classical.choice, Quot.sound, propext: smuggled_false",
    NATIVE: "beyond Classical.choice, Quot.sound, propext: Lean.ofReduceBool",
    EMPTY: "no compilation units",
}


def search(version: str, tactic: str, *, verify: bool, guard: TacticGuard, log: Path,
           pipe: bool = False) -> SearchOutcome:
    """The step search of THEOREM with `tactic` as the policy's only answer, against the double at `version`: in a
    process on a pipe (`pipe`) or in this process, each request line appended to `log`."""
    settings = StepSettings(sampling=Sampling(n=4), max_nodes=5, timeout_s=30.0, verify=verify)
    policy = ScriptedPolicy(lambda _: [(tactic, -0.1)])
    if not pipe:
        return asyncio.run(prove(THEOREM, InProcessReplay(DoubleServer(version, log=log)), policy, settings, guard))

    async def go() -> SearchOutcome:
        worker = LeanWorker(double_argv("--pantograph-version", version, "--log", str(log)), tactic_timeout_s=5,
                            watchdog_grace_s=1, ready_timeout_s=10)
        async with worker:
            assert worker.version == PantographVersion.parse(version)  # detected with `--version`
            return await prove(THEOREM, worker, policy, settings, guard)

    return asyncio.run(go())


def never_counted(outcome: SearchOutcome) -> None:
    assert not outcome.result.proved
    assert outcome.result.budget_at_proof is None
    assert not any(e.label is Label.POSITIVE or e.proof_complete or e.on_proof_path for e in outcome.edges)


def sent(log: Path, command: str) -> list[dict[str, object]]:
    lines = log.read_text(encoding="utf-8").splitlines()
    return [json.loads(line.split(" ", 1)[1]) for line in lines if line.startswith(command + " ")]


def compiles(log: Path) -> list[dict[str, object]]:
    """The proof compiles among the `frontend.process` requests (not the header scope loads before a start)."""
    return [payload for payload in sent(log, "frontend.process") if "#print axioms" in str(payload.get("file"))]


@pytest.mark.slow
@pytest.mark.parametrize("version", ["0.3.4", "0.3.2"])
def test_an_honest_proof_counts_with_the_default_settings(version: str, tmp_path: Path) -> None:
    log = tmp_path / "requests.log"
    outcome = search(version, HONEST, verify=SearchConfig().verify, guard=DEFAULT_GUARD, log=log, pipe=True)
    result = outcome.result
    assert result.proved and not result.unverified, result.detail
    assert result.tactics == [HONEST] and result.budget_at_proof == 1
    assert result.proof == "import Mathlib\nopen Nat\n\ntheorem two_plus_two : 2 + 2 = 4 := by\n  done\n"
    [closing] = [e for e in outcome.edges if e.proof_complete]
    assert closing.label is Label.POSITIVE and closing.outcome is EdgeOutcome.CLOSED
    # What went over the wire: goalId on every tactic, a compile text without imports and with every field.
    assert all(payload.get("goalId") == 0 for payload in sent(log, "goal.tactic"))
    [compiled] = compiles(log)
    assert compiled["file"] == ("open Nat\n\ntheorem two_plus_two : 2 + 2 = 4 := by\n  done\n\n"
                                "#print axioms two_plus_two\n\n" + recheck_command("two_plus_two"))
    assert {key: compiled[key] for key in ("readHeader", "inheritEnv", "sorrys", "typeErrorsAsGoals",
                                           "newConstants")} == {"readHeader": False, "inheritEnv": False,
                                                                "sorrys": False, "typeErrorsAsGoals": False,
                                                                "newConstants": True}
    assert "invocations" not in compiled  # an optional output path from 0.3.2: a Bool would be refused


@pytest.mark.slow
@pytest.mark.parametrize("version", ["0.3.4", "0.3.2"])
def test_with_verify_off_an_honest_proof_is_unverified_never_counted(version: str, tmp_path: Path) -> None:
    outcome = search(version, HONEST, verify=False, guard=DEFAULT_GUARD, log=tmp_path / "log")
    result = outcome.result
    assert result.unverified and result.failure_reason is FailureReason.UNVERIFIED
    assert result.proof is not None and result.tactics == [HONEST]
    never_counted(outcome)
    assert outcome.edges[0].error == "not counted: unverified (compile skipped: search.verify=false)"
    assert not compiles(tmp_path / "log")


@pytest.mark.slow
@pytest.mark.parametrize("verify", [True, False])
@pytest.mark.parametrize("version", ["0.3.4", "0.3.2"])
@pytest.mark.parametrize("tactic", [BY_ELAB, NATIVE])
def test_the_guard_refuses_the_axiom_and_native_routes(tactic: str, version: str, verify: bool,
                                                        tmp_path: Path) -> None:
    outcome = search(version, tactic, verify=verify, guard=DEFAULT_GUARD, log=tmp_path / "log")
    never_counted(outcome)
    assert not outcome.result.unverified
    assert [e.outcome for e in outcome.edges] == [EdgeOutcome.REFUSED]


@pytest.mark.slow
@pytest.mark.parametrize("version", ["0.3.4", "0.3.2"])
@pytest.mark.parametrize("tactic", list(FALSE_ROUTES))
def test_past_the_guard_the_compile_rejects_them(tactic: str, version: str, tmp_path: Path) -> None:
    outcome = search(version, tactic, verify=True, guard=OPEN_GUARD, log=tmp_path / "log")
    never_counted(outcome)
    assert outcome.result.rejected_proofs == 1 and not outcome.result.unverified
    [closing] = [e for e in outcome.edges if e.outcome is EdgeOutcome.CLOSED]
    assert closing.error is not None and FALSE_ROUTES[tactic] in closing.error


@pytest.mark.slow
@pytest.mark.parametrize("version", ["0.3.4", "0.3.2"])
@pytest.mark.parametrize("tactic", list(FALSE_ROUTES))
def test_past_the_guard_with_verify_off_they_stay_unverified(tactic: str, version: str, tmp_path: Path) -> None:
    outcome = search(version, tactic, verify=False, guard=OPEN_GUARD, log=tmp_path / "log")
    never_counted(outcome)
    assert outcome.result.unverified


@pytest.mark.parametrize("version", ["0.3.4", "0.3.2", "0.3.0", "0.2.25"])
def test_the_replay_corpus_proves_at_every_emulated_version(version: str) -> None:
    # In process, the replay server emulating `version`; before 0.3.1 there are no sorry flags, so only the
    # compile can count the proof, and with verify off nothing counts.
    spec = load_corpus().by_name("algebra_2x_plus_3_eq_11")
    assert spec is not None
    # Started in binder form, `x` is in context: `intro h₀`, then `linarith`.
    script = ScriptedPolicy(lambda state: [("intro h₀", -0.1)] if "x = 4" in state.split("⊢")[-1]
                            and "h₀" not in state else [("linarith", -0.1)])
    theorem = Theorem.from_recorded(spec)
    if version == "0.2.25":  # no REPL scope before 0.3.0: a theorem with a header is refused there (docs/lean.md)
        theorem = theorem.model_copy(update={"header": None})
    for verify in (True, False):
        env = InProcessReplay(ReplayServer(load_corpus(), version=PantographVersion.parse(version)))
        settings = StepSettings(sampling=Sampling(n=2), max_nodes=10, timeout_s=30.0, verify=verify)
        outcome = asyncio.run(prove(theorem, env, script, settings, DEFAULT_GUARD))
        if verify:
            assert outcome.result.proved, (version, outcome.result.detail, [e.error for e in outcome.edges])
        else:
            never_counted(outcome)
            assert outcome.result.unverified is (PantographVersion.parse(version) >= PantographVersion(0, 3, 1))
