"""The server path, checked through the arguments it builds (no Qdrant server runs here).

What the server itself does with them (sharding, replication, quantization) is not tested.
"""

from __future__ import annotations

import logging
import sys
from types import SimpleNamespace

import pytest

# The RAG extras (pip install 'c2v-rag[all]'); without them these tests are skipped, visibly.
for _module in ("qdrant_client", "llama_index.core", "tenacity"):
    pytest.importorskip(_module)

from qdrant_client import QdrantClient
from qdrant_client.http import models

import c2v_rag
from c2v_rag.core.errors import MissingPackageError
from c2v_rag.rag import QdrantConfig
from c2v_rag.store.collection import ensure_collection, model_fingerprint


def test_collection_arguments_for_a_server():
    config = QdrantConfig(
        url="https://qdrant.example:6333",
        datatype="float16",
        quantization="int8",
        on_disk=True,
        on_disk_payload=True,
        shard_number=4,
        replication_factor=2,
        write_consistency_factor=2,
    )
    kwargs = config.create_collection_kwargs(1152)
    assert kwargs == {
        "vectors_config": models.VectorParams(
            size=1152, distance=models.Distance.COSINE, on_disk=True, datatype=models.Datatype.FLOAT16
        ),
        "quantization_config": models.ScalarQuantization(
            scalar=models.ScalarQuantizationConfig(type=models.ScalarType.INT8, quantile=0.99, always_ram=True)
        ),
        "shard_number": 4,
        "replication_factor": 2,
        "write_consistency_factor": 2,
        "on_disk_payload": True,
    }
    binary = QdrantConfig(
        url="http://h:6333",
        quantization="binary",
        quantization_always_ram=False,
        vector_name="text-dense",
        distance="dot",
    ).create_collection_kwargs(8)
    assert binary == {
        "vectors_config": {"text-dense": models.VectorParams(size=8, distance=models.Distance.DOT)},
        "quantization_config": models.BinaryQuantization(binary=models.BinaryQuantizationConfig(always_ram=False)),
    }


def test_client_arguments_and_the_api_key(monkeypatch):
    config = QdrantConfig(
        url="https://qdrant.example:6333", api_key="s3cret-key", prefer_grpc=True, https=True, timeout=30
    )
    assert config.client_kwargs() == {
        "url": "https://qdrant.example:6333",
        "api_key": "s3cret-key",
        "prefer_grpc": True,
        "grpc_port": 6334,
        "timeout": 30,
        "https": True,
    }
    assert "s3cret-key" not in repr(config) and "s3cret-key" not in config.location
    assert "s3cret-key" not in config.model_dump_json()
    monkeypatch.setenv("QDRANT_API_KEY", "from-env")
    assert QdrantConfig(url="http://h:6333").client_kwargs()["api_key"] == "from-env"
    assert "api_key" not in QdrantConfig(path="/tmp/x").client_kwargs()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"url": "qdrant.example:6333"}, "must look like http://host:6333"),
        ({"url": "http://h:6333", "path": "/tmp/q"}, "not both"),
        ({"url": "http://h:6333", "quantization": "pq"}, "quantization"),
    ],
)
def test_bad_settings_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        QdrantConfig(**kwargs)


def test_resolve_lays_arguments_over_the_config(tmp_path, monkeypatch):
    monkeypatch.setenv("C2V_RAG_QDRANT_PATH", str(tmp_path / "default"))
    assert QdrantConfig.resolve().path == tmp_path / "default"
    base = QdrantConfig(path=tmp_path / "p", quantization="int8")
    server = QdrantConfig.resolve(base, url="http://h:6333", api_key="k", prefer_grpc=True)
    assert (server.url, server.path, server.api_key.get_secret_value(), server.prefer_grpc, server.quantization) == (
        "http://h:6333",
        None,
        "k",
        True,
        "int8",
    )


class RecordingServer:
    """The calls ``ensure_collection`` makes of a Qdrant server, recorded; ``keeps_metadata=False`` answers as a
    server before Qdrant 1.16 does, which takes ``create_collection``'s metadata and drops it (none runs here)."""

    def __init__(self, keeps_metadata: bool = True) -> None:
        self.calls: list[tuple] = []
        self.keeps_metadata = keeps_metadata
        self.metadata = None

    def collection_exists(self, name):
        return False

    def create_collection(self, name, **kwargs):
        self.calls.append(("create_collection", name, kwargs))
        self.metadata = kwargs.get("metadata") if self.keeps_metadata else None

    def create_payload_index(self, name, field_name, field_schema, wait):
        self.calls.append(("create_payload_index", name, field_name, field_schema))

    def get_collection(self, name):
        return SimpleNamespace(config=SimpleNamespace(metadata=self.metadata))


def test_ensure_collection_sends_the_server_settings_and_indexes_doc_id(tiny_model, caplog):
    config = QdrantConfig(
        url="http://h:6333", datatype="float16", quantization="binary", shard_number=2, replication_factor=3
    )
    fingerprint = model_fingerprint(tiny_model, "/variants/tiny")
    server = RecordingServer()
    assert ensure_collection(server, "docs", config, fingerprint) is True
    assert server.calls == [
        ("create_collection", "docs", {"metadata": {"c2v_rag": fingerprint}, **config.create_collection_kwargs(64)}),
        ("create_payload_index", "docs", "doc_id", models.PayloadSchemaType.KEYWORD),
    ]
    assert fingerprint["embedding_dim"] == 64 and fingerprint["model"] == "/variants/tiny"
    assert "did not keep" not in caplog.text

    old = RecordingServer(keeps_metadata=False)
    assert ensure_collection(old, "docs", config, fingerprint) is True
    assert old.calls == server.calls  # created all the same, and said so
    assert "Qdrant at http://h:6333 did not keep collection 'docs'" in caplog.text
    assert "Upgrade the server to Qdrant 1.16 or later" in caplog.text


def test_ingest_over_the_server_path_connects_with_its_settings(
    tiny_variant, corpus, ingest_config, monkeypatch, caplog
):
    import qdrant_client

    made = []

    def fake_client(**kwargs):
        made.append(kwargs)
        return QdrantClient(":memory:")  # stands in for the server

    monkeypatch.setattr(qdrant_client, "QdrantClient", fake_client)
    caplog.set_level(logging.DEBUG)
    result = c2v_rag.ingest(
        corpus,
        "https://qdrant.example:6333",
        "remote",
        api_key="s3cret-key",
        prefer_grpc=True,
        model=tiny_variant,
        config=ingest_config,
    )
    assert made == [
        {
            "url": "https://qdrant.example:6333",
            "api_key": "s3cret-key",
            "prefer_grpc": True,
            "grpc_port": 6334,
            "timeout": 60,
        }
    ]
    assert result.location == "https://qdrant.example:6333" and result.chunks_written == result.chunks > 0
    assert "s3cret-key" not in caplog.text and "s3cret-key" not in result.summary()


def test_only_embedded_clients_serialize_their_calls():
    from c2v_rag.rag.ingestion.local_engine import _is_embedded

    assert _is_embedded(QdrantClient(":memory:"))
    assert not _is_embedded(QdrantClient(url="http://localhost:6333", check_compatibility=False))
    assert _is_embedded(object())  # unknown: the safe side


def test_missing_qdrant_client_gives_the_pip_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "qdrant_client", None)
    with pytest.raises(MissingPackageError, match=r"pip install 'c2v-rag\[qdrant\]'"):
        c2v_rag.ingest(["some text"])
    with pytest.raises(MissingPackageError, match="c2v_rag.search needs the package 'qdrant-client'"):
        c2v_rag.search("a query")


def test_importing_c2v_rag_needs_no_optional_package():
    import os
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    code = (
        "import sys; sys.modules.update(qdrant_client=None, llama_index=None, tenacity=None); "
        "import c2v_rag, c2v_rag.rag; print(callable(c2v_rag.ingest), c2v_rag.QdrantConfig().distance)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.split() == ["True", "cosine"]


def test_only_transient_errors_are_retried():
    import httpx
    from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

    from c2v_rag.store.retry import is_transient

    def answer(status: int) -> UnexpectedResponse:
        return UnexpectedResponse(status_code=status, reason_phrase="", content=b"", headers=httpx.Headers())

    assert all(
        is_transient(e)
        for e in [
            ConnectionError(),
            TimeoutError(),
            answer(503),
            answer(429),
            ResponseHandlingException(OSError("reset")),
            httpx.ConnectError("x"),
        ]
    )
    assert not any(is_transient(e) for e in [answer(400), answer(404), ValueError("bad"), RuntimeError("x")])


def test_embedded_qdrant_warns_that_it_ignores_storage_options(tmp_path, caplog):
    config = QdrantConfig(path=tmp_path / "q", datatype="float16", quantization="binary")
    with caplog.at_level(logging.WARNING, logger="c2v_rag.store.collection"):
        config.connect().close()
    assert "quantization" in caplog.text and "datatype=float16" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="c2v_rag.store.collection"):
        QdrantConfig(path=tmp_path / "r").connect().close()
    assert "ignores" not in caplog.text
