"""How much of the preset's quality needs the whole decoder? The decoder cut to its first N layers, no retraining.

The decoder is 80-87% of an ingest's CPU time (docs/performance.md, the roofline), so a decoder of N of its 30
layers would cost about N/30 of it. This scores the preset with ``decoder.layers[:N]`` (the final norm kept) on
the out-of-domain benchmarks, re-embedding the chunks of the collection ``bench/ood/score.py`` ingested (the
stored texts, leads included, as ingest embeds them) and ranking documents by their best chunk, and optionally on
dev sets as ``c2v-rag eval`` scores them. The shipped model's row ranks the stored (int8) chunk vectors; N = 30
re-embeds them in float32 (a check, and slow: leave it out).

    taskset -c 1 env OMP_NUM_THREADS=1 python experiments/decoder_depth.py --depths 20 15 \\
        --bench manpages jargon --json decoder_depth.json

(After ``python bench/ood/score.py --model default --task default --quantize int8 --truncate-dim full``, whose
collections it reads; float32 throughout.)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "bench" / "ood")]
import metrics  # noqa: E402  (bench/ood)
import score  # noqa: E402


def chunks_of(name: str, args: argparse.Namespace) -> tuple[score.Corpus, tuple[list[str], list[str], np.ndarray]]:
    """The benchmark and the stored chunks (document ids, texts, int8 vectors) of the preset's int8 collection."""
    corpus = score.load_corpus(name, args.docs)
    int8 = score.load_model("default", quantize="int8")
    folder = score.collection_dir(args.cache, corpus, int8, "default", None)
    if not (folder / "complete.json").exists():
        raise SystemExit(f"error: no ingested collection at {folder}: run bench/ood/score.py first (see the doc)")
    return corpus, score.stored_points(folder)


def rankings(model, corpus: score.Corpus, doc_ids: list[str], texts: list[str]) -> tuple[dict, np.ndarray]:
    """Each question's top documents with the chunks re-embedded by ``model`` (ranked as score.py ranks), and the
    chunk vectors."""
    docs = model.encode_documents(texts, normalize_embeddings=True, show_progress_bar=True)
    return score.prefix_rankings((doc_ids, texts, docs), corpus, model, model.embedding_dim, None, None), docs


def block_influence(model, texts: list[str]) -> list[float]:
    """ShortGPT's block influence of each decoder layer (Men et al., 2024): 1 - the mean cosine between the
    hidden state a layer reads and the one it writes, over every token of ``texts`` (here the int8 calibration
    documents shipped with the package, none of the benchmarks'). The layers that change the state least are the
    ones a pruned decoder can best do without."""
    import torch

    decoder = model.decoder
    influence = [0.0] * len(decoder.layers)
    with torch.no_grad():
        for text in texts:
            ids = torch.tensor([model.fast_tokenizer(text, truncation=True, max_length=256)["input_ids"]])
            x = decoder.get_input_embeddings()(ids)  # [1, L, d]
            cos, sin = decoder.rotary(x, torch.arange(ids.shape[1])[None])
            for i, layer in enumerate(decoder.layers):
                y = layer(x, cos, sin, None)  # one text, no padding: causal SDPA
                influence[i] += float(1 - torch.nn.functional.cosine_similarity(x[0], y[0], dim=-1).mean()) / len(texts)
                x = y
    return influence


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--depths", type=int, nargs="*", default=[20, 15])
    parser.add_argument("--bench", nargs="*", default=["manpages", "jargon"])
    parser.add_argument("--drop", type=int, default=0, help="also drop this many layers of least block influence")
    parser.add_argument("--prefixes", type=int, nargs="*", default=[384, 960], help="trained prefix sizes to score")
    parser.add_argument("--docs", type=Path, help="the folder bench/ood/build.py wrote (default: its default)")
    parser.add_argument("--cache", type=Path, help="bench/ood/score.py's --cache (default: its default)")
    parser.add_argument("--data", type=Path, help="the shared data folder: also score the dev sets")
    parser.add_argument("--sets", nargs="*", default=["stsb-dev", "scifact-dev-1k", "emotion-val", "banking77-dev"])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    defaults = score.parse_args([])  # score.py's own defaults for the folders
    args.docs, args.cache = args.docs or defaults.docs, args.cache or defaults.cache

    from c2v_rag import DEFAULT_PRESET, Causal2Vec

    model = Causal2Vec.from_pretrained(DEFAULT_PRESET)
    layers = model.decoder.layers
    benches = {name: chunks_of(name, args) for name in args.bench}
    results: dict = {"depths": {}, "decoder_layers": len(layers)}

    def save() -> None:  # after each stage, so that a stopped run keeps what it measured
        if args.json:
            args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")

    # the shipped model's row from its stored (int8) chunk vectors, with float queries: int8 and float vectors
    # of one model search each other within 0.0012 nDCG@10 (docs/performance.md, "Mixing float and int8")
    row = {}
    for name, (corpus, points) in benches.items():
        ranked = score.prefix_rankings(points, corpus, model, model.embedding_dim, None, None)
        row[name] = {**metrics.evaluate(ranked, corpus.bench.qrels), "chunks": len(points[0])}
        # the shorter trained prefixes from the same vectors: 384 is MiniLM's part alone (no decoder), 960 adds h_EOS
        for dim in args.prefixes:
            prefix = score.prefix_rankings(points, corpus, model, dim, None, None)
            row[name][f"ndcg@10 at {dim}"] = metrics.evaluate(prefix, corpus.bench.qrels)["ndcg@10"]
        print("stored", name, row[name], flush=True)
    results["stored_int8"] = row
    save()
    if args.drop:
        from c2v_rag.cpu.int8 import calibration_texts

        influence = block_influence(model, list(calibration_texts()[0]))
        # never the first or the last layer (ShortGPT keeps them too: they map into and out of the state space)
        dropped = sorted(sorted(range(1, len(layers) - 1), key=lambda i: influence[i])[: args.drop])
        results["block_influence"] = influence
        results["dropped"] = dropped
        print("block influence", [round(v, 4) for v in influence], "dropped", dropped, flush=True)
    settings = [(f"drop {args.drop}", [i for i in range(len(layers)) if i not in dropped])] if args.drop else []
    settings += [(str(depth), list(range(depth))) for depth in args.depths]
    for depth, kept in settings:
        model.decoder.layers = type(layers)([layers[i] for i in kept])
        row = {}
        for name, (corpus, (doc_ids, texts, stored)) in benches.items():
            started = time.process_time()
            ranked, vectors = rankings(model, corpus, doc_ids, texts)
            row[name] = {**metrics.evaluate(ranked, corpus.bench.qrels), "cpu_s": round(time.process_time() - started)}
            if len(kept) == len(layers):  # the shipped model: float against the stored int8 vectors
                row[name]["cosine_to_stored_min"] = float((vectors * stored).sum(1).min())
            print(depth, name, row[name], flush=True)
        if args.data is not None:
            from c2v_rag.evaluation import load_suite, run_suite
            from c2v_rag.evaluation.suites import SharedDocuments

            model.max_seq_length = 256  # as the model card's dev scores (c2v-rag eval --max-length 256)
            row["dev"] = run_suite(SharedDocuments(model), load_suite(args.sets, args.data))
            model.max_seq_length = model.config.max_length
            print(depth, "dev", row["dev"], flush=True)
        results["depths"][depth] = row
        save()


if __name__ == "__main__":
    main()
