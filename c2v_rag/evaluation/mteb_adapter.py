"""Run a Causal2Vec model under the ``mteb`` package (2.x encoder protocol).

The standard way, as mteb's documentation runs any sentence-transformers model (a variant
directory is one; its prompts carry the instructions per task and task type, and mteb reads the
name, revision, embedding size and max tokens off the model)::

    import mteb
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer("path/to/variant", trust_remote_code=True)
    mteb.evaluate(model, mteb.get_tasks(tasks=["SciFact", "STSBenchmark"]))

Without sentence-transformers, wrap a loaded model::

    from c2v_rag import Causal2Vec
    from c2v_rag.evaluation.mteb_adapter import MTEBEncoder

    encoder = MTEBEncoder(Causal2Vec.from_pretrained(), name="c2v_rag/c2v-smollm2-135m-minilm")
    mteb.evaluate(encoder, mteb.get_tasks(tasks=["SciFact", "STSBenchmark"]))

Instructions follow the paper's Table 16 by task name; an unknown task falls back to its type
(the STS instruction for STS-like tasks, none otherwise). Queries always get the instruction;
documents only in symmetric task types.

In-context examples (the paper's "w/ ICL" row) go before the instruction of whatever gets one:
``MTEBEncoder(model, examples="registered")`` uses each task's registered examples
(``register_task(..., examples=...)``), ``examples={"SciFact": [(query, response), ...]}`` gives them per
task name. Through sentence-transformers, pass them to ``encode``: ``st_model.encode(texts, prompt=...,
examples=[...])``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from c2v_rag.core.instructions import STS_INSTRUCTION, get_task

if TYPE_CHECKING:
    from mteb.abstasks.retrieval_dataset_loaders import RetrievalSplitData

_ASYMMETRIC_TYPES = {"Retrieval", "Reranking", "InstructionRetrieval", "InstructionReranking"}
_STS_LIKE_TYPES = {"STS", "Summarization", "PairClassification"}


class MTEBEncoder:
    """Wraps a Causal2Vec model with the ``encode(inputs, *, task_metadata, prompt_type, ...)`` signature."""

    def __init__(
        self,
        model,
        *,
        name: str | None = None,
        revision: str | None = None,
        examples: Mapping[str, Sequence[tuple[str, str]]] | Literal["registered"] | None = None,
        **encode_kwargs: Any,
    ) -> None:
        """``name`` ("organization/model", as mteb requires) and ``revision`` label the results;
        they default to the base models' names and "no_revision_available". ``examples``: in-context
        examples for what gets an instruction, ``"registered"`` (each task's registered ones) or a mapping
        from mteb task name to ``(query, response)`` pairs; None: none."""
        if isinstance(examples, str) and examples != "registered":
            raise ValueError(
                f"examples={examples!r}: pass 'registered', a mapping of task name to (query, response) pairs, or None"
            )
        self.model = model
        self.examples = examples
        base = f"{Path(model.config.decoder).name}+{Path(model.config.encoder or 'none').name}"
        self.name = name or f"c2v_rag/{base}"
        if "/" not in self.name:
            raise ValueError(f"name={self.name!r} must be 'organization/model', as mteb requires")
        self.revision = revision or "no_revision_available"
        self.encode_kwargs = encode_kwargs

    @property
    def mteb_model_meta(self):
        """mteb's ``ModelMeta`` for this model: name, revision, embedding size, max tokens, cosine."""
        from mteb.models import ModelMeta
        from mteb.models.model_meta import ScoringFunction

        return ModelMeta.create_empty(
            overwrites=dict(
                name=self.name,
                revision=self.revision,
                embed_dim=self.model.embedding_dim,
                max_tokens=self.model.max_seq_length,
                similarity_fn_name=ScoringFunction.COSINE,
                framework=["PyTorch"],
                use_instructions=True,
            )
        )

    @staticmethod
    def instruction_for(task_name: str, task_type: str, prompt_type: Any) -> str | None:
        is_query = prompt_type is None or str(getattr(prompt_type, "value", prompt_type)) == "query"
        if not is_query and task_type in _ASYMMETRIC_TYPES:
            return None
        try:
            return get_task(task_name).instruction
        except KeyError:
            return STS_INSTRUCTION if task_type in _STS_LIKE_TYPES else None

    def encode(
        self,
        inputs,
        *,
        task_metadata,
        hf_split: str | None = None,
        hf_subset: str | None = None,
        prompt_type: Any = None,
        **kwargs: Any,
    ) -> np.ndarray:
        texts = [text for batch in inputs for text in batch["text"]]
        instruction = self.instruction_for(task_metadata.name, task_metadata.type, prompt_type)
        examples = self.examples_for(task_metadata.name) if instruction else ()
        return self.model.encode(texts, instruction=instruction or "", examples=list(examples), **self.encode_kwargs)

    def examples_for(self, task_name: str) -> Sequence[tuple[str, str]]:
        """The in-context examples inputs of ``task_name`` that get an instruction are given."""
        if self.examples is None:
            return ()
        if self.examples == "registered":
            try:
                return get_task(task_name).examples
            except KeyError:
                return ()
        return self.examples.get(task_name, ())

    def similarity(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return self.model.similarity(a, b).numpy()

    def similarity_pairwise(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a_n = a / np.linalg.norm(a, axis=1, keepdims=True)
        b_n = b / np.linalg.norm(b, axis=1, keepdims=True)
        return (a_n * b_n).sum(1)


def local_retrieval_task(
    name: str,
    corpus: dict[str, str],
    queries: dict[str, str],
    relevant: dict[str, dict[str, int]],
    *,
    description: str = "a local retrieval task",
):
    """An mteb retrieval task (one ``test`` split) built from local data, so ``mteb.evaluate`` runs offline.

    ``corpus`` and ``queries`` map ids to texts; ``relevant`` maps each query id to ``{doc id: grade}``.
    """
    from datasets import Dataset
    from mteb.abstasks.retrieval import AbsTaskRetrieval
    from mteb.abstasks.task_metadata import TaskMetadata

    split: RetrievalSplitData = {
        "corpus": Dataset.from_list([{"id": k, "text": v} for k, v in corpus.items()]),
        "queries": Dataset.from_list([{"id": k, "text": v} for k, v in queries.items()]),
        "relevant_docs": relevant,
        "top_ranked": None,
    }

    class LocalRetrieval(AbsTaskRetrieval):
        metadata = TaskMetadata(
            name=name,
            type="Retrieval",
            main_score="ndcg_at_10",
            description=description,
            reference=None,
            dataset={"path": "local", "revision": "local"},
            category="t2t",
            eval_splits=["test"],
            eval_langs=["eng-Latn"],
            date=("2025-01-01", "2025-01-01"),
            dialect=[],
            domains=[],
            task_subtypes=[],
            license="cc-by-4.0",
            annotations_creators="derived",
            modalities=["text"],
            sample_creation="found",
            bibtex_citation="",
        )

        def load_data(self, num_proc=None, **kwargs) -> None:
            self.dataset = {"default": {"test": split}}
            self.data_loaded = True

    return LocalRetrieval()
