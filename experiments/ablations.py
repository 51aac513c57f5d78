"""The paper's ablations at small scale (Tables 2 and 12): train each row, score it, write the table.

Every trained row uses recipes/ablation_mixture.yaml with one change (the variable); the data, the
step count and the seed stay the same. Each row is resumable: a finished training run or score file
is reused, so an interrupted run picks up where it stopped.

    python experiments/ablations.py --data ../shared/data                 # every row
    python experiments/ablations.py --data ../shared/data --rows a c      # some rows
    python experiments/ablations.py --data ../shared/data --report-only   # rewrite the table and plot

It writes runs/ablation/<row>/ (variants, history, scores) and bench/results/notes/ablations.md + ablations.png.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RECIPE = REPO / "recipes" / "ablation_mixture.yaml"
EVAL_SETS = ["stsb-dev", "scifact-dev-1k", "emotion-val"]


@dataclass(frozen=True)
class Stage:
    """A training stage run before the row's contrastive stage (LLM2Vec's MNTP, Anchor's Stage I...)."""

    name: str
    recipe: str  # a file in recipes/
    data: dict[int, str]  # dataset index -> path under --data
    overrides: list[str] = field(default_factory=list)


@dataclass(frozen=True, eq=False)  # hashed by identity: rows key the results
class Row:
    key: str
    name: str
    overrides: list[str] = field(default_factory=list)
    baseline: str | None = None  # a bi-encoder scored alone, untrained
    stages: list[Stage] = field(default_factory=list)  # each continues the previous; the mixture stage comes last
    eval_max_length: int | None = None  # per-row scoring bound (Echo's input holds the text twice)

    @property
    def slug(self) -> str:
        words = "".join(c if c.isalnum() else " " for c in self.name.lower()).split()
        return "-".join([self.key] + words)


_SMALL_LORA = ["lora.r=8", "lora.alpha=32"]  # the mixture's adapter size, so stages continue one adapter

ROWS = [
    Row(
        "a",
        "decoder alone, last token",
        ["model.config.num_contextual_tokens=0", "model.config.representation=last_token"],
    ),
    Row("b", "contextual token, last token", ["model.config.representation=last_token"]),
    Row("c", "contextual token, concat (Causal2Vec)", []),
    Row("d", "all-MiniLM-L6-v2 alone (untrained reference)", baseline="all-minilm-l6-v2"),
    Row("e", "contextual token, average", ["model.config.representation=average"]),
    Row("f", "contextual token, concat, encoder frozen", ["encoder_lora.enabled=false"]),
    # Issue 6's questions, against row (b): bidirectional attention (Table 15), several tokens (Table 5).
    Row(
        "g",
        "contextual token, last token, bidirectional",
        ["model.config.representation=last_token", "model.config.attention=bidirectional"],
    ),
    Row(
        "h",
        "4 contextual tokens, last token",
        ["model.config.representation=last_token", "model.config.num_contextual_tokens=4"],
    ),
    # The other papers' recipes (issue 6). Their extra stages run first, with the mixture's LoRA size; the
    # mixture stage is the same 100 contrastive steps as every other row.
    Row(
        "i",
        "LLM2Vec: bidirectional, mean; MNTP, SimCSE, then the mixture",
        stages=[
            Stage("mntp", "llm2vec_mntp.yaml", {0: "nli/snli_dev_triplets.tsv"}, _SMALL_LORA),
            Stage("simcse", "llm2vec_simcse.yaml", {0: "nli/snli_dev_triplets.tsv"}),
        ],
    ),
    Row(
        "j",
        "Anchor: last token; reconstruction (Stage I), then the mixture",
        stages=[
            # The dev claims stay out of Stage I as they stay out of the mixture.
            Stage(
                "reconstruction",
                "anchor_reconstruction.yaml",
                {0: "scifact"},
                _SMALL_LORA + ["datasets.0.dev_fraction=0.2", "datasets.0.dev_seed=0"],
            )
        ],
    ),
    Row(
        "k",
        "Echo: decoder alone, mean over the second copy",
        [
            "model.encoder=null",
            "model.config.num_contextual_tokens=0",
            "model.config.echo=true",
            "model.config.representation=mean",
            "model.max_length=128",
        ],
        eval_max_length=512,
    ),
    # Row (i) without its two changes (bidirectional attention after MNTP + SimCSE): causal, mean pooling.
    Row(
        "l",
        "decoder alone, mean pooling, causal",
        ["model.encoder=null", "model.config.num_contextual_tokens=0", "model.config.representation=mean"],
    ),
    # Row (b) pooled as Echo and LLM2Vec pool: the mean over the text tokens.
    Row("m", "contextual token, mean pooling", ["model.config.representation=mean"]),
    # Issue 12: row (c) with h_C and h_EOS each L2-normalized before the concat, so neither half's norm
    # (h_C carries massive-activation dimensions) decides the cosine.
    Row("n", "contextual token, concat, halves normalized", ["model.config.normalize_parts=true"]),
    # ... and C started at the norm of a word embedding: torch's default init makes it ~4x shorter, so h_C
    # hardly depends on the text at first (pairwise cosine 0.86 over SciFact abstracts).
    Row(
        "o",
        "contextual token, concat, halves normalized, C scaled",
        ["model.config.normalize_parts=true", "model.projector_scale=word_embeddings"],
    ),
    # Issue 25: row (o) with every part scored alone beside the whole (objective.parts): h_EOS and h_C each get
    # a gradient of their own instead of only what the concat needs from them.
    Row(
        "p",
        "contextual token, concat, halves normalized, C scaled, every part scored",
        [
            "model.config.normalize_parts=true",
            "model.projector_scale=word_embeddings",
            "objective.parts={full: 1.0, eos: 1.0, contextual: 0.5}",
        ],
    ),
]


MIXTURE_DATA = dict(
    enumerate(
        ["nli/snli_dev_triplets.tsv", "stsb/stsb.train.tsv", "scifact", "banking77/train.csv", "emotion/train.txt"]
    )
)


def data_overrides(data: Path, paths: dict[int, str] = MIXTURE_DATA) -> list[str]:
    return [f"datasets.{i}.path={data / p}" for i, p in paths.items()]


def run(cmd: list[str]) -> None:
    print("$ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, cwd=REPO)


def train_and_score(row: Row, args: argparse.Namespace) -> dict:
    out = args.out / row.slug
    scores_path = out / "scores.json"
    if scores_path.is_file():
        return json.loads(scores_path.read_text())
    out.mkdir(parents=True, exist_ok=True)
    cli = [sys.executable, "-m", "c2v_rag.cli"]
    if row.baseline:
        run(
            cli
            + [
                "eval",
                "--baseline",
                row.baseline,
                "--data",
                str(args.data),
                "--sets",
                *args.sets,
                "--json",
                str(out / "eval.json"),
            ]
        )
    else:
        start: Path | None = None
        for stage in row.stages:
            stage_dir = out / stage.name
            overrides = data_overrides(args.data, stage.data) + stage.overrides + _continue_from(start)
            _train(cli, REPO / "recipes" / stage.recipe, stage_dir, overrides + args.overrides)
            start = stage_dir
        variant = out / "variant"
        overrides = data_overrides(args.data) + row.overrides + _continue_from(start)
        if args.steps:
            overrides.append(f"training.steps={args.steps}")
        _train(cli, RECIPE, variant, overrides + args.overrides)
        run(
            cli
            + [
                "eval",
                str(variant),
                "--data",
                str(args.data),
                "--sets",
                *args.sets,
                "--max-length",
                str(row.eval_max_length or args.max_length),
                "--json",
                str(out / "eval.json"),
            ]
        )
    scores = next(iter(json.loads((out / "eval.json").read_text()).values()))
    scores_path.write_text(json.dumps(scores, indent=2) + "\n")
    return scores


def _continue_from(variant: Path | None) -> list[str]:
    """Overrides that make a recipe continue a previous stage's variant instead of building a fresh one."""
    if variant is None:
        return []
    return [f"model.variant={variant}", "model.decoder=null", "model.config={}"]


def _train(cli: list[str], recipe: Path, out: Path, overrides: list[str]) -> None:
    if (out / "metrics.json").is_file():  # finished earlier: reuse it
        return
    # A run stopped midway continues from its last checkpoint; anything else there is overwritten.
    stopped = any((out / "checkpoints").glob("step-*"))
    overrides = overrides + [f"output.dir={out}"] + ([] if stopped else ["output.overwrite=true"])
    run(cli + ["train", str(recipe)] + [a for o in overrides for a in ("--set", o)] + (["--resume"] if stopped else []))


def history(row: Row, out: Path) -> list[dict]:
    path = out / row.slug / "variant" / "history.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_report(results: dict[Row, dict], args: argparse.Namespace) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from c2v_rag.evaluation.suites import MAIN_METRIC
    from c2v_rag.training.plotting import smooth

    sets = args.sets
    lines = [
        "| row | variant | "
        + " | ".join(f"{s} ({MAIN_METRIC[s]})" for s in sets)
        + " | average | first/last-10 loss |",
        "|---|---|" + "---|" * (len(sets) + 2),
    ]
    histories = {row: history(row, args.out) for row in results}
    for row, scores in results.items():
        mains = [scores[s]["main"] for s in sets]
        steps = histories[row]
        loss = (
            f"{sum(h['loss'] for h in steps[:10]) / 10:.2f} → {sum(h['loss'] for h in steps[-10:]) / 10:.2f}"
            if len(steps) >= 20
            else "untrained"
        )
        lines.append(
            f"| {row.key} | {row.name} | "
            + " | ".join(f"{m:.4f}" for m in mains)
            + f" | {sum(mains) / len(mains):.4f} | {loss} |"
        )
    table = "\n".join(lines)
    (args.out / "table.md").write_text(table + "\n")
    print(table, flush=True)

    fig, (bars, curves) = plt.subplots(1, 2, figsize=(14, 6))
    colors = plt.get_cmap("tab20").colors  # one colour per row, the same in both panels
    width = 0.8 / len(results)
    for i, (row, scores) in enumerate(results.items()):
        color = colors[i % len(colors)]
        values = [scores[s]["main"] for s in sets] + [sum(scores[s]["main"] for s in sets) / len(sets)]
        bars.bar(
            [x + i * width for x in range(len(sets) + 1)], values, width, color=color, label=f"({row.key}) {row.name}"
        )
        steps = histories[row]
        if steps:
            curves.plot(
                [h["step"] for h in steps], smooth([h["loss"] for h in steps]), color=color, label=f"({row.key})"
            )
    bars.set_xticks([x + 0.4 - width / 2 for x in range(len(sets) + 1)], sets + ["average"])
    bars.set_ylabel("main metric")
    curves.set_xlabel("step")
    curves.set_ylabel("InfoNCE loss (smoothed)")
    curves.legend(ncol=2)
    fig.legend(*bars.get_legend_handles_labels(), loc="lower center", ncol=3, fontsize=8)
    fig.tight_layout(rect=(0, 0.04 + 0.035 * ((len(results) + 2) // 3), 1, 1))
    fig.savefig(args.plot, dpi=120)
    print(f"wrote {args.out / 'table.md'} and {args.plot}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="the shared data folder (scifact/, stsb/, nli/...)")
    parser.add_argument("--rows", nargs="+", default=["a", "b", "c", "d"], help="row keys (a-o; default a b c d)")
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "ablation")
    parser.add_argument("--sets", nargs="+", default=EVAL_SETS)
    parser.add_argument(
        "--max-length",
        type=int,
        default=256,
        help="decoder tokens per text when scoring (default 256, the bi-encoder's own limit)",
    )
    parser.add_argument("--steps", type=int, default=None, help="override the recipe's step count (every row alike)")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra recipe override for every trained row (e.g. training.gradient_checkpointing=true, "
        "which saves memory and leaves the maths unchanged)",
    )
    parser.add_argument("--plot", type=Path, default=REPO / "bench" / "results" / "notes" / "ablations.png")
    parser.add_argument("--report-only", action="store_true", help="rewrite the table from finished rows")
    args = parser.parse_args(argv)
    args.data = args.data.resolve()
    args.out = args.out.resolve()

    chosen = [r for r in ROWS if r.key in args.rows]
    results = {}
    for row in chosen:
        scores_path = args.out / row.slug / "scores.json"
        if args.report_only:
            if scores_path.is_file():
                results[row] = json.loads(scores_path.read_text())
            continue
        results[row] = train_and_score(row, args)
    if results:
        write_report(results, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
