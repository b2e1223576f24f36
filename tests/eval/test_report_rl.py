"""The report's RL section (`report.rl_steps`): for an iteration whose plan has an rl stage, the reward per step, the
share of prompts a rollout solved, KL only when rl.beta > 0 ("not measured" otherwise, never 0), tokens and Lean
seconds, the totals and a reward plot; no section without an rl stage; an rl output that is missing or unreadable is
named, never shown as zeros."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from burnqed.config import PipelineConfig, RlConfig
from burnqed.eval.result import write_eval_result
from burnqed.layout import Layout
from burnqed.records.enums import SearchMode
from burnqed.report.build import build_report, write_report
from burnqed.report.markdown import render_markdown
from burnqed.report.rl_steps import rl_markdown, rl_section
from burnqed.rl.records import RL_RECORD, STEP_LOG, RlRecord, StepLog
from burnqed.storage import Store
from tests.eval.test_compare import BASE, costed

STEPS = [StepLog(step=1, mean_reward=0.25, solved_share=0.5, verified=2, completions=8, kl=None, loss=0.1,
                 tokens_generated=310, lean_seconds=0.5, wall_seconds=2.0),
         StepLog(step=2, mean_reward=0.5, solved_share=1.0, verified=4, completions=8, kl=None, loss=0.05,
                 tokens_generated=290, lean_seconds=0.25, wall_seconds=1.5)]


def publish(store: Store, root: str, *, beta: float = 0.0, kl: float | None = None, steps: int = 2,
            log: str | None = None) -> str:
    """A published rl output of iteration 0 under `root`: its record and step log (`log` replaces the log's text)."""
    output = Layout(root).rl(0)
    record = RlRecord(sft="runs/iter_0/sft", iteration=0, method="lora", steps=steps, resumed_from_step=1, theorems=3,
                      theorems_selection="unsolved", left_out_proved=4, left_out_without_statement=1,
                      prompt_format="plain-whole", settings=RlConfig(beta=beta).model_dump(mode="json"),
                      mean_reward=0.375, train_seconds=1.5, device="cpu", written_at=datetime(2026, 1, 1, tzinfo=UTC))
    lines = "".join(s.model_copy(update={"kl": kl}).model_dump_json() + "\n" for s in STEPS)
    with store.staged_output(output, "rl") as folder:
        (folder / RL_RECORD).write_text(record.model_dump_json(), encoding="utf-8")
        (folder / STEP_LOG).write_text(lines if log is None else log, encoding="utf-8")
    return output


def test_the_section_shows_each_step_and_the_totals_and_kl_only_when_measured(tmp_path: Path, store: Store) -> None:
    root = f"file://{tmp_path}/run"
    output = publish(store, root)
    section = rl_section(Layout(root), 0, enabled=True, store=store)
    assert section is not None and section.problem is None
    assert [(r.step, r.mean_reward, r.solved_share, r.kl, r.tokens, r.lean_seconds) for r in section.rows] == [
        (1, 0.25, 0.5, None, 310, 0.5), (2, 0.5, 1.0, None, 290, 0.25)]
    assert (section.steps, section.resumed_from_step, section.theorems, section.left_out_proved,
            section.left_out_without_statement, section.wall_seconds, section.train_seconds) == (
        2, 1, 3, 4, 1, 3.5, 1.5)
    text = "\n".join(rl_markdown(section))
    assert f"`{output}` (lora): 2 steps, resumed from step 1 on 3 theorems (rl.theorems = unsolved; left out: 4 " \
           "proved by an earlier search, 1 without a statement); mean reward 0.375; wall time 3.5 s over the steps " \
           "(1.5 s the last run's training loop)." in text
    assert "KL is not measured: rl.beta = 0" in text
    assert "| 1 | 0.250 | 50% | 2 / 8 | not measured | 310 | 0.50 s | 2.0 s |" in text
    assert "| 2 | 0.500 | 100% | 4 / 8 | not measured | 290 | 0.25 s | 1.5 s |" in text
    # With a KL term the trainer's KL is shown as logged.
    measured = tmp_path / "kl"
    publish(store, f"file://{measured}", beta=0.04, kl=0.0125)
    kl = rl_section(Layout(f"file://{measured}"), 0, enabled=True, store=store)
    assert kl is not None and kl.beta == 0.04
    shown = "\n".join(rl_markdown(kl))
    assert "| 1 | 0.250 | 50% | 2 / 8 | 0.0125 | 310 | 0.50 s | 2.0 s |" in shown and "not measured" not in shown


def test_no_rl_stage_no_section_and_an_unreadable_one_is_named_without_figures(tmp_path: Path, store: Store) -> None:
    root = f"file://{tmp_path}/run"
    assert rl_section(Layout(root), 0, enabled=False, store=store) is None and rl_markdown(None) == []
    missing = rl_section(Layout(root), 0, enabled=True, store=store)
    assert missing is not None and missing.problem == f"{Layout(root).rl(0)} is not published (no _SUCCESS.json): " \
        "the rl stage has not finished"
    assert (missing.rows, missing.steps, missing.mean_reward) == ([], None, None)
    assert rl_markdown(missing) == ["## RL: GRPO on Lean's verdict (iteration 0)", "",
                                    f"**The rl stage's output could not be read**: {missing.problem}. No figure of it "
                                    "is shown.", ""]
    output = publish(store, root, log=STEPS[0].model_dump_json() + "\n{not json\n")
    broken = rl_section(Layout(root), 0, enabled=True, store=store)
    assert broken is not None and broken.problem is not None and broken.rows == []
    assert broken.problem.startswith(f"{output}/{STEP_LOG} line 2: ")
    publish(store, root, steps=3)  # the record says 3 steps, the log holds 2
    short = rl_section(Layout(root), 0, enabled=True, store=store)
    assert short is not None and short.problem == f"{output}/{STEP_LOG} holds steps [1, 2], but {RL_RECORD} says 3 " \
        "steps were trained"


@pytest.mark.slow
def test_the_iteration_report_has_the_rl_section_and_its_plot(tmp_path: Path, store: Store) -> None:
    root = f"file://{tmp_path}/run"
    write_eval_result(costed(BASE, [10, 30], SearchMode.STEP, 100), Layout(root).eval_result(0), store=store)
    publish(store, root)
    report = build_report(root, 0, PipelineConfig(), rl=True, store=store)
    assert report.rl is not None and [r.step for r in report.rl.rows] == [1, 2]
    folder = tmp_path / "report"
    write_report(report, folder)
    markdown = (folder / "report.md").read_text(encoding="utf-8")
    assert markdown.index("## Search modes") < markdown.index("## RL: GRPO on Lean's verdict") < markdown.index(
        "## Provenance")
    assert "![mean reward per step](rl_reward.png)" in markdown and (folder / "rl_reward.png").stat().st_size > 0
    assert '"solved_share": 0.5' in (folder / "report.json").read_text(encoding="utf-8")
    plain = build_report(root, 0, PipelineConfig(), store=store)  # rl.enabled off: the plan has no rl stage
    assert plain.rl is None and "## RL" not in render_markdown(plain)


def test_the_headline_names_rl_and_the_sft_settings_it_turned_on(tmp_path: Path, store: Store) -> None:
    from burnqed.config import Config, SearchConfig, SftConfig
    from burnqed.report.build import headline
    from burnqed.report.rl_steps import switched_by_rl

    # rl.enabled turns sft.proof_examples on only when it is unset and the search alone would not.
    assert switched_by_rl(Config(rl=RlConfig(enabled=True))) == ["sft.proof_examples"]
    assert switched_by_rl(Config()) == []
    assert switched_by_rl(Config(rl=RlConfig(enabled=True), sft=SftConfig(proof_examples=True))) == []
    assert switched_by_rl(Config(rl=RlConfig(enabled=True), search=SearchConfig(mode=SearchMode.WHOLE))) == []
    assert switched_by_rl(Config(rl=RlConfig(enabled=True), search=SearchConfig(repair_rounds=1))) == []
    root = f"file://{tmp_path}/run"
    write_eval_result(costed(BASE, [10, 30], SearchMode.STEP, 100), Layout(root).eval_result(0), store=store)
    publish(store, root)
    report = build_report(root, 0, PipelineConfig(), rl=True, rl_switched=["sft.proof_examples"], store=store)
    assert [line for line in headline(report) if "rl (" in line] == [
        "  rl (iteration 0): 2 steps on 3 theorems, mean reward 0.375; it also turned on sft.proof_examples in SFT "
        "(the change is both's)"]
    said = ("rl.enabled also turned on `sft.proof_examples` (unset, rl.enabled sets it): this iteration's SFT trained "
            "whole proofs too, so a change from the base is RL's and that setting's together.")
    assert said in rl_markdown(report.rl)
    alone = build_report(root, 0, PipelineConfig(), rl=True, store=store)
    assert [line for line in headline(alone) if "rl (" in line] == [
        "  rl (iteration 0): 2 steps on 3 theorems, mean reward 0.375"]
    assert not any("turned on" in line for line in rl_markdown(alone.rl))
    assert not any("rl (" in line for line in headline(build_report(root, 0, PipelineConfig(), store=store)))
