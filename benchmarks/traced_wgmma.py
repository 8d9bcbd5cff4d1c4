"""The wgmma hot pass under torch.compile: ``fp4.score_paged`` at 64 x 32768, next_n=4, 64 heads,
eager (the wgmma pass by default) against compiled (Inductor's generated code; the default hot
pass), then compiled through the opt-in opaque op ``fp4::score_paged_eager_out`` (eager's plan, an extern
call), then compiled with the wgmma pass traced. Inductor's launches of a user kernel drop the
``maxnreg`` launch option, so the traced pass runs without its register cap: here on the capped
plan's programs per SM and on two. Each compiled form's logits against eager's, bit for bit; GPU
time of CUDA-graph replays. Inductor's caches are off, so that each form is traced again.

python benchmarks/traced_wgmma.py   (results: docs/benchmarks.md, stops 54, 55 and 56)
"""

import inspect

import torch
import torch._functorch.config as functorch_config
import torch._inductor.config as inductor_config

import fp4_inductor as fp4
from fp4_inductor.bench import build_scoring_case, device_us
from fp4_inductor.kernels import score


class _CapOnlyInThePlan(dict):
    """``WGMMA_REGISTERS`` for one traced launch: the launcher looks a cap up twice per launch,
    first for the plan's programs per SM, then for the ``maxnreg`` it passes; the second look-up
    answers 0 (no cap), as Inductor's generated code would launch it anyway."""

    def __init__(self, per_sm: int):
        super().__init__({128: 128, 256: 65536 // (128 * per_sm)})
        self.calls = 0

    def __getitem__(self, columns):
        self.calls += 1
        return super().__getitem__(columns) if self.calls % 2 else 0


def main():
    inductor_config.fx_graph_cache = False
    functorch_config.enable_autograd_cache = False
    case = build_scoring_case(64, 32768, 4, 64, "cuda")
    payload, scales = fp4.quantize_queries(case["q"])
    inputs = (payload, scales, case["cache"], case["weights"], case["block_table"], case["query_starts"],
              case["row_ends"])
    valid = fp4.reference.valid_region(case["query_starts"], case["row_ends"], case["block_table"].shape[1] * 64)

    def scores(payload, scales, cache, weights, block_table, query_starts, row_ends):
        return fp4.score_paged((payload, scales), cache, weights, block_table, query_starts, row_ends, 4)

    eager = scores(*inputs)
    rows = [("eager default (wgmma pass)", device_us(lambda: scores(*inputs)), "")]

    def compiled_row(name, step=scores):
        torch._dynamo.reset()
        compiled = torch.compile(step, fullgraph=True)
        got = compiled(*inputs)
        same = torch.equal(got[valid], eager[valid])
        worst = ((got - eager).abs()[valid].max() / eager.abs()[valid].max()).item()
        rows.append((name, device_us(lambda: compiled(*inputs)), "equal" if same else f"differ ({worst:.1e})"))

    compiled_row("compiled default (default hot pass)")
    width = case["block_table"].shape[1] * 64

    def opaque_scores(payload, scales, cache, weights, block_table, query_starts, row_ends):
        out = torch.empty((payload.shape[0], width), device=payload.device)
        torch.ops.fp4.score_paged_eager_out(out, payload, scales, cache, weights, block_table, query_starts,
                                            row_ends, 4)
        return out

    compiled_row("compiled, opaque `score_paged_eager_out` (eager's plan)", opaque_scores)
    cap, default = score.WGMMA_REGISTERS, score.wgmma_default

    def traced_default(word_fed, gpu, asm, heads, device, q_payload, kernel, max_query_len, out):
        """``wgmma_default`` without its "not while tracing" condition."""
        try:
            score.check_wgmma(word_fed, gpu, asm, heads, device, q_payload, kernel)
        except ValueError:
            return False
        return max_query_len >= score.WGMMA_MIN_ROWS

    assert inspect.signature(traced_default).parameters.keys() == inspect.signature(default).parameters.keys()
    score.wgmma_default = traced_default
    try:
        for per_sm in (65536 // (128 * cap[256]), 2):
            score.WGMMA_REGISTERS = looked_up = _CapOnlyInThePlan(per_sm)
            compiled_row(f"compiled, wgmma pass traced, no cap, {per_sm} programs per SM")
            # Each traced launch looked the cap up twice (plan, then cap): else the answers mixed.
            assert looked_up.calls and looked_up.calls % 2 == 0, looked_up.calls
    finally:
        score.WGMMA_REGISTERS, score.wgmma_default = cap, default
    print("| 64 x 32768, next_n=4 | us | bits against eager |\n| --- | --- | --- |")
    for name, us, bits in rows:
        print(f"| {name} | {us:.1f} | {bits} |")


if __name__ == "__main__":
    main()
