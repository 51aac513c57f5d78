"""What one GradCache mini-batch of the preset's training step keeps for its backward pass, per text, with and
without gradient checkpointing: the figure that sizes ``bench/gpu_train.py``'s mini-batch on a card.

The GPU run's step embeds its texts in chunks of ``--mini-batch`` (GradCache): a chunk's forward keeps its
activations until the chunk's backward, so the peak memory is the weights and optimizer state plus one chunk's
saved tensors. This measures those saved tensors on the CPU, where the same model runs the same graph: every
tensor autograd saves during the chunk's graded forward, counted once per storage (``gpu_train.saved_activations``,
which ``--mini-batch auto`` runs on the device), for a chunk of the longest documentation passages, which fill
``max_length`` (the worst case: a length-sorted chunk pads to its longest text). The recipe is the GPU run's
(``bench/gpu_train.py``'s derived recipe: the shipped preset continued, its LoRA and projector trained), in bf16
autocast.

The counts leave out what a CUDA kernel keeps besides autograd's saved tensors and the temporaries of the backward
pass itself: ``--memory-share`` leaves room for those.

    python bench/activation_memory.py --texts 8 --json bench/results/gpu_train/activation_memory_avx512bf16.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH.parent), str(BENCH)]

from common import recorded_command, speed_flags  # noqa: E402
from gpu_train import DEFAULT_PAIRS, derived_recipe, longest_passages, saved_activations  # noqa: E402


def trainer_for(checkpointing: bool, texts: list[str], work: Path) -> Any:
    from c2v_rag.training.config import TrainConfig
    from c2v_rag.training.trainer import Trainer

    data = work / "pairs.jsonl"
    data.write_text("".join(json.dumps({"query": t, "positive": t}) + "\n" for t in texts), encoding="utf-8")
    recipe = derived_recipe(
        variant="c2v-smollm2-135m-minilm",
        pairs=str(data),
        data_root="../shared/data",
        out_dir=str(work / f"run-{checkpointing}"),
        batch=len(texts),
        mini_batch=len(texts),
        steps=1,
        precision="bf16",
        device="cpu",
        docs_weight=1.0,
        save_every=0,
        overrides={"training.gradient_checkpointing": checkpointing, "training.hard_negatives": 0},
    )
    recipe["datasets"] = recipe["datasets"][:1]  # the documentation pairs alone: the five sets are not needed here
    recipe.pop("mining", None)
    trainer = Trainer(TrainConfig.model_validate(recipe))
    trainer.setup()
    trainer.model.train()
    return trainer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=8, help="texts in the measured chunk")
    parser.add_argument("--pairs", type=Path, default=DEFAULT_PAIRS, help="train.jsonl of build_docs_corpus --pairs")
    parser.add_argument("--json", type=Path, help="write the result here")
    args = parser.parse_args(argv)
    texts = longest_passages(args.pairs, args.texts)
    result: dict[str, Any] = {
        "command": recorded_command("bench/activation_memory.py", sys.argv[1:]),
        "cpu_flags": speed_flags(),
        "texts": args.texts,
    }
    with tempfile.TemporaryDirectory() as tmp:
        for checkpointing in (True, False):
            trainer = trainer_for(checkpointing, texts, Path(tmp))
            row = saved_activations(trainer, texts)
            row["max_length"] = trainer.config.model.max_length
            result["checkpointing" if checkpointing else "no_checkpointing"] = row
            print(("checkpointing" if checkpointing else "no checkpointing"), json.dumps(row), flush=True)
            del trainer
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
