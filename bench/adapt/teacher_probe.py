"""Would the decoder's own query likelihood teach adapt's student anything? A probe before building it.

A teacher for adapt would score each training pair and its mined negative with the bundled
SmolLM2-135M-Instruct's ``log P(query | passage)`` (the generation prompt; mean per query token) and the student
would learn the teacher's margins (GPL's MarginMSE). That pays only where the teacher orders a (query, positive,
negative) triple better than the student already does. This script measures exactly that, on triples of three
kinds:

- ``scifact-dev``: SciFact dev claims (real labels), their judged abstract against BM25's best-ranked other one;
- ``scifact-train-mined``: a sample of adapt's SciFact training pairs with the negative the start mined for them;
- ``gate-heldout`` (``--pairs-dir``): an adapt run's held-out pseudo-queries, their chunk against BM25's best other.

    python bench/adapt/teacher_probe.py --start runs/start-noscifact --eval-dim 384 \\
        --pairs-dir runs/adapt-man/pairs --json bench/results/adapt/teacher_probe.json

It prints, per kind: the share of triples each of student and teacher orders right, how often the teacher is right
where the student is wrong (and the reverse), and the accuracy of the student's margin plus the teacher's at the
weight that does best (an upper bound for what distillation could add).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def scifact_dev_triples(data_root: Path) -> list[tuple[str, str, str]]:
    from c2v_rag.evaluation.datasets import scifact_dev
    from c2v_rag.training.bm25 import bm25_rankings

    data = scifact_dev(data_root)
    qids = data.judged_query_ids
    ids = data.doc_ids
    ranked = bm25_rankings([data.queries[q] for q in qids], [data.corpus[d] for d in ids], 20)
    triples = []
    for qid, row in zip(qids, ranked):
        gold = sorted(data.qrels[qid])[0]
        negative = next(ids[j] for j in row if ids[j] not in data.qrels[qid])
        triples.append((data.queries[qid], data.corpus[gold], data.corpus[negative]))
    return triples


def mined_triples(mined: Path, n: int, seed: int) -> list[tuple[str, str, str]]:
    rows = [json.loads(line) for line in mined.open(encoding="utf-8")]
    rows = [r for r in rows if r["negatives"]]
    return [(r["query"], r["positive"], r["negatives"][0]) for r in random.Random(seed).sample(rows, min(n, len(rows)))]


def gate_triples(pairs_dir: Path) -> list[tuple[str, str, str]]:
    from c2v_rag.training.bm25 import bm25_rankings
    from c2v_rag.training.pseudo.beir_cache import read_pairs

    pairs = read_pairs(pairs_dir)
    texts = {c.id: c.text for c in pairs.chunks}
    ids = list(texts)
    ranked = bm25_rankings([p.query for p in pairs.heldout], [texts[i] for i in ids], 5)
    triples = []
    for pair, row in zip(pairs.heldout, ranked):
        negative = next(ids[j] for j in row if ids[j] != pair.chunk_id)
        triples.append((pair.query, texts[pair.chunk_id], texts[negative]))
    return triples


def student_margins(model, triples, task: str | None, eval_dim: int | None) -> np.ndarray:
    kwargs = dict(batch_size=32, normalize_embeddings=True, show_progress_bar=True, truncate_dim=eval_dim)
    q = model.encode_queries([t[0] for t in triples], task=task, **kwargs)
    pos = model.encode_documents([t[1] for t in triples], task=task, **kwargs)
    neg = model.encode_documents([t[2] for t in triples], task=task, **kwargs)
    return (q * pos).sum(1) - (q * neg).sum(1)


def teacher_margins(teacher, triples) -> np.ndarray:
    from tqdm.auto import tqdm

    pairs = [(q, p) for q, p, _ in triples] + [(q, n) for q, _, n in triples]
    with tqdm(total=len(pairs), desc="Teacher log P(query | passage)", unit="pair") as bar:
        scores = teacher.query_logprobs(pairs, progress=bar.update)
    scores = np.array([s if s is not None else np.nan for s in scores])
    return scores[: len(triples)] - scores[len(triples) :]


def compare(student: np.ndarray, teacher: np.ndarray) -> dict[str, float]:
    s_right, t_right = student > 0, teacher > 0
    # Margins on their own scales: the teacher's in nats per token, the student's in cosine. Standardized, then
    # the best mixing weight over a grid, as an upper bound of what the teacher's ordering could add.
    zs, zt = student / student.std(), teacher / teacher.std()
    best = max(((((1 - w) * zs + w * zt) > 0).mean(), w) for w in np.linspace(0, 1, 21))
    return {
        "triples": int(len(student)),
        "student_right": float(s_right.mean()),
        "teacher_right": float(t_right.mean()),
        "teacher_right_where_student_wrong": int((t_right & ~s_right).sum()),
        "student_right_where_teacher_wrong": int((s_right & ~t_right).sum()),
        "student_wrong": int((~s_right).sum()),
        "best_mix_right": float(best[0]),
        "best_mix_teacher_weight": float(best[1]),
        "margin_correlation": float(np.corrcoef(student, teacher)[0, 1]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--start", default="runs/start-noscifact", help="the student: adapt's start variant")
    parser.add_argument("--eval-dim", default="384", help="'full' or a prefix size")
    parser.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    parser.add_argument("--mined", default=str(REPO / "runs" / "adapt-scifact" / "mined-start-noscifact-default.jsonl"))
    parser.add_argument("--train-sample", type=int, default=200)
    parser.add_argument("--pairs-dir", default=None, help="an adapt run's pairs folder: its held-out queries")
    parser.add_argument("--limit", type=int, default=None, help="at most this many triples of each kind (a smoke run)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()

    from c2v_rag import Causal2Vec
    from c2v_rag.training.pseudo.local_lm import LocalLMGenerator

    kinds = {"scifact-dev": scifact_dev_triples(Path(args.data))}
    if Path(args.mined).is_file():
        kinds["scifact-train-mined"] = mined_triples(Path(args.mined), args.train_sample, seed=0)
    if args.pairs_dir:
        kinds["gate-heldout"] = gate_triples(Path(args.pairs_dir))
    kinds = {kind: triples[: args.limit] for kind, triples in kinds.items()}
    model = Causal2Vec.from_pretrained(args.start)
    eval_dim = None if args.eval_dim == "full" else int(args.eval_dim)
    teacher = LocalLMGenerator(batch_size=8)
    report: dict = {"start": args.start, "eval_dim": args.eval_dim, "teacher": teacher.describe(), "kinds": {}}
    for kind, triples in kinds.items():
        clock = time.perf_counter()
        student = student_margins(model, triples, model.config.default_task, eval_dim)
        t_clock = time.perf_counter()
        teacher_m = teacher_margins(teacher, triples)
        row = compare(student, teacher_m)
        row["teacher_seconds_per_pair"] = (time.perf_counter() - t_clock) / (2 * len(triples))
        row["seconds"] = time.perf_counter() - clock
        report["kinds"][kind] = row
        print(f"{kind}: " + ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
