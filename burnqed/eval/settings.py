"""What an eval result records of its settings (`EvalSettings`, eval.json's `settings`): the effective settings its
engine ran with, a fixed set written here once, and every configuration key of eval's identity in its mode by value,
as a `section.key` → value map (`config`). Neither is derived from today's `Config`: a knob renamed or removed since
a result was written is a migration of the saved record (`eval.migrations`), not a result that no longer reads.

    settings = recorded_settings(eval_settings(backend, engine, concurrency), identity)   # eval.run
    settings.timeout_s, settings.config["search.revisits"]
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, JsonValue


class EvalSettings(BaseModel):
    """The effective search and sampling settings of an eval, as its engine ran (`eval.run.eval_settings`), and the
    configuration keys of eval's identity by value (`config`)."""

    model_config = ConfigDict(extra="forbid")

    backend: str = Field(description="policy.backend: 'local' (in-process) or 'sglang'.")
    prompt_format: str = Field(description="policy.prompt_format.")
    num_candidates: int = Field(
        description="Completions per policy request: tactics per expanded node (step), proofs per request (whole), "
        "proofs per round at the root (hybrid)."
    )
    temperature: float = Field(description="Sampling temperature.")
    top_p: float = Field(description="Nucleus sampling mass.")
    # The other sampling fields every request sends (policy.*); None in a result written before they were recorded,
    # whose requests left them to the server (SGLang's defaults, or its --preferred-sampling-params).
    top_k: int | None = Field(default=None, description="policy.top_k (-1: the whole vocabulary).")
    min_p: float | None = Field(default=None, description="policy.min_p.")
    repetition_penalty: float | None = Field(default=None, description="policy.repetition_penalty.")
    frequency_penalty: float | None = Field(default=None, description="policy.frequency_penalty.")
    presence_penalty: float | None = Field(default=None, description="policy.presence_penalty.")
    max_new_tokens: int = Field(description="Token limit per completion (hybrid: at the root).")
    max_nodes: int | None = Field(
        default=None, description="Expansion budget of each attempt (step mode: the largest eval budget)."
    )
    max_proofs: int | None = Field(
        default=None, description="Proofs-sampled budget of each attempt (whole and hybrid: the largest eval budget)."
    )
    max_depth: int | None = Field(default=None, description="search.max_depth (step and hybrid).")
    timeout_s: float = Field(description="search.timeout_s per theorem.")
    alpha: float | None = Field(default=None, description="search.alpha, length normalisation of log-probs (step).")
    expand_batch: int | None = Field(default=None, description="search.expand_batch (step).")
    probe_tactics: list[str] = Field(default_factory=list, description="search.probe_tactics (step).")
    verify: bool = Field(description="search.verify (proofs compiled with frontend.process).")
    stop_at_first: bool = Field(description="search.stop_at_first.")
    value_weight: float | None = Field(
        default=None, description="search.value_weight (step; used only with a value model)."
    )
    value_ramp_depth: int | None = Field(default=None, description="search.value_ramp_depth (step).")
    concurrency: int = Field(description="Theorems searched at once.")
    repair_rounds: int | None = Field(
        default=None, description="search.repair_rounds (whole and hybrid; None: step, or a result before repair)."
    )
    repair_message_tokens: int | None = Field(
        default=None, description="search.repair_message_tokens, when repair_rounds is above 0."
    )
    repair_cut_at_error: bool | None = Field(
        default=None, description="search.repair_cut_at_error, when repair_rounds is above 0."
    )
    sketch_rounds: int | None = Field(default=None, description="search.sketch_rounds (sketch mode).")
    sketch_subgoal_mode: str | None = Field(default=None, description="search.sketch_subgoal_mode (sketch mode).")
    sketch_subgoal_share: float | None = Field(default=None, description="search.sketch_subgoal_share (sketch mode).")
    subgoal_num_candidates: int | None = Field(
        default=None, description="Sketch mode: completions per request of a subgoal's search (num_candidates and "
        "max_new_tokens are the planner's: sketches per request, tokens per sketch).")
    subgoal_max_new_tokens: int | None = Field(
        default=None, description="Sketch mode: the token limit of a subgoal search's completions (hybrid: at its "
        "root).")
    config: dict[str, JsonValue] = Field(
        default_factory=dict, description="Every configuration key of eval's identity in its mode (`section.key`, as "
        "`burnqed.config.identity` marks it) → its value, as the identity holds it (JSON); a key renamed since is "
        "read under its new name (`eval.migrations`). Empty in results before schema 8; in results of schema 8 and 9 "
        "the keys they recorded, read from their fields.")


# The fields of the effective settings (every field of `EvalSettings` but `config`).
ENGINE_FIELDS = tuple(name for name in EvalSettings.model_fields if name != "config")


def recorded_settings(effective: EvalSettings, identity: Mapping[str, object]) -> EvalSettings:
    """`effective` (`eval.run.eval_settings`: what the engine ran with) with every key of eval's identity in its mode
    (`identity`: `section.key` → value, `eval.identity.search_identity`) in `config`."""
    return EvalSettings.model_validate({**effective.model_dump(exclude_unset=True), "config": dict(identity)})
