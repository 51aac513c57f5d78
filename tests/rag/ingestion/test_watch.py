"""Collection.watch: a collection kept current from a thread, each change one more ingest, until stopped."""

from __future__ import annotations

import shutil
import threading
import time
from contextlib import closing
from pathlib import Path

import pytest

for _module in ("qdrant_client", "llama_index.core", "tenacity"):
    pytest.importorskip(_module)

from qdrant_client import QdrantClient
from rag_helpers import make_text, stored_points

from c2v_rag import Collection


def wait_for(condition, what: str, seconds: float = 120.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.05)


def test_a_watch_in_a_thread_ingests_each_change_survives_a_failed_run_and_stops(tmp_path, tiny_variant, ingest_config):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text(make_text(0, sentences=2), encoding="utf-8")
    store = tmp_path / "store"
    kb = Collection("kb", path=store, model=tiny_variant)
    results, failures, returned = [], [], []
    stop = threading.Event()

    def run() -> None:
        returned.append(
            kb.watch(
                folder,
                interval=0.05,
                stop=stop,
                on_result=results.append,
                on_failure=failures.append,
                sync=True,
                config=ingest_config,
            )
        )

    thread = threading.Thread(target=run)
    thread.start()
    try:
        wait_for(lambda: len(results) == 1, "the first run")
        assert (results[0].documents, results[0].chunks_unchanged) == (1, 0)
        (folder / "b.txt").write_text(make_text(1, sentences=2), encoding="utf-8")
        wait_for(lambda: len(results) == 2, "the run after b.txt was added")
        assert (results[1].documents, results[1].documents_unchanged) == (2, 1)
        moved = shutil.move(str(folder), str(tmp_path / "away"))  # the folder gone: that run fails, the watch goes on
        wait_for(lambda: failures, "the failed run")
        assert isinstance(failures[0], FileNotFoundError) and len(results) == 2
        shutil.move(moved, str(folder))
        (folder / "a.txt").unlink()
        wait_for(lambda: len(results) == 3, "the run after the folder came back less a.txt")
        assert (results[2].documents, results[2].documents_deleted) == (1, 1)
    finally:
        stop.set()
        thread.join(timeout=60)
    assert not thread.is_alive() and returned == [results[-1]]
    with closing(QdrantClient(path=str(store))) as client:
        assert {Path(p["doc_id"]).name for p in stored_points(client, "kb").values()} == {"b.txt"}
    with pytest.raises(ValueError, match="more than 0"):
        kb.watch(folder, interval=0)
