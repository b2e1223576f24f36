"""`burnqed export`: turn an SFT output into a plain model folder that SGLang, `burnqed serve` and `LocalModel` load
(standard Hugging Face layout: config.json, safetensors shards + index, tokenizer).

    burnqed export --model runs/iter_0/sft --output runs/iter_0/export

    outcome = run_export(ExportRequest(model=..., output=...), cfg.sft, store=store)
    print(outcome.summary)

An adapter is merged into its float32 base and checked against the adapter model's logits (a QLoRA adapter's
held-out loss gap too, `burnqed.sft.gap`); the folder is written through `burnqed.policy.modelfolder`, and loaded
and asked for one tactic before it is published. What each check compares and refuses: docs/training.md, "Export".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from burnqed.config import SftConfig
from burnqed.errors import InputError, ModelError
from burnqed.policy.base import Sampling
from burnqed.policy.modelfolder import probe_mismatch, tokenizer_probe, write_config, write_tokenizer
from burnqed.provenance import StageInputs
from burnqed.sft.manifests import (
    EXPORT_RECORD,
    ExportRecord,
    SftRecord,
    model_fingerprint,
    read_sft_record,
    share_files,
)
from burnqed.sft.model import HFModel, load_tokenizer, quiet_imports, quiet_warnings, resolve_base_model
from burnqed.storage import Store, join
from burnqed.text.completion import extract_completion
from burnqed.text.prompt import PromptFormat, build_completion, build_prompt, stop_strings

PROBE_STATE = "x : ℕ\nh₀ : 0 < x\n⊢ x + 0 = x"
PROBE_TACTIC = "simp"
PROBE_TOKENS = 48
DTYPES = ("float32", "bfloat16", "float16")


@dataclass(frozen=True, slots=True)
class ExportRequest:
    """The command line of one `burnqed export` run."""

    model: str
    output: str
    force: bool = False
    made_from: StageInputs | None = None  # recorded in the output's completion marker (burnqed.runner.reuse)


@dataclass(frozen=True, slots=True)
class ExportOutcome:
    """What an export did: `skipped` when the output was already done (its record is read back)."""

    output: str
    record: ExportRecord
    skipped: bool

    @property
    def summary(self) -> str:
        r = self.record
        if self.skipped:
            return f"export {self.output} is done already ({r.params:,} params, {r.dtype}); pass --force to redo"
        total = sum(r.files.values())
        diff = f", merge check max |Δlogit| {r.max_logit_diff:.2e}" if r.max_logit_diff is not None else ""
        lines = [
            f"exported {r.source} ({r.method}) -> {self.output}: {r.params:,} params, {r.dtype}, "
            f"{_size(total)} in {len(r.files)} files{diff}",
            *(f"  {name:<40} {_size(size):>10}" for name, size in sorted(r.files.items())),
            f"  probe: {r.probe_tactic!r}",
            *([f"  QLoRA gap: {r.qlora_gap.summary}"] if r.qlora_gap is not None else []),
        ]
        return "\n".join(lines)


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"


def run_export(request: ExportRequest, cfg: SftConfig, *, store: Store) -> ExportOutcome:
    """Export one SFT output (see the module docstring)."""
    quiet_imports(datasets=False)  # it builds no dataset
    if store.is_done(request.output) and not request.force:
        record = store.read_model(join(request.output, EXPORT_RECORD), ExportRecord, "export record")
        return ExportOutcome(request.output, record, skipped=True)
    source = store.local_input(request.model)
    sft = read_sft_record(source, "--sft")
    import torch

    with torch.inference_mode(), quiet_warnings():
        model, diff = _merged_model(source, sft, cfg, store)
        gap = None
        if sft.method == "qlora":
            from burnqed.sft.gap import measure_qlora_gap

            gap = measure_qlora_gap(source, sft, resolve_base_model(sft.base_model, store=store), model, cfg,
                                    store=store)
    bound = cfg.export_max_qlora_gap
    if (gap is not None and gap.merged_loss is not None and gap.adapter_nf4_loss is not None and bound is not None
            and gap.merged_loss - gap.adapter_nf4_loss > bound):
        raise ModelError(f"merging the QLoRA adapter of {request.model} into its float base costs too much: "
                         f"{gap.summary} (limit sft.export_max_qlora_gap={bound}); nothing was exported")
    dtype = sft.base_dtype if cfg.export_dtype == "auto" else cfg.export_dtype
    if dtype not in DTYPES:
        raise ModelError(f"the base model's saved dtype {dtype!r} is not one of {', '.join(DTYPES)}; "
                         "set sft.export_dtype")
    model = model.to(getattr(torch, dtype))
    params = sum(p.numel() for p in model.parameters())
    # The tokenizer trained with: the full model's own, else the base model's (LoRA changes no tokenizer).
    tokenizer_dir = source if sft.method == "full" else resolve_base_model(sft.base_model, store=store)
    with store.staged_output(request.output, "export", {"source": request.model, "dtype": dtype},
                             made_from=request.made_from) as folder:
        model.save_pretrained(folder, max_shard_size=cfg.export_max_shard_size)
        del model
        write_config(folder / "config.json", dtype)
        write_tokenizer(tokenizer_dir, folder)
        probe = tokenizer_probe(load_tokenizer(folder))
        refusal = probe_mismatch(f"the export of {request.model}", sft.tokenizer_probe, probe,
                                 "as SFT trained (sft.json)", "as the export reads")
        if refusal is not None:
            raise ModelError(refusal + "; nothing was exported")
        tactic = verify_generation(folder, sft.prompt_format, cfg.device, name=f"the export of {request.model}")
        files = {p.name: p.stat().st_size for p in sorted(folder.iterdir()) if p.is_file()}
        record = ExportRecord(
            source=request.model, method=sft.method, base_model=sft.base_model, dtype=dtype, params=params,
            files=files, max_logit_diff=diff, probe_state=PROBE_STATE, probe_tactic=tactic,
            tokenizer_probe=probe, qlora_gap=gap, written_at=datetime.now(UTC),
        )
        (folder / EXPORT_RECORD).write_text(record.model_dump_json(indent=2) + "\n", encoding="utf-8")
        share_files(folder, folder / EXPORT_RECORD)
    return ExportOutcome(request.output, record, skipped=False)


def _merged_model(source: Path, sft: SftRecord, cfg: SftConfig, store: Store) -> tuple[HFModel, float | None]:
    """The float32 model to save, and for adapters the merge check's max logit difference."""
    import torch
    from transformers import AutoModelForCausalLM

    if sft.method == "full":
        return AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32), None
    from peft import PeftModel

    base_dir = resolve_base_model(sft.base_model, store=store)
    if model_fingerprint(base_dir) != sft.base_fingerprint:
        raise InputError(
            f"the base model {sft.base_model or '(tiny embedded model)'} at {base_dir} is not the one the adapter in "
            f"{source} was trained on (fingerprint differs); export where the same base model is available"
        )
    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    adapted = PeftModel.from_pretrained(base, source)
    adapted.eval()
    probe = probe_ids(load_tokenizer(source), sft.prompt_format)
    reference = adapted(input_ids=probe).logits.float()
    merged = adapted.merge_and_unload()
    diff = float((merged(input_ids=probe).logits.float() - reference).abs().max())
    if not math.isfinite(diff) or diff > cfg.export_max_logit_diff:
        raise ModelError(
            f"merging the adapter of {source} changed the logits by {diff:.3g} (limit sft.export_max_logit_diff="
            f"{cfg.export_max_logit_diff}); the merge is broken, nothing was exported"
        )
    return merged, diff


def probe_ids(tokenizer: Any, fmt: PromptFormat) -> Any:
    """Token ids (1 × n) of the probe prompt + completion, tokenized as training does."""
    import torch

    prompt = tokenizer(build_prompt(fmt, PROBE_STATE))["input_ids"]
    completion = tokenizer(build_completion(fmt, PROBE_TACTIC), add_special_tokens=False)["input_ids"]
    return torch.tensor([[*prompt, *completion]])


def verify_generation(folder: Path, fmt: PromptFormat, device: str, name: str | None = None) -> str:
    """Load `folder` as the policy does on a GPU, through transformers' model classes (on the CPU the policy reads
    a plain Llama without them: the export's evidence is that transformers, which SGLang's loader builds on, reads
    and runs the folder), and generate one tactic for PROBE_STATE (greedy); ModelError (naming `name`, default the
    folder) when loading or generation breaks. Returns the extracted tactic (may be empty for a weak model)."""
    what = name or f"the model in {folder}"
    from burnqed.policy.localmodel import LocalModel

    model = LocalModel.load(folder, device=device, seed=0, avoid_transformers=False)
    try:
        sampling = Sampling(n=1, temperature=0.0, top_p=1.0, max_new_tokens=PROBE_TOKENS, stop=stop_strings(fmt))
        try:
            completion = model.generate([build_prompt(fmt, PROBE_STATE)], sampling)[0][0]
        except (RuntimeError, ValueError, IndexError) as exc:
            raise ModelError(f"{what} cannot generate: {type(exc).__name__}: {exc}; nothing was exported") from None
    finally:
        model.close()
    if completion.n_tokens < 1 or not math.isfinite(completion.logprob):
        raise ModelError(
            f"{what} generated {completion.n_tokens} tokens with log-prob {completion.logprob} for a probe state: "
            "its weights are broken; nothing was exported"
        )
    return extract_completion(fmt, completion.text)
