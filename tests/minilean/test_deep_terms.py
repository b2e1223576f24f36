"""A term nested past minilean's limit (`minilean.parser.MAX_TERM_DEPTH`) is refused when it is parsed, before
anything walks it, with a reason that names the limit: a 200 KB flat statement (`1 + 1 + … = n`, a long
conjunction) is a start failure saying so, in `goal.start`, in the `frontend.process` start burnqed uses, and
through burnqed's Lean client, never Python's recursion limit."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from burnqed.errors import LeanError
from burnqed.lean.client import LeanWorker
from burnqed.lean.start import start_theorem
from burnqed.records.theorem import Theorem
from minilean.parser import MAX_TERM_DEPTH, TermTooDeep, parse
from minilean.syntax import Op

EMBEDDED = [sys.executable, "-m", "minilean", "--fallback-module", "minilean.replay"]  # lean.command's default
TERMS = 50_000
FLAT_SUM = " + ".join(["1"] * TERMS) + f" = {TERMS}"  # 200 KB, 50,001 levels deep: the statement
# Past the depth where Python's recursion limit stopped minilean (about 5,000 levels), and cheaper to read.
SHORTER_SUM = " + ".join(["1"] * 6_000) + " = 6000"  # 24 KB, 6,001 levels
FLAT_AND = " ∧ ".join(["1 = 1"] * 6_000)  # 48 KB, 6,001 levels


def refusal(depth: int) -> str:
    return (f"minilean: this term nests {depth:,} levels deep, over minilean's limit of 2,000 levels (each operator "
            "of an unbracketed chain such as `1 + 1 + …` or `p ∧ q ∧ …` is one level)")


@pytest.fixture
def server_recursion_limit() -> Iterator[None]:
    """The recursion limit `python -m minilean` runs under (`minilean.server.main`)."""
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(10_000)
    yield
    sys.setrecursionlimit(before)


@pytest.mark.slow  # two 2,000-level parses
@pytest.mark.usefixtures("server_recursion_limit")
def test_a_term_at_the_limit_is_read_and_one_level_deeper_is_refused_naming_the_limit() -> None:
    assert MAX_TERM_DEPTH == 2_000
    at_limit = parse(" + ".join(["1"] * (MAX_TERM_DEPTH - 1)) + " = 0")  # 1,999 terms: 2,000 levels
    assert isinstance(at_limit, Op) and at_limit.op == "="
    with pytest.raises(TermTooDeep) as refused:
        parse(" + ".join(["1"] * MAX_TERM_DEPTH) + " = 0")
    assert (refused.value.depth, refused.value.message) == (2_001, refusal(2_001))
    # Brackets alone add no level: deep parentheses around one number are one term.
    assert parse("(" * 5_000 + "1" + ")" * 5_000 + " = 1") == parse("1 = 1")


def _session(requests: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    lines = [f"{command} {json.dumps(payload, ensure_ascii=False)}" for command, payload in requests]
    done = subprocess.run(EMBEDDED, input="\n".join([*lines, ""]), capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert out[0] == "ready."
    return [json.loads(line) for line in out[1:]]


def _sorry_file(statement: str) -> dict[str, Any]:
    return {"file": f"theorem big : {statement} := by sorry", "readHeader": False, "inheritEnv": False,
            "sorrys": True, "typeErrorsAsGoals": False, "newConstants": False}


@pytest.mark.slow  # the embedded Lean's process
def test_a_flat_statement_past_the_limit_is_refused_by_the_embedded_lean_with_it_not_a_recursion_error() -> None:
    started, compiled, conjunction, after = _session([
        ("goal.start", {"expr": SHORTER_SUM}), ("frontend.process", _sorry_file(SHORTER_SUM)),
        ("goal.start", {"expr": FLAT_AND}), ("goal.start", {"expr": "1 + 1 = 2"})])
    assert started == {"error": "elab", "desc": refusal(6_001)}
    assert conjunction == {"error": "elab", "desc": refusal(6_001)}
    # The start burnqed sends: minilean's own message on the declaration, not the fallback's answer.
    (unit,) = compiled["units"]
    assert [(m["severity"], m["data"]) for m in unit["messages"]] == [("error", refusal(6_001))]
    assert "goalStateId" not in unit
    assert after == {"stateId": 0, "root": after["root"]}  # the REPL goes on


@pytest.mark.slow  # the embedded Lean's process
def test_burnqed_starting_a_200_kb_flat_statement_gets_the_limit_as_the_reason() -> None:
    worker = LeanWorker(EMBEDDED, ready_timeout_s=60)

    async def start() -> None:
        async with worker:
            await start_theorem(worker, Theorem(name="big_sum", statement=FLAT_SUM))

    with pytest.raises(LeanError) as failed:
        asyncio.run(start())
    assert str(failed.value) == ("Lean rejected `frontend.process`: elab: the theorem does not elaborate: "
                                 f"{refusal(TERMS + 1)}")
