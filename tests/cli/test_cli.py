"""``c2v-rag ingest`` and ``c2v-rag search`` on a folder of files, with a tiny model."""

from __future__ import annotations

import json
import re
import sys

import pytest

# The RAG extras (pip install 'c2v-rag[all]'); without them these tests are skipped, visibly.
for _module in ("qdrant_client", "llama_index.core", "tenacity"):
    pytest.importorskip(_module)

from rag_helpers import make_text, rerank_auto_in_int8_on_avx2

import c2v_rag
from c2v_rag.cli import main


@pytest.fixture
def folder(tmp_path):
    docs = tmp_path / "docs"
    (docs / "nested").mkdir(parents=True)
    (docs / "a.txt").write_text(make_text(1), encoding="utf-8")
    (docs / "nested" / "b.md").write_text(make_text(2), encoding="utf-8")
    (docs / "c.jsonl").write_text(f'{{"id": "c1", "text": "{make_text(3)}"}}\n', encoding="utf-8")
    return docs


def ingested(folder, tmp_path, variant, collection: str) -> list[str]:
    """``folder`` ingested into a new embedded store with ``variant`` (small chunks): the flags that name it."""
    common = ["--path", str(tmp_path / "qdrant"), "--collection", collection]
    chunking = ["--chunk-size", "24", "--chunk-overlap", "4"]
    assert main(["ingest", str(folder), *common, "--model", str(variant), *chunking, "-q"]) == 0
    return common


def as_program(*args: str) -> dict:
    """``subprocess`` arguments that run ``c2v-rag ARGS`` from this checkout, one thread, as a user's shell would."""
    import os
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(repo), "OMP_NUM_THREADS": "1"}
    return {"args": [sys.executable, "-m", "c2v_rag.cli", *args], "env": env, "cwd": repo}


def test_ingest_and_search_print_readable_results(folder, tmp_path, tiny_variant, capsys):
    store = str(tmp_path / "qdrant")
    args = ["--path", store, "--collection", "cli"]
    assert (
        main(
            [
                "ingest",
                str(folder),
                *args,
                "--model",
                str(tiny_variant),
                "--chunk-size",
                "24",
                "--chunk-overlap",
                "4",
                "-q",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert out.startswith("ingested 3 documents, 25 chunks (25 written, 0 unchanged) into 'cli'")
    assert (
        main(
            [
                "ingest",
                str(folder),
                *args,
                "--model",
                str(tiny_variant),
                "--chunk-size",
                "24",
                "--chunk-overlap",
                "4",
                "-q",
            ]
        )
        == 0
    )
    assert "(0 written, 25 unchanged)" in capsys.readouterr().out

    query = make_text(2)[:40]
    assert main(["search", query, *args, "--top-k", "3"]) == 0  # the model is read from the collection
    lines = capsys.readouterr().out.splitlines()
    hits = c2v_rag.search(query, top_k=3, path=store, collection="cli")
    assert len(lines) == 6
    for rank, hit in enumerate(hits, 1):
        header, snippet = lines[2 * rank - 2], lines[2 * rank - 1]
        assert header.startswith(f"{rank:2d}. {hit.score:.4f}  {hit.source}  (chunk {hit.chunk_index})")
        assert snippet.startswith("    ") and " ".join(hit.text.split())[:20] in snippet
    # --snippet-chars 0 printed a traceback's last line ('invalid width 0'), and 3 printed '...' alone.
    assert main(["search", query, *args, "--top-k", "3", "--snippet-chars", "0"]) == 0
    assert capsys.readouterr().out.splitlines() == [line for line in lines if not line.startswith("    ")]
    assert main(["search", query, *args, "--top-k", "3", "--snippet-chars", "3"]) == 0
    shown = [line for line in capsys.readouterr().out.splitlines() if line.startswith("    ")]
    assert shown == ["    " + " ".join(hit.text.split())[:3].rstrip() + " ..." for hit in hits]
    with pytest.raises(SystemExit):
        main(["search", query, *args, "--snippet-chars", "-1"])
    assert "'-1': pass the characters to show, 0 or more" in capsys.readouterr().err
    assert {h.source.rsplit("/", 1)[1] for h in c2v_rag.search(query, top_k=100, path=store, collection="cli")} == {
        "a.txt",
        "b.md",
        "c.jsonl",
    }
    # --group-by-document: one line pair per document, each its best chunk.
    assert main(["search", query, *args, "--top-k", "3", "--group-by-document"]) == 0
    lines = capsys.readouterr().out.splitlines()
    best = c2v_rag.search(query, top_k=3, path=store, collection="cli", group_by_document=True)
    assert len(lines) == 6 and len({h.doc_id for h in best}) == 3
    for rank, hit in enumerate(best, 1):
        assert lines[2 * rank - 2].startswith(f"{rank:2d}. {hit.score:.4f}  {hit.source}  (chunk {hit.chunk_index})")


def test_search_shows_the_section_each_hit_starts_in(tmp_path, tiny_variant, capsys):
    """A hit from a page with headings names its section (the innermost headings where the path runs long); one
    from plain text names none, its "#" line being a root prompt."""
    docs = tmp_path / "docs"
    docs.mkdir()
    moon = "The Moon and the Sun pulling on the sea in the spring and neap weeks"
    page = f"# Tides\n\nThe sea's rise and fall.\n\n## Causes\n\n{make_text(2)}\n\n### {moon}\n\n{make_text(3)}"
    (docs / "tides.md").write_text(page, encoding="utf-8")
    (docs / "setup.txt").write_text(f"Setup\n\n{make_text(4)}\n\n# apt install tides\n\n{make_text(5)}")
    common = ingested(docs, tmp_path, tiny_variant, "sections")
    capsys.readouterr()
    query = make_text(3)[:40]
    hits = c2v_rag.search(query, top_k=100, path=common[1], collection="sections", rerank=None)
    assert len({hit.source for hit in hits}) == 2
    shown = {}
    for hit in hits:
        assert hit.start_char is not None
        if hit.source.endswith(".txt"):
            expected = None
        elif hit.start_char < page.index("## Causes"):
            expected = None  # under the title alone
        else:
            expected = "Causes" + f" › {moon}" * (hit.start_char >= page.index(f"### {moon}"))
        assert hit.metadata.get("section") == expected, (hit.source, hit.start_char)
        shown[hit.id] = {None: None, "Causes": "§ Causes", f"Causes › {moon}": f"§ … › {moon}"}[expected]
    assert set(shown.values()) == {None, "§ Causes", f"§ … › {moon}"}
    assert main(["search", query, *common, "--top-k", "100", "--rerank", "none", "--snippet-chars", "0"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(hits)
    for line, hit in zip(lines, hits):
        where = f"{hit.source}  {shown[hit.id]}  (chunk" if shown[hit.id] else f"{hit.source}  (chunk"
        assert where in line, line


def test_errors_are_one_line_with_the_fix(tmp_path, tiny_variant, capsys):
    assert (
        main(
            [
                "search",
                "anything",
                "--path",
                str(tmp_path),
                "--collection",
                "nothing_here",
                "--model",
                str(tiny_variant),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.startswith("error: collection 'nothing_here' does not exist") and "c2v-rag ingest PATH" in err
    assert main(["ingest", str(tmp_path / "missing"), "--path", str(tmp_path), "--model", str(tiny_variant)]) == 2
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("ingest", ["PATH", "--qdrant-url", "--collection", "--path", "--chunk-size", "--sparse", "--versioned"]),
        (
            "search",
            [
                "query",
                "--top-k",
                "--qdrant-url",
                "--collection",
                "--path",
                "--task",
                "--filter",
                "--mode",
                "--fusion",
                "--group-by-document",
            ],
        ),
        ("reindex", ["--collection", "--model", "--sparse", "--drop-previous", "--convert"]),
        ("delete", ["DOC_ID", "--file", "--filter", "--collection", "--path", "--qdrant-url", "--json"]),
    ],
)
def test_help(command, expected, capsys):
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    out = capsys.readouterr().out
    assert info.value.code == 0 and all(option in out for option in expected)


@pytest.mark.parametrize("command", ["ingest", "embed", "adapt"])
def test_help_names_every_suffix_the_commands_read(command, capsys):
    """``ingest --help`` said .txt, .md, .jsonl while ingest reads .parquet too; then it listed all 59 twice."""
    from c2v_rag.documents.files import SUPPORTED_SUFFIXES

    with pytest.raises(SystemExit):
        main([command, "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert all(suffix in out for suffix in SUPPORTED_SUFFIXES), out
    assert out.count(".docm") == 1, out  # once, in PATH's help


def test_formats_lists_every_suffix_and_the_extra_a_missing_reader_needs(capsys, monkeypatch):
    from c2v_rag.documents.files import SUPPORTED_SUFFIXES

    pytest.importorskip("pypdf")
    assert main(["formats"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert all(any(f" {suffix} " in f" {line} " for line in lines) for suffix in SUPPORTED_SUFFIXES)
    pdf = next(line for line in lines if line.startswith("PDF "))
    assert pdf.split()[1:] == [".pdf", "ready"]
    monkeypatch.setitem(sys.modules, "pypdf", None)  # an import of it now fails, as when it is not installed
    assert main(["formats"]) == 0
    pdf = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("PDF "))
    assert pdf.endswith("needs pip install 'c2v-rag[pdf]'")


def test_env_reports_versions_and_cpu_flags_and_hides_secrets(capsys, monkeypatch):
    import json
    from importlib.metadata import version
    from pathlib import Path

    from huggingface_hub import constants

    from c2v_rag.core.devices import SPEED_FLAGS

    monkeypatch.setenv("C2V_RAG_API_KEY", "sk-do-not-print")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # as the variable, set before the import, makes it
    from c2v_rag.hub.variants import VariantDigests

    hashed = []
    real_digests = VariantDigests.of_directory
    monkeypatch.setattr(VariantDigests, "of_directory", lambda *args: hashed.append(args) or real_digests(*args))
    assert main(["env", "--json"]) == 0
    # No variant hashed: on a new machine that converted the preset's base model first (22 s, 517 MB written).
    assert hashed == []
    out = capsys.readouterr().out
    assert "sk-do-not-print" not in out
    facts = json.loads(out)
    assert facts["environment"]["C2V_RAG_API_KEY"] == "(set, hidden)" and facts["environment"]["HF_HUB_OFFLINE"] == "1"
    assert facts["packages"]["torch"] == version("torch") and facts["c2v_rag"]["version"] == c2v_rag.__version__
    assert facts["hub"]["answers"].startswith("not asked (offline mode)")
    assert facts["paths"]["hugging face cache"] == constants.HF_HUB_CACHE
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():  # the flags as Linux lists them, those that decide speed
        listed = next(line for line in cpuinfo.read_text().splitlines() if line.startswith(("flags", "Features")))
        have = [f for f in SPEED_FLAGS if f in listed.split(":", 1)[1].split()]
        assert facts["cpu"]["speed flags"] == (" ".join(have) or "none found")
    # What a search's rerank="auto" does here, as the search decides it (the suite sets $C2V_RAG_RERANK=none).
    assert facts["cpu"]["rerank auto"] == "none"
    monkeypatch.setenv("C2V_RAG_RERANK", "12")
    assert main(["env", "--json"]) == 0
    # The suite keeps float ($C2V_RAG_QUANTIZE=none): the preset's decoder in bf16 where the CPU has it in hardware.
    from c2v_rag.core.devices import cpu_has_native_bf16

    float_dtype = "bfloat16" if cpu_has_native_bf16() else "float32"
    assert json.loads(capsys.readouterr().out)["cpu"]["rerank auto"] == f"the top 12 (the decoder in {float_dtype})"
    assert main(["env"]) == 0
    assert "quantize auto:" in capsys.readouterr().out


def run_python(code: str) -> str:
    """``code`` in a fresh interpreter (what a command imports shows only there), its stdout."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout


def test_watch_ingests_again_at_each_change_until_ctrl_c(tmp_path, tiny_variant):
    """The program itself, as a user runs it: each change to the folder gives one more ingest, Ctrl-C ends it."""
    import os
    import queue
    import signal
    import subprocess
    import threading
    import time
    from pathlib import Path

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text(make_text(0, sentences=3), encoding="utf-8")
    store = tmp_path / "q"
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-m", "c2v_rag.cli", "ingest", str(folder), "--path", str(store), "--sync", "-q"]
    command += ["--model", str(tiny_variant), "--chunk-size", "24", "--watch", "0.2"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lines: queue.Queue[str] = queue.Queue()
    errors: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout], daemon=True).start()
    threading.Thread(target=lambda: [errors.put(line) for line in process.stderr], daemon=True).start()

    def next_line(stream: queue.Queue[str] = lines) -> str:
        try:
            return stream.get(timeout=120)
        except queue.Empty:
            process.kill()
            raise AssertionError(f"no output; stderr: {list(errors.queue)}") from None

    try:
        assert next_line().startswith("ingested 1 document, ")
        assert next_line().startswith(f"watching {folder} every 0.2 s")
        (folder / "b.txt").write_text(make_text(1, sentences=3), encoding="utf-8")
        assert " ingested 2 documents (1 unchanged), " in next_line()  # stamped with the time
        (folder / "a.txt").unlink()
        assert "ingested 1 document (1 unchanged), " in (line := next_line()) and "sync deleted 1 document " in line
        # A failed re-run is one error line, stamped with the time as the summaries are; the watch goes on.
        (folder / "bad.jsonl").write_text("{not json\n", encoding="utf-8")
        assert re.match(r"\d\d:\d\d:\d\d error: .*bad\.jsonl", next_line(errors)), list(errors.queue)
        (folder / "bad.jsonl").unlink()
        assert " ingested 1 document (1 unchanged), " in next_line()
        time.sleep(1)  # past the run's last lines: Ctrl-C now lands between runs, where it ends the watch
    finally:
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=60)
    assert code == 0 and lines.empty()
    hits = c2v_rag.search(make_text(1, sentences=3), top_k=5, path=store, model=str(tiny_variant))
    assert {hit.source.rsplit("/", 1)[-1] for hit in hits} == {"b.txt"}


def test_help_loads_no_model_library():
    code = (
        "import sys\nfrom c2v_rag.cli import main\n"
        "for argv in (['--help'], ['search', '--help'], ['ingest', '--help']):\n"
        "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
        "print('LOADED', sorted(m for m in ('torch', 'transformers', 'numpy', 'qdrant_client') if m in sys.modules))"
    )
    assert run_python(code).splitlines()[-1] == "LOADED []"


def test_ingest_and_embed_dry_runs_list_what_they_would_read_and_load_nothing(tmp_path):
    folder = tmp_path / "docs"
    files = {"a.md": "# Tides\n", "a.html": "<h1>Tides</h1>", "sub/b.txt": "x" * 2000, "c.json": "{}"}
    for name, text in (files | {"node_modules/d.md": "x"}).items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")
    (folder / "new\nline.txt").write_text("odd name", encoding="utf-8")
    store, out = tmp_path / "store", tmp_path / "vectors"
    for argv in (
        ["ingest", str(folder), "--dry-run", "--exclude", "node_modules", "--path", str(store)],
        ["embed", str(folder), "--dry-run", "--exclude", "node_modules", "--out", str(out)],
    ):
        code = (
            "import sys\nfrom c2v_rag.cli import main\n"
            f"code = main({argv!r})\n"
            "heavy = ('transformers', 'tokenizers', 'qdrant_client')\n"
            "print('LOADED', code, sorted(m for m in heavy if m in sys.modules))"
        )
        lines = run_python(code).splitlines()
        root = folder.resolve()
        assert lines == [
            f"    8 bytes  {root / 'a.md'}",
            f"    8 bytes  {root}/new\\nline.txt",
            f"     2.0 kB  {root / 'sub' / 'b.txt'}",
            "would read 3 files, 2.0 kB: text 2 (2.0 kB), Markdown 1 (8 bytes); not read: 1 file of other types "
            "(.json (1)); left out by --exclude: 1 file or folder; left out as copies of pages read in another format: "
            "1 file. Nothing was read, embedded or stored (--dry-run)",
            "LOADED 0 []",
        ], argv[0]
    assert not store.exists() and not out.exists()


def test_search_loads_neither_the_chunker_nor_peft(folder, tmp_path, tiny_variant, capsys):
    store = str(tmp_path / "qdrant")
    assert main(["ingest", str(folder), "--path", store, "--model", str(tiny_variant), "--chunk-size", "24", "-q"]) == 0
    capsys.readouterr()
    code = (
        "import sys\nfrom c2v_rag.cli import main\n"
        f"main(['search', 'vitamin bone loss', '--path', {store!r}, '--json'])\n"
        "print('LOADED', sorted(m for m in ('llama_index.core', 'peft') if m in sys.modules))"
    )
    out = run_python(code)
    assert out.splitlines()[-1] == "LOADED []" and '"score"' in out


def test_sparse_versioned_ingest_then_filtered_hybrid_search_and_reindex(
    folder, tmp_path, tiny_variant, tiny_variant_qwen, capsys
):
    import json

    store = str(tmp_path / "qdrant")
    args = ["--path", store, "--collection", "kb"]
    assert (
        main(
            [
                "ingest",
                str(folder),
                *args,
                "--model",
                str(tiny_variant),
                "--chunk-size",
                "24",
                "--chunk-overlap",
                "4",
                "-q",
                "--sparse",
                "bm25",
                "--versioned",
                "--payload-index",
                "doc_id=keyword",
            ]
        )
        == 0
    )
    assert "25 chunks (25 written, 0 unchanged) into 'kb_v1'" in capsys.readouterr().out

    query = make_text(3)[:40]
    everything = c2v_rag.search(query, top_k=50, path=store, collection="kb", mode="hybrid")
    assert "c1" in {h.doc_id for h in everything}
    assert (
        main(
            [
                "search",
                query,
                *args,
                "--mode",
                "hybrid",
                "--filter",
                '{"must_not": {"doc_id": "c1"}}',
                "--json",
                "-k",
                "50",
            ]
        )
        == 0
    )
    printed = json.loads(capsys.readouterr().out)
    want = c2v_rag.search(
        query, top_k=50, path=store, collection="kb", mode="hybrid", filter={"must_not": {"doc_id": "c1"}}
    )
    assert printed and [h["id"] for h in printed] == [h.id for h in want]
    assert "c1" not in {h["doc_id"] for h in printed} and len(printed) < len(everything)
    assert main(["search", query, *args, "--mode", "hybrid", "--fusion", "dbsf", "--json", "-k", "5"]) == 0
    dbsf = c2v_rag.search(query, top_k=5, path=store, collection="kb", mode="hybrid", fusion="dbsf")
    assert [h["score"] for h in json.loads(capsys.readouterr().out)] == pytest.approx([h.score for h in dbsf])

    assert main(["reindex", *args, "--model", str(tiny_variant_qwen), "-q"]) == 0
    assert capsys.readouterr().out.startswith(
        "reindexed: 25 chunks re-embedded into 'kb_v2'; alias 'kb' switched from 'kb_v1'"
    )
    assert main(["search", query, *args, "--mode", "sparse", "-k", "2"]) == 0  # model read from kb_v2
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("scores: BM25") and len(lines) == 1 + 4  # what the scores are, then 2 hits

    assert main(["search", query, *args, "--filter", '{"n": {"like": 1}}']) == 2  # bad input
    assert "unknown operator 'like'" in capsys.readouterr().err
    assert main(["search", query, *args, "--filter", "n=1"]) == 2
    assert "is not JSON" in capsys.readouterr().err


def test_delete_takes_out_documents_by_id_file_and_filter_and_exits_1_on_one_it_did_not_find(
    folder, tmp_path, tiny_variant, capsys
):
    import json
    from collections import Counter

    store = str(tmp_path / "qdrant")
    args = ["--path", store, "--collection", "kb"]
    ingest = ["ingest", str(folder), *args, "--model", str(tiny_variant), "--chunk-size", "24", "-q"]
    assert main(ingest) == 0
    capsys.readouterr()
    hits = c2v_rag.search(make_text(1), top_k=100, path=store, collection="kb", model=str(tiny_variant))
    chunks = Counter(hit.doc_id for hit in hits)
    a_txt, b_md = str((folder / "a.txt").resolve()), str((folder / "nested" / "b.md").resolve())
    assert set(chunks) == {a_txt, b_md, "c1"}

    assert main(["delete", "c1", "nope", *args]) == 1  # done, but one id named nothing
    captured = capsys.readouterr()
    assert captured.out == f"deleted 1 document ({chunks['c1']} chunks) from 'kb'\n"
    assert captured.err == "not found: 'nope' (no document of 'kb' has this id or came from there)\n"
    assert main(["delete", "--file", str(folder / "nested"), "--filter", '{"file_name": "b.md"}', "--json", *args]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == {"collection": "kb", "documents_deleted": 1, "chunks_deleted": chunks[b_md], "not_found": []}
    left = c2v_rag.search(make_text(1), top_k=100, path=store, collection="kb", model=str(tiny_variant))
    assert {hit.doc_id for hit in left} == {a_txt}

    assert main(["delete", *args]) == 2  # nothing named: refused before the store opens
    assert "name the documents to delete: DOC_ID..." in capsys.readouterr().err
    assert main(["delete", "--filter", "{}", *args]) == 2  # an empty filter would match them all
    assert "name the documents to delete: DOC_ID..." in capsys.readouterr().err


def test_embed_writes_parquet_and_ray_flags_need_ray(folder, tmp_path, tiny_variant, capsys):
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "vectors"
    assert (
        main(
            [
                "embed",
                str(folder),
                "--out",
                str(out),
                "--model",
                str(tiny_variant),
                "--chunk-size",
                "24",
                "--chunk-overlap",
                "4",
                "--exclude",
                "nested",
                "--chunk-context",
                "none",
                "-q",
            ]
        )
        == 0
    )
    table = pq.read_table(out)
    assert json.loads(pq.read_schema(next(out.glob("*.parquet"))).metadata[b"c2v_rag"])["chunk_context"] == "none"
    assert "embedded" in capsys.readouterr().out and table.num_rows > 0
    assert table.column_names == [
        *("id", "doc_id", "chunk_index", "text", "metadata", "vector", "start_char", "end_char", "source_root")
    ]
    assert {d.rsplit("/", 1)[-1] for d in table.column("doc_id").to_pylist()} == {"a.txt", "c1"}  # nested/ left out
    other = ["--chunk-size", "32", "--chunk-overlap", "4"]
    assert main(["embed", str(folder), "--out", str(out), "--model", str(tiny_variant), *other]) == 2  # refused
    assert "(--chunk-size 24; this run has --chunk-size 32)" in capsys.readouterr().err
    rerun = ["embed", str(folder), "--out", str(out), "--model", str(tiny_variant), "--chunk-size", "24"]
    assert main([*rerun, "--chunk-overlap", "4", "--exclude", "nested", "-q"]) == 0  # resumes: nothing left to do
    assert (
        f"{table.num_rows} chunks (0 written, {table.num_rows} already there) into 0 Parquet" in capsys.readouterr().out
    )
    model_and_store = ["--model", str(tiny_variant), "--path", str(tmp_path / "q"), "--chunk-size", "24", "-q"]
    assert main(["ingest", str(folder), *model_and_store, "--exclude", "*.jsonl", "--exclude", "a.txt"]) == 0
    assert capsys.readouterr().out.startswith("ingested 1 document,")
    (folder / "tide.py").write_text("def tide():\n    return 'high'\n", encoding="utf-8")
    assert main(["ingest", str(folder), *model_and_store, "--exclude", "*.jsonl", "--text-suffix", ".py"]) == 0
    assert capsys.readouterr().out.startswith("ingested 3 documents (1 unchanged)")  # a.txt and tide.py new
    assert main(["ingest", str(folder / "tide.py"), *model_and_store]) == 2
    assert "--text-suffix .py" in capsys.readouterr().err
    assert main(["ingest", str(folder), "--actors", "2", "--path", str(tmp_path / "q")]) == 2
    assert "--actors, --gpus-per-actor and --cpus-per-actor need --ray" in capsys.readouterr().err


def test_search_run_as_the_program_ends_the_process_once_its_output_is_flushed(tmp_path, monkeypatch, capsys):
    from c2v_rag.cli import app

    exits: list[int] = []

    def fake_exit(code: int) -> None:
        exits.append(code)
        raise SystemExit(code)

    monkeypatch.setattr(app.os, "_exit", fake_exit)
    monkeypatch.setattr(app.sys, "gettrace", lambda: None)  # as without coverage
    args = ["search", "anything", "--path", str(tmp_path), "--collection", "nothing_here"]
    # Called with arguments (tests, other programs): it returns, and the caller's process goes on.
    assert main(args) == 2 and exits == []
    # Called as the program (argv None): the process ends with the same code, the error line already out.
    monkeypatch.setattr(app.sys, "argv", ["c2v-rag", *args])
    with pytest.raises(SystemExit):
        main()
    assert exits == [2] and "nothing_here" in capsys.readouterr().err
    # Under a profiler the normal exit runs, so that it can write its results.
    monkeypatch.setattr(app.sys, "getprofile", lambda: object())
    assert main() == 2 and exits == [2]


def test_search_into_a_closed_pipe_ends_quietly_with_the_sigpipe_status(folder, tmp_path, tiny_variant):
    import subprocess

    from c2v_rag.cli.errors import EXIT_OUTPUT_CLOSED, output_closed

    common = ingested(folder, tmp_path, tiny_variant, "pipe")
    program = as_program("search", "a question", *common, "--top-k", "5")
    # `| head -1` that has already gone: the reader's end is closed before the command prints anything.
    proc = subprocess.Popen(**program, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=300) == EXIT_OUTPUT_CLOSED and err == ""
    # Read to the end, the same search prints its results and exits 0.
    done = subprocess.run(**program, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip(), done.stderr
    # Any other broken pipe (a server's socket) is an error like any other: stdout here is still open.
    assert not output_closed(BrokenPipeError()) and not output_closed(ValueError())


def test_a_collection_of_another_model_is_refused_then_converted_to_the_new_one(
    folder, tmp_path, tiny_variant, tiny_variant_qwen, capsys
):
    """The upgrade path: a plain collection made with one model, searched with another (a new default preset)."""
    import json

    args = ["--path", str(tmp_path / "qdrant"), "--collection", "kb"]
    small = ["--chunk-size", "24", "--chunk-overlap", "4", "-q"]
    assert main(["ingest", str(folder), *args, "--model", str(tiny_variant), *small]) == 0
    capsys.readouterr()
    assert main(["search", "tides", *args, "--model", str(tiny_variant_qwen)]) == 2
    err = capsys.readouterr().err
    assert "was built with another model" in err and "c2v-rag reindex --collection kb" in err and "--convert" in err
    assert main(["reindex", *args, "--model", str(tiny_variant_qwen), "--convert", "-q"]) == 0
    assert capsys.readouterr().out.startswith(
        "reindexed: 25 chunks re-embedded into 'kb_v2'; the plain collection 'kb' kept as 'kb_v1', and 'kb' is now an "
        "alias of 'kb_v2'"
    )
    assert main(["search", "tides", *args, "--model", str(tiny_variant_qwen), "--json"]) == 0
    printed = capsys.readouterr().out
    want = c2v_rag.search("tides", path=str(tmp_path / "qdrant"), collection="kb_v2", model=tiny_variant_qwen)
    assert [h.id for h in want] == [h["id"] for h in json.loads(printed)]


def test_ingest_decoder_max_length_is_recorded_and_kept(folder, tmp_path, tiny_variant, capsys):
    """``--decoder-max-length 0`` ingests whole chunks, recorded as a collection from before the setting (no key);
    a later ingest asking for a cap is refused with the flag to drop; a cap asked for is recorded; the default for
    a new collection of a model with a Contextual token is 96."""
    from contextlib import closing

    from qdrant_client import QdrantClient

    from c2v_rag.cli.errors import EXIT_BAD_INPUT
    from c2v_rag.rag.ingestion.config import DEFAULT_DECODER_MAX_LENGTH
    from c2v_rag.store.collection import collection_fingerprint

    store = str(tmp_path / "qdrant")
    base = ["ingest", str(folder), "--path", store, "--model", str(tiny_variant), "--chunk-size", "24", "-q"]
    assert main([*base, "--collection", "whole", "--decoder-max-length", "0"]) == 0
    assert main([*base, "--collection", "cut", "--decoder-max-length", "12"]) == 0
    assert main([*base, "--collection", "default"]) == 0
    capsys.readouterr()
    assert main([*base, "--collection", "whole", "--decoder-max-length", "12"]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "records whole chunks" in err and "Leave --decoder-max-length out" in err
    with closing(QdrantClient(path=store)) as client:
        recorded = {name: collection_fingerprint(client, name) for name in ("whole", "cut", "default")}
    assert "decoder_max_length" not in recorded["whole"]
    assert recorded["cut"]["decoder_max_length"] == 12
    assert recorded["default"]["decoder_max_length"] == DEFAULT_DECODER_MAX_LENGTH


def test_search_dash_answers_each_line_of_standard_input_with_the_model_loaded_once(
    folder, tmp_path, tiny_variant, capsys, monkeypatch
):
    import io
    import json

    common = ingested(folder, tmp_path, tiny_variant, "lines")
    capsys.readouterr()
    queries = [make_text(i)[:30].strip() for i in (1, 2, 3)]
    monkeypatch.setattr(sys, "stdin", io.StringIO(f"{queries[0]}\n\n  {queries[1]}  \n{queries[2]}\n"))
    assert main(["search", "-", *common, "--top-k", "2", "--rerank", "none", "--json"]) == 0
    out, err = capsys.readouterr()
    rows = [json.loads(line) for line in out.splitlines()]
    expected = c2v_rag.search_many(queries, top_k=2, path=tmp_path / "qdrant", collection="lines", rerank=None)
    assert [row["query"] for row in rows] == queries  # blank lines skipped, each line stripped, in order
    assert [[h["id"] for h in row["hits"]] for row in rows] == [[h.id for h in hits] for hits in expected]
    assert "Searching" in err and "3/3" in err
    monkeypatch.setattr(sys, "stdin", io.StringIO(f"{queries[1]}\n"))
    assert main(["search", "-", *common, "--top-k", "1", "--rerank", "none"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"query: {queries[1]}" and lines[1].startswith(" 1. ") and lines[-1] == ""
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n  \n"))
    assert main(["search", "-", *common]) == 2
    assert "none came: pipe a file in" in capsys.readouterr().err


def test_ingest_builds_the_reranker_the_next_search_would_build(folder, tmp_path, tiny_lm_variant, monkeypatch, capsys):
    """Where searches rerank in int8 (an AVX2 CPU with the int8 extra here), ``c2v-rag ingest`` leaves the int8
    reranker built, once: the first search loads it instead of building it, and a later ingest builds nothing."""
    pytest.importorskip("onnxruntime")
    import c2v_rag.rerank.int8 as int8_module
    from c2v_rag.rag.options import ModelOptions
    from c2v_rag.rag.retrieval import reranking

    rerank_auto_in_int8_on_avx2(monkeypatch, tmp_path / "cache")
    model = ModelOptions(model=str(tiny_lm_variant))
    assert reranking.auto_reranker_unbuilt(model)
    ingested(folder, tmp_path, tiny_lm_variant, "built")
    assert not reranking.auto_reranker_unbuilt(model)
    assert "Building the int8 reranker" not in capsys.readouterr().err  # -q: no bar for it either

    def refuse(*args, **kwargs):
        raise AssertionError("the int8 reranker was built again")

    monkeypatch.setattr(int8_module, "_build", refuse)
    monkeypatch.setattr(reranking, "_cache", {})
    ingested(folder, tmp_path, tiny_lm_variant, "again")
    assert reranking._cache == {}  # nothing loaded where it was built
    hits = c2v_rag.search("vitamin", top_k=2, path=tmp_path / "qdrant", collection="built", device="cpu")
    assert hits and all(h.rerank_score is not None for h in hits)


def test_an_ingest_whose_reranker_fails_to_build_still_exits_0(folder, tmp_path, tiny_variant, monkeypatch, caplog):
    """The points are stored before the reranker is built: a failure there is a warning, not the ingest's error."""
    from c2v_rag.rag.retrieval import reranking

    def broken(*args, **kwargs):
        raise RuntimeError("ONNX Runtime: the cached graph is unreadable")

    monkeypatch.setattr(reranking, "auto_reranker_unbuilt", lambda *args, **kwargs: True)
    monkeypatch.setattr(reranking, "auto_reranker", broken)
    with caplog.at_level("WARNING", logger="c2v_rag"):
        common = ingested(folder, tmp_path, tiny_variant, "kept")  # asserts exit 0
    assert any("not built now" in r.getMessage() and "unreadable" in r.getMessage() for r in caplog.records)
    assert c2v_rag.open_collection("kept", path=common[1]).count() > 0


def test_search_dash_keeps_its_bar_off_the_lines_of_hits(folder, tmp_path, tiny_variant):
    """Queries piped in, hits and the bar on one screen (stdout and stderr together, as a terminal shows them): the
    bar steps aside while hits print, so no line of hits starts with the bar's text."""
    import subprocess

    common = ingested(folder, tmp_path, tiny_variant, "bar")
    queries = [make_text(i)[:30].strip() for i in (1, 2, 3)]
    run = subprocess.run(
        **as_program("search", "-", *common, "--top-k", "1", "--rerank", "none"),
        input="\n".join(queries) + "\n",
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout
    shown = [line.rsplit("\r", 1)[-1] for line in run.stdout.split("\n")]  # a carriage return redraws its line
    assert [line for line in shown if "query: " in line] == [f"query: {q}" for q in queries], run.stdout
    assert "Searching" in run.stdout


class _Terminal:
    """``c2v-rag`` run as a program at a pseudo-terminal: what it printed, and lines typed at it."""

    def __init__(self, *args: str) -> None:
        import os
        import pty
        import subprocess

        self.leader, follower = pty.openpty()
        self.proc = subprocess.Popen(**as_program(*args), stdin=follower, stdout=follower, stderr=follower)
        os.close(follower)
        self.seen = b""

    def read_until(self, marker: bytes, count: int = 1) -> None:
        import os
        import select

        while self.seen.count(marker) < count:
            ready, _, _ = select.select([self.leader], [], [], 120)
            assert ready, self.text()
            try:
                self.seen += os.read(self.leader, 4096)
            except OSError:  # the program ended: nothing more to read
                assert self.seen.count(marker) >= count, self.text()

    def type(self, line: bytes) -> None:
        import os

        os.write(self.leader, line)

    def ended(self) -> int:
        import os

        code = self.proc.wait(timeout=60)
        try:
            while chunk := os.read(self.leader, 4096):
                self.seen += chunk
        except OSError:  # the terminal closed with the program
            pass
        os.close(self.leader)
        return code

    def text(self) -> str:
        return self.seen.decode(errors="replace").replace("\r", "")


def test_search_dash_at_a_terminal_prompts_until_end_of_input(folder, tmp_path, tiny_variant, tiny_variant_qwen):
    """At a terminal (a pseudo-terminal here), ``search -`` prompts, answers each line, says an error and goes on,
    and ends at Ctrl-D with 0; what the first query would fail on fails before the prompt."""
    common = ingested(folder, tmp_path, tiny_variant, "prompt")
    terminal = _Terminal("search", "-", *common, "--top-k", "1", "--rerank", "none")
    terminal.read_until(b"query> ")
    terminal.type(make_text(2)[:30].encode() + b"\n")
    terminal.read_until(b"query> ", 2)
    # The collection goes while the prompt waits (the store is free between searches): the next query fails with
    # the error a search gives, and the prompt asks again.
    assert c2v_rag.open_collection("prompt", path=str(tmp_path / "qdrant")).delete()
    terminal.type(b"tides\n")
    terminal.read_until(b"query> ", 3)
    terminal.type(b"\x04")  # Ctrl-D at an empty line: end of input
    assert terminal.ended() == 0
    text = terminal.text()
    assert "chunks in 'prompt': a query a line" in text and "Ctrl-D ends" in text
    assert f"query: {make_text(2)[:30].strip()}\n 1. " in text
    assert "error: collection 'prompt' does not exist" in text.split("query> ")[2]

    # Another model's collection is refused before the prompt, not at the first query.
    ingested(folder, tmp_path, tiny_variant, "prompt")
    other = _Terminal("search", "-", *common, "--model", str(tiny_variant_qwen))
    assert other.ended() == 2
    assert "error: " in other.text() and "query> " not in other.text()


def test_a_file_name_with_a_newline_keeps_its_hit_on_one_line(tmp_path, tiny_variant, capsys):
    """A name holding a newline broke the one-hit-a-line layout (a messy-folder walkthrough)."""
    docs = tmp_path / "odd"
    docs.mkdir()
    (docs / "line\nbreak.txt").write_text(make_text(5), encoding="utf-8")
    store = ingested(docs, tmp_path, tiny_variant, "odd")
    capsys.readouterr()
    assert main(["search", make_text(5)[:30], *store, "--top-k", "1", "--snippet-chars", "0", "--rerank", "none"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith(" 1. ") and line.split("  ")[1].endswith("line\\nbreak.txt"), line
