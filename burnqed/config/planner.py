"""The `[planner]` section: which model writes sketch search's proof sketches, and how they are sampled.

    [planner]                                 # unset backend: the policy plans (the default)
    backend = "sglang"                        # a second served model plans
    url = "http://127.0.0.1:30002"            # its server (on the cluster: a sidecar on loopback, or a deployment)
    model = "s3://bucket/models/planner"      # the folder it serves (fetched into the planner's sidecar)
    prompt_format = "deepseek-sketch"         # its family, named by one of its formats: the family's sketch format
    temperature = 1.0                         # unset: policy.temperature (likewise top_p)

    cfg.planner.served                        # a second model plans (backend set)
    cfg.planner.sent_format(cfg.policy.prompt_format)   # the sketch format its prompts are built in
    cfg.planner.sampling_section(cfg.policy)  # the policy section a sketch request samples with
    cfg.planner.client_config(cfg.policy)     # the policy section its client is built from (commands/edges.py)
    cfg.planner.grammar(cfg.lean.max_text_chars)   # the sketch grammar its requests carry (planner.constrained)

How many sketches one request asks for is `search.sketch_plans` (one request is one unit of the theorem's budget,
so the count lives with the budget). docs/search.md, "The planner"; docs/cluster.md, "The planner's sidecar".
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from burnqed.base.uris import check_http_url
from burnqed.config.cluster import sampling_option
from burnqed.config.identity import fields_with_role, neutral, read_by_mode, with_role
from burnqed.config.policy import PolicyConfig
from burnqed.config.section import Section
from burnqed.text.prompt import PromptFormat, sketch_format
from burnqed.text.sketch_grammar import NAME_CHARS, SketchGrammar, sketch_grammar

SECOND = "second model"  # the role of a key that describes a second model: set while the policy plans, ignored
ANY = "whoever plans"  # the role of a key that applies whether the policy or a second model plans
PLAN = with_role(neutral("where the planner's sidecar runs and its GPU memory plan: what fits, not what it computes"),
                 SECOND)


class PlannerConfig(Section):
    """The planner of sketch search (search.mode = "sketch"): the policy itself unless `backend` names a second
    model, with its own server, prompt family and sampling."""

    # Each field's role (`identity.with_role`): it describes a second model (SECOND), or applies whoever plans (ANY).
    ROLES: ClassVar[tuple[str, ...]] = (SECOND, ANY)

    backend: Literal["local", "sglang"] | None = Field(
        default=None,
        description="Unset: the policy itself plans (its model, server and prompt family; the sampling below still "
        "applies). 'local' runs a second model in this process (transformers, planner.model, unset = the tiny "
        "embedded model); 'sglang' asks a second SGLang server (or `burnqed serve`) at planner.url. On the cluster "
        "'sglang' is required: a sidecar in each sketch-mode search pod, or a deployment (docs/cluster.md).",
        json_schema_extra=with_role(read_by_mode(), ANY),
    )
    url: str = Field(
        default="http://127.0.0.1:30002",
        description="Base URL of the planner's SGLang server (sglang backend). On the cluster a loopback URL (the "
        "default) gets the planner its own sidecar in each sketch-mode search pod; any other URL is a deployment "
        "the pods reach (its egress allowed: networkPolicy.allowedEgress).",
        json_schema_extra=with_role(neutral("where the planner's server listens"), SECOND),
    )
    model: str | None = Field(
        default=None,
        description="The planner's model: a folder for the local backend (unset = the tiny embedded model), the name "
        "results report for the sglang backend, and on the cluster the folder (URI) its sidecar fetches and serves.",
        json_schema_extra=with_role(read_by_mode(), SECOND),
    )
    prompt_format: PromptFormat | None = Field(
        default=None,
        description="The planner's prompt family, named by any of its formats (deepseek-sketch or plain-sketch "
        "read best); it is sent in the family's sketch format (text/prompt.py `sketch_format`). Unset = the "
        "policy's family (policy.prompt_format).",
        json_schema_extra=with_role(read_by_mode(), SECOND),
    )
    temperature: float | None = Field(
        default=None, ge=0.0, le=5.0,
        description="Sampling temperature of a sketch (0 = greedy); unset = policy.temperature.",
        json_schema_extra=with_role(read_by_mode(), ANY),
    )
    top_p: float | None = Field(
        default=None, gt=0.0, le=1.0, description="Nucleus sampling mass of a sketch; unset = policy.top_p.",
        json_schema_extra=with_role(read_by_mode(), ANY),
    )
    max_new_tokens: int = Field(
        default=1024, ge=1,
        description="Token limit of one sketch (its haves, the tactics that close the goal from them, and with the "
        "deepseek family any plan before the code). The other sampling fields (top_k, min_p, the penalties, the "
        "seed) are policy.*'s; sketches per request are search.sketch_plans.",
        json_schema_extra=with_role(read_by_mode(), ANY),
    )
    constrained: bool = Field(
        default=False,
        description="Sample sketches under the sketch format's grammar (text/sketch_grammar.py): SGLang's `ebnf` "
        "sampling parameter on a server, xgrammar's token mask in the local decoder, so that no sketch the reader "
        "refuses can be written (hole names `h` and one character, monotone; one line each). Tactic and whole-proof "
        "requests are never constrained.",
        json_schema_extra=with_role(read_by_mode(), ANY),
    )
    max_holes: int = Field(
        default=6, ge=1, le=len(NAME_CHARS),
        description="With planner.constrained: the most holes the grammar lets a sketch have.",
        json_schema_extra=with_role(read_by_mode(), ANY),
    )
    balanced: bool = Field(
        default=False,
        description="With planner.constrained: brackets in a sketch's lines and statements come in pairs, one level "
        "deep (`nlinarith [h₀, h₁]`, not `nlinarith [sq_nonneg (x - y)]`), so Lean's parser meets no unclosed one.",
        json_schema_extra=with_role(read_by_mode(), ANY),
    )
    gpus: int = Field(
        default=1, ge=1, le=8,
        description="Cluster: GPUs of the planner's sidecar (its own, beside the policy's cluster.gpus_per_step; "
        "above 1, SGLang's tensor parallelism). The GPU memory plan sizes the planner on them.",
        json_schema_extra=PLAN,
    )
    model_config_json: str | None = Field(
        default=None,
        description="Cluster: a local config.json of the planner's model, for its GPU memory plan (the sizes "
        "serving.model_config_json reads); unset = the policy's sizes ([serving]).",
        json_schema_extra=PLAN,
    )
    sglang_args: list[str] = Field(
        default_factory=list,
        description="Cluster: extra arguments of `sglang.launch_server` in the planner's sidecar (as "
        "cluster.sglang_args for the policy's; the sampling options are refused the same way).",
        json_schema_extra=PLAN,
    )

    @property
    def served(self) -> bool:
        """A second model plans (`backend` set); False: the policy plans."""
        return self.backend is not None

    @field_validator("url")
    @classmethod
    def _url_is_http(cls, value: str) -> str:
        return check_http_url(value, "url")

    @field_validator("sglang_args")
    @classmethod
    def _no_sampling_defaults(cls, args: list[str]) -> list[str]:
        for arg in args:
            option = sampling_option(arg)
            if option is not None:
                raise ValueError(f"{arg!r} sets SGLang's {option}: the planner's sidecar starts SGLang with "
                                 "--sampling-defaults openai and every sketch request carries every sampling field "
                                 "(planner.temperature, planner.top_p, the rest from policy.*); set those instead")
        return args

    @model_validator(mode="after")
    def _second_model(self) -> PlannerConfig:
        if self.backend is None:
            ignored = [key for key in SECOND_MODEL_KEYS if key in self.model_fields_set]
            if ignored:
                raise ValueError(f"planner.{ignored[0]} is set but planner.backend is not: the policy plans and would "
                                 "ignore it; set planner.backend ('sglang': a served model at planner.url, 'local': "
                                 "one in this process) or leave it out")
        return self

    def sent_format(self, policy_format: PromptFormat) -> PromptFormat:
        """The format of the planner's prompts (`text.prompt.build_sketch_prompt`): the sketch format of
        planner.prompt_format's family, else of the policy's (`policy_format`, policy.prompt_format)."""
        return sketch_format(self.prompt_format if self.prompt_format is not None else policy_format)

    def sampling_section(self, policy: PolicyConfig) -> PolicyConfig:
        """`policy` with the planner's temperature and top_p where set: what a sketch request samples with
        (`search.mode.policy_sampling(planner.sampling_section(policy), n=search.sketch_plans,
        max_new_tokens=planner.max_new_tokens, stop=stop_strings(fmt))`)."""
        update = {key: value for key, value in (("temperature", self.temperature), ("top_p", self.top_p))
                  if value is not None}
        return policy.model_copy(update=update)

    def grammar(self, max_text_chars: int = 100_000) -> SketchGrammar | None:
        """The grammar sketch requests are sampled under (planner.constrained; None: unconstrained): planner.max_holes
        and planner.balanced, its lines shortened to fit `max_text_chars` (lean.max_text_chars; ValueError when no
        line fits)."""
        if not self.constrained:
            return None
        return sketch_grammar(self.max_holes, balanced=self.balanced, max_text_chars=max_text_chars)

    def client_config(self, policy: PolicyConfig) -> PolicyConfig:
        """The policy section the planner's client is built from (`LocalPolicy.from_config`,
        `SGLangClient.from_config`): its backend, url and model, and the policy's client settings (device, seed,
        timeouts, retries, circuit breaker, batching, wait_for_start); the context length is asked from the
        planner's own server. Only for a second model (`served`)."""
        if self.backend is None:
            raise ValueError("the policy plans (planner.backend unset): it has no client of its own")
        return policy.model_copy(update={"backend": self.backend, "url": self.url, "model": self.model,
                                         "context_length": None})


# The keys that describe a second model (the fields whose mark's role is SECOND): set while the policy plans, they
# would be ignored, so `PlannerConfig` refuses them.
SECOND_MODEL_KEYS = fields_with_role(PlannerConfig, SECOND)
