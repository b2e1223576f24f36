"""Wiring of the concrete edges for commands: the Lean pool and the policy, from the configuration.

Stages type these as Protocols; only this module (and the local runner) picks the implementations.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from burnqed.config import LeanConfig, PolicyConfig
from burnqed.lean.pool import LeanPool
from burnqed.policy.base import Policy
from burnqed.policy.batching import BatchingPolicy


@asynccontextmanager
async def open_policy(cfg: PolicyConfig) -> AsyncIterator[BatchingPolicy]:
    """The configured policy, ready to answer, behind the batcher that merges concurrent searches' asks.

    `local` loads the model in this process (the tiny embedded model unless `policy.model` is set);
    `sglang` waits for the server's /health before the first request.
    """
    inner: Policy
    inflight = cfg.max_inflight_requests
    if cfg.backend == "local":
        from burnqed.policy.local import LocalPolicy

        inner = LocalPolicy.from_config(cfg)
        inflight = 1  # one in-process model: requests would only queue behind each other
    else:
        from burnqed.policy.sglang import SGLangClient

        client = SGLangClient.from_config(cfg)
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
async def open_pool(cfg: LeanConfig) -> AsyncIterator[tuple[LeanPool, int]]:
    """The started Lean pool and its size."""
    size = cfg.resolved_workers()
    pool = LeanPool.from_config(cfg, size=size)
    async with pool:
        yield pool, size
