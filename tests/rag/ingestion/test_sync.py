"""``ingest(..., sync=True)``: a collection that mirrors its folders, on real embedded Qdrant.

The reference for every sync is a clean ingest of the folder as it is now, into a new store:
after a sync the collection must hold exactly those points, plus whatever other sources wrote.
"""

from __future__ import annotations

import shlex
import shutil
from contextlib import closing
from pathlib import Path

import pytest

for _module in ("qdrant_client", "llama_index.core", "tenacity"):
    pytest.importorskip(_module)

from qdrant_client import QdrantClient
from rag_helpers import make_text, stored_points

import c2v_rag


@pytest.fixture
def ingest_into(tiny_variant, ingest_config):
    def run(paths, store: Path, **kwargs):
        return c2v_rag.ingest(paths, path=store, collection="kb", model=tiny_variant, config=ingest_config, **kwargs)

    return run


def points(store: Path) -> dict[str, dict]:
    with closing(QdrantClient(path=str(store))) as client:
        return stored_points(client, "kb")


def docs_of(store: Path) -> set[str]:
    return {Path(p["doc_id"]).name if "/" in p["doc_id"] else p["doc_id"] for p in points(store).values()}


def make_folder(root: Path, names: list[str]) -> Path:
    for i, name in enumerate(names):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(make_text(i, sentences=2), encoding="utf-8")
    return root


def clean_ingest(ingest_into, folder: Path, tmp_path: Path, name: str) -> dict[str, dict]:
    ingest_into(folder, tmp_path / name)
    return points(tmp_path / name)


def test_sync_mirrors_deleted_renamed_and_moved_files(tmp_path, ingest_into):
    folder = make_folder(tmp_path / "docs", ["a.txt", "b.md", "c.txt", "sub/d.txt", "sub/e.md"])
    store = tmp_path / "store"
    first = ingest_into(folder, store, sync=True)
    assert first.documents == 5 and first.documents_deleted == 0

    (folder / "a.txt").unlink()  # deleted
    (folder / "b.md").rename(folder / "b2.md")  # renamed
    shutil.move(str(folder / "sub"), str(folder / "moved"))  # a folder moved inside the root
    # Without sync (the default) an ingest only adds: the old documents stay.
    plain = ingest_into(folder, store)
    assert plain.documents_deleted == 0 and {"a.txt", "b.md", "d.txt", "b2.md"} <= docs_of(store)

    result = ingest_into(folder, store, sync=True)
    assert result.documents_deleted == 4 and result.chunks_written == 0  # a.txt, b.md, sub/d.txt, sub/e.md
    assert points(store) == clean_ingest(ingest_into, folder, tmp_path, "clean")
    again = ingest_into(folder, store, sync=True)
    assert (again.documents_deleted, again.chunks_written) == (0, 0)


def test_files_left_out_by_exclude_are_not_read_and_a_sync_deletes_their_points(tmp_path, ingest_into):
    folder = make_folder(tmp_path / "docs", ["a.txt", "drafts/b.md", "node_modules/pkg/c.md", "site/d.min.html"])
    store = tmp_path / "store"
    first = ingest_into(folder, store, sync=True, exclude=["node_modules", "*.min.html"])
    assert first.documents == 2 and docs_of(store) == {"a.txt", "b.md"}
    # Left out later: without sync its points stay; with sync they go, as a deleted file's would.
    plain = ingest_into(folder, store, exclude=["node_modules", "*.min.html", "drafts/*"])
    assert plain.documents == 1 and docs_of(store) == {"a.txt", "b.md"}
    synced = ingest_into(folder, store, sync=True, exclude=["node_modules", "*.min.html", "drafts/*"])
    assert synced.documents_deleted == 1 and docs_of(store) == {"a.txt"}
    with pytest.raises(ValueError, match="'/' is no pattern"):
        ingest_into(folder, store, exclude=["/"])


def test_text_suffixes_add_files_and_a_sync_without_them_deletes_their_points(tmp_path, ingest_into):
    folder = make_folder(tmp_path / "docs", ["a.txt", "src/tide.py", "logs/run.log"])
    store = tmp_path / "store"
    first = ingest_into(folder, store, sync=True, text_suffixes=[".py", "log"])
    assert first.documents == 3 and docs_of(store) == {"a.txt", "tide.py", "run.log"}
    again = ingest_into(folder, store, sync=True, text_suffixes=[".py", ".log"])
    assert (again.documents_unchanged, again.chunks_written) == (3, 0)
    synced = ingest_into(folder, store, sync=True, text_suffixes=[".py"])
    assert synced.documents_deleted == 1 and docs_of(store) == {"a.txt", "tide.py"}


def test_a_page_in_two_formats_is_stored_once_and_a_sync_deletes_the_other_copys_points(tmp_path, ingest_into):
    folder = make_folder(tmp_path / "docs", ["guide.md", "other.txt"])
    (folder / "guide.html").write_text("<h1>Guide</h1><p>" + make_text(0, sentences=2) + "</p>", encoding="utf-8")
    store = tmp_path / "store"
    every = ingest_into(folder, store, sync=True, every_format=True)
    assert every.documents == 3 and every.files_in_other_formats == 0
    assert docs_of(store) == {"guide.md", "guide.html", "other.txt"}
    once = ingest_into(folder, store, sync=True)
    assert (once.documents_deleted, once.files_in_other_formats) == (1, 1)
    assert docs_of(store) == {"guide.md", "other.txt"}
    assert "; left out 1 copy of pages read in another format" in once.summary()
    assert points(store) == clean_ingest(ingest_into, folder, tmp_path, "clean")


def test_embed_counts_the_copies_it_left_out_as_ingest_does(tmp_path, tiny_variant, ingest_config):
    folder = make_folder(tmp_path / "docs", ["guide.md", "other.txt"])
    (folder / "guide.html").write_text("<h1>Guide</h1><p>" + make_text(0, sentences=2) + "</p>", encoding="utf-8")
    embedded = c2v_rag.embed(folder, tmp_path / "vectors", model=tiny_variant, config=ingest_config)
    assert (embedded.documents, embedded.files_in_other_formats) == (2, 1)
    assert "; left out 1 copy of pages read in another format" in embedded.summary()
    every_copy = ingest_config.model_copy(update={"every_format": True})
    every = c2v_rag.embed(folder, tmp_path / "every", model=tiny_variant, config=every_copy)
    assert (every.documents, every.files_in_other_formats) == (3, 0) and "another format" not in every.summary()


def test_embed_counts_the_files_it_skipped_as_ingest_does(tmp_path, ingest_into, tiny_variant, ingest_config):
    folder = make_folder(tmp_path / "docs", ["guide.md", "other.txt"])
    (folder / "scan.pdf").write_bytes(b"not a PDF at all")
    keep_going = ingest_config.model_copy(update={"on_error": "continue"})
    ingested = c2v_rag.ingest(folder, path=tmp_path / "store", collection="kb", model=tiny_variant, config=keep_going)
    embedded = c2v_rag.embed(folder, tmp_path / "vectors", model=tiny_variant, config=keep_going)
    for result in (ingested, embedded):
        assert (result.documents, result.files_skipped, result.records_skipped) == (2, 1, 0)
        assert [Path(s.where).name for s in result.skipped] == ["scan.pdf"]
        assert "; skipped 1 file" in result.summary()


def test_a_missing_path_with_sync_deletes_nothing(tmp_path, ingest_into):
    folder = make_folder(tmp_path / "docs", ["a.txt", "b.txt"])
    store = tmp_path / "store"
    ingest_into(folder, store, sync=True)
    before = points(store)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        ingest_into([tmp_path / "dcos"], store, sync=True)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        ingest_into([folder, tmp_path / "typo"], store, sync=True)  # one good path does not make it run
    with pytest.raises(FileNotFoundError, match="looks like a path, and no file or folder is there"):
        ingest_into(str(tmp_path / "dcos"), store, sync=True)  # a typo'd path string (it was embedded as a text)
    for name in ("a.txt", "b.txt"):
        (folder / name).unlink()
    with pytest.raises(ValueError, match=r"no files under .*docs \(hidden files") as info:
        ingest_into(folder, store, sync=True)  # an emptied folder is refused too (an unmounted disk looks the same)
    assert points(store) == before
    # ... with the command that deletes what it held, which does.
    command = str(info.value).split("delete them with `")[1].split("`")[0]
    assert command == f"c2v-rag delete --file {folder} --path {store} --collection kb"
    from c2v_rag.cli import main

    assert main(shlex.split(command)[1:]) == 0 and points(store) == {}


def test_two_sources_sharing_a_collection_keep_each_others_points(tmp_path, ingest_into):
    one = make_folder(tmp_path / "one", ["a.txt", "b.txt"])
    two = make_folder(tmp_path / "two", ["c.txt", "d.txt"])
    store = tmp_path / "store"
    ingest_into(one, store, sync=True)
    ingest_into(two, store, sync=True)
    ingest_into([{"id": "note", "text": make_text(9, sentences=2)}], store)  # not from a path
    assert docs_of(store) == {"a.txt", "b.txt", "c.txt", "d.txt", "note"}

    (one / "a.txt").unlink()
    result = ingest_into(one, store, sync=True)  # sees only one/: two/ and the note stay
    assert result.documents_deleted == 1 and docs_of(store) == {"b.txt", "c.txt", "d.txt", "note"}
    (two / "d.txt").unlink()
    ingest_into([two / "c.txt"], store, sync=True)  # a file root: d.txt is not its business
    assert docs_of(store) == {"b.txt", "c.txt", "d.txt", "note"}
    ingest_into(two, store, sync=True)
    assert docs_of(store) == {"b.txt", "c.txt", "note"}


def test_files_that_cannot_be_read_keep_their_points(tmp_path, ingest_into):
    folder = make_folder(tmp_path / "docs", ["a.txt", "b.txt"])
    (folder / "r.jsonl").write_text(
        f'{{"id": "r1", "text": "{make_text(5, 1)}"}}\n{{"id": "r2", "text": "{make_text(6, 1)}"}}\n', encoding="utf-8"
    )
    store = tmp_path / "store"
    ingest_into(folder, store, sync=True)
    (folder / "a.txt").write_bytes(b"\x00\x01binary now" * 10)  # not text: skipped, kept
    (folder / "r.jsonl").write_text(f'{{"id": "r1", "text": "{make_text(5, 1)}"}}\n{{broken\n', encoding="utf-8")  # noqa: E501
    result = ingest_into(folder, store, sync=True, on_error="continue")
    assert (result.files_skipped, result.records_skipped, result.documents_deleted) == (1, 1, 0)
    assert docs_of(store) == {"a.txt", "b.txt", "r1", "r2"}
    # Once the JSONL file reads cleanly, the record removed from it is deleted.
    (folder / "r.jsonl").write_text(f'{{"id": "r1", "text": "{make_text(5, 1)}"}}\n', encoding="utf-8")
    result = ingest_into(folder, store, sync=True)
    assert result.documents_deleted == 1 and docs_of(store) == {"a.txt", "b.txt", "r1"}


def test_a_sync_mirrors_the_files_inside_an_archive(tmp_path, ingest_into):
    """A file gone from a zip is deleted as a file gone from a folder is; one that cannot be extracted keeps its
    points; an unchanged archive is read again but nothing is embedded again."""
    import zipfile

    def write_zip(files: dict[str, bytes]) -> None:
        with zipfile.ZipFile(folder / "export.zip", "w", zipfile.ZIP_STORED) as archive:
            for name, data in files.items():
                archive.writestr(name, data)

    folder = make_folder(tmp_path / "docs", ["a.txt"])
    files = {f"guide/{n}.md": make_text(10 + i, sentences=2).encode() for i, n in enumerate(("b", "c", "d"))}
    write_zip(files)
    store = tmp_path / "store"
    first = ingest_into(folder, store, sync=True)
    assert first.documents == 4 and docs_of(store) == {"a.txt", "b.md", "c.md", "d.md"}
    again = ingest_into(folder, store, sync=True)
    assert (again.chunks_written, again.documents_deleted) == (0, 0) and again.chunks_unchanged == first.chunks_written

    del files["guide/c.md"]
    write_zip(files)
    result = ingest_into(folder, store, sync=True)
    assert (result.documents_deleted, result.chunks_written) == (1, 0) and docs_of(store) == {"a.txt", "b.md", "d.md"}
    assert points(store) == clean_ingest(ingest_into, folder, tmp_path, "clean")

    write_zip({**files, "guide/d.md": b"\x00\x01 binary now" * 8})  # d.md cannot be read: its points stay
    result = ingest_into(folder, store, sync=True, on_error="continue")
    assert (result.files_skipped, result.documents_deleted) == (1, 0) and docs_of(store) == {"a.txt", "b.md", "d.md"}


def test_a_file_read_through_another_root_is_claimed_by_it(tmp_path, ingest_into):
    folder = make_folder(tmp_path / "docs", ["a.txt", "sub/b.txt", "sub/c.txt"])
    store = tmp_path / "store"
    ingest_into(folder / "sub", store)  # recorded under docs/sub
    ingest_into(folder, store, sync=True)  # unchanged chunks now under docs
    roots = {p["source_root"] for p in points(store).values()}
    assert roots == {str(folder.resolve())}
    (folder / "sub" / "c.txt").unlink()
    assert ingest_into(folder, store, sync=True).documents_deleted == 1
    assert docs_of(store) == {"a.txt", "b.txt"}


def test_a_file_read_through_a_link_is_not_deleted_with_the_link_while_it_is_there(tmp_path, ingest_into):
    """A sync of one folder deleted another folder's document: its file had been read through a link under the
    first (Debian's /usr/share/doc/cpp/README.Bugs -> ../gcc-12/README.Bugs), and the link went."""
    ext = make_folder(tmp_path / "ext", ["outside.txt", "keep.txt"])
    mine = make_folder(tmp_path / "mine", ["a.txt"])
    (mine / "link.txt").symlink_to(ext / "outside.txt")
    store = tmp_path / "store"
    ingest_into(ext, store, sync=True)
    ingest_into(mine, store, sync=True)  # outside.txt is now recorded under mine/
    (mine / "link.txt").unlink()
    assert ingest_into(mine, store, sync=True).documents_deleted == 0
    assert docs_of(store) == {"a.txt", "keep.txt", "outside.txt"}
    (ext / "outside.txt").unlink()  # its file gone too: the next sync of the folder that last read it deletes it
    ingest_into(mine, store, sync=True)
    assert docs_of(store) == {"a.txt", "keep.txt"}
