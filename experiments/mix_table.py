"""One table of a variant's readout mixes: out of domain and on the dev sets, from the files that scored them.

    python experiments/mix_table.py --label default \\
        --ood bench/results/ood/mixes_preset_manpages_avx2.json bench/results/ood/mixes_preset_jargon_avx2.json \\
        --dev bench/results/dev_mixes_preset_stsb_avx2.json bench/results/dev_mixes_preset_all_avx2.json

``--ood`` takes ``bench/ood/mixes.py``'s JSON (nDCG@10 per benchmark), ``--dev`` takes
``experiments/readout_parts.py``'s (each set's main metric); several dev files are merged, so sets scored in
separate runs of the same weights meet in one row. A row is printed for every mix that has every column, with the
out-of-domain mean and the dev average (the mean of the four sets' main metrics, as ``c2v-rag eval`` reports it),
and the difference of each mean to ``--baseline``'s row.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

DEV_SETS = ("stsb-dev", "scifact-dev-1k", "emotion-val", "banking77-dev")


def mix_name(key: str) -> str:
    """``"default | encoder_share=0.75"`` or ``"default: encoder_share=0.75"`` -> ``"encoder_share=0.75"``."""
    for sep in (" | ", ": "):
        if sep in key:
            return key.split(sep, 1)[1]
    return key


def load_ood(paths: list[Path]) -> dict[str, dict[str, float]]:
    rows: dict[str, dict[str, float]] = {}
    for path in paths:
        for bench, mixes in json.loads(path.read_text())["benchmarks"].items():
            for key, metrics in mixes.items():
                rows.setdefault(mix_name(key), {})[bench] = metrics["ndcg@10"]
    return rows


def load_dev(paths: list[Path], full_as: str) -> dict[str, dict[str, float]]:
    rows: dict[str, dict[str, float]] = {}
    for path in paths:
        for key, sets in json.loads(path.read_text()).items():
            name = mix_name(key)
            name = full_as if name == "full" else name
            for dev_set, scores in sets.items():
                if isinstance(scores, dict) and "main" in scores:
                    rows.setdefault(name, {})[dev_set] = scores["main"]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ood", type=Path, nargs="+", required=True)
    parser.add_argument("--dev", type=Path, nargs="+", required=True)
    parser.add_argument("--full-as", default="encoder_share=0.75", help="the mix the dev files' 'full' row is")
    parser.add_argument("--baseline", default="encoder_share=0.75")
    args = parser.parse_args()

    ood, dev = load_ood(args.ood), load_dev(args.dev, args.full_as)
    benches = sorted({b for row in ood.values() for b in row})
    table = []
    for name in ood:
        if name not in dev or any(s not in dev[name] for s in DEV_SETS):
            continue
        ood_mean = sum(ood[name][b] for b in benches) / len(benches)
        dev_avg = sum(dev[name][s] for s in DEV_SETS) / len(DEV_SETS)
        table.append((name, [ood[name][b] for b in benches], ood_mean, [dev[name][s] for s in DEV_SETS], dev_avg))
    if not table:
        raise SystemExit("no mix has both out-of-domain and all four dev scores: check the files' weights match")
    base = next((row for row in table if row[0] == args.baseline), table[0])
    print("| mix | " + " | ".join(benches) + " | OOD mean | " + " | ".join(DEV_SETS) + " | dev avg |")
    print("|---" * (len(benches) + len(DEV_SETS) + 3) + "|")
    for name, scores, ood_mean, dev_scores, dev_avg in table:
        cells = [f"{s:.3f}" for s in scores] + [f"{ood_mean:.3f} ({ood_mean - base[2]:+.3f})"]
        cells += [f"{s:.4f}" for s in dev_scores] + [f"{dev_avg:.4f} ({dev_avg - base[4]:+.4f})"]
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
