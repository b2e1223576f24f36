"""A lean forward pass for Llama-shaped causal LMs, for the local backend's decoding loop (`burnqed.policy.local`).

    decoder = LlamaDecoder.for_model(model)        # None when the model is not a plain Llama (then: transformers')
    out = decoder(input_ids=ids, attention_mask=mask, position_ids=pos)           # prefill: cache None
    out = decoder(input_ids=next_ids, attention_mask=mask, position_ids=next_pos, past_key_values=out.past_key_values)
    out.logits[:, -1]                              # the last position's logits, as transformers returns them

Why: decoding the tiny embedded model one token at a time through transformers' module stack costs about 2 ms a
step on a CPU core, nearly all of it Python and operator dispatch around a few microseconds of arithmetic (hooks,
output capture, mask construction, cache bookkeeping, one projection per matrix); the embedded iteration's
search and evals spend most of their time there. This is the same computation in fewer, larger operations: the
q/k/v projections and the rotary embedding's rotated halves of q and k as one matrix product (rotating half of a
head is a fixed signed permutation of its output features, so it is folded into copies of the q and k weights),
the MLP's gate and up projections as another, rotary angles from a table, keys and values written into a
preallocated cache instead of concatenated each step, attention as one `scaled_dot_product_attention` call
(grouped-query without repeating the keys: in a cached step a kv head's query heads are its rows; causal
without a mask when no row is padded). It uses the transformers model's weights (the fused matrices are
concatenated copies of them, made once per model).

It is the model's arithmetic, not transformers' kernels: the fused products may round differently, so logits agree
with transformers' to float rounding, not bit for bit (tests/policy/test_decoder.py bounds the difference and
checks that greedy decoding picks the same tokens). Every decoding step of a run goes through this one path, so a
seeded run is as reproducible as before. Models it does not cover (another architecture, a scaled rotary embedding,
another activation) get None from `for_model` and decode through transformers.

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
    """The forward pass of a transformers `LlamaForCausalLM` (see the module docstring), over its own weights."""

    def __init__(self, model: Any) -> None:
        import torch

        config = model.config
        inner = model.model

        def stacked(*linears: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
            weight = torch.cat([linear.weight.detach() for linear in linears], dim=0)
            biases = [linear.bias for linear in linears]
            return weight, (torch.cat([b.detach() for b in biases]) if all(b is not None for b in biases) else None)

        self.heads = int(config.num_attention_heads)
        self.kv_heads = int(config.num_key_value_heads)
        self.head_dim = int(getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads)
        self.layers: list[_Layer] = []
        for layer in inner.layers:
            attn, mlp = layer.self_attn, layer.mlp
            qkv, qkv_bias = stacked(attn.q_proj, attn.k_proj, attn.v_proj)
            qk_rows = (self.heads + self.kv_heads) * self.head_dim
            qkv = torch.cat((qkv, self._rotated_rows(qkv[:qk_rows])))
            if qkv_bias is not None:
                qkv_bias = torch.cat((qkv_bias, self._rotated_rows(qkv_bias[:qk_rows])))
            gate_up, gate_up_bias = stacked(mlp.gate_proj, mlp.up_proj)
            self.layers.append(_Layer(layer.input_layernorm.weight, qkv, qkv_bias, attn.o_proj.weight,
                                      attn.o_proj.bias, layer.post_attention_layernorm.weight, gate_up, gate_up_bias,
                                      mlp.down_proj.weight, mlp.down_proj.bias))
        self.embed = inner.embed_tokens.weight
        self.eps = float(config.rms_norm_eps)
        self.final_norm = inner.norm.weight
        self.lm_head = model.lm_head.weight.detach()
        self.lm_head_bias = None if model.lm_head.bias is None else model.lm_head.bias.detach()
        self.intermediate = int(config.intermediate_size)
        self.scale = self.head_dim ** -0.5
        self._inv_freq = inner.rotary_emb.inv_freq.detach().float()
        self._rope_scaling = float(inner.rotary_emb.attention_scaling)
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
        import torch

        rows, new = input_ids.shape
        hidden = torch.nn.functional.embedding(input_ids, self.embed)
        cos, sin = self._angles(position_ids, hidden.dtype, new)
        padded = bool((attention_mask == 0).any())
        bias = None
        if padded:
            visible = attention_mask[:, None, None, :].bool() & torch.ones(
                new, new, dtype=torch.bool, device=input_ids.device).tril()[None, None]
            # the dtype's minimum, not -inf: a padding query sees no key, and its row must not become NaN
            bias = torch.zeros(visible.shape, dtype=hidden.dtype, device=hidden.device).masked_fill(
                ~visible, torch.finfo(hidden.dtype).min)
        layers: list[tuple[torch.Tensor, torch.Tensor]] = []
        for layer in self.layers:
            q, k, v = self._qkv(layer, hidden, cos, sin)
            capacity = new + 64
            k_buf = k.new_empty((rows, self.kv_heads, capacity, self.head_dim))
            v_buf = v.new_empty((rows, self.kv_heads, capacity, self.head_dim))
            k_buf[:, :, :new], v_buf[:, :, :new] = k, v
            layers.append((k_buf, v_buf))
            attended = torch.nn.functional.scaled_dot_product_attention(
                q, k, v, attn_mask=bias, is_causal=bias is None, scale=self.scale,
                enable_gqa=self.heads != self.kv_heads)
            hidden = self._finish_layer(layer, hidden,
                                        attended.transpose(1, 2).reshape(rows, new, self.heads * self.head_dim))
        return DecoderOutput(self._logits(hidden[:, -1:, :]), KVCache(layers, new, padded))

    def _logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """The final norm and the LM head."""
        import torch

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
