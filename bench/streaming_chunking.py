"""A 5 MB Markdown document: time to the first embedded chunk and peak memory, whole-document
splitting (before) next to streamed sections (after), in one run on the same loaded model.

"Before" is what ``TokenChunker.chunk`` did up to this change: ``SentenceSplitter.split_text`` on
the whole text, then the first batch embedded. "After" is ``TokenChunker.iter_chunks``: the
splitter runs one section (>= 64K characters, cut at a paragraph break) at a time. Each is
measured three ways: up to the first chunk, up to the first embedded batch, and through every chunk of the document
(the pipeline keeps only a batch at a time, so the streamed pass drops chunks as it goes; the
whole-document pass holds the splitter's full list, as it did).

Peak memory is the growth of the process's peak RSS over what it held before (model and text
loaded): ``bench/common.py``'s ``measure`` resets the kernel's high-water mark per run.

    python bench/streaming_chunking.py                      # the default preset, 5 MB
    python bench/streaming_chunking.py --mb 1 --model path/to/variant
"""

from __future__ import annotations

import argparse
import random
import sys
from itertools import islice

from common import measure, single_thread_note

_WORDS = (
    "tide moon sun gravity ocean water level spring neap orbit earth force pull bulge coast harbour "
    "measure record station height range cycle lunar solar phase align opposite quarter daily twice "
    "current flow basin resonance amplitude period hour minute wave shore estuary river delta"
).split()


def markdown(megabytes: float, seed: int = 0) -> str:
    """A seeded Markdown document of about ``megabytes`` MB: headings, paragraphs, lists, code."""
    rng = random.Random(seed)
    target, parts, size, section = int(megabytes * 1_000_000), [], 0, 0
    while size < target:
        kind = rng.random()
        if kind < 0.06:
            section += 1
            block = f"## Section {section}: {' '.join(rng.choices(_WORDS, k=4)).title()}"
        elif kind < 0.16:
            block = "\n".join(
                f"- {' '.join(rng.choices(_WORDS, k=rng.randint(5, 12)))}" for _ in range(rng.randint(3, 6))
            )
        elif kind < 0.20:
            block = (
                "```python\n"
                + "\n".join(f"x{i} = {rng.randint(0, 999)}  # {rng.choice(_WORDS)}" for i in range(rng.randint(3, 8)))
                + "\n```"
            )
        else:
            block = " ".join(
                " ".join(rng.choices(_WORDS, k=rng.randint(8, 20))).capitalize() + "." for _ in range(rng.randint(3, 8))
            )
        parts.append(block)
        size += len(block) + 2
    return "\n\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=5.0, help="document size in MB (default 5)")
    parser.add_argument("--model", default=None, help="variant directory or preset (default: the default preset)")
    parser.add_argument("--chunk-size", type=int, default=200)
    parser.add_argument("--chunk-overlap", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=8, help="chunks in the first embedded batch")
    args = parser.parse_args()

    import torch

    from c2v_rag.documents.chunking import Chunk, TokenChunker
    from c2v_rag.rag import load_model

    torch.set_num_threads(1)
    model = load_model(args.model, device="cpu")
    chunker = TokenChunker(model, args.chunk_size, args.chunk_overlap)
    text = markdown(args.mb)

    def whole_text_chunks(text: str) -> list:
        """``TokenChunker.chunk`` as it was before streaming: the splitter on the whole text, then
        each piece's character offsets (the same bookkeeping ``iter_chunks`` does per section)."""
        chunks, cursor = [], 0
        for index, piece in enumerate(chunker.splitter.split_text(text)):
            start = text.find(piece, cursor)
            chunks.append(
                Chunk(piece, index, start, start + len(piece)) if start >= 0 else Chunk(piece, index, None, None)
            )
            cursor = start + 1 if start >= 0 else cursor
        return chunks

    def embed(chunks) -> int:
        return len(model.encode_documents([c.text for c in chunks], batch_size=args.batch_size))

    # One-off costs (the splitter's sentence tokenizer, first tokenizer calls) out of every clock.
    embed(whole_text_chunks(text[:20_000])[: args.batch_size])
    embed(list(islice(chunker.iter_chunks(text[:20_000]), args.batch_size)))

    runs = {
        "first chunk, before (whole text)": lambda: len(whole_text_chunks(text)[:1]),
        "first chunk, after (streamed)": lambda: len(list(islice(chunker.iter_chunks(text), 1))),
        "first batch, before (whole text)": lambda: embed(whole_text_chunks(text)[: args.batch_size]),
        "first batch, after (streamed)": lambda: embed(list(islice(chunker.iter_chunks(text), args.batch_size))),
        "all chunks, before (whole text)": lambda: len(whole_text_chunks(text)),
        "all chunks, after (streamed)": lambda: sum(1 for _ in chunker.iter_chunks(text)),
    }
    results = {name: measure(fn) for name, fn in runs.items()}

    print(
        f"document: {len(text):,} characters of Markdown ({len(text.encode()) / 1e6:.2f} MB), "
        f"chunk_size={args.chunk_size}, first batch {args.batch_size} chunks; {single_thread_note()}"
    )
    print(f"{'run':36s} {'wall s':>8s} {'CPU s':>8s} {'peak RSS growth MiB':>20s} {'chunks':>8s}")
    for name, m in results.items():
        print(f"{name:36s} {m.seconds:8.2f} {m.cpu_seconds:8.2f} {m.working_mib:20.1f} {m.result:8d}")
    for what in ("first chunk", "first batch", "all chunks"):
        before, after = results[f"{what}, before (whole text)"], results[f"{what}, after (streamed)"]
        print(
            f"{what}: after/before wall {after.seconds / before.seconds:.3f}, CPU "
            f"{after.cpu_seconds / before.cpu_seconds:.3f}, peak RSS growth "
            f"{after.working_mib:.1f} vs {before.working_mib:.1f} MiB"
        )
    print(f"(the text itself: {sys.getsizeof(text) / 2**20:.1f} MiB as a Python str)")


if __name__ == "__main__":
    main()
