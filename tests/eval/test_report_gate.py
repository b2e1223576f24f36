"""The go/no-go gate judges the iteration (issue 59, point 5): the decision reads the change theorem by theorem
(new, lost, the paired 95 % interval of the difference) as well as the baseline's floor and names the gate that
decided it; the unsolved list marks the world's known-false traps and shows the reachable ceiling; the budget-used
figure says what it is; the base arm says which model it is."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from burnqed.config import PipelineConfig
from burnqed.eval.pass_at import build_eval_result
from burnqed.eval.result import EvalResult, paired_interval, write_eval_result
from burnqed.layout import Layout
from burnqed.provenance import InputStamp, StageInputs
from burnqed.records.results import FailureReason, TheoremResult
from burnqed.report.build import build_report, headline
from burnqed.report.markdown import render_markdown
from burnqed.report.tables import PairedChange
from burnqed.storage import Store
from leankit.world.checked import trap_names

SEVEN = [f"t{k}" for k in range(7)]
SETTING = " [pipeline.gate_min_gain = 0]"  # how a gain gate names the setting it reads


def eval_result(names: list[str], solved: set[str], *, iteration: int = 0, spent: int = 50,
                sources: dict[str, str] | None = None) -> EvalResult:
    """An eval of `names` at budgets 10 and 50 proving `solved` at 3 expansions; the others end `exhausted` after
    `spent` expansions."""
    attempts = [[TheoremResult(name=name, proved=True, budget_at_proof=3, nodes_expanded=3, time_s=1.0, proof="p")
                 if name in solved else
                 TheoremResult(name=name, proved=False, failure_reason=FailureReason.EXHAUSTED, nodes_expanded=spent,
                               time_s=1.0, edges=4 * spent)
                 for name in names]]
    return build_eval_result(attempts, [10, 50], benchmark="bench", model="tiny", ebm=None, lean_backend="minilean",
                             iteration=iteration, config_digest="0" * 16, git_commit=None, theorem_names=names,
                             timestamp=datetime(2026, 1, 1, tzinfo=UTC), theorem_sources=sources, seed=0)


def publish(uri: str, result: EvalResult, store: Store) -> None:
    write_eval_result(result, uri, store=store)


# ------------------------------------------------------------------------------------- the interval


def test_the_paired_interval_is_newcombes_hybrid_score_interval() -> None:
    # Fagerland, Lydersen and Laake (2017), ch. 8, the Cavo et al. (2012) table: 59 both, 6 and 16 discordant, 80
    # neither: estimate -0.0621, Newcombe square-and-add 95 % CI -0.1186 to -0.0046.
    low, high = paired_interval(59, 6, 16, 80)
    assert (round(low, 4), round(high, 4)) == (-0.1186, -0.0046)
    # 6/7 → 5/7, one theorem lost: by hand from the Wilson intervals of 5/7 (0.3589, 0.9178) and 6/7 (0.4869,
    # 0.9743), phi = (5·1 - 0·1 - 7/2) / √(5·2·6·1) = 0.1936 (continuity-corrected):
    # low = -1/7 - √(0.3554² + 0.1171² - 2·0.1936·0.3554·0.1171) = -0.4948,
    # high = -1/7 + √(0.3703² + 0.2035² - 2·0.1936·0.3703·0.2035) = +0.2436.
    low, high = paired_interval(5, 0, 1, 1)
    assert (round(low, 4), round(high, 4)) == (-0.4948, 0.2436)
    # no theorem changed: the interval does not shrink to 0 (the discordant pairs alone would say exactly 0)
    assert [round(x, 4) for x in paired_interval(6, 0, 0, 1)] == [-0.3386, 0.3386]
    assert paired_interval(0, 0, 0, 0) == (-1.0, 1.0)
    # the figures the tests below pin were checked against a separate transliteration of Fagerland et al.'s
    # Newcombe_square_and_add_CI_paired_2x2 (R package contingencytables)
    change = PairedChange(before="base", after="iteration 0", total=7, before_solved=6, after_solved=5, new=0, lost=1)
    assert change.text == "1 theorem lost and no gain (6/7 → 5/7; difference -14.3 pts, 95% interval -49.5 to +24.4)"


# --------------------------------------------------------------------------------------- the decision


def test_an_iteration_0_that_lost_a_theorem_of_the_base_is_a_no_go_naming_the_gain_gate(tmp_path: Path,
                                                                                       store: Store) -> None:
    """The case of the issue: base 6/7 → iteration 0 5/7 said `decision: go`."""
    at = Layout(f"file://{tmp_path}/runs")
    publish(at.eval_base(), eval_result(SEVEN, set(SEVEN[:6])), store)
    publish(at.eval_result(0), eval_result(SEVEN, set(SEVEN[:5])), store)
    report = build_report(at.root, 0, PipelineConfig(), store=store)
    gain = report.gates[1]
    assert (gain.name, gain.passed, gain.blocking) == ("gain", False, True)
    assert gain.change is not None and (gain.change.new, gain.change.lost) == (0, 1)
    decision = ("no-go by the gain gate: iteration 0 vs base: 1 theorem lost and no gain (6/7 → 5/7; difference "
                f"-14.3 pts, 95% interval -49.5 to +24.4) (gate: the difference ≥ +0.0 pts{SETTING}; not met: the "
                "difference ≥ +0.0 pts)")
    assert (report.go, report.decision) == (False, decision)
    assert headline(report)[-1] == f"  decision: {decision}"
    saved = json.loads(report.model_dump_json())  # report.json
    assert saved["decision"] == decision
    assert saved["gates"][1]["change"] == {
        "before": "base", "after": "iteration 0", "total": 7, "before_solved": 6, "after_solved": 5, "new": 0,
        "lost": 1, "difference": pytest.approx(-1 / 7), "interval_low": pytest.approx(-0.49482, abs=1e-5),
        "interval_high": pytest.approx(0.24357, abs=1e-5)}
    markdown = render_markdown(report)
    assert markdown.rstrip().endswith("Decision: **no-go** by the gain gate: iteration 0 vs base: 1 theorem lost and "
                                      "no gain (6/7 → 5/7; difference -14.3 pts, 95% interval -49.5 to +24.4) (gate: "
                                      f"the difference ≥ +0.0 pts{SETTING}; not met: the difference "
                                      "≥ +0.0 pts)")


def test_a_later_iteration_that_got_worse_names_the_gain_gate_and_a_better_one_goes(tmp_path: Path,
                                                                                   store: Store) -> None:
    at = Layout(f"file://{tmp_path}")
    publish(at.eval_result(0), eval_result(SEVEN, set(SEVEN[:6])), store)
    publish(at.eval_result(1), eval_result(SEVEN, set(SEVEN[1:6]), iteration=1), store)
    detail = ("iteration 1 vs 0: 1 theorem lost and no gain (6/7 → 5/7; difference -14.3 pts, 95% interval -49.5 to "
              f"+24.4) (gate: the difference ≥ +0.0 pts{SETTING}; not met: the difference ≥ +0.0 pts)")
    worse = build_report(at.root, 1, PipelineConfig(start="previous"), store=store)
    assert (worse.go, worse.decision) == (False, f"no-go by the gain gate: {detail}")
    # under pipeline.start = "best" the worse iteration is not the next one's start: shown, not a stop
    best = build_report(at.root, 1, PipelineConfig(start="best"), store=store)
    assert [(g.name, g.passed, g.blocking) for g in best.gates] == [("baseline", True, True), ("gain", False, False),
                                                                     ("policy", False, False)]
    assert best.gates[1].detail == (f"{detail} — not a stop with pipeline.start = \"best\": the next iteration "
                                    "starts from the best so far (the policy gate)")
    assert (best.go, best.decision) == (True, "go: the baseline gate passed")
    # nor under "base" (the default): the next iteration trains the base model afresh, not the worse one
    base = build_report(at.root, 1, PipelineConfig(), store=store)
    assert [(g.name, g.passed, g.blocking) for g in base.gates] == [("baseline", True, True), ("gain", False, False)]
    assert base.gates[1].detail == (f"{detail} — not a stop with pipeline.start = \"base\": the next iteration "
                                    "trains the base model afresh on every proof so far")
    assert (base.go, base.decision) == (True, "go: the baseline gate passed")
    publish(at.eval_result(1), eval_result(SEVEN, set(SEVEN[1:]), iteration=1), store)  # t0 lost, t6 new
    even = build_report(at.root, 1, PipelineConfig(start="previous"), store=store)
    assert (even.go, even.decision) == (True, "go: the baseline and gain gates passed")
    assert even.gates[1].detail == ("iteration 1 vs 0: 1 gained and 1 lost (6/7 → 6/7; difference +0.0 pts, 95% "
                                    f"interval -40.7 to +40.7) (gate: the difference ≥ +0.0 pts{SETTING})")


def test_a_go_from_the_base_names_the_gates_it_passed(tmp_path: Path, store: Store) -> None:
    at = Layout(f"file://{tmp_path}")
    publish(at.eval_base(), eval_result(SEVEN, set(SEVEN[:2])), store)
    publish(at.eval_result(0), eval_result(SEVEN, set(SEVEN[:5])), store)
    report = build_report(at.root, 0, PipelineConfig(), store=store)
    assert [(g.name, g.passed) for g in report.gates] == [("baseline", True), ("gain", True)]
    assert report.gates[1].detail == ("iteration 0 vs base: 3 theorems gained and none lost (2/7 → 5/7; difference "
                                      f"+42.9 pts, 95% interval -6.1 to +70.9) (gate: the difference ≥ +0.0 "
                                      f"pts{SETTING})")
    assert (report.go, report.decision) == (True, "go: the baseline and gain gates passed")
    assert render_markdown(report).rstrip().endswith("Decision: **go**: the baseline and gain gates passed")
    # the same change read by the interval's lower end (-6.1 pts) is not a gain beyond chance
    strict = build_report(at.root, 0, PipelineConfig(gate_gain_interval=True), store=store)
    assert strict.decision.endswith(f"(gate: the lower end of its 95% interval ≥ +0.0 pts{SETTING}; not met: the "
                                    "lower end of its 95% interval ≥ +0.0 pts)")
    assert not strict.go


def test_lost_theorems_beyond_gate_max_lost_stop_a_gain(tmp_path: Path, store: Store) -> None:
    at = Layout(f"file://{tmp_path}")
    publish(at.eval_result(0), eval_result(SEVEN, {"t0", "t1"}), store)
    publish(at.eval_result(1), eval_result(SEVEN, {"t1", "t2", "t3", "t4"}, iteration=1), store)  # +3, -1
    assert build_report(at.root, 1, PipelineConfig(start="previous"), store=store).go
    report = build_report(at.root, 1, PipelineConfig(start="previous", gate_max_lost=0), store=store)
    assert report.decision == ("no-go by the gain gate: iteration 1 vs 0: 3 gained and 1 lost (2/7 → 4/7; difference "
                               f"+28.6 pts, 95% interval -21.4 to +63.9) (gate: the difference ≥ +0.0 pts{SETTING}, "
                               "at most 0 lost; not met: at most 0 lost)")
    assert build_report(at.root, 1, PipelineConfig(start="previous", gate_max_lost=1), store=store).go
    # under pipeline.start = "best" the same failed gain is a warning: the decision is the baseline's
    best = build_report(at.root, 1, PipelineConfig(gate_max_lost=0), store=store)
    assert [(g.name, g.passed, g.blocking) for g in best.gates[:2]] == [("baseline", True, True),
                                                                         ("gain", False, False)]
    assert (best.go, best.decision) == (True, "go: the baseline gate passed")


def test_a_floor_and_a_gain_failing_together_name_the_floor_first(tmp_path: Path, store: Store) -> None:
    at = Layout(f"file://{tmp_path}")
    publish(at.eval_base(), eval_result(SEVEN, {"t0"}), store)
    publish(at.eval_result(0), eval_result(SEVEN, set()), store)
    report = build_report(at.root, 0, PipelineConfig(gate_min_rate=0.5), store=store)
    assert report.decision == ("no-go by the baseline gate: the base policy (tiny) solves 1/7 (14.3%, 2.6–51.3%) of "
                               "bench at its largest budget, 50 (gate: ≥ 50.0% [pipeline.gate_min_rate = 0.5]) (also "
                               "failed: gain)")


# ------------------------------------------------------------------------ known false, ceiling, budget


def test_the_worlds_traps_are_marked_known_false_and_the_reachable_ceiling_is_shown(tmp_path: Path,
                                                                                   store: Store) -> None:
    traps = sorted(trap_names())[:2]
    world = [*traps, "world_algebra_000000", "world_logic_000000"]
    names = [*world, "hand_0", "hand_1"]
    sources = {name: "burnqed-world" if name in world else "burnqed-bundled" for name in names}
    at = Layout(f"file://{tmp_path}")
    publish(at.eval_result(0), eval_result(names, {"world_algebra_000000", "hand_0"}, spent=17, sources=sources),
            store)
    report = build_report(at.root, 0, PipelineConfig(), store=store)
    assert sorted(row.theorem for row in report.unsolved if row.known_false) == traps
    assert [(c.group, c.total, c.known_false, c.solved, c.reachable) for c in report.ceiling] == [
        ("all", 6, traps, 2, 4), ("burnqed-world", 4, traps, 1, 2), ("burnqed-bundled", 2, [], 1, 2)]
    markdown = render_markdown(report)
    assert ("2 of the 6 theorems are known to be false (the generated world's traps, false by construction with a "
            "recorded counterexample: `burnqed world stats`), marked **known false** below: no sound prover solves "
            "them, so the reachable ceiling is 4 of 6, of which the main eval solved 2.") in markdown
    assert ("| burnqed-bundled | 1 of 2 | 0 | 1 of 2 | exhausted 1 |\n"
            "| burnqed-world | 3 of 4 | 2 | 1 of 2 | exhausted 3 |") in markdown
    assert f"| `{traps[0]}` **known false** | exhausted | 17 | 1.0 s | 68 |" in markdown
    assert "| `world_logic_000000` | exhausted | 17 |" in markdown
    assert ("  reachable ceiling: 4 of 6 theorems (2 known false: the world's traps); 2 of them solved"
            in headline(report))
    # the budget used, explained where it is shown: 17 = 1 + search.revisits, every exhausted search here
    assert ("Step search expands a node at most 1 + `search.revisits` times (17 at the default 16 revisits), so a "
            "search in which no tactic tried at the root succeeded ends `exhausted` at exactly 1 + `search.revisits` "
            "expansions, whatever the budget. Here 4 of the 4 searches that ended `exhausted` before the budget "
            "stopped at 17 expansions.") in markdown
    assert "| theorem | reason | budget used (expansions, of 50) | time | edges | what happened |" in markdown


def test_a_proved_trap_is_an_alarm_not_a_solve(tmp_path: Path, store: Store) -> None:
    trap = sorted(trap_names())[0]
    at = Layout(f"file://{tmp_path}")
    publish(at.eval_result(0), eval_result([trap, "t0"], {trap}), store)
    report = build_report(at.root, 0, PipelineConfig(), store=store)
    assert [(c.group, c.known_false, c.solved, c.reachable) for c in report.ceiling] == [("all", [trap], 0, 1)]
    assert (f"**Proved although known to be false: `{trap}`.** A sound Lean never accepts a proof of a false "
            "statement") in render_markdown(report)


def test_a_benchmark_without_traps_shows_no_ceiling_line(tmp_path: Path, store: Store) -> None:
    at = Layout(f"file://{tmp_path}")
    publish(at.eval_result(0), eval_result(SEVEN, {"t0"}), store)
    report = build_report(at.root, 0, PipelineConfig(), store=store)
    assert [(c.group, c.known_false, c.reachable) for c in report.ceiling] == [("all", [], 7)]
    assert "known to be false" not in render_markdown(report)
    assert not any("reachable ceiling" in line for line in headline(report))


# ------------------------------------------------------------------------------------------ the base arm


def sft_zero(at: Layout, store: Store) -> None:
    from tests.eval.test_report_contents import sft_record

    with store.staged_output(at.sft(0), "sft") as folder:
        (folder / "sft.json").write_text(json.dumps(sft_record(0)))  # base_model None: the tiny embedded model


def test_a_base_arm_given_another_model_than_sfts_base_says_so(tmp_path: Path, store: Store) -> None:
    at = Layout(f"file://{tmp_path}")
    given = StageInputs(inputs={"model": InputStamp(uri="file:///models/prover")})
    base = eval_result(SEVEN, {"t0"}).model_copy(update={"model": "/models/prover", "made_from": given})
    publish(at.eval_base(), base, store)
    publish(at.eval_result(0), eval_result(SEVEN, {"t0", "t1"}), store)
    sft_zero(at, store)
    report = build_report(at.root, 0, PipelineConfig(), store=store)
    assert report.base_arm is not None
    assert (report.base_arm.model, report.base_arm.sft_base_model, report.base_arm.differs) == (
        "/models/prover", "the tiny embedded model", True)
    markdown = render_markdown(report)
    assert ("**The base arm is not the model SFT started from**: the base arm is `/models/prover`, evaluated untrained "
            "(eval-base), but iteration 0's SFT started from the tiny embedded model (sft.base_model): base → "
            "iteration 0 is not what training added to the base arm's model; set sft.base_model to the model to "
            "train.") in markdown.split("## Solve rate")[0]
    assert ("  warning: the base arm is /models/prover, evaluated untrained, but iteration 0's SFT started from the "
            "tiny embedded model (sft.base_model): base → iteration 0 is not what training added to it"
            in headline(report))


def test_a_base_arm_on_the_tiny_model_is_labelled_without_a_warning(tmp_path: Path, store: Store) -> None:
    at = Layout(f"file://{tmp_path}")
    tiny = StageInputs(inputs={"model": InputStamp(uri=None)})  # policy.model unset: the tiny embedded model
    publish(at.eval_base(), eval_result(SEVEN, {"t0"}).model_copy(update={"made_from": tiny}), store)
    publish(at.eval_result(0), eval_result(SEVEN, {"t0", "t1"}), store)
    sft_zero(at, store)
    report = build_report(at.root, 0, PipelineConfig(), store=store)
    assert report.base_arm is not None and not report.base_arm.differs
    markdown = render_markdown(report)
    assert ("The base arm is `tiny`, evaluated untrained (eval-base); iteration 0's SFT started from the tiny embedded "
            "model.") in markdown
    assert "not the model SFT started from" not in markdown
    assert not any("warning" in line for line in headline(report))
