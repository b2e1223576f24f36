"""Wiring of the concrete edges for commands: the Lean pool, the policy, the planner and the value model, from the
configuration (`open_search_edges`: all four for search and eval).

Stages type these as Protocols; only this module (and the local runner) picks the implementations.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from burnqed.config import Config, LeanConfig, PolicyConfig, SearchConfig
from burnqed.errors import ConfigError
from burnqed.lean.pool import LeanPool
from burnqed.policy.base import Policy
from burnqed.policy.batching import BatchingPolicy
from burnqed.search.value import ValueFn
from burnqed.storage import Store

log = logging.getLogger(__name__)


@asynccontextmanager
async def open_policy(cfg: PolicyConfig, *, store: Store, url_setting: str = "policy.url"
                      ) -> AsyncIterator[BatchingPolicy]:
    """The configured policy, ready to answer, behind the batcher that merges concurrent searches' asks.

    `local` loads the model in this process (the tiny embedded model unless `policy.model` is set);
    `sglang` waits for the server's /health before the first request (`url_setting`: the key its errors name).
    """
    inner: Policy
    inflight = cfg.max_inflight_requests
    if cfg.backend == "local":
        from burnqed.policy.localpolicy import LocalPolicy

        inner = LocalPolicy.from_config(cfg, store=store)
        inflight = 1  # one in-process model: requests would only queue behind each other
    else:
        from burnqed.policy.sglang import SGLangClient
        from burnqed.sft.manifests import expected_probe

        # The served folder is policy.model's (the export the sidecar loads): its record says how it was trained;
        # a base model without one (eval-base, the baseline) is compared with burnqed's reading of its tokenizer.
        client = SGLangClient.from_config(cfg, expected_probe(cfg.model, store=store) if cfg.model else None,
                                          url_setting=url_setting)
        try:
            await client.wait_ready()
        except BaseException:
            await client.close()
            raise
        inner = client
    policy = BatchingPolicy(inner, max_batch_prompts=cfg.max_batch_prompts, max_inflight=inflight)
    try:
        yield policy
    finally:
        await policy.close()


@asynccontextmanager
async def open_planner(cfg: Config, *, store: Store) -> AsyncIterator[BatchingPolicy | None]:
    """The planner of sketch search when a second model plans (`planner.backend` set and `search.mode` = "sketch"),
    ready to answer: opened as `open_policy` opens the policy, from `planner.client_config` (its backend, url and
    model with the policy's client settings), so a served planner has answered /health (and its context and
    tokenizer questions) before the first theorem, and a local one is loaded. None when the policy itself plans or
    the mode writes no sketches: the sketch search then plans with the policy.

        async with open_policy(cfg.policy, store=store) as policy, open_planner(cfg, store=store) as planner:
            await check_planner_room(planner or policy, cfg)
    """
    from burnqed.search.modes import MODES  # the search machinery: not loaded by `open_pool`'s commands

    if not cfg.planner.served or not MODES[cfg.search.mode].plans:
        yield None
        return
    async with open_policy(cfg.planner.client_config(cfg.policy), store=store, url_setting="planner.url") as planner:
        yield planner


async def context_of(policy: BatchingPolicy) -> int | None:
    """The context length of the model behind `policy`: the one its SGLang server reports (policy.context_length,
    else /v1/models), or the local model's; None when it is not known (a double)."""
    from burnqed.policy.sglang import SGLangClient

    inner = policy.inner
    if isinstance(inner, SGLangClient):
        return await inner.context_limit()
    context = getattr(getattr(inner, "model", None), "context_length", None)  # a LocalPolicy's loaded model
    return context if isinstance(context, int) else None


async def check_planner_room(planner: BatchingPolicy, cfg: Config) -> None:
    """`ConfigError` before any theorem is searched in sketch mode when the planner's context (the local model's, or
    the one its SGLang server reports) cannot hold a sketch of planner.max_new_tokens after a prompt: every sketch
    request would be refused. `planner` is the planner `open_planner` opened, else the policy (which then plans);
    nothing in other modes or when the context is not known."""
    from burnqed.search.modes import MODES

    if not MODES[cfg.search.mode].plans:
        return
    context = await context_of(planner)
    if context is not None and cfg.planner.max_new_tokens >= context:
        whose = "planner" if cfg.planner.served else "policy (the planner: planner.backend is unset)"
        raise ConfigError(f"planner.max_new_tokens {cfg.planner.max_new_tokens} leaves no room for a sketch prompt in "
                          f"the {whose} model's context of {context} tokens: lower planner.max_new_tokens")


async def check_repair_room(policy: BatchingPolicy, search: SearchConfig, cfg: PolicyConfig) -> None:
    """`ConfigError` before any theorem is searched when search.repair_rounds asks for repair prompts that cannot fit
    the model's context (`burnqed.search.repair.repair_context_problem`): the local model's, or the one the SGLang
    server reports (policy.context_length, else /v1/models)."""
    from burnqed.search.repair import repair_context_problem, sends_repair_prompts

    if not sends_repair_prompts(search):
        return
    problem = repair_context_problem(search, cfg, await context_of(policy))
    if problem is not None:
        raise ConfigError(problem)


@asynccontextmanager
async def open_pool(cfg: LeanConfig, theorems_per_worker: int = 1) -> AsyncIterator[tuple[LeanPool, int]]:
    """The started Lean pool and its size (workers); each worker serves up to `theorems_per_worker` theorems
    (search passes `search.theorems_per_worker`; data replay keeps one theorem per worker)."""
    size = cfg.resolved_workers()
    pool = LeanPool.from_config(cfg, size=size, theorems_per_worker=theorems_per_worker)
    async with pool:
        yield pool, size


@dataclass(frozen=True, slots=True)
class SearchEdges:
    """What a search or an eval runs on (`open_search_edges`): the started Lean pool and its size, the policy, the
    planner (None: the policy plans) and the value model (None: none)."""

    pool: LeanPool
    pool_size: int
    policy: BatchingPolicy
    planner: BatchingPolicy | None
    value: ValueFn | None

    @property
    def pantograph_version(self) -> str | None:
        """The Pantograph version the pool's workers speak, as results record it."""
        return None if self.pool.version is None else str(self.pool.version)


@asynccontextmanager
async def open_search_edges(cfg: Config, ebm: str | None, *, store: Store) -> AsyncIterator[SearchEdges]:
    """The Lean pool, policy, planner and value model of `burnqed search` and `eval`, each ready, and the models'
    room for repair prompts and sketches checked, before any theorem is searched."""
    async with open_pool(cfg.lean, cfg.search.theorems_per_worker) as (pool, size), \
            open_policy(cfg.policy, store=store) as policy, open_planner(cfg, store=store) as planner, \
            open_value_fn(ebm, cfg, store=store) as value:
        await check_repair_room(policy, cfg.search, cfg.policy)
        await check_planner_room(planner or policy, cfg)
        yield SearchEdges(pool, size, policy, planner, value)


def check_value_fn(ebm: str, *, store: Store) -> None:
    """`--ebm` checked before the Lean pool and the models start: what `open_value_fn` opens, a finished value model
    (`ebm.formats.check_value_model`: one line saying what it got otherwise). A seam beside `open_value_fn`: whoever
    replaces that opener replaces this check with it."""
    from burnqed.ebm.formats import check_value_model

    check_value_model(ebm, store=store)


@asynccontextmanager
async def open_value_fn(ebm: str | None, cfg: Config, *, store: Store) -> AsyncIterator[ValueFn | None]:
    """The value model at `ebm` (a `train-ebm` output) as a `ValueFn`, or None without one (torch is then never
    imported).

    Loads the head on `ebm.device`, opens the encoder of `ebm.encoder_backend` on the policy's model
    (`policy.model`, else the tiny model; the local backend loads its own copy) and checks that it is the
    encoder the head was trained with: another model (digest), backend, layer, pooling, normalisation, token
    limit, text version or dtype is refused with a `ConfigError` naming both encoders, because the head would
    score embeddings it has never seen.
    """
    if ebm is None:
        yield None
        return
    from burnqed.commands.ebm import open_encoder
    from burnqed.ebm.scorer import EnergyScorer, load_value_model
    from burnqed.errors import ConfigError
    from burnqed.policy.localmodel import resolve_device

    head, manifest = load_value_model(ebm, resolve_device(cfg.ebm.device), store=store)
    async with open_encoder(cfg, cfg.policy.model, store=store) as (encoder, identity):
        trained = manifest.encoder
        difference = trained.mismatch(identity)
        if difference is not None:
            raise ConfigError(
                f"value model {ebm} was trained on embeddings of {trained.describe()}, but this run embeds with "
                f"{identity.describe()} ({difference}): retrain it on this encoder (`burnqed train-ebm`) or configure "
                "the encoder it was trained with (policy.model, ebm.pooling, ebm.normalize, ebm.encoder_max_tokens)"
            )
        if cfg.policy.prompt_format != manifest.prompt_format:
            log.warning("value model %s embeds texts in the %s format (as trained), the policy prompts in %s",
                        ebm, manifest.prompt_format, cfg.policy.prompt_format)
        yield EnergyScorer(head, encoder, manifest.prompt_format, cache_size=cfg.ebm.scorer_cache_size)
