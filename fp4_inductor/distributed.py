"""Decode context parallelism: token placement across ranks and an exact cross-rank top-k merge.

Global token ``t`` lives on rank ``(t // interleave) % world`` at local index
``(t // (interleave * world)) * interleave + t % interleave`` (docs/layouts.md, "Rows, requests and keys";
``decode_layout`` counts each rank's visible keys the same way). Everything
here has fixed shapes and no host reads, so it traces and captures in a CUDA
graph (NCCL) and runs on the CPU (gloo).
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.distributed as dist

from ._checks import INDEX_DTYPES, check_int, check_tensor, describe
from .reference import top_of


# torch 2.13 deprecates all_gather_into_tensor (a FutureWarning per process, an error under
# -W error) for all_gather_single, which older releases lack; Dynamo traces both.
_all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor


def _check_placement(rank: int, world: int, interleave: int) -> None:
    check_int("world", world, minimum=1, below=2**31)  # as decode_layout's: the product stays in int64
    check_int("rank", rank, minimum=0, below=world)
    check_int("interleave", interleave, minimum=1, below=2**31)


def _check_index_tensor(name: str, t: object) -> None:
    """An int32 or int64 tensor of any shape."""
    expected = f"{name}: expected an int32 or int64 tensor (any shape), got {describe(t)}"
    if not isinstance(t, torch.Tensor):
        raise TypeError(expected)
    if t.dtype not in INDEX_DTYPES:
        raise ValueError(expected)


def local_to_global(local_idx: torch.Tensor, rank: int, world: int, interleave: int = 1) -> torch.Tensor:
    """Global token index of each local index on ``rank``: int32 in, int32 out; -1 stays -1.
    Computed in int64; the result must fit int32 (a context below 2**31 tokens), as the token
    indices of ``select_topk`` do. Not checked: a check would read the data on the host."""
    _check_placement(rank, world, interleave)
    _check_index_tensor("local_idx", local_idx)
    local = local_idx.to(torch.int64)
    cycle, within = local // interleave, local % interleave
    global_idx = cycle * (interleave * world) + rank * interleave + within
    return torch.where(local < 0, -1, global_idx).to(torch.int32)


def global_to_local(global_idx: torch.Tensor, rank: int, world: int, interleave: int = 1) -> torch.Tensor:
    """Local index on ``rank`` of each global token, int32; -1 for -1 and for tokens another rank
    holds. The local index must fit int32 (as ``local_to_global``'s result does); not checked."""
    _check_placement(rank, world, interleave)
    _check_index_tensor("global_idx", global_idx)
    t = global_idx.to(torch.int64)
    owner = (t // interleave) % world
    local = (t // (interleave * world)) * interleave + t % interleave
    return torch.where((t < 0) | (owner != rank), -1, local).to(torch.int32)


def merge_topk(
    values: torch.Tensor, global_indices: torch.Tensor, k: int, group: Optional[dist.ProcessGroup] = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The global top-k from every rank's local top-k candidates.

    values: float32 [rows, k_local]; global_indices: int32 [rows, k_local] (-1 where a rank had
    fewer keys, with value -inf); k_local >= k (``select_topk`` with the same k gives that). All
    ranks pass the same shapes. The candidates are all-gathered
    through ``torch.distributed`` and the top-k of the union is taken: value first, ties to the
    lower global index, NaN lowest, -inf / -1 where fewer than k exist. Sorted.

    Exact: a member of the global top-k is in its owner's local top-k, because every key that
    outranks it on that rank also outranks it globally, and ranks order ties by local index,
    which follows global order within a rank. So the union of the local top-k lists contains
    the global top-k. With k_local < k a rank's (k_local + 1)-th key could belong to it, so that
    is refused (from the shapes: the lists themselves are not read).
    """
    check_tensor("values", values, dtypes=(torch.float32,), shape=("rows", "k_local"))
    check_tensor("global_indices", global_indices, dtypes=(torch.int32,), shape=tuple(values.shape), device=values.device)
    check_int("k", k, minimum=1)
    if values.shape[1] < k:
        raise ValueError(f"values: expected at least k={k} candidates per row (each rank's local top-k with "
                         f"k_local >= k), got {describe(values)}")
    if group is dist.GroupMember.NON_GROUP_MEMBER:  # what new_group hands a rank outside it
        raise ValueError(f"group: expected a process group that this rank belongs to, got one without "
                         f"global rank {dist.get_rank()} (GroupMember.NON_GROUP_MEMBER)")
    if group is not None and not isinstance(group, dist.ProcessGroup):
        raise TypeError(f"group: expected None or a torch.distributed ProcessGroup, got {describe(group)}")
    world = dist.get_world_size(group)
    rows, k_local = values.shape
    # Ranks concatenated along dim 0 (the form gloo and NCCL both take).
    gathered_values = values.new_empty((world * rows, k_local))
    gathered_indices = global_indices.new_empty((world * rows, k_local))
    _all_gather(gathered_values, values.contiguous(), group=group)
    _all_gather(gathered_indices, global_indices.contiguous(), group=group)
    all_values = gathered_values.view(world, rows, k_local).permute(1, 0, 2).reshape(rows, world * k_local)
    all_indices = gathered_indices.view(world, rows, k_local).permute(1, 0, 2).reshape(rows, world * k_local)
    missing = all_indices < 0
    return top_of(all_values, all_indices.clamp_min(0), missing, k)
