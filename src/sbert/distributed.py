"""Data-parallel training over several processes (``torchrun``): who this process is, and what ranks exchange.

``torchrun --nproc_per_node N -m sbert train ...`` starts N processes with ``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT`` set; ``init_from_env`` joins them into one process
group (NCCL on CUDA, gloo on CPU). Every rank runs the same loop over the same global batches; each
embeds its share of a batch, and one all-reduce per step sums the ranks' gradients, so every rank takes
the step one process would take on the whole batch. Without ``torchrun`` (``WORLD_SIZE`` unset or 1)
every function here is the one-process case: rank 0 of 1, nothing exchanged.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import torch
import torch.distributed as dist
import torch.nn.functional as F


def active() -> bool:
    """Whether this process is one of several in a process group."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def rank() -> int:
    return dist.get_rank() if active() else 0


def world_size() -> int:
    return dist.get_world_size() if active() else 1


def is_main() -> bool:
    """Rank 0: the process that logs, shows progress, evaluates and writes checkpoints and the model."""
    return rank() == 0


def init_from_env(device: torch.device) -> torch.device:
    """Join torchrun's process group when ``WORLD_SIZE`` > 1 (NCCL for a CUDA ``device``, gloo otherwise);
    returns the device of this rank (``cuda:LOCAL_RANK`` on CUDA). A group set up already is kept."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1 and not dist.is_initialized():
        return device
    if device.type == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return device


def _comm_device() -> torch.device:
    """Where tensors exchanged must live: the current CUDA device for NCCL, the CPU for gloo."""
    return torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")


def barrier() -> None:
    if active():
        dist.barrier()


def share(n: int, of_rank: int | None = None) -> slice:
    """The contiguous part of ``range(n)`` a rank takes: sizes differ by at most one, earlier ranks larger."""
    who, ranks = rank() if of_rank is None else of_rank, world_size()
    size, extra = divmod(n, ranks)
    start = who * size + min(who, extra)
    return slice(start, start + size + (who < extra))


def share_sizes(n: int) -> list[int]:
    """How many of ``n`` rows each rank takes, in rank order."""
    return [len(range(n)[share(n, r)]) for r in range(world_size())]


def gather_rows(local: torch.Tensor, sizes: Sequence[int]) -> torch.Tensor:
    """Every rank's rows in rank order, (sum(sizes), d), given each rank's ``local`` (sizes[rank], d).

    This rank's rows keep their graph; the others' come without one. The ranks' losses computed from the
    gathered rows are then each differentiated through their own rows, and the all-reduce that sums
    gradients (``sum_gradients``) adds up the rest: the sum is the gradient of one process on all rows.
    """
    if not active():
        return local
    width = torch.tensor([local.shape[1] if local.ndim == 2 else 0], device=_comm_device())
    dist.all_reduce(width, op=dist.ReduceOp.MAX)  # a rank with no rows learns the width from the others
    longest = max(sizes)
    mine = local.detach().reshape(len(local), int(width)).to(_comm_device())
    padded = F.pad(mine, (0, 0, 0, longest - len(mine))).contiguous()
    pieces = [torch.empty_like(padded) for _ in sizes]
    dist.all_gather(pieces, padded)
    rows = [piece[:size].to(local.device, local.dtype) for piece, size in zip(pieces, sizes, strict=True)]
    rows[rank()] = local.reshape(len(local), int(width))
    return torch.cat(rows)


def sum_gradients(params: Sequence[torch.nn.Parameter], value: float) -> float:
    """Sum ``params``' gradients and ``value`` (this rank's part of the logged loss) over the ranks in one
    all-reduce. A parameter no rank gave a gradient keeps none (AdamW then leaves it alone, as in one
    process). Returns the summed value; one process: ``value``, gradients untouched."""
    if not active():
        return value
    device = _comm_device()
    flat = [
        torch.cat([p.grad.reshape(-1).float(), torch.ones(1, device=p.device)])
        if p.grad is not None
        else torch.zeros(p.numel() + 1, device=p.device)
        for p in params
    ]
    buffer = torch.cat([x.to(device) for x in flat] + [torch.tensor([value], device=device)])
    dist.all_reduce(buffer)
    for p, piece in zip(params, buffer[:-1].split([p.numel() + 1 for p in params]), strict=True):
        if piece[-1] > 0:  # some rank had a gradient
            p.grad = piece[:-1].reshape(p.shape).to(p.device, p.dtype)
    return float(buffer[-1])


def agree_on_stop(signum: int | None) -> int | None:
    """The signal any rank received (SIGINT/SIGTERM number), so that all stop after the same step."""
    if not active():
        return signum
    flag = torch.tensor([signum or 0], device=_comm_device())
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return int(flag) or None


def broadcast_module(module: torch.nn.Module) -> None:
    """Rank 0's parameters and buffers on every rank (the one-process start, whatever each rank built)."""
    if not active():
        return
    for tensor in [*module.parameters(), *module.buffers()]:
        data = tensor.data.to(_comm_device())
        dist.broadcast(data, src=0)
        tensor.data.copy_(data)
