"""The default preset through the ecosystem's own classes, offline, each checked against c2v_rag.

    HF_HUB_OFFLINE=1 python examples/ecosystem.py

1. LangChain's HuggingFaceEmbeddings, 2. LlamaIndex's HuggingFaceEmbedding, 3. a sentence-transformers
evaluator, 4. mteb.evaluate on a small custom retrieval task built from the texts below. Each prints
its result and the largest difference from Causal2Vec's own vectors, every path in float32 (a variant's
``dtype: auto`` would pick bfloat16 on a GPU or a CPU with bf16 matmuls, where paths that batch
differently agree to ~1e-2 rather than ~1e-7).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

QUERY = "What causes spring tides?"
DOCS = [
    "Spring tides happen when the Sun and the Moon line up, so their pulls add.",
    "Vitamin D deficiency is linked to rickets in children.",
    "The central bank raised interest rates by a quarter point.",
]
QUERIES = {"q0": QUERY, "q1": "What does a lack of vitamin D cause?", "q2": "Did the central bank change rates?"}


def main() -> int:
    from c2v_rag import Causal2Vec
    from c2v_rag.hub.presets import DEFAULT_PRESET, PRESETS_DIR

    path = str(PRESETS_DIR / DEFAULT_PRESET)
    native = Causal2Vec.from_pretrained(path, device="cpu", dtype="float32")
    q_ref = native.encode_queries(QUERY, normalize_embeddings=True)
    d_ref = native.encode_documents(DOCS, normalize_embeddings=True)
    print(f"native: cosines {_rounded(d_ref @ q_ref)}")

    from langchain_huggingface import HuggingFaceEmbeddings

    fp32 = {"dtype": torch.float32}  # sentence-transformers' model_kwargs, handed to the Causal2Vec module
    lc = HuggingFaceEmbeddings(
        model_name=path,
        model_kwargs={"device": "cpu", "trust_remote_code": True, "model_kwargs": fp32},
        encode_kwargs={"normalize_embeddings": True},
        query_encode_kwargs={"prompt_name": "query", "normalize_embeddings": True},
    )
    q, d = np.array(lc.embed_query(QUERY)), np.array(lc.embed_documents(DOCS))
    print(
        f"1. LangChain HuggingFaceEmbeddings: cosines {_rounded(d @ q)}, "
        f"max |diff| query {np.abs(q - q_ref).max():.1e}, documents {np.abs(d - d_ref).max():.1e}"
    )

    from llama_index.embeddings.huggingface import HuggingFaceEmbedding

    li = HuggingFaceEmbedding(
        model_name=path,
        device="cpu",
        trust_remote_code=True,
        query_instruction=lc._client.prompts["query"],
        model_kwargs=fp32,
    )
    q, d = np.array(li.get_query_embedding(QUERY)), np.array(li.get_text_embedding_batch(DOCS))
    print(
        f"2. LlamaIndex HuggingFaceEmbedding: cosines {_rounded(d @ q)}, "
        f"max |diff| query {np.abs(q - q_ref).max():.1e}, documents {np.abs(d - d_ref).max():.1e}"
    )

    from sentence_transformers.sentence_transformer.evaluation import InformationRetrievalEvaluator

    st = lc._client  # the SentenceTransformer that LangChain loaded
    evaluator = InformationRetrievalEvaluator(
        queries=QUERIES,
        corpus={f"d{i}": t for i, t in enumerate(DOCS)},
        relevant_docs={"q0": {"d0"}, "q1": {"d1"}, "q2": {"d2"}},
        name="tiny",
        show_progress_bar=False,
        query_prompt_name="query",
        corpus_prompt_name="document",
    )
    scores = st.evaluate(evaluator)
    print(
        f"3. sentence-transformers InformationRetrievalEvaluator: ndcg@10 {scores['tiny_cosine_ndcg@10']:.4f}, "
        f"mrr@10 {scores['tiny_cosine_mrr@10']:.4f}"
    )

    import mteb

    from c2v_rag.evaluation.mteb_adapter import local_retrieval_task

    task = local_retrieval_task(
        "TinyTides",
        {f"d{i}": t for i, t in enumerate(DOCS)},
        QUERIES,
        {"q0": {"d0": 1}, "q1": {"d1": 1}, "q2": {"d2": 1}},
    )
    st_fp32 = st  # already float32
    result = mteb.evaluate(st_fp32, task, cache=None, show_progress_bar=False)
    meta = mteb.models.SentenceTransformerEncoderWrapper(st_fp32).mteb_model_meta
    print(
        f"4. mteb.evaluate: {result.model_name} @ {result.model_revision}, embed_dim {meta.embed_dim}, "
        f"max_tokens {meta.max_tokens}, TinyTides ndcg@10 {result.task_results[0].get_score():.4f}"
    )
    return 0


def _rounded(values: np.ndarray) -> list[float]:
    return [round(float(v), 4) for v in values]


if __name__ == "__main__":
    sys.exit(main())
