"""Why the scorer's dots stay int8 with int32 accumulators, and synchronous (docs/benchmarks.md,
stop 49).

Triton's Hopper pipeliner (Triton 3.6 to 3.9) leaves a wgmma in flight after its issue only when
its accumulator is float32. An int8 dot, whose accumulator is int32, always gets a wait right
after it. An fp8 dot with a float32 accumulator can stay in flight across the loop's back edge,
where its result is read in the next iteration after another dot's wait, unless
``max_num_imprecise_acc`` asks for its sums to be moved to float32 registers after each K=32
step. The scorer's operand values are exact in e4m3 and e5m2 too, so the question is whether
the fp8 dot gives the int8 dot's sums:

    python benchmarks/wgmma_accumulators.py --compile   # any machine: where Triton waits (sm_90)
    python benchmarks/wgmma_accumulators.py             # a Hopper GPU: the sums, exact or not

The GPU check feeds each dot the scorer's operand values (E2M1 magnitudes 0..6 doubled to
integers and shifted left by a fold of 0..3 per 32-element group, random signs; |sum| < 2**21,
so every sum is exact in float32) and compares with float64 matmul: the entries that differ, the
largest error, and the largest error over the largest |sum| of the batch (the scale of the
scores' 1e-5 contract, which takes errors relative to the sum of the terms' magnitudes, not to
one entry's value). "wide" puts one group at fold 3 with large magnitudes and the rest at fold 0
with small odd ones.
"""

import argparse
import os
import re
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from fp4_inductor.kernels.sm90 import dump_cubin, sass_instructions  # noqa: E402

MAGNITUDES = torch.tensor([0, 1, 2, 3, 4, 6, 8, 12], dtype=torch.float64)


@triton.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, N: tl.constexpr, IMPRECISE: tl.constexpr):
    """c[i] = a[i] @ b[i] for a [64, 128] and b [128, N] of one dtype, in float32; IMPRECISE is
    tl.dot's max_num_imprecise_acc (0: Triton's default)."""
    m = tl.arange(0, 64)
    k = tl.arange(0, 128)
    n = tl.arange(0, N)
    i = tl.program_id(0)
    a = tl.load(a_ptr + i * 64 * 128 + m[:, None] * 128 + k[None, :])
    b = tl.load(b_ptr + i * 128 * N + k[:, None] * N + n[None, :])
    if IMPRECISE:
        c = tl.dot(a, b, max_num_imprecise_acc=IMPRECISE)
    else:
        c = tl.dot(a, b)
    tl.store(c_ptr + i * 64 * N + m[:, None] * N + n[None, :], c.to(tl.float32))


@triton.jit
def toy_loop(k_ptr, q_ptr, out_ptr, n_pairs, FP8: tl.constexpr, CARRY: tl.constexpr, IMPRECISE: tl.constexpr):
    """Per iteration: two [64, 128] operands built in registers from key bytes, each dotted with
    a loop-invariant [128, 64] query operand, relu and a row sum. CARRY reads the second dot's
    result in the next iteration, after the first dot's wait."""
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
        if IMPRECISE:
            acc_x = tl.dot(a_x, q, max_num_imprecise_acc=IMPRECISE)
        else:
            acc_x = tl.dot(a_x, q)
        total += tl.sum(tl.maximum(acc_x.to(tl.float32), 0.0), 1)
        if CARRY:
            total += tl.sum(tl.maximum(acc_y.to(tl.float32), 0.0), 1)
        if IMPRECISE:
            acc_y = tl.dot(a_y, q, max_num_imprecise_acc=IMPRECISE)
        else:
            acc_y = tl.dot(a_y, q)
        if not CARRY:
            total += tl.sum(tl.maximum(acc_y.to(tl.float32), 0.0), 1)
    if CARRY:
        total += tl.sum(tl.maximum(acc_y.to(tl.float32), 0.0), 1)
    tl.store(out_ptr + tl.program_id(0) * 64 + m, total)


def loop_body(sass: str) -> list[str]:
    """The SASS instructions of the kernel's one loop: from the target of its backward branch to
    the branch."""
    lines = sass_instructions(sass)
    back = [(at, text) for at, text in lines
            if re.search(r"\bBRA\b.*0x([0-9a-f]+)", text) and int(re.search(r"0x([0-9a-f]+)", text).group(1), 16) < at]
    if len(back) != 1:
        raise RuntimeError(f"expected one backward branch in the toy loop's SASS, found {len(back)}")
    end, branch = back[0]
    start = int(re.search(r"0x([0-9a-f]+)", branch).group(1), 16)
    return [text for at, text in lines if start <= at <= end]


def compile_waits() -> None:
    """Compile toy_loop for sm_90 (no GPU needed) and print the waits in its loop, as Triton's IR
    has them and as the SASS has them."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    signature = {"k_ptr": "*u8", "q_ptr": "*u8", "out_ptr": "*fp32", "n_pairs": "i32", "FP8": "constexpr",
                 "CARRY": "constexpr", "IMPRECISE": "constexpr"}
    print(f"triton {triton.__version__}, sm_90")
    print("| operands | max_num_imprecise_acc | second dot's result read | IR waits in the loop (pendings) | "
          "SASS: wgmma groups / waits in the loop | a wgmma in flight at the back edge |")
    print("| --- | --- | --- | --- | --- | --- |")
    cases = [(False, False, 0), (False, True, 0), (True, False, 0), (True, True, 0), (True, True, 32)]
    for fp8, carry, imprecise in cases:
        compiled = triton.compile(
            ASTSource(fn=toy_loop, signature=signature, constexprs={"FP8": fp8, "CARRY": carry, "IMPRECISE": imprecise}),
            target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
        loop = compiled.asm["ttgir"].split("scf.for", 1)[1].split("scf.yield", 1)[0]
        waits = re.findall(r"warp_group_dot_wait .*?pendings = (\d+)", loop)
        body = loop_body(dump_cubin(compiled.asm["cubin"]))
        # A wgmma group ends with the GMMA that sets gsb0; it is done only at a DEPBAR after it.
        groups = sum("GMMA" in text and "gsb0" in text for text in body)
        depbars = sum("WARPGROUP.DEPBAR" in text for text in body)
        last_group = max(i for i, text in enumerate(body) if "GMMA" in text and "gsb0" in text)
        in_flight = not any("WARPGROUP.DEPBAR" in text for text in body[last_group:])
        print(f"| {'fp8 e4m3, fp32 acc' if fp8 else 'int8, int32 acc'} | {imprecise or 'default'} | "
              f"{'next iteration' if carry else 'at once'} | {', '.join(waits) or 'none'} | {groups} / {depbars} | "
              f"{'yes' if in_flight else 'no'} |")


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
    dots = [("int8 -> int32", torch.int8, 0), ("fp8 e4m3 -> fp32", torch.float8_e4m3fn, 0),
            ("fp8 e5m2 -> fp32", torch.float8_e5m2, 0), ("fp8 e4m3 -> fp32, imprecise acc 32", torch.float8_e4m3fn, 32)]
    print("| operands | N | dot | inexact sums | of | largest error | largest error / largest abs(sum) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for kind in ("random", "wide"):
        for n in (64, 128):
            batch = 256
            a = operands(batch, 64, kind)
            b = operands(batch, n, kind).transpose(1, 2).contiguous()
            reference = torch.matmul(a, b)
            for name, dtype, imprecise in dots:
                a_dev, b_dev = a.to(dtype).to(device), b.to(dtype).to(device)
                if not (torch.equal(a_dev.cpu().double(), a) and torch.equal(b_dev.cpu().double(), b)):
                    raise AssertionError(f"{name}: the operands are not exact in {dtype}")
                c = torch.empty(batch, 64, n, device=device)
                dot_kernel[(batch,)](a_dev, b_dev, c, N=n, IMPRECISE=imprecise)
                error = (c.cpu().double() - reference).abs()
                print(f"| {kind} | {n} | {name} | {int((error != 0).sum())} | {reference.numel()} | "
                      f"{error.max().item():.0f} | {error.max().item() / reference.abs().max().item():.2e} |")


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
