"""How many of adapt's held-out gate queries on the man pages are generated questions and headings?

The man-page runs (bench/results/adapt/README.md) kept neither their pairs nor their held-out scores by source. This
re-makes their held-out set with adapt's default pair settings (the same chunks are held out: the choice is seeded)
and counts it by source. The LLM writes only for the held-out targets; the training targets do not change the
held-out set. The bundled SmolLM2 decodes greedily, but on another CPU (float32 here, bf16 there) a question can
come out differently, so the counts are a re-make, not the record.

    python bench/adapt/manpages_heldout.py --json bench/results/adapt/manpages_heldout_remade.json
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", default=str(Path.home() / ".cache/c2v_rag/ood/manpages/docs"))
    parser.add_argument("--start", default="c2v-smollm2-135m-minilm")
    parser.add_argument("--cache", default=str(REPO / "runs" / "manpages-heldout" / "generated.jsonl"))
    parser.add_argument("--json", default=None)
    args = parser.parse_args()

    from c2v_rag.documents.chunking import TokenChunker
    from c2v_rag.training.adapt.run import cpu_facts
    from c2v_rag.training.pseudo import make
    from c2v_rag.training.pseudo.config import PseudoPairsConfig
    from c2v_rag.training.pseudo.filters import FilterReport

    config = PseudoPairsConfig()
    clock = time.perf_counter()
    chunker = TokenChunker.for_variant(args.start, config.chunk_size, config.chunk_overlap)
    chunks = make.read_corpus(args.docs, chunker, show_progress=False)
    heldout = make.choose_heldout(chunks, config)
    candidates = make.cheap_pairs(chunks, config)
    targets = [c for c in make.generation_targets(chunks, heldout, config) if c.id in heldout]
    candidates += make.generated_pairs(targets, config, cache=Path(args.cache), show_progress=True)
    kept = make.filter_pairs(candidates, chunks, config, FilterReport())
    _, gate = make.split_pairs(kept, heldout, config)
    result = {
        "command": "python " + " ".join(sys.argv),
        "chunks": len(chunks),
        "heldout_chunks": len(heldout),
        "heldout_pairs": len(gate),
        "heldout_by_source": dict(collections.Counter(p.source for p in gate)),
        "generation_targets_heldout": len(targets),
        "generated_heldout_written": sum(1 for c in candidates if c.source == "generated"),
        "minutes": round((time.perf_counter() - clock) / 60, 1),
        "cpu": cpu_facts(),
    }
    print(json.dumps(result, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
