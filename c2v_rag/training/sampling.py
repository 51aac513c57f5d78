"""Homogeneous batches: every batch comes from one dataset, and the order of batches is shuffled.

The plan is a pure function of (seed, step): any process, and a resumed run, computes the same
global batch for the same step without saving sampler state. Each process then takes its own
contiguous shard of the global batch.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from c2v_rag.training.data import Example
from c2v_rag.training.step_texts import StepTexts

if TYPE_CHECKING:
    from c2v_rag.core.instructions import Instruction


@dataclass(frozen=True)
class PlannedBatch:
    """The examples of one step on one process, and the whole step's examples (for masking)."""

    dataset: str
    local: list[Example]
    global_examples: list[Example]
    rank: int


class HomogeneousBatchPlan:
    """Single-dataset batches of ``global_batch_size`` examples, in a shuffled order, epoch by epoch.

    Per epoch, dataset ``d`` contributes ``round(weight_d * len_d / global_batch_size)`` batches (at
    least one); each batch draws examples without replacement from a fresh permutation. Batches
    never mix datasets, so in-batch negatives are always of the same kind as the positives
    (paper, Appendix A.1: "sampling the same dataset within each batch").
    """

    def __init__(
        self,
        datasets: dict[str, list[Example]],
        global_batch_size: int,
        *,
        seed: int,
        weights: dict[str, float] | None = None,
    ) -> None:
        if not datasets:
            raise ValueError("no training data: every dataset section came out empty")
        self.datasets = {name: examples for name, examples in sorted(datasets.items())}
        self.batch_size = global_batch_size
        self.seed = seed
        self.batches_per_epoch: dict[str, int] = {}
        for name, examples in self.datasets.items():
            if len(examples) < global_batch_size:
                raise ValueError(
                    f"dataset {name!r} has {len(examples)} examples, fewer than one batch of "
                    f"{global_batch_size} (batch_size x processes); lower training.batch_size or add data"
                )
            weight = (weights or {}).get(name, 1.0)
            self.batches_per_epoch[name] = max(1, round(weight * len(examples) / global_batch_size))
        self.epoch_length = sum(self.batches_per_epoch.values())
        self._cached_epoch: int | None = None
        self._cached_plan: list[tuple[str, list[int]]] = []

    def _epoch_plan(self, epoch: int) -> list[tuple[str, list[int]]]:
        if self._cached_epoch == epoch:
            return self._cached_plan
        plan: list[tuple[str, list[int]]] = []
        for name, examples in self.datasets.items():
            rng = random.Random(f"{self.seed}/{epoch}/{name}")
            needed = self.batches_per_epoch[name] * self.batch_size
            order: list[int] = []
            while len(order) < needed:
                permutation = list(range(len(examples)))
                rng.shuffle(permutation)
                order.extend(permutation)
            for b in range(self.batches_per_epoch[name]):
                plan.append((name, order[b * self.batch_size : (b + 1) * self.batch_size]))
        random.Random(f"{self.seed}/{epoch}/order").shuffle(plan)
        self._cached_epoch, self._cached_plan = epoch, plan
        return plan

    def global_batch(self, step: int) -> tuple[str, list[Example]]:
        """The dataset and examples of ``step`` (0-based), for all processes together."""
        epoch, position = divmod(step, self.epoch_length)
        name, indices = self._epoch_plan(epoch)[position]
        examples = self.datasets[name]
        return name, [examples[i] for i in indices]

    def batch(self, step: int, rank: int = 0, world_size: int = 1) -> PlannedBatch:
        """This process's shard of the step's global batch."""
        if self.batch_size % world_size:
            raise ValueError(f"global batch {self.batch_size} does not split over {world_size} processes")
        name, examples = self.global_batch(step)
        per_rank = self.batch_size // world_size
        return PlannedBatch(name, examples[rank * per_rank : (rank + 1) * per_rank], examples, rank)


def choose_negatives(example: Example, k: int, rng: random.Random) -> list[tuple[str, str]]:
    """``k`` of the example's hard negatives as (key, text), drawn without replacement."""
    pairs = list(zip(example.negative_keys, example.negatives))
    return pairs[:k] if len(pairs) <= k else rng.sample(pairs, k)


def layout_step(batch: PlannedBatch, *, num_negatives: int, seed: int, step: int, world_size: int) -> StepTexts:
    """Texts, targets and exclusion mask for this process's share of a step.

    Negatives are drawn with an RNG seeded by (seed, step), so every process, and a resumed run,
    picks the same ones. A passage is excluded from a query's negatives when its key is among
    the query's known positives (another positive of the same query, the same document, the same
    label) and it is not the query's own target.
    """
    k = num_negatives
    rng = random.Random(f"{seed}/negatives/{step}")
    per_rank = len(batch.global_examples) // world_size
    keys: list[str] = []
    rank_passages: list[tuple[str, Instruction]] = []
    for r in range(world_size):
        shard = batch.global_examples[r * per_rank : (r + 1) * per_rank]
        chosen = [choose_negatives(e, k, rng) for e in shard]
        if any(len(c) < k for c in chosen):
            raise ValueError(f"dataset {batch.dataset!r}: an example has fewer than {k} hard negatives")
        keys += [e.positive_key for e in shard] + [key for c in chosen for key, _ in c]
        if r == batch.rank:
            rank_passages = [(e.positive, e.passage_instruction) for e in shard]
            rank_passages += [(text, e.passage_instruction) for e, c in zip(shard, chosen) for _, text in c]
    offset = batch.rank * per_rank * (1 + k)
    targets = [offset + i for i in range(per_rank)]
    exclude = [
        [j != target and key in e.known_positive_keys for j, key in enumerate(keys)]
        for e, target in zip(batch.local, targets)
    ]
    return StepTexts(
        batch.dataset,
        [e.query for e in batch.local],
        [e.query_instruction for e in batch.local],
        [t for t, _ in rank_passages],
        [i for _, i in rank_passages],
        targets,
        exclude,
        k,
        _scores(batch.local),
    )


def _scores(examples: list[Example]) -> list[float] | None:
    scored = [e.score is not None for e in examples]
    if not any(scored):
        return None
    if not all(scored):
        raise ValueError("a batch mixes scored and unscored examples; one dataset must be all one or the other")
    return [float(e.score) for e in examples if e.score is not None]


def add_icl_examples(
    texts: StepTexts,
    local: list[Example],
    pool: list[Example],
    *,
    max_examples: int,
    seed: int,
    step: int,
    fits: Callable[[Instruction], bool] | None = None,
) -> StepTexts:
    """``texts`` with in-context examples before each query's instruction (bge-en-icl's training recipe).

    Each query draws a count uniformly from ``0..max_examples`` and that many ``(query, positive)`` pairs of
    ``pool`` (its own dataset), never one with its own query text, each shortened like the evaluation's
    (:func:`~c2v_rag.core.instructions.shorten_example`). Seeded by (seed, step): every process and a resumed run
    draw the same. Queries without an instruction keep none (an example block restates the instruction).
    Passages are untouched: documents get no examples.

    ``fits`` (the trainer's: the examples take at most half of ``max_length``) drops drawn examples from
    the end until the prompt passes: at inference a set that leaves no room for the text is an error, but
    a random draw in training must not stop the run, and the query must keep room to be read.
    """
    from c2v_rag.core.instructions import InContextPrompt, shorten_example

    if max_examples == 0 or not pool:
        return texts
    rng = random.Random(f"{seed}/icl/{step}")
    prompts: list = []
    for example, instruction in zip(local, texts.query_instructions):
        count = rng.randint(0, max_examples)
        if not instruction or count == 0:
            prompts.append(instruction)
            continue
        drawn: list[tuple[str, str]] = []
        for _ in range(count * 4):  # a few redraws past the query's own example; small pools may give fewer
            other = pool[rng.randrange(len(pool))]
            if other.query != example.query:
                drawn.append((shorten_example(other.query), shorten_example(other.positive)))
            if len(drawn) == count:
                break
        text = instruction.instruction if isinstance(instruction, InContextPrompt) else instruction
        prompt = InContextPrompt(text, tuple(drawn), example.dataset) if drawn else instruction
        while fits is not None and drawn and not fits(prompt):
            drawn.pop()
            prompt = InContextPrompt(text, tuple(drawn), example.dataset) if drawn else instruction
        prompts.append(prompt)
    return replace(texts, query_instructions=prompts)
