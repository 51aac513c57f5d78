"""Archives (.zip, .tar, .tgz) and compressed files (.gz, .bz2, .xz): each file inside read as the same file in a
folder is, checked against the archive extracted by the standard library and read as a folder."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import tarfile
import zipfile
from pathlib import Path

import pytest
from format_files import write_docx
from rag_helpers import make_text

from c2v_rag.documents.documents import iter_documents
from c2v_rag.documents.files import ReadLog, ReadOptions
from c2v_rag.documents.formats import archives
from c2v_rag.documents.source_document import SourceDocument


def read(path: Path, **options) -> tuple[list[SourceDocument], ReadLog]:
    log = ReadLog()
    return list(iter_documents(path, options=ReadOptions(**options), log=log)), log


def members(tmp_path: Path) -> dict[str, bytes]:
    """An export's files: Markdown with front matter, a Word file, a CSV table, text in a subfolder."""
    docx = write_docx(tmp_path / "handbook.docx").read_bytes()
    return {
        "guide/intro.md": f"---\ntitle: Intro\ntags: [tides]\n---\n{make_text(0, sentences=3)}".encode(),
        "guide/handbook.docx": docx,
        "faq.csv": b"question,answer\nWhen is high tide?,Twice a day.\nWhat is a neap tide?,A small one.\n",
        "notes/deep/moon.txt": make_text(1, sentences=2).encode(),
    }


def write_zip(path: Path, files: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(path, "w", method) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return path


def as_folder(files: dict[str, bytes], folder: Path) -> Path:
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    return folder


def named(docs: list[SourceDocument], place: Path) -> list[tuple]:
    """The documents with ``place`` (an archive's path, or the folder it was extracted to) written as PLACE."""

    def under(text: str) -> str:
        return text.replace(place.resolve().as_posix(), "PLACE")

    return [
        (
            under(d.doc_id),
            d.text,
            d.pages,
            d.lead,
            under(d.source or ""),
            {k: under(v) if isinstance(v, str) else v for k, v in d.metadata.items() if k != "archive"},
        )
        for d in docs
    ]


def test_a_zip_reads_as_the_folder_it_extracts_to_each_document_named_by_the_archive_and_member(tmp_path):
    pytest.importorskip("docx")
    files = members(tmp_path)
    archive = write_zip(tmp_path / "export.zip", files)
    extracted = tmp_path / "extracted"
    zipfile.ZipFile(archive).extractall(extracted)
    got, log = read(archive)
    want, _ = read(extracted)
    assert log.files_skipped == 0 and len(got) == 5  # the table's two rows, the Word, Markdown and text files
    assert named(got, archive) == named(want, extracted)
    where = archive.resolve()
    assert got[0].doc_id == f"{where.as_posix()}/faq.csv:1" and got[0].source == f"{where}/faq.csv"
    intro = next(d for d in got if d.doc_id.endswith("intro.md"))
    assert intro.metadata == {
        "source": f"{where}/guide/intro.md",
        "file_name": "intro.md",
        "title": "Intro",
        "tags": ["tides"],
        "archive": str(where),
    }
    assert {d.source_root for d in got} == {str(where)}


def test_hidden_files_macos_forks_and_other_suffixes_are_left_out_text_suffixes_and_exclude_apply(tmp_path):
    files = {
        "docs/a.md": b"# A\n\nKept.",
        "docs/.draft.md": b"hidden",
        ".git/config.md": b"hidden folder",
        "__MACOSX/docs/._a.md": b"\x00\x05\x16\x07 resource fork",
        "docs/logo.png": b"\x89PNG\r\n\x1a\n",
        "src/tool.py": b"def tide():\n    return 2\n",
        "drafts/b.md": b"Left out by exclude.",
    }
    folder = tmp_path / "folder"
    folder.mkdir()
    write_zip(folder / "export.zip", files)
    docs, log = read(folder, text_suffixes=(".py",), exclude=("export.zip/drafts/*",))
    assert [Path(d.doc_id).relative_to(folder.resolve()).as_posix() for d in docs] == [
        "export.zip/docs/a.md",
        "export.zip/src/tool.py",
    ]
    assert log.files_skipped == 0
    # Named alone, the archive is the root: patterns match the path inside it.
    docs, _ = read(folder / "export.zip", exclude=("drafts/*", "*.md"))
    assert docs == []


def test_tar_archives_and_compressed_files_read_as_the_files_they_hold(tmp_path):
    files = {"manual/neap.txt": make_text(2).encode(), "manual/spring.md": b"# Spring\n\nBig tides."}
    folder = tmp_path / "folder"
    folder.mkdir()
    for name, mode in (("docs.tar", "w"), ("docs.tgz", "w:gz"), ("docs.tar.gz", "w:gz"), ("docs.tar.xz", "w:xz")):
        with tarfile.open(folder / name, mode) as tar:
            for member, data in files.items():
                info = tarfile.TarInfo(f"./{member}")  # as `tar -C dir -czf x.tgz .` writes them
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            link = tarfile.TarInfo("./manual/latest.md")
            link.type, link.linkname = tarfile.SYMTYPE, "spring.md"
            tar.addfile(link)  # a link holds no document of its own
    text = b"# Notes\n\nCompressed alone."
    (folder / "notes.md.gz").write_bytes(gzip.compress(text))
    (folder / "tides.txt.bz2").write_bytes(bz2.compress(text))
    (folder / "notes.rst.xz").write_bytes(lzma.compress(text))
    (folder / "changelog.gz").write_bytes(gzip.compress(b"no suffix inside"))  # left out, as other suffixes are
    (folder / "data.bin.gz").write_bytes(gzip.compress(b"\x00\x01"))
    docs, log = read(folder)
    where = folder.resolve().as_posix()
    ids = [d.doc_id.removeprefix(where + "/") for d in docs]
    tars = [
        f"{t}/manual/{m}"
        for t in ("docs.tar", "docs.tar.gz", "docs.tar.xz", "docs.tgz")
        for m in ("neap.txt", "spring.md")
    ]
    assert ids == [*tars, "notes.md.gz", "notes.rst.xz", "tides.txt.bz2"] and log.files_skipped == 0
    alone = {d.doc_id.removeprefix(where + "/"): d for d in docs if "docs.t" not in d.doc_id}
    assert alone["notes.md.gz"].text == text.decode() and alone["notes.md.gz"].metadata == {
        "source": f"{folder.resolve()}/notes.md.gz",
        "file_name": "notes.md.gz",
    }
    assert alone["tides.txt.bz2"].text == alone["notes.rst.xz"].text == text.decode()
    spring = next(d for d in docs if d.doc_id.endswith("docs.tgz/manual/spring.md"))
    assert spring.text == "# Spring\n\nBig tides." and spring.metadata["archive"] == str(folder.resolve() / "docs.tgz")
    with pytest.raises(
        ValueError, match=r"changelog.gz: a compressed file of a type c2v_rag does not read \(no suffix"
    ):
        read(folder / "changelog.gz")


def test_archives_inside_archives_are_read_to_a_depth_and_named_through_each(tmp_path, monkeypatch):
    inner = write_zip(tmp_path / "inner.zip", {"deep/note.md": b"# Deep\n\nThe innermost."})
    middle = write_zip(tmp_path / "middle.zip", {"b/inner.zip": inner.read_bytes(), "b/keep.md": b"Middle."})
    outer = write_zip(tmp_path / "outer.zip", {"a/middle.zip": middle.read_bytes()})
    docs, log = read(outer)
    where = outer.resolve()
    assert [(d.doc_id, d.metadata["archive"], d.metadata["file_name"]) for d in docs] == [
        (f"{where}/a/middle.zip/b/inner.zip/deep/note.md", f"{where}/a/middle.zip/b/inner.zip", "note.md"),
        (f"{where}/a/middle.zip/b/keep.md", f"{where}/a/middle.zip", "keep.md"),
    ]
    docs, _ = read(outer, exclude=("a/middle.zip/b/inner.zip/deep/*",))  # patterns see through every archive
    assert [d.text for d in docs] == ["Middle."]
    monkeypatch.setattr(archives, "MAX_NESTING", 2)
    docs, log = read(outer)
    assert [d.text for d in docs] == ["Middle."]
    (skip,) = log.skipped
    assert skip.where == f"{where}/a/middle.zip/b/inner.zip" and "nested more than 2 deep" in skip.reason


def test_what_cannot_be_extracted_is_skipped_by_its_member_path_and_keeps_the_archive_incomplete(tmp_path):
    good = make_text(3).encode()
    archive = write_zip(
        tmp_path / "mixed.zip",
        {"good.md": good, "damaged.md": b"x" * 4000, "big.md": b"y" * 5000, "locked.md": b"z", "bin.md": b"\x00" * 64},
        zipfile.ZIP_STORED,
    )
    data = bytearray(archive.read_bytes())
    data[data.index(b"x" * 4000) + 100] = ord("!")  # the stored bytes no longer match their CRC
    # The encryption flag, as a password-protected member has it, in its local and its central header.
    data[zipfile.ZipFile(io.BytesIO(data)).getinfo("locked.md").header_offset + 6] |= 0x1
    central = data.index(b"PK\x01\x02")
    while data[central + 46 : central + 46 + 9] != b"locked.md":
        central = data.index(b"PK\x01\x02", central + 4)
    data[central + 8] |= 0x1
    archive.write_bytes(bytes(data))
    docs, log = read(archive, max_file_bytes=4500)
    where = archive.resolve()
    assert [d.doc_id for d in docs] == [f"{where.as_posix()}/good.md"] and docs[0].text == good.decode()
    reasons = {Path(s.where).relative_to(where).as_posix(): s.reason for s in log.skipped}
    assert set(reasons) == {"damaged.md", "big.md", "locked.md", "bin.md"}
    assert "cannot be extracted (BadZipFile: Bad CRC-32" in reasons["damaged.md"]
    assert "5,000 bytes, over the limit of 4,500" in reasons["big.md"]
    assert "encrypted (password-protected)" in reasons["locked.md"]
    assert reasons["bin.md"].startswith("not a text file")
    assert not any("c2v-archive-" in s.where + s.reason for s in log.skipped)  # never the temporary copy's path
    assert log.covers(f"{where}/damaged.md") and not log.covers(f"{where}/good.md")
    # A compressed file's size is known once it is read: cut at the limit all the same.
    (tmp_path / "huge.md.gz").write_bytes(gzip.compress(b"w" * 6000))
    (tmp_path / "broken.md.gz").write_bytes(gzip.compress(good)[:-12] + b"garbage!")
    (tmp_path / "truncated.zip").write_bytes(archive.read_bytes()[:200])
    whole = tmp_path / "whole.tgz"
    with tarfile.open(whole, "w:gz") as tar:
        tar.add(archive, "mixed.zip")
    (tmp_path / "truncated.tgz").write_bytes(whole.read_bytes()[:300])
    whole.unlink()
    docs, log = read(tmp_path, max_file_bytes=4500, exclude=("mixed.zip",))
    reasons = {Path(s.where).name: s.reason for s in log.skipped}
    assert docs == [] and "over the limit of 4,500 bytes" in reasons["huge.md.gz"]
    assert "cannot be extracted" in reasons["broken.md.gz"]
    assert "not a readable .zip archive file (BadZipFile" in reasons["truncated.zip"]
    assert "not a readable .tgz archive file" in reasons["truncated.tgz"]


def test_a_compressed_file_reached_through_a_link_of_another_name_reads_as_text(tmp_path):
    """Debian's docs link NEWS.rst.gz -> changelog.gz: the link is listed by its name, the file read by its own."""
    folder = tmp_path / "doc"
    folder.mkdir()
    (folder / "changelog.gz").write_bytes(gzip.compress(b"wadllib (1.3.6)\n\n  * Fix the tide tables."))
    (folder / "NEWS.rst.gz").symlink_to("changelog.gz")
    (doc,), log = read(folder)
    assert doc.doc_id == (folder / "changelog.gz").resolve().as_posix() and log.files_skipped == 0
    assert doc.text == "wadllib (1.3.6)\n\n  * Fix the tide tables." and doc.metadata["file_name"] == "changelog.gz"


def test_progress_moves_through_an_archive_member_by_member(tmp_path):
    """The log's document_span (what the progress bar's ETA reads within a file): each member's share of the
    archive by its size (as a folder's files weigh), and within it the member's own span (a JSONL file's records by
    their bytes)."""
    records = b'{"id": "r1", "text": "first"}\n{"id": "r2", "text": "second"}\n'
    members = {"a.md": b"A.", "b.jsonl": records, "c.md": b"Long. " * 5000, "d.md": b"D."}
    archive = write_zip(tmp_path / "a.zip", members)
    log = ReadLog()
    spans = [(doc.doc_id, log.document_span) for doc in iter_documents(archive, options=ReadOptions(), log=log)]
    assert [doc_id.split("/")[-1] for doc_id, _ in spans] == ["a.md", "r1", "r2", "c.md", "d.md"]
    weights = [len(data) + 1024 for data in members.values()]  # each member also weighs 1 KiB
    a, b, c, d = (sum(weights[:i]) / sum(weights) for i in range(1, 5))
    r1 = a + (b - a) * (records.index(b"\n") + 1) / len(records)  # r1's line with its newline, within b.jsonl's share
    want = [(0, a), (a, r1), (r1, b), (b, c), (c, d)]
    assert d == pytest.approx(1.0) and c - b > 0.8  # the long member is most of the archive
    assert [value for _, span in spans for value in span] == pytest.approx([value for span in want for value in span])


def test_a_folders_files_are_listed_with_the_bytes_they_hold(tmp_path):
    """What a progress bar weights each file by: its size, and for a gzip file or a ZIP archive what it holds
    (compressed text is several times its size to read); bzip2 and xz say theirs only when decompressed."""
    folder = tmp_path / "docs"
    folder.mkdir()
    text = ("The tide turns twice a day. " * 400).encode()
    (folder / "a.md").write_bytes(text)
    (folder / "b.md.gz").write_bytes(gzip.compress(text))
    (folder / "c.md.bz2").write_bytes(bz2.compress(text))
    write_zip(folder / "d.zip", {"one.md": text, "two.md": text[:100]})
    with io.BytesIO() as packed:
        with tarfile.open(fileobj=packed, mode="w") as tar:
            info = tarfile.TarInfo("inner.md")
            info.size = len(text)
            tar.addfile(info, io.BytesIO(text))
        tar_bytes = packed.getvalue()
    (folder / "e.tgz").write_bytes(gzip.compress(tar_bytes))
    (folder / "f.md.gz").write_bytes(b"not gzip at all, despite the name")
    log = ReadLog()
    list(iter_documents(folder, options=ReadOptions(on_error="continue"), log=log))
    on_disk = {f.name: f.stat().st_size for f in folder.iterdir()}
    assert on_disk["b.md.gz"] < len(text) / 10  # the repeated sentence compresses well
    want = [len(text), len(text), on_disk["c.md.bz2"], len(text) + 100, len(tar_bytes), on_disk["f.md.gz"]]
    assert log.file_sizes == want and log.files_listed == 6
