"""Loading models for `burnqed sft` and `burnqed export`: the base model folder, the policy to train (full weights, a
LoRA adapter on a float base, or on a 4-bit NF4 base), and the tokenizer.

    base_dir = resolve_base_model(cfg.base_model, store=store)  # a folder, a URI (downloaded once) or the tiny model
    policy = load_for_training("lora", base_dir, init_dir=None, cfg=cfg, device="cpu", bf16=False)
    policy.model, policy.tokenizer, policy.trainable_params

A warm start (`init_dir`) continues what it trained: its weights for `full`, its adapter (trainable again) for
`lora`/`qlora`, over the same base (docs/training.md, "Training"). torch/transformers/peft are imported inside the
functions.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from burnqed.errors import ConfigError
from burnqed.policy.modelpath import ensure_model
from burnqed.policy.tiny import quiet_transformers
from burnqed.storage import Store

if TYPE_CHECKING:
    from burnqed.config import SftConfig

HFModel = Any  # transformers/peft models are untyped under mypy --strict
HFTokenizer = Any


@dataclass(frozen=True, slots=True)
class TrainablePolicy:
    """A model ready for the trainer, its tokenizer, and what is trained."""

    model: HFModel
    tokenizer: HFTokenizer
    adapter_rank: int | None
    trainable_params: int
    total_params: int


def quiet_imports(*, datasets: bool = True) -> None:
    """Silence import-time and progress-bar noise: bitsandbytes warns about an optional CPU kernel package (harmless),
    transformers and datasets draw their own bars; burnqed prints its own progress lines. `datasets=False` for a
    caller that builds no dataset (export, reading a tokenizer): silencing its bars imports the whole `datasets`
    package, pandas included (0.5–0.7 CPU-s once transformers is loaded)."""
    logging.getLogger("bitsandbytes.backends.cpu.ops").setLevel(logging.ERROR)
    quiet_transformers()
    if datasets:
        from datasets.utils.logging import disable_progress_bar

        disable_progress_bar()


@contextmanager
def quiet_warnings() -> Iterator[None]:
    """transformers/peft/trl warn about renamed arguments they pass to each other: nothing a user can act on."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=FutureWarning)
        yield


def resolve_base_model(base_model: str | None, *, store: Store) -> Path:
    """The local folder of `sft.base_model`: a folder, a URI (downloaded once into the cache) or, unset, the tiny
    embedded model (built on first use). ModelError when the folder is not a model."""
    # A URI is downloaded by ensure_model; a local path is checked there, with the folder a typo likely meant.
    return ensure_model(base_model, store=store)


def load_tokenizer(folder: Path) -> HFTokenizer:
    """The tokenizer saved in `folder` as burnqed reads every model folder (`burnqed.policy.modelfolder.load_tokenizer`:
    a base model as downloaded through a copy written by burnqed), with a pad token (EOS when it has none)."""
    from burnqed.policy.modelfolder import load_tokenizer as read_tokenizer

    quiet_imports(datasets=False)
    tokenizer: HFTokenizer = read_tokenizer(folder)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def saved_dtype(folder: Path) -> str:
    """The dtype a model folder's config records (`dtype`, or the older `torch_dtype`); float32 when none."""
    import json

    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "float32"
    value = config.get("dtype") or config.get("torch_dtype") or "float32"
    return str(value)


def load_for_training(method: str, base_dir: Path, init_dir: Path | None, cfg: SftConfig, device: str,
                      bf16: bool) -> TrainablePolicy:
    """The model to train with `method` (full | lora | qlora), warm-started from `init_dir` when given."""
    import torch
    from transformers import AutoModelForCausalLM, set_seed

    quiet_imports()
    # peft initialises adapters from the global RNG: seed before building them.
    set_seed(cfg.seed)
    tokenizer = load_tokenizer(init_dir if init_dir is not None else base_dir)
    extra: dict[str, Any] = {}
    if cfg.attn_implementation:
        extra["attn_implementation"] = cfg.attn_implementation
    if method == "full":
        # float32 master weights; bf16 (GPU) is autocast by the trainer.
        model = AutoModelForCausalLM.from_pretrained(init_dir or base_dir, dtype=torch.float32, **extra)
    elif method == "lora":
        base_dtype = torch.bfloat16 if bf16 else torch.float32
        model = AutoModelForCausalLM.from_pretrained(base_dir, dtype=base_dtype, **extra)
        model = _with_adapter(model, init_dir, cfg)
    elif method == "qlora":
        model = _load_4bit(base_dir, device, bf16, cfg, extra)
        model = _with_adapter(model, init_dir, cfg)
    else:
        raise ValueError(f"unknown SFT method {method!r}")
    model.config.use_cache = False
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    rank = None if method == "full" else int(getattr(model.peft_config["default"], "r", 0))
    return TrainablePolicy(model, tokenizer, rank, trainable, total)


def _load_4bit(base_dir: Path, device: str, bf16: bool, cfg: SftConfig, extra: dict[str, Any]) -> HFModel:
    import torch
    from peft import prepare_model_for_kbit_training
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    compute = torch.bfloat16 if bf16 else torch.float32
    config_class: Any = BitsAndBytesConfig  # untyped constructor
    prepare: Any = prepare_model_for_kbit_training
    quantization = config_class(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_use_double_quant=True,
        bnb_4bit_compute_dtype=compute,
    )
    model = AutoModelForCausalLM.from_pretrained(
        base_dir, quantization_config=quantization, dtype=compute, device_map={"": device}, **extra
    )
    return prepare(model, use_gradient_checkpointing=cfg.gradient_checkpointing)


def _with_adapter(model: HFModel, init_dir: Path | None, cfg: SftConfig) -> HFModel:
    from peft import LoraConfig, PeftModel, get_peft_model

    if init_dir is not None:
        return PeftModel.from_pretrained(model, init_dir, is_trainable=True)
    config = LoraConfig(
        r=cfg.lora_r,
        lora_alpha=cfg.lora_alpha,
        lora_dropout=cfg.lora_dropout,
        target_modules=list(cfg.target_modules),
        bias="none",
        task_type="CAUSAL_LM",
    )
    try:
        return get_peft_model(model, config)
    except ValueError as exc:  # peft's way to say a target module does not exist in this model
        raise ConfigError(f"sft.target_modules {cfg.target_modules}: {exc}") from None
