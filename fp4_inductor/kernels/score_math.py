"""The scorer's arithmetic on one tile: int8 operands of keys and queries with the group scales
folded in, the dots, the exact paths for keys or queries that do not fold, and the epilogue
(relu, folded head weights, the head sum).

E2M1 values times 2 are the integers {0, 1, 2, 3, 4, 6, 8, 12}. Within one
key (and one query head) the four group scales usually differ by at most
2**3, so each group is shifted left by 3 minus its distance to the largest
scale (``FOLD_LIMIT``; 12 << 3 = 96 still fits int8) and the whole
128-element dot runs as one int8 x int8 -> int32 product: exact, whatever the
order of accumulation. The largest scales come back as one
factor per key and one per column, and since ``relu(a * s) = s * relu(a)``
for ``s > 0`` the per-column factor folds into the head weights:

    logit[j] = 2**(kmax[j] - 131) * sum_c w[c] 2**(qmax[c] - 131) * relu(acc[j, c])

A key whose group scales span more than 2**3 (or a query that does) takes the
exact slow path: one int8 dot per class of the key's group scales, each scaled in
float32 (``fold_classes``, after the word-fed hot pass), or one masked dot per
group (``exact_tile``: a query that does not fold, bf16 queries, caches without
16-byte rows, the one-launch form).

On the GPU, FP4 bytes become int8 operands through PTX byte permutes (``prmt``)
from the (key, group)'s code table: 11 instructions per 8 elements
(``ptx.PRMT_ASM_WORDS``). The interpreter builds the same operands with plain
integer ops. The epilogue takes relu and the int-to-float conversion in one
``mul.rn.sat.f32`` of the accumulator's bits (``ptx.RELU_ASM``).
The operand of a key is split in two K=64 halves: ``a`` holds elements
``8v + 0..3`` at columns ``4v + 0..3``, ``b`` elements ``8v + 4..7``; the
query operands use the same order.
"""

import triton
import triton.language as tl

from . import TRITON_VERSION
from .ptx import PRMT_ASM_BYTES, PRMT_ASM_WORDS, RELU_ASM, RELU_UNSCALE, code_tables

FOLD_LIMIT = tl.constexpr(3)  # 12 << 3 = 96 still fits int8

# Whether ``tl.sum`` compiles a thread's products into the chain that ``head_chain`` spells out
# (Triton 3.6 and 3.7; from 3.8 it sums them as a tree). Where it does, the two-row blocks keep
# ``tl.sum``: ptxas schedules that kernel better than head_chain's (H200, Triton 3.6, A/B:
# next_n=2 112.8-113.5 against 114.2-115.1 us, next_n=4 206.0-206.4 against 209.2-210.8, 16 x
# 131072 next_n=2 112.6-112.9 against 114.2-114.4), while the one-row blocks gain a little with
# head_chain (64 x 32768 78.0-78.5 against 78.6-78.9, 16 x 131072 76.5-76.7 against 77.1-77.2).
TL_SUM_CHAINS = tl.constexpr(TRITON_VERSION is not None and TRITON_VERSION < (3, 8))


@triton.jit
def signed_magnitude(nibble, shift):
    """E2M1 nibble (int32) -> int32 value * 2 << shift (the interpreter's operand builder)."""
    c = nibble & 7
    magnitude = tl.where(c == 0, 0, ((2 | (c & 1)) << (c >> 1)) >> 1) << shift
    return tl.where((nibble & 8) != 0, -magnitude, magnitude)


@triton.jit
def widen(per_group, times: tl.constexpr):
    """[M, G] -> [M, G * times]: each value repeated ``times`` times in place."""
    M: tl.constexpr = per_group.shape[0]
    G: tl.constexpr = per_group.shape[1]
    return tl.reshape(tl.broadcast_to(per_group[:, :, None], (M, G, times)), (M, G * times))


@triton.jit
def widen_groups(per_group):
    """[M, 4] -> [M, 64]: column k takes group (k // 4) % 4 (the hot loop's permuted K order)."""
    M: tl.constexpr = per_group.shape[0]
    return tl.reshape(tl.broadcast_to(per_group[:, None, :, None], (M, 4, 4, 4)), (M, 64))


@triton.jit
def key_operands(x, x2, shift, ASM: tl.constexpr, WORDS: tl.constexpr = False):
    """int8 operands (a, b) [M, 64] of the keys; ``shift`` int32 [M, 4]: left shift per group,
    -1 for a group left out. From ``load_key_bytes`` (x, x2), or with ``WORDS`` from the payload
    words of ``tile_keys`` (x [M, 16], in the permuted K order: column k of ``a`` is element
    k % 4 of word k // 4, of ``b`` element 4 + k % 4; word w belongs to group w % 4).

    The PTX builder's pack=4 ties it to its layout: each call must see four consecutive columns
    of one row. Fed from a byte load, it keeps that load's layout (16 bytes per thread). Fed from
    words, it runs in the int8 dot operand's layout (four consecutive K per register).
    tests/test_prmt.py compiles the kernel for sm_90 and checks the layout of every call."""
    if ASM:
        lo, hi = code_tables(shift)
        if WORDS:
            lo = widen_groups(lo)
            hi = widen_groups(hi)
            a, b = tl.inline_asm_elementwise(
                PRMT_ASM_WORDS, "=r,=r" + ",r" * 12, [widen(x, 4), lo, hi], dtype=(tl.int8, tl.int8),
                is_pure=True, pack=4,
            )
        else:
            lo = widen(lo, 16)
            hi = widen(hi, 16)
            a, b = tl.inline_asm_elementwise(
                PRMT_ASM_BYTES, "=r,=r" + ",r" * 9, [x, lo, hi], dtype=(tl.int8, tl.int8), is_pure=True, pack=4,
            )
        return a, b
    elif WORDS:
        s = widen_groups(shift)
        word = widen(x, 4)
        nibble_shift = (tl.arange(0, 64)[None, :] % 4) * 4
        a = signed_magnitude((word >> nibble_shift) & 15, tl.maximum(s, 0))
        b = signed_magnitude((word >> (nibble_shift + 16)) & 15, tl.maximum(s, 0))
        return tl.where(s >= 0, a, 0).to(tl.int8), tl.where(s >= 0, b, 0).to(tl.int8)
    else:
        s = widen(shift, 16)
        nibble_shift = (tl.arange(0, 64)[None, :] % 2) * 4
        a = signed_magnitude(x.to(tl.int32) >> nibble_shift, tl.maximum(s, 0))
        b = signed_magnitude(x2.to(tl.int32) >> nibble_shift, tl.maximum(s, 0))
        return tl.where(s >= 0, a, 0).to(tl.int8), tl.where(s >= 0, b, 0).to(tl.int8)


@triton.jit
def word_operands(k_exp, x, fewest, ASM: tl.constexpr):
    """A word-fed tile's (k_max, a, b, fewest): each key's largest group scale, the folded int8
    operands, and ``fewest`` updated with the tile's smallest fold per slot."""
    k_max = tl.max(k_exp, axis=1)
    k_fold = FOLD_LIMIT - (k_max[:, None] - k_exp)
    a, b = key_operands(x, x, k_fold, ASM, True)
    return k_max, a, b, tl.minimum(fewest, tl.min(k_fold, axis=1))


@triton.jit
def query_operands(q_base, c_ok, shift, PERMUTED: tl.constexpr = False):
    """int8 operands (a, b) [64, N] of the query columns at ``q_base`` [N] (64 payload bytes each);
    ``shift`` int32 [N, 4] per group, -1 for a group left out. ``PERMUTED``: in the K order of
    ``key_operands`` from words (K word w holds payload word 4 * (w % 4) + w // 4).

    Each payload byte is loaded once ([32, N]: the bytes behind the K pairs 2j, 2j + 1, a head's
    bytes along a warp's lanes on Triton 3.6 to 3.9) and its two nibbles joined into the K order.
    Loading each byte for both of its K ([64 K, N]) cost 0.3-0.6 us at small batches on the H200
    (1 x 8192 next_n=1: 8.1 against 8.4 us; 4 x 32768: 11.4 against 12.0; the same from 16 x 131072
    up), and left the layout to a coalescing tie that Triton 3.7 broke across heads."""
    N: tl.constexpr = shift.shape[0]
    j = tl.arange(0, 32)[:, None]
    if PERMUTED:
        word = 4 * ((j // 2) % 4) + j // 8
        s = tl.reshape(tl.broadcast_to(tl.trans(shift)[None, :, None, :], (4, 4, 4, N)), (64, N))
    else:
        word = j // 2
        s = tl.reshape(tl.broadcast_to(tl.trans(shift)[:, None, :], (4, 16, N)), (64, N))
    at = q_base[None, :] + word * 4 + j % 2
    bytes_a = tl.load(at, mask=c_ok[None, :], other=0).to(tl.int32)
    bytes_b = tl.load(at + 2, mask=c_ok[None, :], other=0).to(tl.int32)
    # K 2j is the byte's low nibble, 2j + 1 its high one.
    raw_a = tl.reshape(tl.permute(tl.join(bytes_a, bytes_a >> 4), (0, 2, 1)), (64, N))
    raw_b = tl.reshape(tl.permute(tl.join(bytes_b, bytes_b >> 4), (0, 2, 1)), (64, N))
    a = tl.where(s >= 0, signed_magnitude(raw_a, tl.maximum(s, 0)), 0)
    b = tl.where(s >= 0, signed_magnitude(raw_b, tl.maximum(s, 0)), 0)
    return a.to(tl.int8), b.to(tl.int8)


@triton.jit
def float_query_operands(q_base, c_ok, DOT_DTYPE: tl.constexpr):
    """(a, b) [64, N] of unquantized queries at ``q_base`` [N] (128 elements each), in the
    column order of ``key_operands`` (a: elements 8v + 0..3, b: 8v + 4..7)."""
    k = tl.arange(0, 64)[:, None]
    element = (k // 4) * 8 + k % 4
    a = tl.load(q_base[None, :] + element, mask=c_ok[None, :], other=0.0)
    b = tl.load(q_base[None, :] + element + 4, mask=c_ok[None, :], other=0.0)
    return a.to(DOT_DTYPE), b.to(DOT_DTYPE)


@triton.jit
def key_dot(ka, kb, qa, qb, QUERY_FLOAT: tl.constexpr, DOT_DTYPE: tl.constexpr):
    """[M, N] dot of the key and query operands: exact int32 for FP4 queries; float32 for
    unquantized ones (int8 keys are exact in bf16, products exact in float32)."""
    if QUERY_FLOAT:
        acc = tl.dot(ka.to(DOT_DTYPE), qa, out_dtype=tl.float32)
        return tl.dot(kb.to(DOT_DTYPE), qb, acc, out_dtype=tl.float32)
    else:
        acc = tl.dot(ka, qa, out_dtype=tl.int32)
        return tl.dot(kb, qb, acc, out_dtype=tl.int32)


@triton.jit
def power_of_two(byte, times):
    """2**(byte - 127) * times for a UE8M0 byte (int32); 255 -> NaN; byte 0 reads as 0."""
    return tl.where(byte == 255, float("nan"), (byte << 23).to(tl.float32, bitcast=True) * times)


@triton.jit
def exact_tile(x, x2, k_exp, qa_raw, qb_raw, q_exp, w, out_at, out_ok, ROWS: tl.constexpr, HEADS: tl.constexpr,
               ASM: tl.constexpr, QUERY_FLOAT: tl.constexpr, DOT_DTYPE: tl.constexpr, WORDS: tl.constexpr = False):
    """The exact path for one tile: one masked dot per group, each scaled in float32. ``WORDS``:
    keys from ``tile_keys`` and query operands in its permuted K order."""
    M: tl.constexpr = k_exp.shape[0]
    g4 = tl.arange(0, 4)[None, :]
    s = tl.zeros((M, ROWS * HEADS), dtype=tl.float32)
    for g in range(4):
        only_g = tl.where(g4 == g, 0, -1)
        ka, kb = key_operands(x, x2, tl.zeros_like(k_exp) + only_g, ASM, WORDS)
        acc = key_dot(ka, kb, qa_raw, qb_raw, QUERY_FLOAT, DOT_DTYPE)
        k_scale = power_of_two(tl.sum(tl.where(g4 == g, k_exp, 0), axis=1), 0.5)
        # FP4 query operands are 2 * value; unquantized ones are the value.
        q_scale = power_of_two(tl.sum(tl.where(g4 == g, q_exp, 0), axis=1), 1.0 if QUERY_FLOAT else 0.5)
        s += acc.to(tl.float32) * (k_scale[:, None] * q_scale[None, :])
    store_exact_logits(s, w, out_at, out_ok, ROWS, HEADS)


@triton.jit
def store_exact_logits(s, w, out_at, out_ok, ROWS: tl.constexpr, HEADS: tl.constexpr):
    """Store the logits of a tile scored in float32 (``s`` [M, ROWS * HEADS], the scaled dot
    before the relu): relu that keeps NaN (a NaN group must give a NaN logit), times the head
    weights, summed over heads."""
    M: tl.constexpr = s.shape[0]
    weighted = tl.where(s < 0.0, 0.0, s) * w[None, :]
    tl.store(out_at, tl.sum(tl.reshape(weighted, (M, ROWS, HEADS)), axis=2), mask=out_ok)


@triton.jit
def fold_classes(x, k_exp, k_max, qa, qb, q_factor, ASM: tl.constexpr, DOT_DTYPE: tl.constexpr):
    """float32 [M, N]: the word-fed keys (``tile_keys``) against the folded query operands,
    exact for any spread of a key's group scales: the dot of each (key, column) before the
    relu. The groups are taken in classes: each class holds the groups left whose scales lie
    within FOLD_LIMIT of the largest one left, and costs one int8 dot, scaled in float32 by
    its own base and ``q_factor`` (the column's, [N]). Each class is scaled on its own, as the
    per-group path does, so a lower class stays whole when the higher ones cancel. A key whose
    scales fold is one class; four groups make at most four."""
    M: tl.constexpr = k_exp.shape[0]
    N: tl.constexpr = qa.shape[1]
    total = tl.zeros((M, N), dtype=tl.float32)
    left = k_exp >= 0  # every group, [M, 4]
    base = k_max
    for _ in range(4):
        if tl.max(tl.max(left.to(tl.int32), axis=1), axis=0) > 0:
            fold = FOLD_LIMIT - (base[:, None] - k_exp)
            take = left & (fold >= 0)
            ka, kb = key_operands(x, x, tl.where(take, fold, -1), ASM, True)
            acc = key_dot(ka, kb, qa, qb, False, DOT_DTYPE)
            # Operands are 2 * value << fold: 2**(base - 127 - 3 - 1) per key (NaN at 255).
            total += acc.to(tl.float32) * (power_of_two(base, 0.0625)[:, None] * q_factor[None, :])
            left = left & ~take
            base = tl.max(tl.where(left, k_exp, 0), axis=1)
    return total


@triton.jit
def folded_logits(acc, w_folded, ROWS: tl.constexpr, HEADS: tl.constexpr, ASM: tl.constexpr, QUERY_FLOAT: tl.constexpr):
    """[M, ROWS] logits of a tile on the folded path, before the key's own factor: relu of the
    dot [M, ROWS * HEADS], times the folded head weights, summed over heads."""
    M: tl.constexpr = acc.shape[0]
    if ASM and not QUERY_FLOAT:
        # relu and conversion in one FMUL.SAT of acc's bits as float32: a value 0 <= acc < 2**21
        # reads as the subnormal acc * 2**-149 (exact), times 2**127 it is acc * 2**-22 (normal);
        # a negative one reads as NaN, which .sat makes 0. No integer max, no int-to-float
        # conversion.
        relu = tl.inline_asm_elementwise(RELU_ASM, "=r,r", [acc], dtype=tl.int32, is_pure=True, pack=1)
        relu = relu.to(tl.float32, bitcast=True)
        if ROWS == 1 or not TL_SUM_CHAINS:
            # The head sum in FMA chains along each lane's columns, then across the quad's lanes.
            return tl.sum(head_chain(relu, w_folded, ROWS, HEADS), axis=2) * RELU_UNSCALE
        unscale = RELU_UNSCALE
    else:
        # relu that keeps NaN (an unquantized query may hold one).
        relu = tl.where(acc < 0, 0, acc).to(tl.float32)
        unscale = 1.0
    weighted = relu * w_folded[None, :]
    return tl.sum(tl.reshape(weighted, (M, ROWS, HEADS)), axis=2) * unscale


@triton.jit
def lane_split(x, ROWS: tl.constexpr, HEADS: tl.constexpr):
    """[M, ROWS * HEADS] -> [M, ROWS, 4, HEADS // 4]: column row * HEADS + 8 * i + 2 * lane + e at
    [row, lane, 2 * i + e] (in the accumulator of an MMA, ``lane`` is the lane within a quad)."""
    M: tl.constexpr = x.shape[0]
    x = tl.permute(tl.reshape(x, (M, ROWS, HEADS // 8, 4, 2)), (0, 1, 3, 2, 4))
    return tl.reshape(x, (M, ROWS, 4, HEADS // 4))


@triton.jit
def halves(x):
    """x [A, B, C, 2 K] -> (x[..., :K], x[..., K:])."""
    A: tl.constexpr = x.shape[0]
    B: tl.constexpr = x.shape[1]
    C: tl.constexpr = x.shape[2]
    K: tl.constexpr = x.shape[3] // 2
    return tl.split(tl.permute(tl.reshape(x, (A, B, C, 2, K)), (0, 1, 2, 4, 3)))


@triton.jit
def fma_chain(v, w, acc, FIRST: tl.constexpr):
    """acc + sum_i v[..., i] * w[..., i] over the last axis of v and w (float32 [A, B, C, P], P a
    power of 2, at least 2), one fused multiply-add per term in index order. With ``FIRST`` there
    is no acc: term 1 is the multiply and term 0 the first fused multiply-add onto it, then terms
    2, 3, ... (the order Triton 3.6 compiles a sum of products into)."""
    if v.shape[3] == 2:
        v0, v1 = tl.split(v)
        w0, w1 = tl.split(w)
        if FIRST:
            acc = tl.fma(v0, w0, v1 * w1)
        else:
            acc = tl.fma(v1, w1, tl.fma(v0, w0, acc))
    else:
        v0, v1 = halves(v)
        w0, w1 = halves(w)
        acc = fma_chain(v1, w1, fma_chain(v0, w0, acc, FIRST), False)
    return acc


@triton.jit
def head_chain(relu, w, ROWS: tl.constexpr, HEADS: tl.constexpr):
    """float32 [M, ROWS, 4]: of relu float32 [M, ROWS * HEADS] times w float32 [ROWS * HEADS],
    each row's sum over the columns of one lane of a quad (``lane_split``), as one multiply and a
    chain of fused multiply-adds in column order. HEADS is a power of 2, at least 8 (not checked
    here: the ops take 16, 32 or 64 heads).

    In an MMA's accumulator a thread holds, of each row, the columns of one lane of its quad, so
    this is the in-thread part of the head sum, with the order and the fusion spelled out: ``tl.sum``
    of the products compiles to the same chain on Triton 3.6 and 3.7, but from 3.8 on Triton
    sums a thread's values as a tree (23 instructions for 16 values instead of 16: 290 against
    276 per tile in the next_n=1 loop, compiled for sm_90), and Triton 3.9 announces that from
    3.10 it no longer fuses a multiply and an add by default. The sum across the quad's lanes (two
    shuffles) stays ``tl.sum``'s."""
    v = lane_split(relu, ROWS, HEADS)
    wv = lane_split(tl.broadcast_to(w[None, :], relu.shape), ROWS, HEADS)
    return fma_chain(v, wv, 0.0, True)
