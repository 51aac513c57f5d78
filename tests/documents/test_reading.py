"""Reading real folders: files that are not text, the size limit, bad JSONL records.

The reading half needs no model; the last tests ingest into embedded Qdrant with a tiny model to
check what a bad record does to a run (skipped and counted, or stopped with nothing lost).
"""

from __future__ import annotations

import json
import logging
import re
from contextlib import closing
from pathlib import Path

import pytest
from rag_helpers import make_text

from c2v_rag.documents.documents import iter_documents
from c2v_rag.documents.files import ReadLog, ReadOptions
from c2v_rag.documents.sniffing import Decoded, NotText, decode_text
from c2v_rag.rag.ingestion.config import IngestConfig


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj", "it is a PDF"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "it is a PNG image"),
        (b"PK\x03\x04\x14\x00\x06\x00", "it is a ZIP archive"),
        (b"\x7fELF\x02\x01\x01", "it is an ELF executable"),
        ("plain words in UTF-16 without a byte-order mark".encode("utf-16-le"), "NUL bytes"),
        (b"\xff\xfe" + "odd length".encode("utf-16-le") + b"x", "UTF-16 byte-order mark but is not UTF-16"),
        (b"text with a \x00 inside", "NUL bytes"),
        (bytes(range(128, 256)) * 8, "not valid UTF-8"),
    ],
)
def test_binary_data_is_not_text(data, reason):
    result = decode_text(data)
    assert isinstance(result, NotText) and reason in result.reason


def test_text_is_text_and_a_few_stray_bytes_are_replaced():
    assert decode_text("Grüße, 東京 \ufffd".encode()).text == "Grüße, 東京 \ufffd"  # a literal U+FFFD is fine
    assert decode_text(b"\xef\xbb\xbfwith a BOM") == Decoded("with a BOM", "utf-8")
    # UTF-8 with a stray Latin-1 byte stays UTF-8: its valid accents outnumber the bad byte.
    stray = ("Grüße aus Köln, schön. " * 5).encode("utf-8") + "caf\xe9".encode("latin-1")
    assert decode_text(stray) == Decoded(("Grüße aus Köln, schön. " * 5) + "caf\ufffd", "utf-8", replaced=1)
    assert isinstance(decode_text(stray, max_undecodable_share=0.001), NotText)
    assert decode_text(b"") == Decoded("", "utf-8")


# Each text as a file in an encoding other than UTF-8, and the encoding it must be read in.
LEGACY_TEXTS = [
    ("Résumé du projet: déjà fait.\n", "cp1252", "cp1252"),  # short: cp1250 reads it alike, cp1252 must win
    ("Die Größe der Äpfel übertrifft alles. Straße und Fußgänger.\n" * 3, "latin-1", "cp1252"),
    ("He said \u201chello\u201d \u2014 and left. It\u2019s fine.\n", "cp1252", "cp1252"),
    ("Zażółć gęślą jaźń. Łódź jest miastem w Polsce, którego mieszkańcy są mili.\n" * 3, "cp1250", "cp1250"),
    ("Привет, как дела? Это тестовый документ на русском языке.\n" * 3, "cp1251", "cp1251"),
    ("Привет, как дела? Это тестовый документ на русском языке.\n" * 3, "koi8-r", "koi8_r"),
    ("Αυτό είναι ένα ελληνικό κείμενο για δοκιμή.\n" * 3, "cp1253", "cp1253"),
    ("これは日本語のテスト文書です。検索の品質を確認します。\n" * 3, "shift_jis", "cp932"),
    ("这是一个中文测试文档。我们检查检索质量。\n" * 3, "gbk", "gb18030"),
]


@pytest.mark.parametrize(("text", "written_in", "read_in"), LEGACY_TEXTS)
def test_text_in_another_encoding_is_read_in_it(text, written_in, read_in):
    assert decode_text(text.encode(written_in)) == Decoded(text, read_in)


@pytest.mark.parametrize("wide", ["utf-16", "utf-32", "utf-16-be"])
def test_wide_text_with_a_byte_order_mark_is_read(wide):
    data = "Windows tools write UTF-16: Grüße".encode(wide)
    if wide == "utf-16-be":
        data = b"\xfe\xff" + data
    assert decode_text(data).text == "Windows tools write UTF-16: Grüße"


def test_a_folder_reads_each_file_in_its_own_encoding(tmp_path: Path, caplog):
    (tmp_path / "notes.txt").write_bytes("Le café était très bon à Noël.".encode("cp1252"))
    (tmp_path / "export.md").write_bytes("# Bericht\n\nGrüße".encode("utf-16"))
    (tmp_path / "utf8.txt").write_text("東京の天気", encoding="utf-8")
    with caplog.at_level(logging.INFO, logger="c2v_rag.documents.formats.base"):
        docs = {Path(d.metadata["source"]).name: d.text for d in iter_documents(tmp_path, log=ReadLog())}
    assert docs == {
        "notes.txt": "Le café était très bon à Noël.",
        "export.md": "# Bericht\n\nGrüße",
        "utf8.txt": "東京の天気",
    }
    notes = (tmp_path / "notes.txt").resolve()
    assert [r.getMessage() for r in caplog.records] == [f"{notes} is not UTF-8; read as cp1252"]


def test_encoding_messages_name_a_compressed_file_by_its_path_and_a_literal_replacement_character_is_no_error(
    tmp_path: Path, caplog
):
    import gzip

    (tmp_path / "notes.md.gz").write_bytes(gzip.compress("Le café était très bon à Noël.".encode("cp1252")))
    stray = ("Grüße aus Köln. " * 5).encode("utf-8") + b"\xff"
    (tmp_path / "stray.txt.gz").write_bytes(gzip.compress(stray))
    # A manual that shows the character itself (sed's: "shown here as \ufffd"), validly encoded.
    (tmp_path / "manual.txt").write_text("An invalid byte is shown here as \ufffd.", encoding="utf-8")
    with caplog.at_level(logging.INFO, logger="c2v_rag.documents.formats.base"):
        docs = {Path(d.metadata["source"]).name: d.text for d in iter_documents(tmp_path, log=ReadLog())}
    assert docs["manual.txt"] == "An invalid byte is shown here as \ufffd."
    folder = tmp_path.resolve()
    assert sorted(r.getMessage() for r in caplog.records) == [
        f"{folder / 'notes.md.gz'} is not UTF-8; read as cp1252",
        f"{folder / 'stray.txt.gz'} is not valid UTF-8 throughout; undecodable bytes were replaced",
    ]


def test_a_folder_skips_what_is_not_text_with_one_warning_each(tmp_path: Path, caplog):
    (tmp_path / "good.txt").write_text("real text", encoding="utf-8")
    (tmp_path / "scan.txt").write_bytes(b"%PDF-1.4 binary")
    (tmp_path / "utf16.md").write_bytes("wide text".encode("utf-16-le"))
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
    # Each names its line once, as the record (it said "Skipped the record F:2: F:2 is not valid JSON").
    assert not any(s.where in s.reason for s in log.skipped) and log.skipped[0].reason.startswith("it is not valid")
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


def test_files_without_a_suffix_are_read_as_text_when_asked_and_counted_when_not(
    tmp_path, rag, tiny_variant, ingest_config
):
    import gzip

    folder = tmp_path / "doc"
    (folder / "bash").mkdir(parents=True)
    (folder / "bash" / "RBASH").write_text("The Restricted Shell\n\nrbash forbids changing directories.\n")
    (folder / "bash" / "NEWS.gz").write_bytes(gzip.compress(b"This is a terse description of new features.\n"))
    (folder / "bash" / "README").write_text("Bash is the GNU Project's shell.\n")  # documentation by its name
    (folder / "bash" / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    (folder / "bash" / "dc.sed.gz").write_bytes(gzip.compress(b"s/tide/ebb/\n"))
    store = tmp_path / "store"
    plain = rag(folder, store)
    assert plain.documents == 1 and plain.files_not_read == {"": 2, ".png": 1, ".sed": 1}
    assert plain.summary().endswith("; not read: 4 files of other types (no suffix (2), .png (1), .sed (1))")
    # The fix a user is told: text_suffixes [''] (--text-suffix ''), which reads RBASH and, inside its .gz, NEWS.
    log = ReadLog()
    options = IngestConfig(text_suffixes=["", ".sed"]).read_options()
    assert options.text_suffixes == ("", ".sed")
    docs = {Path(d.doc_id).name: d.text for d in iter_documents(folder, options=options, log=log)}
    assert sorted(docs) == ["NEWS.gz", "RBASH", "README", "dc.sed.gz"] and docs["dc.sed.gz"] == "s/tide/ebb/\n"
    assert docs["NEWS.gz"] == "This is a terse description of new features.\n" and log.not_read == {".png": 1}
    asked = rag(folder, store, text_suffixes=[""])
    assert asked.documents == 3 and asked.files_not_read == {".png": 1, ".sed": 1}
    assert count(store) == asked.chunks
    # embed says the same of what it left out.
    import c2v_rag

    embedded = c2v_rag.embed(folder, tmp_path / "vectors", model=str(tiny_variant), config=ingest_config)
    assert embedded.files_not_read == plain.files_not_read and embedded.summary().endswith(plain.summary()[-70:])
    # One file named alone: the same fix, and the same reading with it.
    with pytest.raises(ValueError, match=re.escape("RBASH: a file without a suffix, of no type c2v_rag reads")) as info:
        iter_documents(folder / "bash" / "RBASH")
    assert str(info.value).endswith("to read it as text, pass text_suffixes=[''] (--text-suffix '')")
    assert [d.text for d in iter_documents(folder / "bash" / "RBASH", options=options)] == [docs["RBASH"]]


def test_on_error_continue_ingests_the_rest_and_counts_the_skips(tmp_path, rag):
    folder = tmp_path / "docs"
    folder.mkdir()
    write_bad_jsonl(folder / "records.jsonl")
    (folder / "a.txt").write_text(make_text(1, 2), encoding="utf-8")
    (folder / "b.txt").write_bytes(b"GIF89a\x01\x00")
    result = rag(folder, tmp_path / "store", on_error="continue")
    assert (result.documents, result.files_skipped, result.records_skipped) == (3, 1, 5)
    assert "skipped 1 file and 5 records" in result.summary() and count(tmp_path / "store") == result.chunks


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


def test_text_suffixes_read_other_files_as_plain_text(tmp_path: Path, caplog):
    (tmp_path / "notes.md").write_text("# Notes", encoding="utf-8")
    (tmp_path / "tool.py").write_text('def tide():\n    """High twice a day."""\n', encoding="utf-8")
    (tmp_path / "run.LOG").write_text("12:00 high tide\n", encoding="utf-8")
    (tmp_path / "blob.py").write_bytes(b"\x00\x01" * 100)  # what its suffix says it is not: skipped as any file
    with caplog.at_level(logging.INFO, logger="c2v_rag.documents.files"):
        assert [Path(d.doc_id).name for d in iter_documents(tmp_path, log=ReadLog())] == ["notes.md"]
    skipped = [r.getMessage() for r in caplog.records if "Skipped 3 files" in r.getMessage()]
    assert len(skipped) == 1 and ": .py (2), .log (1) (" in skipped[0] and "--text-suffix" in skipped[0]
    log = ReadLog()
    options = IngestConfig(text_suffixes=["py", "*.log", ".py"]).read_options()
    assert options.text_suffixes == (".py", ".log")  # as format_of matches them
    docs = {Path(d.doc_id).name: d for d in iter_documents(tmp_path, options=options, log=log)}
    assert sorted(docs) == ["notes.md", "run.LOG", "tool.py"]
    assert docs["tool.py"].text == 'def tide():\n    """High twice a day."""\n'  # as it is: no Markdown reading
    assert "not a text file" in log.skipped[0].reason and log.skipped[0].where.endswith("blob.py")
    # A file named alone with another suffix is refused with the fix.
    with pytest.raises(
        ValueError, match=r"unsupported file type '\.py'.*text_suffixes=\['\.py'\] \(--text-suffix \.py\)"
    ):
        iter_documents(tmp_path / "tool.py")
    for bad, reason in (
        ([".md"], ".md files are read as Markdown already"),
        ([".txt"], ".txt files are read as text already"),
        ([".pdf"], "read as PDF already"),
        (["src/"], "'src/' is not a file suffix"),
        (["a b"], "'a b' is not a file suffix; name suffixes such as '.py' or '.log', or '' for files without one"),
    ):
        with pytest.raises(ValueError, match=re.escape(reason)):
            IngestConfig(text_suffixes=bad)


def test_documentation_named_without_a_suffix_is_read_as_text_and_licences_and_change_logs_are_not(tmp_path: Path):
    import gzip

    texts = {
        "README": "Tide tables for the harbour.\n",
        "INSTALL": "Run make install.\n",
        "faq": "Why two tides a day?\n",
        "README.Debian": "Packaged for Debian.\n",
        "COPYING": "GNU GENERAL PUBLIC LICENSE\n",
        "LICENSE": "MIT License\n",
        "copyright": "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n",
        "AUTHORS": "Ada Lovelace\n",
        "NEWS": "1.2: faster\n",
        "Makefile": "all:\n\techo tides\n",
        "INSTALL.sh": "make install\n",  # a suffix of its own: a script, not read
    }
    for name, text in texts.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "changelog.gz").write_bytes(gzip.compress(b"tides (1.2) unstable; urgency=low\n"))
    (tmp_path / "README.Debian.gz").write_bytes(gzip.compress(b"Built with the tide patch.\n"))
    (tmp_path / "TODO").write_bytes(b"\x00\x01" * 10)  # named like documentation, not text: skipped as any file
    log = ReadLog()
    docs = {Path(d.doc_id).name: d.text for d in iter_documents(tmp_path, log=log)}
    assert docs == {
        "README": texts["README"],
        "INSTALL": texts["INSTALL"],
        "faq": texts["faq"],
        "README.Debian": texts["README.Debian"],
        "README.Debian.gz": "Built with the tide patch.\n",
    }
    assert [Path(s.where).name for s in log.skipped] == ["TODO"] and "not a text file" in log.skipped[0].reason
    # Named alone, a README is read as one in a folder is.
    (doc,) = iter_documents(tmp_path / "README")
    assert doc.text == texts["README"]


def test_a_folder_with_nothing_to_read_says_what_it_holds_and_the_fix_that_works(tmp_path: Path):
    folder = tmp_path / "exports"
    folder.mkdir()
    for name in ("a.json", "b.json", "c.json"):
        (folder / name).write_text('{"text": "Spring tides follow the new and the full moon."}\n', encoding="utf-8")
    for name in ("chart.png", "map.png"):
        (folder / name).write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    for name in ("Makefile", "LICENSE"):
        (folder / name).write_text("all:\n\techo tides\n", encoding="utf-8")
    for n in range(6):  # more suffixes than a message names
        (folder / f"x.k{n}").write_bytes(b"\x00" * 8)
    with pytest.raises(ValueError) as info:
        iter_documents(folder)
    message = str(info.value)
    assert message.startswith(f"no file under {folder} is of a type c2v_rag reads: it holds .json (3), ")
    assert "no suffix (2)" in message and ".png (2)" in message and "(1), " in message
    assert message.count(" (1)") == 3 and "and 3 more suffixes" in message  # six suffixes named, most files first
    # Only the suffixes whose files are text are offered as text (the Makefile's: none); not the PNG, the binary.
    assert message.endswith("pass text_suffixes=['.json', ''] (--text-suffix .json --text-suffix '')")
    # The fix the message names reads them.
    docs = list(iter_documents(folder, options=IngestConfig(text_suffixes=[".json"]).read_options()))
    assert sorted(Path(d.doc_id).name for d in docs) == ["a.json", "b.json", "c.json"]

    notes = tmp_path / "notes"
    (notes / "drafts").mkdir(parents=True)
    (notes / "drafts" / "tides.md").write_text("# Tides\n", encoding="utf-8")
    (notes / ".plan.md").write_text("# Hidden\n", encoding="utf-8")
    options = IngestConfig(exclude=["drafts"]).read_options()
    with pytest.raises(ValueError, match=re.escape(f"every file under {notes} is left out by exclude ['drafts']")):
        iter_documents(notes, options=options)
    (notes / "drafts" / "tides.md").unlink()
    with pytest.raises(ValueError, match=re.escape(f"no files under {notes} (hidden files and folders")):
        iter_documents(notes)


def test_exclude_leaves_out_files_and_folders_as_a_gitignore_does(tmp_path: Path, caplog):
    names = ["notes.txt", "docs/a.md", "docs/drafts/b.md", "Drafts/c.md", "node_modules/pkg/readme.md"]
    names += ["site/page.min.html", "site/page.html", "build/x.md"]
    for name in names:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("text", encoding="utf-8")
    patterns = ("node_modules", "*.min.html", "docs/drafts/*", "build/")
    with caplog.at_level(logging.INFO, logger="c2v_rag.documents.files"):
        docs = iter_documents(tmp_path, options=ReadOptions(exclude=patterns), log=ReadLog())
        read = sorted(Path(d.metadata["source"]).relative_to(tmp_path.resolve()).as_posix() for d in docs)
    assert read == ["Drafts/c.md", "docs/a.md", "notes.txt", "site/page.html"]  # case-sensitive, as git is
    assert any("Left out 4 files and folders" in r.getMessage() for r in caplog.records)
    # A pattern written as a suffix matches no visible name (only a hidden file's, which is never read): the run
    # says so, naming the glob that does what it meant.
    caplog.clear()
    docs = list(iter_documents(tmp_path, options=ReadOptions(exclude=(".html", ".md", ".git")), log=ReadLog()))
    assert len(docs) == len(names)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warned == [
        f"exclude '.html' leaves out no file under {tmp_path.resolve()}: a pattern matches whole names, and 2 files "
        "end with '.html'; to leave them out, pass '*.html' (--exclude '*.html')",
        f"exclude '.md' leaves out no file under {tmp_path.resolve()}: a pattern matches whole names, and 5 files "
        "end with '.md'; to leave them out, pass '*.md' (--exclude '*.md')",
    ]
    # A file named alone is read: it was asked for.
    assert [d.text for d in iter_documents(tmp_path / "build" / "x.md", options=ReadOptions(exclude=patterns))] == [
        "text"
    ]


def test_links_that_lead_nowhere_are_named(tmp_path: Path, caplog):
    # A folder of broken links said "no files under X (hidden files ... are left out)", and beside real files they
    # were counted nowhere (a messy-folder walkthrough).
    links = tmp_path / "links"
    links.mkdir()
    (links / "a.txt").symlink_to(links / "gone.txt")
    (links / "loop.md").symlink_to(links / "loop.md")
    with pytest.raises(ValueError) as info:
        iter_documents(links)
    assert str(info.value) == (
        f"no file to read under {links}: 2 links that lead to nothing or in a loop (a.txt -> {links / 'gone.txt'}, ...)"
    )
    (links / "real.txt").write_text("text", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="c2v_rag.documents.files"):
        assert [d.text for d in iter_documents(links)] == ["text"]
    assert [r.getMessage() for r in caplog.records] == [
        f"Left out 2 links that lead to nothing or in a loop (a.txt -> {links / 'gone.txt'}, ...) under {links}"
    ]


def test_a_file_that_cannot_be_read_when_its_turn_comes_is_named_with_the_fix(tmp_path: Path):
    """Under on_error='raise' the error was Python's own ("[Errno 13] Permission denied: '.../secret.txt'", from
    a messy-folder walkthrough), naming no fix; a file gone between the listing and its reading is the same path."""
    (tmp_path / "a.txt").write_text("first file")
    (tmp_path / "b.txt").write_text("second file")
    docs = iter_documents(tmp_path)  # listed now, read as consumed
    (tmp_path / "b.txt").unlink()
    with pytest.raises(
        FileNotFoundError,
        match=r"b\.txt: it cannot be read \(No such file or directory\); check "
        r"it, or pass on_error='continue' to skip it",
    ):
        list(docs)
    (tmp_path / "b.txt").write_text("second file")
    log = ReadLog()
    docs = iter_documents(tmp_path, options=ReadOptions(on_error="continue"), log=log)
    (tmp_path / "b.txt").unlink()
    assert [d.text for d in docs] == ["first file"] and log.skipped[0].reason.startswith("it cannot be read")
