"""The `[rl]` section: the GRPO stage that trains the policy on Lean's verdict of its own whole proofs
(docs/training.md, "GRPO stage")."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from burnqed.config.identity import neutral, recorded, shapes
from burnqed.config.section import Section

TRAINS = shapes("rl", "rl-checkpoints")  # what is trained, and how: the output and its checkpoints
# TRL 1.16's GRPOConfig.loss_type values (trl/trainer/grpo_config.py).
LossType = Literal["dapo", "grpo", "dr_grpo", "bnpo", "cispo", "sapo", "luspo", "vespo"]
# What samples the rollouts: HF `generate` inside the trainer, transformers' continuous batching through TRL, or an
# SGLang-compatible server through TRL's rollout_func (burnqed/rl/served.py).
RolloutEngine = Literal["trainer", "continuous", "served"]
CONTINUOUS_PAGE_TOKENS = 256  # tokens per page of continuous batching's KV cache (transformers' default page size)


class RlConfig(Section):
    """GRPO on Lean's verdict (`burnqed rl`, the `rl` stage of `iterate` when `enabled`): TRL's GRPOTrainer over the
    SFT output, the reward 1.0 for a completion that verifies as whole search counts a proof, else 0.0.

    Defaults fit the tiny embedded model on CPU (a few steps of small groups); the names in parentheses are TRL's
    GRPOConfig fields each setting becomes."""

    enabled: bool = Field(
        default=False,
        description="Run the rl stage in `iterate` between sft and export (export then reads its output); off = no "
        "rl stage. `burnqed rl` runs whatever this says. On, SFT trains the whole-proof format too unless "
        "sft.proof_examples is false (its effective value), and sft.joint is refused (the joint head would read "
        "another policy's hidden states than the export's). On the cluster: the rl step of the iteration workflow "
        "(the rl image, one GPU and the Lean workers in one container; docs/cluster.md).",
        json_schema_extra=recorded("the export's --sft: the rl output instead of the sft output; sft: through its "
                                   "effective proof_examples"),
    )
    theorems: Literal["unsolved", "all"] = Field(
        default="unsolved",
        description="Which theorems of the iteration's training set (search's: the prepared data's train and pool "
        "splits) RL prompts: 'unsolved' = those no search of an earlier iteration proved (the `proved` flag of the "
        "theorem results in the --trajectories given; at iteration 0, every theorem); 'all' = every one.",
        json_schema_extra=TRAINS,
    )
    num_generations: int = Field(
        default=4, ge=2,
        description="Group size (num_generations): completions sampled per prompt, whose rewards are normalised "
        "within the group. TRL's default is 8.",
        json_schema_extra=TRAINS,
    )
    prompts_per_step: int = Field(
        default=2, ge=1,
        description="Theorems (prompts) per optimizer step: each step samples prompts_per_step × num_generations "
        "completions (per_device_train_batch_size = their product, one generation per step).",
        json_schema_extra=TRAINS,
    )
    loss_type: LossType = Field(
        default="dapo",
        description="GRPO loss aggregation (loss_type), TRL's default 'dapo' (token losses normalised by the active "
        "tokens of the global batch); 'grpo' normalises per sequence, 'dr_grpo' by a constant "
        "(max_completion_tokens); the others as TRL 1.16 documents them.",
        json_schema_extra=TRAINS,
    )
    beta: float = Field(
        default=0.0, ge=0.0,
        description="KL coefficient (beta), TRL's default 0.0: no reference model is loaded and no KL is logged. "
        "Above 0 the reference is the SFT policy RL starts from (a frozen copy of its adapter, or of its weights).",
        json_schema_extra=TRAINS,
    )
    temperature: float = Field(
        default=1.0, gt=0.0, description="Sampling temperature of the rollouts (temperature), TRL's default 1.0.",
        json_schema_extra=TRAINS,
    )
    max_completion_tokens: int = Field(
        default=96, ge=1,
        description="Longest completion sampled, in tokens (max_completion_length; TRL's default 512): a completion "
        "cut there (no end-of-sequence token, and not the prompt format's stop string: whole mode's closing fence) is "
        "unfinished and earns 0.0 whatever its text, without a compile (counted in rl.json as `truncated`).",
        json_schema_extra=TRAINS,
    )
    max_prompt_tokens: int = Field(
        default=512, ge=1,
        description="Longest whole prompt RL samples from, in tokens (TRL's former max_prompt_length, 512): a theorem "
        "whose prompt is longer is left out (counted in rl.json). The cluster's GPU memory plan sizes generation for "
        "prompts_per_step × num_generations sequences of max_prompt_tokens + max_completion_tokens.",
        json_schema_extra=TRAINS,
    )
    rollout_engine: RolloutEngine = Field(
        default="trainer",
        description="What samples the rollouts inside the trainer: 'trainer' = HF `generate` on left-padded batches "
        "(TRL's default); 'continuous' = transformers' continuous batching (paged KV cache, sequences leave the batch "
        "as they finish; use_transformers_continuous_batching), its cache sized to the step's "
        "prompts_per_step × num_generations sequences of max_prompt_tokens + max_completion_tokens. The reward and "
        "the update are the same; the completions sampled differ (another sampler). 'served' = an SGLang-compatible "
        "server (rl.server_url; none: `burnqed serve` in the stage's own process) samples them through TRL's "
        "rollout_func from the trainer's token ids, the policy pushed to it after every optimizer step (an adapter "
        "hot-loaded under a versioned name, or full weights from disk), each rollout recording that version and the "
        "server's and the trainer's log-probs; a completion whose importance ratio exceeds 3 leaves the loss (TRL's "
        "vLLM correction); needs temperature 1.0. Recorded in rl.json (docs/training.md, \"Rollout engines\").",
        json_schema_extra=TRAINS,
    )
    server_url: str | None = Field(
        default=None,
        description="With rl.rollout_engine = 'served': the SGLang-compatible server's base URL (SGLang launched with "
        "--enable-lora for an adapter policy, on the adapter's base model; else on the SFT output), which must read "
        "the pushed versions' folders by the trainer's paths; None = `burnqed serve` started in the stage's own "
        "process on a free local port, and on the cluster the rl step's own SGLang sidecar on a GPU of its own (render "
        "sets this to it; docs/cluster.md, \"The rl step\"). Ignored by the other engines.",
        json_schema_extra=neutral("where the rollouts are sampled, not what: the server is given the run's weights"),
    )
    processes: int = Field(
        default=1, ge=1, le=8,
        description="Data-parallel training processes (one per GPU) inside one pod/machine: above 1, `burnqed rl` "
        "launches itself under torchrun with that many processes (gloo on CPU, NCCL on GPUs) and the cluster's rl pod "
        "asks for that many GPUs. The global batch (prompts_per_step × num_generations completions a step) stays the "
        "same for every count: each process samples and scores 1/processes of it (the product must divide by it), on "
        "a Lean pool of its own (lean.workers ÷ processes workers, at least 1); process 0 writes the logs and "
        "publishes. Each process samples with its own seed (rl.seed + its rank, TRL's), so another count samples "
        "other rollouts. Needs rollout_engine 'trainer' (docs/training.md, \"Data-parallel RL\").",
        json_schema_extra=shapes("rl", "rl-checkpoints", note="each process samples with rl.seed + its rank: another "
                                 "count samples other rollouts, and a checkpoint holds one sampler state per process"),
    )
    learning_rate: float = Field(
        default=1e-5, gt=0.0,
        description="Peak learning rate (TRL's default 1e-6); constant after the start (no warm-up, no decay).",
        json_schema_extra=TRAINS,
    )
    max_steps: int = Field(default=20, ge=1, description="Optimizer steps (max_steps).", json_schema_extra=TRAINS)
    save_steps: int = Field(
        default=10, ge=1,
        description="Checkpoint every this many steps into {output}-checkpoints (the resume point).",
        json_schema_extra=neutral("a cadence: when a checkpoint is saved"),
    )
    seed: int = Field(
        default=0, description="Seed of the theorem order, the adapter-free parts of the trainer and the sampling.",
        json_schema_extra=TRAINS,
    )

    @model_validator(mode="after")
    def _served_temperature(self) -> RlConfig:
        """The served engine's log-probs are before the temperature (burnqed serve; SGLang with
        SGLANG_RETURN_ORIGINAL_LOGPROB=1), the trainer's after it: only at 1.0 are they the same quantity."""
        if self.rollout_engine == "served" and self.temperature != 1.0:
            raise ValueError(f"rl.rollout_engine = 'served' needs rl.temperature = 1.0, got {self.temperature:g}: the "
                             "server reports log-probs before the temperature, the trainer after it")
        return self

    @model_validator(mode="after")
    def _processes(self) -> RlConfig:
        """Several processes split the global batch evenly, and sample with HF `generate` in each process: the
        served engine has one server whose weights one trainer pushes, and continuous batching's cache is sized and
        rehearsed for one process (engine_args), so both are refused rather than run untried."""
        if self.processes == 1:
            return self
        if self.rollout_engine != "trainer":
            why = ("one server, whose weights a single trainer pushes after each step (N trainers would each push "
                   "theirs)" if self.rollout_engine == "served" else
                   "its paged cache is sized for the whole step in one process and it is not rehearsed under torchrun")
            raise ValueError(f"rl.processes = {self.processes} needs rl.rollout_engine = 'trainer', got "
                             f"'{self.rollout_engine}': {why}")
        batch = self.prompts_per_step * self.num_generations
        if batch % self.processes:
            raise ValueError(f"rl.prompts_per_step × rl.num_generations = {batch} completions a step must divide by "
                             f"the {self.processes} data-parallel processes (rl.processes): the global batch stays the "
                             "same for every process count")
        return self
