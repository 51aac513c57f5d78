"""The configuration of a Causal2Vec variant: what is saved next to its weights, and reading it back."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from c2v_rag.core.errors import VariantLoadError

CONFIG_FILE = "causal2vec_config.json"
"""The file in a variant directory that holds its :class:`Causal2VecConfig`."""


class RepresentationFacts(Protocol):
    """What validating a config needs to know of a representation (a way to read the embedding off the
    decoder's last states); :class:`c2v_rag.nn.readout.Representation` declares these and computes the vectors.

    The representations live in :data:`c2v_rag.nn.readout.REPRESENTATIONS`, a layer above this one: that
    module hands its registry to :func:`use_representations` when imported, and the package's import
    arranges for it to be imported before the first config is validated
    (:func:`register_representations_on_use`), so a config is checked against every registered name
    without this layer importing it.
    """

    @property
    def name(self) -> str: ...

    @property
    def reads_contextual(self) -> bool:
        """Whether it reads the Contextual token (h_C or C): a plain decoder has none to read, and echo
        embeddings are read off the text's second copy instead."""
        ...

    @property
    def two_part(self) -> bool:
        """Whether it combines two vectors, which ``normalize_parts`` L2-normalizes first."""
        ...

    def parts(self, d: int) -> dict[str, int]:
        """The named parts of its vector, in order, with their widths, given the decoder's width ``d``."""
        ...


_representations: Mapping[str, RepresentationFacts] = {}
# What registers them, called before the first config is validated. The package's facade sets it rather than
# importing the registry itself, because that import brings torch, which a command that validates no config
# (``c2v-rag --help``) should not wait for.
_register: Callable[[], None] | None = None
_register_lock = threading.Lock()


def use_representations(registry: Mapping[str, RepresentationFacts]) -> None:
    """Validate ``representation`` against ``registry``, by name; :mod:`c2v_rag.nn.readout` passes its registry
    when it is imported, which happens before any config is validated (:func:`register_representations_on_use`)."""
    global _representations
    _representations = registry


def register_representations_on_use(register: Callable[[], None]) -> None:
    """Have ``register`` (which calls :func:`use_representations`) run once, before the first config is
    validated; ``c2v_rag/__init__.py`` passes the import of :mod:`c2v_rag.nn.readout`."""
    global _register
    _register = register


def _registry() -> Mapping[str, RepresentationFacts]:
    global _register
    if _register is not None:
        with _register_lock:  # two threads validating the first configs both wait for the one registry
            if _register is not None:
                _register()
                _register = None
    return _representations


def representation_facts(name: str) -> RepresentationFacts:
    """The registered representation ``name``, or a ValueError that lists the registered names."""
    registry = _registry()
    facts = registry.get(name)
    if facts is None:
        raise ValueError(
            f"representation={name!r} is not a registered representation; use one of "
            f"{list(registry) or 'none (import c2v_rag.nn.readout registers them)'}"
        )
    return facts


READOUT_FIELDS = ("representation", "normalize_parts", "encoder_share", "part_weights")
"""Fields that say how the embedding is read off the decoder's states, not what the weights are: a
trained variant can change them (``Causal2Vec.set_readout``; a training stage continuing a variant)."""

AttentionMode = Literal["causal", "bidirectional"]
"""``bidirectional`` lets every token attend to later ones too (LLM2Vec; Causal2Vec Table 15)."""

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


# Fields added to Causal2VecConfig after its JSON first named cache entries (Causal2VecConfig.key_json), each with
# the value that means it is not set. Adding one with a default changed every name (decoder_layers did once, and
# so rebuilt every cached int8 graph); a field added here, at its default, leaves the names as they were.
KEYED_SINCE: dict[str, Any] = {"decoder_layers": None}


# What a variant's metadata measured of its weights, read its way: the dev scores its model card publishes.
MEASURED_METADATA = ("dev_scores",)


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

    decoder_layers: list[int] | None = Field(
        None,
        description=(
            "the base decoder's layers this variant runs, by their index in the base model (None: all). Dropping "
            "the layers that change the hidden state least cuts the decoder's cost in proportion; a variant is "
            "trained with the layers it runs (c2v_rag.nn.depth)"
        ),
    )
    num_contextual_tokens: int = Field(1, ge=0, description="0 gives the plain decoder baseline")
    representation: str = Field(
        "concat",
        description=(
            "how the embedding is read off the decoder's last states: the name of a registered representation "
            "(c2v_rag.nn.readout.REPRESENTATIONS; concat = [h_C; h_EOS] is Causal2Vec's)"
        ),
    )
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
    part_weights: dict[str, float] | None = Field(
        None,
        description=(
            "the share of the cosine each part carries, in the vector's order: 'encoder' (the encoder's own "
            "sentence vector) and the representation's parts ('contextual' = h_C and 'eos' = h_EOS for concat). "
            "The embedding is [sqrt(w) * unit(part) for each part], so cos = sum of w * cos_part; the weights are "
            "scaled to sum to 1, and a part left out is not in the vector. Replaces encoder_share, which weighs "
            "the decoder's readout as one part; set one of the two"
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
        DEFAULT_EXAMPLE_TEMPLATE,
        description="one in-context example (bge-en-icl's layout); placeholders {instruction}, {query}, {response}",
    )
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

    @field_validator("representation")
    @classmethod
    def _registered(cls, name: str) -> str:
        representation_facts(name)
        return name

    @field_validator("decoder_layers")
    @classmethod
    def _layers(cls, layers: list[int] | None) -> list[int] | None:
        if layers is not None and (not layers or layers != sorted(set(layers)) or layers[0] < 0):
            raise ValueError(
                f"decoder_layers={layers} must name at least one layer of the base decoder, by distinct indices from "
                "0 in increasing order (leave it unset to run all of them)"
            )
        return layers

    @field_validator("part_weights")
    @classmethod
    def _weights(cls, weights: dict[str, float] | None) -> dict[str, float] | None:
        if weights is None:
            return None
        if not weights or any(not w > 0 for w in weights.values()):
            raise ValueError(
                f"part_weights={weights} needs at least one part, each with a weight above 0 (leave a part out to "
                "drop it from the vector)"
            )
        total = sum(weights.values())
        return {name: w / total for name, w in weights.items()}

    @model_validator(mode="after")
    def _check(self) -> Causal2VecConfig:
        if "{instruction}" not in self.instruction_template:
            raise ValueError(f"instruction_template={self.instruction_template!r} must contain '{{instruction}}'")
        if "{query}" not in self.example_template or "{response}" not in self.example_template:
            raise ValueError(f"example_template={self.example_template!r} must contain '{{query}}' and '{{response}}'")
        if self.echo_template.count("{text}") != 2:
            raise ValueError(f"echo_template={self.echo_template!r} must contain '{{text}}' exactly twice")
        representation = representation_facts(self.representation)
        without_contextual = _either(name for name, facts in _registry().items() if not facts.reads_contextual)
        if self.echo and representation.reads_contextual:
            raise ValueError(
                f"echo=True reads the second copy of the text: use representation={without_contextual}, not "
                f"{self.representation!r}"
            )
        if self.num_contextual_tokens == 0:
            if representation.reads_contextual:
                raise ValueError(
                    f"num_contextual_tokens=0 (plain decoder) supports representation={without_contextual}, "
                    f"got {self.representation!r}"
                )
        elif self.encoder is None:
            raise ValueError("a Contextual token needs a bidirectional encoder: set encoder=...")
        if self.encoder_share and (self.num_contextual_tokens == 0 or self.encoder is None):
            raise ValueError(
                f"encoder_share={self.encoder_share} mixes in the encoder's sentence vector, but this model has no "
                "encoder (num_contextual_tokens=0); set encoder_share=0"
            )
        if self.matryoshka_dims != sorted(set(self.matryoshka_dims)) or any(n < 1 for n in self.matryoshka_dims):
            raise ValueError(
                f"matryoshka_dims={self.matryoshka_dims} must be distinct positive sizes in increasing order"
            )
        if self.part_weights is not None:
            self._check_part_weights(self.part_weights, representation)
        sizes_known = self.decoder_hidden_size is not None and (
            not self.uses_encoder_vector or self.encoder_hidden_size
        )
        if self.matryoshka_dims and sizes_known and self.matryoshka_dims[-1] >= self.embedding_dim:
            raise ValueError(
                f"matryoshka_dims={self.matryoshka_dims} must be shorter than the embedding ({self.embedding_dim} dims)"
            )
        if self.normalize_parts and not representation.two_part:
            two_part = tuple(name for name, facts in _registry().items() if facts.two_part)
            raise ValueError(
                f"normalize_parts=True applies to the two-part representations {two_part}, not {self.representation!r}"
            )
        return self

    def _check_part_weights(self, weights: dict[str, float], representation: RepresentationFacts) -> None:
        available = (["encoder"] if self.num_contextual_tokens and self.encoder is not None else []) + list(
            representation.parts(1)
        )
        unknown = [name for name in weights if name not in available]
        if unknown:
            raise ValueError(
                f"part_weights names {unknown}, which representation={self.representation!r} "
                f"{'with' if 'encoder' in available else 'without'} an encoder does not have; its parts are {available}"
            )
        if self.encoder_share:
            raise ValueError(
                f"part_weights={weights} and encoder_share={self.encoder_share} both weigh the encoder's vector; "
                "set part_weights alone (encoder_share=0)"
            )
        if representation.two_part and not self.normalize_parts and len([n for n in weights if n != "encoder"]) > 1:
            raise ValueError(
                "part_weights weighs each part as a unit vector; set normalize_parts=true with it, as the weights "
                "then say what share of the cosine each part carries"
            )

    def key_json(self) -> str:
        """The config as JSON for naming cache entries (the int8 graphs, a variant's alias of them, benchmark
        collections): :meth:`model_dump_json` less the fields added since such names were first made
        (:data:`KEYED_SINCE`) while they hold the value that means they are not set, so that an entry made before
        a field existed keeps its name and is found again."""
        unset = {name for name, value in KEYED_SINCE.items() if getattr(self, name) == value}
        return self.model_dump_json(exclude=unset)

    @property
    def uses_encoder_vector(self) -> bool:
        """Whether the embedding carries the encoder's own sentence vector (``encoder_share`` or an ``encoder``
        part weight)."""
        return bool(self.encoder_share) or "encoder" in (self.part_weights or {})

    @property
    def encoder_weight(self) -> float:
        """The share of the cosine the encoder's sentence vector carries: 0 where it is not in the vector."""
        return (self.part_weights or {}).get("encoder", self.encoder_share)

    @property
    def embedding_dim(self) -> int:
        return self.parts["full"].stop

    @property
    def parts(self) -> dict[str, slice]:
        """Where each part of the embedding sits in the vector, and ``full`` for the whole.

        The layout is ``[encoder; first; second]``: ``encoder`` (MiniLM's own sentence vector, only with
        ``encoder_share`` or an ``encoder`` part weight), then the decoder readout in the parts its representation names
        (:meth:`RepresentationFacts.parts`: ``concat`` has ``contextual`` = h_C and ``eos`` = h_EOS,
        ``eos_projector`` has ``eos`` and ``projector`` = C, ``last_token`` is one part ``eos``, the others
        one part named after themselves). Each part, re-normalized, is an embedding of its own: the trainer
        scores parts by name (``objective.parts``), ``experiments/readout_parts.py`` evaluates them.
        ``part_weights`` sets another order (its own) and leaves out the parts it does not name.
        """
        if self.decoder_hidden_size is None:
            raise ValueError("decoder_hidden_size is unknown until the decoder is loaded")
        if self.uses_encoder_vector and self.encoder_hidden_size is None:
            raise ValueError("encoder_hidden_size is unknown until the encoder is loaded")
        widths = representation_facts(self.representation).parts(self.decoder_hidden_size)
        if self.uses_encoder_vector:
            widths = {"encoder": self.encoder_hidden_size or 0, **widths}
        order = list(self.part_weights) if self.part_weights is not None else list(widths)
        start = 0
        layout: dict[str, slice] = {}
        for name in order:
            layout[name] = slice(start, start + widths[name])
            start += widths[name]
        layout["full"] = slice(0, start)
        return layout

    @property
    def vector_sizes(self) -> list[int]:
        """The sizes this variant embeds at: its trained Matryoshka prefixes and the whole vector."""
        return sorted({*self.matryoshka_dims, self.embedding_dim})

    def unmeasured_metadata(self) -> dict[str, Any]:
        """``metadata`` without what measured this variant's weights read its way (:data:`MEASURED_METADATA`):
        for a variant whose weights or readout changed, whose card would otherwise publish them as its own."""
        return {key: value for key, value in self.metadata.items() if key not in MEASURED_METADATA}

    def check_truncate_dim(self, truncate_dim: int | None, name: str = "truncate_dim") -> int | None:
        """``truncate_dim`` if the variant was trained for that prefix size (or it is the full size), else a
        ValueError that lists the sizes it was trained for, naming the option as the caller knows it (``name``:
        OpenAI's ``dimensions`` in the framework classes). ``None`` passes through (the full vector)."""
        if truncate_dim is None:
            return None
        full, allowed = self.embedding_dim, self.vector_sizes
        if isinstance(truncate_dim, bool) or not isinstance(truncate_dim, int) or truncate_dim not in allowed:
            trained = (
                f"was trained for the prefix sizes {allowed}"
                if self.matryoshka_dims
                else f"was not trained for shorter vectors (no matryoshka_dims), so only {full} works"
            )
            if isinstance(truncate_dim, str) and truncate_dim.isdigit() and int(truncate_dim) in allowed:
                raise ValueError(f"{name}={truncate_dim!r} is text: pass the size as an int, {name}={truncate_dim}")
            raise ValueError(
                f"{name}={truncate_dim!r}: this variant {trained}. A prefix it was not trained "
                f"for scores far below the full vector; pick one of {allowed}, or train the sizes you "
                "need (objective.matryoshka in the training recipe)"
            )
        return None if truncate_dim == full else truncate_dim


def _either(names: Iterable[str]) -> str:
    """``'a', 'b' or 'c'``: the names quoted, for a message."""
    quoted = [repr(name) for name in names]
    return " or ".join([", ".join(quoted[:-1]), quoted[-1]] if len(quoted) > 1 else quoted)


# The folder of an adapt run's output that holds its trained variant before the gate (and after, when not kept).
ADAPT_CANDIDATE_DIR = "candidate"


def read_config(directory: Path) -> Causal2VecConfig:
    """The :class:`Causal2VecConfig` saved in the variant ``directory`` (its :data:`CONFIG_FILE`).

    Raises :class:`~c2v_rag.core.errors.VariantLoadError` naming the file when it is missing, corrupt or
    from an incompatible version.
    """
    path = directory / CONFIG_FILE
    if not path.is_file():
        plain = (directory / "config.json").is_file()  # a transformers model: a base to build a variant on
        candidate = directory / ADAPT_CANDIDATE_DIR
        hint = ""
        if plain:
            hint = (
                "; it holds a plain transformers model, which can be a variant's base: "
                "Causal2Vec.from_components(decoder=..., encoder=...) builds one (docs/models.md)"
            )
        elif (candidate / CONFIG_FILE).is_file():  # an adapt run's output whose variant the gate did not keep
            hint = (
                f"; it is the output of a c2v-rag adapt run that did not keep its variant (its report says why): "
                f"pass {candidate} to use the trained variant anyway"
            )
        raise VariantLoadError(f"{path} is missing: {directory} is not a Causal2Vec variant directory{hint}")
    try:
        return Causal2VecConfig.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (json.JSONDecodeError, UnicodeDecodeError, ValidationError) as err:
        raise VariantLoadError(f"{path} is corrupt or from an incompatible version: {err}") from err
