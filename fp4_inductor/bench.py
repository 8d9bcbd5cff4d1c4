"""One benchmark harness: ``python -m fp4_inductor.bench``.

Per kernel: median GPU time (the call captured in a CUDA graph and replayed,
``triton.testing.do_bench_cudagraph``; eager calls are host-bound), an
explicit byte model and FLOP model, GB/s, TFLOP/s and % of the measured copy
ceiling. In the same run, the peers: AMD AITER's portable Triton FP8 paged
MQA-logits kernel (loaded by file path from an installed ``amd-aiter``, whose
package ``__init__`` needs ROCm; it cannot be captured in a CUDA graph, so its
GPU time is the sum of its kernels' durations from the CUDA profiler, with its
eager median beside it), plain PyTorch BF16 gather + einsum, and
``torch.topk``. Needs a GPU.

``--shapes BxCONTEXTxNEXT_N,...`` scores other shapes than the four targets.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import types

import torch

import fp4_inductor as fp4
from fp4_inductor import formats as F
from fp4_inductor.accuracy import scale_outlier_channels

KEY_BYTES = F.BYTES_PER_TOKEN


def median_us(fn, rep_ms: int = 200) -> float:
    import triton.testing

    return triton.testing.do_bench(fn, warmup=25, rep=rep_ms, return_mode="median") * 1e3


def device_us(fn, rep_ms: int = 100) -> float:
    """GPU time per call: ``fn`` captured in a CUDA graph and replayed (median). Eager calls of
    the ops cost about 250 us of host time on the H200, more than several of the kernels,
    so eager medians would time the host. Triton's timer runs ``fn`` on a stream of its own, which
    does not wait for the current one: the inputs' producers must be done first. (Without the
    synchronize, the first scorer call at 64 x 131072 keys faulted with an illegal address in two
    of four shape sweeps, right after building its inputs, and never with CUDA_LAUNCH_BLOCKING=1.)"""
    import triton.testing

    torch.cuda.synchronize()
    return triton.testing.do_bench_cudagraph(fn, rep=rep_ms, return_mode="median") * 1e3


def kernels_us(fn, calls: int = 20) -> float:
    """GPU time per call as the sum of the durations of the kernels (and any copies or memsets) it
    launches, read from the CUDA profiler: no host time and no gaps between them. For a call that
    cannot be captured in a CUDA graph (the AITER peer), whose eager median is its host time at
    small shapes."""
    from torch.autograd import DeviceType

    fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profile:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    kernels = [e for e in profile.events() if e.device_type == DeviceType.CUDA]
    if not kernels:
        raise RuntimeError("kernels_us: the profiler recorded no GPU kernel")
    return sum(e.device_time_total for e in kernels) / calls


def copy_ceiling_gbps(device) -> float:
    src = torch.empty(1 << 30, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    t = median_us(lambda: dst.copy_(src))
    return 2 * src.numel() / t / 1e3


class Table:
    def __init__(self, ceiling_gbps: float):
        self.ceiling = ceiling_gbps
        self.rows: list[tuple] = []

    def add(self, name: str, us: float, bytes_moved: float, flops: float = 0.0, note: str = "") -> None:
        gbps = bytes_moved / us / 1e3
        self.rows.append((name, us, gbps, flops / us / 1e6, 100 * gbps / self.ceiling, note))
        print(f"  {name}: {us:.1f} us  {gbps:.0f} GB/s  {flops / us / 1e6:.1f} TFLOP/s  {note}", flush=True)

    def print(self) -> None:
        print(f"\n| case | us | GB/s | TFLOP/s | % copy ceiling ({self.ceiling:.0f} GB/s) | note |")
        print("| --- | --- | --- | --- | --- | --- |")
        for name, us, gbps, tflops, pct, note in self.rows:
            print(f"| {name} | {us:.1f} | {gbps:.0f} | {tflops:.1f} | {pct:.0f}% | {note} |")


# --------------------------------------------------------------------------- inputs


def build_scoring_case(requests: int, context: int, next_n: int, heads: int, device, seed: int = 0,
                       outliers: float = 0.0, seq_lens: list[int] | None = None, outlier_channels: bool = False):
    """A paged FP4 cache holding ``requests x context`` keys in permuted pages inside merged
    pages (page stride 8192, index section at offset 1024), and next_n rows per request.

    ``outliers``: the fraction of keys with one 32-element group scaled by 2**6, whose group
    scales then span more than the folded path takes (the scorer's exact path).
    ``outlier_channels``: keys with four channels 16 times the rest before a LayerNorm (the
    accuracy tool's ``outliers`` data; about 12 % of such keys take the exact path).
    ``seq_lens``: a ragged batch, each request's keys (at most ``context``; ``requests`` of them)."""
    if seq_lens is not None and (len(seq_lens) != requests or max(seq_lens, default=0) > context):
        raise ValueError(f"seq_lens: expected {requests} lengths of at most {context}, got {seq_lens}")
    g = torch.Generator(device=device).manual_seed(seed)
    pages_per_request = context // F.PAGE_TOKENS
    num_pages = requests * pages_per_request
    _, cache = fp4.allocate_merged_cache(num_pages, page_bytes=8192, index_offset=1024, device=device)
    keys = torch.randn(num_pages * F.PAGE_TOKENS, F.HEAD_DIM, device=device, generator=g, dtype=torch.bfloat16)
    if outlier_channels:
        keys = torch.nn.functional.layer_norm(scale_outlier_channels(keys.float()), (F.HEAD_DIM,)).to(torch.bfloat16)
    if outliers:
        hit = torch.rand(keys.shape[0], device=device, generator=g) < outliers
        keys.view(-1, F.GROUPS, F.HEAD_DIM // F.GROUPS)[:, 0] *= torch.where(hit, 64.0, 1.0).to(keys.dtype)[:, None]
    fp4.store_keys(keys, cache, torch.arange(keys.shape[0], device=device))
    block_table = torch.randperm(num_pages, device=device, generator=g).view(requests, pages_per_request).int()
    rows = requests * next_n
    q = torch.randn(rows, heads, F.HEAD_DIM, device=device, generator=g, dtype=torch.bfloat16)
    weights = torch.randn(rows, heads, device=device, generator=g) * heads**-0.5
    if seq_lens is None:
        seq_lens = torch.full((requests,), context, device=device, dtype=torch.int32)
    else:
        seq_lens = torch.tensor(seq_lens, device=device, dtype=torch.int32)
    query_lens = torch.full((requests,), next_n, device=device, dtype=torch.int32)
    query_starts, row_ends = fp4.decode_layout(seq_lens, query_lens, rows)
    return dict(keys=keys, cache=cache, block_table=block_table, q=q, weights=weights,
                query_starts=query_starts, row_ends=row_ends, next_n=next_n, context=context)


def load_aiter_fp8_peer(root: str | None):
    """AITER's ``deepgemm_fp8_paged_mqa_logits`` loaded by file path, or None.

    ``root`` is the ``aiter`` package folder (default: the installed one, found
    without running its ``__init__``)."""
    if root is None:
        spec = importlib.util.find_spec("aiter")
        if spec is None or not spec.submodule_search_locations:
            return None
        root = list(spec.submodule_search_locations)[0]
    kernel_file = os.path.join(root, "ops", "triton", "_triton_kernels", "pa_mqa_logits.py")
    wrapper_file = os.path.join(root, "ops", "triton", "pa_mqa_logits.py")
    if not (os.path.exists(kernel_file) and os.path.exists(wrapper_file)):
        return None
    names = ["aiter", "aiter.ops", "aiter.ops.triton", "aiter.ops.triton._triton_kernels", "aiter.dtypes"]
    saved = {n: sys.modules.get(n) for n in names}
    try:
        for n in names:
            sys.modules[n] = types.ModuleType(n)
            sys.modules[n].__path__ = []
        sys.modules["aiter.dtypes"].fp8 = torch.float8_e4m3fn
        sys.modules["aiter"].dtypes = sys.modules["aiter.dtypes"]
        for name, path in (("aiter.ops.triton._triton_kernels.pa_mqa_logits", kernel_file),
                           ("fp4_inductor_bench_aiter_peer", wrapper_file)):
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        return module.deepgemm_fp8_paged_mqa_logits
    finally:
        for n, old in saved.items():
            if old is None:
                sys.modules.pop(n, None)
            else:
                sys.modules[n] = old


def fp8_peer_inputs(case, device):
    """The same keys as the peer's FP8 cache: token-granular [tokens, 1, 1, 128 + 4] (values, fp32 scale)."""
    keys = case["keys"].float()
    scale = keys.abs().amax(-1, keepdim=True).clamp_min(1e-12) / 448.0
    values = (keys / scale).to(torch.float8_e4m3fn)
    kv = torch.cat([values.view(torch.uint8), scale.view(torch.uint8)], dim=-1).view(-1, 1, 1, F.HEAD_DIM + 4)
    block_table = case["block_table"].long()
    tokens = (block_table.unsqueeze(-1) * F.PAGE_TOKENS + torch.arange(F.PAGE_TOKENS, device=device)).flatten(1)
    rows, heads = case["weights"].shape
    requests = block_table.shape[0]
    q = case["q"].view(requests, case["next_n"], heads, F.HEAD_DIM).to(torch.float8_e4m3fn)
    context_lens = torch.full((requests,), case["context"], device=device, dtype=torch.int32)
    out = torch.full((rows, case["context"]), -torch.inf, device=device)
    return q, kv, case["weights"], out, context_lens, tokens.int().contiguous()


# --------------------------------------------------------------------------- cases


def bench_scoring(table: Table, requests: int, context: int, next_n: int, heads: int, device, peer, torch_peer: bool):
    case = build_scoring_case(requests, context, next_n, heads, device)
    query = fp4.quantize_queries(case["q"])
    args = (query, case["cache"], case["weights"], case["block_table"], case["query_starts"], case["row_ends"], next_n)
    rows = requests * next_n
    keys = requests * context
    byte_model = keys * KEY_BYTES + rows * context * 4 + rows * heads * (64 + 4 + 4)
    flops = 2.0 * rows * heads * F.HEAD_DIM * context
    tag = f"B={requests} ctx={context} next_n={next_n}"
    call = lambda: fp4.score_paged(*args)  # noqa: E731
    us = device_us(call)
    table.add(f"score_paged fp4 {tag}", us, byte_model, flops,
              f"floor {byte_model / table.ceiling / 1e3:.1f} us; its kernels' time: {kernels_us(call):.1f} us")
    # The higher-recall mode: the same FP4 keys, bf16 queries (256 instead of 68 bytes per row and head).
    bf16_args = (case["q"], *args[1:])
    t = device_us(lambda: fp4.score_paged(*bf16_args))
    table.add(f"score_paged fp4 keys + bf16 queries {tag}", t, byte_model + rows * heads * (256 - 68), flops,
              f"{t / us:.2f}x the FP4-query time")
    if peer is not None:
        q8, kv, w, out, ctx, tokens = fp8_peer_inputs(case, device)
        peer_bytes = keys * (F.HEAD_DIM + 4) + rows * context * 4
        best = None
        # The configurations that won in earlier sweeps of SplitKV 5-40 x ChunkK 64-256.
        for split, chunk in ((40, 128), (20, 128), (40, 256)):
            call = lambda: peer(q8, kv, w, out, ctx, tokens, context, ChunkK=chunk, SplitKV=split)  # noqa: E731
            try:
                # The peer faults inside CUDA-graph capture at next_n=4 (illegal address): its GPU
                # time comes from the profiler, and its eager median (host included) beside it.
                t = kernels_us(call)
                eager = median_us(call)
            except Exception as exc:  # a config the peer's kernel rejects
                print(f"  peer SplitKV={split} ChunkK={chunk}: {type(exc).__name__}")
                continue
            if best is None or t < best[0]:
                best = (t, split, chunk, eager)
        if best is not None:
            table.add(f"AITER triton fp8 peer {tag}", best[0], peer_bytes, flops,
                      f"kernel time; best of SplitKV/ChunkK: {best[1]}/{best[2]}; fp4 speedup {best[0] / us:.2f}x; "
                      f"eager call, host included: {best[3]:.1f} us")
    if torch_peer:
        keys_bf16 = case["keys"]
        block_table = case["block_table"].long()

        def torch_scores():
            k = keys_bf16.view(-1, F.PAGE_TOKENS, F.HEAD_DIM)[block_table].flatten(1, 2)  # [B, ctx, 128]
            q = case["q"].view(requests, next_n, heads, F.HEAD_DIM)
            s = torch.einsum("bnhd,bkd->bnhk", q, k).relu_()
            return torch.einsum("bnhk,bnh->bnk", s.float(), case["weights"].view(requests, next_n, heads))

        t = device_us(torch_scores)
        table.add(f"torch bf16 gather+einsum {tag}", t, keys * 256 + rows * context * 4, flops)
    del case


def bench_topk(table: Table, rows: int, width: int, k: int, device):
    logits = torch.randn(rows, width, device=device)
    row_ends = torch.full((rows,), width, device=device, dtype=torch.int32)
    us = device_us(lambda: fp4.select_topk(logits, row_ends, k))
    host = median_us(lambda: fp4.select_topk(logits, row_ends, k))
    ref = device_us(lambda: torch.topk(logits, k, dim=1, sorted=False))
    bytes_moved = rows * width * 4 + rows * k * 8
    table.add(f"select_topk k={k} {rows}x{width}", us, bytes_moved, 0, f"torch.topk {ref:.1f} us: {ref / us:.2f}x; eager call, host included: {host:.1f} us")
    table.add(f"torch.topk k={k} {rows}x{width}", ref, bytes_moved)


def capture_graph(fn) -> torch.cuda.CUDAGraph:
    """``fn`` captured in a CUDA graph, after one warm call on a side stream (Triton compiles and
    the caching allocator settles outside the capture)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph


def step_calls(requests: int, context: int, next_n: int, heads: int, k: int, device) -> dict:
    """The decode step (``fp4.decode_step`` without keys to store) on one scoring case, and each of
    its ops alone on that case's inputs: callables named step, quantize, score and topk."""
    case = build_scoring_case(requests, context, next_n, heads, device)
    layout = (case["cache"], case["weights"], case["block_table"], case["query_starts"], case["row_ends"], next_n)
    query = fp4.quantize_queries(case["q"])
    logits = fp4.score_paged(query, *layout)
    return {"step": lambda: fp4.decode_step(case["q"], *layout, k),
            "quantize": lambda: fp4.quantize_queries(case["q"]),
            "score": lambda: fp4.score_paged(query, *layout),
            "topk": lambda: fp4.select_topk(logits, case["row_ends"], k)}


def bench_step(table: Table, requests: int, context: int, next_n: int, heads: int, k: int, device):
    """The decode step (quantize queries, score, top-k) captured in one CUDA graph, against the
    sum of its kernels timed one by one."""
    calls = step_calls(requests, context, next_n, heads, k, device)
    parts = [device_us(calls[name]) for name in ("quantize", "score", "topk")]
    us = median_us(capture_graph(calls["step"]).replay)
    rows = requests * next_n
    byte_model = requests * context * KEY_BYTES + 2 * rows * context * 4 + rows * heads * 256
    parts_note = " + ".join(f"{p:.1f}" for p in parts)
    table.add(f"captured step B={requests} ctx={context} next_n={next_n} k={k}", us, byte_model,
              2.0 * rows * heads * F.HEAD_DIM * context,
              f"kernels alone {parts_note} = {sum(parts):.1f} us; step / sum = {us / sum(parts):.2f}")


def store_case(n: int, device):
    """n bf16 keys appended to requests of 4096 tokens whose pages are permuted in the cache."""
    pages = n // F.PAGE_TOKENS
    _, cache = fp4.allocate_merged_cache(pages, page_bytes=8192, index_offset=1024, device=device)
    keys = torch.randn(n, F.HEAD_DIM, device=device, dtype=torch.bfloat16)
    page_of = torch.randperm(pages, device=device)
    token = torch.arange(n, device=device)
    slots = (page_of[token // F.PAGE_TOKENS] * F.PAGE_TOKENS + token % F.PAGE_TOKENS).int()
    return keys, cache, slots


def bench_store(table: Table, n: int, device):
    keys, cache, slots = store_case(n, device)
    us = device_us(lambda: fp4.store_keys(keys, cache, slots))
    table.add(f"store_keys {n} bf16 keys", us, n * (256 + KEY_BYTES + 4))


def bench_quantize_queries(table: Table, rows: int, heads: int, device):
    q = torch.randn(rows, heads, F.HEAD_DIM, device=device, dtype=torch.bfloat16)
    us = device_us(lambda: fp4.quantize_queries(q))
    table.add(f"quantize_queries {rows}x{heads} bf16", us, rows * heads * (256 + 64) + rows * 256)


TARGET_SHAPES = ((64, 32768, 1), (64, 32768, 2), (64, 32768, 4), (16, 131072, 2))


def parse_shapes(text: str) -> list[tuple[int, int, int]]:
    """Scoring shapes from ``BxCONTEXTxNEXT_N,...`` (``1x131072x1,8x32768x2``): requests, keys
    per request (a multiple of 64, the page), rows per request."""
    shapes = []
    for item in text.split(","):
        fields = item.strip().split("x")
        if len(fields) != 3 or not all(f.isdigit() and int(f) > 0 for f in fields):
            raise ValueError(f"--shapes: expected BxCONTEXTxNEXT_N with positive integers, got {item!r}")
        requests, context, next_n = (int(f) for f in fields)
        if context % F.PAGE_TOKENS:
            raise ValueError(f"--shapes: expected a context that is a multiple of {F.PAGE_TOKENS}, got {context} in {item!r}")
        shapes.append((requests, context, next_n))
    return shapes


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aiter-root", default=None, help="folder of the aiter package (default: the installed one)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--quick", action="store_true", help="the B=64 x 32768, next_n=2 row only")
    which.add_argument("--shapes", default=None,
                       help="scoring shapes BxCONTEXTxNEXT_N,... (default: the four target shapes)")
    parser.add_argument("--no-peers", action="store_true", help="skip the AITER and PyTorch peers")
    parser.add_argument("--no-torch-peer", action="store_true", help="skip the PyTorch BF16 peer (slow at large shapes)")
    parser.add_argument("--only", choices=("score", "topk", "store", "step"), default=None)
    args = parser.parse_args(argv)
    if args.shapes is not None:
        if args.only not in (None, "score"):
            parser.error(f"--shapes: scoring shapes, expected with --only score or without --only, got --only {args.only}")
        try:
            args.shapes = parse_shapes(args.shapes)
        except ValueError as exc:
            parser.error(str(exc))
    if not torch.cuda.is_available():
        raise SystemExit("fp4_inductor.bench needs a CUDA or ROCm GPU")
    import triton

    device = torch.device("cuda")
    print(f"{torch.cuda.get_device_name()} | torch {torch.__version__} | triton {triton.__version__}")
    table = Table(copy_ceiling_gbps(device))
    print(f"copy ceiling: {table.ceiling:.0f} GB/s (read + write)")
    peer = None if args.no_peers else load_aiter_fp8_peer(args.aiter_root)
    print("AITER FP8 peer:", "loaded" if peer is not None else "not used (pip install amd-aiter, or --aiter-root)")
    shapes = args.shapes or ([(64, 32768, 2)] if args.quick else TARGET_SHAPES)
    if args.only in (None, "score"):
        for requests, context, next_n in shapes:
            bench_scoring(table, requests, context, next_n, 64, device, peer, not (args.no_peers or args.no_torch_peer))
    if args.only in (None, "topk"):
        bench_topk(table, 64, 32768, 2048, device)
        bench_topk(table, 32, 131072, 2048, device)
    if args.only in (None, "store"):
        bench_store(table, 1 << 20, device)
        bench_quantize_queries(table, 128, 64, device)
    if args.only in (None, "step"):
        bench_step(table, 64, 32768, 2, 64, 2048, device)
    table.print()
    print_kernel_stats()


def print_kernel_stats() -> None:
    """Registers and spills of every compiled kernel (a spill is the first thing to look for)."""
    import triton

    from fp4_inductor.kernels import quantize, score, topk

    kernels = {id(k): k for module in (score, topk, quantize) for k in vars(module).values()
               if isinstance(k, triton.runtime.JITFunction) and k.fn.__name__.endswith("_kernel")}.values()
    for kernel in kernels:
        for per_device in getattr(kernel, "device_caches", {}).values():
            for compiled in per_device[0].values():
                print(f"{kernel.fn.__name__}: {compiled.n_regs} registers, {compiled.n_spills} spills, "
                      f"{compiled.metadata.shared} B shared, {compiled.metadata.num_warps} warps")


if __name__ == "__main__":
    main()
