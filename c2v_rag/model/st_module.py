"""The sentence-transformers module that runs a Causal2Vec variant (needs ``sentence-transformers>=5``).

``SentenceTransformer(variant_dir)`` reads ``modules.json``, imports :class:`Causal2VecModule`
and calls its :meth:`~Causal2VecModule.load`, which builds the variant with
:meth:`Causal2Vec.from_pretrained`. See :mod:`c2v_rag.hub.st_files` for the files.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from sentence_transformers.base.modules import InputModule

from c2v_rag.core.instructions import Instruction, resolve_instruction
from c2v_rag.encode.batching import Causal2VecBatch
from c2v_rag.encode.loop import check_texts
from c2v_rag.hub.st_files import MODULE_CONFIG_FILE, variant_revision
from c2v_rag.model.causal2vec import Causal2Vec

# The tensors of a Causal2VecBatch, carried through sentence-transformers' feature dict, by feature key.
# The encoder's ids travel as "encoder_token_ids": SentenceTransformerTrainer splits a batch into its
# columns at every key ending in "_input_ids", so "anchor_encoder_input_ids" would become a column
# "anchor_encoder" of its own and the anchor would reach the model without encoder ids.
_FEATURE_KEYS = {
    "input_ids": "input_ids",
    "attention_mask": "attention_mask",
    "context_positions": "context_positions",
    "last_positions": "last_positions",
    "encoder_input_ids": "encoder_token_ids",
    "encoder_attention_mask": "encoder_attention_mask",
    "pool_mask": "pool_mask",
}


class Causal2VecModule(InputModule):
    """A whole Causal2Vec variant as one sentence-transformers input module.

    ``preprocess(texts, prompt=...)`` lays the texts out as ``[instruction; C; text; EOS]`` with
    the prompt as the instruction (an empty or missing prompt means none), exactly as
    :meth:`Causal2Vec.prepare` does; ``forward`` returns the embedding as ``sentence_embedding``.
    """

    config_file_name = MODULE_CONFIG_FILE
    config_keys = ["max_seq_length"]
    save_in_root = True
    # encode(..., examples=...) reaches preprocess (and forward, which ignores it): sentence-transformers
    # refuses encode keywords no module declares.
    forward_kwargs = {"examples"}

    def __init__(self, model: Causal2Vec, variant_dir: str | Path | None = None) -> None:
        super().__init__()
        self.model = model
        self.tokenizer = model.tokenizer
        self.variant_dir = Path(variant_dir) if variant_dir is not None else None

    @classmethod
    def load(
        cls,
        model_name_or_path: str,
        subfolder: str = "",
        token: bool | str | None = None,
        cache_folder: str | None = None,
        revision: str | None = None,
        local_files_only: bool = False,
        init_defaults: dict[str, Any] | None = None,
        model_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> Causal2VecModule:
        """Build the variant in ``model_name_or_path`` (a directory or a hub repo id).

        ``model_kwargs={"dtype": ...}`` (``torch.float32``, ``"bfloat16"``...) overrides the
        variant's dtype; other model_kwargs are refused, since the backbones are configured by
        the variant. ``init_defaults`` (what sentence-transformers fills into a module's saved config)
        do not apply either: the variant's config is its own.
        """
        options = dict(model_kwargs or {})
        dtype = options.pop("dtype", None) or options.pop("torch_dtype", None)
        if options:
            raise ValueError(
                f"model_kwargs {sorted(options)} are not used by a Causal2Vec variant: only 'dtype' is. "
                "Set other options in the variant's causal2vec_config.json."
            )
        if isinstance(dtype, torch.dtype):
            dtype = str(dtype).removeprefix("torch.")
        directory = cls.load_dir_path(
            model_name_or_path,
            subfolder=subfolder,
            token=token,
            cache_folder=cache_folder,
            revision=revision,
            local_files_only=local_files_only,
        )
        module = cls(Causal2Vec.from_pretrained(directory, dtype=dtype), directory)
        settings = cls.load_config(
            model_name_or_path,
            subfolder=subfolder,
            token=token,
            cache_folder=cache_folder,
            revision=revision,
            local_files_only=local_files_only,
        )
        if settings.get("max_seq_length") is not None:
            module.max_seq_length = int(settings["max_seq_length"])
        return module

    def save(self, output_path: str, *args: Any, safe_serialization: bool = True, **kwargs: Any) -> None:
        """Write the variant; sentence-transformers writes modules.json and its own config after this."""
        from c2v_rag.hub.variants import save_variant

        save_variant(self.model, Path(output_path), sentence_transformers=False)
        self.save_config(output_path)

    def get_config_dict(self) -> dict[str, Any]:
        # None means "the variant's own max_length", so a re-saved variant keeps following its config.
        value = self.max_seq_length
        return {"max_seq_length": None if value == self.model.config.max_length else value}

    @property
    def max_seq_length(self) -> int:
        return self.model.max_seq_length

    @max_seq_length.setter
    def max_seq_length(self, value: int) -> None:
        self.model.max_seq_length = value

    def get_embedding_dimension(self) -> int:
        return self.model.embedding_dim

    get_sentence_embedding_dimension = get_embedding_dimension  # sentence-transformers 5's name

    def preprocess(
        self, inputs, prompt: str | None = None, examples: Sequence[tuple[str, str]] | None = None, **kwargs: Any
    ) -> dict[str, torch.Tensor]:
        """Token ids for the decoder (around the Contextual slot) and the encoder; ``prompt`` is the instruction.

        ``examples`` (``SentenceTransformer.encode(..., prompt=..., examples=[(query, response), ...])``, which
        sentence-transformers passes on here) are in-context examples placed before the prompt, as
        :meth:`Causal2Vec.encode_queries` places them; they need a prompt.
        """
        texts, _ = check_texts(list(inputs))
        instruction: Instruction = prompt or None
        if examples:
            instruction = resolve_instruction(task=None, instruction=prompt or "", is_query=True, examples=examples)
        pieces, encoder_ids = self.model.prepare(texts, instruction)
        batch = self.model.collate(pieces, encoder_ids)
        return {key: getattr(batch, field) for field, key in _FEATURE_KEYS.items() if getattr(batch, field) is not None}

    def forward(self, features: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        tensors: dict[str, Any] = {field: features.get(key) for field, key in _FEATURE_KEYS.items()}
        batch = Causal2VecBatch(**tensors)
        batch = batch.to(self.model.device)
        features["sentence_embedding"] = self.model(batch)
        return features

    def on_model_ready(self, model) -> None:
        """Name the model and its revision for model cards and mteb's metadata, unless they are set.

        The name is the variant's ``metadata.name``, else the hub repo it came from, else
        ``c2v_rag/<directory name>`` (mteb wants "organization/model"); the revision is the hub
        commit, else a content hash of the variant's config and weights.
        """
        card = getattr(model, "model_card_data", None)
        if card is None or self.variant_dir is None:
            return
        directory = self.variant_dir.resolve()
        from_hub = directory.parent.name == "snapshots" and len(directory.name) == 40
        if not card.model_name:
            base = card.base_model if from_hub and card.base_model else f"c2v_rag/{directory.name}"
            card.model_name = self.model.config.metadata.get("name") or base
        if not getattr(card, "base_model_revision", None):
            card.base_model_revision = directory.name if from_hub else variant_revision(directory)
