"""The texts of one training step on one process: what every objective reads.

Kept apart from :mod:`~c2v_rag.training.sampling`, which lays a step out, so that the objectives (and the
training config, which names them) do not depend on how datasets are read.
"""

from __future__ import annotations

from dataclasses import dataclass

from c2v_rag.core.instructions import Instruction


@dataclass(frozen=True)
class StepTexts:
    """What one process embeds in a step, and how its queries score against the gathered passages.

    Passages are laid out per process as ``[positives; hard negatives (example-major)]`` and
    gathered in rank order, so ``targets``/``exclude`` index that global layout.
    """

    dataset: str
    queries: list[str]
    query_instructions: list[Instruction]
    passages: list[str]
    passage_instructions: list[Instruction]
    targets: list[int]
    exclude: list[list[bool]]
    num_negatives: int
    scores: list[float] | None = None  # per query: the gold score of (query, positive), cosent datasets only
