"""Never below the best so far (issue 69, point 3): iteration i starts from the best policy by its LLM-only eval and
the best value model where it helped, and searches with its value model only when the last measured one helped; a
no-go iteration does not stop `run-all`, and the next one starts from the best iteration's models, read back from the
start record its start stage wrote and from what the sft, train-ebm and search stages are made from."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from burnqed import storage
from burnqed.config import Config, PipelineConfig, load_config
from burnqed.data.index import bundled_index_path
from burnqed.errors import InputError
from burnqed.eval.best_so_far import choose_start, load_results
from burnqed.eval.pass_at import build_eval_result
from burnqed.eval.result import EvalResult, load_eval_result, write_eval_result
from burnqed.layout import Layout
from burnqed.records.results import FailureReason, TheoremResult
from burnqed.report.build import build_report, write_report
from burnqed.report.gates import go_no_go
from burnqed.runner import request_inputs
from burnqed.runner.plan import iteration_of
from burnqed.runner.requests import EvalRequest, SearchRequest
from burnqed.storage import Store
from burnqed.trajectory.schema import CompletionMarker
from tests.processes import burnqed_in_process, cli, forked_stages, request_of, stage_commands

SEVEN = [f"t{k}" for k in range(7)]
BEST = Config(pipeline=PipelineConfig(start="best"))  # the start these tests are about (the default is "base")


def result(solved: int, *, ebm: str | None = None, iteration: int = 0) -> EvalResult:
    """An eval of SEVEN at budgets 10 and 50 proving the first `solved`, with the value model `ebm` (None: LLM
    only)."""
    attempts = [[TheoremResult(name=name, proved=True, budget_at_proof=3, nodes_expanded=3, time_s=1.0, proof="p")
                 if k < solved else
                 TheoremResult(name=name, proved=False, failure_reason=FailureReason.EXHAUSTED, nodes_expanded=50,
                               time_s=1.0, edges=200)
                 for k, name in enumerate(SEVEN)]]
    return build_eval_result(attempts, [10, 50], benchmark="bench", model="tiny", ebm=ebm, lean_backend="minilean",
                             iteration=iteration, config_digest="0" * 16, git_commit=None, theorem_names=SEVEN,
                             timestamp=datetime(2026, 1, 1, tzinfo=UTC), seed=0)


# iteration 0: 3 (LLM only); 1: 5 alone, 6 with its value model (it helped); 2: 4 alone, 3 with it (a no-go, and its
# value model hurt)
ARMS = {(0, "llm"): 3, (1, "llm"): 5, (1, "llm+ebm"): 6, (2, "llm"): 4, (2, "llm+ebm"): 3}


def results(at: Layout) -> dict[tuple[int, str], EvalResult]:
    return {(j, arm): result(n, ebm=at.ebm(j) if arm == "llm+ebm" else None, iteration=j)
            for (j, arm), n in ARMS.items()}


def test_a_no_go_iteration_is_not_the_next_ones_start() -> None:
    at = Layout("file:///runs")
    start = choose_start(results(at), 3, at)
    assert (start.policy_from, start.policy) == (1, "file:///runs/iter_1/sft")
    assert (start.value_model_from, start.value_model) == (1, "file:///runs/iter_1/ebm")
    assert start.search_value_model is False
    assert [(s.iteration, s.budget, s.llm, s.llm_ebm) for s in start.scores] == [
        (0, 50, 3, None), (1, 50, 5, 6), (2, 50, 4, 3)]
    assert start.reasons == [
        "policy: iteration 1's (5/7 LLM only at budget 50, the best so far; iteration 2 solved 4: no-go, not its "
        "start)",
        "value model: iteration 1's (6 with it vs 5 without)",
        "search: without the value model (at iteration 2's eval 3 with it vs 4 without)",
    ]
    # with the rl stage the policy is the rl stage's output
    assert choose_start(results(at), 3, at, rl=True).policy == "file:///runs/iter_1/rl"


def test_a_tie_goes_to_the_later_iteration_and_the_first_start_searches_with_its_value_model() -> None:
    at = Layout("file:///runs")
    first = choose_start({(0, "llm"): result(3)}, 1, at)
    assert (first.policy_from, first.value_model, first.search_value_model) == (0, None, True)
    assert first.reasons[1:] == ["value model: none helped so far; train-ebm starts afresh",
                                 "search: with the value model (none measured yet)"]
    tied = {(0, "llm"): result(3), (1, "llm"): result(3), (1, "llm+ebm"): result(4, ebm="e", iteration=1)}
    later = choose_start(tied, 2, at)
    assert (later.policy_from, later.value_model_from, later.search_value_model) == (1, 1, True)


def test_under_the_base_start_only_the_value_model_and_its_use_in_search_are_chosen() -> None:
    at = Layout("file:///runs")
    start = choose_start(results(at), 3, at, setting="base")
    assert (start.setting, start.policy_from, start.policy) == ("base", None, None)  # SFT trains the base afresh
    assert (start.value_model_from, start.value_model, start.search_value_model) == (1, at.ebm(1), False)
    assert start.reasons == [
        "policy: the base model, trained afresh on every proof so far (the best so far, iteration 1's 5/7 LLM only at "
        "budget 50, is not a start under pipeline.start = \"base\")",
        *choose_start(results(at), 3, at).reasons[1:]]
    # pipeline.search_value_model = "always": the same value model, and search with it whatever it did
    always = choose_start(results(at), 3, at, setting="base", search="always")
    assert (always.value_model, always.search_value_model) == (at.ebm(1), True)
    assert always.reasons[2] == "search: with the value model (pipeline.search_value_model = \"always\")"
    # none helped: train-ebm starts afresh, and search goes without it after the last measured one hurt
    hurt = {(0, "llm"): result(3), (1, "llm"): result(5), (1, "llm+ebm"): result(4, ebm="e", iteration=1)}
    assert (choose_start(hurt, 2, at, setting="base").value_model, choose_start(hurt, 2, at, setting="base")
            .search_value_model) == (None, False)


def test_an_iteration_without_its_llm_only_eval_cannot_be_judged() -> None:
    at = Layout("file:///runs")
    with pytest.raises(InputError, match=r"iteration 1 has no LLM-only eval \(file:///runs/iter_1/eval/eval-noebm"):
        choose_start({(0, "llm"): result(3), (1, "llm+ebm"): result(4, ebm="e", iteration=1)}, 2, at)
    with pytest.raises(ValueError, match="iteration 0 starts from the base model"):
        choose_start({}, 0, at)


def test_the_policy_gate_judges_the_llm_only_arm_against_the_best_so_far() -> None:
    at = Layout("file:///runs")
    gates = {g.name: g for g in go_no_go([], 2, BEST.pipeline, results(at), None)}
    assert (gates["policy"].passed, gates["policy"].blocking) == (False, False)
    assert gates["policy"].detail == ("LLM only 4/7 vs the best so far, iteration 1's 5/7, at budget 50: the next "
                                      "iteration starts from iteration 1's policy (no-go)")
    assert "policy" not in {g.name for g in go_no_go([], 2, PipelineConfig(start="previous"), results(at), None)}


def _publish_run(tmp_path: Path, store: Store) -> Layout:
    """A run root whose iterations 0..2 have published evals (ARMS) and SFT and value-model folders with a file each
    (so each folder is stamped by its own listing)."""
    at = Layout(f"file://{tmp_path}/runs")
    for (j, arm), found in results(at).items():
        write_eval_result(found, at.eval_result(j, with_ebm=arm == "llm+ebm" or j == 0), store=store)
    for j in range(3):
        for folder, size in ((at.sft(j), j + 1), (at.ebm(j), 10 * (j + 1))):
            path = tmp_path / "runs" / f"iter_{j}" / folder.rsplit("/", 1)[1]
            path.mkdir(parents=True, exist_ok=True)
            (path / "weights.bin").write_bytes(b"w" * size)
    return at


def _finished_run(tmp_path: Path, store: Store) -> Layout:
    """`_publish_run` with every stage of iterations 0..2 finished as the runner sees it (iteration 0's base eval
    solves 2; the start records the start stages wrote; trajectory and stage markers; the evals iteration 2 runs
    again recording what they were made from; the theorem index search reads), but iteration 2's report."""
    at = _publish_run(tmp_path, store)
    write_eval_result(result(2), at.eval_base(), store=store)
    marker = CompletionMarker(run_id="r", iteration=0, parts=[], theorems=0, proved=0, rows=0,
                              written_at=datetime(2026, 1, 1, tzinfo=UTC)).model_dump_json().encode()
    for j in range(3):
        for stage in iteration_of(BEST, at.root, j).stages:
            request = stage.request_for(0)
            if stage.name == "start":
                write_start = choose_start(load_results(at, j, store), j, at).model_dump_json().encode()
                store.write_bytes(stage.outputs[0], write_start)
            elif isinstance(request, EvalRequest) and j == 2:
                [(uri, made)] = request_inputs.made_from(request, load_config(sets=request.config_sets()), store) or []
                write_eval_result(load_eval_result(uri, store=store).model_copy(update={"made_from": made}), uri,
                                  store=store)
            elif not isinstance(request, EvalRequest) and (j, stage.name) != (2, "report"):
                for uri in stage.all_outputs():
                    store.write_bytes(storage.join(uri, storage.MARKER_NAME), marker)
    store.write_bytes(storage.join(at.root, "iter_0", "data", "theorems.json"), bundled_index_path().read_bytes())
    return at


@pytest.mark.slow  # two run-alls: iteration 2's report and iteration 3's start each run as a stage
def test_after_a_no_go_run_all_goes_on_and_the_next_iteration_loads_the_best_iterations_models(
        tmp_path: Path, store: Store) -> None:
    at = _finished_run(tmp_path, store)
    root = str(tmp_path / "runs")
    gain = ("WARN gain: iteration 2 vs 1: 3 theorems lost and no gain (6/7 → 3/7; difference -42.9 pts, 95% interval "
            "-72.3 to +6.1) (gate: the difference ≥ +0.0 pts [pipeline.gate_min_gain = 0]; not met: the difference "
            "≥ +0.0 pts) — not a stop with pipeline.start = \"best\": the next iteration starts from the best so far "
            "(the policy gate)")
    # under pipeline.start = "previous" iteration 3 would start from iteration 2: the failed gain stops the run
    with forked_stages():  # iteration 2's report and iteration 3's start and sft, each a fork of this process
        previous = cli("run-all", "--root", root, "--iters", "2-3", "--set", "pipeline.start=previous")
    assert previous.returncode == 3, previous.stderr[-3000:]
    assert "STOP gain: iteration 2 vs 1: 3 theorems lost and no gain" in previous.stdout
    assert "stopping after iteration 2: a go/no-go gate of iteration 2 failed" in previous.stderr
    assert not (tmp_path / "runs" / "iter_3").exists()
    shutil.rmtree(tmp_path / "runs" / "iter_2" / "report")
    # "best": the same no-go is shown, the run goes on, and iteration 3 starts from iteration 1
    with forked_stages():
        done = cli("run-all", "--root", root, "--iters", "2-3", "--set", "pipeline.start=best")
    assert gain in done.stdout and "  decision: go: the baseline gate passed" in done.stdout
    assert "stopping after" not in done.stderr
    assert "[start] start of iteration 3: policy: iteration 1's (5/7 LLM only at budget 50, the best so far; " \
           "iteration 2 solved 4: no-go, not its start)" in done.stdout
    # iteration 3's start stage ran and its sft stage started (this run root has no tactic pairs for it to train on)
    assert done.returncode == 2 and "error: iteration 3: stage sft refused its input" in done.stderr, done.stderr
    assert f"[sft] error: tactic pairs {tmp_path}/runs/iter_0/data/pairs.parquet do not exist" in done.stderr
    record = json.loads((tmp_path / "runs" / "iter_3" / "start.json").read_text(encoding="utf-8"))
    assert (record["policy_from"], record["policy"], record["value_model_from"], record["value_model"],
            record["search_value_model"]) == (1, at.sft(1), 1, at.ebm(1), False)
    # What the stages load, from the command lines this run gave them (sft's as it printed it; train-ebm's and
    # search's as the plan gives them) through the start record iteration 3's start stage wrote: each builds its
    # record of inputs from its request with these builders (`request_inputs.made_from`) after reading the record
    # (`request_inputs.started`).
    [ran_sft] = [args for args in stage_commands(done.stderr) if args[0] == "sft"]
    plan = iteration_of(BEST, at.root, 3)
    assert _made_from(ran_sft, BEST, store) == {"--init": at.sft(1)}
    assert _made_from(plan.stage("train-ebm").argv_for(0), BEST, store) == {"--init": at.ebm(1)}
    assert _made_from(plan.stage("search").argv_for(0), BEST, store) == {"--ebm": None}


def _made_from(argv: list[str], config: Config, store: Store) -> dict[str, str | None]:
    """The policy (--init) and value model (--ebm) a stage's command line is made from, by the command's own builders on
    the request it asks for (`request_inputs.made_from`, which reads a --start record as the command does); a search's
    training theorems are dropped (--theorems INDEX --split SPLITS: the embedded corpus, since these runs have no
    prepared data)."""
    request = request_of(argv)
    if isinstance(request, SearchRequest):
        request = replace(request, theorems=None, split=None)
    [(_, inputs)] = request_inputs.made_from(request, config, store) or []
    return {role: found.uri for role, found in inputs.inputs.items() if role in ("--init", "--ebm")}


def test_the_variants_start_from_the_previous_iteration_or_the_base() -> None:
    def sft_argv(start: str) -> list[str]:
        cfg = Config(pipeline=PipelineConfig(start=start))
        return iteration_of(cfg, "file:///r", 2).stage("sft").argv_for(0)

    assert "start" not in iteration_of(Config(pipeline=PipelineConfig(start="previous")), "file:///r", 2).names
    previous = sft_argv("previous")
    assert previous[previous.index("--init") + 1] == "file:///r/iter_1/sft"
    assert "--init" not in sft_argv("base") and "--start" not in sft_argv("base")
    # the default ("base") has a start stage from iteration 2 (the value model's), none at 1 (none to choose, none
    # measured); iteration 0 has none whatever the setting: the quick start is unchanged
    assert "start" not in iteration_of(Config(), "file:///r", 1).names
    assert "start" not in iteration_of(BEST, "file:///r", 0).names
    base = iteration_of(Config(), "file:///r", 2)
    assert base.names[0] == "start" and base.stage("start").summary.endswith("and whether search uses it.")
    assert base.stage("sft").after == () and "--start" in base.stage("train-ebm").argv
    assert "start" in base.stage("train-ebm").after and "start" in base.stage("search").after
    search = base.stage("search").argv
    assert search[search.index("--start") + 1] == "file:///r/iter_2/start.json"
    # pipeline.search_value_model = "always": search takes the iteration's value model without reading the record
    always = iteration_of(Config(pipeline=PipelineConfig(search_value_model="always")), "file:///r", 2)
    assert "--start" not in always.stage("search").argv and "start" not in always.stage("search").after
    assert "--ebm" in always.stage("search").argv and always.stage("train-ebm").argv == base.stage("train-ebm").argv


def test_the_report_names_the_policy_gate(tmp_path: Path, store: Store) -> None:
    at = _publish_run(tmp_path, store)
    report = build_report(at.root, 2, BEST.pipeline, store=store)
    assert [(g.name, g.passed) for g in report.gates if g.name == "policy"] == [("policy", False)]


def test_the_report_draws_both_arms_across_iterations_and_names_the_next_start(tmp_path: Path, store: Store) -> None:
    from burnqed.report.iterations import iterations_markdown

    at = _publish_run(tmp_path, store)
    assert build_report(at.root, 0, BEST.pipeline, store=store).learning_curve is None
    report = build_report(at.root, 2, BEST.pipeline, store=store)
    section = report.learning_curve
    assert section is not None and section.next_start is not None
    assert [(r.iteration, r.arm, r.solved) for r in section.rows if r.budget == 50] == [
        (0, "llm", 3), (1, "llm", 5), (1, "llm+ebm", 6), (2, "llm", 4), (2, "llm+ebm", 3)]
    assert section.next_start.policy_from == 1
    lines = iterations_markdown(section)
    assert lines[6:10] == [
        "| budget | arm | iter 0 | iter 1 | iter 2 |", "|---|---|---|---|---|",
        "| 10 | policy alone (LLM only) | 3/7 (16–75 %) | 5/7 (36–92 %) | 4/7 (25–84 %) |",
        "| 10 | with the value model (LLM+EBM) | – | 6/7 (49–97 %) | 3/7 (16–75 %) |"]
    assert lines[-6:] == ["Iteration 3 starts from (pipeline.start = \"best\"):", "",
                          "- policy: iteration 1's (5/7 LLM only at budget 50, the best so far; iteration 2 solved 4: "
                          "no-go, not its start)", "- value model: iteration 1's (6 with it vs 5 without)",
                          "- search: without the value model (at iteration 2's eval 3 with it vs 4 without)", ""]
    # the default ("base") names the base model and the value model; "previous" chooses nothing
    base = build_report(at.root, 2, Config().pipeline, store=store).learning_curve
    assert base is not None and base.next_start is not None and base.next_start.policy is None
    assert iterations_markdown(base)[-6:-3] == ["Iteration 3 starts from (pipeline.start = \"base\"):", "",
                                                "- policy: the base model, trained afresh on every proof so far (the "
                                                "best so far, iteration 1's 5/7 LLM only at budget 50, is not a start "
                                                "under pipeline.start = \"base\")"]
    previous = build_report(at.root, 2, PipelineConfig(start="previous"), store=store).learning_curve
    assert previous is not None and previous.next_start is None
    assert iterations_markdown(previous)[-2:] == [
        "Iteration 3 starts from iteration 2's policy and value model (pipeline.start = \"previous\").", ""]
    pytest.importorskip("matplotlib")
    write_report(report, tmp_path / "report")
    assert (tmp_path / "report" / "learning_curve.png").stat().st_size > 0


def test_a_finished_start_stage_is_reused_and_redone_when_an_eval_it_read_changed(tmp_path: Path,
                                                                                  store: Store) -> None:
    from burnqed.runner.request_inputs import stage_verdict

    at = _publish_run(tmp_path, store)
    request = iteration_of(BEST, at.root, 3).stage("start").request_for(0)

    def verdict() -> tuple[str | None, bool]:
        found = stage_verdict(request, lambda sets: BEST, store)
        return found.difference, found.recorded

    assert verdict() == (None, True)  # nothing finished there yet
    assert burnqed_in_process(*request.argv(), "--set", "pipeline.start=best").returncode == 0
    record = json.loads((tmp_path / "runs" / "iter_3" / "start.json").read_text(encoding="utf-8"))
    assert sorted(record["made_from"]["inputs"]) == ["iter_0 eval", "iter_1 eval", "iter_1 eval-noebm", "iter_2 eval",
                                                     "iter_2 eval-noebm"]
    assert record["made_from"]["settings"] == {"--root": at.root, "--iter": 3, "pipeline.start": "best"}
    # a re-run of the finished iteration reuses it (it was read as an eval result and refused: issue 69)
    assert verdict() == (None, True)
    write_eval_result(result(5, iteration=2), at.eval_result(2, with_ebm=False), store=store)  # iteration 2 redone
    difference, recorded = verdict()
    assert recorded and difference is not None
    assert difference.startswith(f"iter_2 eval-noebm {at.eval_result(2, with_ebm=False)} was made again since")


def test_under_the_base_start_the_start_stage_gives_train_ebm_and_search_the_value_model_that_helped(
        tmp_path: Path, store: Store) -> None:
    """The default (pipeline.start = "base") after the no-go of ARMS: iteration 3's start stage, run as the plan gives
    it, chooses no policy; what sft, train-ebm and search are then made from (`request_inputs.made_from`, the commands'
    own builders, through `read_start`): the base model, iteration 1's value model, search without it."""
    at = _publish_run(tmp_path, store)
    plan = iteration_of(Config(), at.root, 3)
    done = burnqed_in_process(*plan.stage("start").argv_for(0))
    assert done.returncode == 0, done.stderr
    assert "start of iteration 3: policy: the base model, trained afresh on every proof so far" in done.stdout
    record = json.loads((tmp_path / "runs" / "iter_3" / "start.json").read_text(encoding="utf-8"))
    assert (record["setting"], record["policy"], record["value_model"], record["search_value_model"]) == (
        "base", None, at.ebm(1), False)
    assert record["made_from"]["settings"]["pipeline.start"] == "base"
    assert _made_from(plan.stage("sft").argv_for(0), Config(), store) == {"--init": None}
    assert _made_from(plan.stage("train-ebm").argv_for(0), Config(), store) == {"--init": at.ebm(1)}
    assert _made_from(plan.stage("search").argv_for(0), Config(), store) == {"--ebm": None}
