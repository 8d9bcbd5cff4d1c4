"""The fp4_inductor backend's rewrite against indexers written other ways: what it must leave
alone (writes it cannot mirror, other semantics), what it must take (broadcast weights, caches
of several sizes, rows in any request order), and what it must not touch elsewhere in the graph."""

import copy
import logging

import pytest
import torch
from torch import nn

import fp4_inductor as fp4
from fp4_inductor.inductor import IndexShadow, register, rewrite_indexers

PAGES, HEADS = 8, 16
ARGS = ("q", "w", "bt", "k", "slots", "seq_lens", "query_lens")

register()


def paged_logits(cache, q, w, bt, seq_lens, query_lens, scores, head_weights):
    query_starts, row_ends = fp4.decode_layout(seq_lens, query_lens, q.shape[0])
    rows = torch.arange(q.shape[0])
    request = torch.searchsorted(query_starts[1:].long(), rows, right=True).clamp(max=bt.shape[0] - 1)
    keys = cache[bt.long()].flatten(1, 2)[request]
    return (scores(q, keys) * head_weights(w)).sum(1), row_ends


class Indexer(nn.Module):
    """The reference indexer's arithmetic over a cache buffer; subclasses change one piece."""

    def __init__(self, cache):
        super().__init__()
        self.register_buffer("cache", cache)

    def write(self, k, slots):
        self.cache.view(-1, 128).index_put_((slots,), k)

    @staticmethod
    def head_weights(w):
        return w[..., None]

    @staticmethod
    def scores(q, keys):
        return torch.einsum("rhd,rjd->rhj", q, keys).float().relu()

    def logits(self, q, w, bt, k, slots, seq_lens, query_lens):
        """(logits [rows, width], row_ends) after this step's keys are written."""
        self.write(k, slots)
        return paged_logits(self.cache, q, w, bt, seq_lens, query_lens, self.scores, self.head_weights)

    def forward(self, *args):
        return fp4.select_topk(*self.logits(*args), 32)


def step_inputs(seed=0, seq=(150, 90), query_lens=(2, 2), key_scale=1.0):
    g = torch.Generator().manual_seed(seed)
    rows = sum(query_lens)
    bt = torch.randperm(PAGES, generator=g)[: 2 * 4].view(2, 4).int()
    slots = [int(bt[i, (seq[i] - query_lens[i] + j) // 64]) * 64 + (seq[i] - query_lens[i] + j) % 64
             for i in range(2) for j in range(query_lens[i])]
    return dict(q=torch.randn(rows, HEADS, 128, generator=g).bfloat16(), w=torch.randn(rows, HEADS, generator=g),
                bt=bt, k=(torch.randn(rows, 128, generator=g) * key_scale).bfloat16(), slots=torch.tensor(slots),
                seq_lens=torch.tensor(seq), query_lens=torch.tensor(query_lens))


def new_cache(seed=1, pages=PAGES):
    return torch.randn(pages, 64, 128, generator=torch.Generator().manual_seed(seed)).bfloat16()


def quantized(cache):
    """The FP4 copy of a float key cache, as a fresh shadow holds it."""
    shadow = torch.zeros(cache.shape[0], 64, 68, dtype=torch.uint8)
    fp4.store_keys(cache.reshape(-1, 128), shadow, torch.arange(cache.shape[0] * 64))
    return shadow


def fp4_topk(cache, q, w, bt, seq_lens, query_lens):
    """What the rewrite must give: the FP4 ops on the cache's FP4 copy."""
    query_starts, row_ends = fp4.decode_layout(seq_lens, query_lens, q.shape[0])
    logits = fp4.score_paged(fp4.quantize_queries(q), quantized(cache), w, bt, query_starts, row_ends, 2)
    return fp4.select_topk(logits, row_ends, 32)


def same_sets(a, b):
    return torch.equal(a.sort(1)[0], b.sort(1)[0])


def rewrite_of(model, inputs, caplog):
    """(shadow sources, warnings) of the rewrite of ``model``'s Dynamo graph."""
    seen = {}

    def backend(gm, example_inputs):
        _, seen["sources"] = rewrite_indexers(gm, example_inputs)
        return gm.forward

    torch._dynamo.reset()
    with caplog.at_level(logging.WARNING, logger="fp4_inductor.inductor.backend"):
        caplog.clear()
        torch.compile(model, backend=backend, fullgraph=True)(*[inputs[n] for n in ARGS])
    return seen["sources"], caplog.text


class ThroughContiguous(Indexer):
    def write(self, k, slots):
        self.cache.contiguous().view(-1, 128)[slots] = k  # contiguous() of a contiguous cache is the cache


class ThroughSameDtype(Indexer):
    def write(self, k, slots):
        self.cache.to(torch.bfloat16).view(-1, 128).index_put_((slots,), k)  # a no-op to()


class ThroughFlatView(Indexer):
    def __init__(self, cache):
        super().__init__(cache)
        self.flat = self.cache.view(-1, 128)  # an engine's flat view, made once: its own graph input

    def write(self, k, slots):
        self.flat.index_put_((slots,), k)


class ThroughInplaceOperator(Indexer):
    def write(self, k, slots):
        cache = self.cache
        cache *= 0.5  # operator.imul in the graph


@pytest.mark.parametrize("model_class", [ThroughContiguous, ThroughSameDtype, ThroughFlatView, ThroughInplaceOperator])
def test_writes_through_other_aliases_leave_the_indexer_alone(model_class, caplog):
    """A cache write the pass could not mirror was not seen as a write: the indexer was rewritten
    and its shadow, stamped current after each call, went stale for good."""
    sources, warnings = rewrite_of(model_class(new_cache()), step_inputs(), caplog)
    assert sources == [] and "indexer left as is" in warnings and "cache" in warnings


def test_side_effects_elsewhere_in_the_graph_survive_the_rewrite():
    """The rewrite's dead-code elimination ran over the whole graph and dropped an in-place update
    of another buffer (``h = self.hits; h += 1``), which plain Inductor keeps."""

    class Counting(Indexer):
        def __init__(self, cache):
            super().__init__(cache)
            self.register_buffer("hits", torch.zeros(4))

        def forward(self, *args):
            hits = self.hits
            hits += 1.0
            return super().forward(*args)

    inputs = [step_inputs()[n] for n in ARGS]
    model = Counting(new_cache())
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="fp4_inductor", fullgraph=True)
    with torch.no_grad():
        compiled(*inputs)
        compiled(*inputs)
    assert model.hits.tolist() == [2.0] * 4


def indexer_over(cache, q, w, bt, k, slots, seq_lens, query_lens):
    """The reference indexer as a function of its cache."""
    cache.view(-1, 128).index_put_((slots,), k)
    logits, row_ends = paged_logits(cache, q, w, bt, seq_lens, query_lens, Indexer.scores, Indexer.head_weights)
    return fp4.select_topk(logits, row_ends, 32)


def test_caches_of_several_sizes_recompile_each(caplog):
    """One compiled function over caches of 8, 12 and 16 pages: the shadow was a static input
    while the page count became symbolic, and the second or third size failed an assertion."""
    torch._dynamo.reset()
    compiled = torch.compile(indexer_over, backend="fp4_inductor", fullgraph=True)
    inputs = step_inputs()
    for pages in (8, 12, 16):
        cache = new_cache(seed=pages, pages=pages)
        with torch.no_grad():
            got = compiled(cache, *[inputs[n] for n in ARGS])
        assert IndexShadow.of(cache).cache.shape[0] == pages
        eager = new_cache(seed=pages, pages=pages)
        indexer_over(eager, *[inputs[n] for n in ARGS])
        want = fp4_topk(eager, inputs["q"], inputs["w"], inputs["bt"], inputs["seq_lens"], inputs["query_lens"])
        assert same_sets(got[1], want[1]), pages


def test_rows_in_any_request_order():
    """A row -> request map given as an input (not searchsorted over query_starts): the fallback
    assumed rows grouped by request in order and scored interleaved rows against other pages."""

    class RequestMap(Indexer):
        def forward(self, q, w, bt, k, slots, request, row_ends):
            self.write(k, slots)
            keys = self.cache[bt.long()][request].flatten(1, 2)
            logits = (self.scores(q, keys) * self.head_weights(w)).sum(1)
            return fp4.select_topk(logits, row_ends, 32)

    inputs = step_inputs()
    order = torch.tensor([0, 2, 1, 3])
    request = torch.tensor([0, 1, 0, 1])  # rows of two requests, interleaved
    _, row_ends = fp4.decode_layout(inputs["seq_lens"], inputs["query_lens"], 4)
    args = [inputs["q"][order], inputs["w"][order], inputs["bt"], inputs["k"], inputs["slots"], request, row_ends[order]]
    model, eager = RequestMap(new_cache()), RequestMap(new_cache())
    torch._dynamo.reset()
    with torch.no_grad():
        got = torch.compile(model, backend="fp4_inductor", fullgraph=True)(*args)
        eager(*args)
        logits = fp4.score_paged(fp4.quantize_queries(args[0]), quantized(eager.cache), args[1], inputs["bt"][request],
                                 torch.arange(5, dtype=torch.int32), args[6], 1)
        want = fp4.select_topk(logits, args[6], 32)
    assert same_sets(got[1], want[1])


@pytest.mark.parametrize("weights", ["heads", "row"])
def test_broadcast_head_weights(weights):
    """Head weights [H] or [rows, 1] broadcast against the scores: the compile failed ("weights:
    expected float32 [4, 16]") where plain Inductor compiled the model."""

    class Broadcast(Indexer):
        @staticmethod
        def head_weights(w):
            return (w if weights == "heads" else w[:, :1])[..., None]

    inputs = step_inputs()
    inputs["w"] = inputs["w"][0] if weights == "heads" else inputs["w"]
    model, eager = Broadcast(new_cache()), Broadcast(new_cache())
    torch._dynamo.reset()
    with torch.no_grad():
        got = torch.compile(model, backend="fp4_inductor", fullgraph=True)(*[inputs[n] for n in ARGS])
        eager(*[inputs[n] for n in ARGS])
    w = inputs["w"].expand(4, HEADS) if weights == "heads" else inputs["w"][:, :1].expand(4, HEADS)
    want = fp4_topk(eager.cache, inputs["q"], w.contiguous(), inputs["bt"], inputs["seq_lens"], inputs["query_lens"])
    assert same_sets(got[1], want[1])


class GatherPerPage(Indexer):
    def forward(self, q, w, bt, k, slots, seq_lens, query_lens):
        self.write(k, slots)
        query_starts, row_ends = fp4.decode_layout(seq_lens, query_lens, q.shape[0])
        keys = self.cache[bt.long()].flatten(0, 1)[torch.arange(q.shape[0])]  # [rows, 64, 128]: not per request
        logits = (self.scores(q, keys) * self.head_weights(w)).sum(1)
        return torch.topk(logits.masked_fill(torch.arange(64) >= row_ends[:, None], float("-inf")), 8)


class MaskFromOne(Indexer):
    def forward(self, *args):
        logits, row_ends = self.logits(*args)
        cols = torch.arange(1, logits.shape[1] + 1)  # column j stands for key j - 1: not the reference's mask
        return torch.topk(logits.masked_fill(cols >= row_ends[:, None], float("-inf")), 32)


class ClampedRelu(Indexer):
    @staticmethod
    def scores(q, keys):
        return torch.einsum("rhd,rjd->rhj", q, keys).float().clamp_min(0)


@pytest.mark.parametrize("model_class, reason", [
    (GatherPerPage, "the gathered keys are"),
    (MaskFromOne, "but not of logits.masked_fill(arange(width) >= row_ends[:, None], -inf)"),
    (ClampedRelu, "its logits read a float [pages, 64, 128] input"),
])
def test_other_semantics_are_left_alone_and_said(model_class, reason, caplog):
    """Keys gathered in another shape, a mask that does not count keys from 0, relu spelled
    another way: each was rewritten with other results (the first two) or skipped silently
    (the last), against compile.md's promise of a warning that says why."""
    sources, warnings = rewrite_of(model_class(new_cache()), step_inputs(), caplog)
    assert sources == [] and "indexer left as is" in warnings and reason in warnings


def test_mirrored_writes_quantize_what_the_cache_holds():
    """float32 keys written into a bf16 cache: the mirror quantized them before the cast, so the
    shadow differed from the cache's own FP4 copy (121 of 256 keys' bytes in one run)."""
    model = Indexer(new_cache())
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="fp4_inductor", fullgraph=True)
    with torch.no_grad():
        for seed in range(3):
            inputs = step_inputs(seed, seq=(150 + seed, 90 + seed))
            inputs["k"] = torch.randn(4, 128, generator=torch.Generator().manual_seed(seed)) * 3  # float32
            compiled(*[inputs[n] for n in ARGS])
    assert torch.equal(IndexShadow.of(model.cache).cache, quantized(model.cache))


def test_topk_by_keyword_and_its_values_dtype():
    """``torch.topk(input=..., k=...)`` raised IndexError in the matcher (any graph, indexer or
    not); a bf16 indexer's top-k values came back float32 where eager gives bf16."""

    class Keywords(Indexer):
        def forward(self, *args):
            logits, row_ends = self.logits(*args)
            mask = torch.arange(logits.shape[1]) >= row_ends[:, None]
            return torch.topk(input=logits.bfloat16().masked_fill(mask=mask, value=float("-inf")), k=32)

    inputs = step_inputs()
    model = Keywords(new_cache())
    torch._dynamo.reset()
    with torch.no_grad():
        values, indices = torch.compile(model, backend="fp4_inductor", fullgraph=True)(*[inputs[n] for n in ARGS])
    assert values.dtype == torch.bfloat16 and indices.shape == (4, 32)


def test_inductor_options_are_checked_as_inductor_checks_them():
    torch._dynamo.reset()
    inputs = step_inputs()
    for options, error in [({"max_autotune": "yes"}, "max_autotune"), ({"not_a_config": 1}, "not_a_config")]:
        compiled = torch.compile(Indexer(new_cache()), backend="fp4_inductor", options=options)
        with pytest.raises(Exception, match=error):
            compiled(*[inputs[n] for n in ARGS])
        torch._dynamo.reset()


class ThroughMask(Indexer):
    def write(self, k, slots):
        mask = torch.zeros(self.cache.shape[0] * 64, dtype=torch.bool)
        mask[slots] = True
        self.cache.view(-1, 128)[mask] = k[:1].expand(4, 128)  # a mask, not slot numbers


class ThroughDtypeView(Indexer):
    def write(self, k, slots):
        self.cache.view(torch.float16).view(-1, 128).index_put_((slots,), k.view(torch.float16))


@pytest.mark.parametrize("model_class", [ThroughMask, ThroughDtypeView])
def test_writes_the_mirror_would_misread_leave_the_indexer_alone(model_class, caplog):
    """A boolean-mask write was mirrored as slots 0 and 1, and a write through a dtype view read
    back as the other dtype's bits: both rewritten, the shadow stale for good."""
    sources, warnings = rewrite_of(model_class(new_cache()), step_inputs(), caplog)
    assert sources == [] and "indexer left as is" in warnings


class PagedWrite(Indexer):
    def write(self, k, slots):
        self.cache[slots // 64, slots % 64] = k


class TwoLayers(nn.Module):
    def __init__(self, first, second):
        super().__init__()
        self.first, self.second = PagedWrite(first), PagedWrite(second)

    def forward(self, *args):
        return self.first(*args)[1], self.second(*args)[1]


class MergedSection(nn.Module):
    """The key cache is one section of merged pages [pages, 64, 256]; the step writes the other
    section too, through its own view."""

    def __init__(self, pages):
        super().__init__()
        self.register_buffer("pages", pages)
        self.indexer = PagedWrite(pages[:, :, :128])
        self.latent = pages[:, :, 128:]

    def forward(self, *args):
        inputs = dict(zip(ARGS, args))
        slots = inputs["slots"]
        self.latent[slots // 64, slots % 64] = inputs["k"] * 2
        return self.indexer(*args)[1]


@pytest.mark.parametrize("layout", ["layer-major", "page-major", "merged section"])
def test_views_of_one_allocation_that_never_meet_are_rewritten(layout, caplog):
    """Caches that are views of one buffer but share no byte (page-major per-layer views, one
    section of merged pages next to another written in the same step) are rewritten, and every
    shadow equals the cache's FP4 copy after two steps. The byte-range check alone left the
    interleaved ones alone."""
    if layout == "layer-major":
        model = TwoLayers(*torch.zeros(2, PAGES, 64, 128, dtype=torch.bfloat16).unbind(0))
    elif layout == "page-major":
        both = torch.zeros(PAGES, 2, 64, 128, dtype=torch.bfloat16)
        model = TwoLayers(both[:, 0], both[:, 1])
    else:
        model = MergedSection(torch.zeros(PAGES, 64, 256, dtype=torch.bfloat16))
    sources, warnings = rewrite_of(model, step_inputs(), caplog)
    assert sources and "indexer left as is" not in warnings, warnings
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="fp4_inductor", fullgraph=True)
    with torch.no_grad():
        for seed in range(2):
            compiled(*[step_inputs(seed, seq=(150 + seed, 90 + seed))[n] for n in ARGS])
    caches = [model.indexer.cache] if layout == "merged section" else [model.first.cache, model.second.cache]
    for cache in caches:
        assert torch.equal(IndexShadow.of(cache).cache, quantized(cache))


def test_a_later_top_k_is_not_taken_for_an_indexer(caplog):
    """A router's top-k downstream of an indexer reads the key cache only through the indexer's
    selection: it was reported as an indexer in another spelling (one warning per layer)."""

    class WithRouter(Indexer):
        def forward(self, *args):
            values, indices = super().forward(*args)
            hidden = args[0].float().mean(1) + indices.float().mean(1, keepdim=True)
            return values, indices, torch.topk(hidden @ torch.ones(128, 8), 2)

    sources, warnings = rewrite_of(WithRouter(new_cache()), step_inputs(), caplog)
    assert sources and "indexer left as is" not in warnings, warnings


def test_a_block_table_padded_past_the_batch():
    """The reference indexer over a block table with more rows than requests (a captured batch
    size): the rewrite handed the padded table to score_paged, and the compile failed."""
    model = Indexer(new_cache())
    inputs = step_inputs()
    padded = dict(inputs, bt=torch.cat([inputs["bt"], inputs["bt"][:1]]))
    torch._dynamo.reset()
    with torch.no_grad():
        got = torch.compile(model, backend="fp4_inductor", fullgraph=True)(*[padded[n] for n in ARGS])
    eager = Indexer(new_cache())
    eager(*[inputs[n] for n in ARGS])
    want = fp4_topk(eager.cache, inputs["q"], inputs["w"], inputs["bt"], inputs["seq_lens"], inputs["query_lens"])
    assert same_sets(got[1], want[1])



class ClampedTable(Indexer):
    """ReferenceIndexer's gather: the table's first rows, entries clamped into the cache."""

    def logits(self, q, w, bt, k, slots, seq_lens, query_lens):
        self.write(k, slots)
        pages = bt[: query_lens.shape[0]].long().clamp(0, self.cache.shape[0] - 1)
        return paged_logits(self.cache, q, w, pages, seq_lens, query_lens, self.scores, self.head_weights)


def rewritten_graph(model, inputs):
    """The graph the pass makes of ``model`` (run as traced, unrewritten)."""
    seen = {}

    def backend(gm, example_inputs):
        seen["graph"] = rewrite_indexers(copy.deepcopy(gm), example_inputs)[0].graph
        return gm.forward

    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(model, backend=backend, fullgraph=True)(*[inputs[n] for n in ARGS])
    (score,) = [n for n in seen["graph"].nodes if n.target is torch.ops.fp4.score_paged.default]
    return score


def test_a_clamped_block_table_keeps_its_clamp():
    """A gather through ``bt[:requests].long().clamp(0, pages - 1)`` (ReferenceIndexer's: entries
    past a request's pages may hold anything): rewritten, with the scorer reading the clamped
    table (what eager reads; a clamp may be what keeps a read inside the cache), and the top-k
    sets of the FP4 ops on the unpadded table."""
    inputs = step_inputs()
    bt = inputs["bt"].clone()
    bt[1, 2:] = 10**6  # past request 1's pages (90 keys: 2 pages)
    padded = dict(inputs, bt=torch.cat([bt, torch.full((3, bt.shape[1]), -5, dtype=bt.dtype)]))
    score = rewritten_graph(ClampedTable(new_cache()), padded)
    table = score.args[4]
    assert table.target == "narrow" and table.args[0].target == "clamp", table.args[0].format_node()
    torch._dynamo.reset()
    with torch.no_grad():
        got = torch.compile(ClampedTable(new_cache()), backend="fp4_inductor", fullgraph=True)(
            *[padded[n] for n in ARGS])
    eager = Indexer(new_cache())
    eager(*[inputs[n] for n in ARGS])
    want = fp4_topk(eager.cache, inputs["q"], inputs["w"], inputs["bt"], inputs["seq_lens"], inputs["query_lens"])
    assert same_sets(got[1], want[1])


def test_the_launch_hint_counts_requests_not_table_rows():
    """The scorer's launch hint (rows per request) counts the requests in query_starts: a table
    padded past the batch by 3 rows made it 4 rows over 5 table rows, 1, for 2 requests of 2."""
    inputs = step_inputs()
    padded = dict(inputs, bt=torch.cat([inputs["bt"], inputs["bt"], inputs["bt"][:1]]))
    assert rewritten_graph(Indexer(new_cache()), padded).args[7] == 2
