"""The text the tiny test tokenizers are trained on (tests/conftest.py), importable by test modules."""

CORPUS = [
    "Vitamin D deficiency is linked to bone loss in older adults.",
    "The stock market fell sharply after the announcement.",
    "Retrieve semantically similar text. Given a scientific claim, retrieve documents.",
    "Cats and dogs are popular pets; many people keep both at home.",
    "Proteins fold into three-dimensional structures that determine their function!",
    "user assistant system question answer claim evidence support refute query passage",
    "0 1 2 3 4 5 6 7 8 9 the of and to in is was for on with as by at from",
] * 4


def write_scifact(data_root, docs: dict[str, str], queries: dict[str, str], relevant: dict[str, str]) -> None:
    """A BEIR SciFact folder under ``data_root`` (``scifact/corpus.jsonl``, ``queries.jsonl``,
    ``qrels/train.tsv``) as ``c2v_rag.evaluation.datasets.scifact_dev`` reads it; ``relevant`` maps a
    query id to its one relevant document id."""
    import json
    from pathlib import Path

    folder = Path(data_root) / "scifact"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": k, "title": "", "text": v}) + "\n" for k, v in docs.items())
    )
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": k, "text": v}) + "\n" for k, v in queries.items()))
    (folder / "qrels" / "train.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, d in relevant.items())
    )
