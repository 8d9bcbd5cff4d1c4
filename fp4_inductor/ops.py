"""The ``torch.library`` ops (namespace ``fp4``), their fake kernels, and backend dispatch.

Each op is a ``triton_op``: in eager it runs its body; under ``torch.compile``
AOTAutograd decomposes the body, so Inductor sees the Triton kernels (through
``wrap_triton``) or, on the CPU, the reference's aten ops. Two are opaque
``custom_op``s, extern calls in Inductor's code: AITER's scorer, and the opt-in
``score_paged_eager_out`` (the Triton scorer launched as in eager). Input checks run in
the real body and in the fake kernel alike, so nothing invalid is traced or
written (the checks live in ``_op_checks``). The public functions at the bottom are thin
wrappers.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from typing import Optional

import torch
from torch import Tensor
from torch._subclasses.fake_tensor import is_fake
from torch.library import triton_op

from . import formats as F
from . import reference
from ._checks import INDEX_DTYPES, check_bool, check_dtype, check_int, describe, fits_int64, quoted
from ._op_checks import (DEQUANTIZE_DTYPES, TOPK_K_BELOW, check_fp4_query, check_queries, check_query_precision,
                         check_score, check_score_bf16, check_score_out, check_store_keys, check_topk, check_topk_block,
                         logits_shape)
from .layout import check_cache, check_layout_args, check_lengths, decode_layout_impl

BACKENDS = ("reference", "triton", "aiter")


# --------------------------------------------------------------------------- dispatch


def triton_importable() -> bool:
    return importlib.util.find_spec("triton") is not None


def aiter_available() -> bool:
    from .backends import aiter

    return aiter.available()


def check_backend(backend: object) -> None:
    """``backend`` is None or one of BACKENDS."""
    if backend is not None and not isinstance(backend, str):
        raise TypeError(f"backend: expected None or one of {BACKENDS}, got {describe(backend)}")
    if backend is not None and backend not in BACKENDS:
        raise ValueError(f"backend: expected None or one of {BACKENDS}, got {quoted(backend)}")


def _schema_ok(*tensors: object, ints: tuple = ()) -> bool:
    """Whether the op's schema takes these arguments: tensors are tensors, ints are Python ints
    (or SymInts). A public wrapper runs the op's full checks itself only where this fails, so
    that a wrong type gets the op's named error instead of the schema's; every other check runs
    once, in the op (its body or fake kernel), before anything is written."""
    return all(isinstance(t, Tensor) for t in tensors) and all(
        isinstance(i, torch.SymInt) or (isinstance(i, int) and not isinstance(i, bool) and fits_int64(i)) for i in ints)


def resolve_backend(backend: Optional[str], device: torch.device, op: str, offers_aiter: bool = False) -> str:
    """The backend that runs ``op`` for tensors on ``device``.

    None picks by device: ROCm with AITER's FP4 scorer importable -> "aiter"
    (scoring only), any other GPU -> "triton", CPU -> "reference". Asking for a
    backend that cannot run here raises.
    """
    check_backend(backend)
    if backend is None:
        if device.type != "cuda":
            return "reference"
        if offers_aiter and torch.version.hip is not None and aiter_available():
            return "aiter"
        return "triton"
    if backend == "triton":
        if not triton_importable():
            raise RuntimeError("backend='triton': Triton is not installed (pip install 'fp4_inductor[triton]')")
        if device.type == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
            raise RuntimeError(
                "backend='triton' on CPU tensors runs the Triton interpreter: set TRITON_INTERPRET=1 "
                "before fp4_inductor's kernels are first used"
            )
        if device.type not in ("cpu", "cuda"):
            raise RuntimeError(f"backend='triton': expected CUDA/ROCm (or CPU with the interpreter), got {device}")
    if backend == "aiter":
        if not offers_aiter:
            raise ValueError(f"backend='aiter': AITER provides only the scoring kernel, not {op}")
        from .backends import aiter

        if device.type != "cuda":
            raise RuntimeError(f"backend='aiter': needs tensors on a ROCm GPU, got {device}")
        reason = aiter.unavailable_reason()
        if reason is not None:
            # An importable AITER whose reader cannot take the merged layout: a cache constraint.
            raise (ValueError if aiter.scorer() is not None else RuntimeError)(f"backend='aiter': {reason}")
    return backend


def on_device(t: Tensor):
    """The device guard of a kernel launch on ``t``'s GPU. Triton (and AITER) launch on the
    current device, so tensors on another GPU make it current for the call, as torch's own ops
    do; on the current device (the usual case), on the CPU and while tracing (fake tensors:
    Inductor's generated code sets its own guard) there is nothing to do."""
    if t.device.type == "cuda" and not is_fake(t) and t.device.index != torch.cuda.current_device():
        return torch.cuda.device(t.device)
    return contextlib.nullcontext()


# --------------------------------------------------------------------------- ops


@triton_op("fp4::store_keys", mutates_args={"cache"})
def _store_keys(keys: Tensor, cache: Tensor, slots: Tensor, backend: Optional[str] = None) -> None:
    check_store_keys(keys, cache, slots)
    if resolve_backend(backend, cache.device, "store_keys") == "triton":
        from .kernels.quantize import launch_store_keys

        with on_device(cache):
            launch_store_keys(keys, cache, slots)
    else:
        reference.store_keys(keys, cache, slots)


@_store_keys.register_fake
def _store_keys_fake(keys: Tensor, cache: Tensor, slots: Tensor, backend: Optional[str] = None) -> None:
    check_store_keys(keys, cache, slots)


@triton_op("fp4::quantize_queries", mutates_args=())
def _quantize_queries(q: Tensor, backend: Optional[str] = None) -> tuple[Tensor, Tensor]:
    check_queries(q)
    if resolve_backend(backend, q.device, "quantize_queries") == "triton":
        from .kernels.quantize import launch_quantize_queries

        with on_device(q):
            return launch_quantize_queries(q)
    return reference.quantize_queries(q)


@_quantize_queries.register_fake
def _quantize_queries_fake(q: Tensor, backend: Optional[str] = None) -> tuple[Tensor, Tensor]:
    check_queries(q)
    rows, heads = q.shape[:2]
    payload = q.new_empty((rows, heads, F.PAYLOAD_BYTES), dtype=torch.uint8)
    scales = q.new_empty((rows, 1, F.GROUPS, F.QUERY_SCALE_LANES, F.QUERY_SCALE_SLOTS), dtype=torch.uint8)
    return payload, scales


def _score_into(out, q_payload, q_scales, cache, weights, block_table, query_starts, row_ends, max_query_len, which):
    """Score into ``out`` with the resolved backend ``which``; the inputs are already checked."""
    if which == "triton":
        from .kernels.score import launch_score_paged

        with on_device(out):
            launch_score_paged(out, q_payload, q_scales, cache, weights, block_table, query_starts, row_ends,
                               max_query_len)
    elif which == "aiter":
        with on_device(out):
            torch.ops.fp4.score_paged_aiter_out(
                out, q_payload, q_scales, cache, weights, block_table, query_starts, row_ends, max_query_len
            )
    else:
        logits = reference.score_paged(q_payload, q_scales, cache, weights, block_table, query_starts, row_ends)
        out.copy_(torch.where(reference.valid_region(query_starts, row_ends, out.shape[1]), logits, out))


@torch.library.custom_op("fp4::score_paged_aiter_out", mutates_args={"out"})
def _score_paged_aiter_out(
    out: Tensor,
    q_payload: Tensor,
    q_scales: Tensor,
    cache: Tensor,
    weights: Tensor,
    block_table: Tensor,
    query_starts: Tensor,
    row_ends: Tensor,
    max_query_len: int,
) -> None:
    """AITER's scorer as one opaque call for Inductor (an extern kernel, nothing traced inside)."""
    from .backends import aiter

    aiter.score_paged_into(out, q_payload, q_scales, cache, weights, block_table, query_starts, row_ends)


@_score_paged_aiter_out.register_fake
def _score_paged_aiter_out_fake(
    out, q_payload, q_scales, cache, weights, block_table, query_starts, row_ends, max_query_len
) -> None:
    check_score(q_payload, q_scales, cache, weights, block_table, query_starts, row_ends, max_query_len)


@torch.library.custom_op("fp4::score_paged_eager_out", mutates_args={"out"})
def _score_paged_eager_out(
    out: Tensor,
    q_payload: Tensor,
    q_scales: Tensor,
    cache: Tensor,
    weights: Tensor,
    block_table: Tensor,
    query_starts: Tensor,
    row_ends: Tensor,
    max_query_len: int,
) -> None:
    """The Triton scorer launched as in eager, as one opaque call for Inductor (an extern kernel,
    nothing traced inside), for a compiled model that opts in: its eager plan may take launch
    options that Inductor's launches of a user kernel drop (the wgmma hot pass's register cap at
    one warpgroup per program, by default on sm_90 at 64 heads from 3 rows), so the traced op
    runs another plan there (the same pass at four warpgroups per program, with eager's bits).
    Called opaque, the launcher runs as eager does: same pass, same launch options. Not emitted into
    Inductor's code (docs/compile.md). Checks its arguments as ``fp4.score_paged_out`` does."""
    _check_score_eager_out(out, q_payload, q_scales, cache, weights, block_table, query_starts, row_ends,
                           max_query_len)
    _score_into(out, q_payload, q_scales, cache, weights, block_table, query_starts, row_ends, max_query_len,
                "triton")


@_score_paged_eager_out.register_fake
def _check_score_eager_out(
    out, q_payload, q_scales, cache, weights, block_table, query_starts, row_ends, max_query_len
) -> None:
    """``score_paged_out``'s checks with ``backend="triton"`` (the fake kernel too, so a compiled
    graph that cannot run is refused when it is traced)."""
    check_score(q_payload, q_scales, cache, weights, block_table, query_starts, row_ends, max_query_len)
    check_score_out(out, q_payload, cache, block_table)
    resolve_backend("triton", cache.device, "score_paged_eager_out")


@triton_op("fp4::score_paged_out", mutates_args={"out"})
def _score_paged_out(
    out: Tensor,
    q_payload: Tensor,
    q_scales: Tensor,
    cache: Tensor,
    weights: Tensor,
    block_table: Tensor,
    query_starts: Tensor,
    row_ends: Tensor,
    max_query_len: int,
    backend: Optional[str] = None,
) -> None:
    check_score(q_payload, q_scales, cache, weights, block_table, query_starts, row_ends, max_query_len)
    check_score_out(out, q_payload, cache, block_table)
    which = resolve_backend(backend, cache.device, "score_paged", offers_aiter=True)
    _score_into(out, q_payload, q_scales, cache, weights, block_table, query_starts, row_ends, max_query_len, which)


@_score_paged_out.register_fake
def _score_paged_out_fake(
    out, q_payload, q_scales, cache, weights, block_table, query_starts, row_ends, max_query_len, backend=None
) -> None:
    check_score(q_payload, q_scales, cache, weights, block_table, query_starts, row_ends, max_query_len)
    check_score_out(out, q_payload, cache, block_table)


@triton_op("fp4::score_paged", mutates_args=())
def _score_paged(
    q_payload: Tensor,
    q_scales: Tensor,
    cache: Tensor,
    weights: Tensor,
    block_table: Tensor,
    query_starts: Tensor,
    row_ends: Tensor,
    max_query_len: int,
    backend: Optional[str] = None,
) -> Tensor:
    check_score(q_payload, q_scales, cache, weights, block_table, query_starts, row_ends, max_query_len)
    which = resolve_backend(backend, cache.device, "score_paged", offers_aiter=True)
    if which == "reference":
        return reference.score_paged(q_payload, q_scales, cache, weights, block_table, query_starts, row_ends)
    # Entries outside the valid region are not written (docs/layouts.md, "Scoring"): no fill pass.
    out = torch.empty(logits_shape(q_payload.shape[0], block_table), dtype=torch.float32, device=cache.device)
    _score_into(out, q_payload, q_scales, cache, weights, block_table, query_starts, row_ends, max_query_len, which)
    return out


@_score_paged.register_fake
def _score_paged_fake(
    q_payload, q_scales, cache, weights, block_table, query_starts, row_ends, max_query_len, backend=None
) -> Tensor:
    check_score(q_payload, q_scales, cache, weights, block_table, query_starts, row_ends, max_query_len)
    return q_payload.new_empty(logits_shape(q_payload.shape[0], block_table), dtype=torch.float32)


@triton_op("fp4::score_paged_bf16", mutates_args=())
def _score_paged_bf16(
    q: Tensor,
    cache: Tensor,
    weights: Tensor,
    block_table: Tensor,
    query_starts: Tensor,
    row_ends: Tensor,
    max_query_len: int,
    backend: Optional[str] = None,
) -> Tensor:
    check_score_bf16(q, cache, weights, block_table, query_starts, row_ends, max_query_len)
    if resolve_backend(backend, cache.device, "score_paged_bf16") == "reference":
        return reference.score_paged_bf16(q, cache, weights, block_table, query_starts, row_ends)
    from .kernels.score import launch_score_paged

    out = torch.empty(logits_shape(q.shape[0], block_table), dtype=torch.float32, device=cache.device)
    with on_device(out):
        launch_score_paged(out, q, None, cache, weights, block_table, query_starts, row_ends, max_query_len)
    return out


@_score_paged_bf16.register_fake
def _score_paged_bf16_fake(q, cache, weights, block_table, query_starts, row_ends, max_query_len, backend=None):
    check_score_bf16(q, cache, weights, block_table, query_starts, row_ends, max_query_len)
    return q.new_empty(logits_shape(q.shape[0], block_table), dtype=torch.float32)


@triton_op("fp4::select_topk", mutates_args=())
def _select_topk(
    logits: Tensor, row_ends: Tensor, k: int, sorted: bool = False, backend: Optional[str] = None
) -> tuple[Tensor, Tensor]:
    check_topk(logits, row_ends, k)
    if resolve_backend(backend, logits.device, "select_topk") == "triton":
        from .kernels.topk import launch_select_topk

        with on_device(logits):
            return launch_select_topk(logits, row_ends, k, sorted)
    return reference.select_topk(logits, row_ends, k, sorted)


@_select_topk.register_fake
def _select_topk_fake(
    logits: Tensor, row_ends: Tensor, k: int, sorted: bool = False, backend: Optional[str] = None
) -> tuple[Tensor, Tensor]:
    check_topk(logits, row_ends, k)
    rows = logits.shape[0]
    return logits.new_empty((rows, k)), logits.new_empty((rows, k), dtype=torch.int32)


torch.library.define(
    "fp4::decode_layout",
    "(Tensor seq_lens, Tensor query_lens, SymInt num_rows, int dcp_rank=0, int dcp_world_size=1, int interleave=1)"
    " -> (Tensor, Tensor)",
)


@torch.library.impl("fp4::decode_layout", "CompositeImplicitAutograd")
def _decode_layout(seq_lens, query_lens, num_rows, dcp_rank=0, dcp_world_size=1, interleave=1):
    # Composite: it decomposes into aten ops that Inductor fuses into one small kernel.
    check_layout_args(num_rows, dcp_rank, dcp_world_size, interleave)
    check_lengths(seq_lens, query_lens)
    return decode_layout_impl(seq_lens, query_lens, num_rows, dcp_rank, dcp_world_size, interleave)


# --------------------------------------------------------------------------- public API


def store_keys(keys: Tensor, cache: Tensor, slots: Tensor, *, backend: Optional[str] = None) -> None:
    """Quantize keys to FP4 and write them into the index cache, in place.

    keys: float32/bfloat16/float16 [n, 128], normalized, no RoPE.
    cache: uint8 [pages, 64, 68], strides (S, 68, 1), S >= 4352 (a merged-page section).
    slots: int32/int64 [n], ``page * 64 + token``. Slots outside ``[0, pages * 64)``
        (negative: padding) are skipped; this is not an error, since the values are
        not read on the host. Give each key its own slot: with two rows on one slot, the
        reference keeps the last row, and the Triton kernel leaves the slot's 68 bytes unspecified
        (they may mix the rows; finding duplicates would cost a sort per call).
    Invalid shapes, dtypes, strides or devices raise before any byte is written.
    """
    if not _schema_ok(keys, cache, slots):
        check_store_keys(keys, cache, slots)
    check_backend(backend)
    torch.ops.fp4.store_keys(keys, cache, slots, backend)


def quantize_queries(q: Tensor, *, backend: Optional[str] = None) -> tuple[Tensor, Tensor]:
    """q: float [rows, H, 128], H in {16, 32, 64} -> (payload uint8 [rows, H, 64],
    scales uint8 [rows, 1, 4, 16, 4] in AITER's pre-shuffled order)."""
    if not _schema_ok(q):
        check_queries(q)
    check_backend(backend)
    return torch.ops.fp4.quantize_queries(q, backend)


def score_paged(
    query: tuple[Tensor, Tensor],
    cache: Tensor,
    weights: Tensor,
    block_table: Tensor,
    query_starts: Tensor,
    row_ends: Tensor,
    max_query_len: int,
    *,
    backend: Optional[str] = None,
    out: Optional[Tensor] = None,
) -> Tensor:
    """Indexer logits ``sum_h w[r, h] * relu(q[r, h] . k[key(j)])`` over a paged FP4 cache.

    query: (payload uint8 [rows, H, 64], scales uint8 [rows, 1, 4, 16, 4]) from ``quantize_queries``;
        or the higher-recall mode: unquantized queries float [rows, H, 128], scored in bf16
        (rounded to it) against the same FP4 keys (no ``out=``, no AITER backend).
    cache: uint8 [pages, 64, 68] index cache (any page stride >= 4352).
    weights: float32 [rows, H], holding the head and softmax factors (not the FP4 scales).
    block_table: int [requests, pages_per_request]; entries past a row's keys are never read.
    query_starts: int [requests + 1]; row_ends: int [rows] (from ``decode_layout``).
    max_query_len: Python int, the most rows a request usually has: it sizes the launch
        (row blocks per request). A request with more rows is still scored in full, by the
        same programs taking its extra row blocks in turn.
    out: optional float32 [rows, pages_per_request * 64] to write into.

    Returns float32 [rows, pages_per_request * 64]. Only ``j < row_ends[r]`` of rows
    below ``query_starts[-1]`` is the result; the rest is unspecified (the reference
    writes -inf there, the kernels leave it alone).
    """
    check_backend(backend)
    if isinstance(query, Tensor) and query.is_floating_point():
        if not _schema_ok(cache, weights, block_table, query_starts, row_ends, ints=(max_query_len,)):
            check_score_bf16(query, cache, weights, block_table, query_starts, row_ends, max_query_len)
        if out is not None:
            raise ValueError("out: the bf16-query mode returns a new tensor; pass out=None")
        return torch.ops.fp4.score_paged_bf16(query, cache, weights, block_table, query_starts, row_ends,
                                              max_query_len, backend)
    if not isinstance(query, (tuple, list)) or len(query) != 2:
        raise TypeError(f"query: expected (payload, scales) from quantize_queries or a float tensor "
                        f"[rows, H, 128], got {describe(query)}")
    if not _schema_ok(*query, cache, weights, block_table, query_starts, row_ends, ints=(max_query_len,)):
        check_score(*query, cache, weights, block_table, query_starts, row_ends, max_query_len)
    if out is not None:
        if not isinstance(out, Tensor):
            raise TypeError(f"out: expected None or a float32 tensor, got {describe(out)}")
        torch.ops.fp4.score_paged_out(out, *query, cache, weights, block_table, query_starts, row_ends, max_query_len, backend)
        return out
    return torch.ops.fp4.score_paged(*query, cache, weights, block_table, query_starts, row_ends, max_query_len, backend)


def select_topk(
    logits: Tensor, row_ends: Tensor, k: int, *, sorted: bool = False, backend: Optional[str] = None
) -> tuple[Tensor, Tensor]:
    """Top-k of ``logits[r, :row_ends[r]]`` per row, like ``torch.topk``.

    logits: float32 [rows, width]; row_ends: int [rows]; k: Python int in [1, 2**31) (the triton
    backend takes at most 2**19 on rows wider than 2**20).
    Returns (values float32 [rows, k], indices int32 [rows, k]). Ties go to the lower
    index, NaN ranks lowest, places a row cannot fill hold -inf / -1. The order within
    a row is unspecified unless ``sorted=True`` (descending value, then ascending index).
    """
    if not _schema_ok(logits, row_ends, ints=(k,)):
        check_topk(logits, row_ends, k)
    check_bool("sorted", sorted)
    check_backend(backend)
    return torch.ops.fp4.select_topk(logits, row_ends, k, sorted, backend)


def decode_step(
    q: Tensor,
    cache: Tensor,
    weights: Tensor,
    block_table: Tensor,
    query_starts: Tensor,
    row_ends: Tensor,
    max_query_len: int,
    k: int,
    *,
    keys: Optional[Tensor] = None,
    slots: Optional[Tensor] = None,
    query_precision: str = "fp4",
    sorted: bool = False,
    backend: Optional[str] = None,
) -> tuple[Tensor, Tensor]:
    """One indexer decode step in one call: this step's keys stored (``keys`` and ``slots``
    given), the queries quantized, every row scored over the paged cache, its top-k selected.

    q: float [rows, H, 128] (unquantized; H in {16, 32, 64}); cache, weights, block_table,
    query_starts, row_ends, max_query_len: as ``score_paged`` takes them (``decode_layout``'s
    tensors, made once per step and shared by every layer); k: Python int.
    keys: float [n, 128] and slots: int [n] as ``store_keys`` takes them, both or neither.
    query_precision: ``"fp4"`` (``quantize_queries``), or ``"bf16"``, the higher-recall mode
    (same FP4 keys, queries scored unquantized).
    backend: for every op; ``"aiter"`` scores with AITER and runs the other ops as ``None`` picks.

    Returns ``select_topk``'s (values float32 [rows, k], indices int32 [rows, k]). Every argument
    is checked before the cache is written (``k`` too, against the top-k backend's limit); nothing
    is read on the host, so the step captures in a CUDA graph, and under ``torch.compile`` each
    kernel lands in Inductor's code. With DCP the indices are local (``row_ends`` from
    ``decode_layout(..., dcp_rank, dcp_world_size)``); ``fp4_inductor.distributed.merge_topk``
    gives the global top-k. The logits, float32
    [rows, pages_per_request * 64], are scratch of the call (``decode_tile_size`` sizes row tiles
    that keep them within a budget).
    """
    check_backend(backend)
    check_query_precision(query_precision)
    if backend == "aiter" and query_precision != "fp4":
        raise ValueError(f"query_precision: expected 'fp4' with backend='aiter' (AITER scores FP4 queries), "
                         f"got {query_precision!r}")
    if (keys is None) != (slots is None):
        raise ValueError(f"keys, slots: expected both or neither, got keys {describe(keys)} and slots {describe(slots)}")
    # Every argument checked before this step's keys are written.
    if keys is not None:
        check_store_keys(keys, cache, slots)
    check_score_bf16(q, cache, weights, block_table, query_starts, row_ends, max_query_len, name="q")
    check_int("k", k, minimum=1, below=TOPK_K_BELOW)
    check_bool("sorted", sorted)
    if backend == "aiter" and keys is not None:
        resolve_backend(backend, cache.device, "score_paged", offers_aiter=True)  # can it score here?
    others = None if backend == "aiter" else backend
    if resolve_backend(others, cache.device, "select_topk") == "triton":
        check_topk_block(k, logits_shape(0, block_table)[1])
    if keys is not None:
        store_keys(keys, cache, slots, backend=others)
    query = quantize_queries(q, backend=others) if query_precision == "fp4" else q
    logits = score_paged(query, cache, weights, block_table, query_starts, row_ends, max_query_len, backend=backend)
    return select_topk(logits, row_ends, k, sorted=sorted, backend=others)


def decode_layout(
    seq_lens: Tensor,
    query_lens: Tensor,
    num_rows: int,
    dcp_rank: int = 0,
    dcp_world_size: int = 1,
    interleave: int = 1,
) -> tuple[Tensor, Tensor]:
    """Rows -> requests and visible keys, on device.

    seq_lens: int [>= requests], tokens per request including this step's.
    query_lens: int [requests], rows per request (speculative verify rows; non-uniform is fine).
    num_rows: Python int, rows scored (graph padding included).
    Returns (query_starts int32 [requests + 1], row_ends int32 [num_rows]): row ``p`` of
    request ``i`` sees global keys ``[0, seq_lens[i] - query_lens[i] + p + 1)``; with DCP,
    ``row_ends`` counts those local to ``dcp_rank``; padding rows get 0. Rows that the requests
    ask for past ``num_rows`` are dropped (``query_starts`` is clamped to ``num_rows``). Lengths
    are not read on the host, so odd ones are made harmless, not refused: a negative query length
    counts as no rows, and an end past 2**31 - 1 (int64 ``seq_lens``) saturates there.
    """
    check_layout_args(num_rows, dcp_rank, dcp_world_size, interleave)
    check_lengths(seq_lens, query_lens)
    return torch.ops.fp4.decode_layout(seq_lens, query_lens, num_rows, dcp_rank, dcp_world_size, interleave)


def dequantize_pages(cache: Tensor, pages: Tensor, dtype: torch.dtype = torch.float32) -> Tensor:
    """The keys of cache pages ``pages`` (int, any shape, values in ``[0, cache pages)``),
    dequantized: ``dtype`` [..., 64, 128]. For checks and tests; not on a decode path."""
    check_cache(cache)
    if not isinstance(pages, Tensor) or pages.dtype not in INDEX_DTYPES:
        raise (TypeError if not isinstance(pages, Tensor) else ValueError)(
            f"pages: expected an int32 or int64 tensor of page ids, got {describe(pages)}")
    if pages.device != cache.device:
        raise ValueError(f"pages: expected a tensor on {cache.device} (where the cache is), got {describe(pages)}")
    check_dtype("dtype", dtype, DEQUANTIZE_DTYPES)
    # Off the decode path, the ids can be read: indexing would wrap a negative one and fail on a
    # large one without naming it.
    outside = (pages < 0) | (pages >= cache.shape[0])
    if bool(outside.any()):
        raise ValueError(f"pages: expected page ids in [0, {cache.shape[0]}), got {int(pages[outside][0])} "
                         f"among {describe(pages)}")
    return reference.dequantize_pages(cache, pages, dtype)


def dequantize_queries(payload: Tensor, scales: Tensor, dtype: torch.dtype = torch.float32) -> Tensor:
    """``quantize_queries``' (payload uint8 [rows, H, 64], scales uint8 [rows, 1, 4, 16, 4]) back
    to ``dtype`` [rows, H, 128]."""
    check_fp4_query(payload, scales, ("payload", "scales"))
    check_dtype("dtype", dtype, DEQUANTIZE_DTYPES)
    return reference.dequantize_queries(payload, scales, dtype)
