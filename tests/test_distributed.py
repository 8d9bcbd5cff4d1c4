"""DCP: token placement round trips, and the cross-rank top-k merge against a single-rank top-k
of the whole sequence, on real process groups (gloo on the CPU; NCCL world of 1 on a GPU)."""

import os
import tempfile
import warnings

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import fp4_inductor as fp4
from fp4_inductor.distributed import global_to_local, local_to_global, merge_topk
from fp4_inductor.layout import local_key_count
from fp4_inductor.testing import forbid_host_sync

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
    # Any shape is taken: the message says so, not "[None]" (a free size per dimension).
    with pytest.raises(ValueError, match=r"local_idx: expected an int32 or int64 tensor \(any shape\), got float32 "
                                         r"\[1\] on cpu$"):
        local_to_global(torch.tensor([1.0]), 0, 2, 1)
    with pytest.raises(ValueError, match=r"global_idx: expected an int32 or int64 tensor \(any shape\), got float32 "
                                         r"\[2, 3\] on cpu$"):
        global_to_local(torch.zeros(2, 3), 0, 2, 1)
    with pytest.raises(TypeError, match=r"global_idx: expected an int32 or int64 tensor \(any shape\), got list$"):
        global_to_local([1, 2], 0, 2, 1)
    with pytest.raises(ValueError, match="interleave: expected an int < 2147483648"):
        local_to_global(torch.tensor([1]), 0, 4, 2**62)


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


def test_merge_rejects_a_group_that_is_not_one():
    values, indices = torch.zeros(2, 3), torch.zeros(2, 3, dtype=torch.int32)
    with pytest.raises(TypeError, match="group: expected None or a torch.distributed ProcessGroup, got str"):
        merge_topk(values, indices, 2, group="dcp")


def dcp_problem(seed):
    """A ragged verify batch (query lengths 0-3, a request with fewer keys than rows, padding
    rows) with small-integer keys and queries: exact logits, many ties across ranks."""
    g = torch.Generator().manual_seed(seed)
    requests = 4
    query_lens = torch.randint(0, 4, (requests,), generator=g)
    query_lens[1] = 3
    seq_lens = query_lens + torch.randint(0, 300, (requests,), generator=g)
    seq_lens[1] = 2
    rows = int(query_lens.sum()) + 2
    keys = [torch.randint(-2, 3, (int(n), 128), generator=g).float() for n in seq_lens]
    q = torch.randint(-1, 2, (rows, 16, 128), generator=g).float()
    weights = torch.rand(rows, 16, generator=g).add(0.5).mul(4).round()
    return seq_lens, query_lens, rows, keys, q, weights


def dcp_cache(keys, tokens):
    """A merged cache holding, for each request i, the keys ``tokens(i)`` = (global token ids,
    their local indices) on permuted pages; with its block table."""
    placed = [tokens(i) for i in range(len(keys))]
    pages = max([1] + [int(local.max()) // 64 + 1 for _, local in placed if local.numel()])
    _, cache = fp4.allocate_merged_cache(len(keys) * pages, page_bytes=8192, index_offset=2048)
    block_table = torch.randperm(len(keys) * pages, generator=torch.Generator().manual_seed(3)).view(len(keys), pages)
    for i, (token, local) in enumerate(placed):
        fp4.store_keys(keys[i][token], cache, block_table[i, local // 64] * 64 + local % 64)
    return cache, block_table.int()


def dcp_rank_topk(problem, rank, world, interleave, k, index_dtype, group):
    """One DCP rank's decode step (its keys only), merged over ``group``: the global top-k."""
    seq_lens, query_lens, rows, keys, q, weights = problem

    def mine(i):
        token = torch.arange(keys[i].shape[0])
        token = token[(token // interleave) % world == rank]
        return token, global_to_local(token, rank, world, interleave).long()

    cache, block_table = dcp_cache(keys, mine)
    with forbid_host_sync():
        query_starts, row_ends = fp4.decode_layout(seq_lens.to(index_dtype), query_lens.to(index_dtype), rows,
                                                   rank, world, interleave)
        values, local = fp4.decode_step(q, cache, weights, block_table, query_starts, row_ends, 3, k)
        return merge_topk(values, local_to_global(local, rank, world, interleave), k, group=group)


def _dcp_worker(rank, world, init_file):
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        members = [2, 0]  # a subgroup, in another order than the global ranks
        subgroup = dist.new_group(members)
        for seed, interleave, k, index_dtype in [(1, 1, 7, torch.int64), (2, 16, 200, torch.int32),
                                                 (3, 64, 40, torch.int64)]:
            problem = dcp_problem(seed)
            seq_lens, query_lens, rows, keys, q, weights = problem
            cache, block_table = dcp_cache(keys, lambda i: (torch.arange(keys[i].shape[0]),) * 2)
            query_starts, row_ends = fp4.decode_layout(seq_lens, query_lens, rows)
            logits = fp4.score_paged(fp4.quantize_queries(q), cache, weights, block_table, query_starts, row_ends, 3)
            want = fp4.select_topk(logits, row_ends, k, sorted=True)
            for group, group_rank, group_world in [(None, rank, world), (subgroup, members.index(rank), 2)
                                                   if rank in members else (subgroup, None, None)]:
                if group_rank is None:
                    with pytest.raises(ValueError, match="group: expected a process group that this rank belongs to"):
                        merge_topk(*want, k, group=group)
                    continue
                with warnings.catch_warnings():
                    warnings.simplefilter("error", FutureWarning)  # no deprecated collective
                    got = dcp_rank_topk(problem, group_rank, group_world, interleave, k, index_dtype, group)
                case = f"rank {rank} of {group_world}, interleave {interleave}, k {k}"
                assert torch.equal(got[1], want[1]), f"{case}: indices differ"
                assert torch.equal(got[0].nan_to_num(123.0), want[0].nan_to_num(123.0)), f"{case}: values differ"
    finally:
        dist.destroy_process_group()


def test_dcp_decode_step_merged_equals_one_rank():
    """End to end on gloo: each rank stores only its keys (the SPEC's placement, permuted pages
    in a merged cache), runs decode_step with its local row ends and merges; the merged top-k
    equals one rank's over the whole sequence, exactly, with ties to the lower global index
    (a ragged verify batch, padding rows, a request with fewer keys than rows, int32 and int64
    lengths). Also over a subgroup of 2 of the 3 ranks; the rank outside it is refused by name.
    The rank step runs under forbid_host_sync."""
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(_dcp_worker, args=(3, os.path.join(tmp, "init")), nprocs=3, join=True)
