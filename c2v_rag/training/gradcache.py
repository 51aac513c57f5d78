"""One contrastive step, embedded whole or with gradient caching (GradCache, Gao et al. 2021).

Gradient caching gives the gradient of the full-batch loss with the memory of a mini-batch:

1. embed every mini-batch without building a graph, saving each one's RNG state;
2. compute the loss over all embeddings at once (every in-batch negative present) and backprop
   it only as far as the embeddings, caching d loss / d embedding;
3. re-embed each mini-batch with a graph, replaying its RNG state so dropout masks match, and
   backprop ``<embedding, cached gradient>``; parameter gradients add up to the full-batch ones.

Plain gradient accumulation would instead give each micro-batch only its own in-batch negatives.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import nn

from c2v_rag.core.instructions import InContextPrompt, Instruction
from c2v_rag.encode.batching import Causal2VecBatch
from c2v_rag.training.ddp import all_finite

if TYPE_CHECKING:
    from c2v_rag.model.causal2vec import Causal2Vec


class NonFiniteLossError(FloatingPointError):
    """The loss became NaN or infinite; raised before anything is backpropagated."""


class MultiBatchForward(nn.Module):
    """The model's forward over several batches in one call: the module DistributedDataParallel wraps in training.

    One call per backward pass is what DistributedDataParallel expects, so a step's query and
    passage batches go through a single forward. Each embedding comes back in float32.
    """

    def __init__(self, model: Causal2Vec) -> None:
        super().__init__()
        self.model = model
        # The width of the embedding prefix the loss reads (None: all of it); see ContrastiveStep.read_prefix.
        self.truncate_dim: int | None = None

    def forward(self, batches: list[Causal2VecBatch]) -> list[torch.Tensor]:
        return [self.model(batch, truncate_dim=self.truncate_dim).float() for batch in batches]


def prepare_batch(
    model: Causal2Vec, texts: Sequence[str], instructions: Sequence[Instruction], truncate_dim: int | None = None
) -> Causal2VecBatch:
    """Tokenize texts, each with its own instruction, into one collated batch on the CPU (for the prefix of
    ``truncate_dim`` values when given: see :meth:`Causal2Vec.needs_for`): the host's share of
    :func:`make_batch`, which prefetch workers run ahead of the step (:mod:`c2v_rag.training.prefetch`)."""
    if len(texts) != len(instructions):
        raise ValueError(f"{len(texts)} texts but {len(instructions)} instructions")
    pieces: list = [None] * len(texts)
    enc_ids: list | None = [None] * len(texts) if model.config.num_contextual_tokens else None
    groups: dict[Instruction, list[int]] = {}
    for i, instruction in enumerate(instructions):
        groups.setdefault(instruction, []).append(i)
    for instruction, rows in groups.items():
        group_pieces, group_enc = model.prepare([texts[i] for i in rows], instruction, truncate_dim=truncate_dim)
        for j, row in enumerate(rows):
            pieces[row] = group_pieces[j]
            if enc_ids is not None:
                assert group_enc is not None  # prepare tokenizes for the encoder whenever the model has one
                enc_ids[row] = group_enc[j]
    return model.collate(pieces, enc_ids)


def make_batch(
    model: Causal2Vec, texts: Sequence[str], instructions: Sequence[Instruction], truncate_dim: int | None = None
) -> Causal2VecBatch:
    """Tokenize texts, each with its own instruction, into one model-ready batch on the model's device
    (:func:`prepare_batch`, then moved)."""
    return prepare_batch(model, texts, instructions, truncate_dim).to(model.device)


def prompt_chars(instruction: Instruction) -> int:
    """Characters an instruction puts before the Contextual token, its in-context examples included."""
    if isinstance(instruction, InContextPrompt):
        return len(instruction.instruction or "") + sum(len(q) + len(r) for q, r in instruction.examples)
    return len(instruction or "")


@dataclass
class _Chunk:
    rows: list[int]
    batch: Causal2VecBatch
    rng_state: torch.Tensor | None = None
    cuda_rng_state: list[torch.Tensor] | None = None


@dataclass
class PreparedStep:
    """A step's texts tokenized into its length-sorted chunks, on the CPU: what :meth:`ContrastiveStep.prepare`
    builds and :meth:`ContrastiveStep.run` moves to the device. ``n_q`` rows are queries, the rest passages."""

    chunks: list[_Chunk]
    n_q: int

    def pin_memory(self) -> PreparedStep:
        """The same step with its tensors in page-locked memory, so the copy to a GPU can run asynchronously
        (torch's DataLoader calls this in its pinning thread)."""
        return PreparedStep([_Chunk(c.rows, c.batch.pin_memory()) for c in self.chunks], self.n_q)


LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


class ContrastiveStep:
    """Computes a step's loss and accumulates its parameter gradients.

    ``module`` is the :class:`MultiBatchForward` or its DistributedDataParallel wrapper; ``mini_batch_size``
    None embeds queries and passages in one pass each, otherwise GradCache runs with mini-batches
    of that many texts. ``autocast`` returns the mixed-precision context for forward passes.
    """

    def __init__(
        self,
        model: Causal2Vec,
        module: nn.Module,
        *,
        mini_batch_size: int | None = None,
        autocast: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext,
    ) -> None:
        self.model = model
        self.module = module
        self.mini_batch_size = mini_batch_size
        self.autocast = autocast
        self.last_replay_error: float | None = None
        self.truncate_dim: int | None = None

    def read_prefix(self, width: int) -> None:
        """Embed only the first ``width`` values from now on, when the model computes them from less than the
        whole forward pass (a prefix inside the encoder's part needs no decoder; see
        :meth:`Causal2Vec.needs_for`): a loss that reads only those values then trains at that cost, with the
        same gradients."""
        if width >= self.model.embedding_dim or self.model.needs_for(width) == "all":
            return
        self.truncate_dim = width
        inner = getattr(self.module, "module", self.module)
        inner.truncate_dim = width

    # ----------------------------------------------------------------------------------- helpers

    def prepare(
        self,
        queries: Sequence[str],
        query_instructions: Sequence[Instruction],
        passages: Sequence[str],
        passage_instructions: Sequence[Instruction],
    ) -> PreparedStep:
        """The step's host-side work, on the CPU: its queries and passages tokenized into the chunks
        :meth:`run` embeds. It reads only the tokenizers and settings, so a worker process can run it ahead."""
        n_q = len(queries)
        chunks = self._chunks(queries, query_instructions, 0) + self._chunks(passages, passage_instructions, n_q)
        return PreparedStep(chunks, n_q)

    def _chunks(self, texts: Sequence[str], instructions: Sequence[Instruction], offset: int) -> list[_Chunk]:
        # Length-sorted chunks pad little; rows remember where each embedding belongs. The length is the
        # decoder's whole input: in-context examples can be longer than the query they precede.
        order = sorted(range(len(texts)), key=lambda i: (len(texts[i]) + prompt_chars(instructions[i]), i))
        size = self.mini_batch_size or len(order)
        chunks = []
        for start in range(0, len(order), size):
            rows = order[start : start + size]
            batch = prepare_batch(
                self.model, [texts[i] for i in rows], [instructions[i] for i in rows], truncate_dim=self.truncate_dim
            )
            chunks.append(_Chunk([offset + r for r in rows], batch))
        return chunks

    def _no_sync(self, last: bool):
        if not last and isinstance(self.module, nn.parallel.DistributedDataParallel):
            return self.module.no_sync()
        return contextlib.nullcontext()

    # ----------------------------------------------------------------------------------- the step

    def run(
        self,
        queries: Sequence[str],
        query_instructions: Sequence[Instruction],
        passages: Sequence[str],
        passage_instructions: Sequence[Instruction],
        loss_fn: LossFn,
        prepared: PreparedStep | None = None,
    ) -> float:
        """Run forward and backward for one step; return the loss (of this process's queries).

        ``prepared`` is what :meth:`prepare` returned for these texts, when it ran ahead (in a prefetch
        worker); without it the texts are prepared here, by the same code.
        """
        if prepared is None:
            prepared = self.prepare(queries, query_instructions, passages, passage_instructions)
        if sum(len(c.rows) for c in prepared.chunks) != len(queries) + len(passages):
            raise ValueError("the prepared step holds other texts than the step's")
        device = self.model.device
        chunks = [_Chunk(c.rows, c.batch.to(device)) for c in prepared.chunks]
        if self.mini_batch_size is None:
            return self._run_whole(chunks, prepared.n_q, loss_fn)
        return self._run_cached(chunks, prepared.n_q, loss_fn)

    @staticmethod
    def assemble(chunks: Sequence[_Chunk], reps: list[torch.Tensor], total: int) -> torch.Tensor:
        """The chunks' embeddings ``reps`` [rows of each chunk, d] as one [total, d] tensor in the step's row order
        (queries first), undoing the length sort of :meth:`prepare`."""
        out = reps[0].new_empty((total, reps[0].size(1)))
        for chunk, rep in zip(chunks, reps):
            out[chunk.rows] = rep
        return out

    def _loss(self, loss_fn: LossFn, full: torch.Tensor, n_q: int) -> torch.Tensor:
        loss = loss_fn(full[:n_q], full[n_q:])
        if not all_finite(loss.detach()):
            raise NonFiniteLossError(f"the loss is {loss.item()} (on this process or another)")
        return loss

    def _run_whole(self, chunks: list[_Chunk], n_q: int, loss_fn: LossFn) -> float:
        total = sum(len(c.rows) for c in chunks)
        with self.autocast():
            reps = self.module([c.batch for c in chunks])
        # Scatter through index_put keeps the graph: rows go back to the caller's order.
        full = torch.zeros((total, reps[0].size(1)), dtype=reps[0].dtype, device=reps[0].device)
        full = full.index_put((torch.tensor([r for c in chunks for r in c.rows], device=full.device),), torch.cat(reps))
        loss = self._loss(loss_fn, full, n_q)
        loss.backward()
        return float(loss.detach())

    def _run_cached(self, chunks: list[_Chunk], n_q: int, loss_fn: LossFn) -> float:
        total = sum(len(c.rows) for c in chunks)
        inner = getattr(self.module, "module", self.module)  # the MultiBatchForward under DDP
        device = self.model.device
        cached: list[torch.Tensor] = []
        with torch.no_grad():
            for chunk in chunks:
                chunk.rng_state = torch.get_rng_state()
                if device.type == "cuda":
                    chunk.cuda_rng_state = torch.cuda.get_rng_state_all()
                with self.autocast():
                    cached.append(inner([chunk.batch])[0])
        full = self.assemble(chunks, cached, total).requires_grad_(True)
        loss = self._loss(loss_fn, full, n_q)
        loss.backward()
        grads = full.grad
        assert grads is not None  # the loss is computed from full
        replay_error = 0.0
        end_state = torch.get_rng_state()
        end_cuda = torch.cuda.get_rng_state_all() if device.type == "cuda" else None
        for i, chunk in enumerate(chunks):
            assert chunk.rng_state is not None  # recorded by the first pass
            torch.set_rng_state(chunk.rng_state)
            if chunk.cuda_rng_state is not None:
                torch.cuda.set_rng_state_all(chunk.cuda_rng_state)
            with self._no_sync(last=i == len(chunks) - 1):
                with self.autocast():
                    rep = self.module([chunk.batch])[0]
                replay_error = max(replay_error, float((rep.detach() - cached[i]).abs().max()))
                # d(sum <rep, g>)/d(theta) = sum_k g_k d rep_k / d theta: the chain rule's second half.
                torch.sum(rep * grads[chunk.rows]).backward()
        # Leave the RNG where the first pass left it, as a full-batch step would.
        torch.set_rng_state(end_state)
        if end_cuda is not None:
            torch.cuda.set_rng_state_all(end_cuda)
        self.last_replay_error = replay_error
        return float(loss.detach())
