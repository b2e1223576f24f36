"""`burnqed.config.identity`: every configuration field is marked (it enters identities, or says why not), a field
added without a mark is caught, and a mode's search and eval identities are what its settings read (`Mode.reads`,
recorded from its builder): a field that changes the engine's settings in a mode enters that mode's search and eval
identities (or is declared outside them), and a search field in them changes its engine's settings there."""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Iterator, Mapping
from enum import Enum
from typing import Any

import pytest
from pydantic import BaseModel, Field, ValidationError, create_model

from burnqed.config import Config, LeanConfig, PlannerConfig, PolicyConfig, SearchConfig
from burnqed.config.identity import (
    Identity,
    experiment_keys,
    fields,
    identity_keys,
    identity_values,
    mark_of,
    misplaced_roles,
    neutral,
    read_by_mode,
    recorded,
    result_keys,
    searched,
    shapes,
    unclassified,
    with_role,
)
from burnqed.records.enums import SearchMode
from burnqed.search.modes import MODES as REGISTRY
from burnqed.search.reads import recorded_reads
from burnqed.stages.search import JobSettings

SECTIONS = list(Config.model_fields)
MODES = [mode.value for mode in SearchMode]


def mode_keys(identity: str, mode: str) -> tuple[str, ...]:
    """The keys of `identity` (search or eval) in `mode`, as the stages compute them: from what the mode reads."""
    return identity_keys(Config, typing.cast("Identity", identity), REGISTRY[SearchMode(mode)].reads())


def extended(section: str, **extra: Any) -> type[BaseModel]:
    """`Config` whose `section` has one more field, `new_knob`, declared with `Field(default=3, **extra)`."""
    base = Config.model_fields[section].annotation
    assert isinstance(base, type) and issubclass(base, BaseModel)
    grown = create_model(f"Grown{base.__name__}", __base__=base, new_knob=(int, Field(default=3, **extra)))
    fields: dict[str, Any] = {section: (grown, Field(default_factory=grown))}
    model: type[BaseModel] = create_model("GrownConfig", __base__=Config, **fields)
    return model


def test_every_field_of_the_configuration_is_marked() -> None:
    assert unclassified(Config) == []
    sizes = [len(section.model_fields) for info in Config.model_fields.values()
             if isinstance(section := info.annotation, type) and issubclass(section, BaseModel)]
    assert len(sizes) == len(Config.model_fields) and len(list(fields(Config))) == sum(sizes)


@pytest.mark.parametrize("section", SECTIONS)
def test_a_field_added_to_a_section_without_a_mark_is_caught(section: str) -> None:
    assert unclassified(extended(section)) == [f"{section}.new_knob"]
    assert unclassified(extended(section, json_schema_extra=neutral("a test's knob"))) == []
    key = f"{section}.new_knob"
    marked = extended(section, json_schema_extra=read_by_mode(stages=("sft",)))
    assert unclassified(marked) == []
    assert key in identity_keys(marked, "sft")
    assert key in identity_keys(marked, "eval", {key}) and key not in identity_keys(marked, "eval", set())
    assert identity_values(marked(), "eval", {key})[key] == 3
    everywhere = extended(section, json_schema_extra=searched())
    assert key in identity_keys(everywhere, "eval", set()) and key in identity_keys(everywhere, "search", {key})


def test_every_field_of_a_split_section_has_one_of_its_roles() -> None:
    assert misplaced_roles(Config) == []
    split = {section for section, info in Config.model_fields.items() if getattr(info.annotation, "ROLES", ())}
    assert split == {"cluster", "planner"}


@pytest.mark.parametrize("section", SECTIONS)
def test_a_field_without_its_role_or_with_a_role_its_section_lacks_is_caught(section: str) -> None:
    roles = getattr(Config.model_fields[section].annotation, "ROLES", ())
    mark = neutral("a test's knob")
    assert misplaced_roles(extended(section, json_schema_extra=mark)) == ([f"{section}.new_knob"] if roles else [])
    assert misplaced_roles(extended(section, json_schema_extra=with_role(mark, "elsewhere"))) == [
        f"{section}.new_knob"]
    for role in roles:
        assert misplaced_roles(extended(section, json_schema_extra=with_role(mark, role))) == []


def test_a_mark_names_known_identities_and_modes_and_a_field_outside_says_why() -> None:
    with pytest.raises(ValueError, match="at least one identity"):
        shapes()
    with pytest.raises(ValueError, match="'sfft'"):
        shapes("sfft")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'sfft'"):
        read_by_mode(stages=("sfft",))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="says why"):
        neutral(" ")
    with pytest.raises(ValueError, match="says why"):
        recorded("")
    [(_, info)] = [(key, info) for key, info in fields(Config) if key == "lean.workers"]
    mark = mark_of(info)
    assert mark is not None and mark.enters == () and mark.why.startswith("result-neutral: ")


def test_a_run_roots_experiment_is_its_data_and_its_measurement_read_from_the_marks() -> None:
    """`experiment_keys`: what enters or reaches the prepared data's or the evals' identity (the base model and the
    benchmark through the arguments the plan builds); not how an iteration trains, what the report judges, or where
    it runs (docs/pipeline.md, "One root, one experiment")."""
    keys = experiment_keys(Config)
    assert {"sft.base_model", "policy.model", "pipeline.benchmark", "data.world_seed", "data.sources",
            "pipeline.eval_budgets", "pipeline.eval_pass_n", "pipeline.eval_modes", "search.mode",
            "policy.temperature", "lean.command"} <= set(keys)
    assert not {"sft.learning_rate", "ebm.steps", "rl.enabled", "pipeline.start", "pipeline.search_shards",
                "pipeline.gate_min_rate", "pipeline.gate_min_gain", "lean.workers", "storage.root"} & set(keys)
    assert set(keys) <= set(result_keys(Config)) and "lean.workers" not in result_keys(Config)
    with pytest.raises(ValueError, match="'sfft'"):
        recorded("its --x", reaches=("sfft",))  # type: ignore[arg-type]


def test_the_identities_hold_the_settings_that_were_missing() -> None:
    """The settings issue 59 found outside eval's identity, each in the modes that read it."""
    for key in ("search.revisits", "search.revisit_penalty", "search.revisit_temperature", "search.value_reference",
                "search.probe_logprob"):
        assert key in mode_keys("eval", "step") and key not in mode_keys("eval", "hybrid"), key
    for key in ("search.exploration", "search.prior_weight", "search.goal_penalty", "search.max_rounds"):
        assert key in mode_keys("eval", "hybrid") and key not in mode_keys("eval", "step"), key
    for key in ("policy.declaration_form", "lean.deny"):
        assert all(key in mode_keys("eval", mode) for mode in MODES), key
    assert "search.value_weight" in mode_keys("eval", "hybrid")
    # eval scores its own budgets and compiles every proof: the search budget and verify are search's alone
    assert {"search.max_nodes", "search.verify"} <= set(mode_keys("search", "step"))
    assert not {"search.max_nodes", "search.verify", "search.max_proofs"} & set(mode_keys("eval", "step"))


# ------------------------------------------------------------------------ what each mode's engine reads


def _literals(annotation: Any) -> list[Any]:
    if typing.get_origin(annotation) is typing.Literal:
        return list(typing.get_args(annotation))
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return list(annotation)
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return [value for arg in typing.get_args(annotation) for value in _literals(arg)]
    return []


def variants(value: Any, annotation: Any) -> Iterator[Any]:
    """Other values of a field whose value is `value` (some may not validate)."""
    yield from (choice for choice in _literals(annotation) if choice != value)
    if isinstance(value, bool):
        yield not value
    elif isinstance(value, int | float):
        yield from (value + 1, value - 1, value + 2, value + 0.25, value / 2)
    elif isinstance(value, list):
        yield [*value, "norm_num"]
        yield value[:-1]
    elif isinstance(value, str):
        yield value + "x"
    elif value is None:
        yield from (2, 0.5, "x")


def _guard_free(job: JobSettings) -> tuple[Any, ...]:
    """`job` as comparable values (the guard's patterns, not its compiled objects)."""
    return (job.mode, job.engine, tuple(p.pattern for p in job.guard.patterns), job.guard.max_chars,
            job.guard.max_text_chars, job.concurrency, job.theorems_per_worker, job.checkpoint_every)


def job(sections: Mapping[str, BaseModel], identity: str) -> tuple[Any, ...]:
    search, policy, lean = sections["search"], sections["policy"], sections["lean"]
    assert isinstance(search, SearchConfig) and isinstance(policy, PolicyConfig) and isinstance(lean, LeanConfig)
    if identity == "eval":  # as EvalJobSettings builds it: its largest budget, usage at every budget, verified
        return _guard_free(JobSettings.from_config(search, policy, lean, 5, marks=(2, 5), verify=True))
    return _guard_free(JobSettings.from_config(search, policy, lean))


# The third base reaches what sketch mode reads when its subgoals are searched in hybrid mode (other modes: the first).
BASES: tuple[dict[str, dict[str, Any]], ...] = (
    {}, {"policy": {"seed": None, "prompt_format": "deepseek-tactic", "cot": True}, "search": {"repair_rounds": 2}},
    {"search": {"sketch_subgoal_mode": "hybrid"}})


@functools.cache
def engine_reads(mode: str, identity: str) -> frozenset[str]:
    """The search, policy and lean keys whose change changes the engine settings of `mode` (as `identity` builds
    them) from at least one of `BASES`."""
    changed = set()
    for base in BASES:
        given = {**base, "search": {**base.get("search", {}), "mode": mode}}
        sections: dict[str, BaseModel] = {
            name: model.model_validate(given.get(name, {}))
            for name, model in (("search", SearchConfig), ("policy", PolicyConfig), ("lean", LeanConfig))}
        before = job(sections, identity)
        for name, section in sections.items():
            for key, info in type(section).model_fields.items():
                for value in variants(getattr(section, key), info.annotation):
                    try:
                        other = type(section).model_validate({**section.model_dump(), key: value})
                    except ValidationError:
                        continue
                    if job({**sections, name: other}, identity) != before:
                        changed.add(f"{name}.{key}")
                        break
    return frozenset(changed)


@pytest.mark.parametrize("identity", ["search", "eval"])
@pytest.mark.parametrize("mode", MODES)
def test_the_search_marks_say_what_each_mode_reads(mode: str, identity: str) -> None:
    reads = engine_reads(mode, identity)
    assert {"search.revisits", "search.exploration", "policy.declaration_form"} & reads  # the probe sees them
    marks = {key: mark_of(info) for key, info in fields(Config) if key.split(".")[0] in ("search", "policy", "lean")}
    entered = set(mode_keys(identity, mode))
    outside = {key for key, mark in marks.items() if mark is not None and not mark.enters}  # neutral or recorded
    assert sorted(reads - entered - outside) == []  # read but in neither: a forgotten knob
    search_marked = {key for key in entered if key.startswith("search.")}
    assert sorted(search_marked - reads) == []  # marked for a mode whose engine does not read it


# ------------------------------------------------------------------------ what each mode reads, recorded


# What each mode's settings read of the keys marked `read_by_mode`, as the marks named it by hand before the reads
# were recorded (commit c88b1195): every existing run's search and eval identity stays what it was.
READ_BY_MODE = {
    "step": {"policy.num_candidates", "policy.max_new_tokens", "search.max_nodes", "search.max_depth", "search.alpha",
             "search.expand_batch", "search.revisits", "search.revisit_penalty", "search.revisit_temperature",
             "search.probe_tactics", "search.probe_logprob", "search.verify", "search.value_weight",
             "search.value_ramp_depth", "search.value_reference", "search.repair_rounds",
             "search.repair_message_tokens"},
    "whole": {"search.max_proofs", "search.num_proofs", "search.proof_max_tokens", "search.repair_rounds",
              "search.repair_message_tokens", "search.repair_cut_at_error"},
    "hybrid": {"search.max_depth", "search.verify", "search.value_weight", "search.value_ramp_depth",
               "search.max_proofs", "search.num_proofs", "search.min_proofs", "search.proof_max_tokens",
               "search.proof_min_tokens", "search.decay_depth", "search.max_rounds", "search.exploration",
               "search.prior_weight", "search.goal_penalty", "search.repair_rounds", "search.repair_message_tokens",
               "search.repair_cut_at_error"},
    # its subgoals' step or hybrid settings but their budget and repair (`subgoal_budget`); the planner's
    "sketch": {"policy.num_candidates", "policy.max_new_tokens", "search.max_nodes", "search.max_depth",
               "search.alpha", "search.expand_batch", "search.revisits", "search.revisit_penalty",
               "search.revisit_temperature", "search.probe_tactics", "search.probe_logprob", "search.value_weight",
               "search.value_ramp_depth", "search.value_reference", "search.num_proofs", "search.min_proofs",
               "search.proof_max_tokens", "search.proof_min_tokens", "search.decay_depth", "search.exploration",
               "search.prior_weight", "search.goal_penalty", "search.sketch_rounds", "search.sketch_subgoal_mode",
               "search.sketch_subgoal_share", "search.sketch_depth", "search.sketch_plans",
               "search.subgoal_cache_replays", "planner.backend", "planner.model", "planner.prompt_format",
               "planner.temperature", "planner.top_p", "planner.max_new_tokens", "planner.constrained",
               "planner.max_holes", "planner.balanced"},
}


@pytest.mark.parametrize("mode", sorted(READ_BY_MODE))
def test_the_existing_modes_read_what_their_marks_named(mode: str) -> None:
    by_mode = {key for key, info in fields(Config) if (mark := mark_of(info)) is not None and mark.by_mode}
    assert REGISTRY[SearchMode(mode)].reads() & by_mode == READ_BY_MODE[mode]
    assert len(mode_keys("search", mode)) == {"step": 38, "whole": 27, "hybrid": 38, "sketch": 58}[mode]
    assert len(mode_keys("eval", mode)) == {"step": 36, "whole": 26, "hybrid": 36, "sketch": 57}[mode]


def test_a_read_behind_a_branch_is_recorded_by_trying_the_values_read() -> None:
    """`recorded_reads` sets each field read to its type's other values: a read that only one of them reaches is
    found (an integer above 0, another literal, a flag on), and a field never read is not."""
    def build(search: SearchConfig, policy: PolicyConfig, planner: PlannerConfig) -> None:
        if search.repair_rounds > 0 and search.sketch_subgoal_mode == "hybrid":
            _ = search.decay_depth
        if planner.constrained:
            _ = planner.max_holes
        _ = policy.top_p

    reads = recorded_reads(build, SearchConfig(sketch_subgoal_mode="hybrid"), PolicyConfig(), PlannerConfig())
    assert reads == {"search.repair_rounds", "search.sketch_subgoal_mode", "search.decay_depth",
                     "planner.constrained", "planner.max_holes", "policy.top_p"}
    # one field at a time: a read behind two values the base has neither of is not reached
    assert recorded_reads(build, SearchConfig(), PolicyConfig(), PlannerConfig()) == {
        "search.repair_rounds", "search.sketch_subgoal_mode", "planner.constrained", "planner.max_holes",
        "policy.top_p"}
