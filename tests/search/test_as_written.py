"""Theorems written as miniF2F writes them (its header, `π` and `n !`, binders) are searched and proved in every
mode against the strict Pantograph double of the newest version and of 0.3.4 and 0.3.2 (in this process: the search
is the subject, not the pipe): they start, the tactics run in the header's scope and use the binders with no
`intro`, and the proof counts after its compile."""

from __future__ import annotations

import asyncio

import pytest

from burnqed.config import LeanConfig, PolicyConfig
from burnqed.lean import payloads
from burnqed.lean.guard import TacticGuard
from burnqed.lean.inprocess import InProcessReplay
from burnqed.lean.selftest import FACTORIAL, FACTORIAL_PROOF, PI, PI_PROOF
from burnqed.policy.base import Sampling
from burnqed.records.enums import SearchMode
from burnqed.records.theorem import Theorem
from burnqed.search.hybrid_settings import HybridSettings
from burnqed.search.modes import MODES, prove_theorem
from burnqed.search.sketch_settings import SketchSettings
from burnqed.search.step import StepSettings
from burnqed.search.whole import WholeSettings
from burnqed.text.prompt import PromptFormat
from leankit.version import PantographVersion
from tests.doubles.line_servers import DoubleServer
from tests.doubles.policy_double import ScriptedPolicy

GUARD = TacticGuard.from_config(LeanConfig())


def settings(mode: SearchMode) -> StepSettings | HybridSettings | WholeSettings | SketchSettings:
    fmt = MODES[mode].fmt(PolicyConfig(prompt_format=PromptFormat.DEEPSEEK_TACTIC))  # the format the mode sends
    if mode is SearchMode.SKETCH:  # a sketch of one hole, the theorem's target, proved by a step search
        return SketchSettings(fmt=fmt, sampling=Sampling(n=1, stop=("```",)), max_nodes=4,
                              subgoal=StepSettings(fmt=PromptFormat.DEEPSEEK_TACTIC, sampling=Sampling(n=1)))
    if mode is SearchMode.STEP:
        return StepSettings(fmt=fmt, sampling=Sampling(n=1), max_nodes=4)
    if mode is SearchMode.HYBRID:
        return HybridSettings(fmt=fmt, sampling=Sampling(stop=("```",)), max_proofs=2)
    return WholeSettings(fmt=fmt, sampling=Sampling(n=1, stop=("```",)), max_proofs=2)


@pytest.mark.parametrize("version", ["0.3.16", "0.3.4", "0.3.2"])
@pytest.mark.parametrize("mode", list(SearchMode))
@pytest.mark.parametrize(("theorem", "proof"), [(PI, PI_PROOF), (FACTORIAL, FACTORIAL_PROOF)], ids=["pi", "factorial"])
def test_a_minif2f_theorem_is_proved_as_written(version: str, mode: SearchMode, theorem: Theorem, proof: str) -> None:
    target = (theorem.signature or "").rsplit(": ", 1)[1]  # `0 < π`, `0 < n !`
    sketch = f"have h : {target} := by sorry\nexact h"
    policy = ScriptedPolicy(lambda prompt: [(sketch if "Sketch a proof" in prompt else proof, -0.1)],
                            key=lambda prompt: prompt)
    lean = InProcessReplay(DoubleServer(version, closes=(PI_PROOF, FACTORIAL_PROOF)))
    result = asyncio.run(prove_theorem(theorem, lean, policy, settings(mode), GUARD)).result
    proved, text, tactics, detail = result.proved, result.proof, result.tactics, result.detail
    assert proved, detail
    # The binders are in context: no intro before the proof (sketch mode: the subgoal's proof in its hole).
    body = [f"have h : {target} := by\n  {proof}", "exact h"] if mode is SearchMode.SKETCH else [proof]
    assert tactics == body
    # The stored proof is the Lean file as the user wrote it: the header, then the binder-form declaration.
    declaration = theorem.declaration() or ""
    indented = "\n".join(f"  {line}" for tactic in body for line in tactic.split("\n"))
    assert text == f"{theorem.header}\n\n{declaration} := by\n{indented}\n"
    # The prompt showed the same declaration.
    assert policy.calls and all(declaration in call[0] for call in policy.calls)


# A header as a jsonl row or an index may carry it: a namespace (the theorem's constant is `Ns.NAME`) and a variable
# the statement uses (Lean makes it a binder: a hypothesis of the start).
SCOPED_HEADER = "open BigOperators Real Nat Topology\nnamespace Contest.Test\nvariable (n : ℕ)"


def test_a_header_namespace_names_the_constant_the_compile_declares() -> None:
    theorem = Theorem(name="ns_factorial", signature="(h₀ : 0 < n) : 0 < n !", header=SCOPED_HEADER)
    assert theorem.name == "Contest.Test.ns_factorial"
    assert theorem.header == ("open BigOperators Real Nat Topology\nnamespace Contest.Test\nend Contest.Test\n"
                              "section\nopen Contest.Test\nvariable (n : ℕ)")
    assert Theorem.model_validate(theorem.model_dump()) == theorem  # loading the index again changes nothing
    already = Theorem(name="Contest.Test.t", signature=": 1 = 1", header="namespace Contest.Test")
    assert already.name == "Contest.Test.t"


@pytest.mark.parametrize("version", ["0.3.16", "0.3.4"])
def test_a_theorem_under_a_namespace_and_a_variable_is_proved_in_whole_mode(version: str) -> None:
    theorem = Theorem(name="ns_factorial", signature="(h₀ : 0 < n) : 0 < n !", header=SCOPED_HEADER)
    policy = ScriptedPolicy(lambda _: [(FACTORIAL_PROOF, -0.1)], key=lambda prompt: prompt)
    lean = InProcessReplay(DoubleServer(version, closes=(FACTORIAL_PROOF,)))
    result = asyncio.run(prove_theorem(theorem, lean, policy, settings(SearchMode.WHOLE), GUARD)).result
    proved, text, detail = result.proved, result.proof, result.detail
    assert proved, detail  # the compile's newConstants hold Contest.Test.ns_factorial, the name counted
    assert text is not None and "theorem Contest.Test.ns_factorial (h₀ : 0 < n) : 0 < n !" in text


def test_the_strict_double_declares_a_theorem_in_a_raw_namespace_under_it() -> None:
    """Control: without the header's rewrite the compile declares `Ns.NAME`, which is not the name restated."""
    lean = InProcessReplay(DoubleServer("0.3.16"))
    text = "namespace Contest\n\ntheorem t : 1 = 1 := by rfl\n\n#print axioms t\n"
    units = asyncio.run(lean.request("frontend.process",
                                     payloads.frontend_process(PantographVersion.parse("0.3.16"), text)))["units"]
    assert isinstance(units, list)
    assert units[1]["newConstants"] == ["Contest.t"]
    assert "'Contest.t' depends on axioms" in str(units[2]["messages"])
