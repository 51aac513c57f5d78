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
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

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


class HeldoutNeed(NamedTuple):
    """What a gate needs of the held-out queries to judge at all: ``items`` held-out chunks whose query is of one of
    ``sources`` (``adapt``'s ``gate.evidence`` and ``gate.min_items``). Given it, :func:`make_pairs` writes the
    training chunks' questions only when the held-out ones can meet it: otherwise no variant could be kept, and the
    generator's minutes on them would be spent for nothing."""

    sources: frozenset[str]
    items: int


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
    # One file (a JSONL corpus; adapt's own documents.jsonl, read again to chunk) counts its documents, as "0/1
    # files" would until the end; the bar still moves by the file's bytes.
    one_file = size.unit == "file" and size.total == 1
    with CountingBar(
        total=size.extent,
        items=None if one_file else size.total,
        noun="documents" if one_file else size.unit + "s",
        desc=desc,
        disable=not show_progress,
        **unsized_terminal(sys.stderr),
    ) as bar:
        done = 0  # documents handed on

        def show(inputs: int, share_of_next: float = 0.0) -> None:
            bar.count = done if one_file else inputs
            bar.update(size.position(inputs + share_of_next) - bar.n)

        for document in opened:
            yield document  # what the caller does with it (chunking) is on the bar's clock too
            done += 1
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
    """A digest of everything pairs are made from: each chunk's id, text, title and opening heading."""
    digest = hashlib.sha256()
    for c in chunks:
        for part in (c.id, c.text, c.title or "", c.heading or "", str(c.heading_chars)):
            digest.update(part.encode())
            digest.update(b"\0")
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
    targets: Sequence[CorpusChunk],
    config: PseudoPairsConfig,
    *,
    cache: Path | None = None,
    show_progress: bool = True,
    checkpoint: int | None = None,
    go_on: Callable[[list[PseudoPair]], bool] | None = None,
) -> list[PseudoPair]:
    """One LLM question per target chunk (none where the generator gave nothing).

    Questions are kept in ``cache`` (JSONL) as they come, keyed by the generator's settings and the passage:
    a run cut short, or one that changes only the filters or the other sources, asks the generator only for
    what it has not written yet.

    With ``checkpoint`` and ``go_on``: once the first ``checkpoint`` targets have their questions, ``go_on`` gets
    their pairs, and the rest are written only if it returns True (the pairs so far are returned either way).
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
    split = len(targets) if checkpoint is None or go_on is None else checkpoint
    stages = [[i for i in todo if i < split], [i for i in todo if i >= split]]

    def pairs_of(indices: range) -> list[PseudoPair]:
        pairs = []
        for i in indices:
            result = known[keys[i]]
            if result is not None:
                chunk = targets[i]
                pairs.append(PseudoPair(result.text, chunk.id, "generated", chunk.text, result.mean_logprob))
        return pairs

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
        for stage, indices in enumerate(stages):
            if stage == 1 and go_on is not None and split < len(targets):
                so_far = pairs_of(range(split))
                if not go_on(so_far):
                    bar.total = bar.n  # the bar ends where the writing did, not at a share of a total never meant now
                    bar.refresh()
                    return so_far
            for start in range(0, len(indices), step):
                rows = indices[start : start + step]
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
    return pairs_of(range(len(targets)))


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


def heldout_items_at_most(
    pairs: Sequence[PseudoPair],
    chunks: Sequence[CorpusChunk],
    heldout: set[str],
    config: PseudoPairsConfig,
    need: HeldoutNeed,
    *,
    filtered: bool = True,
) -> int:
    """How many gate queries of ``need.sources`` the held-out chunks can have, at most, once more pairs are added to
    ``pairs``: the held-out chunks with a pair of those sources that passes the filters (every such pair,
    ``filtered=False``).

    An upper bound, so that stopping on it never stops a run the gate could have judged: the filters judge a pair
    by itself and against the chunks, but for duplicates, where more pairs can only drop more; and the gate takes
    one pair a chunk, of a source it may prefer to these."""
    on_heldout = [p for p in pairs if p.chunk_id in heldout]
    if filtered:
        on_heldout = filter_pairs(on_heldout, chunks, config, FilterReport())
    return len({p.chunk_id for p in on_heldout if p.source in need.sources})


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
    need: HeldoutNeed | None = None,
) -> PairSet:
    """Pseudo-pairs of ``docs``, written to (or, when made before with the same inputs, read from) ``folder``.

    Generated questions are kept in ``generation_cache`` (default ``folder/generated.jsonl``) and reused.

    With ``need``, the generator writes for the held-out chunks first, and for the training chunks only if the
    held-out queries can still meet it (:func:`heldout_items_at_most`); when they cannot, the pairs come back
    without the training chunks' questions, and ``report["generation_stopped"]`` says why."""
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
    stopped: str | None = None
    held: list[CorpusChunk] = []
    if config.generator != "none" and config.max_generated:
        start = time.perf_counter()
        targets = generation_targets(chunks, heldout, config)
        held = [c for c in targets if c.id in heldout]  # generation_targets puts them first
        cache = generation_cache or folder / GENERATED_FILE

        def meets_need(pairs: list[PseudoPair], *, filtered: bool = True) -> bool:
            nonlocal stopped
            assert need is not None
            items = heldout_items_at_most(candidates + pairs, chunks, heldout, config, need, filtered=filtered)
            if items >= need.items:
                return True
            stopped = (
                f"the held-out chunks' queries can give the gate at most {items} of the {need.items} "
                f"{' or '.join(sorted(need.sources))} queries it needs to judge, so the questions for the training "
                "chunks were not written"
            )
            logger.warning("%s", stopped)
            return False

        if need is None:
            candidates += generated_pairs(targets, config, cache=cache, show_progress=show_progress)
        # Before any question: even if every held-out chunk asked for got one, could the gate judge?
        elif meets_need([PseudoPair("", c.id, "generated", c.text) for c in held], filtered=False):
            candidates += generated_pairs(
                targets, config, cache=cache, show_progress=show_progress, checkpoint=len(held), go_on=meets_need
            )
        timings["generation"] = time.perf_counter() - start
    start = time.perf_counter()
    report = FilterReport()
    kept = filter_pairs(candidates, chunks, config, report)
    timings["filters"] = time.perf_counter() - start
    train, gate = split_pairs(kept, heldout, config)
    on_heldout = sum(p.chunk_id in heldout for p in kept)
    if not train and stopped is None:
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
            # The held-out chunks (each long enough to ask about: choose_heldout) the generator was asked for, the
            # budget's first half: what "too few to judge" advises by.
            "heldout_asked": len(held),
            "generator": config.generator if config.max_generated else "none",
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
    if stopped is not None:
        pair_set.report["generation_stopped"] = stopped
        # Not the pairs a run without this need makes: a later run never reuses them (its settings lack this key),
        # and makes them again from the questions cached so far.
        settings["generation_stopped"] = stopped
    write_pairs(folder, pair_set, settings)
    return pair_set
