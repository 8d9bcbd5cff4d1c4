"""What Inductor's analysis of each Triton kernel (as the launchers make it for a GPU) says the
kernel writes. Inductor reads a user kernel's Triton IR to find the tensors it writes; where it
cannot (an inline asm not declared pure), it takes every tensor argument as written: a compiled
step then counts its cache, block table and weights as mutated inputs, which makes
``mode="reduce-overhead"`` skip its CUDA graph. The analysis needs a target, not a GPU: it runs
here in a fresh process (without the interpreter) against an sm_90 target."""

import json

_ANALYSE = """
import json
import torch, triton
from triton.backends.compiler import GPUTarget

class Target:  # no GPU here: the analysis only needs a target to make the kernel's Triton IR
    def get_current_target(self):
        return GPUTarget("cuda", 90, 32)
    def __getattr__(self, name):
        raise AttributeError(name)

triton.runtime.driver.set_active(Target())
from torch._higher_order_ops import triton_kernel_wrap as wrap
import fp4_inductor as fp4
from fp4_inductor.kernels import quantize, score, topk

for module in (quantize, score, topk):
    module.wrapped = capture

def writes(kernel, named):
    if hasattr(wrap, "identify_accessed_tensors"):
        return sorted(d.name for d in wrap.identify_accessed_tensors(kernel, named, {}).read_writes.writes)
    return sorted(wrap.identify_mutated_tensors(kernel, named, {}))

_, cache = fp4.allocate_merged_cache(8, page_bytes=8192, index_offset=1024)
fp4.kernels.quantize.launch_store_keys(torch.randn(6, 128, dtype=torch.bfloat16), cache, torch.arange(6))
fp4.kernels.quantize.launch_quantize_queries(torch.randn(4, 64, 128, dtype=torch.bfloat16))
block_table = torch.arange(8, dtype=torch.int32).view(2, 4)
for next_n in (1, 2):
    rows = 2 * next_n
    query_starts = torch.tensor([0, next_n, rows], dtype=torch.int32)
    row_ends = torch.full((rows,), 200, dtype=torch.int32)
    weights = torch.randn(rows, 64)
    payload = torch.zeros(rows, 64, 64, dtype=torch.uint8)
    scales = torch.zeros(rows, 1, 4, 16, 4, dtype=torch.uint8)
    out = torch.empty(rows, 256)
    for exact in ("fixup", "inline"):
        score.launch_score_paged(out, payload, scales, cache, weights, block_table, query_starts, row_ends, next_n,
                                 asm=True, exact=exact)
    score.launch_score_paged(out, torch.randn(rows, 64, 128), None, cache, weights, block_table, query_starts,
                             row_ends, next_n, asm=True)
# The wgmma hot pass (the launcher's ``wgmma`` tuning; its GPU and device checks stood down here,
# where the tensors are on the CPU): its asm is pure, so the analysis sees its writes.
score.check_wgmma = lambda *args: None
for next_n in (2, 4):
    rows = 2 * next_n
    query_starts = torch.tensor([0, next_n, rows], dtype=torch.int32)
    for warps in (4, 16):  # one warpgroup per program and four
        score.launch_score_paged(torch.empty(rows, 256), torch.zeros(rows, 64, 64, dtype=torch.uint8),
                                 torch.zeros(rows, 1, 4, 16, 4, dtype=torch.uint8), cache, torch.randn(rows, 64),
                                 block_table, query_starts, torch.full((rows,), 200, dtype=torch.int32), next_n,
                                 asm=True, wgmma=1, num_warps=warps)
for smem in (False, True):  # the GPU's form: the histograms in shared memory (pure asm)
    topk.launch_select_topk(torch.randn(4, 40000), torch.full((4,), 40000, dtype=torch.int32), 2048, False,
                            smem=smem, segment=32768, num_warps=16)
result = []
for kernel, named, _ in launches:
    form = {k: v for k, v in named.items() if k.isupper() and k != "DOT_DTYPE"}
    result.append([kernel.fn.__name__, form, writes(kernel, named)])
print(json.dumps(result, default=str))
"""

EXPECTED = {
    "store_keys_kernel": ["cache_ptr"],
    "quantize_queries_kernel": ["payload_ptr", "scales_ptr"],
    "score_paged_kernel": ["flags_ptr", "out_ptr"],
    "topk_segment_kernel": ["out_indices_ptr", "out_values_ptr"],
}


def test_inductor_sees_each_kernel_write_its_outputs_only():
    from helpers import CAPTURE_LAUNCHES, run_sm90_script

    launches = json.loads(run_sm90_script(CAPTURE_LAUNCHES + _ANALYSE).splitlines()[-1])
    names = {name for name, _, _ in launches}
    assert names == set(EXPECTED), names
    assert sum(name == "score_paged_kernel" for name, _, _ in launches) >= 8  # hot and exact passes, every mode
    assert {form["SMEM"] for name, form, _ in launches if name == "topk_segment_kernel"} == {False, True}
    assert {(form["WGMMA"], form["ROWS"], form["WARPS"]) for name, form, _ in launches
            if name == "score_paged_kernel"} >= {(1, 2, 4), (1, 2, 16), (1, 4, 4), (1, 4, 16)}
    # The scorer's hot pass (MODE 1) writes the flags too; the exact pass and the one-launch form
    # only the logits.
    expected = lambda name, form: ["out_ptr"] if name == "score_paged_kernel" and form["MODE"] != 1 else EXPECTED[name]  # noqa: E731
    wrong = [(name, form, written) for name, form, written in launches if written != expected(name, form)]
    assert not wrong, wrong
