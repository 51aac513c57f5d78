"""Multi-process training helpers: process-group setup from torchrun/accelerate, and a gather that
keeps gradients, so in-batch negatives span every process.

``torchrun --nproc_per_node N -m c2v_rag.cli train config.yaml`` and ``accelerate launch`` both set
``RANK``/``WORLD_SIZE``/``LOCAL_RANK``/``MASTER_ADDR``; :func:`init_distributed` reads them.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DistributedContext:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    initialized_here: bool = False

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init_distributed(device: torch.device | None = None) -> DistributedContext:
    """Join the process group described by the launcher's environment, if any.

    Uses NCCL on CUDA and gloo on CPU. A group that is already initialised is reused (and left
    for its owner to destroy).
    """
    if dist.is_available() and dist.is_initialized():
        return DistributedContext(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", 0)))
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return DistributedContext()
    if not dist.is_available():
        raise RuntimeError("WORLD_SIZE > 1 but this torch build has no torch.distributed support")
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = (device is None or device.type == "cuda") and torch.cuda.is_available()
    if use_cuda:
        torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl" if use_cuda else "gloo")
    logger.info("joined process group: rank %d of %d", dist.get_rank(), dist.get_world_size())
    return DistributedContext(dist.get_rank(), dist.get_world_size(), local_rank, initialized_here=True)


class _GatherWithGrad(torch.autograd.Function):
    """all_gather whose backward hands each process the summed gradient of its own slice.

    Every process computes a loss over the gathered tensor, so the gradient of the total loss
    with respect to one process's slice is the sum of that slice's gradients over all processes:
    an all_reduce of the full gradient, then the local slice. (Plain ``dist.all_gather`` cuts the
    graph: other processes' losses would never reach this process's embeddings.)
    """

    @staticmethod
    def forward(ctx, tensor: torch.Tensor) -> torch.Tensor:
        world, rank = dist.get_world_size(), dist.get_rank()
        tensor = tensor.contiguous()
        parts = [torch.empty_like(tensor) for _ in range(world)]
        dist.all_gather(parts, tensor)
        ctx.rank, ctx.rows = rank, tensor.size(0)
        return torch.cat(parts, dim=0)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, op=dist.ReduceOp.SUM)
        return grad[ctx.rank * ctx.rows : (ctx.rank + 1) * ctx.rows]


def gather_with_grad(tensor: torch.Tensor) -> torch.Tensor:
    """Concatenate ``tensor`` [n, d] from every process in rank order, keeping gradients.

    All processes must pass the same shape. Without a process group it returns ``tensor``.
    """
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return tensor
    return _GatherWithGrad.apply(tensor)


def all_reduce_mean(value: float, device: torch.device | None = None) -> float:
    """The mean of a scalar over processes (for logging the loss)."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return value
    t = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return float(t.item()) / dist.get_world_size()


def all_finite(value: torch.Tensor) -> bool:
    """Whether ``value`` is finite on every process (so all of them stop together, or none does)."""
    finite = bool(torch.isfinite(value).all())
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return finite
    flag = torch.tensor([1 if finite else 0], dtype=torch.int32, device=value.device)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    return bool(flag.item())


def barrier() -> None:
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        dist.barrier()
