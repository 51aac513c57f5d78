"""The Ray engine joining a running two-node Ray cluster by its address, as on a real cluster.

``ray.cluster_utils.Cluster`` starts a head node and a second node (two raylets, one object store
each) on this machine: Ray's own way of testing multi-node behaviour without a second machine.
Each node offers one CPU, so the two embedding actors (one CPU each) can only be placed one per
node: the run finishing at all shows an actor working on the node the driver is not on. The
points are compared with an in-process ingest of the same documents.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

for _module in ("qdrant_client", "llama_index.core", "tenacity", "ray", "ray.data", "pyarrow"):
    pytest.importorskip(_module)

import ray
from rag_helpers import compare, make_text, points
from ray.cluster_utils import Cluster

import c2v_rag
from c2v_rag.rag import RayOptions


@pytest.fixture(scope="module")
def two_nodes():
    os.environ.setdefault("RAY_worker_niceness", "0")  # as in test_rag_ray: no renicing on a shared machine
    if ray.is_initialized():  # another module's cluster: this one must be joined by its address
        ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    try:
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


def test_ingest_joins_a_two_node_cluster_by_address_and_stores_what_one_process_stores(
    tmp_path, two_nodes, tiny_variant, ingest_config
):
    docs = [{"id": f"doc-{i}", "text": make_text(500 + i, sentences=4), "metadata": {"i": i}} for i in range(8)]
    kwargs = dict(collection="kb", model=str(tiny_variant), config=ingest_config)
    expected = c2v_rag.ingest(docs, path=tmp_path / "local", **kwargs)

    assert not ray.is_initialized()
    options = RayOptions(address=two_nodes.address, actors=2, docs_per_batch=2, chunk_tasks=1)
    result = c2v_rag.ingest(docs, path=tmp_path / "ray", engine="ray", ray=options, **kwargs)

    alive = [node for node in ray.nodes() if node["Alive"]]
    assert len(alive) == 2 and all(node["Resources"].get("CPU") == 1 for node in alive)
    assert ray.is_initialized()  # the run joined the cluster and left the connection to its owner
    got, want = points(tmp_path / "ray"), points(tmp_path / "local")
    difference = compare(got, want)
    print(f"\ntwo-node ray vs local: {len(got)}/{len(want)} points, max |vector difference| {difference:.2e}")
    assert result.ok and (result.chunks, result.chunks_written) == (expected.chunks, expected.chunks)
    assert difference < 1e-5
    assert np.isfinite(difference)
