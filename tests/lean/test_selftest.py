"""`burnqed lean selftest` as a user runs it: against the embedded defaults' Lean (minilean, with the replay
server as its fallback for π and n !) and the strict Pantograph doubles it passes; against a REPL that
mis-scopes it fails, naming the item. It names the triple it met (Pantograph, Lean, Mathlib), each part with where
it was learned, and fails where the image declares another."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from burnqed.cluster.images import lean_triples
from burnqed.lean.comparator import ComparatorSettings
from burnqed.lean.selftest import (
    FACTORIAL_PROOF,
    PI_PROOF,
    SelftestReport,
    TripleSources,
    comparator_items,
    name_triple,
)
from leankit.version import PantographVersion
from tests.conftest import double_argv
from tests.processes import cli

# The double has no Lean: the selftest's two proofs are the tactics it is told close a goal (their scoped names
# still have to resolve in the REPL's scope, as in Lean).
CLOSES = ("--closes", PI_PROOF, "--closes", FACTORIAL_PROOF)


def selftest(*sets: str, image_triple: str | None = None) -> tuple[int, str, str]:
    env = {"BURNQED_LEAN_TRIPLE": image_triple, "COLUMNS": "1000"} if image_triple else None
    result = cli("lean", "selftest", *(arg for s in sets for arg in ("--set", s)), env=env)
    return result.returncode, result.stdout, result.stderr


def fake_lean(folder: Path, version: str) -> str:
    """A `lean` on the workers' PATH printing Lean's version line; the `lean.env` setting that puts it there."""
    folder.mkdir(exist_ok=True)
    lean = folder / "lean"
    lean.write_text(f"#!/bin/sh\necho 'Lean (version {version}, x86_64-unknown-linux-gnu, commit 5e932f97dd25, "
                    "Release)'\n")
    lean.chmod(0o755)
    return "lean.env=" + json.dumps({"PATH": f"{folder}:{os.environ['PATH']}"})


def lean_command(*flags: str) -> str:
    return "lean.command=" + json.dumps(double_argv(*flags))


@pytest.mark.slow
def test_the_embedded_default_lean_conforms() -> None:
    code, out, err = selftest()
    assert code == 0, (out, err)
    assert "all 8 items conform" in out and "FAIL" not in out


@pytest.mark.slow
@pytest.mark.parametrize("version", ["0.3.16", "0.3.4"])
def test_the_strict_double_conforms(version: str) -> None:
    code, out, err = selftest(lean_command("--pantograph-version", version, *CLOSES))
    assert code == 0, (out, err)
    assert f"Pantograph {version}" in out and "all 8 items conform" in out


@pytest.mark.slow
def test_a_repl_that_mis_scopes_fails_and_the_item_is_named() -> None:
    code, out, err = selftest(lean_command("--pantograph-version", "0.3.16", "--mis-scope", *CLOSES))
    assert code == 1
    # The starts carry their header in their own text and still work; the tactics run in the REPL's scope, which
    # never got `open Real Nat`.
    assert err.strip() == ("lean selftest: 2 of 8 items do not conform: prove it with `exact pi_pos` and compile, "
                           "prove it with `exact factorial_pos n` and compile")
    assert "unknown identifier" in out


@pytest.mark.slow
def test_a_tactic_guard_that_lets_an_exploit_through_fails_its_item() -> None:
    code, _, err = selftest(lean_command("--pantograph-version", "0.3.16", *CLOSES), 'lean.deny=["\\\\bsorry\\\\b"]')
    assert code == 1
    assert err.strip() == "lean selftest: 1 of 8 items do not conform: known exploits refused by the tactic guard"


TRIPLES = lean_triples()


def sources(image_triple: str | None = None, via: str = "`repl --version`") -> TripleSources:
    return TripleSources(version_source=via, image_triple=image_triple, triples=TRIPLES)


def test_the_triple_is_named_with_where_each_part_was_learned() -> None:
    ok, detail, named = name_triple(PantographVersion.parse("0.3.15"), sources("lean-4.29"), "4.29.1", "")
    assert ok and named == "Pantograph 0.3.15, Lean 4.29.1, Mathlib v4.29.1"
    assert detail == ("Pantograph 0.3.15 (`repl --version`); Lean 4.29.1 (`lean --version`); Mathlib v4.29.1 "
                      "(declared by the image's triple lean-4.29)")
    # a backport build names its Lean itself; `lean --version` may be missing there
    ok, detail, named = name_triple(PantographVersion.parse("0.3.2/v4.9.0"), sources("lean-4.9"), None, "no lean")
    assert ok and named == "Pantograph 0.3.2/v4.9.0, Lean 4.9.0, Mathlib v4.9.0"
    assert detail.startswith("Pantograph 0.3.2/v4.9.0 (`repl --version`); Lean 4.9.0 (the version line); ")
    # a version line given in the configuration is not the REPL's word: its Lean is not taken from it
    configured = TripleSources(version_source="lean.pantograph_version (not asked)", version_asked=False,
                               image_triple="lean-4.9", triples=TRIPLES)
    ok, detail, named = name_triple(PantographVersion.parse("0.3.2/v4.9.0"), configured, None, "no lean")
    assert not ok and named == "Pantograph 0.3.2/v4.9.0, Lean unknown, Mathlib unknown"
    assert detail.endswith("but met no Lean version (no lean)")
    # nothing declared (a user's own Lean): a Lean that cannot be learned is said so, and conforms
    ok, detail, named = name_triple(PantographVersion.parse("0.3.4"), sources(), None, "cannot run `lean`")
    assert ok and named == "Pantograph 0.3.4, Lean unknown, Mathlib unknown"
    assert detail == ("Pantograph 0.3.4 (`repl --version`); Lean not learned (cannot run `lean`); "
                      "Mathlib not declared")


@pytest.mark.parametrize(("version", "declared", "lean", "why"), [
    ("0.3.4", "lean-4.29", "4.29.1", "the image declares lean-4.29 (Pantograph 0.3.15, Lean 4.29.1, Mathlib v4.29.1), "
                                     "but Pantograph says 0.3.4 (`repl --version`)"),
    ("0.3.15", "lean-4.29", "4.21.0", "the image declares lean-4.29 (Pantograph 0.3.15, Lean 4.29.1, Mathlib "
                                      "v4.29.1), but met Lean 4.21.0 (`lean --version`)"),
    ("0.3.15", "lean-4.29", None, "the image declares lean-4.29 (Pantograph 0.3.15, Lean 4.29.1, Mathlib v4.29.1), "
                                  "but met no Lean version (no lean here)"),
    ("0.3.15", "lean-5.0", "4.29.1", "the image declares the triple 'lean-5.0', which this burnqed's "
                                     "burnqed/cluster/images.toml does not list (known: lean-4.29, lean-4.21, "
                                     "lean-4.27, lean-4.9)"),
    ("0.3.2/v4.9.0", None, "4.21.0", "the version line 0.3.2/v4.9.0 names Lean 4.9.0, `lean --version` 4.21.0"),
])
def test_a_triple_other_than_the_declared_one_fails(version: str, declared: str | None, lean: str | None,
                                                    why: str) -> None:
    ok, detail, _ = name_triple(PantographVersion.parse(version), sources(declared), lean, "no lean here")
    assert (ok, detail) == (False, why)


@pytest.mark.slow
def test_the_selftest_names_the_triple_of_the_image_it_runs_in(tmp_path: Path) -> None:
    lean_on_path = fake_lean(tmp_path / "bin", "4.29.1")
    code, out, err = selftest(lean_command("--pantograph-version", "0.3.15", *CLOSES), lean_on_path,
                              image_triple="lean-4.29")
    assert code == 0, (out, err)
    assert "burnqed lean selftest: Pantograph 0.3.15, Lean 4.29.1, Mathlib v4.29.1" in out
    assert "all 8 items conform" in out
    # the v4.9 era's backport build says its Lean in its version line: no `lean` needed
    code, out, err = selftest(lean_command("--pantograph-version", "0.3.2/v4.9.0", *CLOSES), image_triple="lean-4.9")
    assert code == 0, (out, err)
    assert "burnqed lean selftest: Pantograph 0.3.2/v4.9.0, Lean 4.9.0, Mathlib v4.9.0" in out


@pytest.mark.slow
def test_an_image_whose_lean_is_not_its_declared_triple_fails_the_item(tmp_path: Path) -> None:
    lean_on_path = fake_lean(tmp_path / "bin", "4.29.1")
    code, out, err = selftest(lean_command("--pantograph-version", "0.3.15", *CLOSES), lean_on_path,
                              image_triple="lean-4.21")
    assert code == 1
    assert err.strip() == "lean selftest: 1 of 8 items do not conform: the Lean triple met"
    assert "burnqed lean selftest: Pantograph 0.3.15, Lean 4.29.1, Mathlib unknown" in out
    assert ("the image declares lean-4.21 (Pantograph 0.3.4, Lean 4.21.0, Mathlib v4.21.0), but Pantograph says "
            "0.3.15 (`") in out


@pytest.mark.slow
def test_a_detail_with_brackets_prints_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    """What Lean said (`[propext, Quot.sound]`, `nlinarith [sq_nonneg x]`) is printed as text, never read as markup."""
    from burnqed.lean import selftest as module

    async def report(*_: object) -> module.SelftestReport:
        return module.SelftestReport(version="0.3.4", items=[
            module.Item("axioms", True, "'t' depends on axioms: [propext, Quot.sound]", 1.0)], triple="triple")

    monkeypatch.setattr(module, "run_selftest", report)
    code, out, _ = selftest()
    assert code == 0 and "'t' depends on axioms: [propext, Quot.sound]" in out


COMPARATOR = json.dumps([sys.executable, str(Path(__file__).parents[1] / "doubles" / "comparator_double.py"),
                         "--config", "{config}"])
JUDGE_ITEMS = [
    ("comparator: an honest proof accepted", "accepted"),
    ("comparator: a statement changed by a local notation refused", "refused (run): Child exited with 1"),
    ("comparator: a sorryAx refused", "refused (run): Child exited with 1"),
    ("comparator: a custom axiom refused", "refused (run): Child exited with 1"),
    ("comparator: native_decide refused", "refused (run): Child exited with 1"),
    ("comparator: debug.skipKernelTC refused", "refused (run): Child exited with 1"),
    ("comparator: a filled answer slot of the wrong type refused",
     "refused (comparison): Const does not match between challenge and target 'burnqed_judge_slot'"),
]


def test_the_comparator_section_against_the_strict_double() -> None:
    """With lean.judge = comparator: each case judged by the comparator double, which cannot build on minilean what
    lies outside its fragment (a build failure, `run`) and compares the filled slot's type."""
    report = SelftestReport(version="0.3.16")
    double = ComparatorSettings(tuple(json.loads(COMPARATOR)))
    asyncio.run(comparator_items(report, double))
    assert [(item.name, item.ok, item.detail) for item in report.items] == [
        (name, True, detail) for name, detail in JUDGE_ITEMS]


def test_a_comparator_that_accepts_everything_fails_every_refusal_item() -> None:
    report = SelftestReport(version="0.3.16")
    asyncio.run(comparator_items(report, ComparatorSettings(("echo", "Your solution is okay!"))))  # says okay to all
    assert [item.name for item in report.failed] == [name for name, _ in JUDGE_ITEMS[1:]]
    silent = SelftestReport(version="0.3.16")
    asyncio.run(comparator_items(silent, ComparatorSettings(("true",))))  # exit 0, said nothing: accepts nothing
    assert [item.name for item in silent.failed] == [JUDGE_ITEMS[0][0]]


@pytest.mark.slow
def test_lean_selftest_runs_the_comparator_section_when_it_judges() -> None:
    code, out, err = selftest(lean_command("--pantograph-version", "0.3.16", *CLOSES), "lean.judge=comparator",
                              f"lean.comparator_command={COMPARATOR}")
    assert code == 0, (out, err)
    assert "all 15 items conform" in out and "comparator: a custom axiom refused" in out
