"""Reading the embedding off the decoder's last hidden states: one :class:`Representation` per way of
reading it (paper, Table 12; LLM2Vec, Section 3.2), registered by name in :data:`REPRESENTATIONS`.

A representation declares the positions it reads (:meth:`~Representation.positions`: the int8 graph
computes its last layer at those rows only), computes the vector from them (:meth:`~Representation.read`),
and names the parts of that vector (:meth:`~Representation.parts`: the layout that ``normalize_parts``,
``encoder_share``, ``objective.parts`` and Matryoshka prefixes refer to). Adding one is a subclass and
:func:`register` above it.

The config lives in ``core``, below this layer, and may not import it, yet must refuse an unknown name
when it is built. So this module hands :data:`REPRESENTATIONS` to :func:`c2v_rag.core.config.use_representations`
when imported, and ``c2v_rag/__init__.py`` has it imported before the first config is validated
(:func:`c2v_rag.core.config.register_representations_on_use`); the config then checks names and the static facts
(``reads_contextual``, ``two_part``, ``parts``) against that one registry.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TypeVar

import torch

from c2v_rag.core.config import use_representations
from c2v_rag.nn.pooling import mean_pool, weighted_mean_pool


class Representation(ABC):
    """One way to read the text embedding off the decoder's last hidden states ``hidden`` [B, T, d].

    Instances are stateless; :data:`REPRESENTATIONS` holds one per ``name``. The class attributes are what
    the rest of the package asks of a representation without computing it.
    """

    name: str
    """The value of ``Causal2VecConfig.representation`` that selects it."""
    part_names: tuple[str, ...] = ()
    """The names of the d-wide parts of its vector, in order; empty means one part named after it."""
    pools_text: bool = False
    """Whether it pools the states of the text tokens (the batch's ``pool_mask``): it reads every row."""
    reads_contextual: bool = False
    """Whether it reads the Contextual token (h_C or C): a plain decoder has none to read, and echo embeddings
    are read off the text's second copy instead."""
    reads_text: bool = True
    """Whether its vector depends on the decoder states of the text and what follows it. h_C alone does not
    under causal attention, so the decoder input can leave the text out."""
    two_part: bool = False
    """Whether it combines two vectors, which ``normalize_parts`` L2-normalizes first."""

    def parts(self, d: int) -> dict[str, int]:
        """The named parts of its vector, in order, with their widths, for a decoder of width ``d``."""
        return {name: d for name in self.part_names or (self.name,)}

    def width(self, d: int) -> int:
        """The size of its vector for a decoder of width ``d``."""
        return sum(self.parts(d).values())

    @abstractmethod
    def positions(
        self, context_positions: torch.Tensor, last_positions: torch.Tensor, num_contextual_tokens: int
    ) -> torch.Tensor | None:
        """The positions [B, R] whose last hidden states :meth:`read` reads, in no particular order, or None
        where it reads them all. A decoder that can compute its last layer at some rows only
        (``OnnxDecoder.rows_only``) is given these; the other rows may then hold anything."""

    @abstractmethod
    def read(
        self,
        hidden: torch.Tensor,
        context_positions: torch.Tensor,
        last_positions: torch.Tensor,
        num_contextual_tokens: int,
        contextual_tokens: torch.Tensor | None,
        pool_mask: torch.Tensor | None = None,
        normalize_parts: bool = False,
    ) -> torch.Tensor:
        """The embeddings [B, width(d)] from the decoder's last hidden states ``hidden`` [B, T, d].

        ``context_positions`` [B] is where the Contextual tokens start, ``last_positions`` [B] the EOS;
        ``contextual_tokens`` C [B, n, d] is what the projector wrote there (several are averaged into one
        h_C or C). ``pool_mask`` [B, T] marks the text tokens that pooled representations average over.
        ``normalize_parts`` applies to two-part representations only (the config refuses it elsewhere).
        """


R = TypeVar("R", bound=Representation)

REPRESENTATIONS: dict[str, Representation] = {}
"""Every representation by name: the values ``Causal2VecConfig.representation`` accepts."""
use_representations(REPRESENTATIONS)


def register(cls: type[R]) -> type[R]:
    """Class decorator: add an instance of ``cls`` to :data:`REPRESENTATIONS` under its ``name``."""
    representation = cls()
    if representation.name in REPRESENTATIONS:
        raise ValueError(f"a representation named {representation.name!r} is registered already")
    REPRESENTATIONS[representation.name] = representation
    return cls


# ------------------------------------------------------------------------------------------------ the states read


def contextual_positions(context_positions: torch.Tensor, num_contextual_tokens: int) -> torch.Tensor:
    """The positions [B, n] of the Contextual tokens, from where they start ``context_positions`` [B]."""
    offsets = torch.arange(num_contextual_tokens, device=context_positions.device)
    return context_positions[:, None] + offsets  # [B] -> [B, n]


def eos_state(hidden: torch.Tensor, last_positions: torch.Tensor) -> torch.Tensor:
    """h_EOS: each row's state at its ``last_positions``."""
    rows = torch.arange(hidden.size(0), device=hidden.device)
    return hidden[rows, last_positions]  # [B, T, d] -> [B, d]


def contextual_state(hidden: torch.Tensor, context_positions: torch.Tensor, num_contextual_tokens: int) -> torch.Tensor:
    """h_C: each row's states at its Contextual tokens, averaged."""
    rows = torch.arange(hidden.size(0), device=hidden.device)
    offsets = torch.arange(num_contextual_tokens, device=hidden.device)
    return hidden[rows[:, None], context_positions[:, None] + offsets].mean(1)  # [B, T, d] -> [B, n, d] -> [B, d]


# ------------------------------------------------------------------------------------------------ kinds


class TwoPartRepresentation(Representation):
    """Two vectors of width d, each L2-normalized first under ``normalize_parts`` (in small decoders h_C
    carries a few massive activation dimensions, and unnormalized it dominates the cosine), then combined."""

    two_part = True

    @abstractmethod
    def pair(
        self,
        hidden: torch.Tensor,
        context_positions: torch.Tensor,
        last_positions: torch.Tensor,
        num_contextual_tokens: int,
        contextual_tokens: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The two vectors [B, d] and [B, d], in the order of the vector's parts."""

    @abstractmethod
    def combine(self, first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
        """One vector from the two."""

    def read(
        self,
        hidden: torch.Tensor,
        context_positions: torch.Tensor,
        last_positions: torch.Tensor,
        num_contextual_tokens: int,
        contextual_tokens: torch.Tensor | None,
        pool_mask: torch.Tensor | None = None,
        normalize_parts: bool = False,
    ) -> torch.Tensor:
        first, second = self.pair(hidden, context_positions, last_positions, num_contextual_tokens, contextual_tokens)
        if normalize_parts:
            # In fp32: bf16 norms of vectors with massive activations lose the small dimensions.
            first = torch.nn.functional.normalize(first.float(), dim=-1).to(first.dtype)
            second = torch.nn.functional.normalize(second.float(), dim=-1).to(second.dtype)
        return self.combine(first, second)


class PooledRepresentation(Representation):
    """A pooling of the text tokens' states (``pool_mask``: instruction and template excluded, and the first
    copy of the text under echo); it reads every row."""

    pools_text = True

    @abstractmethod
    def pool(self, hidden: torch.Tensor, pool_mask: torch.Tensor) -> torch.Tensor:
        """One vector [B, d] from ``hidden`` [B, T, d] over the positions where ``pool_mask`` [B, T] is 1."""

    def positions(
        self, context_positions: torch.Tensor, last_positions: torch.Tensor, num_contextual_tokens: int
    ) -> torch.Tensor | None:
        return None

    def read(
        self,
        hidden: torch.Tensor,
        context_positions: torch.Tensor,
        last_positions: torch.Tensor,
        num_contextual_tokens: int,
        contextual_tokens: torch.Tensor | None,
        pool_mask: torch.Tensor | None = None,
        normalize_parts: bool = False,
    ) -> torch.Tensor:
        if pool_mask is None:
            raise ValueError(f"representation={self.name!r} needs the batch's pool_mask")
        return self.pool(hidden, pool_mask)


# ------------------------------------------------------------------------------------------------ the registered


@register
class Concat(TwoPartRepresentation):
    """[h_C; h_EOS], the Causal2Vec default (2d dims)."""

    name = "concat"
    part_names: tuple[str, ...] = ("contextual", "eos")
    reads_contextual = True

    def positions(
        self, context_positions: torch.Tensor, last_positions: torch.Tensor, num_contextual_tokens: int
    ) -> torch.Tensor | None:
        contextual = contextual_positions(context_positions, num_contextual_tokens)
        return torch.cat([contextual, last_positions[:, None]], dim=1)  # [B, n] + [B, 1] -> [B, n + 1]

    def pair(
        self,
        hidden: torch.Tensor,
        context_positions: torch.Tensor,
        last_positions: torch.Tensor,
        num_contextual_tokens: int,
        contextual_tokens: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return contextual_state(hidden, context_positions, num_contextual_tokens), eos_state(hidden, last_positions)

    def combine(self, first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
        return torch.cat([first, second], dim=-1)  # [B, d] + [B, d] -> [B, 2d]


@register
class Average(Concat):
    """(h_C + h_EOS) / 2: the states ``concat`` reads, averaged into one vector (d dims)."""

    name = "average"
    part_names = ()

    def combine(self, first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
        return (first + second) / 2  # [B, d] + [B, d] -> [B, d]


@register
class LastToken(Representation):
    """h_EOS alone (d dims)."""

    name = "last_token"
    part_names = ("eos",)

    def positions(
        self, context_positions: torch.Tensor, last_positions: torch.Tensor, num_contextual_tokens: int
    ) -> torch.Tensor | None:
        return last_positions[:, None]  # [B] -> [B, 1]

    def read(
        self,
        hidden: torch.Tensor,
        context_positions: torch.Tensor,
        last_positions: torch.Tensor,
        num_contextual_tokens: int,
        contextual_tokens: torch.Tensor | None,
        pool_mask: torch.Tensor | None = None,
        normalize_parts: bool = False,
    ) -> torch.Tensor:
        return eos_state(hidden, last_positions)  # [B, T, d] -> [B, d]


@register
class Contextual(Representation):
    """h_C alone (d dims). Under causal attention h_C never sees the text tokens after it, so it is the
    encoder's view of the text as read through the decoder (an ablation, and a cheap training stage)."""

    name = "contextual"
    reads_contextual = True
    reads_text = False

    def positions(
        self, context_positions: torch.Tensor, last_positions: torch.Tensor, num_contextual_tokens: int
    ) -> torch.Tensor | None:
        return contextual_positions(context_positions, num_contextual_tokens)  # [B] -> [B, n]

    def read(
        self,
        hidden: torch.Tensor,
        context_positions: torch.Tensor,
        last_positions: torch.Tensor,
        num_contextual_tokens: int,
        contextual_tokens: torch.Tensor | None,
        pool_mask: torch.Tensor | None = None,
        normalize_parts: bool = False,
    ) -> torch.Tensor:
        return contextual_state(hidden, context_positions, num_contextual_tokens)  # [B, T, d] -> [B, d]


@register
class EosProjector(TwoPartRepresentation):
    """[h_EOS; C], the EOS state next to the projector's output ("Concat-bi", 2d dims). C is the decoder's
    input at the Contextual token, not a state, so only the EOS row is read."""

    name = "eos_projector"
    part_names = ("eos", "projector")
    reads_contextual = True

    def positions(
        self, context_positions: torch.Tensor, last_positions: torch.Tensor, num_contextual_tokens: int
    ) -> torch.Tensor | None:
        return last_positions[:, None]  # [B] -> [B, 1]

    def pair(
        self,
        hidden: torch.Tensor,
        context_positions: torch.Tensor,
        last_positions: torch.Tensor,
        num_contextual_tokens: int,
        contextual_tokens: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if contextual_tokens is None:
            raise ValueError("representation='eos_projector' needs the Contextual tokens C")
        h_eos = eos_state(hidden, last_positions)
        return h_eos, contextual_tokens.mean(1).to(h_eos.dtype)  # C: [B, n, d] -> [B, d]

    def combine(self, first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
        return torch.cat([first, second], dim=-1)  # [B, d] + [B, d] -> [B, 2d]


@register
class Mean(PooledRepresentation):
    """The mean of the text tokens' states, instruction and template excluded (LLM2Vec; d dims)."""

    name = "mean"

    def pool(self, hidden: torch.Tensor, pool_mask: torch.Tensor) -> torch.Tensor:
        return mean_pool(hidden, pool_mask)  # [B, T, d] -> [B, d]


@register
class WeightedMean(PooledRepresentation):
    """The mean of the text tokens' states with weights 1..k over the k text tokens (SGPT's position-weighted
    mean, LLM2Vec's choice for causal models; d dims): later tokens have seen more of the text."""

    name = "weighted_mean"

    def pool(self, hidden: torch.Tensor, pool_mask: torch.Tensor) -> torch.Tensor:
        return weighted_mean_pool(hidden, pool_mask)  # [B, T, d] -> [B, d]
