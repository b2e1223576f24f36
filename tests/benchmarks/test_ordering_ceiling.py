"""benchmarks/ordering_ceiling.py: the hindsight table, its value function, the seam it reaches the search through,
and the report."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks import ordering_ceiling
from benchmarks.ordering_ceiling import HindsightValue, hindsight_from_rows
from burnqed.data.index import bundled_index_path
from burnqed.eval.result import load_eval_result
from burnqed.storage import Store
from burnqed.trajectory.reader import read_edges
from leankit.normal_form import state_up_to_names
from tests.processes import cli

# What the commands make of Lean's replies is the subject, not the worker's process: minilean answers in this
# process (tests/conftest.py `minilean_in_process`).
pytestmark = pytest.mark.usefixtures("minilean_in_process")

ROOT = Path(__file__).parents[2]
GOAL = "x : ℕ\nh₀ : x = 2\n⊢ x + x = 4 ∧ x = 2"
LEFT = "x : ℕ\nh₀ : x = 2\n⊢ x + x = 4"


def _row(theorem: str, node: int, parent: int, depth: int, before: str, *, closed: bool = False) -> dict[str, Any]:
    return {"theorem": theorem, "node_id": node, "parent_id": parent, "depth": depth, "state_before": before,
            "proof_complete": closed}


def test_the_table_holds_every_proof_paths_states_with_the_fewest_tactics_remaining() -> None:
    renamed = LEFT.replace("h₀", "h₁")
    rows = [
        _row("t", 1, 0, 1, GOAL),                         # constructor → LEFT (and the right conjunct)
        _row("t", 2, 1, 2, LEFT),                         # a detour from LEFT: not on a proof
        _row("t", 3, 1, 2, LEFT),                         # LEFT → the second goal
        _row("t", 4, 3, 3, "x : ℕ\nh₀ : x = 2\n⊢ x = 2", closed=True),
        _row("t", 5, 0, 1, GOAL, closed=True),            # a one-tactic proof from the root
        _row("t", 6, 2, 3, renamed, closed=False),
        _row("u", 1, 0, 1, "⊢ False"),                    # never proved: no entry
    ]
    table = hindsight_from_rows(rows)
    assert list(table) == [state_up_to_names(GOAL)]
    known = table[state_up_to_names(GOAL)]
    # The root: 3 tactics by the long proof, 1 by the short one; LEFT 2 (node 3's edge, then the closing one).
    assert known == {state_up_to_names(GOAL): 1, state_up_to_names(LEFT): 2,
                     state_up_to_names("x : ℕ\nh₀ : x = 2\n⊢ x = 2"): 1}
    assert state_up_to_names(renamed) == state_up_to_names(LEFT)  # the same state up to names is the same entry
    assert hindsight_from_rows([_row("u", 1, 0, 1, "⊢ False")]) == {}


def test_the_hindsight_value_ranks_known_path_states_first_and_leaves_unknown_theorems_to_the_log_probs() -> None:
    table = hindsight_from_rows([_row("t", 1, 0, 1, GOAL), _row("t", 2, 1, 2, LEFT, closed=True)])
    value = HindsightValue(table, off=1.0)
    renamed_goal = GOAL.replace("h₀", "h₉")
    energies = asyncio.run(value.energies(renamed_goal, [LEFT, "x : ℕ\n⊢ False", GOAL]))
    assert energies == [1.0, 3.0, 2.0]  # on the path: remaining; off it: the longest remaining (2) + off
    assert asyncio.run(value.energies("⊢ True", ["⊢ True", "⊢ False"])) == [0.0, 0.0]
    assert value.calls == 2


def test_the_report_gives_each_arms_gain_over_llm_only_at_the_largest_budget() -> None:
    def solved(at_100: int) -> dict[int, int]:
        return {10: 1, 50: at_100 - 5, 100: at_100}

    figs: list[dict[str, Any]] = [{"seed": seed, "total": 71,
                                   "solved": {"llm": solved(46), "ebm": solved(48 - seed), "oracle": solved(51 - seed),
                                              "llm sampling 7": solved(47), "ebm sampling 7": solved(46)}}
                                  for seed in (0, 1)]
    lines = [line.strip() for line in ordering_ceiling.analyse(figs, [7])]
    heading = next(i for i, line in enumerate(lines) if line.startswith("gain over LLM only at budget 100"))
    assert lines[heading + 1:] == [
        "oracle: +7.0 / +5.6   mean +6.3 ± 1.0", "ebm: +2.8 / +1.4   mean +2.1 ± 1.0",
        "ebm sampling 7: -1.4 / -1.4   mean -1.4 ± 0.0", "llm sampling 7 − llm: +1.4 / +1.4   mean +1.4 ± 0.0",
        "the value model over all 4 runs (world seed × sampling seed): mean +0.4 ± 2.1 (standard error 1.1)"]
    assert "oracle: 1 / 46 / 51" in lines and "llm: 1 / 41 / 46" in lines
    assert not any("WARNING" in line for line in lines)
    figs[1]["solved"]["pipeline llm"] = {10: 1, 50: 41, 100: 45}  # the pipeline's own eval of seed 1 solved one less
    warned = [line for line in ordering_ceiling.analyse(figs, [7]) if "WARNING" in line]
    assert len(warned) == 1 and "llm differs from the pipeline's eval" in warned[0]


@pytest.mark.slow
def test_the_oracle_eval_orders_the_search_by_the_table(tiny_model_dir: Path, tmp_path: Path, store: Store) -> None:
    """The seam: `--oracle-eval` runs `burnqed eval` with the table as the value model, and the energies the search
    records are the table's."""
    common = ["--budgets", "3", "--theorems", str(bundled_index_path("test")),
              "--set", f"policy.model={tiny_model_dir}", "--set", "lean.workers=2"]
    env = {**os.environ, "BURNQED_HOME": str(tmp_path / "home")}
    first = cli("eval", *common, "--trajectories-out", str(tmp_path / "a"), "--output", str(tmp_path / "a.json"),
                env=env)
    assert first.returncode == 0, first.stderr
    rows = read_edges(str(tmp_path / "a"), ["theorem", "depth", "state_before", "state_after", "outcome"],
                      store=store).to_pylist()
    opened = next(r for r in rows if r["depth"] == 1 and r["outcome"] == "ok")
    root, child = state_up_to_names(opened["state_before"]), state_up_to_names(opened["state_after"])
    table_path = tmp_path / "table.json"
    table_path.write_text(json.dumps({root: {root: 2, child: 1}}, ensure_ascii=False), encoding="utf-8")
    second = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "ordering_ceiling.py"), "--oracle-eval",
                             str(table_path), "--off", "5", "--", *common, "--ebm", str(table_path),
                             "--trajectories-out", str(tmp_path / "b"), "--output", str(tmp_path / "b.json")],
                            capture_output=True, text=True, env=env, timeout=300, check=False)
    assert second.returncode == 0, second.stderr
    assert load_eval_result(tmp_path / "b.json", store=store).ebm == str(table_path)
    scored = [r for r in read_edges(str(tmp_path / "b"), ["theorem", "state_before", "state_after", "energy"],
                                    store=store).to_pylist() if r["energy"] is not None]
    assert scored  # the value was asked
    for r in scored:
        if r["theorem"] != opened["theorem"]:
            assert r["energy"] == 0.0, r  # no known proof: every state 0
        elif state_up_to_names(r["state_after"]) == child:
            assert r["energy"] == 1.0, r
        else:
            assert r["energy"] == 7.0, r  # off the path: the longest remaining (2) + off (5)
    assert any(r["theorem"] == opened["theorem"] and r["energy"] == 1.0 for r in scored)
