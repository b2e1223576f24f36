"""The in-process model behind burnqed's async protocols: `LocalPolicy` (the `Policy` protocol) and `LocalEncoder`
(the `Encoder` protocol) on one `LocalModel`, its calls run in a worker thread, one at a time.

    policy = LocalPolicy.from_config(cfg.policy, store=store)    # the `Policy` protocol (async, a worker thread)
    encoder = LocalEncoder(policy.model)            # the `Encoder` protocol on the same weights
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from burnqed.errors import PolicyError
from burnqed.policy.base import AsyncClosing, Completion, Pooling, Sampling, Seeds
from burnqed.policy.localmodel import DEFAULT_BATCH_TOKENS, LocalModel
from burnqed.policy.modelpath import ensure_model
from burnqed.storage import Store

if TYPE_CHECKING:
    from burnqed.config import EbmConfig, PolicyConfig

T = TypeVar("T")


class LocalPolicy(AsyncClosing):
    """The `Policy` protocol on a `LocalModel`: calls run in a worker thread, one at a time."""

    def __init__(self, model: LocalModel) -> None:
        self.model = model
        self._lock = asyncio.Lock()
        self._closed = False

    @classmethod
    def from_config(cls, cfg: PolicyConfig, *, store: Store) -> LocalPolicy:
        """`policy.model` (or the default tiny model, built on first use), `policy.device`, `policy.seed`."""
        return cls(LocalModel.load(ensure_model(cfg.model, store=store), device=cfg.device, seed=cfg.seed))

    @property
    def name(self) -> str:
        return self.model.name

    async def generate(self, prompts: Sequence[str], sampling: Sampling,
                       seeds: Seeds | None = None) -> list[list[Completion]]:
        return await _call(self, self.model.generate, list(prompts), sampling, seeds)

    async def close(self) -> None:
        async with self._lock:
            if not self._closed:
                self._closed = True
                await asyncio.to_thread(self.model.close)


class LocalEncoder(AsyncClosing):
    """The `Encoder` protocol on a `LocalModel` with fixed encode settings (shareable with a `LocalPolicy`;
    closing it does not unload a shared model, the policy's close does)."""

    def __init__(self, model: LocalModel, *, pooling: Pooling = "mean", normalize: bool = False,
                 max_tokens: int | None = None, batch_tokens: int = DEFAULT_BATCH_TOKENS,
                 owns_model: bool = False) -> None:
        self.model = model
        self.pooling = pooling
        self.normalize = normalize
        self.max_tokens = max_tokens
        self.batch_tokens = batch_tokens
        self.spec = model.encoder_spec(pooling, normalize, max_tokens)
        self._owns = owns_model
        self._lock = asyncio.Lock()
        self._closed = False

    @classmethod
    def from_config(cls, cfg: PolicyConfig, ebm: EbmConfig | None = None, *, model: str | None = None,
                    store: Store) -> LocalEncoder:
        """`model` (default `cfg.model`, else the tiny model) on `ebm.device` with `ebm`'s encode settings."""
        from burnqed.config import EbmConfig

        ebm = ebm or EbmConfig()
        loaded = LocalModel.load(ensure_model(model or cfg.model, store=store), device=ebm.device, seed=ebm.seed)
        return cls(loaded, **encode_options(ebm), owns_model=True)

    async def encode(self, texts: Sequence[str]) -> list[list[float]]:
        return await _call(self, self._encode, list(texts))

    def _encode(self, texts: list[str]) -> list[list[float]]:
        return self.model.encode(texts, pooling=self.pooling, normalize=self.normalize, max_tokens=self.max_tokens,
                                 batch_tokens=self.batch_tokens)

    async def close(self) -> None:
        async with self._lock:
            if not self._closed:
                self._closed = True
                if self._owns:
                    await asyncio.to_thread(self.model.close)


def encode_options(ebm: EbmConfig) -> dict[str, Any]:
    """`LocalEncoder`'s encode settings from the `ebm` config section."""
    return {"pooling": ebm.pooling, "normalize": ebm.normalize, "max_tokens": ebm.encoder_max_tokens,
            "batch_tokens": ebm.encode_batch_tokens}


async def _call(owner: LocalPolicy | LocalEncoder, func: Callable[..., T], *args: Any) -> T:
    async with owner._lock:
        if owner._closed:
            raise PolicyError(f"local model {owner.model.name} is closed")
        try:
            return await asyncio.to_thread(func, *args)
        except (RuntimeError, ValueError) as exc:  # torch reports OOM and shape errors as RuntimeError
            raise PolicyError(f"local model {owner.model.name} failed: {type(exc).__name__}: {exc}") from exc
