"""Pure-PyTorch ops: the ground truth for every kernel and the CPU backend.

No Python loops over data and no host reads: all of it traces under
``torch.compile(fullgraph=True)`` and captures in a CUDA graph. Inputs are
assumed valid here; ``ops.py`` checks them.
"""

from __future__ import annotations

import torch
from torch.fx.experimental.symbolic_shapes import guard_or_false

from . import formats as F
from .layout import cache_views

_MANTISSA_MASK = (1 << 23) - 1
_MANTISSA_HALF = 1 << 22  # mantissa bits of 1.5


def scale_bytes(amax: torch.Tensor) -> torch.Tensor:
    """UE8M0 byte ``clamp(ceil(log2(max(amax, 2**-120) / 6)) + 127, 0, 254)``, computed exactly.

    amax: float32, finite, >= 0. With ``amax = m * 2**E`` (``1 <= m < 2``),
    ``amax <= 6 * 2**e`` holds first at ``e = E - 2`` when ``m <= 1.5`` and at
    ``e = E - 1`` otherwise: integer work on the float's bits, no rounding of
    ``log2``. Returns int32.
    """
    bits = amax.clamp_min(F.AMAX_FLOOR).view(torch.int32)
    biased_exponent = bits >> 23
    rounds_up = ((bits & _MANTISSA_MASK) > _MANTISSA_HALF).to(torch.int32)
    return (biased_exponent - 2 + rounds_up).clamp(0, F.UE8M0_MAX_FINITE)


def e2m1_codes(y: torch.Tensor) -> torch.Tensor:
    """Nearest E2M1 code (0..7) of ``|y|``, ties to the even code, saturating at 6. int32."""
    a = y.abs()
    code = torch.zeros(y.shape, dtype=torch.int32, device=y.device)
    for t in F.E2M1_THRESHOLDS_GT:
        code += (a > t).to(torch.int32)
    for t in F.E2M1_THRESHOLDS_GE:
        code += (a >= t).to(torch.int32)
    return code


def quantize_fp4(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x: float [..., 128] -> (payload uint8 [..., 64], scales uint8 [..., 4]).

    One UE8M0 scale per 32 elements (round-up rule: no element saturates),
    values to the nearest E2M1 code with ties to even, the sign kept on zero
    codes. A group holding NaN or Inf gets scale 255 and all-zero codes.
    """
    groups = x.to(torch.float32).unflatten(-1, (F.GROUPS, F.GROUP_SIZE))
    finite = torch.isfinite(groups).all(-1)
    amax = torch.where(finite, groups.abs().amax(-1), 1.0)
    scale = scale_bytes(amax)
    # 2**(127 - b) built from its bits: exact, and a normal float for every b <= 253.
    inv_scale = ((254 - scale) << 23).view(torch.float32)
    y = groups * inv_scale.unsqueeze(-1)
    code = e2m1_codes(y) | (torch.signbit(groups).to(torch.int32) << 3)
    code = torch.where(finite.unsqueeze(-1), code, 0)
    pairs = code.unflatten(-1, (F.GROUP_BYTES, 2))
    payload = (pairs[..., 0] | (pairs[..., 1] << 4)).to(torch.uint8).flatten(-2)
    scale = torch.where(finite, scale, F.UE8M0_NAN).to(torch.uint8)
    return payload, scale


def dequantize_fp4(payload: torch.Tensor, scales: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """payload uint8 [..., 64], scales uint8 [..., 4] -> dtype [..., 128] (scale 255 -> NaN).

    The products are exact in float32 (float64 for a float64 result) and rounded to ``dtype``
    once: a scale taken to float16 first would overflow or flush where the product does not."""
    exact = torch.float64 if dtype == torch.float64 else torch.float32
    table = torch.tensor(F.E2M1_VALUES, dtype=exact, device=payload.device)
    table = torch.cat([table, -table])
    # Low nibble first. A broadcast shift, not a stack: Inductor's concatenation picked strides
    # its own size check then refused, with an unbacked row count (torch 2.13, CPU).
    shifts = torch.tensor([0, 4], dtype=torch.uint8, device=payload.device)
    nibbles = ((payload.unsqueeze(-1) >> shifts) & 15).flatten(-2).long()
    values = table[nibbles].unflatten(-1, (F.GROUPS, F.GROUP_SIZE))
    exponent = scales.to(torch.float64) - F.UE8M0_BIAS
    scale = torch.where(scales == F.UE8M0_NAN, torch.nan, torch.pow(2.0, exponent)).to(exact)
    return (values * scale.unsqueeze(-1)).flatten(-2).to(dtype)


def _scale_position() -> torch.Tensor:
    t = torch.arange(F.PAGE_TOKENS)
    return (t % 16) * 4 + t // 16


def last_with_same_slot(slots: torch.Tensor) -> torch.Tensor:
    """int64 [n]: for each row, the last row holding the same slot (fixed shapes, no host read)."""
    n = slots.shape[0]
    rows = torch.arange(n, device=slots.device)
    ordered, order = torch.sort(slots, stable=True)  # a slot's rows in row order
    # Each sorted position against the one before it, as a gather of the same length (torch
    # 2.11 cannot compare the sizes of two slices of an unbacked length in a slice assignment).
    run_start = (ordered != ordered[(rows - 1).clamp(min=0)]) | (rows == 0)
    run = torch.cumsum(run_start, 0) - 1  # each sorted position's run of equal slots
    # Each run's last sorted position. (Not a reversed cummin: its meta kernel guards on n != 0,
    # which an unbacked n cannot answer.)
    run_last = torch.zeros_like(rows).scatter_reduce(0, run, rows, "amax", include_self=False)
    winner = torch.empty_like(rows)
    winner[order] = order[run_last[run]]
    return winner


def write_sources(slots: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(source int64 [n], any valid: bool 0-d) for a scatter of n rows to ``slots`` int64 [n]
    where ``valid`` [n], with no host read and no data-dependent shape: row i writes row
    source[i]'s data to slot slots[source[i]]. Every write to a slot then carries the same bytes,
    so no write order (index_put_ splits a write across threads) can mix rows: rows sharing a
    slot take the last one's data, and skipped rows repeat the first valid row's write. With no
    valid row the caller rewrites some slot with what it already holds."""
    winner = last_with_same_slot(torch.where(valid, slots, -1))
    # One sentinel row past the end: ``first`` is n when no row is valid, and n may be 0 (an
    # unbacked batch), where an argmax or an index of the rows alone would fail at run time.
    # [1]: a 0-d tensor index would be read on the host.
    first = torch.cat([valid, valid.new_ones(1)]).to(torch.int32).argmax().view(1)
    fallback = torch.cat([winner, winner.new_zeros(1)])[first]
    return torch.where(valid, winner, fallback), valid.any()


def store_keys(keys: torch.Tensor, cache: torch.Tensor, slots: torch.Tensor) -> None:
    """Quantize ``keys`` float [n, 128] into ``cache`` at ``slots`` [n]; slots outside
    ``[0, pages * 64)`` (negative: padding) are skipped."""
    n, pages = keys.shape[0], cache.shape[0]
    # An unbacked n of 0 at run time takes the path below and writes nothing.
    if guard_or_false(n == 0) or guard_or_false(pages == 0):
        return
    payload, scales = (v.select(1, 0) for v in cache_views(cache))
    new_payload, new_scales = quantize_fp4(keys)
    new_payload = new_payload.view(n, F.GROUPS, F.GROUP_BYTES)
    slots = slots.to(torch.int64)
    valid = (slots >= 0) & (slots < pages * F.PAGE_TOKENS)
    source, any_valid = write_sources(slots, valid)
    # With no valid row, slot 0 is rewritten with the bytes it already holds.
    slot = torch.where(any_valid, slots[source], 0)
    page, token = slot // F.PAGE_TOKENS, slot % F.PAGE_TOKENS
    position = _scale_position().to(keys.device)[token]
    old_payload = payload[page, :, token]
    old_scales = scales[page, :, position]
    payload[page, :, token] = torch.where(any_valid, new_payload[source], old_payload)
    scales[page, :, position] = torch.where(any_valid, new_scales[source], old_scales)


def quantize_queries(q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """q: float [rows, H, 128] -> (payload uint8 [rows, H, 64], scales uint8 [rows, 1, 4, 16, 4]).

    The scale of head h, group g sits at ``[r, 0, g, h % 16, h // 16]``; slots
    with ``h // 16 >= H // 16`` hold 127.
    """
    rows, heads = q.shape[:2]
    payload, scales = quantize_fp4(q)  # [rows, H, 64], [rows, H, 4]
    slots = heads // F.QUERY_SCALE_LANES
    shuffled = scales.view(rows, slots, F.QUERY_SCALE_LANES, F.GROUPS).permute(0, 3, 2, 1)
    out = torch.full(
        (rows, 1, F.GROUPS, F.QUERY_SCALE_LANES, F.QUERY_SCALE_SLOTS),
        F.QUERY_SCALE_FILL,
        dtype=torch.uint8,
        device=q.device,
    )
    out[:, 0, :, :, :slots] = shuffled
    return payload, out


def query_scales_by_head(scales: torch.Tensor, heads: int) -> torch.Tensor:
    """uint8 [rows, 1, 4, 16, 4] (AITER order) -> uint8 [rows, H, 4]."""
    slots = heads // F.QUERY_SCALE_LANES
    return scales[:, 0, :, :, :slots].permute(0, 3, 2, 1).reshape(scales.shape[0], heads, F.GROUPS)


def dequantize_queries(payload: torch.Tensor, scales: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """(payload uint8 [rows, H, 64], scales uint8 [rows, 1, 4, 16, 4]) -> dtype [rows, H, 128]."""
    return dequantize_fp4(payload, query_scales_by_head(scales, payload.shape[1]), dtype)


def gather_keys(cache: torch.Tensor, pages: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Keys of ``pages`` int [...] in token order: (payload uint8 [..., 64, 64], scales uint8 [..., 64, 4])."""
    payload, scales = (v.select(1, 0) for v in cache_views(cache))
    page_payload = payload[pages]  # [..., 4, 64, 16]
    page_scales = scales[pages][..., _scale_position().to(pages.device)]  # [..., 4, 64]
    token_payload = page_payload.movedim(-3, -2).flatten(-2)  # [..., 64, 4 * 16]
    return token_payload, page_scales.movedim(-2, -1)


def dequantize_pages(cache: torch.Tensor, pages: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Keys of ``pages`` int [...] dequantized: dtype [..., 64, 128]."""
    return dequantize_fp4(*gather_keys(cache, pages), dtype)


def row_requests(query_starts: torch.Tensor, rows: int) -> torch.Tensor:
    """request(r) for r < rows: int64 [rows], clamped into [0, requests - 1]."""
    r = torch.arange(rows, device=query_starts.device, dtype=torch.int64)
    # #(query_starts[1:] <= r) = #(query_starts <= r) - 1: no sliced view for searchsorted
    # (Inductor's lowering cannot take one).
    request = torch.searchsorted(query_starts.to(torch.int64), r, right=True) - 1
    return request.clamp(min=0, max=max(query_starts.shape[0] - 2, 0))


def valid_region(query_starts: torch.Tensor, row_ends: torch.Tensor, width: int) -> torch.Tensor:
    """bool [rows, width]: the entries a scorer must produce."""
    rows = row_ends.shape[0]
    r = torch.arange(rows, device=row_ends.device)
    j = torch.arange(width, device=row_ends.device)
    in_batch = r < query_starts[-1].to(torch.int64)
    return (j.unsqueeze(0) < row_ends.to(torch.int64).unsqueeze(1)) & in_batch.unsqueeze(1)


def score_paged(
    q_payload: torch.Tensor,
    q_scales: torch.Tensor,
    cache: torch.Tensor,
    weights: torch.Tensor,
    block_table: torch.Tensor,
    query_starts: torch.Tensor,
    row_ends: torch.Tensor,
) -> torch.Tensor:
    """logit[r, j] = sum_h w[r, h] * relu(q[r, h] . k[key(j)]) in float32, -inf outside the valid region."""
    return score_queries(dequantize_queries(q_payload, q_scales), cache, weights, block_table, query_starts, row_ends)


def score_paged_bf16(
    q: torch.Tensor,
    cache: torch.Tensor,
    weights: torch.Tensor,
    block_table: torch.Tensor,
    query_starts: torch.Tensor,
    row_ends: torch.Tensor,
) -> torch.Tensor:
    """The higher-recall mode: unquantized queries, rounded to bf16, against the FP4 keys."""
    return score_queries(q.to(torch.bfloat16).float(), cache, weights, block_table, query_starts, row_ends)


def score_queries(
    q: torch.Tensor,
    cache: torch.Tensor,
    weights: torch.Tensor,
    block_table: torch.Tensor,
    query_starts: torch.Tensor,
    row_ends: torch.Tensor,
) -> torch.Tensor:
    """Scores of float queries ``q`` [rows, H, 128] against the FP4 cache (-inf outside the valid region)."""
    rows = q.shape[0]
    requests = query_starts.shape[0] - 1
    width = block_table.shape[1] * F.PAGE_TOKENS
    valid = valid_region(query_starts, row_ends, width)
    if guard_or_false(rows == 0) or guard_or_false(requests == 0) or guard_or_false(width == 0):
        return torch.full((rows, width), -torch.inf, device=q.device)
    # Entries past a request's pages may hold anything: clamp them into range, mask later. An
    # entry that a row needs must be a page of the cache (not checked: that would read the
    # device); the keys of one that is not score NaN here, and the Triton kernel's read is undefined.
    ids = block_table.to(torch.int64)
    pages = ids.clamp(0, cache.shape[0] - 1)
    outside = ((ids < 0) | (ids >= cache.shape[0])).unsqueeze(-1).expand(-1, -1, F.PAGE_TOKENS).flatten(1)
    request = row_requests(query_starts, rows)
    keys = dequantize_pages(cache, pages).flatten(1, 2)[request]  # [rows, width, 128]
    scores = torch.bmm(q, keys.transpose(1, 2))  # [rows, H, width]
    logits = (scores.relu() * weights.to(torch.float32).unsqueeze(-1)).sum(1)
    logits = torch.where(outside[request], torch.nan, logits)
    return torch.where(valid, logits, -torch.inf)


def float_rank(values: torch.Tensor) -> torch.Tensor:
    """int64 with the order of float32 ``values``: -0.0 ties +0.0, NaN ranks below -inf."""
    bits = values.to(torch.float32).contiguous().view(torch.int32).to(torch.int64)
    # Negative floats count down from zero.
    rank = torch.where(bits < 0, -(bits & 0x7FFFFFFF), bits)
    return torch.where(torch.isnan(values), -0x7F800000 - 1, rank)


def order_keys(values: torch.Tensor, indices: torch.Tensor, excluded: torch.Tensor) -> torch.Tensor:
    """int64 keys whose descending order is the top-k order: value, then lower index;
    ``excluded`` entries below everything. ``indices`` must be in [0, 2**32)."""
    key = float_rank(values) * (1 << 32) + ((1 << 32) - 1 - indices.to(torch.int64))
    return torch.where(excluded, torch.iinfo(torch.int64).min, key)


def select_topk(
    logits: torch.Tensor, row_ends: torch.Tensor, k: int, sorted: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k of ``logits[r, :row_ends[r]]``: (values float32 [rows, k], indices int32 [rows, k]).

    Ties go to the lower index, NaN ranks lowest, missing places hold -inf / -1.
    The reference always returns them sorted.
    """
    rows, width = logits.shape
    j = torch.arange(width, device=logits.device)
    outside = j.unsqueeze(0) >= row_ends.to(torch.int64).unsqueeze(1)
    return top_of(logits, j.expand(rows, width), outside, k)


def top_of(
    values: torch.Tensor, indices: torch.Tensor, excluded: torch.Tensor, k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The k best of each row's (value, index) entries that are not ``excluded``, sorted by value,
    ties to the lower index, NaN lowest; -inf / -1 where a row has fewer than k.

    values float32 [rows, n], indices int [rows, n] in [0, 2**32) -> (float32 [rows, k], int32 [rows, k]).
    """
    take = min(k, values.shape[1])
    top_keys, position = torch.topk(order_keys(values, indices, excluded), take, dim=1, sorted=True)
    missing = top_keys == torch.iinfo(torch.int64).min
    out_values = torch.where(missing, -torch.inf, values.to(torch.float32).gather(1, position))
    out_indices = torch.where(missing, -1, indices.gather(1, position)).to(torch.int32)
    if take < k:
        out_values = torch.nn.functional.pad(out_values, (0, k - take), value=-torch.inf)
        out_indices = torch.nn.functional.pad(out_indices, (0, k - take), value=-1)
    return out_values, out_indices
