"""``adapt``: a domain variant from documents alone.

Phases, each with a progress bar: make pseudo-pairs from the documents (read and chunked as ``ingest`` does),
train a LoRA variant on them mixed with general data, score it and its start on the held-out chunks and on
STS-B dev, and keep it only if it passes the gate. The output folder holds the pairs (``pairs/``, a BEIR
folder), the trained candidate (``candidate/``), the report (``adapt_report.json``) and, when kept, the variant
itself: ``ingest --model DIR`` and ``Causal2Vec.from_pretrained(DIR)`` load it.

A run cut short resumes: the pairs are reused when the documents and settings are the same, and training
continues from its last checkpoint.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from c2v_rag.core.config import ADAPT_CANDIDATE_DIR
from c2v_rag.core.files import replacing
from c2v_rag.documents.reading import ReadOptions
from c2v_rag.training.adapt.config import AdaptConfig
from c2v_rag.training.adapt.report import AdaptReport

if TYPE_CHECKING:
    from c2v_rag.training.adapt.decision import Verdict
    from c2v_rag.training.pseudo.beir_cache import PairSet

logger = logging.getLogger(__name__)

REPORT_FILE = "adapt_report.json"
PAIRS_DIR = "pairs"
DOCUMENTS_FILE = "documents.jsonl"
RECIPE_FILE = "adapt_recipe.json"
# What stays in candidate/ when the variant is published into the output folder.
_NOT_PUBLISHED = {"checkpoints", "mined", "pairs", RECIPE_FILE}


def _check_output(out: Path, overwrite: bool) -> None:
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"--out {out} is a file; name a folder for the adapted variant")
    ours = {PAIRS_DIR, ADAPT_CANDIDATE_DIR, REPORT_FILE}
    foreign = sorted(p.name for p in out.iterdir() if p.name not in ours) if out.is_dir() else []
    if foreign and not overwrite:
        raise FileExistsError(
            f"--out {out} already holds {', '.join(foreign[:5])}: a finished adapt run or other files. Name a new "
            "folder, or pass --overwrite to replace what adapt wrote there"
        )


def _document_source(docs: Any, pairs_dir: Path, read: ReadOptions) -> tuple[str, list[str]]:
    """The documents (a folder, with ``read``'s options: ``exclude`` patterns, ``text_suffixes``; or texts, dicts,
    Documents), read once with a bar over the files and written as JSONL, the path every later step reads them
    from: the questions' check, the pairs and the training each read the folder again before (a folder of PDFs
    takes minutes, and its skipped files were reported each time). Returns the path and the documents' ids."""
    from c2v_rag.training.pseudo.make import read_documents

    target = pairs_dir / DOCUMENTS_FILE
    documents = read_documents(docs, desc="Reading the documents", options=read)
    ids = []
    with replacing(target) as handle:
        for doc in documents:
            ids.append(doc.doc_id)
            handle.write(json.dumps({"id": doc.doc_id, "text": doc.text, "metadata": doc.metadata}, ensure_ascii=False))
            handle.write("\n")
    return str(target), ids


def cpu_facts() -> dict[str, Any]:
    """The CPU's name, cores and the instruction-set flags that decide its speed (for the report): the flags
    c2v_rag itself decides by (:func:`~c2v_rag.core.devices.cpu_flags`, which picks bf16 or float32)."""
    import torch

    from c2v_rag.core.devices import cpu_flags, cpu_model

    flags = sorted(f for f in cpu_flags() if f in _FLAGS or f.startswith("amx"))
    return {"name": cpu_model(), "cores": os.cpu_count(), "torch_threads": torch.get_num_threads(), "flags": flags}


_FLAGS = {"avx2", "avx512f", "avx512_vnni", "avx512_bf16", "fma"}


def _data_rows(path: Path) -> int:
    """Rows of a general-data file: its non-empty lines less the header."""
    with path.open(encoding="utf-8") as handle:
        return max(1, sum(1 for line in handle if line.strip()) - 1)


def train_config(
    config: AdaptConfig, documents: str, out: Path, general: Any, task: str | None, train_pairs: int = 1
) -> Any:
    """The training recipe ``adapt`` runs: the corpus's pseudo-pairs mixed with general data, LoRA where
    ``training.parts`` says, mined negatives with the margin filter.

    A dataset's ``weight`` scales its batches by its size (:class:`~c2v_rag.training.sampling.HomogeneousBatchPlan`),
    so the weights here divide each share by the dataset's size: ``general_share`` of the batches come from the
    general data, split evenly between its files, whatever the corpus's size (``train_pairs`` pairs).
    """
    from c2v_rag.core.config import read_config
    from c2v_rag.hub.presets import resolve_variant_path
    from c2v_rag.training.config import (
        DatasetSection,
        LoraSection,
        MiningSection,
        ModelSection,
        OutputSection,
        TrainConfig,
        TrainingSection,
    )
    from c2v_rag.training.objectives.contrastive import ContrastiveConfig

    t = config.training
    start = read_config(resolve_variant_path(config.start))
    if t.parts == "encoder":
        encoder_part = start.parts.get("encoder")
        if encoder_part is None or encoder_part.start != 0:
            raise ValueError(
                f"{config.start}'s embedding has no encoder part first in its vector (encoder_share="
                f"{start.encoder_share}, part_weights={start.part_weights}), so training.parts 'encoder' cannot "
                "train it as a prefix alone; use --train decoder"
            )
        # The encoder's part is a prefix of the vector: trained alone, the decoder never runs.
        objective = ContrastiveConfig(parts={}, matryoshka={encoder_part.stop: 1.0})
    else:
        objective = ContrastiveConfig(parts={"full": 1.0}, matryoshka={})
    general_files = [general.stsb_train, *general.nli] if general is not None else []
    share = t.general_share if general_files else 0.0  # without general data, every batch is the documents'
    # A weight w gives a dataset of n examples round(w * n / batch_size) batches an epoch: w = share * steps *
    # batch_size / n makes one epoch the run's steps, each dataset its share of them.
    epoch = t.steps * t.batch_size
    general_weight = {p: share / len(general_files) * epoch / _data_rows(p) for p in general_files}
    datasets = [
        DatasetSection(
            name="corpus",
            format="corpus",
            path=documents,
            task=task,
            pseudo_pairs=config.pairs,
            pairs_dir=str(out / PAIRS_DIR),
            weight=(1 - share) * epoch / max(1, train_pairs),
        )
    ]
    if share:
        datasets.append(
            DatasetSection(
                name="stsb",
                format="scored_pairs",
                path=str(general.stsb_train),
                task="STSBenchmark",
                loss="cosent",
                weight=general_weight[general.stsb_train],
            )
        )
        datasets += [
            DatasetSection(name=f"nli_{i}", format="triplets_tsv", path=str(p), task="NLI", weight=general_weight[p])
            for i, p in enumerate(general.nli)
        ]
    lora = LoraSection(enabled=t.parts != "encoder", r=t.lora_r, alpha=t.lora_alpha)
    encoder_lora = LoraSection(enabled=t.parts != "decoder", r=t.lora_r, alpha=t.lora_alpha)
    return TrainConfig(
        model=ModelSection(variant=config.start),
        lora=lora,
        encoder_lora=encoder_lora,
        train_projector=False,
        objective=objective,
        datasets=datasets,
        mining=MiningSection(
            method="model" if t.hard_negatives else "none",
            num_negatives=max(1, t.hard_negatives),
            depth=30,
            margin=t.margin,
            datasets=["corpus"] if t.hard_negatives else None,
            seed=t.seed,
        ),
        training=TrainingSection(
            steps=t.steps,
            batch_size=t.batch_size,
            hard_negatives=t.hard_negatives,
            lr=t.lr,
            warmup_steps=max(1, t.steps // 10),
            max_grad_norm=1.0,
            precision=t.precision,
            gradient_checkpointing=t.parts != "encoder",
            encoder_attention_dropout=t.encoder_attention_dropout,
            seed=t.seed,
            save_every=25,
            keep_checkpoints=1,
            device=t.device,
        ),
        output=OutputSection(dir=str(out / ADAPT_CANDIDATE_DIR), default_task=task, overwrite=False),
    )


def _train_candidate(recipe: Any, candidate: Path) -> None:
    """Train ``recipe`` into ``candidate``, resuming its checkpoints. The trainer (the model, its optimizer, the
    mined data) is let go before returning: the gate loads two models after it."""
    from c2v_rag.core.memory import release_freed_memory
    from c2v_rag.training.trainer import Trainer

    resume = (candidate / "checkpoints").is_dir() and any((candidate / "checkpoints").iterdir())
    if candidate.exists() and not resume:
        shutil.rmtree(candidate)
    trainer = Trainer(recipe)
    trainer.setup(resume=resume)
    (candidate / RECIPE_FILE).write_text(recipe.model_dump_json(indent=2) + "\n", encoding="utf-8")
    trainer.fit()
    del trainer
    gc.collect()  # the model's hooks and the trainer refer to each other
    release_freed_memory()  # else the gate's two models and the candidate's int8 build land on what training freed


def _candidate_matches(candidate: Path, recipe: Any, *, overwrite: bool) -> bool:
    """Whether ``candidate`` holds a finished training of ``recipe`` (to reuse). A candidate of other settings is
    removed under ``overwrite`` and refused otherwise: resuming it would train something else."""
    saved = candidate / RECIPE_FILE
    if not saved.is_file():
        if candidate.exists() and any(candidate.iterdir()):
            shutil.rmtree(candidate)  # an older run's leftovers, with no record of what they were
        return False
    wanted = recipe.model_dump_json(indent=2).strip()
    if _moved_to(saved.read_text(encoding="utf-8").strip(), Path(recipe.output.dir).parent) != wanted:
        if not overwrite:
            raise FileExistsError(
                f"{candidate} holds a training with other settings (steps, data, model...). Pass --overwrite to "
                "start it over, or name another --out"
            )
        shutil.rmtree(candidate)
        return False
    return (candidate / "modules.json").is_file()


def _moved_to(recorded: str, out: Path) -> str:
    """A saved recipe (JSON) with the output folder it names read as ``out``: a run folder moved or copied (another
    disk, another machine) holds the same training, and its paths inside the folder (the pairs, the documents, the
    candidate) were refused as other settings, so a re-run trained again for 15 minutes or more."""
    try:
        was = Path(json.loads(recorded)["output"]["dir"]).parent
    except (ValueError, KeyError, TypeError):
        return recorded
    if was == out:
        return recorded
    old, new = json.dumps(str(was))[1:-1], json.dumps(str(out))[1:-1]
    return recorded.replace(f'"{old}/', f'"{new}/').replace(f'"{old}"', f'"{new}"')


def _publish(candidate: Path, out: Path) -> None:
    """Copy the candidate's variant files into the output folder (training leftovers stay behind)."""
    for item in candidate.iterdir():
        if item.name in _NOT_PUBLISHED:
            continue
        target = out / item.name
        if item.is_dir():
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(item, target)
        else:
            shutil.copy2(item, target)


def adapt(
    docs: Any,
    out: str | os.PathLike[str],
    *,
    config: AdaptConfig | None = None,
    start: str | os.PathLike[str] | None = None,
    generator: str | None = None,
    generator_url: str | None = None,
    generator_model: str | None = None,
    steps: int | None = None,
    general_data: str | None = None,
    questions: str | os.PathLike[str] | None = None,
    exclude: list[str] | None = None,
    text_suffixes: list[str] | None = None,
    overwrite: bool | None = None,
) -> AdaptReport:
    """Adapt a variant to ``docs`` (whatever ``ingest`` reads) and write it to ``out``; return the report.

    ``config`` holds every setting (:class:`AdaptConfig`); the keywords override its most used ones:
    ``start`` (the variant to adapt, default the preset), ``generator`` (``local``, ``openai`` or ``none``)
    with ``generator_url`` and ``generator_model`` for ``openai``, ``steps``, ``general_data`` (a folder with
    STS-B; see :mod:`~c2v_rag.training.adapt.general_data`), ``questions`` (a JSONL file of your own questions
    for the gate, which keeps a variant only on them unless ``config.gate.evidence`` names held-out sources:
    :mod:`~c2v_rag.training.adapt.questions`), ``exclude`` (glob patterns of a folder's files and
    subfolders to leave out, as ingest's), ``text_suffixes`` (more suffixes read as plain text, as ingest's),
    ``overwrite``.
    """
    from c2v_rag.core.config import read_config
    from c2v_rag.core.devices import default_quantize, dtype_name, resolve_device, resolve_quantize
    from c2v_rag.core.extras import require
    from c2v_rag.documents.chunking import TokenChunker
    from c2v_rag.hub.presets import resolve_variant_path
    from c2v_rag.model.causal2vec import Causal2Vec
    from c2v_rag.training.adapt.decision import decide, too_few_to_judge
    from c2v_rag.training.adapt.gate import gate_data, query_sources, question_data, score
    from c2v_rag.training.adapt.general_data import find_general_data
    from c2v_rag.training.adapt.questions import read_questions, resolve_doc_ids
    from c2v_rag.training.adapt.score_cache import ScoreCache
    from c2v_rag.training.pseudo.make import HeldoutNeed, generator_options, make_pairs
    from c2v_rag.training.trainer import check_training_packages

    config = _with_overrides(
        config or AdaptConfig(),
        start=start,
        generator=generator,
        generator_url=generator_url,
        generator_model=generator_model,
        steps=steps,
        general_data=general_data,
        questions=questions,
        exclude=exclude,
        text_suffixes=text_suffixes,
        overwrite=overwrite,
    )
    out = Path(out).expanduser()
    seconds: dict[str, float] = {}
    # Everything that can be checked is checked before the first document is read.
    _check_output(out, config.overwrite)
    if config.gate.questions is None and not config.gate.evidence:
        logger.warning(
            "no --questions: adapt trains a candidate and reports its held-out scores, but keeps it only on your "
            "own questions; re-run with --questions FILE and the same --out to judge it (the candidate is reused)"
        )
    quantize = config.gate.quantize or default_quantize()
    try:
        gate_int8 = resolve_quantize(quantize, resolve_device(config.training.device)) != "none"
    except ValueError as err:
        raise ValueError(f"gate.quantize: {err}") from err
    if gate_int8:
        require("onnxruntime", "the gate's int8 embedding (gate.quantize)", "int8")
    require("llama_index.core", "chunking documents as ingest does", "adapt")
    start_config = read_config(resolve_variant_path(config.start))
    task = config.task or start_config.default_task
    general = find_general_data(config.general_data)
    asked_questions = read_questions(config.gate.questions) if config.gate.questions else None
    if config.pairs.generator != "none" and config.pairs.max_generated:
        from c2v_rag.training.pseudo.generation import build_generator

        build_generator(**generator_options(config.pairs)).check()
    out.mkdir(parents=True, exist_ok=True)
    fresh = not (out / PAIRS_DIR).exists()
    documents, doc_ids = _document_source(docs, out / PAIRS_DIR, config.read_options())
    if asked_questions is not None:  # a misspelt document fails here, before minutes of pairs and training
        try:
            asked_questions = resolve_doc_ids(asked_questions, doc_ids)
        except ValueError:
            if fresh:  # nothing of a run that never started is left behind
                shutil.rmtree(out / PAIRS_DIR, ignore_errors=True)
            raise
    recipe = train_config(config, documents, out, general, task)
    check_training_packages(recipe)

    clock = time.perf_counter()
    chunker = TokenChunker.for_variant(config.start, config.pairs.chunk_size, config.pairs.chunk_overlap)
    # Where held-out queries are the gate's evidence (gate.evidence, without the user's questions): too few of them,
    # and no variant could be kept, so the questions for training chunks are not worth the generator's minutes.
    need = HeldoutNeed(frozenset(config.gate.evidence), config.gate.min_items) if config.gate.heldout_decides else None
    pairs = make_pairs(documents, chunker, config.pairs, out / PAIRS_DIR, need=need)
    seconds["pairs"] = time.perf_counter() - clock
    recipe = train_config(config, documents, out, general, task, train_pairs=len(pairs.train))
    logger.info("%d training pairs, %d held-out queries", len(pairs.train), len(pairs.heldout))
    # Too few held-out items, none included, is "not kept" before training (exit 1, as documented); with the
    # user's questions, the gate still needs held-out chunks to rank them among.
    early = too_few_to_judge(config.gate, [p.source for p in pairs.heldout], pairs.report)
    if early is None and not pairs.heldout:
        raise ValueError(
            "no held-out chunk kept a query, so the gate cannot score the variant: give more documents, or raise "
            "pairs.holdout_fraction"
        )
    if early is not None:  # not kept whatever a variant scored: minutes of training and scoring saved
        return _write_report(config, out, early, pairs, seconds)

    clock = time.perf_counter()
    candidate = Path(recipe.output.dir)
    if _candidate_matches(candidate, recipe, overwrite=config.overwrite):
        logger.info("reusing the trained candidate in %s", candidate)
    else:
        _train_candidate(recipe, candidate)
    seconds["training"] = time.perf_counter() - clock

    clock = time.perf_counter()
    data = gate_data(pairs, corpus_size=config.gate.corpus_size, task=task, seed=config.training.seed)
    asked = None
    if asked_questions is not None:
        size, seed = config.gate.questions_corpus_size, config.training.seed
        asked = question_data(asked_questions, pairs, corpus_size=size, task=task, seed=seed)
        if len(asked.corpus) < len(pairs.chunks):
            logger.warning(
                "your questions are searched among %d of the %d chunks (gate.questions_corpus_size): a search of "
                "the whole collection ranks more chunks above an answer, so the gate's MRR@10 runs higher than "
                "your searches' and can hide a difference. Raise it to the chunk count to score the whole "
                "collection (each chunk is embedded once per model)",
                len(asked.corpus),
                len(pairs.chunks),
            )
    sources = query_sources(pairs)
    cache = ScoreCache.from_environment() if config.gate.reuse_scores else None
    scores = {}
    for name, source in (("before", config.start), ("after", str(candidate))):
        model = Causal2Vec.from_pretrained(source, device=config.training.device, quantize=quantize)
        scored_with = {"dtype": dtype_name(model.dtype), "quantization": model.quantization}
        scores[name] = score(
            model,
            data,
            general.stsb_dev if general is not None else None,
            sts_limit=config.gate.sts_limit,
            sources=sources,
            questions=asked,
            cache=cache,
            name="the start" if name == "before" else "the candidate",
        )
        del model
    verdict = decide(scores["before"], scores["after"], config.gate, sources)
    seconds["gate"] = time.perf_counter() - clock
    if verdict.kept:
        _publish(candidate, out)
    return _write_report(
        config,
        out,
        verdict,
        pairs,
        seconds,
        per_query=[
            {"id": q, "source": sources.get(q), "before": was, "after": scores["after"].per_query.get(q)}
            for q, was in scores["before"].per_query.items()
        ],
        per_question=[
            {"id": q, "query": asked.queries[q], "before": was, "after": scores["after"].per_question.get(q)}
            for q, was in scores["before"].per_question.items()
        ]
        if asked is not None
        else [],
        before=scores["before"].as_dict(),
        after=scores["after"].as_dict(),
        reused=cache.reused if cache is not None else [],
        scored_with=scored_with,
    )


def _write_report(
    config: AdaptConfig, out: Path, verdict: Verdict, pairs: PairSet, seconds: dict[str, float], **scored: Any
) -> AdaptReport:
    """The run's report on ``verdict``, written to ``out``; ``scored``: the gate's scores, where a variant was
    trained and scored."""
    report = AdaptReport(
        start=config.start,
        output=str(out),
        kept=verdict.kept,
        reasons=verdict.reasons,
        evidence=verdict.evidence,
        pairs=pairs.report,
        seconds=seconds,
        cpu=cpu_facts(),
        settings=config.model_dump(mode="json"),
        **scored,
    )
    (out / REPORT_FILE).write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return report


def _with_overrides(config: AdaptConfig, **values: Any) -> AdaptConfig:
    data = config.model_dump()
    pairs, training = data["pairs"], data["training"]
    for key, value in values.items():
        if value is None:
            continue
        if key in ("generator", "generator_url", "generator_model"):
            pairs[key] = value
        elif key == "steps":
            training[key] = value
        elif key == "questions":
            data["gate"][key] = str(value)
        elif key == "start":
            data[key] = os.fspath(value)
        else:
            data[key] = value
    return AdaptConfig.model_validate(data)
