"""adapt on SciFact: the corpus alone in, SciFact dev claims (the 20% of train claims held out, 162) scored against
the full 5,183-abstract corpus. Conditions share the pseudo-pairs made once (and the LLM questions, cached).

    python bench/adapt/scifact.py run --condition default --seed 0     # one trained condition
    python bench/adapt/scifact.py run --condition start                # the start, untrained
    python bench/adapt/scifact.py run --condition bm25
    python bench/adapt/scifact.py summary                              # the table, paired bootstrap vs start

Conditions: default (crops + titles + generated), crops, titles, generated, general (the same steps on the
general data only). ``--eval-dim 384`` scores the encoder's part of the vector (what the default adapt trains;
the whole vector of a start read at encoder_share 1.0); ``--eval-dim full`` the whole vector.
Results: bench/results/adapt/scifact/<start>/<condition>_seed<k>.json with per-claim nDCG@10.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

CONDITIONS = ("start", "bm25", "default", "crops", "titles", "generated", "general")


def pairs_config(condition: str, max_generated: int):
    from c2v_rag.training.pseudo.config import PseudoPairsConfig

    sources = {
        "default": dict(crops_per_chunk=1, headings=True, generator="local"),
        "general": dict(crops_per_chunk=1, headings=True, generator="local"),
        "crops": dict(crops_per_chunk=1, headings=False, generator="none"),
        "titles": dict(crops_per_chunk=0, headings=True, generator="none"),
        "generated": dict(crops_per_chunk=0, headings=False, generator="local"),
    }[condition]
    return PseudoPairsConfig(max_generated=max_generated, **sources)


def subset_of_default(default_mined: Path, train: list, target: Path) -> str | None:
    """Write ``target``: the default condition's mined examples for exactly the pairs of ``train`` (a subset of the
    default's: the same chunks are held out whatever the sources). Mining depends on the query and the start model
    only, so this is the mining of ``train`` alone, without its cost; None (mine as usual) when a pair is missing."""
    if not default_mined.is_file():
        return None
    wanted = {(p.query, p.chunk_id) for p in train}
    rows = []
    with default_mined.open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            if (row["query"], row["positive_key"]) in wanted:
                rows.append(line)
    if len(rows) != len(wanted):
        print(f"{len(wanted) - len(rows)} of {len(wanted)} pairs are not in {default_mined.name}: mining them all")
        return None
    target.write_text("".join(rows), encoding="utf-8")
    return default_mined.name


def per_query_ndcg(model, data, eval_dim: int | None) -> dict[str, float]:
    import torch

    from c2v_rag.evaluation.metrics import ndcg_at_k

    qids = data.judged_query_ids
    kwargs = dict(batch_size=32, normalize_embeddings=True, show_progress_bar=True, truncate_dim=eval_dim)
    q = torch.from_numpy(model.encode_queries([data.queries[i] for i in qids], task=data.task, **kwargs))
    d = torch.from_numpy(model.encode_documents([data.corpus[i] for i in data.doc_ids], task=data.task, **kwargs))
    top = torch.topk(q.float() @ d.float().T, 10, dim=1).indices.numpy()
    return {qid: ndcg_at_k([data.doc_ids[j] for j in row], data.qrels[qid], 10) for qid, row in zip(qids, top)}


def bm25_ndcg(data) -> dict[str, float]:
    from c2v_rag.evaluation.metrics import ndcg_at_k
    from c2v_rag.training.bm25 import bm25_rankings

    qids = data.judged_query_ids
    ranked = bm25_rankings([data.queries[i] for i in qids], [data.corpus[i] for i in data.doc_ids], 10)
    return {qid: ndcg_at_k([data.doc_ids[j] for j in row], data.qrels[qid], 10) for qid, row in zip(qids, ranked)}


def run(args: argparse.Namespace) -> None:
    from c2v_rag import Causal2Vec
    from c2v_rag.documents.chunking import TokenChunker
    from c2v_rag.evaluation.datasets import scifact_dev
    from c2v_rag.rag.options import ModelOptions
    from c2v_rag.training.adapt.config import AdaptConfig, AdaptTraining
    from c2v_rag.training.adapt.general_data import find_general_data
    from c2v_rag.training.adapt.run import train_config
    from c2v_rag.training.pseudo.make import make_pairs
    from c2v_rag.training.trainer import Trainer

    data_root = Path(args.data)
    data = scifact_dev(data_root)
    eval_dim = None if args.eval_dim == "full" else int(args.eval_dim)
    start_name = Path(args.start).name
    results = REPO / "bench" / "results" / "adapt" / "scifact" / f"{start_name}_dim{args.eval_dim}"
    results.mkdir(parents=True, exist_ok=True)
    dropout = "" if args.encoder_attention_dropout is None else f"_attn{args.encoder_attention_dropout:g}"
    target = results / f"{args.condition}{dropout}_seed{args.seed}.json"
    clock = time.perf_counter()
    record = {"condition": args.condition, "seed": args.seed, "start": args.start, "eval_dim": args.eval_dim}
    if args.encoder_attention_dropout is not None:
        record["encoder_attention_dropout"] = args.encoder_attention_dropout
    if args.condition == "bm25":
        scores = bm25_ndcg(data)
    elif args.condition == "start":
        model = Causal2Vec.from_pretrained(args.start)
        if args.encoder_share is not None:
            model.set_readout(encoder_share=args.encoder_share)
        scores = per_query_ndcg(model, data, eval_dim)
    else:
        runs = Path(args.runs)
        corpus = data_root / "scifact" / "corpus.jsonl"
        general = find_general_data(data_root)
        condition = "default" if args.condition == "general" else args.condition
        config = AdaptConfig(
            start=args.start,
            pairs=pairs_config(condition, args.max_generated),
            training=AdaptTraining(
                steps=args.steps, seed=args.seed, encoder_attention_dropout=args.encoder_attention_dropout
            ),
            general_data=str(data_root),
        )
        task = ModelOptions(model=args.start).resolve().config.default_task
        pairs_dir = runs / f"pairs-{condition}"
        chunker = TokenChunker.for_variant(args.start, config.pairs.chunk_size, config.pairs.chunk_overlap)
        pairs = make_pairs(str(corpus), chunker, config.pairs, pairs_dir, generation_cache=runs / "generated.jsonl")
        record["pairs"] = pairs.report
        record["general_share"] = 1.0 if args.condition == "general" else config.training.general_share
        out = runs / f"{start_name}-{args.condition}{dropout}-seed{args.seed}"
        recipe = train_config(config, str(corpus), out, general, task, train_pairs=len(pairs.train))
        # The pairs folder of this condition, shared by its seeds (and the mined negatives with it).
        recipe.datasets[0].pairs_dir = str(pairs_dir)
        if args.condition == "general":
            recipe.datasets = recipe.datasets[1:]
            recipe.mining.method, recipe.mining.datasets = "none", None
            total = sum(d.weight for d in recipe.datasets)
            for d in recipe.datasets:
                d.weight = d.weight / total
        mined = runs / f"mined-{start_name}-{condition}.jsonl"
        if condition != "default" and not mined.is_file():
            record["negatives_from"] = subset_of_default(runs / f"mined-{start_name}-default.jsonl", pairs.train, mined)
        candidate = Path(recipe.output.dir)
        if mined.is_file() and args.condition != "general" and not (candidate / "mined").exists():
            (candidate / "mined").mkdir(parents=True, exist_ok=True)
            shutil.copy2(mined, candidate / "mined" / "corpus.jsonl")
        # The copied negatives (or an earlier run's checkpoints) are this run's own: resume, never refuse them.
        resume = (candidate / "checkpoints").is_dir() or (candidate / "mined").is_dir()
        if not (candidate / "modules.json").is_file():
            trainer = Trainer(recipe)
            trainer.setup(resume=resume)  # mines the negatives, once per start and condition
            if args.condition != "general" and not mined.is_file():
                partial = mined.with_suffix(".partial")  # renamed whole: another condition may be waiting for it
                shutil.copy2(candidate / "mined" / "corpus.jsonl", partial)
                partial.replace(mined)
            trainer.fit()
        record["train_seconds"] = time.perf_counter() - clock
        model = Causal2Vec.from_pretrained(str(candidate))
        scores = per_query_ndcg(model, data, eval_dim)
    record["seconds"] = time.perf_counter() - clock
    record["ndcg@10"] = float(np.mean(list(scores.values())))
    record["per_query"] = scores
    target.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"{args.condition} seed {args.seed}: nDCG@10 {record['ndcg@10']:.4f} ({record['seconds'] / 60:.1f} min)")


def paired_bootstrap(a: dict[str, float], b: dict[str, float], n: int = 10000, seed: int = 0) -> tuple[float, float]:
    """(mean of b - a, one-sided p of b <= a) over the shared queries, by resampling queries."""
    from c2v_rag.evaluation.paired import paired_bootstrap as paired

    keys = sorted(set(a) & set(b))
    result = paired([a[k] for k in keys], [b[k] for k in keys], resamples=n, seed=seed)
    return result.mean, result.p_not_better


def label(record: dict) -> str:
    """The condition, with the share of general batches where a run's differs from the default's."""
    from c2v_rag.training.adapt.config import AdaptTraining

    share = record.get("general_share")
    name = record["condition"]
    if "encoder_attention_dropout" in record:
        name += f" (encoder attention dropout {record['encoder_attention_dropout']:g})"
    if record["condition"] in ("start", "bm25", "general") or share is None:
        return name
    if share == AdaptTraining().general_share:
        return name
    return f"{name} ({share:.0%} general batches)"


def summary(args: argparse.Namespace) -> None:
    root = REPO / "bench" / "results" / "adapt" / "scifact"
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        records = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]
        base = next((r for r in records if r["condition"] == "start"), None)
        print(f"\n{folder.name}")
        print("| condition | seed | nDCG@10 | vs start | p (paired bootstrap, one-sided) |")
        print("|---|---|---|---|---|")
        for r in sorted(records, key=lambda r: (CONDITIONS.index(r["condition"]), label(r), r["seed"])):
            delta, p = paired_bootstrap(base["per_query"], r["per_query"]) if base and r is not base else (0.0, 1.0)
            print(f"| {label(r)} | {r['seed']} | {r['ndcg@10']:.4f} | {delta:+.4f} | {p:.3f} |")
        groups: dict[str, list[dict]] = {}
        for r in records:
            groups.setdefault(label(r), []).append(r)
        for condition, rs in groups.items():
            if len(rs) > 1 and base:
                pooled = {f"{r['seed']}:{k}": v for r in rs for k, v in r["per_query"].items()}
                pooled_base = {f"{r['seed']}:{k}": base["per_query"][k] for r in rs for k in r["per_query"]}
                delta, p = paired_bootstrap(pooled_base, pooled)
                mean = np.mean([r["ndcg@10"] for r in rs])
                print(f"{condition}: {len(rs)} seeds, mean {mean:.4f}, {delta:+.4f} vs start, p {p:.4f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--condition", choices=CONDITIONS, required=True)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--start", default="c2v-smollm2-135m-minilm")
    r.add_argument("--encoder-share", type=float, default=None, help="start condition: read the start at this share")
    r.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    r.add_argument("--runs", default=str(REPO / "runs" / "adapt-scifact"))
    r.add_argument("--steps", type=int, default=150)
    r.add_argument("--max-generated", type=int, default=300)
    r.add_argument(
        "--encoder-attention-dropout", type=float, default=None, help="training: the encoder's attention dropout"
    )
    r.add_argument("--eval-dim", default="384")
    r.set_defaults(func=run)
    s = sub.add_parser("summary")
    s.set_defaults(func=summary)
    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
