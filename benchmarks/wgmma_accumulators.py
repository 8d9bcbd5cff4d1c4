"""Why the scorer's dots stay int8 with int32 accumulators, and synchronous (docs/benchmarks.md,
stop 49).

Triton's Hopper pipeliner (Triton 3.6 and 3.7.1) leaves a wgmma in flight after its issue only
when its accumulator is float32. An int8 dot, whose accumulator is int32, always gets a wait
right after it. An fp8 e4m3 dot with a float32 accumulator can stay in flight across the loop's
back edge, where its result is read in the next iteration after another dot's wait. E2M1 values
are exact in e4m3 too, so the question is whether the fp8 dot gives the int8 dot's sums:

    python benchmarks/wgmma_accumulators.py --compile   # any machine: where Triton waits (sm_90)
    python benchmarks/wgmma_accumulators.py             # a Hopper GPU: exactness, and a toy loop's time

The exactness check feeds both dots the scorer's operand values (E2M1 magnitudes 0..6 doubled to
integers and shifted left by a fold of 0..3 per 32-element group, random signs; |sum| < 2**21,
so every sum is exact in float32) and counts the entries that differ from float64 matmul.
"wide" puts one group at fold 3 with large magnitudes and the rest at fold 0 with small odd ones.
The toy loop (a stand-in operand builder, two dots per iteration, relu and a row sum) times the
int8 dots against fp8 dots with the second dot of each iteration left in flight.
"""

import argparse
import re

import torch
import triton
import triton.language as tl

MAGNITUDES = torch.tensor([0, 1, 2, 3, 4, 6, 8, 12], dtype=torch.float64)


@triton.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, N: tl.constexpr):
    """c[i] = a[i] @ b[i] for a [64, 128] and b [128, N] of one dtype, in float32."""
    m = tl.arange(0, 64)
    k = tl.arange(0, 128)
    n = tl.arange(0, N)
    i = tl.program_id(0)
    a = tl.load(a_ptr + i * 64 * 128 + m[:, None] * 128 + k[None, :])
    b = tl.load(b_ptr + i * 128 * N + k[:, None] * N + n[None, :])
    tl.store(c_ptr + i * 64 * N + m[:, None] * N + n[None, :], tl.dot(a, b).to(tl.float32))


@triton.jit
def toy_loop(k_ptr, q_ptr, out_ptr, n_pairs, FP8: tl.constexpr, CARRY: tl.constexpr):
    """Per iteration: two [64, 128] operands built from key bytes, each dotted with a loop-invariant
    [128, 64] query operand, relu and a row sum. CARRY reads the second dot's result in the next
    iteration, after the first dot's wait (Triton then leaves it in flight, for a float32
    accumulator only)."""
    m = tl.arange(0, 64)
    k = tl.arange(0, 128)
    h = tl.arange(0, 64)
    q_bits = tl.load(q_ptr + k[:, None] * 64 + h[None, :])
    if FP8:
        q = q_bits.to(tl.float8e4nv, bitcast=True)
        acc_y = tl.zeros([64, 64], tl.float32)
    else:
        q = q_bits.to(tl.int8, bitcast=True)
        acc_y = tl.zeros([64, 64], tl.int32)
    total = tl.zeros([64], tl.float32)
    base = k_ptr + tl.program_id(0).to(tl.int64) * n_pairs * 2 * 64 * 64 + m[:, None] * 64 + k[None, :] // 2
    for t in range(n_pairs):
        words_x = tl.load(base + t * 2 * 64 * 64)
        words_y = tl.load(base + t * 2 * 64 * 64 + 64 * 64)
        nib_x = tl.where(k[None, :] % 2 == 0, words_x & 0xF, words_x >> 4)
        nib_y = tl.where(k[None, :] % 2 == 0, words_y & 0xF, words_y >> 4)
        bits_x = ((nib_x & 7) << 3) ^ ((nib_x & 8) << 4)
        bits_y = ((nib_y & 7) << 3) ^ ((nib_y & 8) << 4)
        if FP8:
            a_x = bits_x.to(tl.float8e4nv, bitcast=True)
            a_y = bits_y.to(tl.float8e4nv, bitcast=True)
        else:
            a_x = bits_x.to(tl.int8, bitcast=True)
            a_y = bits_y.to(tl.int8, bitcast=True)
        acc_x = tl.dot(a_x, q)
        total += tl.sum(tl.maximum(acc_x.to(tl.float32), 0.0), 1)
        if CARRY:
            total += tl.sum(tl.maximum(acc_y.to(tl.float32), 0.0), 1)
            acc_y = tl.dot(a_y, q)
        else:
            acc_y = tl.dot(a_y, q)
            total += tl.sum(tl.maximum(acc_y.to(tl.float32), 0.0), 1)
    if CARRY:
        total += tl.sum(tl.maximum(acc_y.to(tl.float32), 0.0), 1)
    tl.store(out_ptr + tl.program_id(0) * 64 + m, total)


def compile_waits() -> None:
    """Compile toy_loop for sm_90 (no GPU needed) and print the waits Triton puts in its loop."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    signature = {"k_ptr": "*u8", "q_ptr": "*u8", "out_ptr": "*fp32", "n_pairs": "i32", "FP8": "constexpr",
                 "CARRY": "constexpr"}
    print(f"triton {triton.__version__}, sm_90")
    print("| operands | second dot's result read | waits in the loop (pendings) | last dot in flight at the back edge |")
    print("| --- | --- | --- | --- |")
    for fp8 in (False, True):
        for carry in (False, True):
            compiled = triton.compile(ASTSource(fn=toy_loop, signature=signature,
                                                constexprs={"FP8": fp8, "CARRY": carry}),
                                      target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
            loop = compiled.asm["ttgir"].split("scf.for", 1)[1].split("scf.yield", 1)[0]
            waits = re.findall(r"warp_group_dot_wait .*?pendings = (\d+)", loop)
            after_last_dot = loop.rsplit("ttng.warp_group_dot ", 1)[1]
            print(f"| {'fp8 e4m3, fp32 acc' if fp8 else 'int8, int32 acc'} | "
                  f"{'next iteration' if carry else 'at once'} | {', '.join(waits)} | "
                  f"{'no' if 'warp_group_dot_wait' in after_last_dot else 'yes'} |")


def operands(batch: int, rows: int, kind: str) -> torch.Tensor:
    """float64 [batch, rows, 128]: the scorer's int8 operand values (see the module docstring)."""
    codes = torch.randint(0, 8, (batch, rows, 128))
    sign = torch.where(torch.rand(batch, rows, 128) < 0.5, -1.0, 1.0).double()
    fold = torch.randint(0, 4, (batch, rows, 4)).repeat_interleave(32, -1).double()
    if kind == "wide":
        codes[..., :32] = torch.randint(6, 8, (batch, rows, 32))
        codes[..., 32:] = torch.tensor([1, 3])[torch.randint(0, 2, (batch, rows, 96))]
        fold = torch.zeros(batch, rows, 128, dtype=torch.float64)
        fold[..., :32] = 3
    return MAGNITUDES[codes] * sign * 2.0 ** fold


def exactness(device: str) -> None:
    print("| operands | N | dot | inexact sums | of | largest relative error | largest abs(sum) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for kind in ("random", "wide"):
        for n in (64, 128):
            batch = 256
            a = operands(batch, 64, kind)
            b = operands(batch, n, kind).transpose(1, 2).contiguous()
            reference = torch.matmul(a, b)
            for name, dtype in (("fp8 e4m3 -> fp32", torch.float8_e4m3fn), ("int8 -> int32", torch.int8)):
                a_dev, b_dev = a.to(dtype).to(device), b.to(dtype).to(device)
                assert torch.equal(a_dev.cpu().double(), a) and torch.equal(b_dev.cpu().double(), b)
                c = torch.empty(batch, 64, n, device=device)
                dot_kernel[(batch,)](a_dev, b_dev, c, N=n)
                error = c.cpu().double() - reference
                relative = (error.abs() / reference.abs().clamp(min=1)).max().item()
                print(f"| {kind} | {n} | {name} | {int((error != 0).sum())} | {reference.numel()} | "
                      f"{relative:.3g} | {reference.abs().max().item():.0f} |")


def toy_times(device: str) -> None:
    programs, pairs = 132 * 4, 64
    keys = torch.randint(0, 256, (programs * pairs * 2 * 64 * 64,), dtype=torch.uint8, device=device)
    queries = torch.randint(0, 0x38, (128 * 64,), dtype=torch.uint8, device=device)
    out = torch.empty(programs * 64, device=device)
    print("| toy loop | warps | us per launch (CUDA-graph replay, median of 5) |")
    print("| --- | --- | --- |")
    for fp8, carry in ((False, False), (True, False), (True, True)):
        for warps in (4, 8):
            def launch():
                toy_loop[(programs,)](keys, queries, out, pairs, FP8=fp8, CARRY=carry, num_warps=warps)
            launch()
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for _ in range(10):
                    launch()
            graph.replay()
            times = []
            for _ in range(5):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                graph.replay()
                end.record()
                torch.cuda.synchronize()
                times.append(start.elapsed_time(end) * 100)
            label = ("fp8, second dot carried" if carry else "fp8, both waited") if fp8 else "int8 (always waited)"
            print(f"| {label} | {warps} | {sorted(times)[2]:.1f} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compile", action="store_true", help="only compile for sm_90 and print the waits")
    args = parser.parse_args()
    if args.compile:
        compile_waits()
    else:
        torch.manual_seed(0)
        print(torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__)
        exactness("cuda")
        toy_times("cuda")
