"""How pseudo-pairs are made from a corpus: the ``pseudo_pairs`` block of a ``format: corpus`` dataset, and of
``c2v-rag adapt``."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

GeneratorKind = Literal["none", "local", "openai"]


class PseudoPairsConfig(BaseModel):
    """Which pseudo-queries to make, how many, and which to keep.

    - ``crops_per_chunk``: inverse-cloze pairs per chunk (a sentence against the rest of its chunk);
    - ``headings``: a title or section heading against the text under it;
    - ``generator``: an LLM writes one question per chunk for up to ``max_generated`` chunks: ``local`` (the
      bundled SmolLM2-135M-Instruct, offline), ``openai`` (any OpenAI-compatible chat endpoint at
      ``generator_url``, model ``generator_model``), or ``none``.

    Filters: query length in words, meta and degenerate text, the generator's mean token log-prob
    (``min_logprob``), and the round trip (``round_trip_k``: BM25 must rank the query's own chunk in its top k).
    ``holdout_fraction`` of the chunks, with their queries, are kept out of training; the gate asks one query of
    each (a generated question, else a heading, else a crop) and the others are not used.
    """

    model_config = ConfigDict(extra="forbid")

    chunk_size: int = Field(200, ge=16, description="decoder tokens per chunk, as ingest cuts them")
    chunk_overlap: int = Field(20, ge=0)
    crops_per_chunk: int = Field(1, ge=0, le=4)
    headings: bool = True
    generator: GeneratorKind = "local"
    generator_url: str | None = None
    generator_model: str | None = None
    generator_batch_size: int = Field(16, ge=1)
    max_generated: int = Field(300, ge=0, description="chunks an LLM writes a question for (its cost is the bound)")
    min_words: int = Field(3, ge=1)
    max_words: int = Field(40, ge=1)
    min_logprob: float | None = Field(-1.5, description="drop generated questions below this mean token log-prob")
    round_trip_k: int | None = Field(
        20, ge=1, description="keep a generated or heading query only if BM25 finds its chunk in this top k"
    )
    holdout_fraction: float = Field(0.1, ge=0, lt=0.5)
    max_holdout: int = Field(
        300, ge=1, description="held-out chunks at most (each costs two full encodings at the gate)"
    )
    max_pairs: int | None = Field(None, ge=1, description="training pairs at most (a random sample)")
    seed: int = 0

    @model_validator(mode="after")
    def _check(self) -> PseudoPairsConfig:
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError(
                f"chunk_overlap ({self.chunk_overlap}) must be smaller than chunk_size ({self.chunk_size})"
            )
        if self.generator == "openai" and not (self.generator_url and self.generator_model):
            raise ValueError(
                "generator 'openai' needs generator_url (e.g. http://127.0.0.1:11434/v1 for Ollama) and "
                "generator_model (a model the endpoint serves)"
            )
        if self.generator != "openai" and (self.generator_url or self.generator_model):
            raise ValueError(
                f"generator_url/generator_model are set but generator is {self.generator!r}; set generator: openai"
            )
        if not (self.crops_per_chunk or self.headings or (self.generator != "none" and self.max_generated)):
            raise ValueError("no pseudo-query source is on: enable crops_per_chunk, headings or a generator")
        if self.min_words > self.max_words:
            raise ValueError(f"min_words ({self.min_words}) exceeds max_words ({self.max_words})")
        return self
