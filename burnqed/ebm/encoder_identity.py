"""Encoder identity: which model (by content) and which encoder settings produced the embeddings.

    identity = local_identity("s3://bucket/run/iter_1/export", folder, encoder.spec)   # in-process encoder
    identity = served_identity(info, url)       # `burnqed serve`'s GET /encoder_info, fingerprinted by the server
    identity.digest                             # e.g. '3f2a9c0e5b1d7a44': the model folder's fingerprint
    identity.key()                              # the embedding space: digest + backend, layer, pooling, ...

The embedding cache keeps its chunks under `key()`, and a trained head records the identity, so a new policy model
or another pooling never reuses old embeddings, and search refuses a head trained on other embeddings. The digest
is the model folder's content fingerprint (`burnqed.policy.fingerprint`).
"""

from __future__ import annotations

from typing import Any

from burnqed.ebm.formats import EncoderIdentity
from burnqed.errors import ConfigError
from burnqed.policy.base import POOLINGS, EncoderSpec
from burnqed.policy.fingerprint import folder_fingerprint
from burnqed.text.prompt import EMBEDDING_TEXT_VERSION


def _identity(model: str, digest: str, spec: EncoderSpec, via: str) -> EncoderIdentity:
    return EncoderIdentity(backend="burnqed", model=model, digest=digest, verified=True, layer=spec.layer,
                           pooling=spec.pooling, normalize=spec.normalize, max_tokens=spec.max_tokens,
                           text=EMBEDDING_TEXT_VERSION, dtype=spec.dtype, probe=list(spec.probe) or None,
                           via=via)


def local_identity(model: str, folder: str, spec: EncoderSpec) -> EncoderIdentity:
    """The identity of burnqed's encoder running in this process on `folder` (named `model` in messages)."""
    return _identity(model, folder_fingerprint(folder), spec, "in-process")


def served_identity(info: Any, url: str) -> EncoderIdentity:
    """The identity of the encoder behind `url`, from its `GET /encoder_info` reply; `ConfigError` when the reply
    is not burnqed's (the fingerprint is the server's own: it read the folder it loaded)."""
    try:
        if not isinstance(info, dict) or info.get("backend") != "burnqed":
            raise ValueError("not a burnqed encoder")
        raw = info["spec"]
        if raw.get("pooling") not in POOLINGS:
            raise ValueError(f"unknown pooling {raw.get('pooling')!r}")
        spec = EncoderSpec(pooling=raw["pooling"], normalize=bool(raw["normalize"]), layer=int(raw["layer"]),
                           max_tokens=int(raw["max_tokens"]), dtype=str(raw["dtype"]),
                           probe=tuple(int(token) for token in raw.get("probe") or ()))
        return _identity(str(info["model"]), str(info["digest"]), spec, url)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ConfigError(
            f"the encoder at {url} does not describe itself as burnqed's encoder ({exc}); serve the policy model "
            "there with `burnqed serve --encode-only`"
        ) from None
