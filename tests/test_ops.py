"""Op registration: fake kernels on meta tensors, backend selection, and bad input that raises
before anything is written."""

import pytest
import torch

import fp4_inductor as fp4
from fp4_inductor import ops

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
        (dict(weights=case["weights"][:, :8]), "weights: expected float32 \\[5, 16\\]"),
        (dict(query=query[0]), "query: expected \\(payload, scales\\)"),
        (dict(query=(query[0], query[1][:, :, :2])), "query\\[1\\] \\(scales\\)"),
        (dict(query_starts=case["query_starts"][:2]), "query_starts: expected 3 along dim 0"),
        (dict(row_ends=case["row_ends"][:3]), "row_ends"),
        (dict(block_table=case["block_table"].float()), "block_table: expected int32 or int64"),
        (dict(max_query_len=0), "max_query_len: expected an int >= 1"),
        (dict(cache=case["buffer"]), "cache: expected uint8 \\[pages, 64, 68\\]"),
    ]
    for change, match in bad:
        with pytest.raises((ValueError, TypeError), match=match):
            fp4.score_paged(**{**good, **change})


def test_quantize_queries_rejects_heads():
    with pytest.raises(ValueError, match="q: expected \\(16, 32, 64\\) heads, got float32 \\[2, 48, 128\\]"):
        fp4.quantize_queries(torch.zeros(2, 48, 128))
