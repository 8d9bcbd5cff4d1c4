"""Op registration: fake kernels on meta tensors, backend selection, and bad input that raises
before anything is written."""

import contextlib
import os

import pytest
import torch

import fp4_inductor as fp4
from fp4_inductor import ops, reference

from helpers import merged_cache, random_keys, scoring_case


def meta(*shape, dtype=torch.float32):
    return torch.empty(*shape, dtype=dtype, device="meta")


def test_fake_quantize_queries():
    payload, scales = torch.ops.fp4.quantize_queries(meta(5, 32, 128, dtype=torch.bfloat16))
    assert payload.shape == (5, 32, 64) and payload.dtype == torch.uint8 and payload.is_contiguous()
    assert scales.shape == (5, 1, 4, 16, 4) and scales.dtype == torch.uint8 and scales.is_contiguous()


def test_fake_score_paged_and_out():
    cache = torch.empty(10, 8192, dtype=torch.uint8, device="meta")[:, 1024 : 1024 + 4352].unflatten(1, (64, 68))
    args = (meta(6, 64, 64, dtype=torch.uint8), meta(6, 1, 4, 16, 4, dtype=torch.uint8), cache, meta(6, 64),
            meta(3, 7, dtype=torch.int32), meta(4, dtype=torch.int32), meta(6, dtype=torch.int32), 2)
    out = torch.ops.fp4.score_paged(*args)
    assert out.shape == (6, 7 * 64) and out.dtype == torch.float32 and out.stride() == (7 * 64, 1)
    torch.ops.fp4.score_paged_out(meta(6, 7 * 64), *args)


def test_fake_select_topk():
    values, indices = torch.ops.fp4.select_topk(meta(4, 1000), meta(4, dtype=torch.int32), 64)
    assert values.shape == indices.shape == (4, 64)
    assert values.dtype == torch.float32 and indices.dtype == torch.int32


def test_fake_store_keys_checks():
    cache = torch.empty(3, 64, 68, dtype=torch.uint8, device="meta")
    torch.ops.fp4.store_keys(meta(5, 128), cache, meta(5, dtype=torch.int64))
    with pytest.raises(ValueError, match="slots"):
        torch.ops.fp4.store_keys(meta(5, 128), cache, meta(4, dtype=torch.int64))


def test_decode_layout_on_meta():
    starts, ends = torch.ops.fp4.decode_layout(meta(3, dtype=torch.int32), meta(3, dtype=torch.int32), 9)
    assert starts.shape == (4,) and ends.shape == (9,) and starts.dtype == ends.dtype == torch.int32


def test_store_keys_declares_mutation():
    schema = torch.ops.fp4.store_keys.default._schema
    assert [a.name for a in schema.arguments if a.alias_info and a.alias_info.is_write] == ["cache"]
    schema = torch.ops.fp4.score_paged_out.default._schema
    assert [a.name for a in schema.arguments if a.alias_info and a.alias_info.is_write] == ["out"]


def test_backend_selection_on_cpu():
    assert ops.resolve_backend(None, torch.device("cpu"), "score_paged", offers_aiter=True) == "reference"
    with pytest.raises(ValueError, match="backend: expected None or one of"):
        ops.resolve_backend("cuda", torch.device("cpu"), "score_paged")
    with pytest.raises(ValueError, match="AITER provides only the scoring kernel"):
        ops.resolve_backend("aiter", torch.device("cpu"), "store_keys")
    with pytest.raises(RuntimeError, match="backend='aiter'"):
        ops.resolve_backend("aiter", torch.device("cpu"), "score_paged", offers_aiter=True)


def test_triton_on_cpu_needs_interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET=1"):
        fp4.select_topk(torch.zeros(2, 8), torch.zeros(2, dtype=torch.int32), 2, backend="triton")


# ---------------------------------------------------------------- bad input writes nothing


def store_case(gen):
    buffer, cache = merged_cache(4, "cpu", gen=gen)
    return buffer, cache, random_keys(6, gen), torch.arange(6)


@pytest.mark.parametrize(
    "mutate, error, match",
    [
        (lambda k, c, s: (k.half().double(), c, s), ValueError, "keys: expected float32 or bfloat16 or float16 \\[n, 128\\], got float64"),
        (lambda k, c, s: (k[:, :64], c, s), ValueError, "keys: expected .* got float32 \\[6, 64\\]"),
        (lambda k, c, s: (k, c, s[:5]), ValueError, "slots: expected 6 along dim 0"),
        (lambda k, c, s: (k, c, s.float()), ValueError, "slots: expected int32 or int64"),
        (lambda k, c, s: (k, c.view(torch.int8), s), ValueError, "cache: expected uint8"),
        (lambda k, c, s: (k, c[:, :, :60], s), ValueError, "cache: expected uint8 \\[pages, 64, 68\\]"),
        (lambda k, c, s: (k.tolist(), c, s), TypeError, "keys: expected a tensor"),
        (lambda k, c, s: (k, c, s.view(2, 3)), ValueError, "slots"),
        # An extra trailing dimension of size 1: the rank alone is wrong.
        (lambda k, c, s: (k.unsqueeze(-1), c, s), ValueError, "keys: expected .* got float32 \\[6, 128, 1\\]"),
        (lambda k, c, s: (k, c, s.unsqueeze(-1)), ValueError, "slots: expected int32 or int64 \\[n\\], got int64 \\[6, 1\\]"),
    ],
)
def test_store_keys_rejects_and_writes_nothing(mutate, error, match, gen):
    buffer, cache, keys, slots = store_case(gen)
    before = buffer.clone()
    keys, bad_cache, slots = mutate(keys, cache, slots)
    with pytest.raises(error, match=match):
        fp4.store_keys(keys, bad_cache, slots)
    assert torch.equal(buffer, before)


def test_score_rejects_bad_input(gen):
    case = scoring_case(gen, "cpu", query_lens=[1, 2], seq_lens=[70, 10], heads=16)
    query = fp4.quantize_queries(case["q"])
    good = dict(query=query, cache=case["cache"], weights=case["weights"], block_table=case["block_table"],
                query_starts=case["query_starts"], row_ends=case["row_ends"], max_query_len=2)
    bad = [
        (dict(weights=case["weights"].double()), "weights: expected float32"),
        (dict(weights=case["weights"][:, :8]),
         "weights: expected 16 along dim 1 \\(one weight per head of query\\), got float32 \\[5, 8\\]"),
        (dict(query=query[0]), "query: expected \\(payload, scales\\)"),
        (dict(query=(query[0], query[1][:, :, :2])), "query\\[1\\] \\(scales\\)"),
        (dict(query_starts=case["query_starts"][:2]), "query_starts: expected 3 along dim 0"),
        (dict(row_ends=case["row_ends"][:3]), "row_ends"),
        (dict(block_table=case["block_table"].float()), "block_table: expected int32 or int64"),
        (dict(max_query_len=0), "max_query_len: expected an int >= 1"),
        (dict(cache=case["buffer"]), "cache: expected uint8 \\[pages, 64, 68\\]"),
        (dict(cache=case["cache"][:0]), "cache: expected at least one page for block_table"),
        # Types the op's schema would refuse: the wrapper names the argument first.
        (dict(block_table=case["block_table"].tolist()), "block_table: expected a tensor int32 or int64"),
        (dict(query=(query[0], query[1].tolist())), "query\\[1\\] \\(scales\\): expected a tensor"),
        (dict(max_query_len=2.0), "max_query_len: expected a Python int, got float"),
        (dict(max_query_len=True), "max_query_len: expected a Python int, got bool"),
    ]
    for change, match in bad:
        with pytest.raises((ValueError, TypeError), match=match):
            fp4.score_paged(**{**good, **change})
    rows, width = query[0].shape[0], case["block_table"].shape[1] * 64
    column_strided = torch.full((rows, width, 2), float("nan"))[..., 0]
    with pytest.raises(ValueError, match="out: expected unit stride along keys"):
        fp4.score_paged(**good, out=column_strided)
    assert column_strided.isnan().all()
    # The bf16-query mode returns a new tensor: an out= it would leave untouched is refused.
    with pytest.raises(ValueError, match="out: the bf16-query mode returns a new tensor"):
        fp4.score_paged(**{**good, "query": case["q"]}, out=torch.full((rows, width), float("nan")))


def test_select_topk_sorted_must_be_a_bool():
    import numpy as np

    with pytest.raises(TypeError, match="sorted: expected a bool, got int 1$"):
        fp4.select_topk(torch.zeros(2, 8), torch.full((2,), 8), 2, sorted=1)
    # Not "got bool": numpy's bool is named by its module (numpy.bool_ before numpy 2).
    with pytest.raises(TypeError, match="sorted: expected a bool, got numpy.bool_? True$"):
        fp4.select_topk(torch.zeros(2, 8), torch.full((2,), 8), 2, sorted=np.bool_(True))


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_row_count_mismatch_names_the_argument_and_the_queries(device):
    """weights and row_ends hold one entry per query row: a mismatch names the tensor that
    differs and says its size comes from the queries (their name in the call), not a bare
    shape. On meta tensors the ops run their fake kernels, which check the same way."""
    cache = torch.zeros(2, 64, 68, dtype=torch.uint8, device=device)
    q = torch.zeros(3, 16, 128, device=device)
    query = (torch.zeros(3, 16, 64, dtype=torch.uint8, device=device),
             torch.zeros(3, 1, 4, 16, 4, dtype=torch.uint8, device=device))
    weights, block_table = torch.zeros(3, 16, device=device), torch.zeros(1, 2, dtype=torch.int32, device=device)
    query_starts, row_ends = torch.tensor([0, 3], device=device), torch.full((3,), 64, device=device)
    layout = (block_table, query_starts, row_ends, 3)
    four_rows = torch.zeros(4, 16, device=device)
    two_ends = row_ends[:2]
    two_ends_layout = (block_table, query_starts, two_ends, 3)
    weights_rows = "weights: expected 3 along dim 0 \\(one row per row of {}\\), got float32 \\[4, 16\\] on " + device
    ends_rows = "row_ends: expected 3 along dim 0 \\(one end per row of {}\\), got int64 \\[2\\] on " + device
    bad = [
        (lambda: fp4.score_paged(query, cache, four_rows, *layout), weights_rows.format("query")),
        (lambda: torch.ops.fp4.score_paged(*query, cache, four_rows, *layout), weights_rows.format("query")),
        (lambda: fp4.score_paged(q, cache, four_rows, *layout), weights_rows.format("query")),
        (lambda: torch.ops.fp4.score_paged_bf16(q, cache, four_rows, *layout), weights_rows.format("query")),
        (lambda: fp4.decode_step(q, cache, four_rows, *layout, 2), weights_rows.format("q")),
        (lambda: fp4.score_paged(query, cache, weights, *two_ends_layout), ends_rows.format("query")),
        (lambda: fp4.decode_step(q, cache, weights, *two_ends_layout, 2), ends_rows.format("q")),
        (lambda: fp4.select_topk(torch.zeros(3, 128, device=device), two_ends, 2), ends_rows.format("logits")),
    ]
    for call, match in bad:
        with pytest.raises(ValueError, match=match + "$"):
            call()


def test_valid_calls_check_once(gen, monkeypatch):
    """A valid call runs each op's input checks once (in the op), not again in its public
    wrapper: the checks are host time on every eager call."""
    case = scoring_case(gen, "cpu", query_lens=[1, 2], seq_lens=[70, 10], heads=16)
    calls = {}

    def counted(name):
        check = getattr(ops, name)

        def wrapper(*args):
            calls[name] = calls.get(name, 0) + 1
            return check(*args)
        monkeypatch.setattr(ops, name, wrapper)

    for name in ("check_store_keys", "check_queries", "check_score", "check_score_bf16", "check_topk"):
        counted(name)
    _, cache, keys, slots = store_case(gen)
    fp4.store_keys(keys, cache, slots)
    query = fp4.quantize_queries(case["q"])
    args = (case["cache"], case["weights"], case["block_table"], case["query_starts"], case["row_ends"], 2)
    logits = fp4.score_paged(query, *args)
    fp4.score_paged(query, *args, out=torch.empty_like(logits))
    fp4.score_paged(case["q"], *args)
    fp4.select_topk(logits, case["row_ends"], 4)
    assert calls == {"check_store_keys": 1, "check_queries": 1, "check_score": 2, "check_score_bf16": 1,
                     "check_topk": 1}


def test_wrappers_name_arguments_of_the_wrong_type(gen):
    """Arguments the ops' schemas would refuse get the named error from the public wrapper."""
    case = scoring_case(gen, "cpu", query_lens=[1, 2], seq_lens=[70, 10], heads=16)
    query = fp4.quantize_queries(case["q"])
    args = (case["cache"], case["weights"], case["block_table"], case["query_starts"], case["row_ends"], 2)
    bad = [
        (lambda: fp4.quantize_queries(case["q"].tolist()), "q: expected a tensor float32"),
        (lambda: fp4.select_topk(case["q"][:, 0].tolist(), case["row_ends"], 4), "logits: expected a tensor"),
        (lambda: fp4.select_topk(case["q"][:, 0, :].float(), case["row_ends"].tolist(), 4), "row_ends: expected a tensor"),
        (lambda: fp4.select_topk(case["q"][:, 0, :].float(), case["row_ends"], 4.0), "k: expected a Python int"),
        (lambda: fp4.score_paged(query, *args, out=[0.0]), "out: expected None or a float32 tensor, got list"),
    ]
    for call, match in bad:
        with pytest.raises(TypeError, match=match):
            call()


def test_quantize_queries_rejects_heads():
    with pytest.raises(ValueError, match="q: expected \\(16, 32, 64\\) heads, got float32 \\[2, 48, 128\\]"):
        fp4.quantize_queries(torch.zeros(2, 48, 128))


def test_score_out_on_another_device_is_rejected(gen):
    case = scoring_case(gen, "cpu", query_lens=[1, 2], seq_lens=[70, 10], heads=16)
    query = fp4.quantize_queries(case["q"])
    out = torch.empty(5, case["block_table"].shape[1] * 64, device="meta")
    with pytest.raises(ValueError, match="out: expected a tensor on cpu \\(where the cache is\\)"):
        fp4.score_paged(query, case["cache"], case["weights"], case["block_table"], case["query_starts"],
                        case["row_ends"], 2, out=out)


def strided(t, device):
    """``t`` on ``device`` as every other entry of a tensor twice as long (stride 2)."""
    return torch.stack([t, torch.zeros_like(t)], 1).to(device)[:, 0]


def test_index_tensors_with_any_strides(backend_device, gen):
    """slots, query_starts and row_ends may be slices or expanded views (the kernels read them at
    ptr + i, so the launchers make them contiguous first): results equal the contiguous call's."""
    backend, device = backend_device
    buffer, cache = merged_cache(4, "cpu", gen=gen)
    buffer = buffer.to(device)
    cache = fp4.index_section(buffer, 1024)
    expected_buffer = buffer.clone()
    expected_cache = fp4.index_section(expected_buffer, 1024)
    keys = random_keys(6, gen).to(device)
    slots = torch.randperm(4 * 64, generator=gen)[:6]
    fp4.store_keys(keys, cache, strided(slots, device), backend=backend)
    fp4.store_keys(keys, expected_cache, slots.to(device), backend="reference")
    assert torch.equal(buffer.cpu(), expected_buffer.cpu())
    # One slot for every row (an expanded view, stride 0), all rows the same key.
    same = random_keys(1, gen).repeat(5, 1).to(device)
    fp4.store_keys(same, cache, torch.tensor([77], device=device).expand(5), backend=backend)
    fp4.store_keys(same[:1], expected_cache, torch.tensor([77], device=device), backend="reference")
    assert torch.equal(buffer.cpu(), expected_buffer.cpu())

    case = scoring_case(gen, device, query_lens=[2, 1, 3], seq_lens=[150, 64, 200], heads=16)
    query = fp4.quantize_queries(case["q"], backend=backend)
    args = (query, case["cache"], case["weights"], case["block_table"])
    want = fp4.score_paged(*args, case["query_starts"], case["row_ends"], 3, backend=backend)
    got = fp4.score_paged(*args, strided(case["query_starts"], device), strided(case["row_ends"], device), 3,
                          backend=backend)
    valid = reference.valid_region(case["query_starts"], case["row_ends"], want.shape[1])
    assert torch.equal(got[valid], want[valid])
    want_v, want_i = fp4.select_topk(want, case["row_ends"], 20, sorted=True, backend=backend)
    got_v, got_i = fp4.select_topk(want, strided(case["row_ends"], device), 20, sorted=True, backend=backend)
    assert torch.equal(got_i, want_i) and torch.equal(got_v, want_v)


def test_queries_and_out_with_any_strides(backend_device, gen):
    """A query payload and scales that are views (not contiguous) score as the contiguous ones do
    on every backend (the Triton launcher copies them), and ``out`` may have padded rows; ``out``
    whose rows overlap is refused before anything is written."""
    backend, device = backend_device
    case = scoring_case(gen, device, query_lens=[2, 1, 3], seq_lens=[150, 64, 200], heads=16)
    payload, scales = fp4.quantize_queries(case["q"], backend=backend)
    wide = torch.cat([payload, torch.zeros_like(payload)], dim=2)[:, :, :64]
    view = (wide, torch.stack([scales, torch.zeros_like(scales)], 1)[:, 0])
    assert not view[0].is_contiguous() and not view[1].is_contiguous()
    args = (case["cache"], case["weights"], case["block_table"], case["query_starts"], case["row_ends"], 3)
    want = fp4.score_paged((payload, scales), *args, backend=backend)
    got = fp4.score_paged(view, *args, backend=backend)
    valid = reference.valid_region(case["query_starts"], case["row_ends"], want.shape[1])
    assert torch.equal(got[valid], want[valid])
    rows, width = want.shape
    padded = torch.full((rows, width + 64), 7.0, device=device)
    fp4.score_paged((payload, scales), *args, out=padded[:, :width], backend=backend)
    assert torch.equal(padded[:, :width][valid], want[valid]) and padded[:, width:].eq(7.0).all()
    for out in (torch.full((width,), 7.0, device=device).expand(rows, width),
                torch.full((rows * width,), 7.0, device=device).as_strided((rows, width), (width // 2, 1))):
        with pytest.raises(ValueError, match="out: expected rows that do not overlap"):
            fp4.score_paged((payload, scales), *args, out=out, backend=backend)
        assert out.eq(7.0).all()


def test_dequantize_pages_names_page_ids_outside_the_cache(gen):
    _, cache = merged_cache(4, "cpu", gen=gen)
    for pages in ([-1], [0, 4]):
        with pytest.raises(ValueError, match="pages: expected page ids in \\[0, 4\\), got"):
            fp4.dequantize_pages(cache, torch.tensor(pages))
    assert fp4.dequantize_pages(cache, torch.tensor([[3, 0]])).shape == (1, 2, 64, 128)


def test_block_table_entries_outside_the_cache(gen):
    """The entries a row reads must be pages of the cache. They are not checked on the decode
    path; the reference scores such a page's keys as NaN (the Triton kernel's read is undefined),
    and ``testing.check_block_table`` names the first one. Entries past the pages rows read may
    hold anything."""
    from fp4_inductor.testing import check_block_table

    case = scoring_case(gen, "cpu", query_lens=[2, 1, 3], seq_lens=[150, 64, 200], heads=16)
    cache, block_table = case["cache"], case["block_table"].clone()
    layout = (case["query_starts"], case["row_ends"])
    pages = cache.shape[0]
    block_table[1, 1:] = -1  # request 1 reads one page: the rest is never read
    check_block_table(block_table, cache, *layout)
    query = fp4.quantize_queries(case["q"])
    args = (case["weights"], block_table, *layout, 3)
    good = fp4.score_paged(query, cache, *args)
    assert not good.isnan().any()
    for bad_id in (pages, -5):
        bad = block_table.clone()
        bad[2, 3] = bad_id  # request 2 (rows 3-5, up to 200 keys) reads pages 0-3
        with pytest.raises(ValueError, match=f"block_table: expected page ids in \\[0, {pages}\\) where rows read "
                                             f"keys, got {bad_id} at \\[2, 3\\] \\(bad entries: 1\\)"):
            check_block_table(bad, cache, *layout)
        logits = fp4.score_paged(query, cache, case["weights"], bad, *layout, 3)
        valid = reference.valid_region(*layout, logits.shape[1])
        on_bad_page = torch.zeros_like(valid)
        on_bad_page[3:6, 192:256] = True
        assert logits[valid & on_bad_page].isnan().all() and (valid & on_bad_page).sum() == 6 + 7 + 8
        assert torch.equal(logits[valid & ~on_bad_page], good[valid & ~on_bad_page])


def test_check_block_table_checks_the_layout_values(gen):
    """``testing.check_block_table`` also refuses the layout values no ``decode_layout`` makes,
    naming the argument, the first bad entry and its index, and takes what decode_layout makes
    from odd lengths: no rows for a negative query length, rows past num_rows dropped, an end past
    the block table's width (the scorer cuts it there), DCP ends, graph-padding rows."""
    from fp4_inductor.testing import check_block_table

    case = scoring_case(gen, "cpu", query_lens=[2, 1, 3], seq_lens=[150, 64, 200], heads=16)
    cache, block_table = case["cache"], case["block_table"]
    starts, ends = case["query_starts"], case["row_ends"]  # [0, 2, 3, 6], 8 rows
    check_block_table(block_table, cache, starts, ends)
    seq_lens = torch.tensor([150, 2**40, 3])  # 2**40: an end that saturates, past the width
    for query_lens, num_rows, rank in (([2, 1, 3], 8, 0), ([2, -1, 3], 4, 1), ([4, 3, 3], 5, 0)):
        layout = fp4.decode_layout(seq_lens, torch.tensor(query_lens), num_rows, rank, 2)
        check_block_table(block_table, cache, *layout)
    past_width = ends.clone()
    past_width[0] = block_table.shape[1] * 64 + 1
    check_block_table(block_table, cache, starts, past_width)
    bad = [
        (torch.tensor([1, 2, 3, 6]), ends,
         "query_starts: expected 0 at \\[0\\] \\(request 0 starts at row 0\\), got 1$"),
        (torch.tensor([0, 3, 2, 1]), ends, "query_starts: expected non-decreasing entries \\(a request starts where "
                                           "the one before it ends\\), got 2 at \\[2\\] \\(bad entries: 2\\)$"),
        (torch.tensor([0, 2, 9, 10], dtype=torch.int32), ends,
         "query_starts: expected entries at most 8 \\(the rows of row_ends\\), got 9 at \\[2\\] \\(bad entries: 2\\)$"),
        (starts, torch.tensor([5, 6, 7, -1, 2, 3, 0, -4]),
         "row_ends: expected entries >= 0 \\(the keys each row sees\\), got -1 at \\[3\\] \\(bad entries: 2\\)$"),
    ]
    for query_starts, row_ends, match in bad:
        with pytest.raises(ValueError, match=match):
            check_block_table(block_table, cache, query_starts, row_ends)


def test_decode_layout_drops_rows_past_num_rows(gen):
    """Requests asking for more rows than num_rows: query_starts is clamped, so the scorer never
    goes past the last row (it read and wrote out of bounds before)."""
    query_starts, row_ends = fp4.decode_layout(torch.tensor([100, 90, 80]), torch.tensor([2, 2, 2]), 3)
    assert query_starts.tolist() == [0, 2, 3, 3]
    assert row_ends.tolist() == [99, 100, 89]


def test_huge_max_query_len_is_cut_to_the_rows(triton_backend_device, gen, monkeypatch):
    """max_query_len only sizes the launch: a hint far above the rows there are launches no more
    row blocks than rows (CUDA caps grid dimension 1 at 65535; the interpreter would run them
    all), and gives the same logits."""
    backend, device = triton_backend_device
    from fp4_inductor.kernels import score

    case = scoring_case(gen, device, query_lens=[2, 1], seq_lens=[150, 64], heads=16)
    rows = case["q"].shape[0]
    query = fp4.quantize_queries(case["q"], backend=backend)
    args = (query, case["cache"], case["weights"], case["block_table"], case["query_starts"], case["row_ends"])
    want = fp4.score_paged(*args, 2, backend=backend)
    real = score.wrapped

    def checked(kernel):
        launcher = real(kernel)

        class Grid:
            def __getitem__(self, grid):
                assert grid[1] <= rows, f"{grid[1]} row blocks for {rows} rows"
                return launcher[grid]

        return Grid()

    monkeypatch.setattr(score, "wrapped", checked)
    got = fp4.score_paged(*args, 100_000, backend=backend)
    valid = reference.valid_region(case["query_starts"], case["row_ends"], want.shape[1])
    assert torch.equal(got[valid], want[valid])


def test_dequantize_checks_its_inputs(gen):
    buffer, cache = merged_cache(4, "cpu", gen=gen)
    keys = random_keys(64, gen)
    fp4.store_keys(keys, cache, torch.arange(64) + 128)  # page 2
    back = fp4.dequantize_pages(cache, torch.tensor([2]))
    assert back.shape == (1, 64, 128) and torch.isfinite(back).all()
    q_payload, q_scales = fp4.quantize_queries(random_keys(3 * 16, gen).view(3, 16, 128))
    assert fp4.dequantize_queries(q_payload, q_scales, torch.float64).dtype == torch.float64
    bad = [
        (lambda: fp4.dequantize_pages(cache, torch.tensor([2.0])), ValueError, "pages: expected an int32 or int64"),
        (lambda: fp4.dequantize_pages(cache, [2]), TypeError, "pages: expected an int32 or int64 tensor"),
        (lambda: fp4.dequantize_pages(cache[:, :, :60], torch.tensor([2])), ValueError, "cache: expected uint8"),
        (lambda: fp4.dequantize_pages(cache, torch.tensor([2]), torch.int32), TypeError,
         "dtype: expected float64 or float32 or bfloat16 or float16, got torch.int32"),
        (lambda: fp4.dequantize_queries(q_payload, q_scales, torch.float8_e4m3fn), TypeError,
         "dtype: expected float64 or float32 or bfloat16 or float16, got torch.float8_e4m3fn"),
        (lambda: fp4.dequantize_queries(q_payload, q_scales[:2]), ValueError, "scales: expected uint8 \\[3, 1, 4, 16, 4\\]"),
        (lambda: fp4.dequantize_queries(q_payload[:, :8], q_scales), ValueError, "payload: expected \\(16, 32, 64\\) heads"),
        (lambda: fp4.dequantize_queries(q_payload.float(), q_scales), ValueError, "payload: expected uint8"),
    ]
    for call, error, match in bad:
        with pytest.raises(error, match=match):
            call()


def test_backend_must_be_a_name():
    with pytest.raises(TypeError, match="backend: expected None or one of .* got int"):
        fp4.quantize_queries(torch.zeros(2, 16, 128), backend=1)
    with pytest.raises(ValueError, match="backend: expected None or one of .* got 'gpu'"):
        fp4.select_topk(torch.zeros(2, 8), torch.full((2,), 8), 2, backend="gpu")


# ---------------------------------------------------------------- the launch's device


def test_on_device_makes_another_gpu_current(monkeypatch):
    """Triton launches on the current device: a tensor on another GPU makes its GPU current for
    the launch; the current GPU, the CPU and fake tensors take no guard. (No second GPU here: the
    device of a stand-in object, torch.cuda's calls recorded.)"""
    from types import SimpleNamespace

    guards = []
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "device", lambda device: guards.append(device) or contextlib.nullcontext())
    with ops.on_device(SimpleNamespace(device=torch.device("cuda", 1))):
        pass
    assert guards == [torch.device("cuda", 1)]
    for t in (SimpleNamespace(device=torch.device("cuda", 0)), torch.zeros(1)):
        with ops.on_device(t):
            pass
    fake_cuda = SimpleNamespace(device=torch.device("cuda", 1))
    monkeypatch.setattr(ops, "is_fake", lambda t: t is fake_cuda)
    with ops.on_device(fake_cuda):
        pass
    assert guards == [torch.device("cuda", 1)], "a guard taken for the current GPU, the CPU or a fake tensor"


@pytest.mark.interpreter
def test_every_kernel_launch_takes_the_device_guard(gen, monkeypatch):
    """Each op's Triton launch runs under ``on_device`` of a tensor it writes or reads: store,
    quantize, score (FP4 and bf16 queries) and top-k."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("needs TRITON_INTERPRET=1")
    seen = []
    real = ops.on_device
    monkeypatch.setattr(ops, "on_device", lambda t: seen.append(tuple(t.shape)) or real(t))
    case = scoring_case(gen, "cpu", query_lens=[2, 1], seq_lens=[70, 40], heads=16)
    layout = (case["cache"], case["weights"], case["block_table"], case["query_starts"], case["row_ends"],
              case["max_query_len"])
    fp4.store_keys(random_keys(2, gen), case["cache"], torch.tensor([-1, -1]), backend="triton")
    query = fp4.quantize_queries(case["q"], backend="triton")
    logits = fp4.score_paged(query, *layout, backend="triton")
    fp4.score_paged(case["q"].bfloat16(), *layout, backend="triton")
    fp4.select_topk(logits, case["row_ends"], 4, backend="triton")
    cache, q = tuple(case["cache"].shape), tuple(case["q"].shape)
    assert seen == [cache, q, tuple(logits.shape), tuple(logits.shape), tuple(logits.shape)], seen
