"""The committed half of a benchmark: questions, relevance judgements, and the judged documents' titles.

Files under ``bench/ood/<name>/`` (BEIR's layouts where BEIR has one):

- ``queries.jsonl``: ``{"_id": "q01", "text": "...", "note": "why the answer document answers it"}``;
- ``qrels.tsv``: ``query-id<TAB>corpus-id<TAB>score`` with a header row; score 2 = answers the
  question, 1 = answers part of it or answers it less directly;
- ``judged.jsonl``: ``{"id": "man2/fork.2", "title": "fork(2)", "summary": "fork - create a child process"}``
  for every judged document: the title (the page name or the headword) and, for man pages, the NAME
  line, so that the leakage check below runs without the documents;
- ``corpus.json``: the package versions, document count and digest of the corpus they were judged on.

The leakage check (:func:`leaks`) is what keeps the questions out-of-domain in the sense that matters
here: a question may not name its answer's title, and may share only a small part of its content
words with the title and summary, so lexical matching on the title alone cannot answer it.
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent

# Function words carry no topic: they are not counted as shared content words.
STOPWORDS = frozenset(
    """
a about above after again against all am an and any are as at be because been before being below between both
but by can could did do does doing down during each few for from further get gets got had has have having he
her here hers him his how i if in into is it its itself just me more most my no nor not now of off on once
only or other our out over own same she should so some such than that the their them then there these they
this those through to too under until up very was we were what when where which while who whom why will with
would you your yours yourself one ones something someone thing things way ways without want wants make makes
made use used using tell let lets kind called call word term name say said mean means whether another much
many every also
""".split()
)  # noqa: SIM905 (a word list reads better as text)
# At most this share of a question's content words may appear in its answer's title and summary.
MAX_TITLE_SHARE = 0.25


@dataclass(frozen=True)
class Benchmark:
    """One benchmark's questions, judgements and judged titles, as committed."""

    name: str
    queries: dict[str, str]
    notes: dict[str, str]
    qrels: dict[str, dict[str, int]]
    judged: dict[str, dict[str, str]]
    corpus: dict[str, object]


def benchmark_names(root: Path = BENCH_DIR) -> list[str]:
    """The benchmarks with questions committed under ``root``."""
    return sorted(p.parent.name for p in root.glob("*/queries.jsonl"))


def load(name: str, root: Path = BENCH_DIR) -> Benchmark:
    """Read benchmark ``name``'s committed files."""
    folder = root / name
    queries: dict[str, str] = {}
    notes: dict[str, str] = {}
    for line in (folder / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            record = json.loads(line)
            queries[record["_id"]] = record["text"]
            notes[record["_id"]] = record.get("note", "")
    qrels: dict[str, dict[str, int]] = {}
    with (folder / "qrels.tsv").open(encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            qrels.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
    judged = {}
    for line in (folder / "judged.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            record = json.loads(line)
            judged[record["id"]] = record
    corpus = json.loads((folder / "corpus.json").read_text(encoding="utf-8"))
    return Benchmark(name, queries, notes, qrels, judged, corpus)


def stem(word: str) -> str:
    """A light stemmer, enough to match "processes"/"process", "services"/"service", "created"/"create" and
    "running"/"run": plural and -ing/-ed/-ly endings go, then a doubled final consonant and a final 'e'.
    It never joins different words, so it can only under-count overlap on irregular forms."""
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith(("sses", "xes", "zes", "ches", "shes")):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")) and len(word) > 3:
        word = word[:-1]
    for suffix in ("ing", "ed", "ly"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiouls":  # runn -> run, stopp -> stop
        word = word[:-1]
    if len(word) > 3 and word.endswith("e"):  # create/created -> creat, file/files -> fil
        word = word[:-1]
    return word


def content_words(text: str) -> set[str]:
    """Stems of the words of ``text`` that are not function words. Identifiers are split at
    underscores, digits and punctuation ("pthread_create" -> pthread, create)."""
    words = re.findall(r"[a-z]+", text.lower())
    return {stem(w) for w in words if w not in STOPWORDS and len(w) > 1}


def title_of(record: dict[str, str]) -> str:
    """The title words of a judged document: its page name or headword, without the man section."""
    return re.sub(r"\(\d\w*\)$", "", record["title"])


def leaks(question: str, record: dict[str, str]) -> list[str]:
    """Why ``question`` gives its answer document away, or [] when it does not: it names a content
    word of the title, or more than :data:`MAX_TITLE_SHARE` of its content words are in the title
    and summary."""
    words = content_words(question)
    problems = []
    named = words & content_words(title_of(record))
    if named:
        problems.append(f"names title word(s) {sorted(named)}")
    shared = words & content_words(title_of(record) + " " + record.get("summary", ""))
    if words and len(shared) / len(words) > MAX_TITLE_SHARE:
        problems.append(f"shares {len(shared)}/{len(words)} content words with title+summary: {sorted(shared)}")
    return problems


def answer_documents(benchmark: Benchmark, query: str) -> list[str]:
    """The documents graded highest for ``query`` (its answers, as opposed to partial answers)."""
    judged = benchmark.qrels[query]
    best = max(judged.values())
    return sorted(doc for doc, grade in judged.items() if grade == best)
