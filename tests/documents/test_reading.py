"""Reading real folders: files that are not text, the size limit, bad JSONL records.

The reading half needs no model; the last tests ingest into embedded Qdrant with a tiny model to
check what a bad record does to a run (skipped and counted, or stopped with nothing lost).
"""

from __future__ import annotations

import json
import logging
from contextlib import closing
from pathlib import Path

import pytest
from rag_helpers import make_text

from c2v_rag.documents.documents import iter_documents
from c2v_rag.documents.files import ReadLog, ReadOptions
from c2v_rag.documents.sniffing import NotText, decode_text


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj", "it is a PDF"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "it is a PNG image"),
        (b"PK\x03\x04\x14\x00\x06\x00", "it is a ZIP archive"),
        (b"\x7fELF\x02\x01\x01", "it is an ELF executable"),
        ("plain words in UTF-16".encode("utf-16"), "NUL bytes"),
        (b"text with a \x00 inside", "NUL bytes"),
        (bytes(range(128, 256)) * 8, "not valid UTF-8"),
    ],
)
def test_binary_data_is_not_text(data, reason):
    result = decode_text(data)
    assert isinstance(result, NotText) and reason in result.reason


def test_text_is_text_and_a_few_stray_bytes_are_replaced():
    assert decode_text("Grüße, 東京 \ufffd".encode("utf-8")) == "Grüße, 東京 \ufffd"  # a literal U+FFFD is fine
    assert decode_text(b"\xef\xbb\xbfwith a BOM") == "with a BOM"
    latin1 = ("A mostly English text with one caf\xe9 in it. " * 5).encode("latin-1")
    assert decode_text(latin1).count("\ufffd") == 5  # 5 bad bytes of 230
    assert isinstance(decode_text(latin1, max_undecodable_share=0.01), NotText)
    assert decode_text(b"") == ""


def test_a_folder_skips_what_is_not_text_with_one_warning_each(tmp_path: Path, caplog):
    (tmp_path / "good.txt").write_text("real text", encoding="utf-8")
    (tmp_path / "scan.txt").write_bytes(b"%PDF-1.4 binary")
    (tmp_path / "utf16.md").write_bytes("wide text".encode("utf-16"))
    (tmp_path / "huge.md").write_text("x" * 2000, encoding="utf-8")
    (tmp_path / "image.jsonl").write_bytes(b"\x89PNG\r\n\x1a\n....")
    log = ReadLog()
    with caplog.at_level(logging.WARNING, logger="c2v_rag.documents.files"):
        docs = list(iter_documents(tmp_path, options=ReadOptions(max_file_bytes=1000), log=log))
    assert [d.text for d in docs] == ["real text"]
    assert log.files_skipped == 4 and log.records_skipped == 0
    warned = {Path(r.args[0]).name: r.getMessage() for r in caplog.records}
    assert sorted(warned) == ["huge.md", "image.jsonl", "scan.txt", "utf16.md"] and len(caplog.records) == 4
    assert "it is a PDF" in warned["scan.txt"] and "NUL bytes" in warned["utf16.md"]
    assert "2,000 bytes, over the limit of 1,000" in warned["huge.md"]
    assert all(str(tmp_path.resolve()) in m for m in warned.values())


BAD_LINES = [
    ('{"id": "ok1", "text": "first"}', None),
    ("{not json", "is not valid JSON"),
    ('["a", "list"]', "must be a JSON object, got list"),
    ('{"id": "x", "body_text": "no text key"}', "has no text"),
    (b'{"id": "y", "text": "caf\xe9"}', "is not valid UTF-8"),
    ('{"id": "z", "text": 42}', "not a str"),
    ('{"id": "ok2", "text": "last"}', None),
]


def write_bad_jsonl(path: Path) -> Path:
    path.write_bytes(b"\n".join(line if isinstance(line, bytes) else line.encode() for line, _ in BAD_LINES) + b"\n")
    return path


def test_bad_jsonl_records_are_reported_by_line_and_skipped(tmp_path: Path, caplog):
    file = write_bad_jsonl(tmp_path / "records.jsonl")
    log = ReadLog()
    with caplog.at_level(logging.WARNING, logger="c2v_rag.documents.files"):
        docs = list(iter_documents(file, options=ReadOptions(on_error="continue"), log=log))
    assert [d.doc_id for d in docs] == ["ok1", "ok2"]
    resolved = file.resolve()
    expected = [(f"{resolved}:{n}", reason) for n, (_, reason) in enumerate(BAD_LINES, 1) if reason]
    assert [s.where for s in log.skipped] == [where for where, _ in expected]
    assert all(reason in s.reason for (_, reason), s in zip(expected, log.skipped))
    assert log.records_skipped == 5 and len(caplog.records) == 5 and log.covers(str(resolved))
    with pytest.raises(ValueError, match=r"records\.jsonl:2 is not valid JSON"):
        list(iter_documents(file))  # on_error="raise", the default


@pytest.fixture
def rag(tiny_variant, ingest_config):
    for module in ("qdrant_client", "llama_index.core", "tenacity"):
        pytest.importorskip(module)
    import c2v_rag

    def run(docs, store: Path, **kwargs):
        return c2v_rag.ingest(docs, path=store, collection="kb", model=tiny_variant, config=ingest_config, **kwargs)

    return run


def count(store: Path) -> int:
    from qdrant_client import QdrantClient

    with closing(QdrantClient(path=str(store))) as client:
        return client.count("kb").count


def test_on_error_continue_ingests_the_rest_and_counts_the_skips(tmp_path, rag):
    folder = tmp_path / "docs"
    folder.mkdir()
    write_bad_jsonl(folder / "records.jsonl")
    (folder / "a.txt").write_text(make_text(1, 2), encoding="utf-8")
    (folder / "b.txt").write_bytes(b"GIF89a\x01\x00")
    result = rag(folder, tmp_path / "store", on_error="continue")
    assert (result.documents, result.files_skipped, result.records_skipped) == (3, 1, 5)
    assert "skipped 1 files and 5 records" in result.summary() and count(tmp_path / "store") == result.chunks


def test_with_raise_a_bad_record_stops_the_run_but_keeps_what_came_before(tmp_path, rag, ingest_config):
    file = tmp_path / "records.jsonl"
    good = [{"id": f"r{i}", "text": make_text(i, 2)} for i in range(8)]
    file.write_text("".join(json.dumps(r) + "\n" for r in good) + "{broken\n", encoding="utf-8")
    store = tmp_path / "store"
    with pytest.raises(ValueError, match=r"records\.jsonl:9 is not valid JSON"):
        rag(file, store)
    stored = count(store)
    reference = rag(good, tmp_path / "clean")
    assert stored == reference.chunks > ingest_config.batch_size  # every record before the bad one
    file.write_text("".join(json.dumps(r) + "\n" for r in good), encoding="utf-8")
    resumed = rag(file, store)
    assert (resumed.chunks_unchanged, resumed.chunks_written) == (stored, 0)
