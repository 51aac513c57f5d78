"""``c2v-rag ingest`` failures, run as real subprocesses: one ``error:`` line, a distinct exit code.

Checks that must happen before the model loads use a variant whose config reads fine but whose
weights are corrupt: if the model were loaded first, the error would be about the weights.
"""

from __future__ import annotations

import http.server
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import closing
from pathlib import Path

import pytest

for _module in ("qdrant_client", "llama_index.core", "tenacity"):
    pytest.importorskip(_module)

from qdrant_client import QdrantClient
from qdrant_client.http import models
from rag_helpers import make_text, stored_points

import c2v_rag
from c2v_rag.cli import main
from c2v_rag.cli.errors import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED
from c2v_rag.rag import CollectionNotFoundError

REPO = Path(__file__).resolve().parents[2]
SECRET = "sekrit-api-key-42"
CHUNKS = ("--chunk-size", "24", "--chunk-overlap", "4")  # the tiny variants take 128 tokens


def run_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        "QDRANT_API_KEY": SECRET,
        "OMP_NUM_THREADS": "1",
    }
    return subprocess.run(
        [sys.executable, "-m", "c2v_rag.cli", *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO
    )


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    """The one ``error:`` line, last; other lines may only be one-line warnings (an API key
    over plain http draws one from qdrant-client)."""
    lines = proc.stderr.strip().splitlines()
    assert lines and lines[-1].startswith("error: "), proc.stderr
    assert all(line.startswith("warning: ") for line in lines[:-1]), proc.stderr
    assert SECRET not in proc.stderr + proc.stdout
    return lines[-1]


@pytest.fixture(scope="module")
def broken_variant(tiny_variant, tmp_path_factory):
    """A variant whose config is fine and whose projector weights are garbage."""
    path = tmp_path_factory.mktemp("broken") / "variant"
    shutil.copytree(tiny_variant, path)
    (path / "projector.safetensors").write_bytes(b"not safetensors at all")
    return path


@pytest.fixture
def folder(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text(make_text(1, 2), encoding="utf-8")
    return docs


def test_bad_input_is_refused_before_the_model_loads_and_leaves_no_collection(tmp_path, folder, broken_variant):
    store = tmp_path / "store"
    keynote = tmp_path / "x.key"
    keynote.write_bytes(b"PK\x03\x04")
    base = ["ingest", "--path", str(store), "--collection", "kb", "--model", str(broken_variant), "-q", *CHUNKS]
    proc = run_cli(*base, str(folder), str(keynote))
    assert proc.returncode == EXIT_BAD_INPUT
    assert "unsupported file type '.key'" in one_error_line(proc)
    proc = run_cli(*base, str(tmp_path / "typo"))
    assert proc.returncode == EXIT_BAD_INPUT and "typo does not exist" in one_error_line(proc)
    proc = run_cli(*base, str(folder), "--chunk-size", "400")
    assert proc.returncode == EXIT_BAD_INPUT and "does not fit the model's max_length=128" in one_error_line(proc)
    with closing(QdrantClient(path=str(store))) as client:
        assert not client.collection_exists("kb")
        client.create_collection("kb", vectors_config=models.VectorParams(size=65, distance=models.Distance.COSINE))
    proc = run_cli(*base, str(folder))
    assert proc.returncode == EXIT_BAD_INPUT and "stores 65-dimensional vectors" in one_error_line(proc)
    # Only now, with nothing else wrong, is the model loaded, and its error is the one shown;
    # the collection the run would have created is not left behind.
    proc = run_cli(*base, str(folder), "--collection", "fresh")
    assert proc.returncode == EXIT_BAD_INPUT and "projector.safetensors is corrupt" in one_error_line(proc)
    with closing(QdrantClient(path=str(store))) as client:
        assert [c.name for c in client.get_collections().collections] == ["kb"]


# The CLI in a Python where ``hidden`` packages cannot be imported (None in sys.modules), as on a machine without
# the extra that brings them.
_WITHOUT = (
    "import runpy, sys\n"
    "hidden, sys.argv = sys.argv[1].split(','), ['c2v-rag', *sys.argv[2:]]\n"
    "sys.modules.update(dict.fromkeys(hidden))\n"
    "runpy.run_module('c2v_rag.cli', run_name='__main__')\n"
)


@pytest.mark.parametrize(
    ("hidden", "command", "message"),
    [
        (
            "pyarrow",
            "embed",
            "embed (its Parquet files) needs the package 'pyarrow', which is not installed. "
            "Install it with: pip install 'c2v-rag[parquet]'",
        ),
        (
            "fastapi",
            "serve",
            "c2v-rag serve needs the package 'fastapi', which is not installed. "
            "Install it with: pip install 'c2v-rag[serve]'",
        ),
        ("prometheus_client", "serve", "c2v-rag serve needs the package 'prometheus-client'"),
        (
            "scipy",
            "eval",
            "scoring STS sets (Spearman correlation) needs the package 'scipy', which is not "
            "installed. Install it with: pip install 'c2v-rag[eval]'",
        ),
    ],
)
def test_a_missing_extra_is_named_with_its_install_command_before_any_work(
    tmp_path, folder, broken_variant, hidden, command, message
):
    """Before the model loads (the broken variant would say so) and before embed writes its folder; eval after
    reading its sets, which say what scoring them takes."""
    out = tmp_path / "vectors"
    stsb = tmp_path / "data" / "stsb"
    stsb.mkdir(parents=True)
    (stsb / "stsb.dev.tsv").write_text("score\tsentence1\tsentence2\n4.5\tA cat sleeps.\tA cat is asleep.\n")
    argv = {
        "embed": ["embed", str(folder), "--out", str(out), "--model", str(broken_variant), *CHUNKS],
        "serve": ["serve", "--model", str(broken_variant), "--port", "0"],
        "eval": ["eval", str(broken_variant), "--data", str(tmp_path / "data"), "--sets", "stsb-dev"],
    }[command]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, "-c", _WITHOUT, hidden, *argv], capture_output=True, text=True, timeout=300, env=env, cwd=REPO
    )
    assert proc.returncode == EXIT_BAD_INPUT and message in one_error_line(proc), proc.stderr
    assert not out.exists()


def test_serve_on_a_port_in_use_fails_before_the_model_loads(broken_variant):
    # It loaded the model first (a minute for the preset), logged 'Serving ... on http://127.0.0.1:8766', then
    # uvicorn's own '[Errno 98] error while attempting to bind', exit 3 (from a server walkthrough).
    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = busy.getsockname()[1]
        proc = run_cli("serve", "--model", str(broken_variant), "--port", str(port))
    assert proc.returncode == EXIT_BAD_INPUT
    assert one_error_line(proc) == (
        f"error: 127.0.0.1:{port} is in use (another server listens there); pass another --port, or stop that server"
    )
    assert "Serving" not in proc.stderr  # the broken variant was never read


@pytest.mark.parametrize("command", ["search", "ingest", "serve"])
def test_a_file_given_as_the_store_is_named_before_any_work(tmp_path, folder, broken_variant, command):
    # It was '[Errno 17] File exists' from mkdir, and serve started, then answered every /v1/search with a 500.
    document = folder / "a.txt"
    argv = {
        "search": ["search", "tides", "--path", str(document), "--model", str(broken_variant)],
        "ingest": ["ingest", str(folder), "--path", str(document), "--model", str(broken_variant)],
        "serve": ["serve", "--model", str(broken_variant), "--path", str(document), "--port", "0"],
    }[command]
    proc = run_cli(*argv)
    assert proc.returncode == EXIT_BAD_INPUT
    assert one_error_line(proc) == (
        f"error: path {str(document)!r} (--path) is a file, not a store directory; pass the directory of a store "
        "(one is made where none is)"
    )


def test_a_locked_store_is_one_line(tmp_path, folder, broken_variant):
    store = tmp_path / "store"
    with closing(QdrantClient(path=str(store))):
        proc = run_cli("ingest", str(folder), "--path", str(store), "--model", str(broken_variant), "-q", *CHUNKS)
    assert proc.returncode == EXIT_BAD_INPUT
    assert "is open in another client" in one_error_line(proc)


def test_an_unreachable_server_is_named_after_the_retries(folder, broken_variant):
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    start = time.monotonic()
    proc = run_cli(
        "ingest", str(folder), "--qdrant-url", url, "--retries", "2", "--model", str(broken_variant), "-q", *CHUNKS
    )
    line = one_error_line(proc)
    assert proc.returncode == EXIT_BAD_INPUT and time.monotonic() - start < 120
    assert line.startswith(f"error: cannot reach Qdrant at {url} after 2 attempts")


class _Refusing(http.server.BaseHTTPRequestHandler):
    status = 403

    def _answer(self) -> None:
        body = b'{"status": {"error": "refused by the test server"}, "time": 0}'
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_PUT = do_POST = _answer

    def log_message(self, *args) -> None:
        pass


@pytest.mark.parametrize(("status", "words"), [(403, "answered 403 Forbidden"), (500, "answered 500 Internal")])
def test_an_http_error_from_the_server_is_one_line(folder, broken_variant, status, words):
    handler = type("Handler", (_Refusing,), {"status": status})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        proc = run_cli(
            "ingest", str(folder), "--qdrant-url", url, "--retries", "1", "--model", str(broken_variant), "-q", *CHUNKS
        )
    finally:
        server.shutdown()
    line = one_error_line(proc)
    assert proc.returncode == EXIT_BAD_INPUT and f"Qdrant at {url} {words}" in line
    assert "refused by the test server" in line and ("API key" in line) == (status == 403)


# Commands that read or change a collection without ingesting: a server's failure is the same one line.
READERS = [("search", "tides"), ("collections",), ("delete", "doc-1"), ("reindex",)]


@pytest.mark.parametrize("command", READERS, ids=[c[0] for c in READERS])
def test_commands_on_a_server_name_it_when_it_is_away_or_refuses(command):
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        away = f"http://127.0.0.1:{sock.getsockname()[1]}"
    proc = run_cli(*command, "--qdrant-url", away)
    assert proc.returncode == EXIT_BAD_INPUT
    assert one_error_line(proc).startswith(f"error: cannot reach Qdrant at {away} after 1 attempt (")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        proc = run_cli(*command, "--qdrant-url", url)
    finally:
        server.shutdown()
    line = one_error_line(proc)
    assert proc.returncode == EXIT_BAD_INPUT and f"Qdrant at {url} answered 403 Forbidden" in line
    assert "refused by the test server" in line and "API key" in line


def test_the_python_calls_raise_the_package_errors_sync_and_async():
    import asyncio

    import c2v_rag
    from c2v_rag.rag import QdrantUnreachableError

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        away = f"http://127.0.0.1:{sock.getsockname()[1]}"
    kb = c2v_rag.open_collection("kb", qdrant_url=away)
    for call in (kb.count, kb.exists, lambda: kb.delete_documents(["a"]), lambda: asyncio.run(kb.asearch("tides"))):
        with pytest.raises(QdrantUnreachableError, match=f"cannot reach Qdrant at {away}"):
            call()


def test_verbose_adds_the_traceback(tmp_path, broken_variant):
    proc = run_cli(
        "-v", "ingest", str(tmp_path / "typo"), "--path", str(tmp_path / "s"), "--model", str(broken_variant)
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == EXIT_BAD_INPUT and "Traceback (most recent call last):" in proc.stderr
    assert lines[-1].startswith("error: ") and "typo does not exist" in lines[-1]


@pytest.mark.parametrize(
    ("stop", "status", "engine"),
    [
        (signal.SIGINT, EXIT_INTERRUPTED, []),
        (signal.SIGTERM, -signal.SIGTERM, []),
        *(
            pytest.param(
                stop,
                status,
                ["--ray", "local"],
                marks=pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="needs ray"),
            )
            for stop, status in ((signal.SIGINT, EXIT_INTERRUPTED), (signal.SIGTERM, -signal.SIGTERM))
        ),
    ],
    ids=["ctrl-c", "sigterm", "ctrl-c-ray", "sigterm-ray"],
)
def test_ctrl_c_or_sigterm_stops_cleanly_and_a_rerun_resumes(
    tmp_path, tiny_variant, ingest_config, stop, status, engine
):
    """Ctrl-C, or SIGTERM (a service manager's or a container's stop), ends an ingest with what it embedded written
    and one line saying so and how to resume; then status 130 (Ctrl-C), or the end by SIGTERM that a shell reports
    as 143 and systemd counts as a clean stop. On Ray too, whose ray.init sets a SIGTERM handler of its own in the
    driver (with it the run ended by sys.exit and the process aborted: status 134, no line)."""
    docs = tmp_path / "docs"
    docs.mkdir()
    # ~1,000 chunks in writes of 4: the signal comes after the first write, hundreds of writes before the end on any
    # machine, and the resume (most of this test's time) stays short.
    for i in range(200):
        (docs / f"{i:03d}.txt").write_text(make_text(i, 4), encoding="utf-8")
    store = tmp_path / "store"
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "c2v_rag.cli",
            "-v",
            "ingest",
            str(docs),
            "--path",
            str(store),
            "--collection",
            "kb",
            "--model",
            str(tiny_variant),
            "--chunk-size",
            "24",
            "--chunk-overlap",
            "4",
            "--batch-size",
            "4",
            "-q",
            *engine,
        ],
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )
    seen = []
    for line in proc.stderr:  # once the collection exists, batches are being embedded and written
        seen.append(line)
        if "Created collection" in line:
            break
    # Embedded Qdrant keeps points in a SQLite file: interrupt once it has grown (points written).
    storage = store / "collection" / "kb" / "storage.sqlite"
    initial = storage.stat().st_size if storage.exists() else 0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not storage.exists() or storage.stat().st_size == initial):
        time.sleep(0.05)
    proc.send_signal(stop)
    rest = proc.stderr.read()
    proc.wait(timeout=120)
    lines = (("".join(seen)) + rest).strip().splitlines()
    assert proc.returncode == status, "".join(seen) + rest
    with closing(QdrantClient(path=str(store))) as client:
        stored = len(stored_points(client, "kb"))
    assert stored > 0
    if engine:  # the driver does not count what the actors wrote
        assert lines[-1] == "error: interrupted; re-run the same command to resume (stored chunks are skipped)"
    else:
        assert lines[-1].startswith("error: interrupted; ") and "Re-run the same ingest to resume" in lines[-1]
        assert int(lines[-1].split("; ")[1].split()[0]) == stored
    resumed = c2v_rag.ingest(docs, path=store, collection="kb", model=tiny_variant, config=ingest_config)
    assert resumed.chunks_unchanged == stored and resumed.chunks_written == resumed.chunks - stored


def test_ctrl_c_stops_an_embed_with_its_files_whole_and_a_rerun_resumes(tmp_path, tiny_variant, ingest_config):
    import pyarrow.parquet as pq

    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(200):  # ~1,000 chunks in batches of 4, as in the ingest test above
        (docs / f"{i:03d}.txt").write_text(make_text(i, 4), encoding="utf-8")
    out = tmp_path / "vectors"
    args = ["embed", str(docs), "--out", str(out), "--model", str(tiny_variant), *CHUNKS, "--batch-size", "4", "-q"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "c2v_rag.cli", *args], stderr=subprocess.PIPE, text=True, env=env, cwd=REPO
    )
    writing = out / ".part-00000.parquet.inprogress"  # the open file, under its hidden name
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not writing.exists() or writing.stat().st_size < 8192):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    err = proc.stderr.read()
    proc.wait(timeout=120)
    assert proc.returncode == EXIT_INTERRUPTED, err
    assert sorted(f.name for f in out.iterdir()) == [".embed.lock", "part-00000.parquet"]  # closed and named
    kept = pq.read_table(out).num_rows
    assert kept > 0
    assert err.strip().splitlines()[-1] == (
        f"error: interrupted; {kept} chunks were written to {out}. Re-run the same embed to resume: chunks already "
        "written are skipped."
    )
    assert main(args) == 0
    whole = c2v_rag.embed(docs, tmp_path / "whole", model=tiny_variant, config=ingest_config)
    table = pq.read_table(out)
    assert table.num_rows == whole.chunks > kept and len(set(table.column("id").to_pylist())) == whole.chunks


def test_a_batch_that_fails_midway_exits_3(tmp_path, folder, tiny_variant, capsys, monkeypatch):
    # The store failing mid-run cannot be provoked from outside here; the upload is made to fail.
    def full_disk(self, *args, **kwargs):
        raise RuntimeError("injected: no space left on device")

    monkeypatch.setattr(QdrantClient, "upsert", full_disk)
    code = main(["ingest", str(folder), "--path", str(tmp_path / "store"), "--model", str(tiny_variant), "-q", *CHUNKS])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == EXIT_FAILED and len(err) == 1
    assert err[0].startswith("error: a batch of ") and "no space left on device" in err[0] and "Re-run" in err[0]


def test_search_refuses_another_models_collection_before_loading_the_model(
    tmp_path, folder, tiny_variant, tiny_variant_qwen
):
    """``search --model V`` on a collection another model built loaded V (8.8 s for the preset) before refusing
    the collection. V's config and weights digest are read without loading it: here V's projector is garbage,
    so a load first would have shown that error instead."""
    other = tmp_path / "other"
    shutil.copytree(tiny_variant_qwen, other)
    (other / "projector.safetensors").write_bytes(b"not safetensors at all")
    store = ["--path", str(tmp_path / "store"), "--collection", "kb"]
    assert main(["ingest", str(folder), *store, "--model", str(tiny_variant), "-q", *CHUNKS]) == 0
    proc = run_cli("search", "bone loss", *store, "--model", str(other))
    line = one_error_line(proc)
    assert proc.returncode == EXIT_BAD_INPUT and "another model" in line and "corrupt" not in line, line


def test_commands_that_read_a_store_that_does_not_exist_make_none(tmp_path, capsys):
    """``search --path DIR`` on a directory that does not exist made an empty local-mode store there, which then
    refused ``ingest --store edge``; each command that reads a collection names the missing store instead."""
    missing = tmp_path / "nonexist"
    where = ["--path", str(missing), "--collection", "kb"]
    for command in (
        ["search", "bone loss", *where],
        ["delete", "doc-1", *where],
        ["reindex", *where],
        ["migrate", *where, "--to-path", str(tmp_path / "edge"), "--to-store", "edge"],
    ):
        assert main(command) == EXIT_BAD_INPUT, command
        err = capsys.readouterr().err
        assert "there is no store there (the directory does not exist)" in err, (command, err)
        assert not missing.exists(), command
    handle = c2v_rag.open_collection("kb", path=missing)
    assert handle.exists() is False and not missing.exists()
    with pytest.raises(CollectionNotFoundError, match="no store there"):
        handle.count()
    assert not missing.exists()


def test_migrate_asks_for_its_target_by_name(tmp_path, capsys):
    # Without a target it copied into the user's default store, silently.
    assert main(["migrate", "--path", str(tmp_path / "store"), "--collection", "kb"]) == EXIT_BAD_INPUT
    assert "name the target: --to-path DIR" in capsys.readouterr().err


def test_a_skipped_file_is_a_warning_line_and_the_summary_counts_only_what_was_skipped(tmp_path, folder, tiny_variant):
    # The reader's log record printed as "WARNING c2v_rag.documents.reading: Skipped ...", unlike the CLI's other
    # "warning:" lines, and the summary said "skipped 1 file and 0 records".
    (folder / "bin.txt").write_bytes(b"\x7fELF\x02\x01\x01" + bytes(range(256)) * 8)
    proc = run_cli("ingest", str(folder), "--path", str(tmp_path / "store"), "--model", str(tiny_variant), *CHUNKS)
    assert proc.returncode == 0, proc.stderr
    lines = [line for part in proc.stderr.splitlines() for line in part.split("\r") if "bin.txt" in line]
    assert lines and all(line.startswith("warning: Skipped ") for line in lines), proc.stderr
    assert "WARNING" not in proc.stderr
    assert proc.stdout.rstrip().endswith("; skipped 1 file"), proc.stdout


def test_the_summary_says_how_many_files_were_met_twice(tmp_path, folder, tiny_variant):
    """A folder whose files link to one another: the bar counted 18 files and the summary 14 documents, with no
    word of the 4 met twice (a messy-folder walkthrough on /usr/share/doc/gcc-12, cpp and g++)."""
    (folder / "b.txt").write_text(make_text(2, 2), encoding="utf-8")
    (folder / "again.txt").symlink_to(folder / "a.txt")
    proc = run_cli("ingest", str(folder), "--path", str(tmp_path / "store"), "--model", str(tiny_variant), *CHUNKS)
    assert proc.returncode == 0, proc.stderr
    assert "ingested 2 documents (1 more met twice, stored once), " in proc.stdout, proc.stdout
    # Empty files are documents with no text: the summary says so ("3 documents, 4 chunks" said nothing of why).
    (folder / "empty.txt").write_text("", encoding="utf-8")
    (folder / "blank.md").write_text("\n  \n", encoding="utf-8")
    proc = run_cli("ingest", str(folder), "--path", str(tmp_path / "store"), "--model", str(tiny_variant), *CHUNKS)
    assert proc.returncode == 0, proc.stderr
    assert "ingested 4 documents (2 unchanged, 1 more met twice, stored once, 2 with no text), " in proc.stdout
