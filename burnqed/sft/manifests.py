"""The records an SFT output and an export carry: `sft.json` and `export.json` (pydantic, validated on read).

    record = read_sft_record(folder)          # SftRecord, or InputError naming the folder
    (folder / SFT_RECORD).write_text(record.model_dump_json(indent=2))

`SftRecord` says how the policy was trained (method, base model, iteration, steps, losses, pairs, prompt
format, seed) and is what `burnqed export` and the next iteration's `burnqed sft --init` read to know how to
load the folder. No I/O beyond reading one JSON file.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from burnqed.errors import InputError
from burnqed.storage import Store, join, read_json_model
from burnqed.text.prompt import PromptFormat

SFT_RECORD = "sft.json"
EXPORT_RECORD = "export.json"
Method = Literal["full", "lora", "qlora"]


class LogPoint(BaseModel):
    """One logged point of training: the train loss window ending at `step`, or an eval loss."""

    model_config = ConfigDict(extra="forbid")

    step: int = Field(ge=0, description="Optimizer step the point was logged at.")
    loss: float | None = Field(default=None, description="Mean train loss over the logging window.")
    eval_loss: float | None = Field(default=None, description="Held-out loss at this step.")
    learning_rate: float | None = Field(default=None, description="Learning rate at this step.")


class DataCounts(BaseModel):
    """What went into training: counts of pairs by origin, and what was left out and why."""

    model_config = ConfigDict(extra="forbid")

    train_examples: int = Field(ge=0, description="Training examples (upsampled positives counted each time).")
    eval_examples: int = Field(ge=0, description="Held-out examples (eval loss).")
    base_pairs: int = Field(ge=0, description="Base-data tactic pairs in the training set.")
    positives: int = Field(ge=0, description="Distinct trajectory positives (state_before, tactic) used.")
    positive_upsample: int = Field(ge=1, description="Times each positive appears.")
    positives_held_out: int = Field(
        ge=0, description="Trajectory positives dropped because their theorem is in the data's valid/test split."
    )
    too_long: int = Field(ge=0, description="Examples dropped for exceeding max_length tokens.")
    eval_source: Literal["valid-split", "hashed-train", "none"] = Field(
        description="Where the held-out examples came from."
    )
    rows: int = Field(ge=0, description="Training rows after packing (= examples without packing).")
    tokens: int = Field(ge=0, description="Training tokens per epoch (prompt + completion).")
    supervised_tokens: int = Field(ge=0, description="Tokens in the loss per epoch (completion + EOS).")
    proof_examples: int = Field(
        default=0, ge=0,
        description="Distinct proof-format examples from verified proofs (sft.proof_examples): from iteration 1 the "
        "trajectories' whole proofs from statements and proof rests from states, each upsampled like the positives; "
        "at iteration 0 the data's replayed proofs in the whole format, once each.",
    )
    repair_examples: int = Field(
        default=0, ge=0,
        description="Distinct repair examples (with sft.proof_examples): a failed proof and Lean's messages on it → a "
        "proof that verified for the theorem (docs/training.md, 'Repair examples'), upsampled like the positives.",
    )
    sketch_examples: int = Field(
        default=0, ge=0,
        description="Distinct sketch examples (sft.sketch_examples; docs/training.md, 'Sketch examples'): the "
        "planner's prompt → the sketch a verified proof is, or a sketch search's verified sketch; from iteration 1 "
        "upsampled like the positives, at iteration 0 the data's replayed proofs' sketches, once each.",
    )
    subgoal_examples: int = Field(
        default=0, ge=0,
        description="Distinct examples of the subgoals of verified sketches, each a theorem of its own (its state → "
        "its first tactic and → its proof, its declaration → its proof), upsampled like the positives.",
    )
    subgoals_skipped: int = Field(
        default=0, ge=0,
        description="Proved subgoals that gave no example: no declaration can state them as Lean printed them (an "
        "inaccessible hypothesis, a let value, a metavariable).",
    )


class SftRecord(BaseModel):
    """`sft.json` of a published SFT output."""

    model_config = ConfigDict(extra="forbid")

    method: Method = Field(description="full: the folder is a model; lora/qlora: an adapter + tokenizer.")
    base_model: str | None = Field(
        description="sft.base_model as configured (URI or folder); None = the tiny embedded model."
    )
    base_fingerprint: str = Field(
        description="Fingerprint of the base model's config and weight files (export checks it before merging)."
    )
    base_dtype: str = Field(description="dtype recorded in the base model's config (the export's 'auto' dtype).")
    init: str | None = Field(description="The SFT output this run warm-started from (--init), if any.")
    iteration: int = Field(ge=0, description="Expert-iteration index.")
    data: str = Field(description="URI of the prepared-data folder read.")
    trajectories: list[str] = Field(description="Trajectory prefixes positives were mined from.")
    prompt_format: PromptFormat = Field(description="Prompt format of the pairs (policy.prompt_format).")
    seed: int = Field(description="sft.seed.")
    steps: int = Field(ge=0, description="Optimizer steps trained (global step at the end).")
    learning_rate: float = Field(gt=0, description="Peak learning rate used (after the per-iteration decay).")
    resumed_from_step: int | None = Field(description="Checkpoint step this run resumed from, if it did.")
    train_loss: float | None = Field(description="Last logged train loss (mean over the last logging window).")
    first_train_loss: float | None = Field(description="First logged train loss.")
    eval_loss: float | None = Field(description="Final held-out loss; None without a held-out set.")
    data_counts: DataCounts = Field(description="What went into training.")
    adapter_rank: int | None = Field(description="LoRA rank of the adapter (lora/qlora).")
    trainable_params: int = Field(ge=0, description="Parameters trained.")
    total_params: int = Field(ge=0, description="Parameters of the (base + adapter) model.")
    train_seconds: float = Field(ge=0, description="Wall time of the training loop (this run).")
    tokens_per_second: float | None = Field(description="Training tokens per second over this run.")
    device: str = Field(description="Device trained on.")
    history: list[LogPoint] = Field(description="Logged losses and learning rates, in step order.")
    tokenizer_probe: list[int] | None = Field(
        default=None,
        description="Ids of burnqed.policy.modelfolder.PROBE_TEXT as training tokenized prompts (BOS included); the "
        "export refuses a folder that reads it otherwise. None in records from before it was kept.",
    )
    written_at: datetime = Field(description="When the output was written (UTC).")


class QloraGap(BaseModel):
    """The QLoRA merge gap: the adapter was trained against NF4 weights and is merged into the float base it never
    saw. Measured on held-out pairs where a GPU runs the export (bitsandbytes' 4-bit kernels); on CPU skipped."""

    model_config = ConfigDict(extra="forbid")

    measured: bool = Field(description="Whether the losses were computed.")
    reason: str = Field(description="Why it was skipped, or on what it was measured.")
    adapter_nf4_loss: float | None = Field(default=None, description="Loss of the adapter on the NF4 base.")
    merged_loss: float | None = Field(default=None, description="Loss of the merged (float) export.")
    examples: int = Field(default=0, ge=0, description="Held-out examples the losses average over.")

    @property
    def summary(self) -> str:
        """One line: both losses and their difference, or why they were not measured."""
        if self.adapter_nf4_loss is None or self.merged_loss is None:
            return f"not measured: {self.reason}"
        return (f"held-out loss adapter on NF4 {self.adapter_nf4_loss:.4f}, merged {self.merged_loss:.4f} "
                f"(Δ {self.merged_loss - self.adapter_nf4_loss:+.4f} nats/token; {self.reason})")


class ExportRecord(BaseModel):
    """`export.json` of a published export."""

    model_config = ConfigDict(extra="forbid")

    source: str = Field(description="URI of the SFT output exported.")
    method: Method = Field(description="The SFT method (lora/qlora adapters were merged).")
    base_model: str | None = Field(description="Base model the adapter was merged into (None = tiny embedded).")
    dtype: str = Field(description="dtype of the saved weights.")
    params: int = Field(ge=0, description="Parameters of the exported model.")
    files: dict[str, int] = Field(description="File name → bytes, for every file of the export.")
    max_logit_diff: float | None = Field(
        description="Max |merged - adapter| float32 logit difference on the probe prompt (lora/qlora)."
    )
    probe_state: str = Field(description="The state the verification generated a tactic for.")
    probe_tactic: str = Field(description="The tactic the exported model generated for it (greedy).")
    tokenizer_probe: list[int] | None = Field(
        default=None,
        description="Ids of policy.modelfolder.PROBE_TEXT as the exported folder tokenizes it (equal to the SFT "
        "record's); the serving image's transformers must read the same (tests/policy/test_modelfolder.py).",
    )
    qlora_gap: QloraGap | None = Field(
        default=None, description="Held-out loss of the adapter on its NF4 base vs the merged model (qlora only)."
    )
    written_at: datetime = Field(description="When the export was written (UTC).")


def recorded_probe(uri: str, *, store: Store) -> list[int] | None:
    """The tokenizer probe a model folder's record holds (`export.json`, else `sft.json` of a full model); None for
    a folder burnqed did not write (a base model) or an older record."""
    if store.exists(join(uri, EXPORT_RECORD)):
        return store.read_model(join(uri, EXPORT_RECORD), ExportRecord, EXPORT_RECORD).tokenizer_probe
    if store.exists(join(uri, SFT_RECORD)):
        return store.read_model(join(uri, SFT_RECORD), SftRecord, SFT_RECORD).tokenizer_probe
    return None


def expected_probe(uri: str, *, store: Store) -> list[int] | None:
    """The tokenizer probe a policy server must read for the model folder at `uri`: its record's
    (`recorded_probe`); for a folder without one (a base model, which the sidecar serves as `burnqed fetch
    --model-folder` writes it), burnqed's own reading of its tokenizer files (`modelfolder.folder_probe`, the ids
    SFT trains on); None when it has no tokenizer.json either. InputError when its tokenizer cannot be read."""
    from tempfile import TemporaryDirectory

    from burnqed.errors import ModelError
    from burnqed.policy.modelfolder import EXTRA_TOKENIZER_FILES, folder_probe

    recorded = recorded_probe(uri, store=store)
    if recorded is not None or not store.exists(join(uri, "tokenizer.json")):
        return recorded
    with TemporaryDirectory(prefix="burnqed-tokenizer-") as scratch:
        for name in ("tokenizer.json", "tokenizer_config.json", *EXTRA_TOKENIZER_FILES):
            if store.exists(join(uri, name)):
                (Path(scratch) / name).write_bytes(store.read_bytes(join(uri, name)))
        try:
            return folder_probe(Path(scratch))
        except ModelError as exc:
            raise InputError(f"policy.model {uri}: {exc}") from None


def read_sft_record(folder: Path, what: str = "SFT output") -> SftRecord:
    """The `sft.json` of an SFT output folder; InputError when it is missing or malformed."""
    path = folder / SFT_RECORD
    if not path.is_file():
        raise InputError(f"{what} {folder} has no {SFT_RECORD}: it is not the output of `burnqed sft`")
    return read_json_model(path, SftRecord, what)


def share_files(folder: Path, reference: Path) -> None:
    """Give every file in `folder` the mode of `reference` (a file written with the usual umask): safetensors
    writes 0600, which another user (an SGLang container) could not read."""
    mode = reference.stat().st_mode & 0o777
    for path in folder.iterdir():
        if path.is_file():
            path.chmod(mode)


def model_fingerprint(folder: Path) -> str:
    """A cheap fingerprint of a model folder: config.json's bytes, and every weight file's name, size and first
    MiB. Enough to notice a different base model (another size, other weights) without hashing gigabytes."""
    digest = hashlib.sha256()
    config = folder / "config.json"
    if config.is_file():
        digest.update(config.read_bytes())
    for path in sorted(folder.iterdir()):
        if path.suffix not in {".safetensors", ".bin"} or not path.is_file():
            continue
        digest.update(f"\0{path.name}\0{path.stat().st_size}\0".encode())
        with path.open("rb") as handle:
            digest.update(handle.read(1 << 20))
    return "sha256:" + digest.hexdigest()


@dataclass(frozen=True, slots=True)
class TrainedFormats:
    """Which formats beyond tactic pairs a policy was ever trained on (`trained_formats`): the proof formats
    (whole proofs, proof rests, repairs: sft.proof_examples) and the planner's sketch format (sft.sketch_examples)."""

    proofs: bool
    sketches: bool
    sft: str  # the SFT output whose record was read first


MAX_RECORD_HOPS = 8  # export → SFT (or RL) output → --init → … a few iterations back


def trained_formats(model: str | None, *, store: Store) -> TrainedFormats | None:
    """What the policy at `model` was trained on, as its records say: an SFT or RL output's `sft.json`, an export's
    through its `export.json` source, each warm start (`init`) followed back, a format counting as trained when some
    SFT of the chain trained examples of it (`DataCounts.proof_examples`, `repair_examples`, `sketch_examples`). None
    when `model` records no SFT (a hub model, the untrained base, a served name) or a record cannot be read."""
    uri, first, proofs, sketches = model, None, False, False
    try:
        for _ in range(MAX_RECORD_HOPS):
            if not uri:
                break
            if not store.exists(join(uri, SFT_RECORD)) and store.exists(join(uri, EXPORT_RECORD)):
                uri = store.read_model(join(uri, EXPORT_RECORD), ExportRecord, EXPORT_RECORD).source
            if not store.exists(join(uri, SFT_RECORD)):
                break
            record = store.read_model(join(uri, SFT_RECORD), SftRecord, SFT_RECORD)
            first = first or uri
            counts = record.data_counts
            proofs = proofs or counts.proof_examples > 0 or counts.repair_examples > 0
            sketches = sketches or counts.sketch_examples > 0
            uri = record.init
    except (InputError, OSError, ValueError):
        return None
    return None if first is None else TrainedFormats(proofs, sketches, first)
