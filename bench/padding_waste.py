"""How much padding an ingest's batches carry, batch by batch as today and with one sort over the whole ingest.

    python bench/padding_waste.py --folder /tmp/kernel-docs-500                 # budgets 256 512 1024 2048
    python bench/padding_waste.py --folder DIR --budgets 512 --ingest-batch 256

An ingest embeds its chunks in groups of ``--ingest-batch`` (``IngestConfig.batch_size``, 256): each group is
sorted by length and cut into forward passes of at most ``budget`` padded decoder tokens
(:func:`c2v_rag.encode.batching.plan_batches`, as the encode loop cuts them). A sort over the whole ingest would
put chunks of nearer lengths together, at the price of embedding nothing until every document is read and
chunked (no early searchable point, all chunk texts in memory). This counts, for both, the padded tokens per real
token: the share of a forward pass's rows that are padding, which is the most the global sort could save, since
a CPU forward pass costs about the same per token at any batch size. Tokenizing only: no model runs.

The chunks are the ingest's own (its reader and chunker, the default preset's 200/20 tokens); a chunk's decoder
length is its text's tokens plus the Contextual token and EOS (no instruction: documents have none).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from common import recorded_command

from c2v_rag.core.config import read_config
from c2v_rag.documents.chunking import TokenChunker
from c2v_rag.documents.documents import iter_documents
from c2v_rag.encode.batching import plan_batches
from c2v_rag.hub.presets import resolve_variant_path
from c2v_rag.hub.sources import load_tokenizer, resolve_reference

TEMPLATE_TOKENS = 2  # the Contextual token and EOS around a document's text


def padded_per_real(lengths: list[int], groups: list[list[int]], budget: int) -> tuple[float, int]:
    """(padded tokens / real tokens, forward passes) when each group is planned on its own."""
    padded = passes = 0
    for group in groups:
        sizes = [lengths[i] for i in group]
        for batch in plan_batches(sizes, max_tokens=budget, max_batch_size=len(sizes) or 1):
            padded += len(batch) * max(sizes[i] for i in batch)
            passes += 1
    return padded / sum(lengths), passes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folder", type=Path, required=True)
    parser.add_argument("--budgets", type=int, nargs="+", default=[256, 512, 1024, 2048])
    parser.add_argument("--ingest-batch", type=int, default=256, help="chunks per ingest batch (IngestConfig)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    chunker = TokenChunker.for_variant(None, 200, 20)
    config = read_config(resolve_variant_path(None))
    tokenizer = load_tokenizer(resolve_reference(config.decoder, config.decoder_revision))
    texts = [c.text for doc in iter_documents(args.folder) for c in chunker.chunk(doc.text)]
    lengths = [len(ids) + TEMPLATE_TOKENS for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]
    n = len(lengths)
    windows = [list(range(s, min(s + args.ingest_batch, n))) for s in range(0, n, args.ingest_batch)]
    rows = []
    for budget in args.budgets:
        per_batch, passes = padded_per_real(lengths, windows, budget)
        whole, passes_whole = padded_per_real(lengths, [list(range(n))], budget)
        rows.append(
            {
                "budget": budget,
                "padded_per_real_batch_by_batch": round(per_batch, 4),
                "padded_per_real_global_sort": round(whole, 4),
                "forward_passes": [passes, passes_whole],
                "most_the_global_sort_saves": round(1 - whole / per_batch, 4),
            }
        )
        print(
            f"budget {budget:5d}: padded/real {per_batch:.4f} batch by batch ({passes} passes), {whole:.4f} "
            f"sorted over the ingest ({passes_whole}); at most {100 * (1 - whole / per_batch):.2f}% of the "
            "forward work saved"
        )
    report = {
        "command": recorded_command("bench/padding_waste.py", sys.argv[1:]),
        "chunks": n,
        "real_tokens": sum(lengths),
        "mean_length": round(sum(lengths) / n, 1),
        "ingest_batch": args.ingest_batch,
        "rows": rows,
    }
    print(f"{n} chunks, {sum(lengths)} real decoder tokens (mean {sum(lengths) / n:.1f})")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
