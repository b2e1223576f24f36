"""Every declaration of a `.lean` benchmark is accounted for: `burnqed eval --theorems x.lean` evaluates its theorems
and its `example`s (as `FILE:LINE`, a Lean identifier) and lists each declaration it could not evaluate with its line
and reason, in the table it prints, in eval.json and in the iteration report. On the embedded Lean (minilean, the
replay server its fallback), a statement neither can start needs a real Lean: counted apart with minilean's reason,
out of every rate, neither a start error of the rates nor a search that ran out of tactics."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from burnqed.commands.edges import open_pool
from burnqed.config import PipelineConfig, load_config
from burnqed.eval.identity import EvalJobSettings
from burnqed.eval.rendering import render_eval_table
from burnqed.eval.result import EvalResult
from burnqed.eval.run import eval_job
from burnqed.layout import Layout
from burnqed.records.theorem import Theorem, TheoremIndex
from burnqed.report.build import build_report
from burnqed.report.markdown import render_markdown
from burnqed.storage import Store
from tests.data.test_theorems import FOUR
from tests.doubles.policy_double import ScriptedPolicy
from tests.minilean.test_fallback import CAST_REASON, SQRT_REASON
from tests.processes import cli

# What the commands make of Lean's replies is the subject, not the worker's process: minilean answers in this
# process (tests/conftest.py `minilean_in_process`).
pytestmark = pytest.mark.usefixtures("minilean_in_process")


@pytest.mark.slow  # one eval of three theorems on the tiny model and the embedded Lean
def test_an_example_a_broken_statement_and_two_theorems_are_all_four_accounted_for(
        tmp_path: Path, tiny_model_dir: Path, store: Store) -> None:
    (tmp_path / "x.lean").write_text(FOUR, encoding="utf-8")
    output = Layout(str(tmp_path / "runs")).eval_result(0)
    done = cli("eval", "--model", str(tiny_model_dir), "--theorems", "x.lean", "--output", output, "--budgets", "10",
               "--show-theorems", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(Path(output).read_text(encoding="utf-8"))
    # eval.json: the three it could evaluate (the example under `x.lean:8` as a Lean name), and the fourth
    assert result["schema_version"] == 12
    assert [t["name"] for t in result["per_theorem"]] == ["good_one", "x_lean_8", "good_two"]
    assert result["total"] == 3 and result["budgets"][0]["total"] == 3
    assert result["not_evaluated"] == [{
        "name": "broken", "file": "x.lean", "line": 11, "reason": "unparsable_statement",
        "detail": "no `theorem … : type` declaration found", "split": "test"}]
    # the printed table: the denominator said, the fourth listed with its line and reason
    out = done.stdout
    assert "of 4 declarations: 3 evaluated (every rate is of these), 1 not evaluated (listed below)" in out
    assert "x: 1 of 4 declarations not evaluated" in out
    row = next(line for line in out.splitlines() if "x.lean:11" in line)
    assert row.split("│")[1:5] == [" x.lean:11 ", " broken      ", " unparsable_statement ",
                                   " no `theorem … : type` declaration found "]
    assert "│ x_lean_8 " in out and "1 more of the 4 declarations not evaluated" in out
    # the report of that iteration
    report = build_report(str(tmp_path / "runs"), 0, PipelineConfig(), store=store)
    assert [(s.where, s.name, s.reason) for s in report.not_evaluated] == [
        ("x.lean:11", "broken", "unparsable_statement")]
    page = render_markdown(report)
    assert "## Declarations not evaluated in iteration 0" in page
    assert "| `x.lean:11` | broken | unparsable_statement | no `theorem … : type` declaration found |" in page


@pytest.mark.slow
def test_the_eval_on_the_embedded_lean_counts_such_statements_apart_as_needing_a_real_lean(store: Store) -> None:
    theorems = [Theorem(name=name, statement=statement) for name, statement in (
        ("cast_three", "∀ (n : ℕ) (h : n = 3), (n : ℝ) = 3"), ("sqrt_four", "Real.sqrt 4 = 2"))]
    cfg = load_config(sets=["lean.workers=1"])

    async def run() -> EvalResult:
        async with open_pool(cfg.lean) as (pool, size):
            return await eval_job(TheoremIndex(name="outside", theorems=theorems),
                                  EvalJobSettings.from_config(cfg, [5]), pass_n=1, pool=pool, pool_size=size,
                                  policy=ScriptedPolicy(lambda _: []), store=store)

    result = asyncio.run(run())
    assert (result.total, result.per_theorem, result.failure_reasons) == (0, [], {})  # no 0 % of them
    assert [(s.name, s.reason, s.detail) for s in result.not_evaluated] == [
        ("cast_three", "needs_real_lean", f"minilean cannot start it: the theorem does not elaborate: {CAST_REASON}"),
        ("sqrt_four", "needs_real_lean", f"minilean cannot start it: the theorem does not elaborate: {SQRT_REASON}")]
    row = next(line for line in render_eval_table(result).splitlines() if line.startswith("│      5 "))
    assert [cell.strip() for cell in row.split("│")[2:5]] == ["0/0", "–", "–"]  # no rate of no theorem
