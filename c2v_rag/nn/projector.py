"""The projector that turns the bidirectional encoder's output into Contextual tokens."""

from __future__ import annotations

import torch
from torch import nn

from c2v_rag.nn.pooling import mean_pool


def cross_attention_heads(encoder_dim: int) -> int:
    return max(h for h in (1, 2, 4, 8) if encoder_dim % h == 0)


class ContextualProjector(nn.Module):
    """Encoder states [B, T, k] -> Contextual tokens [B, n, d].

    With one token (the paper's default) the states are mean-pooled into h and projected by
    C = W2 · GELU(W1 · h + b1) + b2, going k -> d -> d (Eq. 1). With n > 1 tokens, n learnable
    queries cross-attend over the encoder states first (paper, Table 5), then share the MLP.

    ``row_by_row`` (off by default; ``quantize="int8"`` turns it on) computes each text's C on its own, so
    that C is bitwise the same whether a text comes alone or in a batch: torch's CPU GEMMs pick their
    kernels by the number of rows, which moves C by ~1e-7, and the int8 decoder's per-token roundings
    would turn that into ~3e-4 of cosine (docs/performance.md). Costs a loop over rows of a small MLP.
    """

    def __init__(self, encoder_dim: int, decoder_dim: int, num_tokens: int = 1) -> None:
        super().__init__()
        if num_tokens < 1:
            raise ValueError(f"num_tokens must be >= 1, got {num_tokens}")
        self.num_tokens = num_tokens
        if num_tokens > 1:
            self.queries = nn.Parameter(torch.randn(num_tokens, encoder_dim) * encoder_dim**-0.5)
            self.cross_attention = nn.MultiheadAttention(
                encoder_dim, cross_attention_heads(encoder_dim), batch_first=True
            )
        self.fc1 = nn.Linear(encoder_dim, decoder_dim)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(decoder_dim, decoder_dim)
        self.row_by_row = False

    def forward(self, encoder_states: torch.Tensor, encoder_mask: torch.Tensor) -> torch.Tensor:
        if self.row_by_row and encoder_states.size(0) > 1:
            return torch.cat(
                [
                    self._project(encoder_states[i : i + 1], encoder_mask[i : i + 1])
                    for i in range(encoder_states.size(0))
                ]
            )
        return self._project(encoder_states, encoder_mask)

    def _project(self, encoder_states: torch.Tensor, encoder_mask: torch.Tensor) -> torch.Tensor:
        if self.num_tokens == 1:
            pooled = mean_pool(encoder_states, encoder_mask).unsqueeze(1)
        else:
            queries = self.queries.unsqueeze(0).expand(encoder_states.size(0), -1, -1)
            pooled, _ = self.cross_attention(
                queries, encoder_states, encoder_states, key_padding_mask=encoder_mask == 0, need_weights=False
            )
        return self.fc2(self.act(self.fc1(pooled)))


# Varied sentences to measure the scale of C with: the projector's output norm depends on the encoder's
# pooled norm, which depends little on the text; a handful of sentences pins it to a few percent.
_PROBE_TEXTS = (
    "A man is playing a guitar on stage.",
    "Vitamin D deficiency is associated with a higher risk of bone fractures in older adults.",
    "How do I reset the PIN of my debit card?",
    "The central bank raised interest rates by a quarter point to curb inflation.",
    "Mitochondria produce most of the chemical energy needed to power the cell's reactions.",
    "i feel so happy today that nothing can bring me down",
    "The committee will publish its final report after the summer recess.",
    "Tides are caused by the gravitational pull of the moon and the sun on the oceans.",
)


@torch.no_grad()
def match_word_embedding_norm(model) -> float:
    """Rescale a fresh projector's output layer so that C starts at the norm of the decoder's word embeddings.

    The default ``nn.Linear`` initialisation gives a C about four times shorter than a word embedding of
    SmolLM2, so the decoder hardly sees it: h_C is nearly the same for every text and the contrastive
    loss gives the projector little signal. C lives in the word-embedding space, so it starts at that
    space's scale. Returns the factor applied.
    """
    table = model.decoder.get_input_embeddings().weight
    target = table.float().norm(dim=-1).mean()
    pieces, encoder_ids = model.prepare(list(_PROBE_TEXTS), None)
    batch = model.collate(pieces, encoder_ids)
    device = next(model.projector.parameters()).device
    c = model.contextual_tokens(batch.encoder_input_ids.to(device), batch.encoder_attention_mask.to(device))
    factor = float(target / c.float().norm(dim=-1).mean())
    model.projector.fc2.weight.mul_(factor)
    model.projector.fc2.bias.mul_(factor)
    return factor
