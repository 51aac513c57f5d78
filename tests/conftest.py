"""Tiny random-initialised backbones with tokenizers built offline, saved as local directories."""

from __future__ import annotations

import logging
import os
import signal

# Under pytest-xdist (the README's `-n`) every worker is a torch process, and so is every program a test starts:
# OpenMP threads beyond the cores spin against each other and slow every process several times over. Each worker
# gets its share of the cores, through the variables that the worker's own torch and its subprocesses read.
if "PYTEST_XDIST_WORKER_COUNT" in os.environ:
    _cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    _share = max(1, _cores // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))
    for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_variable, str(_share))

import pytest
import torch
from tiny_corpus import CORPUS  # test modules import it from there
from tiny_models import FAMILIES, build_decoder_tokenizer, build_encoder_tokenizer, decoder_config

# The tests load many throwaway variants: kept merged, they would fill the user's cache of merged adapters
# (c2v_rag.hub.merged). Its own tests turn it on, in a temporary folder.
os.environ.setdefault("C2V_RAG_MERGED_CACHE", "0")
# New vectors default to quantize="auto", which is int8 or float depending on the CPU running the suite; the tests
# compare ingests with float encodes unless they ask for int8. The default's own test removes this.
os.environ["C2V_RAG_QUANTIZE"] = "none"
# Searches default to rerank="auto", which reranks or not depending on the CPU running the suite; the tests compare
# searches with independent rankings unless they ask for reranking. The default's own tests set it.
os.environ["C2V_RAG_RERANK"] = "none"
# A suite started in the background of a non-interactive shell (`pytest ... &` in a script) inherits SIGINT ignored,
# and so does every command a test starts: Python keeps an inherited SIG_IGN, so the Ctrl-C the interrupt tests send
# was lost, the test timed out and its training run went on after the suite. A handler here is reset to the default
# in every child, which then installs Python's own.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session", autouse=True)
def _tokenizer_cache(tmp_path_factory):
    """The tokenizer cache (c2v_rag.hub.fast_tokenizer) in a folder of the session, not the user's: every tiny
    model folder is new each session, and the suite still loads its tokenizers the fast way after the first."""
    if "C2V_RAG_TOKENIZER_CACHE" not in os.environ:
        os.environ["C2V_RAG_TOKENIZER_CACHE"] = str(tmp_path_factory.mktemp("tokenizer-cache"))


@pytest.fixture(scope="session", autouse=True)
def _gate_cache(tmp_path_factory):
    """adapt's kept gate scores (c2v_rag.training.adapt.score_cache) in a folder of the session: the tiny models are
    the same in every session, and scores kept from an older checkout would stand in for the code under test."""
    if "C2V_RAG_GATE_CACHE" not in os.environ:
        os.environ["C2V_RAG_GATE_CACHE"] = str(tmp_path_factory.mktemp("gate-cache"))


@pytest.fixture(scope="session", autouse=True)
def _default_store(tmp_path_factory):
    """The embedded store that ingest, search and serve use when told none (``$C2V_RAG_QDRANT_PATH``, else the user
    data directory) in a folder of the session: a test that relies on the default must not read, or write into,
    the store of the user running the suite (a /v1/search test answered 409 where the user had ingested)."""
    os.environ["C2V_RAG_QDRANT_PATH"] = str(tmp_path_factory.mktemp("default-store") / "qdrant")


@pytest.fixture(autouse=True)
def _hub_offline_mode():
    """huggingface_hub's offline switch as the test found it: a process that finds the hub silent turns it on for
    the rest of its life (c2v_rag.hub.hub_access), and a test that turns it on must not decide the next ones."""
    from huggingface_hub import constants

    before = constants.HF_HUB_OFFLINE
    yield
    constants.HF_HUB_OFFLINE = before


pytest_plugins = ["rag_fixtures"]


@pytest.fixture(scope="session")
def tiny_dirs(tmp_path_factory):
    """{"bert": dir, "llama": dir, ...}: tiny checkpoints saved as safetensors with tokenizers."""
    from transformers import AutoModel, BertConfig

    logging.getLogger("transformers").setLevel(logging.ERROR)
    root = tmp_path_factory.mktemp("tiny")
    dirs = {}
    torch.manual_seed(0)
    enc_tok = build_encoder_tokenizer()
    bert_config = BertConfig(
        vocab_size=len(enc_tok),
        hidden_size=24,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=48,
        max_position_embeddings=64,
        pad_token_id=enc_tok.pad_token_id,
    )
    bert = AutoModel.from_config(bert_config).eval()
    dirs["bert"] = root / "bert"
    bert.save_pretrained(dirs["bert"])
    enc_tok.save_pretrained(dirs["bert"])
    for family, options in FAMILIES.items():
        tok = build_decoder_tokenizer(**options)
        model = AutoModel.from_config(decoder_config(family, len(tok), tok)).eval()
        dirs[family] = root / family
        model.save_pretrained(dirs[family])
        tok.save_pretrained(dirs[family])
    return dirs


@pytest.fixture(scope="session")
def tiny_model_factory(tiny_dirs):
    """Build a float32 CPU Causal2Vec on a tiny decoder family, with config overrides."""
    from c2v_rag import Causal2Vec
    from c2v_rag.core.config import Causal2VecConfig

    def make(family: str = "llama", **fields):
        # The dtype is a config field here, not only a load argument, so that a tiny variant saved
        # from this model loads in float32 again: "auto" picks bf16 on a CPU with AMX, where the
        # vectors then move by ~1e-3 between batchings, beyond what the engines are compared to.
        fields.setdefault("dtype", "float32")
        encoder = fields.pop("encoder", str(tiny_dirs["bert"]))
        config = Causal2VecConfig(decoder=str(tiny_dirs[family]), encoder=encoder, **fields)
        return Causal2Vec.from_config(config, device="cpu")

    return make


# ------------------------------------------------------------------------------ training fixtures

TRAIN_PAIRS = [
    (
        f"claim {i}: " + CORPUS[i % 7][: 20 + i % 13],
        f"evidence {i} " + CORPUS[(i + 3) % 7][i % 9 :],
        f"unrelated {i} " + CORPUS[(i + 5) % 7][:30],
    )
    for i in range(48)
]


@pytest.fixture
def tiny_train_data(tmp_path):
    """Two small datasets on disk: a triplet TSV and a JSONL file with instructions."""
    import json

    tsv = tmp_path / "triplets.tsv"
    tsv.write_text("anchor\tpositive\tnegative\n" + "".join(f"{a}\t{p}\t{n}\n" for a, p, n in TRAIN_PAIRS[:24]))
    jsonl = tmp_path / "pairs.jsonl"
    with jsonl.open("w") as handle:
        for a, p, n in TRAIN_PAIRS[24:]:
            handle.write(
                json.dumps({"query": a, "positive": p, "negatives": [n], "instruction": "Find the evidence"}) + "\n"
            )
    return {"triplets": tsv, "jsonl": jsonl}


@pytest.fixture
def tiny_recipe(tiny_dirs, tiny_train_data, tmp_path):
    """A training config dict for the tiny llama model; tests tweak it before validating."""

    def make(**training):
        settings = dict(
            steps=4,
            batch_size=4,
            lr=1e-3,
            warmup_steps=1,
            precision="fp32",
            gradient_checkpointing=False,
            save_every=0,
            progress_bar=False,
            device="cpu",
            seed=3,
        )
        settings.update(training)
        return {
            "model": {"decoder": str(tiny_dirs["llama"]), "encoder": str(tiny_dirs["bert"])},
            "lora": {"r": 4, "alpha": 8, "dropout": 0.0},
            "encoder_lora": {"r": 2, "alpha": 4, "dropout": 0.0},
            "datasets": [
                {"name": "nli", "format": "triplets_tsv", "path": str(tiny_train_data["triplets"]), "task": "NLI"},
                {"name": "pairs", "format": "jsonl", "path": str(tiny_train_data["jsonl"])},
            ],
            "training": settings,
            "output": {"dir": str(tmp_path / "run")},
        }

    return make


@pytest.fixture
def bar_shares(monkeypatch):
    """``bar_shares(module)``: the (items counted, share of the bar done) of every update of each ``CountingBar``
    that ``module`` makes from then on, in order (the bar still draws)."""

    def watch(module) -> list[tuple[int, float]]:
        recorded: list[tuple[int, float]] = []

        class Recording(module.CountingBar):
            def update(self, n=1):
                result = super().update(n)
                recorded.append((self.count, self.n / self.total))
                return result

        monkeypatch.setattr(module, "CountingBar", Recording)
        return recorded

    return watch
