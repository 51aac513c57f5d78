"""Fine-tune the reranker's base decoder for ranking by query likelihood, on the documentation pairs.

The reranker (:mod:`c2v_rag.rerank`) ranks a query's candidates by the mean log-probability of the query's tokens given
each document, under the base decoder as SmolLM2-135M-Instruct was released. This trains LoRA adapters on that decoder
so that this score ranks better. Each query comes with its passage and ``--negatives`` other passages: with
``--negatives-from bm25``, drawn from the BM25 top ``--bm25-depth`` of the query over every passage (other pages that
share its words, as a first stage's candidates do); with ``page``, other sections of its own page, half of them those
that share most of the query's words. The loss is the cross-entropy of the passage among them under a softmax of their
scores. Only the documents differ within a group, so the query's own style (a heading's, a question's) cancels out of
the loss: what is learnt is which document makes the query likely, which is all the reranker uses (it z-scores the
scores over a query's candidates).

Pairs: ``experiments/build_docs_corpus.py --pairs`` (Debian's manuals, Info manuals, Python docs; never the
benchmarks' man pages, Jargon File or Postfix guides); ``sources.jsonl`` gives each pair's page. Queries under three
words are dropped (a bare "Examples" heading names nothing its page's other sections do not).

Writes into ``--out``: ``adapter.safetensors`` (the LoRA weights, every ``--save-every`` steps, with
``state.pt``: optimizer, schedule and sampler state, so that a stopped run resumes with ``--resume``),
``history.jsonl`` (loss and in-group accuracy per step, held-out scores), and with ``--merge``, ``decoder/`` (the
base folder with the adapters merged into its weights) and ``variant/`` (the default preset reading that decoder as
its base, so ``Causal2VecReranker("OUT/variant")`` scores with it).

    taskset -c 1 env OMP_NUM_THREADS=1 python experiments/train_reranker.py --pairs runs/docs-pairs \\
        --out runs/reranker-ql --steps 200 --negatives 5 --negatives-from bm25
    python experiments/train_reranker.py --pairs runs/docs-pairs --out runs/reranker-ql --merge
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import shutil
import time
from collections import defaultdict
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

from c2v_rag.core.config import CONFIG_FILE, read_config
from c2v_rag.hub.presets import resolve_variant_path
from c2v_rag.hub.sources import load_backbone
from c2v_rag.nn.backbone import input_embeddings
from c2v_rag.rerank.likelihood import query_states
from c2v_rag.rerank.loading import scoring_layout
from c2v_rag.rerank.templates import Pair, PairBuilder

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def read_pairs(folder: Path, min_words: int) -> dict[str, list[dict[str, str]]]:
    """``{"train": [...], "heldout": [...]}``: each pair's query, passage and page, in the files' order."""
    lines = {s: iter((folder / f"{s}.jsonl").open(encoding="utf-8")) for s in ("train", "heldout")}
    out: dict[str, list[dict[str, str]]] = {"train": [], "heldout": []}
    for meta_line in (folder / "sources.jsonl").open(encoding="utf-8"):
        meta = json.loads(meta_line)
        pair = json.loads(next(lines[meta["split"]]))
        if len(pair["query"].split()) >= min_words:
            out[meta["split"]].append({**pair, "path": meta["path"], "kind": meta["kind"]})
    return out


def pages_of(records: list[dict[str, str]]) -> dict[str, list[int]]:
    """Each page's records, by index."""
    pages: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(records):
        pages[r["path"]].append(i)
    return pages


def words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) > 2}


def page_negatives(
    i: int, records: list[dict[str, str]], pages: dict[str, list[int]], negatives: int, rng: random.Random
) -> list[int]:
    """``negatives`` other pairs of record ``i``'s page: half of them those whose passages share most of the query's
    words, the rest at random (from anywhere when the page has too few)."""
    query = words(records[i]["query"])
    others = [j for j in pages[records[i]["path"]] if j != i]
    rng.shuffle(others)
    # Half by word overlap (hard), half at random from the page: the overlap alone picks too many false negatives,
    # other sections that answer the query as well.
    by_overlap = sorted(others, key=lambda j: -len(query & words(records[j]["positive"])))[: (negatives + 1) // 2]
    picked = by_overlap + [j for j in others if j not in by_overlap][: negatives - len(by_overlap)]
    while len(picked) < negatives:
        j = rng.randrange(len(records))
        if j != i and j not in picked:
            picked.append(j)
    return picked


def bm25_negatives(
    indices: list[int], records: list[dict[str, str]], negatives: int, depth: int, seed: int, skip: int = 0
) -> dict[int, list[int]]:
    """For each record of ``indices``, ``negatives`` pairs drawn from the BM25 top ``depth`` of its query over every
    record's passage, its own and the ``skip`` best left out (those too often answer the query as well): other pages'
    passages that share the query's words, as a first stage's candidates do."""
    from c2v_rag.training.bm25 import bm25_rankings

    if not indices:
        return {}
    rankings = bm25_rankings([records[i]["query"] for i in indices], [r["positive"] for r in records], depth + 1)
    out = {}
    for i, ranking in zip(indices, rankings):
        hits = [int(j) for j in ranking if int(j) != i][skip:depth]
        out[i] = random.Random(seed * 1_000_003 + i).sample(hits, min(negatives, len(hits)))
    return out


def query_log_probs(
    backbone: torch.nn.Module, head: torch.Tensor, pairs: list[Pair], pad_id: int, float_head: bool = False
) -> torch.Tensor:
    """Summed log-probability of each pair's query tokens [n], with gradients (the reranker's
    :class:`~c2v_rag.rerank.likelihood.QueryLikelihood` computes the same without them)."""
    states, targets, rows = query_states(backbone, pairs, pad_id, torch.device("cpu"))  # [query tokens, d]
    if float_head:  # under bf16 autocast a logit near 20 rounds to steps of 0.125
        with torch.autocast("cpu", enabled=False):
            logits = F.linear(states.float(), head.float())  # [query tokens, vocab]
    else:
        logits = F.linear(states, head).float()
    token_lp = logits.log_softmax(-1).gather(1, targets[:, None])[:, 0]
    return torch.zeros(len(pairs)).index_add(0, rows, token_lp)


def group_scores(
    backbone: torch.nn.Module,
    head: torch.Tensor,
    builder: PairBuilder,
    queries: list[str],
    docs: list[list[str]],
    float_head: bool = False,
) -> torch.Tensor:
    """Mean log p(query token | document, earlier query tokens) for each query's documents [queries, documents]: the
    reranker's score. The mean, not the sum, keeps a long query's groups from dominating the loss with margins of tens
    of nats."""
    pairs, lengths = [], []
    for q, d in zip(queries, docs):
        ids = builder.query_ids(q)
        pairs += builder.pairs(ids, d)
        lengths += [len(ids)] * len(d)
    sums = query_log_probs(backbone, head, pairs, builder.pad_id, float_head)
    return (sums / torch.tensor(lengths, dtype=sums.dtype)).view(len(queries), -1)


def lora_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone().contiguous() for k, v in model.state_dict().items() if "lora_" in k}


@torch.no_grad()
def heldout_scores(backbone, head, builder, records, groups, batch: int) -> dict[str, float]:
    """Mean reciprocal rank and accuracy of the passage in its group, over the held-out pairs."""
    ranks = []
    for start in range(0, len(records), batch):
        qs = [r["query"] for r in records[start : start + batch]]
        with torch.autocast("cpu", dtype=torch.bfloat16):
            s = group_scores(backbone, head, builder, qs, groups[start : start + batch])
        ranks += (1 + (s[:, 1:] > s[:, :1]).sum(1)).tolist()
    return {"mrr": sum(1 / r for r in ranks) / len(ranks), "accuracy": sum(r == 1 for r in ranks) / len(ranks)}


def merge(out: Path, base: Path, lora: dict[str, torch.Tensor], scale: float) -> None:
    """``out/decoder``: the base folder with W + scale * B @ A in each adapted weight; ``out/variant``: the default
    preset reading it as its base decoder."""
    target = out / "decoder"
    shutil.copytree(base, target, dirs_exist_ok=True)
    weights = load_file(str(base / "model.safetensors"))
    for key in [k for k in lora if ".lora_A." in k]:  # base_model.model.layers.0.self_attn.q_proj.lora_A.default.weight
        module = key.split("base_model.model.", 1)[1].rsplit(".lora_A.", 1)[0]
        b = lora[key.replace("lora_A", "lora_B")]
        name = f"model.{module}.weight"
        weights[name] = (weights[name].float() + scale * (b.float() @ lora[key].float())).to(weights[name].dtype)
    save_file(weights, str(target / "model.safetensors"), metadata={"format": "pt"})
    variant = out / "variant"
    shutil.copytree(resolve_variant_path(None), variant, dirs_exist_ok=True)
    config = json.loads((variant / CONFIG_FILE).read_text())
    config["decoder"] = str(target.resolve())
    (variant / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pairs", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--queries", type=int, default=4, help="queries a step")
    p.add_argument("--negatives", type=int, default=3)
    p.add_argument(
        "--negatives-from", choices=("page", "bm25"), default="page", help="the page's other sections, or BM25's hits"
    )
    p.add_argument("--bm25-depth", type=int, default=30, help="bm25: negatives are drawn from this many top hits")
    p.add_argument("--bm25-skip", type=int, default=4, help="bm25: ... less the best this many")
    p.add_argument("--max-length", type=int, default=192)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--lm-weight", type=float, default=0.0, help="weight of the passage's query's language-model loss")
    p.add_argument("--float-head", action="store_true", help="the head's logits in float32 (not under bf16 autocast)")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--rank", type=int, default=16)
    p.add_argument("--min-words", type=int, default=3)
    p.add_argument("--heldout", type=int, default=200, help="held-out pairs scored before and after (0: none)")
    p.add_argument("--save-every", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--resume", action="store_true")
    p.add_argument("--merge", action="store_true", help="only merge the saved adapters into a decoder and variant")
    args = p.parse_args()
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(args.seed)
    config = read_config(resolve_variant_path(None))
    source, tokenizer, prompt_format, default = scoring_layout(config, None)
    builder = PairBuilder(tokenizer, prompt_format, default.template, args.max_length)
    lora_config = LoraConfig(r=args.rank, lora_alpha=2 * args.rank, target_modules=TARGETS, lora_dropout=0.0)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.merge:
        merge(
            args.out,
            Path(source.location),
            load_file(str(args.out / "adapter.safetensors")),
            lora_config.lora_alpha / lora_config.r,
        )
        print(f"merged into {args.out / 'decoder'}; variant {args.out / 'variant'}")
        return

    backbone = load_backbone(source, dtype=torch.float32, attn_implementation="sdpa")
    head = input_embeddings(backbone).weight.detach()  # tied: SmolLM2's head is its word embeddings
    model = get_peft_model(backbone, lora_config)
    model.train()
    # A learnt scale on the scores (a temperature): the loss can lower its confidence on noisy groups (a negative
    # that answers the query too) without flattening the likelihoods themselves. The reranker z-scores, so ignores it.
    log_scale = torch.nn.Parameter(torch.zeros(()))
    params = [q for q in model.parameters() if q.requires_grad] + [log_scale]
    optimizer = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda s: min(1.0, (s + 1) / args.warmup) * 0.5 * (1 + math.cos(math.pi * min(s, args.steps) / args.steps)),
    )

    data = read_pairs(args.pairs, args.min_words)
    rng = random.Random(args.seed)
    train = data["train"]
    order = list(range(len(train)))
    rng.shuffle(order)
    heldout = data["heldout"]
    held_indices = random.Random(1).sample(range(len(heldout)), min(args.heldout, len(heldout)))
    steps_indices = [order[n % len(order)] for n in range(args.steps * args.queries)]
    train_pages = pages_of(train)
    if args.negatives_from == "bm25":
        held_negatives = bm25_negatives(held_indices, heldout, args.negatives, args.bm25_depth, 2, args.bm25_skip)
        train_negatives = bm25_negatives(
            sorted(set(steps_indices)), train, args.negatives, args.bm25_depth, 3, args.bm25_skip
        )
    else:
        held_pages = pages_of(heldout)
        held_negatives = {
            i: page_negatives(i, heldout, held_pages, args.negatives, random.Random(2 + i)) for i in held_indices
        }
    held = [heldout[i] for i in held_indices]
    held_groups = [[heldout[i]["positive"]] + [heldout[j]["positive"] for j in held_negatives[i]] for i in held_indices]
    history = (args.out / "history.jsonl").open("a", encoding="utf-8")
    step = 0
    if args.resume and (args.out / "state.pt").exists():
        state = torch.load(args.out / "state.pt", weights_only=True)
        model.load_state_dict(load_file(str(args.out / "adapter.safetensors")), strict=False)
        optimizer.load_state_dict(state["optimizer"])
        schedule.load_state_dict(state["schedule"])
        step = int(state["step"])
        with torch.no_grad():
            log_scale.copy_(state["log_scale"])
        print(f"resumed at step {step}")
    elif held:
        scores = heldout_scores(model, head, builder, held, held_groups, 8)
        history.write(json.dumps({"step": 0, "heldout": scores}) + "\n")
        print(f"held out before training: {scores}", flush=True)
    sample_rng = random.Random(args.seed + 1)
    started = time.perf_counter()
    while step < args.steps:
        indices = [order[(step * args.queries + i) % len(order)] for i in range(args.queries)]
        picked = [train[i] for i in indices]
        sample_rng.seed(args.seed * 1_000_003 + step)  # a resumed step draws the negatives it would have drawn
        negatives = (
            [train_negatives[i] for i in indices]
            if args.negatives_from == "bm25"
            else [page_negatives(i, train, train_pages, args.negatives, sample_rng) for i in indices]
        )
        docs = [[train[i]["positive"]] + [train[j]["positive"] for j in n] for i, n in zip(indices, negatives)]
        with torch.autocast("cpu", dtype=torch.bfloat16):
            scores_qd = group_scores(
                model, head, builder, [r["query"] for r in picked], docs, args.float_head
            )  # [Q, 1 + negatives]
        loss = F.cross_entropy(scores_qd * log_scale.exp(), torch.zeros(len(picked), dtype=torch.long))
        if args.lm_weight:  # the passage's query as text to predict: keeps the decoder a language model
            loss = loss - args.lm_weight * scores_qd[:, 0].mean()
        optimizer.zero_grad()
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        schedule.step()
        step += 1
        accuracy = (scores_qd.argmax(1) == 0).float().mean().item()
        history.write(
            json.dumps(
                {
                    "step": step,
                    "loss": loss.item(),
                    "accuracy": accuracy,
                    "grad_norm": norm.item(),
                    "scale": log_scale.exp().item(),
                    "lr": schedule.get_last_lr()[0],
                    "seconds": time.perf_counter() - started,
                }
            )
            + "\n"
        )
        history.flush()
        if step % 10 == 0:
            print(
                f"step {step} loss {loss.item():.3f} acc {accuracy:.2f} {time.perf_counter() - started:.0f}s",
                flush=True,
            )
        if step % args.save_every == 0 or step == args.steps:
            save_file(lora_state(model), str(args.out / "adapter.safetensors"))
            torch.save(
                {
                    "optimizer": optimizer.state_dict(),
                    "schedule": schedule.state_dict(),
                    "step": step,
                    "log_scale": log_scale.detach(),
                },
                args.out / "state.pt",
            )
    model.eval()
    if not held:
        return
    scores = heldout_scores(model, head, builder, held, held_groups, 8)
    history.write(json.dumps({"step": step, "heldout": scores}) + "\n")
    print(f"held out after {step} steps: {scores}", flush=True)


if __name__ == "__main__":
    main()
