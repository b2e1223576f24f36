"""The report's RL section (docs/pipeline.md, "Report and go/no-go gates"; docs/training.md, "GRPO stage"): for an
iteration whose plan has an rl stage (`rl.enabled`), what GRPO did, read from its output (`rl.json`, `rl-log.jsonl`).

    section = rl_section(at, iteration, enabled=cfg.rl.enabled, store=store)   # None: no rl stage in the plan
    lines = rl_markdown(section)
    plot_rl(section, folder)                                                    # rl_reward.png

Per step the mean reward, the share of prompts a rollout solved, KL (only with `rl.beta` > 0: else "not measured",
never 0), completion tokens and Lean seconds; the totals (steps, resumed step, theorems and those left out, wall
time). An rl stage whose files are missing or unreadable is named with why, and no figure of it is shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from burnqed import storage
from burnqed.errors import InputError
from burnqed.layout import Layout
from burnqed.report.section import ReportSection

if TYPE_CHECKING:
    from burnqed.config import Config


class RlStepRow(BaseModel):
    """One optimizer step of the rl stage (a line of its `rl-log.jsonl`)."""

    step: int
    mean_reward: float
    solved_share: float = Field(description="Share of the step's prompts with at least one verified rollout.")
    verified: int
    completions: int
    kl: float | None = Field(description="Mean per-token KL to the reference; None when not logged.")
    tokens: int = Field(description="Completion tokens sampled in the step.")
    lean_seconds: float
    wall_seconds: float


class RlSection(BaseModel):
    """What the rl stage of the reported iteration did, or why it could not be read (`problem`: then nothing else is
    filled)."""

    iteration: int
    output: str = Field(description="The rl stage's output folder.")
    problem: str | None = Field(default=None, description="Why its files could not be read (missing, unreadable, "
                                "inconsistent); None when they were.")
    beta: float | None = Field(default=None, description="rl.beta as run: KL is measured only when it is above 0.")
    method: str | None = None
    steps: int | None = Field(default=None, description="Optimizer steps trained.")
    resumed_from_step: int | None = None
    theorems: int | None = Field(default=None, description="Theorems prompted.")
    theorems_selection: str | None = Field(default=None, description="rl.theorems.")
    left_out_proved: int | None = None
    left_out_without_statement: int | None = None
    mean_reward: float | None = None
    wall_seconds: float | None = Field(default=None, description="The steps' wall time, summed over every run "
                                       "(a resumed run's journal holds the earlier run's steps).")
    train_seconds: float | None = Field(default=None, description="The last run's training loop.")
    trajectory: str | None = Field(default=None, description="The rollouts as a whole-mode trajectory (what the next "
                                   "iteration's SFT reads).")
    rows: list[RlStepRow] = Field(default_factory=list)
    switched_on: list[str] = Field(default_factory=list, description="The SFT settings rl.enabled turned on "
                                   "(`switched_by_rl`): the iteration's SFT trained them too, so a change from the "
                                   "base is theirs and RL's together.")

    @property
    def kl_measured(self) -> bool:
        return self.beta is not None and self.beta > 0


def switched_by_rl(cfg: Config) -> list[str]:
    """The SFT settings `rl.enabled` turned on: `sft.proof_examples` when it is unset and the search alone would not
    have turned it on (search.mode step, search.repair_rounds 0; `config.sft.proof_examples_on`)."""
    from burnqed.config.sft import proof_examples_on

    if not cfg.rl.enabled or proof_examples_on(cfg.sft, cfg.search, cfg.rl.model_copy(update={"enabled": False})):
        return []
    return ["sft.proof_examples"] if proof_examples_on(cfg.sft, cfg.search, cfg.rl) else []


def rl_section(at: Layout, iteration: int, *, enabled: bool, store: storage.Store,
               switched: Sequence[str] = ()) -> RlSection | None:
    """The RL section of `iteration` (None when the plan has no rl stage: `enabled` is `rl.enabled`); `switched`,
    the SFT settings rl.enabled turned on (`switched_by_rl`)."""
    if not enabled:
        return None
    from burnqed.rl.records import RL_RECORD, STEP_LOG, TRAJECTORIES, RlRecord, StepLog

    output = at.rl(iteration)
    section = RlSection(iteration=iteration, output=output, switched_on=list(switched))
    if not store.is_done(output):
        return section.model_copy(update={"problem": f"{output} is not published (no {storage.MARKER_NAME}): the rl "
                                          "stage has not finished"})
    try:
        record = store.read_model(storage.join(output, RL_RECORD), RlRecord, RL_RECORD)
        log = storage.join(output, STEP_LOG)
        if not store.exists(log):
            raise InputError(f"{STEP_LOG} is missing from {output}")
        steps: list[StepLog] = []
        for number, line in enumerate(store.read_bytes(log).decode("utf-8").splitlines(), start=1):
            if line.strip():
                try:
                    steps.append(StepLog.model_validate_json(line))
                except ValueError as exc:
                    raise InputError(f"{log} line {number}: {str(exc).splitlines()[0]}") from None
    except (InputError, UnicodeDecodeError) as exc:
        return section.model_copy(update={"problem": str(exc)})
    if [s.step for s in steps] != list(range(1, record.steps + 1)):
        return section.model_copy(update={"problem": f"{log} holds steps {[s.step for s in steps]}, but {RL_RECORD} "
                                          f"says {record.steps} steps were trained"})
    beta = record.settings.get("beta")
    rows = [RlStepRow(step=s.step, mean_reward=s.mean_reward, solved_share=s.solved_share, verified=s.verified,
                      completions=s.completions, kl=s.kl, tokens=s.tokens_generated, lean_seconds=s.lean_seconds,
                      wall_seconds=s.wall_seconds) for s in steps]
    trajectory = storage.join(output, TRAJECTORIES)
    return section.model_copy(update={
        "beta": float(beta) if isinstance(beta, int | float) else None, "method": record.method,
        "steps": record.steps, "resumed_from_step": record.resumed_from_step, "theorems": record.theorems,
        "theorems_selection": record.theorems_selection, "left_out_proved": record.left_out_proved,
        "left_out_without_statement": record.left_out_without_statement, "mean_reward": record.mean_reward,
        "wall_seconds": sum(s.wall_seconds for s in steps), "train_seconds": record.train_seconds,
        "trajectory": trajectory if store.exists(storage.join(trajectory, storage.MARKER_NAME)) else None,
        "rows": rows})


def _seconds(value: float) -> str:
    return f"{value:.1f} s" if value < 600 else f"{value / 60:.1f} min"


def rl_markdown(section: RlSection | None) -> list[str]:
    """report.md's RL section (nothing without an rl stage)."""
    if section is None:
        return []
    lines = [f"## RL: GRPO on Lean's verdict (iteration {section.iteration})", ""]
    if section.switched_on:
        lines += [f"rl.enabled also turned on {', '.join(f'`{name}`' for name in section.switched_on)} (unset, "
                  "rl.enabled sets it): this iteration's SFT trained whole proofs too, so a change from the base is "
                  "RL's and that setting's together.", ""]
    if section.problem is not None:
        return [*lines, f"**The rl stage's output could not be read**: {section.problem}. No figure of it is shown.",
                ""]
    resumed = f", resumed from step {section.resumed_from_step}" if section.resumed_from_step is not None else ""
    reward = "–" if section.mean_reward is None else f"{section.mean_reward:.3f}"
    lines += [f"`{section.output}` ({section.method}): {section.steps} steps{resumed} on {section.theorems} theorems "
              f"(rl.theorems = {section.theorems_selection}; left out: {section.left_out_proved} proved by an earlier "
              f"search, {section.left_out_without_statement} without a statement); mean reward {reward}; wall time "
              f"{_seconds(section.wall_seconds or 0.0)} over the steps ({_seconds(section.train_seconds or 0.0)} the "
              "last run's training loop).", ""]
    if section.trajectory is not None:
        lines += [f"The rollouts are kept as a whole-mode trajectory, `{section.trajectory}`, which the next "
                  "iteration's SFT reads (docs/training.md, \"GRPO stage\").", ""]
    kl_note = "" if section.kl_measured else " KL is not measured: rl.beta = 0 (no reference model)."
    lines += [f"Per step: the mean reward of its rollouts, the share of its prompts a rollout solved, KL to the SFT "
              f"policy, completion tokens and the seconds of its compiles.{kl_note}", "",
              "![mean reward per step](rl_reward.png)", "",
              "| step | mean reward | solved by a rollout | verified / rollouts | KL | completion tokens | Lean "
              "| wall |",
              "|---|---|---|---|---|---|---|---|"]
    for row in section.rows:
        kl = ("–" if row.kl is None else f"{row.kl:.4f}") if section.kl_measured else "not measured"
        lines.append(f"| {row.step} | {row.mean_reward:.3f} | {row.solved_share:.0%} | {row.verified} / "
                     f"{row.completions} | {kl} | {row.tokens} | {row.lean_seconds:.2f} s | {row.wall_seconds:.1f} s |")
    return [*lines, ""]


def rl_headline(section: RlSection | None) -> list[str]:
    """The headline's RL line: its steps and mean reward, and the SFT settings rl.enabled turned on; why its output
    could not be read; nothing without an rl stage."""
    if section is None:
        return []
    if section.problem is not None:
        return [f"  rl (iteration {section.iteration}): not read: {section.problem}"]
    reward = "–" if section.mean_reward is None else f"{section.mean_reward:.3f}"
    also = (f"; it also turned on {', '.join(section.switched_on)} in SFT (the change is both's)"
            if section.switched_on else "")
    return [f"  rl (iteration {section.iteration}): {section.steps} steps on {section.theorems} theorems, mean reward "
            f"{reward}{also}"]


def plot_rl(section: RlSection | None, folder: Path) -> None:
    """`rl_reward.png`: the mean reward and the share of prompts solved by a rollout against the step (not written
    without steps)."""
    if section is None or not section.rows:
        return
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    steps = [row.step for row in section.rows]
    ax.plot(steps, [row.mean_reward for row in section.rows], "-", marker=".", label="mean reward")
    ax.plot(steps, [row.solved_share for row in section.rows], "--", marker=".", label="prompts solved by a rollout")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("reward (0–1) / share of prompts")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    ax.set_title(f"Iteration {section.iteration}: GRPO reward per step ({section.theorems} theorems)",
                 fontsize="medium")
    fig.tight_layout()
    fig.savefig(folder / "rl_reward.png", dpi=100)
    plt.close(fig)


RL_SECTION: ReportSection[RlSection | None] = ReportSection(
    field="rl", build=lambda got: rl_section(got.at, got.iteration, enabled=got.rl, store=got.store,
                                             switched=got.rl_switched),
    markdown=rl_markdown, plots=plot_rl)

__all__ = ["RL_SECTION", "RlSection", "RlStepRow", "plot_rl", "rl_headline", "rl_markdown", "rl_section",
           "switched_by_rl"]
