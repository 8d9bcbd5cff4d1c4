"""The fp4_inductor backend: a model holding the reference BF16 indexer, compiled with
backend="fp4_inductor", takes its top-k from the FP4 ops with no other edit."""

import copy
import logging
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from torch import nn

import fp4_inductor as fp4
from fp4_inductor.inductor import IndexShadow, find_indexers, fp4_inductor, rewrite_indexers, write_keys
from fp4_inductor.modules import ReferenceIndexer, swap_indexers

from conftest import HAS_GPU

DEVICES = ["cpu", pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(not HAS_GPU, reason="needs a GPU")])]
PAGES, HIDDEN, Q_LORA = 12, 96, 48


class DecodeModel(nn.Module):
    """Two sparse-attention layers' indexers over one decode step."""

    def __init__(self, device="cpu"):
        super().__init__()
        self.indexers = nn.ModuleList(
            ReferenceIndexer(HIDDEN, Q_LORA, num_pages=PAGES, heads=16, topk=32, device=device) for _ in range(2)
        )

    def forward(self, x, q_lora, slots, block_table, seq_lens, query_lens, max_query_len: int):
        return [m(x, q_lora, slots, block_table, seq_lens, query_lens, max_query_len) for m in self.indexers]


def fill_history(model, gen, device):
    """Every slot gets a key through each indexer's own projection, written outside any graph."""
    with torch.no_grad():
        for m in model.indexers:
            k = m.k_norm(m.wk(torch.randn(PAGES * 64, HIDDEN, generator=gen).to(device, torch.bfloat16)))
            if isinstance(m, ReferenceIndexer):
                m.key_cache.view(-1, 128).copy_(k)
            else:
                fp4.store_keys(k, m.index_cache, torch.arange(PAGES * 64, device=device))


def step(gen, device, seq_lens, query_lens, rows=8):
    """One decode step's inputs: this step's keys at the last query_lens positions of each request,
    then graph-padding rows up to ``rows``."""
    requests = len(seq_lens)
    block_table = torch.arange(PAGES)[torch.randperm(PAGES, generator=gen)][: requests * 4].view(requests, 4).int()
    slots = []
    for i in range(requests):
        for t in range(seq_lens[i] - query_lens[i], seq_lens[i]):
            slots.append(int(block_table[i, t // 64]) * 64 + t % 64)
    slots += [-1] * (rows - len(slots))
    x = torch.randn(rows, HIDDEN, generator=gen).bfloat16()
    q_lora = torch.randn(rows, Q_LORA, generator=gen).bfloat16()
    tensors = (x, q_lora, torch.tensor(slots), block_table, torch.tensor(seq_lens), torch.tensor(query_lens))
    # max_query_len is the scheduler's bound for the step (constant here: one graph for every step).
    return (*[t.to(device) for t in tensors], 5)


# Non-uniform verify rows, padding rows that come and go, contexts growing across pages.
SCHEDULE = [([70, 200, 130], [2, 1, 3]), ([72, 201, 133], [2, 1, 5]), ([75, 203, 134], [3, 2, 1])]


def models(device, **fp4_kwargs):
    torch.manual_seed(0)
    reference = DecodeModel(device)
    fp4_model = copy.deepcopy(reference)
    swap_indexers(fp4_model, **fp4_kwargs)
    for model in (reference, fp4_model):
        fill_history(model, torch.Generator().manual_seed(7), device)
    return reference, fp4_model


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("device", DEVICES)
def test_backend_takes_topk_from_fp4_ops(device, dynamic):
    reference, fp4_model = models(device)
    bf16_model = copy.deepcopy(reference)
    torch._dynamo.reset()
    compiled = torch.compile(reference, backend="fp4_inductor", fullgraph=True, dynamic=dynamic)
    # The eager swapped model runs the same FP4 ops on the same keys. (Not a compiled one: Inductor
    # may fuse the key LayerNorm into the quantizer and skip the bf16 rounding in between.)
    swapped = fp4_model
    gen = torch.Generator().manual_seed(11)
    differs_from_bf16 = False

    def check(inputs):
        nonlocal differs_from_bf16
        got, want, bf16 = compiled(*inputs), swapped(*inputs), bf16_model(*inputs)
        for g, w, b in zip(got, want, bf16):
            assert g.dtype == torch.int32 and g.shape == w.shape
            assert torch.equal(g.sort(dim=1)[0], w.sort(dim=1)[0])
            differs_from_bf16 |= not torch.equal(g.sort(dim=1)[0], b.sort(dim=1)[0])

    with torch.no_grad():
        for seq_lens, query_lens in SCHEDULE:
            check(step(gen, device, seq_lens, query_lens))
        # Keys written outside the compiled graph (an eager prefill) reach the FP4 path too.
        for model in (reference, fp4_model, bf16_model):
            fill_history(model, torch.Generator().manual_seed(99), device)
        check(step(gen, device, [90, 210, 150], [1, 1, 1]))
    for m in reference.indexers:
        assert IndexShadow.of(m.key_cache).version == m.key_cache._version
    # Otherwise this test could not tell the FP4 path from the BF16 one.
    assert differs_from_bf16
    # The model's own BF16 cache keeps its meaning: every write still lands there.
    for a, b in zip(reference.indexers, bf16_model.indexers):
        assert torch.equal(a.key_cache, b.key_cache)


def captured_graph(model, inputs, **options):
    """The graph the backend hands to Inductor (after the rewrite)."""
    seen = {}

    def backend(gm, example_inputs):
        rewritten, seen["sources"] = rewrite_indexers(gm, example_inputs, **options)
        seen["graph"] = rewritten.graph
        return gm.forward

    torch._dynamo.reset()
    torch.compile(model, backend=backend, fullgraph=True)(*inputs)
    return seen


def test_rewritten_graph_holds_fp4_ops_and_no_bf16_scoring():
    reference, _ = models("cpu")
    inputs = step(torch.Generator().manual_seed(3), "cpu", *SCHEDULE[0][:2])
    seen = captured_graph(reference, inputs)
    targets = [str(n.target) for n in seen["graph"].nodes if n.op == "call_function"]
    for op in ("fp4.store_keys.default", "fp4.quantize_queries.default", "fp4.score_paged.default", "fp4.select_topk.default"):
        assert targets.count(op) == 2, (op, targets)
    assert not any("einsum" in t for t in targets)
    shadows = [n for n in seen["graph"].nodes if n.op == "placeholder" and n.name.startswith("fp4_shadow")]
    assert len(shadows) == 2 and len(seen["sources"]) == 2


class TorchTopkIndexer(ReferenceIndexer):
    """The reference indexer as engines often write it: mask past each row's keys, torch.topk."""

    def forward(self, x, q_lora, slots, block_table, seq_lens, query_lens, max_query_len: int):
        q, k, w = self.project(x, q_lora)
        flat = self.key_cache.view(-1, self.head_dim)
        flat.index_put_((slots.clamp_min(0).long(),), k.to(flat.dtype))  # slots here are never padding
        query_starts, row_ends = fp4.decode_layout(seq_lens, query_lens, q.shape[0])
        request = torch.searchsorted(query_starts[1:].long(), torch.arange(q.shape[0], device=q.device), right=True)
        keys = self.key_cache[block_table[request.clamp(max=block_table.shape[0] - 1)].long()].flatten(1, 2)
        logits = (torch.einsum("rhd,rjd->rhj", q, keys).float().relu() * w[..., None]).sum(1)
        cols = torch.arange(logits.shape[1], device=logits.device)
        masked = logits.masked_fill(cols[None, :] >= row_ends[:, None], float("-inf"))
        return masked.topk(self.topk, dim=-1).indices


def test_backend_rewrites_a_torch_topk_indexer():
    torch.manual_seed(0)
    model = TorchTopkIndexer(HIDDEN, Q_LORA, num_pages=PAGES, heads=16, topk=32)
    fp4_model = swap_indexers(copy.deepcopy(nn.Sequential(model)))[0][1]
    with torch.no_grad():
        k = model.k_norm(model.wk(torch.randn(PAGES * 64, HIDDEN, generator=torch.Generator().manual_seed(7)).bfloat16()))
        model.key_cache.view(-1, 128).copy_(k)
        fp4.store_keys(k, fp4_model.index_cache, torch.arange(PAGES * 64))
    inputs = step(torch.Generator().manual_seed(3), "cpu", [70, 200, 130], [2, 1, 3], rows=6)
    seen = captured_graph(model, inputs)
    assert len(seen["sources"]) == 1
    targets = [str(n.target) for n in seen["graph"].nodes if n.op == "call_function"]
    methods = [n.target for n in seen["graph"].nodes if n.op == "call_method"]
    assert "fp4.score_paged.default" in targets and not any("einsum" in t for t in targets)
    assert "topk" not in methods and "masked_fill" not in methods
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="fp4_inductor", fullgraph=True)
    with torch.no_grad():
        got, want = compiled(*inputs), fp4_model(*inputs)
    assert got.dtype == torch.int64
    assert torch.equal(got.sort(dim=1)[0], want.long().sort(dim=1)[0])


class ScribblingIndexer(ReferenceIndexer):
    """Writes its cache in a way the pass cannot mirror: the rewrite must leave it alone."""

    def forward(self, x, q_lora, slots, block_table, seq_lens, query_lens, max_query_len: int):
        self.key_cache[0].mul_(0.5)
        return super().forward(x, q_lora, slots, block_table, seq_lens, query_lens, max_query_len)


class NullPageIndexer(ReferenceIndexer):
    """Keeps page 0 free (an engine's null page) and writes keys through ``key_cache[1:]``: slot s
    of that view is slot s + 64 of the cache, which the rewrite cannot take for the cache's own."""

    def forward(self, x, q_lora, slots, block_table, seq_lens, query_lens, max_query_len: int):
        q, k, w = self.project(x, q_lora)
        self.key_cache[1:].view(-1, 128).index_put_((slots,), k.to(self.key_cache.dtype))
        query_starts, row_ends = fp4.decode_layout(seq_lens, query_lens, q.shape[0])
        request = torch.searchsorted(query_starts[1:].long(), torch.arange(q.shape[0]), right=True)
        keys = self.key_cache[block_table.long()].flatten(1, 2)[request.clamp(max=block_table.shape[0] - 1)]
        logits = (torch.einsum("rhd,rjd->rhj", q, keys).float().relu() * w.unsqueeze(-1)).sum(1)
        return fp4.select_topk(logits, row_ends, self.topk)[1]


# Each unmirrorable write is named in the warning (not some other write into the cache).
@pytest.mark.parametrize("model_class, names", [
    (ScribblingIndexer, ("mul_", "cannot mirror")),
    (NullPageIndexer, ("index_put_", "not the whole cache")),
])
def test_unmirrorable_cache_write_leaves_the_indexer_alone(caplog, model_class, names):
    torch.manual_seed(0)
    model = model_class(HIDDEN, Q_LORA, num_pages=PAGES, heads=16, topk=32)
    inputs = step(torch.Generator().manual_seed(3), "cpu", *SCHEDULE[0][:2])
    with caplog.at_level(logging.WARNING, logger="fp4_inductor.inductor.backend"):
        seen = captured_graph(model, inputs)
    assert seen["sources"] == []
    assert all(name in caplog.text for name in names), caplog.text
    assert any("einsum" in str(n.target) for n in seen["graph"].nodes)


def test_inference_tensor_cache_leaves_the_indexer_alone(caplog):
    """A cache made under torch.inference_mode() keeps no version counter, so writes outside the
    graph could not be seen: the backend compiles the BF16 indexer as is, and says why."""
    with torch.inference_mode():
        reference, _ = models("cpu")
        eager = copy.deepcopy(reference)
        inputs = step(torch.Generator().manual_seed(3), "cpu", *SCHEDULE[0][:2])
        torch._dynamo.reset()
        with caplog.at_level(logging.WARNING, logger="fp4_inductor.inductor.backend"):
            got = torch.compile(reference, backend="fp4_inductor", fullgraph=True)(*inputs)
        want = eager(*inputs)
    assert "inference tensor" in caplog.text
    for g, w in zip(got, want):
        assert torch.equal(g.sort(dim=1)[0], w.sort(dim=1)[0])
    with torch.inference_mode():
        cache = torch.zeros(2, 64, 128)
    with pytest.raises(RuntimeError, match="inference tensor"):
        IndexShadow(cache).sync(cache)


def test_row_count_from_a_shape_compiles_once():
    """decode_layout's num_rows is a SymInt in the schema: with dynamic=True a step whose row count
    changes keeps one graph (an int argument specialized it: one graph per row count, then a hard
    failure at the recompile limit under fullgraph=True)."""
    from torch._dynamo.utils import counters

    reference, _ = models("cpu")
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(reference, backend="fp4_inductor", fullgraph=True, dynamic=True)
    gen = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for rows in (6, 7, 9):
            got = compiled(*step(gen, "cpu", *SCHEDULE[0], rows=rows))
            assert all(g.shape[0] == rows for g in got)
    assert counters["stats"]["unique_graphs"] == 1


def test_unbacked_batch_takes_topk_from_fp4_ops():
    """The per-row inputs' batch unbacked (``mark_unbacked``: a batch that comes from data): the
    reference model traces without a guard on it, the rewrite still scores with the FP4 ops (the
    eager swapped model's sets, not the BF16 model's), and 8 and then 6 rows share one graph."""
    from torch._dynamo.decorators import mark_unbacked
    from torch._dynamo.utils import counters

    reference, fp4_model = models("cpu")
    bf16_model = copy.deepcopy(reference)
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(reference, backend="fp4_inductor", fullgraph=True)
    gen = torch.Generator().manual_seed(5)
    differs_from_bf16 = False
    with torch.no_grad():
        for rows in (8, 6):
            inputs = step(gen, "cpu", *SCHEDULE[0], rows=rows)
            want, bf16 = fp4_model(*inputs), bf16_model(*inputs)
            for t in inputs[:3]:  # x, q_lora, slots
                mark_unbacked(t, 0)
            got = compiled(*inputs)
            for g, w, b in zip(got, want, bf16):
                assert g.shape == w.shape and torch.equal(g.sort(dim=1)[0], w.sort(dim=1)[0])
                differs_from_bf16 |= not torch.equal(g.sort(dim=1)[0], b.sort(dim=1)[0])
    assert differs_from_bf16
    assert counters["stats"]["unique_graphs"] == 1


def test_write_keys_mirrors_outside_writes():
    """Keys written outside the compiled model with write_keys reach the shadow with no whole-cache
    refill; a plain outside write still refills it, with a warning the first time."""
    reference, fp4_model = models("cpu")
    torch._dynamo.reset()
    compiled = torch.compile(reference, backend="fp4_inductor", fullgraph=True)
    gen = torch.Generator().manual_seed(11)
    new_keys = torch.Generator().manual_seed(5)
    with torch.no_grad():
        inputs = step(gen, "cpu", *SCHEDULE[0])
        compiled(*inputs), fp4_model(*inputs)
        for seq_lens, query_lens in SCHEDULE[1:]:
            # An eager chunk of prefill: two keys per layer (one slot given from the end).
            slots = torch.tensor([5 * 64 + seq_lens[0] % 64, -3])
            for ref, fp4_layer in zip(reference.indexers, fp4_model.indexers):
                keys = torch.randn(2, 128, generator=new_keys).bfloat16()
                write_keys(ref.key_cache, keys, slots)
                fp4.store_keys(keys, fp4_layer.index_cache, slots % (PAGES * 64))
            inputs = step(gen, "cpu", seq_lens, query_lens)
            for g, w in zip(compiled(*inputs), fp4_model(*inputs)):
                assert torch.equal(g.sort(dim=1)[0], w.sort(dim=1)[0])
            for ref, fp4_layer in zip(reference.indexers, fp4_model.indexers):
                assert torch.equal(IndexShadow.of(ref.key_cache).cache, fp4_layer.index_cache)
        for m in reference.indexers:
            shadow = IndexShadow.of(m.key_cache)
            assert shadow.fills == 1 and shadow.version == m.key_cache._version
            fresh = torch.zeros_like(shadow.cache)
            fp4.store_keys(m.key_cache.view(-1, 128), fresh, torch.arange(PAGES * 64))
            assert torch.equal(shadow.cache, fresh)
        reference.indexers[0].key_cache[3, 7] = 1.0
        logger = logging.getLogger("fp4_inductor.inductor.backend")
        records = []
        handler = logging.Handler()
        handler.emit = records.append
        logger.addHandler(handler)
        try:
            for _ in range(2):
                reference.indexers[0].key_cache[3, 8] += 1.0
                compiled(*step(gen, "cpu", *SCHEDULE[2]))
        finally:
            logger.removeHandler(handler)
        assert IndexShadow.of(reference.indexers[0].key_cache).fills == 3
        assert sum("write_keys" in r.getMessage() for r in records) == 1
    with pytest.raises(ValueError, match="slots: expected 2 along dim 0"):
        write_keys(reference.indexers[0].key_cache, torch.zeros(2, 128), torch.zeros(3, dtype=torch.int64))


def test_backend_options():
    reference, _ = models("cpu")
    inputs = step(torch.Generator().manual_seed(3), "cpu", *SCHEDULE[0][:2])
    seen = captured_graph(reference, inputs, max_query_len=5)
    hints = [n.args[7] for n in seen["graph"].nodes if str(n.target) == "fp4.score_paged.default"]
    assert hints == [5, 5]
    torch._dynamo.reset()
    with pytest.raises(Exception, match="unknown fp4_inductor options"):
        torch.compile(reference, backend="fp4_inductor", options={"fp4_inductor.tile": 2})(*inputs)
    for option, value, match in (("rewrite", "false", "fp4_inductor.rewrite: expected a bool"),
                                 ("max_query_len", 0, "fp4_inductor.max_query_len: expected an int >= 1"),
                                 ("max_query_len", 2.0, "fp4_inductor.max_query_len: expected a Python int")):
        torch._dynamo.reset()
        with pytest.raises(Exception, match=match):
            torch.compile(reference, backend="fp4_inductor", options={"fp4_inductor." + option: value})(*inputs)


def test_other_topk_graphs_are_left_alone(caplog):
    def not_an_indexer(logits, row_ends):
        return fp4.select_topk(logits.relu() * 2, row_ends, 4)

    with caplog.at_level(logging.WARNING, logger="fp4_inductor.inductor.backend"):
        seen = captured_graph(not_an_indexer, (torch.randn(3, 64), torch.tensor([64, 10, 0], dtype=torch.int32)))
    assert seen["sources"] == [] and not caplog.text
    assert find_indexers(seen["graph"]) == ([], [])


CACHE_SCRIPT = textwrap.dedent(
    """
    import hashlib, sys, torch
    from torch._dynamo.utils import counters
    from torch._inductor.codecache import PyCodeCache
    sys.path.insert(0, sys.argv[1])
    from test_backend import SCHEDULE, models, step
    reference, _ = models("cpu")
    compiled = torch.compile(reference, backend="fp4_inductor", fullgraph=True)
    with torch.no_grad():
        out = compiled(*step(torch.Generator().manual_seed(3), "cpu", *SCHEDULE[0][:2]))
    code = sorted(hashlib.sha256(open(m.__file__).read().encode()).hexdigest() for m in PyCodeCache.modules)
    hits = counters["inductor"]["fxgraph_cache_hit"] + counters["aot_autograd"]["autograd_cache_hit"]
    print("RESULT", hits, ",".join(code), ",".join(str(o.sum().item()) for o in out))
    """
)


def test_two_fresh_processes_share_the_inductor_cache(tmp_path):
    """The rewrite runs before Inductor's cache key is taken, so a fresh process with the same
    model hits the cache and runs the same generated code."""
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(tmp_path), TORCHINDUCTOR_FX_GRAPH_CACHE="1")
    tests = os.path.dirname(__file__)
    runs = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", CACHE_SCRIPT, tests], env=env, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        runs.append(next(line.split()[1:] for line in done.stdout.splitlines() if line.startswith("RESULT")))
    (hits_first, code_first, out_first), (hits_second, code_second, out_second) = runs
    assert int(hits_first) == 0 and int(hits_second) >= 1
    assert code_first == code_second and code_first
    assert out_first == out_second


def test_installed_package_declares_the_backend_entry_point():
    from importlib import metadata

    try:
        metadata.distribution("fp4_inductor")
    except metadata.PackageNotFoundError:
        pytest.skip("fp4_inductor runs from a source checkout here, not installed")
    names = {ep.name: ep.value for ep in metadata.entry_points(group="torch_dynamo_backends")}
    assert names.get("fp4_inductor") == "fp4_inductor.inductor:fp4_inductor"
    assert "fp4_inductor" in torch._dynamo.list_backends()


@pytest.mark.parametrize("rank, spelling, matches", [
    (2, lambda x: x.unsqueeze(-1), True),
    (2, lambda x: x.unsqueeze(2), True),
    (2, lambda x: x[..., None], True),
    (2, lambda x: x[:, :, None], True),
    (2, lambda x: x.unsqueeze(1), False),
    (2, lambda x: x[:, None], False),
    (2, lambda x: x.view(-1, 1), False),
    (1, lambda x: x.unsqueeze(1), True),
    (1, lambda x: x.unsqueeze(-1), True),
    (1, lambda x: x[:, None], True),
    (1, lambda x: x[..., None], True),
    (1, lambda x: x.view(-1, 1), True),
    (1, lambda x: x.reshape(-1, 1), True),
    (1, lambda x: x.unsqueeze(0), False),
    (1, lambda x: x[None, :], False),
])
def test_trailing_axis_matcher(rank, spelling, matches):
    """The pass's matcher for ``w[..., None]`` (rank 2) and ``row_ends[:, None]`` (rank 1)."""
    from fp4_inductor.inductor.rewrite import _unsqueezed_last

    graph = torch.fx.symbolic_trace(spelling).graph
    x = next(n for n in graph.nodes if n.op == "placeholder")
    node = next(n for n in graph.nodes if n.op in ("call_method", "call_function"))
    assert (_unsqueezed_last(node, rank) is x) == matches
