"""Inference forward passes of a Llama decoder and a BERT encoder in plain torch, without transformers.

Importing transformers' modeling code (``modeling_utils`` and what it pulls in: ``torch.distributed.tensor``,
``torch._dynamo``, sympy, scipy) costs seconds of CPU time in every process, more than a search spends on
everything else. These modules compute what ``LlamaModel`` and ``BertModel`` compute at inference with their
``sdpa`` attention, op for op and in the same order, so the hidden states are the same bit for bit in any
dtype: the same weights go through the same torch kernels with the same arguments. Each place where the order
or a dtype matters says so. What they do not cover (other architectures, rope scaling, training, dropout,
caches, flash attention) stays with transformers: :mod:`c2v_rag.hub.plain_weights` decides, from a model's
``config.json``, whether one of these applies at all.

Both take and return what :class:`~c2v_rag.model.causal2vec.Causal2Vec` uses of a transformers model: the
decoder ``(inputs_embeds=, attention_mask=, position_ids=, use_cache=False)``, the encoder ``(input_ids=,
attention_mask=)``, each returning an object with ``.last_hidden_state``; ``get_input_embeddings()``; a
``config`` with ``hidden_size`` and ``max_position_embeddings``. Parameter names are transformers', so a
checkpoint's state dict loads as it is.

Shapes: B batch, L sequence, d hidden size, H query heads, K key/value heads, D head size, F MLP size.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class BackboneOutput:
    """What the callers read of transformers' ``BaseModelOutput``."""

    last_hidden_state: torch.Tensor


# Parameter holders that compute what nn.Linear, nn.Embedding and nn.LayerNorm compute (their forward is the same
# functional call), but allocate their weights uninitialised: a checkpoint replaces them at once, and torch's random
# initialisation of 100M+ values (or building on the meta device, which imports torch's compiler stack) costs more
# than the whole forward pass of a query.


class Linear(nn.Module):
    def __init__(self, d_in: int, d_out: int, bias: bool = True) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(d_out, d_in))
        self.bias = nn.Parameter(torch.empty(d_out)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias)


class Embedding(nn.Module):
    def __init__(self, rows: int, d: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(rows, d))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        # transformers' padding_idx changes only the gradient of that row, not the lookup
        return F.embedding(ids, self.weight)


class LayerNorm(nn.Module):
    def __init__(self, d: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(d))
        self.bias = nn.Parameter(torch.empty(d))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (self.weight.shape[0],), self.weight, self.bias, self.eps)


class PlainBackbone(nn.Module):
    """What the two backbones share: where their weights came from, and that they only run at inference."""

    config: SimpleNamespace
    source: str  # the folder the weights were read from; the transformers model loads from it when needed

    def _check_inference(self) -> None:
        # transformers' forward in training mode applies dropout (BERT's 0.1); this one never does, so it must
        # not silently stand in for it. Causal2Vec swaps in the transformers modules before training.
        if self.training:
            raise RuntimeError(
                f"{type(self).__name__} is an inference-only forward pass; training needs the transformers model "
                f"(Causal2Vec.train() swaps it in; or set C2V_RAG_PLAIN_FORWARD=0)"
            )


def sdpa_mask(padding: torch.Tensor, *, causal: bool) -> torch.Tensor | None:
    """The attention mask transformers' ``sdpa_mask`` gives SDPA for a 2-D padding mask [B, L] (1 = a real token).

    None when no token is padding: SDPA then runs with ``is_causal`` (decoder) or no mask (encoder), which is the
    kernel path transformers takes. Otherwise a boolean [B, 1, L, L], True where a query may attend a key:
    ``kv <= q`` (causal) and the key is real. Boolean, not additive: SDPA turns it into -inf itself, as it does
    for transformers'.
    """
    keep = padding.to(torch.bool)  # [B, L]
    if bool(keep.sum() == keep.numel()):  # transformers' fast_all: the same skip decision
        return None
    batch, length = keep.shape
    q = torch.arange(length, device=keep.device)[None, None, :, None]  # [1, 1, L, 1]
    kv = torch.arange(length, device=keep.device)[None, None, None, :]  # [1, 1, 1, L]
    rows = torch.arange(batch, device=keep.device)[:, None, None, None]  # [B, 1, 1, 1]
    # The same boolean ops as transformers' mask functions (causal: kv <= q; bidirectional: q >= 0, all True),
    # so that SDPA gets the same [B, 1, L, L] tensor
    allowed = torch.ones((), dtype=torch.bool, device=keep.device)
    allowed = allowed & ((kv <= q) if causal else (q >= 0))  # [1, 1, L, L] or [1, 1, L, 1]
    allowed = allowed & keep[rows, kv]  # [B, 1, L, L]
    return allowed.expand(batch, -1, length, length)


# ---------------------------------------------------------------------------------------------- Llama decoder


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The variance in float32, the result cast back before the weight multiplies it (LlamaRMSNorm's order).
        dtype = x.dtype
        x = x.to(torch.float32)
        variance = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(variance + self.eps)
        return self.weight * x.to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def repeat_kv(x: torch.Tensor, groups: int) -> torch.Tensor:
    """[B, K, L, D] -> [B, K * groups, L, D], each key/value head repeated for the query heads that share it."""
    if groups == 1:
        return x
    b, k, length, d = x.shape
    return x[:, :, None, :, :].expand(b, k, groups, length, d).reshape(b, k * groups, length, d)


class LlamaAttention(nn.Module):
    def __init__(self, d: int, heads: int, kv_heads: int, head_dim: int, bias: bool) -> None:
        super().__init__()
        self.head_dim = head_dim
        self.groups = heads // kv_heads
        self.scaling = head_dim**-0.5
        self.q_proj = Linear(d, heads * head_dim, bias=bias)
        self.k_proj = Linear(d, kv_heads * head_dim, bias=bias)
        self.v_proj = Linear(d, kv_heads * head_dim, bias=bias)
        self.o_proj = Linear(heads * head_dim, d, bias=bias)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        b, length, _ = x.shape
        shape = (b, length, -1, self.head_dim)
        q = self.q_proj(x).view(shape).transpose(1, 2)  # [B, H, L, D]
        k = self.k_proj(x).view(shape).transpose(1, 2)  # [B, K, L, D]
        v = self.v_proj(x).view(shape).transpose(1, 2)  # [B, K, L, D]
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)  # [B, 1, L, D]
        q = (q * cos) + (rotate_half(q) * sin)
        k = (k * cos) + (rotate_half(k) * sin)
        # The kernel path of transformers' sdpa_attention_forward: without a mask, SDPA's own causal masking and
        # grouped-query attention (enable_gqa); with one, the key/value heads repeated and the mask passed.
        extra: dict[str, Any] = {}
        if self.groups > 1:
            if (mask is None and k.shape[-1] == v.shape[-1] <= 256) or _force_gqa():
                extra["enable_gqa"] = True
            else:
                k, v = repeat_kv(k, self.groups), repeat_kv(v, self.groups)  # [B, H, L, D]
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=0.0, scale=self.scaling, is_causal=length > 1 and mask is None, **extra
        )  # [B, H, L, D]
        out = out.transpose(1, 2).contiguous().reshape(b, length, -1).contiguous()  # [B, L, H * D]
        return self.o_proj(out)


def _force_gqa() -> bool:
    # transformers' switch for grouped-query SDPA with a mask; honoured so that the two paths stay the same
    return os.environ.get("TRANSFORMERS_SDPA_FORCE_GQA", "0") == "1"


class LlamaMLP(nn.Module):
    def __init__(self, d: int, hidden: int, bias: bool) -> None:
        super().__init__()
        self.gate_proj = Linear(d, hidden, bias=bias)
        self.up_proj = Linear(d, hidden, bias=bias)
        self.down_proj = Linear(hidden, d, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))  # SwiGLU: [B, L, d] -> [B, L, F] -> d


class LlamaLayer(nn.Module):
    def __init__(self, c: SimpleNamespace) -> None:
        super().__init__()
        self.self_attn = LlamaAttention(
            c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.head_dim, c.attention_bias
        )
        self.mlp = LlamaMLP(c.hidden_size, c.intermediate_size, c.mlp_bias)
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class PlainLlama(PlainBackbone):
    """``LlamaModel`` at inference (sdpa attention, no cache): RMSNorm, rotary positions (the default rope, no
    scaling), grouped-query attention, SwiGLU; causal, right or left padding through the mask."""

    def __init__(self, config: SimpleNamespace, source: str = "") -> None:
        super().__init__()
        self.config = config
        self.source = source
        self.embed_tokens = Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList([LlamaLayer(config) for _ in range(config.num_hidden_layers)])
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        # LlamaRotaryEmbedding's default inverse frequencies, computed in float32 the same way
        dim = config.head_dim
        inv_freq = 1.0 / (config.rope_theta ** (torch.arange(0, dim, 2, dtype=torch.float) / dim))  # [D / 2]
        self.inv_freq: torch.Tensor
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def get_input_embeddings(self) -> Embedding:
        return self.embed_tokens

    def rotary(self, x: torch.Tensor, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin [B, L, D] of the positions, in float32 and then in ``x``'s dtype, as transformers rounds them."""
        freqs = position_ids[..., None].float() * self.inv_freq.to(device=x.device, dtype=torch.float)  # [B, L, D/2]
        angles = torch.cat((freqs, freqs), dim=-1)  # [B, L, D]
        return angles.cos().to(dtype=x.dtype), angles.sin().to(dtype=x.dtype)

    def forward(
        self,
        inputs_embeds: torch.Tensor,
        attention_mask: torch.Tensor,
        position_ids: torch.Tensor | None = None,
        use_cache: bool = False,
    ) -> BackboneOutput:
        self._check_inference()
        if use_cache:
            raise ValueError("PlainLlama keeps no cache: it embeds whole sequences (use_cache=False)")
        x = inputs_embeds  # [B, L, d]
        if position_ids is None:
            position_ids = torch.arange(x.shape[1], device=x.device).unsqueeze(0)
        position_ids = position_ids.to(x.device)
        mask = sdpa_mask(attention_mask.to(x.device), causal=True)  # None or [B, 1, L, L]
        cos, sin = self.rotary(x, position_ids)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return BackboneOutput(self.norm(x))


# ---------------------------------------------------------------------------------------------- BERT encoder


class BertSelfAttention(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.head_size = d // heads
        self.scaling = self.head_size**-0.5
        self.query = Linear(d, d)
        self.key = Linear(d, d)
        self.value = Linear(d, d)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        b, length, _ = x.shape
        shape = (b, length, -1, self.head_size)
        q = self.query(x).view(*shape).transpose(1, 2)  # [B, H, L, D]
        k = self.key(x).view(*shape).transpose(1, 2)
        v = self.value(x).view(*shape).transpose(1, 2)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0, scale=self.scaling)
        return out.transpose(1, 2).contiguous().reshape(b, length, -1).contiguous()  # [B, L, d]


class DenseNorm(nn.Module):
    """BERT's ``*Output`` blocks: a linear layer, then LayerNorm of it plus the block's input (post-norm)."""

    def __init__(self, d_in: int, d: int, eps: float) -> None:
        super().__init__()
        self.dense = Linear(d_in, d)
        self.LayerNorm = LayerNorm(d, eps=eps)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dense(x) + residual)


class BertAttention(nn.Module):
    def __init__(self, c: SimpleNamespace) -> None:
        super().__init__()
        self.self = BertSelfAttention(c.hidden_size, c.num_attention_heads)
        self.output = DenseNorm(c.hidden_size, c.hidden_size, c.layer_norm_eps)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        return self.output(self.self(x, mask), x)


class BertIntermediate(nn.Module):
    def __init__(self, d: int, hidden: int) -> None:
        super().__init__()
        self.dense = Linear(d, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.dense(x))  # the exact (erf) GELU: transformers' "gelu"


class BertLayer(nn.Module):
    def __init__(self, c: SimpleNamespace) -> None:
        super().__init__()
        self.attention = BertAttention(c)
        self.intermediate = BertIntermediate(c.hidden_size, c.intermediate_size)
        self.output = DenseNorm(c.intermediate_size, c.hidden_size, c.layer_norm_eps)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        x = self.attention(x, mask)
        return self.output(self.intermediate(x), x)


class BertEncoder(nn.Module):
    def __init__(self, c: SimpleNamespace) -> None:
        super().__init__()
        self.layer = nn.ModuleList([BertLayer(c) for _ in range(c.num_hidden_layers)])


class BertEmbeddings(nn.Module):
    def __init__(self, c: SimpleNamespace) -> None:
        super().__init__()
        self.word_embeddings = Embedding(c.vocab_size, c.hidden_size)
        self.position_embeddings = Embedding(c.max_position_embeddings, c.hidden_size)
        self.token_type_embeddings = Embedding(c.type_vocab_size, c.hidden_size)
        self.LayerNorm = LayerNorm(c.hidden_size, eps=c.layer_norm_eps)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        b, length = input_ids.shape
        positions = torch.arange(length, device=input_ids.device).expand(1, -1)  # [1, L]
        types = torch.zeros((b, length), dtype=torch.long, device=input_ids.device)  # one segment
        # (words + types) + positions: BertEmbeddings' order of the float additions
        x = self.word_embeddings(input_ids) + self.token_type_embeddings(types)
        x = x + self.position_embeddings(positions)
        return self.LayerNorm(x)  # [B, L, d]


class PlainBert(PlainBackbone):
    """``BertModel`` at inference (sdpa attention): absolute positions, one token type, post-norm layers, exact
    GELU; bidirectional over the real tokens. No pooler: its output is not what Causal2Vec reads."""

    def __init__(self, config: SimpleNamespace, source: str = "") -> None:
        super().__init__()
        self.config = config
        self.source = source
        self.embeddings = BertEmbeddings(config)
        self.encoder = BertEncoder(config)

    def get_input_embeddings(self) -> Embedding:
        return self.embeddings.word_embeddings

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> BackboneOutput:
        self._check_inference()
        if input_ids.shape[1] > self.config.max_position_embeddings:
            raise ValueError(
                f"{input_ids.shape[1]} tokens exceed the encoder's {self.config.max_position_embeddings} positions"
            )
        x = self.embeddings(input_ids)
        mask = None if attention_mask is None else sdpa_mask(attention_mask.to(x.device), causal=False)
        for layer in self.encoder.layer:
            x = layer(x, mask)
        return BackboneOutput(x)
