"""The bidirectional encoder alone (mean pooling, no decoder): the reference a variant must beat."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..devices import resolve_device
from ..encoding import check_texts
from ..pooling import mean_pool
from ..sources import encoder_length_limit, load_backbone, load_tokenizer, resolve_reference


class BiEncoder:
    """A BERT-style sentence embedder (e.g. all-MiniLM-L6-v2) with the evaluators' interface.

    Instructions are ignored: such encoders were trained without them.
    """

    def __init__(self, reference: str = "all-minilm-l6-v2", *, device: str | None = None) -> None:
        source = resolve_reference(reference)
        self.device = resolve_device(device)
        self.tokenizer = load_tokenizer(source)
        self.model = load_backbone(source, dtype=torch.float32).to(self.device)
        self.max_length = encoder_length_limit(source, self.model.config)

    def encode(self, texts: list[str], *, batch_size: int = 128, **_: Any) -> np.ndarray:
        texts, single = check_texts(texts)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out = np.zeros((len(texts), self.model.config.hidden_size), dtype=np.float32)
        with torch.inference_mode():
            for start in range(0, len(order), batch_size):
                rows = order[start : start + batch_size]
                enc = self.tokenizer([texts[i] for i in rows], padding=True, truncation=True,
                                     max_length=self.max_length, return_tensors="pt").to(self.device)
                states = self.model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).last_hidden_state
                out[rows] = mean_pool(states, enc["attention_mask"]).float().cpu().numpy()
        return out[0] if single else out

    def encode_queries(self, texts: list[str], *, task: str | None = None, **kwargs: Any) -> np.ndarray:
        return self.encode(texts, **kwargs)

    def encode_documents(self, texts: list[str], *, task: str | None = None, **kwargs: Any) -> np.ndarray:
        return self.encode(texts, **kwargs)
