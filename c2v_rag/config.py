"""The configuration of a Causal2Vec variant: what is saved next to its weights."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Representation = Literal["concat", "average", "last_token", "eos_projector"]
"""How the embedding is read off the decoder (paper, Table 12):

- ``concat``: [h_C; h_EOS], the Causal2Vec default (2d dims);
- ``average``: (h_C + h_EOS) / 2 (d dims);
- ``last_token``: h_EOS alone (d dims);
- ``eos_projector``: [h_EOS; C], the EOS state next to the projector output ("Concat-bi", 2d dims).
"""

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
    placement: Placement = "after_instruction"
    prompt_format: PromptFormat | Literal["auto"] = "auto"
    instruction_template: str = "{instruction}\n"

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
        if self.num_contextual_tokens == 0:
            if self.representation != "last_token":
                raise ValueError(
                    "num_contextual_tokens=0 (plain decoder) only supports representation='last_token', "
                    f"got {self.representation!r}"
                )
        elif self.encoder is None:
            raise ValueError("a Contextual token needs a bidirectional encoder: set encoder=...")
        return self

    @property
    def embedding_dim(self) -> int:
        if self.decoder_hidden_size is None:
            raise ValueError("decoder_hidden_size is unknown until the decoder is loaded")
        double = self.representation in ("concat", "eos_projector")
        return self.decoder_hidden_size * (2 if double else 1)
