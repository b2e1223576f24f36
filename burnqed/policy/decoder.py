"""burnqed's Llama forward pass in plain torch, for the local backend's decoding loop and encoder
(`burnqed.policy.localmodel`), and the reader that builds it from a model folder without transformers' model
classes (docs/search.md, "The local backend").

    model = load_torch_llama(folder)               # a TorchLlama; None when the folder is not a plain Llama in
    decoder = model.decoder                        #   safetensors (then: transformers reads it)
    decoder = LlamaDecoder.for_model(hf_model)     # the same pass over a loaded transformers model (None: not a Llama)
    out = decoder(input_ids=ids, attention_mask=mask, position_ids=pos)           # prefill: cache None
    out = decoder(input_ids=next_ids, attention_mask=mask, position_ids=next_pos, past_key_values=out.past_key_values)
    out.logits[:, -1]                              # the last position's logits, as transformers returns them
    decoder.hidden(input_ids=ids, attention_mask=right_padded_mask).last_hidden_state   # what `encode` pools
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch


class KVCache:
    """Per layer a key and a value buffer (batch, kv heads, capacity, head dim), the first `length` positions
    filled; `padded` when some row of the prefill was left-padded (then the attention needs the mask)."""

    def __init__(self, layers: list[tuple[torch.Tensor, torch.Tensor]], length: int, padded: bool) -> None:
        self.layers = layers
        self.length = length
        self.padded = padded

    def batch_repeat_interleave(self, repeats: int) -> None:
        """Each row `repeats` times in a row (a prompt's prefill shared by its samples)."""
        self.layers = [(k.repeat_interleave(repeats, dim=0), v.repeat_interleave(repeats, dim=0))
                       for k, v in self.layers]

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        """Keep these rows, in this order (finished samples leave the batch)."""
        self.layers = [(k.index_select(0, indices), v.index_select(0, indices)) for k, v in self.layers]

    def append(self, index: int, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write one new position of layer `index` (`keys`, `values`: (rows, kv heads, 1, head dim)), growing the
        buffers when full; the filled keys and values."""
        import torch

        k_buf, v_buf = self.layers[index]
        if self.length >= k_buf.shape[2]:
            grow = max(64, k_buf.shape[2])
            k_buf = torch.cat((k_buf, k_buf.new_empty((*k_buf.shape[:2], grow, k_buf.shape[3]))), dim=2)
            v_buf = torch.cat((v_buf, v_buf.new_empty((*v_buf.shape[:2], grow, v_buf.shape[3]))), dim=2)
            self.layers[index] = (k_buf, v_buf)
        k_buf.narrow(2, self.length, 1).copy_(keys)
        v_buf.narrow(2, self.length, 1).copy_(values)
        return k_buf.narrow(2, 0, self.length + 1), v_buf.narrow(2, 0, self.length + 1)


@dataclass(slots=True)
class DecoderOutput:
    logits: torch.Tensor  # (batch, 1, vocabulary): the last position's
    past_key_values: KVCache


@dataclass(slots=True)
class HiddenOutput:
    last_hidden_state: torch.Tensor  # (batch, positions, hidden): after the final norm


@dataclass(frozen=True, slots=True)
class _Layer:
    input_norm: torch.Tensor
    qkv: torch.Tensor  # q, k, v, then q and k with each head's halves rotated (heads + 2 kv heads + heads + kv
    # heads, × head dim, out features): rotate_half(x W^T) = x (R W)^T for a signed row permutation R
    qkv_bias: torch.Tensor | None
    o: torch.Tensor
    o_bias: torch.Tensor | None
    post_norm: torch.Tensor
    gate_up: torch.Tensor  # gate and up projections stacked
    gate_up_bias: torch.Tensor | None
    down: torch.Tensor
    down_bias: torch.Tensor | None


class LlamaDecoder:
    """The forward pass of a transformers `LlamaForCausalLM` in fused operations, over its own weights
    (docs/search.md, "The local backend")."""

    def __init__(self, config: Any, weight: Callable[[str], torch.Tensor | None], inv_freq: torch.Tensor,
                 rope_scaling: float = 1.0, *, head: bool = True) -> None:
        """The decoder of a Llama with these `config` fields (any object with the attributes of transformers'
        LlamaConfig) over `weight(name)`, the tensor of a parameter under its name in a transformers checkpoint
        (`model.layers.0.self_attn.q_proj.weight`; None for an absent bias); `inv_freq` and `rope_scaling` are the
        rotary embedding's. `head=False`: no LM head (the hidden states only: `hidden`)."""
        import torch

        def required(name: str) -> torch.Tensor:
            tensor = weight(name)
            if tensor is None:
                raise ValueError(f"the checkpoint has no {name}")
            return tensor.detach()

        def stacked(*names: str) -> tuple[torch.Tensor, torch.Tensor | None]:
            matrix = torch.cat([required(f"{name}.weight") for name in names], dim=0)
            biases = [weight(f"{name}.bias") for name in names]
            present = [b.detach() for b in biases if b is not None]
            return matrix, (torch.cat(present) if len(present) == len(biases) else None)

        def optional(name: str) -> torch.Tensor | None:
            tensor = weight(name)
            return None if tensor is None else tensor.detach()

        self.heads = int(config.num_attention_heads)
        self.kv_heads = int(config.num_key_value_heads)
        self.head_dim = _head_dim(config)
        self.layers: list[_Layer] = []
        for index in range(int(config.num_hidden_layers)):
            at = f"model.layers.{index}"
            qkv, qkv_bias = stacked(f"{at}.self_attn.q_proj", f"{at}.self_attn.k_proj", f"{at}.self_attn.v_proj")
            qk_rows = (self.heads + self.kv_heads) * self.head_dim
            qkv = torch.cat((qkv, self._rotated_rows(qkv[:qk_rows])))
            if qkv_bias is not None:
                qkv_bias = torch.cat((qkv_bias, self._rotated_rows(qkv_bias[:qk_rows])))
            gate_up, gate_up_bias = stacked(f"{at}.mlp.gate_proj", f"{at}.mlp.up_proj")
            self.layers.append(_Layer(
                required(f"{at}.input_layernorm.weight"), qkv, qkv_bias, required(f"{at}.self_attn.o_proj.weight"),
                optional(f"{at}.self_attn.o_proj.bias"), required(f"{at}.post_attention_layernorm.weight"), gate_up,
                gate_up_bias, required(f"{at}.mlp.down_proj.weight"), optional(f"{at}.mlp.down_proj.bias")))
        self.embed = required("model.embed_tokens.weight")
        self.eps = float(config.rms_norm_eps)
        self.final_norm = required("model.norm.weight")
        self.lm_head = required("lm_head.weight") if head else None
        self.lm_head_bias = optional("lm_head.bias") if head else None
        self.intermediate = int(config.intermediate_size)
        self.scale = self.head_dim ** -0.5
        self._inv_freq = inv_freq.detach().float()
        self._rope_scaling = float(rope_scaling)
        self._rotary = torch.empty(0)  # (positions, cos and sin, head dim): `_angles`

    def _rotated_rows(self, rows: torch.Tensor) -> torch.Tensor:
        """The projection rows (or biases) whose outputs are `rotate_half` of these rows' outputs, head by head:
        per head, minus the second half's rows, then the first half's."""
        import torch

        heads = rows.reshape(-1, self.head_dim, *rows.shape[1:])
        half = self.head_dim // 2
        return torch.cat((-heads[:, half:], heads[:, :half]), dim=1).reshape(rows.shape)

    @classmethod
    def for_model(cls, model: Any) -> LlamaDecoder | None:
        """A decoder for `model` when it is a plain Llama (default rotary embedding, SiLU MLP) on the CPU, else None.
        (On a GPU transformers' kernels are not the bottleneck, and the stacked matrices would copy a large model's
        projections.)"""
        device = getattr(model, "device", None)
        if device is None or getattr(device, "type", None) != "cpu":
            return None
        config = getattr(model, "config", None)
        if config is None or getattr(config, "model_type", None) != "llama" or not hasattr(model, "lm_head"):
            return None
        # transformers 5 names it rope_parameters (rope_scaling is an alias), 4.x rope_scaling (None by default)
        rope = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
        if rope.get("rope_type", rope.get("type", "default")) != "default":
            return None
        if getattr(config, "hidden_act", None) != "silu" or getattr(config, "pretraining_tp", 1) != 1:
            return None
        parameters = dict(model.named_parameters(remove_duplicate=False))  # a tied head under its own name too
        rotary = model.model.rotary_emb
        return cls(config, parameters.get, rotary.inv_freq, rotary.attention_scaling)

    def __call__(self, *, input_ids: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor,
                 past_key_values: KVCache | None = None, **_: object) -> DecoderOutput:
        """The last position's logits and the cache extended by the new tokens. `input_ids` and `position_ids`:
        (batch, new tokens), several new tokens only in a prefill (no cache); `attention_mask`: (batch, cached + new
        tokens), 1 for a real token and 0 for left padding."""
        import torch

        if past_key_values is None:
            return self._prefill(input_ids, attention_mask, position_ids)
        if input_ids.shape[1] != 1:
            raise ValueError("a cached step takes one new token per row")
        cache = past_key_values
        rows = input_ids.shape[0]
        attend = torch.nn.functional.scaled_dot_product_attention
        hidden = torch.nn.functional.embedding(input_ids, self.embed)  # (rows, 1, hidden)
        # a position counts the row's real tokens before it: less than the cache's length plus this one
        cos, sin = self._angles(position_ids, hidden.dtype, cache.length + 1)
        bias = None
        if cache.padded:
            bias = torch.zeros(attention_mask.shape, dtype=hidden.dtype, device=hidden.device)
            bias = bias.masked_fill(attention_mask == 0, torch.finfo(hidden.dtype).min)[:, None, None, :]
        groups = self.heads // self.kv_heads
        for index, layer in enumerate(self.layers):
            q, k, v = self._qkv(layer, hidden, cos, sin)  # (rows, heads or kv heads, 1, head dim)
            keys, values = cache.append(index, k, v)
            # grouped-query attention: the query heads of one kv head as that head's query rows
            attended = attend(q.reshape(rows, self.kv_heads, groups, self.head_dim), keys, values,
                              attn_mask=bias, scale=self.scale)
            hidden = self._finish_layer(layer, hidden, attended.reshape(rows, 1, self.heads * self.head_dim))
        cache.length += 1
        return DecoderOutput(self._logits(hidden), cache)

    def _prefill(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                 position_ids: torch.Tensor) -> DecoderOutput:
        new = input_ids.shape[1]
        layers: list[tuple[torch.Tensor, torch.Tensor]] = []
        hidden, padded = self._full_pass(input_ids, attention_mask, position_ids, layers)
        return DecoderOutput(self._logits(hidden[:, -1:, :]), KVCache(layers, new, padded))

    def hidden(self, *, input_ids: torch.Tensor, attention_mask: torch.Tensor, **_ignored: Any) -> HiddenOutput:
        """The last hidden states (after the final norm) at every position of right-padded rows, positions counted
        from 0: what `LocalModel.encode` pools (transformers' `LlamaModel(...).last_hidden_state`)."""
        import torch

        rows, new = input_ids.shape
        positions = torch.arange(new, device=input_ids.device).expand(rows, new)
        hidden, _ = self._full_pass(input_ids, attention_mask, positions, None)
        return HiddenOutput(_rms(hidden, self.final_norm, self.eps))

    def _full_pass(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor,
                   cache: list[tuple[torch.Tensor, torch.Tensor]] | None) -> tuple[torch.Tensor, bool]:
        """Every layer over whole rows (no cache before them): the hidden states before the final norm and whether
        a row is padded; each layer's keys and values appended to `cache` (with room for 64 more) when given."""
        import torch

        rows, new = input_ids.shape
        hidden = torch.nn.functional.embedding(input_ids, self.embed)
        cos, sin = self._angles(position_ids, hidden.dtype, new)  # positions count real tokens: below `new`
        padded = bool((attention_mask == 0).any())
        bias = None
        if padded:
            visible = attention_mask[:, None, None, :].bool() & torch.ones(
                new, new, dtype=torch.bool, device=input_ids.device).tril()[None, None]
            # the dtype's minimum, not -inf: a padding query sees no key, and its row must not become NaN
            bias = torch.zeros(visible.shape, dtype=hidden.dtype, device=hidden.device).masked_fill(
                ~visible, torch.finfo(hidden.dtype).min)
        for layer in self.layers:
            q, k, v = self._qkv(layer, hidden, cos, sin)
            if cache is not None:
                capacity = new + 64
                k_buf = k.new_empty((rows, self.kv_heads, capacity, self.head_dim))
                v_buf = v.new_empty((rows, self.kv_heads, capacity, self.head_dim))
                k_buf[:, :, :new], v_buf[:, :, :new] = k, v
                cache.append((k_buf, v_buf))
            attended = torch.nn.functional.scaled_dot_product_attention(
                q, k, v, attn_mask=bias, is_causal=bias is None, scale=self.scale,
                enable_gqa=self.heads != self.kv_heads)
            hidden = self._finish_layer(layer, hidden,
                                        attended.transpose(1, 2).reshape(rows, new, self.heads * self.head_dim))
        return hidden, padded

    def _logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """The final norm and the LM head."""
        import torch

        if self.lm_head is None:
            raise RuntimeError("this decoder was built without its LM head")
        return torch.nn.functional.linear(_rms(hidden, self.final_norm, self.eps), self.lm_head, self.lm_head_bias)

    def _qkv(self, layer: _Layer, hidden: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries and keys with the rotary embedding applied, and values: (rows, heads, new, head dim)."""
        import torch

        rows, new, _ = hidden.shape
        normed = _rms(hidden, layer.input_norm, self.eps)
        projected = torch.nn.functional.linear(normed, layer.qkv, layer.qkv_bias)
        qk = self.heads + self.kv_heads
        projected = projected.view(rows, new, 2 * qk + self.kv_heads, self.head_dim).transpose(1, 2)
        rotated = torch.addcmul(projected[:, :qk] * cos, projected[:, qk + self.kv_heads:], sin)
        return rotated[:, : self.heads], rotated[:, self.heads:], projected[:, qk: qk + self.kv_heads]

    def _finish_layer(self, layer: _Layer, hidden: torch.Tensor, attended: torch.Tensor) -> torch.Tensor:
        """The residual around the attention output, then the SiLU-gated MLP and its residual."""
        import torch

        functional = torch.nn.functional
        hidden = hidden + functional.linear(attended, layer.o, layer.o_bias)
        gate_up = functional.linear(_rms(hidden, layer.post_norm, self.eps), layer.gate_up, layer.gate_up_bias)
        gate, up = gate_up[..., : self.intermediate], gate_up[..., self.intermediate:]
        return hidden + functional.linear(functional.silu(gate) * up, layer.down, layer.down_bias)

    def _angles(self, position_ids: torch.Tensor, dtype: torch.dtype, bound: int) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin of the rotary angles at these positions (each below `bound`), (rows, 1, new, head dim), from a
        table grown as needed (the angle of position p is p × inv_freq, in float32, as transformers computes it,
        then cast to the model's dtype, as transformers casts cos and sin)."""
        import torch

        if bound > self._rotary.shape[0] or self._rotary.dtype != dtype:
            size = max(bound, 2 * self._rotary.shape[0], 256)
            freqs = torch.arange(size, dtype=torch.float32)[:, None] * self._inv_freq[None, :]
            angles = torch.cat((freqs, freqs), dim=-1)
            table = torch.stack((angles.cos(), angles.sin()), dim=1) * self._rope_scaling  # (size, 2, head dim)
            self._rotary = table.to(device=position_ids.device, dtype=dtype)
        picked = self._rotary[position_ids].unsqueeze(1)  # (rows, 1, new, 2, head dim)
        return picked[..., 0, :], picked[..., 1, :]


# ------------------------------------------------------------------------------------------------- loading

LLAMA_DEFAULTS: dict[str, Any] = {  # LlamaConfig's defaults for the fields the decoder reads, where config.json omits
    "hidden_act": "silu", "pretraining_tp": 1, "rms_norm_eps": 1e-6, "head_dim": None, "attention_bias": False,
    "mlp_bias": False, "tie_word_embeddings": False, "rope_scaling": None, "rope_parameters": None,
}
LLAMA_REQUIRED = ("hidden_size", "intermediate_size", "num_attention_heads", "num_hidden_layers", "vocab_size")
SAFETENSORS_INDEX = "model.safetensors.index.json"


class TorchLlama:
    """A plain Llama model folder read without transformers' model classes (`load_torch_llama`): the decoder over its
    weights, float32 on the CPU, and config.json's fields as attributes (with LlamaConfig's defaults). What
    `LocalModel` reads of a model: `config`, `device`, `dtype`, and `lm_head`, absent when loaded without it."""

    def __init__(self, decoder: LlamaDecoder, config: Any) -> None:
        import torch

        self.decoder = decoder
        self.config = config
        self.device = torch.device("cpu")
        self.dtype = torch.float32
        if decoder.lm_head is not None:
            self.lm_head = decoder.lm_head


def torch_llama_refusal(config: dict[str, Any], names: set[str]) -> str | None:
    """Why a folder with this config.json and these weight names is not one `load_torch_llama` reads (None: it is one):
    anything but a plain Llama (default rotary embedding, SiLU, no quantization) whose checkpoint holds exactly
    the parameters transformers' `LlamaForCausalLM` would load from it."""
    fields = {**LLAMA_DEFAULTS, **config}
    if fields.get("model_type") != "llama" or fields.get("architectures") not in (None, ["LlamaForCausalLM"]):
        return (f"not a plain Llama (model_type {fields.get('model_type')!r}, "
                f"architectures {fields.get('architectures')})")
    missing = [key for key in LLAMA_REQUIRED if not isinstance(fields.get(key), int)]
    if missing:
        return f"config.json lacks {', '.join(missing)}"
    if fields["hidden_act"] != "silu" or fields["pretraining_tp"] != 1 or "quantization_config" in fields:
        return "another activation, tensor-parallel pretraining or a quantization"
    if not all(_default_rope(fields[key]) for key in ("rope_scaling", "rope_parameters")):
        return "a scaled rotary embedding"
    if len(_thetas(fields)) > 1:
        return "two rotary bases (rope_theta and rope_parameters.rope_theta differ)"
    expected = {"model.embed_tokens.weight", "model.norm.weight"}
    if not fields["tie_word_embeddings"]:
        expected.add("lm_head.weight")
    projections = [f"self_attn.{p}_proj" for p in "qkvo"] + [f"mlp.{p}_proj" for p in ("gate", "up", "down")]
    for index in range(fields["num_hidden_layers"]):
        at = f"model.layers.{index}"
        expected |= {f"{at}.input_layernorm.weight", f"{at}.post_attention_layernorm.weight"}
        expected |= {f"{at}.{projection}.weight" for projection in projections}
        if fields["attention_bias"]:
            expected |= {f"{at}.self_attn.{p}_proj.bias" for p in "qkvo"}
        if fields["mlp_bias"]:
            expected |= {f"{at}.mlp.{p}_proj.bias" for p in ("gate", "up", "down")}
    if set(names) != expected:
        odd = sorted(set(names) ^ expected)
        more = " ..." if len(odd) > 3 else ""
        return f"the checkpoint's parameters are not a Llama's of this config ({', '.join(odd[:3])}{more})"
    return None


def _default_rope(scaling: Any) -> bool:
    """Whether a rope_scaling or rope_parameters value leaves the rotary embedding at its default."""
    if scaling is None:
        return True
    return (isinstance(scaling, dict) and scaling.get("rope_type", scaling.get("type", "default")) == "default"
            and set(scaling) <= {"rope_type", "type", "rope_theta"})


def _thetas(fields: dict[str, Any]) -> set[float]:
    """The rotary bases config.json states (transformers 5 reads rope_parameters', 4.x rope_theta)."""
    params = fields.get("rope_parameters")
    found = {float(fields["rope_theta"])} if fields.get("rope_theta") is not None else set()
    if isinstance(params, dict) and params.get("rope_theta") is not None:
        found.add(float(params["rope_theta"]))
    return found


def load_torch_llama(folder: Path, *, head: bool = True) -> TorchLlama | None:
    """The model in `folder` as a `TorchLlama`, read from its config.json and safetensors weights with no
    transformers model class imported (the ~1.4 s a CPU process spends importing them is most of a tiny model's
    start), None when `torch_llama_refusal` names a reason or the weights are not safetensors: then transformers
    reads it.
    `head=False` leaves the LM head out (`LocalModel.load(encoder_only=True)`). Weights become float32, as
    `LocalModel.load` asks transformers for on the CPU; the rotary frequencies are computed as transformers'
    default RoPE computes them. Errors of unreadable files propagate."""
    import json

    import torch
    from safetensors import safe_open

    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    if not isinstance(config, dict):
        return None
    if (folder / "model.safetensors").is_file():
        files = [folder / "model.safetensors"]
    elif (folder / SAFETENSORS_INDEX).is_file():
        index = json.loads((folder / SAFETENSORS_INDEX).read_text(encoding="utf-8"))
        files = [folder / name for name in sorted(set(index["weight_map"].values()))]
    else:
        return None
    names: set[str] = set()
    for file in files:  # the names from the headers only: a refused folder's weights are never read here
        with safe_open(str(file), framework="pt") as opened:
            names.update(opened.keys())
    if torch_llama_refusal(config, names) is not None:
        return None
    tensors: dict[str, torch.Tensor] = {}
    for file in files:
        with safe_open(str(file), framework="pt") as opened:
            for name in opened.keys():  # noqa: SIM118 (a safetensors handle is not a mapping)
                tensors[name] = opened.get_tensor(name).to(torch.float32)
    fields = SimpleNamespace(**{**LLAMA_DEFAULTS, **config})
    if fields.tie_word_embeddings:
        tensors["lm_head.weight"] = tensors["model.embed_tokens.weight"]
    if getattr(fields, "num_key_value_heads", None) is None:
        fields.num_key_value_heads = fields.num_attention_heads
    theta = next(iter(_thetas(vars(fields))), 10000.0)
    dim = _head_dim(fields)
    inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float) / dim))
    return TorchLlama(LlamaDecoder(fields, tensors.get, inv_freq, head=head), fields)


def _head_dim(config: Any) -> int:
    """A head's width as transformers' Llama reads the config: `head_dim`, else hidden size over heads."""
    return int(getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads)


def _rms(hidden: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Llama's RMSNorm, computed in float32 as transformers does (in one call when the model is float32: torch's
    rms_norm computes it the same way, and one call costs less than five)."""
    import torch

    dtype = hidden.dtype
    if dtype == torch.float32:
        return torch.nn.functional.rms_norm(hidden, (hidden.shape[-1],), weight, eps)
    x = hidden.to(torch.float32)
    x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return weight * x.to(dtype)
