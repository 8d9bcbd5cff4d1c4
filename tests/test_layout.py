"""decode_layout against a plain Python loop; cache views; merged-cache allocation; tile size."""

import pytest
import torch

import fp4_inductor as fp4
from fp4_inductor import formats as F


def layout_loop(seq_lens, query_lens, num_rows, rank, world, interleave):
    starts = [0]
    for n in query_lens:
        starts.append(starts[-1] + n)
    ends = []
    for r in range(num_rows):
        end = 0
        for i in range(len(query_lens)):
            if starts[i] <= r < starts[i + 1]:
                visible = max(0, seq_lens[i] - query_lens[i] + (r - starts[i]) + 1)
                end = sum(1 for t in range(visible) if (t // interleave) % world == rank)
        ends.append(end)
    return starts, ends


@pytest.mark.parametrize("world", [1, 2, 3, 4])
@pytest.mark.parametrize("interleave", [1, 4, 64])
def test_decode_layout_matches_loop(world, interleave, gen):
    for trial in range(4):
        requests = int(torch.randint(1, 7, (1,), generator=gen))
        query_lens = torch.randint(0, 9, (requests,), generator=gen)
        seq_lens = query_lens + torch.randint(0, 700, (requests,), generator=gen)
        seq_lens[0] = max(int(query_lens[0]) - 2, 0)  # fewer keys than rows: clamps at 0
        extra = int(torch.randint(0, 4, (1,), generator=gen))  # graph-padding rows
        num_rows = int(query_lens.sum()) + extra
        dtype = (torch.int32, torch.int64)[trial % 2]
        for rank in range(world):
            starts, ends = fp4.decode_layout(seq_lens.to(dtype), query_lens.to(dtype), num_rows, rank, world, interleave)
            want_starts, want_ends = layout_loop(seq_lens.tolist(), query_lens.tolist(), num_rows, rank, world, interleave)
            assert starts.dtype == ends.dtype == torch.int32
            assert starts.tolist() == want_starts and ends.tolist() == want_ends


def test_decode_layout_ranks_partition_keys(gen):
    seq_lens, query_lens = torch.tensor([1000, 77, 5]), torch.tensor([3, 1, 2])
    total = sum(fp4.decode_layout(seq_lens, query_lens, 6, r, 4, 16)[1] for r in range(4))
    assert total.tolist() == fp4.decode_layout(seq_lens, query_lens, 6)[1].tolist()


def test_decode_layout_saturates_ends_past_int32_and_drops_negative_query_lens():
    """row_ends are int32: an int64 sequence past 2**31 keys saturates at 2**31 - 1 (every key
    of the row, as the kernels clamp it to the width) instead of wrapping (2**32 + 5 read as 5).
    A negative query length (not read on the host, so not refused) counts as no rows, keeping
    query_starts ascending."""
    seq_lens = torch.tensor([2**31 + 5, 2**32 + 5, 40], dtype=torch.int64)
    starts, ends = fp4.decode_layout(seq_lens, torch.tensor([1, 2, 1]), 4)
    assert starts.tolist() == [0, 1, 3, 4]
    assert ends.tolist() == [2**31 - 1, 2**31 - 1, 2**31 - 1, 40]
    starts, ends = fp4.decode_layout(torch.tensor([10, 20, 30]), torch.tensor([2, -3, 1]), 4)
    assert starts.tolist() == [0, 2, 2, 3]
    assert ends.tolist() == [9, 10, 30, 0]


def test_valid_region_against_a_loop(gen):
    """reference.valid_region, which every scoring test masks its comparison with, against a
    plain loop: row r's entries j < row_ends[r], for rows below query_starts[-1] only."""
    from fp4_inductor.reference import valid_region

    for trial in range(6):
        query_lens = torch.randint(0, 4, (3,), generator=gen)
        seq_lens = query_lens + torch.randint(0, 150, (3,), generator=gen)
        rows = int(query_lens.sum()) + trial % 3  # graph-padding rows
        starts, ends = fp4.decode_layout(seq_lens, query_lens, rows, trial % 2, 1 + trial % 2)
        ends += 1  # ends that are not decode_layout's own: padding rows with keys too
        width = 192
        got = valid_region(starts, ends, width)
        want = [[r < starts[-1] and j < ends[r] for j in range(width)] for r in range(rows)]
        assert got.tolist() == want


def test_decode_layout_extra_seq_lens_and_no_rows():
    starts, ends = fp4.decode_layout(torch.tensor([10, 20, 30]), torch.tensor([1, 2]), 0)
    assert starts.tolist() == [0, 0, 0] and ends.shape == (0,)  # no rows: every request is empty


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(num_rows=-1), "num_rows"),
        (dict(num_rows=2.0), "num_rows"),
        (dict(dcp_rank=2, dcp_world_size=2), "dcp_rank"),
        (dict(dcp_rank=-1), "dcp_rank"),
        (dict(dcp_world_size=0), "dcp_world_size"),
        (dict(interleave=0), "interleave"),
        # A cycle past int64 raised OverflowError or a schema error naming neither.
        (dict(interleave=2**62), "interleave: expected an int < 2147483648, got 4611686018427387904"),
        (dict(dcp_world_size=2**63), "dcp_world_size: expected an int < 2147483648"),
        (dict(seq_lens=torch.tensor([5])), "seq_lens"),
        (dict(seq_lens=torch.tensor([[5, 5]])), "seq_lens"),
        (dict(query_lens=torch.tensor([1.0, 1.0])), "query_lens"),
    ],
)
def test_decode_layout_rejects(kwargs, match):
    args = dict(seq_lens=torch.tensor([5, 6]), query_lens=torch.tensor([1, 1]), num_rows=2)
    args.update(kwargs)
    with pytest.raises((ValueError, TypeError), match=match):
        fp4.decode_layout(**args)


def test_decode_tile_size():
    assert fp4.decode_tile_size(131072, 131072, 2048, 64) == max(32, 128 * 131072 // (4 * 131072 + 24 * 2048 + 64 * 64 + 256))
    assert fp4.decode_tile_size(1024, 1 << 20, 2048, 64) == 32
    assert fp4.decode_tile_size(8192, 100, 2048, 16) == 128 * 8192 // (400 + 2400 + 1024 + 256)
    with pytest.raises(ValueError, match="heads: expected one of \\(16, 32, 64\\)"):
        fp4.decode_tile_size(8192, 100, 2048, 17)


def test_cache_views_are_views_with_spec_offsets(gen):
    buffer, cache = fp4.allocate_merged_cache(3, page_bytes=8192 + 64, index_offset=2048)
    payload, scales = fp4.cache_views(cache)
    assert payload.shape == (3, 1, 4, 64, 16) and scales.shape == (3, 1, 4, 64)
    assert payload.untyped_storage().data_ptr() == buffer.untyped_storage().data_ptr()
    payload[1, 0, 2, 37, 5] = 0xAB
    scales[2, 0, 3, 45] = 0xCD
    assert buffer[1, 2048 + F.section_payload_offset(37, 2, 5)] == 0xAB
    assert buffer[2, 2048 + F.SECTION_PAYLOAD_BYTES + 3 * 64 + 45] == 0xCD
    # cache[:, 60, 16:] starts exactly 4096 bytes into a section (60 * 68 + 16): the scales.
    assert cache[:, 60, 16:].storage_offset() - cache.storage_offset() == 4096


@pytest.mark.parametrize(
    "cache, match",
    [
        (torch.zeros(3, 64, 68, dtype=torch.float16), "float16 \\[3, 64, 68\\]"),
        (torch.zeros(3, 64, 67, dtype=torch.uint8), "\\[pages, 64, 68\\]"),
        (torch.zeros(3, 4352, dtype=torch.uint8), "\\[pages, 64, 68\\]"),
        (torch.zeros(3, 68, 64, dtype=torch.uint8).transpose(1, 2), "strides"),
        (torch.zeros(3 * 4352, dtype=torch.uint8).as_strided((3, 64, 68), (4000, 68, 1)), "page stride"),
        (torch.zeros(3 * 4352, dtype=torch.uint8).as_strided((3, 64, 68), (4336, 68, 1)), "page stride"),
        (torch.zeros(3 * 8192, dtype=torch.uint8).as_strided((3, 64, 68), (8192, 68, 2)), "strides"),
        (torch.zeros(3, 64, 68, 1, dtype=torch.uint8), "\\[pages, 64, 68\\]"),
        ("cache", "expected a tensor"),
    ],
)
def test_cache_views_rejects(cache, match):
    with pytest.raises((ValueError, TypeError), match=match):
        fp4.cache_views(cache)


def test_allocate_rejects_bad_geometry():
    with pytest.raises(ValueError, match="page_bytes"):
        fp4.allocate_merged_cache(2, page_bytes=4000)
    with pytest.raises(ValueError, match="multiple of 16"):
        fp4.allocate_merged_cache(2, page_bytes=8192, index_offset=8)
    with pytest.raises(ValueError, match="num_pages"):
        fp4.allocate_merged_cache(0)
    overlapping = torch.zeros(8192 + 16, dtype=torch.uint8).as_strided((2, 8192), (16, 1))
    with pytest.raises(ValueError, match="pages_buffer: expected pages that do not overlap"):
        fp4.index_section(overlapping, 0)
    pages = torch.zeros(2, 8192, dtype=torch.uint8)
    assert fp4.index_section(pages, 8192 - 4352).shape == (2, 64, 68)  # the last section that fits
    with pytest.raises(ValueError, match="offset: expected an int < 3841"):
        fp4.index_section(pages, 8192 - 4352 + 16)
