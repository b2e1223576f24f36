"""`burnqed.provenance` and `burnqed.runner.reuse`: what a stage output is made from, how two records differ, how inputs
are stamped, which configuration keys count, and how the runner reads each stage's command line (docs/pipeline.md,
"Reused or refused")."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from burnqed.config import Config, load_config
from burnqed.config.identity import default_values, identity_values
from burnqed.provenance import MISSING, InputStamp, StageInputs, when
from burnqed.records.theorem import TheoremIndex
from burnqed.runner.plan import build_iteration, iteration_of
from burnqed.runner.request_inputs import made_from, stage_verdict
from burnqed.runner.requests import (
    EvalRequest,
    ExportRequest,
    JointStudyRequest,
    MergeRequest,
    PrepareRequest,
    ReportRequest,
    RlRequest,
    SearchRequest,
    SftRequest,
    StageRequest,
    StartRequest,
    TrainEbmRequest,
)
from burnqed.runner.reuse import search_inputs, sft_inputs, stamp
from burnqed.storage import MARKER_NAME, Store

# Every request the pipeline builds a stage of (what `made_from` knows).
REQUESTS = (PrepareRequest, SftRequest, RlRequest, ExportRequest, TrainEbmRequest, SearchRequest, StartRequest,
            MergeRequest, EvalRequest, JointStudyRequest, ReportRequest)

EARLY = datetime(2026, 11, 20, 8, 30, tzinfo=UTC)
LATE = datetime(2026, 11, 21, 9, 0, 5, tzinfo=UTC)


def made(settings: dict[str, object] | None = None, *, data: InputStamp | None = None) -> StageInputs:
    return StageInputs(inputs={"--data": data or InputStamp(uri="file:///d", stamp="aa", finished=EARLY)},
                       settings={"--iter": 0, "sft.learning_rate": 0.002, **(settings or {})})


def publish(store: Store, uri: str, stage: str, made_from: StageInputs | None = None, content: str = "x") -> None:
    with store.staged_output(uri, stage, made_from=made_from) as folder:
        (folder / "file.txt").write_text(content)


def test_the_first_difference_is_named_in_words() -> None:
    recorded = made()
    assert recorded.difference(made()) is None
    assert recorded.difference(made({"sft.learning_rate": 0.01})) == "sft.learning_rate was 0.002, now 0.01"
    assert recorded.difference(made({"--iter": 1})) == "--iter was 0, now 1"
    assert recorded.difference(made(data=InputStamp(uri="file:///e", stamp="aa"))) == (
        "--data was file:///d, now file:///e")
    assert recorded.difference(made(data=InputStamp(uri="file:///d", stamp="bb", finished=LATE))) == (
        "--data file:///d was made again since (it was finished 2026-11-20 08:30:00 UTC, now 2026-11-21 09:00:05 UTC)")
    assert recorded.difference(made(data=InputStamp(uri="file:///d", stamp="bb"))) == (
        "--data file:///d was made again since (its content differs)")
    assert recorded.difference(made(data=InputStamp(uri="file:///d", stamp=MISSING))) == (
        "--data file:///d is not there any more (it was finished 2026-11-20 08:30:00 UTC)")
    # an input given now that was not then, and the reverse
    more = StageInputs(inputs={**recorded.inputs, "--init": InputStamp(uri="file:///i", stamp="cc")},
                       settings=recorded.settings)
    assert recorded.difference(more) == "--init was not given, now file:///i"
    assert more.difference(recorded) == "--init was file:///i, now not given"
    # inputs come first: they are what a reader of the line checks first
    assert recorded.difference(made({"--iter": 5}, data=InputStamp(uri="file:///e", stamp="aa"))) == (
        "--data was file:///d, now file:///e")


def test_a_key_an_older_record_lacks_counts_as_its_default_there() -> None:
    """A key added to a stage's identity later: an older output is reused while the key is at its default and refused,
    saying so, when it is not; a setting an earlier burnqed named `search setting NAME` is compared under its key; an
    unstamped input (a served model's name, an older record) is compared by where it was read from only."""
    older = StageInputs(inputs={"model": InputStamp(uri="deepseek/prover")},
                        settings={"--iter": 0, "search setting top_p": 0.95})
    defaults = {"sft.new_key": 1, "policy.top_p": 0.95, "search.other": None}
    newer = StageInputs(inputs={"model": InputStamp(uri="deepseek/prover", stamp=MISSING)},
                        settings={"--iter": 0, "sft.new_key": 1, "policy.top_p": 0.95, "--new-arg": 2},
                        defaults=defaults)
    assert older.difference(newer) is None and newer.difference(older) is None
    assert older.difference(newer.model_copy(update={"settings": {**newer.settings, "sft.new_key": 3}})) == (
        "sft.new_key was not recorded (the output predates it: its default 1 then), now 3")
    assert older.difference(newer.model_copy(update={"settings": {**newer.settings, "policy.top_p": 0.9}})) == (
        "policy.top_p was 0.95, now 0.9")
    # the defaults are the builder's, never written with a record
    assert "defaults" not in json.loads(newer.model_dump_json())
    assert default_values(Config)["search.revisits"] == 16 and default_values(Config)["lean.deny"] == Config().lean.deny


def test_an_input_is_stamped_by_its_marker_its_bytes_or_its_listing(tmp_path: Path, store: Store,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    publish(store, str(tmp_path / "out"), "sft")
    marker = (tmp_path / "out" / MARKER_NAME).read_bytes()
    stamped = stamp(str(tmp_path / "out"), store)
    written = json.loads(marker)["written_at"]
    assert stamped == InputStamp(uri=f"file://{tmp_path}/out", stamp=stamped.stamp,
                                 finished=datetime.fromisoformat(written))
    publish(store, str(tmp_path / "out"), "sft")  # published again: another marker, another stamp
    assert stamp(str(tmp_path / "out"), store).stamp != stamped.stamp
    (tmp_path / "theorems.json").write_text('{"theorems": []}')
    first = stamp(str(tmp_path / "theorems.json"), store)
    assert first.stamp == "6cd76a48dea0e508" and first.finished is not None  # sha256 of the bytes, 16 hex
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    listed = stamp(str(tmp_path / "model"), store)
    assert listed.stamp.startswith("files:")
    (tmp_path / "model" / "config.json").write_text('{"a": 1}')  # another size: another listing
    assert stamp(str(tmp_path / "model"), store).stamp != listed.stamp
    assert stamp(str(tmp_path / "nowhere"), store) == InputStamp(uri=str(tmp_path / "nowhere"), stamp=MISSING)
    assert stamp(None, store) == InputStamp(uri=None)
    monkeypatch.chdir(tmp_path)  # a relative path that exists is recorded as its absolute URI
    assert stamp("theorems.json", store).uri == f"file://{tmp_path}/theorems.json"
    assert stamp("deepseek-ai/DeepSeek-Prover-V2-7B", store).uri == "deepseek-ai/DeepSeek-Prover-V2-7B"


def test_a_relative_path_read_from_another_folder_is_refused_saying_so(tmp_path: Path, store: Store,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A relative path is recorded as its absolute URI with the path as given beside it: the same folder named
    otherwise is the same input; the same words from another working folder are refused with both forms and why."""
    for folder in ("a", "b"):
        (tmp_path / folder / "model").mkdir(parents=True)
        (tmp_path / folder / "model" / "config.json").write_text("{}")
    monkeypatch.chdir(tmp_path / "a")
    was = StageInputs(inputs={"model": stamp("model", store)})
    assert (was.inputs["model"].uri, was.inputs["model"].given) == (f"file://{tmp_path}/a/model", "model")
    assert stamp(str(tmp_path / "a" / "model"), store).given is None  # an absolute path is recorded as it is
    assert was.difference(StageInputs(inputs={"model": stamp(str(tmp_path / "a" / "model"), store)})) is None
    monkeypatch.chdir(tmp_path / "b")
    assert was.difference(StageInputs(inputs={"model": stamp("model", store)})) == (
        f"model was model (file://{tmp_path}/a/model), now model (file://{tmp_path}/b/model): the same path, read "
        "from another working folder")
    assert was.difference(StageInputs(inputs={"model": stamp("../a/model", store)})) is None
    monkeypatch.chdir(tmp_path)
    assert was.difference(StageInputs(inputs={"model": stamp("model", store)})) == (
        f"model was model (file://{tmp_path}/a/model), now model: the same path, and nothing is there from this "
        "working folder")


def test_a_long_list_setting_names_what_was_added_and_removed() -> None:
    deny = [f"pattern{k}" for k in range(20)]
    was = StageInputs(settings={"lean.deny": deny})
    assert was.difference(StageInputs(settings={"lean.deny": [*deny[1:], "extra"]})) == (
        "lean.deny changed: 'extra' added, 'pattern0' removed")
    assert was.difference(StageInputs(settings={"lean.deny": deny[::-1]})) == (
        "lean.deny changed: the same items in another order")
    assert StageInputs(settings={"x": [1]}).difference(StageInputs(settings={"x": [2]})) == "x was [1], now [2]"


def test_only_the_keys_of_a_stage_identity_count() -> None:
    cfg = Config()
    sft = identity_values(cfg, "sft")
    # cadences, threads, devices and the export's settings do not make a finished SFT output differ; training keys do
    same = load_config(sets=["sft.logging_steps=1", "sft.save_steps=7", "sft.cpu_threads=3", "sft.device=cpu",
                             "sft.export_dtype=float16", "lean.workers=3", "search.concurrency=5"])
    assert identity_values(same, "sft") == sft
    changed = identity_values(load_config(sets=["sft.max_steps=12"]), "sft")
    assert [k for k in sft if changed[k] != sft[k]] == ["sft.max_steps"]


def test_the_expert_iteration_variants_redo_the_stage_they_shape(tmp_path: Path, store: Store) -> None:
    """Issue 69's settings: one proof per theorem and steps scaled with the data make another SFT output from
    iteration 1 (iteration 0 reads neither: the defaults' is reused); a larger budget on the unsolved another search
    from iteration 1, which reads iteration i-1's trajectories for it (none at iteration 0, so iteration 0 is
    reused): a finished search made without it is redone."""
    data = str(tmp_path / "data")
    # the identity holds the effective `sft.proofs_per_theorem` (`proofs_kept`): 'shortest' set is the default's
    for setting, difference in (
            ("sft.proofs_per_theorem=newest", "sft.proofs_per_theorem was 'shortest', now 'newest'"),
            ("sft.proofs_per_theorem=shortest", None), ("sft.later_epochs=2", "sft.later_epochs was 1.0, now 2.0")):
        defaults, changed = ([sft_inputs(cfg, store, data=data, trajectories=(), init=None, iteration=i)
                              for i in (0, 1)] for cfg in (Config(), load_config(sets=[setting])))
        assert (defaults[0].difference(changed[0]), defaults[1].difference(changed[1])) == (None, difference)
    root = f"file://{tmp_path}/run"
    grown = load_config(sets=["search.unsolved_budget_factor=2"])
    for i in (0, 1):
        plain, larger = (iteration_of(cfg, root, i).stage("search") for cfg in (Config(), grown))
        extra = ("--unsolved-from", f"{root}/iter_0/trajectories") if i else ()
        assert larger.argv[: -2] == (*plain.argv[: -2], *extra) and larger.inputs == (*plain.inputs, *extra[1:])
    index = TheoremIndex(name="t", theorems=[])
    made = [search_inputs(cfg, store, index, shard=None, iteration=1, ebm=None, unsolved_from=unsolved)
            for cfg, unsolved in ((Config(), None), (grown, f"{root}/iter_0/trajectories"),
                                  (load_config(sets=["search.unsolved_budget_factor=3"]),
                                   f"{root}/iter_0/trajectories"))]
    assert made[0].difference(made[1]) == f"--unsolved-from was not given, now {root}/iter_0/trajectories"
    assert made[1].difference(made[2]) == "search.unsolved_budget_factor was 2.0, now 3.0"
    first = [search_inputs(cfg, store, index, shard=None, iteration=0, ebm=None) for cfg in (Config(), grown)]
    assert first[0].difference(first[1]) is None


@pytest.mark.parametrize(("sets", "proof_examples"), [
    ([], False), (["search.repair_rounds=2"], True), (["search.mode=hybrid"], True),
    (["search.repair_rounds=2", "sft.proof_examples=false"], False), (["sft.proof_examples=true"], True),
    (["rl.enabled=true"], True), (["rl.enabled=true", "sft.proof_examples=false"], False),
])
def test_sft_records_whether_proof_examples_train_as_search_sets_it(tmp_path: Path, store: Store,
                                                                     sets: list[str], proof_examples: bool) -> None:
    """`search.repair_rounds` above 0, a proof-asking mode or the rl stage (which samples whole proofs) turns SFT's
    proof and repair examples on when `sft.proof_examples` is unset: another SFT output, so a finished one made
    without them is refused."""
    made = sft_inputs(load_config(sets=sets), store, data=str(tmp_path / "data"), trajectories=(), init=None,
                      iteration=1)
    assert made.settings["proof examples"] is proof_examples
    plain = sft_inputs(load_config(), store, data=str(tmp_path / "data"), trajectories=(), init=None, iteration=1)
    assert plain.difference(made) == (None if not proof_examples else "proof examples was false, now true")


@pytest.mark.parametrize(("sets", "sketch_examples"), [
    ([], False), (["search.mode=hybrid"], False), (["search.mode=sketch"], True),
    (["search.mode=sketch", "sft.sketch_examples=false"], False), (["sft.sketch_examples=true"], True),
])
def test_sft_records_whether_sketch_examples_train_as_search_sets_it(tmp_path: Path, store: Store,
                                                                      sets: list[str], sketch_examples: bool) -> None:
    """Sketch mode turns SFT's sketch and subgoal examples on when `sft.sketch_examples` is unset: another SFT output,
    so a finished one made without them is refused, one recorded before they existed too; with them off it is
    reused."""
    made = sft_inputs(load_config(sets=sets), store, data=str(tmp_path / "data"), trajectories=(), init=None,
                      iteration=1)
    assert made.settings["sketch examples"] is sketch_examples
    plain = sft_inputs(load_config(sets=[f"search.mode={load_config(sets=sets).search.mode}"]), store,
                       data=str(tmp_path / "data"), trajectories=(), init=None, iteration=1)
    plain.settings["sketch examples"] = False
    assert plain.difference(made) == (None if not sketch_examples else "sketch examples was false, now true")
    earlier = StageInputs(inputs=plain.inputs, settings={k: v for k, v in plain.settings.items()
                                                         if k != "sketch examples"})
    assert earlier.difference(made) == (None if not sketch_examples else
                                        "sketch examples was not recorded (the output predates it: its default false "
                                        "then), now true")


@pytest.mark.slow  # every stage's builder, the eval's and the search's with their theorem sets: about a second
def test_every_stage_of_an_iteration_is_understood_by_the_runner(tmp_path: Path, store: Store) -> None:
    """The runner builds what each pipeline stage is made from, from the request it holds, with the builders the
    commands use (`made_from`); a stage with nothing finished is reused as it is (there is nothing to compare)."""
    from burnqed.data.index import bundled_index_path

    benchmark = tmp_path / "b.json"
    benchmark.write_text(bundled_index_path("test").read_text(encoding="utf-8"), encoding="utf-8")
    cfg = load_config(sets=['pipeline.eval_modes=["whole"]', f"pipeline.benchmark={benchmark}"])
    root = f"file://{tmp_path}/run"
    (tmp_path / "run" / "iter_0" / "data").mkdir(parents=True)  # what search reads its theorems from
    (tmp_path / "run" / "iter_0" / "data" / "theorems.json").write_text(
        bundled_index_path().read_text(encoding="utf-8"), encoding="utf-8")
    commands: set[type[StageRequest]] = set()
    best = cfg.pipeline.model_copy(update={"start": "best"})  # its start stage
    for pipeline, i, joint, rl in ((cfg.pipeline, 0, False, False), (cfg.pipeline, 1, False, False),
                                   (cfg.pipeline, 1, True, False), (cfg.pipeline, 0, False, True),
                                   (cfg.pipeline, 1, False, True), (best, 1, False, False)):
        for stage in build_iteration(pipeline, root, i, joint=joint, max_proofs=cfg.search.max_proofs,
                                     rl=rl).stages:
            for shard in range(stage.shards):
                request = stage.request_for(shard)
                commands.add(type(request))
                built = made_from(request, load_config(sets=request.config_sets()), store)
                assert built is not None and built[0][0] == request.output == stage.outputs_for(shard)[0], stage.name
                assert all(made.settings or made.inputs for _, made in built), stage.name
                # redone by `iterate --force`, it is the same stage: its --force and --resume are no part of it
                assert made_from(request.redone(), load_config(sets=request.config_sets()), store) == built
                verdict = stage_verdict(request, lambda sets: load_config(sets=sets), store)
                assert verdict.difference is None and verdict.recorded, stage.name
    assert commands == set(REQUESTS)


def test_an_sft_output_records_its_inputs_and_a_redone_input_makes_it_differ(tmp_path: Path, store: Store) -> None:
    data = str(tmp_path / "data")
    publish(store, data, "prepare-data")
    cfg = load_config()
    before = sft_inputs(cfg, store, data=data, trajectories=(), init=None, iteration=0)
    assert set(before.inputs) == {"--data", "--init", "base model"}
    assert before.settings["--iter"] == 0 and before.settings["sft.learning_rate"] == 0.002
    publish(store, data, "prepare-data", content="y")
    now = sft_inputs(cfg, store, data=data, trajectories=(), init=None, iteration=0)
    assert before.difference(now) == (f"--data file://{data} was made again since (it was finished "
                                      f"{when(before.inputs['--data'].finished)}, now "
                                      f"{when(now.inputs['--data'].finished)})")


@pytest.mark.slow  # moto
def test_inputs_on_s3_are_stamped_by_their_marker_or_their_object_without_a_download(s3_root: str, tmp_path: Path
                                                                                      ) -> None:
    store = Store(cache_dir=tmp_path / "cache")
    publish(store, f"{s3_root}/sft", "sft")
    stamped = stamp(f"{s3_root}/sft/", store)
    assert stamped.uri == f"{s3_root}/sft" and len(stamped.stamp) == 16 and stamped.finished is not None
    store.write_bytes(f"{s3_root}/theorems.json", b'{"theorems": []}')
    first = stamp(f"{s3_root}/theorems.json", store)
    assert first.stamp.startswith("object:") and first.finished is not None
    store.write_bytes(f"{s3_root}/theorems.json", b'{"theorems": [], "name": "x"}')
    assert stamp(f"{s3_root}/theorems.json", store).stamp != first.stamp
    assert stamp(f"{s3_root}/nowhere", store).stamp == MISSING
    assert not list((tmp_path / "cache").rglob("*.json"))  # nothing was downloaded


@pytest.mark.parametrize("mode", ["step", "whole", "hybrid"])
def test_an_older_eval_result_is_compared_on_each_search_setting_it_recorded(store: Store, mode: str) -> None:
    """An eval result written before `made_from` recorded its settings under their own names (`EvalSettings`):
    each set one is compared as the key of eval's identity of that name, so the same eval is reused and one at
    another temperature refused."""
    from burnqed.data.index import bundled_index_path, load_local_theorem_index
    from burnqed.eval.identity import EvalIdentity, EvalJobSettings
    from burnqed.eval.pass_at import build_eval_result
    from burnqed.eval.result import EvalResult
    from burnqed.eval.run import eval_settings
    from burnqed.records.enums import SearchMode
    from burnqed.records.results import FailureReason, TheoremResult
    from burnqed.runner.reuse import eval_inputs, finished_eval, inputs_from_settings

    index = load_local_theorem_index(bundled_index_path("test"))
    cfg = load_config(sets=[f"search.mode={mode}", "search.repair_rounds=1"])
    settings = EvalJobSettings.from_config(cfg, [4])
    older = build_eval_result(
        [[TheoremResult(name=t.name, proved=False, failure_reason=FailureReason.EXHAUSTED) for t in index.theorems]],
        [4], benchmark=index.name, model="tiny", ebm=None, lean_backend=settings.lean_backend, iteration=0,
        config_digest="0" * 16, git_commit=None, theorem_names=[t.name for t in index.theorems], seed=0,
        settings=eval_settings("local", settings.job.engine, 8), mode=SearchMode(mode))
    written = older.model_dump(mode="json")
    del written["settings"]["config"]  # as schema 9 wrote it: the settings' own fields, no map of keys
    older = EvalResult.model_validate({**written, "schema_version": 9})
    legacy = inputs_from_settings(older)
    assert {"policy.temperature", "policy.prompt_format", "search.timeout_s", "search.stop_at_first"} <= set(
        legacy.settings)
    assert not {"search.max_nodes", "search.max_proofs", "search.verify"} & set(legacy.settings)

    def now(*sets: str) -> StageInputs:
        again = load_config(sets=[f"search.mode={mode}", "search.repair_rounds=1", *sets])
        return eval_inputs(EvalIdentity.of(index, EvalJobSettings.from_config(again, [4]), pass_n=1, iteration=0,
                                           ebm=None), again, store)

    found = finished_eval("older.json", older)
    assert found.partial and found.made_from == legacy
    # compared on what it records: a key it does not record (repair_rounds, which a step result leaves unset) is unknown
    assert found.difference(now()) is None
    assert found.difference(now("policy.temperature=0.5")) == "policy.temperature was 0.8, now 0.5"
