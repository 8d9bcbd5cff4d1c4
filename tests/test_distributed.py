"""DCP: token placement round trips, and the cross-rank top-k merge against a single-rank top-k
of the whole sequence, on real process groups (gloo on the CPU; NCCL world of 1 on a GPU)."""

import os
import tempfile

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import fp4_inductor as fp4
from fp4_inductor.distributed import global_to_local, local_to_global, merge_topk
from fp4_inductor.layout import local_key_count

from conftest import gpu


@pytest.mark.parametrize("world, interleave", [(1, 1), (2, 1), (3, 4), (4, 64)])
def test_placement_round_trip(world, interleave):
    t = torch.arange(1000, dtype=torch.int32)
    owners = torch.zeros_like(t)
    for rank in range(world):
        local = global_to_local(t, rank, world, interleave)
        mine = local >= 0
        owners += mine.int()
        assert torch.equal(local_to_global(local[mine], rank, world, interleave), t[mine])
        # Local indices on a rank are dense: 0, 1, 2, ... in global order.
        assert torch.equal(local[mine], torch.arange(int(mine.sum()), dtype=torch.int32))
    assert owners.eq(1).all()
    assert local_to_global(torch.tensor([-1, 0]), 0, world, interleave)[0] == -1
    assert global_to_local(torch.tensor([-1]), 0, world, interleave)[0] == -1


def test_placement_rejects():
    with pytest.raises(ValueError, match="rank"):
        local_to_global(torch.tensor([1]), 2, 2, 1)
    with pytest.raises(ValueError, match="local_idx: expected int32 or int64"):
        local_to_global(torch.tensor([1.0]), 0, 2, 1)
    with pytest.raises(TypeError, match="global_idx"):
        global_to_local([1, 2], 0, 2, 1)


def test_merge_refuses_fewer_candidates_than_k():
    """Local lists shorter than k could miss a member of the global top-k: refused from the
    shapes, before any collective."""
    values, indices = torch.zeros(2, 3), torch.zeros(2, 3, dtype=torch.int32)
    with pytest.raises(ValueError, match="values: expected at least k=4 candidates per row"):
        merge_topk(values, indices, 4)


def global_problem(seed=7, rows=6, tokens=900):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(rows, tokens, generator=g)
    logits[0] = torch.randint(0, 3, (tokens,), generator=g).float()  # ties across ranks
    logits[1, ::11] = float("nan")
    logits[3, 2:12:3] = float("-inf")  # real keys of a row with fewer than k: kept, not taken as missing
    row_ends = torch.tensor([900, 850, 300, 17, 0, 641], dtype=torch.int32)
    return logits, row_ends


def rank_candidates(logits, row_ends, rank, world, interleave, k):
    """What one DCP rank computes: its local logits, its local top-k, mapped to global indices."""
    local_len = int(local_key_count(torch.tensor(logits.shape[1]), rank, world, interleave))
    to_global = local_to_global(torch.arange(local_len, dtype=torch.int32), rank, world, interleave)
    local_logits = logits[:, to_global.long()]
    local_ends = local_key_count(row_ends.long(), rank, world, interleave).int()
    values, local_idx = fp4.select_topk(local_logits, local_ends, k)
    return values, local_to_global(local_idx, rank, world, interleave)


def _worker(rank, world, interleave, k, init_file):
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        logits, row_ends = global_problem()
        values, global_idx = rank_candidates(logits, row_ends, rank, world, interleave, k)
        merged_values, merged_idx = merge_topk(values, global_idx, k)
        want_values, want_idx = fp4.select_topk(logits, row_ends, k, sorted=True)
        assert torch.equal(merged_idx, want_idx), f"rank {rank}: indices differ"
        assert torch.equal(merged_values.nan_to_num(123.0), want_values.nan_to_num(123.0))
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("interleave", [1, 16])
def test_merge_topk_gloo_equals_single_rank(world, interleave):
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(_worker, args=(world, interleave, 40, os.path.join(tmp, "init")), nprocs=world, join=True)


@pytest.mark.gpu
@gpu
def test_merge_topk_nccl_world_of_one_in_cuda_graph():
    with tempfile.TemporaryDirectory() as tmp:
        dist.init_process_group("nccl", init_method=f"file://{tmp}/init", rank=0, world_size=1)
        try:
            logits, row_ends = global_problem()
            logits, row_ends = logits.cuda(), row_ends.cuda()
            values, idx = rank_candidates(logits, row_ends, 0, 1, 1, 40)
            want = merge_topk(values, idx, 40)
            stream = torch.cuda.Stream()
            with torch.cuda.stream(stream):
                merge_topk(values, idx, 40)  # warm up on the side stream
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                got = merge_topk(values, idx, 40)
            values.copy_(values.flip(1))
            graph.replay()
            torch.cuda.synchronize()
            assert torch.equal(got[1], merge_topk(values, idx, 40)[1])
            assert torch.equal(want[1], fp4.select_topk(logits, row_ends, 40, sorted=True)[1])
        finally:
            dist.destroy_process_group()
