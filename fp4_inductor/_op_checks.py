"""The ops' argument checks: each raises ValueError or TypeError naming the argument, what was
expected and what came, before anything is written. ``ops`` runs them in the real op bodies and
in the fake kernels alike."""

from __future__ import annotations

import torch
from torch import Tensor
from torch.fx.experimental.symbolic_shapes import guard_or_false

from . import formats as F
from ._checks import FLOAT_DTYPES, INDEX_DTYPES, check_int, check_size, check_tensor, describe, quoted
from .layout import check_cache

# What the dequantize helpers return (float64 for checks against a float64 reference).
DEQUANTIZE_DTYPES = (torch.float64, *FLOAT_DTYPES)


def check_store_keys(keys: Tensor, cache: Tensor, slots: Tensor) -> None:
    check_cache(cache)
    check_tensor("keys", keys, dtypes=FLOAT_DTYPES, shape=("n", F.HEAD_DIM), device=cache.device)
    check_tensor("slots", slots, dtypes=INDEX_DTYPES, shape=("n",), device=cache.device)
    check_size("slots", slots, 0, keys.shape[0], "one slot per key row")


def check_query_heads(name: str, t: Tensor) -> None:
    """``t`` [rows, H, ...] holds a head count the FP4 query layout takes."""
    if t.shape[1] not in F.QUERY_HEADS:
        raise ValueError(f"{name}: expected {F.QUERY_HEADS} heads, got {describe(t)}")


def check_fp4_query(payload: Tensor, scales: Tensor, names: tuple[str, str], device=None) -> None:
    """``quantize_queries``' (payload uint8 [rows, H, 64], scales uint8 [rows, 1, 4, 16, 4]), both
    on ``device`` (the cache's), or with the scales where the payload is."""
    check_tensor(names[0], payload, dtypes=(torch.uint8,), shape=("rows", "heads", F.PAYLOAD_BYTES), device=device)
    check_query_heads(names[0], payload)
    shape = (payload.shape[0], 1, F.GROUPS, F.QUERY_SCALE_LANES, F.QUERY_SCALE_SLOTS)
    if device is None:
        check_tensor(names[1], scales, dtypes=(torch.uint8,), shape=shape, device=payload.device, device_of=names[0])
    else:
        check_tensor(names[1], scales, dtypes=(torch.uint8,), shape=shape, device=device)


def check_queries(q: Tensor) -> None:
    check_tensor("q", q, dtypes=FLOAT_DTYPES, shape=("rows", "heads", F.HEAD_DIM))
    check_query_heads("q", q)


def check_score(
    q_payload: Tensor,
    q_scales: Tensor,
    cache: Tensor,
    weights: Tensor,
    block_table: Tensor,
    query_starts: Tensor,
    row_ends: Tensor,
    max_query_len: int,
) -> None:
    check_cache(cache)
    dev = cache.device
    check_fp4_query(q_payload, q_scales, ("query[0] (payload)", "query[1] (scales)"), device=dev)
    rows, heads = q_payload.shape[:2]
    check_score_layout("query", rows, heads, weights, block_table, query_starts, row_ends, max_query_len, dev)
    check_cache_has_pages(cache, block_table)


def check_cache_has_pages(cache: Tensor, block_table: Tensor) -> None:
    """A block table with entries needs a cache with pages (its entries' values stay on the device)."""
    if cache.shape[0] == 0 and block_table.numel() > 0:
        raise ValueError(f"cache: expected at least one page for block_table {describe(block_table)}, "
                         f"got {describe(cache)}")


def check_score_bf16(
    q: Tensor, cache: Tensor, weights: Tensor, block_table: Tensor, query_starts: Tensor, row_ends: Tensor,
    max_query_len: int, name: str = "query",
) -> None:
    """``name``: what the caller calls ``q`` (``score_paged``'s query, ``decode_step``'s q)."""
    check_cache(cache)
    check_tensor(name, q, dtypes=FLOAT_DTYPES, shape=("rows", "heads", F.HEAD_DIM), device=cache.device)
    check_query_heads(name, q)
    check_score_layout(name, *q.shape[:2], weights, block_table, query_starts, row_ends, max_query_len, cache.device)
    check_cache_has_pages(cache, block_table)


def check_score_layout(query, rows, heads, weights, block_table, query_starts, row_ends, max_query_len, dev) -> None:
    """The scoring arguments sized by the queries: ``rows`` and ``heads`` are those of the
    argument named ``query``, which a mismatch message names as their source."""
    check_tensor("weights", weights, dtypes=(torch.float32,), shape=("rows", "heads"), device=dev)
    check_size("weights", weights, 0, rows, f"one row per row of {query}")
    check_size("weights", weights, 1, heads, f"one weight per head of {query}")
    check_paging(block_table, query_starts, row_ends, dev)
    check_size("row_ends", row_ends, 0, rows, f"one end per row of {query}")
    check_int("max_query_len", max_query_len, minimum=1)


def check_paging(block_table, query_starts, row_ends, dev) -> None:
    """The block table and ``decode_layout``'s tensors of a scoring call on ``dev``, any row count."""
    check_tensor("block_table", block_table, dtypes=INDEX_DTYPES, shape=("requests", "pages_per_request"), device=dev)
    check_tensor("query_starts", query_starts, dtypes=INDEX_DTYPES, shape=("requests + 1",), device=dev)
    check_size("query_starts", query_starts, 0, block_table.shape[0] + 1, "requests + 1, from block_table")
    check_tensor("row_ends", row_ends, dtypes=INDEX_DTYPES, shape=("rows",), device=dev)


# How a decode step scores its queries: quantized to FP4, or unquantized (the higher-recall mode).
QUERY_PRECISIONS = ("fp4", "bf16")


def check_query_precision(query_precision: object) -> None:
    if not isinstance(query_precision, str) or query_precision not in QUERY_PRECISIONS:
        raise ValueError(f"query_precision: expected one of {QUERY_PRECISIONS}, got {quoted(query_precision)}")


def logits_shape(rows: int, block_table: Tensor) -> tuple[int, int]:
    """The scorer's output: [rows, pages_per_request * 64]."""
    return rows, block_table.shape[1] * F.PAGE_TOKENS


# Top-k: indices are int32, so k stays below 2**31; the Triton kernel's block holds
# 2 * next_power_of_2(k) entries of a row, and Triton's blocks at most TOPK_MAX_BLOCK.
TOPK_K_BELOW = 2**31
TOPK_MAX_BLOCK = 2**20


def check_topk(logits: Tensor, row_ends: Tensor, k: int) -> None:
    check_tensor("logits", logits, dtypes=(torch.float32,), shape=("rows", "width"))
    check_tensor("row_ends", row_ends, dtypes=INDEX_DTYPES, shape=("rows",), device=logits.device, device_of="logits")
    check_size("row_ends", row_ends, 0, logits.shape[0], "one end per row of logits")
    check_int("k", k, minimum=1, below=TOPK_K_BELOW)


def check_topk_block(k: int, width: int) -> None:
    """The triton backend's limit on k: rows wider than a block take k up to half a block
    (backend='reference' takes any k); 2 * next_power_of_2(k) <= TOPK_MAX_BLOCK is k <= half of
    it. No guard on a symbolic k or width (they are checked where they become concrete)."""
    if guard_or_false(k > TOPK_MAX_BLOCK // 2) and guard_or_false(width > TOPK_MAX_BLOCK):
        raise ValueError(f"k: expected at most {TOPK_MAX_BLOCK // 2} for rows wider than {TOPK_MAX_BLOCK} with the "
                         f"triton backend (backend='reference' takes any k), got k={k} at width {width}")


def check_score_out(out: Tensor, q_payload: Tensor, cache: Tensor, block_table: Tensor) -> None:
    check_tensor("out", out, dtypes=(torch.float32,), shape=logits_shape(q_payload.shape[0], block_table),
                 device=cache.device)
    if out.stride(1) != 1:
        raise ValueError(f"out: expected unit stride along keys, got strides {out.stride()}")
    rows, width = out.shape
    # Rows that share memory would take each other's logits. (The stride first: for rows laid
    # end to end it decides the test without a guard on a symbolic shape.)
    if out.stride(0) < width and rows > 1:
        raise ValueError(f"out: expected rows that do not overlap (row stride >= {width}), got strides {out.stride()}")
