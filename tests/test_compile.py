"""The CPU decode step under torch.compile(fullgraph=True) equals eager, and no op on it reads
device data on the host."""

import re

import pytest
import torch
from torch._inductor.utils import run_and_get_code

import fp4_inductor as fp4
from fp4_inductor.testing import HostSyncError, forbid_host_sync

from conftest import GPU_MARKS
from helpers import case_on, clone_case, merged_cache, random_keys


def decode_step(cache, new_keys, slots, q, weights, block_table, seq_lens, query_lens, k: int, max_query_len: int):
    """Store this step's keys, lay out the rows, score, select."""
    fp4.store_keys(new_keys, cache, slots)
    query_starts, row_ends = fp4.decode_layout(seq_lens, query_lens, q.shape[0])
    query = fp4.quantize_queries(q)
    logits = fp4.score_paged(query, cache, weights, block_table, query_starts, row_ends, max_query_len)
    return fp4.select_topk(logits, row_ends, k)


def step_inputs(gen, query_lens, seq_lens, heads=16, pages_per_request=6):
    requests = len(query_lens)
    buffer, cache = merged_cache(requests * pages_per_request + 2, "cpu", gen=gen)
    block_table = torch.randperm(requests * pages_per_request + 2, generator=gen)[: requests * pages_per_request]
    block_table = block_table.view(requests, pages_per_request).int()
    # Fill the history, then this step's keys go to the last query_lens positions of each request.
    all_slots = (block_table.long().unsqueeze(-1) * 64 + torch.arange(64)).flatten(1)
    history = torch.cat([all_slots[i, : seq_lens[i]] for i in range(requests)])
    fp4.store_keys(random_keys(history.shape[0], gen), cache, history)
    new_slots = torch.cat([all_slots[i, seq_lens[i] - query_lens[i] : seq_lens[i]] for i in range(requests)])
    new_slots = torch.cat([new_slots, torch.tensor([-1, -1])])  # graph-padding rows store nothing
    rows = new_slots.shape[0]
    return dict(
        buffer=buffer, cache=cache, new_keys=random_keys(rows, gen, torch.bfloat16), slots=new_slots,
        q=torch.randn(rows, heads, 128, generator=gen).bfloat16(), weights=torch.randn(rows, heads, generator=gen),
        block_table=block_table, seq_lens=torch.tensor(seq_lens, dtype=torch.int32),
        query_lens=torch.tensor(query_lens, dtype=torch.int32),
        max_query_len=max(query_lens),  # a scheduler-side Python int, never read from the device
    )


def run(step, inputs, k=32):
    keys = ("cache", "new_keys", "slots", "q", "weights", "block_table", "seq_lens", "query_lens")
    return step(*[inputs[n] for n in keys], k=k, max_query_len=inputs["max_query_len"])


def compiled_against_eager(gen, step, query_lens, seq_lens):
    """``step`` compiled with fullgraph=True against the ops one by one in eager, each on its own
    copy of the cache: the bytes stored equal, the top-k sets equal. Returns the generated code."""
    inputs = step_inputs(gen, query_lens=query_lens, seq_lens=seq_lens)
    eager_inputs = clone_case(inputs)
    want_values, want_indices = run(decode_step, eager_inputs)
    torch._dynamo.reset()
    compiled = torch.compile(step, fullgraph=True)
    (values, indices), codes = run_and_get_code(lambda: run(compiled, inputs))
    assert torch.equal(inputs["buffer"], eager_inputs["buffer"]), "the compiled step stored different bytes"
    assert torch.equal(torch.sort(indices, dim=1)[0], torch.sort(want_indices, dim=1)[0])
    assert torch.equal(torch.sort(values, dim=1)[0], torch.sort(want_values, dim=1)[0])
    return inputs, codes


def test_compiled_decode_step_equals_eager(gen):
    inputs, codes = compiled_against_eager(gen, decode_step, query_lens=[2, 1, 3], seq_lens=[300, 65, 190])
    # The index cache (gigabytes in production) is written in place, never cloned: Inductor
    # would allocate a buffer of its shape (or of the merged pages') to clone it.
    pages, page_bytes = inputs["buffer"].shape
    clone = re.compile(rf"empty_strided\w*\(\(({pages}, 64, 68|{pages}, {page_bytes}|{pages * page_bytes},\s*)\)")
    assert not clone.search("\n".join(codes))


def fused_step(cache, new_keys, slots, q, weights, block_table, seq_lens, query_lens, k: int, max_query_len: int):
    """The same step through fp4.decode_step."""
    query_starts, row_ends = fp4.decode_layout(seq_lens, query_lens, q.shape[0])
    return fp4.decode_step(q, cache, weights, block_table, query_starts, row_ends, max_query_len, k,
                           keys=new_keys, slots=slots)


def test_compiled_fused_step_equals_the_ops_in_eager(gen):
    compiled_against_eager(gen, fused_step, query_lens=[1, 3, 2], seq_lens=[129, 300, 64])


def test_decode_step_has_no_host_sync(gen):
    inputs = step_inputs(gen, query_lens=[1, 4], seq_lens=[100, 257])
    with forbid_host_sync():
        values, indices = run(decode_step, inputs)
    assert indices.shape == (7, 32)


def test_forbid_host_sync_catches_item(gen):
    inputs = step_inputs(gen, query_lens=[1], seq_lens=[10])

    def step_with_item(*args, **kwargs):
        values, indices = decode_step(*args, **kwargs)
        return values, indices, int(indices.max().item())

    with pytest.raises(HostSyncError, match="_local_scalar_dense"):
        with forbid_host_sync():
            run(step_with_item, inputs)


def test_forbid_host_sync_catches_mask_indexing_and_bincount():
    """A boolean-mask index runs its nonzero inside the index op, below the mode: the index ops
    are flagged for a mask (bool or uint8; a read, a write of several values or with accumulate),
    and bincount for its data-dependent size. A write of one host value through a mask runs as
    masked_fill_ (no nonzero, no device read) and passes, as do an integer index and torch.where."""
    x, mask = torch.arange(6.0), torch.tensor([True, False] * 3)
    flagged = (
        lambda: x[mask],
        lambda: x[mask.to(torch.uint8)],
        lambda: x.clone().index_put_((mask,), torch.tensor([1.0, 2.0, 3.0])),
        lambda: x.clone().index_put_((mask,), torch.tensor(1.0), accumulate=True),
        lambda: torch.bincount(torch.tensor([1, 3])),
    )
    for op in flagged:
        with pytest.raises(HostSyncError, match="boolean mask|bincount"):
            with forbid_host_sync():
                op()
    with forbid_host_sync():
        x[torch.tensor([0, 2])], torch.where(mask, x, 0.0), x.clone().index_put_((torch.tensor([1]),), x[:1])
        x.clone().__setitem__(mask, 0.0), x.clone().index_put_((mask,), torch.tensor(1.0))


def test_forbid_host_sync_catches_reads_without_an_op():
    """``.tolist()``, ``.numpy()`` and printing run no op on CPU tensors (and printing runs with the
    dispatch modes off on any device): a torch-function mode flags them, so CPU runs catch them."""
    x = torch.arange(4.0)
    for read in (lambda: x.tolist(), lambda: x.numpy(), lambda: str(x), lambda: f"{x}"):
        with pytest.raises(HostSyncError, match="reads device data on the host"):
            with forbid_host_sync():
                read()
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0]  # the mode is gone after the block


def test_forbid_host_sync_follows_what_syncs_on_the_gpu():
    """A masked write runs as masked_fill_ (no nonzero) only for one mask and a host value; two
    masks, a mask with an index, or a value computed on the device sync. Some ops sync inside
    their CUDA kernel for some arguments (repeat_interleave without output_size, histc over the
    data's range, multinomial's check, linalg's error check); others never do (_assert_async,
    repeat_interleave with output_size, one_hot with num_classes)."""
    x, mask = torch.arange(6.0), torch.tensor([True, False] * 3)
    grid, m0, m1 = torch.zeros(2, 3), torch.tensor([True, False]), torch.tensor([True, False, True])
    probabilities, reps = torch.tensor([0.2, 0.8]), torch.tensor([1, 2])
    flagged = (
        lambda: grid.__setitem__((m0, m1), 0.0),
        lambda: grid.__setitem__((m0, torch.tensor([1, 2])), 0.0),
        lambda: x.clone().__setitem__(mask, x.max()),
        lambda: x.clone().masked_fill_(mask, x.max()),
        lambda: torch.repeat_interleave(reps),
        lambda: torch.histc(x, bins=4),
        lambda: torch.multinomial(probabilities, 1),
        lambda: torch.linalg.inv(torch.eye(2)),
    )
    for op in flagged:
        with pytest.raises(HostSyncError):
            with forbid_host_sync():
                op()
    with forbid_host_sync():
        torch._assert_async(torch.tensor(True))
        torch.repeat_interleave(reps, output_size=3), torch.histc(x, bins=4, min=0, max=6)
        torch.nn.functional.one_hot(torch.tensor([0, 2]), 3)
        x.clone().masked_fill_(mask, 0.0), x.clone().__setitem__(mask, torch.tensor(1.0))


def test_forbid_host_sync_catches_copies_to_the_host():
    """``.cpu()``, ``.to("cpu")`` and a copy into a CPU tensor of a tensor that is not on the CPU
    (here "meta", standing in for a GPU) raise; copies that stay on the CPU, or leave it, do not."""
    device_tensor = torch.empty(3, device="meta")
    for copy in (lambda: device_tensor.cpu(), lambda: device_tensor.to("cpu"),
                 lambda: torch.zeros(3).copy_(device_tensor)):
        with pytest.raises(HostSyncError, match="copies device data to the host"):
            with forbid_host_sync():
                copy()
    with forbid_host_sync():
        torch.ones(3).cpu(), torch.ones(3).to("meta"), torch.zeros(3).copy_(torch.ones(3))
        torch.empty(3, device="meta").copy_(torch.ones(3))


@pytest.mark.parametrize("backend, device", [("reference", "cpu"), pytest.param("triton", "cuda", marks=GPU_MARKS)])
def test_store_keys_compiles_with_unbacked_rows(backend, device, gen):
    """Keys and slots whose row counts are unbacked (``mark_unbacked``; a count that comes from
    data): the trace neither guards on n == 0 nor on the two counts being equal. Stored bytes
    equal the eager op's at 5, 0 and 3 rows. Counts that differ fail at run time in torch's own
    assert (a RuntimeError naming the two sizes' symbols), with nothing written."""
    from torch._dynamo.decorators import mark_unbacked

    def store(keys, cache, slots):
        fp4.store_keys(keys, cache, slots, backend=backend)

    torch._dynamo.reset()
    compiled = torch.compile(store, fullgraph=True)
    for n in (5, 0, 3):
        buffer, cache = merged_cache(2, device, gen=gen)
        want = buffer.clone()
        keys = random_keys(n, gen, torch.bfloat16).to(device)
        slots = torch.randperm(128, generator=gen)[:n].to(device)
        slots[::2] = -1  # padding rows among them
        fp4.store_keys(keys, fp4.index_section(want, 1024), slots, backend=backend)
        mark_unbacked(keys, 0)
        mark_unbacked(slots, 0)
        compiled(keys, cache, slots)
        assert torch.equal(buffer, want), n
    before = buffer.clone()
    keys, slots = random_keys(4, gen, torch.bfloat16).to(device), torch.arange(3, device=device)
    mark_unbacked(keys, 0)
    mark_unbacked(slots, 0)
    with pytest.raises(RuntimeError):  # torch's run-time assert on the two sizes, before the store
        compiled(keys, cache, slots)
    assert torch.equal(buffer, before)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=GPU_MARKS)])
def test_decode_step_compiles_with_unbacked_rows(device, gen):
    """The decode step with its row count unbacked in every per-row input (new keys, slots,
    queries, weights): one graph serves 8 rows (two padding), then 0 rows (padding only), with
    the same bytes stored and the same top-k sets as the eager ops (the reference backend on the
    CPU, the Triton kernels on the GPU)."""
    from torch._dynamo.decorators import mark_unbacked

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    compiled = torch.compile(decode_step, fullgraph=True)
    for query_lens in ([1, 2, 3], [0, 0, 0]):
        inputs = case_on(step_inputs(gen, query_lens=query_lens, seq_lens=[70, 200, 300]), device)
        inputs["max_query_len"] = 3
        if not sum(query_lens):  # padding only: no rows at all
            for name in ("new_keys", "slots", "q", "weights"):
                inputs[name] = inputs[name][:0]
        eager = clone_case(inputs)
        want_values, want_indices = run(decode_step, eager)
        for name in ("new_keys", "slots", "q", "weights"):
            mark_unbacked(inputs[name], 0)
        values, indices = run(compiled, inputs)
        assert torch.equal(inputs["buffer"], eager["buffer"])
        assert indices.shape == want_indices.shape
        assert torch.equal(torch.sort(indices, dim=1)[0], torch.sort(want_indices, dim=1)[0])
        assert torch.equal(torch.sort(values, dim=1)[0], torch.sort(want_values, dim=1)[0])
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 1


@pytest.mark.parametrize("sizes", ["dynamic", "unbacked"])
def test_compiled_score_compares_symbolic_row_counts(sizes, gen):
    """Weights with one row fewer or more than the queries, compiled with symbolic row counts:
    refused by name at trace time with dynamic=True (the fake kernel's checks skipped sizes that
    were SymInts, and the reference's broadcast failed instead; the Triton kernel would have read
    past the weights), at run time by torch's assert when unbacked; ``out`` is left as it was."""
    from torch._dynamo.decorators import mark_unbacked
    from helpers import scoring_case

    case = scoring_case(gen, "cpu", [1, 2, 2], [70, 130, 90], heads=32)
    payload, scales = fp4.quantize_queries(case["q"])

    def score(payload, scales, weights, row_ends, out):
        return fp4.score_paged((payload, scales), case["cache"], weights, case["block_table"], case["query_starts"],
                               row_ends, 2, out=out)

    torch._dynamo.reset()
    compiled = torch.compile(score, fullgraph=True, dynamic=sizes == "dynamic")
    for rows, weight_rows in ((5, 5), (4, 4), (5, 4), (4, 5)):
        args = [payload[:rows], scales[:rows], torch.cat([case["weights"]] * 2)[:weight_rows],
                case["row_ends"].repeat(2)[:rows], torch.full((rows, case["block_table"].shape[1] * 64), 7.0)]
        if sizes == "unbacked":
            for t in args:
                mark_unbacked(t, 0)
        if rows == weight_rows:
            compiled(*args)
            assert not bool((args[-1] == 7.0).all())
            continue
        # Unbacked: torch 2.13 raises the package's run-time bound assert, a RuntimeError ("u0 <=
        # u1"). torch 2.11's Inductor checks the graph's input sizes first, an AssertionError
        # ("expected size 4==5"): there this checks torch, not size_matches. Both before any write.
        error, expected = RuntimeError, "weights: expected" if sizes == "dynamic" else "<="
        if sizes == "unbacked" and torch.__version__ < "2.13":
            error, expected = AssertionError, "expected size"
        with pytest.raises(error, match=expected):
            compiled(*args)
        assert bool((args[-1] == 7.0).all()), "out was written"


def test_no_check_message_closures():
    """torch 2.11's Dynamo (the GPU machine's) cannot read a ``torch._check`` message closure and
    breaks the graph there (a fullgraph compile fails); torch 2.13 takes one, so no CPU run shows
    it. No call of ``torch._check`` (or of a ``_check`` taken from torch) in the package passes a
    message, by any argument, keyword or line break."""
    import ast
    import pathlib

    package = pathlib.Path(fp4.__file__).parent
    calls = []
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                callee = node.func
                name = callee.attr if isinstance(callee, ast.Attribute) else getattr(callee, "id", None)
                if name == "_check":
                    calls.append((path.name, node.lineno, len(node.args), [k.arg for k in node.keywords]))
    assert calls, "no torch._check found: the scan reads the wrong files"
    with_message = [call for call in calls if call[2] != 1 or call[3]]
    assert not with_message, with_message


def test_launched_kernels_leave_no_constexpr_to_default():
    """Inductor's generated code (torch 2.11) passes None for a user kernel's constexpr left to
    its default: on the H200, every scorer launch under torch.compile failed to compile while
    the exact pass's form left ``PAIRS`` to its default. So no launched kernel gives a parameter a
    default, and a launch that leaves one out fails in the interpreter too (every form is
    launched by the CPU tests)."""
    import inspect

    from fp4_inductor.kernels import quantize, score, topk

    kernels = (score.score_paged_kernel, quantize.store_keys_kernel, quantize.quantize_queries_kernel,
               topk.topk_segment_kernel)
    for kernel in kernels:
        parameters = inspect.signature(kernel.fn).parameters.values()
        defaulted = [p.name for p in parameters if p.default is not inspect.Parameter.empty]
        assert not defaulted, (kernel.fn.__name__, defaulted)


# Run without the interpreter (under it, kernels are not JITFunctions and carry no source): each
# launched kernel as Inductor's generated code holds it, and every global its helpers read, by
# bare name, with each name that two different objects share across the helpers' modules.
_EMIT_KERNELS = """
import json
import triton
from triton.language import constexpr
from torch._inductor.codegen.wrapper import user_defined_triton_kernel_transitive_closure_source_code as emit
from fp4_inductor.kernels import quantize, score, topk

def walk(fn, found, clashes):
    for name in fn.fn.__code__.co_names:
        value = fn.fn.__globals__.get(name)
        if not isinstance(value, (triton.JITFunction, constexpr, bool, int, float, str)):
            continue
        if name in found:
            if found[name] is not value:
                clashes.append(name)
            continue
        found[name] = value
        if isinstance(value, triton.JITFunction):
            walk(value, found, clashes)

result = {}
for kernel in (score.score_paged_kernel, topk.topk_segment_kernel, quantize.store_keys_kernel,
               quantize.quantize_queries_kernel):
    found, clashes = {}, []
    walk(kernel, found, clashes)
    result[kernel.fn.__name__] = {"names": sorted(found), "clashes": clashes, "source": emit(kernel)}
print(json.dumps(result))
"""


@pytest.fixture(scope="module")
def emitted_kernels(tmp_path_factory):
    """Each launched kernel's source as Inductor emits it: ``{name: (names it reads, names bound to
    two objects, the source, the module made of it)}``."""
    pytest.importorskip("triton")
    import importlib.util
    import json

    from conftest import INTERPRETER
    from helpers import run_sm90_script

    if not INTERPRETER:
        pytest.skip("runs the emitted sources through the Triton interpreter")
    emitted = {}
    for name, found in json.loads(run_sm90_script(_EMIT_KERNELS).splitlines()[-1]).items():
        path = tmp_path_factory.mktemp("emitted") / f"emitted_{name}.py"
        path.write_text("import triton\nimport triton.language as tl\n\n\n@triton.jit\n" + found["source"])
        spec = importlib.util.spec_from_file_location(f"emitted_{name}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        emitted[name] = (found["names"], found["clashes"], found["source"], module)
    return emitted


@pytest.mark.interpreter
def test_emitted_kernels_define_every_name_once(emitted_kernels):
    """Inductor emits a user kernel as one flat source: the kernel and every @triton.jit helper
    and constant it reaches, each under its bare name (torch's
    ``user_defined_triton_kernel_transitive_closure_source_code``). The helpers live in several
    modules (the scorer's in score_kernel, score_math, score_tiles and ptx; top-k's in
    topk_search): no name may stand for two objects, and the emitted source must define each."""
    assert set(emitted_kernels) == {"score_paged_kernel", "topk_segment_kernel", "store_keys_kernel",
                                    "quantize_queries_kernel"}
    for kernel, (names, clashes, source, _) in emitted_kernels.items():
        defined = set(re.findall(r"^def (\w+)\(", source, re.M)) | set(re.findall(r"^(\w+) = ", source, re.M))
        assert not clashes, (kernel, clashes)
        assert not set(names) - defined, (kernel, set(names) - defined)
    assert len(emitted_kernels["score_paged_kernel"][0]) > 30


@pytest.mark.interpreter
def test_emitted_scorer_scores_as_the_package(emitted_kernels, gen):
    """The scorer's emitted source, run by the interpreter, scores bit for bit as the package's
    kernel does: the fix-up pair at one and two rows, the one-launch form."""
    from helpers import scoring_case

    from fp4_inductor.kernels import score

    module = emitted_kernels["score_paged_kernel"][3]
    # Verify rows at 32 heads (the two-row kernel, tiles in pairs; the one-launch form), and one
    # row per request at 64 heads (the 16-warp kernel, its first tile early, as at next_n=1).
    runs = ((dict(heads=32, query_lens=[2, 1, 3], seq_lens=[700, 64, 333]), ({}, {"exact": "inline"})),
            (dict(heads=64, query_lens=[1, 1], seq_lens=[900, 333]), ({},)))
    for spec, tunings in runs:
        case = scoring_case(gen, "cpu", key_spread=5, **spec)
        query = fp4.quantize_queries(case["q"], backend="triton")
        layout = (case["cache"], case["weights"], case["block_table"], case["query_starts"], case["row_ends"])
        width = case["block_table"].shape[1] * 64
        for tuning in tunings:
            outs = []
            for kernel in (score.score_paged_kernel, module.score_paged_kernel):
                out = torch.full((case["q"].shape[0], width), float("nan"))
                score.launch_score_paged(out, *query, *layout, case["max_query_len"], kernel=kernel, **tuning)
                outs.append(out)
            assert not outs[0].isnan().all()
            assert torch.equal(outs[0].nan_to_num(7.0), outs[1].nan_to_num(7.0)), (spec, tuning)


@pytest.mark.interpreter
def test_emitted_topk_selects_as_the_package(emitted_kernels, gen, monkeypatch):
    """Top-k's emitted source, run by the interpreter, selects what the package's kernel does:
    rows wider than a segment (a candidate pass after it), ragged ends."""
    from fp4_inductor.kernels import topk

    logits = torch.randn(5, 1500, generator=gen)
    row_ends = torch.tensor([1500, 7, 900, 0, 1333], dtype=torch.int32)
    package = topk.launch_select_topk(logits, row_ends, 40, True, segment=512)
    monkeypatch.setattr(topk, "topk_segment_kernel", emitted_kernels["topk_segment_kernel"][3].topk_segment_kernel)
    emitted = topk.launch_select_topk(logits, row_ends, 40, True, segment=512)
    assert torch.equal(package[1], emitted[1]) and torch.equal(package[0].nan_to_num(7.0), emitted[0].nan_to_num(7.0))
    assert (package[1] >= 0).sum() == 40 * 3 + 7
