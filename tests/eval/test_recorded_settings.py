"""What an eval's result records of its settings (`eval.result.EvalSettings`): the effective settings its engine ran
with, and every configuration key of eval's identity in its mode by value, the fields derived from the marks
(`settings_model`), so that a setting added with a mark naming eval is recorded with no list to edit."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import BaseModel, Field, create_model

from burnqed.config import Config
from burnqed.config.identity import MODES, identity_keys, neutral, searched
from burnqed.eval.result import (
    EffectiveSettings,
    EvalSettings,
    recorded_keys,
    recorded_name,
    recorded_settings,
    settings_model,
)
from burnqed.eval.run import EvalJobSettings, eval_settings


def grown(section: str, **extra: Any) -> type[BaseModel]:
    """`Config` whose `section` has one more field, `new_knob`, declared with `Field(default=3, **extra)`."""
    base = Config.model_fields[section].annotation
    assert isinstance(base, type) and issubclass(base, BaseModel)
    section_model = create_model(f"Grown{base.__name__}", __base__=base, new_knob=(int, Field(default=3, **extra)))
    fields: dict[str, Any] = {section: (section_model, Field(default_factory=section_model))}
    model: type[BaseModel] = create_model("GrownConfig", __base__=Config, **fields)
    return model


def recorded(mode: str) -> tuple[BaseModel, dict[str, object]]:
    cfg = Config.model_validate({"search": {"mode": mode}})
    job = EvalJobSettings.from_config(cfg, [10, 30])
    settings = recorded_settings(eval_settings(job.backend, job.job.engine, 4), job.identity, mode)
    return settings, job.identity


@pytest.mark.parametrize("mode", MODES)
def test_every_key_of_evals_identity_is_recorded_in_its_settings(mode: str) -> None:
    settings, identity = recorded(mode)
    unrecorded = [key for key in identity_keys(Config, "eval", mode)
                  if recorded_name(key) not in settings.model_fields_set]
    # step search revises no failed proof: its repair keys shape the trajectories it records (made_from holds them)
    assert unrecorded == (["search.repair_rounds", "search.repair_message_tokens"] if mode == "step" else [])
    derived = set(EvalSettings.model_fields) - set(EffectiveSettings.model_fields)
    for key in identity_keys(Config, "eval", mode):
        if recorded_name(key) in derived:
            assert getattr(settings, recorded_name(key)) == identity[key], key


def test_the_derived_fields_are_the_keys_of_evals_identity_the_effective_settings_lack() -> None:
    keys = recorded_keys(Config)
    assert set(EvalSettings.model_fields) == set(EffectiveSettings.model_fields) | set(keys)
    assert keys["temperature"] == "policy.temperature" and keys["planner_temperature"] == "planner.temperature"
    assert keys["revisits"] == "search.revisits" and keys["lean_deny"] == "lean.deny"
    sketch, _ = recorded("sketch")
    assert (sketch.model_dump()["planner_max_new_tokens"], sketch.model_dump()["revisits"]) == (
        Config().planner.max_new_tokens, Config().search.revisits)
    step, _ = recorded("step")
    assert step.model_dump()["planner_max_new_tokens"] is None and step.model_dump()["num_proofs"] is None


@pytest.mark.parametrize(("section", "name"), [("search", "new_knob"), ("lean", "lean_new_knob"),
                                               ("planner", "planner_new_knob")])
def test_a_setting_added_with_a_mark_naming_eval_is_recorded_and_one_outside_is_not(section: str, name: str) -> None:
    assert name in settings_model(grown(section, json_schema_extra=searched("whole"))).model_fields
    assert name not in settings_model(grown(section, json_schema_extra=neutral("a test's knob"))).model_fields
    assert name not in EvalSettings.model_fields


def test_two_keys_recorded_under_one_name_are_refused() -> None:
    base = Config.model_fields["search"].annotation
    assert isinstance(base, type) and issubclass(base, BaseModel)
    clash = create_model("ClashSearch", __base__=base, temperature=(float, Field(default=1.0,
                                                                                 json_schema_extra=searched())))
    model = create_model("ClashConfig", __base__=Config, search=(clash, Field(default_factory=clash)))
    with pytest.raises(ValueError, match=re.escape("search.temperature and policy.temperature would both be "
                                                   "recorded as 'temperature'")):
        recorded_keys(model)


def test_settings_written_before_schema_8_read_with_the_derived_fields_unset() -> None:
    old = {"backend": "local", "prompt_format": "plain-tactic", "num_candidates": 8, "temperature": 0.8,
           "top_p": 0.95, "max_new_tokens": 64, "max_nodes": 30, "timeout_s": 60.0, "verify": True,
           "stop_at_first": True, "concurrency": 4}
    settings = EvalSettings.model_validate(old)
    assert settings.model_dump(exclude_none=True) == {**old, "probe_tactics": []}
    assert all(getattr(settings, name) is None for name in set(recorded_keys(Config)) - set(
        EffectiveSettings.model_fields))
