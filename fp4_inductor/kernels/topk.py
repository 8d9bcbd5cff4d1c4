"""Per-row top-k by an exact bucket-then-radix selection, in one or more passes.

A program holds one segment of a row in registers and selects its top-k in
three steps, all exact:

1. Coarse buckets. Each valid entry gets a bucket in [0, BINS) from a linear
   map of its value over the segment's finite range (NaN and -inf go to bucket
   0, +inf to the last). The map only has to be monotone: equal values share a
   bucket and a larger value never gets a lower one, whatever the rounding. One
   histogram (64 bins by default) finds the bucket ``b`` holding the k-th
   largest entry. On NVIDIA GPUs it is counted in shared memory by PTX atomics
   (``smem_histogram``); elsewhere, and in the interpreter, by ``tl.histogram``.
2. Compaction (one scan). The entries above bucket ``b`` and then those of
   bucket ``b`` (the candidates, typically a few hundred) are copied to a
   per-program scratch area as (value bits, index) pairs; the first group is
   selected and copied on to the output.
3. Refinement on the candidates only: a radix select on the order-preserving
   uint32 key finds the exact threshold key ``t`` and how many entries equal to
   it to keep. Its digits are relative to the candidates' own key range (5
   bits, 32-bin histograms) and it stops as soon as the bucket holding the
   threshold is needed whole: 2-3 passes for a typical candidate set, where
   fixed digits of the whole key take 7. When only some of the ties are kept, a
   second radix select over their indices picks the lowest ones. The chosen
   candidates are written after the entries of step 2.

Floats become uint32 keys whose unsigned order is the float order, NaN lowest
and -0.0 == +0.0; a key of 0 marks an entry that is not a candidate. Values are
written with their own bits (NaN payloads and -0.0 kept).

Long rows are split: a pass selects each segment's top-k, the next one the
top-k of those candidates (repeated while a row has more candidates than a
segment). That is exact: a member of the row's top-k is in its segment's top-k
(ties included, since every pass breaks ties toward the lower index by the
index itself, not by position). Entries at ``j >= row_ends[r]`` are never
candidates. The order of the selection within a row is unspecified.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch.library import wrap_triton

from ..reference import order_keys

# Refinement digits: 32 bins, so that the bucket search stays inside a warp.
RADIX_BITS = tl.constexpr(5)
RADIX_BINS = tl.constexpr(32)

# The coarse histogram in shared memory, in three PTX steps that all threads run once each, in
# the column layout of ``column_major_count`` (thread t holds column t). Triton has no shared
# atomics: ``tl.histogram`` spends about 30 instructions per entry on warp ballots, a shared
# ``red.add`` one. Triton allocates its own shared buffers from ``global_smem`` too, so the
# counters use its first 4 * BINS bytes only between barriers inside the asm: zero (after every
# thread is past the shared buffers used before, and trapping if the launch has fewer bytes),
# add, read (then a barrier before Triton's next buffer). The asm is pure, so that Inductor's
# analysis sees which tensors the kernel writes; the order of the steps is kept by data: each
# step takes the previous one's result (and the zero step the segment's range) as an operand.
# One line each: Inductor copies constexpr globals into its generated code.
_SMEM_ZERO = tl.constexpr(
    "{ .reg .u32 a, n; .reg .pred p; bar.sync 0; mov.u32 n, %dynamic_smem_size; shl.b32 a, $3, 2; "
    "setp.lt.u32 p, n, a; @p trap; setp.lt.u32 p, $1, $3; mov.u32 a, global_smem; mad.lo.u32 a, $1, 4, a; "
    "@p st.shared.u32 [a], 0; bar.sync 0; mov.u32 $0, 0; }"
)
_SMEM_ADD = tl.constexpr(
    "{ .reg .u32 a; .reg .pred p; setp.ge.s32 p, $1, 0; mov.u32 a, global_smem; mad.lo.u32 a, $1, 4, a; "
    "@p red.shared.add.u32 [a], 1; mov.u32 $0, $2; }"
)
_SMEM_READ = tl.constexpr(
    "{ .reg .u32 a, v; .reg .pred p; bar.sync 0; setp.lt.u32 p, $1, $3; mov.u32 v, 0; mov.u32 a, global_smem; "
    "mad.lo.u32 a, $1, 4, a; @p ld.shared.u32 v, [a]; bar.sync 0; add.u32 $0, v, $2; }"
)


@triton.jit
def select_key(x, valid):
    """float32 -> uint32 whose unsigned order is the float order (-0.0 == +0.0), NaN -> 1 and
    entries that are not ``valid`` -> 0, below everything: a float's key is at least
    0x007FFFFF (-inf), so 0 and 1 are free."""
    bits = tl.where(x == 0.0, 0, x.to(tl.int32, bitcast=True))
    key = (bits ^ ((bits >> 31) | (-2147483648))).to(tl.uint32, bitcast=True)
    key = tl.where(x != x, 1, key)
    return tl.where(valid, key, 0).to(tl.uint32)


@triton.jit
def candidate_key(x, index, in_range, tie_key, TIES: tl.constexpr):
    """The key a refinement pass ranks by. TIES=False: the value's key. TIES=True: among
    entries whose value key is ``tie_key``, the lower index ranks higher; others get 0."""
    key = select_key(x, in_range)
    if TIES:
        lower_first = (2147483647 - index).to(tl.uint32, bitcast=True) | 0x80000000
        key = tl.where(in_range & (key == tie_key), lower_first, 0).to(tl.uint32)
    return key


@triton.jit
def pack_entry(x, index):
    """(value, index) as one int64: the value's bits low, the index high."""
    bits = x.to(tl.int32, bitcast=True).to(tl.uint32, bitcast=True).to(tl.int64)
    return (index.to(tl.int64) << 32) | bits


@triton.jit
def load_entries(entries, start, count, CHUNK: tl.constexpr):
    """Entries ``start .. start + CHUNK`` of ``count`` packed entries: (value, index, in range)."""
    offs = start + tl.max_contiguous(tl.arange(0, CHUNK), 1)  # one entry per thread, as the segment
    in_range = offs < count
    entry = tl.load(entries + offs, mask=in_range, other=0)
    x = (entry & 0xFFFFFFFF).to(tl.int32).to(tl.float32, bitcast=True)
    index = (entry >> 32).to(tl.int32)
    return x, index, in_range


@triton.jit
def _add_min(a_sum, a_min, b_sum, b_min):
    return a_sum + b_sum, tl.minimum(a_min, b_min)


@triton.jit
def _min_max(a_min, a_max, b_min, b_max):
    return tl.minimum(a_min, b_min), tl.maximum(a_max, b_max)


@triton.jit
def bucket_search(hist, needed, WIDE: tl.constexpr = False):
    """The highest bucket ``b`` of a histogram with at least ``needed`` (>= 1) entries at or
    above it: (b, entries above b, entries in b). One scan and one reduction, both inside a
    warp for 32 buckets. Counts must be below 2**20 unless WIDE."""
    at_or_above = tl.cumsum(hist, axis=0, reverse=True)
    reached = at_or_above >= needed
    # The buckets reached are counted in the high bits, the entries of the others (above b)
    # in the low ones.
    if WIDE:
        both, at_or_above_b = tl.reduce(
            (tl.where(reached, 1 << 32, hist.to(tl.int64)), tl.where(reached, at_or_above, 2147483647)), 0, _add_min
        )
        above = (both & 0xFFFFFFFF).to(tl.int32)
        return (both >> 32).to(tl.int32) - 1, above, at_or_above_b - above
    else:
        both, at_or_above_b = tl.reduce(
            (tl.where(reached, 1 << 20, hist), tl.where(reached, at_or_above, 2147483647)), 0, _add_min
        )
        above = both & 0xFFFFF
        return (both >> 20) - 1, above, at_or_above_b - above


@triton.jit
def column_major_count(flags, ROWS: tl.constexpr, THREADS: tl.constexpr):
    """Inclusive running sum of ``flags`` [ROWS * THREADS] viewed as [ROWS, THREADS] in
    column-major order: down each column (in registers, a thread holds a column), then the
    totals of the earlier columns (one scan across threads)."""
    grid = tl.reshape(flags, [ROWS, THREADS])
    columns = tl.sum(grid, axis=0)
    grid = tl.cumsum(grid, axis=0) + (tl.cumsum(columns, axis=0) - columns)[None, :]
    return tl.reshape(grid, [ROWS * THREADS])


@triton.jit
def smem_histogram(bucket, after, ROWS: tl.constexpr, THREADS: tl.constexpr, BINS: tl.constexpr):
    """Counts of ``bucket`` [ROWS * THREADS] (int32 in [0, BINS), -1 not counted; every entry in
    one thread: no replicated layout) as a [THREADS] histogram in the column layout, zero past
    BINS (BINS <= THREADS). ``after``: a value the zero step waits for (the last result that
    used Triton's shared buffers)."""
    grid = tl.reshape(bucket, [ROWS, THREADS])
    column = tl.min(tl.reshape(tl.arange(0, ROWS * THREADS), [ROWS, THREADS]), axis=0)  # in registers
    bins = tl.full([THREADS], BINS, tl.int32)
    zero = tl.inline_asm_elementwise(_SMEM_ZERO, "=r,r,r,r", [column, after + tl.zeros_like(column), bins],
                                     dtype=tl.int32, is_pure=True, pack=1)
    added = tl.inline_asm_elementwise(_SMEM_ADD, "=r,r,r", [grid, tl.broadcast_to(zero[None, :], (ROWS, THREADS))],
                                      dtype=tl.int32, is_pure=True, pack=1)
    return tl.inline_asm_elementwise(_SMEM_READ, "=r,r,r,r", [column, tl.sum(added, axis=0), bins],
                                     dtype=tl.int32, is_pure=True, pack=1)


@triton.jit
def key_range(key):
    """(lowest, highest) of the nonzero keys (0 marks an entry that is not a candidate);
    (0xFFFFFFFF, 0) when there are none."""
    return tl.reduce((tl.where(key != 0, key, 0xFFFFFFFF).to(tl.uint32), key), 0, _min_max)


@triton.jit
def digit_counts(key, lo, shift, digits):
    """Histogram of ``(key - lo) >> shift`` over the keys in [lo, lo + (digits << shift))
    (``digits`` <= RADIX_BINS)."""
    digit = (key - lo) >> shift
    in_bins = (key >= lo) & (digit < digits)
    return tl.histogram(tl.where(in_bins, digit, 0).to(tl.int32), RADIX_BINS, mask=in_bins)


@triton.jit
def chunk_keys(entries, start, count, tie_key, TIES: tl.constexpr, CHUNK: tl.constexpr):
    """``candidate_key`` of packed entries ``start .. start + CHUNK`` of ``count``."""
    x, index, in_range = load_entries(entries, start, count, CHUNK)
    return candidate_key(x, index, in_range, tie_key, TIES)


@triton.jit
def radix_select(key0, entries, count, needed, tie_key, TIES: tl.constexpr, CHUNK: tl.constexpr, WIDE: tl.constexpr):
    """Where the ``needed``-th largest of the ``count`` candidate keys lies (``needed`` >= 1;
    keys of the first CHUNK candidates in ``key0``, the rest loaded from scratch). Returns
    (threshold, needed at threshold, keys at threshold), read by the caller as: every key
    above the threshold is selected, and ``needed at threshold`` of the ``keys at
    threshold``.

    The digits are relative to the candidates' own key range: the first pass splits
    [lowest, highest] into buckets of 2**shift keys (shift from the span's bit length; at
    most RADIX_BINS buckets, fewer when the span is shorter), each later pass the chosen
    bucket into buckets of 2**(shift - RADIX_BITS). The search stops when the chosen bucket
    holds one key (shift 0), or as soon as it is needed whole: then the threshold is the
    bucket's lowest key (not necessarily a candidate's), and both counts are the bucket's
    entries, so that every key at or above it is selected. A candidate set from one coarse
    bucket spans few key bits, so this takes 2-3 passes where fixed 5-bit digits of the
    whole key take 7."""
    lo, hi = key_range(key0)
    for start in range(CHUNK, count, CHUNK):
        chunk_lo, chunk_hi = key_range(chunk_keys(entries, start, count, tie_key, TIES, CHUNK))
        lo, hi = tl.minimum(lo, chunk_lo), tl.maximum(hi, chunk_hi)
    # shift >= bit length of the span - RADIX_BITS: the float's exponent never undercounts it.
    span = (hi - lo).to(tl.float32)
    span_bits = tl.where(span > 0.0, ((span.to(tl.int32, bitcast=True) >> 23) & 0xFF) - 126, 0)
    shift = tl.maximum(span_bits - RADIX_BITS, 0)
    # The keys still searched: [lo, lo + 2**span_bits), RADIX_BINS or fewer digits of 2**shift.
    at = count
    searching = needed > 0
    while searching:
        digits = 1 << (span_bits - shift)
        hist = digit_counts(key0, lo, shift, digits)
        for start in range(CHUNK, count, CHUNK):
            hist += digit_counts(chunk_keys(entries, start, count, tie_key, TIES, CHUNK), lo, shift, digits)
        digit, above, at = bucket_search(hist, needed, WIDE)
        needed -= above
        lo += digit.to(tl.uint32) << shift
        searching = (at > needed) & (shift > 0)
        span_bits = shift
        shift = tl.maximum(shift - RADIX_BITS, 0)
    return lo, needed, at


@triton.jit
def store_chosen(x, index, key, in_range, threshold, last_index, out_values_ptr, out_indices_ptr, written, end):
    """Write the chosen entries (key above the threshold, or equal to it with an index <=
    ``last_index``) in order from ``written``, none at or past ``end``; returns where the next
    ones go."""
    chosen = in_range & ((key > threshold) | ((key == threshold) & (index <= last_index)))
    position = written + tl.cumsum(chosen.to(tl.int32), axis=0) - 1
    keep = chosen & (position < end)
    tl.store(out_values_ptr + position, x, mask=keep)
    tl.store(out_indices_ptr + position, index, mask=keep)
    return written + tl.sum(chosen.to(tl.int32), axis=0)


@triton.jit(do_not_specialize=["values_stride", "indices_stride", "out_stride", "scratch_stride"])
def topk_segment_kernel(
    values_ptr,
    values_stride,
    indices_ptr,
    indices_stride,
    row_ends_ptr,
    width,
    segment_len,
    k,
    out_values_ptr,
    out_indices_ptr,
    out_stride,
    scratch_ptr,
    scratch_stride,
    CANDIDATES: tl.constexpr,
    BLOCK: tl.constexpr,
    THREADS: tl.constexpr,
    CHUNK: tl.constexpr,
    BINS: tl.constexpr,
    SMEM: tl.constexpr,
):
    """Top-k of segment ``program_id(1)`` of row ``program_id(0)``, written at
    ``out + row * out_stride + segment * k`` (-inf / -1 where it has fewer than k).

    CANDIDATES=False: the input is logits, valid where ``j < row_ends[row]``.
    CANDIDATES=True: the input is a previous pass's (values, indices), valid where index >= 0.
    ``scratch_ptr``: int64, ``scratch_stride`` (>= BLOCK) per program. SMEM: the coarse histogram
    in shared memory (NVIDIA only; BLOCK >= THREADS >= BINS, THREADS = 32 * num_warps).

    Layout: every arange that addresses memory is declared one-contiguous (``max_contiguous``),
    so that no access is vectorized, whatever the strides' divisibility (the launcher leaves the
    strides unspecialized; Inductor's generated code may mark them divisible by 16). Every
    tensor of the segment then takes the one-entry-per-thread layout (coalesced across the warp)
    of the scattered stores: entry r * THREADS + t lives in thread t (THREADS = 32 * num_warps),
    and no tensor is converted between layouts through shared memory. The compaction's running
    counts go down each thread's entries in registers, and only the per-thread totals are
    scanned across threads. Vectorized loads would put 4 entries per thread and force a
    shared-memory conversion of the whole segment before the scattered stores. The
    shared-memory histogram needs this layout for correctness, not only speed (its steps run
    once per thread, with no Triton buffer between them); tests/test_topk.py checks that the
    kernel compiled both ways is the same PTX.
    """
    ROWS: tl.constexpr = BLOCK // THREADS
    # The shared histogram counts each entry once only without a replicated layout: the launcher
    # also keeps THREADS = 32 * num_warps for it, which the kernel cannot check.
    tl.static_assert(not SMEM or (BLOCK >= THREADS and THREADS >= BINS))
    row = tl.program_id(0).to(tl.int64)
    segment = tl.program_id(1)
    program = row * tl.num_programs(1) + segment
    # One entry per thread in every access (here and in every other arange that addresses
    # memory), whatever the strides' divisibility: Inductor specializes strides divisible by 16,
    # which would vectorize the loads, convert layouts through shared memory, and break the
    # shared-memory histogram's one-instance-per-thread steps.
    offs = tl.max_contiguous(tl.arange(0, BLOCK), 1)
    j = segment * segment_len + offs
    in_segment = (offs < segment_len) & (j < width)
    values_at = values_ptr + row * values_stride + j
    indices_at = indices_ptr + row * indices_stride + j
    if CANDIDATES:
        index = tl.load(indices_at, mask=in_segment, other=-1)
        valid = index >= 0
        count = tl.sum(valid.to(tl.int32), axis=0)
    else:
        row_end = tl.minimum(tl.load(row_ends_ptr + row), width).to(tl.int32)
        valid = in_segment & (j < row_end)
        count = tl.minimum(tl.maximum(row_end - segment * segment_len, 0), segment_len)
    x = tl.load(values_at, mask=in_segment, other=0.0)
    take = tl.minimum(count, k)
    out = row * out_stride + segment * k

    if take > 0:
        if SMEM:
            # Sizes Triton's shared allocation to at least 4 * BINS bytes: a histogram of BINS
            # entries (its counts are not used; its sum is an operand of the zero step, which
            # keeps it in the code).
            allocated = tl.sum(tl.histogram(tl.arange(0, BINS), BINS), axis=0)
        # 1. Coarse buckets: a monotone map of the value over the finite range [lo, hi].
        finite = valid & (tl.abs(x) < float("inf"))
        lo, hi = tl.reduce((tl.where(finite, x, float("inf")), tl.where(finite, x, float("-inf"))), 0, _min_max)
        spread = hi > lo
        lo = tl.where(spread, lo, 0.0)
        hi = tl.where(spread, hi, 0.0)
        # Quarter scale keeps hi - lo finite; a zero or tiny span gives one bucket or a capped scale.
        span = hi * 0.25 - lo * 0.25
        scale = tl.where(span > 0.0, BINS / tl.maximum(span, BINS * 1e-30), 0.0)
        # +inf sits with hi (top bucket); NaN and -inf with lo (bucket 0).
        xf = tl.where(finite, x, tl.where(x > 0.0, hi, lo))
        t = (xf * 0.25 - lo * 0.25) * scale
        # Round to an integer by the 2**23 trick (monotone, no conversion instruction).
        bucket = (t + 8388608.0).to(tl.int32, bitcast=True) - 0x4B000000
        bucket = tl.where(valid, tl.minimum(tl.maximum(bucket, 0), BINS - 1), -1)
        if SMEM:
            # Counted in shared memory after the range's reduction (its result is an operand).
            hist = smem_histogram(bucket, lo.to(tl.int32, bitcast=True) ^ allocated, ROWS, THREADS, BINS)
        else:
            hist = tl.histogram(tl.maximum(bucket, 0), BINS, mask=bucket >= 0)
        b, n_above, n_cand = bucket_search(hist, take, BLOCK >= 2**20)
        needed = take - n_above

        # 2. Compaction to the scratch area: the entries above bucket b at [0, n_above), those
        # of bucket b (the candidates) after them; one 8-byte store per entry.
        above = bucket > b
        cand = bucket == b
        if BLOCK <= 32768:
            # Both running counts in one int32 (above in the low 16 bits).
            both = column_major_count(above.to(tl.int32) + (cand.to(tl.int32) << 16), ROWS, THREADS)
            rank_above = both & 0xFFFF
            rank_cand = (both >> 16) & 0xFFFF
        else:
            rank_above = column_major_count(above.to(tl.int32), ROWS, THREADS)
            rank_cand = column_major_count(cand.to(tl.int32), ROWS, THREADS)
        slot = tl.where(above, rank_above - 1, tl.where(cand, n_above + rank_cand - 1, -1))
        # Reload rather than keep the segment (or its addresses) live across the scan: it is
        # in L1. The addresses are formed anew (row and segment offsets summed first) and the
        # cache modifier differs, so that the compiler merges neither with the first load's.
        first = row * values_stride + segment * segment_len
        x = tl.load(values_ptr + first + offs, mask=slot >= 0, other=0.0, cache_modifier=".ca")
        if CANDIDATES:
            first = row * indices_stride + segment * segment_len
            index = tl.load(indices_ptr + first + offs, mask=slot >= 0, other=-1, cache_modifier=".ca")
        else:
            # Formed anew too (segment_start < width): reusing j would keep it live.
            index = tl.minimum(segment * segment_len, width) + offs
        scratch = scratch_ptr + program * scratch_stride
        tl.store(scratch + slot, pack_entry(x, index), mask=slot >= 0)
        tl.debug_barrier()

        # The entries above bucket b are selected: copy them to the output.
        chunk = tl.max_contiguous(tl.arange(0, CHUNK), 1)
        for start in range(0, n_above, CHUNK):
            entry = tl.load(scratch + start + chunk, mask=start + chunk < n_above, other=0)
            xc = (entry & 0xFFFFFFFF).to(tl.int32).to(tl.float32, bitcast=True)
            tl.store(out_values_ptr + out + start + chunk, xc, mask=start + chunk < n_above)
            tl.store(out_indices_ptr + out + start + chunk, (entry >> 32).to(tl.int32), mask=start + chunk < n_above)

        # 3. Exact threshold among the candidates; the first CHUNK stay in registers.
        candidates = scratch + n_above
        x0, index0, in0 = load_entries(candidates, 0, n_cand, CHUNK)
        key0 = select_key(x0, in0)
        # When every candidate is needed, the threshold is the smallest candidate key: all pass.
        threshold, ties_needed, ties = radix_select(
            key0, candidates, n_cand, needed, 0, TIES=False, CHUNK=CHUNK, WIDE=BLOCK >= 2**20
        )
        last_index = 2147483647
        if ties_needed < ties:
            # Keep the ties_needed lowest indices among the keys equal to the threshold.
            tie_key0 = candidate_key(x0, index0, in0, threshold, TIES=True)
            lowest, _, _ = radix_select(
                tie_key0, candidates, n_cand, ties_needed, threshold, TIES=True, CHUNK=CHUNK, WIDE=BLOCK >= 2**20
            )
            last_index = 2147483647 - (lowest & 0x7FFFFFFF).to(tl.int32, bitcast=True)
        # The counts above make the chosen fill [n_above, take) exactly; the bound only keeps a
        # miscount from writing past this segment's k outputs.
        written = store_chosen(x0, index0, key0, in0, threshold, last_index, out_values_ptr, out_indices_ptr,
                               out + n_above, out + k)
        for start in range(CHUNK, n_cand, CHUNK):
            xc, indexc, inc = load_entries(candidates, start, n_cand, CHUNK)
            written = store_chosen(xc, indexc, select_key(xc, inc), inc, threshold, last_index, out_values_ptr,
                                   out_indices_ptr, written, out + k)

    pad = tl.max_contiguous(tl.arange(0, CHUNK), 1)
    for start in range(take, k, CHUNK):
        tl.store(out_values_ptr + out + start + pad, float("-inf"), mask=start + pad < k)
        tl.store(out_indices_ptr + out + start + pad, -1, mask=start + pad < k)


def launch_select_topk(
    logits: torch.Tensor, row_ends: torch.Tensor, k: int, sorted: bool, **tuning
) -> tuple[torch.Tensor, torch.Tensor]:
    """``tuning`` (segment, num_warps, chunk, bins, smem) is for benchmarks and tests, not part of the API.

    segment: entries per program (rounded up to a power of 2, at least 2 * next_power_of_2(k));
    rows wider than that take more passes. num_warps: 16 (at the GPU's default segment of 32768,
    64 entries per thread in 128 registers). chunk: candidates per refinement step
    (the first chunk stays in registers). bins: coarse buckets, a power of 2 (64 leaves about
    half the candidates of 32 for one more ballot per entry; H200, 64 x 32768, same run: 32.1
    vs 34.0 us). smem: the coarse histogram in shared memory (default on NVIDIA GPUs; a pass
    whose block has fewer entries than threads, or whose threads are fewer than the bins,
    counts with ``tl.histogram``).
    """
    rows, width = logits.shape
    device = logits.device
    row_ends = row_ends.contiguous()  # the kernel reads entry r at row_ends_ptr + r
    values = torch.empty((rows, k), dtype=torch.float32, device=device)
    indices = torch.empty((rows, k), dtype=torch.int32, device=device)
    if rows == 0:
        return values, indices
    if logits.stride(1) != 1:
        # The kernel reads a row's keys at unit stride (any row stride): other layouts are copied
        # here, as the reference backend takes them too.
        logits = logits.contiguous()
    gpu = device.type == "cuda"
    # A segment lives in registers: 64 entries per thread at 16 warps (on sm_90, 344 bytes of
    # them spill to local memory; still the fastest measured: H200, 64 x 32768, same run, 27.2
    # us against 29.9 at 16384 and 31.3 at 32768 x 32 warps).
    segment = tuning.get("segment", 32768 if gpu else 256)
    segment = max(triton.next_power_of_2(segment), 2 * triton.next_power_of_2(k))
    num_warps = tuning.get("num_warps", 16 if gpu else 4)
    chunk = tuning.get("chunk", 1024 if gpu else 128)
    bins = tuning.get("bins", 64)
    threads = 32 * num_warps
    # The shared-memory histogram needs a thread per bin.
    smem = tuning.get("smem", gpu and torch.version.hip is None) and threads >= bins

    def run(src_values, src_stride, src_indices, src_indices_stride, n, segment_len, segments, block, out_v, out_i, out_stride):
        scratch = torch.empty((rows * segments, block), dtype=torch.int64, device=device)
        # The shared-memory histogram counts each entry once: a block with fewer entries than
        # threads (a replicated layout) counts with tl.histogram. num_warps stays a constant: a
        # launch's warps cannot depend on a dynamic width under torch.compile. A block that is n
        # rounded up to a power of 2 is asked of n, so that a dynamic width guards on n only.
        fills = block >= threads if isinstance(block, int) else bool(2 * n > threads)
        shared = smem and fills
        wrap_triton(topk_segment_kernel)[(rows, segments)](
            src_values, src_stride, src_values if src_indices is None else src_indices, src_indices_stride,
            row_ends, n, segment_len, k,
            out_v, out_i, out_stride, scratch, block,
            CANDIDATES=src_indices is not None, BLOCK=block, THREADS=min(block, threads),
            CHUNK=min(chunk, block), BINS=bins, SMEM=shared,
            num_warps=num_warps,
        )

    src_values, src_stride, src_indices, src_indices_stride, n = logits, logits.stride(0), None, 0, width
    while n > segment:
        segments = triton.cdiv(n, segment)
        cand_values = torch.empty((rows, segments * k), dtype=torch.float32, device=device)
        cand_indices = torch.empty((rows, segments * k), dtype=torch.int32, device=device)
        run(src_values, src_stride, src_indices, src_indices_stride, n, segment, segments, segment,
            cand_values, cand_indices, segments * k)
        src_values, src_stride, src_indices, src_indices_stride = cand_values, segments * k, cand_indices, segments * k
        n = segments * k
    block = triton.next_power_of_2(max(n, 1))
    run(src_values, src_stride, src_indices, src_indices_stride, n, n, 1, block, values, indices, k)
    if sorted:
        values, indices = sort_selection(values, indices)
    return values, indices


def sort_selection(values: torch.Tensor, indices: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Order a selection by value (descending, NaN last, -inf/-1 padding after it), then index."""
    key = order_keys(values, indices.clamp_min(0), indices < 0)
    order = torch.argsort(key, dim=1, descending=True)
    return values.gather(1, order), indices.gather(1, order)
