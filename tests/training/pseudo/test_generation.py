"""The shared prompt, the parsing of a generator's reply, and the registry of generators."""

from __future__ import annotations

import pytest

from c2v_rag.core.errors import C2VError
from c2v_rag.training.pseudo.generation import (
    GENERATORS,
    PROMPT,
    GeneratedQuery,
    GeneratorUnavailableError,
    QueryGenerator,
    build_generator,
    chat_messages,
    clean_question,
    register,
)
from c2v_rag.training.pseudo.local_lm import LocalLMGenerator
from c2v_rag.training.pseudo.openai_chat import OpenAIChatGenerator


@pytest.mark.parametrize(
    ("raw", "question"),
    [
        ("What causes spring tides?", "What causes spring tides?"),
        ("  What causes spring tides?  \n", "What causes spring tides?"),
        ("Question: What causes spring tides?", "What causes spring tides?"),
        ("Q: What causes spring tides? A: The Sun and the Moon align.", "What causes spring tides?"),
        ("q1) what causes spring tides?", "what causes spring tides?"),
        ("Search query - what causes spring tides?", "what causes spring tides?"),
        ('"What causes spring tides?"', "What causes spring tides?"),
        ("\u201cWhat causes spring tides?\u201d", "What causes spring tides?"),
        ("**Question:** What causes spring tides?", "What causes spring tides?"),
        ("1. What causes spring tides?", "What causes spring tides?"),
        ("- What causes spring tides?", "What causes spring tides?"),
        ("Sure! Here is one: What causes spring tides?", "What causes spring tides?"),
        ("Sure. What causes spring tides?", "What causes spring tides?"),
        # The lead-in on a line of its own, and the model answering its own question after it.
        (
            "What a delightful task! Here's a possible answer:\n\nWhat causes spring tides?\n\nThis is a good one",
            "What causes spring tides?",
        ),
        ("What causes spring tides? What causes neap tides?", "What causes spring tides?"),
        # An abbreviation inside the question is not a sentence end.
        ("What did Dr. Smith find about vitamin D?", "What did Dr. Smith find about vitamin D?"),
        ("What   causes\tspring tides?", "What causes spring tides?"),
    ],
)
def test_clean_question_keeps_the_first_question(raw, question):
    assert clean_question(raw) == question


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "   \n\t ",
        "???",
        '"?"',
        "Question: ?",
        # No question mark: a copy of the passage or chatter, not a question.
        "Spring tides happen when the Sun and the Moon align.",
        "What a simple yet profound concept!",
        "Here is a question:",
    ],
)
def test_clean_question_gives_none_without_a_question(raw):
    assert clean_question(raw) is None


def test_the_prompt_holds_the_passage_and_asks_for_the_question_only():
    passage = "Spring tides {happen} when the Sun and the Moon align."  # braces in a passage stay as they are
    (message,) = chat_messages(passage)
    assert message["role"] == "user" and passage in message["content"]
    assert message["content"] == PROMPT.format(passage=passage)
    assert "ONE" in PROMPT and "question only" in PROMPT


def test_generated_query_is_a_frozen_value():
    query = GeneratedQuery("What causes spring tides?", -0.5)
    assert query == GeneratedQuery("What causes spring tides?", -0.5)
    with pytest.raises(AttributeError):
        query.text = "other"  # type: ignore[misc]


def test_the_registry_lists_both_kinds():
    assert GENERATORS == {"local": LocalLMGenerator, "openai": OpenAIChatGenerator}
    assert all(issubclass(cls, QueryGenerator) for cls in GENERATORS.values())


def test_an_unknown_kind_is_refused_with_the_kinds():
    with pytest.raises(ValueError, match=r"unknown query generator kind 'vllm'; the kinds are: 'local', 'openai'"):
        build_generator("vllm")


def test_an_unknown_option_is_refused_with_the_kind():
    with pytest.raises(TypeError, match=r"query generator 'local': .*unexpected keyword argument 'url'"):
        build_generator("local", url="http://127.0.0.1:8000/v1")


def test_build_generator_passes_the_options():
    generator = build_generator("local", batch_size=4, max_new_tokens=8)
    assert isinstance(generator, LocalLMGenerator)
    assert (generator.batch_size, generator.max_new_tokens) == (4, 8)
    generator = build_generator("openai", url="http://127.0.0.1:9", model="m")
    assert isinstance(generator, OpenAIChatGenerator) and generator.url == "http://127.0.0.1:9/v1"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (dict(batch_size=0), "batch_size must be a positive integer"),
        (dict(max_passage_tokens=-1), "max_passage_tokens must be a positive integer"),
        (dict(temperature=-0.1), "temperature must be 0"),
    ],
)
def test_bad_local_options_are_refused_by_name(options, message):
    with pytest.raises(ValueError, match=message):
        build_generator("local", **options)


def test_two_generators_of_one_kind_are_refused():
    class Other(LocalLMGenerator):
        name = "local"

    with pytest.raises(TypeError, match="LocalLMGenerator and Other are both query generator kind 'local'"):
        register(Other)
    assert GENERATORS["local"] is LocalLMGenerator


def test_setup_errors_are_c2v_errors():
    # The command line reports a C2VError as bad input or setup (exit 2), with its message.
    assert issubclass(GeneratorUnavailableError, C2VError)
