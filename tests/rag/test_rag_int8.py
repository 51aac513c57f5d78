"""quantize="int8" end to end (issue 26): the option's checks, the int8 layers it installs, a collection that
records it and refuses the other kind, and search that embeds queries as the collection's documents were.
Every vector is checked against an independent computation: torch's own dynamic int8 linear layers applied
by hand to the float model, or the model's own encode."""

from __future__ import annotations

import copy
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest
import torch

for _module in ("qdrant_client", "tenacity"):
    pytest.importorskip(_module)

from qdrant_client import QdrantClient

import c2v_rag
from c2v_rag import Causal2Vec
from c2v_rag.devices import cpu_class, resolve_compute_dtype, resolve_quantize
from c2v_rag.rag import DEFAULT_QUERY_TASK, CollectionMismatchError, load_model
from c2v_rag.rag.collection import check_model, collection_fingerprint
from rag_helpers import stored_points

CPU = torch.device("cpu")
needs_int8_cpu = pytest.mark.skipif(cpu_class() == "other", reason="fbgemm's int8 kernels need AVX2 or better")


def _flags() -> set[str]:
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    line = next((line for line in text.splitlines() if line.startswith("flags")), "flags:")
    return set(line.split(":", 1)[1].split())


def test_bad_values_are_refused_naming_the_input_and_the_fix():
    with pytest.raises(ValueError, match=r"quantize='int4' is not one of none, int8, auto"):
        resolve_quantize("int4", CPU)
    with pytest.raises(ValueError, match=r"CPU only.*device='cpu'"):
        resolve_quantize("int8", torch.device("cuda"))
    with pytest.raises(ValueError, match=r"dtype='bfloat16' cannot apply.*'float32'"):
        resolve_compute_dtype("bfloat16", CPU, "int8")
    assert resolve_quantize(None, CPU) == resolve_quantize("none", CPU) == "none"
    assert resolve_quantize("auto", torch.device("cuda")) == "none"


def test_auto_follows_the_cpu_table():
    """The CPU class comes from /proc/cpuinfo; auto picks int8 on none of them (int8 missed the quality bound)."""
    flags = _flags()
    if not flags:
        pytest.skip("no /proc/cpuinfo flags to compare with")
    bf16 = bool(flags & {"avx512_bf16", "amx_bf16"}) or torch.ops.mkldnn._is_mkldnn_bf16_supported()
    expected = ("amx/avx512_bf16" if bf16 else "avx512_vnni" if flags & {"avx512_vnni"} else
                "avx2" if "avx2" in flags else "other")
    assert cpu_class() == expected
    assert resolve_quantize("auto", CPU) == "none"


@needs_int8_cpu
def test_int8_replaces_every_linear_layer_and_matches_torch_dynamic_int8_by_hand(tiny_variant):
    float_model = Causal2Vec.from_pretrained(tiny_variant, device="cpu")
    int8_model = Causal2Vec.from_pretrained(tiny_variant, device="cpu", quantize="int8")
    assert int8_model.quantization == "int8" and float_model.quantization == "none"
    for role in ("decoder", "encoder"):
        assert not any(type(m) is torch.nn.Linear for m in getattr(int8_model, role).modules())
    by_hand = copy.deepcopy(float_model)
    for role in ("decoder", "encoder"):
        torch.ao.quantization.quantize_dynamic(getattr(by_hand, role), {torch.nn.Linear}, dtype=torch.qint8,
                                               inplace=True)
    texts = ["vitamin deficiency is linked to bone loss", "cats and dogs are popular pets"]
    got = int8_model.encode(texts, normalize_embeddings=True)
    np.testing.assert_allclose(got, by_hand.encode(texts, normalize_embeddings=True), atol=1e-6)
    # Close to the float vectors, but computed otherwise (a quantize that did nothing would be equal).
    exact = float_model.encode(texts, normalize_embeddings=True)
    assert not np.allclose(got, exact, atol=1e-6)
    assert ((got * exact).sum(1) > 0.9).all()


@needs_int8_cpu
def test_a_quantized_model_cannot_be_quantized_again_or_trained_through_adapters(tiny_variant):
    model = Causal2Vec.from_pretrained(tiny_variant, device="cpu", quantize="int8")
    assert model.apply_quantization("int8") is model  # the same setting is a no-op
    with pytest.raises(ValueError, match="already quantized"):
        model.apply_quantization("none")


def test_a_float_collection_refuses_int8_vectors_and_older_collections_count_as_float():
    recorded = {"decoder": "d", "encoder": "e", "embedding_dim": 8, "quantize": "none"}
    with pytest.raises(CollectionMismatchError, match=r"quantize='none'.*quantize='int8'"):
        check_model(recorded, {**recorded, "quantize": "int8"}, "docs", "here")
    older = {k: v for k, v in recorded.items() if k != "quantize"}
    with pytest.raises(CollectionMismatchError, match="quantize"):
        check_model(older, {**recorded, "quantize": "int8"}, "docs", "here")
    check_model(older, recorded, "docs", "here")  # float into an older (float) collection is fine


@needs_int8_cpu
def test_ingest_records_int8_refuses_float_and_search_embeds_queries_in_int8(tmp_path, tiny_variant, corpus,
                                                                            ingest_config):
    c2v_rag.ingest(corpus, path=tmp_path, collection="q8", model=tiny_variant, config=ingest_config,
                   quantize="int8")
    int8_model = load_model(tiny_variant, device="cpu", quantize="int8")
    with closing(QdrantClient(path=str(tmp_path))) as client:
        assert collection_fingerprint(client, "q8")["quantize"] == "int8"
        payloads = stored_points(client, "q8")
        ids = list(payloads)
        texts = [payloads[i]["page_content"] for i in ids]
        stored = np.array([p.vector for p in client.retrieve("q8", ids, with_vectors=True)], dtype=np.float32)
        query = corpus[2]["text"][:50]
        hits = c2v_rag.search(query, top_k=3, collection="q8", client=client)  # no quantize named: the collection's
        with pytest.raises(CollectionMismatchError, match="quantize"):
            c2v_rag.search(query, top_k=3, collection="q8", client=client, quantize="none")
    # Dynamic int8 scales each matmul's input over the whole batch, so a chunk's stored vector (embedded in an
    # ingest batch) is close to, not equal to, the same chunk embedded alone.
    alone = int8_model.encode_documents(texts, batch_size=1, normalize_embeddings=True)
    assert ((stored * alone).sum(1) > 0.99).all()
    # A query is embedded alone, in int8: the ranking is that vector against the stored ones.
    q = int8_model.encode_queries(query, task=DEFAULT_QUERY_TASK, normalize_embeddings=True)
    expected = sorted(zip((stored @ q).tolist(), ids), reverse=True)[:3]
    assert [h.id for h in hits] == [i for _, i in expected]
    np.testing.assert_allclose([h.score for h in hits], [sc for sc, _ in expected], atol=1e-4)
    with pytest.raises(CollectionMismatchError, match="quantize"):
        c2v_rag.ingest(corpus[:1], path=tmp_path, collection="q8", model=tiny_variant, config=ingest_config)


@needs_int8_cpu
def test_the_cli_takes_quantize_on_ingest_embed_and_serve():
    from c2v_rag.cli import build_parser

    parser = build_parser()
    for argv in (["ingest", "x"], ["embed", "x", "--out", "y"], ["serve"], ["search", "q"], ["eval", "--data", "d"]):
        assert parser.parse_args([*argv, "--quantize", "int8"]).quantize == "int8"
    with pytest.raises(SystemExit):
        parser.parse_args(["ingest", "x", "--quantize", "int4"])
