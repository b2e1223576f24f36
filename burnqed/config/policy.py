"""The `[policy]` section: which model proposes tactics, and how candidates are sampled."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from burnqed.base.uris import check_http_url
from burnqed.config.identity import neutral, read_by_mode, recorded, searched
from burnqed.config.section import Section
from burnqed.records.enums import DeclarationForm
from burnqed.text.prompt import PromptFormat, is_repair_format, is_sketch_format, is_statement_format


class PolicyConfig(Section):
    """The policy edge: which model proposes tactics, and how candidates are sampled."""

    backend: Literal["local", "sglang"] = Field(
        default="local",
        description="'local' runs the model in this process (transformers); 'sglang' talks to an SGLang "
        "server (or `burnqed serve`) over its native /generate API at `url`.",
        json_schema_extra=searched(),
    )
    url: str = Field(default="http://127.0.0.1:30000", description="Base URL of the SGLang server (sglang backend).",
                     json_schema_extra=neutral("where the SGLang server listens"))
    model: str | None = Field(
        default=None,
        description="Model folder for the local backend (and the name reported in results). Unset = the tiny "
        "embedded model, built on first use under the user cache (see `burnqed model init-tiny`).",
        json_schema_extra=recorded("an input, stamped by what its folder holds (model, --model)",
                                   reaches=("eval",)),
    )
    prompt_format: PromptFormat = Field(
        default=PromptFormat.PLAIN_TACTIC,
        description="Prompt family (text/prompt.py), named by one of its formats: deepseek-tactic / deepseek-proof "
        "for DeepSeek-Prover models, plain-tactic / plain-proof for the tiny model. search.mode picks the variant "
        "(step: the tactic format, hybrid: the proof-from-state format, whole: the whole-proof format).",
        json_schema_extra=searched(stages=("sft", "train-ebm", "joint-study"), note="search, eval: the format sent"),
    )
    declaration_form: DeclarationForm = Field(
        default=DeclarationForm.BINDER,
        description="How prompts show the theorem's declaration: 'binder' as a Lean user writes it (`theorem n (x : ℝ) "
        "(h₀ : 0 < x) : T`, the binders are hypotheses), 'forall' as one ∀ statement (`theorem n : ∀ (x : ℝ), 0 < x → "
        "T`, the prototype's index form). Step and hybrid prompts show it above the tactic state, whole prompts "
        "alone. The start and the compile do not depend on it.",
        json_schema_extra=searched(stages=("sft",)),
    )
    cot: bool = Field(
        default=False,
        description="Whole mode with the deepseek family: DeepSeek-Prover-V2's chain-of-thought prompt (a proof plan "
        "first, then the code; the proof is the last lean4 block, generation stops at EOS, so give it room with "
        "search.proof_max_tokens). Step and hybrid prompts show a proof state and are not affected.",
        json_schema_extra=searched(stages=("sft",)),
    )
    num_candidates: int = Field(default=8, ge=1, le=256, description="Candidates sampled per expanded node.",
                                json_schema_extra=read_by_mode())
    temperature: float = Field(default=0.8, ge=0.0, le=5.0, description="Sampling temperature (0 = greedy).",
                               json_schema_extra=searched())
    top_p: float = Field(default=0.95, gt=0.0, le=1.0, description="Nucleus sampling mass.",
                         json_schema_extra=searched())
    max_new_tokens: int = Field(default=128, ge=1, description="Token limit per candidate.",
                                json_schema_extra=read_by_mode())
    top_k: int = Field(
        default=-1, ge=-1,
        description="Sample among the k most likely tokens only (-1 = the whole vocabulary; 0 is refused, as SGLang "
        "does). Like every field below, sent in every request, so a server never takes it from the model folder "
        "(docs/search.md, \"Every sampling field sent\").",
        json_schema_extra=searched(),
    )
    min_p: float = Field(
        default=0.0, ge=0.0, le=1.0,
        description="Drop tokens whose probability is below min_p × the most likely token's (0 = off). Cannot be "
        "combined with policy.seed: SGLang's seeded sampler fails on it.",
        json_schema_extra=searched(),
    )
    repetition_penalty: float = Field(
        default=1.0, gt=0.0, le=2.0,
        description="SGLang's repetition penalty on tokens already generated in the completion: a positive logit is "
        "divided by it, a negative one multiplied (1 = off).",
        json_schema_extra=searched(),
    )
    frequency_penalty: float = Field(
        default=0.0, ge=-2.0, le=2.0,
        description="Subtracted from a token's logit once per time it was already generated in the completion "
        "(0 = off).",
        json_schema_extra=searched(),
    )
    presence_penalty: float = Field(
        default=0.0, ge=-2.0, le=2.0,
        description="Subtracted from the logit of every token already generated in the completion (0 = off).",
        json_schema_extra=searched(),
    )
    context_length: int | None = Field(
        default=None, ge=2,
        description="The served model's context length in tokens, for the sglang client's prompt cap (a prompt "
        "whose tokens plus max_new_tokens reach it is not sent and fails alone); unset = asked from the server "
        "(GET /v1/models, max_model_len). The local backend reads it from the model's config.",
        json_schema_extra=neutral("the served model's own limit, asked from the server when unset"),
    )
    seed: int | None = Field(
        default=0,
        description="The run's sampling seed: every search sample is seeded with `policy.base.sample_seed(seed, "
        "theorem, expansion, sample)` (SGLang's sampling_seed, which SGLang honours only with "
        "--enable-deterministic-inference: the cluster's sidecar is started with it whenever a seed is set), so "
        "the same seed gives the same samples and figures at any concurrency or shard count; it also starts "
        "the local backend's stream for unseeded calls. null = unseeded "
        "(a random stream per process). Recorded in every eval result.",
        json_schema_extra=searched(),
    )
    device: str = Field(default="auto", description="Local backend device: auto | cpu | cuda | cuda:N.",
                        json_schema_extra=neutral("where the local model runs"))
    request_timeout_s: float = Field(default=300.0, gt=0, description="HTTP timeout of one /generate request.",
                                     json_schema_extra=neutral("how long one request may wait"))
    ready_timeout_s: float = Field(
        default=600.0, gt=0, description="How long to wait for the server's /health before giving up.",
        json_schema_extra=neutral("how long the server may take to start"),
    )
    wait_for_start: bool = Field(
        default=False,
        description="The servers at url and ebm.encoder_url (and the rl step's at rl.server_url) are being started "
        "beside this process (the workflows' GPU sidecars set it): a refused connection is a server still loading, "
        "waited for up to ready_timeout_s. Unset, "
        "a refused connection to a loopback URL (127.0.0.1, localhost, ::1) is an error at once: nothing listens "
        "there. A server that answers /health with 503 (warming up) is waited for either way.",
        json_schema_extra=neutral("whether a refused connection is waited for"),
    )
    retries: int = Field(default=4, ge=0, description="Retries of a failed request (5xx or transport error).",
                         json_schema_extra=neutral("how a failed request is retried"))
    backoff_s: float = Field(default=0.5, ge=0, description="First retry delay; doubles per retry (with jitter).",
                             json_schema_extra=neutral("how a failed request is retried"))
    breaker_failures: int = Field(
        default=5, ge=1, description="Consecutive failed requests that open the circuit breaker.",
        json_schema_extra=neutral("when the client stops asking a failing server"),
    )
    breaker_reset_s: float = Field(
        default=30.0, gt=0, description="How long the open breaker refuses requests before one trial request.",
        json_schema_extra=neutral("when the client stops asking a failing server"),
    )
    max_batch_prompts: int = Field(
        default=64, ge=1, description="Most prompts (states) sent in one request; concurrent searches are batched.",
        json_schema_extra=neutral("how many prompts share one request"),
    )
    samples_as: Literal["n", "copies"] = Field(
        default="n",
        description="How the sglang client asks for n samples of each prompt of a batch: 'n' = one /generate with "
        "sampling_params.n (burnqed serve shares one prefill per prompt; SGLang takes its 'not optimal' path for a "
        "batch with n > 1: one prefill request per prompt, awaited in turn, then n requests each, "
        "tokenizer_manager._handle_batch_request); 'copies' = each prompt n times with n = 1 (SGLang's batch path; "
        "burnqed serve then prefills each copy). benchmarks/sampling.py measures both against a server.",
        json_schema_extra=neutral("how a prompt's n samples are asked for, not which"),
    )
    max_inflight_requests: int = Field(
        default=64,
        ge=1,
        description="Most concurrent requests to the policy. SGLang batches continuously, so an ask held back here "
        "waits a whole generation: keep it at least search.concurrency (docs/search.md). The local backend sends "
        "one at a time.",
        json_schema_extra=neutral("how many requests run at once"),
    )

    @field_validator("url")
    @classmethod
    def _url_is_http(cls, value: str) -> str:
        return check_http_url(value, "url")

    @model_validator(mode="after")
    def _family(self) -> PolicyConfig:
        if (is_statement_format(self.prompt_format) or is_repair_format(self.prompt_format)
                or is_sketch_format(self.prompt_format)):
            raise ValueError(f"prompt_format {self.prompt_format} is a whole-proof variant (or a repair or sketch "
                             "one): name the family's tactic or proof format (search.mode = 'whole' picks the "
                             "whole-proof variant itself, search.repair_rounds the repair variant, sketch search the "
                             "sketch variant)")
        if self.cot and not self.prompt_format.startswith("deepseek"):
            raise ValueError(f"cot is an option of the deepseek prompt family, not of {self.prompt_format}")
        if self.top_k == 0:
            raise ValueError("top_k must be -1 (the whole vocabulary) or at least 1, got 0")
        if self.min_p > 0 and self.seed is not None:
            raise ValueError(f"min_p={self.min_p} cannot be combined with seed={self.seed}: SGLang samples seeded "
                             "requests only under --enable-deterministic-inference, whose sampler fails an assertion "
                             "on min_p and stops the server; set min_p = 0, or seed = null (unseeded)")
        return self
