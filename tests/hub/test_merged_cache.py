"""The cache of merged backbones: a variant's adapters are merged once, later loads read the merged weights and
give the same vectors bit for bit, and an entry is never read once anything it was made from has changed."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file
from tiny_models import with_lora

from c2v_rag import Causal2Vec
from c2v_rag.hub import merged, variants
from c2v_rag.hub.sources import ResolvedSource

TEXTS = ["a query about vitamin D", "Proteins fold into structures " * 20]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("C2V_RAG_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("C2V_RAG_MERGED_CACHE", raising=False)  # tests/conftest.py turns it off for the others
    return tmp_path / "cache" / "merged"


@pytest.fixture
def lora_variant(tiny_model_factory, tmp_path):
    """A saved variant with LoRA adapters on the decoder and the encoder, both changing the vectors."""
    model = with_lora(with_lora(tiny_model_factory("llama")), "encoder")
    return model.save_pretrained(tmp_path / "variant")


def load(path, **kwargs):
    return Causal2Vec.from_pretrained(path, device="cpu", dtype="float32", **kwargs)


def no_merging(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the adapter was merged again instead of read from the cache")

    monkeypatch.setattr(variants, "_attach_adapter", refuse)


def test_a_merged_load_is_cached_and_read_back_bit_for_bit(lora_variant, cache, monkeypatch):
    first = load(lora_variant)  # merges through peft, and stores both backbones
    assert sorted(p.name.split("-")[0] for p in cache.iterdir()) == ["decoder", "encoder"]
    with monkeypatch.context() as patch:
        no_merging(patch)
        again = load(lora_variant)
    np.testing.assert_array_equal(again.encode_queries(TEXTS), first.encode_queries(TEXTS))
    np.testing.assert_array_equal(again.encode_documents(TEXTS), first.encode_documents(TEXTS))
    weights = again.state_dict()
    for name, tensor in first.state_dict().items():
        if name.startswith("encoder.pooler."):  # BERT's pooler, which the plain forward (read here) does not run
            assert name not in weights
            continue
        assert torch.equal(weights[name], tensor), name
    # What the model records of its variant does not depend on where its weights were read from.
    assert again.weights_digest == first.weights_digest
    assert again.adapter_sources == first.adapter_sources
    assert again.config.decoder == first.config.decoder and again.config.encoder == first.config.encoder
    # The adapters are in the cached weights: applied unmerged they give the same vectors, to float rounding.
    unmerged = load(lora_variant, merge_adapters=False)
    np.testing.assert_allclose(unmerged.encode_queries(TEXTS), first.encode_queries(TEXTS), atol=1e-5)


def test_a_bf16_load_merges_the_encoder_in_float32_then_runs_it_in_bf16(lora_variant, cache):
    """The encoder's adapter merges into float32 weights, which the cache keeps; a bf16 load then runs the encoder
    in bf16 (the weights are the float32 merge rounded once) and its states reach the projector in float32."""
    fp32 = load(lora_variant)
    bf16 = Causal2Vec.from_pretrained(lora_variant, device="cpu", dtype="bfloat16")
    assert {p.dtype for p in bf16.decoder.parameters()} == {torch.bfloat16}
    assert {p.dtype for p in bf16.encoder.parameters()} == {torch.bfloat16}
    assert {p.dtype for p in bf16.projector.parameters()} == {torch.float32}
    merged_in_fp32 = dict(fp32.encoder.named_parameters())
    for name, tensor in bf16.encoder.named_parameters():
        assert torch.equal(tensor, merged_in_fp32[name].to(torch.bfloat16)), name
    for entry in cache.glob("encoder-*"):  # the bf16 load's entry (another key than float32's) holds float32
        assert {t.dtype for t in load_file(next(entry.glob("*.safetensors"))).values()} == {torch.float32}
    assert len(list(cache.glob("encoder-*"))) == 2
    batch = bf16.collate(*bf16.prepare(TEXTS, None))
    contextual, sentence = bf16.encoder_outputs(batch.encoder_input_ids, batch.encoder_attention_mask)
    assert contextual.dtype == sentence.dtype == torch.float32
    # Read back from the cache, the same weights again; the vectors stay within bf16 rounding of float32's.
    again = Causal2Vec.from_pretrained(lora_variant, device="cpu", dtype="bfloat16")
    np.testing.assert_array_equal(again.encode_documents(TEXTS), bf16.encode_documents(TEXTS))
    unit = lambda v: v / np.linalg.norm(v, axis=1, keepdims=True)  # noqa: E731
    cosines = (unit(bf16.encode_documents(TEXTS)) * unit(fp32.encode_documents(TEXTS))).sum(1)
    assert cosines.min() > 0.99, cosines
    # Loaded to train (adapters kept apart), the encoder stays in float32, as training holds it.
    unmerged = Causal2Vec.from_pretrained(lora_variant, device="cpu", dtype="bfloat16", merge_adapters=False)
    assert {p.dtype for n, p in unmerged.encoder.named_parameters() if "lora_" not in n} == {torch.float32}


def test_an_unmerged_load_neither_reads_nor_writes_the_cache(lora_variant, cache):
    load(lora_variant, merge_adapters=False)
    assert not cache.exists() or not any(cache.iterdir())


def test_the_cache_can_be_turned_off(lora_variant, cache, monkeypatch):
    monkeypatch.setenv("C2V_RAG_MERGED_CACHE", "0")
    first = load(lora_variant)
    assert not cache.exists()
    load(lora_variant)  # merged again: nothing was kept
    assert not cache.exists()
    monkeypatch.delenv("C2V_RAG_MERGED_CACHE")
    np.testing.assert_array_equal(load(lora_variant).encode_queries(TEXTS), first.encode_queries(TEXTS))


@pytest.mark.parametrize("change", ["adapter_weights", "adapter_config"])
def test_a_changed_adapter_is_merged_again(lora_variant, cache, change):
    before = load(lora_variant).encode_queries(TEXTS)
    decoder_adapter = lora_variant / "decoder_adapter"
    if change == "adapter_weights":
        from safetensors.torch import load_file, save_file

        state = load_file(decoder_adapter / "adapter_model.safetensors")
        save_file(
            {k: v * 2 if "lora_B" in k else v for k, v in state.items()}, decoder_adapter / "adapter_model.safetensors"
        )
    else:
        config = json.loads((decoder_adapter / "adapter_config.json").read_text())
        config["lora_alpha"] = 16  # the scaling changes; the weights file does not
        (decoder_adapter / "adapter_config.json").write_text(json.dumps(config))
    after = load(lora_variant).encode_queries(TEXTS)
    assert np.abs(after - before).max() > 1e-3  # the change was read, not the old entry
    # The new entry is the one read now: identical to the load that made it.
    assert len([p for p in cache.iterdir() if p.name.startswith("decoder-")]) == 2
    np.testing.assert_array_equal(load(lora_variant).encode_queries(TEXTS), after)


def test_the_key_follows_the_base_model_the_dtype_and_the_device(tiny_dirs, lora_variant, cache, tmp_path):
    base = ResolvedSource(str(tiny_dirs["llama"]))
    adapter = lora_variant / "decoder_adapter"
    key = merged.merged_key("abc", "decoder", adapter, base, torch.float32, torch.device("cpu"))
    assert key == merged.merged_key("abc", "decoder", adapter, base, torch.float32, torch.device("cpu"))
    others = [
        merged.merged_key("abd", "decoder", adapter, base, torch.float32, torch.device("cpu")),
        merged.merged_key("abc", "encoder", adapter, base, torch.float32, torch.device("cpu")),
        merged.merged_key("abc", "decoder", adapter, base, torch.bfloat16, torch.device("cpu")),
        merged.merged_key("abc", "decoder", adapter, base, torch.float32, torch.device("cuda")),
    ]
    assert key not in others and len(set(others)) == len(others)
    # The base's contents name it, not its path: a copy elsewhere (a cache restored to another folder, a package in
    # a new environment) finds the entry, and other weights at the same path do not.
    copy = tmp_path / "copied-base"
    shutil.copytree(tiny_dirs["llama"], copy)
    moved = ResolvedSource(str(copy))
    assert merged.merged_key("abc", "decoder", adapter, moved, torch.float32, torch.device("cpu")) == key
    weights = next(copy.glob("*.safetensors"))
    tensors = load_file(weights)
    name = next(iter(tensors))
    tensors[name] = tensors[name] + 1  # the base replaced with other weights
    save_file(tensors, weights)
    assert (
        merged.merged_key("abc", "decoder", adapter, ResolvedSource(str(copy)), torch.float32, torch.device("cpu"))
        != key
    )
    # A hub id's files are not known before it loads, and a variant without weights has no digest: not cached.
    remote = ResolvedSource("owner/model", is_local=False)
    assert merged.merged_key("abc", "decoder", adapter, remote, torch.float32, torch.device("cpu")) is None
    assert merged.merged_key(None, "decoder", adapter, base, torch.float32, torch.device("cpu")) is None


def test_the_least_recently_used_entries_go_beyond_the_budget(lora_variant, cache, monkeypatch):
    load(lora_variant)
    decoder, encoder = sorted(cache.iterdir())
    os.utime(decoder, (1, 1))  # the decoder's entry was used longest ago
    size = {e: sum(f.stat().st_size for f in e.iterdir()) for e in (decoder, encoder)}
    module = torch.nn.Module()
    module.save_pretrained = lambda path, **kwargs: (path / "config.json").write_text("{}")  # a stand-in backbone
    # Room for the encoder's entry and the new one: the decoder's goes.
    monkeypatch.setattr(merged, "MAX_CACHE_BYTES", size[encoder] + 2)
    merged.store_merged(module, "decoder-newer")
    assert sorted(p.name for p in cache.iterdir()) == sorted([encoder.name, "decoder-newer"])
    # Room for none: every older entry goes, never the one just written.
    monkeypatch.setattr(merged, "MAX_CACHE_BYTES", 0)
    merged.store_merged(module, "decoder-newest")
    assert [p.name for p in cache.iterdir()] == ["decoder-newest"]


def test_a_cache_that_cannot_be_written_is_skipped(lora_variant, tmp_path, monkeypatch):
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    monkeypatch.setenv("C2V_RAG_CACHE", str(blocked))  # merged/ cannot be made under a file
    monkeypatch.delenv("C2V_RAG_MERGED_CACHE", raising=False)
    first = load(lora_variant)
    np.testing.assert_array_equal(load(lora_variant).encode_queries(TEXTS), first.encode_queries(TEXTS))


def test_writing_an_entry_says_so_in_one_line_without_progress_bars(lora_variant, cache, capfd):
    """The first run wrote hundreds of megabytes into the cache under three "Writing model shards" bars and
    never said what they were: now one line each names what is cached, where, and its size."""
    load(lora_variant)
    err = capfd.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("c2v_rag: ")]
    assert len(lines) == 2, err  # the decoder and the encoder, each merged once
    assert all(str(cache) in line and " MB; later runs read it)" in line for line in lines), lines
    assert "Writing model shards" not in err
    load(lora_variant)  # read back: nothing to announce
    assert "c2v_rag: " not in capfd.readouterr().err
