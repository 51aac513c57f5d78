"""The bidirectional encoder alone (mean pooling, no decoder): the reference a variant must beat."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from c2v_rag.core.devices import resolve_device
from c2v_rag.encode.long_texts import Windows, check_window, pool_windows, resolve_long_texts, split_long_texts
from c2v_rag.encode.loop import check_texts
from c2v_rag.hub.sources import (
    encoder_length_limit,
    load_backbone,
    load_tokenizer,
    normalizes_embeddings,
    resolve_reference,
)
from c2v_rag.nn.backbone import backbone_config
from c2v_rag.nn.pooling import mean_pool


class BiEncoder:
    """A BERT-style sentence embedder (e.g. all-MiniLM-L6-v2) with the evaluators' interface.

    Vectors are mean-pooled and, when the model's sentence-transformers pipeline normalizes (as
    all-MiniLM-L6-v2's does), L2-normalized: the vectors its users get and MTEB scores. Instructions
    are ignored: such encoders were trained without them.
    """

    def __init__(self, reference: str = "all-minilm-l6-v2", *, device: str | None = None) -> None:
        source = resolve_reference(reference)
        self.device = resolve_device(device)
        self.tokenizer = load_tokenizer(source)
        self.model = load_backbone(source, dtype=torch.float32).to(self.device)
        self.max_length = encoder_length_limit(source, self.model.config)
        self.normalize = normalizes_embeddings(source)

    def encode(self, texts: list[str], *, batch_size: int = 128, long_texts: Any = None, **_: Any) -> np.ndarray:
        """Mean-pooled vectors; ``long_texts`` as in :meth:`Causal2Vec.encode` ("truncate" or "chunk")."""
        policy = resolve_long_texts(long_texts)
        texts, single = check_texts(texts)
        if policy.mode == "chunk":
            windows = self.long_text_windows(texts, long_texts=policy)
            out = pool_windows(self.encode(windows.texts, batch_size=batch_size), windows, policy.pooling)
            return out[0] if single else out
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out = np.zeros((len(texts), backbone_config(self.model).hidden_size), dtype=np.float32)
        with torch.inference_mode():
            for start in range(0, len(order), batch_size):
                rows = order[start : start + batch_size]
                enc = self.tokenizer(
                    [texts[i] for i in rows],
                    padding=True,
                    truncation=True,
                    max_length=self.max_length,
                    return_tensors="pt",
                ).to(self.device)
                states = self.model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).last_hidden_state
                pooled = mean_pool(states, enc["attention_mask"]).float()
                if self.normalize:
                    pooled = torch.nn.functional.normalize(pooled, dim=-1)
                out[rows] = pooled.cpu().numpy()
        return out[0] if single else out

    def long_text_windows(self, texts: list[str], *, long_texts: Any = "chunk", **_: Any) -> Windows:
        """Each text that fits whole, and overlapping windows of each longer one (see :mod:`c2v_rag.encode.long_texts`)."""  # noqa: E501
        policy = resolve_long_texts(long_texts)
        texts = check_texts(texts)[0]
        specials = len(self.tokenizer("")["input_ids"])
        fits = [len(ids) <= self.max_length for ids in self.tokenizer(texts)["input_ids"]] if texts else []
        window = check_window(policy.window, self.max_length - specials, f"the encoder ({self.max_length} tokens)")
        return split_long_texts(texts, fits, [self.tokenizer], window, policy.overlap)

    def encode_queries(self, texts: list[str], *, task: str | None = None, **kwargs: Any) -> np.ndarray:
        return self.encode(texts, **kwargs)

    def encode_documents(self, texts: list[str], *, task: str | None = None, **kwargs: Any) -> np.ndarray:
        return self.encode(texts, **kwargs)
