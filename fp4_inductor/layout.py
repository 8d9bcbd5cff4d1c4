"""Where things are: the index section inside merged pages, and which keys each decode row sees.

Everything here is shape arithmetic or device ops: no host reads, so it traces
and captures.
"""

from __future__ import annotations

import torch

from . import formats as F
from ._checks import INDEX_DTYPES, check_int, check_tensor, describe, size_below


def check_cache(cache: object, name: str = "cache") -> torch.Tensor:
    """``cache`` must be ``uint8 [pages, 64, 68]`` with strides ``(S, 68, 1)``, ``S >= 4352``."""
    check_tensor(name, cache, dtypes=(torch.uint8,), shape=("pages", F.PAGE_TOKENS, F.BYTES_PER_TOKEN))
    assert isinstance(cache, torch.Tensor)
    stride = cache.stride()
    page_stride_ok = cache.shape[0] <= 1 or stride[0] >= F.SECTION_BYTES
    if stride[1] != F.BYTES_PER_TOKEN or stride[2] != 1 or not page_stride_ok:
        raise ValueError(
            f"{name}: expected strides (S, {F.BYTES_PER_TOKEN}, 1) with page stride S >= {F.SECTION_BYTES}, "
            f"got strides {tuple(stride)} for {describe(cache)}"
        )
    return cache


def cache_views(cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Strided views (no copy) of the payload and scale bytes of an index cache.

    cache: uint8 [pages, 64, 68], strides (S, 68, 1), S >= 4352, any storage offset.

    Returns ``payload uint8 [pages, 1, 4, 64, 16]`` (group, token, byte) and
    ``scales uint8 [pages, 1, 4, 64]`` (group, ``(t % 16) * 4 + t // 16``).
    Raises ValueError for any other dtype, rank, shape or strides.
    """
    check_cache(cache)
    pages = cache.shape[0]
    # The 64x68 bytes of one section are contiguous, so flattening is a view;
    # the section start is kept without reading storage_offset().
    section = cache.flatten(1)
    payload = section[:, : F.SECTION_PAYLOAD_BYTES].view(pages, 1, F.GROUPS, F.PAGE_TOKENS, F.GROUP_BYTES)
    scales = section[:, F.SECTION_PAYLOAD_BYTES :].view(pages, 1, F.GROUPS, F.PAGE_TOKENS)
    return payload, scales


def index_section(pages_buffer: torch.Tensor, offset: int) -> torch.Tensor:
    """The ``[pages, 64, 68]`` index-cache view of bytes ``[offset, offset + 4352)`` of each page.

    pages_buffer: uint8 [pages, page_bytes], contiguous rows (stride(1) == 1).
    offset: Python int, a multiple of 16 so that kernels can use 16-byte loads.
    """
    check_tensor("pages_buffer", pages_buffer, dtypes=(torch.uint8,), shape=("pages", "page_bytes"))
    if pages_buffer.stride(1) != 1:
        raise ValueError(f"pages_buffer: expected byte stride 1 within a page, got strides {pages_buffer.stride()}")
    page_bytes = pages_buffer.shape[1]
    if pages_buffer.shape[0] > 1 and pages_buffer.stride(0) < page_bytes:
        raise ValueError(f"pages_buffer: expected pages that do not overlap (page stride >= {page_bytes}), "
                         f"got strides {pages_buffer.stride()}")
    if page_bytes < F.SECTION_BYTES:
        raise ValueError(f"pages_buffer: expected at least {F.SECTION_BYTES} bytes per page, got {describe(pages_buffer)}")
    check_int("offset", offset, minimum=0, below=page_bytes - F.SECTION_BYTES + 1)
    if offset % 16:
        raise ValueError(f"offset: expected a multiple of 16, got {offset}")
    return pages_buffer[:, offset : offset + F.SECTION_BYTES].unflatten(1, (F.PAGE_TOKENS, F.BYTES_PER_TOKEN))


def allocate_merged_cache(
    num_pages: int,
    page_bytes: int | None = None,
    index_offset: int = 0,
    *,
    device: torch.device | str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Allocate merged pages and hand back the index section as ``[pages, 64, 68]``.

    num_pages: pages of 64 tokens.
    page_bytes: bytes per merged page (default: just the index section, 4352);
        a multiple of 16 and at least ``index_offset + 4352``.
    index_offset: where the index section starts inside a page (multiple of 16).

    Returns ``(pages uint8 [num_pages, page_bytes], index_cache uint8 [num_pages, 64, 68])``,
    the second a view into the first. The buffer is zeroed: a zero section is
    valid FP4 (value 0, scale 2**-127).
    """
    check_int("num_pages", num_pages, minimum=1)
    check_int("index_offset", index_offset, minimum=0)
    if index_offset % 16:
        raise ValueError(f"index_offset: expected a multiple of 16, got {index_offset}")
    if page_bytes is None:
        page_bytes = index_offset + F.SECTION_BYTES
    check_int("page_bytes", page_bytes, minimum=index_offset + F.SECTION_BYTES)
    if page_bytes % 16:
        raise ValueError(f"page_bytes: expected a multiple of 16, got {page_bytes}")
    pages = torch.zeros(num_pages, page_bytes, dtype=torch.uint8, device=device)
    return pages, index_section(pages, index_offset)


def check_layout_args(num_rows: object, dcp_rank: object, dcp_world_size: object, interleave: object) -> None:
    check_int("num_rows", num_rows, minimum=0)
    # Both below 2**31 (token positions are int32 on the device): their product stays in int64.
    check_int("dcp_world_size", dcp_world_size, minimum=1, below=2**31)
    check_int("dcp_rank", dcp_rank, minimum=0, below=dcp_world_size)  # type: ignore[arg-type]
    check_int("interleave", interleave, minimum=1, below=2**31)


def check_lengths(seq_lens: object, query_lens: object) -> None:
    check_tensor("seq_lens", seq_lens, dtypes=INDEX_DTYPES, shape=("requests",))
    check_tensor("query_lens", query_lens, dtypes=INDEX_DTYPES, shape=("requests",))
    assert isinstance(seq_lens, torch.Tensor) and isinstance(query_lens, torch.Tensor)
    if size_below(seq_lens.shape[0], query_lens.shape[0]):  # no guard on unbacked sizes
        raise ValueError(
            f"seq_lens: expected at least one length per request ({query_lens.shape[0]}), got {describe(seq_lens)}"
        )
    if seq_lens.device != query_lens.device:
        raise ValueError(f"seq_lens: expected the device of query_lens ({query_lens.device}), got {describe(seq_lens)}")


def local_key_count(global_ends: torch.Tensor, dcp_rank: int, dcp_world_size: int, interleave: int) -> torch.Tensor:
    """How many of the global tokens ``[0, end)`` live on ``dcp_rank``.

    Token ``t`` lives on rank ``(t // interleave) % world``: each cycle of
    ``interleave * world`` tokens gives every rank ``interleave`` of them.
    """
    cycle = interleave * dcp_world_size
    full, rest = global_ends // cycle, global_ends % cycle
    return full * interleave + (rest - dcp_rank * interleave).clamp(0, interleave)


def decode_layout_impl(
    seq_lens: torch.Tensor,
    query_lens: torch.Tensor,
    num_rows: int,
    dcp_rank: int,
    dcp_world_size: int,
    interleave: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    device = query_lens.device
    requests = query_lens.shape[0]
    # A negative length (not read on the host, so not refused) counts as no rows: query_starts
    # stays ascending.
    query_lens = query_lens.to(torch.int64).clamp(min=0)
    seq_lens = seq_lens[:requests].to(torch.int64)
    query_ends = torch.cumsum(query_lens, 0)
    query_starts = torch.nn.functional.pad(query_ends, (1, 0))
    rows = torch.arange(num_rows, device=device, dtype=torch.int64)
    # request(r): the i with query_starts[i] <= r < query_starts[i + 1]. The boundaries are the
    # cumsum itself, not a slice of query_starts: Inductor's searchsorted lowering (torch 2.11)
    # cannot take a sliced view (NotImplementedError: SliceView).
    request = torch.searchsorted(query_ends, rows, right=True)
    in_batch = request < requests
    request = request.clamp(max=max(requests - 1, 0))
    if requests == 0:
        global_ends = torch.zeros_like(rows)
    else:
        position = rows - query_starts[request]
        global_ends = (seq_lens[request] - query_lens[request] + position + 1).clamp(min=0)
    row_ends = local_key_count(global_ends, dcp_rank, dcp_world_size, interleave)
    row_ends = torch.where(in_batch, row_ends, 0)
    # With fewer rows than the requests ask for, the rows past num_rows do not exist: clamped,
    # query_starts never sends a kernel past the last row.
    # An end past int32 saturates (every key of the row: the kernels cut it to the width) instead
    # of wrapping.
    row_ends = row_ends.clamp(max=torch.iinfo(torch.int32).max)
    return query_starts.clamp(max=num_rows).to(torch.int32), row_ends.to(torch.int32)


def check_head_count(heads: int) -> None:
    """A head count the FP4 query layout takes."""
    if heads not in F.QUERY_HEADS:
        raise ValueError(f"heads: expected one of {F.QUERY_HEADS} (the FP4 query layout), got {heads}")


def decode_tile_size(max_model_len: int, width: int, topk: int, heads: int) -> int:
    """Rows to score at once so logits, top-k scratch and queries fit ``128 * max_model_len`` bytes."""
    for name, value in (("max_model_len", max_model_len), ("width", width), ("topk", topk), ("heads", heads)):
        check_int(name, value, minimum=0)
    check_head_count(heads)
    row_bytes = 4 * width + 24 * min(topk, width) + 64 * heads + 256
    return max(32, 128 * max_model_len // max(1, row_bytes))
