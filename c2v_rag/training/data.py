"""Training examples: loaders for JSONL, BEIR, pair/triplet TSV and labelled text, and dev splits.

Every loader returns :class:`Example` objects. Besides its texts, an example carries *keys*: the
identity of each passage (a BEIR document id, a class label, or the text itself) and the set of
keys that are positives of its query. Mining and the loss use them so that no known positive is
ever treated as a negative, whether mined or in-batch.
"""

from __future__ import annotations

import json
import logging
import random
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from c2v_rag.core.files import replacing
from c2v_rag.core.instructions import InContextPrompt, Instruction, get_task, resolve_instruction
from c2v_rag.core.jsonl import iter_jsonl
from c2v_rag.evaluation.datasets import holdout_indices, read_beir, split_queries
from c2v_rag.training.config import DatasetSection, TrainConfig
from c2v_rag.training.tables import read_rows
from c2v_rag.training.user_data import known_data, missing_dataset_message

if TYPE_CHECKING:
    from c2v_rag.documents.chunking import TokenChunker
    from c2v_rag.training.pseudo.beir_cache import PairSet

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Example:
    """One (query, positive, hard negatives) training example of one dataset."""

    query: str
    positive: str
    negatives: tuple[str, ...] = ()
    dataset: str = "default"
    query_instruction: Instruction = None
    passage_instruction: Instruction = None
    positive_key: str = ""
    negative_keys: tuple[str, ...] = ()
    known_positive_keys: frozenset[str] = field(default_factory=frozenset)
    score: float | None = None  # graded similarity of (query, positive), for the cosent loss

    def __post_init__(self) -> None:
        # Keys default to the texts: two passages are "the same" when their texts are.
        if not self.positive_key:
            object.__setattr__(self, "positive_key", self.positive)
        if len(self.negative_keys) != len(self.negatives):
            object.__setattr__(self, "negative_keys", tuple(self.negatives))
        if not self.known_positive_keys:
            object.__setattr__(self, "known_positive_keys", frozenset([self.positive_key]))


@dataclass
class RetrievalDev:
    """Held-out queries of a BEIR dataset, with the corpus they are scored against."""

    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    corpus: dict[str, str]
    query_instruction: Instruction
    passage_instruction: Instruction


@dataclass
class LoadedDataset:
    """A dataset section once loaded: its training examples, and what mining and evaluation need."""

    name: str
    examples: list[Example]
    corpus: dict[str, str] | None = None  # key -> text: the passage pool for mining (BEIR: the corpus)
    dev: RetrievalDev | None = None
    held_out: list[Example] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------- instructions


def section_instructions(section: DatasetSection, default_symmetric: bool) -> tuple[Instruction, Instruction]:
    """(query instruction, passage instruction) for a dataset section.

    Queries carry the instruction; passages carry it only on symmetric data (STS, NLI, label
    pairs), where both sides are the same kind of text (paper, Appendix A.3).
    """
    return resolve_pair(section.task, section.instruction, section.symmetric, default_symmetric)


def resolve_pair(
    task: str | None, instruction: str | None, symmetric: bool | None, default_symmetric: bool
) -> tuple[Instruction, Instruction]:
    query = resolve_instruction(task=task, instruction=instruction, is_query=True)
    if symmetric is None:
        if task is not None:
            t = get_task(task)
            symmetric = t.symmetric or t.name.lower().endswith("-symmetric")
        else:
            symmetric = default_symmetric
    return query, (query if symmetric else None)


# ---------------------------------------------------------------------------------------------- loaders


def check_data_paths(config: TrainConfig, recipe: str | Path = "RECIPE", *, data_given: bool = False) -> None:
    """Raise FileNotFoundError with :func:`missing_dataset_message` for the first dataset (or STS dev file) of
    ``config`` that is not on disk: before any weight loads, rather than minutes into the run."""
    for index, section in enumerate(config.datasets):
        if not Path(section.path).expanduser().exists():
            raise FileNotFoundError(
                missing_dataset_message(index, section.display_name, section.path, recipe, data_given=data_given)
            )
    sts = config.evaluation.sts_path
    if sts is not None and not Path(sts).expanduser().is_file():
        raise FileNotFoundError(missing_dataset_message(0, "sts", sts, recipe, key="evaluation.sts_path"))


def load_section(section: DatasetSection) -> LoadedDataset:
    """Load one dataset section of the config, split off its dev queries and apply its limit."""
    path = Path(section.path).expanduser()
    if not path.exists():
        known = known_data(section.path)
        what = f" It is {known.what}; get it from {known.source}." if known else ""
        raise FileNotFoundError(
            f"dataset {section.display_name!r}: {path} does not exist.{what} Set the dataset's path to your copy or "
            "to your own data (c2v-rag train RECIPE --data PATH, or --set datasets.N.path=PATH)"
        )
    if section.format == "corpus":
        raise ValueError(
            f"dataset {section.display_name!r}: format 'corpus' makes its pairs with the model's tokenizer; "
            "load it with load_corpus (the trainer does)"
        )
    loader = {
        "jsonl": load_jsonl,
        "beir": load_beir,
        "pairs_tsv": load_tsv,
        "triplets_tsv": load_tsv,
        "labelled": load_labelled,
        "scored_pairs": load_scored_pairs,
    }[section.format]
    loaded = loader(section)
    if not loaded.examples:
        raise ValueError(f"dataset {section.display_name!r}: {path} gave no training examples")
    if section.limit is not None and len(loaded.examples) > section.limit:
        rng = random.Random(section.dev_seed + 1)
        loaded.examples = rng.sample(loaded.examples, section.limit)
    logger.info("dataset %s: %d training examples", loaded.name, len(loaded.examples))
    return loaded


def split_by_query(examples: list[Example], fraction: float, seed: int) -> tuple[list[Example], list[Example]]:
    """Hold out ``fraction`` of the distinct queries (with all their examples), deterministically.

    Splitting by query, not by example, keeps a held-out query's other positives out of training.
    """
    if fraction <= 0:
        return examples, []
    queries = sorted({e.query for e in examples})
    rng = random.Random(seed)
    rng.shuffle(queries)
    held = set(queries[: max(1, round(fraction * len(queries)))])
    return [e for e in examples if e.query not in held], [e for e in examples if e.query in held]


def load_jsonl(section: DatasetSection) -> LoadedDataset:
    """Records ``{query, positive, negatives?, instruction? | task?, dataset?}``, one per line.

    ``negatives`` is a string or a list of strings. ``dataset`` puts a record in its own dataset
    (batches stay homogeneous per dataset); ``instruction``/``task`` override the section's.
    """
    path = Path(section.path).expanduser()
    base = section_instructions(section, default_symmetric=False)
    raw: list[tuple[str, str, tuple[str, ...], str, tuple[Instruction, Instruction]]] = []
    for number, record in iter_jsonl(path):
        where = f"{path}:{number}"
        for name in ("query", "positive"):
            if not isinstance(record.get(name), str) or not record[name].strip():
                raise ValueError(f"{where}: '{name}' must be a non-empty string (got {record.get(name)!r})")
        unknown = set(record) - {"query", "positive", "negatives", "instruction", "task", "dataset", "symmetric"}
        if unknown:
            raise ValueError(
                f"{where}: unknown field(s) {sorted(unknown)}; expected query, positive, "
                "negatives, instruction or task, dataset"
            )
        negatives = record.get("negatives") or []
        if isinstance(negatives, str):
            negatives = [negatives]
        if not isinstance(negatives, list) or not all(isinstance(n, str) for n in negatives):
            raise ValueError(f"{where}: 'negatives' must be a string or a list of strings")
        if record.get("task") is not None and record.get("instruction") is not None:
            raise ValueError(f"{where}: give 'task' or 'instruction', not both")
        if record.get("task") is not None or record.get("instruction") is not None:
            try:
                instructions = resolve_pair(
                    record.get("task"), record.get("instruction"), record.get("symmetric", section.symmetric), False
                )
            except KeyError as err:
                raise ValueError(f"{where}: {err.args[0]}") from None
        else:
            instructions = base
        dataset = str(record.get("dataset") or section.display_name)
        raw.append((record["query"], record["positive"], tuple(negatives), dataset, instructions))
    positives: dict[tuple[str, str], set[str]] = defaultdict(set)
    for query, positive, _, dataset, _ in raw:
        positives[(dataset, query)].add(positive)
    examples = [
        Example(query, positive, negs, dataset, qi, pi, known_positive_keys=frozenset(positives[(dataset, query)]))
        for query, positive, negs, dataset, (qi, pi) in raw
    ]
    train, held = split_by_query(examples, section.dev_fraction, section.dev_seed)
    return LoadedDataset(section.display_name, train, held_out=held)


def load_beir(section: DatasetSection) -> LoadedDataset:
    """One example per (query, relevant document) of the split; the corpus is the mining pool.

    ``dev_fraction`` holds out that share of the split's queries: they become the dev set,
    scored against the whole corpus.
    """
    path = Path(section.path).expanduser()
    data = read_beir(path, section.split)
    corpus, queries, qrels = data.corpus, data.queries, data.qrels
    qi, pi = section_instructions(section, default_symmetric=False)
    missing = [q for q in qrels if q not in queries]
    if missing:
        logger.warning("%s: %d qrels query ids are not in queries.jsonl (e.g. %s)", path, len(missing), missing[0])
    # The same split as c2v_rag.evaluation's dev sets, so evaluation never scores trained-on claims.
    train_part, dev_part = split_queries(data, dev_fraction=section.dev_fraction, seed=section.dev_seed)
    train_ids = sorted(train_part.qrels)
    dev_ids = set(dev_part.qrels)
    examples = []
    for q in train_ids:
        relevant = frozenset(d for d, s in qrels[q].items() if s > 0 and d in corpus)
        for doc in sorted(relevant):
            examples.append(
                Example(
                    queries[q],
                    corpus[doc],
                    (),
                    section.display_name,
                    qi,
                    pi,
                    positive_key=doc,
                    known_positive_keys=relevant,
                )
            )
    dev = None
    if dev_ids:
        dev = RetrievalDev(
            {q: queries[q] for q in sorted(dev_ids)},
            {q: {d: s for d, s in qrels[q].items() if s > 0} for q in sorted(dev_ids)},
            corpus,
            qi,
            pi,
        )
    return LoadedDataset(section.display_name, examples, corpus=corpus, dev=dev)


def load_tsv(section: DatasetSection) -> LoadedDataset:
    """``query<TAB>positive`` (pairs) or ``query<TAB>positive<TAB>negative...`` (triplets) rows."""
    path = Path(section.path).expanduser()
    _, rows = read_rows(path, section.delimiter or "\t", section.has_header)
    need = 3 if section.format == "triplets_tsv" else 2
    qi, pi = section_instructions(section, default_symmetric=False)
    raw = []
    for number, row in enumerate(rows, 1):
        cells = [c.strip() for c in row]
        if len(cells) < need or not all(cells[:need]):
            raise ValueError(
                f"{path}: data row {number} has {len(cells)} non-empty column(s), a {section.format} file "
                f"needs {need} (query, positive{', negative' if need == 3 else ''}), tab-separated"
            )
        negatives = tuple(c for c in cells[2:] if c) if section.format == "triplets_tsv" else ()
        raw.append((cells[0], cells[1], negatives))
    positives: dict[str, set[str]] = defaultdict(set)
    for query, positive, _ in raw:
        positives[query].add(positive)
    examples = [
        Example(q, p, n, section.display_name, qi, pi, known_positive_keys=frozenset(positives[q])) for q, p, n in raw
    ]
    train, held = split_by_query(examples, section.dev_fraction, section.dev_seed)
    return LoadedDataset(section.display_name, train, held_out=held)


def _column(
    header: list[str] | None, column: str | int | None, defaults: Iterable[str], fallback: int, path: Path
) -> int:
    if isinstance(column, int):
        return column
    if header is None:
        if column is not None:
            raise ValueError(f"{path} has no header row, so column {column!r} must be given as a number")
        return fallback
    lowered = [h.strip().lower() for h in header]
    for name in [column] if column is not None else list(defaults):
        if name.lower() in lowered:
            return lowered.index(name.lower())
    raise ValueError(
        f"{path}: no column named {column or list(defaults)} in header {header}; set text_column/label_column"
    )


def load_labelled(section: DatasetSection) -> LoadedDataset:
    """Texts with class labels (CSV/TSV/``;``-separated): pairs of texts that share a label.

    Each anchor gets a different text of its label as the positive and a text of another label
    as the hard negative. The label is the key: an in-batch passage of the anchor's label is never
    used as a negative.

    ``dev_fraction`` holds out that share of the rows, seeded by ``dev_seed``, before any pair is
    drawn: the same rows :func:`c2v_rag.evaluation.datasets.holdout` makes the test set of a
    classification dev set (Banking77's), so a recipe never trains on the texts it is scored on.
    """
    path = Path(section.path).expanduser()
    header, rows = read_rows(path, section.delimiter, section.has_header)
    held = 0
    if section.dev_fraction > 0:
        pool, test = holdout_indices(len(rows), fraction=section.dev_fraction, seed=section.dev_seed)
        rows, held = [rows[i] for i in pool], len(test)
    text_col = _column(header, section.text_column, ["text", "sentence"], 0, path)
    label_col = _column(header, section.label_column, ["label", "label_name", "category", "intent"], -1, path)
    by_label: dict[str, list[str]] = defaultdict(list)
    for number, row in enumerate(rows, 1):
        try:
            text, label = row[text_col].strip(), row[label_col].strip()
        except IndexError:
            raise ValueError(f"{path}: data row {number} has no column {max(text_col, label_col)}") from None
        if text and label:
            by_label[label].append(text)
    usable = {label: texts for label, texts in by_label.items() if len(set(texts)) >= 2}
    if len(usable) < 2:
        raise ValueError(f"{path}: pairs need at least 2 labels with 2 distinct texts each, found {len(usable)}")
    qi, pi = section_instructions(section, default_symmetric=True)
    rng = random.Random(section.dev_seed)
    labels = sorted(usable)
    anchors = [(label, text) for label in labels for text in usable[label]]
    rng.shuffle(anchors)
    n_pairs = section.num_pairs or len(anchors)
    examples = []
    for i in range(n_pairs):
        label, anchor = anchors[i % len(anchors)]
        positive = anchor
        while positive == anchor:
            positive = rng.choice(usable[label])
        other = label
        while other == label:
            other = rng.choice(labels)
        examples.append(
            Example(
                anchor,
                positive,
                (rng.choice(usable[other]),),
                section.display_name,
                qi,
                pi,
                positive_key=label,
                negative_keys=(other,),
                known_positive_keys=frozenset([label]),
            )
        )
    logger.info("%s: %d pairs from %d rows; %d rows held out", section.display_name, len(examples), len(rows), held)
    return LoadedDataset(section.display_name, examples)


def load_scored_pairs(section: DatasetSection) -> LoadedDataset:
    """Sentence pairs with a similarity score (STS-B): pairs at or above ``min_score`` are positives.

    Similarity is symmetric, so both sides get the instruction by default, and each pair is used
    in both directions (either sentence may be the query). With ``loss: cosent`` every pair is kept
    once, with its score.
    """
    path = Path(section.path).expanduser()
    header, rows = read_rows(path, section.delimiter or "\t", section.has_header)
    first, second = section.pair_columns or (None, None)
    a_col = _column(header, first, ["sentence1"], 0, path)
    b_col = _column(header, second, ["sentence2"], 1, path)
    s_col = _column(header, section.score_column, ["score"], 2, path)
    qi, pi = section_instructions(section, default_symmetric=True)
    scored: list[tuple[str, str, float]] = []
    for number, row in enumerate(rows, 1):
        try:
            a, b, raw_score = row[a_col].strip(), row[b_col].strip(), row[s_col].strip()
        except IndexError:
            raise ValueError(f"{path}: data row {number} has no column {max(a_col, b_col, s_col)}") from None
        try:
            score = float(raw_score)
        except ValueError:
            raise ValueError(
                f"{path}: data row {number} has score {raw_score!r}, not a number; set score_column"
            ) from None
        if a and b:
            scored.append((a, b, score))
    if section.loss == "cosent":
        if len({score for _, _, score in scored}) < 2:
            raise ValueError(
                f"{path}: loss 'cosent' ranks pairs by score, but the file has fewer than two distinct scores"
            )
        examples = [Example(a, b, (), section.display_name, qi, pi, score=score) for a, b, score in scored]
        train, held = split_by_query(examples, section.dev_fraction, section.dev_seed)
        return LoadedDataset(section.display_name, train, held_out=held)
    min_score = section.min_score
    assert min_score is not None  # DatasetSection requires it of scored_pairs without cosent
    pairs = [(a, b) for a, b, score in scored if a != b and score >= min_score]
    if not pairs:
        raise ValueError(f"{path}: no pair scores {section.min_score} or more; lower min_score")
    # A sentence's partners in every pair, and itself (its reversed pair may share the batch), are
    # never its in-batch negatives.
    partners: dict[str, set[str]] = defaultdict(set)
    for a, b in pairs:
        partners[a].update((a, b))
        partners[b].update((a, b))
    examples = [
        Example(q, p, (), section.display_name, qi, pi, known_positive_keys=frozenset(partners[q]))
        for a, b in pairs
        for q, p in ((a, b), (b, a))
    ]
    train, held = split_by_query(examples, section.dev_fraction, section.dev_seed)
    return LoadedDataset(section.display_name, train, held_out=held)


def group_by_dataset(loaded: Iterable[LoadedDataset]) -> dict[str, list[Example]]:
    """Training examples keyed by dataset name (a JSONL file may hold several datasets)."""
    groups: dict[str, list[Example]] = defaultdict(list)
    for item in loaded:
        for example in item.examples:
            groups[example.dataset].append(example)
    return dict(groups)


def with_negatives(example: Example, negatives: list[tuple[str, str]]) -> Example:
    """A copy of ``example`` with ``negatives`` given as (key, text) pairs."""
    return replace(example, negatives=tuple(t for _, t in negatives), negative_keys=tuple(k for k, _ in negatives))


def write_jsonl(examples: Iterable[Example], path: str | Path) -> Path:
    """Write examples in the JSONL training format (e.g. after mining, to reuse the negatives)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for e in examples:
            record: dict[str, Any] = {"query": e.query, "positive": e.positive, "dataset": e.dataset}
            if e.negatives:
                record["negatives"] = list(e.negatives)
            if isinstance(e.query_instruction, InContextPrompt):
                # A record names in-context examples only through the registered task that holds them.
                if e.query_instruction.task is None:
                    raise ValueError(
                        f"query {e.query!r} has in-context examples of no task: the JSONL format cannot hold them"
                    )
                record["task"] = e.query_instruction.task
                record["symmetric"] = e.passage_instruction is not None
            elif e.query_instruction:
                record["instruction"] = e.query_instruction
                record["symmetric"] = e.passage_instruction is not None
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path


def dump_examples(examples: Iterable[Example], path: str | Path) -> Path:
    """Write examples with every field (keys included), e.g. to reuse mined negatives on resume."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with replacing(path) as handle:
        for e in examples:
            record = {
                "query": e.query,
                "positive": e.positive,
                "negatives": list(e.negatives),
                "dataset": e.dataset,
                "query_instruction": _instruction_record(e.query_instruction),
                "passage_instruction": _instruction_record(e.passage_instruction),
                "positive_key": e.positive_key,
                "negative_keys": list(e.negative_keys),
                "known_positive_keys": sorted(e.known_positive_keys),
            }
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path


def _instruction_record(instruction: Instruction) -> str | dict[str, Any] | None:
    if isinstance(instruction, InContextPrompt):
        return {"instruction": instruction.instruction, "examples": instruction.examples, "task": instruction.task}
    return instruction


def _record_instruction(record: str | dict[str, Any] | None) -> Instruction:
    if isinstance(record, dict):
        examples = tuple((query, response) for query, response in record["examples"])
        return InContextPrompt(record["instruction"], examples, record["task"])
    return record


def read_examples(path: str | Path) -> list[Example]:
    """Read what :func:`dump_examples` wrote."""
    out = []
    for _, r in iter_jsonl(Path(path)):
        out.append(
            Example(
                r["query"],
                r["positive"],
                tuple(r["negatives"]),
                r["dataset"],
                _record_instruction(r["query_instruction"]),
                _record_instruction(r["passage_instruction"]),
                r["positive_key"],
                tuple(r["negative_keys"]),
                frozenset(r["known_positive_keys"]),
            )
        )
    return out


def load_corpus(
    section: DatasetSection, chunker: TokenChunker, pairs_dir: Path, *, show_progress: bool = True
) -> LoadedDataset:
    """A ``format: corpus`` section: pseudo-pairs made from (or read back for) its documents. Each pair's positive is
    its chunk less what the query was cut from; the key is the chunk's id, so that neither mining nor the
    in-batch negatives ever take a query's own chunk as a negative. Held-out chunks stay out of the pool."""
    from c2v_rag.training.pseudo.config import PseudoPairsConfig
    from c2v_rag.training.pseudo.make import make_pairs

    config = section.pseudo_pairs or PseudoPairsConfig()
    pairs = make_pairs(Path(section.path).expanduser(), chunker, config, pairs_dir, show_progress=show_progress)
    qi, pi = section_instructions(section, default_symmetric=False)
    examples = [
        Example(
            p.query,
            p.positive,
            (),
            section.display_name,
            qi,
            pi,
            positive_key=p.chunk_id,
            known_positive_keys=frozenset([p.chunk_id]),
        )
        for p in pairs.train
    ]
    corpus = pairs.train_corpus
    dev = None
    if pairs.heldout:
        dev = RetrievalDev(
            {f"heldout-{i}": p.query for i, p in enumerate(pairs.heldout)},
            {f"heldout-{i}": {p.chunk_id: 1} for i, p in enumerate(pairs.heldout)},
            gate_corpus(pairs),
            qi,
            pi,
        )
    return LoadedDataset(section.display_name, examples, corpus=corpus, dev=dev)


def gate_corpus(pairs: PairSet) -> dict[str, str]:
    """Chunk id -> text to score held-out queries against: every chunk, a held-out query's own chunk less what the
    query was cut from (a crop's sentence, a heading line), so that no held-out query is found by its copy."""
    corpus = {c.id: c.text for c in pairs.chunks}
    for p in pairs.heldout:
        corpus[p.chunk_id] = p.positive
    return corpus
