"""Fixtures of the policy tests: the tiny model read through transformers' own model classes, the reference the
reader without transformers (`LocalModel.load`'s default on the CPU: burnqed/policy/decoder.py `load_torch_llama`)
is checked against."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from burnqed.policy.localmodel import LocalModel


@pytest.fixture(scope="module")
def reference(tiny_model_dir: Path) -> Iterator[LocalModel]:
    """The tiny model as transformers' `LlamaForCausalLM` (`avoid_transformers=False`), decoding through transformers'
    forward pass too (`llama_decoder=False`): `reference.model(...)` is transformers' arithmetic end to end."""
    loaded = LocalModel.load(tiny_model_dir, device="cpu", seed=0, avoid_transformers=False)
    plain = LocalModel(loaded.model, loaded.tokenizer, loaded.path, seed=0, llama_decoder=False)
    yield plain
    loaded.close()
