"""How much of the preset's quality needs the decoder to read a whole chunk? The decoder capped at L tokens.

The decoder's work grows with the tokens it reads, and it is 80% of an int8 ingest's CPU time (docs/performance.md,
the roofline). The encoder (MiniLM, 80% of the cosine) and through it the Contextual token still read the whole
chunk; only the decoder's own view of the text is cut: ``encode_documents(..., max_length=L)`` keeps the first
L decoder tokens of each input (template, Contextual token and EOS included), as ``model.max_seq_length = L`` does
for an ingest. No retraining.

This re-embeds the chunks of the preset's int8 collections that ``bench/ood/score.py`` ingested (their stored
texts, leads included) at each cap, in float32, ranks documents by their best chunk as score.py does, and reports
the share of the decoder's tokens each cap keeps. The shipped row ranks the stored (int8, uncapped) vectors.

    taskset -c 0 env OMP_NUM_THREADS=1 python experiments/decoder_text_cap.py --lengths 64 96 \\
        --bench manpages jargon --json decoder_text_cap.json

(After ``python bench/ood/score.py --model default --task default --quantize int8 --truncate-dim full``.)

``--data DIR`` scores SciFact dev instead (scifact-dev-1k, as ``c2v-rag eval`` does): its abstracts capped, its
claims not, as an ingest-time cap would leave queries, at each length and uncapped at ``c2v-rag eval``'s
``--max-length 256`` (the model card's). The other dev sets are symmetric tasks (every input is read as a query),
which a cap on the documents an ingest stores does not touch.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1] / "bench" / "ood")]
import decoder_depth  # noqa: E402  (experiments/: the stored chunks and the ranking, shared with the depth study)
import metrics  # noqa: E402  (bench/ood)
import score  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[64, 96], help="decoder tokens per input")
    parser.add_argument("--bench", nargs="*", default=["manpages", "jargon"])
    parser.add_argument("--docs", type=Path, help="the folder bench/ood/build.py wrote (default: its default)")
    parser.add_argument("--cache", type=Path, help="bench/ood/score.py's --cache (default: its default)")
    parser.add_argument("--data", type=Path, help="the shared data folder: score SciFact dev instead")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    defaults = score.parse_args([])
    args.docs, args.cache = args.docs or defaults.docs, args.cache or defaults.cache

    from c2v_rag import DEFAULT_PRESET, Causal2Vec

    model = Causal2Vec.from_pretrained(DEFAULT_PRESET)
    if args.data is not None:
        scifact_dev(model, args)
        return
    benches = {name: decoder_depth.chunks_of(name, args) for name in args.bench}
    results: dict = {"lengths": {}, "max_length": model.max_seq_length}

    def save() -> None:  # after each stage, so that a stopped run keeps what it measured
        if args.json:
            args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")

    # decoder tokens each chunk takes uncapped (the document template, the Contextual token, the text, EOS)
    tokens = {}
    for name, (corpus, (doc_ids, texts, stored)) in benches.items():
        pieces, _ = model.prepare(texts, None)
        tokens[name] = np.array([len(p.head) + model.config.num_contextual_tokens + len(p.tail) for p in pieces])
        ranked = score.prefix_rankings((doc_ids, texts, stored), corpus, model, model.embedding_dim, None, None)
        row = {**metrics.evaluate(ranked, corpus.bench.qrels), "chunks": len(texts)}
        row["decoder_tokens_mean"] = float(tokens[name].mean())
        results.setdefault("stored_int8", {})[name] = row
        print("stored", name, row, flush=True)
    save()
    for length in args.lengths:
        row = {}
        for name, (corpus, (doc_ids, texts, _)) in benches.items():
            started = time.process_time()
            vectors = model.encode_documents(texts, normalize_embeddings=True, max_length=length)
            ranked = score.prefix_rankings((doc_ids, texts, vectors), corpus, model, model.embedding_dim, None, None)
            kept = np.minimum(tokens[name], length).sum() / tokens[name].sum()
            row[name] = {
                **metrics.evaluate(ranked, corpus.bench.qrels),
                "decoder_tokens_kept": round(float(kept), 4),
                "chunks_cut": round(float((tokens[name] > length).mean()), 4),
                "cpu_s": round(time.process_time() - started),
            }
            print(length, name, row[name], flush=True)
        results["lengths"][length] = row
        save()


class CappedDocuments:
    """The model, with the documents it encodes read by the decoder up to ``length`` tokens (queries as they are)."""

    def __init__(self, model, length: int | None) -> None:
        self.model, self.length = model, length

    def encode_documents(self, texts, **kwargs):
        return self.model.encode_documents(texts, **kwargs, **({"max_length": self.length} if self.length else {}))

    def __getattr__(self, name: str):
        return getattr(self.model, name)


def scifact_dev(model, args: argparse.Namespace) -> None:
    from c2v_rag.evaluation import load_suite, run_suite

    suite = load_suite(["scifact-dev-1k"], args.data)
    model.max_seq_length = 256  # as the model card's dev scores (c2v-rag eval --max-length 256)
    results: dict = {}
    for length in [None, *args.lengths]:
        started = time.process_time()
        row = run_suite(CappedDocuments(model, length), suite)["scifact-dev-1k"]
        row["cpu_s"] = round(time.process_time() - started)
        results[str(length or 256)] = row
        print(length or 256, row, flush=True)
        if args.json:
            args.json.write_text(json.dumps({"scifact-dev-1k": results}, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
