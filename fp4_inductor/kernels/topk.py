"""Per-row top-k by an exact radix selection over a segment held in registers.

A program holds one segment of a row in registers, as order-preserving uint32
keys, finds the exact threshold of its top-k in histogram passes over those
registers, and writes the chosen entries in one compaction:

1. Radix search over the keys' own range: the first pass splits [lowest,
   highest] of the valid keys into at most 2**RADIX_BITS buckets of 2**shift
   keys (shift from the span's bit length) and counts the keys in each; the
   bucket holding the k-th largest key becomes the next interval, split again
   by the next pass. It stops as soon as that bucket is needed whole (its
   lowest key is then the threshold, every key at or above it chosen) or holds
   a single key. When only some of the entries equal to the threshold are
   kept, the same search over keys built from their indices picks the lowest
   indices.
2. One compaction: each thread's chosen entries (key above the threshold, or
   equal to it at an index up to the last tie kept) become bit masks of its
   rows; a scan of the per-thread counts gives each thread its first output,
   and the thread walks its set bits, reading the value and index of those
   entries only.

On NVIDIA GPUs the histograms are counted in shared memory by PTX atomics and
searched by one PTX step per pass (``radix_select_shared``: 8-bit digits, a
thread per bin, five barriers a pass, three in one warp), except in a pass whose
block has fewer entries than threads; elsewhere, and in the interpreter, by
``tl.histogram`` and Triton's scan and reduction (``radix_select``: 5-bit
digits, where its warp ballots stay cheap).

Floats become uint32 keys whose unsigned order is the float order, NaN lowest
and -0.0 == +0.0; a key of 0 marks an entry that is not valid. Values are
written with their own bits (NaN payloads and -0.0 kept).

Long rows are split: a pass selects each segment's top-k, the next one the
top-k of those candidates (repeated while a row has more candidates than a
segment). That is exact: a member of the row's top-k is in its segment's top-k
(ties included, since every pass breaks ties toward the lower index by the
index itself, not by position). Entries at ``j >= row_ends[r]`` are never
candidates. The order of the selection within a row is unspecified (and the
same on every call).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch.library import wrap_triton

from ..reference import order_keys
from . import cdiv, next_power_of_2, sm_count

# The histograms in shared memory. Triton has no shared atomics: ``tl.histogram`` spends about
# 30 instructions per entry on warp ballots at 64 bins (80 at 256), a shared ``red.add`` a few.
# Three PTX steps, in a region at the top of the launch's dynamic shared memory (``SHARED_WORDS``
# sizes the launch). During a search no buffer of Triton's reaches the region: its one buffer in
# the search loop, the 8 * THREADS bytes of a gather, sits below it; the buffer that sizes the
# allocation spans it, but is done with before the zero step, which takes its result. Per search,
# one zero step (a bin per thread, then a barrier; trapping if the launch has too few bytes); per
# pass, one add per entry and one search step. The search step reads and clears each thread's
# bin, scans the counts (within the warp by shuffles, across the warps of bins through shared
# memory), and the thread whose bin holds the needed-th key writes (bin, keys above it, keys in
# it) for every thread to read: three barriers a pass, and the counters are zero again for the
# next pass. The zero and search steps run once per thread (``%tid.x`` is its bin), the add once
# per entry, which the one-entry-per-thread layout of the segment gives. The asm is pure, so that
# Inductor's analysis sees which tensors the kernel writes; the order of the steps is kept by
# data: the zero step takes a value that needs the allocation (or the tie keys' range), the adds
# the region's address from the zero step or the last search, the search the sum of the adds.
# One line each: Inductor copies constexpr globals into its generated code.
# Region, from its 16-byte aligned start: warp totals (32 words), the search's result (4 words at
# byte 128), the bins (from byte 160).
_SMEM_ZERO = tl.constexpr(
    "{ .reg .u32 a, n, o; .reg .pred p; mov.u32 n, %dynamic_smem_size; shl.b32 o, $2, 2; add.u32 o, o, 160; "
    "add.u32 a, o, $3; add.u32 a, a, 16; setp.lt.u32 p, n, a; @p trap; sub.u32 o, n, o; and.b32 o, o, -16; "
    "mov.u32 a, global_smem; add.u32 a, a, o; add.u32 $0, a, 160; mov.u32 o, %tid.x; setp.lt.u32 p, o, $2; "
    "mad.lo.u32 a, o, 4, $0; @p st.shared.u32 [a], 0; bar.sync 0; }"
)
# The add step: the bin (key - lo) >> shift of a key in [lo, top], formed in the asm so that no
# tensor of bins is live next to the keys (ptxas would form all of a thread's bins before its
# first add, and spill).
_SMEM_ADD = tl.constexpr(
    "{ .reg .u32 a, d; .reg .pred p, q; setp.ge.u32 p, $1, $2; setp.le.u32 q, $1, $3; and.pred p, p, q; "
    "sub.u32 d, $1, $2; shr.u32 d, d, $4; mad.lo.u32 a, d, 4, $5; @p red.shared.add.u32 [a], 1; mov.u32 $0, $5; }"
)


def _search_asm() -> str:
    """Outputs: bin, keys above it, keys in it, the bins' address; inputs: needed ($4), the adds'
    token ($5), the bin count ($6, at most 256), the bins' address ($7)."""
    steps = ["{ .reg .u32 a, h, c, s, v, t, w, x<8>; .reg .pred p, q, r; bar.sync 0;",
             "sub.u32 h, $7, 160; mov.u32 t, %tid.x; shr.u32 w, t, 5; setp.lt.u32 p, t, $6; mov.u32 c, 0;",
             "mad.lo.u32 a, t, 4, $7; @p ld.shared.u32 c, [a]; @p st.shared.u32 [a], 0; mov.u32 s, c;"]
    # s: the counts of this bin and the warp's bins above it; lane 0 holds the warp's total.
    steps += [f"shfl.sync.down.b32 v|q, s, {d}, 31, -1; @q add.u32 s, s, v;" for d in (1, 2, 4, 8, 16)]
    steps += ["and.b32 v, t, 31; setp.eq.u32 q, v, 0; mad.lo.u32 a, w, 4, h; @q st.shared.u32 [a], s; bar.sync 0;",
              "ld.shared.v4.u32 {x0, x1, x2, x3}, [h]; ld.shared.v4.u32 {x4, x5, x6, x7}, [h+16];"]
    # ... plus the totals of the warps of bins above this thread's warp.
    steps += [f"setp.lt.u32 q, w, {i}; setp.gt.u32 r, $6, {32 * i}; and.pred q, q, r; @q add.u32 s, s, x{i};"
              for i in range(1, 8)]
    # The bin with at least needed keys at or above it, and fewer above it.
    steps += ["setp.ge.u32 q, s, $4; and.pred q, q, p; sub.u32 v, s, c; setp.lt.u32 r, v, $4; and.pred q, q, r;",
              "@q st.shared.v4.u32 [h+128], {t, v, c, c}; bar.sync 0; ld.shared.v4.u32 {$0, $1, $2, v}, [h+128];",
              "mov.u32 $3, $7; }"]
    return " ".join(steps)


_SMEM_SEARCH = tl.constexpr(_search_asm())


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
def layout_column(ROWS: tl.constexpr, THREADS: tl.constexpr):
    """[THREADS]: each thread's column t of the segment's [ROWS, THREADS] layout (entry
    r * THREADS + t lives in thread t), formed in registers."""
    return tl.min(tl.reshape(tl.arange(0, ROWS * THREADS), [ROWS, THREADS]), axis=0)


@triton.jit
def key_range(key):
    """(lowest, highest) of the nonzero keys (0 marks an entry that is not valid);
    (0xFFFFFFFF, 0) when there are none."""
    return tl.reduce((tl.where(key != 0, key, 0xFFFFFFFF).to(tl.uint32), key), 0, _min_max)


@triton.jit
def first_shift(lo, top, RADIX_BITS: tl.constexpr):
    """The first pass's bucket width (log2) over [lo, top]: at least the span's bit length minus
    RADIX_BITS (the float's exponent never undercounts it)."""
    span = (top - lo).to(tl.float32)
    span_bits = tl.where(span > 0.0, ((span.to(tl.int32, bitcast=True) >> 23) & 0xFF) - 126, 0)
    return tl.maximum(span_bits - RADIX_BITS, 0)


@triton.jit
def radix_select(key, lo, top, needed, RADIX_BITS: tl.constexpr, WIDE: tl.constexpr):
    """Where the ``needed``-th largest of the keys in [lo, top] lies (``needed`` >= 1 and at most
    their count; keys outside the interval are not counted). Returns (threshold, needed at
    threshold, keys at threshold), read by the caller as: every key above the threshold is
    selected, and ``needed at threshold`` of the ``keys at threshold``. Counted by
    ``tl.histogram``.

    The first pass splits [lo, top] into buckets of 2**shift keys (``first_shift``: at most
    2**RADIX_BITS buckets, fewer when the span is shorter), each later pass the chosen bucket
    into buckets of 2**(shift - RADIX_BITS). The search stops when the chosen bucket holds one key
    (shift 0), or as soon as it is needed whole: then the threshold is the bucket's lowest key
    (not necessarily an entry's), and both counts are the bucket's entries, so that every key at
    or above it is selected."""
    shift = first_shift(lo, top, RADIX_BITS)
    at = needed
    searching = needed > 0
    while searching:
        inside = (key >= lo) & (key <= top)
        hist = tl.histogram(tl.where(inside, (key - lo) >> shift, 0).to(tl.int32), 1 << RADIX_BITS, mask=inside)
        chosen, above, at = bucket_search(hist, needed, WIDE)
        needed -= above
        lo += chosen.to(tl.uint32) << shift
        # The chosen bucket's last key, kept at or below top (top - lo >= 0: no overflow).
        top = lo + tl.minimum(top - lo, ((1 << shift) - 1).to(tl.uint32))
        searching = (at > needed) & (shift > 0)
        shift = tl.maximum(shift - RADIX_BITS, 0)
    return lo, needed, at


@triton.jit
def radix_select_shared(key, lo, top, needed, wait, ROWS: tl.constexpr, THREADS: tl.constexpr,
                        RADIX_BITS: tl.constexpr):
    """``radix_select`` with its histograms in shared memory (``_SMEM_ZERO``, ``_SMEM_ADD``,
    ``_SMEM_SEARCH``): the same passes and stop, over the uint32 ``key`` [ROWS * THREADS] (every
    entry in one thread). Returns (threshold, needed at threshold, keys at threshold, whether
    only some keys at the threshold are needed): the counts as [THREADS] tensors (the same in
    every thread), the others as scalars. ``wait``: a value the zero step waits for (it keeps the
    caller's shared allocation live, and tells two searches' zero steps apart)."""
    grid = tl.reshape(key, [ROWS, THREADS])
    column = layout_column(ROWS, THREADS)  # the [THREADS] layout of the steps run once per thread
    bins = tl.full([THREADS], 1 << RADIX_BITS, tl.int32)
    # The bytes below the region that Triton may use meanwhile: the gather's [THREADS] int64.
    reserved = tl.full([THREADS], 8 * THREADS, tl.int32)
    base = tl.inline_asm_elementwise(_SMEM_ZERO, "=r,r,r,r", [wait + tl.zeros_like(column), bins, reserved],
                                     dtype=tl.int32, is_pure=True, pack=1)
    shift = first_shift(lo, top, RADIX_BITS)
    need = tl.zeros_like(column) + needed
    at = need
    searching = lo <= top
    split = lo > top
    while searching:
        added = tl.inline_asm_elementwise(
            _SMEM_ADD, "=r,r,r,r,r,r",
            [grid, lo + tl.zeros_like(grid), top + tl.zeros_like(grid), shift + tl.zeros_like(grid).to(tl.int32),
             tl.broadcast_to(base[None, :], (ROWS, THREADS))],
            dtype=tl.int32, is_pure=True, pack=1)
        chosen, above, at, base = tl.inline_asm_elementwise(
            _SMEM_SEARCH, "=r,=r,=r,=r,r,r,r,r", [need, tl.sum(added, axis=0), bins, base],
            dtype=(tl.int32, tl.int32, tl.int32, tl.int32), is_pure=True, pack=1)
        need -= above
        more = at > need
        # The outcome, the same in every thread, made a scalar by one gather (a shared-memory
        # round trip below the region; shuffles in one warp): the chosen bucket's lowest key,
        # whether only some of its keys are needed, whether to go on.
        state = ((lo + (chosen.to(tl.uint32) << shift)).to(tl.int64) << 2) | (more.to(tl.int64) << 1)
        state = state | (more & (shift > 0)).to(tl.int64)
        state = tl.sum(tl.gather(state, tl.zeros([1], tl.int32), 0), axis=0)
        lo = (state >> 2).to(tl.uint32)
        # The chosen bucket's last key, kept at or below top (top - lo >= 0: no overflow).
        top = lo + tl.minimum(top - lo, ((1 << shift) - 1).to(tl.uint32))
        split = (state & 2) != 0
        searching = (state & 1) != 0
        shift = tl.maximum(shift - RADIX_BITS, 0)
    return lo, need, at, split


@triton.jit
def next_entry(rows_left, position, first, THREADS: tl.constexpr):
    """The entry of the lowest set bit of ``rows_left`` (bit r: the thread's entry at ``first + r *
    THREADS``): (rows_left without it, its j, the next position, its position). With no bit left,
    the position stays (next == its own), which marks no entry."""
    lowest = rows_left & -rows_left
    # The bit's row, from the exponent of its (exact) float.
    bit_row = (lowest.to(tl.uint32, bitcast=True).to(tl.float32).to(tl.int32, bitcast=True) >> 23) - 127
    return rows_left ^ lowest, first + bit_row * THREADS, position + (rows_left != 0).to(tl.int32), position


@triton.jit(do_not_specialize=["values_stride", "indices_stride", "out_stride"])
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
    CANDIDATES: tl.constexpr,
    BLOCK: tl.constexpr,
    THREADS: tl.constexpr,
    RADIX_BITS: tl.constexpr,
    SMEM: tl.constexpr,
):
    """Top-k of segment ``program_id(1)`` of row ``program_id(0)``, written at
    ``out + row * out_stride + segment * k`` (-inf / -1 where it has fewer than k).

    CANDIDATES=False: the input is logits, valid where ``j < row_ends[row]``.
    CANDIDATES=True: the input is a previous pass's (values, indices), valid where index >= 0.
    SMEM: every histogram in shared memory (NVIDIA only; BLOCK >= THREADS >= 2**RADIX_BITS,
    THREADS = 32 * num_warps).

    Layout: every arange that addresses memory is declared one-contiguous (``max_contiguous``),
    so that no access is vectorized, whatever the strides' divisibility (the launcher leaves the
    strides unspecialized; Inductor's generated code may mark them divisible by 16). Every
    tensor of the segment then takes the one-entry-per-thread layout (coalesced across the warp)
    of the scattered stores: entry r * THREADS + t lives in thread t, and no tensor is converted
    between layouts through shared memory. The compaction scans only the per-thread counts
    across threads; each thread then walks its own entries. The shared-memory search needs this
    layout for correctness, not only speed (its steps run once per thread); tests/test_topk.py
    checks that the kernel compiled both ways is the same PTX.
    """
    ROWS: tl.constexpr = BLOCK // THREADS
    # The shared histogram counts each entry once only without a replicated layout: the launcher
    # also keeps THREADS = 32 * num_warps for it, which the kernel cannot check.
    tl.static_assert(not SMEM or (BLOCK >= THREADS and THREADS >= (1 << RADIX_BITS) and RADIX_BITS <= 8))
    # The shared words of a launch with SMEM: the search's region (at most 256 bins, 40 words and
    # 16 bytes of alignment) above the 2 * THREADS words of Triton's gather.
    SHARED_WORDS: tl.constexpr = 4 * THREADS if THREADS >= 64 else 256
    WIDE: tl.constexpr = BLOCK >= 2**20
    row = tl.program_id(0).to(tl.int64)
    segment = tl.program_id(1)
    # One entry per thread in every access (here and in every other arange that addresses
    # memory), whatever the strides' divisibility: Inductor specializes strides divisible by 16,
    # which would vectorize the loads, convert layouts through shared memory, and break the
    # shared-memory histogram's one-instance-per-thread steps.
    offs = tl.max_contiguous(tl.arange(0, BLOCK), 1)
    j = segment * segment_len + offs
    in_segment = (offs < segment_len) & (j < width)
    if CANDIDATES:
        index = tl.load(indices_ptr + row * indices_stride + j, mask=in_segment, other=-1)
        valid = index >= 0
        count = tl.sum(valid.to(tl.int32), axis=0)
    else:
        row_end = tl.minimum(tl.load(row_ends_ptr + row), width).to(tl.int32)
        valid = in_segment & (j < row_end)
        count = tl.minimum(tl.maximum(row_end - segment * segment_len, 0), segment_len)
    x = tl.load(values_ptr + row * values_stride + j, mask=in_segment, other=0.0)
    take = tl.minimum(count, k)
    out = row * out_stride + segment * k

    if take > 0:
        allocated = 0
        if SMEM:
            # Sizes Triton's shared allocation to SHARED_WORDS words (its value is not used; it is an
            # operand of the first zero step, which keeps it in the code): a gather from that many
            # words, or in one warp, where a gather takes shuffles instead, a histogram of as many bins.
            words = tl.arange(0, SHARED_WORDS)
            if THREADS > 32:
                allocated = tl.sum(tl.gather(words, tl.zeros([1], tl.int32), 0), axis=0)
            else:
                allocated = tl.sum(tl.histogram(words, SHARED_WORDS), axis=0)
        # Only the keys stay live from here on (values and indices are read again at the end).
        key = select_key(x, valid)
        # 1. The exact threshold: a radix search over the keys' own range.
        key_lo, key_hi = key_range(key)
        if SMEM:
            threshold, ties_needed, ties, split = radix_select_shared(key, key_lo, key_hi, take, allocated, ROWS,
                                                                      THREADS, RADIX_BITS)
        else:
            threshold, ties_needed, ties = radix_select(key, key_lo, key_hi, take, RADIX_BITS, WIDE)
            split = ties_needed < ties
        last_index = 2147483647
        if split:
            # Keep the ties_needed lowest indices among the keys equal to the threshold: the same
            # search over keys that rank the lower index higher.
            tie = key == threshold
            if CANDIDATES:
                tie_index = tl.load(indices_ptr + row * indices_stride + j, mask=tie, other=-1)
            else:
                tie_index = j
            lower_first = tl.where(tie, (2147483647 - tie_index).to(tl.uint32, bitcast=True) | 0x80000000, 0)
            lower_first = lower_first.to(tl.uint32)
            tie_lo, tie_hi = key_range(lower_first)
            if SMEM:
                lowest, _, _, _ = radix_select_shared(lower_first, tie_lo, tie_hi, ties_needed,
                                                      (tie_lo ^ tie_hi).to(tl.int32, bitcast=True), ROWS, THREADS,
                                                      RADIX_BITS)
            else:
                lowest, _, _ = radix_select(lower_first, tie_lo, tie_hi, ties_needed, RADIX_BITS, WIDE)
            last_index = 2147483647 - (lowest & 0x7FFFFFFF).to(tl.int32, bitcast=True)

        # 3. One compaction: the chosen entries at their running count in the column layout
        # (exactly take of them; the bound only keeps a miscount from writing past this segment's k
        # outputs). Each thread's chosen entries become bit masks of its rows (a word per 32 rows),
        # its first output a scan of the per-thread counts; then each thread walks its set bits, so
        # that only the chosen entries are read again (from L1/L2) and no tensor of the whole
        # segment but the keys is ever live.
        if CANDIDATES:
            index = tl.load(indices_ptr + row * indices_stride + j, mask=key == threshold, other=-1)
            chosen = (key > threshold) | ((key == threshold) & (index <= last_index))
        else:
            # The index formed anew (the segment starts below the width), not from j: with j here,
            # ptxas keeps j live through the search (sm_90: 368 bytes of stack instead of 112).
            first_index = tl.minimum(segment * segment_len, width)
            chosen = (key > threshold) | ((key == threshold) & (first_index + offs <= last_index))
        grid = tl.reshape(chosen, [ROWS, THREADS])
        layout_row = tl.reshape(tl.arange(0, BLOCK) // THREADS, [ROWS, THREADS])
        bit = tl.where(grid, 1 << (layout_row & 31), 0)
        totals = tl.sum(grid.to(tl.int32), axis=0)
        position = out + tl.cumsum(totals, axis=0) - totals
        end = out + k
        first = segment * segment_len + layout_column(ROWS, THREADS)  # in the layout of totals
        for word in tl.static_range((ROWS + 31) // 32):
            in_word = layout_row // 32 == word
            word_first = first + word * 32 * THREADS
            rows_left = tl.sum(tl.where(in_word, bit, 0), axis=0)  # distinct bits: the sum is their or
            most = tl.max(tl.sum(tl.where(in_word, grid, 0).to(tl.int32), axis=0), axis=0)
            # Four entries per step, their loads issued together (a store may alias a later load,
            # so the compiler keeps program order).
            for _ in range(tl.cdiv(most, 4)):
                rows_left, j0, p0, at0 = next_entry(rows_left, position, word_first, THREADS)
                rows_left, j1, p1, at1 = next_entry(rows_left, p0, word_first, THREADS)
                rows_left, j2, p2, at2 = next_entry(rows_left, p1, word_first, THREADS)
                rows_left, j3, position, at3 = next_entry(rows_left, p2, word_first, THREADS)
                keep0, keep1, keep2, keep3 = p0 > at0, p1 > at1, p2 > at2, position > at3
                keep0, keep1, keep2, keep3 = keep0 & (at0 < end), keep1 & (at1 < end), keep2 & (at2 < end), keep3 & (at3 < end)
                x0 = tl.load(values_ptr + row * values_stride + j0, mask=keep0, other=0.0)
                x1 = tl.load(values_ptr + row * values_stride + j1, mask=keep1, other=0.0)
                x2 = tl.load(values_ptr + row * values_stride + j2, mask=keep2, other=0.0)
                x3 = tl.load(values_ptr + row * values_stride + j3, mask=keep3, other=0.0)
                if CANDIDATES:
                    i0 = tl.load(indices_ptr + row * indices_stride + j0, mask=keep0, other=-1)
                    i1 = tl.load(indices_ptr + row * indices_stride + j1, mask=keep1, other=-1)
                    i2 = tl.load(indices_ptr + row * indices_stride + j2, mask=keep2, other=-1)
                    i3 = tl.load(indices_ptr + row * indices_stride + j3, mask=keep3, other=-1)
                else:
                    i0, i1, i2, i3 = j0, j1, j2, j3
                tl.store(out_values_ptr + at0, x0, mask=keep0)
                tl.store(out_values_ptr + at1, x1, mask=keep1)
                tl.store(out_values_ptr + at2, x2, mask=keep2)
                tl.store(out_values_ptr + at3, x3, mask=keep3)
                tl.store(out_indices_ptr + at0, i0, mask=keep0)
                tl.store(out_indices_ptr + at1, i1, mask=keep1)
                tl.store(out_indices_ptr + at2, i2, mask=keep2)
                tl.store(out_indices_ptr + at3, i3, mask=keep3)

    for start in range(take, k, BLOCK):
        tl.store(out_values_ptr + out + start + offs, float("-inf"), mask=start + offs < k)
        tl.store(out_indices_ptr + out + start + offs, -1, mask=start + offs < k)


def launch_select_topk(
    logits: torch.Tensor, row_ends: torch.Tensor, k: int, sorted: bool, **tuning
) -> tuple[torch.Tensor, torch.Tensor]:
    """``tuning`` (segment, num_warps, radix_bits, smem) is for benchmarks and tests, not part of
    the API.

    segment: entries per program (rounded up to a power of 2, at least 2 * next_power_of_2(k));
    rows wider than that take more passes. On the GPU the default, 32768, is halved once when
    the first pass would fill fewer than half the SMs (static shapes only). num_warps: 16 on the
    GPU (64 keys per thread at its default segment of 32768). radix_bits: bits per digit of the threshold search (8 with the
    shared-memory histograms, at most 8 and log2 of the threads; 5 with ``tl.histogram``, whose cost
    grows with the bins). smem: the histograms in shared memory (default on NVIDIA GPUs; a pass
    whose block has fewer entries than threads counts with ``tl.histogram``).
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
    least = 2 * next_power_of_2(k)
    segment = max(next_power_of_2(tuning.get("segment", 32768 if gpu else 256)), least)
    if gpu and "segment" not in tuning and isinstance(rows, int) and isinstance(width, int):
        # A first pass on fewer than half the SMs takes half segments (and one more, short pass):
        # H200, 64 x 32768, k=2048, same run: 19.9 us against 23.0 at 32768.
        sms = sm_count(device)
        if segment // 2 >= least and 2 * rows * cdiv(width, segment) <= sms:
            segment //= 2
    num_warps = tuning.get("num_warps", 16 if gpu else 4)
    threads = 32 * num_warps
    smem = tuning.get("smem", gpu and torch.version.hip is None)

    def run(src_values, src_stride, src_indices, src_indices_stride, n, segment_len, segments, block, out_v, out_i, out_stride):
        # The shared-memory histogram counts each entry once: a block with fewer entries than
        # threads (a replicated layout) counts with tl.histogram. num_warps stays a constant: a
        # launch's warps cannot depend on a dynamic width under torch.compile. A block that is n
        # rounded up to a power of 2 is asked of n, so that a dynamic width guards on n only.
        fills = block >= threads if isinstance(block, int) else bool(2 * n > threads)
        shared = smem and fills
        radix_bits = tuning.get("radix_bits", 8 if shared else 5)
        if shared:
            radix_bits = min(radix_bits, threads.bit_length() - 1, 8)  # a thread per bin, at most 256
        wrap_triton(topk_segment_kernel)[(rows, segments)](
            src_values, src_stride, src_values if src_indices is None else src_indices, src_indices_stride,
            row_ends, n, segment_len, k, out_v, out_i, out_stride,
            CANDIDATES=src_indices is not None, BLOCK=block, THREADS=min(block, threads),
            RADIX_BITS=radix_bits, SMEM=shared,
            num_warps=num_warps,
        )

    src_values, src_stride, src_indices, src_indices_stride, n = logits, logits.stride(0), None, 0, width
    while n > segment:
        segments = cdiv(n, segment)
        cand_values = torch.empty((rows, segments * k), dtype=torch.float32, device=device)
        cand_indices = torch.empty((rows, segments * k), dtype=torch.int32, device=device)
        run(src_values, src_stride, src_indices, src_indices_stride, n, segment, segments, segment,
            cand_values, cand_indices, segments * k)
        src_values, src_stride, src_indices, src_indices_stride = cand_values, segments * k, cand_indices, segments * k
        n = segments * k
    block = next_power_of_2(max(n, 1))
    run(src_values, src_stride, src_indices, src_indices_stride, n, n, 1, block, values, indices, k)
    if sorted:
        values, indices = sort_selection(values, indices)
    return values, indices


def sort_selection(values: torch.Tensor, indices: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Order a selection by value (descending, NaN last, -inf/-1 padding after it), then index."""
    key = order_keys(values, indices.clamp_min(0), indices < 0)
    order = torch.argsort(key, dim=1, descending=True)
    return values.gather(1, order), indices.gather(1, order)
