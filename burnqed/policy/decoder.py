"""A lean forward pass for Llama-shaped causal LMs, for the local backend's decoding loop (`burnqed.policy.local`).

    decoder = LlamaDecoder.for_model(model)        # None when the model is not a plain Llama (then: transformers')
    out = decoder(input_ids=ids, attention_mask=mask, position_ids=pos)           # prefill: cache None
    out = decoder(input_ids=next_ids, attention_mask=mask, position_ids=next_pos, past_key_values=out.past_key_values)
    out.logits[:, -1]                              # the last position's logits, as transformers returns them

Why: decoding the tiny embedded model one token at a time through transformers' module stack costs about 2 ms a
step on a CPU core, nearly all of it Python and operator dispatch around a few microseconds of arithmetic (hooks,
output capture, mask construction, cache bookkeeping, one projection per matrix); the embedded iteration's
search and evals spend most of their time there. This is the same computation in fewer, larger operations: the
q/k/v projections as one matrix product and the MLP's gate and up projections as another, rotary angles from a
table, keys and values written into a preallocated cache instead of concatenated each step, grouped-query
attention without repeating the keys, and no attention mask when no row is padded. It uses the transformers
model's weights (the fused matrices are concatenated copies of them, made once per model).

It is the model's arithmetic, not transformers' kernels: attention is a plain softmax (transformers calls SDPA)
and the fused products may round differently, so logits agree with transformers' to float rounding, not bit
for bit (tests/policy/test_decoder.py bounds the difference and checks that greedy decoding picks the same
tokens). Every decoding step of a run goes through this one path, so a seeded run is as reproducible as before.
Models it does not cover (another architecture, a scaled rotary embedding, another activation) get None from
`for_model` and decode through transformers.

Shapes: `input_ids` and `position_ids` (batch, new tokens), several new tokens only in a prefill (no cache);
`attention_mask` (batch, cached + new tokens), 1 for a real token and 0 for left padding.
"""

from __future__ import annotations

from dataclasses import dataclass
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
        """Write one new position of layer `index` (growing the buffers when full); the filled keys and values."""
        import torch

        k_buf, v_buf = self.layers[index]
        if self.length >= k_buf.shape[2]:
            grow = max(64, k_buf.shape[2])
            k_buf = torch.cat((k_buf, k_buf.new_empty((*k_buf.shape[:2], grow, k_buf.shape[3]))), dim=2)
            v_buf = torch.cat((v_buf, v_buf.new_empty((*v_buf.shape[:2], grow, v_buf.shape[3]))), dim=2)
            self.layers[index] = (k_buf, v_buf)
        k_buf[:, :, self.length] = keys
        v_buf[:, :, self.length] = values
        return k_buf[:, :, : self.length + 1], v_buf[:, :, : self.length + 1]


@dataclass(slots=True)
class DecoderOutput:
    logits: torch.Tensor  # (batch, 1, vocabulary): the last position's
    past_key_values: KVCache


@dataclass(frozen=True, slots=True)
class _Layer:
    input_norm: torch.Tensor
    qkv: torch.Tensor  # q, k and v projections stacked (out features: heads + 2 × kv heads, × head dim)
    qkv_bias: torch.Tensor | None
    o: torch.Tensor
    o_bias: torch.Tensor | None
    post_norm: torch.Tensor
    gate_up: torch.Tensor  # gate and up projections stacked
    gate_up_bias: torch.Tensor | None
    down: torch.Tensor
    down_bias: torch.Tensor | None


class LlamaDecoder:
    """The forward pass of a transformers `LlamaForCausalLM` (see the module docstring), over its own weights."""

    def __init__(self, model: Any) -> None:
        import torch

        config = model.config
        inner = model.model

        def stacked(*linears: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
            weight = torch.cat([linear.weight.detach() for linear in linears], dim=0)
            biases = [linear.bias for linear in linears]
            return weight, (torch.cat([b.detach() for b in biases]) if all(b is not None for b in biases) else None)

        self.layers: list[_Layer] = []
        for layer in inner.layers:
            attn, mlp = layer.self_attn, layer.mlp
            qkv, qkv_bias = stacked(attn.q_proj, attn.k_proj, attn.v_proj)
            gate_up, gate_up_bias = stacked(mlp.gate_proj, mlp.up_proj)
            self.layers.append(_Layer(layer.input_layernorm.weight, qkv, qkv_bias, attn.o_proj.weight,
                                      attn.o_proj.bias, layer.post_attention_layernorm.weight, gate_up, gate_up_bias,
                                      mlp.down_proj.weight, mlp.down_proj.bias))
        self.embed = inner.embed_tokens.weight
        self.eps = float(config.rms_norm_eps)
        self.final_norm = inner.norm.weight
        self.lm_head = model.lm_head
        self.heads = int(config.num_attention_heads)
        self.kv_heads = int(config.num_key_value_heads)
        self.head_dim = int(getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads)
        self.intermediate = int(config.intermediate_size)
        self.scale = self.head_dim ** -0.5
        self._inv_freq = inner.rotary_emb.inv_freq.detach().float()
        self._rope_scaling = float(inner.rotary_emb.attention_scaling)
        self._cos = self._sin = torch.empty(0)

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
        return cls(model)

    def __call__(self, *, input_ids: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor,
                 past_key_values: KVCache | None = None, **_: object) -> DecoderOutput:
        """The last position's logits and the cache extended by the new tokens (see the module docstring)."""
        import torch

        if past_key_values is None:
            return self._prefill(input_ids, attention_mask, position_ids)
        if input_ids.shape[1] != 1:
            raise ValueError("a cached step takes one new token per row")
        cache = past_key_values
        rows = input_ids.shape[0]
        hidden = torch.nn.functional.embedding(input_ids, self.embed)  # (rows, 1, hidden)
        cos, sin = self._angles(position_ids, hidden.dtype)
        bias = None
        if cache.padded:
            bias = torch.zeros(attention_mask.shape, dtype=hidden.dtype, device=hidden.device)
            bias = bias.masked_fill(attention_mask == 0, torch.finfo(hidden.dtype).min)[:, None, None, :]
        groups = self.heads // self.kv_heads
        for index, layer in enumerate(self.layers):
            q, k, v = self._qkv(layer, hidden, cos, sin)  # (rows, heads or kv heads, 1, head dim)
            keys, values = cache.append(index, k[:, :, 0], v[:, :, 0])
            # grouped-query attention: the query heads of one kv head as that head's rows
            scores = torch.matmul(q.reshape(rows, self.kv_heads, groups, self.head_dim), keys.transpose(2, 3))
            scores = scores * self.scale
            if bias is not None:
                scores = scores + bias
            weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
            attended = torch.matmul(weights, values).reshape(rows, 1, self.heads * self.head_dim)
            hidden = self._finish_layer(layer, hidden, attended)
        cache.length += 1
        return DecoderOutput(self.lm_head(_rms(hidden, self.final_norm, self.eps)), cache)

    def _prefill(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                 position_ids: torch.Tensor) -> DecoderOutput:
        import torch

        rows, new = input_ids.shape
        hidden = torch.nn.functional.embedding(input_ids, self.embed)
        cos, sin = self._angles(position_ids, hidden.dtype)
        visible = attention_mask[:, None, None, :].bool() & torch.ones(
            new, new, dtype=torch.bool, device=input_ids.device).tril()[None, None]
        # the dtype's minimum, not -inf: a padding query sees no key, and its row must not become NaN
        bias = torch.zeros(visible.shape, dtype=hidden.dtype, device=hidden.device).masked_fill(
            ~visible, torch.finfo(hidden.dtype).min)
        groups = self.heads // self.kv_heads
        layers: list[tuple[torch.Tensor, torch.Tensor]] = []
        for layer in self.layers:
            q, k, v = self._qkv(layer, hidden, cos, sin)
            capacity = new + 64
            k_buf = k.new_empty((rows, self.kv_heads, capacity, self.head_dim))
            v_buf = v.new_empty((rows, self.kv_heads, capacity, self.head_dim))
            k_buf[:, :, :new], v_buf[:, :, :new] = k, v
            layers.append((k_buf, v_buf))
            keys = k.repeat_interleave(groups, dim=1) if groups > 1 else k
            values = v.repeat_interleave(groups, dim=1) if groups > 1 else v
            scores = torch.matmul(q, keys.transpose(2, 3)) * self.scale + bias
            weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
            attended = torch.matmul(weights, values).transpose(1, 2).reshape(rows, new, self.heads * self.head_dim)
            hidden = self._finish_layer(layer, hidden, attended)
        last = _rms(hidden[:, -1:, :], self.final_norm, self.eps)
        padded = bool((attention_mask == 0).any())
        return DecoderOutput(self.lm_head(last), KVCache(layers, new, padded))

    def _qkv(self, layer: _Layer, hidden: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries and keys with the rotary embedding applied, and values: (rows, heads, new, head dim)."""
        import torch

        rows, new, _ = hidden.shape
        normed = _rms(hidden, layer.input_norm, self.eps)
        projected = torch.nn.functional.linear(normed, layer.qkv, layer.qkv_bias)
        projected = projected.view(rows, new, self.heads + 2 * self.kv_heads, self.head_dim).transpose(1, 2)
        rotating = projected[:, : self.heads + self.kv_heads]
        rotated = rotating * cos + _rotate_half(rotating) * sin
        return (rotated[:, : self.heads], rotated[:, self.heads:],
                projected[:, self.heads + self.kv_heads:])

    def _finish_layer(self, layer: _Layer, hidden: torch.Tensor, attended: torch.Tensor) -> torch.Tensor:
        """The residual around the attention output, then the SiLU-gated MLP and its residual."""
        import torch

        functional = torch.nn.functional
        hidden = hidden + functional.linear(attended, layer.o, layer.o_bias)
        gate_up = functional.linear(_rms(hidden, layer.post_norm, self.eps), layer.gate_up, layer.gate_up_bias)
        gate, up = gate_up[..., : self.intermediate], gate_up[..., self.intermediate:]
        return hidden + functional.linear(functional.silu(gate) * up, layer.down, layer.down_bias)

    def _angles(self, position_ids: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin of the rotary angles at these positions, (rows, 1, new, head dim), from a table grown as
        needed (the angle of position p is p × inv_freq, in float32, as transformers computes it)."""
        import torch

        needed = int(position_ids.max()) + 1
        if needed > self._cos.shape[0]:
            size = max(needed, 2 * self._cos.shape[0], 256)
            freqs = torch.arange(size, dtype=torch.float32)[:, None] * self._inv_freq[None, :]
            angles = torch.cat((freqs, freqs), dim=-1)
            self._cos = (angles.cos() * self._rope_scaling).to(device=position_ids.device)
            self._sin = (angles.sin() * self._rope_scaling).to(device=position_ids.device)
        return self._cos[position_ids].to(dtype)[:, None], self._sin[position_ids].to(dtype)[:, None]


def _rms(hidden: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Llama's RMSNorm, computed in float32 as transformers does."""
    import torch

    dtype = hidden.dtype
    x = hidden.to(torch.float32)
    x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return weight * x.to(dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    import torch

    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)
