"""Evaluation: retrieval (nDCG@10, recall@100, MRR@10), STS (Spearman) and few-shot classification."""

from c2v_rag.evaluation.baselines import BiEncoder
from c2v_rag.evaluation.datasets import (
    LabelledData,
    PairScoreData,
    RetrievalData,
    banking77_dev,
    emotion_dev,
    read_beir,
    read_labelled,
    read_stsb,
    scifact_dev,
    split_queries,
    stsb_dev,
)
from c2v_rag.evaluation.evaluators import evaluate, evaluate_classification, evaluate_retrieval, evaluate_sts
from c2v_rag.evaluation.metrics import evaluate_run, mrr_at_k, ndcg_at_k, recall_at_k
from c2v_rag.evaluation.suites import DEV_SUITE, load_suite, run_suite

__all__ = [
    "BiEncoder",
    "LabelledData",
    "PairScoreData",
    "RetrievalData",
    "banking77_dev",
    "emotion_dev",
    "read_beir",
    "read_labelled",
    "read_stsb",
    "scifact_dev",
    "split_queries",
    "stsb_dev",
    "evaluate",
    "evaluate_classification",
    "evaluate_retrieval",
    "evaluate_sts",
    "evaluate_run",
    "mrr_at_k",
    "ndcg_at_k",
    "recall_at_k",
    "DEV_SUITE",
    "load_suite",
    "run_suite",
]
