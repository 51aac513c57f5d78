"""The sentence-transformers files of a variant directory: every variant is also a sentence-transformers model.

:func:`write_st_files` adds the three files that ``SentenceTransformer(path)`` reads next to a
variant's own files::

    modules.json                        one module: c2v_rag.model.st_module.Causal2VecModule
    config_sentence_transformers.json   the prompts (query, document, per task and task type)
    causal2vec_st_module.json           the module's own settings

The module builds the variant with :meth:`Causal2Vec.from_pretrained`, so there is one model
implementation. ``save_pretrained`` writes these files; running :func:`write_st_files` on a variant
saved before them makes it loadable by sentence-transformers too.

Our instructions are not prepended to the text: they sit in the decoder's template, before the
Contextual token. sentence-transformers (>= 5) hands the resolved prompt to the input module's
``preprocess(inputs, prompt=...)``, so the module receives the instruction apart from the text and
places it where :meth:`Causal2Vec.encode_queries` does. The prompts are therefore the instructions
themselves, and an empty prompt means "no instruction".

Nothing here imports sentence-transformers or the model: the module class is named by its path
(:data:`MODULE_TYPE`) and lives in :mod:`c2v_rag.model.st_module`, which imports this one. This file was
``c2v_rag.sentence_transformers`` before; that name still re-exports its public names.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from c2v_rag.core.config import CONFIG_FILE, Causal2VecConfig, read_config
from c2v_rag.core.instructions import _EVALUATION, DEFAULT_QUERY_TASK, STS_INSTRUCTION, get_task, query_instruction_text
from c2v_rag.version import __version__

MODULES_FILE = "modules.json"
ST_CONFIG_FILE = "config_sentence_transformers.json"
MODULE_CONFIG_FILE = "causal2vec_st_module.json"
# Written into every saved variant's modules.json (and the packaged presets'), and promised stable
# (docs/frameworks.md): it is where the class is defined, the path sentence-transformers itself writes when it
# saves a SentenceTransformer, so both ways of saving name one path. Should the class move, this module path
# stays as a re-export, as c2v_rag.st_module (the previous release's path, LEGACY_MODULE_TYPES) does.
MODULE_TYPE = "c2v_rag.model.st_module.Causal2VecModule"
# Paths earlier releases wrote, which their variants name: each must keep importing the class.
LEGACY_MODULE_TYPES = ("c2v_rag.st_module.Causal2VecModule",)

# mteb task types (its TaskMetadata.type) by how our instruction policy treats them.
_QUERY_ONLY_TYPES = ("Retrieval", "Reranking")
_STS_LIKE_TYPES = ("STS", "Summarization", "PairClassification")
_UNINSTRUCTED_TYPES = ("Classification", "Clustering")


def st_prompts(config: Causal2VecConfig) -> dict[str, str]:
    """The prompts a variant declares to sentence-transformers and mteb.

    ``query``/``document`` reproduce ``encode_queries``/``encode_documents`` with no arguments.
    The other keys follow mteb's lookup order (``{task}-{query|document}``, ``{task}``,
    ``{task type}-{query|document}``, ``{task type}``): the paper's Table 16 instruction for each
    task it names, and for other tasks the policy of their type (queries only for retrieval and
    reranking, both sides for STS-like types, none for classification and clustering).
    """
    query = query_instruction_text(config)
    prompts = {"query": query, "document": ""}
    for name, kind, instruction in _EVALUATION:
        if kind.symmetric:
            prompts[name] = instruction
        else:
            prompts[f"{name}-query"] = instruction
            prompts[f"{name}-document"] = ""
    prompts["STSBenchmark"] = STS_INSTRUCTION
    retrieval_query = query or get_task(DEFAULT_QUERY_TASK).instruction
    for task_type in _QUERY_ONLY_TYPES:
        prompts[f"{task_type}-query"] = retrieval_query
        prompts[f"{task_type}-document"] = ""
    for task_type in _STS_LIKE_TYPES:
        prompts[task_type] = STS_INSTRUCTION
    for task_type in _UNINSTRUCTED_TYPES:
        prompts[task_type] = ""
    return prompts


def write_st_files(path: str | Path, config: Causal2VecConfig | None = None) -> Path:
    """Make the variant directory ``path`` loadable by ``SentenceTransformer(path)``.

    Safe to re-run on any variant, old or new: it only (re)writes the three files named in this
    module's docstring, from the variant's ``causal2vec_config.json`` (or ``config`` when given).
    """
    directory = Path(path)
    config = config if config is not None else read_config(directory)
    modules = [{"idx": 0, "name": "0", "path": "", "type": MODULE_TYPE}]
    st_config = {
        "model_type": "SentenceTransformer",
        "__version__": _versions(),
        "prompts": st_prompts(config),
        "default_prompt_name": None,
        "similarity_fn_name": "cosine",
    }
    _write_json(directory / MODULES_FILE, modules)
    _write_json(directory / ST_CONFIG_FILE, st_config)
    _write_json(directory / MODULE_CONFIG_FILE, {"max_seq_length": None})
    return directory


def variant_revision(path: str | Path) -> str:
    """A content hash of a variant's config and weights (12 hex digits): its revision when it has no git one."""
    directory = Path(path)
    digest = hashlib.sha256()
    files = [directory / CONFIG_FILE, directory / "projector.safetensors", *sorted(directory.glob("*_adapter/*"))]
    for file in files:
        if file.is_file():
            digest.update(file.relative_to(directory).as_posix().encode())
            digest.update(file.read_bytes())
    return digest.hexdigest()[:12]


def _versions() -> dict[str, str]:
    import torch
    import transformers

    # sentence-transformers reads prompts from 5.0 on; it warns when a model names a newer version
    # than the installed one, so the floor is written rather than whatever happens to be installed.
    return {
        "sentence_transformers": "5.0.0",
        "transformers": transformers.__version__,
        "pytorch": torch.__version__.split("+")[0],
        "c2v_rag": __version__,
    }


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
