"""Task instructions from the Causal2Vec paper, and which inputs receive them.

Asymmetric tasks (retrieval, reranking) put the instruction on queries only; documents are
encoded without one (paper, Appendix A.3). Symmetric tasks (STS, classification, clustering,
pair classification, summarization) put it on every input.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

Example = tuple[str, str]
"""An in-context example: ``(query, response)``, as bge-en-icl writes it before the query."""


logger = logging.getLogger(__name__)


class TaskKind(StrEnum):
    RETRIEVAL = "retrieval"
    RERANKING = "reranking"
    CLASSIFICATION = "classification"
    CLUSTERING = "clustering"
    PAIR_CLASSIFICATION = "pair_classification"
    STS = "sts"
    SUMMARIZATION = "summarization"
    TRAINING = "training"

    @property
    def symmetric(self) -> bool:
        return self not in (TaskKind.RETRIEVAL, TaskKind.RERANKING, TaskKind.TRAINING)


@dataclass(frozen=True)
class Task:
    """A named task: its instruction, whether documents receive it too, and its in-context examples.

    ``examples`` go before the instruction of every input that gets it (queries; every input of a
    symmetric task), as bge-en-icl does; see :class:`InContextPrompt`.
    """

    name: str
    instruction: str
    kind: TaskKind
    examples: tuple[Example, ...] = ()

    @property
    def symmetric(self) -> bool:
        return self.kind.symmetric


_K = TaskKind
# Table 16: instructions used for MTEB evaluation.
_EVALUATION: list[tuple[str, TaskKind, str]] = [
    (
        "AmazonCounterfactualClassification",
        _K.CLASSIFICATION,
        "Classify a given Amazon customer review text as either counterfactual or not-counterfactual.",
    ),
    ("AmazonPolarityClassification", _K.CLASSIFICATION, "Classify Amazon reviews into positive or negative sentiment"),
    (
        "AmazonReviewsClassification",
        _K.CLASSIFICATION,
        "Classify the given Amazon review into its appropriate rating category",
    ),
    ("Banking77Classification", _K.CLASSIFICATION, "Given a online banking query, find the corresponding intents"),
    (
        "EmotionClassification",
        _K.CLASSIFICATION,
        "Classify the emotion expressed in the given Twitter message into one of the six emotions: "
        "anger, fear, joy, love, sadness, and surprise.",
    ),
    (
        "ImdbClassification",
        _K.CLASSIFICATION,
        "Classify the sentiment expressed in the given movie review text from the IMDB dataset.",
    ),
    ("MassiveIntentClassification", _K.CLASSIFICATION, "Given a user utterance as query, find the user intents"),
    ("MassiveScenarioClassification", _K.CLASSIFICATION, "Given a user utterance as query, find the user scenarios"),
    (
        "MTOPDomainClassification",
        _K.CLASSIFICATION,
        "Classify the intent domain of the given utterance in task-oriented conversation",
    ),
    (
        "MTOPIntentClassification",
        _K.CLASSIFICATION,
        "Classify the intent of the given utterance in task-oriented conversation",
    ),
    ("ToxicConversationsClassification", _K.CLASSIFICATION, "Classify the given comments as either toxic or not toxic"),
    (
        "TweetSentimentExtractionClassification",
        _K.CLASSIFICATION,
        "Classify the sentiment of a given tweet as either positive, negative, or neutral",
    ),
    (
        "ArxivClusteringP2P",
        _K.CLUSTERING,
        "Identify the main and secondary category of Arxiv papers based on the titles and abstracts.",
    ),
    (
        "ArxivClusteringS2S",
        _K.CLUSTERING,
        "Identify the main and secondary category of Arxiv papers based on the titles",
    ),
    (
        "BiorxivClusteringP2P",
        _K.CLUSTERING,
        "Identify the main category of Biorxiv papers based on the titles and abstracts",
    ),
    ("BiorxivClusteringS2S", _K.CLUSTERING, "Identify the main category of Biorxiv papers based on the titles"),
    (
        "MedrxivClusteringP2P",
        _K.CLUSTERING,
        "Identify the main category of Medrxiv papers based on the titles and abstracts",
    ),
    ("MedrxivClusteringS2S", _K.CLUSTERING, "Identify the main category of Medrxiv papers based on the titles"),
    ("RedditClustering", _K.CLUSTERING, "Identify the topic or theme of Reddit posts based on the titles"),
    ("RedditClusteringP2P", _K.CLUSTERING, "Identify the topic or theme of Reddit posts based on the titles and posts"),
    (
        "StackExchangeClustering",
        _K.CLUSTERING,
        "Identify the topic or theme of StackExchange posts based on the titles",
    ),
    (
        "StackExchangeClusteringP2P",
        _K.CLUSTERING,
        "Identify the topic or theme of StackExchange posts based on the given paragraphs",
    ),
    ("TwentyNewsgroupsClustering", _K.CLUSTERING, "Identify the topic or theme of the given news articles"),
    ("SprintDuplicateQuestions", _K.PAIR_CLASSIFICATION, "Retrieve duplicate questions from Sprint forum"),
    ("TwitterSemEval2015", _K.PAIR_CLASSIFICATION, "Retrieve tweets that are semantically similar to the given tweet"),
    ("TwitterURLCorpus", _K.PAIR_CLASSIFICATION, "Retrieve tweets that are semantically similar to the given tweet"),
    ("AskUbuntuDupQuestions", _K.RERANKING, "Retrieve duplicate questions from AskUbuntu forum"),
    ("MindSmallReranking", _K.RERANKING, "Retrieve relevant news articles based on user browsing history"),
    ("SciDocsRR", _K.RERANKING, "Given a title of a scientific paper, retrieve the titles of other relevant papers"),
    ("StackOverflowDupQuestions", _K.RERANKING, "Retrieve duplicate questions from StackOverflow forum"),
    ("ArguAna", _K.RETRIEVAL, "Given a claim, find documents that refute the claim"),
    (
        "ClimateFEVER",
        _K.RETRIEVAL,
        "Given a claim about climate change, retrieve documents that support or refute the claim.",
    ),
    (
        "CQADupstackRetrieval",
        _K.RETRIEVAL,
        "Given a question, retrieve detailed question descriptions from Stackexchange that are "
        "duplicates to the given question.",
    ),
    ("DBPedia", _K.RETRIEVAL, "Given a query, retrieve relevant entity descriptions from DBPedia"),
    ("FEVER", _K.RETRIEVAL, "Given a claim, retrieve documents that support or refute the claim"),
    ("FiQA2018", _K.RETRIEVAL, "Given a financial question, retrieve user replies that best answer the question"),
    ("HotpotQA", _K.RETRIEVAL, "Given a multi-hop question, retrieve documents that can help answer the question"),
    ("MSMARCO", _K.RETRIEVAL, "Given a web search query, retrieve relevant passages that answer the query"),
    ("NFCorpus", _K.RETRIEVAL, "Given a question, retrieve relevant documents that best answer the question"),
    ("NQ", _K.RETRIEVAL, "Given a question, retrieve Wikipedia passages that answer the question"),
    (
        "QuoraRetrieval",
        _K.RETRIEVAL,
        "Given a question, retrieve questions that are semantically equivalent to the given question.",
    ),
    (
        "SCIDOCS",
        _K.RETRIEVAL,
        "Given a scientific paper title, retrieve paper abstracts that are cited by the given paper",
    ),
    ("SciFact", _K.RETRIEVAL, "Given a scientific claim, retrieve documents that support or refute the claim"),
    (
        "Touche2020",
        _K.RETRIEVAL,
        "Given a question, retrieve detailed and persuasive arguments that answer the question",
    ),
    ("TRECCOVID", _K.RETRIEVAL, "Given a query on COVID-19, retrieve documents that answer the query"),
    ("SummEval", _K.SUMMARIZATION, "Given a news summary, retrieve other semantically similar summaries"),
]

# "STS*" in Table 16: one instruction for every STS dataset.
STS_INSTRUCTION = "Retrieve semantically similar text."
_STS_DATASETS = [
    "STS",
    "STSBenchmark",
    "STS12",
    "STS13",
    "STS14",
    "STS15",
    "STS16",
    "STS17",
    "STS22",
    "SICK-R",
    "BIOSSES",
]

# Table 8: instructions used for the public retrieval training sets.
_TRAINING: list[tuple[str, str]] = [
    ("ELI5", "Provided a user question, retrieve the highest voted answers on Reddit ELI5 forum"),
    ("HotpotQA-train", "Given a multi-hop question, retrieve documents that can help answer the question"),
    ("FEVER-train", "Given a claim, retrieve documents that support or refute the claim"),
    ("MIRACL", "Given a question, retrieve Wikipedia passages that answer the question"),
    ("MSMARCO-Passage", "Given a web search query, retrieve relevant passages that answer the query"),
    ("MSMARCO-Document", "Given a web search query, retrieve relevant documents that answer the query"),
    ("NQ-train", "Given a question, retrieve Wikipedia passages that answer the question"),
    ("NLI", "Given a premise, retrieve a hypothesis that is entailed by the premise"),
    ("NLI-symmetric", "Retrieve semantically similar text"),
    ("SQuAD", "Retrieve Wikipedia passages that answer the question"),
    ("TriviaQA", "Retrieve Wikipedia passages that answer the question"),
    ("QuoraDuplicates", "Given a question, retrieve questions that are semantically equivalent to the given question"),
    ("QuoraDuplicates-symmetric", "Find questions that have the same meaning as the input question"),
    ("MrTyDi", "Given a question, retrieve Wikipedia passages that answer the question"),
    ("DuReader", "Given a Chinese search query, retrieve web passages that answer the question"),
    ("T2Ranking", "Given a Chinese search query, retrieve web passages that answer the question"),
]


def _build_registry() -> dict[str, Task]:
    tasks = [Task(n, i, k) for n, k, i in _EVALUATION]
    tasks += [Task(n, STS_INSTRUCTION, TaskKind.STS) for n in _STS_DATASETS]
    tasks += [Task(n, i, TaskKind.TRAINING) for n, i in _TRAINING]
    return {t.name.lower(): t for t in tasks}


_REGISTRY: dict[str, Task] = _build_registry()
_ALIASES = {
    "toxicconversationsclassif.": "toxicconversationsclassification",
    "tweetsentimentclassification": "tweetsentimentextractionclassification",
    "stsb": "stsbenchmark",
    "sts-b": "stsbenchmark",
}


def get_task(name: str) -> Task:
    """Look a task up by name, case-insensitively (``"SciFact"``, ``"STS12"``, ``"NLI"``...)."""
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    try:
        return _REGISTRY[key]
    except KeyError:
        raise KeyError(unknown_task_message(name)) from None


def unknown_task_message(name: str, custom: str = "instruction") -> str:
    """Why ``name`` names no task: the closest registered names, where to find them all, the custom way (the
    option ``custom`` that takes a literal instruction where the task was given: ``query_instruction`` in the
    framework embedding classes).

    The names are not all listed: there are dozens, and on one line they buried the fix.
    """
    import difflib

    names = {t.name.lower(): t.name for t in _REGISTRY.values()} | {a: _REGISTRY[t].name for a, t in _ALIASES.items()}
    close = difflib.get_close_matches(name.strip().lower(), list(names), n=3, cutoff=0.6)
    suggestion = f"did you mean {' or '.join(repr(names[c]) for c in dict.fromkeys(close))}? " if close else ""
    return (
        f"unknown task {name!r}; {suggestion}list_tasks() lists the {len(_REGISTRY)} registered tasks, "
        f"or pass {custom}='...' for a custom instruction"
    )


def check_task(name: str | None, custom: str = "instruction") -> None:
    """A ValueError (:func:`unknown_task_message`) where ``name`` is given and names no registered task: what the
    options classes call when built, so that a wrong name fails before a model loads."""
    if name is not None:
        try:
            get_task(name)
        except KeyError:
            raise ValueError(unknown_task_message(name, custom)) from None


def register_task(
    name: str,
    instruction: str,
    kind: TaskKind | str = TaskKind.RETRIEVAL,
    *,
    examples: Iterable[Sequence[str]] | None = None,
) -> Task:
    """Add (or replace) a task so that ``task=name`` works everywhere, e.g. for a domain variant.

    ``examples`` are ``(query, response)`` pairs that every input getting the task's instruction also
    gets, in front of it (Causal2Vec "w/ ICL", bge-en-icl's layout); a call can override them with
    ``examples=`` (``[]`` for none).
    """
    try:
        kind = TaskKind(kind)
    except ValueError:
        raise ValueError(
            f"register_task({name!r}, ...): kind={kind!r} is not a task kind; pass one of "
            f"{', '.join(repr(k.value) for k in TaskKind)}"
        ) from None
    task = Task(name, instruction, kind, check_examples(examples or (), where=f"task {name!r}"))
    key = name.strip().lower()
    before = _REGISTRY.get(key)
    if before is not None and before != task:
        # Replacing is allowed (a variant's own wording of a task), but a built-in task's instruction is what the
        # paper's evaluation and the presets use: say so, once per change, so that a typo'd re-use is seen.
        logger.warning(
            "register_task: task %r is replaced (instruction %r, kind %s; it was %r, %s)",
            before.name,
            task.instruction,
            task.kind.value,
            before.instruction,
            before.kind.value,
        )
    _REGISTRY[key] = task
    return task


def list_tasks() -> list[Task]:
    """Every registered task, sorted by name."""
    return sorted(_REGISTRY.values(), key=lambda t: t.name.lower())


@dataclass(frozen=True)
class InContextPrompt:
    """An instruction with in-context examples: what comes before the Contextual token of a query.

    The decoder reads ``examples`` (each laid out with the variant's ``example_template``, joined by its
    ``example_separator``), then the instruction, then C and the text. Hashable, so the tokenized
    prefix is cached per prompt like a plain instruction. ``task`` is named in errors only.
    """

    instruction: str
    examples: tuple[Example, ...]
    task: str | None = None


Instruction = str | InContextPrompt | None
"""What an input gets before its Contextual token: nothing, an instruction, or examples and an instruction."""


def check_examples(examples: Iterable[Sequence[str]], *, where: str) -> tuple[Example, ...]:
    """``examples`` as a tuple of ``(query, response)`` string pairs, or a ValueError naming the bad one."""
    if isinstance(examples, (str, bytes, dict)) or not isinstance(examples, Iterable):
        raise ValueError(
            f"examples for {where} must be a list of (query, response) pairs, not a {type(examples).__name__}"
        )
    pairs = []
    for i, pair in enumerate(examples):
        if (
            isinstance(pair, (str, bytes))
            or not isinstance(pair, Sequence)
            or len(pair) != 2
            or not all(isinstance(x, str) and x.strip() for x in pair)
        ):
            raise ValueError(
                f"example {i} for {where} must be a (query, response) pair of non-empty strings, got {pair!r:.120}"
            )
        pairs.append((pair[0], pair[1]))
    return tuple(pairs)


EXAMPLE_MAX_WORDS = 64
"""How many words of a drawn example's query or response are kept (bge-en-icl caps examples' length too)."""


def shorten_example(text: str, max_words: int = EXAMPLE_MAX_WORDS) -> str:
    """The first ``max_words`` words of ``text``, whitespace collapsed: examples drawn from a dataset are
    cut here, when drawn, because the prompt never cuts an example (only the text after C)."""
    words = text.split()
    return " ".join(words[:max_words]) + (" ..." if len(words) > max_words else "")


def resolve_instruction(
    *, task: str | None, instruction: str | None, is_query: bool, examples: Iterable[Sequence[str]] | None = None
) -> Instruction:
    """The instruction an input gets, or None; with in-context examples, an :class:`InContextPrompt`.

    An explicit ``instruction`` always wins (an empty string means "no instruction"). A ``task``
    gives its instruction to queries, and to documents too when the task is symmetric. Examples go
    with the instruction: ``examples`` when given (``[]``: none), else the task's registered ones.
    Documents of an asymmetric task get neither (bge-en-icl): passing ``examples`` for them is an error.
    """
    if instruction is not None and task is not None:
        raise ValueError("pass either task= or instruction=, not both")
    t = get_task(task) if task is not None else None
    where = f"task {t.name!r}" if t is not None else "the instruction"
    given = None if examples is None else check_examples(examples, where=where)
    if instruction is not None:
        text = instruction or None
    elif t is None:
        text = None
    else:
        text = t.instruction if (is_query or t.symmetric) else None
    if text is None:
        if given:
            side = (
                f"documents of the {t.kind.value} task {t.name!r}" if t is not None else "inputs without an instruction"
            )
            raise ValueError(
                f"{side} get no in-context examples (only what gets an instruction does): pass "
                "examples= when encoding queries, or give an instruction"
            )
        return None
    chosen = given if given is not None else (t.examples if t is not None and instruction is None else ())
    if not chosen:
        return text
    return InContextPrompt(text, chosen, t.name if t is not None else None)


DEFAULT_QUERY_TASK = "MSMARCO-Passage"
"""The task whose instruction a query gets when neither the caller nor the variant names one: queries need an
instruction (paper, A.3), and MS MARCO's is the most general of the retrieval training instructions (Table 8)."""


class QueryDefaults(Protocol):
    """What a variant's config says about its queries (:class:`~c2v_rag.core.config.Causal2VecConfig` has both)."""

    query_instruction: str | None
    default_task: str | None


def query_prompt(
    config: QueryDefaults, *, task: str | None = None, instruction: str | None = None
) -> tuple[str | None, str | None]:
    """The ``(task, instruction)`` a query is encoded with: the one policy of every entry point.

    The caller's ``instruction`` wins, then the caller's ``task``; with neither, the variant's literal
    ``query_instruction``, then its ``default_task``, then :data:`DEFAULT_QUERY_TASK`. Exactly one of the
    two returned values is set (an ``instruction`` of ``""`` means "no instruction").
    """
    if instruction is not None and task is not None:
        raise ValueError("pass either task= or instruction=, not both")
    if instruction is not None or task is not None:
        return task, instruction
    if config.query_instruction is not None:
        return None, config.query_instruction
    return config.default_task or DEFAULT_QUERY_TASK, None


def query_instruction_text(config: QueryDefaults) -> str:
    """The instruction text a query gets when the caller names none ("" for none), for the places that
    take a plain prompt string: sentence-transformers' ``"query"`` prompt, a model card."""
    task, instruction = query_prompt(config)
    return get_task(task).instruction if task is not None else instruction or ""
