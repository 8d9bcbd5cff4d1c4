"""A prototype of the scorer's hot pass on int8 wgmmas written in inline PTX (docs/benchmarks.md,
stop 50): one warpgroup per program, every tensor of 128 elements (thread i holds element i), so
that the kernel states each register of wgmma's fragments itself and can leave a dot in flight
while it builds the next tile's operand and sums the last one's logits, which Triton's own dot
never does for an int32 accumulator (``wgmma_accumulators.py``, ``asm_wgmma.py``).

    python benchmarks/wgmma_scorer.py --compile   # any machine: sm_90 registers, waits, ptxas's verdict
    python benchmarks/wgmma_scorer.py             # a Hopper GPU: logits against float64 and the
                                                  # package's scorer, then both timed in one call

The layout, per program (request b, part of its pages) and 64-key tile (one page):
- thread (warp w, lane 4g + t) holds keys 16w + g and 16w + g + 8 of the page, and of each the
  32 elements of group t: its 16 payload bytes in one 128-bit load, its group's scale byte, the
  key's largest scale from the quad (two shuffles). wgmma's K order is permuted so that these 32
  elements are exactly the thread's A fragment over the four K=32 steps: element 32t + 8s + 4h + j
  sits at K position 16h + 4t + j of step s, so payload word s builds step s (the package's prmt
  builder: 11 instructions per word, its two outputs the fragment's h = 0 and h = 1 registers);
- the query operand (ROWS x 64 columns x 128, int8, the group scales folded in) is stored once
  per program, in the same K order, into a shared array declared in the PTX, in wgmma's canonical
  K-major layout without swizzle (``asm_wgmma.py``);
- a dot is one asm statement: four m64nNk32 s8 wgmmas (N = 64 ROWS) and a commit; a wait is
  another (``wait_group`` P) that passes the accumulators on;
- the epilogue as the package's: relu and conversion in one ``mul.rn.sat.f32``, the folded head
  weights in FMA chains along the thread's columns, a reduce-scatter over the quad (2, 3 and 6
  shuffles at ROWS = 1, 2, 4), then the stores (threads t = 0, 1 one each at ROWS = 1, every
  thread one at ROWS = 2, two at ROWS = 4).

Forms (``FORMS``): TILES dots in flight (a loop step issues all of its tiles' dots, then waits
for each in turn and stores its logits while the later ones run; no dot stays in flight at the
loop's back edge, which ptxas would serialize, C7514); at one tile per step, DEPTH: how many
steps before the one that builds a tile's operand its keys are loaded (0: at the start of that
step, one step before its dot); HALVES 1: the tile's dot split in two on the query rows' halves,
the first half's logits summed while the second dot runs; HALVES 2: the same two dots one after
the other, each waited at once (half the accumulators live); SHARED_WEIGHTS: the folded head
weights in a shared array, two loaded per 64-bit load at each tile, instead of in registers.

ptxas schedules a wgmma's issue late and its wait early: whatever the source puts between them,
and whatever does not read their registers, it moves before the issue or after the wait. What
keeps a tile's epilogue before the wait of a later dot: the wait's asm first stores the
epilogue's last value to a shared scratch word, and ptxas does not move a wgmma wait above a
shared-memory store. (An order token that is a constant is folded away; a wait predicated on the
epilogue's value is serialized, C7518.)

Not the package's kernel: keys that do not fold (the exact pass), ragged rows, the in-kernel
schedule and bf16 queries are left out. The query operand and the folded weights are made on the
host (the package's kernel makes them in its prologue, once per request and program); the keys,
the pages, the block table and the logits are the package's own.
"""

import argparse
import os
import re
import sys
import tempfile

import triton

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from fp4_inductor.kernels.ptx import CODE_TABLES_ASM, RELU_ASM, _prmt_asm  # noqa: E402
from fp4_inductor.kernels.sm90 import dump_cubin  # noqa: E402
from wgmma_common import load_written, ptxas_verdict, wgmma_order  # noqa: E402


# ---- inline PTX ---------------------------------------------------------------------------------
def declare_asm(n: int) -> str:
    return f"{{ .shared .align 1024 .b8 fp4_queries[{n * 128}]; mov.u32 $0, fp4_queries; }}"


STORE = "{ st.shared.u32 [$1], $2; mov.u32 $0, 0; }"
PUBLISH = "{ fence.proxy.async.shared::cta; bar.sync 0; mov.u32 $0, $1; }"
LOAD4 = "ld.global.nc.L1::no_allocate.v4.b32 {$0, $1, $2, $3}, [$4];"
# The largest of the quad's scale bytes, two keys at once (one per 16-bit half).
KMAX = ("{ .reg .b32 x, m; shfl.sync.bfly.b32 x, $1, 1, 31, 0xffffffff; max.u16x2 m, $1, x; "
        "shfl.sync.bfly.b32 x, m, 2, 31, 0xffffffff; max.u16x2 $0, m, x; }")
PRMT = _prmt_asm("$2", "$3", "$4")
SHFL1 = "shfl.sync.bfly.b32 $0, $1, 1, 31, 0xffffffff;"
SHFL2 = "shfl.sync.bfly.b32 $0, $1, 2, 31, 0xffffffff;"


def issue_asm(n: int, step_bytes: int = 0, offset: int = 0) -> str:
    """Outputs: n / 2 accumulators. Inputs: 16 A registers, the shared array's address.
    ``step_bytes``: the query operand's bytes per K=32
    step (n * 32 by default); ``offset``: where this dot's columns start in each step (a dot on
    part of the columns)."""
    step_bytes = step_bytes or n * 32
    acc = n // 2
    first_a = acc
    parts = ["{ .reg .pred p; .reg .b64 d; .reg .u32 s; wgmma.fence.sync.aligned;"]
    accumulators = ", ".join(f"${i}" for i in range(acc))
    for step in range(4):
        # descriptor: start address >> 4 (bits 0-13), leading offset 128 >> 4 (16-29), stride offset
        # 256 >> 4 (32-45), no swizzle; scale-d false on the first step (the accumulators start at 0)
        parts.append(f"add.u32 s, ${first_a + 16}, {step * step_bytes + offset}; shr.u32 s, s, 4; "
                     f"and.b32 s, s, 0x3FFF; cvt.u64.u32 d, s; or.b64 d, d, 0x0000001000080000; "
                     f"setp.ne.u32 p, {int(step > 0)}, 0;")
        a = ", ".join(f"${first_a + 4 * step + i}" for i in range(4))
        parts.append(f"wgmma.mma_async.sync.aligned.m64n{n}k32.s32.s8.s8 {{{accumulators}}}, {{{a}}}, d, p;")
    parts.append("wgmma.commit_group.sync.aligned; }")
    return " ".join(parts)


def wait_asm(acc: int, pending: int) -> str:
    """Inputs: the accumulators, then a value (the bits of the last tile's logits, where the wait
    must come after them: ``wait``'s ``after``; else 0) stored to the thread's word of a scratch
    array before the wait, so that ptxas keeps the instructions that make it (that tile's
    epilogue) before the wait, under the dots still in flight. The store costs one instruction
    where nothing needs it."""
    moves = " ".join(f"mov.b32 ${i}, ${i + acc};" for i in range(acc))
    return (f"{{ .shared .align 4 .b32 fp4_order[128]; .reg .u32 o, a; mov.u32 o, %tid.x; and.b32 o, o, 127; "
            f"shl.b32 o, o, 2; mov.u32 a, fp4_order; add.u32 a, a, o; st.shared.b32 [a], ${2 * acc}; "
            f"wgmma.wait_group.sync.aligned {pending}; {moves} }}")


# ---- the kernel, written out --------------------------------------------------------------------
def names(prefix: str, count: int) -> str:
    return ", ".join(f"{prefix}{i}" for i in range(count))


def load_raw(raw: str, page: str) -> list[str]:
    """A tile's payload words (x: key 16w + g, y: key 16w + g + 8; group t) and scale bytes."""
    return [
        f"base = cache_ptr + ({page}) * page_stride",
        f"{names(raw + 'x', 4)} = tl.inline_asm_elementwise(LOAD4, LOAD4_C, "
        "[base.to(tl.int64) + t * 1024 + tok_lo * 16], dtype=(tl.int32,) * 4, is_pure=True, pack=1)",
        f"{names(raw + 'y', 4)} = tl.inline_asm_elementwise(LOAD4, LOAD4_C, "
        "[base.to(tl.int64) + t * 1024 + tok_hi * 16], dtype=(tl.int32,) * 4, is_pure=True, pack=1)",
        f"{raw}e = tl.load(base + scale_lo).to(tl.int32) | (tl.load(base + scale_hi).to(tl.int32) << 16)",
    ]


def build(raw: str, a: str, kmax: str) -> list[str]:
    """The tile's A fragment (a0..a15), both keys' largest scales (packed), the folds seen."""
    lines = [
        f"{kmax} = tl.inline_asm_elementwise(KMAX, '=r,r', [{raw}e], dtype=tl.int32, is_pure=True, pack=1)",
        f"s_lo = 3 - (({kmax} & 0xFFFF) - ({raw}e & 0xFFFF))",
        f"s_hi = 3 - (({kmax} >> 16) - ({raw}e >> 16))",
        "fewest = tl.minimum(fewest, tl.minimum(s_lo, s_hi))",
        "lo_l, hi_l = tl.inline_asm_elementwise(TABLES, '=r,=r,r', [s_lo], dtype=(tl.int32, tl.int32), "
        "is_pure=True, pack=1)",
        "lo_h, hi_h = tl.inline_asm_elementwise(TABLES, '=r,=r,r', [s_hi], dtype=(tl.int32, tl.int32), "
        "is_pure=True, pack=1)",
    ]
    for s in range(4):
        lines.append(f"{a}{4 * s}, {a}{4 * s + 2} = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', "
                     f"[{raw}x{s}, lo_l, hi_l], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)")
        lines.append(f"{a}{4 * s + 1}, {a}{4 * s + 3} = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', "
                     f"[{raw}y{s}, lo_h, hi_h], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)")
    return lines


def issue(acc: str, a: str, n: int, asm: str = "") -> str:
    return (f"{names(acc, n // 2)} = tl.inline_asm_elementwise({asm or f'ISSUE_{n}'}, ISSUE_C_{n}, "
            f"[{names(a, 16)}, queries], dtype=(tl.int32,) * {n // 2}, is_pure=True, pack=1)")


def wait(acc: str, pending: int, n: int, after: str = "zero") -> str:
    return (f"{names(acc, n // 2)} = tl.inline_asm_elementwise(WAIT_{n}_{pending}, WAIT_C_{n}, "
            f"[{names(acc, n // 2)}, {after}], "
            f"dtype=(tl.int32,) * {n // 2}, is_pure=True, pack=1)")


def epilogue(acc: str, kmax: str, tile: str, rows: int, done: str, first_row: int = 0,
             shared_weights: bool = False) -> list[str]:
    """relu, the folded head weights along the thread's columns, the quad's reduce-scatter, one
    store per thread (ROWS = 1: threads t = 0, 1 store keys lo, hi; ROWS = 2: key t & 1, row t >> 1).
    ``done``: a value of the tile's logits, for what must come after them. ``first_row``: the
    accumulators are of query rows first_row .. first_row + rows - 1 (a dot on part of them)."""
    n = 64 * rows
    lines = []
    if shared_weights:
        # The thread's two weights of each 8 columns in one 64-bit shared load, at each tile: the
        # address takes the keys' largest scales shifted out (always 0: both fit in 8 bits of
        # their 16-bit halves), or ptxas would hoist the loads out of the loop.
        lines = [f"at_w = weights_at + ({kmax} >> 24)"]
        lines += [f"w{2 * (j + 8 * first_row)}, w{2 * (j + 8 * first_row) + 1} = tl.inline_asm_elementwise(LDSW, "
                  f"'=f,=f,r', [at_w + {32 * (j + 8 * first_row)}], dtype=(tl.float32, tl.float32), "
                  "is_pure=True, pack=1)" for j in range(n // 8)]
    lines += [f"u{i} = tl.inline_asm_elementwise(RELU, '=r,r', [{acc}{i}], dtype=tl.int32, is_pure=True, "
             f"pack=1).to(tl.float32, bitcast=True)" for i in range(n // 2)]
    for key in range(2):
        for row in range(rows):
            for e in range(2):
                js = range(8 * row, 8 * row + 8)
                terms = [(f"u{4 * j + 2 * key + e}", f"w{2 * (j + 8 * first_row) + e}") for j in js]
                lines.append(f"c{e} = {terms[0][0]} * {terms[0][1]}")
                lines += [f"c{e} = tl.fma({u}, {w}, c{e})" for u, w in terms[1:]]
            lines.append(f"v{key}{row} = c0 + c1")
    lines.append(f"kmax = tl.where(odd, {kmax} >> 16, {kmax} & 0xFFFF)")
    # 2**(kmax - 131), and 2**22 for the relu's scaling, applied to the sum in two steps (as the
    # package does): one factor 2**(kmax - 109) would overflow from kmax 237 on.
    lines.append("scale = tl.where(kmax == 255, float('nan'), (kmax << 23).to(tl.float32, bitcast=True) * 0.0625)")
    lines.append(f"j = ({tile}) * 64 + tl.where(odd, tok_hi, tok_lo)")
    if rows == 1:
        lines += [
            "x = tl.where(odd, v10, v00) + tl.inline_asm_elementwise(SHFL1, '=f,f', [tl.where(odd, v00, v10)], "
            "dtype=tl.float32, is_pure=True, pack=1)",
            "x = x + tl.inline_asm_elementwise(SHFL2, '=f,f', [x], dtype=tl.float32, is_pure=True, pack=1)",
            "tl.store(out_ptr + out_row0 + j, x * 4194304.0 * scale, mask=(t < 2) & (j < limit0))",
        ]
    elif rows == 2:
        lines += [
            "m0 = tl.where(odd, v10, v00) + tl.inline_asm_elementwise(SHFL1, '=f,f', [tl.where(odd, v00, v10)], "
            "dtype=tl.float32, is_pure=True, pack=1)",
            "m1 = tl.where(odd, v11, v01) + tl.inline_asm_elementwise(SHFL1, '=f,f', [tl.where(odd, v01, v11)], "
            "dtype=tl.float32, is_pure=True, pack=1)",
            "x = tl.where(second, m1, m0) + tl.inline_asm_elementwise(SHFL2, '=f,f', [tl.where(second, m0, m1)], "
            "dtype=tl.float32, is_pure=True, pack=1)",
            "tl.store(out_ptr + tl.where(second, out_row1, out_row0) + j, x * 4194304.0 * scale, "
            "mask=j < tl.where(second, limit1, limit0))",
        ]
    else:
        # key t & 1 after the first round; rows 2 (t >> 1) and 2 (t >> 1) + 1 after the second
        lines += [f"m{r} = tl.where(odd, v1{r}, v0{r}) + tl.inline_asm_elementwise(SHFL1, '=f,f', "
                  f"[tl.where(odd, v0{r}, v1{r})], dtype=tl.float32, is_pure=True, pack=1)" for r in range(4)]
        for i in range(2):
            lines += [
                f"x = tl.where(second, m{2 + i}, m{i}) + tl.inline_asm_elementwise(SHFL2, '=f,f', "
                f"[tl.where(second, m{i}, m{2 + i})], dtype=tl.float32, is_pure=True, pack=1)",
                f"tl.store(out_ptr + tl.where(second, out_row{2 + i}, out_row{i}) + j, x * 4194304.0 * scale, "
                f"mask=j < tl.where(second, limit{2 + i}, limit{i}))",
            ]
    lines.append(f"{done} = x.to(tl.int32, bitcast=True)")
    rename = lambda m: f"{m.group(1)}{int(m.group(2)) + first_row}"  # noqa: E731
    return [re.sub(r"(out_row|limit)(\d)", rename, line) for line in lines]


def group_body(tiles: int, n: int, rows: int) -> list[str]:
    """Tiles T .. T + tiles - 1 (operands a0_.. built, carried): the next group's keys loaded, all
    dots issued, then each waited in turn (``wait_group`` of the dots after it) and its logits
    stored while the later ones run; the next group's operands built last."""
    body = []
    for k in range(tiles):
        body += load_raw(f"q{k}", f"page{k}")
    body += [f"page{k} = tl.load(bt_row + tl.minimum(T + {2 * tiles + k}, last)).to(tl.int64)" for k in range(tiles)]
    body += [issue(f"d{k}_", f"a{k}_", n) for k in range(tiles)]
    for k in range(tiles):
        body.append(wait(f"d{k}_", tiles - 1 - k, n, "done" if k else "zero"))
        body += epilogue(f"d{k}_", f"k{k}", f"T + {k}", rows, "done")
    for k in range(tiles):
        body += build(f"q{k}", f"a{k}_", f"k{k}")
    return body


def tile_body(n: int, rows: int, depth: int, halves: int = 0, shared_weights: bool = False) -> list[str]:
    """One tile T a step (operand a0_ built, carried; keys of tiles T + 1 .. T + depth carried in
    q1 .. q{depth}): the keys of tile T + depth + 1 loaded, the dot issued and waited, the logits
    stored, then tile T + 1's operand built."""
    body = load_raw(f"q{depth + 1}", "page0")
    body.append(f"page0 = tl.load(bt_row + tl.minimum(T + {depth + 2}, last)).to(tl.int64)")
    half = rows // 2
    if halves == 1:
        # Two dots on the query rows' halves, both in flight; the first half's logits are summed
        # while the second dot runs (no more registers: the accumulators are the same in all).
        body += [issue("d0_", "a0_", n // 2, f"ISSUE_{n}_H0"),
                 issue("d1_", "a0_", n // 2, f"ISSUE_{n}_H1")]
        body += [wait("d0_", 1, n // 2)] + epilogue("d0_", "k0", "T", half, "done", 0, shared_weights)
        body += [wait("d1_", 0, n // 2, "done")] + epilogue("d1_", "k0", "T", half, "done", half, shared_weights)
    elif halves == 2:
        # The same two dots one after the other, each waited at once: half the accumulators.
        body += [issue("d0_", "a0_", n // 2, f"ISSUE_{n}_H0"), wait("d0_", 0, n // 2)]
        body += epilogue("d0_", "k0", "T", half, "done", 0, shared_weights)
        body += [issue("d0_", "a0_", n // 2, f"ISSUE_{n}_H1"), wait("d0_", 0, n // 2, "done")]
        body += epilogue("d0_", "k0", "T", half, "done", half, shared_weights)
    else:
        body += [issue("d0_", "a0_", n), wait("d0_", 0, n)]
        body += epilogue("d0_", "k0", "T", rows, "done", 0, shared_weights)
    body += build("q1", "a0_", "k0")
    for k in range(1, depth + 1):
        body += [f"{names(f'q{k}{p}', 4)} = {names(f'q{k + 1}{p}', 4)}" for p in "xy"] + [f"q{k}e = q{k + 1}e"]
    return body


def kernel_source(rows: int, tiles: int, depth: int = 0, halves: int = 0, shared_weights: bool = False) -> str:
    n = 64 * rows
    indent = "\n".join
    weights = [f"w{2 * j + e} = tl.load(wf_ptr + (b * {rows} + {j // 8}) * 64 + {8 * (j % 8)} + 2 * t + {e})"
               for j in range(n // 8) for e in range(2)]
    if shared_weights:
        # The folded weights [N] float32 in a shared array of their own, loaded at each tile.
        shared = [f"weights_at = tl.inline_asm_elementwise(DECLARE_W{n}, '=r,r', [thread], dtype=tl.int32, "
                  "is_pure=True, pack=1)"]
        shared += [f"stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [weights_at + ({c} + thread) * 4, "
                   f"tl.load(wf_ptr + b * {n} + {c} + thread).to(tl.int32, bitcast=True)], dtype=tl.int32, "
                   "is_pure=True, pack=1)" for c in range(0, n, 128)]
        shared.append("weights_at = weights_at + 8 * t")
        weights = []
    else:
        shared = []
    limits = [f"limit{r} = tl.minimum(tl.load(row_ends_ptr + b * {rows} + {r}), p_end * 64)" for r in range(rows)]
    out_rows = [f"out_row{r} = (b * {rows} + {r}).to(tl.int64) * out_stride" for r in range(rows)]
    prologue = []
    if tiles == 1:
        for k in range(depth + 1):
            prologue += load_raw(f"q{k}", f"tl.load(bt_row + tl.minimum(p_begin + {k}, last)).to(tl.int64)")
        prologue += build("q0", "a0_", "k0")
        prologue.append(f"page0 = tl.load(bt_row + tl.minimum(p_begin + {depth + 1}, last)).to(tl.int64)")
        body = tile_body(n, rows, depth, halves, shared_weights)
    else:
        for k in range(tiles):
            prologue += load_raw(f"q{k}", f"tl.load(bt_row + tl.minimum(p_begin + {k}, last)).to(tl.int64)")
            prologue += build(f"q{k}", f"a{k}_", f"k{k}")
        prologue += [f"page{k} = tl.load(bt_row + tl.minimum(p_begin + {tiles + k}, last)).to(tl.int64)"
                     for k in range(tiles)]
        body = group_body(tiles, n, rows)
    source = f'''
@triton.jit
def {form_name(rows, tiles, depth, halves, shared_weights)}(out_ptr, out_stride, qop_ptr, wf_ptr, cache_ptr,
                         page_stride, bt_ptr, bt_stride, pages,
                         row_ends_ptr, flags_ptr, split):
    b = tl.program_id(0)
    p_begin = tl.program_id(1) * pages // split
    p_end = (tl.program_id(1) + 1) * pages // split
    thread = tl.arange(0, 128)
    zero = tl.zeros([128], tl.int32)
    t = thread % 4
    odd = (t & 1) != 0
    second = (t & 2) != 0
    tok_lo = 16 * (thread // 32) + thread % 32 // 4
    tok_hi = tok_lo + 8
    scale_lo = 4096 + t * 64 + (tok_lo % 16) * 4 + tok_lo // 16
    scale_hi = 4096 + t * 64 + (tok_hi % 16) * 4 + tok_hi // 16
    fewest = zero + 3
    queries = tl.inline_asm_elementwise(DECLARE_{n}, "=r,r", [thread], dtype=tl.int32, is_pure=True, pack=1)
    source = qop_ptr.to(tl.pointer_type(tl.int32)) + b * {rows * 64 * 32}
    stored = zero
    for q in tl.static_range({n // 4}):
        word = q * 128 + thread
        col = word // 32
        ww = word % 32
        at = queries + (ww % 8) // 2 * {n * 32} + col // 8 * 256 + ww % 2 * 128 + col % 8 * 16 + ww // 8 * 4
        stored += tl.inline_asm_elementwise(STORE, "=r,r,r", [at, tl.load(source + word)], dtype=tl.int32,
                                            is_pure=True, pack=1)
    WEIGHTS_HERE
    queries = tl.inline_asm_elementwise(PUBLISH, "=r,r,r", [queries, stored], dtype=tl.int32, is_pure=True, pack=1)
{indent("    " + x for x in weights + limits + out_rows)}
    if p_begin < p_end:
        last = p_end - 1
        bt_row = bt_ptr + b * bt_stride
{indent("        " + x for x in prologue)}
        for T in range(p_begin, p_end, {tiles}):
{indent("            " + x for x in body)}
    tl.store(flags_ptr + b * split + tl.program_id(1), (tl.min(fewest, axis=0) < 0).to(tl.uint8))
'''
    return source.replace("    WEIGHTS_HERE\n", "".join(f"    {line}\n" for line in shared))


# (next_n, dots in flight, DEPTH, halves, weights in shared memory). ALL_FORMS: every form the
# script builds (stop 50 timed the first thirteen; docs/benchmarks.md); FORMS: those it builds
# and times unless --forms names others (the register cuts compiled after the last call).
ALL_FORMS = tuple(form[:3] + (int(form[3]), False) for form in (
    (1, 1, 0, False), (1, 1, 1, False), (1, 1, 2, False), (1, 2, 0, False), (1, 3, 0, False),
    (2, 1, 0, False), (2, 1, 1, False), (2, 1, 1, True), (2, 2, 0, False),
    (4, 1, 0, False), (4, 1, 1, False), (4, 1, 1, True), (4, 1, 2, True))) + (
    (1, 1, 1, 0, True), (2, 1, 1, 1, True), (4, 1, 1, 1, True), (2, 1, 1, 2, True), (4, 1, 1, 2, True),
    (4, 1, 0, 2, True))
FORMS = ((1, 1, 1, 0, True), (2, 1, 1, 1, True), (2, 1, 1, 2, True), (4, 1, 1, 1, True), (4, 1, 1, 2, True),
         (4, 1, 0, 2, True))


def parse_forms(text: str) -> tuple:
    """``ROWS,TILES,DEPTH,HALVES,SHARED_WEIGHTS;...`` -> FORMS entries (each one of ALL_FORMS)."""
    forms = tuple((r, t, d, h, bool(w)) for r, t, d, h, w in (map(int, f.split(",")) for f in text.split(";")))
    unknown = [f for f in forms if f not in ALL_FORMS]
    if unknown:
        raise SystemExit(f"--forms: expected forms of ALL_FORMS, got {unknown}")
    return forms


def module_source() -> str:
    consts = {f"DECLARE_{n}": declare_asm(n) for n in (64, 128, 256)}
    consts |= {f"DECLARE_W{n}": f"{{ .shared .align 16 .b8 fp4_weights[{n * 4}]; mov.u32 $0, fp4_weights; }}"
               for n in (64, 128, 256)}
    consts |= {"LDSW": "ld.shared.v2.f32 {$0, $1}, [$2];", "STORE": STORE, "PUBLISH": PUBLISH,
              "LOAD4": LOAD4, "LOAD4_C": "=r,=r,=r,=r,l", "KMAX": KMAX, "TABLES": CODE_TABLES_ASM.value, "PRMT": PRMT,
              "SHFL1": SHFL1, "SHFL2": SHFL2, "RELU": RELU_ASM.value}
    for n in (32, 64, 128, 256):
        consts[f"ISSUE_{n}"] = issue_asm(n)
        consts[f"ISSUE_{n}_H0"] = issue_asm(n // 2, n * 32, 0)
        consts[f"ISSUE_{n}_H1"] = issue_asm(n // 2, n * 32, n * 16)
        consts[f"ISSUE_C_{n}"] = ",".join(["=r"] * (n // 2) + ["r"] * 17)
        consts[f"WAIT_C_{n}"] = ",".join(["=r"] * (n // 2) + ["r"] * (n // 2 + 1))
        for pending in range(3):
            consts[f"WAIT_{n}_{pending}"] = wait_asm(n // 2, pending)
    head = "import triton\nimport triton.language as tl\n\n" + "".join(
        f"{k} = tl.constexpr({v!r})\n" for k, v in consts.items())
    kernels = []
    for rows, tiles, depth, halves, shared_weights in FORMS:
        kernels.append(kernel_source(rows, tiles, depth, halves, shared_weights))
    return head + "\n".join(kernels)


def describe(rows: int, tiles: int, depth: int, halves: int, shared_weights: bool) -> str:
    return (f"next_n={rows}, {tiles} in flight, DEPTH {depth}{('', ', halves', ', halves in turn')[halves]}"
            f"{', shared weights' if shared_weights else ''}")


def form_name(rows: int, tiles: int, depth: int, halves: int, shared_weights: bool = False) -> str:
    return f"wg_score_r{rows}_g{tiles}_d{depth}{('', '_h', '_s')[halves]}{'_w' if shared_weights else ''}"


def load_kernels(directory: str):
    return load_written(directory, "wgmma_scorer_kernels", module_source())


def signature_of(kernel, constexprs):
    pointers = {"out_ptr": "*fp32", "qop_ptr": "*i8", "wf_ptr": "*fp32", "cache_ptr": "*u8", "bt_ptr": "*i32",
                "row_ends_ptr": "*i32", "flags_ptr": "*u8"}
    return {p: "constexpr" if p in constexprs else pointers.get(p, "i32") for p in kernel.arg_names}


def compile_report(kernels) -> None:
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    print(f"triton {triton.__version__}, sm_90")
    print("| kernel | registers | spill stores | wgmma groups and waits, [instructions since the last] (the "
          "first count from the kernel's start) | ptxas |")
    print("| --- | --- | --- | --- | --- |")
    for rows, tiles, depth, halves, shared_weights in FORMS:
        kernel = getattr(kernels, form_name(rows, tiles, depth, halves, shared_weights))
        params = kernel.arg_names
        attrs = {(i,): [["tt.divisibility", 16]] for i, p in enumerate(params)
                 if p in ("out_ptr", "qop_ptr", "wf_ptr", "cache_ptr", "page_stride", "out_stride")}
        compiled = triton.compile(ASTSource(fn=kernel, signature=signature_of(kernel, {}), constexprs={}, attrs=attrs),
                                  target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
        verdict, warnings = ptxas_verdict(compiled.asm["ptx"])
        usage = dump_cubin(compiled.asm["cubin"], "resource-usage")
        registers = usage.split("REG:")[1].split()[0]
        spill_stores = verdict.split("bytes spill stores")[0].split(",")[-1].strip()
        print(f"| {describe(rows, tiles, depth, halves, shared_weights)} | {registers} | {spill_stores} B | "
              f"{wgmma_order(compiled.asm['cubin'], counts=True)} | "
              f"{'serialized: ' + ', '.join(warnings) if warnings else 'no warning'} |", flush=True)


# ---- on a GPU -----------------------------------------------------------------------------------
def query_operands(payload, scales, weights):
    """The folded int8 query operand [rows, 64, 128] (2 * value << fold, natural element order)
    and the folded head weights w * 2**(qmax - 131) [rows, 64]."""
    import torch

    from fp4_inductor import reference

    values = reference.dequantize_queries(payload, scales).double()
    exps = reference.query_scales_by_head(scales, payload.shape[1]).long()
    qmax = exps.amax(-1)
    if ((qmax[..., None] - exps) > 3).any():
        raise SystemExit("a query head does not fold: the prototype has no exact pass")
    op = values * torch.exp2((131 - qmax).double())[..., None]
    if not torch.equal(op, op.round()) or op.abs().max() > 96:
        raise SystemExit("the folded query operand is not int8")
    return op.to(torch.int8).contiguous(), (weights.double() * torch.exp2((qmax - 131).double())).float()


def run_gpu(kernels) -> None:
    import torch

    import fp4_inductor as fp4
    from fp4_inductor import reference
    from fp4_inductor.bench import build_scoring_case, device_us
    from fp4_inductor.kernels import score as shipped

    print(torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__, flush=True)
    device = torch.device("cuda")
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    failures, table = [], []
    for requests, context, rows in ((4, 4096, 1), (4, 4096, 2), (4, 4096, 4), (64, 32768, 1), (64, 32768, 2),
                                    (16, 131072, 2), (64, 32768, 4)):
        if not any(form[0] == rows for form in FORMS):
            continue
        case = build_scoring_case(requests, context, rows, 64, device)
        payload, scales = fp4.quantize_queries(case["q"])
        qop, wf = query_operands(payload, scales, case["weights"])
        cache, bt = case["cache"], case["block_table"]
        pages = bt.shape[1]
        row_ends = case["row_ends"].int().contiguous()
        out = torch.full((requests * rows, context), float("nan"), device=device)
        base = torch.full_like(out, float("nan"))
        inputs = (payload, scales, cache, case["weights"], bt, case["query_starts"], case["row_ends"], rows)
        shipped.launch_score_paged(base, *inputs)
        small = requests * context <= 16384
        valid = reference.valid_region(case["query_starts"], case["row_ends"], context)
        if small:
            keys = reference.dequantize_pages(cache, bt.long(), torch.float64).view(requests, context, 128)
            q = reference.dequantize_queries(payload, scales).double().view(requests, rows, 64, 128)
            dots = torch.einsum("brhk,bjk->brhj", q, keys).clamp(min=0)
            truth = torch.einsum("brhj,brh->brj", dots, case["weights"].double().view(requests, rows, 64))
            truth = truth.reshape(requests * rows, context)
        else:
            truth = base.double()
        for form_rows, tiles, depth, halves, shared_weights in FORMS:
            if form_rows != rows:
                continue
            kernel = getattr(kernels, form_name(rows, tiles, depth, halves, shared_weights))
            flags = torch.zeros(requests * sms * 16, dtype=torch.uint8, device=device)
            # Split 2 first, checked and not timed: at the small shapes it gives each program a
            # long run of tiles (the timed splits give them 0 or 1 there). (A split of 1 would be
            # a kernel of its own: Triton takes an int argument of 1 as a constant.)
            splits = [2]
            for split in splits:
                out.fill_(float("nan"))
                flags.zero_()

                def launch(split=split):
                    return kernel[(requests, split)](out, out.stride(0), qop, wf, cache, cache.stride(0), bt,
                                                     bt.stride(0), pages, row_ends, flags, split, num_warps=4)
                launched = launch()
                torch.cuda.synchronize()
                per_sm = min(65536 // (launched.n_regs * 128), 8)
                if split == 2:
                    splits += sorted({max(3, sms * per_sm // requests), max(3, sms * per_sm // requests) * 2})
                diff = torch.where(valid, out.double() - truth, 0.0)
                error = (diff.abs().amax(1) / torch.where(valid, truth, 0.0).abs().amax(1)).max().item()
                flagged = int(flags.sum())
                form = describe(rows, tiles, depth, halves, shared_weights)
                name = f"{requests}x{context}x{rows}, {form}, split {split}"
                if not error < 1e-5 or flagged:
                    failures.append(f"{name}: error {error:.1e}, {flagged} programs flagged")
                    bad = (~(diff.abs() <= 1e-5 * truth.abs().amax(1, keepdim=True))).nonzero()[:6]
                    for r, j in bad.tolist():
                        print(f"    row {r} key {j}: got {out[r, j].item():.6g}, expected {truth[r, j].item():.6g}")
                timed = not small and split != 2
                us = device_us(launch) if timed else float("nan")
                ship_us = device_us(lambda: shipped.launch_score_paged(base, *inputs)) if timed else float("nan")
                order = wgmma_order(launched.asm["cubin"], counts=True)
                table.append((name, launched.n_regs, per_sm, error, us, ship_us, order))
                print(f"  {name}: {launched.n_regs} regs, {per_sm}/SM, error {error:.1e}, {us:.1f} us "
                      f"(package {ship_us:.1f})", flush=True)
            if small:
                # The flag: keys whose group scales do not fold must mark their programs.
                marked = build_scoring_case(requests, context, rows, 64, device, outliers=0.01)
                flags.zero_()
                kernel[(requests, 2)](out, out.stride(0), qop, wf, marked["cache"], cache.stride(0),
                                      marked["block_table"], bt.stride(0), pages, row_ends, flags, 2, num_warps=4)
                if int(flags[:requests * 2].sum()) != requests * 2:
                    failures.append(f"{name}: {int(flags.sum())} of {requests * 2} programs flagged with 1 % of keys "
                                    "that do not fold")
    print("\n| case | registers | CTAs/SM | largest relative error (per row) | prototype us | package us (same call) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, regs, per_sm, error, us, ship_us, _ in table:
        print(f"| {name} | {regs} | {per_sm} | {error:.1e} | {us:.1f} | {ship_us:.1f} |")
    for name, *_, order in table:
        if not name.startswith("4x"):
            print(f"{name}: {order}")
    if failures:
        raise SystemExit("FAILED: " + "; ".join(failures))


def profile_once(kernels, form: str) -> None:
    """One launch of a form (``ROWS,TILES,DEPTH,HALVES,SHARED_WEIGHTS``) at 64 x 32768 keys, then one of the package's
    scorer, for a profiler: ``ncu -k regex:"wg_score|score_paged" ...``."""
    import torch

    import fp4_inductor as fp4
    from fp4_inductor.bench import build_scoring_case
    from fp4_inductor.kernels import score as shipped

    rows, tiles, depth, halves, shared_weights = (int(v) for v in form.split(","))
    device = torch.device("cuda")
    case = build_scoring_case(64, 32768, rows, 64, device)
    payload, scales = fp4.quantize_queries(case["q"])
    qop, wf = query_operands(payload, scales, case["weights"])
    out = torch.empty(64 * rows, 32768, device=device)
    flags = torch.zeros(64 * 64, dtype=torch.uint8, device=device)
    kernel = getattr(kernels, form_name(rows, tiles, depth, halves, bool(shared_weights)))
    launch = (case["cache"], case["cache"].stride(0), case["block_table"], case["block_table"].stride(0), 512,
              case["row_ends"].int(), flags)
    per_sm = min(65536 // (kernel[(64, 1)](out, out.stride(0), qop, wf, *launch, 1, num_warps=4).n_regs * 128), 8)
    split = max(1, torch.cuda.get_device_properties(device).multi_processor_count * per_sm // 64)
    kernel[(64, split)](out, out.stride(0), qop, wf, *launch, split, num_warps=4)
    shipped.launch_score_paged(out, payload, scales, case["cache"], case["weights"], case["block_table"],
                               case["query_starts"], case["row_ends"], rows)
    torch.cuda.synchronize()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compile", action="store_true", help="only compile for sm_90 and report the waits")
    form = "ROWS,TILES,DEPTH,HALVES,SHARED_WEIGHTS"
    choice = parser.add_mutually_exclusive_group()
    choice.add_argument("--profile", metavar=form, help="launch one form once, for a profiler")
    choice.add_argument("--forms", metavar=form + ";...", help="the forms to build (of ALL_FORMS)")
    args = parser.parse_args()
    if args.forms or args.profile:
        FORMS = parse_forms(args.forms or args.profile)
    with tempfile.TemporaryDirectory() as directory:
        sys.path.insert(0, directory)
        kernels = load_kernels(directory)
        if args.compile:
            compile_report(kernels)
        elif args.profile:
            profile_once(kernels, args.profile)
        else:
            run_gpu(kernels)
