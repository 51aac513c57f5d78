"""``distill``: the model learns to give the vectors another model gives the same texts (knowledge distillation).

The other model, the *teacher*, is a variant with the same embedding layout: typically the variant the run
starts from, before a change that costs it quality, such as a decoder with fewer layers (``decoder_layers``).
Each step embeds its queries and passages with both, each with its own instruction, from the same tokens; the
teacher without gradients. The loss is the cosine distance between the student's and the teacher's vector on each
view (``parts``, ``matryoshka``), and, with ``relations`` above zero, the squared difference between the two
models' query-passage cosine matrices on it: the geometry retrieval ranks by. No labels are read, so any dataset's
texts serve; sentence-transformers' ``MSELoss`` (Reimers & Gurevych 2020) is the same idea with a squared error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import torch
import torch.nn.functional as F
from pydantic import Field

from c2v_rag.training.gradcache import ContrastiveStep, PreparedStep
from c2v_rag.training.objectives.base import EmbeddingViewsConfig, Objective, ObjectiveContext, View, loss_views
from c2v_rag.training.step_texts import StepTexts

if TYPE_CHECKING:
    from c2v_rag.model.causal2vec import Causal2Vec


class DistillConfig(EmbeddingViewsConfig):
    """``objective.kind: distill``: match a teacher variant's vectors on the chosen views."""

    kind: Literal["distill"] = "distill"
    teacher: str = Field(
        description=(
            "the variant whose vectors the model learns to give: a preset's name, a variant's folder or a hub id "
            "(loaded as Causal2Vec.from_pretrained loads it); its embedding layout must be the model's"
        )
    )
    relations: float = Field(
        0.0,
        ge=0,
        description=(
            "weight of the mean squared difference between the student's and the teacher's query-passage cosine "
            "matrices, beside the cosine distance of each vector, on each view; 0 leaves it out. It is an order "
            "of magnitude smaller than the distance, so weigh it up to be heard"
        ),
    )


def cosine_distance(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """Mean of ``1 - cos`` between matching rows of ``student`` and ``teacher`` [N, d]: 0 when every row points
    the same way as its teacher's, whatever their lengths."""
    return (1 - F.cosine_similarity(student.float(), teacher.float(), dim=-1)).mean()


def relation_error(q: torch.Tensor, p: torch.Tensor, q_teacher: torch.Tensor, p_teacher: torch.Tensor) -> torch.Tensor:
    """Mean squared difference between the cosine matrices [B, M] of queries ``q`` [B, d] against passages ``p``
    [M, d] and of the teacher's."""

    def cosines(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return F.normalize(a.float(), dim=-1) @ F.normalize(b.float(), dim=-1).T

    return (cosines(q, p) - cosines(q_teacher, p_teacher)).pow(2).mean()


class DistillObjective(Objective[DistillConfig]):
    """The cosine distance to the teacher's vectors on each view, and optionally the error of the query-passage
    cosines; GradCache and several processes work as for ``contrastive`` (each process matches its own texts)."""

    config_type = DistillConfig
    prefetch = True

    def __init__(
        self, stepper: ContrastiveStep, teacher: Causal2Vec, views: Sequence[View], relations: float = 0.0
    ) -> None:
        self.stepper, self.teacher, self.views, self.relations = stepper, teacher, list(views), relations

    @classmethod
    def from_config(cls, config: DistillConfig, context: ObjectiveContext) -> DistillObjective:
        from c2v_rag.model.causal2vec import Causal2Vec

        # In the student's dtype and under the same autocast: the same numbers for the same weights.
        teacher = Causal2Vec.from_pretrained(config.teacher, device=context.device, dtype=context.model.dtype)
        check_teacher(teacher, context.model, config.teacher)
        teacher.eval().requires_grad_(False)
        return cls(context.stepper, teacher, loss_views(config, context.model), config.relations)

    def prepare(self, texts: StepTexts) -> PreparedStep:
        return self.stepper.prepare(texts.queries, texts.query_instructions, texts.passages, texts.passage_instructions)

    def backward(self, texts: StepTexts, step: int, prepared: object | None = None) -> float:
        if prepared is not None and not isinstance(prepared, PreparedStep):
            raise TypeError(f"the distill objective prepares a PreparedStep, not {type(prepared).__name__}")
        if prepared is None:
            prepared = self.prepare(texts)
        target = self.teacher_vectors(prepared)  # [B + M, d]: queries first, in the step's order
        target_q, target_p = target[: prepared.n_q], target[prepared.n_q :]

        def loss_fn(q: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
            # q [B, d], p [M, d]: the student's vectors of the same texts, in the same order.
            loss = q.new_zeros((), dtype=torch.float32)
            student = torch.cat([q, p])
            for view, weight in self.views:
                term = cosine_distance(student[:, view], target[:, view])
                if self.relations:
                    term = term + self.relations * relation_error(
                        q[:, view], p[:, view], target_q[:, view], target_p[:, view]
                    )
                loss = loss + weight * term
            return loss

        return self.stepper.run(
            texts.queries, texts.query_instructions, texts.passages, texts.passage_instructions, loss_fn, prepared
        )

    @torch.no_grad()
    def teacher_vectors(self, prepared: PreparedStep) -> torch.Tensor:
        """The teacher's vectors [B + M, d] of the step's prepared chunks (the same tokens the student reads),
        in the step's row order."""
        device = self.teacher.device
        total = sum(len(chunk.rows) for chunk in prepared.chunks)
        with self.stepper.autocast():
            reps = [
                self.teacher(chunk.batch.to(device), truncate_dim=self.stepper.truncate_dim).float()
                for chunk in prepared.chunks
            ]
        return ContrastiveStep.assemble(prepared.chunks, reps, total)


def check_teacher(teacher: Causal2Vec, student: Causal2Vec, reference: str) -> None:
    """Refuse a teacher whose vectors do not line up with the student's: another width, other parts, or other
    tokenizers (the teacher reads the tokens prepared for the student)."""
    problems = []
    if teacher.embedding_dim != student.embedding_dim:
        problems.append(f"its vectors have {teacher.embedding_dim} values, the model's {student.embedding_dim}")
    elif teacher.config.parts != student.config.parts:
        problems.append("its vector's parts lie elsewhere than the model's (representation, part weights)")
    if teacher.tokenizer.get_vocab() != student.tokenizer.get_vocab():
        problems.append("its decoder's tokenizer is not the model's")
    if (teacher.encoder_tokenizer is None) != (student.encoder_tokenizer is None) or (
        teacher.encoder_tokenizer is not None
        and teacher.encoder_tokenizer.get_vocab() != student.encoder_tokenizer.get_vocab()
    ):
        problems.append("its encoder's tokenizer is not the model's")
    if problems:
        raise ValueError(
            f"objective.teacher={reference!r} cannot teach this model: {'; '.join(problems)}. Distill from a "
            "variant of the same base models and readout (the variant the run starts from, say)"
        )
