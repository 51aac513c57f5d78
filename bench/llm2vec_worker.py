"""One llm2vec 0.2.3 encode of a JSON list of texts; run by bench/peers.py in llm2vec's own venv.

llm2vec pins transformers <= 4.44.2, which c2v_rag does not run on, so it lives in a venv of
its own (see docs/performance.md) and this worker prints one JSON line:
``{"seconds", "cpu_seconds", "before_kib", "peak_kib", "weight_mib"}``. Model loading is outside the clock.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from common import measure  # noqa: E402


def legacy_model_dir(model: Path, tmp: Path) -> Path:
    """The same weights, with config files that transformers 4.44 reads as the author meant.

    c2v_rag writes its converted backbone with transformers 5, whose files name the tokenizer
    class ``TokenizersBackend``, nest ``rope_theta`` under ``rope_parameters`` and write BPE merges
    as pairs; 4.44 fails on the first and the third, and would silently use the default
    rope_theta for the second. Weights are symlinked.
    """
    for item in model.iterdir():
        if item.name not in ("config.json", "tokenizer_config.json", "tokenizer.json"):
            (tmp / item.name).symlink_to(item)
    config = json.loads((model / "config.json").read_text())
    rope = config.pop("rope_parameters", None) or {}
    config.setdefault("rope_theta", rope.get("rope_theta", 10000.0))
    config.setdefault("torch_dtype", config.pop("dtype", "float32"))
    (tmp / "config.json").write_text(json.dumps(config))
    tok = json.loads((model / "tokenizer_config.json").read_text())
    if tok.get("tokenizer_class") == "TokenizersBackend":
        tok["tokenizer_class"] = "GPT2TokenizerFast"  # SmolLM2's own class: byte-level BPE
    (tmp / "tokenizer_config.json").write_text(json.dumps(tok))
    # tokenizers >= 0.20 writes BPE merges as pairs; the 0.19 that 4.44 pins reads "a b" strings.
    fast = json.loads((model / "tokenizer.json").read_text())
    merges = fast.get("model", {}).get("merges", [])
    if merges and isinstance(merges[0], list):
        fast["model"]["merges"] = [" ".join(pair) for pair in merges]
    (tmp / "tokenizer.json").write_text(json.dumps(fast))
    return tmp


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--texts", type=Path, required=True)
    parser.add_argument("--model", required=True, help="local directory of the decoder")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()

    import torch
    from llm2vec import LLM2Vec

    texts = json.loads(args.texts.read_text())
    model_dir = legacy_model_dir(Path(args.model), Path(tempfile.mkdtemp(prefix="l2v-model-")))
    # llm2vec's own recipe: bidirectional attention and mean pooling (no MNTP/SimCSE adapters
    # here: they change the weights, not the cost).
    model = LLM2Vec.from_pretrained(
        str(model_dir),
        enable_bidirectional=True,
        pooling_mode="mean",
        max_length=args.max_length,
        torch_dtype=getattr(torch, args.dtype),
        device_map="cpu",
    )
    model.eval()
    weights = sum(p.numel() * p.element_size() for p in model.parameters()) / 2**20
    model.encode(texts[:8], batch_size=args.batch_size, show_progress_bar=False)  # warm-up
    m = measure(lambda: model.encode(texts, batch_size=args.batch_size, show_progress_bar=False))
    if len(m.result) != len(texts):
        raise RuntimeError(f"llm2vec returned {len(m.result)} vectors for {len(texts)} texts")
    print(
        json.dumps(
            {
                "seconds": m.seconds,
                "cpu_seconds": m.cpu_seconds,
                "before_kib": m.before_kib,
                "peak_kib": m.peak_kib,
                "weight_mib": weights,
            }
        )
    )


if __name__ == "__main__":
    main()
