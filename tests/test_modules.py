"""FP4Indexer against the BF16 reference indexer; swap_indexers in a small model."""

import pytest
import torch
from torch import nn

import fp4_inductor as fp4
from fp4_inductor.modules import FP4Indexer, ReferenceIndexer, swap_indexers


class TinyModel(nn.Module):
    def __init__(self, layers=2):
        super().__init__()
        self.layers = nn.ModuleList(
            nn.ModuleDict({"indexer": ReferenceIndexer(96, 48, num_pages=12, heads=16, topk=32, dtype=torch.float32),
                           "mlp": nn.Linear(96, 96)})
            for _ in range(layers)
        )

    def forward(self, x, q_lora, *layout):
        return [layer["indexer"](x, q_lora, *layout) for layer in self.layers]


def decode_inputs(gen, requests=3):
    query_lens = torch.tensor([2, 1, 3])[:requests]
    seq_lens = torch.tensor([200, 64, 130])[:requests]
    rows = int(query_lens.sum()) + 1
    block_table = torch.randperm(12, generator=gen)[: requests * 4].view(requests, 4).int()
    slots = torch.full((rows,), -1)
    # This step's keys go to the last query_lens positions of each request.
    r = 0
    for i in range(requests):
        for p in range(int(query_lens[i])):
            t = int(seq_lens[i] - query_lens[i] + p)
            slots[r] = int(block_table[i, t // 64]) * 64 + t % 64
            r += 1
    x = torch.randn(rows, 96, generator=gen)
    q_lora = torch.randn(rows, 48, generator=gen)
    return x, q_lora, slots, block_table, seq_lens, query_lens, int(query_lens.max())


def fill_history(model, gen):
    """Every cached position gets a key through both indexers (the reference's own projection)."""
    for layer in model.layers:
        idx = layer["indexer"]
        slots = torch.arange(12 * 64)
        x = torch.randn(slots.shape[0], 96, generator=gen)
        k = idx.k_norm(idx.wk(x))
        if isinstance(idx, ReferenceIndexer):
            idx.key_cache.view(-1, 128).copy_(k.detach())
        else:
            fp4.store_keys(k.detach(), idx.index_cache, slots)


def test_swap_replaces_every_reference_indexer(gen):
    model = TinyModel()
    swapped = swap_indexers(model)
    assert [name for name, _ in swapped] == ["layers.0.indexer", "layers.1.indexer"]
    assert all(isinstance(layer["indexer"], FP4Indexer) for layer in model.layers)
    assert isinstance(model.layers[0]["mlp"], nn.Linear)


def test_swap_with_predicate(gen):
    model = TinyModel()
    swapped = swap_indexers(model, predicate=lambda name, m: isinstance(m, ReferenceIndexer) and name.startswith("layers.1"))
    assert [name for name, _ in swapped] == ["layers.1.indexer"]
    assert isinstance(model.layers[0]["indexer"], ReferenceIndexer)


def test_fp4_indexer_tracks_reference_topk(gen):
    torch.manual_seed(0)
    reference_model = TinyModel()
    fp4_model = TinyModel()
    fp4_model.load_state_dict(reference_model.state_dict())
    swap_indexers(fp4_model)
    for model in (reference_model, fp4_model):
        fill_history(model, torch.Generator().manual_seed(5))
    inputs = decode_inputs(torch.Generator().manual_seed(6))
    with torch.no_grad():
        want = reference_model(*inputs)
        got = fp4_model(*inputs)
    assert len(got) == len(want) and got[0].shape == want[0].shape and got[0].dtype == torch.int32
    # FP4 keys and queries (about 3 bits of precision) pick most of the BF16 top-32: with
    # Gaussian data the logits' spread is narrow, so the bar is the 0.6 of random-data runs.
    assert mean_overlap(got, want) > 0.6


def test_from_reference_copies_weights(gen):
    ref = ReferenceIndexer(96, 48, num_pages=4, heads=16, topk=8, dtype=torch.float32)
    new = FP4Indexer.from_reference(ref, page_bytes=8192, index_offset=1024)
    for name, p in ref.named_parameters():
        assert torch.equal(p, new.get_parameter(name))
    assert new.index_cache.shape == (4, 64, 68) and new.pages.shape == (4, 8192)


def mean_overlap(got, want):
    """Mean share of each row's reference top-k that ``got`` also picks; a row without keys
    must pick nothing."""
    overlaps = []
    for g, w in zip(got, want):
        for r in range(w.shape[0]):
            a, b = set(g[r].tolist()) - {-1}, set(w[r].tolist()) - {-1}
            if b:
                overlaps.append(len(a & b) / len(b))
            else:
                assert not a
    return sum(overlaps) / len(overlaps)


def test_bf16_query_precision_raises_recall(gen):
    """query_precision="bf16" keeps the FP4 keys and scores with unquantized queries: its top-k
    is closer to the BF16 indexer's than the all-FP4 one."""
    torch.manual_seed(0)
    reference_model = TinyModel()
    models = {}
    for precision in ("fp4", "bf16"):
        model = TinyModel()
        model.load_state_dict(reference_model.state_dict())
        swap_indexers(model, query_precision=precision)
        fill_history(model, torch.Generator().manual_seed(5))
        models[precision] = model
    fill_history(reference_model, torch.Generator().manual_seed(5))
    inputs = decode_inputs(torch.Generator().manual_seed(6))
    with torch.no_grad():
        want = reference_model(*inputs)
        overlap = {p: mean_overlap(m(*inputs), want) for p, m in models.items()}
    assert overlap["bf16"] > overlap["fp4"], overlap
    with pytest.raises(ValueError, match=r"query_precision: expected one of \('fp4', 'bf16'\), got 'fp8'"):
        FP4Indexer(96, 48, num_pages=4, heads=16, query_precision="fp8")


def test_reference_padding_rows_never_undo_a_real_write():
    """A real token stored at slot 0 next to padding rows: the new key lands, whatever the
    order in which duplicate indices are written."""
    torch.manual_seed(0)
    ref = ReferenceIndexer(96, 48, num_pages=2, heads=16, topk=8, dtype=torch.float32)
    ref.key_cache.normal_()
    x, q_lora = torch.randn(4, 96), torch.randn(4, 48)
    slots = torch.tensor([-1, 0, -1, 5])
    with torch.no_grad():
        ref(x, q_lora, slots, torch.tensor([[0, 1]], dtype=torch.int32), torch.tensor([6]), torch.tensor([2]), 2)
        k = ref.k_norm(ref.wk(x))
    flat = ref.key_cache.view(-1, 128)
    assert torch.equal(flat[0], k[1]) and torch.equal(flat[5], k[3])
    untouched = ref.key_cache.clone()
    with torch.no_grad():  # no valid row at all: nothing changes
        ref(x, q_lora, torch.full((4,), -1), torch.tensor([[0, 1]], dtype=torch.int32), torch.tensor([6]), torch.tensor([0]), 1)
    assert torch.equal(ref.key_cache, untouched)


def one_layer_indexer(cls):
    """The indexer of a one-layer TinyModel (swapped to FP4Indexer for that class) with random
    keys in its cache, and that cache."""
    model = TinyModel(layers=1)
    if cls is FP4Indexer:
        swap_indexers(model)
    fill_history(model, torch.Generator().manual_seed(5))
    indexer = model.layers[0]["indexer"]
    return indexer, indexer.key_cache if cls is ReferenceIndexer else indexer.index_cache


@pytest.mark.parametrize("cls", [ReferenceIndexer, FP4Indexer])
def test_indexers_check_every_input_before_writing_their_cache(cls):
    """A bad step input raises by name, with the same message from both indexers, before this
    step's keys are stored: the cache (random keys) is bit for bit unchanged. The reference
    indexer checked nothing: torch's own errors from deep inside, some after its keys were written."""
    indexer, cache = one_layer_indexer(cls)
    x, q_lora, slots, block_table, seq_lens, query_lens, most = decode_inputs(torch.Generator().manual_seed(6))
    before = cache.clone()
    floats = r"float32 or bfloat16 or float16"
    bad = [
        (dict(x=x.tolist()), TypeError, rf"^x: expected a tensor {floats} \[rows, 96\], got list"),
        (dict(x=x[:, :95]), ValueError, rf"^x: expected {floats} \[rows, 96\], got float32 \[7, 95\]"),
        (dict(x=x.double()), ValueError, rf"^x: expected {floats} \[rows, 96\], got float64 \[7, 96\]"),
        (dict(x=x.to("meta")), ValueError, r"^x: expected a tensor on cpu \(where the cache is\), got .* on meta"),
        (dict(x=x.bfloat16()), ValueError,
         r"^x: expected float32 \(the dtype of wk; any float dtype under autocast on cpu\), got bfloat16 \[7, 96\]"),
        (dict(q_lora=q_lora[:, :47]), ValueError, rf"^q_lora: expected {floats} \[rows, 48\], got float32 \[7, 47\]"),
        (dict(q_lora=q_lora.half()), ValueError, r"^q_lora: expected float32 \(the dtype of wq_b; .*got float16"),
        (dict(q_lora=q_lora[:-1]), ValueError,
         r"^q_lora: expected 7 along dim 0 \(one row per row of x\), got float32 \[6, 48\]"),
        (dict(slots=None), TypeError, r"^slots: expected a tensor int32 or int64 \[n\], got NoneType"),
        (dict(slots=slots.float()), ValueError, r"^slots: expected int32 or int64 \[n\], got float32 \[7\]"),
        (dict(slots=slots[None]), ValueError, r"^slots: expected int32 or int64 \[n\], got int64 \[1, 7\]"),
        (dict(slots=slots[:-1]), ValueError, r"^slots: expected 7 along dim 0 \(one slot per row of x\), got .*\[6\]"),
        (dict(slots=slots.to("meta")), ValueError, r"^slots: expected a tensor on cpu \(where the cache is\)"),
        (dict(block_table=block_table.float()), ValueError, r"^block_table: expected int32 or int64 .*, got float32"),
        (dict(block_table=block_table[0]), ValueError,
         r"^block_table: expected int32 or int64 \[requests, pages_per_request\], got int32 \[4\]"),
        (dict(block_table=block_table[:2]), ValueError,
         r"^block_table: expected at least 3 rows \(one per request, from query_lens\), got int32 \[2, 4\]"),
        (dict(seq_lens=seq_lens.float()), ValueError, r"^seq_lens: expected int32 or int64 \[requests\], got float32"),
        (dict(seq_lens=seq_lens[:2]), ValueError, r"^seq_lens: expected at least one length per request \(3\)"),
        (dict(query_lens=query_lens.tolist()), TypeError, r"^query_lens: expected a tensor int32 .*, got list"),
        (dict(query_lens=query_lens.float()), ValueError, r"^query_lens: expected int32 or int64 .*, got float32"),
        (dict(query_lens=query_lens.to("meta")), ValueError,
         r"^query_lens: expected a tensor on cpu \(where the cache is\)"),
        (dict(seq_lens=seq_lens.to("meta")), ValueError, r"^seq_lens: expected a tensor on cpu \(where the cache is\)"),
        (dict(max_query_len=0), ValueError, r"^max_query_len: expected an int >= 1, got 0"),
        (dict(max_query_len=3.0), TypeError, r"^max_query_len: expected a Python int, got float"),
        (dict(max_query_len=torch.tensor(3)), TypeError, r"^max_query_len: expected a Python int, got int64 \[\] on cpu"),
    ]
    good = dict(x=x, q_lora=q_lora, slots=slots, block_table=block_table, seq_lens=seq_lens, query_lens=query_lens,
                max_query_len=most)
    with torch.no_grad():
        for change, error, match in bad:
            with pytest.raises(error, match=match):
                indexer(**{**good, **change})
            assert torch.equal(cache, before), change
        # The same step with good inputs does write (its slots are real): the refusals above kept keys out.
        indexer(**good)
    assert not torch.equal(cache, before)


@pytest.mark.parametrize("cls", [ReferenceIndexer, FP4Indexer])
def test_indexers_take_inputs_of_other_float_dtypes_under_autocast(cls):
    """Outside autocast, x and q_lora of another dtype than the projections are refused by name
    (above); under autocast nn.Linear casts them, so the indexers take them and store keys."""
    indexer, cache = one_layer_indexer(cls)
    x, q_lora, slots, block_table, seq_lens, query_lens, most = decode_inputs(torch.Generator().manual_seed(6))
    before = cache.clone()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        chosen = indexer(x.bfloat16(), q_lora.half(), slots, block_table, seq_lens, query_lens, most)
    assert chosen.dtype == torch.int32 and (chosen >= 0).any()
    assert not torch.equal(cache, before)


@pytest.mark.parametrize("cls", [ReferenceIndexer, FP4Indexer])
def test_indexers_with_projections_of_two_dtypes(cls):
    """Each input is held to the dtype of every projection that reads it: x to wk's and
    weights_proj's, q_lora to wq_b's. With weights_proj in bfloat16 no x is right outside
    autocast, and the refusal names it before a write; with wq_b in bfloat16 a bfloat16 q_lora is
    taken, and the reference indexer scores its queries against the cache's float32 keys."""
    x, q_lora, slots, block_table, seq_lens, query_lens, most = decode_inputs(torch.Generator().manual_seed(6))
    indexer, cache = one_layer_indexer(cls)
    indexer.weights_proj.to(torch.bfloat16)
    before = cache.clone()
    with torch.no_grad(), pytest.raises(ValueError, match=r"^x: expected bfloat16 \(the dtype of weights_proj; "):
        indexer(x, q_lora, slots, block_table, seq_lens, query_lens, most)
    assert torch.equal(cache, before)
    indexer, cache = one_layer_indexer(cls)
    indexer.wq_b.to(torch.bfloat16)
    before = cache.clone()
    with torch.no_grad():
        chosen = indexer(x, q_lora.bfloat16(), slots, block_table, seq_lens, query_lens, most)
    assert (chosen >= 0).any() and not torch.equal(cache, before)


@pytest.mark.parametrize("cls", [ReferenceIndexer, FP4Indexer])
def test_indexers_refuse_float64_projections_by_name(cls):
    """A module after ``.double()``: no x could be right (the keys and queries are quantized from
    float32, bfloat16 or float16, and autocast does not cast float64), so the projection is named,
    whichever dtype x comes in and under autocast too, before a write. Before, x was refused twice
    over: as float64 by the general check, and as anything else by the projection's dtype."""
    x, q_lora, slots, block_table, seq_lens, query_lens, most = decode_inputs(torch.Generator().manual_seed(6))
    indexer, cache = one_layer_indexer(cls)
    indexer.wq_b.double()
    before = cache.clone()
    match = (r"^wq_b: expected float32 or bfloat16 or float16 weights \(the dtypes the indexers take, under autocast "
             r"too\), got float64: convert the module, e.g. .to\(torch.bfloat16\)$")
    for dtype in (torch.float64, torch.float32):
        with torch.no_grad(), pytest.raises(ValueError, match=match):
            indexer(x.to(dtype), q_lora.to(dtype), slots, block_table, seq_lens, query_lens, most)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16), pytest.raises(ValueError, match=match):
        indexer(x, q_lora, slots, block_table, seq_lens, query_lens, most)
    assert torch.equal(cache, before)
    indexer.wq_b.float()
    for name in ("k_norm", "weights_proj"):
        getattr(indexer, name).double()
        with torch.no_grad(), pytest.raises(ValueError, match=rf"^{name}: expected float32 or bfloat16 or float16"):
            indexer(x.double(), q_lora, slots, block_table, seq_lens, query_lens, most)
        getattr(indexer, name).float()
    assert torch.equal(cache, before)


@pytest.mark.parametrize("cls", [ReferenceIndexer, FP4Indexer])
def test_indexers_run_on_meta(cls):
    """A model built on meta (as large models are, before to_empty) runs a forward there, shapes
    only: the dtype check does not ask meta for autocast, which raises."""
    kwargs = dict(page_bytes=8192, index_offset=1024) if cls is FP4Indexer else {}
    indexer = cls(96, 48, num_pages=12, heads=16, topk=32, device="meta", dtype=torch.float32, **kwargs)
    x, q_lora, slots, block_table, seq_lens, query_lens, most = decode_inputs(torch.Generator().manual_seed(6))
    meta = [t.to("meta") for t in (x, q_lora, slots, block_table, seq_lens, query_lens)]
    with torch.no_grad():
        chosen = indexer(*meta, most)
    assert chosen.device.type == "meta" and chosen.shape == (7, 32) and chosen.dtype == torch.int32


@pytest.mark.parametrize(
    "kwargs, match",
    [(dict(heads=24), "heads: expected one of \\(16, 32, 64\\)"), (dict(topk=0), "topk: expected an int >= 1"),
     (dict(backend="gpu"), "backend: expected None or one of"),
     (dict(backend="aiter"), "backend: expected None, 'reference' or 'triton' .*got 'aiter'")],
)
def test_fp4_indexer_rejects_bad_configuration(kwargs, match):
    with pytest.raises(ValueError, match=match):
        FP4Indexer(96, 48, num_pages=4, dtype=torch.float32, **{"heads": 16, **kwargs})


@pytest.mark.parametrize("cls", [FP4Indexer, ReferenceIndexer])
@pytest.mark.parametrize(
    "kwargs, error, match",
    [(dict(hidden_size=0), ValueError, "hidden_size: expected an int >= 1, got 0"),
     (dict(hidden_size=32.0), TypeError, "hidden_size: expected a Python int, got float"),
     (dict(q_lora_rank="16"), TypeError, "q_lora_rank: expected a Python int, got str"),
     (dict(heads=True), TypeError, "heads: expected a Python int, got bool"),
     (dict(head_dim=128.0), TypeError, "head_dim: expected a Python int, got float"),
     (dict(softmax_scale="x"), TypeError, "softmax_scale: expected a float, got str"),
     (dict(softmax_scale=-1.0), ValueError, "softmax_scale: expected a finite positive number, got -1.0"),
     (dict(dtype=torch.float64), TypeError, "dtype: expected float32 or bfloat16 or float16, got torch.float64")],
)
def test_indexers_name_bad_arguments_when_built(cls, kwargs, error, match):
    """A bad constructor argument is refused by name when the module is built, not by torch's
    own error in nn.Linear or by an error about an internal tensor at the first forward."""
    with pytest.raises(error, match=match):
        cls(**{"hidden_size": 96, "q_lora_rank": 48, "num_pages": 4, "heads": 16, **kwargs})


def test_fp4_indexer_checks_its_arguments_with_an_external_cache():
    _, cache = fp4.allocate_merged_cache(1)
    for kwargs, match in ((dict(num_pages=True), "num_pages: expected a Python int, got bool"),
                          (dict(num_pages=1, index_offset=0.0), "index_offset: expected a Python int, got float")):
        with pytest.raises(TypeError, match=match):
            FP4Indexer(96, 48, heads=16, index_cache=cache, **kwargs)


def test_reference_indexer_keeps_the_last_key_of_a_slot(gen):
    """Rows sharing a slot, padding rows among them: each slot holds its last row's key (every
    write to a slot carries it), not whichever of the competing writes landed last."""
    torch.manual_seed(0)
    indexer = ReferenceIndexer(96, 48, num_pages=2, heads=16, topk=8)
    n = 200
    slots = torch.randint(-2, 4, (n,), generator=gen)
    x, q_lora = torch.randn(n, 96, generator=gen).bfloat16(), torch.randn(n, 48, generator=gen).bfloat16()
    with torch.no_grad():
        _, keys, _ = indexer.project(x, q_lora)
        indexer(x, q_lora, slots, torch.tensor([[0, 1]], dtype=torch.int32), torch.tensor([128]), torch.tensor([n]), n)
    flat = indexer.key_cache.view(-1, 128)
    for slot in range(4):
        last = max(r for r in range(n) if slots[r] == slot)
        assert torch.equal(flat[slot], keys[last].to(flat.dtype)), f"slot {slot}"
    assert not flat[4:].any()


def test_swap_indexers_refuses_an_indexer_as_the_model():
    """The root cannot be replaced in place: swapping a bare indexer did nothing and said nothing."""
    indexer = ReferenceIndexer(96, 48, num_pages=4, heads=16, topk=8)
    with pytest.raises(ValueError, match="model: .*ReferenceIndexer.*from_reference"):
        swap_indexers(indexer)
    assert isinstance(indexer, ReferenceIndexer)


def test_swap_indexers_names_a_bad_model_or_predicate():
    """A model that is no module, or a predicate that cannot be called, is refused by name (they
    failed with an AttributeError on named_modules or a TypeError calling a str)."""
    with pytest.raises(TypeError, match=r"^model: expected an nn.Module, got NoneType"):
        swap_indexers(None)
    with pytest.raises(TypeError, match=r"^model: expected an nn.Module, got list"):
        swap_indexers([ReferenceIndexer(96, 48, num_pages=4, heads=16, topk=8)])
    model = TinyModel(layers=1)
    with pytest.raises(TypeError, match=r"^predicate: expected None or a callable \(name, module\) -> bool, got str"):
        swap_indexers(model, predicate="layers.0.indexer")
    assert isinstance(model.layers[0]["indexer"], ReferenceIndexer)


def test_swap_indexers_leaves_the_model_whole_when_one_swap_fails():
    model = TinyModel(layers=2)
    before = [(name, type(module)) for name, module in model.named_modules()]
    # The predicate also takes an MLP, which has no indexer weights: nothing is swapped.
    with pytest.raises(TypeError, match="module: expected a ReferenceIndexer .*got Linear without wq_b, wk"):
        swap_indexers(model, predicate=lambda name, module: name.endswith("indexer") or name == "layers.1.mlp")
    assert [(name, type(module)) for name, module in model.named_modules()] == before


def test_owned_index_cache_follows_its_pages():
    """An FP4Indexer that allocates its merged pages keeps ``index_cache`` a view of them when
    the module moves (here: built on "meta", then to_empty, as large models are built)."""
    indexer = FP4Indexer(96, 48, num_pages=4, heads=16, device="meta", page_bytes=8192, index_offset=1024)
    indexer.to_empty(device="cpu")
    cache = indexer.index_cache
    assert cache.device.type == "cpu" and cache.shape == (4, 64, 68)
    assert cache.untyped_storage().data_ptr() == indexer.pages.untyped_storage().data_ptr()
    assert cache.data_ptr() - indexer.pages.data_ptr() == 1024 and cache.stride() == (8192, 68, 1)
    # An external cache stays where the engine put it.
    _, external = fp4.allocate_merged_cache(4)
    indexer = FP4Indexer(96, 48, num_pages=4, heads=16, index_cache=external)
    indexer.to("meta")
    assert indexer.index_cache is external


def test_external_index_cache_takes_no_page_arguments():
    """With ``index_cache`` the module allocates nothing: ``num_pages`` must be the cache's, and
    the arguments that shape the module's own pages must stay unset."""
    _, external = fp4.allocate_merged_cache(4)
    bad = [
        (dict(num_pages=5), "num_pages: expected 4 \\(the pages of index_cache\\), got 5"),
        (dict(page_bytes=8192), "page_bytes, index_offset: expected None and 0 with index_cache"),
        (dict(index_offset=1024), "page_bytes, index_offset: expected None and 0 with index_cache"),
    ]
    for change, match in bad:
        with pytest.raises(ValueError, match=match):
            FP4Indexer(96, 48, **{"num_pages": 4, "heads": 16, "index_cache": external, **change})
    assert FP4Indexer(96, 48, num_pages=4, heads=16, index_cache=external).index_cache is external


def test_swap_indexers_takes_one_external_cache_per_layer():
    """One ``index_cache`` for several indexers would let each layer's keys overwrite the others':
    refused, with the model left whole; one layer at a time (a predicate) takes it."""
    model = TinyModel(layers=2)
    before = [(name, type(module)) for name, module in model.named_modules()]
    _, cache = fp4.allocate_merged_cache(12)
    with pytest.raises(ValueError, match="index_cache: expected one cache per layer, got one for 2 indexers"):
        swap_indexers(model, index_cache=cache)
    assert [(name, type(module)) for name, module in model.named_modules()] == before
    swapped = swap_indexers(model, predicate=lambda name, module: name == "layers.0.indexer", index_cache=cache)
    assert [name for name, _ in swapped] == ["layers.0.indexer"] and swapped[0][1].index_cache is cache


class SharedIndexerModel(nn.Module):
    """One indexer registered at two places (layers sharing it), and at a third in a list."""

    def __init__(self):
        super().__init__()
        self.a = ReferenceIndexer(96, 48, num_pages=12, heads=16, topk=32, dtype=torch.float32)
        self.b = self.a
        self.more = nn.ModuleList([self.a, nn.Linear(4, 4)])


def test_swap_replaces_a_shared_indexer_at_every_place():
    """A module registered twice was swapped at its first place only: the model then ran the
    BF16 indexer at the other, with its own cache."""
    model = SharedIndexerModel()
    swapped = swap_indexers(model)
    assert [name for name, _ in swapped] == ["a", "b", "more.0"]
    assert isinstance(model.a, FP4Indexer) and model.b is model.a and model.more[0] is model.a


def test_swap_after_a_prefill_carries_the_cached_keys(gen):
    """Keys the reference indexer already holds (a prefill ran before the swap) are quantized
    into the FP4 cache, byte for byte what the FP4 indexer would have stored: before, the swap
    dropped them (``key_cache`` is not in the state dict) and the next top-k was near random."""
    torch.manual_seed(0)
    late, early = TinyModel(layers=1), TinyModel(layers=1)
    early.load_state_dict(late.state_dict())
    swap_indexers(early)
    prefill = decode_inputs(torch.Generator().manual_seed(7))
    with torch.no_grad():
        late(*prefill)
        early(*prefill)
        swap_indexers(late)
        step = decode_inputs(torch.Generator().manual_seed(8))
        got, want = late(*step), early(*step)
    indexer = late.layers[0]["indexer"]
    assert indexer.index_cache.any()
    assert torch.equal(indexer.index_cache, early.layers[0]["indexer"].index_cache)
    assert torch.equal(got[0], want[0])
    # With the rotation the carried keys are rotated as forward stores them.
    rotated_late, rotated_early = TinyModel(layers=1), TinyModel(layers=1)
    rotated_early.load_state_dict(rotated_late.state_dict())
    swap_indexers(rotated_early, rotate=True)
    with torch.no_grad():
        rotated_late(*prefill)
        rotated_early(*prefill)
    swap_indexers(rotated_late, rotate=True)
    assert torch.equal(rotated_late.layers[0]["indexer"].index_cache, rotated_early.layers[0]["indexer"].index_cache)


def test_from_reference_keeps_mode_gradients_and_hooks():
    ref = ReferenceIndexer(96, 48, num_pages=4, heads=16, topk=8, dtype=torch.float32).eval()
    ref.wk.weight.requires_grad_(False)
    seen = []
    ref.register_forward_hook(lambda module, args, out: seen.append(type(module).__name__))
    new = FP4Indexer.from_reference(ref)
    assert not new.training
    assert [p.requires_grad for p in new.parameters()] == [p.requires_grad for p in ref.parameters()]
    assert not new.wk.weight.requires_grad and new.wq_b.weight.requires_grad
    with torch.no_grad():
        new(*decode_inputs(torch.Generator().manual_seed(1), requests=1)[:2],
            torch.tensor([-1, -1, -1]), torch.zeros(1, 1, dtype=torch.int32), torch.tensor([0]), torch.tensor([2]), 2)
    assert seen == ["FP4Indexer"]


def test_from_reference_takes_overrides_of_its_geometry():
    """device, dtype and topk come from the reference unless given: given, they raised
    "got multiple values for keyword argument"."""
    ref = ReferenceIndexer(96, 48, num_pages=4, heads=16, topk=8, dtype=torch.float32)
    new = FP4Indexer.from_reference(ref, dtype=torch.bfloat16, topk=4, device="cpu")
    assert new.wk.weight.dtype == torch.bfloat16 and new.topk == 4
    assert torch.equal(new.wk.weight, ref.wk.weight.to(torch.bfloat16))
    model = TinyModel(layers=2)
    swapped = swap_indexers(model, dtype=torch.bfloat16, topk=16)
    assert all(m.topk == 16 and m.wq_b.weight.dtype == torch.bfloat16 for _, m in swapped)


def test_from_reference_refuses_parameters_it_would_drop():
    class BiasedIndexer(ReferenceIndexer):
        def __init__(self):
            super().__init__(96, 48, num_pages=4, heads=16, topk=8, dtype=torch.float32)
            self.extra = nn.Parameter(torch.ones(3))

    with pytest.raises(ValueError, match="module: expected the parameters of a ReferenceIndexer, got BiasedIndexer "
                                         "with extra as well"):
        FP4Indexer.from_reference(BiasedIndexer())


@pytest.mark.parametrize("cls", [ReferenceIndexer, FP4Indexer])
def test_indexers_read_a_block_table_padded_past_the_batch(cls):
    """A captured batch size pads the block table past the requests, and entries past a
    request's pages may hold anything: neither is read (the reference indexer raised IndexError
    on them, the FP4 one once refused the padding). Fewer rows than requests are refused."""
    torch.manual_seed(0)
    indexer, cache = one_layer_indexer(cls)
    x, q_lora, slots, block_table, seq_lens, query_lens, most = decode_inputs(torch.Generator().manual_seed(6))
    padded = torch.cat([block_table, torch.full((2, block_table.shape[1]), 10**6, dtype=block_table.dtype)])
    # seq_lens 200, 64, 130: requests 1 and 2 need 1 and 3 of their 4 pages.
    padded[1, 1:] = -(10**6)
    padded[2, 3] = 10**6
    with torch.no_grad():
        want = indexer(x, q_lora, slots, block_table, seq_lens, query_lens, most)
        got = indexer(x, q_lora, slots, padded, seq_lens, query_lens, most)
        assert torch.equal(got, want)
        assert (want >= 0).sum() > 0
        before = cache.clone()
        with pytest.raises(ValueError, match=r"block_table: expected at least 3 rows \(one per request"):
            indexer(x, q_lora, slots, block_table[:2], seq_lens, query_lens, most)
        assert torch.equal(cache, before)


def test_reference_indexer_runs_an_empty_or_padding_only_batch():
    """No rows, or rows with no request (an idle captured batch): the reference indexer raised
    IndexError; both indexers return -1 everywhere, and a padding-only batch still stores its keys."""
    for cls in (ReferenceIndexer, FP4Indexer):
        indexer = cls(96, 48, num_pages=4, heads=16, topk=8, dtype=torch.float32)
        none = torch.zeros(0, dtype=torch.int64)
        with torch.no_grad():
            empty = indexer(torch.randn(0, 96), torch.randn(0, 48), none, torch.zeros(0, 2, dtype=torch.int32),
                            none, none, 1)
            padding = indexer(torch.randn(3, 96), torch.randn(3, 48), torch.tensor([5, -1, -1]),
                              torch.zeros(0, 2, dtype=torch.int32), none, none, 1)
        assert empty.shape == (0, 8) and empty.dtype == torch.int32, cls
        assert padding.shape == (3, 8) and padding.dtype == torch.int32 and (padding == -1).all(), cls
        if cls is ReferenceIndexer:
            stored = indexer.key_cache.view(-1, 128)[5]
        else:
            stored = fp4.cache_views(indexer.index_cache)[0][0, 0, :, 5]  # token 5's payload
        assert stored.any(), cls


def test_carried_hooks_stay_removable_by_their_handles():
    """The hooks a swap carries are the reference's own dicts: the handle their registration
    returned removes them from the FP4Indexer too (copies left them there for good)."""
    model = TinyModel(layers=1)
    seen = []
    handle = model.layers[0]["indexer"].register_forward_hook(lambda *args: seen.append(1))
    swap_indexers(model)
    handle.remove()
    with torch.no_grad():
        model(*decode_inputs(torch.Generator().manual_seed(1)))
    assert seen == []


def test_from_reference_into_a_subclass_with_its_own_parameters():
    class GatedFP4Indexer(FP4Indexer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.gate = nn.Parameter(torch.ones(1))

    ref = ReferenceIndexer(96, 48, num_pages=4, heads=16, topk=8, dtype=torch.float32)
    new = GatedFP4Indexer.from_reference(ref)
    assert isinstance(new, GatedFP4Indexer) and torch.equal(new.wk.weight, ref.wk.weight)


def test_carry_keys_into_a_smaller_cache_that_holds_them():
    """Keys in the first pages of a larger reference cache fit a smaller FP4 cache: carried (the
    check refused any cache with fewer pages); a key past the new cache is refused by name."""
    ref = ReferenceIndexer(96, 48, num_pages=16, heads=16, topk=8, dtype=torch.float32)
    keys = torch.randn(100, 128, generator=torch.Generator().manual_seed(2))
    ref.key_cache.view(-1, 128)[:100] = keys
    new = FP4Indexer.from_reference(ref, num_pages=2)
    _, expected = fp4.allocate_merged_cache(2)
    fp4.store_keys(keys, expected, torch.arange(100))
    assert torch.equal(new.index_cache, expected)
    ref.key_cache[15, 3] = 1.0
    with pytest.raises(ValueError, match="num_pages: expected at least the 16 pages"):
        FP4Indexer.from_reference(ref, num_pages=2)


@pytest.mark.parametrize("cls", [ReferenceIndexer, FP4Indexer])
def test_indexers_compile_with_an_unbacked_padded_block_table(cls):
    """The block table's rows unbacked too (a captured batch padded past the requests, its size
    from data): no guard on them, one graph for paddings of 2, 0 and 5 rows, eager's top-k; too
    few rows still refused. (The row-count check guarded there: a UserError at trace time.)"""
    from torch._dynamo.decorators import mark_unbacked
    from torch._dynamo.utils import counters

    torch.manual_seed(0)
    indexer, cache = one_layer_indexer(cls)
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(indexer, backend="eager", fullgraph=True)
    with torch.no_grad():
        for i, pad in enumerate((2, 0, 5)):
            x, q_lora, slots, block_table, seq_lens, query_lens, most = decode_inputs(
                torch.Generator().manual_seed(6 + i))
            filler = torch.randint(0, 12, (pad, block_table.shape[1]), dtype=block_table.dtype)
            padded = torch.cat([block_table, filler])
            want = indexer(x, q_lora, slots, padded, seq_lens, query_lens, most)
            for t in (x, q_lora, slots, padded):
                mark_unbacked(t, 0)
            assert torch.equal(compiled(x, q_lora, slots, padded, seq_lens, query_lens, most), want)
        assert counters["stats"]["unique_graphs"] == 1
        # Too few rows: the bound on the unbacked size fails (Dynamo's entry check of it on torch
        # 2.13, an AssertionError naming block_table's size) before a key is written.
        before = cache.clone()
        short = block_table[:2]
        mark_unbacked(short, 0)
        with pytest.raises((RuntimeError, AssertionError), match="block_table"):
            compiled(x, q_lora, slots, short, seq_lens, query_lens, most)
        assert torch.equal(cache, before)


@pytest.mark.parametrize("backend", ["inductor", "fp4_inductor"])
def test_swapped_model_compiles_with_an_unbacked_batch(backend):
    """A swapped model compiled with its per-row inputs' batch unbacked (``mark_unbacked``, as
    a batch that comes from data would be): no guard on the batch or on its sizes agreeing, and
    the same top-k indices as eager for each layer, through torch.compile's default backend and
    through the package's."""
    from torch._dynamo.decorators import mark_unbacked

    torch.manual_seed(0)
    model = TinyModel()
    swap_indexers(model)
    fill_history(model, torch.Generator().manual_seed(5))
    inputs = decode_inputs(torch.Generator().manual_seed(6))
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True, backend=backend)
    with torch.no_grad():
        want = model(*inputs)
        for t in inputs[:3]:  # x, q_lora, slots
            mark_unbacked(t, 0)
        got = compiled(*inputs)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert torch.equal(a, b)
