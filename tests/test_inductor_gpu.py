"""On a GPU: Inductor emits the FP4 Triton kernels into its own code, with no host sync, no call
back into the reference and no copy of the cache."""

import re

import pytest
import torch
from torch._inductor.utils import run_and_get_code
from torch.testing import FileCheck

from conftest import gpu
from test_compile import decode_step, run, step_inputs

pytestmark = [pytest.mark.gpu, gpu]


def test_inductor_emits_fp4_kernels_without_sync_or_cache_copy(gen):
    inputs = step_inputs(gen, query_lens=[2, 1, 3], seq_lens=[300, 65, 190])
    inputs = {k: (v.cuda() if isinstance(v, torch.Tensor) else v) for k, v in inputs.items()}
    import fp4_inductor as fp4

    inputs["cache"] = fp4.index_section(inputs["buffer"], 1024)
    eager_buffer = inputs["buffer"].clone()
    eager = run(decode_step, {**inputs, "cache": fp4.index_section(eager_buffer, 1024)})
    torch._dynamo.reset()
    compiled = torch.compile(decode_step, fullgraph=True)
    (values, indices), codes = run_and_get_code(lambda: run(compiled, inputs))
    code = "\n".join(codes)
    for kernel in ("store_keys_kernel", "quantize_queries_kernel", "score_paged_kernel", "topk_segment_kernel"):
        FileCheck().check(kernel).run(code)
    for absent in ("_local_scalar_dense", "fp4_inductor.reference", "aten.index_put", ".item()"):
        FileCheck().check_not(absent).run(code)
    # No clone of the cache: Inductor would allocate a buffer of the cache's (or its pages') shape.
    pages = inputs["cache"].shape[0]
    clone = re.compile(rf"empty_strided\w*\(\(({pages}, 64, 68|{pages}, {inputs['buffer'].shape[1]})\)")
    assert not clone.search(code), clone.search(code).group(0)
    assert torch.equal(inputs["buffer"], eager_buffer)
    assert torch.equal(torch.sort(indices, dim=1)[0], torch.sort(eager[1], dim=1)[0])
