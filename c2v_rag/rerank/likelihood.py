"""The log-probability a causal decoder gives the query tokens of each pair, batched by token budget.

Only the query's positions reach the language-model head: the hidden states are sliced first, so the
vocabulary-wide logits (49,152 values a token for SmolLM2) are computed for a query's ten-odd tokens, never for
the hundreds of document tokens before them. Batches are planned as encode plans them (length-sorted, a padded
token budget, :func:`~c2v_rag.encode.batching.plan_batches`), right-padded, so under causal attention no real
token sees a pad and a pair's score does not depend on its batch.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from c2v_rag.encode.batching import forward_batches, pad_right, plan_batches
from c2v_rag.nn.backbone import input_embeddings
from c2v_rag.rerank.templates import Pair

MAX_BATCH_SIZE = 256


class QueryLikelihood:
    """A decoder backbone (``(inputs_embeds=, attention_mask=, position_ids=)`` -> ``.last_hidden_state``, as
    :class:`~c2v_rag.model.causal2vec.Causal2Vec` calls it) and its output embedding matrix [vocab, d]."""

    def __init__(self, backbone: nn.Module, head: torch.Tensor, pad_id: int) -> None:
        self.backbone = backbone
        self.head = head
        self.pad_id = pad_id

    @property
    def device(self) -> torch.device:
        return self.head.device

    @property
    def precision(self) -> str:
        """``"int8"`` where an int8 ONNX Runtime decoder computes (:mod:`c2v_rag.rerank.int8`), else the float dtype's
        name (the head's, which is the decoder's)."""
        from c2v_rag.core.devices import INT8_METHOD, dtype_name

        return "int8" if getattr(self.backbone, "method", None) == INT8_METHOD else dtype_name(self.head.dtype)

    @property
    def workers(self) -> int:
        """Batches run at once: an ONNX Runtime decoder computes each on one core
        (:attr:`~c2v_rag.cpu.onnx_decoder.OnnxDecoder.batch_workers`); torch splits one batch over its threads."""
        return int(getattr(self.backbone, "batch_workers", 1))

    @torch.inference_mode()
    def log_probs(self, pairs: Sequence[Pair], max_tokens: int) -> np.ndarray:
        """The summed log-probability of each pair's query tokens, in float64, in the pairs' order."""
        out = np.zeros(len(pairs), dtype=np.float64)
        lengths = [len(p.ids) for p in pairs]
        workers = self.workers
        if workers > 1 and lengths:
            # at least one batch per worker: a query's 20 hits fit one budget, which would leave the other cores idle
            max_tokens = min(max_tokens, max(max(lengths), -(-sum(lengths) // workers)))
        # No pad-fraction cut: a CPU pays for padding, but the pairs of one query differ by their documents only,
        # and one budget keeps the batches as few as the budget allows (bench/rerank.py times it).
        plan = plan_batches(lengths, max_tokens=max_tokens, max_batch_size=MAX_BATCH_SIZE)
        for batch, sums in zip(plan, forward_batches(lambda b: self._batch([pairs[i] for i in b]), plan, workers)):
            out[batch] = sums
        return out

    @torch.inference_mode()
    def _batch(self, rows: list[Pair]) -> np.ndarray:
        states, targets, row_index = query_states(self.backbone, rows, self.pad_id, self.device)
        logits = F.linear(states.to(self.head.dtype), self.head).float()
        token_lp = logits.log_softmax(-1).gather(1, targets[:, None])[:, 0].double().cpu()
        return torch.zeros(len(rows), dtype=torch.float64).index_add_(0, row_index.cpu(), token_lp).numpy()


def query_states(
    backbone: nn.Module, rows: Sequence[Pair], pad_id: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The decoder's last states that predict each pair's query tokens [query tokens, d], those tokens [query tokens]
    and the row each belongs to [query tokens]: what the head turns into log-probabilities. Without a grad mode of
    its own, so that training (``experiments/train_reranker.py``) computes the reranker's score as it does."""
    ids, mask = pad_right([p.ids for p in rows], pad_id)
    ids, mask = ids.to(device), mask.to(device)
    positions = torch.arange(ids.size(1), device=device).expand_as(ids)
    embeds = input_embeddings(backbone)(ids)
    hidden = backbone(
        inputs_embeds=embeds, attention_mask=mask, position_ids=positions, use_cache=False
    ).last_hidden_state  # [rows, T, d]
    # Position t predicts token t + 1: the query's tokens [start, end) are predicted from [start - 1, end - 1).
    row_index = torch.cat([torch.full((len(p.ids) - p.query_start,), r, dtype=torch.long) for r, p in enumerate(rows)])
    col_index = torch.cat([torch.arange(p.query_start - 1, len(p.ids) - 1) for p in rows])
    targets = torch.cat([torch.as_tensor(p.ids[p.query_start :], dtype=torch.long) for p in rows]).to(device)
    row_index = row_index.to(device)
    return hidden[row_index, col_index.to(device)], targets, row_index
