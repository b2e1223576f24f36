"""A sketch subgoal's budget is decided in one place (`search.sketch_settings.subgoal_budget`): the stage's settings
carry the share of the theorem's budget, step's expansions or hybrid's rounds, with repair off."""

from __future__ import annotations

import typing

import pytest

from burnqed.config import PolicyConfig, SearchConfig
from burnqed.search.hybrid_settings import HybridSettings
from burnqed.search.modes import SUBGOAL_MODES
from burnqed.search.repair import RepairSettings
from burnqed.search.sketch_settings import UNBOUNDED_PROOFS, SketchSettings, subgoal_budget
from burnqed.search.step import StepSettings
from burnqed.stages.search import settings_from_config


def sketch_settings(**search: object) -> SketchSettings:
    made = settings_from_config(SearchConfig(mode="sketch", **search), PolicyConfig())
    assert isinstance(made, SketchSettings)
    return made


def test_a_step_subgoal_gets_its_share_of_expansions_and_keeps_no_feedback() -> None:
    made = sketch_settings(max_nodes=40, sketch_subgoal_share=0.3, repair_rounds=2)
    assert isinstance(made.subgoal, StepSettings)
    assert (made.share, made.subgoal.max_nodes, made.subgoal.feedback_tokens) == (12, 12, None)


@pytest.mark.parametrize(("budget", "share"), [(None, 10), (8, 2), (2, 1)])
def test_a_hybrid_subgoal_gets_its_share_of_rounds_and_no_repair(budget: int | None, share: int) -> None:
    made = settings_from_config(SearchConfig(mode="sketch", max_nodes=40, sketch_subgoal_share=0.25,
                                             sketch_subgoal_mode="hybrid", repair_rounds=2), PolicyConfig(), budget)
    assert isinstance(made, SketchSettings) and isinstance(made.subgoal, HybridSettings)
    assert (made.max_nodes, made.subgoal.max_rounds, made.subgoal.max_proofs, made.subgoal.repair) == (
        budget or 40, share, UNBOUNDED_PROOFS, RepairSettings())


def test_subgoal_budget_sets_only_the_budget_and_repair() -> None:
    step = StepSettings(max_nodes=300, feedback_tokens=64, timeout_s=9.0)
    assert subgoal_budget(step, 5) == StepSettings(max_nodes=5, feedback_tokens=None, timeout_s=9.0)
    hybrid = HybridSettings(max_rounds=30, max_proofs=64, repair=RepairSettings(rounds=3), timeout_s=9.0)
    assert subgoal_budget(hybrid, 4) == HybridSettings(max_rounds=4, max_proofs=UNBOUNDED_PROOFS, timeout_s=9.0)


def test_search_sketch_subgoal_mode_names_the_modes_that_search_subgoals() -> None:
    """The config's choices and the registry's modes with a subgoal search (`Mode.as_subgoal`) are one set: a mode
    given one is a choice to add to the config, and a choice no mode builds is refused by this."""
    choices = typing.get_args(SearchConfig.model_fields["sketch_subgoal_mode"].annotation)
    assert set(choices) == set(SUBGOAL_MODES) == {"step", "hybrid"}
