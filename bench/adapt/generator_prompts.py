"""How many of the local generator's questions survive adapt's filters, per prompt, on a few corpora.

``c2v-rag adapt`` asks SmolLM2-135M-Instruct for one search question per chunk (``generation.PROMPT``); the
filters then drop meta text ("What's your question?"), copies, short ones and questions whose chunk BM25 cannot
find. The gate needs 30 held-out generated questions and headings to judge, so the share that survives decides
whether a small folder can be judged at all. This draws the same chunks from each corpus (as adapt chunks them:
the start model's tokenizer, adapt's chunk size, chunks of 25 words or more) and generates for them under each
prompt variant, the same generator otherwise, then applies adapt's filters (the round trip searches every chunk of
the corpus). Prints, per corpus and variant: chunks, questions written, kept, dropped by reason, and a few kept
questions to read.

Corpora are folders or files as adapt takes them; ``NAME=PATH`` names one (``--text-suffix`` applies to all):

    taskset -c 1 env OMP_NUM_THREADS=1 python bench/adapt/generator_prompts.py \\
        --corpus debian=/tmp/adapt-docs --corpus scifact=../shared/data/scifact/corpus.jsonl --corpus guide=docs \\
        --text-suffix '' --chunks 60 --json bench/results/adapt/generator_prompts_avx512bf16.json

Not the out-of-domain benchmarks' sources (the man pages, the Jargon File): the prompt is a choice they must not
have made.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

# The variants: the shipped prompt (its reply begun with local_lm.REPLY_START), the same without that beginning, the
# same task after one worked example, and the task framed as finding the passage. Each keeps "{passage}" first and
# the instruction last (small models follow what they read last).
VARIANTS = {
    "shipped": None,  # generation.PROMPT as it is
    "unbegun": None,  # the same, the model left to begin its reply
    "example": (
        "Here is a text:\n\nThe tide rises and falls twice a day because the Moon's gravity pulls on the oceans. "
        "When the Sun and the Moon line up, the tides are higher than usual.\n\n"
        "A search question whose answer is in this text: why are some tides higher than others?\n\n"
        "Here is a text:\n\n{passage}\n\n"
        "Write ONE short search question that a user would type into a search engine, whose answer is in this "
        "text. Use your own words; do not copy exact phrases from the text. Reply with the question only."
    ),
    "find": (
        "{passage}\n\n"
        "Someone wants to find the text above with a search engine. What short question would they type? "
        "Reply with that one question, ending with a question mark, and nothing else."
    ),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", action="append", required=True, help="NAME=PATH (repeatable)")
    parser.add_argument("--text-suffix", action="append", default=[], help="as adapt's (repeatable)")
    parser.add_argument("--chunks", type=int, default=60, help="chunks drawn from each corpus")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    import c2v_rag.training.pseudo.generation as generation
    import c2v_rag.training.pseudo.local_lm as local_lm
    from c2v_rag.documents.chunking import TokenChunker
    from c2v_rag.documents.formats import checked_text_suffixes
    from c2v_rag.documents.reading import ReadOptions
    from c2v_rag.training.adapt.config import DEFAULT_START
    from c2v_rag.training.pseudo.chunks import iter_chunks
    from c2v_rag.training.pseudo.config import PseudoPairsConfig
    from c2v_rag.training.pseudo.filters import FilterReport
    from c2v_rag.training.pseudo.make import filter_pairs, read_documents
    from c2v_rag.training.pseudo.pairs import PseudoPair

    config = PseudoPairsConfig()
    chunker = TokenChunker.for_variant(DEFAULT_START, config.chunk_size, config.chunk_overlap)
    read = ReadOptions(text_suffixes=tuple(checked_text_suffixes(args.text_suffix)))
    shipped = generation.PROMPT
    rows = []
    for spec in args.corpus:
        name, _, path = spec.partition("=")
        documents = read_documents(path, desc=f"Reading {name}", options=read)
        chunks = list(iter_chunks(documents, chunker))
        usable = [c for c in chunks if len(c.text.split()) >= 25]
        targets = random.Random(args.seed).sample(usable, min(args.chunks, len(usable)))
        for variant in args.variants:
            prompt = VARIANTS[variant] or shipped
            generation.PROMPT = local_lm.PROMPT = prompt  # chat_messages and describe() read the module's
            begun = {} if variant == "shipped" else {"reply_start": ""}
            generator = generation.build_generator(kind="local", batch_size=config.generator_batch_size, **begun)
            started = time.perf_counter()
            results = generator.generate([c.text for c in targets])
            seconds = time.perf_counter() - started
            candidates = [
                PseudoPair(r.text, c.id, "generated", c.text, r.mean_logprob)
                for c, r in zip(targets, results)
                if r is not None
            ]
            report = FilterReport()
            kept = filter_pairs(candidates, chunks, config, report)
            dropped = report.as_dict().get("generated", {}).get("dropped", {})
            replies = Counter(p.query for p in candidates)
            row = {
                "corpus": name,
                "chunks_in_corpus": len(chunks),
                "variant": variant,
                "targets": len(targets),
                "questions": len(candidates),
                "kept": len(kept),
                "dropped": dropped,
                "most_repeated": replies.most_common(3),
                "kept_examples": [p.query for p in kept[:6]],
                "seconds": round(seconds, 1),
            }
            rows.append(row)
            print(
                f"{name:<8} {variant:<8} {len(targets)} chunks: {len(candidates)} questions, {len(kept)} kept; "
                f"dropped {dict(dropped)}; {seconds:.0f} s"
            )
            for query in row["kept_examples"][:3]:
                print(f"    {query}")
    generation.PROMPT = local_lm.PROMPT = shipped
    if args.json:
        command = "python bench/adapt/generator_prompts.py " + " ".join(sys.argv[1:])
        args.json.write_text(json.dumps({"command": command, "rows": rows}, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
