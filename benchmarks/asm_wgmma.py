"""An int8 wgmma written in inline PTX inside a Triton kernel, left in flight while the warpgroup
loads and sums (docs/benchmarks.md, stop 49): the one route to overlapping the scorer's dots with
its integer work that stays a Triton kernel (so Inductor can emit it), since Triton's own
pipeliner never leaves an int32-accumulator dot in flight (`wgmma_accumulators.py`).

    python benchmarks/asm_wgmma.py --compile   # any machine: sm_90 SASS waits and ptxas's verdict
    python benchmarks/asm_wgmma.py             # a Hopper GPU: values against torch, and the loop's time

The kernels run on 4 warps (one warpgroup) with tensors of 128 elements, so that thread i holds
element i of each, and state wgmma's register fragments themselves:
- the query operand B (64 heads x 128, int8, K-major) sits in a 8 KB shared array declared inside
  the PTX (one asm statement, whose result is the array's address), in wgmma's canonical layout
  without swizzle: 8 x 16-byte core matrices, 128 bytes apart along K, 256 along N, 2 KB per
  K=32 step;
- a dot is one asm statement (`ISSUE`): four m64n64k32 s8 wgmmas on 16 A registers (the thread's
  fragment: rows g and g + 8 of its warp's 16, bytes 4t.. and 16 + 4t.. of each K=32 step) into
  32 accumulator registers, then a commit; `WAIT1` / `WAIT0` wait for all but the newest group /
  for all, and pass the accumulators on, so that everything reading them comes after the wait.
ptxas keeps a dot in flight only where nothing else writes its A registers or reads its
accumulators before the wait: the loads of the next tile must come after the wait of the dot
that read the registers they reuse, and no dot may stay in flight across the loop's back edge
(ptxas serializes every wgmma otherwise: warnings C7513, C7514). The loop below issues two tiles'
dots back to back, waits for the first, loads the next first tile and sums the first, then the
same for the second ("in flight"). Two baselines: the same schedule with each dot waited right
after its issue ("prefetch, waited": the loads come as early, the dots do not overlap), and each
tile loaded right before its dot and waited at once ("waited"). Every program reads the same
557 KB of keys, so the loads hit L2: the timing isolates the overlap, not the scorer's HBM reads.
The GPU mode checks that the launched binaries have the waits above, and exits non-zero on a
wrong value or order.
"""

import argparse
import os
import sys
import tempfile

import triton

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from fp4_inductor.kernels.sm90 import dump_cubin  # noqa: E402
from fp4_inductor.kernels.wgmma_source import PUBLISH, QUERY_DESCRIPTOR, STORE, declare_asm, issue_asm, names  # noqa: E402
from wgmma_common import load_written, ptxas_verdict, wgmma_order  # noqa: E402

# ---- inline PTX ---------------------------------------------------------------------------------
DECLARE = declare_asm(64)  # the 8 KB query array, its address
QUAD_SUM = ("{ .reg .f32 x; shfl.sync.bfly.b32 x, $1, 1, 31, 0xffffffff; add.f32 $0, $1, x; "
            "shfl.sync.bfly.b32 x, $0, 2, 31, 0xffffffff; add.f32 $0, $0, x; }")


def wait_asm(pending: int) -> str:
    """A plain wait (the scorer's, ``wgmma_source.wait_asm``, first stores a value to a scratch
    word, to hold its place: not what this probe measured)."""
    moves = " ".join(f"mov.b32 ${i}, ${i + 32};" for i in range(32))
    return f"{{ wgmma.wait_group.sync.aligned {pending}; {moves} }}"


# ---- the kernels, written out (Triton reads a kernel's source from its file) --------------------
def load_fragment(name: str, tile: str) -> list[str]:
    rows = (("r_lo", 0), ("r_hi", 0), ("r_lo", 4), ("r_hi", 4))
    return [f"{name}{4 * step + i} = tl.load(words + ({tile}) * 2048 + {row} + {step * 8 + off} + t)"
            for step in range(4) for i, (row, off) in enumerate(rows)]


def issue(acc: str, a: str) -> str:
    return (f"{names(acc, 32)} = tl.inline_asm_elementwise(ISSUE, ISSUE_C, [{names(a, 16)}, query_descriptor], "
            "dtype=(tl.int32,) * 32, is_pure=True, pack=1)")


def wait(acc: str, pending: int) -> str:
    return (f"{names(acc, 32)} = tl.inline_asm_elementwise(WAIT{pending}, WAIT_C, [{names(acc, 32)}], "
            "dtype=(tl.int32,) * 32, is_pure=True, pack=1)")


def row_sums(acc: str, tile: str) -> list[str]:
    """sum over heads of w_h relu(acc) for the thread's two rows, summed over the quad, folded into
    the thread's running checksum (rows g and g + 8 weighted 1 and 0.5, the tile by its number)."""
    def half(elements):
        return " + ".join(f"tl.maximum({acc}{4 * j + e}.to(tl.float32), 0.0) * w{2 * j + e % 2}"
                          for j in range(8) for e in elements)
    return [f"lo = quad_sum({half((0, 1))})", f"hi = quad_sum({half((2, 3))})",
            f"total += tl.where(t == 0, lo + hi * 0.5, 0.0) * (({tile}) + 1)"]


def indent(lines: list[str], spaces: int) -> str:
    return "\n".join(" " * spaces + line for line in lines)


PROLOGUE = '''    thread = tl.arange(0, 128)
    g = thread % 32 // 4
    t = thread % 4
    r_lo = (16 * (thread // 32) + g) * 32
    r_hi = r_lo + 8 * 32
    queries = tl.inline_asm_elementwise(DECLARE, "=r,r", [thread], dtype=tl.int32, is_pure=True, pack=1)
    source = b_ptr.to(tl.pointer_type(tl.int32))
    stored = tl.zeros([128], tl.int32)
    for q in tl.static_range(16):
        word = thread * 16 + q
        n = word // 32
        k = word % 32 * 4
        at = queries + k // 32 * 2048 + n // 8 * 256 + k % 32 // 16 * 128 + n % 8 * 16 + k % 16
        stored += tl.inline_asm_elementwise(STORE, "=r,r,r", [at, tl.load(source + word)], dtype=tl.int32,
                                            is_pure=True, pack=1)
    queries = tl.inline_asm_elementwise(PUBLISH, "=r,r,r", [queries, stored], dtype=tl.int32, is_pure=True, pack=1)
'''
PROLOGUE += f"    {QUERY_DESCRIPTOR}\n"


def kernels_source() -> str:
    store = [f"tl.store(d{k}_ptr + (16 * (thread // 32) + g + {8 * (e // 2)}) * 64 + {8 * j} + 2 * t + {e % 2}, "
             f"{acc}{4 * j + e})" for k, acc in ((1, "d"), (2, "e")) for j in range(8) for e in range(4)]
    two_dots = (["words = a_ptr.to(tl.pointer_type(tl.int32))"] + load_fragment("a", "0") + [issue("d", "a")]
                + ["words = a2_ptr.to(tl.pointer_type(tl.int32))"] + load_fragment("b", "0") + [issue("e", "b")]
                + [wait("d", 1)] + store[:32] + [wait("e", 0)] + store[32:])
    weights = [f"w{i} = tl.load(w_ptr + {8 * (i // 2)} + 2 * t + {i % 2})" for i in range(16)]
    def pairs(dots, second_wait):
        """Tiles 2i and 2i + 1 with their dots as given; each tile's A registers are reloaded only
        after the wait of the dot that read them."""
        return dots + load_fragment("a", "(2 * i + 2) % key_tiles") + row_sums("d", "2 * i") + second_wait \
            + load_fragment("b", "(2 * i + 3) % key_tiles") + row_sums("e", "2 * i + 1")
    in_flight = pairs([issue("d", "a"), issue("e", "b"), wait("d", 1)], [wait("e", 0)])
    prefetch_waited = pairs([issue("d", "a"), wait("d", 0), issue("e", "b"), wait("e", 0)], [])
    waited = load_fragment("a", "i % key_tiles") + [issue("d", "a"), wait("d", 0)] + row_sums("d", "i")
    return f'''import triton
import triton.language as tl

DECLARE = tl.constexpr({DECLARE!r})
STORE = tl.constexpr({STORE!r})
PUBLISH = tl.constexpr({PUBLISH!r})
QUAD_SUM = tl.constexpr({QUAD_SUM!r})
ISSUE = tl.constexpr({issue_asm(64)!r})
WAIT0 = tl.constexpr({wait_asm(0)!r})
WAIT1 = tl.constexpr({wait_asm(1)!r})
ISSUE_C = tl.constexpr({",".join(["=r"] * 32 + ["r"] * 17)!r})
WAIT_C = tl.constexpr({",".join(["=r"] * 32 + ["r"] * 32)!r})


@triton.jit
def quad_sum(v):
    return tl.inline_asm_elementwise(QUAD_SUM, "=f,f", [v], dtype=tl.float32, is_pure=True, pack=1)


@triton.jit
def two_dots(a_ptr, a2_ptr, b_ptr, d1_ptr, d2_ptr):
    """d1 = a @ b.T and d2 = a2 @ b.T (int8 [64, 128] each, int32 [64, 64] out), the second issued
    while the first is in flight."""
{PROLOGUE}
{indent(two_dots, 4)}


@triton.jit
def tile_loop(k_ptr, b_ptr, w_ptr, out_ptr, n_tiles, key_tiles, SCHEDULE: tl.constexpr):
    """n_tiles tiles of 64 int8 keys x 128 (tile i is key tile i % key_tiles of this program's
    keys) against 64 query heads: relu, the head weights, a row sum, folded into a checksum per
    thread. SCHEDULE 2: tiles in pairs, both dots in flight together; 1: the same loads and sums,
    each dot waited after its issue; 0: each tile loaded before its dot and waited at once."""
{PROLOGUE}
{indent(weights, 4)}
    words = k_ptr.to(tl.pointer_type(tl.int32)) + tl.program_id(0) % 4 * 2048
    total = tl.zeros([128], tl.float32)
    if SCHEDULE == 2:
{indent(load_fragment("a", "0") + load_fragment("b", "1"), 8)}
        for i in range(0, n_tiles // 2):
{indent(in_flight, 12)}
    elif SCHEDULE == 1:
{indent(load_fragment("a", "0") + load_fragment("b", "1"), 8)}
        for i in range(0, n_tiles // 2):
{indent(prefetch_waited, 12)}
    else:
        for i in range(0, n_tiles):
{indent(waited, 12)}
    tl.store(out_ptr + tl.program_id(0) * 128 + thread, total)
'''


def load_kernels(directory: str):
    return load_written(directory, "asm_wgmma_kernels", kernels_source())


SCHEDULES = {0: "each dot waited", 1: "prefetch, waited", 2: "in flight"}
# The wgmma groups and waits each kernel must compile to (the loops' bodies, then what follows).
EXPECTED = {"two_dots": "group, group, wait 0x1, wait 0x0", 0: "group, wait 0x0",
            1: "group, wait 0x0, group, wait 0x0", 2: "group, group, wait 0x1, wait 0x0"}


def compile_report(kernels) -> None:
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    cases = [("two_dots", kernels.two_dots, {})] + [
        (f"tile_loop, {SCHEDULES[schedule]}", kernels.tile_loop, {"SCHEDULE": schedule}) for schedule in (0, 1, 2)]
    print(f"triton {triton.__version__}, sm_90")
    print("| kernel | registers | wgmma groups and waits, in order | ptxas |")
    print("| --- | --- | --- | --- |")
    for name, kernel, constexprs in cases:
        pointers = {p: "*i8" for p in ("a_ptr", "a2_ptr", "b_ptr", "k_ptr")}
        pointers.update({"d1_ptr": "*i32", "d2_ptr": "*i32", "w_ptr": "*fp32", "out_ptr": "*fp32"})
        params = kernel.arg_names
        signature = {p: "constexpr" if p in constexprs else pointers.get(p, "i32") for p in params}
        compiled = triton.compile(ASTSource(fn=kernel, signature=signature, constexprs=constexprs),
                                  target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
        _, warnings = ptxas_verdict(compiled.asm["ptx"])
        registers = dump_cubin(compiled.asm["cubin"], "resource-usage").split("REG:")[1].split()[0]
        order = wgmma_order(compiled.asm["cubin"])
        declared = compiled.asm["ptx"].count(".shared .align 1024 .b8 fp4_queries")
        if declared != 1:
            raise SystemExit(f"{name}: expected one shared array declared in the PTX, found {declared}")
        print(f"| {name} | {registers} | {order} | "
              f"{'serialized: ' + ', '.join(warnings) if warnings else 'no warning'} |")


def run_gpu(kernels) -> None:
    import torch

    torch.manual_seed(0)
    print(torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__)
    failures = []
    a, a2, b = (torch.randint(-96, 97, (64, 128), dtype=torch.int8, device="cuda") for _ in range(3))
    d1, d2 = (torch.full((64, 64), -7, dtype=torch.int32, device="cuda") for _ in range(2))
    launched = kernels.two_dots[(1,)](a, a2, b, d1, d2, num_warps=4)
    order = wgmma_order(launched.asm["cubin"])
    if order != EXPECTED["two_dots"]:
        failures.append(f"two_dots compiled to {order}")
    for name, got, x in (("first", d1, a), ("second", d2, a2)):
        wrong = int((got.cpu().long() != x.cpu().long() @ b.cpu().long().T).sum())
        print(f"two_dots, {name} dot: {wrong} of 4096 entries differ from torch")
        if wrong:
            failures.append(f"two_dots, {name} dot: {wrong} entries differ")

    key_tiles, n_tiles, programs = 64, 64, 132 * 4
    keys = torch.randint(-96, 97, (4 * 64 + key_tiles * 64, 128), dtype=torch.int8, device="cuda")
    weights = torch.rand(64, device="cuda")
    expected = torch.zeros(4, 128, dtype=torch.float64)
    for p in range(4):
        per_row = torch.zeros(64, dtype=torch.float64)
        for i in range(n_tiles):
            tile = keys[p * 64 + i % key_tiles * 64:][:64].cpu().double()
            per_row += ((tile @ b.cpu().double().T).clamp(min=0) @ weights.cpu().double()) * (i + 1)
        for thread in range(0, 128, 4):
            row = 16 * (thread // 32) + thread % 32 // 4
            expected[p, thread] = per_row[row] + 0.5 * per_row[row + 8]
    print("| tile_loop (528 programs x 64 tiles of 64 keys) | us per launch (CUDA-graph replay, median of 7) | "
          "largest relative error, programs 0-3 | wgmma groups and waits |")
    print("| --- | --- | --- | --- |")
    for schedule in (0, 1, 2):
        out = torch.empty(programs * 128, device="cuda")

        def launch():
            return kernels.tile_loop[(programs,)](keys, b, weights, out, n_tiles, key_tiles, SCHEDULE=schedule,
                                                  num_warps=4)
        order = wgmma_order(launch().asm["cubin"])
        torch.cuda.synchronize()
        got = out[:4 * 128].view(4, 128).cpu().double()
        error = ((got - expected).abs() / expected.abs().clamp(min=1)).max().item()
        if error > 1e-4 or order != EXPECTED[schedule]:
            failures.append(f"tile_loop, {SCHEDULES[schedule]}: error {error:.1e}, compiled to {order}")
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(10):
                launch()
        graph.replay()
        times = []
        for _ in range(7):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) * 100)
        print(f"| {SCHEDULES[schedule]} | {sorted(times)[3]:.1f} | {error:.1e} | {order} |")
    if failures:
        raise SystemExit("FAILED: " + "; ".join(failures))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compile", action="store_true", help="only compile for sm_90 and report the waits")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        sys.path.insert(0, directory)
        kernels = load_kernels(directory)
        compile_report(kernels) if args.compile else run_gpu(kernels)
