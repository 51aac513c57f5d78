"""In-context examples (Causal2Vec "w/ ICL", bge-en-icl's layout): where they sit, what gets them, what
truncation and batching do with them, and the /v1/embeddings extension, checked on tiny real models
against independent tokenization and encodes."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from decoder_probe import captured_inputs

from c2v_rag.core.instructions import InContextPrompt, get_task, register_task, resolve_instruction
from c2v_rag.encode.loop import prepare_texts

INSTRUCTION = "Given a scientific claim, retrieve documents that support or refute the claim"
TEXT = "Vitamin D deficiency is linked to bone loss."
EXAMPLES = [
    ("cats purr when happy", "Purring signals a content cat."),
    ("the market fell", "Stocks dropped after the announcement."),
]


def _head_and_c(model, texts, instruction):
    """The ids before C, the decoder's input row at C, and C itself, as the decoder receives them."""
    seen, batch, contextual = captured_inputs(model, texts, instruction)
    c_pos = int(batch.context_positions[0])
    return batch, c_pos, seen["embeds"][0, c_pos], contextual[0, 0]


@pytest.mark.parametrize("family", ["qwen2", "llama"])
def test_examples_sit_before_the_instruction_and_c_right_before_the_text(tiny_model_factory, family):
    model = tiny_model_factory(family)
    tok, fmt = model.tokenizer, model.config.prompt_format
    prompt = resolve_instruction(task="SciFact", instruction=None, is_query=True, examples=EXAMPLES)
    assert isinstance(prompt, InContextPrompt)

    # Independent expectation, written out as bge-en-icl's README does: blocks joined by a blank line.
    blocks = "\n\n".join(f"<instruct>{INSTRUCTION}\n<query>{q}\n<response>{r}" for q, r in EXAMPLES) + "\n\n"
    bos = [tok.bos_token_id] if family == "llama" else []
    expected_head = (
        bos
        + tok(fmt.prefix + blocks, add_special_tokens=False)["input_ids"]
        + tok(INSTRUCTION + "\n", add_special_tokens=False)["input_ids"]
    )

    batch, c_pos, c_row, contextual = _head_and_c(model, [TEXT], prompt)
    assert batch.input_ids[0, :c_pos].tolist() == expected_head
    torch.testing.assert_close(c_row, contextual, rtol=0, atol=0)  # C is written right after the instruction
    tail = batch.input_ids[0, c_pos + 1 : int(batch.last_positions[0]) + 1].tolist()
    assert tok.decode(tail) == TEXT + fmt.suffix + ("" if fmt.suffix.endswith(tok.eos_token) else tok.eos_token)
    if fmt.prefix:  # the chat format wraps the whole user turn, examples included
        assert tok.decode(expected_head).startswith(fmt.prefix)

    # C encodes the text alone: the examples never reach the encoder.
    _, _, _, plain_c = _head_and_c(model, [TEXT], INSTRUCTION)
    torch.testing.assert_close(contextual, plain_c, rtol=0, atol=0)


def test_example_template_is_configuration(tiny_model_factory):
    model = tiny_model_factory("gpt2", example_template="Q: {query} A: {response}", example_separator=" | ")
    prompt = InContextPrompt("Find it", (("a b", "c d"),))
    assert model.prompt_builder.example_text(prompt) == "Q: a b A: c d | "
    with pytest.raises(ValueError, match="example_template"):
        tiny_model_factory("gpt2", example_template="no placeholders")


def test_examples_change_the_query_and_empty_examples_change_nothing(tiny_model_factory):
    model = tiny_model_factory("qwen2")
    texts = [TEXT, "Proteins fold into structures."]
    plain = model.encode_queries(texts, task="SciFact")
    np.testing.assert_array_equal(model.encode_queries(texts, task="SciFact", examples=[]), plain)
    with_examples = model.encode_queries(texts, task="SciFact", examples=EXAMPLES)
    assert not np.allclose(with_examples, plain, atol=1e-4)
    # Only the decoder parts move: the encoder's own part (mean-pooled MiniLM) reads the text alone.
    enc = model.config.parts.get("encoder")
    if enc is not None:
        np.testing.assert_allclose(with_examples[:, enc], plain[:, enc], atol=1e-6)
    # A batch of one and a batch of two agree: examples ride in each input's own tokens.
    np.testing.assert_allclose(
        model.encode_queries(texts[1:], task="SciFact", examples=EXAMPLES), with_examples[1:], atol=1e-5
    )


def test_registered_examples_apply_where_the_instruction_does(tiny_model_factory):
    model = tiny_model_factory("llama")
    register_task("IclRetrievalTest", "Find the evidence", "retrieval", examples=EXAMPLES)
    register_task("IclStsTest", "Retrieve semantically similar text.", "sts", examples=EXAMPLES[:1])
    assert get_task("iclretrievaltest").examples == tuple(EXAMPLES)
    texts = [TEXT, "Cats and dogs are popular pets."]

    # Queries: the registered examples, the same as passing them; examples=[] turns them off.
    np.testing.assert_array_equal(
        model.encode_queries(texts, task="IclRetrievalTest"),
        model.encode_queries(texts, instruction="Find the evidence", examples=EXAMPLES),
    )
    np.testing.assert_array_equal(
        model.encode_queries(texts, task="IclRetrievalTest", examples=[]),
        model.encode_queries(texts, instruction="Find the evidence"),
    )
    # Documents of a retrieval task: neither instruction nor examples, and asking for examples is an error.
    np.testing.assert_array_equal(model.encode_documents(texts, task="IclRetrievalTest"), model.encode_documents(texts))
    with pytest.raises(ValueError, match="IclRetrievalTest.*encoding queries"):
        model.encode_documents(texts, task="IclRetrievalTest", examples=EXAMPLES)
    # A symmetric task: every input is a query, so documents get the examples too.
    np.testing.assert_array_equal(
        model.encode_documents(texts, task="IclStsTest"),
        model.encode(texts, instruction="Retrieve semantically similar text.", examples=EXAMPLES[:1]),
    )

    with pytest.raises(ValueError, match=r"example 0 for task 'Bad'.*pair"):
        register_task("Bad", "x", examples=[("only a query",)])
    with pytest.raises(ValueError, match="example 1 for task 'SciFact'"):
        model.encode_queries(texts, task="SciFact", examples=[("a", "b"), ("c", "")])


def test_max_length_cuts_the_text_never_the_examples(tiny_model_factory):
    model = tiny_model_factory("qwen2", max_length=200)
    prompt = InContextPrompt("Find it", tuple(EXAMPLES), task="SciFact")
    long_text = " ".join(["bone loss and vitamin D"] * 40)
    fixed = len(model.prompt_builder.example_ids(prompt)) + len(model.prompt_builder.instruction_ids(prompt))
    (piece,) = model.prepare([long_text], prompt)[0]
    assert piece.truncated and piece.length(1) == 200
    prompts = model.prompt_builder
    assert piece.head == prompts._prefix + prompts.example_ids(prompt) + prompts.instruction_ids(prompt)
    assert len(piece.head) == len(model.prompt_builder._prefix) + fixed
    # The text kept is the start of the text, as many tokens as the budget leaves.
    kept = model.tokenizer(long_text, add_special_tokens=False)["input_ids"][: model.prompt_builder.text_budget(prompt)]
    assert piece.tail[: len(kept)] == kept

    # Examples that leave no room for text: an error naming the task and the fixes.
    model.max_seq_length = fixed
    with pytest.raises(ValueError, match=r"in-context example\(s\) of task 'SciFact'.*fewer or shorter examples"):
        model.encode_queries([TEXT], task="SciFact", examples=EXAMPLES)


def test_token_budget_batching_counts_the_examples(tiny_model_factory):
    model = tiny_model_factory("llama")
    prompt = InContextPrompt(INSTRUCTION, tuple(EXAMPLES))
    texts = [TEXT, "Cats.", "Proteins fold into three-dimensional structures."]
    with_ex = prepare_texts(model, texts, prompt)
    plain = prepare_texts(model, texts, INSTRUCTION)
    n_examples = len(model.prompt_builder.example_ids(prompt))
    assert n_examples > 20
    assert [a - b for a, b in zip(with_ex.lengths, plain.lengths)] == [n_examples] * 3
    # The lengths batching plans with are the rows the decoder gets (counted independently, from the mask).
    batch = model.collate(with_ex.pieces, with_ex.encoder_ids)
    assert batch.attention_mask.sum(1).tolist() == with_ex.lengths
    # And a budget that fits one prompted input per batch gives the same vectors as one big batch.
    one_each = model.encode_queries(
        texts, instruction=INSTRUCTION, examples=EXAMPLES, max_tokens_per_batch=max(with_ex.lengths)
    )
    np.testing.assert_allclose(
        one_each, model.encode_queries(texts, instruction=INSTRUCTION, examples=EXAMPLES), atol=1e-5
    )


def test_embeddings_endpoint_takes_examples(tiny_model_factory):
    for module in ("fastapi", "uvicorn", "httpx", "openai"):
        pytest.importorskip(module)
    import httpx
    import openai

    from c2v_rag.serving import ServerConfig, ServerThread, create_app

    model = tiny_model_factory("llama", max_length=256)
    config = ServerConfig(model_name="tiny", api_key="k" * 20)
    texts = [TEXT, "Cats and dogs are popular pets."]
    with ServerThread(create_app(model, config), config) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="k" * 20)

        def embed(**extra) -> np.ndarray:
            return np.array(
                [d.embedding for d in client.embeddings.create(input=texts, model="tiny", extra_body=extra).data]
            )

        np.testing.assert_allclose(
            embed(input_type="query", task="SciFact", examples=[list(e) for e in EXAMPLES]),
            model.encode_queries(texts, task="SciFact", examples=EXAMPLES, normalize_embeddings=True),
            atol=1e-5,
        )
        # Documents of a retrieval task get none: a 400 naming the field.
        response = httpx.post(
            server.url + "/v1/embeddings",
            headers={"Authorization": "Bearer " + "k" * 20},
            json={"input": texts, "input_type": "document", "task": "SciFact", "examples": EXAMPLES},
        )
        assert response.status_code == 400 and response.json()["error"]["param"] == "examples"
        # Too many examples for max_length: a 400 naming the task.
        response = httpx.post(
            server.url + "/v1/embeddings",
            headers={"Authorization": "Bearer " + "k" * 20},
            json={"input": texts, "input_type": "query", "task": "SciFact", "examples": EXAMPLES * 3},
        )
        assert response.status_code == 400 and "task 'SciFact'" in response.json()["error"]["message"]


def test_tasks_command_lists_registered_examples(capsys):
    from c2v_rag.cli import main

    register_task("IclCliTest", "Find the evidence", examples=[("a claim", "its evidence")])
    assert main(["tasks"]) == 0
    out = capsys.readouterr().out
    line = out.splitlines()[[i for i, l in enumerate(out.splitlines()) if l.startswith("IclCliTest")][0] + 1]  # noqa: E741
    assert "'a claim' -> 'its evidence'" in line


def _tiny_scifact(root) -> int:
    from tiny_corpus import CORPUS, write_scifact

    docs = {f"d{i}": " ".join(CORPUS[i % 7 : i % 7 + 2]) for i in range(12)}
    write_scifact(root, docs, {f"q{i}": CORPUS[i % 7][:30] for i in range(10)}, {f"q{i}": f"d{i}" for i in range(10)})
    return len(docs)


def test_eval_scores_several_example_counts_and_encodes_the_corpus_once(tiny_model_factory, tmp_path):
    import json

    from c2v_rag import Causal2Vec
    from c2v_rag.cli import main
    from c2v_rag.evaluation import run_suite
    from c2v_rag.evaluation.datasets import scifact_dev
    from c2v_rag.evaluation.evaluators import evaluate
    from c2v_rag.evaluation.suites import SharedDocuments

    n_docs = _tiny_scifact(tmp_path / "data")
    variant = tmp_path / "variant"
    tiny_model_factory("llama", default_task="SciFact").save_pretrained(variant)
    model = Causal2Vec.from_pretrained(variant, device="cpu", dtype="float32")
    data = scifact_dev(tmp_path / "data")
    expected = {k: evaluate(model, data, examples=k) for k in (0, 1)}

    class CountingDocuments:  # the real model, counting the documents it is asked to encode
        def __init__(self, inner):
            self.inner, self.documents = inner, 0

        def encode_documents(self, texts, **kwargs):
            self.documents += len(texts)
            return self.inner.encode_documents(texts, **kwargs)

        def __getattr__(self, name):
            return getattr(self.inner, name)

    counting = CountingDocuments(model)
    shared = SharedDocuments(counting)
    for k in (0, 1):
        got = run_suite(shared, {"scifact-dev": data}, examples=k)["scifact-dev"]
        assert got["ndcg@10"] == pytest.approx(expected[k]["ndcg@10"])
        assert got["recall@100"] == pytest.approx(expected[k]["recall@100"])
    assert counting.documents == n_docs  # the second count reused the corpus vectors

    out = tmp_path / "rows.json"
    assert (
        main(
            [
                "eval",
                str(variant),
                "--data",
                str(tmp_path / "data"),
                "--sets",
                "scifact-dev",
                "--examples",
                "0",
                "1",
                "--dtype",
                "float32",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    rows = json.loads(out.read_text())
    assert list(rows) == [str(variant), f"{variant} (1 in-context examples)"]
    for k, row in zip((0, 1), rows.values()):
        assert row["scifact-dev"]["ndcg@10"] == pytest.approx(expected[k]["ndcg@10"])


def test_the_example_token_cache_stays_bounded_and_exact(tiny_model_factory):
    # Training draws a new example set for nearly every query; the prompt builder must not keep them all, and an
    # evicted set tokenizes again to the same ids (compared with a direct tokenization).
    from c2v_rag.encode.prompting import EXAMPLE_CACHE_SIZE

    prompts = tiny_model_factory("llama").prompt_builder
    sets = [InContextPrompt(INSTRUCTION, ((f"claim {i}", f"abstract {i}"),)) for i in range(EXAMPLE_CACHE_SIZE + 50)]
    first = prompts.example_ids(sets[0])
    for prompt in sets[1:]:
        prompts.example_ids(prompt)
    assert len(prompts._examples_cache) == EXAMPLE_CACHE_SIZE
    assert sets[0] not in prompts._examples_cache
    direct = prompts.tokenizer(prompts.example_text(sets[0]), add_special_tokens=False)["input_ids"]
    assert prompts.example_ids(sets[0]) == first == direct
    assert prompts.instruction_ids(sets[0]) == prompts.instruction_ids(INSTRUCTION)
    assert len(prompts._instruction_cache) == 1


def test_register_task_names_the_kinds_and_says_when_it_replaces_a_task(caplog):
    """A bad kind said only "'bogus' is not a valid TaskKind"; a built-in task was replaced without a word."""
    import logging

    from c2v_rag import get_task

    with pytest.raises(ValueError, match=r"kind='bogus' is not a task kind; pass one of 'retrieval', 'reranking'"):
        register_task("KindTest", "x", "bogus")
    register_task("ReplaceTest", "Find the evidence")
    with caplog.at_level(logging.WARNING, logger="c2v_rag.core.instructions"):
        register_task("ReplaceTest", "Find the evidence")  # the same again (a notebook cell re-run): no word
        assert not caplog.records
        register_task("replacetest", "Find the claim", "sts")
    (record,) = caplog.records
    assert "task 'ReplaceTest' is replaced (instruction 'Find the claim', kind sts" in record.getMessage()
    assert get_task("ReplaceTest").instruction == "Find the claim"
