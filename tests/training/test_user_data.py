"""Training on your own data: ``--data PATH`` reads the format from the path, and a missing dataset's error
says what it is, where to get it and which flags replace it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from c2v_rag.cli import main
from c2v_rag.training import load_config
from c2v_rag.training.user_data import infer_dataset

ROOT = Path(__file__).resolve().parents[2]
RECIPES = ROOT / "recipes"


@pytest.fixture
def layouts(tmp_path):
    """One file or folder of each layout --data reads."""
    (tmp_path / "pairs.tsv").write_text("how to resume\trun train with --resume\nwhat is C\tthe contextual token\n")
    (tmp_path / "triplets.tsv").write_text("anchor\tpositive\tnegative\nq\tp\tn\n")
    (tmp_path / "sts.tsv").write_text("genre\tsubset\tscore\tsentence1\tsentence2\nx\ty\t4.5\ta cat\ta kitten\n")
    (tmp_path / "intents.csv").write_text("text,category\nmy card is lost,lost_card\n")
    (tmp_path / "records.jsonl").write_text(json.dumps({"query": "q", "positive": "p", "negatives": ["n"]}) + "\n")
    (tmp_path / "docs.jsonl").write_text(json.dumps({"id": "a", "text": "a document"}) + "\n")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.md").write_text("# A\n\nSome notes.\n")
    beir = tmp_path / "beir"
    (beir / "qrels").mkdir(parents=True)
    for name in ("corpus.jsonl", "queries.jsonl"):
        (beir / name).write_text("")
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n")
    return tmp_path


def test_data_format_is_read_from_the_path(layouts):
    formats = {
        name: infer_dataset(layouts / name)
        for name in ("pairs.tsv", "triplets.tsv", "sts.tsv", "intents.csv", "records.jsonl", "docs.jsonl", "notes")
    }
    assert {name: section["format"] for name, section in formats.items()} == {
        "pairs.tsv": "pairs_tsv",
        "triplets.tsv": "triplets_tsv",
        "sts.tsv": "scored_pairs",
        "intents.csv": "labelled",
        "records.jsonl": "jsonl",
        "docs.jsonl": "corpus",
        "notes": "corpus",
    }
    assert formats["sts.tsv"]["loss"] == "cosent"
    assert infer_dataset(layouts / "beir") == {
        "name": "beir",
        "path": str(layouts / "beir"),
        "format": "beir",
        "split": "test",
    }
    with pytest.raises(FileNotFoundError, match="--data .*nowhere: no such file or folder; give a folder of documents"):
        infer_dataset(layouts / "nowhere")


def test_data_replaces_a_recipes_datasets_and_the_evaluation_that_needs_them(layouts):
    """scifact_nli_cpu reads SNLI and SciFact from ../shared/data and evaluates on them; with --data it needs
    neither, and overrides still apply to the new datasets."""
    config = load_config(
        RECIPES / "scifact_nli_cpu.yaml",
        ["datasets.1.limit=5", "evaluation.sts_path=null"],
        [str(layouts / "pairs.tsv"), str(layouts / "notes")],
    )
    assert [(d.name, d.format) for d in config.datasets] == [("pairs", "pairs_tsv"), ("notes", "corpus")]
    assert [d.task for d in config.datasets] == ["SciFact", "SciFact"]  # the recipe's output.default_task
    assert config.datasets[1].limit == 5 and config.datasets[1].pseudo_pairs.generator == "none"
    assert config.evaluation.retrieval_dataset is None and config.mining.datasets is None
    assert config.mining.method == "bm25" and config.model.decoder == "smollm2-135m-instruct"
    # A recipe with a corpus dataset lends its way of making pseudo-pairs and its task to the folder given.
    adapted = load_config(RECIPES / "corpus_pseudo_pairs.yaml", None, [str(layouts / "notes")])
    assert adapted.datasets[0].task == "MSMARCO-Passage" and adapted.datasets[0].pseudo_pairs.headings


def test_a_missing_dataset_says_what_it_is_where_to_get_it_and_the_flags_that_replace_it(tmp_path, capsys):
    """Before this, the error was "dataset 'snli': ../shared/data/nli/snli_dev_triplets.tsv does not exist; fix
    'path' in the config", after the models had loaded. Now it comes first, and names flags, not Python."""
    recipe = str(RECIPES / "scifact_nli_cpu.yaml")
    missing = str(tmp_path / "shared" / "data" / "nli" / "snli_dev_triplets.tsv")
    assert main(["train", recipe, "--set", f"datasets.0.path={missing}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith(f"error: {recipe}: dataset 'snli' (datasets.0.path): {missing}")
    assert "SNLI dev as triplets" in err and "https://nlp.stanford.edu/projects/snli/" in err
    assert f"c2v-rag train {recipe} --data PATH" in err and "--set datasets.0.path=PATH" in err
    # An evaluation file that is not there names its own key, and how to turn it off.
    assert main(["train", recipe, "--data", str(tmp_path), "--set", f"evaluation.sts_path={tmp_path}/dev.tsv"]) == 2
    err = capsys.readouterr().err
    assert "(evaluation.sts_path)" in err and "--set evaluation.sts_path=null" in err
    # The recipe for your own data names its placeholder and --data.
    assert main(["train", str(RECIPES / "own_data.yaml")]) == 2
    err = capsys.readouterr().err
    assert "dataset 'docs' (datasets.0.path): my-docs/ does not exist" in err and "--data PATH" in err


def test_own_data_recipe_reads_nothing_from_shared_data():
    config = load_config(RECIPES / "own_data.yaml")
    assert config.evaluation.sts_path is None and config.evaluation.retrieval_dataset is None
    assert [d.path for d in config.datasets] == ["my-docs/"]  # the placeholder --data replaces
