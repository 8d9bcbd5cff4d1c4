"""On a GPU: Inductor emits the FP4 Triton kernels into its own code, with no host sync, no call
back into the reference and no copy of the cache."""

import copy
import re

import pytest
import torch
from torch._inductor.utils import run_and_get_code
from torch.testing import FileCheck

from conftest import gpu
from test_compile import decode_step, run, step_inputs

pytestmark = [pytest.mark.gpu, gpu]


@pytest.mark.parametrize("heads", [16, 64])
def test_inductor_emits_fp4_kernels_without_sync_or_cache_copy(gen, heads):
    """16 heads: the scorer's 16-warp hot loop; 64 heads (two-row blocks of 128 columns): the
    8-warp loop with tiles in pairs."""
    inputs = step_inputs(gen, query_lens=[2, 1, 3], seq_lens=[300, 65, 190], heads=heads)
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


@pytest.mark.parametrize("compiled", [False, True], ids=["eager-ops", "torch-compile"])
def test_cuda_graph_decode_loop_equals_eager(gen, compiled):
    """Capture the decode step (eager ops, or torch.compile'd) once at short lengths, replay
    while contexts grow past every length seen at capture, verify lengths change and padding
    rows come and go; every replay equals the eager step."""
    import fp4_inductor as fp4

    torch._dynamo.reset()
    captured_step = torch.compile(decode_step, fullgraph=True) if compiled else decode_step

    requests, pages_per_request, rows = 3, 8, 9
    inputs = step_inputs(gen, query_lens=[1, 1, 1], seq_lens=[70, 65, 100], pages_per_request=pages_per_request)
    static = {k: (v.cuda() if isinstance(v, torch.Tensor) else v) for k, v in inputs.items()}
    static["cache"] = fp4.index_section(static["buffer"], 1024)
    for name, size in (("new_keys", (rows, 128)), ("q", (rows, 16, 128)), ("weights", (rows, 16)), ("slots", (rows,))):
        static[name] = torch.zeros(size, dtype=static[name].dtype, device="cuda")
    static["max_query_len"] = 4

    def step():
        return run(captured_step, static)

    def load(seq_lens, query_lens):
        g = torch.Generator().manual_seed(sum(seq_lens))
        static["seq_lens"].copy_(torch.tensor(seq_lens))
        static["query_lens"].copy_(torch.tensor(query_lens))
        all_slots = (static["block_table"].long().cpu().unsqueeze(-1) * 64 + torch.arange(64)).flatten(1)
        slots = torch.cat([all_slots[i, seq_lens[i] - query_lens[i] : seq_lens[i]] for i in range(requests)])
        slots = torch.cat([slots, torch.full((rows - slots.shape[0],), -1)])
        static["slots"].copy_(slots)
        static["new_keys"].copy_(torch.randn(rows, 128, generator=g))
        static["q"].copy_(torch.randn(rows, 16, 128, generator=g))
        static["weights"].copy_(torch.randn(rows, 16, generator=g))

    load([70, 65, 100], [1, 1, 1])
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    torch.cuda.set_sync_debug_mode("error")
    try:
        with torch.cuda.graph(graph):
            values, indices = step()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    schedule = [([90, 80, 130], [2, 1, 3]), ([200, 81, 131], [1, 4, 1]), ([450, 300, 500], [3, 3, 2]), ([510, 511, 512], [1, 1, 1])]
    for seq_lens, query_lens in schedule:
        load(seq_lens, query_lens)
        before = static["buffer"].clone()
        graph.replay()
        replayed = (values.clone(), indices.clone(), static["buffer"].clone())
        static["buffer"].copy_(before)
        want_values, want_indices = run(decode_step, static)
        assert torch.equal(static["buffer"], replayed[2])
        order = torch.argsort(replayed[1], dim=1)
        want_order = torch.argsort(want_indices, dim=1)
        assert torch.equal(replayed[1].gather(1, order), want_indices.gather(1, want_order))
        assert torch.equal(replayed[0].gather(1, order), want_values.gather(1, want_order))


def test_backend_emits_fp4_kernels_into_inductor_code():
    """backend="fp4_inductor" on a model with the reference indexer: Inductor's generated code
    launches the FP4 kernels, reads nothing on the host and never copies the FP4 shadow cache."""
    from test_backend import PAGES, SCHEDULE, models, step

    reference, _ = models("cuda")
    torch._dynamo.reset()
    compiled = torch.compile(reference, backend="fp4_inductor", fullgraph=True)
    inputs = step(torch.Generator().manual_seed(3), "cuda", *SCHEDULE[0])
    with torch.no_grad():
        _, codes = run_and_get_code(lambda: compiled(*inputs))
    code = "\n".join(codes)
    for kernel in ("store_keys_kernel", "quantize_queries_kernel", "score_paged_kernel", "topk_segment_kernel"):
        FileCheck().check(kernel).run(code)
    for absent in ("_local_scalar_dense", "fp4_inductor.reference", ".item()", "einsum"):
        FileCheck().check_not(absent).run(code)
    clone = re.compile(rf"empty_strided\w*\(\({PAGES}, 64, 68\)")
    assert not clone.search(code), clone.search(code).group(0)


def test_reduce_overhead_decode_loop_equals_eager():
    """torch.compile(mode="reduce-overhead") captures the step in a CUDA graph; replays with
    growing contexts (past every length seen at capture), changing verify rows and padding
    equal the eager FP4 model bit for bit."""
    from test_backend import SCHEDULE, models, step

    reference, fp4_model = models("cuda")
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(reference, backend="fp4_inductor", mode="reduce-overhead", fullgraph=True)
    gen = torch.Generator().manual_seed(17)
    schedule = SCHEDULE + [([140, 250, 200], [1, 4, 2]), ([250, 255, 256], [3, 1, 1])]
    with torch.no_grad():
        for seq_lens, query_lens in schedule * 2:
            inputs = step(gen, "cuda", seq_lens, query_lens)
            got = [t.clone() for t in compiled(*inputs)]
            want = fp4_model(*inputs)
            for g, w in zip(got, want):
                assert torch.equal(g.sort(dim=1)[0], w.sort(dim=1)[0])
    # The steps ran from captured graphs: Inductor skips the graph (and says so only in a log)
    # when it takes an input as mutated, e.g. where it cannot analyse a kernel's writes.
    assert counters["inductor"]["cudagraph_skips"] == 0, dict(counters["inductor"])


@pytest.mark.parametrize("dynamic", [False, True])
def test_bf16_query_mode_compiles(dynamic):
    """The higher-recall mode (FP4 keys, bf16 queries) compiled: its scorer is the byte-fed PTX
    builder's form, whose operand layout needs 16-byte alignment that Inductor's code must
    carry; each step equals the eager module's."""
    from test_backend import SCHEDULE, models, step

    _, fp4_model = models("cuda", query_precision="bf16")
    eager = copy.deepcopy(fp4_model)
    torch._dynamo.reset()
    compiled = torch.compile(fp4_model, fullgraph=True, dynamic=dynamic)
    gen = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for seq_lens, query_lens in SCHEDULE:
            inputs = step(gen, "cuda", seq_lens, query_lens)
            for g, w in zip(compiled(*inputs), eager(*inputs)):
                assert torch.equal(g.sort(dim=1)[0], w.sort(dim=1)[0])
