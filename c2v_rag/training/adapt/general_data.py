"""The general data ``adapt`` mixes into its batches and checks at the gate: STS-B (train for training, dev for
the gate) and, where present, NLI triplets.

Where it comes from, first found first: ``general_data`` (a folder laid out as below), ``$C2V_RAG_GENERAL_DATA``,
or the Hugging Face Hub (``sentence-transformers/stsb``, fetched once into the cache). ``general_data="none"``
(:data:`NO_GENERAL_DATA`) asks for none, offline where no copy is at hand: training then draws every batch from the
documents' pairs, and the gate checks no STS-B. The folder layout::

    stsb/stsb.train.tsv   stsb/stsb.dev.tsv      (columns score, sentence1, sentence2; score 0-5)
    nli/*_triplets.tsv                           (optional: anchor, positive, negative)
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass, field
from pathlib import Path

from c2v_rag.core.cache import cache_dir
from c2v_rag.core.files import replacing
from c2v_rag.hub.hub_access import cache_only_without_hub

ENV_VAR = "C2V_RAG_GENERAL_DATA"
NO_GENERAL_DATA = "none"
HUB_STSB = "sentence-transformers/stsb"
_HUB_FILES = {
    "stsb.train.tsv": "data/train-00000-of-00001.parquet",
    "stsb.dev.tsv": "data/validation-00000-of-00001.parquet",
}


class GeneralDataError(FileNotFoundError):
    """No general data could be found or fetched."""


@dataclass(frozen=True)
class GeneralData:
    stsb_train: Path
    stsb_dev: Path
    nli: list[Path] = field(default_factory=list)
    origin: str = ""


def _from_folder(folder: Path, origin: str) -> GeneralData:
    train, dev = folder / "stsb" / "stsb.train.tsv", folder / "stsb" / "stsb.dev.tsv"
    missing = [str(p) for p in (train, dev) if not p.is_file()]
    if missing:
        raise GeneralDataError(
            f"the general data folder {folder} ({origin}) lacks {', '.join(missing)}; it needs stsb/stsb.train.tsv "
            "and stsb/stsb.dev.tsv (columns score, sentence1, sentence2), and may hold nli/*_triplets.tsv"
        )
    nli = sorted((folder / "nli").glob("*_triplets.tsv")) if (folder / "nli").is_dir() else []
    return GeneralData(train, dev, nli, origin)


def _fetch_stsb(target: Path) -> None:
    """Download STS-B from the hub and write it in the folder layout (scores scaled back to 0-5)."""
    from huggingface_hub import hf_hub_download

    from c2v_rag.core.extras import require

    pq = require("pyarrow.parquet", "reading STS-B from the Hugging Face Hub", command="pip install pyarrow")
    cache_only_without_hub(f"the dataset {HUB_STSB}")
    target.mkdir(parents=True, exist_ok=True)
    for name, remote in _HUB_FILES.items():
        table = pq.read_table(hf_hub_download(HUB_STSB, remote, repo_type="dataset")).to_pydict()
        with replacing(target / name, newline="") as handle:
            writer = csv.writer(handle, delimiter="\t", quoting=csv.QUOTE_NONE, escapechar="\\")
            writer.writerow(["score", "sentence1", "sentence2"])
            for a, b, s in zip(table["sentence1"], table["sentence2"], table["score"]):
                writer.writerow([f"{5 * float(s):.4f}", " ".join(a.split()), " ".join(b.split())])


def find_general_data(folder: str | Path | None = None) -> GeneralData | None:
    """The general data, from ``folder``, ``$C2V_RAG_GENERAL_DATA`` or the hub (None where ``folder`` is
    :data:`NO_GENERAL_DATA`); a clear error naming the ways to provide it when none works."""
    if folder == NO_GENERAL_DATA:
        return None
    if folder is not None:
        return _from_folder(Path(folder).expanduser(), "general_data")
    if os.environ.get(ENV_VAR):
        return _from_folder(Path(os.environ[ENV_VAR]).expanduser(), f"${ENV_VAR}")
    cached = cache_dir() / "general"
    if not (cached / "stsb" / "stsb.dev.tsv").is_file():
        try:
            _fetch_stsb(cached / "stsb")
        except Exception as err:  # offline, hub down, no pyarrow: every way ends in the same advice
            raise GeneralDataError(
                "adapt mixes general data into its training and checks STS-B dev at its gate, and found none: "
                f"fetching {HUB_STSB} from the Hugging Face Hub failed ({type(err).__name__}: {err}). Give a folder "
                f"with stsb/stsb.train.tsv and stsb/stsb.dev.tsv (columns score, sentence1, sentence2) as "
                f"--general-data DIR (or ${ENV_VAR}), or connect once to fetch it; --general-data {NO_GENERAL_DATA} "
                "trains on your documents' pairs alone and checks no STS-B at the gate"
            ) from err
    return _from_folder(cached, f"{HUB_STSB} (cached in {cached})")
