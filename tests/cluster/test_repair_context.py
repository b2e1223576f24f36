"""The repair prompts must fit the served model's context (docs/search.md, "Repair"; docs/cluster.md): the longest
repair prompt a configuration builds plus the revision's tokens, checked when a workflow is rendered (the sidecar's
context from the configuration) and again by `burnqed search`/`eval` once the policy is up (the server's own
figure); refused before any work, with the numbers."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace

import pytest

from burnqed.cluster.gpu_plan import check_repair_context, gpu_plan, sidecar_context
from burnqed.commands.edges import check_repair_room
from burnqed.config import Config, PolicyConfig, SearchConfig
from burnqed.errors import ConfigError
from burnqed.policy.batching import BatchingPolicy
from burnqed.records.enums import SearchMode
from burnqed.search.repair import repair_context_problem, repair_prompt_tokens, sends_repair_prompts
from burnqed.text.prompt import PromptFormat
from tests.doubles.policy_double import ScriptedPolicy


def config(**sections: Mapping[str, object]) -> Config:
    return Config.model_validate(sections)


def test_the_longest_repair_prompt_is_the_formats_text_the_failed_proof_and_the_messages_at_their_caps() -> None:
    # The formats' own text in UTF-8 bytes (no byte-level tokenizer makes more tokens of it).
    assert repair_prompt_tokens(PromptFormat.PLAIN_REPAIR, 0, 0) == 140
    assert repair_prompt_tokens(PromptFormat.DEEPSEEK_REPAIR, 1024, 2048) == 353 + 1024 + 2048
    # It fits when it and the revision's tokens stay below the context.
    plain = PolicyConfig(prompt_format=PromptFormat.PLAIN_TACTIC)
    assert repair_context_problem(SearchConfig(), plain, 2048) is None  # 140 + 512 + 512 + 512 = 1676
    assert repair_context_problem(SearchConfig(), plain, None) is None  # unknown: the pod asks
    wide = SearchConfig(proof_max_tokens=1024, repair_message_tokens=2048)
    problem = repair_context_problem(wide, PolicyConfig(prompt_format=PromptFormat.DEEPSEEK_TACTIC), 4096)
    assert problem == (
        "search.repair_rounds: the longest repair prompt this configuration builds (3425 tokens: the failed proof at "
        "search.proof_max_tokens 1024, Lean's messages at search.repair_message_tokens 2048, deepseek-repair's own "
        "text 353) and the revision's 1024 new tokens need 4449 tokens; the model's context is 4096: lower "
        "search.proof_max_tokens or search.repair_message_tokens, serve a longer context, or set "
        "search.repair_rounds = 0")
    # The format is the one the search sends: with policy.cot, Goedel's CoT turn (its own text 738 bytes).
    cot = repair_context_problem(wide, PolicyConfig(prompt_format=PromptFormat.DEEPSEEK_TACTIC, cot=True), 4096)
    assert cot is not None and "(3810 tokens:" in cot and "deepseek-repair-cot's own text 738)" in cot


def test_repair_prompts_are_sent_by_whole_and_hybrid_searches_with_repair_on() -> None:
    assert [sends_repair_prompts(SearchConfig(mode=mode, repair_rounds=1)) for mode in ("step", "whole", "hybrid")] \
        == [False, True, True]
    assert not sends_repair_prompts(SearchConfig(mode="whole"))  # repair off
    assert sends_repair_prompts(SearchConfig(repair_rounds=1), [SearchMode.STEP, SearchMode.HYBRID])  # an eval mode
    assert not sends_repair_prompts(SearchConfig(repair_rounds=1), [SearchMode.STEP])
    assert not sends_repair_prompts(SearchConfig(mode="hybrid"), [SearchMode.WHOLE])


def test_rendering_refuses_repair_prompts_the_sidecars_context_cannot_hold(tmp_path: Path) -> None:
    repair = {"repair_rounds": 1, "proof_max_tokens": 1024, "repair_message_tokens": 2048}
    # Step search sends no repair prompt; an eval mode in whole mode does (the plain format: 140 + 1024 + 2048 + 1024).
    small = config(search=repair, pipeline={"eval_modes": ["whole"]}, policy={"context_length": 4096})
    with pytest.raises(ConfigError, match=r"need 4236 tokens; the model.s context is 4096.*policy.context_length"):
        gpu_plan(small, encoder=False)
    # The same configuration without repair, in step mode only, or with room: no refusal.
    check_repair_context(config(pipeline={"eval_modes": ["whole"]}, policy={"context_length": 4096}))
    check_repair_context(config(search=repair, policy={"context_length": 4096}))
    check_repair_context(config(search=repair, pipeline={"eval_modes": ["whole"]}, policy={"context_length": 8192}))
    # Where the context comes from: SGLang's --context-length first, policy.context_length, the model's config.json.
    model = tmp_path / "config.json"
    model.write_text(json.dumps({"max_position_embeddings": 16384, "hidden_size": 8}), encoding="utf-8")
    assert sidecar_context(config(serving={"model_config_json": str(model)})) == 16384
    assert sidecar_context(config(serving={"model_config_json": str(model)}, policy={"context_length": 4096})) == 4096
    assert sidecar_context(config(cluster={"sglang_args": ["--context-length", "8192"]},
                                  policy={"context_length": 4096})) == 8192
    assert sidecar_context(config(cluster={"sglang_args": ["--context-length=2048"]})) == 2048
    assert sidecar_context(Config()) is None


class ContextPolicy(ScriptedPolicy):
    """A local policy as the search sees it: its loaded model's context length (`LocalPolicy.model`)."""

    def __init__(self, context: int) -> None:
        super().__init__(lambda _: [])
        self.model = SimpleNamespace(context_length=context)


def test_search_and_eval_refuse_before_work_when_the_models_context_is_too_small() -> None:
    search = SearchConfig(mode="whole", repair_rounds=1)

    async def check(context: int, searched: SearchConfig) -> None:
        policy = BatchingPolicy(ContextPolicy(context), max_batch_prompts=8, max_inflight=1)
        try:
            await check_repair_room(policy, searched, PolicyConfig(prompt_format=PromptFormat.PLAIN_TACTIC))
        finally:
            await policy.close()

    asyncio.run(check(2048, search))  # the tiny model's context holds the defaults (1676 tokens)
    with pytest.raises(ConfigError, match="need 1676 tokens; the model's context is 1024"):
        asyncio.run(check(1024, search))
    asyncio.run(check(1024, SearchConfig(mode="whole")))  # no repair: nothing to check
    asyncio.run(check(1024, SearchConfig(repair_rounds=1)))  # step mode sends no repair prompt
