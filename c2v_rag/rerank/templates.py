"""How a (query, document) pair is laid out for the decoder: the document in the prompt, the query after it.

A pair becomes ``head + document + middle + query``: the query is the text the decoder is scored on, so it comes
last and nothing after it is read. Only the document is ever cut, keeping its head (as encode keeps a text's
head), so that the whole sequence fits ``max_length``; a query that leaves no room for a document is an error.
The four parts are tokenized apart (each without special tokens), so a query's tokens, and so its log-probability
terms, are the same ids whatever document precedes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from c2v_rag.core.config import PromptFormat

DOCUMENT = "{document}"


@dataclass(frozen=True)
class RerankTemplate:
    """An instruction around the document, after which the query is scored.

    ``instruction`` holds ``{document}`` once. ``chat`` wraps it as a user turn in the variant's prompt format
    and opens the assistant's turn before the query (an instruct model answers there); without it the text is
    plain completion.
    """

    name: str
    instruction: str
    chat: bool = True

    def __post_init__(self) -> None:
        if self.instruction.count(DOCUMENT) != 1:
            raise ValueError(f"template {self.name!r}: the instruction must hold {DOCUMENT} exactly once")


TEMPLATES: dict[str, RerankTemplate] = {
    t.name: t
    for t in (
        # The reader asks for the search query the text answers: the query is then what the decoder would write.
        RerankTemplate("search-query", "{document}\n\nWrite a search query that this text answers."),
        RerankTemplate("question", "Passage:\n{document}\n\nWrite a question that the passage above answers."),
        RerankTemplate("plain", "Document: {document}\nRelevant query:", chat=False),
    )
}
DEFAULT_TEMPLATE = "search-query"


def get_template(template: str | RerankTemplate) -> RerankTemplate:
    if isinstance(template, RerankTemplate):
        return template
    found = TEMPLATES.get(template)
    if found is None:
        raise ValueError(f"unknown rerank template {template!r}: one of {', '.join(TEMPLATES)}, or a RerankTemplate")
    return found


@dataclass(frozen=True)
class Pair:
    """One pair's decoder ids and where its query sits: ``ids[query_start:]`` are the query tokens."""

    ids: list[int]
    query_start: int
    truncated: bool


class PairBuilder:
    """Token ids of (query, document) pairs under one template, for one tokenizer and prompt format."""

    def __init__(self, tokenizer: Any, prompt_format: PromptFormat, template: RerankTemplate, max_length: int) -> None:
        self.tokenizer = tokenizer
        self.template = template
        self.max_length = max_length
        before, after = template.instruction.split(DOCUMENT)
        if template.chat:
            before = prompt_format.prefix + before
            after = after + turn_close(tokenizer, prompt_format)
        else:
            after = after + " "
        bos = tokenizer.bos_token_id
        # A BOS where the tokenizer would add one itself (Llama-style), as encode's prompts have it.
        self.head = ([bos] if bos is not None and _adds_bos(tokenizer) else []) + self._ids(before)
        self.middle = self._ids(after)

    @property
    def pad_id(self) -> int:
        """The id batches are right-padded with: the tokenizer's pad token, else its EOS (no real token attends to
        a pad under causal attention, so any id serves)."""
        pad = self.tokenizer.pad_token_id
        return int((pad if pad is not None else self.tokenizer.eos_token_id) or 0)

    def _ids(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []

    def query_ids(self, query: str) -> list[int]:
        """The query's tokens, checked to leave room for at least one document token."""
        ids = self._ids(query.strip())
        room = self.max_length - len(self.head) - len(self.middle) - len(ids)
        if room < 1:
            raise ValueError(
                f"the query is {len(ids)} tokens, which with the template's {len(self.head) + len(self.middle)} "
                f"leaves no room for a document in max_length={self.max_length}: shorten the query or raise "
                "max_length"
            )
        return ids

    def pairs(self, query_ids: list[int], documents: Sequence[str]) -> list[Pair]:
        """Each document with the query, its head kept where the whole would pass ``max_length``."""
        room = self.max_length - len(self.head) - len(self.middle) - len(query_ids)
        out = []
        for ids in self.tokenizer(list(documents), add_special_tokens=False)["input_ids"] if documents else []:
            cut = len(ids) > room
            prompt = self.head + list(ids[:room]) + self.middle
            out.append(Pair(prompt + query_ids, len(prompt), cut))
        return out

    def unconditional(self, query_ids: list[int]) -> Pair:
        """The query after the template with an empty document: its log-probability is what the query
        costs without evidence (subtracted for pointwise mutual information)."""
        prompt = self.head + self.middle
        return Pair(prompt + query_ids, len(prompt), False)


def turn_close(tokenizer: Any, prompt_format: PromptFormat) -> str:
    """What a chat template writes after a user message's content up to the assistant's first word
    (``<|im_end|>\\n<|im_start|>assistant\\n`` for ChatML); without a chat template, the prompt format's suffix and
    a newline."""
    from c2v_rag.hub.fast_tokenizer import chat_turn_close

    closed = chat_turn_close(tokenizer)
    return closed if closed is not None else prompt_format.suffix + "\n"


def _adds_bos(tokenizer: Any) -> bool:
    from c2v_rag.encode.prompting import tokenizer_adds_bos

    return tokenizer_adds_bos(tokenizer)
