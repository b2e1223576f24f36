"""Reading a Llama folder without transformers' model classes (burnqed/policy/decoder.py `load_torch_llama`, the
CPU default of `LocalModel.load`): what it reads gives transformers' logits and hidden states to float rounding, on a
Llama of every optional shape (biases, an untied head, sharded bf16 weights); every folder it does not read exactly as
transformers would goes to transformers instead."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from burnqed.policy.base import Sampling
from burnqed.policy.decoder import TorchLlama, load_torch_llama, torch_llama_refusal
from burnqed.policy.localmodel import LocalModel


def _llama(folder: Path, tiny_model_dir: Path, **config: Any) -> Path:
    """A random Llama with `config`'s fields over a small default, saved by transformers with the tiny model's
    tokenizer files (so `LocalModel.load` reads it)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    fields: dict[str, Any] = {"vocab_size": 859, "hidden_size": 48, "intermediate_size": 80, "num_hidden_layers": 2,
                              "num_attention_heads": 6, "num_key_value_heads": 2, "max_position_embeddings": 512}
    model: Any = LlamaForCausalLM(LlamaConfig(**{**fields, **config}))  # type: ignore[no-untyped-call]
    model.eval()
    with torch.no_grad():  # biases are zero at initialisation: make them count
        for name, parameter in model.named_parameters():
            if name.endswith("bias"):
                parameter.normal_(0, 0.5)
    dtype = config.get("dtype", "float32")
    model.to(getattr(torch, dtype)).save_pretrained(folder, max_shard_size="100KB" if dtype == "bfloat16" else "1GB")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tiny_model_dir / name, folder / name)
    return folder


SHAPES: dict[str, dict[str, Any]] = {
    "biases, untied head, sharded bf16": {"attention_bias": True, "mlp_bias": True, "tie_word_embeddings": False,
                                          "dtype": "bfloat16", "rope_theta": 5000.0},
    "tied head, head_dim of its own": {"tie_word_embeddings": True, "head_dim": 12},
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_llama_of_any_plain_shape_reads_as_transformers_reads_it(tiny_model_dir: Path, tmp_path: Path,
                                                                   shape: str) -> None:
    import torch

    folder = _llama(tmp_path / "model", tiny_model_dir, **SHAPES[shape])
    if SHAPES[shape].get("dtype") == "bfloat16":
        assert (folder / "model.safetensors.index.json").is_file()  # sharded: the index is read
    ours = LocalModel.load(folder, device="cpu", seed=0)
    theirs = LocalModel.load(folder, device="cpu", seed=0, avoid_transformers=False)
    assert isinstance(ours.model, TorchLlama) and not isinstance(theirs.model, TorchLlama)
    assert ours.context_length == theirs.context_length == 512
    texts = ["theorem t (x : ℕ) : x + 0 = x := by", "⊢ True", "a longer text than the others, to be padded against"]
    assert torch.tensor(ours.encode(texts)) == pytest.approx(torch.tensor(theirs.encode(texts)), abs=1e-4)
    ids = ours.tokenizer(texts[0])["input_ids"]
    with torch.inference_mode():
        mine = ours._forward(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                             position_ids=torch.arange(len(ids))[None])
        reference = theirs.model(input_ids=torch.tensor([ids])).logits[:, -1:]
    assert mine.logits == pytest.approx(reference, abs=1e-4)
    greedy = Sampling(n=1, temperature=0.0, max_new_tokens=12)
    assert ([g.token_ids for g in ours.generate_detailed(texts, greedy)[0]]
            == [g.token_ids for g in theirs.generate_detailed(texts, greedy)[0]])
    ours.close()
    theirs.close()


def _config(folder: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((folder / "config.json").read_text())
    return loaded


def _tiny_names() -> set[str]:
    names = {"model.embed_tokens.weight", "model.norm.weight"}
    for i in range(2):
        names |= {f"model.layers.{i}.{part}" for part in (
            "input_layernorm.weight", "post_attention_layernorm.weight", "self_attn.q_proj.weight",
            "self_attn.k_proj.weight", "self_attn.v_proj.weight", "self_attn.o_proj.weight", "mlp.gate_proj.weight",
            "mlp.up_proj.weight", "mlp.down_proj.weight")}
    return names


@pytest.mark.parametrize(("change", "names", "reason"), [
    ({}, set(), None),
    ({"model_type": "mistral"}, set(), "not a plain Llama"),
    ({"architectures": ["LlamaForSequenceClassification"]}, set(), "not a plain Llama"),
    ({"hidden_act": "gelu"}, set(), "another activation"),
    ({"quantization_config": {"quant_method": "bitsandbytes"}}, set(), "quantization"),
    ({"rope_scaling": {"rope_type": "linear", "factor": 2.0}}, set(), "scaled rotary"),
    ({"rope_parameters": {"rope_type": "llama3", "rope_theta": 1e4, "factor": 8.0}}, set(), "scaled rotary"),
    ({"rope_theta": 5e5}, set(), "two rotary bases"),
    ({"tie_word_embeddings": False}, set(), "lm_head.weight"),
    ({}, {"lm_head.weight"}, "lm_head.weight"),  # a tied model with a head of its own: transformers decides
    ({}, {"model.layers.0.self_attn.rotary_emb.inv_freq"}, "rotary_emb"),
    ({"attention_bias": True}, set(), "q_proj.bias"),
    ({"num_hidden_layers": None}, set(), "lacks num_hidden_layers"),
])
def test_what_transformers_might_read_otherwise_is_left_to_it(tiny_model_dir: Path, change: dict[str, Any],
                                                              names: set[str], reason: str | None) -> None:
    config = {key: value for key, value in {**_config(tiny_model_dir), **change}.items() if value is not None}
    refusal = torch_llama_refusal(config, _tiny_names() | names)
    assert refusal is None if reason is None else reason in (refusal or "")


def test_refused_and_pickled_folders_load_through_transformers(tiny_model_dir: Path, tmp_path: Path) -> None:
    scaled = tmp_path / "scaled"
    shutil.copytree(tiny_model_dir, scaled)
    config = _config(scaled)
    config["rope_scaling"] = config["rope_parameters"] = {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4}
    (scaled / "config.json").write_text(json.dumps(config))
    assert load_torch_llama(scaled) is None
    model = LocalModel.load(scaled, device="cpu")
    assert not isinstance(model.model, TorchLlama) and model.context_length == 4096  # factor × 2048, as SGLang
    model.close()

    import torch
    from safetensors.torch import load_file

    pickled = tmp_path / "pickled"
    shutil.copytree(tiny_model_dir, pickled)
    torch.save(load_file(pickled / "model.safetensors"), pickled / "pytorch_model.bin")
    (pickled / "model.safetensors").unlink()
    assert load_torch_llama(pickled) is None
    assert not isinstance(LocalModel.load(pickled, device="cpu").model, TorchLlama)


def test_a_cpu_process_reads_the_model_without_transformers(tiny_model_dir: Path) -> None:
    """The point of the reader and of the tokenizers-only tokenizer (tokenizers_only.TokenizersOnlyTokenizer): a search
    or eval on the CPU imports nothing of transformers (nor torch._dynamo, which its model classes import)."""
    heavy = ("transformers", "torch._dynamo")
    code = ("import sys; from burnqed.policy.localmodel import LocalModel; "
            f"m = LocalModel.load({str(tiny_model_dir)!r}, device='cpu'); m.encode(['x']); "
            f"print(sorted(n for n in sys.modules if n.startswith({heavy!r})))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]"


def test_the_exports_check_reads_the_folder_through_transformers(tiny_model_dir: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """`burnqed export` checks that transformers (what SGLang's loader builds on) reads and runs the folder: never the
    torch Llama reader, even on the CPU."""
    import burnqed.policy.decoder
    from burnqed.sft.export import verify_generation
    from burnqed.text.prompt import PromptFormat

    def refused(folder: Path, *, head: bool = True) -> None:
        raise AssertionError("the export's check read the folder without transformers")

    monkeypatch.setattr(burnqed.policy.decoder, "load_torch_llama", refused)
    assert isinstance(verify_generation(tiny_model_dir, PromptFormat.PLAIN_TACTIC, "cpu"), str)
