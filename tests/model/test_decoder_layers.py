"""A shallower decoder (``decoder_layers``, c2v_rag.nn.depth): a variant that runs some of its base decoder's layers
embeds as the base model saved with only those layers would, trains, saves and loads as such (adapters, the merged
cache, int8), and refuses layers it cannot run with a message that says why."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tiny_models import with_lora
from transformers import AutoModel, AutoTokenizer

from c2v_rag import Causal2Vec
from c2v_rag.core.config import Causal2VecConfig
from c2v_rag.nn.depth import transformer_layers
from c2v_rag.nn.plain import PlainBackbone
from c2v_rag.training import TrainConfig, train

TEXTS = ["a query about vitamin D", "Proteins fold into structures " * 12, "short"]
KEPT = [0, 2, 3]


@pytest.fixture(scope="module")
def deep_llama(tiny_dirs, tmp_path_factory):
    """A 5-layer tiny llama, and the same model saved with only the layers KEPT: the reference a cut must equal."""
    torch.manual_seed(5)
    tokenizer = AutoTokenizer.from_pretrained(tiny_dirs["llama"])
    config = AutoModel.from_pretrained(tiny_dirs["llama"]).config
    config.num_hidden_layers = 5
    model = AutoModel.from_config(config).eval()
    root = tmp_path_factory.mktemp("deep")
    model.save_pretrained(root / "whole")
    tokenizer.save_pretrained(root / "whole")
    # The reference, built independently of c2v_rag: a model with len(KEPT) layers given those layers' weights.
    config.num_hidden_layers = len(KEPT)
    short = AutoModel.from_config(config).eval()
    state = model.state_dict()
    renamed = {}
    for name, tensor in state.items():
        if name.startswith("layers."):
            index, rest = name[len("layers.") :].split(".", 1)
            if int(index) not in KEPT:
                continue
            name = f"layers.{KEPT.index(int(index))}.{rest}"
        renamed[name] = tensor
    short.load_state_dict(renamed, strict=True)
    short.save_pretrained(root / "short")
    tokenizer.save_pretrained(root / "short")
    return root


def build(decoder, encoder, plain=(), **fields) -> Causal2Vec:
    config = Causal2VecConfig(decoder=str(decoder), encoder=str(encoder), dtype="float32", **fields)
    return Causal2Vec.from_config(config, device="cpu", plain=plain)


@pytest.mark.parametrize("plain", [(), ("decoder",)], ids=["transformers", "plain-torch"])
def test_a_cut_decoder_embeds_as_the_base_saved_with_those_layers(deep_llama, tiny_dirs, plain):
    cut = build(deep_llama / "whole", tiny_dirs["bert"], plain, decoder_layers=KEPT)
    reference = build(deep_llama / "short", tiny_dirs["bert"], plain)
    whole = build(deep_llama / "whole", tiny_dirs["bert"], plain)
    assert isinstance(cut.decoder, PlainBackbone) == bool(plain)
    assert len(transformer_layers(cut.decoder)) == len(KEPT) and len(transformer_layers(whole.decoder)) == 5
    got, expected = cut.encode(TEXTS), reference.encode(TEXTS)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)
    assert not np.allclose(got, whole.encode(TEXTS), atol=1e-3)  # the cut changes the vectors
    if plain:  # training swaps in transformers' modules: cut the same way
        cut.use_transformers_backbones()
        assert not isinstance(cut.decoder, PlainBackbone)
        np.testing.assert_allclose(cut.encode(TEXTS), expected, rtol=0, atol=1e-5)


@pytest.mark.parametrize(
    "fields", [{"attention": "bidirectional"}, {"echo": True, "representation": "mean"}], ids=["bidirectional", "echo"]
)
def test_a_cut_decoder_keeps_the_attention_and_echo_settings(deep_llama, tiny_dirs, fields):
    """Bidirectional attention and echo embeddings act on the layers kept, as on the base saved with only those."""
    cut = build(deep_llama / "whole", tiny_dirs["bert"], decoder_layers=KEPT, **fields)
    reference = build(deep_llama / "short", tiny_dirs["bert"], **fields)
    causal = build(deep_llama / "short", tiny_dirs["bert"], **{**fields, "attention": "causal", "echo": False})
    got = cut.encode(TEXTS)
    np.testing.assert_allclose(got, reference.encode(TEXTS), rtol=0, atol=1e-6)
    assert not np.allclose(got, causal.encode(TEXTS), atol=1e-3)  # the setting changes the vectors


def test_a_variant_cut_and_trained_saves_and_loads_with_its_layers(deep_llama, tiny_dirs, tiny_recipe, tmp_path):
    """The healing run: a whole variant is continued with decoder_layers; its adapter is saved on the layers kept and
    loads onto a base cut the same way, merged or not, through the merged cache twice, and in int8."""
    raw = tiny_recipe(steps=2)
    raw["model"] = {"decoder": str(deep_llama / "whole"), "encoder": str(tiny_dirs["bert"])}
    raw["output"] = {"dir": str(tmp_path / "whole")}
    whole = train(TrainConfig.model_validate(raw)).output_dir
    raw = tiny_recipe(steps=2)
    raw["model"] = {"variant": str(whole), "config": {"decoder_layers": KEPT, "normalize_parts": True}}
    raw["output"] = {"dir": str(tmp_path / "cut")}
    cut_dir = train(TrainConfig.model_validate(raw)).output_dir

    # Each kept layer keeps its own adapter: the whole variant, cut in memory, has the cut variant's weights before
    # training moved them (B and A at the kept layers, renumbered).
    from safetensors.torch import load_file

    def adapter(path):
        return load_file(str(path / "decoder_adapter" / "adapter_model.safetensors"))

    before, after = adapter(whole), adapter(cut_dir)
    assert {k.split(".layers.")[1].split(".")[0] for k in after} == {str(i) for i in range(len(KEPT))}
    for name, tensor in after.items():
        head, tail = name.split(".layers.")
        index, rest = tail.split(".", 1)
        assert tensor.shape == before[f"{head}.layers.{KEPT[int(index)]}.{rest}"].shape
    unmerged = Causal2Vec.from_pretrained(cut_dir, device="cpu", dtype="float32", merge_adapters=False)
    assert unmerged.config.decoder_layers == KEPT and unmerged.config.normalize_parts
    assert len(transformer_layers(unmerged.decoder)) == len(KEPT)
    lora_b = [p for name, p in unmerged.decoder.named_parameters() if "lora_B" in name]
    assert lora_b and any(p.abs().max() > 0 for p in lora_b)  # the adapter trained, on the kept layers
    expected = unmerged.encode(TEXTS)
    merged = Causal2Vec.from_pretrained(cut_dir, device="cpu", dtype="float32")
    np.testing.assert_allclose(merged.encode(TEXTS), expected, rtol=0, atol=1e-5)
    # The adapter saved before the cut does not fit the cut decoder's numbering, nor this one the whole one's.
    before = Causal2Vec.from_pretrained(whole, device="cpu", dtype="float32")
    assert not np.allclose(before.encode(TEXTS)[:, :32], expected[:, :32], atol=1e-3)


def test_the_merged_cache_keeps_a_cut_decoder_apart_and_reads_it_back(deep_llama, tiny_dirs, tmp_path, monkeypatch):
    monkeypatch.setenv("C2V_RAG_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("C2V_RAG_MERGED_CACHE", raising=False)
    model = with_lora(build(deep_llama / "whole", tiny_dirs["bert"], decoder_layers=KEPT))
    path = model.save_pretrained(tmp_path / "variant")
    first = Causal2Vec.from_pretrained(path, device="cpu", dtype="float32")  # merges and stores the cut decoder
    entries = list((tmp_path / "cache" / "merged").iterdir())
    assert len(entries) == 1 and '"num_hidden_layers": 3' in (entries[0] / "config.json").read_text()
    again = Causal2Vec.from_pretrained(path, device="cpu", dtype="float32")  # reads it, cut already
    assert len(transformer_layers(again.decoder)) == len(KEPT)
    np.testing.assert_array_equal(again.encode(TEXTS), first.encode(TEXTS))
    # int8 exports the cut decoder (its plain module swapped for transformers', cut the same way)
    int8 = Causal2Vec.from_pretrained(path, device="cpu", quantize="int8")
    got, exact = int8.encode(TEXTS, normalize_embeddings=True), first.encode(TEXTS, normalize_embeddings=True)
    assert (got * exact).sum(axis=1).min() > 0.99


def test_a_decoder_wrapped_by_peft_is_cut_inside_the_wrapper(deep_llama, tiny_dirs):
    """peft's wrappers forward ``.layers`` to the model they wrap: the cut must replace the wrapped model's list
    (which it runs), not add one to the wrapper. An adapter that changes nothing (B = 0, peft's start) leaves the
    vectors of the cut model equal to the base cut by its config."""
    from peft import LoraConfig, get_peft_model

    model = build(deep_llama / "whole", tiny_dirs["bert"])
    model.use_transformers_backbones()
    model.decoder = get_peft_model(model.decoder, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    model.keep_decoder_layers(KEPT)
    reference = build(deep_llama / "whole", tiny_dirs["bert"], decoder_layers=KEPT)
    np.testing.assert_allclose(model.encode(TEXTS), reference.encode(TEXTS), rtol=0, atol=1e-6)
    names = {
        name.split(".layers.")[1].split(".")[0] for name, _ in model.decoder.named_parameters() if ".layers." in name
    }
    assert names == {str(i) for i in range(len(KEPT))}
    assert "layers" not in model.decoder._modules  # nothing added to the wrapper


def test_layers_a_decoder_cannot_run_are_refused_with_the_reason(deep_llama, tiny_dirs):
    with pytest.raises(ValueError, match="distinct indices from 0 in increasing order"):
        Causal2VecConfig(decoder="x", encoder="y", decoder_layers=[2, 1])
    with pytest.raises(ValueError, match="at least one layer"):
        Causal2VecConfig(decoder="x", encoder="y", decoder_layers=[])
    with pytest.raises(ValueError, match=r"the base decoder does not have: it has 5 \(0 to 4\)"):
        build(deep_llama / "whole", tiny_dirs["bert"], decoder_layers=[0, 5])
    model = build(deep_llama / "whole", tiny_dirs["bert"], decoder_layers=KEPT)
    with pytest.raises(ValueError, match=r"base layers \[1\] that this variant no longer runs"):
        model.keep_decoder_layers([0, 1])
    model.keep_decoder_layers([0, 3])  # dropping more of them works, by their base indices
    reference = build(deep_llama / "whole", tiny_dirs["bert"], decoder_layers=[0, 3])
    np.testing.assert_allclose(model.encode(TEXTS), reference.encode(TEXTS), rtol=0, atol=1e-6)
    assert model.config.decoder_layers == [0, 3]
    with pytest.raises(ValueError, match="'.layers' list"):
        build(tiny_dirs["gpt2"], tiny_dirs["bert"], decoder_layers=[0])
