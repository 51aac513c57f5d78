"""How well models find code by what it does: docstring-to-function retrieval over Python's own standard library.

What ``text_suffixes=[".py"]`` gives a user, measured as CodeSearchNet measures code search: each function or
method of the chosen stdlib modules with a docstring is a document, its source with the docstring taken out; its
query is the docstring's first sentence (at least 5 words). Scored as ``bench/ood/score.py`` scores its benchmarks,
with its code: the Causal2Vec rows ingest the functions into an embedded Qdrant and ``search_many`` them;
all-MiniLM-L6-v2 ranks the same chunks; BM25 the whole functions.

    taskset -c 1 env OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 python bench/code_search.py --max-queries 600 \
        --truncate-dim full --truncate-dim 384 --truncate-dim 960 --json bench/results/code_search_avx2.json

The corpus is the running Python's standard library (its version goes into the report): the same functions
wherever the same Python is installed. A query whose first sentence several functions share (an overridden
method's inherited docstring) is left out, so that every query has one answer.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import platform
import random
import re
import sys
import sysconfig
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent / "ood"))
sys.path.insert(1, str(Path(__file__).resolve().parent))

import metrics  # noqa: E402 - bench/ood's modules, by the path set above
import numpy as np  # noqa: E402
import questions  # noqa: E402
import score  # noqa: E402
from common import recorded_command  # noqa: E402

# Pure-Python modules of several kinds (parsing, networking, files, maths, text), each with many documented
# functions.
MODULES = (
    "argparse", "ast", "base64", "bisect", "calendar", "configparser", "csv", "dataclasses", "datetime",
    "difflib", "email", "fnmatch", "fractions", "ftplib", "functools", "glob", "gzip", "heapq", "http",
    "imaplib", "inspect", "ipaddress", "json", "logging", "mailbox", "pathlib", "pickle", "pprint", "random",
    "shlex", "shutil", "smtplib", "statistics", "string", "tarfile", "tempfile", "textwrap", "tokenize",
    "urllib", "uuid", "wave", "zipfile",
)  # fmt: skip
MIN_QUERY_WORDS = 5
SENTENCE_END = re.compile(r"(?<=[.!?])\s")
# An old-style docstring that opens with the call's signature, add_argument(dest, ...): no question.
SIGNATURE = re.compile(r"^[\w.]+\(")


def module_files(stdlib: Path) -> list[Path]:
    """The source files of :data:`MODULES` under ``stdlib`` (a package's files, tests left out), sorted."""
    files: list[Path] = []
    for name in MODULES:
        single = stdlib / f"{name}.py"
        if single.is_file():
            files.append(single)
        elif (stdlib / name).is_dir():
            files += [p for p in sorted((stdlib / name).rglob("*.py")) if "test" not in p.parts]
    return files


def first_sentence(docstring: str) -> str:
    paragraph = docstring.strip().split("\n\n")[0]
    return SENTENCE_END.split(" ".join(paragraph.split()), maxsplit=1)[0]


def functions(file: Path, stdlib: Path) -> list[tuple[str, str, str]]:
    """``(id, query, code)`` for each documented function or method of ``file``: the code without its docstring."""
    source = file.read_text(encoding="utf-8")
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        docstring = ast.get_docstring(node)
        if not docstring:
            continue
        query = first_sentence(docstring)
        if len(query.split()) < MIN_QUERY_WORDS or SIGNATURE.match(query):
            continue
        lines = source.splitlines(keepends=True)
        doc_node = node.body[0]
        start, end = node.lineno - 1 - len(node.decorator_list), node.end_lineno or node.lineno
        # The function's lines less the docstring's own.
        kept = lines[start : doc_node.lineno - 1] + lines[(doc_node.end_lineno or doc_node.lineno) : end]
        code = "".join(kept).rstrip()
        if len(code.splitlines()) < 3:  # a signature and a pass: nothing to find it by but its name
            continue
        relative = file.relative_to(stdlib).with_suffix("").as_posix()
        found.append((f"{relative}:{node.lineno}:{node.name}", query, code))
    return found


def build_corpus(max_queries: int, seed: int) -> score.Corpus:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    items = [item for file in module_files(stdlib) for item in functions(file, stdlib)]
    counts: dict[str, int] = {}
    for _, query, _ in items:
        counts[query.casefold()] = counts.get(query.casefold(), 0) + 1
    docs = {doc_id: code for doc_id, _, code in items}
    answerable = [(doc_id, query) for doc_id, query, _ in items if counts[query.casefold()] == 1]
    picked = sorted(random.Random(seed).sample(answerable, min(max_queries, len(answerable))))
    queries = {f"q{n}": query for n, (_, query) in enumerate(picked)}
    qrels = {f"q{n}": {doc_id: 1} for n, (doc_id, _) in enumerate(picked)}
    digest = hashlib.sha256(json.dumps(docs, sort_keys=True).encode()).hexdigest()[:16]
    bench = questions.Benchmark("python-stdlib", queries, {}, qrels, {}, {"digest": digest})
    return score.Corpus("python-stdlib", docs, digest, bench)


def paired_gain(a: score.Row, b: score.Row, qrels: dict[str, dict[str, int]], seed: int = 0) -> dict[str, Any]:
    """Row ``a``'s mean gain over row ``b`` in nDCG@10 and MRR@10, question by question, with a 95% bootstrap
    interval (5,000 resamples) and how many questions each wins."""
    out: dict[str, Any] = {}
    ids = sorted(qrels)
    for metric in ("ndcg@10", "mrr@10"):
        diff = np.array(
            [
                metrics.query_metrics(a.rankings[q], qrels[q])[metric]
                - metrics.query_metrics(b.rankings[q], qrels[q])[metric]
                for q in ids
            ]
        )
        draws = np.random.default_rng(seed).integers(0, len(diff), size=(5000, len(diff)))
        means = diff[draws].mean(axis=1)
        out[metric] = {
            "gain": round(float(diff.mean()), 4),
            "ci95": [round(float(np.quantile(means, 0.025)), 4), round(float(np.quantile(means, 0.975)), 4)],
            "better": int((diff > 0).sum()),
            "worse": int((diff < 0).sum()),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-queries", type=int, default=600)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path)
    own, rest = parser.parse_known_args(argv)
    args = score.parse_args(rest)  # --model, --task, --truncate-dim, --cache, --quantize... as score.py takes them
    corpus = build_corpus(own.max_queries, own.seed)
    models = {reference: score.load_model(reference, args.quantize) for reference in args.model}
    rows = score.score_benchmark(corpus, args, models)
    print(score.table(corpus, rows), flush=True)
    minilm = next((r for r in rows if r.system == "all-minilm-l6-v2"), None)
    gains = {
        f"{r.system} {r.settings['truncate_dim'] or 'full'}": paired_gain(r, minilm, corpus.bench.qrels)
        for r in rows
        if minilm and r.system.startswith("c2v")
    }
    print(json.dumps({"paired gain over all-minilm-l6-v2": gains}, indent=1))
    if own.json:
        report: dict[str, Any] = {
            "command": recorded_command("bench/code_search.py", argv or sys.argv[1:]),
            "cpu_flags": score.cpu_flags(),
            "python": platform.python_version(),
            "modules": list(MODULES),
            "documents": len(corpus.docs),
            "questions": len(corpus.bench.qrels),
            "corpus_digest": corpus.digest,
            "paired_gain_over_minilm": gains,
            "rows": [{"system": r.system, **r.settings, "scores": r.scores, "seconds": r.seconds} for r in rows],
        }
        own.json.parent.mkdir(parents=True, exist_ok=True)
        own.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
