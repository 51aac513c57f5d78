"""Pseudo-query generators: an LLM writes one search question per text chunk, for ``c2v-rag adapt``.

``adapt`` turns a user's own documents into (question, passage) training pairs. Every generator, local or
behind an HTTP endpoint, sends the same prompt (:data:`PROMPT`) and passes its raw reply through the same
:func:`clean_question`, so that switching the generator changes the model, not the task or the parsing.

A generator is a :class:`QueryGenerator` registered under its ``name`` in :data:`GENERATORS`;
:func:`build_generator` builds one from the kind and options the command line holds. The generator modules
register themselves with :func:`register` when the package imports them (``pseudo/__init__.py``).
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from c2v_rag.core.errors import C2VError

PROMPT = (
    "Here is a text:\n\n{passage}\n\n"
    "Write ONE short search question that a user would type into a search engine, "
    "whose answer is in this text. Use your own words; do not copy exact phrases from the text. "
    "Reply with the question only."
)
"""The one instruction every generator sends, as the user turn of a chat; ``{passage}`` is the chunk.

The passage comes first and the task last: small models follow an instruction they read just before
answering far more often than one they read before a long passage."""


class GeneratorUnavailableError(C2VError, RuntimeError):
    """A query generator cannot run: its weights, its device or its server is missing or misconfigured."""


@dataclass(frozen=True)
class GeneratedQuery:
    """One generated question and how sure the generator was of it.

    ``mean_logprob`` is the mean per-token log-probability of the question's tokens under the generator
    (negative; closer to 0 is more confident), for filtering unlikely questions; ``None`` when the
    generator does not report log-probabilities (many OpenAI-compatible servers do not).
    """

    text: str
    mean_logprob: float | None


Progress = Callable[[int], None]
"""Called with the number of passages just finished, so a caller can drive a progress bar with an ETA."""


def chat_messages(passage: str) -> list[dict[str, str]]:
    """The chat every generator sends for ``passage``: one user turn, no system prompt (the chat template
    or the server adds its model's default one)."""
    return [{"role": "user", "content": PROMPT.format(passage=passage)}]


_LEAD = re.compile(
    r"""^(?:
        \s+
      | [-*\u2022#>]+\s*                                   # list bullets, markdown headings and quotes
      | \(?\d{1,3}\s*[.):]\s*                              # numbering: "1.", "2)", "(3)"
      | (?:search\s+)?(?:question|query|q)\s*\d*\s*[:.)\-]\s*  # "Question:", "Q1:", "Search query -"
      | ["'`\u201c\u201d\u2018\u2019*_]+                   # opening quotes, bold and italics
    )""",
    re.IGNORECASE | re.VERBOSE,
)
_TRAIL = re.compile(r"""["'`\u201c\u201d\u2018\u2019*_\s]+$""")
# A sentence ends at "!" or ":" (lead-ins: "Sure!", "Here is one:") or at "." after a word of three letters or
# more, so that "Dr." or "e.g." inside a question does not cut it.
_SENTENCE_END = re.compile(r"(?:(?<=[A-Za-z]{3}\.)|(?<=[!:]))\s+")


def _strip_markers(text: str) -> str:
    """``text`` without leading bullets, numbering, "Question:" labels and quotes, nor trailing quotes."""
    previous = None
    while previous != text:
        previous = text
        text = _LEAD.sub("", text, count=1)
    return _TRAIL.sub("", text).strip()


def clean_question(raw: str) -> str | None:
    """The question in a generator's raw reply, or ``None`` when there is none.

    Small models wrap the question in chatter ("Sure! Here is a question: ..."), label it ("Question:",
    "Q:", "1."), quote it, or go on to answer it. This keeps the first sentence that ends in ``?`` (on the
    first line that has one), without labels or quotes, with whitespace runs made one space. A reply with
    no ``?`` gives ``None``: what a small model writes then is a copy of the passage or chatter, not the
    question the prompt asked for.
    """
    if not raw:
        return None
    for line in raw.splitlines():
        if "?" not in line:
            continue
        up_to_mark = line[: line.index("?") + 1]
        sentence = _SENTENCE_END.split(up_to_mark)[-1]  # drop a lead-in such as "Sure! Here it is:"
        question = _strip_markers(sentence)
        if _has_words(question):
            return " ".join(question.split())
    return None


def _has_words(text: str) -> bool:
    return any(ch.isalnum() for ch in text.rstrip("?"))


class QueryGenerator(ABC):
    """Writes one search question per passage.

    Subclasses set ``name`` (the kind :func:`build_generator` knows them by) and are registered with
    :func:`register`. ``check()`` runs before any work, so that a missing model or an unreachable server fails
    in the first second with the fix, not after the documents were read and chunked.
    """

    name: ClassVar[str]

    @abstractmethod
    def generate(self, passages: Sequence[str], *, progress: Progress | None = None) -> list[GeneratedQuery | None]:
        """One result per passage, in order: the cleaned question, or ``None`` where generation failed or gave
        no question (an empty passage gives ``None`` without a call to the model). ``progress(n)`` is called
        with the number of passages just finished."""

    @abstractmethod
    def check(self) -> None:
        """Raise :class:`GeneratorUnavailableError` (naming the fix) if :meth:`generate` cannot run."""

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """What the report records about this generator: its kind, model and options (never a secret)."""


G = TypeVar("G", bound=type[QueryGenerator])

GENERATORS: dict[str, type[QueryGenerator]] = {}
"""The generator classes, by the kind that names them (``"local"``, ``"openai"``)."""


def register(cls: G) -> G:
    """Class decorator: list ``cls`` in :data:`GENERATORS` under its ``name``."""
    kind = cls.name
    if kind in GENERATORS and GENERATORS[kind] is not cls:
        raise TypeError(f"{GENERATORS[kind].__name__} and {cls.__name__} are both query generator kind {kind!r}")
    GENERATORS[kind] = cls
    return cls


def build_generator(kind: str, **options: Any) -> QueryGenerator:
    """The generator of kind ``kind`` (a key of :data:`GENERATORS`), built with ``options``."""
    cls = GENERATORS.get(kind)
    if cls is None:
        known = ", ".join(repr(k) for k in sorted(GENERATORS)) or "none registered"
        raise ValueError(f"unknown query generator kind {kind!r}; the kinds are: {known}")
    try:
        return cls(**options)
    except TypeError as err:
        raise TypeError(f"query generator {kind!r}: {err}") from err
