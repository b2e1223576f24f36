"""Eval results of every schema version read as the current record (`eval.migrations`, docs/search.md "Saved
versions"): the files of tests/fixtures/eval-results/, each written by the burnqed of its version, load, compare
for reuse as the burnqed of schema 9 compared them, and a configuration key renamed since a result was written is
a migration: the result still reads and is reused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from burnqed.errors import InputError
from burnqed.eval.migrations import EVAL_MIGRATIONS, V9_ENGINE_FIELDS, V9_RECORDED_KEYS, renamed
from burnqed.eval.result import SCHEMA_VERSION, load_eval_result, write_eval_result
from burnqed.eval.settings import ENGINE_FIELDS
from burnqed.records.versions import Migrations, added, rename_keys
from burnqed.runner.reuse import finished_eval, inputs_from_settings
from burnqed.storage import Store

FIXTURES = Path(__file__).parent.parent / "fixtures" / "eval-results"
VERSIONS = range(1, SCHEMA_VERSION + 1)


def fixture(version: int) -> Path:
    return FIXTURES / f"v{version}.json"


def test_a_file_of_every_version_is_kept_and_records_its_version() -> None:
    assert SCHEMA_VERSION == 12
    assert [json.loads(fixture(v).read_text(encoding="utf-8"))["schema_version"] for v in VERSIONS] == list(VERSIONS)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_file_of_every_version_reads_as_the_current_record(version: int, store: Store) -> None:
    result = load_eval_result(fixture(version), store=store)
    assert result.schema_version == SCHEMA_VERSION
    assert (result.benchmark, result.total, result.pass_n, result.cumulative_solved, result.mode.value,
            result.budget_unit) == ("embedded-test", 2, 2, 1, "step", "expansions")
    assert [(row.budget, row.solved, row.avg_nodes) for row in result.budgets] == [(4, 1, 3.5), (10, 1, 6.5)]
    assert [(t.name, t.proved, t.budget_at_proof) for t in result.per_theorem] == [
        ("world_add_zero", True, 3), ("hand_mul_comm", False, None)]
    # what each version added reads as recorded from it on, as "not recorded" before
    first = result.per_theorem[0]
    assert (result.budgets[0].tokens, first.lean_calls) == ((480, 8) if version >= 2 else (None, None))
    assert (result.wall_s, first.edges) == ((12.5, 6) if version >= 3 else (None, None))
    assert (result.burnqed_version, first.source) == (("0.1.0", "burnqed-world") if version >= 4 else (None, None))
    assert (first.curve is not None, result.has_curves) == ((True, True) if version >= 5 else (False, False))
    assert (first.task, [row.group for row in result.tasks][:1]) == (
        ("no answer", ["no answer"]) if version >= 6 else (None, []))
    assert (result.made_from is not None) == (version >= 8)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_result_read_from_an_earlier_version_and_written_again_reads_the_same(version: int, tmp_path: Path,
                                                                                store: Store) -> None:
    result = load_eval_result(fixture(version), store=store)
    write_eval_result(result, tmp_path / "again.json", store=store)
    assert json.loads((tmp_path / "again.json").read_text(encoding="utf-8"))["schema_version"] == SCHEMA_VERSION
    assert load_eval_result(tmp_path / "again.json", store=store) == result


def test_the_settings_of_schema_9_are_the_effective_ones_and_the_keys_in_their_map(store: Store) -> None:
    settings = load_eval_result(fixture(9), store=store).settings
    assert settings is not None
    assert (settings.temperature, settings.timeout_s, settings.probe_tactics, settings.concurrency) == (
        0.8, 60.0, ["rfl", "simp"], 4)
    assert settings.config == {
        "policy.backend": "local", "policy.prompt_format": "plain-tactic", "policy.num_candidates": 4,
        "policy.temperature": 0.8, "policy.top_p": 0.95, "policy.top_k": -1, "policy.min_p": 0.0,
        "policy.repetition_penalty": 1.0, "policy.frequency_penalty": 0.0, "policy.presence_penalty": 0.0,
        "policy.max_new_tokens": 64, "search.max_depth": 32, "search.timeout_s": 60.0, "search.alpha": 0.5,
        "search.expand_batch": 4, "search.probe_tactics": ["rfl", "simp"], "search.stop_at_first": True,
        "search.value_weight": 0.5, "search.value_ramp_depth": 0, "lean.tactic_timeout_s": 30.0,
        "lean.deny": ["sorry", "admit"], "lean.max_tactic_chars": 2000, "policy.seed": 0, "search.mode": "step",
        "policy.declaration_form": "theorem", "policy.cot": False, "search.revisits": 3,
        "search.revisit_penalty": 0.1, "search.revisit_temperature": 1.1, "search.probe_logprob": -1.0,
        "search.value_reference": "parent", "search.exploration": 0.0, "search.goal_penalty": 0.0,
        "search.decay_depth": 0, "search.prior_weight": 1.0}
    assert load_eval_result(fixture(7), store=store).settings.config["policy.temperature"] == 0.8  # type: ignore[union-attr]


@pytest.mark.parametrize("version", range(1, 10))
def test_an_earlier_file_without_made_from_compares_as_the_burnqed_of_schema_9_compared_it(version: int,
                                                                                          store: Store) -> None:
    pinned = json.loads((FIXTURES / "compared-at-schema-9.json").read_text(encoding="utf-8"))["compared"]
    result = load_eval_result(fixture(version), store=store).model_copy(update={"made_from": None})
    compared = inputs_from_settings(result).settings
    assert list(compared.items()) == list(pinned[str(version)].items())


def test_a_file_that_records_made_from_is_compared_on_it(store: Store) -> None:
    raw = json.loads(fixture(9).read_text(encoding="utf-8"))
    found = finished_eval(str(fixture(9)), load_eval_result(fixture(9), store=store))
    assert not found.partial and found.made_from is not None
    assert found.made_from.settings == raw["made_from"]["settings"]


def test_the_effective_settings_are_those_schema_9_recorded() -> None:
    assert ENGINE_FIELDS == V9_ENGINE_FIELDS
    assert set(V9_RECORDED_KEYS.values()) >= {"policy.temperature", "planner.temperature", "search.revisits",
                                               "lean.deny"}


def test_a_file_of_a_later_version_is_refused_naming_its_version(tmp_path: Path, store: Store) -> None:
    path = tmp_path / "future.json"
    path.write_text(json.dumps({**json.loads(fixture(SCHEMA_VERSION).read_text(encoding="utf-8")),
                                "schema_version": SCHEMA_VERSION + 1}), encoding="utf-8")
    with pytest.raises(InputError, match=rf"future\.json: schema_version.*version {SCHEMA_VERSION + 1} is newer "
                                         rf"than this burnqed reads \(up to {SCHEMA_VERSION}\)"):
        load_eval_result(path, store=store)


def test_the_migrations_run_from_version_1_without_a_gap() -> None:
    assert sorted(EVAL_MIGRATIONS.steps) == list(range(1, SCHEMA_VERSION))
    with pytest.raises(ValueError, match=r"must run from version 1 without a gap, not \[1, 3\]"):
        Migrations("test document", {1: added(), 3: added()})


def test_a_step_fills_what_its_version_added_and_renames_keys_where_they_are_recorded() -> None:
    steps = Migrations("test document", {
        1: added({"wall_s": None}, per_theorem={"detail": None}),
        2: rename_keys({"search.old": "search.new"}, [("settings", "config"), ("made_from", "settings")]),
    })
    old: dict[str, Any] = {"schema_version": 1, "per_theorem": [{"name": "a"}, {"name": "b", "detail": "x"}],
                           "settings": {"config": {"search.old": 3, "policy.top_p": 0.9}}, "made_from": None}
    assert steps.upgrade(old) == {
        "schema_version": 3, "wall_s": None, "per_theorem": [{"detail": None, "name": "a"}, {"name": "b",
                                                                                          "detail": "x"}],
        "settings": {"config": {"search.new": 3, "policy.top_p": 0.9}}, "made_from": None}
    assert old["settings"]["config"] == {"search.old": 3, "policy.top_p": 0.9}  # the document read is left alone
    for current in ({"schema_version": 3}, {"schema_version": 9}, {"schema_version": "3"}, {}):
        assert steps.upgrade(current) is current


# ------------------------------------------------------------------------- the trial: a knob renamed

OLD_NAME = "search.revisit_limit"  # what search.revisits was called when the result below was written


def _as_written_before_the_rename(path: Path) -> None:
    raw = json.loads(path.read_text(encoding="utf-8"))
    raw["settings"]["config"] = {OLD_NAME if key == "search.revisits" else key: value
                                 for key, value in raw["settings"]["config"].items()}
    raw["made_from"]["settings"] = {OLD_NAME if key == "search.revisits" else key: value
                                    for key, value in raw["made_from"]["settings"].items()}
    path.write_text(json.dumps(raw, indent=2), encoding="utf-8")


@pytest.mark.usefixtures("minilean_in_process")
def test_a_knob_renamed_is_a_migration_a_result_written_before_still_reads_and_is_reused(
        tmp_path: Path, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """The trial change of issue 89: `search.revisits` was `search.revisit_limit` when an eval wrote its result
    (today's schema, N); the rename is one step of the registry (schema N + 1), and the result reads with the key under
    its new name and is reused by the same eval, refused by another value of the knob."""
    from burnqed.config import load_config
    from burnqed.data.index import bundled_index_path, load_local_theorem_index
    from burnqed.eval.identity import EvalIdentity, EvalJobSettings
    from burnqed.eval.pass_at import build_eval_result
    from burnqed.eval.run import eval_settings
    from burnqed.eval.settings import recorded_settings
    from burnqed.provenance import when
    from burnqed.records.results import FailureReason, TheoremResult
    from burnqed.records.theorem import TheoremIndex
    from burnqed.runner.reuse import eval_inputs
    from tests.processes import burnqed_in_process as burnqed

    full = load_local_theorem_index(bundled_index_path())
    index = TheoremIndex(name="embedded-test", theorems=full.theorems[:3])
    bench, out = tmp_path / "bench.json", tmp_path / "eval.json"
    bench.write_text(index.model_dump_json(), encoding="utf-8")
    replay = ["--set", "lean.command=" + json.dumps(["python", "-m", "minilean.replay"])]
    sets = ["search.revisits=3", "lean.command=" + json.dumps(["python", "-m", "minilean.replay"])]
    cfg = load_config(sets=sets)
    job = EvalJobSettings.from_config(cfg, [10])
    identity = EvalIdentity.of(index, job, pass_n=1, iteration=0, ebm=None)
    result = build_eval_result(
        [[TheoremResult(name=t.name, proved=False, failure_reason=FailureReason.EXHAUSTED) for t in index.theorems]],
        [10], benchmark=index.name, model="tiny", ebm=None, lean_backend=job.lean_backend, iteration=0,
        config_digest="0" * 16, git_commit=None, theorem_names=[t.name for t in index.theorems], seed=job.seed,
        settings=recorded_settings(eval_settings("local", job.job.engine, 4), job.identity))
    write_eval_result(result.model_copy(update={"made_from": eval_inputs(identity, cfg, store)}), out, store=store)
    command = ["eval", "--theorems", str(bench), "--output", str(out), "--budgets", "10", *replay]
    reused = f"reusing {out} (finished {when(result.timestamp)}, same inputs); --force redoes it"
    assert burnqed(*command, "--set", "search.revisits=3").stdout.splitlines()[0] == reused

    _as_written_before_the_rename(out)
    assert "search.revisits" not in out.read_text(encoding="utf-8")
    monkeypatch.setitem(EVAL_MIGRATIONS.steps, SCHEMA_VERSION, renamed({OLD_NAME: "search.revisits"}))
    read = load_eval_result(out, store=store)
    assert read.schema_version == SCHEMA_VERSION + 1 and read.settings is not None and read.made_from is not None
    assert (read.settings.config["search.revisits"], read.made_from.settings["search.revisits"]) == (3, 3)
    assert OLD_NAME not in read.settings.config and OLD_NAME not in read.made_from.settings

    same = burnqed(*command, "--set", "search.revisits=3")
    assert same.returncode == 0 and same.stdout.splitlines()[0] == reused, same.stderr
    other = burnqed(*command, "--set", "search.revisits=4")
    assert other.returncode == 2 and other.stderr == (
        f"error: {out} is a finished eval result made with other inputs: search.revisits was 3, now 4; --force "
        "redoes it, or choose another --output\n")
