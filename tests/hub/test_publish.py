"""The folder and model card that push_to_hub would upload (nothing can reach the Hub here)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch
from tiny_corpus import CORPUS

from c2v_rag import Causal2Vec
from c2v_rag.cli import main as cli_main
from c2v_rag.hub.presets import DEFAULT_PRESET, PRESETS_DIR
from c2v_rag.hub.publish import model_card, prepare_upload

hub = pytest.importorskip("huggingface_hub")


def test_the_presets_card_carries_hub_metadata_and_its_dev_scores():
    card = hub.ModelCard(model_card(DEFAULT_PRESET, "someone/c2v-preset"))
    data = card.data
    assert data.library_name == "sentence-transformers" and data.license == "apache-2.0"
    assert data.base_model == ["HuggingFaceTB/SmolLM2-135M-Instruct", "sentence-transformers/all-MiniLM-L6-v2"]
    assert {"causal2vec", "sentence-transformers"} <= set(data.tags)
    assert "allenai/scifact" in data.datasets and "stanfordnlp/snli" in data.datasets
    shipped = json.loads((PRESETS_DIR / DEFAULT_PRESET / "dev_scores.json").read_text())
    results = {r.dataset_split: r.metric_value for r in data.eval_results}  # huggingface_hub parses model-index
    assert results == {name: round(scores["main"], 4) for name, scores in shipped.items()}
    for how in (
        "Causal2Vec.from_pretrained",
        "SentenceTransformer(",
        "HuggingFaceEmbedding(",
        "HuggingFaceEmbeddings(",
    ):
        assert how in card.text


def test_a_dev_set_without_the_cards_metric_is_left_out_of_the_card(tmp_path):
    directory = tmp_path / "variant"
    shutil.copytree(PRESETS_DIR / DEFAULT_PRESET, directory)
    scores = json.loads((directory / "dev_scores.json").read_text())
    scores["banking77-dev"] = {"accuracy_std": 0.01}  # neither its metric (accuracy) nor "main"
    (directory / "dev_scores.json").write_text(json.dumps(scores))
    results = {r.dataset_split for r in hub.ModelCard(model_card(directory, "someone/c2v-preset")).data.eval_results}
    assert results == set(scores) - {"banking77-dev"}


def test_a_variants_own_front_matter_gives_way_to_the_cards_whatever_its_line_endings(tmp_path):
    directory = tmp_path / "variant"
    shutil.copytree(PRESETS_DIR / DEFAULT_PRESET, directory)
    about = "---\r\nlicense: mit\r\ntags: [mine]\r\n...\r\n\r\n# My variant\r\n\r\nTuned on our runbooks.\r\n"
    (directory / "README.md").write_bytes(about.encode())
    text = model_card(directory, "someone/c2v-runbooks")
    card = hub.ModelCard(text)
    assert card.data.license == "apache-2.0" and "mine" not in card.data.tags  # the card's front matter alone
    assert text.count("license:") == 1 and "Tuned on our runbooks." in card.text and "# My variant" not in card.text


def test_the_upload_folder_loads_as_a_variant_and_as_a_sentence_transformers_model(tiny_model_factory, tmp_path):
    st = pytest.importorskip("sentence_transformers")
    model = tiny_model_factory(
        "llama",
        default_task="SciFact",
        metadata={"training": {"datasets": ["scifact"]}, "dev_scores": {"scifact-dev": 0.25}},
    )
    model.save_pretrained(tmp_path / "variant")
    (tmp_path / "variant" / "checkpoints").mkdir()  # training leftovers stay out of the upload
    folder = prepare_upload(tmp_path / "variant", tmp_path / "upload", "someone/tiny")
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [
            "README.md",
            "causal2vec_config.json",
            "projector.safetensors",
            "modules.json",
            "config_sentence_transformers.json",
            "causal2vec_st_module.json",
        ]
    )
    data = hub.ModelCard.load(folder / "README.md").data
    assert [(r.task_type, r.metric_type, r.metric_value) for r in data.eval_results] == [
        ("Retrieval", "ndcg_at_10", 0.25)
    ]
    texts = CORPUS[:4]
    np.testing.assert_allclose(
        Causal2Vec.from_pretrained(folder, device="cpu", dtype="float32").encode_queries(texts),
        model.encode_queries(texts),
        atol=1e-6,
    )
    loaded = st.SentenceTransformer(
        str(folder), device="cpu", trust_remote_code=True, model_kwargs={"dtype": torch.float32}
    )
    np.testing.assert_allclose(loaded.encode_query(texts), model.encode_queries(texts), atol=1e-5)
    with pytest.raises(FileExistsError, match="not empty"):
        prepare_upload(tmp_path / "variant", folder, "someone/tiny")


def test_cli_push_dry_run_writes_the_folder(tmp_path, capsys):
    assert cli_main(["push", DEFAULT_PRESET, "someone/c2v", "--dry-run", str(tmp_path / "out")]) == 0
    assert "not uploaded" in capsys.readouterr().out
    assert (tmp_path / "out" / "decoder_adapter" / "adapter_model.safetensors").is_file()
    assert hub.ModelCard.load(tmp_path / "out" / "README.md").data.model_name == "c2v"  # from the model-index
