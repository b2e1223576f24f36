"""The files of joint training (`sft.joint`, `burnqed.sft.joint`): in the SFT output's `joint/` folder the head, its
reference states and `joint.json` (`JointRecord`: the settings, the log, the probes); in the checkpoint folder
`abort.json` when a monitoring rule stopped the run (`AbortRecord`, read by `read_abort`).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from burnqed.ebm.formats import HeadSpec
from burnqed.errors import InputError, TrainingError
from burnqed.sft.checkpoints import CheckpointStore
from burnqed.storage import Store, is_remote

if TYPE_CHECKING:

    pass



JOINT_DIR = "joint"


HEAD_FILE = "head.safetensors"


RECORD_FILE = "joint.json"


REFERENCE_FILE = "reference.safetensors"


ABORT_FILE = "abort.json"


JOINT_STATE_FILE = "joint_state.json"  # in a checkpoint, beside the trainer's files


class JointLog(BaseModel):
    """One monitoring line: the losses since the previous one and the temperature."""

    model_config = ConfigDict(extra="forbid")

    step: int = Field(ge=0, description="Optimizer steps done.")
    sft_loss: float = Field(description="Token-mean SFT cross-entropy since the previous log.")
    infonce: float = Field(description="Mean InfoNCE since the previous log (chance: ln(K+1)).")
    temperature: float = Field(gt=0, description="The head's temperature at this step.")
    lr_backbone: float = Field(ge=0, description="Learning rate of the backbone's trainable weights.")
    lr_head: float = Field(ge=0, description="Learning rate of the head.")
    seconds: float = Field(ge=0, description="Wall time since training started (this run).")


class JointProbe(BaseModel):
    """Embedding separation measured on the backbone being trained (eval mode)."""

    model_config = ConfigDict(extra="forbid")

    step: int = Field(ge=0, description="Optimizer steps done.")
    centroid_l2: float = Field(ge=0, description="‖mean positive − mean negative‖ of the states' raw embeddings.")
    linear_probe: float | None = Field(
        description="Class-balanced accuracy on held-out states of a logistic regression fit on training states; "
        "None when a split lacks a class."
    )
    valid_rank1: float | None = Field(description="Held-out groups whose positive has the lowest energy.")
    valid_infonce: float | None = Field(description="Held-out InfoNCE.")
    rank1_by_depth: dict[str, float] = Field(description="valid_rank1 per depth bucket of the positive.")
    states: int = Field(ge=0, description="States embedded by the probe.")


class JointRecord(BaseModel):
    """`joint/joint.json` of a jointly trained SFT output."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = Field(default=1, description="Version of this file format.")
    head: HeadSpec = Field(description="The head's architecture (ebm section).")
    temperature: float = Field(gt=0, description="The head's final temperature.")
    pooling: str = Field(description="ebm.pooling of the embeddings the head read.")
    normalize: bool = Field(description="ebm.normalize of the embeddings the head read.")
    max_tokens: int = Field(ge=1, description="Tokens an embedded text kept (ebm.encoder_max_tokens, ≤ context).")
    weight: float = Field(description="λ of L_sft + λ·L_infonce.")
    lr_backbone: float = Field(description="Peak learning rate of the backbone's trainable weights (this run).")
    lr_head: float = Field(description="Peak learning rate of the head (this run).")
    groups_per_step: int = Field(ge=1, description="InfoNCE groups per optimizer step.")
    negatives: int = Field(ge=1, description="Negatives per group (K).")
    steps: int = Field(ge=0, description="Optimizer steps trained.")
    processes: int = Field(ge=1, description="Data-parallel processes of the run that finished.")
    head_init: str = Field(description="Where the head started: fresh (and why) or the --init's joint head.")
    trajectories: list[str] = Field(description="Trajectory prefixes the groups came from.")
    anchors: dict[str, int] = Field(description="Positive anchors per split ('train', 'valid').")
    history: list[JointLog] = Field(description="Monitoring lines.")
    probes: list[JointProbe] = Field(description="Separation probes, in step order (the last one at the end).")
    reference_texts: list[str] = Field(description="Embedded texts whose vectors are in reference.safetensors.")
    train_seconds: float = Field(ge=0, description="Wall time of the training loop (this run).")
    written_at: datetime = Field(description="When the output was written (UTC).")


class AbortRecord(BaseModel):
    """`abort.json`: why a joint run stopped."""

    model_config = ConfigDict(extra="forbid")

    rule: str = Field(description="temperature-floor | temperature-ceiling | centroid-l2 | sft-loss | non-finite")
    step: int = Field(description="Optimizer step at which the rule fired.")
    value: float = Field(description="The measured value.")
    bound: float | None = Field(description="The configured bound it crossed.")
    message: str = Field(description="The one line printed.")
    last_checkpoint: int | None = Field(description="Step of the newest checkpoint a re-run resumes from.")
    at: datetime = Field(description="When (UTC).")


def read_joint_record(folder: Path) -> JointRecord:
    """The joint record of a local SFT output folder; `InputError` when it was not trained jointly."""
    path = folder / JOINT_DIR / RECORD_FILE
    if not path.is_file():
        raise InputError(f"{folder} holds no jointly trained head ({JOINT_DIR}/{RECORD_FILE}): train it with "
                         "sft.joint = true at an iteration ≥ 1")
    return JointRecord.model_validate_json(path.read_text(encoding="utf-8"))


class JointAbort(TrainingError):
    """A monitoring rule stopped the run (its record is in abort.json)."""


def _write_abort(checkpoints: CheckpointStore, record: AbortRecord) -> None:
    payload = record.model_dump_json(indent=2) + "\n"
    checkpoints.local.mkdir(parents=True, exist_ok=True)
    (checkpoints.local / ABORT_FILE).write_text(payload, encoding="utf-8")
    if checkpoints.remote is not None and is_remote(checkpoints.remote):
        import posixpath

        fs, root = checkpoints.store.resolve(checkpoints.remote)
        fs.pipe_file(posixpath.join(root, ABORT_FILE), payload.encode())


def read_abort(output: str, *, store: Store) -> AbortRecord | None:
    """The abort record of the joint run of `output`, if its last run aborted."""
    path = CheckpointStore.for_output(output, store=store).local / ABORT_FILE
    return AbortRecord.model_validate_json(path.read_text(encoding="utf-8")) if path.is_file() else None


__all__ = ["AbortRecord", "JointAbort", "JointProbe", "JointRecord", "read_abort", "read_joint_record"]
