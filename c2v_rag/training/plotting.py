"""The loss curve (and learning rate, and dev metrics) as a PNG."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def smooth(values: Sequence[float], alpha: float = 0.1) -> list[float]:
    """Exponential moving average with bias correction, so the first points are not dragged to 0."""
    out, avg = [], 0.0
    for i, v in enumerate(values, 1):
        avg = (1 - alpha) * avg + alpha * v
        out.append(avg / (1 - (1 - alpha) ** i))
    return out


def plot_loss_curve(
    history: Sequence[dict], path: str | Path, *, evaluations: Sequence[dict] = (), title: str = "Causal2Vec training"
) -> Path:
    """Plot ``history`` records ``{step, loss, lr, dataset?}`` (and ``evaluations`` ``{step, metric: value}``); a
    run over several datasets gets one curve per dataset."""
    import matplotlib

    matplotlib.use("Agg")  # no display on training machines
    import matplotlib.pyplot as plt

    path = Path(path)
    steps = [h["step"] for h in history]
    losses = [h["loss"] for h in history]
    datasets = list(dict.fromkeys(h["dataset"] for h in history if "dataset" in h))
    panels = 2 if evaluations else 1
    fig, axes = plt.subplots(1, panels, figsize=(6.5 * panels, 4), squeeze=False)
    ax = axes[0][0]
    if len(datasets) > 1:
        # One batch is one dataset, and their losses sit on different scales (CoSENT over a batch's pairs, InfoNCE
        # with label duplicates...): one line each, or the mixture's curve is mostly the order of the batches.
        colors = matplotlib.color_sequences["tab10"]
        for i, name in enumerate(datasets):
            own = [(h["step"], h["loss"]) for h in history if h.get("dataset") == name]
            ax.plot([s for s, _ in own], [v for _, v in own], color=colors[i % 10], alpha=0.25, linewidth=1)
            ax.plot(
                [s for s, _ in own],
                smooth([v for _, v in own], alpha=0.3) if len(own) > 2 else [v for _, v in own],
                color=colors[i % 10],
                linewidth=2,
                label=f"{name} (EMA)",
            )
    else:
        ax.plot(steps, losses, color="tab:blue", alpha=0.35, linewidth=1, label="loss")
        if len(losses) > 2:
            ax.plot(steps, smooth(losses), color="tab:blue", linewidth=2, label="loss (EMA)")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    lr = ax.twinx()
    lr.plot(steps, [h["lr"] for h in history], color="tab:orange", linewidth=1, label="lr")
    lr.set_ylabel("learning rate", color="tab:orange")
    lines = ax.get_legend_handles_labels()[0] + lr.get_legend_handles_labels()[0]
    ax.legend(lines, [line.get_label() for line in lines], loc="upper right", fontsize="small")
    if evaluations:
        ev = axes[0][1]
        names = sorted({k for e in evaluations for k in e if k != "step"})
        for name in names:
            points = [(e["step"], e[name]) for e in evaluations if name in e]
            ev.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=name)
        ev.set_xlabel("step")
        ev.set_title("dev metrics")
        ev.grid(alpha=0.3)
        ev.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
