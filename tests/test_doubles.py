"""Every double in tests/doubles/ is listed in that package's docstring and says where it is more lenient than the
peer it stands in for."""

from __future__ import annotations

import ast
from pathlib import Path

import tests.doubles

DOUBLES = Path(tests.doubles.__file__).parent
NOT_A_DOUBLE = {"json_http.py", "run_lean_double.py"}  # the HTTP doubles' transport; the Pantograph double's start


def test_every_double_is_listed_and_states_its_leniency() -> None:
    listing = tests.doubles.__doc__ or ""
    modules = sorted(p for p in DOUBLES.glob("*.py") if p.name != "__init__.py")
    assert len(modules) >= 10
    for path in modules:
        assert f"`{path.name}`" in listing, f"{path.name} is missing from tests/doubles/__init__.py"
        if path.name in NOT_A_DOUBLE:
            continue
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        assert "lenient" in doc.lower(), f"{path.name}'s docstring does not say where it is more lenient"
    listed = {line.split("`")[1] for line in listing.splitlines() if line.startswith("- `")}
    assert listed == {p.name for p in modules}, listed ^ {p.name for p in modules}


def test_the_strict_pantograph_double_splits_commands_where_lean_does_at_any_column() -> None:
    """Hand-written unit boundaries (UTF-8 bytes) of the double's `frontend.process`, so that a bug in its reader (or in
    leankit's, which the product pins the shape with) is not mirrored silently: the issue-67 example is FOUR units."""
    import asyncio

    from burnqed.lean.client import LeanWorker
    from tests.conftest import double_argv

    example = ("abbrev putnam_mock_a_solution : ℕ := 1\n"  # 38 characters, 40 bytes, then the line break
               "  instance(priority:=high)evil:HAdd ℕ ℕ ℕ:=⟨fun a b=>a*b⟩\n\n"  # from byte 43: 65 bytes, 2 breaks
               "theorem putnam_mock_a : 1 + 1 = putnam_mock_a_solution := by\n  decide\n\n"  # from byte 110: 60+1+8+2
               "#print axioms putnam_mock_a\n")  # from byte 181: 28
    same_line = "abbrev s : ℕ := 2 open Real\ntheorem t : s = 2 := by\n  open Real in simp\n  done\n"
    escaped = "axiom«x» : False\n/-- d -/\nnoncomputable def«y» : ℕ := 1\nattribute [instance] foo\n"

    async def run() -> list[list[tuple[int, int]]]:
        async with LeanWorker(double_argv(), ready_timeout_s=10) as lean:
            return [[(unit.start, unit.end) for unit in (await lean.compile(text)).units]
                    for text in (example, same_line, escaped)]

    assert asyncio.run(run()) == [
        [(0, 43), (43, 110), (110, 181), (181, 209)],
        # `open` after the value on its line (byte 20: `abbrev s : ℕ := 2 ` is 18 characters, 20 bytes); the tactic
        # `open Real in simp` is no command
        [(0, 20), (20, 30), (30, 81)],
        # `axiom«x»` is `axiom` and the name `x` (`«`, `»`: 2 bytes each); the doc comment opens the definition's unit
        # (9 + 34 bytes); `attribute [instance] foo` holds no `instance` command
        [(0, 19), (19, 62), (62, 87)],
    ]


def test_the_in_process_double_dies_as_its_process_would_and_never_hangs_the_test() -> None:
    """`DoubleServer`: a request that ends the double's process crashes the `InProcessReplay` (its states are gone, the
    next request starts another "process", as the client does); one that hangs it raises `ProcessFault`."""
    import asyncio

    import pytest

    from burnqed.errors import LeanStatesLostError
    from burnqed.lean.inprocess import InProcessReplay
    from burnqed.records.replies import TacticKind
    from tests.doubles.line_servers import DoubleServer, ProcessFault

    async def go() -> None:
        lean = InProcessReplay(DoubleServer("0.3.4"))
        state = await lean.start_goal(expr="p")
        generation = lean.generation
        crashed = await lean.tactic(state, "set_option maxRecDepth 100000 in simp")
        assert (crashed.kind, crashed.errors) == (
            TacticKind.CRASH, ("the double's process ended (<Signals.SIGABRT: 6>)",))
        assert (lean.alive, lean.generation) == (False, generation + 1)
        with pytest.raises(LeanStatesLostError):
            await lean.request("goal.tactic", {"stateId": state, "tactic": "done"}, generation=generation)
        again = await lean.start_goal(expr="p")
        assert (lean.starts, lean.respawns) == (2, 1)
        assert (await lean.tactic(again, "done")).closed_all_goals
        with pytest.raises(ProcessFault, match="never answer"):
            await lean.tactic(again, "hang")

    asyncio.run(go())
