"""A comparator without definition holes (`search.judge.without_holes`): the standalone comparator before its commit
71b52ec (Lean v4.30.0-rc2: the builds images.toml pins for the older triples) ignores `definition_names`, so every
filled answer slot it judges is refused, a false alarm. Such a judge is refused for theorems with an answer slot
before any search or judging, in one line, by eval (its judge deferred or not), the judge step and the merge
(tests/trajectory/test_judge_merge.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from burnqed.errors import ConfigError
from burnqed.lean.comparator import ComparatorSettings
from burnqed.records.theorem import TheoremIndex
from burnqed.search.judge import JudgeSettings, check_definition_holes, without_holes
from tests.conftest import double_argv
from tests.eval.test_judge import COMPARATOR, THEOREMS
from tests.eval.test_judge_step import unjudged
from tests.processes import cli

JUDGE = ("--set", "lean.judge=comparator", "--set", f"lean.comparator_command={json.dumps(COMPARATOR)}")
HOLES = ("lean.judge = 'comparator': 1 theorem(s) carry an answer slot (putnam_judged), and the comparator for Lean "
         "leanprover/lean4:v4.29.1 (the standalone build, images.toml) predates definition holes "
         "(leanprover/comparator 71b52ec, Lean v4.30.0-rc2): it ignores definition_names and refuses every filled "
         "answer slot, a false alarm; set lean.judge = 'burnqed' for them, or use a triple on Lean >= v4.30.0-rc2")


def test_a_comparator_without_definition_holes_is_refused_for_answer_slots() -> None:
    settings = JudgeSettings(comparator=ComparatorSettings(command=("comparator", "{config}")))
    assert without_holes(settings, "leanprover/lean4:v4.30.0-rc1") is not None
    assert without_holes(settings, "v4.30.0-rc2") is None and without_holes(settings, None) is None
    assert without_holes(JudgeSettings(why="lean.judge = 'burnqed'"), "v4.27.0") is None
    assert without_holes(JudgeSettings(deferred=True), "v4.27.0") is not None  # the judge step's comparator
    with pytest.raises(ConfigError) as caught:
        check_definition_holes(THEOREMS, settings, "leanprover/lean4:v4.29.1")
    assert str(caught.value) == HOLES
    check_definition_holes(THEOREMS[:2], settings, "leanprover/lean4:v4.29.1")  # no answer slot: nothing to refuse
    toolchain = JudgeSettings(comparator=settings.comparator, toolchain="leanprover/lean4:v4.29.1")
    with pytest.raises(ConfigError):  # the judge's Lake project's lean-toolchain when lean.toolchain is unset
        check_definition_holes(THEOREMS, toolchain, None)


def test_eval_and_the_judge_step_refuse_a_comparator_without_definition_holes_in_one_line(tmp_path: Path) -> None:
    index = tmp_path / "index.json"
    index.write_text(TheoremIndex(name="judge-made-up", theorems=THEOREMS).model_dump_json(), encoding="utf-8")
    sets = ("--set", f"lean.command={json.dumps(double_argv())}", *JUDGE,
            "--set", "lean.toolchain=leanprover/lean4:v4.29.1")
    for deferred in ((), ("--defer-judge",)):  # the workflows' eval defers its judge: refused all the same
        done = cli("eval", "--theorems", str(index), "--output", str(tmp_path / "e.json"), "--budgets", "1",
                   "--no-trajectories-out", *deferred, *sets)
        assert done.returncode == 2 and done.stderr.strip().splitlines()[-1] == f"error: {HOLES}", done.stderr
    pending = tmp_path / "eval.unjudged.json"
    pending.write_text(unjudged().model_dump_json(), encoding="utf-8")
    done = cli("judge", "--input", str(pending), "--theorems", str(index), "--output", str(tmp_path / "eval.json"),
               *sets)
    assert done.returncode == 2 and done.stderr.strip() == f"error: {HOLES}", done.stderr
    assert not (tmp_path / "eval.json").exists()
