"""File formats of the value model (docs/ebm.md): the checkpoint's `ebm.json`, the metrics it reports and the
identity of the encoder whose embeddings it was trained on. Pydantic models; no I/O, no torch.

    manifest = store.read_model(join(uri, MANIFEST_FILE), EbmManifest, "EBM manifest")
    manifest.encoder.digest     # the model folder fingerprint the head expects its embeddings from
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from burnqed.text.prompt import PromptFormat

if TYPE_CHECKING:
    from burnqed.storage import Store

MANIFEST_FILE = "ebm.json"
WEIGHTS_FILE = "head.safetensors"
METRICS_FILE = "metrics.json"
METRICS_LOG_FILE = "metrics.jsonl"


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


# The fields of EncoderIdentity that decide the vectors: equal fields = equal embeddings.
IDENTITY_FIELDS = ("backend", "digest", "layer", "pooling", "normalize", "max_tokens", "text", "dtype", "probe")


class EncoderIdentity(_Record):
    """Which encoder produced the embeddings: the model (by content), the code and everything that changes the
    vector. Two identities that agree on `IDENTITY_FIELDS` give the same embeddings; a value model or an
    embedding cache made with one is refused by another (`mismatch`). Files written before the pooling was
    recorded parse with those fields unset, and match nothing."""

    backend: Literal["burnqed", "sglang"] = Field(
        description="Whose code computed the vectors: 'burnqed' = `LocalModel.encode` (in-process or behind "
        "`burnqed serve`: the same code); 'sglang' = SGLang's --is-embedding (read in files that name it; burnqed "
        "never encodes with it).",
    )
    model: str = Field(description="The model folder (path or URI) or, when none could be read, its name or URL.")
    digest: str = Field(
        min_length=1,
        description="Fingerprint of the model folder's files (fingerprint.model_fingerprint); 'name-…' when the "
        "folder could not be read and only its name was hashed (then a model change cannot be detected).",
    )
    verified: bool = Field(description="True when `digest` fingerprints the folder's content, not just a name.")
    layer: int | None = Field(default=None, description="Hidden states pooled: -1 = the last hidden state.")
    pooling: Literal["mean", "last"] | None = Field(
        default=None, description="'mean': masked mean over the text's tokens; 'last': the last token's state."
    )
    normalize: bool | None = Field(default=None, description="Whether the vectors are L2-normalised.")
    max_tokens: int | None = Field(default=None, description="Texts were cut to their first max_tokens tokens.")
    text: str | None = Field(
        default=None, description="Version of the embedded text (prompt.EMBEDDING_TEXT_VERSION)."
    )
    dtype: str | None = Field(default=None, description="dtype of the model's weights when encoding.")
    probe: list[int] | None = Field(
        default=None,
        description="The tokenizer probe: ids of policy.modelfolder.PROBE_TEXT as this encoder tokenized it (BOS "
        "included). The same folder read by another transformers can tokenize differently; this tells.",
    )
    via: str | None = Field(
        default=None, description="Where it ran: 'in-process' or the URL of `burnqed serve` (not compared)."
    )

    @field_validator("backend", mode="before")
    @classmethod
    def _legacy_backend(cls, value: object) -> object:
        return "burnqed" if value == "local" else value  # files from before the rename: the same code

    def key(self) -> str:
        """A short name of the embedding space (the cache folder): a hash of `IDENTITY_FIELDS`."""
        payload = json.dumps([getattr(self, name) for name in IDENTITY_FIELDS], separators=(",", ":"))
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    def mismatch(self, other: EncoderIdentity) -> str | None:
        """How embeddings from `other` differ from the ones `self` describes (None: they are the same)."""
        for name in IDENTITY_FIELDS:
            mine, theirs = getattr(self, name), getattr(other, name)
            if mine is None or theirs is None:
                return f"{name} not recorded (a file from an older burnqed)"
            if mine != theirs and name == "probe":
                return f"tokenizer probe {mine} vs {theirs} (the same text tokenized differently: BOS or merges)"
            if mine != theirs:
                return f"{name} {mine} vs {theirs}"
        return None

    def matches(self, other: EncoderIdentity) -> bool:
        """Whether embeddings from `other` are the ones a head trained on `self` expects."""
        return self.mismatch(other) is None

    def describe(self) -> str:
        """One line: the encoder and the model."""
        if self.pooling is None:
            return f"{self.backend} encoder of unrecorded pooling on {self.model} (digest {self.digest})"
        norm = "L2-normalised" if self.normalize else "unnormalised"
        return (f"{self.backend} {self.pooling}-pooled layer {self.layer}, {norm}, <= {self.max_tokens} tokens, "
                f"{self.dtype}, text {self.text} on {self.model} (digest {self.digest})")


class HeadSpec(_Record):
    """The head's architecture: enough to rebuild it before loading its weights."""

    embedding_dim: int = Field(ge=1, description="Width d of one embedding; the MLP input is 3·d.")
    hidden_dims: list[int] = Field(min_length=1, description="MLP hidden sizes.")
    dropout: float = Field(ge=0.0, lt=1.0, description="Dropout between MLP layers (off when scoring).")
    spectral_norm: bool = Field(description="Spectral normalisation on every linear layer of the MLP.")
    first_layer_scale: float = Field(gt=0, description="Gain of the first layer (see docs/ebm.md).")


class InitInfo(_Record):
    """Where the head's weights started."""

    uri: str | None = Field(description="The --init checkpoint offered, if any.")
    resumed: bool = Field(description="True when training continued from `uri`'s weights.")
    reason: str = Field(description="Why it resumed or started fresh, in words.")


class DataCounts(_Record):
    """What the training data held."""

    trajectories: list[str] = Field(description="Trajectory prefixes read.")
    edges: int = Field(ge=0, description="Rows read.")
    theorems: int = Field(ge=0, description="Theorems with at least one edge.")
    proved_theorems: int = Field(ge=0, description="Theorems with at least one positive state.")
    states: int = Field(ge=0, description="Distinct (theorem, state) pairs, roots excluded.")
    positives: int = Field(ge=0, description="Positive states (on a verified proof path).")
    negatives: int = Field(ge=0, description="Non-positive states.")
    train_theorems: int = Field(ge=0, description="Theorems in the training split.")
    valid_theorems: int = Field(ge=0, description="Theorems in the validation split.")
    train_positives: int = Field(ge=0, description="Positive anchors trained on.")
    valid_positives: int = Field(ge=0, description="Positive anchors held out (one validation group each).")
    texts: int = Field(ge=0, description="Distinct texts embedded (states and goals).")


class EmbedReport(_Record):
    """What one embedding pass did."""

    texts: int = Field(ge=0, description="Distinct texts asked for.")
    cached: int = Field(ge=0, description="Found in the cache.")
    computed: int = Field(ge=0, description="Encoded by this pass.")
    chunks_written: int = Field(ge=0, description="Cache chunks written by this pass.")
    seconds: float = Field(ge=0, description="Wall time of the pass.")
    states_per_s: float = Field(ge=0, description="Encoded texts per second (0 when nothing was encoded).")
    cache: str = Field(description="The cache folder of this encoder ({cache}/{digest}).")


class Snapshot(_Record):
    """Metrics of the head on a set of InfoNCE groups (one positive + K negatives each) at one step."""

    step: int = Field(ge=0, description="Optimizer steps done.")
    split: Literal["train", "valid"] = Field(description="'train': the last training batches; 'valid': held out.")
    groups: int = Field(ge=0, description="Groups evaluated.")
    loss: float = Field(description="Total loss (InfoNCE + weighted depth loss).")
    infonce: float = Field(description="InfoNCE loss; ln(K+1) is chance.")
    depth_loss: float | None = Field(description="Depth regression loss, when enabled.")
    energy_gap: float = Field(description="Mean negative energy minus mean positive energy (positive = right way).")
    rank1: float = Field(ge=0, le=1, description="Share of groups whose positive has the lowest energy.")
    rank1_by_depth: dict[str, float] = Field(
        description="rank1 per bucket of the positive's depth: '1', '2', '3', '4+'."
    )
    groups_by_depth: dict[str, int] = Field(description="Groups per depth bucket.")
    temperature: float = Field(gt=0, description="The head's learnable temperature.")
    samples_per_s: float | None = Field(default=None, description="Training groups per second since the last log.")


class DepthRank(_Record):
    """Sibling ranking at one depth bucket (see `SiblingRank`)."""

    decisions: int = Field(ge=0, description="Expanded nodes with a child on a proof path and one off it.")
    accuracy: float = Field(ge=0, le=1, description="Share whose lowest-energy child is on the proof path.")
    chance: float = Field(ge=0, le=1, description="The same for a uniformly random child.")
    policy: float | None = Field(description="The same for the child of the most likely tactic (None: no log-probs).")


class SiblingRank(_Record):
    """Does the lowest energy pick the proof path among an expanded node's children? Over every node of the
    split's trajectories that has at least one child state on a verified proof path and one off it; ties count
    fractionally (k tied children of which j on the path: j/k)."""

    decisions: int = Field(ge=0, description="Nodes counted.")
    accuracy: float = Field(ge=0, le=1, description="Share whose lowest-energy child is on the proof path.")
    chance: float = Field(ge=0, le=1, description="Expected share for a uniformly random child.")
    policy: float | None = Field(
        description="Share whose most likely tactic's child is on the proof path: the log-prob ordering the value "
        "model has to beat (None: the rows carry no log-probs)."
    )
    by_depth: dict[str, DepthRank] = Field(description="Per depth bucket of the children: '1', '2', '3', '4+'.")


class CalibrationBin(_Record):
    """States whose energy falls in one bin (equal-count bins, lowest energy first)."""

    low: float = Field(description="Lowest energy in the bin.")
    high: float = Field(description="Highest energy in the bin.")
    states: int = Field(ge=1, description="States in the bin.")
    positives: int = Field(ge=0, description="Of those, states on a verified proof path.")
    rate: float = Field(ge=0, le=1, description="positives / states: the empirical proof-path rate.")


class Calibration(_Record):
    """Energy against the empirical proof-path rate: a useful energy has the rate falling from bin to bin."""

    states: int = Field(ge=0, description="States scored.")
    positives: int = Field(ge=0, description="Of those, on a verified proof path.")
    auc: float | None = Field(
        description="Chance that a random positive state has a lower energy than a random negative one of the same "
        "theorem (ties half); 0.5 is chance. None without such a pair."
    )
    bins: list[CalibrationBin] = Field(description="Equal-count energy bins, lowest energy first.")


class DepthEnergy(_Record):
    """The energy of one depth bucket's states relative to their theorem's goal (see `ValueEvidence.by_depth`)."""

    positives: int = Field(ge=0, description="States of the bucket on a verified proof path.")
    negatives: int = Field(ge=0, description="States of the bucket off every proof path.")
    positive: float | None = Field(description="Their mean energy minus the goal's own (None: no such state).")
    negative: float | None = Field(description="The same for the states off the path (None: no such state).")


class ValueEvidence(_Record):
    """What decides whether the value model helps search, measured with the trained head on one split."""

    split: Literal["train", "valid"] = Field(description="The split measured: held-out theorems when they have any "
                                             "decision, else the training split (then it is not evidence of "
                                             "generalisation).")
    siblings: SiblingRank = Field(description="Rank accuracy among siblings, overall and by depth.")
    calibration: Calibration = Field(description="Energy bins against the proof-path rate.")
    by_depth: dict[str, DepthEnergy] = Field(
        default_factory=dict,
        description="Per depth bucket of the states ('1', '2', '3', '4+'): their mean energy minus their goal's "
        "own, as step search scores it (search.value_reference 'root'), on a proof path and off it. A value that "
        "helps is lower on the path than off it at every depth and falls with depth on the path; one that rises "
        "with depth holds the search near the root. Empty in metrics written before it was recorded.",
    )


SPECTRUM_SHARES = 16  # leading eigenvalue shares kept of the variance spectrum


class DepthHealth(_Record):
    """Embedding health of the states of one depth bucket (None: not measurable there, e.g. one class only)."""

    states: int = Field(ge=0, description="States of this depth measured.")
    positives: int = Field(ge=0, description="Of those, on a verified proof path.")
    centroid_l2: float | None = Field(description="‖mean positive − mean negative‖ at this depth.")
    linear_probe: float | None = Field(description="The probe's balanced accuracy on held-out states of this depth.")
    sibling_l2: float | None = Field(description="Mean positive-to-sibling distance of positives at this depth.")
    norm_gap: float | None = Field(description="Mean positive norm − mean negative norm at this depth.")
    effective_rank: float | None = Field(description="exp(entropy of the variance shares) of this depth's states.")


class EmbeddingHealth(_Record):
    """How well a backbone's embeddings of trajectory states separate good from bad (module docstring)."""

    states: int = Field(ge=0, description="States measured.")
    positives: int = Field(ge=0, description="Of those, on a verified proof path.")
    dim: int = Field(ge=0, description="Width of one embedding.")
    centroid_l2: float = Field(ge=0, description="‖mean positive − mean negative‖ of the raw embeddings.")
    linear_probe: float | None = Field(description="Balanced held-out accuracy of the linear probe (None: a split "
                                       "lacks a class; `linear_probe_split` says which).")
    linear_probe_split: str = Field(description="What the probe was fitted and scored on.")
    sibling_l2: float | None = Field(description="Mean distance of a positive to its non-positive siblings (None: "
                                     "no positive has one).")
    siblings: int = Field(ge=0, description="Positive-sibling pairs behind sibling_l2.")
    norm_gap: float | None = Field(description="Mean norm of positives minus mean norm of negatives (None: one "
                                   "class only).")
    spectrum: list[float] = Field(description=f"The leading {SPECTRUM_SHARES} eigenvalues of the states' covariance "
                                  "as shares of the total variance, largest first.")
    effective_rank: float = Field(ge=0, description="exp(entropy of all the variance shares): directions in use.")
    by_depth: dict[str, DepthHealth] = Field(description="The same per depth bucket: '1', '2', '3', '4+'.")


class EbmMetrics(_Record):
    """`metrics.json`: the final report of one `train-ebm` run."""

    schema_version: Literal[1] = Field(default=1, description="Version of this file format.")
    steps: int = Field(ge=0, description="Optimizer steps run.")
    train: Snapshot | None = Field(description="Final metrics on training groups.")
    valid: Snapshot | None = Field(description="Final metrics on held-out groups (None: no held-out positive).")
    temperature: float = Field(gt=0, description="Final temperature.")
    centroid_l2: float = Field(
        ge=0, description="L2 distance between the centroids of positive and negative state embeddings."
    )
    linear_probe_accuracy: float | None = Field(
        description="Class-balanced held-out accuracy of a logistic regression on the embeddings (positive "
        "vs negative); None when a split lacks one of the classes."
    )
    linear_probe_split: str = Field(description="What the probe was fitted and scored on.")
    counts: DataCounts = Field(description="The data.")
    embed: EmbedReport = Field(description="The embedding pass.")
    train_seconds: float = Field(ge=0, description="Wall time of the optimisation loop.")
    train_samples_per_s: float = Field(ge=0, description="Training groups (1 positive + K negatives) per second.")
    elapsed_s: float = Field(ge=0, description="Wall time of the whole stage.")
    evidence: ValueEvidence | None = Field(
        default=None, description="Sibling ranking and calibration of the trained head (None: no split has a node "
        "with children both on and off a proof path)."
    )


class EbmManifest(_Record):
    """`ebm.json`: everything needed to rebuild and trust the head in `head.safetensors`."""

    schema_version: Literal[1] = Field(default=1, description="Version of this file format.")
    weights: str = Field(default=WEIGHTS_FILE, description="The head's weights (safetensors), relative.")
    head: HeadSpec = Field(description="Architecture.")
    temperature: float = Field(gt=0, description="The learned temperature (also in the weights).")
    encoder: EncoderIdentity = Field(description="The encoder the head was trained on; search checks it.")
    prompt_format: PromptFormat = Field(description="Format of the embedded texts (prompt.build_embedding_text).")
    iteration: int = Field(ge=0, description="Expert-iteration index.")
    trained_at: datetime = Field(description="When training finished (UTC).")
    steps: int = Field(ge=0, description="Optimizer steps of this run.")
    init: InitInfo = Field(description="Warm start or fresh, and why.")
    config: dict[str, Any] = Field(description="The `ebm` config section used.")


def depth_bucket(depth: int) -> str:
    """The metrics' depth bucket of a state at `depth` (≥ 1): '1', '2', '3' or '4+'."""
    return str(depth) if depth < 4 else "4+"


DEPTH_BUCKETS: tuple[str, ...] = ("1", "2", "3", "4+")


POLICY_STAGES = ("export", "sft", "rl")  # outputs that hold a policy model, which --model takes


def check_value_model(uri: str, *, store: Store) -> None:
    """`--ebm URI` before any work: `InputError` (one line, saying what it got) unless `uri` is a finished value
    model (a train-ebm output: a folder with its completion marker and MANIFEST_FILE). A policy folder (an export, an
    SFT or rl output, any model folder with a config.json) is named as one, with where it goes (--model)."""
    from burnqed.errors import InputError
    from burnqed.storage import MARKER_NAME, join

    takes = f"--ebm takes a value model: a train-ebm output (a folder with {MANIFEST_FILE}, e.g. runs/iter_1/ebm)"
    if not store.exists(uri):
        raise InputError(f"--ebm {uri} does not exist: {takes}")
    if store.is_file(uri):
        raise InputError(f"--ebm {uri} is a file, not a folder: {takes}")
    marker = store.read_marker(uri)
    if marker is not None and store.exists(join(uri, MANIFEST_FILE)):
        return
    if marker is not None and marker.stage in POLICY_STAGES:
        got = f"a policy model (the output of `burnqed {marker.stage}`)"
    elif store.exists(join(uri, "config.json")):
        got = "a model folder (config.json, no value model in it)"
    elif marker is not None:
        got = f"the output of `burnqed {marker.stage}`"
    else:
        got = f"a folder with no {MARKER_NAME} (no finished output)"
    where = "; a policy goes to --model" if "model" in got else ""
    raise InputError(f"--ebm {uri} is {got}, not a value model: {takes}{where}")
