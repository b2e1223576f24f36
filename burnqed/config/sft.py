"""The `[sft]` section: fine-tuning the policy and exporting it (docs/training.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from burnqed.config.identity import neutral, recorded, shapes
from burnqed.config.rl import RlConfig
from burnqed.config.search import SearchConfig
from burnqed.config.section import Section
from burnqed.records.enums import SearchMode

ProofsPerTheorem = Literal["all", "shortest", "newest"]  # `sft.proofs_per_theorem`, as `proofs_kept` reads it

TRAINS = shapes("sft", "sft-checkpoints")  # what is trained, and how: the output and its checkpoints
# what iterations ≥ 1 train, and how: SFT's identity from iteration 1 (`runner.reuse.sft_inputs`), so that runs that
# differ only there share iteration 0; a checkpoint resumes under the same values at every iteration
LATER = shapes("sft-later", "sft-checkpoints")
CADENCE = neutral("a cadence: when progress is logged, measured or saved")
EFFECTIVE = ("its effective value (proof examples), which search.mode, search.repair_rounds and rl.enabled set "
             "when unset")
RESUMED_AT = "a checkpoint resumes under another value: the new peak applies from the resumed step"
ABORT = "a bound that stops a run: a run that finishes publishes the same"


class SftConfig(Section):
    """Supervised fine-tuning of the policy (`burnqed sft`) and its export (`burnqed export`), docs/training.md.

    Defaults fit the tiny embedded model on CPU (full fine-tuning, a few seconds); for a 7B model on a GPU see
    configs/deepseek-prover-v2-7b.toml (the burn-qed prototype's QLoRA settings)."""

    method: Literal["full", "lora", "qlora"] = Field(
        default="full",
        description="'full' trains every weight (the tiny model); 'lora' trains a peft adapter; 'qlora' loads the "
        "base in 4-bit NF4 (bitsandbytes) under a LoRA adapter (float32 compute on CPU, bf16 on GPU with bf16).",
        json_schema_extra=TRAINS,
    )
    base_model: str | None = Field(
        default=None,
        description="Model folder or URI (file://, s3://) to start iteration 0 from and to merge LoRA adapters "
        "into at export; unset = the tiny embedded model. Iterations ≥ 1 warm-start from --init.",
        json_schema_extra=recorded("an input, stamped by what its folder holds (base model)",
                                   reaches=("sft", "eval")),
    )
    lora_r: int = Field(default=16, ge=1, description="LoRA rank (a warm start keeps the adapter's own rank).",
                        json_schema_extra=TRAINS)
    lora_alpha: int = Field(default=32, ge=1, description="LoRA alpha (scale = alpha / r).", json_schema_extra=TRAINS)
    lora_dropout: float = Field(default=0.05, ge=0.0, lt=1.0, description="LoRA dropout.", json_schema_extra=TRAINS)
    target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        min_length=1,
        description="Module names LoRA wraps (all attention and MLP projections).",
        json_schema_extra=TRAINS,
    )
    learning_rate: float = Field(
        default=2e-3, gt=0,
        description="Peak learning rate of a cold start (iteration 0); the tiny model trains fully at 2e-3, a 7B "
        "LoRA at about 2e-4.",
        json_schema_extra=shapes("sft", note=RESUMED_AT),
    )
    lr_decay_per_iter: float = Field(
        default=0.5, gt=0, le=1.0,
        description="Warm starts (iteration i ≥ 1 with --init) use learning_rate × lr_decay_per_iter^i.",
        json_schema_extra=shapes("sft", note=RESUMED_AT),
    )
    scheduler: Literal["cosine", "linear", "constant", "constant_with_warmup"] = Field(
        default="cosine", description="Learning-rate schedule after warm-up.",
        json_schema_extra=TRAINS,
    )
    warmup_steps: int = Field(default=5, ge=0, description="Linear warm-up steps.", json_schema_extra=TRAINS)
    max_steps: int = Field(
        default=300, ge=1,
        description="Optimizer steps of a cold start (iteration 0). 300 lets the tiny model learn the generated "
        "world's train families (about 8 epochs of its ~940 pairs, about a minute on one CPU thread).",
        json_schema_extra=TRAINS,
    )
    warm_steps: int = Field(
        default=40, ge=1, description="Optimizer steps of a warm start (iteration ≥ 1 with --init).",
        json_schema_extra=TRAINS,
    )
    later_epochs: float = Field(
        default=1.0, ge=0,
        description="Iterations ≥ 1: the steps grow with the data: this many passes over the training rows (packed "
        "rows with packing), ceil(later_epochs × rows / (batch_size × grad_accum)) optimizer steps; 0 = the fixed "
        "counts instead, warm_steps (a warm start) or max_steps (from the base). Iteration 0 keeps max_steps.",
        json_schema_extra=LATER,
    )
    batch_size: int = Field(
        default=4, ge=1,
        description="Rows per device batch. With packing a row holds several examples (up to max_length tokens).",
        json_schema_extra=TRAINS,
    )
    grad_accum: int = Field(default=1, ge=1, description="Gradient accumulation steps per optimizer step.",
                            json_schema_extra=TRAINS)
    max_length: int = Field(
        default=512, ge=16,
        description="Token length of a packed row (or of one example without packing); longer examples are dropped "
        "(never truncated: a cut completion would teach the model not to stop) and counted in sft.json.",
        json_schema_extra=TRAINS,
    )
    packing: bool = Field(
        default=True,
        description="Pack examples into rows (best-fit decreasing) with position ids restarting per example and no "
        "cross-example attention; off = one example per row, padded.",
        json_schema_extra=TRAINS,
    )
    attn_implementation: str | None = Field(
        default=None,
        description="transformers attention kernel (sdpa, eager, flash_attention_2, ...); unset = transformers' "
        "default. With a flash-attention kernel and packing, a batch is flattened into one padding-free row "
        "(TRL's padding-free collator); otherwise each packed row gets its own block-diagonal mask.",
        json_schema_extra=shapes("sft", note="a checkpoint resumes under another kernel"),
    )
    weight_decay: float = Field(default=0.0, ge=0.0, description="AdamW weight decay.", json_schema_extra=TRAINS)
    max_grad_norm: float = Field(default=1.0, gt=0, description="Gradient clipping norm.", json_schema_extra=TRAINS)
    eval_fraction: float = Field(
        default=0.1, ge=0.0, lt=1.0,
        description="Held-out loss: the data's 'valid' split is used; only when it has none, this share of the "
        "train theorems (stable name hash) is held out instead (0 = no eval loss then).",
        json_schema_extra=TRAINS,
    )
    eval_steps: int = Field(default=20, ge=1, description="Evaluate the held-out loss every this many steps.",
                            json_schema_extra=CADENCE)
    save_steps: int = Field(
        default=20, ge=1, description="Checkpoint every this many steps into {output}-checkpoints (resume point).",
        json_schema_extra=CADENCE,
    )
    keep_checkpoints: bool = Field(
        default=False, description="Keep {output}-checkpoints after the output is published (default: delete them).",
        json_schema_extra=neutral("whether checkpoints are kept after the output is published"),
    )
    logging_steps: int = Field(default=10, ge=1, description="Log loss, lr and tokens/s every this many steps.",
                               json_schema_extra=CADENCE)
    base_subsample: int = Field(
        default=10000, ge=0,
        description="Iterations ≥ 1: base-data pairs sampled (seeded) alongside trajectory positives; all of them "
        "when there are fewer.",
        json_schema_extra=TRAINS,
    )
    positive_upsample: int = Field(
        default=5, ge=1,
        description="Iterations ≥ 1: each distinct trajectory positive (state_before, tactic) appears this many times "
        "(the prototype used 10 beside a 10k-pair base sample; 5 keeps the embedded world's ~940 base pairs from "
        "being forgotten).",
        json_schema_extra=TRAINS,
    )
    proofs_per_theorem: ProofsPerTheorem | None = Field(
        default=None,
        description="Iterations ≥ 1: which verified proofs of a theorem its positives and proof examples come from, "
        "among every search of it in the earlier trajectories (docs/training.md, 'One proof per theorem'): 'all' of "
        "them, or one: the 'shortest' (fewest tactics, then fewest characters, then the newest) or the 'newest' (the "
        "last iteration's that proved it, the proof its search found last). Unset = 'shortest', or 'all' when "
        "search.mode is sketch (a sketch search's proof is not one path); SFT's identity records the effective value.",
        json_schema_extra=LATER,
    )
    proof_examples: bool | None = Field(
        default=None,
        description="Also train the proof formats: at iteration 0 the whole format on the prepared data's replayed "
        "proofs (statement → the proof body of a train theorem's first replayed proof); from iteration 1 on the "
        "trajectories' verified proofs (statement → whole proof body; each state on a proof path → the rest of the "
        "proof) and the repair formats on the failed proofs whose Lean messages they recorded (→ a verified proof of "
        "the theorem), upsampled like the positives; unset = on when search.mode is whole or hybrid (the modes that "
        "ask for proofs), search.repair_rounds > 0, or rl.enabled (the rl stage samples whole proofs).",
        json_schema_extra=recorded(EFFECTIVE),
    )
    sketch_examples: bool | None = Field(
        default=None,
        description="Also train the planner's sketch format and the proved subgoals of sketch searches "
        "(docs/training.md, 'Sketch examples'): the sketch every verified proof with top-level `have NAME : P := …` "
        "steps is (statement → that proof with each have's proof `sorry`; at iteration 0 the prepared data's "
        "replayed proofs, from iteration 1 the trajectories' proofs and sketch searches' verified sketches), and "
        "every subgoal of a verified sketch as a theorem of its own (its state → its first tactic, → its whole proof; "
        "its declaration → its whole proof); unset = on when search.mode is sketch (the planner is then asked for "
        "sketches).",
        json_schema_extra=recorded("its effective value (sketch examples), which search.mode sets when unset"),
    )
    processes: int = Field(
        default=1, ge=1, le=8,
        description="Data-parallel training processes (one per GPU) inside one pod/machine: above 1, `burnqed sft` "
        "launches itself under torchrun with that many processes (gloo on CPU, NCCL on GPUs) and the cluster's SFT "
        "pod asks for that many GPUs. The global batch (batch_size × grad_accum rows, joint_groups groups) stays "
        "the same for every count: each process takes 1/processes of it (batch_size must divide by it).",
        json_schema_extra=shapes("sft", note="a checkpoint resumes under another count: the global batch is the same"),
    )
    joint: bool = Field(
        default=False,
        description="Iterations ≥ 1: train the policy and the value model's head together (docs/training.md, "
        "'Joint training'): loss = SFT cross-entropy + joint_weight × InfoNCE of the goal-conditioned energy head on "
        "the backbone's pooled hidden states (the `ebm` section's head, negatives, pooling and temperature bounds); "
        "the SFT output then also holds the head, which train-ebm publishes instead of training one.",
        json_schema_extra=shapes("sft", note="a checkpoint records it as an input (joint training)"),
    )
    joint_weight: float = Field(default=1.0, ge=0.0, description="Joint training: λ in L_sft + λ·L_infonce.",
                                json_schema_extra=TRAINS)
    joint_head_learning_rate: float = Field(
        default=1e-3, gt=0,
        description="Joint training: peak learning rate of the head (the backbone/LoRA uses learning_rate, decayed "
        "per iteration); both follow the scheduler.",
        json_schema_extra=shapes("sft", note=RESUMED_AT),
    )
    joint_groups: int = Field(
        default=8, ge=1, description="Joint training: InfoNCE groups (a positive + ebm.negatives negatives) per step.",
        json_schema_extra=TRAINS,
    )
    joint_log_every: int = Field(
        default=50, ge=1,
        description="Joint training: log the head's temperature, the SFT loss and InfoNCE every this many steps (the "
        "temperature bounds ebm.temperature_min/max are checked after every step).",
        json_schema_extra=CADENCE,
    )
    joint_probe_every: int = Field(
        default=50, ge=1,
        description="Joint training: measure embedding separation (centroid L2, linear probe on held-out states, "
        "held-out rank-1 by depth) every this many steps, and at the end.",
        json_schema_extra=CADENCE,
    )
    joint_min_centroid_l2: float | None = Field(
        default=None, ge=0.0,
        description="Joint training: abort when a probe's centroid L2 falls below this (None = never).",
        json_schema_extra=neutral(ABORT),
    )
    joint_max_sft_loss: float | None = Field(
        default=None, gt=0.0,
        description="Joint training: abort when the SFT loss (mean since the last log) is above this after "
        "joint_abort_after steps (None = never).",
        json_schema_extra=neutral(ABORT),
    )
    joint_abort_after: int = Field(
        default=20, ge=0, description="Joint training: steps before the SFT-loss abort rule applies.",
        json_schema_extra=neutral(ABORT),
    )
    joint_max_embedding_diff: float = Field(
        default=1e-3, gt=0,
        description="Joint training: `train-ebm --joint` publishes the head only when the exported policy's encoder "
        "reproduces the trained backbone's vectors of the recorded reference states within this fraction of their "
        "mean norm (max absolute difference); more means search would score other embeddings than the head's.",
        json_schema_extra=neutral("a check: train-ebm --joint publishes the head or refuses, it does not change it"),
    )
    bf16: bool = Field(default=False, description="bf16 mixed precision (GPU only; ignored on CPU).",
                       json_schema_extra=TRAINS)
    gradient_checkpointing: bool = Field(default=False, description="Trade compute for memory (large models).",
                                         json_schema_extra=neutral("trades compute for memory"))
    cpu_threads: int | None = Field(
        default=1, ge=1,
        description="torch threads while training on CPU; unset = torch's default. 1 by default: the tiny model's "
        "matrices are too small to split, and a second thread competing with other work on a 2-core machine made "
        "steps 4× slower (measured).",
        json_schema_extra=neutral("torch threads"),
    )
    seed: int = Field(default=0, description="Seed of data sampling, data order and adapter initialisation.",
                      json_schema_extra=TRAINS)
    device: str = Field(default="auto", description="auto | cpu | cuda | cuda:N.",
                        json_schema_extra=neutral("where training runs"))
    export_dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        default="auto",
        description="dtype of the exported weights; 'auto' = the base model's saved dtype (bf16 for DeepSeek-Prover, "
        "float32 for the tiny model). Merging always happens in float32.",
        json_schema_extra=shapes("export"),
    )
    export_max_shard_size: str = Field(
        default="5GB", description="Largest safetensors shard of an export (e.g. '2GB', '500MB').",
        json_schema_extra=shapes("export"),
    )
    export_max_logit_diff: float = Field(
        default=1e-2, gt=0,
        description="Export check: the merged model's float32 logits on a probe prompt may differ from the adapter "
        "model's by at most this much (max absolute difference); more means the merge is broken.",
        json_schema_extra=neutral("a check: the export is published or refused, not changed"),
    )
    export_qlora_gap_examples: int = Field(
        default=64, ge=0,
        description="QLoRA exports: held-out examples (the SFT's eval split) on which the loss of the adapter on its "
        "NF4 base and of the merged export are measured and recorded (0 = do not measure).",
        json_schema_extra=neutral("what the export measures about itself, not its weights"),
    )
    export_max_qlora_gap: float | None = Field(
        default=0.05,
        description="QLoRA exports: the merged export's held-out loss may exceed the adapter-on-NF4 loss by at most "
        "this many nats per supervised token, else the export fails with both figures (None = record only).",
        json_schema_extra=neutral("a check: the export is published or refused, not changed"),
    )


def proof_examples_on(sft: SftConfig, search: SearchConfig, rl: RlConfig) -> bool:
    """Whether SFT trains the proof and repair formats: `sft.proof_examples`, or when unset, whether the search asks
    for proofs (whole or hybrid mode), records Lean's messages on failed ones (`search.repair_rounds` > 0), or the
    rl stage samples whole proofs from SFT's output (`rl.enabled`: a policy never trained on the whole format ends
    every completion at once, and every reward is 0)."""
    if sft.proof_examples is not None:
        return sft.proof_examples
    return search.mode is not SearchMode.STEP or search.repair_rounds > 0 or rl.enabled


def sketch_examples_on(sft: SftConfig, search: SearchConfig) -> bool:
    """Whether SFT trains the sketch format and the proved subgoals as theorems: `sft.sketch_examples`, or when unset,
    whether the search asks for sketches (`search.mode` sketch: the planner format must be trained)."""
    if sft.sketch_examples is not None:
        return sft.sketch_examples
    return search.mode is SearchMode.SKETCH


def proofs_kept(sft: SftConfig, search: SearchConfig) -> ProofsPerTheorem:
    """Which verified proofs of a theorem iterations ≥ 1 train on: `sft.proofs_per_theorem`, or when unset the
    shortest, except in sketch mode, where a search's proof is a sketch and its subgoals' proofs (not one path) and
    every proof trains ('all')."""
    if sft.proofs_per_theorem is not None:
        return sft.proofs_per_theorem
    return "all" if search.mode is SearchMode.SKETCH else "shortest"
