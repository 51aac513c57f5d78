"""SmolLM2-135M-Instruct (packaged GGUF) + all-MiniLM-L6-v2 (packaged safetensors), offline."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from c2v_rag import Causal2Vec
from c2v_rag.hub.sources import PACKAGED_SOURCES, resolve_reference

pytestmark = pytest.mark.real_weights

QUERY = "Vitamin D deficiency increases the risk of bone fractures."
DOCS = [
    "Low serum vitamin D was associated with higher fracture rates in elderly patients.",
    "The central bank raised interest rates by a quarter point.",
    "",
]


@pytest.fixture(scope="module")
def real_model():
    return Causal2Vec.from_components("smollm2-135m-instruct", "all-minilm-l6-v2", device="cpu", dtype="float32")


def test_gguf_is_dequantized_once_into_a_safetensors_cache():
    location = resolve_reference("smollm2-135m-instruct").location
    assert list(__import__("pathlib").Path(location).glob("*.safetensors"))
    config = json.loads((__import__("pathlib").Path(location) / "config.json").read_text())
    assert "quantization_config" not in config
    assert resolve_reference("smollm2-135m-instruct").location == location  # cached, not converted again
    assert resolve_reference("all-minilm-l6-v2").location.endswith("model")
    assert PACKAGED_SOURCES["all-minilm-l6-v2"].hub_id == "sentence-transformers/all-MiniLM-L6-v2"


def test_a_conversion_parses_the_gguf_header_once(monkeypatch):
    # transformers reads the header for the tokenizer, the config and the weights, each through gguf.GGUFReader,
    # and the announcement reads it for the size: 3.4 s each for SmolLM2's vocabulary; inside, one parse serves.
    import gguf
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    from c2v_rag.hub import sources

    parsed = []

    class CountingReader(gguf.GGUFReader):
        def __init__(self, path, mode="r"):
            parsed.append(path)
            super().__init__(path, mode)

    monkeypatch.setattr(gguf, "GGUFReader", CountingReader)
    packaged = PACKAGED_SOURCES["smollm2-135m-instruct"]
    assert packaged.gguf_file is not None
    path = packaged.package_dir() / packaged.gguf_file
    with sources._one_gguf_parse():
        size = sources._gguf_float32_bytes(path)
        config = load_gguf_checkpoint(str(path))["config"]
        again = load_gguf_checkpoint(path)["config"]
    assert len(parsed) == 1 and size == 4 * 134_515_008 and config == again
    assert gguf.GGUFReader is CountingReader  # the library's own reader again after the block
    load_gguf_checkpoint(str(path))
    assert len(parsed) == 2


def test_chatml_layout_on_smollm2(real_model):
    assert real_model.config.prompt_format.name == "chatml"
    assert real_model.embedding_dim == 2 * 576
    pieces, enc = real_model.prepare([DOCS[0]], "Given a scientific claim, retrieve documents")
    tok = real_model.tokenizer
    assert tok.decode(pieces[0].head) == "<|im_start|>user\nGiven a scientific claim, retrieve documents\n"
    assert tok.decode(pieces[0].tail) == DOCS[0] + "<|im_end|>"
    assert enc[0][0] == real_model.encoder_tokenizer.cls_token_id
    assert real_model.encoder_max_length == 256


def test_encoder_pooling_matches_minilm_mean_pooling(real_model):
    """h is all-MiniLM-L6-v2's own sentence embedding (mean pooling), computed independently."""
    from transformers import AutoModel, AutoTokenizer

    path = resolve_reference("all-minilm-l6-v2").location
    tok, bert = AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval()
    enc = tok(DOCS[:2], padding=True, return_tensors="pt")
    with torch.no_grad():
        states = bert(**enc).last_hidden_state
        ref = (states * enc["attention_mask"][..., None]).sum(1) / enc["attention_mask"].sum(1, keepdim=True)
        batch = real_model.collate(*real_model.prepare(DOCS[:2], None))
        ours = real_model.encoder(
            input_ids=batch.encoder_input_ids, attention_mask=batch.encoder_attention_mask
        ).last_hidden_state
        ours = (ours * batch.encoder_attention_mask[..., None]).sum(1) / batch.encoder_attention_mask.sum(
            1, keepdim=True
        )
    torch.testing.assert_close(ours, ref, atol=1e-5, rtol=1e-4)
    # and MiniLM alone ranks the relevant document first
    q = torch.nn.functional.normalize(ref, dim=-1)
    assert float(q[0] @ q[1]) < 0.5


def test_batched_equals_single_on_real_weights(real_model):
    texts = [QUERY] + DOCS + ["word " * n for n in (1, 50, 300)]
    batched = real_model.encode(texts, instruction="Retrieve semantically similar text.")
    single = np.stack([real_model.encode(t, instruction="Retrieve semantically similar text.") for t in texts])
    # SmolLM2's outlier dimensions reach ~45, and MKL's GEMMs round differently for different row
    # counts (even a bare x @ W does), so raw entries move by ~1e-6 relative. On the unit vectors
    # that retrieval compares, the difference stays far below 1e-5.
    unit = lambda v: v / np.linalg.norm(v, axis=1, keepdims=True)
    assert np.abs(unit(batched) - unit(single)).max() <= 1e-5
    assert np.abs(batched - single).max() <= 1e-5 * np.abs(single).max(axis=1).max()


def test_plain_decoder_equals_hugging_face_on_real_weights():
    model = Causal2Vec.from_components(
        "smollm2-135m-instruct",
        None,
        num_contextual_tokens=0,
        representation="last_token",
        device="cpu",
        dtype="float32",
    )
    got = model.encode(QUERY, instruction="Retrieve semantically similar text.")
    prompt = "<|im_start|>user\nRetrieve semantically similar text.\n" + QUERY + "<|im_end|>"
    ids = model.tokenizer(prompt, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        ref = model.decoder(input_ids=ids).last_hidden_state[0, -1].numpy()
    np.testing.assert_allclose(got, ref, atol=1e-4, rtol=1e-4)


@pytest.fixture(scope="module")
def preset():
    return Causal2Vec.from_pretrained(device="cpu", dtype="float32")


def test_default_preset_loads_offline_and_encodes(preset):
    q = preset.encode_queries(QUERY, task="SciFact")
    d = preset.encode_documents(DOCS)
    assert q.shape == (preset.embedding_dim,) and d.shape == (3, preset.embedding_dim)
    assert np.isfinite(q).all() and np.isfinite(d).all()


def test_a_max_length_the_template_fills_says_what_fills_it(preset):
    """A document's error said "the instruction None and the template alone take 5 tokens"; it has none."""
    with pytest.raises(ValueError, match=r"leaves no room for the text: the template takes \d+ tokens. Raise max_"):
        preset.encode_documents(["a text"], max_length=4)
    with pytest.raises(ValueError, match=r"the instruction 'Find the evidence' and the template take \d+ tokens"):
        preset.encode(["a text"], instruction="Find the evidence", max_length=4)


def test_default_preset_shorter_sizes_are_the_whole_vector_cut(preset):
    """384 runs MiniLM alone and 960 is MiniLM and h_EOS; both give the whole vector's first values."""
    assert preset.config.matryoshka_dims == [384, 960] and preset.config.vector_sizes == [384, 960, 1536]
    full = preset.encode_documents(DOCS, normalize_embeddings=True)
    for size in (384, 960):
        short = preset.encode_documents(DOCS, truncate_dim=size, normalize_embeddings=True)
        cut = full[:, :size] / np.linalg.norm(full[:, :size], axis=1, keepdims=True)
        np.testing.assert_allclose(short, cut, atol=1e-5, err_msg=str(size))


def test_default_preset_is_trained_and_documents_itself():
    from c2v_rag.hub.presets import DEFAULT_PRESET, PRESETS_DIR

    directory = PRESETS_DIR / DEFAULT_PRESET
    config = json.loads((directory / "causal2vec_config.json").read_text())
    assert config["metadata"]["trained"] is True
    assert config["decoder_adapter"]  # MiniLM stayed frozen in the preset's recipes: no encoder adapter
    assert config["normalize_parts"] and config["representation"] == "concat" and not config["encoder_share"]
    # The order keeps the 960 prefix [encoder; h_EOS]: what carries the quality out of domain (docs/models.md).
    assert list(config["part_weights"].items()) == [("encoder", 0.8), ("eos", 0.15), ("contextual", 0.05)]
    # The training config, the data it names and the dev scores ship with the weights.
    assert "datasets" in (directory / "train_config.yaml").read_text()
    scores = json.loads((directory / "dev_scores.json").read_text())
    assert set(scores) == {"stsb-dev", "scifact-dev-1k", "emotion-val", "banking77-dev"}
    assert "Training data" in (directory / "README.md").read_text()


def test_default_preset_decoder_is_base_plus_lora_delta(preset):
    """The loaded decoder equals the base weights plus (alpha / r) * B @ A read straight from the adapter file."""
    from safetensors.torch import load_file

    from c2v_rag.hub.presets import DEFAULT_PRESET, PRESETS_DIR
    from c2v_rag.hub.sources import load_backbone

    adapter_dir = PRESETS_DIR / DEFAULT_PRESET / "decoder_adapter"
    adapter = json.loads((adapter_dir / "adapter_config.json").read_text())
    tensors = load_file(adapter_dir / "adapter_model.safetensors")
    scale = adapter["lora_alpha"] / adapter["r"]
    base = dict(load_backbone(resolve_reference("smollm2-135m-instruct"), dtype=torch.float32).named_parameters())
    merged = dict(preset.decoder.named_parameters())
    checked = 0
    for key, lora_a in tensors.items():
        if ".lora_A." not in key:
            continue
        module = key.split("base_model.model.", 1)[1].split(".lora_A.")[0]
        lora_b = tensors[key.replace(".lora_A.", ".lora_B.")]
        name = module.removeprefix("model.") + ".weight"
        expected = base[name] + scale * (lora_b.float() @ lora_a.float())
        torch.testing.assert_close(merged[name], expected, atol=1e-5, rtol=1e-4)
        assert not torch.allclose(merged[name], base[name])
        checked += 1
    assert checked >= 30  # every layer has adapted projections


def test_default_preset_finds_the_right_example_document(preset):
    from pathlib import Path

    folder = Path(__file__).resolve().parents[2] / "examples" / "docs"
    names = sorted(p.name for p in folder.iterdir())
    docs = [(folder / n).read_text(encoding="utf-8") for n in names]
    questions = {
        "compound-interest.md": "How much does a deposit grow when interest is added to the balance each year?",
        "honeybees.txt": "How do bees tell each other where the flowers are?",
        "photosynthesis.md": "How do plants turn sunlight into chemical energy?",
        "sourdough.md": "What makes sourdough bread rise and taste sour?",
        "tides.txt": "What causes spring tides?",
    }
    assert sorted(questions) == names
    scores = preset.similarity(preset.encode_queries([questions[n] for n in names]), preset.encode_documents(docs))
    assert [names[i] for i in np.asarray(scores).argmax(axis=1)] == names


def test_bf16_agrees_with_fp32(real_model):
    bf16 = Causal2Vec.from_components("smollm2-135m-instruct", "all-minilm-l6-v2", device="cpu", dtype="bfloat16")
    a = real_model.encode(DOCS[:2], normalize_embeddings=True)
    b = bf16.encode(DOCS[:2], normalize_embeddings=True)
    cos = (a * b).sum(1)
    assert cos.min() > 0.98, cos


def test_the_preset_in_bf16_gives_a_text_the_same_vector_alone_or_beside_long_texts(preset):
    """The bound on batch invariance, cosine 0.999 between a text alone and in any batch, in bf16: the dtype a
    loaded model takes on a CPU with bf16 instructions, where it runs its encoder in bf16 too; and as close to the
    float32 preset's vectors, MiniLM's part included (docs/performance.md has the measured cosines)."""
    bf16 = Causal2Vec.from_pretrained(device="cpu", dtype="bfloat16")
    assert {p.dtype for p in bf16.encoder.parameters()} == {torch.bfloat16}
    texts = [QUERY, *DOCS, "word " * 40]
    long = [" ".join(DOCS) * 3, " ".join(reversed(DOCS)) * 3]  # each past the preset's 512 tokens
    unit = lambda v: v / np.linalg.norm(v, axis=-1, keepdims=True)  # noqa: E731
    alone = unit(np.stack([bf16.encode_documents([text])[0] for text in texts]))
    beside = unit(np.stack([bf16.encode_documents([long[0], text, long[1]])[1] for text in texts]))
    float32 = unit(preset.encode_documents(texts))
    assert (alone * beside).sum(1).min() >= 0.999
    assert (alone * float32).sum(1).min() >= 0.999
    encoder_part = unit(alone[:, :384]) * unit(float32[:, :384])
    assert encoder_part.sum(1).min() >= 0.999


def test_the_minilm_reference_scores_the_vectors_sentence_transformers_gives():
    """The baseline of `c2v-rag eval` is all-MiniLM-L6-v2 as shipped: mean pooling, then Normalize."""
    from sentence_transformers import SentenceTransformer

    from c2v_rag.evaluation import BiEncoder

    texts = [QUERY, *DOCS[:2], "word " * 300]  # the last one is cut at MiniLM's 256 tokens by both
    ours = BiEncoder("all-minilm-l6-v2", device="cpu").encode(texts)
    reference = SentenceTransformer(resolve_reference("all-minilm-l6-v2").location, device="cpu").encode(texts)
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(ours, reference, atol=1e-5)


def _absolute_paths(folder) -> list[str]:
    """Every string value of the folder's JSON files that is an absolute path, with the file it is in."""
    import os
    from pathlib import Path

    found = []

    def walk(value, where):
        if isinstance(value, dict):
            for item in value.values():
                walk(item, where)
        elif isinstance(value, list):
            for item in value:
                walk(item, where)
        elif isinstance(value, str) and (os.path.isabs(value) or value.startswith("~")):
            found.append(f"{where}: {value}")

    for file in Path(folder).rglob("*.json"):
        walk(json.loads(file.read_text()), file.relative_to(folder))
    return found


@pytest.mark.parametrize("merge_adapters", [True, False])
def test_a_saved_variant_names_its_packaged_bases_by_alias(tmp_path, merge_adapters):
    """The adapters record the packaged bases by alias, not the folders they were loaded from on this machine."""
    model = Causal2Vec.from_pretrained(device="cpu", dtype="float32", merge_adapters=merge_adapters)
    model.save_pretrained(tmp_path / "v")
    assert _absolute_paths(tmp_path / "v") == []
    decoder = json.loads((tmp_path / "v" / "decoder_adapter" / "adapter_config.json").read_text())
    assert decoder["base_model_name_or_path"] == "smollm2-135m-instruct"


def test_the_shipped_preset_holds_no_local_path():
    from c2v_rag.hub.presets import DEFAULT_PRESET, PRESETS_DIR

    assert _absolute_paths(PRESETS_DIR / DEFAULT_PRESET) == []


def test_the_preset_read_from_the_merged_cache_embeds_bit_for_bit_as_merged_by_peft(tmp_path, monkeypatch):
    # The cache in a temporary folder; the dequantized base stays where it is (C2V_RAG_CACHE untouched).
    from c2v_rag.hub import merged, variants

    monkeypatch.delenv("C2V_RAG_MERGED_CACHE", raising=False)
    monkeypatch.setattr(merged, "merged_dir", lambda: tmp_path)
    by_peft = Causal2Vec.from_pretrained(None, device="cpu")
    assert sorted(p.name.split("-")[0] for p in tmp_path.iterdir()) == ["decoder", "encoder"]
    monkeypatch.setattr(variants, "_attach_adapter", lambda *a, **k: pytest.fail("merged again"))
    cached = Causal2Vec.from_pretrained(None, device="cpu")
    texts = [QUERY, *DOCS]
    np.testing.assert_array_equal(cached.encode_queries(texts), by_peft.encode_queries(texts))
    np.testing.assert_array_equal(cached.encode_documents(texts), by_peft.encode_documents(texts))
