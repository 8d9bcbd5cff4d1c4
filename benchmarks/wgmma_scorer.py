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
import sys
import tempfile

import triton

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from fp4_inductor.kernels.sm90 import dump_cubin  # noqa: E402
from fp4_inductor.kernels.wgmma_source import (PROTOTYPE_PAGE, QUERY_DESCRIPTOR, THREAD_LINES, build, constants,  # noqa: E402
                                                group_body, load_raw, pack, tile_body, tile_prologue)
from wgmma_common import load_written, ptxas_verdict, wgmma_order  # noqa: E402


# ---- the kernel, written out (the lines: fp4_inductor/kernels/wgmma_source.py) -------------------
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
        prologue += tile_prologue(depth, "p_begin")
        body = tile_body(n, rows, depth, halves, shared_weights)
    else:
        for k in range(tiles):
            prologue += load_raw(f"q{k}", PROTOTYPE_PAGE.format(index=f"p_begin + {k}")) + [pack(f"q{k}")]
            prologue += build(f"q{k}", f"a{k}_", f"k{k}")
        prologue += [f"page{k} = {PROTOTYPE_PAGE.format(index=f'p_begin + {tiles + k}')}" for k in range(tiles)]
        body = group_body(tiles, n, rows)
    source = f'''
@triton.jit
def {form_name(rows, tiles, depth, halves, shared_weights)}(out_ptr, out_stride, qop_ptr, wf_ptr, cache_ptr,
                         page_stride, bt_ptr, bt_stride, pages,
                         row_ends_ptr, flags_ptr, split):
    b = tl.program_id(0)
    p_begin = tl.program_id(1) * pages // split
    p_end = (tl.program_id(1) + 1) * pages // split
{indent("    " + x for x in THREAD_LINES)}
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
    {QUERY_DESCRIPTOR}
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
    consts = constants()
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
    """Two launches of a form (``ROWS,TILES,DEPTH,HALVES,SHARED_WEIGHTS``) at 64 x 32768 keys, the second on
    run_gpu's first program count, then one of the package's scorer, for a profiler:
    ``ncu -k regex:wg_score --launch-skip 1 -c 1 ...``."""
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
    # Sized from a split-2 launch, as run_gpu (a split of 1 is a kernel of its own); the profiled
    # launch is the second (ncu --launch-skip 1).
    per_sm = min(65536 // (kernel[(64, 2)](out, out.stride(0), qop, wf, *launch, 2, num_warps=4).n_regs * 128), 8)
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
    choice.add_argument("--profile", metavar=form,
                        help="launch one form twice (the second as timed), then the package's scorer, for a profiler")
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
