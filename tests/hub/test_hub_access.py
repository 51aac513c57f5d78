"""The one check of the Hugging Face Hub: against a real HTTP server on loopback, and a port nothing listens on."""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from hub_cache import publish_snapshot
from huggingface_hub import constants

from c2v_rag.hub import hub_access
from c2v_rag.hub.sources import resolve_reference


class _Hub(BaseHTTPRequestHandler):
    """The hub's answers to HEAD requests: its root (any answer says it is there), and a model's config.json at a
    revision, with the commit the revision names now (``commits``), as huggingface.co answers them."""

    asked: list[str] = []
    commits: dict[str, str] = {}

    def do_HEAD(self) -> None:  # noqa: N802 (http.server's name)
        type(self).asked.append(self.path)
        commit = self.commits.get(self.path)
        revision = self.path.split("/")[4] if self.path.count("/") >= 5 else ""
        if self.path == "/" or commit is None:
            self.send_response(401 if self.path == "/" else 404)  # the root: an account is not what is asked
            if len(revision) == 40:  # a file the commit lacks, said as the hub says it (its client keeps that)
                self.send_header("X-Error-Code", "EntryNotFound")
                self.send_header("X-Repo-Commit", revision)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("X-Repo-Commit", commit)
        self.send_header("ETag", '"0123abcd"')
        self.send_header("Content-Length", "2")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def answering_hub() -> Iterator[str]:
    _Hub.asked, _Hub.commits = [], {}
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def silent_hub() -> str:
    with socket.socket() as sock:  # a port that was free a moment ago: connecting to it is refused
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch):
    def use(url: str) -> None:
        monkeypatch.setattr(constants, "ENDPOINT", url)
        # As HF_ENDPOINT set before huggingface_hub's import makes it: downloads go there too.
        monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", url + "/{repo_id}/resolve/{revision}/{filename}")
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        hub_access.hub_answers.cache_clear()

    yield use
    hub_access.hub_answers.cache_clear()


def test_a_hub_that_answers_is_used(endpoint, answering_hub, caplog):
    endpoint(answering_hub)
    hub_access.current_commit.cache_clear()
    with caplog.at_level(logging.WARNING, logger="c2v_rag.hub.hub_access"):
        assert hub_access.cache_only_without_hub("owner/model") is False
        assert hub_access.cache_only_without_hub("owner/other") is False
    assert _Hub.asked == ["/"]  # once per process
    assert constants.HF_HUB_OFFLINE is False and caplog.records == []
    assert hub_access.hub_status() == "yes"
    assert hub_access.not_in_cache_hint("owner/model") == ""


def test_a_silent_hub_turns_the_process_to_its_cache_with_one_warning(endpoint, silent_hub, caplog):
    endpoint(silent_hub)
    with caplog.at_level(logging.WARNING, logger="c2v_rag.hub.hub_access"):
        source = resolve_reference("owner/model")
        assert hub_access.cache_only_without_hub("owner/other") is True
    assert not source.is_local and constants.HF_HUB_OFFLINE is True
    (record,) = caplog.records
    assert silent_hub in record.getMessage() and "owner/model" in record.getMessage()
    assert "HF_HUB_OFFLINE=1" in record.getMessage()
    assert hub_access.hub_status() == "not asked (offline mode): hub ids load from the local cache only"
    hint = hub_access.not_in_cache_hint("owner/model")
    assert "'owner/model' is not in the local Hugging Face cache" in hint and "hf download" in hint


def test_offline_set_to_0_on_purpose_always_asks_the_hub(endpoint, silent_hub, monkeypatch):
    endpoint(silent_hub)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    assert hub_access.cache_only_without_hub("owner/model") is False
    assert constants.HF_HUB_OFFLINE is False and hub_access.hub_answers.cache_info().currsize == 0  # never asked
    assert hub_access.hub_status().startswith("not checked (HF_HUB_OFFLINE=0)")


def test_offline_mode_asks_nothing(endpoint, answering_hub, monkeypatch):
    endpoint(answering_hub)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    assert hub_access.cache_only_without_hub("owner/model") is True
    assert _Hub.asked == []


def test_a_hub_id_not_in_the_cache_fails_at_once_naming_the_fix(endpoint, silent_hub, monkeypatch, tmp_path):
    from c2v_rag.core.errors import ModelSourceError
    from c2v_rag.hub.sources import load_tokenizer

    endpoint(silent_hub)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf"))
    with pytest.raises(ModelSourceError, match=r"'owner/model' is not in the local Hugging Face cache.*hf download"):
        load_tokenizer(resolve_reference("owner/model"))


def test_online_the_snapshot_of_the_commit_the_hub_names_now_loads_as_a_local_folder(
    endpoint, answering_hub, tiny_dirs, tmp_path, monkeypatch
):
    """One request asks the hub which commit a revision names; a snapshot of it the cache holds whole is loaded from
    the cache as a local folder. A commit the cache lacks, or a hub that does not know the model, leaves the hub
    id to transformers, which downloads it."""
    endpoint(answering_hub)
    hub_access.current_commit.cache_clear()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf"))
    # main as the cache last saw it is a; the hub has moved on to b
    publish_snapshot(tmp_path / "hf", "tiny-org/llama", tiny_dirs["llama"], "a" * 40)
    newer = publish_snapshot(tmp_path / "hf", "tiny-org/llama", tiny_dirs["llama"], "b" * 40, main=False)
    _Hub.commits = {"/tiny-org/llama/resolve/main/config.json": "b" * 40}

    source = resolve_reference("tiny-org/llama")
    assert source.is_local and source.hub_id == "tiny-org/llama"
    assert source.location == str(newer)
    assert resolve_reference("tiny-org/llama").location == source.location
    assert _Hub.asked.count("/tiny-org/llama/resolve/main/config.json") == 1  # once per process
    assert constants.HF_HUB_OFFLINE is False
    # A sentence-transformers file the snapshot lacks is asked for at its commit, once: the hub's 404 is kept.
    from c2v_rag.hub.sources import normalizes_embeddings

    asked = f"/tiny-org/llama/resolve/{'b' * 40}/modules.json"
    assert normalizes_embeddings(source) is False and normalizes_embeddings(source) is False
    assert _Hub.asked.count(asked) == 1

    _Hub.commits["/tiny-org/llama/resolve/v2/config.json"] = "c" * 40  # a revision whose commit is not here
    assert not resolve_reference("tiny-org/llama", revision="v2").is_local
    assert not resolve_reference("tiny-org/unknown").is_local  # 404: transformers says what is wrong
