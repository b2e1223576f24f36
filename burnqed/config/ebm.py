"""The `[ebm]` section: the value model, its encoder and its training (docs/ebm.md)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from burnqed.base.uris import check_http_url
from burnqed.config.identity import neutral, shapes
from burnqed.config.section import Section

# the head and what it reads, also in joint training and its checkpoints; then how it trains alone
HEAD = shapes("train-ebm", "sft-joint", "joint-study", "sft-checkpoints")
TRAINS = shapes("train-ebm", "sft-joint", "joint-study")
CADENCE = neutral("a cadence: when progress is logged")


class EbmConfig(Section):
    """The value model (`burnqed train-ebm`, docs/ebm.md). Defaults fit the tiny embedded model on CPU."""

    hidden_dims: list[Annotated[int, Field(ge=1)]] = Field(
        default_factory=lambda: [256, 128, 64],
        min_length=1,
        description="MLP hidden sizes after the 3·d input [z_state; z_goal; z_state⊙z_goal], each at least 1 "
        "(2048, 1024, 512 for a 4096-d backbone).",
        json_schema_extra=HEAD,
    )
    dropout: float = Field(default=0.1, ge=0.0, lt=1.0, description="Dropout between MLP layers.",
                           json_schema_extra=HEAD)
    spectral_norm: bool = Field(default=True, description="Spectral normalisation on every linear layer.",
                                json_schema_extra=HEAD)
    first_layer_scale: float = Field(
        default=0.1, gt=0,
        description="Scale of the first layer's weights at init (under spectral norm it does not change the "
        "function; see docs/ebm.md).",
        json_schema_extra=HEAD,
    )
    init_temperature: float = Field(default=1.0, gt=0, description="Initial learnable temperature.",
                                    json_schema_extra=HEAD)
    temperature_min: float = Field(default=0.5, gt=0, description="Abort training if the temperature falls below.",
                                   json_schema_extra=TRAINS)
    temperature_max: float = Field(default=3.0, gt=0, description="Abort training if the temperature rises above.",
                                   json_schema_extra=TRAINS)
    negatives: int = Field(default=7, ge=1, description="Negatives per positive (K) in InfoNCE.",
                           json_schema_extra=HEAD)
    sibling_ratio: float = Field(default=0.6, ge=0, le=1, description="Share of negatives from siblings.",
                                 json_schema_extra=HEAD)
    same_theorem_ratio: float = Field(default=0.3, ge=0, le=1, description="Share from the same theorem.",
                                      json_schema_extra=HEAD)
    other_theorem_ratio: float = Field(default=0.1, ge=0, le=1, description="Share from other theorems.",
                                       json_schema_extra=HEAD)
    farther_negatives: int = Field(
        default=4, ge=0,
        description="Up to this many of a group's negatives (at most all of them) drawn first from the anchor's own "
        "theorem's positive states with more tactics remaining to a proof (taken out of the sibling quota, then the "
        "others): the energy learns progress along a proof, lower nearer its end, not only on the path against off "
        "it (0 = none; docs/ebm.md).",
        json_schema_extra=HEAD,
    )
    depth_loss_weight: float = Field(
        default=0.0, ge=0.0,
        description="Weight of the auxiliary regression of log(1 + tactics remaining to a proof) (0 = off).",
        json_schema_extra=HEAD,
    )
    learning_rate: float = Field(default=1e-3, gt=0, description="AdamW learning rate (3e-5 for a 7B backbone).",
                                 json_schema_extra=TRAINS)
    weight_decay: float = Field(default=0.0, ge=0.0, description="AdamW weight decay.", json_schema_extra=TRAINS)
    grad_clip: float = Field(default=1.0, gt=0, description="Clip the gradient norm to this.", json_schema_extra=TRAINS)
    steps: int = Field(default=300, ge=1, description="Training steps.", json_schema_extra=TRAINS)
    batch_size: int = Field(default=64, ge=1, description="Positives per step.", json_schema_extra=TRAINS)
    valid_fraction: float = Field(
        default=0.2, ge=0.0, lt=1.0, description="Share of theorems (by name hash) held out for validation.",
        json_schema_extra=HEAD,
    )
    log_every: int = Field(default=50, ge=1, description="Log metrics and the temperature every this many steps.",
                           json_schema_extra=CADENCE)
    encoder_backend: Literal["local", "serve"] = Field(
        default="local",
        description="Where burnqed's encoder runs (the same code either way, docs/ebm.md): 'local' loads the policy "
        "model (--model, else policy.model) in this process on ebm.device; 'serve' calls /encode of `burnqed serve` "
        "(the cluster's GPU sidecar runs `burnqed serve --encode-only`) at encoder_url. SGLang's --is-embedding is "
        "not an encoder of the value model: it pools the last token and L2-normalises.",
        json_schema_extra=TRAINS,
    )
    encoder_url: str = Field(
        default="http://127.0.0.1:30001", description="Base URL of `burnqed serve` for encoder_backend = 'serve'.",
        json_schema_extra=neutral("where burnqed serve listens"),
    )
    pooling: Literal["mean", "last"] = Field(
        default="mean",
        description="How the encoder pools the last hidden states of a text: 'mean' (masked mean over its tokens) or "
        "'last' (the last token's). Recorded in the encoder identity: a head trained with one is refused by another.",
        json_schema_extra=HEAD,
    )
    normalize: bool = Field(
        default=False, description="L2-normalise the embeddings (recorded in the encoder identity).",
        json_schema_extra=HEAD,
    )
    encoder_max_tokens: int = Field(
        default=4096, ge=1,
        description="Texts are cut to their first this many tokens before embedding (at most the model's context "
        "length; the resolved value is recorded in the encoder identity).",
        json_schema_extra=HEAD,
    )
    encode_batch_tokens: int = Field(
        default=16384, ge=1,
        description="Most tokens (texts × longest text, padding included) per encoder forward pass: bounds the "
        "encoder's GPU workspace (the GPU memory plan sizes it, docs/cluster.md).",
        json_schema_extra=neutral("how many texts one forward pass embeds"),
    )
    encode_batch: int = Field(default=32, ge=1, description="Texts per embedding request.",
                              json_schema_extra=neutral("how many texts one request embeds"))
    cache_chunk: int = Field(default=512, ge=1, description="Embeddings per Parquet cache chunk (resume unit).",
                             json_schema_extra=neutral("the embedding cache's resume unit"))
    cache_uri: str | None = Field(
        default=None,
        description="Embedding cache (path or URI, s3:// too); unset = '{output}-cache' beside the train-ebm "
        "output, outside the staged output so it survives a crash.",
        json_schema_extra=neutral("where embeddings are cached"),
    )
    scorer_cache_size: int = Field(
        default=200_000, ge=0, description="Search: energies remembered per process (by goal and state).",
        json_schema_extra=neutral("how many energies a search process remembers"),
    )
    seed: int = Field(default=0, description="Seed of sampling and initialisation.", json_schema_extra=HEAD)
    device: str = Field(default="auto", description="auto | cpu | cuda (head and local encoder).",
                        json_schema_extra=neutral("where the head and the local encoder run"))
    cpu_threads: int | None = Field(
        default=1, ge=1,
        description="torch threads while train-ebm, `ebm embed` and `joint-study` run on the CPU; unset = torch's "
        "default. Fixed so that the same seed trains the same head on any machine: the embeddings and the head "
        "differed between 1 and 4 threads (measured; burnqed/base/cpu_kernels.py).",
        json_schema_extra=shapes("train-ebm", "joint-study"),
    )

    @field_validator("encoder_url")
    @classmethod
    def _encoder_url_is_http(cls, value: str) -> str:
        return check_http_url(value, "encoder_url")

    @field_validator("encoder_backend", mode="before")
    @classmethod
    def _not_sglang(cls, value: object) -> object:
        if value == "sglang":
            raise ValueError("'sglang' is no longer an encoder of the value model: SGLang's --is-embedding pools the "
                             "last token and L2-normalises, unlike the embeddings the head is trained on; use 'serve' "
                             "(`burnqed serve --encode-only` at encoder_url) or 'local'")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> EbmConfig:
        if not self.temperature_min < self.temperature_max:
            raise ValueError(f"temperature_min {self.temperature_min} must be below temperature_max "
                             f"{self.temperature_max}")
        if not self.temperature_min <= self.init_temperature <= self.temperature_max:
            raise ValueError(f"init_temperature {self.init_temperature} must lie in [temperature_min, "
                             "temperature_max]")
        if self.sibling_ratio + self.same_theorem_ratio + self.other_theorem_ratio <= 0:
            raise ValueError("sibling_ratio + same_theorem_ratio + other_theorem_ratio must be positive")
        return self
