"""Would adapt's gate have kept the variants bench/adapt/scifact.py trained? Their gate scores against SciFact dev.

scifact.py scores trained variants on SciFact dev claims and runs no gate. This script rebuilds the gate's data
from the condition's pairs folder (the held-out pseudo-queries among 500 chunks, as adapt does) and scores the
start and each trained variant on it, by query source, at the size given; it prints them beside the SciFact dev
nDCG@10 each run recorded, so a gate that keeps variants which lose on real claims shows.

    python bench/adapt/gate_check.py --start runs/start-noscifact --eval-dim 384 \\
        --json bench/results/adapt/gate_check_start-noscifact.json

The gate proper scores the whole vector and STS-B dev too; ``--eval-dim full`` does the former (slow on a CPU).
Each row keeps its held-out queries' nDCG@10 one by one (``per_query``) and the new gate's verdict against the
start (``decision``, STS-B left out), so the rows can be replayed under other gate settings.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--start", default="runs/start-noscifact")
    parser.add_argument("--eval-dim", default="384")
    parser.add_argument("--runs", default=str(REPO / "runs" / "adapt-scifact"))
    parser.add_argument("--corpus-size", type=int, default=500)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()

    from c2v_rag import Causal2Vec
    from c2v_rag.evaluation.evaluators import retrieval_run
    from c2v_rag.evaluation.metrics import evaluate_run, ndcg_at_k
    from c2v_rag.rag.options import ModelOptions
    from c2v_rag.training.adapt.config import AdaptGate
    from c2v_rag.training.adapt.decision import decide
    from c2v_rag.training.adapt.gate import GateScores, gate_data, query_sources, scores_by_source
    from c2v_rag.training.pseudo.beir_cache import read_pairs

    runs, name = Path(args.runs), Path(args.start).name
    eval_dim = None if args.eval_dim == "full" else int(args.eval_dim)
    results = REPO / "bench" / "results" / "adapt" / "scifact" / f"{name}_dim{args.eval_dim}"
    task = ModelOptions(model=args.start).resolve().config.default_task
    models = {"start": args.start}
    for candidate in sorted(runs.glob(f"{name}-*-seed*/candidate")):
        if (candidate / "modules.json").is_file():
            models[candidate.parent.name.removeprefix(f"{name}-")] = str(candidate)
    report: dict = {"start": args.start, "eval_dim": args.eval_dim, "rows": {}}
    data_by_condition: dict = {}
    for label, path in models.items():
        condition, seed = label.rsplit("-seed", 1) if label != "start" else ("start", "0")
        pairs_condition = condition if condition in ("crops", "titles", "generated") else "default"
        if pairs_condition not in data_by_condition:
            pairs = read_pairs(runs / f"pairs-{pairs_condition}")
            data_by_condition[pairs_condition] = (gate_data(pairs, corpus_size=args.corpus_size, task=task), pairs)
        data, pairs = data_by_condition[pairs_condition]
        model = Causal2Vec.from_pretrained(path)
        run = retrieval_run(model, data, batch_size=32, show_progress_bar=True, truncate_dim=eval_dim)
        qrels = {q: data.qrels[q] for q in data.judged_query_ids}
        row = {"gate_ndcg@10": evaluate_run(run, qrels)["ndcg@10"]}
        sources = query_sources(pairs)
        for source, scores in scores_by_source(run, qrels, sources).items():
            row[f"gate_ndcg@10 {source} ({int(scores['queries'])})"] = scores["ndcg@10"]
        row["per_query"] = {q: ndcg_at_k(list(run.get(q, ())), rels, 10) for q, rels in qrels.items()}
        # The start is scored on the default condition's held-out set; other conditions hold out other queries.
        if label != "start" and pairs_condition == "default" and "start" in report["rows"]:
            start_scores = GateScores(0, 0, 0, per_query=report["rows"]["start"]["per_query"])
            verdict = decide(start_scores, GateScores(0, 0, 0, per_query=row["per_query"]), AdaptGate(), sources)
            row["decision"] = {"kept": verdict.kept, "reasons": verdict.reasons[:-1], **verdict.evidence}
        recorded = results / f"{condition}_seed{seed}.json"
        if recorded.is_file():
            row["scifact_dev_ndcg@10"] = json.loads(recorded.read_text())["ndcg@10"]
        report["rows"][label] = row
        print(label, " ".join(f"{k} {v:.4f}" for k, v in row.items() if isinstance(v, float)), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
