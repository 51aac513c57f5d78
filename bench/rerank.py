"""Reranking with the decoder's likelihood: what it gains over dense and BM25 retrieval, and what it costs.

Three steps, each cached, so that a slow CPU can be given the work in pieces:

    # 1. first-stage candidates: the dense top 50 (the default preset) and the BM25 top 50 of each question
    python bench/rerank.py candidates --set scifact-dev --set manpages --set jargon --data ../shared/data
    #    (--quantize int8: from the collections score.py --quantize int8 made, the questions embedded in int8 too)
    # 2. the reranker's likelihood of each (question, candidate) pair, for one configuration
    python bench/rerank.py score --set manpages --first dense --top 20 --template search-query --decoder base
    # 3. the tables: dense, dense + rerank top 20 / 50, BM25 + rerank, at each fusion weight; the JSON in --json
    python bench/rerank.py report --json bench/results/rerank_avx2.json
    # two cached configurations (another variant's decoder: score --model DIR), paired by question
    python bench/rerank.py compare --base 'search-query|base|256|int8' --other 'search-query|base|256|int8|model=NAME'
    # other fusions of the two scores than the shipped z-scores, on the cached likelihoods
    python bench/rerank.py fusions --top 20 --json bench/results/rerank_fusions_int8_avx512bf16.json
    # latency per query: 20 chunks of 200 tokens, one thread (or --threads 2; the int8 decoder runs a batch on
    # every usable core whatever --threads, so pin it for one: taskset -c 0)
    python bench/rerank.py latency --threads 1 --top 20 --chunk-tokens 200
    #    (--texts scifact --data ../shared/data: SciFact abstracts, where the man pages' candidates are not built)

Sets: ``scifact-dev`` is ``c2v-rag eval``'s scifact-dev-1k (the seeded 20% of SciFact's train claims, 162, against
1,000 abstracts), dense = the preset's vectors of the whole abstracts with the SciFact query instruction;
``manpages``, ``jargon`` and ``postfix`` are bench/ood's, dense = ``score.py``'s cached collection of the preset
(200-token chunks, a document ranked by its best chunk, which is the text reranked, as
``search(group_by_document=True, rerank=N)`` reranks its hits), BM25 = ``score.py``'s over whole documents (the
document is reranked, its head). ``score`` takes ``--queries K`` to score the first K questions only (sorted by id);
the report scores each row (a first stage, a depth, a configuration) on the questions that configuration scored to
that depth, with the first stage alone on the same questions beside it, and says how many.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent
# The checkout's c2v_rag first (not an installed one), then the OOD benchmarks' modules, which import by name.
sys.path[:0] = [str(ROOT.parent), str(ROOT / "ood")]

import metrics  # noqa: E402
import score as ood  # noqa: E402
from common import recorded_command  # noqa: E402

TOP = 50
SETS = ("scifact-dev", *ood.build.BENCHMARKS)  # SciFact dev and every bench/ood benchmark
WEIGHTS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 1.0)


def cache_dir() -> Path:
    from platformdirs import user_cache_dir

    return Path(os.environ.get("C2V_RERANK_CACHE") or Path(user_cache_dir("c2v_rag")) / "rerank-bench")


# ------------------------------------------------------------------------------------ candidates


def scifact_candidates(model: Any, data_dir: Path, truncate_dim: int | None = None) -> dict[str, Any]:
    """SciFact dev's dense candidates from the preset's vectors, or from their first ``truncate_dim`` values (as
    ``ingest(truncate_dim=...)`` stores them), and BM25's."""
    from c2v_rag.evaluation.datasets import scifact_dev

    data = scifact_dev(data_dir, corpus_size=1000)
    doc_ids = list(data.corpus)
    texts = [data.corpus[d] for d in doc_ids]
    vectors = np.asarray(
        model.encode_documents(texts, normalize_embeddings=True, show_progress_bar=True, truncate_dim=truncate_dim)
    )
    qids = sorted(data.qrels)
    queries = np.asarray(
        model.encode_queries(
            [data.queries[q] for q in qids], task=data.task, normalize_embeddings=True, truncate_dim=truncate_dim
        )
    )
    dense = {}
    for q, row in zip(qids, queries @ vectors.T):
        order = np.argsort(-row, kind="stable")[:TOP]
        dense[q] = [(doc_ids[i], float(row[i]), texts[i]) for i in order]
    bm25 = bm25_top({d: t for d, t in zip(doc_ids, texts)}, {q: data.queries[q] for q in qids})
    return {
        "queries": {q: data.queries[q] for q in qids},
        "qrels": {q: dict(data.qrels[q]) for q in qids},
        "dense": dense,
        "bm25": bm25,
        "dense_setting": f"preset, whole abstracts, query task {data.task}"
        + ("" if truncate_dim is None else f", its first {truncate_dim} values"),
    }


def ood_candidates(name: str, model: Any, folder: Path | None = None) -> dict[str, Any]:
    """BM25's candidates, and the dense ones once score.py's cached collection of the preset is complete."""
    args = ood.parse_args(["--model", "default"])
    corpus = ood.load_corpus(name, args.docs)
    qids = ood.query_ids(corpus)
    found = {
        "queries": {q: corpus.bench.queries[q] for q in qids},
        "qrels": {q: dict(corpus.bench.qrels[q]) for q in qids},
        "bm25": bm25_top(corpus.docs, {q: corpus.bench.queries[q] for q in qids}),
    }
    # score.py's folder for the preset, unless named (--collection: a folder another checkout's score.py keyed)
    # (read by the decoder at ingest's decoder_max_length for a new collection, as score.py ingests it)
    folder = folder or ood.collection_dir(
        args.cache, corpus, model, "default", None, ood.decoder_cap(model, args.decoder_max_length)
    )
    if not (folder / "complete.json").exists():
        print(
            f"{name}: no complete cached collection at {folder} yet (bench/ood/score.py --quantize "
            f"{model.quantization}): BM25 candidates only"
        )
        return found
    chunk_docs, chunk_texts, vectors = ood.stored_points(folder)
    queries = np.asarray(model.encode_queries([corpus.bench.queries[q] for q in qids], normalize_embeddings=True))
    dense = {}
    for q, row in zip(qids, queries @ vectors.T):
        seen: dict[str, tuple[float, str]] = {}
        for i in np.argsort(-row, kind="stable"):
            if chunk_docs[i] not in seen:  # a document ranks by its best chunk, which is the text reranked
                seen[chunk_docs[i]] = (float(row[i]), chunk_texts[i])
                if len(seen) == TOP:
                    break
        dense[q] = [(d, s, t) for d, (s, t) in seen.items()]
    found["dense"] = dense
    found["dense_setting"] = (
        "preset, score.py's cached collection (200-token chunks, best chunk per document), the variant's default "
        "query task"
    )
    return found


def bm25_top(docs: dict[str, str], queries: dict[str, str]) -> dict[str, list[tuple[str, float, str]]]:
    """score.py's BM25 (bm25s, Lucene, English stop words, Snowball) over whole documents: the top 50 of each."""
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    ids = list(docs)
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(list(docs.values()), stopwords="en", stemmer=stemmer, show_progress=False))
    qids = list(queries)
    tokens = bm25s.tokenize([queries[q] for q in qids], stopwords="en", stemmer=stemmer, show_progress=False)
    found, scores = retriever.retrieve(tokens, k=TOP, show_progress=False)
    return {
        q: [(ids[i], float(s), docs[ids[i]]) for i, s in zip(row, srow)] for q, row, srow in zip(qids, found, scores)
    }


def candidates_path(name: str) -> Path:
    return cache_dir() / f"candidates-{name}.json"


def cmd_candidates(args: argparse.Namespace) -> None:
    from c2v_rag import DEFAULT_PRESET, Causal2Vec

    if args.truncate_dim is not None and set(args.set) != {"scifact-dev"}:
        raise SystemExit(
            "--truncate-dim applies to scifact-dev; for a bench/ood set, score.py --truncate-dim N --truncate-ingest "
            "--rerank 20 ingests and reranks at that size"
        )
    # The preset as score.py loads it with --quantize: its cached collection is keyed by that (int8 vectors live in
    # collections of their own), and the questions are embedded the same way.
    model = Causal2Vec.from_pretrained(DEFAULT_PRESET, quantize=args.quantize)
    for name in args.set:
        path = candidates_path(name)
        # A set cached before its dense collection was complete gets its dense candidates on a later run.
        if path.exists() and not args.force and "dense" in json.loads(path.read_text(encoding="utf-8")):
            print(f"{name}: cached at {path}")
            continue
        started = time.perf_counter()
        folders = dict(item.split("=", 1) for item in args.collection or [])
        found = (
            scifact_candidates(model, args.data, args.truncate_dim)
            if name == "scifact-dev"
            else ood_candidates(name, model, Path(folders[name]) if name in folders else None)
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(found) + "\n", encoding="utf-8")
        print(
            f"{name}: {len(found['queries'])} questions, candidates in {time.perf_counter() - started:.0f} s -> {path}"
        )


# ------------------------------------------------------------------------------------ scoring


def config_key(template: str, decoder: str, max_length: int, precision: str = "float", model: str | None = None) -> str:
    """The likelihoods' key: float decoders (float32, bf16) share the plain key, int8 has its own; a variant other
    than the default preset ends it with ``|model=NAME`` (its folder's name)."""
    key = f"{template}|{decoder}|{max_length}" + ("|int8" if precision == "int8" else "")
    return key + (f"|model={Path(model).name}" if model else "")


def scores_path(name: str) -> Path:
    return cache_dir() / f"likelihoods-{name}.json"


def load_scores(name: str) -> dict[str, dict[str, float]]:
    path = scores_path(name)
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def text_key(query: str, text: str) -> str:
    return hashlib.sha256((query + "\x00" + text).encode()).hexdigest()[:24]


def cmd_score(args: argparse.Namespace) -> None:
    from c2v_rag.rerank import Causal2VecReranker

    reranker = Causal2VecReranker(
        args.model,
        decoder=args.decoder,
        template=args.template,
        quantize=args.quantize,
        max_length=args.max_length,
        batch_tokens=args.batch_tokens,
    )
    key = config_key(args.template, args.decoder, reranker.max_length, reranker.precision, args.label or args.model)
    for name in args.set:
        found = json.loads(candidates_path(name).read_text(encoding="utf-8"))
        stored = load_scores(name)
        table = stored.setdefault(key, {})
        qids = sorted(found["queries"])[: args.queries]
        started, pairs = time.perf_counter(), 0
        for n, q in enumerate(qids):
            query = found["queries"][q]
            todo = {text_key(query, t): t for first in args.first for _, _, t in found[first][q][: args.top]}
            todo = {k: t for k, t in todo.items() if k not in table}
            if todo:
                values = reranker.score(query, list(todo.values()))
                table.update({k: float(v) for k, v in zip(todo, values)})
                pairs += len(todo)
            if (n + 1) % 5 == 0 or n + 1 == len(qids):
                scores_path(name).write_text(json.dumps(stored) + "\n", encoding="utf-8")
                rate = pairs / max(time.perf_counter() - started, 1e-9)
                print(f"{name} {key}: {n + 1}/{len(qids)} questions, {pairs} pairs, {rate:.2f} pairs/s", flush=True)
        print(f"{name}: {reranker.truncated} documents truncated so far at max_length={reranker.max_length}")


# ------------------------------------------------------------------------------------ report


def reranked(cands: list, query: str, table: dict[str, float], top: int, weight: float) -> list[str] | None:
    """The candidates' top ``top`` re-ordered by the fused score, then the rest in first-stage order."""
    from c2v_rag.rerank import fuse

    head = cands[:top]
    keys = [text_key(query, t) for _, _, t in head]
    if any(k not in table for k in keys):
        return None
    fused = fuse([s for _, s, _ in head], [table[k] for k in keys], weight)
    order = np.argsort(-fused, kind="stable")
    return [head[i][0] for i in order] + [d for d, _, _ in cands[top:]]


def paired_gain(run: dict[str, list[str]], first: dict[str, list], judged: dict) -> dict[str, float]:
    """nDCG@10 of ``run`` minus the first stage's, per question: :func:`paired_difference`."""
    return paired_difference(run, {q: [d for d, _, _ in first[q]] for q in judged}, judged)


def paired_difference(run: dict[str, list[str]], base: dict[str, list[str]], judged: dict) -> dict[str, float]:
    """nDCG@10 of ``run`` minus ``base``'s, per question: its mean, standard error, and how many questions went up
    and down."""
    diffs = np.array(
        [
            metrics.query_metrics(run[q], judged[q])["ndcg@10"] - metrics.query_metrics(base[q], judged[q])["ndcg@10"]
            for q in judged
        ]
    )
    se = float(diffs.std(ddof=1) / np.sqrt(len(diffs))) if len(diffs) > 1 else float("nan")
    return {"mean": float(diffs.mean()), "se": se, "up": int((diffs > 0).sum()), "down": int((diffs < 0).sum())}


def report_set(name: str, configs: list[str]) -> dict[str, Any]:
    found = json.loads(candidates_path(name).read_text(encoding="utf-8"))
    stored = load_scores(name)
    qrels = found["qrels"]
    rows: dict[str, Any] = {}
    for first in [f for f in ("dense", "bm25") if f in found]:
        for top in (10, 20, 30, 50):
            for key in configs:
                table = stored.get(key, {})
                covered = [q for q in sorted(qrels) if reranked(found[first][q], found["queries"][q], table, top, 0.0)]
                if not covered:
                    continue
                judged = {q: qrels[q] for q in covered}
                base = metrics.evaluate({q: [d for d, _, _ in found[first][q]] for q in covered}, judged)
                row = {"questions": len(covered), first: base, "by_weight": {}, "ndcg_gain": {}}
                for w in WEIGHTS:
                    run = {q: reranked(found[first][q], found["queries"][q], table, top, w) for q in covered}
                    row["by_weight"][str(w)] = metrics.evaluate(run, judged)
                    row["ndcg_gain"][str(w)] = paired_gain(run, found[first], judged)
                rows[f"{first} top{top} {key}"] = row
    return {"dense_setting": found.get("dense_setting"), "questions": len(qrels), "rows": rows}


def cmd_report(args: argparse.Namespace) -> None:
    report: dict[str, Any] = {
        "command": recorded_command("bench/rerank.py", sys.argv[1:]),
        "cpu_flags": ood.cpu_flags(),
        "sets": {},
    }
    for name in args.set:
        if not candidates_path(name).exists():
            continue
        configs = sorted(load_scores(name))
        result = report_set(name, configs)
        report["sets"][name] = result
        print(f"\n## {name} ({result['questions']} questions; dense: {result['dense_setting']})")
        for label, row in result["rows"].items():
            first = label.split()[0]
            base = row[first]
            cells = " ".join(f"w{w}={m['ndcg@10']:.3f}/{m['mrr@10']:.3f}" for w, m in row["by_weight"].items())
            scores = f"{base['ndcg@10']:.3f}/{base['mrr@10']:.3f}"
            print(f"{label:50s} n={row['questions']:3d} {first} ndcg/mrr={scores} | {cells}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


def cmd_compare(args: argparse.Namespace) -> None:
    """Two cached likelihood configurations on the same questions, dense top ``--top`` at the shipped fusion weight:
    nDCG@10 and MRR@10 of each, and ``--other`` minus ``--base`` paired by question."""
    from c2v_rag.rerank.fusion import DEFAULT_WEIGHT

    report: dict[str, Any] = {
        "command": recorded_command("bench/rerank.py", sys.argv[1:]),
        "cpu_flags": ood.cpu_flags(),
        "base": args.base,
        "other": args.other,
        "top": args.top,
        "weight": DEFAULT_WEIGHT,
        "sets": {},
    }
    for name in args.set:
        if not candidates_path(name).exists():
            continue
        found, stored = json.loads(candidates_path(name).read_text(encoding="utf-8")), load_scores(name)
        if "dense" not in found:
            print(f"{name}: no dense candidates cached (run candidates once score.py's collection is complete)")
            continue
        tables = [stored.get(args.base, {}), stored.get(args.other, {})]
        runs: list[dict[str, list[str]]] = [{}, {}]
        for q in sorted(found["qrels"]):
            ranked = [reranked(found["dense"][q], found["queries"][q], t, args.top, DEFAULT_WEIGHT) for t in tables]
            if all(r is not None for r in ranked):
                for run, r in zip(runs, ranked):
                    run[q] = r  # type: ignore[assignment]
        if not runs[0]:
            print(f"{name}: no question scored by both configurations")
            continue
        judged = {q: found["qrels"][q] for q in runs[0]}
        dense = {q: [d for d, _, _ in found["dense"][q]] for q in judged}
        row = {
            "questions": len(judged),
            "dense": metrics.evaluate(dense, judged),
            "base": metrics.evaluate(runs[0], judged),
            "other": metrics.evaluate(runs[1], judged),
            "ndcg_difference": paired_difference(runs[1], runs[0], judged),
        }
        report["sets"][name] = row
        d = row["ndcg_difference"]
        print(
            f"{name:12s} n={len(judged):3d} dense {row['dense']['ndcg@10']:.4f} | base {row['base']['ndcg@10']:.4f} "
            f"| other {row['other']['ndcg@10']:.4f} | other - base {d['mean']:+.4f} +- {d['se']:.4f} "
            f"({d['up']} up / {d['down']} down)"
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


# ------------------------------------------------------------------------------------ fusions


def _ranks(values: np.ndarray) -> np.ndarray:
    """0 for the highest value, 1 for the next... (ties in list order)."""
    order = np.argsort(-values, kind="stable")
    out = np.empty(len(values))
    out[order] = np.arange(len(values))
    return out


def _minmax(values: np.ndarray) -> np.ndarray:
    spread = values.max() - values.min()
    return (values - values.min()) / spread if spread > 0 else np.zeros_like(values)


def _robust_z(values: np.ndarray) -> np.ndarray:
    median = np.median(values)
    mad = 1.4826 * np.median(np.abs(values - median))
    return (values - median) / mad if mad > 0 else np.zeros_like(values)


def fusion_rules() -> dict[str, Any]:
    """Other ways to fuse a query's first-stage scores d with its likelihoods ll, beside the shipped one
    (c2v_rag.rerank.fuse at its default weight): each maps (d, ll) to the fused scores."""
    from c2v_rag.rerank import fuse
    from c2v_rag.rerank.fusion import DEFAULT_WEIGHT, zscore

    return {
        f"z-scores, weight {DEFAULT_WEIGHT} (shipped)": lambda d, ll: fuse(d, ll, DEFAULT_WEIGHT),
        "z-scores, weight 0.4": lambda d, ll: fuse(d, ll, 0.4),
        "z-scores, weight 0.6": lambda d, ll: fuse(d, ll, 0.6),
        "min-max": lambda d, ll: _minmax(d) + _minmax(ll),
        "robust z (median, MAD)": lambda d, ll: _robust_z(d) + _robust_z(ll),
        "z-scores, likelihood's clipped at +-2": lambda d, ll: zscore(d) + np.clip(zscore(ll), -2, 2),
        "z-scores of ranks": lambda d, ll: zscore(-_ranks(d)) + zscore(-_ranks(ll)),
        "reciprocal rank, k 60": lambda d, ll: 1 / (60 + _ranks(d)) + 1 / (60 + _ranks(ll)),
        "reciprocal rank, k 10": lambda d, ll: 1 / (10 + _ranks(d)) + 1 / (10 + _ranks(ll)),
    }


def cmd_fusions(args: argparse.Namespace) -> None:
    """nDCG@10 of the dense top ``--top`` reranked under each of :func:`fusion_rules`, on the likelihoods of one
    cached configuration, each rule against the shipped one, paired by question."""
    rules = fusion_rules()
    shipped = next(iter(rules))
    report: dict[str, Any] = {
        "command": recorded_command("bench/rerank.py", sys.argv[1:]),
        "cpu_flags": ood.cpu_flags(),
        "sets": {},
    }
    for name in args.set:
        found = json.loads(candidates_path(name).read_text(encoding="utf-8"))
        key = next((k for k in load_scores(name) if k.endswith(args.config_suffix)), None)
        table = load_scores(name).get(key or "", {})
        per_rule: dict[str, list[float]] = {rule: [] for rule in rules}
        for q in sorted(found["qrels"]):
            cands, query = found["dense"][q], found["queries"][q]
            head = cands[: args.top]
            keys = [text_key(query, t) for _, _, t in head]
            if any(k not in table for k in keys):
                continue
            first = np.array([s for _, s, _ in head], dtype=np.float64)
            likelihood = np.array([table[k] for k in keys], dtype=np.float64)
            for rule, fused in rules.items():
                order = np.argsort(-fused(first, likelihood), kind="stable")
                run = [head[i][0] for i in order] + [d for d, _, _ in cands[args.top :]]
                per_rule[rule].append(metrics.query_metrics(run, found["qrels"][q])["ndcg@10"])
        base = np.array(per_rule[shipped])
        if not len(base):
            continue
        rows = {}
        print(f"\n## {name}: {len(base)} questions, dense top {args.top}, likelihoods {key}")
        for rule, values in per_rule.items():
            diff = np.array(values) - base
            se = float(diff.std(ddof=1) / np.sqrt(len(diff))) if len(diff) > 1 else float("nan")
            rows[rule] = {"ndcg@10": float(np.mean(values)), "vs_shipped": float(diff.mean()), "se": se}
            print(f"{rule:40s} {np.mean(values):.4f}  {diff.mean():+.4f} +- {se:.4f}")
        report["sets"][name] = {"questions": len(base), "config": key, "top": args.top, "rules": rows}
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


# ------------------------------------------------------------------------------------ depths


def depth_policies(top: int) -> dict[str, Any]:
    """How many of a query's dense hits (best first, at most ``top``) each policy reranks: fixed depths, and the hits
    within a cosine gap of the best, at least a floor (the reranker's cost is one decoder pass a hit)."""
    policies: dict[str, Any] = {f"fixed {k}": (lambda s, k=k: k) for k in (5, 8, 10, 12, 15, top)}
    for gap in (0.05, 0.08, 0.1, 0.12, 0.15):
        for floor in (5, 10):
            policies[f"gap {gap}, at least {floor}"] = lambda s, g=gap, f=floor: max(f, int((s >= s[0] - g).sum()))
    return policies


def ndcg_at_depths(found: dict[str, Any], table: dict[str, float], qids: list[str], depth_of: Any, top: int):
    """Each question's nDCG@10 with its dense top ``depth_of(scores)`` (at most ``top``) reranked at the shipped
    fusion weight, and the mean depth."""
    from c2v_rag.rerank.fusion import DEFAULT_WEIGHT

    values, depths = [], []
    for q in qids:
        cands = found["dense"][q]
        depth = min(top, depth_of(np.array([s for _, s, _ in cands[:top]])))
        run = reranked(cands, found["queries"][q], table, depth, DEFAULT_WEIGHT)
        values.append(metrics.query_metrics(run, found["qrels"][q])["ndcg@10"])  # type: ignore[arg-type]
        depths.append(depth)
    return np.array(values), float(np.mean(depths))


def cmd_depths(args: argparse.Namespace) -> None:
    """nDCG@10 of each :func:`depth_policies` policy on the cached likelihoods of one configuration, at the shipped
    fusion weight, paired by question against reranking the whole dense top ``--top``, and the mean depth (the
    pairs a query costs)."""
    from c2v_rag.rerank.fusion import DEFAULT_WEIGHT

    report: dict[str, Any] = {
        "command": recorded_command("bench/rerank.py", sys.argv[1:]),
        "cpu_flags": ood.cpu_flags(),
        "weight": DEFAULT_WEIGHT,
        "sets": {},
    }
    for name in args.set:
        if not candidates_path(name).exists():
            continue
        found = json.loads(candidates_path(name).read_text(encoding="utf-8"))
        key = next((k for k in sorted(load_scores(name)) if k.endswith(args.config_suffix)), None)
        table = load_scores(name).get(key or "", {})
        qids = [
            q for q in sorted(found["qrels"]) if reranked(found["dense"][q], found["queries"][q], table, args.top, 0)
        ]
        if not qids:
            continue
        whole, _ = ndcg_at_depths(found, table, qids, lambda s: args.top, args.top)
        dense, _ = ndcg_at_depths(found, table, qids, lambda s: 0, args.top)
        print(f"\n## {name}: {len(qids)} questions, likelihoods {key}")
        print(f"dense alone {dense.mean():.4f}, its top {args.top} reranked {whole.mean():.4f}")
        rows = {}
        for label, depth_of in depth_policies(args.top).items():
            values, depth = ndcg_at_depths(found, table, qids, depth_of, args.top)
            diff = values - whole
            se = float(diff.std(ddof=1) / np.sqrt(len(diff))) if len(diff) > 1 else float("nan")
            rows[label] = {"mean_depth": depth, "ndcg@10": float(values.mean()), "vs_top": float(diff.mean()), "se": se}
            print(f"{label:24s} depth {depth:5.1f}  {values.mean():.4f}  {diff.mean():+.4f} +- {se:.4f}")
        report["sets"][name] = {"questions": len(qids), "config": key, "dense": float(dense.mean()), "policies": rows}
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


# ------------------------------------------------------------------------------------ latency


def _latency_queries(args: argparse.Namespace) -> list[tuple[str, list[str]]]:
    """``--queries`` questions, each with the ``--top`` texts to rerank: the man pages' cached dense candidates, or
    SciFact's claims each against the next ``--top`` abstracts (``--texts scifact``, which needs only ``--data``).
    The cost depends on the texts' lengths, which are cut to ``--chunk-tokens`` either way."""
    if args.texts == "scifact":
        from common import load_scifact_docs, load_scifact_queries

        claims = load_scifact_queries(args.data, args.queries)
        docs = load_scifact_docs(args.data, None)
        return [(claim, docs[i * args.top : (i + 1) * args.top]) for i, claim in enumerate(claims)]
    found = json.loads(candidates_path("manpages").read_text(encoding="utf-8"))
    first = "dense" if "dense" in found else "bm25"  # either: the texts are cut to --chunk-tokens
    return [
        (found["queries"][q], [t for _, _, t in found[first][q][: args.top]])
        for q in sorted(found["queries"])[: args.queries]
    ]


def cmd_latency(args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(args.threads)
    from c2v_rag.hub.fast_tokenizer import transformers_tokenizer
    from c2v_rag.rerank import Causal2VecReranker

    reranker = Causal2VecReranker(None, template=args.template, quantize=args.quantize, batch_tokens=args.batch_tokens)
    tokenizer = transformers_tokenizer(reranker.scoring.tokenizer)  # decode is transformers' alone
    times = []
    for query, candidates in _latency_queries(args):
        # Each candidate cut to --chunk-tokens tokens: ingest's chunk size, the length a search's hits have.
        texts = [
            tokenizer.decode(tokenizer(t, add_special_tokens=False)["input_ids"][: args.chunk_tokens])
            for t in candidates
        ]
        started = time.perf_counter()
        reranker.score(query, texts)
        times.append(time.perf_counter() - started)
    warm = times[1:] or times
    result = {
        "threads": args.threads,
        # batches at once: an int8 decoder runs one per usable core whatever torch's threads (taskset sets them)
        "workers": reranker.scoring.likelihood.workers,
        "top": args.top,
        "chunk_tokens": args.chunk_tokens,
        "batch_tokens": reranker.batch_tokens,
        "template": args.template,
        "texts": args.texts,
        "precision": reranker.precision,
        "queries": len(times),
        "seconds_per_query_median": float(np.median(warm)),
        "seconds_per_query_mean": float(np.mean(warm)),
        "first_query_seconds": times[0],
        "torch": torch.__version__,
        "load_average_after": os.getloadavg(),  # other work on the machine slows each query; say how much there was
        "cpu_flags": ood.cpu_flags(),
    }
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("candidates")
    p.add_argument("--set", action="append", choices=SETS)
    p.add_argument("--force", action="store_true")
    p.add_argument("--collection", action="append", metavar="SET=DIR", help="score.py's cached collection folder")
    p.add_argument(
        "--quantize",
        default="none",
        choices=("none", "int8"),
        help="the preset's vectors, as score.py --quantize made its collection (int8: the ingest default's)",
    )
    p.add_argument("--data", type=Path, default=Path("../shared/data"), help="the shared data, for scifact-dev")
    p.add_argument(
        "--truncate-dim",
        type=int,
        default=None,
        help="scifact-dev: the dense candidates from the vectors' first N values (with its own $C2V_RERANK_CACHE)",
    )
    p = sub.add_parser("score")
    p.add_argument("--set", action="append", choices=SETS)
    p.add_argument("--first", action="append", choices=("dense", "bm25"))
    p.add_argument("--top", type=int, default=20)
    p.add_argument("--queries", type=int, default=None)
    p.add_argument("--template", default="search-query")
    p.add_argument("--decoder", default="base", choices=("base", "variant"))
    p.add_argument("--max-length", type=int, default=None)
    p.add_argument("--batch-tokens", type=int, default=None)
    p.add_argument("--quantize", default="auto", choices=("auto", "int8", "none"), help="the reranker's quantize")
    p.add_argument(
        "--model", default=None, help="a variant folder or preset whose base decoder scores (default: the preset)"
    )
    p.add_argument("--label", default=None, help="--model's name in the cache's key (default: its folder's name)")
    p = sub.add_parser("report")
    p.add_argument("--set", action="append", choices=SETS)
    p.add_argument("--json", type=Path)
    p = sub.add_parser("compare")
    p.add_argument("--set", action="append", choices=SETS)
    p.add_argument("--top", type=int, default=20)
    p.add_argument("--base", required=True, help="a cached configuration's key, e.g. 'search-query|base|256|int8'")
    p.add_argument("--other", required=True, help="the key compared with it")
    p.add_argument("--json", type=Path)
    p = sub.add_parser("fusions")
    p.add_argument("--set", action="append", choices=SETS)
    p.add_argument("--top", type=int, default=20)
    p.add_argument("--config-suffix", default="|int8", help="which cached likelihoods: the key's end")
    p.add_argument("--json", type=Path)
    p = sub.add_parser("depths")
    p.add_argument("--set", action="append", choices=SETS)
    p.add_argument("--top", type=int, default=20)
    p.add_argument("--config-suffix", default="|int8", help="which cached likelihoods: the key's end")
    p.add_argument("--json", type=Path)
    p = sub.add_parser("latency")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--top", type=int, default=20)
    p.add_argument("--chunk-tokens", type=int, default=200)
    p.add_argument("--queries", type=int, default=11)
    p.add_argument("--template", default="search-query")
    p.add_argument("--batch-tokens", type=int, default=None)
    p.add_argument("--quantize", default="auto", choices=("auto", "int8", "none"), help="the reranker's quantize")
    p.add_argument(
        "--texts",
        default="manpages",
        choices=("manpages", "scifact"),
        help="the man pages' cached candidates (after `candidates --set manpages`) or SciFact's abstracts (--data)",
    )
    p.add_argument("--data", type=Path, default=Path("../shared/data"), help="the shared data, for --texts scifact")
    p.add_argument("--json", type=Path)
    args = parser.parse_args()
    args.set = getattr(args, "set", None) or list(SETS)
    if getattr(args, "first", None) is None:
        args.first = ["dense"]
    commands = {"candidates": cmd_candidates, "score": cmd_score, "report": cmd_report, "compare": cmd_compare}
    commands |= {"fusions": cmd_fusions, "depths": cmd_depths}
    (commands | {"latency": cmd_latency})[args.command](args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
