"""The saved documents of `burnqed rl` (docs/training.md, "GRPO stage"): in its output folder `rl.json` (`RlRecord`),
the step log `rl-log.jsonl` (one `StepLog` a step) and the rollouts `rollouts.jsonl` (one `Rollout` a completion), and
the rollouts as a whole-mode trajectory prefix `trajectories/`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

RL_RECORD = "rl.json"
CHECKPOINT_MARK = "complete.json"  # a checkpoint's last file (`CheckpointStore.seal`): after the journal
STEP_LOG = "rl-log.jsonl"
ROLLOUTS = "rollouts.jsonl"
TRAJECTORIES = "trajectories"  # the rollouts as a whole-mode trajectory prefix inside the output


class StepLog(BaseModel):
    """One line of `rl-log.jsonl`: an optimizer step."""

    model_config = ConfigDict(extra="forbid")

    step: int = Field(ge=1)
    mean_reward: float = Field(description="Mean reward of the step's completions.")
    solved_share: float = Field(description="Share of the step's prompts with at least one verified completion.")
    verified: int = Field(ge=0, description="Completions that earned 1.0.")
    completions: int = Field(ge=0)
    kl: float | None = Field(description="Mean per-token KL to the reference (TRL's; None when beta = 0).")
    loss: float | None = Field(description="The step's GRPO loss (TRL's).")
    tokens_generated: int = Field(ge=0, description="Completion tokens sampled in the step.")
    lean_seconds: float = Field(ge=0, description="Seconds of the step's compiles (LeanReward's, summed).")
    wall_seconds: float = Field(ge=0, description="Wall time of the step: generation, reward and update.")
    generation_seconds: float | None = Field(default=None, ge=0, description="Wall time from the step's start to "
                                             "its reward's call: sampling the rollouts (rl.rollout_engine), the "
                                             "prompts' tokenisation and the completions' decoding around it.")
    truncated: int = Field(default=0, ge=0, description="Completions cut at rl.max_completion_tokens (reward 0.0).")


class Rollout(BaseModel):
    """One line of `rollouts.jsonl`: a completion and Lean's verdict on it."""

    model_config = ConfigDict(extra="forbid")

    step: int = Field(ge=1)
    theorem: str
    prompt: str
    completion: str
    reward: float
    reason: str = Field(description="Why it earned 0.0 (the verdict's first line); empty for a verified proof.")
    tokens: int = Field(default=0, ge=0, description="Its completion tokens.")
    truncated: bool = Field(default=False, description="Cut at rl.max_completion_tokens: unfinished, 0.0 whatever "
                            "its text, never compiled.")
    feedback: str | None = Field(default=None, description="Lean's messages on a failed proof as whole search records "
                                 "them with repair on (`rl.rollouts.rollout_feedback`); None otherwise.")
    weights_version: int | None = Field(default=None, description="rl.rollout_engine 'served': the optimizer step "
                                        "whose weights the server sampled it with (the step before its own); None "
                                        "for the other engines (the trainer's current weights).")
    served_logprob: float | None = Field(default=None, description="'served': its log-prob as the server reported "
                                         "it (the sum of its tokens').")
    trainer_logprob: float | None = Field(default=None, description="'served': its log-prob under the trainer's "
                                          "weights of the same version; exp(trainer − served) above 3 left it out of "
                                          "the loss (TRL's vLLM correction).")


class RlRecord(BaseModel):
    """`rl.json` of a published RL output."""

    model_config = ConfigDict(extra="forbid")

    sft: str = Field(description="The SFT output RL started from (its sft.json is copied beside: how it loads).")
    iteration: int = Field(ge=0)
    method: str = Field(description="The SFT method: full weights, or the adapter trained further.")
    steps: int = Field(ge=0, description="Optimizer steps trained (global step at the end).")
    resumed_from_step: int | None = Field(description="Checkpoint step this run resumed from, if it did.")
    theorems: int = Field(ge=0, description="Theorems prompted.")
    theorems_selection: str = Field(description="rl.theorems.")
    left_out_proved: int = Field(ge=0, description="Theorems left out as proved by an earlier search.")
    left_out_without_statement: int = Field(ge=0)
    left_out_long_prompt: int = Field(default=0, ge=0, description="Prompts (whole or repair) left out: longer than "
                                      "rl.max_prompt_tokens.")
    repair_prompts: int = Field(default=0, ge=0, description="Repair prompts among the prompts served (one per "
                                "theorem with a failed proof in --trajectories, when search.repair_rounds > 0).")
    prompt_format: str = Field(description="The whole format of the prompts (search's).")
    settings: dict[str, Any] = Field(description="The rl section as run.")
    rollout_engine: str = Field(default="trainer", description="What sampled the rollouts (rl.rollout_engine).")
    truncated: int = Field(default=0, ge=0, description="Completions of the run's steps cut at "
                           "rl.max_completion_tokens: unfinished, reward 0.0 (resumed steps included).")
    served_logprob_gap: float | None = Field(default=None, description="'served': the largest |trainer − server| "
                                             "log-prob of a completion (resumed steps included); None for the other "
                                             "engines.")
    served_masked: int = Field(default=0, ge=0, description="'served': completions left out of the loss, their "
                               "importance ratio exp(trainer − server) above 3.")
    mean_reward: float | None = Field(description="Mean reward over every step's completions.")
    train_seconds: float = Field(ge=0, description="Wall time of the training loop (this run).")
    gpu_peak_gib: float | None = Field(default=None, description="On a GPU: the most memory torch allocated in this "
                                       "run (torch.cuda.max_memory_allocated, GiB; the CUDA context and the "
                                       "allocator's cache not included); None on CPU.")
    device: str
    written_at: datetime


__all__ = ["CHECKPOINT_MARK", "RL_RECORD", "ROLLOUTS", "STEP_LOG", "TRAJECTORIES", "RlRecord", "Rollout", "StepLog"]
