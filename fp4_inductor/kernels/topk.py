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

The search lives in ``topk_search.py``. On NVIDIA GPUs the histograms are
counted in shared memory by PTX atomics and
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
from torch.fx.experimental.symbolic_shapes import guard_or_false

from .._op_checks import check_topk_block
from ..reference import order_keys
from . import cdiv, narrow_end, next_power_of_2, sm_count, wrapped
from .topk_search import key_range, layout_column, next_entry, radix_select, radix_select_shared, select_key

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
        row_end = tl.minimum(narrow_end(tl.load(row_ends_ptr + row), width), width)
        valid = in_segment & (j < row_end)
        # Compared before subtracting: an int32 end near -2**31 would wrap positive in a later
        # segment's difference.
        start = segment * segment_len
        count = tl.where(row_end > start, tl.minimum(row_end - start, segment_len), 0)
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
    if guard_or_false(rows == 0):  # an unbacked 0 at run time: an empty grid, which Triton skips
        return values, indices
    if logits.stride(1) != 1:
        # The kernel reads a row's keys at unit stride (any row stride): other layouts are copied
        # here, as the reference backend takes them too.
        logits = logits.contiguous()
    gpu = device.type == "cuda"
    least = 2 * next_power_of_2(k)
    check_topk_block(k, width)
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
        wrapped(topk_segment_kernel)[(rows, segments)](
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
