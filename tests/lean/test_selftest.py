"""`burnqed lean selftest` as a user runs it: against the embedded defaults' Lean (minilean, with the replay
server as its fallback for π and n !) and the strict Pantograph doubles it passes; against a REPL that
mis-scopes it fails, naming the item."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from burnqed.cli import app
from burnqed.lean.selftest import FACTORIAL_PROOF, PI_PROOF
from tests.conftest import double_argv

# The double has no Lean: the selftest's two proofs are the tactics it is told close a goal (their scoped names
# still have to resolve in the REPL's scope, as in Lean).
CLOSES = ("--closes", PI_PROOF, "--closes", FACTORIAL_PROOF)


def selftest(*sets: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["lean", "selftest", *(arg for s in sets for arg in ("--set", s))])
    return result.exit_code, result.stdout, result.stderr


def lean_command(*flags: str) -> str:
    return "lean.command=" + json.dumps(double_argv(*flags))


@pytest.mark.slow
def test_the_embedded_default_lean_conforms() -> None:
    code, out, err = selftest()
    assert code == 0, (out, err)
    assert "all 7 items conform" in out and "FAIL" not in out


@pytest.mark.slow
@pytest.mark.parametrize("version", ["0.3.16", "0.3.4"])
def test_the_strict_double_conforms(version: str) -> None:
    code, out, err = selftest(lean_command("--pantograph-version", version, *CLOSES))
    assert code == 0, (out, err)
    assert f"Pantograph {version}" in out and "all 7 items conform" in out


@pytest.mark.slow
def test_a_repl_that_mis_scopes_fails_and_the_item_is_named() -> None:
    code, out, err = selftest(lean_command("--pantograph-version", "0.3.16", "--mis-scope", *CLOSES))
    assert code == 1
    # The starts carry their header in their own text and still work; the tactics run in the REPL's scope, which
    # never got `open Real Nat`.
    assert err.strip() == ("lean selftest: 2 of 7 items do not conform: prove it with `exact pi_pos` and compile, "
                           "prove it with `exact factorial_pos n` and compile")
    assert "unknown identifier" in out


@pytest.mark.slow
def test_a_tactic_guard_that_lets_an_exploit_through_fails_its_item() -> None:
    code, _, err = selftest(lean_command("--pantograph-version", "0.3.16", *CLOSES), 'lean.deny=["\\\\bsorry\\\\b"]')
    assert code == 1
    assert err.strip() == "lean selftest: 1 of 7 items do not conform: known exploits refused by the tactic guard"
