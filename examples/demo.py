"""CPU demo: FP4 keys in a merged paged cache, scored for non-uniform verify rows, top-k selected.

python examples/demo.py [--requests 4] [--context 2048] [--heads 64] [--topk 256]
"""

import argparse
import time

import torch

import fp4_inductor as fp4


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=4)
    parser.add_argument("--context", type=int, default=2048)
    parser.add_argument("--heads", type=int, default=64)
    parser.add_argument("--topk", type=int, default=256)
    args = parser.parse_args()
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"

    # A merged MLA page of 64 tokens: here 8192 bytes, the FP4 index section at byte 1024.
    pages_per_request = (args.context + 63) // 64 + 1
    num_pages = args.requests * pages_per_request
    pages, cache = fp4.allocate_merged_cache(num_pages, page_bytes=8192, index_offset=1024, device=device)
    block_table = torch.randperm(num_pages, device=device).view(args.requests, -1).int()

    # History keys, LayerNorm'd like an indexer's (no RoPE).
    seq_lens = torch.randint(args.context // 2, args.context, (args.requests,), device=device)
    slots = (block_table.long().unsqueeze(-1) * 64 + torch.arange(64, device=device)).flatten(1)
    keys_bf16 = torch.nn.functional.layer_norm(torch.randn(num_pages * 64, 128, device=device), (128,)).bfloat16()
    token_slots = torch.cat([slots[i, : int(seq_lens[i])] for i in range(args.requests)])
    t0 = time.perf_counter()
    fp4.store_keys(keys_bf16[token_slots], cache, token_slots)  # the key of slot s is keys_bf16[s]
    store_s = time.perf_counter() - t0

    # Speculative verify rows of different lengths per request, plus two graph-padding rows.
    query_lens = torch.randint(1, 5, (args.requests,), device=device)
    rows = int(query_lens.sum()) + 2
    q = torch.randn(rows, args.heads, 128, device=device).bfloat16()
    weights = torch.randn(rows, args.heads, device=device) * args.heads**-0.5
    query_starts, row_ends = fp4.decode_layout(seq_lens, query_lens, rows)

    t0 = time.perf_counter()
    query = fp4.quantize_queries(q)
    logits = fp4.score_paged(query, cache, weights, block_table, query_starts, row_ends, int(query_lens.max()))
    values, indices = fp4.select_topk(logits, row_ends, args.topk)
    step_s = time.perf_counter() - t0
    # The same three ops in one call (it would also store this step's keys, given keys= and slots=).
    _, fused = fp4.decode_step(q, cache, weights, block_table, query_starts, row_ends, int(query_lens.max()),
                               args.topk)
    same = torch.equal(fused.sort(dim=1).values, indices.sort(dim=1).values)

    # The same top-k from BF16 keys and queries, gathered through the same block table.
    request = torch.searchsorted(query_starts[1:].long(), torch.arange(rows, device=device), right=True)
    request = request.clamp(max=args.requests - 1)
    overlaps = []
    for r in range(int(query_starts[-1])):
        n = int(row_ends[r])
        k_rows = keys_bf16.float()[slots[request[r], :n]]
        exact = (torch.einsum("hd,jd->hj", q[r].float(), k_rows).relu() * weights[r, :, None]).sum(0)
        want = set(torch.topk(exact, min(args.topk, n)).indices.tolist())
        got = set(i for i in indices[r].tolist() if i >= 0)
        overlaps.append(len(want & got) / max(1, len(want)))

    print(f"device {device}: {args.requests} requests, contexts {seq_lens.tolist()}, verify rows {query_lens.tolist()}")
    print(f"index cache: {cache.shape[0] * 64} slots in merged pages of {pages.shape[1]} B (section at byte 1024)")
    print(f"store_keys: {token_slots.shape[0]} keys in {store_s * 1e3:.1f} ms")
    print(f"quantize + score + top-{args.topk}: {step_s * 1e3:.1f} ms for {rows} rows (2 of them padding)")
    print(f"fp4.decode_step, the same step in one call: {'the same' if same else 'DIFFERENT'} top-k sets")
    print(f"bytes per cached token: FP4 68, FP8 132, BF16 256")
    print(f"top-{args.topk} overlap with the BF16 indexer: mean {sum(overlaps) / len(overlaps):.3f}, "
          f"min {min(overlaps):.3f} over {len(overlaps)} rows")


if __name__ == "__main__":
    main()
