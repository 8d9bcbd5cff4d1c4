"""select_topk's threshold search: radix passes over a segment's keys held in registers, their
histograms counted with ``tl.histogram`` or, on NVIDIA GPUs, in shared memory through three PTX
steps (``SMEM_ZERO``, ``SMEM_ADD``, ``SMEM_SEARCH``; tests/test_topk_asm.py runs them through a
PTX emulator). ``topk.py`` holds the kernel that calls them and its launcher."""

import triton
import triton.language as tl

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
SMEM_ZERO = tl.constexpr(
    "{ .reg .u32 a, n, o; .reg .pred p; mov.u32 n, %dynamic_smem_size; shl.b32 o, $2, 2; add.u32 o, o, 160; "
    "add.u32 a, o, $3; add.u32 a, a, 16; setp.lt.u32 p, n, a; @p trap; sub.u32 o, n, o; and.b32 o, o, -16; "
    "mov.u32 a, global_smem; add.u32 a, a, o; add.u32 $0, a, 160; mov.u32 o, %tid.x; setp.lt.u32 p, o, $2; "
    "mad.lo.u32 a, o, 4, $0; @p st.shared.u32 [a], 0; bar.sync 0; }"
)
# The add step: the bin (key - lo) >> shift of a key in [lo, top], formed in the asm so that no
# tensor of bins is live next to the keys (ptxas would form all of a thread's bins before its
# first add, and spill).
SMEM_ADD = tl.constexpr(
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


SMEM_SEARCH = tl.constexpr(_search_asm())


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
    """``radix_select`` with its histograms in shared memory (``SMEM_ZERO``, ``SMEM_ADD``,
    ``SMEM_SEARCH``): the same passes and stop, over the uint32 ``key`` [ROWS * THREADS] (every
    entry in one thread). Returns (threshold, needed at threshold, keys at threshold, whether
    only some keys at the threshold are needed): the counts as [THREADS] tensors (the same in
    every thread), the others as scalars. ``wait``: a value the zero step waits for (it keeps the
    caller's shared allocation live, and tells two searches' zero steps apart)."""
    grid = tl.reshape(key, [ROWS, THREADS])
    column = layout_column(ROWS, THREADS)  # the [THREADS] layout of the steps run once per thread
    bins = tl.full([THREADS], 1 << RADIX_BITS, tl.int32)
    # The bytes below the region that Triton may use meanwhile: the gather's [THREADS] int64.
    reserved = tl.full([THREADS], 8 * THREADS, tl.int32)
    base = tl.inline_asm_elementwise(SMEM_ZERO, "=r,r,r,r", [wait + tl.zeros_like(column), bins, reserved],
                                     dtype=tl.int32, is_pure=True, pack=1)
    shift = first_shift(lo, top, RADIX_BITS)
    need = tl.zeros_like(column) + needed
    at = need
    searching = lo <= top
    split = lo > top
    while searching:
        added = tl.inline_asm_elementwise(
            SMEM_ADD, "=r,r,r,r,r,r",
            [grid, lo + tl.zeros_like(grid), top + tl.zeros_like(grid), shift + tl.zeros_like(grid).to(tl.int32),
             tl.broadcast_to(base[None, :], (ROWS, THREADS))],
            dtype=tl.int32, is_pure=True, pack=1)
        chosen, above, at, base = tl.inline_asm_elementwise(
            SMEM_SEARCH, "=r,=r,=r,=r,r,r,r,r", [need, tl.sum(added, axis=0), bins, base],
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
