"""The configuration of a Causal2Vec variant: what is saved next to its weights, and reading it back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from c2v_rag.core.errors import VariantLoadError

CONFIG_FILE = "causal2vec_config.json"
"""The file in a variant directory that holds its :class:`Causal2VecConfig`."""

Representation = Literal["concat", "average", "last_token", "contextual", "eos_projector", "mean", "weighted_mean"]
"""How the embedding is read off the decoder (paper, Table 12; LLM2Vec, Section 3.2):

- ``concat``: [h_C; h_EOS], the Causal2Vec default (2d dims);
- ``contextual``: h_C alone (d dims). Causal attention means h_C never sees the text tokens after it, so
  it is the encoder's view of the text as read through the decoder (an ablation, and a cheap training stage);
- ``average``: (h_C + h_EOS) / 2 (d dims);
- ``last_token``: h_EOS alone (d dims);
- ``eos_projector``: [h_EOS; C], the EOS state next to the projector output ("Concat-bi", 2d dims);
- ``mean``: the mean of the text tokens' states, instruction and template excluded (LLM2Vec; d dims);
- ``weighted_mean``: the same with weights growing with position, 1..k over the k text tokens
  (SGPT's position-weighted mean, LLM2Vec's choice for causal models; d dims).
"""

READOUT_FIELDS = ("representation", "normalize_parts", "encoder_share")
"""Fields that say how the embedding is read off the decoder's states, not what the weights are: a
trained variant can change them (``Causal2Vec.set_readout``; a training stage continuing a variant)."""

AttentionMode = Literal["causal", "bidirectional"]
"""``bidirectional`` lets every token attend to later ones too (LLM2Vec; Causal2Vec Table 15)."""

POOLED_REPRESENTATIONS = ("mean", "weighted_mean")
TWO_PART_REPRESENTATIONS = ("concat", "average", "eos_projector")
"""Representations built from two vectors; ``normalize_parts`` L2-normalizes each before combining them."""

DEFAULT_ECHO_TEMPLATE = "Rewrite the sentence: {text}\nRewritten sentence: {text}"
"""Echo embeddings' repetition prompt (Springer et al., 2024): the text twice; only the second copy is pooled."""

DEFAULT_EXAMPLE_TEMPLATE = "<instruct>{instruction}\n<query>{query}\n<response>{response}"
"""An in-context example block as bge-en-icl writes it (Li et al., 2025), the layout Causal2Vec "w/ ICL" follows."""

Placement = Literal["after_instruction", "before_instruction"]
"""Where the Contextual token sits (paper, Table 14)."""

DTypeName = Literal["auto", "float32", "bfloat16", "float16"]


class PromptFormat(BaseModel):
    """How the instruction and the text sit inside the backbone's instruction template.

    The decoder input is ``prefix + instruction + [C] + text + suffix (+ EOS)``; for ChatML
    backbones ``prefix="<|im_start|>user\\n"`` and ``suffix="<|im_end|>"`` (paper, Appendix A.1).
    """

    model_config = ConfigDict(extra="forbid")

    name: str = "none"
    prefix: str = ""
    suffix: str = ""


class Causal2VecConfig(BaseModel):
    """Everything needed to rebuild a variant, except the trained weights.

    ``decoder`` and ``encoder`` are base model references: a packaged alias
    (``"smollm2-135m-instruct"``, ``"all-minilm-l6-v2"``), a local directory, or a Hugging Face
    hub id. Hidden sizes are filled in when the variant is assembled and checked on load.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    format_version: Literal[1] = 1
    decoder: str
    encoder: str | None = None
    decoder_revision: str | None = None
    encoder_revision: str | None = None

    num_contextual_tokens: int = Field(1, ge=0, description="0 gives the plain decoder baseline")
    representation: Representation = "concat"
    normalize_parts: bool = Field(
        False,
        description=(
            "L2-normalize each part of a two-part representation (h_C and h_EOS, or h_EOS and C) before "
            "concatenating or averaging, so that each counts equally in the cosine whatever its norm"
        ),
    )
    encoder_share: float = Field(
        0.0,
        ge=0.0,
        lt=1.0,
        description=(
            "share of the cosine carried by the encoder's own sentence vector (its mean-pooled states, the "
            "projector's input): the embedding becomes [sqrt(s) * unit(encoder); sqrt(1 - s) * unit(decoder "
            "readout)], so cos = s * cos_encoder + (1 - s) * cos_decoder. 0 is the paper's readout"
        ),
    )
    matryoshka_dims: list[int] = Field(
        default_factory=list,
        description=(
            "prefix sizes the variant was trained to embed on their own (Matryoshka); encode(truncate_dim=N) "
            "takes these and the full size, and refuses others"
        ),
    )
    placement: Placement = "after_instruction"
    attention: AttentionMode = "causal"
    echo: bool = Field(False, description="Echo embeddings: repeat the text and pool over the second copy")
    echo_template: str = DEFAULT_ECHO_TEMPLATE
    prompt_format: PromptFormat | Literal["auto"] = "auto"
    instruction_template: str = "{instruction}\n"
    example_template: str = Field(
        DEFAULT_EXAMPLE_TEMPLATE, description="one in-context example (bge-en-icl's layout); placeholders "
                                              "{instruction}, {query}, {response}")
    example_separator: str = Field("\n\n", description="between examples, and between the last one and the instruction")

    query_instruction: str | None = Field(
        None, description="instruction for queries when the caller names neither task nor instruction"
    )
    default_task: str | None = None

    max_length: int = Field(512, ge=4, description="bound on the whole decoder sequence")
    encoder_max_length: int | None = Field(None, ge=2)
    dtype: DTypeName = "auto"
    attn_implementation: str | None = None
    trust_remote_code: bool = False

    decoder_hidden_size: int | None = None
    encoder_hidden_size: int | None = None
    decoder_adapter: str | None = None
    encoder_adapter: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> "Causal2VecConfig":
        if "{instruction}" not in self.instruction_template:
            raise ValueError(
                f"instruction_template={self.instruction_template!r} must contain '{{instruction}}'"
            )
        if "{query}" not in self.example_template or "{response}" not in self.example_template:
            raise ValueError(f"example_template={self.example_template!r} must contain '{{query}}' and '{{response}}'")
        if self.echo_template.count("{text}") != 2:
            raise ValueError(f"echo_template={self.echo_template!r} must contain '{{text}}' exactly twice")
        if self.echo and self.representation not in ("last_token", *POOLED_REPRESENTATIONS):
            raise ValueError(
                f"echo=True reads the second copy of the text: use representation='mean', 'weighted_mean' or "
                f"'last_token', not {self.representation!r}"
            )
        if self.num_contextual_tokens == 0:
            if self.representation not in ("last_token", *POOLED_REPRESENTATIONS):
                raise ValueError(
                    "num_contextual_tokens=0 (plain decoder) supports representation='last_token', 'mean' or "
                    f"'weighted_mean', got {self.representation!r}"
                )
        elif self.encoder is None:
            raise ValueError("a Contextual token needs a bidirectional encoder: set encoder=...")
        if self.encoder_share and (self.num_contextual_tokens == 0 or self.encoder is None):
            raise ValueError(
                f"encoder_share={self.encoder_share} mixes in the encoder's sentence vector, but this model has no "
                "encoder (num_contextual_tokens=0); set encoder_share=0"
            )
        if self.matryoshka_dims != sorted(set(self.matryoshka_dims)) or any(n < 1 for n in self.matryoshka_dims):
            raise ValueError(f"matryoshka_dims={self.matryoshka_dims} must be distinct positive sizes in increasing order")
        sizes_known = self.decoder_hidden_size is not None and (not self.encoder_share or self.encoder_hidden_size)
        if self.matryoshka_dims and sizes_known and self.matryoshka_dims[-1] >= self.embedding_dim:
            raise ValueError(f"matryoshka_dims={self.matryoshka_dims} must be shorter than the embedding "
                             f"({self.embedding_dim} dims)")
        if self.normalize_parts and self.representation not in TWO_PART_REPRESENTATIONS:
            raise ValueError(
                f"normalize_parts=True applies to the two-part representations {TWO_PART_REPRESENTATIONS}, "
                f"not {self.representation!r}"
            )
        return self

    @property
    def embedding_dim(self) -> int:
        return self.parts["full"].stop

    @property
    def parts(self) -> dict[str, slice]:
        """Where each part of the embedding sits in the vector, and ``full`` for the whole.

        The layout is ``[encoder; first; second]``: ``encoder`` (MiniLM's own sentence vector, only with
        ``encoder_share``), then the decoder readout, split in two for the two-part representations
        (``concat``: ``contextual`` = h_C and ``eos`` = h_EOS; ``eos_projector``: ``eos`` and ``projector``
        = C) and whole otherwise (named ``eos`` for ``last_token``, ``contextual`` for ``contextual``, else
        after the representation). Each part, re-normalized, is an embedding of its own: the trainer
        scores parts by name (``objective.parts``), ``experiments/readout_parts.py`` evaluates them.
        """
        if self.decoder_hidden_size is None:
            raise ValueError("decoder_hidden_size is unknown until the decoder is loaded")
        d = self.decoder_hidden_size
        start = 0
        layout: dict[str, slice] = {}
        if self.encoder_share:
            if self.encoder_hidden_size is None:
                raise ValueError("encoder_hidden_size is unknown until the encoder is loaded")
            layout["encoder"] = slice(0, self.encoder_hidden_size)
            start = self.encoder_hidden_size
        names = {"concat": ("contextual", "eos"), "eos_projector": ("eos", "projector"),
                 "last_token": ("eos",)}.get(self.representation, (self.representation,))
        for name in names:
            layout[name] = slice(start, start + d)
            start += d
        layout["full"] = slice(0, start)
        return layout

    @property
    def vector_sizes(self) -> list[int]:
        """The sizes this variant embeds at: its trained Matryoshka prefixes and the whole vector."""
        return sorted({*self.matryoshka_dims, self.embedding_dim})

    def check_truncate_dim(self, truncate_dim: int | None) -> int | None:
        """``truncate_dim`` if the variant was trained for that prefix size (or it is the full size), else a
        ValueError that lists the sizes it was trained for. ``None`` passes through (the full vector)."""
        if truncate_dim is None:
            return None
        full, allowed = self.embedding_dim, self.vector_sizes
        if isinstance(truncate_dim, bool) or not isinstance(truncate_dim, int) or truncate_dim not in allowed:
            trained = (f"was trained for the prefix sizes {allowed}" if self.matryoshka_dims else
                       f"was not trained for shorter vectors (no matryoshka_dims), so only {full} works")
            raise ValueError(f"truncate_dim={truncate_dim!r}: this variant {trained}. A prefix it was not trained "
                             f"for scores far below the full vector; pick one of {allowed}, or train the sizes you "
                             "need (objective.matryoshka in the training recipe)")
        return None if truncate_dim == full else truncate_dim


def read_config(directory: Path) -> Causal2VecConfig:
    """The :class:`Causal2VecConfig` saved in the variant ``directory`` (its :data:`CONFIG_FILE`).

    Raises :class:`~c2v_rag.core.errors.VariantLoadError` naming the file when it is missing, corrupt or
    from an incompatible version.
    """
    path = directory / CONFIG_FILE
    if not path.is_file():
        raise VariantLoadError(f"{path} is missing: {directory} is not a Causal2Vec variant directory")
    try:
        return Causal2VecConfig.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (json.JSONDecodeError, UnicodeDecodeError, ValidationError) as err:
        raise VariantLoadError(f"{path} is corrupt or from an incompatible version: {err}") from err
