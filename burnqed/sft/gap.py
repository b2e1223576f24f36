"""The QLoRA merge gap: a QLoRA adapter is trained against NF4-quantised base weights and then merged into the float
base it never saw (qlora#254, peft#2105). The export's logit check compares two float models and cannot see this;
here the held-out loss of both is measured.

    gap = measure_qlora_gap(source, sft, base_dir, merged, cfg)   # QloraGap: both losses, or why not measured
    gap.merged_loss - gap.adapter_nf4_loss                        # nats per supervised token

The examples are the SFT's own eval split, tokenized as SFT does; the adapter model is the one training ran
(`load_for_training("qlora", ...)`), the merged one the float32 model the export saves (docs/training.md, "Export").
"""

from __future__ import annotations

from pathlib import Path

from burnqed.config import SftConfig
from burnqed.policy.localmodel import resolve_device
from burnqed.sft.data import EncodedPair, encode_pairs, mix_pairs, read_base_pairs
from burnqed.sft.manifests import QloraGap, SftRecord
from burnqed.sft.model import HFModel, load_for_training
from burnqed.storage import Store


def measure_qlora_gap(source: Path, sft: SftRecord, base_dir: Path, merged: HFModel, cfg: SftConfig, *,
                      store: Store) -> QloraGap:
    """Both held-out losses (module docstring), or a record of why they were not measured."""
    if cfg.export_qlora_gap_examples == 0:
        return QloraGap(measured=False, reason="sft.export_qlora_gap_examples = 0")
    data_dir = store.local_input(sft.data)
    mix = mix_pairs(read_base_pairs(data_dir), [], iteration=0, base_subsample=cfg.base_subsample,
                    positive_upsample=1, eval_fraction=cfg.eval_fraction, seed=cfg.seed)
    if not mix.eval:
        return QloraGap(measured=False, reason=f"no held-out pairs in {sft.data} (sft.eval_fraction)")
    device = resolve_device(cfg.device)
    bf16 = cfg.bf16 and device.startswith("cuda")
    adapted = load_for_training("qlora", base_dir, source, cfg, device, bf16)
    rows = encode_pairs(adapted.tokenizer, sft.prompt_format, mix.eval[: cfg.export_qlora_gap_examples])
    adapter_loss = _mean_loss(adapted.model, rows, device)
    del adapted
    merged_loss = _mean_loss(merged, rows, str(merged.device))
    return QloraGap(measured=True, reason=f"{len(rows)} held-out examples of the SFT's eval split on {device}",
                    adapter_nf4_loss=adapter_loss, merged_loss=merged_loss, examples=len(rows))


def _mean_loss(model: HFModel, rows: list[EncodedPair], device: str) -> float:
    """Cross-entropy per supervised token (labels ≠ -100), summed over rows, one row at a time (no padding)."""
    import torch

    model.eval()
    total, tokens = 0.0, 0
    with torch.inference_mode():
        for row in rows:
            ids = torch.tensor([row.input_ids], device=device)
            labels = torch.tensor([row.labels], device=device)
            logits = model(input_ids=ids).logits.float()
            total += float(torch.nn.functional.cross_entropy(
                logits[0, :-1], labels[0, 1:], ignore_index=-100, reduction="sum"))
            tokens += int((labels[0, 1:] != -100).sum())
    return total / max(tokens, 1)
