"""Decode loop of a toy DSA model, its indexers swapped to FP4 and compiled.

A small multi-layer model whose layers each hold a lightning indexer (the BF16
reference) and a sparse attention that reads only the top-k cached tokens the
indexer picks. The example copies the model, swaps every indexer to FP4 with
``swap_indexers``, compiles the copy, and decodes N steps with speculative
verify rows of non-uniform length per request (padded to a fixed row count,
as a captured graph would be). It prints per-step latency, index-cache bytes
per token, and how much of the BF16 indexer's top-k the FP4 indexer keeps.

python examples/decode_loop.py [--steps 8] [--requests 4] [--context 1024] [--layers 2] [--no-compile]
                               [--mode reduce-overhead] [--device cuda]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time

import torch
from torch import nn

from fp4_inductor.modules import FP4Indexer, ReferenceIndexer, swap_indexers


class ToyDSALayer(nn.Module):
    def __init__(self, hidden, q_lora_rank, num_pages, heads, topk):
        super().__init__()
        self.q_down = nn.Linear(hidden, q_lora_rank, bias=False)
        self.indexer = ReferenceIndexer(hidden, q_lora_rank, num_pages, heads=heads, topk=topk, dtype=torch.float32)
        self.value_cache = nn.Buffer(torch.randn(num_pages * 64, hidden) * 0.1, persistent=False)
        self.out = nn.Linear(hidden, hidden, bias=False)

    def forward(self, x, slots, block_table, seq_lens, query_lens, max_query_len: int):
        chosen = self.indexer(x, self.q_down(x), slots, block_table, seq_lens, query_lens, max_query_len)
        # Sparse attention, reduced to its data flow: average the values of the chosen tokens.
        request = torch.searchsorted(torch.cumsum(query_lens, 0), torch.arange(x.shape[0], device=x.device), right=True)
        request = request.clamp(max=block_table.shape[0] - 1)
        pages = block_table[request].long()  # [rows, pages_per_request]
        token = chosen.clamp_min(0).long()
        slot = pages.gather(1, token // 64) * 64 + token % 64
        values = self.value_cache[slot] * (chosen >= 0).unsqueeze(-1)
        return x + self.out(values.mean(1)), chosen


class ToyDSAModel(nn.Module):
    def __init__(self, layers, hidden, q_lora_rank, num_pages, heads, topk):
        super().__init__()
        self.layers = nn.ModuleList(ToyDSALayer(hidden, q_lora_rank, num_pages, heads, topk) for _ in range(layers))

    def forward(self, x, slots, block_table, seq_lens, query_lens, max_query_len: int):
        chosen_per_layer = []
        for layer in self.layers:
            x, chosen = layer(x, slots, block_table, seq_lens, query_lens, max_query_len)
            chosen_per_layer.append(chosen)
        return x, chosen_per_layer


def prefill(model, block_table, lengths, hidden, gen):
    """Fill each layer's key cache with the keys of random history tokens, through each
    indexer's own projection (the BF16 cache or the FP4 section)."""
    for layer in model.layers:
        idx = layer.indexer
        device = idx.wk.weight.device
        slots = torch.cat([(block_table[i].long().unsqueeze(-1) * 64 + torch.arange(64)).flatten()[:n]
                           for i, n in enumerate(lengths)]).to(device)
        with torch.no_grad():
            keys = idx.k_norm(idx.wk(torch.randn(slots.shape[0], hidden, generator=gen).to(device)))
            if isinstance(idx, FP4Indexer):
                from fp4_inductor import store_keys

                store_keys(keys, idx.index_cache, slots)
            else:
                idx.key_cache.view(-1, 128)[slots] = keys


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def progress(step, steps, width=30):
    done = int(width * step / steps)
    sys.stderr.write(f"\r[{'#' * done}{'.' * (width - done)}] {step}/{steps}")
    sys.stderr.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--requests", type=int, default=4)
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--heads", type=int, default=64)
    parser.add_argument("--topk", type=int, default=128)
    parser.add_argument("--max-verify", type=int, default=4, help="verify rows per request are 1..this")
    parser.add_argument("--no-compile", action="store_true")
    parser.add_argument("--mode", choices=("default", "reduce-overhead"), default="default",
                        help="torch.compile mode; reduce-overhead replays each step from a captured CUDA graph")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--query-precision", choices=("fp4", "bf16"), default="fp4",
                        help="bf16: the higher-recall mode (FP4 keys, unquantized queries)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)

    pages_per_request = (args.context + args.steps * args.max_verify) // 64 + 1
    num_pages = args.requests * pages_per_request
    device = torch.device(args.device)
    reference = ToyDSAModel(args.layers, args.hidden, 64, num_pages, args.heads, args.topk).eval().to(device)
    fp4_model = copy.deepcopy(reference)
    swapped = swap_indexers(fp4_model, query_precision=args.query_precision)
    block_table = torch.randperm(num_pages, generator=gen).view(args.requests, pages_per_request).int()
    lengths = torch.randint(args.context // 2, args.context + 1, (args.requests,), generator=gen)
    prefill(reference, block_table, lengths.tolist(), args.hidden, torch.Generator().manual_seed(1))
    prefill(fp4_model, block_table, lengths.tolist(), args.hidden, torch.Generator().manual_seed(1))
    step_fn = fp4_model if args.no_compile else torch.compile(fp4_model, fullgraph=True, mode=args.mode)
    rows = args.requests * args.max_verify  # fixed: verify rows plus graph padding

    print(f"swapped {len(swapped)} indexers to FP4: {', '.join(name for name, _ in swapped)}")
    latencies, overlaps = [], []
    for step in range(args.steps):
        query_lens = torch.randint(1, args.max_verify + 1, (args.requests,), generator=gen)
        seq_lens = lengths + query_lens
        slots = torch.full((rows,), -1, dtype=torch.int64)
        r = 0
        for i in range(args.requests):
            for p in range(int(query_lens[i])):
                t = int(lengths[i]) + p
                slots[r] = int(block_table[i, t // 64]) * 64 + t % 64
                r += 1
        x = torch.randn(rows, args.hidden, generator=gen)
        inputs = (*(t.to(device) for t in (x, slots, block_table, seq_lens, query_lens)), args.max_verify)
        with torch.no_grad():
            synchronize(device)
            start = time.perf_counter()
            _, fp4_chosen = step_fn(*inputs)
            synchronize(device)
            latencies.append(time.perf_counter() - start)
            _, bf16_chosen = reference(*inputs)
        for got, want in zip(fp4_chosen, bf16_chosen):
            for row in range(r):
                a, b = set(got[row].tolist()) - {-1}, set(want[row].tolist()) - {-1}
                overlaps.append(len(a & b) / max(1, len(b)))
        lengths = seq_lens
        progress(step + 1, args.steps)
    sys.stderr.write("\n")
    steady = latencies[1:] or latencies
    print(f"device: {device}, steps: {args.steps}, requests: {args.requests}, verify rows per request 1..{args.max_verify} "
          f"({rows} rows with graph padding), contexts now {lengths.tolist()}")
    first = "first" if args.no_compile else "first (includes compile)"
    print(f"per-step latency: {first} {latencies[0] * 1e3:.1f} ms, "
          f"then median {statistics.median(steady) * 1e3:.1f} ms")
    print("index-cache bytes per token: FP4 68, FP8 132, BF16 256 "
          f"({args.layers} layers: {68 * args.layers} vs {132 * args.layers} vs {256 * args.layers})")
    print(f"top-{args.topk} overlap of the FP4 indexer with the BF16 one: mean {statistics.mean(overlaps):.3f}, "
          f"min {min(overlaps):.3f} over {len(overlaps)} rows x layers")
    if args.mode == "reduce-overhead" and not args.no_compile:
        from torch._dynamo.utils import counters

        # Inductor drops the CUDA graph (and says so only in its log) when, say, it takes an
        # input as mutated that is not the model's own buffer.
        print(f"CUDA graphs Inductor skipped: {counters['inductor']['cudagraph_skips']}")


if __name__ == "__main__":
    main()
