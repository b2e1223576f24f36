"""`EvalJobSettings`: what the eval stage takes from the configuration, built at the command layer."""

from __future__ import annotations

import logging

import pytest

from burnqed.config import load_config
from burnqed.eval.run import EvalJobSettings
from burnqed.eval.schema import config_digest
from burnqed.search.step import StepSettings


def test_eval_settings_search_at_the_largest_budget_mark_every_budget_and_always_verify(
        caplog: pytest.LogCaptureFixture) -> None:
    cfg = load_config(sets=["search.verify=false", "policy.seed=7", "search.max_nodes=50"])
    with caplog.at_level(logging.WARNING):
        settings = EvalJobSettings.from_config(cfg, [10, 30])
    assert "search.verify=false is ignored here" in caplog.text
    engine = settings.job.engine
    assert isinstance(engine, StepSettings)
    assert (engine.max_nodes, engine.marks, engine.verify) == (30, (10, 30), True)
    assert settings.budgets == (10, 30) and settings.seed == 7 and settings.backend == cfg.policy.backend
    assert settings.config_digest == config_digest(cfg)  # the whole configuration, as results always recorded


def test_eval_settings_refuse_budgets_out_of_order() -> None:
    with pytest.raises(ValueError, match="unique and ascending"):
        EvalJobSettings.from_config(load_config(), [30, 10])
