"""TRL's GRPOTrainer as `burnqed rl` builds it: RlConfig's fields under GRPOConfig's names (`GRPO_FIELDS`, the one place
of the renames) and the rollout engine's arguments (`engine_args`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from burnqed.config import RlConfig
from burnqed.config.rl import CONTINUOUS_PAGE_TOKENS
from burnqed.rl.grpo_step import RecordingReward


def build_trainer(model: Any, tokenizer: Any, rows: list[dict[str, str]], reward: RecordingReward, rl: RlConfig, *,
                  device: str, bf16: bool, output_dir: Path, callbacks: Sequence[Any] = (),
                  rollout_func: Any = None, processes: int = 1) -> Any:
    """TRL's GRPOTrainer: one generation of `prompts_per_step` × `num_generations` completions per optimizer step (the
    global batch: each of `processes` data-parallel processes samples 1/processes of it), the rows read in order
    (`ordered_rows`), a constant learning rate, a checkpoint every `save_steps`; the rollouts sampled by
    `rollout_func` when given (rl.rollout_engine 'served': `rl.served.ServedRollouts`)."""
    from datasets import Dataset
    from transformers import PrinterCallback, ProgressCallback
    from trl.trainer.grpo_config import GRPOConfig
    from trl.trainer.grpo_trainer import GRPOTrainer

    args = GRPOConfig(
        output_dir=str(output_dir),
        **grpo_fields(rl),
        per_device_train_batch_size=rl.prompts_per_step * rl.num_generations // processes,
        gradient_accumulation_steps=1,
        lr_scheduler_type="constant",
        warmup_steps=0,
        logging_steps=1,
        save_strategy="steps",
        save_total_limit=None,  # the older checkpoint goes once the newer is sealed (RlCallback.on_save)
        shuffle_dataset=False,
        use_cpu=device == "cpu",
        bf16=bf16,
        report_to="none",
        disable_tqdm=True,
        generation_kwargs={"use_cache": True},
        **engine_args(rl),
    )
    model.config.use_cache = True  # generation reads its KV cache; training passes no cache
    funcs: list[Any] = [reward]  # async: TRL awaits it (its annotation names the synchronous form alone)
    trainer = GRPOTrainer(model=model, reward_funcs=funcs, args=args, train_dataset=Dataset.from_list(rows),
                          processing_class=tokenizer, callbacks=list(callbacks), rollout_func=rollout_func)
    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    return trainer


# RlConfig's fields GRPOConfig takes as they are, each under the GRPOConfig names it becomes: the one place of the
# renames (tests/rl/test_stage.py checks every name is a GRPOConfig field, and that every RlConfig field is here or in
# DERIVED_FIELDS).
GRPO_FIELDS: dict[str, tuple[str, ...]] = {
    "num_generations": ("num_generations",),
    "loss_type": ("loss_type",),
    "beta": ("beta",),
    "temperature": ("temperature",),
    "max_completion_tokens": ("max_completion_length",),
    "learning_rate": ("learning_rate",),
    "max_steps": ("max_steps",),
    "save_steps": ("save_steps",),
    "seed": ("seed", "data_seed"),
}
# RlConfig's other fields: what each becomes instead of a GRPOConfig field of its own.
DERIVED_FIELDS: dict[str, str] = {
    "enabled": "whether iterate runs the stage",
    "theorems": "the theorems the rows prompt (select_theorems)",
    "prompts_per_step": "per_device_train_batch_size: prompts_per_step × num_generations ÷ processes",
    "processes": "torchrun's processes (the command relaunches itself), the divisor of per_device_train_batch_size",
    "max_prompt_tokens": "the rows left out (fit_prompts), the continuous engine's cache (engine_args)",
    "rollout_engine": "engine_args; 'served': the rollout_func (rl.served.served_engine)",
    "server_url": "the served engine's server (rl.served.served_engine); none: `burnqed serve` in process",
}


def grpo_fields(rl: RlConfig) -> dict[str, Any]:
    """GRPOConfig's keyword arguments that `rl` gives as they are (`GRPO_FIELDS`)."""
    return {name: getattr(rl, key) for key, names in GRPO_FIELDS.items() for name in names}


# transformers 5.19's continuous batching: max_batch_tokens when none is given (generation/continuous_batching/cache.py,
# PagedAttentionMemoryHandler); engine_args never asks for more, so a large step batches its prefills as before.
CONTINUOUS_BATCH_TOKENS = 8192


def engine_args(rl: RlConfig) -> dict[str, Any]:
    """GRPOConfig's fields for `rl.rollout_engine`: none for 'trainer' (HF `generate`); for 'continuous'
    transformers' continuous batching with its paged KV cache sized to the step (each of prompts_per_step ×
    num_generations sequences its pages of max_prompt_tokens + max_completion_tokens; else it takes half the free
    memory, TRL's default, which the GPU plan cannot count), refused only past 0.9 of the free memory (TRL's 0.5 would
    refuse a cache the plan fits), and its batch at most the step's prompt tokens (the default, 8,192, at most): under
    sdpa/eager attention it allocates and fills a float mask of max_batch_tokens × (cache + batch) tokens twice a
    step (transformers 5.19, input_outputs.py:126 and 302; 369 MB for 12 pages, ~0.4 s a step on CPU), and the
    step's prefills fit the smaller batch as they fitted the default (the same batches, the same samples). No seed of
    its own: it draws one from torch's generator, which the trainer seeds with rl.seed and a checkpoint restores (a
    fixed seed would reset that generator at every step's generation)."""
    if rl.rollout_engine != "continuous":  # 'trainer': HF generate; 'served': TRL's rollout_func
        return {}
    sequences = rl.prompts_per_step * rl.num_generations
    pages = -(-(rl.max_prompt_tokens + rl.max_completion_tokens) // CONTINUOUS_PAGE_TOKENS)
    batch_tokens = min(sequences * rl.max_prompt_tokens, CONTINUOUS_BATCH_TOKENS)
    return {"use_transformers_continuous_batching": True,
            "transformers_continuous_batching_config": {"num_blocks": sequences * pages, "max_memory_percent": 0.9,
                                                        "max_batch_tokens": batch_tokens}}


__all__ = ["DERIVED_FIELDS", "GRPO_FIELDS", "build_trainer", "engine_args", "grpo_fields"]
