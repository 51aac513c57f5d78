"""Make pseudo-pairs from a corpus: chunk it as ``ingest`` does, hold out chunks for the gate, cut and generate
queries, filter them, and write the result as a BEIR folder (:mod:`~c2v_rag.training.pseudo.beir_cache`).

A folder made with the same documents and settings is read back instead of made again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from c2v_rag.core.jsonl import iter_jsonl
from c2v_rag.core.progress_bar import CountingBar, unsized_terminal
from c2v_rag.documents.chunking import TokenChunker
from c2v_rag.documents.documents import input_size, iter_documents
from c2v_rag.documents.files import ReadLog, ReadOptions, not_read_words
from c2v_rag.documents.source_document import SourceDocument
from c2v_rag.training.pseudo.beir_cache import PairSet, read_pairs, read_settings, write_pairs
from c2v_rag.training.pseudo.chunks import CorpusChunk, iter_chunks
from c2v_rag.training.pseudo.config import PseudoPairsConfig
from c2v_rag.training.pseudo.crops import inverse_cloze
from c2v_rag.training.pseudo.filters import FilterReport, apply_filters
from c2v_rag.training.pseudo.headings import heading_pair
from c2v_rag.training.pseudo.pairs import PseudoPair

logger = logging.getLogger(__name__)

# The gate prefers the queries most like a user's: an LLM's question, then an author's heading, then a crop.
_GATE_PREFERENCE = {"generated": 0, "heading": 1, "crop": 2}
# A chunk shorter than this has too little text to hold out or to ask about.
_MIN_CHUNK_WORDS = 25


def read_documents(
    docs: Any, *, desc: str, options: ReadOptions | None = None, show_progress: bool = True
) -> Iterator[SourceDocument]:
    """The documents of ``docs``, read as ``ingest`` reads them (``options``: its exclude patterns and text
    suffixes), with a bar as ingest's: over the files read, each weighing the bytes it holds, or over the documents
    given. Files of types it does not read are said once, at the end, as a warning: a folder whose files are mostly
    of other types would otherwise train on a few of them unnoticed."""
    log = ReadLog()
    # Opening checks every path before any reading; the size it finds is the bar's total.
    opened = iter_documents(docs, options=options, log=log)
    size = input_size(docs, log)
    with CountingBar(
        total=size.extent,
        items=size.total,
        noun=size.unit + "s",
        desc=desc,
        disable=not show_progress,
        **unsized_terminal(sys.stderr),
    ) as bar:

        def show(inputs: int, share_of_next: float = 0.0) -> None:
            bar.count = inputs
            bar.update(size.position(inputs + share_of_next) - bar.n)

        for done, document in enumerate(opened, start=1):
            yield document  # what the caller does with it (chunking) is on the bar's clock too
            if size.unit == "file":  # within a file of many documents (JSONL, Parquet, an archive), as ingest's bar
                show(log.files_done, log.document_span[1])
            else:
                show(done)
        if size.unit == "file":
            show(log.files_done)
    if log.not_read:
        logger.warning("%s; --text-suffix SUFFIX reads a suffix as plain text", not_read_words(log.not_read))


def read_corpus(docs: Any, chunker: TokenChunker, *, show_progress: bool = True) -> list[CorpusChunk]:
    """Every chunk of ``docs``, with a progress bar over the files (or documents) read."""
    documents = read_documents(docs, desc="Reading and chunking", show_progress=show_progress)
    chunks = list(iter_chunks(documents, chunker))
    if not chunks:
        raise ValueError("the documents gave no text to make training pairs from")
    return chunks


def corpus_digest(chunks: Sequence[CorpusChunk]) -> str:
    digest = hashlib.sha256()
    for c in chunks:
        digest.update(c.id.encode())
        digest.update(b"\0")
        digest.update(c.text.encode())
        digest.update(b"\1")
    return digest.hexdigest()


def _words(text: str) -> int:
    return len(text.split())


def choose_heldout(chunks: Sequence[CorpusChunk], config: PseudoPairsConfig) -> set[str]:
    """Chunk ids held out for the gate: ``holdout_fraction`` of the chunks with enough text, at most ``max_holdout``."""
    if config.holdout_fraction <= 0:
        return set()
    eligible = sorted(c.id for c in chunks if _words(c.text) >= _MIN_CHUNK_WORDS)
    n = min(config.max_holdout, round(config.holdout_fraction * len(eligible)))
    return set(random.Random(config.seed).sample(eligible, n)) if n else set()


def cheap_pairs(chunks: Sequence[CorpusChunk], config: PseudoPairsConfig) -> list[PseudoPair]:
    """Crop and heading pairs of every chunk."""
    rng = random.Random(config.seed + 1)
    pairs = []
    for chunk in chunks:
        if config.headings:
            pair = heading_pair(chunk, first_of_document=chunk.id.endswith("#0"))
            if pair is not None:
                pairs.append(pair)
        for _ in range(config.crops_per_chunk):
            pair = inverse_cloze(chunk, rng)
            if pair is not None:
                pairs.append(pair)
    return pairs


def generation_targets(
    chunks: Sequence[CorpusChunk], heldout: set[str], config: PseudoPairsConfig
) -> list[CorpusChunk]:
    """The chunks an LLM writes for: held-out ones first (up to half the budget, so the gate has questions of
    that kind), the rest drawn from the training chunks."""
    budget = config.max_generated
    rng = random.Random(config.seed + 2)
    usable = [c for c in chunks if _words(c.text) >= _MIN_CHUNK_WORDS]
    held = [c for c in usable if c.id in heldout]
    train = [c for c in usable if c.id not in heldout]
    take_held = rng.sample(held, min(len(held), budget // 2))
    take_train = rng.sample(train, min(len(train), budget - len(take_held)))
    return take_held + take_train


GENERATED_FILE = "generated.jsonl"
# What decides a generated question besides the passage: the rest of describe() (batch size, device, where the
# weights were found) changes the cost, not the text.
_GENERATION_KEYS = (
    "kind",
    "model",
    "url",
    "max_passage_tokens",
    "max_new_tokens",
    "temperature",
    "seed",
    "prompt",
    "reply_start",
)


def generation_settings(description: dict[str, Any]) -> dict[str, Any]:
    """What of a generator's :meth:`~c2v_rag.training.pseudo.generation.QueryGenerator.describe` decides its
    questions (:data:`_GENERATION_KEYS`)."""
    return {k: description.get(k) for k in _GENERATION_KEYS}


def _generation_key(description: dict[str, Any], passage: str) -> str:
    settings = json.dumps(generation_settings(description), sort_keys=True)
    return hashlib.sha256((settings + "\0" + passage).encode()).hexdigest()


def generated_pairs(
    targets: Sequence[CorpusChunk], config: PseudoPairsConfig, *, cache: Path | None = None, show_progress: bool = True
) -> list[PseudoPair]:
    """One LLM question per target chunk (none where the generator gave nothing).

    Questions are kept in ``cache`` (JSONL) as they come, keyed by the generator's settings and the passage:
    a run cut short, or one that changes only the filters or the other sources, asks the generator only for
    what it has not written yet.
    """
    from c2v_rag.training.pseudo.generation import GeneratedQuery, build_generator

    if not targets:
        return []
    generator = build_generator(**generator_options(config))
    generator.check()
    description = generator.describe()
    keys = [_generation_key(description, c.text) for c in targets]
    known: dict[str, GeneratedQuery | None] = {}
    if cache is not None and cache.is_file():
        for _, record in iter_jsonl(cache):
            text = record.get("text")
            known[record["key"]] = None if text is None else GeneratedQuery(text, record.get("mean_logprob"))
    todo = [i for i, key in enumerate(keys) if key not in known]
    with tqdm(
        total=len(targets),
        initial=len(targets) - len(todo),
        desc="Writing questions",
        unit="chunk",
        disable=not show_progress,
        **unsized_terminal(sys.stderr),
    ) as bar:
        # Batches of the generator's own size, each saved before the next starts.
        step = max(1, getattr(generator, "batch_size", 16)) * 4
        for start in range(0, len(todo), step):
            rows = todo[start : start + step]
            out = generator.generate([targets[i].text for i in rows], progress=bar.update)
            for i, result in zip(rows, out):
                known[keys[i]] = result
            if cache is not None:
                cache.parent.mkdir(parents=True, exist_ok=True)
                with cache.open("a", encoding="utf-8") as handle:
                    for i, result in zip(rows, out):
                        record = {"key": keys[i], "text": None if result is None else result.text}
                        record["mean_logprob"] = None if result is None else result.mean_logprob
                        handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    pairs = []
    for chunk, key in zip(targets, keys):
        result = known[key]
        if result is not None:
            pairs.append(PseudoPair(result.text, chunk.id, "generated", chunk.text, result.mean_logprob))
    return pairs


def generator_options(config: PseudoPairsConfig) -> dict[str, Any]:
    """The keyword arguments of :func:`~c2v_rag.training.pseudo.generation.build_generator` for ``config``."""
    if config.generator == "openai":
        return {"kind": "openai", "url": config.generator_url, "model": config.generator_model}
    return {"kind": config.generator, "batch_size": config.generator_batch_size}


def filter_pairs(
    candidates: Sequence[PseudoPair], chunks: Sequence[CorpusChunk], config: PseudoPairsConfig, report: FilterReport
) -> list[PseudoPair]:
    """The candidates that pass ``config``'s filters (the round trip searches all of ``chunks``); ``report`` counts
    what each filter dropped."""
    return apply_filters(
        candidates,
        report,
        min_words=config.min_words,
        max_words=config.max_words,
        min_logprob=config.min_logprob,
        round_trip_k=config.round_trip_k,
        chunk_ids=[c.id for c in chunks],
        chunk_texts=[c.text for c in chunks],
    )


def split_pairs(
    pairs: Sequence[PseudoPair], heldout: set[str], config: PseudoPairsConfig
) -> tuple[list[PseudoPair], list[PseudoPair]]:
    """(training pairs, one gate pair per held-out chunk)."""
    train = [p for p in pairs if p.chunk_id not in heldout]
    best: dict[str, PseudoPair] = {}
    for p in pairs:
        if p.chunk_id in heldout:
            kept = best.get(p.chunk_id)
            if kept is None or _GATE_PREFERENCE[p.source] < _GATE_PREFERENCE[kept.source]:
                best[p.chunk_id] = p
    if config.max_pairs is not None and len(train) > config.max_pairs:
        train = random.Random(config.seed + 3).sample(train, config.max_pairs)
    return train, [best[k] for k in sorted(best)]


def make_pairs(
    docs: Any,
    chunker: TokenChunker,
    config: PseudoPairsConfig,
    folder: str | Path,
    *,
    show_progress: bool = True,
    generation_cache: Path | None = None,
) -> PairSet:
    """Pseudo-pairs of ``docs``, written to (or, when made before with the same inputs, read from) ``folder``.

    Generated questions are kept in ``generation_cache`` (default ``folder/generated.jsonl``) and reused."""
    folder = Path(folder)
    timings: dict[str, float] = {}
    start = time.perf_counter()
    chunks = read_corpus(docs, chunker, show_progress=show_progress)
    timings["read"] = time.perf_counter() - start
    settings = {"config": config.model_dump(mode="json"), "corpus": corpus_digest(chunks), "chunks": len(chunks)}
    if config.generator != "none" and config.max_generated:
        # The generator's own settings (its prompt, how its reply begins) too: pairs made by another are not reused.
        from c2v_rag.training.pseudo.generation import build_generator

        settings["generator"] = generation_settings(build_generator(**generator_options(config)).describe())
    if read_settings(folder) == settings:
        logger.info("reusing the pseudo-pairs in %s (same documents and settings)", folder)
        pairs = read_pairs(folder)
        pairs.report.setdefault("reused", True)
        return pairs
    heldout = choose_heldout(chunks, config)
    start = time.perf_counter()
    candidates = cheap_pairs(chunks, config)
    timings["crops_and_headings"] = time.perf_counter() - start
    if config.generator != "none" and config.max_generated:
        start = time.perf_counter()
        targets = generation_targets(chunks, heldout, config)
        cache = generation_cache or folder / GENERATED_FILE
        candidates += generated_pairs(targets, config, cache=cache, show_progress=show_progress)
        timings["generation"] = time.perf_counter() - start
    start = time.perf_counter()
    report = FilterReport()
    kept = filter_pairs(candidates, chunks, config, report)
    timings["filters"] = time.perf_counter() - start
    train, gate = split_pairs(kept, heldout, config)
    on_heldout = sum(p.chunk_id in heldout for p in kept)
    if not train:
        raise ValueError(
            f"no training pair survived the filters ({report.as_dict()}); the documents may be too short for crops "
            "and have no headings: enable a generator or lower min_words"
        )
    pair_set = PairSet(
        chunks,
        heldout,
        train,
        gate,
        {
            "chunks": len(chunks),
            "heldout_chunks": len(heldout),
            "by_source": report.as_dict(),
            "train_pairs": len(train),
            "heldout_pairs": len(gate),
            # What the filters kept and neither training nor the gate uses: a held-out chunk's pairs past the one
            # the gate takes (split_pairs), and training pairs past max_pairs.
            "heldout_unused": on_heldout - len(gate),
            "over_max_pairs": len(kept) - on_heldout - len(train),
            "train_by_source": dict(sorted(Counter(p.source for p in train).items())),
            "heldout_by_source": dict(sorted(Counter(p.source for p in gate).items())),
            "seconds": timings,
        },
    )
    write_pairs(folder, pair_set, settings)
    return pair_set
