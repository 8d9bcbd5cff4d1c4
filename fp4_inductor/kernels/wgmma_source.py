"""The inline PTX of the scorer's hot pass on int8 wgmmas, and the lines of Triton that use it,
written out thread by thread, at one and at four warpgroups per program (``GROUPS``), every tensor
of 128 elements per warpgroup (thread i holds element i), so that each register of wgmma's
fragments is a tensor of its own. A Triton kernel cannot index a thread's registers, so the
kernel's source is written by these functions (``score_wgmma.py``, checked in, and
``benchmarks/wgmma_scorer.py``'s prototype); each asm string is one line, as Inductor's copy of a
kernel's globals needs (``ptx.py``).

The layout, per 64-key tile (one page): thread (warp w, lane 4g + t) holds keys 16w + g and
16w + g + 8, and of each the 32 elements of group t (one 128-bit load of its 16 payload bytes, its
group's scale byte, the key's largest scale from the quad). wgmma's K order is permuted so that
these 32 elements are the thread's A fragment over the four K=32 steps: element 32t + 8s + 4h + j
sits at K position 16h + 4t + j of step s, so payload word s builds step s with the prmt builder
(``ptx._prmt_asm``). The query operand sits in the same K order in a shared array declared in the
PTX, in wgmma's canonical K-major layout without swizzle (leading offset 128 B, stride 256 B,
N * 32 bytes per K=32 step). docs/benchmarks.md, stop 50, has the measurements.
"""

import re

from .ptx import _prmt_asm

# The prototype's block-table row: unit stride, int32 ids (benchmarks/wgmma_scorer.py).
PROTOTYPE_PAGE = "tl.load(bt_row + tl.minimum({index}, last)).to(tl.int64)"


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


# The line that sets ``query_descriptor`` (what ``issue`` passes its dots), after the query array
# is published: the low word of the query operand's shared-memory descriptor, from the array's
# address (made once per program, outside the tile loop): start address >> 4 (bits 0-13), leading
# offset 128 >> 4 (bits 16-29). The high word is the stride offset, 256 >> 4 (bits 32-45), no swizzle.
# Made in each dot from the address, it cost five instructions per K step that ptxas left in the
# tile loop (sm_90, Triton 3.6: 557 instructions per tile at 4 rows, 529 now; 401 and 370 at 2
# rows). H100, A/B (docs/benchmarks.md, stop 57): next_n=4 162.4-163.3 us against 168.1-169.6.
QUERY_DESCRIPTOR = f"query_descriptor = ((queries >> 4) & 0x3FFF) | {(128 >> 4) << 16:#x}"
DESCRIPTOR_HIGH = 256 >> 4


def issue_asm(n: int, step_bytes: int = 0, offset: int = 0) -> str:
    """Outputs: n / 2 accumulators. Inputs: 16 A registers, the low word of the query operand's
    descriptor (``QUERY_DESCRIPTOR``). ``step_bytes``: the query operand's bytes per K=32 step
    (n * 32 by default); ``offset``: where this dot's columns start in each step (a dot on part of
    the columns). Each step's descriptor is the low word plus its start >> 4 (no carry out of bits
    0-13: shared addresses stay under 228 KB), with the high word: one add per step."""
    step_bytes = step_bytes or n * 32
    acc = n // 2
    first_a = acc
    parts = [f"{{ .reg .pred p; .reg .b64 d; .reg .u32 s, h; mov.b32 h, {DESCRIPTOR_HIGH}; wgmma.fence.sync.aligned;"]
    accumulators = ", ".join(f"${i}" for i in range(acc))
    for step in range(4):
        # scale-d false on the first step (the accumulators start at 0)
        start = step * step_bytes + offset
        assert start % 16 == 0, "descriptor starts are multiples of 16 bytes"
        parts.append(f"add.u32 s, ${first_a + 16}, {start >> 4}; mov.b64 d, {{s, h}}; "
                     f"setp.ne.u32 p, {int(step > 0)}, 0;")
        a = ", ".join(f"${first_a + 4 * step + i}" for i in range(4))
        parts.append(f"wgmma.mma_async.sync.aligned.m64n{n}k32.s32.s8.s8 {{{accumulators}}}, {{{a}}}, d, p;")
    parts.append("wgmma.commit_group.sync.aligned; }")
    return " ".join(parts)


def wait_asm(acc: int, pending: int) -> str:
    """Inputs: the accumulators, then a value (the bits of the last tile's logits, where the wait
    must come after them: ``wait``'s ``after``; else 0) stored to a word of a scratch array (by
    lane in the warpgroup; never read, so warpgroups may share its words) before the wait, so
    that ptxas keeps the instructions that make it (that tile's epilogue) before the wait, under
    the dots still in flight. The store costs one instruction where nothing needs it."""
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
        # The two scale bytes stay apart until ``pack``, which the tile loop runs where it hands
        # the tile on, after its dots: packed here, the loop waited for both loads before the dot
        # that follows (a wgmma fence keeps the pack above it; 21 % of the loop's stall samples
        # under ncu at next_n=4). H100, A/B (docs/benchmarks.md, stop 56): the 2-row pass
        # 109.4-110.5 us against 113.1-113.4 at next_n=2; 4 rows 166.0-170.9 against 171.4-174.0.
        f"{raw}el = tl.load(base + scale_lo).to(tl.int32)",
        f"{raw}eh = tl.load(base + scale_hi).to(tl.int32)",
    ]


def pack(raw: str, into: str = "") -> str:
    """A tile's two scale bytes (``load_raw``) packed into one word, ``{into or raw}e``."""
    return f"{into or raw}e = {raw}el | ({raw}eh << 16)"


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
            f"[{names(a, 16)}, query_descriptor], dtype=(tl.int32,) * {n // 2}, is_pure=True, pack=1)")


def wait(acc: str, pending: int, n: int, after: str = "zero") -> str:
    return (f"{names(acc, n // 2)} = tl.inline_asm_elementwise(WAIT_{n}_{pending}, WAIT_C_{n}, "
            f"[{names(acc, n // 2)}, {after}], "
            f"dtype=(tl.int32,) * {n // 2}, is_pure=True, pack=1)")


def epilogue(acc: str, kmax: str, tile: str, rows: int, done: str, first_row: int = 0,
             shared_weights: bool = False) -> list[str]:
    """relu, the folded head weights along the thread's columns, the quad's reduce-scatter, the
    stores (ROWS = 1: threads t = 0, 1 store keys lo, hi; ROWS = 2: key t & 1, row t >> 1; ROWS = 4:
    key t & 1, rows 2 (t >> 1) and 2 (t >> 1) + 1).
    ``done``: a value of the tile's logits, for what must come after them. ``first_row``: the
    accumulators are of query rows first_row .. first_row + rows - 1 (a dot on part of them)."""
    return (row_sums(acc, kmax, rows, first_row, shared_weights)
            + reduce_store(kmax, tile, rows, done, first_row))


def row_sums(acc: str, kmax: str, rows: int, first_row: int = 0, shared_weights: bool = False,
             into: int = 0) -> list[str]:
    """``epilogue``'s first part: each of the thread's two keys' sums over its columns of each
    row, ``v{key}{row + into}`` (relu, the folded head weights, FMA chains)."""
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
            lines.append(f"v{key}{row + into} = c0 + c1")
    return lines


def reduce_store(kmax: str, tile: str, rows: int, done: str, first_row: int = 0) -> list[str]:
    """``epilogue``'s second part: the keys' scales, the quad's reduce-scatter of the sums
    ``v{key}{row}`` of rows first_row .. first_row + rows - 1, the stores."""
    lines = []
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


def group_body(tiles: int, n: int, rows: int, page: str = PROTOTYPE_PAGE) -> list[str]:
    """Tiles T .. T + tiles - 1 (operands a0_.. built, carried): the next group's keys loaded, all
    dots issued, then each waited in turn (``wait_group`` of the dots after it) and its logits
    stored while the later ones run; the next group's operands built last."""
    body = []
    for k in range(tiles):
        body += load_raw(f"q{k}", f"page{k}")
    body += [f"page{k} = {page.format(index=f'T + {2 * tiles + k}')}" for k in range(tiles)]
    body += [issue(f"d{k}_", f"a{k}_", n) for k in range(tiles)]
    for k in range(tiles):
        body.append(wait(f"d{k}_", tiles - 1 - k, n, "done" if k else "zero"))
        body += epilogue(f"d{k}_", f"k{k}", f"T + {k}", rows, "done")
    for k in range(tiles):
        body += [pack(f"q{k}")] + build(f"q{k}", f"a{k}_", f"k{k}")
    return body


def tile_body(n: int, rows: int, depth: int, halves: int = 0, shared_weights: bool = False,
              page: str = PROTOTYPE_PAGE, stride: int = 1) -> list[str]:
    """One tile T a step (operand a0_ built, carried; keys of tiles T + stride .. T + depth *
    stride carried in q1 .. q{depth}): the keys of tile T + (depth + 1) * stride loaded, the dot
    issued and waited, the logits stored, then tile T + stride's operand built. ``halves``, the
    tile's dot: 0 whole; 1 in two halves of the query rows, both in flight; 2 the halves one after
    the other; 3 one dot per query row, two in flight. ``stride``: the pages between a warpgroup's
    tiles (its program's warpgroups take the pages in turn, ``request_source``)."""
    if halves not in (0, 1, 2, 3) or (halves == 3 and rows % 2):
        raise ValueError(f"halves: expected 0-3 (3 with an even number of rows), got {halves} at {rows} rows")
    body = load_raw(f"q{depth + 1}", "page0")
    body.append(f"page0 = {page.format(index=f'T + {(depth + 2) * stride}')}")
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
    elif halves == 3:
        # One dot per query row (64 columns), two in flight on two sets of accumulators of one
        # row each (as many registers as a half): each row's sums are made while the next row's
        # dot runs, and each pair of rows is reduced and stored as a half is.
        sets = ("d0_", "d1_")
        body += [issue(sets[p], "a0_", 64, f"ISSUE_{n}_R{p}") for p in range(2)]
        for p in range(rows):
            body.append(wait(sets[p % 2], int(p + 1 < rows), 64, "done" if p else "zero"))
            body += row_sums(sets[p % 2], "k0", 1, p, shared_weights, p % 2)
            if p % 2:
                body += reduce_store("k0", "T", 2, "done", p - 1)
            else:
                # what the next wait comes after: both keys' sums of the row
                body.append("done = v00.to(tl.int32, bitcast=True) ^ v10.to(tl.int32, bitcast=True)")
            if p + 2 < rows:
                body.append(issue(sets[p % 2], "a0_", 64, f"ISSUE_{n}_R{p + 2}"))
    else:
        body += [issue("d0_", "a0_", n), wait("d0_", 0, n)]
        body += epilogue("d0_", "k0", "T", rows, "done", 0, shared_weights)
    # The scale bytes of tile T + 1 are packed where the loop handed it on (depth >= 1), or here:
    # packed before the build and then moved on, the loop takes one instruction more (sm_90).
    body += ([] if depth else [pack("q1")]) + build("q1", "a0_", "k0")
    for k in range(1, depth + 1):
        body += [f"{names(f'q{k}{p}', 4)} = {names(f'q{k + 1}{p}', 4)}" for p in "xy"] + [
            pack(f"q{k + 1}", f"q{k}") if k == depth else f"q{k}e = q{k + 1}e"]
    return body


def tile_prologue(depth: int, begin: str, page: str = PROTOTYPE_PAGE, stride: int = 1) -> list[str]:
    """What ``tile_body``'s loop carries in, from page ``begin`` on, every ``stride``-th page: the
    keys of its first depth + 1 tiles loaded (q0 .. q{depth}), the first one's operand built, the
    next page's id."""
    lines = []
    for k in range(depth + 1):
        lines += load_raw(f"q{k}", page.format(index=f"{begin} + {k * stride}")) + [pack(f"q{k}")]
    lines += build("q0", "a0_", "k0")
    lines.append(f"page0 = {page.format(index=f'{begin} + {(depth + 1) * stride}')}")
    return lines


def constants(sizes=(32, 64, 128, 256)) -> dict[str, str]:
    """The asm strings (and their constraint strings) that the written-out kernels name, for dots
    of ``sizes`` columns and the halves of each."""
    from .ptx import CODE_TABLES_ASM, RELU_ASM

    consts = {f"DECLARE_{n}": declare_asm(n) for n in sizes}
    consts |= {f"DECLARE_W{n}": f"{{ .shared .align 16 .b8 fp4_weights[{n * 4}]; mov.u32 $0, fp4_weights; }}"
               for n in sizes}
    consts |= {"LDSW": "ld.shared.v2.f32 {$0, $1}, [$2];", "STORE": STORE, "STORE_IF": STORE_IF, "PUBLISH": PUBLISH,
               "BARRIER": BARRIER, "PUBLISH_BOTH": PUBLISH_BOTH, "LOAD4": LOAD4, "LOAD4_C": "=r,=r,=r,=r,l",
               "KMAX": KMAX, "QMAX": QMAX, "TABLES": CODE_TABLES_ASM.value, "PRMT": PRMT,
               "SHFL1": SHFL1, "SHFL2": SHFL2, "RELU": RELU_ASM.value}
    for n in sizes:
        consts[f"ISSUE_{n}"] = issue_asm(n)
        consts[f"ISSUE_{n}_H0"] = issue_asm(n // 2, n * 32, 0)
        consts[f"ISSUE_{n}_H1"] = issue_asm(n // 2, n * 32, n * 16)
        consts |= {f"ISSUE_{n}_R{p}": issue_asm(64, n * 32, p * 64 * 32) for p in range(n // 64)}
        consts[f"ISSUE_C_{n}"] = ",".join(["=r"] * (n // 2) + ["r"] * 17)
        consts[f"WAIT_C_{n}"] = ",".join(["=r"] * (n // 2) + ["r"] * (n // 2 + 1))
        for pending in range(3):
            consts[f"WAIT_{n}_{pending}"] = wait_asm(n // 2, pending)
    return consts


# A shared store where $3 is not 0; the folded weights' writers.
STORE_IF = "{ .reg .pred p; setp.ne.b32 p, $3, 0; @p st.shared.u32 [$1], $2; mov.u32 $0, 0; }"
# Every thread of the program here (all of its warpgroups) before it goes on, the two arrays'
# addresses passed on (so that their stores come after it); $4, unused, is a value of the
# request, so that the barrier (pure asm, for Inductor's analysis) is not hoisted out of the
# loop over requests.
BARRIER = "{ bar.sync 0; mov.b32 $0, $2; mov.b32 $1, $3; }"
# PUBLISH for both arrays: the async proxy fenced, every thread's stores ($2) done, the arrays'
# addresses passed on, so that what reads them (the weights' loads) comes after.
PUBLISH_BOTH = "{ fence.proxy.async.shared::cta; bar.sync 0; mov.u32 $0, $3; mov.u32 $1, $4; }"
# The largest of a query column's four group scales, which lie on a quad (``VECTOR_QUERY``).
QMAX = ("{ .reg .b32 x, m; shfl.sync.bfly.b32 x, $1, 1, 31, 0xffffffff; max.s32 m, $1, x; "
         "shfl.sync.bfly.b32 x, m, 2, 31, 0xffffffff; max.s32 $0, m, x; }")

def thread_lines(groups: int = 1) -> list[str]:
    """What every written-out kernel starts with: thread i's lane position in its warpgroup (t: its
    lane in the quad), its two keys' slots in a page and their scale bytes' offsets (group t), and
    the folds seen. With ``groups`` warpgroups (128 * groups threads), ``group``: the thread's."""
    lane = "thread" if groups == 1 else "lane"
    lines = [f"thread = tl.arange(0, {128 * groups})", f"zero = tl.zeros([{128 * groups}], tl.int32)"]
    if groups > 1:
        lines += ["lane = thread % 128", "group = thread // 128"]
    return lines + [
        "t = thread % 4",
        "odd = (t & 1) != 0",
        "second = (t & 2) != 0",
        f"tok_lo = 16 * ({lane} // 32) + {lane} % 32 // 4",
        "tok_hi = tok_lo + 8",
        "scale_lo = 4096 + t * 64 + (tok_lo % 16) * 4 + tok_lo // 16",
        "scale_hi = 4096 + t * 64 + (tok_hi % 16) * 4 + tok_hi // 16",
        "fewest = zero + 3",
    ]


# The prototype's (benchmarks/wgmma_scorer.py): one warpgroup.
THREAD_LINES = thread_lines()

# The package's block-table row: a page id is 32 bits, zero-extended (score_tiles.tile_page_ids).
PACKAGE_PAGE = "tl.load(bt_row + tl.minimum({index}, last) * block_table_page_stride).to(tl.uint32).to(tl.int64)"
# The package's hot pass (the launcher's ``wgmma`` tuning): at 2 rows the tile's dot in two
# halves of the query rows, one after the other (at 4 rows, below), with the folded head weights
# in shared memory (half the accumulators live), and the query prologue in 16-byte loads
# (``VECTOR_QUERY``). Of the four forms timed on an H100 (docs/benchmarks.md, stops 51 and 53:
# both halves in flight with the weights in registers, or this; the prologue a word per thread,
# or this), the fastest at 2 and at 4 rows: at next_n=4 169-170 us against 180-181 with the word
# prologue, 182-183 with both halves in flight and 202-204 for the default hot pass; at next_n=2
# 113 against 115-116, 124 and 107 (the default).
# At 4 rows the tile's dot is one dot per query row, two in flight (``tile_body``'s halves 3):
# bit-identical to the halves in turn, 565 instructions per tile against 529 (sm_90, Triton 3.6),
# and on an H100 1-2 % faster in each of three calls of two A/B rounds (docs/benchmarks.md, stops
# 58 and 59: next_n=4 161.0-162.1, 160.6-160.7 and, as the package's, 160.5-161.5 us against
# 161.9-164.0, 163.5-164.5 and 162.1-164.5), a gain at the edge of the spread between calls. At
# 2 rows it is slower (110.6-112.2 against 107.0-109.3), so 2-row blocks keep the halves in turn.
# ``python -m fp4_inductor.kernels.wgmma_source --halves N --variant`` writes every block with N,
# as a variant for benchmarks/score_ab.py.
PACKAGE_HALVES = {2: 2, 4: 3}  # rows per block: tile_body's halves
# Warpgroups per program: the pass is written at each (``wgmma_rows{rows}_g{groups}``), and the
# launch's warps, 4 per warpgroup, pick one (score.wgmma_pass_warps chooses per rows per block). One
# warpgroup runs under the launcher's register cap (128 and 168 registers, 4 and 3 programs per SM
# at 2 and 4 rows), a ``maxnreg`` launch option that Inductor's launches of a user kernel drop (they
# keep warps and stages). Four are one program per SM (16 warps): each warpgroup scores every fourth
# page of the program's share, all read one query operand and one set of folded weights in shared
# memory, built by all 512 threads, and 512 threads hold ptxas to 128 registers with no ``maxnreg``,
# so traced launches run the same pass as eager ones. H100 (docs/benchmarks.md, stop 61): the two
# bit-identical; four 7-8 % slower at 4 rows (next_n=4 172.6-174.7 us against 162.1-163.3) and
# 5-9 % faster at 2 rows (next_n=2 101.9-102.7 against 108.7-109.1, and the default hot pass's
# 104.4-105.6).
GROUPS = (1, 4)
PACKAGE_SHARED_WEIGHTS = True
DEPTH = 1  # keys loaded a step earlier than the step that builds their operand
# The query prologue: each thread takes one group of a query column (its 4 payload words in one
# 16-byte load, its scale byte; the column's 4 groups on a quad, whose largest scale is 2
# shuffles), so a request's operand is n / 32 steps (8 at 4 rows), all unrolled, every step's
# loads written before any use. ptxas still issues them in waves (the scale bytes and their
# shuffles first; at 4 rows the payload in 4 waves, reusing registers): 2-4 waits for memory per
# request at 2 rows and about 5 at 4 rows, where a word per thread and step took about 12 and 24
# (sm_90 SASS; docs/benchmarks.md, stop 52) and 6 % more time at next_n=4 (stop 53).
VECTOR_QUERY = [
    "unit = {step} * {threads} + thread",
    "col = unit // 4",
    "head = col % 64",
    "ok = col // 64 < rows_here",
    # A column past the block's rows reads the block's first row (in bounds), and takes zeros.
    "r64 = (first_row + tl.where(ok, col // 64, 0)).to(tl.int64)",
    "at = (words + (r64 * 64 + head) * 16 + t * 4).to(tl.int64)",
    "v0, v1, v2, v3 = tl.inline_asm_elementwise(LOAD4, LOAD4_C, [at], dtype=(tl.int32,) * 4, is_pure=True, pack=1)",
    "qexp = tl.load(q_scales_ptr + r64 * 256 + t * 64 + (head % 16) * 4 + head // 16, mask=ok, other=127)"
    ".to(tl.int32)",
    "weight = tl.load(weights_ptr + r64 * weights_stride + head * weights_head_stride, mask=ok & (t == 0), "
    "other=0.0)",
]


def block(lines: list[str], spaces: int) -> str:
    return "\n".join(" " * spaces + line for line in lines)


def query_prologue(n: int, groups: int = 1) -> list[str]:
    """The lines (unindented) that build a request's query operand of ``n`` columns and its folded
    head weights in shared memory (``queries``, ``weights_at``; ``stored`` sums the stores and
    ``query_fold`` takes each group's fold), by the program's ``groups`` warpgroups: every step's
    loads first (``VECTOR_QUERY``, a unit per thread, names suffixed by step), then each step's
    column scale, fold, operand words and weight. Word s of group t of column col goes to plane s,
    offset 4t. tests/test_wgmma.py runs the lines on stand-ins for their loads and asm and checks
    every byte they write."""
    threads = 128 * groups
    if groups < 1 or (4 * n) % threads:
        raise ValueError(f"groups: expected warpgroups whose threads divide the {4 * n} units of {n} columns, "
                         f"got {groups}")
    steps = range(4 * n // threads)
    loads = [re.sub(r"\b(unit|col|head|ok|r64|at|v[0-3]|qexp|weight)\b", rf"\g<1>_{q}", line).replace(
        "{step}", str(q)).replace("{threads}", str(threads)) for q in steps for line in VECTOR_QUERY]
    use = [
        "qmax = tl.inline_asm_elementwise(QMAX, '=r,r', [qexp], dtype=tl.int32, is_pure=True, pack=1)",
        "shift = 3 - (qmax - qexp)",
        "query_fold = tl.minimum(query_fold, shift)",
        "lo, hi = tl.inline_asm_elementwise(TABLES, '=r,=r,r', [shift], dtype=(tl.int32, tl.int32), is_pure=True, "
        "pack=1)",
    ]
    for word in range(4):
        use += [
            f"p0, p1 = tl.inline_asm_elementwise(PRMT, '=r,=r,r,r,r', [tl.where(ok, v{word}, 0), lo, hi], "
            "dtype=(tl.int32, tl.int32), is_pure=True, pack=1)",
            f"q_at = queries + {word} * {n * 32} + col // 8 * 256 + col % 8 * 16 + t * 4",
            "stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at, p0], dtype=tl.int32, is_pure=True, pack=1)",
            "stored += tl.inline_asm_elementwise(STORE, '=r,r,r', [q_at + 128, p1], dtype=tl.int32, is_pure=True, "
            "pack=1)",
        ]
    use += [
        "folded = tl.where(ok, weight * power_of_two(qmax, 0.0625), 0.0).to(tl.int32, bitcast=True)",
        "stored += tl.inline_asm_elementwise(STORE_IF, '=r,r,r,r', [weights_at + col * 4, folded, "
        "(t == 0).to(tl.int32)], dtype=tl.int32, is_pure=True, pack=1)",
    ]
    uses = [re.sub(r"\b(col|ok|v[0-3]|qexp|weight)\b", rf"\g<1>_{q}", line) for q in steps for line in use]
    return loads + uses


def request_source(rows: int, halves: int | None = None, groups: int = 1) -> str:
    """``wgmma_rows{rows}_g{groups}``: the hot pass (MODE 1) of one row block of one request over
    pages [page_begin, page_end) at 64 heads (score_kernel.score_request's arguments), by
    ``groups`` warpgroups: the query operand and the folded head weights built into shared memory
    by all of them (queries that do not fold mark the program), then the key loop, warpgroup g
    scoring pages page_begin + g, + g + groups, ... (a page past page_end is read as its last page,
    and its logits are not stored: their slots lie past every row's end), its dot as
    ``tile_body``'s ``halves`` (by default the package's, ``PACKAGE_HALVES``). Returns ``fewest``
    updated: below 0 where a key or the query does not fold, as the package's hot pass."""
    n = 64 * rows
    halves = PACKAGE_HALVES[rows] if halves is None else halves
    query_block = block(query_prologue(n, groups), 4)
    rr = "tl.arange(0, ROWS)"
    rows_lines = [f"limit{r} = tl.where({r} < rows_here, tl.minimum(tl.sum(tl.where({rr} == {r}, row_ends, 0), "
                  f"axis=0), page_end * 64), 0)" for r in range(rows)]
    rows_lines += [f"out_row{r} = (first_row + {r}).to(tl.int64) * out_stride" for r in range(rows)]
    # The folded weights stay in shared memory (PACKAGE_SHARED_WEIGHTS): each thread's own pair.
    weights = ["weights_at = weights_at + 8 * t"]
    first = "page_begin" if groups == 1 else "page_begin + group"
    prologue = tile_prologue(DEPTH, first, PACKAGE_PAGE, groups)
    body = tile_body(n, rows, DEPTH, halves, PACKAGE_SHARED_WEIGHTS, PACKAGE_PAGE, groups)
    # Every warpgroup runs the loop's steps (the same count), so the program's barriers and each
    # warpgroup's aligned wgmmas see uniform control flow.
    loop = (["for T in range(page_begin, page_end):"] if groups == 1 else
            [f"for T0 in range(page_begin, page_end, {groups}):", "T = T0 + group"])

    return f'''

@triton.jit
def wgmma_rows{rows}_g{groups}(fewest_in, out_ptr, out_stride, q_payload_ptr, q_scales_ptr, cache_ptr, page_stride,
                   weights_ptr, weights_stride, weights_head_stride, bt_row, block_table_page_stride, first_row,
                   rows_here, row_ends, page_begin, page_end):
    ROWS: tl.constexpr = {rows}
{block(thread_lines(groups), 4)}
    query_fold = zero + 3
    # The arrays are the program's for every request it scores: every thread past the last
    # request's tiles (whose epilogue reads the weights) before they are written again.
    queries = tl.inline_asm_elementwise(DECLARE_{n}, "=r,r", [thread], dtype=tl.int32, is_pure=True, pack=1)
    weights_at = tl.inline_asm_elementwise(DECLARE_W{n}, "=r,r", [thread], dtype=tl.int32, is_pure=True, pack=1)
    queries, weights_at = tl.inline_asm_elementwise(BARRIER, "=r,=r,r,r,r", [queries, weights_at, zero + first_row],
                                                    dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    words = q_payload_ptr.to(tl.pointer_type(tl.int32))
    stored = zero
{query_block}
    queries, weights_at = tl.inline_asm_elementwise(PUBLISH_BOTH, "=r,=r,r,r,r", [stored, queries, weights_at],
                                                    dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    {QUERY_DESCRIPTOR}
{block(weights + rows_lines, 4)}
    last = page_end - 1
{block(prologue, 4)}
{block(loop[:1], 4)}
{block(loop[1:] + body, 8)}
    keys = tl.min(fewest, axis=0)
    return tl.minimum(fewest_in, tl.where(tl.min(query_fold, axis=0) < 0, -1, keys))
'''


def module_source(halves: int | None = None) -> str:
    """``score_wgmma.py``: the warps the pass takes (``PASS_WARPS``), the asm strings, the hot pass
    per block of 2 or 4 rows at each of ``GROUPS`` warpgroups per program (the tile's dot as
    ``tile_body``'s ``halves`` for every block; by default the package's per block,
    ``PACKAGE_HALVES``), and ``wgmma_request``, which picks one by rows and warps."""
    head = ('"""Written by ``python -m fp4_inductor.kernels.wgmma_source`` (wgmma_source.py says what it\n'
            'is): do not edit; tests/test_wgmma.py checks that it is what the generator writes."""\n\n'
            "import triton\nimport triton.language as tl\n\nfrom .score_math import power_of_two\n\n")
    head += "# The launch's warps that the pass takes, 4 per warpgroup (score.wgmma_pass_warps picks one).\n"
    head += f"PASS_WARPS = {tuple(4 * groups for groups in GROUPS)}\n"
    head += "".join(f"{k} = tl.constexpr({v!r})\n" for k, v in constants((64, 128, 256)).items())
    functions = "".join(request_source(rows, halves, groups) for rows in (2, 4) for groups in GROUPS)
    arguments = ("\n                fewest, out_ptr, out_stride, q_payload_ptr, q_scales_ptr, cache_ptr, page_stride, "
                 "weights_ptr,\n                weights_stride, weights_head_stride, bt_row, block_table_page_stride, "
                 "first_row, rows_here,\n                row_ends, page_begin, page_end")
    refusal = f"wgmma: {' or '.join(str(4 * g) for g in GROUPS)} warps ({' or '.join(map(str, GROUPS))} warpgroups)"
    branches = []
    for rows in (2, 4):
        calls = "".join(f"""
        {'if' if i == 0 else 'elif'} WARPS == {4 * groups}:
            fewest = wgmma_rows{rows}_g{groups}({arguments})""" for i, groups in enumerate(GROUPS))
        branches.append(f"""
    {'if' if rows == 2 else 'elif'} ROWS == {rows}:{calls}
        else:
            tl.static_assert(False, "{refusal}")""")
    dispatch = f'''

@triton.jit
def wgmma_request(fewest, out_ptr, out_stride, q_payload_ptr, q_scales_ptr, cache_ptr, page_stride, weights_ptr,
                  weights_stride, weights_head_stride, bt_row, block_table_page_stride, first_row, rows_here, row_ends,
                  page_begin, page_end, ROWS: tl.constexpr, WARPS: tl.constexpr):
    """The hot pass of one row block on wgmmas in inline PTX (``wgmma_rows{{ROWS}}_g{{WARPS // 4}}``)."""\
{"".join(branches)}
    else:
        tl.static_assert(False, "wgmma: 2 or 4 rows per block")
    return fewest
'''
    return head + functions + dispatch


def variant_name(halves: int | None = None) -> str:
    """The suffix of a variant's modules: ``h{halves}``."""
    if halves is None:
        raise ValueError("variant: expected halves (tile_body's dot at every block), got None")
    return f"h{halves}"


def variant_sources(halves: int | None = None) -> dict[str, str]:
    """The hot pass written with ``halves`` at every block as a variant of the kernels package, by
    module name: ``score_wgmma_{name}`` and ``kernel_{name}`` (score_kernel.py importing it;
    ``variant_name``), which benchmarks/score_ab.py and score_variants.py load from a file."""
    import os

    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "score_kernel.py")) as f:
        kernel = f.read()
    line = "from .score_wgmma import "
    assert line in kernel, "score_kernel.py imports from score_wgmma"
    suffix = variant_name(halves)
    name = f"score_wgmma_{suffix}"
    return {name: module_source(halves), f"kernel_{suffix}": kernel.replace(line, f"from .{name} import ")}


if __name__ == "__main__":
    import argparse
    import os

    parser = argparse.ArgumentParser(description="Writes score_wgmma.py (the package's hot pass on wgmmas).")
    parser.add_argument("--halves", type=int, default=None, choices=(0, 1, 2, 3),
                        help="the tile's dot (tile_body's halves) at every block (default: the package's, "
                             f"by rows per block {PACKAGE_HALVES})")
    parser.add_argument("--variant", action="store_true",
                        help="write score_wgmma_{NAME}.py and kernel_{NAME}.py (score_kernel.py on it) instead, a "
                             "variant for benchmarks/score_ab.py; NAME: h{HALVES}")
    args = parser.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        written = (variant_sources(args.halves) if args.variant
                   else {"score_wgmma": module_source(args.halves)})
    except ValueError as exc:  # a variant without --halves (``variant_name``)
        parser.error(str(exc))
    for name, source in written.items():
        with open(os.path.join(here, f"{name}.py"), "w") as f:
            f.write(source)
