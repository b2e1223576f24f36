"""What an eval's result records of its settings (`eval.settings.EvalSettings`): the effective settings its engine ran
with, a fixed set of fields, and every configuration key of eval's identity in its mode by value, in one `section.key`
map (`config`), so that a setting added with a mark naming eval is recorded with no list to edit, and a knob renamed
or removed changes no field of the saved record."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from pydantic import BaseModel, Field, create_model

from burnqed.config import Config
from burnqed.config.identity import identity_keys, identity_values, neutral, searched
from burnqed.eval.identity import EvalJobSettings
from burnqed.eval.result import EvalResult
from burnqed.eval.run import eval_settings
from burnqed.eval.settings import ENGINE_FIELDS, EvalSettings, recorded_settings
from burnqed.records.enums import SearchMode
from burnqed.search.modes import MODES

WHOLE = MODES[SearchMode.WHOLE].reads()


def grown(section: str, **extra: Any) -> type[BaseModel]:
    """`Config` whose `section` has one more field, `new_knob`, declared with `Field(default=3, **extra)`."""
    base = Config.model_fields[section].annotation
    assert isinstance(base, type) and issubclass(base, BaseModel)
    section_model = create_model(f"Grown{base.__name__}", __base__=base, new_knob=(int, Field(default=3, **extra)))
    fields: dict[str, Any] = {section: (section_model, Field(default_factory=section_model))}
    model: type[BaseModel] = create_model("GrownConfig", __base__=Config, **fields)
    return model


def recorded(mode: str) -> tuple[EvalSettings, dict[str, object]]:
    cfg = Config.model_validate({"search": {"mode": mode}})
    job = EvalJobSettings.from_config(cfg, [10, 30])
    return recorded_settings(eval_settings(job.backend, job.job.engine, 4), job.identity), job.identity


@pytest.mark.parametrize("mode", [mode.value for mode in SearchMode])
def test_every_key_of_evals_identity_is_recorded_by_value_in_the_settings_map(mode: str) -> None:
    settings, identity = recorded(mode)
    assert settings.config == identity
    assert set(settings.config) == set(identity_keys(Config, "eval", MODES[SearchMode(mode)].reads()))
    # the effective settings are the engine's: one without repair settings (step, sketch) revises no failed proof
    engine = MODES[SearchMode(mode)].settings_type
    assert (settings.repair_rounds is None) == ("repair" not in {field.name for field in dataclasses.fields(engine)})
    assert settings.timeout_s == Config().search.timeout_s


def test_the_effective_settings_are_a_fixed_set_of_fields_beside_the_map() -> None:
    assert set(EvalSettings.model_fields) == {*ENGINE_FIELDS, "config"}
    assert len(ENGINE_FIELDS) == 31
    sketch, _ = recorded("sketch")
    assert (sketch.config["planner.max_new_tokens"], sketch.config["search.revisits"]) == (
        Config().planner.max_new_tokens, Config().search.revisits)
    step, _ = recorded("step")
    assert "planner.max_new_tokens" not in step.config and "search.num_proofs" not in step.config


@pytest.mark.parametrize("section", ["search", "lean", "planner"])
def test_a_setting_added_with_a_mark_naming_eval_is_recorded_and_one_outside_is_not(section: str) -> None:
    key = f"{section}.new_knob"
    marked = identity_values(grown(section, json_schema_extra=searched())(), "eval", WHOLE)
    assert recorded_settings(recorded("whole")[0], marked).config[key] == 3
    outside = identity_values(grown(section, json_schema_extra=neutral("a test's knob"))(), "eval", WHOLE)
    assert key not in recorded_settings(recorded("whole")[0], outside).config
    assert "new_knob" not in EvalSettings.model_fields  # the saved record's model is not derived from the config


def test_settings_written_before_schema_8_read_with_an_empty_map() -> None:
    old = {"backend": "local", "prompt_format": "plain-tactic", "num_candidates": 8, "temperature": 0.8,
           "top_p": 0.95, "max_new_tokens": 64, "max_nodes": 30, "timeout_s": 60.0, "verify": True,
           "stop_at_first": True, "concurrency": 4}
    settings = EvalSettings.model_validate(old)
    assert settings.model_dump(exclude_none=True) == {**old, "probe_tactics": [], "config": {}}


def test_a_knob_removed_from_the_configuration_leaves_every_saved_result_readable() -> None:
    """eval.json no longer has a field per key: a key today's `Config` does not have reads, in the map."""
    settings, _ = recorded("step")
    written = settings.model_dump(mode="json")
    written["config"]["search.a_knob_long_removed"] = 7
    assert EvalSettings.model_validate(written).config["search.a_knob_long_removed"] == 7
    assert "search.a_knob_long_removed" not in Config.model_fields["search"].annotation.model_fields  # type: ignore[union-attr]
    assert EvalResult.model_fields["settings"].annotation == EvalSettings | None
