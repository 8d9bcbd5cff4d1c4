"""The AMD AITER adapter: AITER's FlyDSL FP4 paged MQA-logits kernel behind one small interface.

Matched against ROCm/aiter 35cb4f64: the public wrapper
``aiter.ops.flydsl.flydsl_pa_mqa_logits_fp4`` over the decode kernel in
``aiter/ops/flydsl/kernels/mqa_logits/pa_mqa_logits_fp4_decode.py``, which reads
``kv_cache.stride(0)`` and ``kv_scale.stride(0)`` (bytes) and
``block_tables.stride(0)`` (int32 elements) from the tensors it is given. That is
what lets it read the index section in place inside merged pages: the payload
view ``[pages, 1, 4, 64, 16]`` and the scale view ``[pages, 1, 4, 64]`` (starting
4096 bytes into the section) both have page stride ``S``. AITER builds before it
(mainline e4048607 and earlier) address pages densely (``page * 4096``,
``page * 256``) and ignore strides: with them this adapter refuses to run rather
than let the kernel read the wrong bytes or copy the cache.

Their call takes uniform ``next_n`` rows per request: row ``n`` of request ``b``
sees ``context_lens[b] - next_n + n + 1`` keys. Non-uniform verify rows map onto it
with one request per row (``next_n = 1``, ``context_lens = row_ends``, the row's
block-table row gathered on device), so nothing is read on the host. The cost:
each verify row reads its keys again (no shared-key row groups).

Numerics, where this backend departs from the library's contract: AITER reads the head
weights as bf16, so the adapter rounds the float32 weights to bf16 (relative error up to
2**-9 per weight, above the 1e-5 the other backends meet); its relu is a ``max`` under
fast-math (no NaN), so a NaN key group (scale 255) need not give a NaN logit; its MFMA
accumulation order is its own. Not run on AMD hardware here: the contract tests in
tests/test_aiter_contract.py check every argument against a stand-in module.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from typing import Callable, Optional

import torch

from .. import formats as F
from ..layout import cache_views
from ..reference import row_requests

WRAPPER_MODULE = "aiter.ops.flydsl"
WRAPPER = "flydsl_pa_mqa_logits_fp4"
DECODE_MODULE = "aiter.ops.flydsl.kernels.mqa_logits.pa_mqa_logits_fp4_decode"
DECODE_COMPILER = "compile_pa_mqa_logits_fp4_decode"
STRIDED_SINCE = "ROCm/aiter 35cb4f64 (the FlyDSL decode kernel that takes kv_page_stride)"


def _module(name: str):
    """``name`` imported, or None when it (or a parent) is not installed. Only on ROCm: AITER's
    package __init__ needs it."""
    if torch.version.hip is None:
        return None
    root = name.split(".")[0]
    if importlib.util.find_spec(root) is None:
        return None
    parent = name.rpartition(".")[0]
    if parent and _module(parent) is None:
        return None
    if importlib.util.find_spec(name) is None:
        return None
    return importlib.import_module(name)


def scorer() -> Optional[Callable]:
    """AITER's FP4 paged MQA-logits wrapper, or None where it is not installed."""
    module = _module(WRAPPER_MODULE)
    return getattr(module, WRAPPER, None) if module is not None else None


def reads_page_strides() -> bool:
    """Whether the installed AITER's FP4 reader takes a page stride (so merged pages work)."""
    module = _module(DECODE_MODULE)
    compiler = getattr(module, DECODE_COMPILER, None) if module is not None else None
    return compiler is not None and "kv_page_stride" in inspect.signature(compiler).parameters


def unavailable_reason() -> Optional[str]:
    """Why ``backend="aiter"`` cannot run here, or None when it can."""
    if torch.version.hip is None:
        return "needs a ROCm build of PyTorch"
    if scorer() is None:
        return f"{WRAPPER_MODULE}.{WRAPPER} is not importable (pip install amd-aiter on a gfx950 GPU)"
    if not reads_page_strides():
        return (
            "the installed AITER's FP4 reader addresses pages densely (page * 4096 payload bytes, "
            "page * 256 scale bytes) and ignores tensor strides, so it cannot read the index section "
            f"of merged pages in place; needs {STRIDED_SINCE} or later"
        )
    return None


def available() -> bool:
    """Whether ``backend="aiter"`` can run here (and ``backend=None`` picks it for scoring)."""
    return unavailable_reason() is None


def score_paged_into(
    out: torch.Tensor,
    q_payload: torch.Tensor,
    q_scales: torch.Tensor,
    cache: torch.Tensor,
    weights: torch.Tensor,
    block_table: torch.Tensor,
    query_starts: torch.Tensor,
    row_ends: torch.Tensor,
) -> None:
    """Score into ``out`` float32 [rows, width] through AITER; the inputs are already checked.

    Every tensor handed over is a view or a small gather made on device: no host read."""
    reason = unavailable_reason()
    if reason is not None:
        raise ValueError(f"cache: backend='aiter' cannot read this cache: {reason}")
    rows, heads = q_payload.shape[:2]
    width = out.shape[1]
    if rows == 0 or width == 0 or block_table.shape[0] == 0:
        return
    payload, scales = cache_views(cache)
    # One AITER request per row: row r sees [0, row_ends[r]) of its own request's pages.
    tables = block_table[row_requests(query_starts, rows)].to(torch.int32)
    # AITER addresses queries, weights and context lengths densely (row * heads * ...): the
    # ops take any strides, so strided ones are made dense here (small tensors; the cache and
    # out keep their strides, which AITER reads).
    scorer()(
        q_payload.contiguous().view(rows, 1, heads, F.PAYLOAD_BYTES),
        q_scales.contiguous().view(rows, 1, 1, F.GROUPS, F.QUERY_SCALE_LANES, F.QUERY_SCALE_SLOTS),
        payload,
        scales,
        tables,
        weights.to(torch.bfloat16).contiguous(),
        # Ends into [0, width] before narrowing, as the Triton scorer reads them: AITER would take
        # an end past the width to the block table's entries past the row, and int64 past 2**31 wraps.
        row_ends.clamp(0, width).to(torch.int32).contiguous(),
        width,
        next_n=1,
        kv_block_size=F.PAGE_TOKENS,
        out=out,
    )
