"""fp4_inductor.decode_step: the fused step (store this step's keys, quantize the queries, score,
select) equals the ops called one by one, checks everything before it writes, and reads nothing on
the host."""

import pytest
import torch

import fp4_inductor as fp4
from fp4_inductor import formats as F
from fp4_inductor.testing import forbid_host_sync

from helpers import clone_case, random_keys, scoring_case

K = 24


def step_case(gen, device, heads=16):
    """A scoring case plus this step's keys: one per real row, at slots inside each request's
    pages (the last query_lens tokens of its history), and -1 for the two graph-padding rows."""
    case = scoring_case(gen, device, query_lens=[3, 1, 2], seq_lens=[150, 64, 97], heads=heads)
    block_table = case["block_table"].cpu().long()
    token_slots = (block_table.unsqueeze(-1) * F.PAGE_TOKENS + torch.arange(F.PAGE_TOKENS)).flatten(1)
    slots = torch.cat([token_slots[0, 147:150], token_slots[1, 63:64], token_slots[2, 95:97], torch.tensor([-1, -1])])
    case["keys"] = random_keys(slots.shape[0], gen, torch.bfloat16).to(device)
    case["slots"] = slots.to(device)
    return case


def one_by_one(case, k, query_precision, backend, sorted=False):
    fp4.store_keys(case["keys"], case["cache"], case["slots"], backend=backend)
    query = fp4.quantize_queries(case["q"], backend=backend) if query_precision == "fp4" else case["q"]
    logits = fp4.score_paged(query, case["cache"], case["weights"], case["block_table"], case["query_starts"],
                             case["row_ends"], case["max_query_len"], backend=backend)
    return fp4.select_topk(logits, case["row_ends"], k, sorted=sorted, backend=backend)


def fused(case, k, **kwargs):
    return fp4.decode_step(case["q"], case["cache"], case["weights"], case["block_table"], case["query_starts"],
                           case["row_ends"], case["max_query_len"], k, keys=case["keys"], slots=case["slots"], **kwargs)


def as_sets(values, indices):
    """Each row's (index, value) pairs in index order: the top-k set, whatever order it came in."""
    order = torch.argsort(indices.long(), dim=1, stable=True)
    return torch.gather(indices, 1, order), torch.gather(values, 1, order)


@pytest.mark.parametrize("query_precision", ["fp4", "bf16"])
def test_decode_step_equals_the_ops_one_by_one(backend_device, gen, query_precision):
    backend, device = backend_device
    case = step_case(gen, device)
    want_case = clone_case(case)
    before = case["buffer"].clone()
    values, indices = fused(case, K, query_precision=query_precision, backend=backend)
    want_values, want_indices = one_by_one(want_case, K, query_precision, backend)
    assert torch.equal(case["buffer"], want_case["buffer"]), "the fused step stored other bytes"
    assert not torch.equal(case["buffer"], before), "the step's keys were not stored"
    got, want = as_sets(values, indices), as_sets(want_values, want_indices)
    rows = int(case["query_starts"][-1])
    assert torch.equal(got[0][:rows], want[0][:rows])
    assert torch.equal(got[1][:rows], want[1][:rows])
    # Graph-padding rows select nothing.
    assert (indices[rows:] == -1).all() and (values[rows:] == float("-inf")).all()


def test_decode_step_sorted_and_without_keys(backend_device, gen):
    backend, device = backend_device
    case = step_case(gen, device)
    before = case["buffer"].clone()
    values, indices = fp4.decode_step(case["q"], case["cache"], case["weights"], case["block_table"],
                                      case["query_starts"], case["row_ends"], case["max_query_len"], K,
                                      sorted=True, backend=backend)
    assert torch.equal(case["buffer"], before), "no keys given, yet the cache changed"
    want_values, want_indices = one_by_one(dict(case, keys=case["keys"][:0], slots=case["slots"][:0]), K, "fp4",
                                           backend, sorted=True)
    assert torch.equal(indices, want_indices) and torch.equal(values, want_values)


def bad_calls(case):
    """(arguments changed, error, message) for calls decode_step must refuse before writing."""
    rows, heads = case["weights"].shape
    return [
        (dict(weights=case["weights"][:, :-1]), ValueError, "weights: expected"),
        (dict(block_table=case["block_table"].float()), ValueError, "block_table: expected"),
        (dict(k=0), ValueError, "k: expected an int >= 1"),
        (dict(k=2.0), TypeError, "k: expected a Python int"),
        (dict(k=2**31), ValueError, "k: expected an int < 2147483648"),  # int32 indices
        (dict(k=2**63), ValueError, "k: expected an int < 2147483648"),
        (dict(max_query_len=10**30), ValueError, "max_query_len: expected an int that fits int64"),
        # An int of 5000 digits is named by its size (str() of it raises ValueError of its own).
        (dict(max_query_len=10**5000), ValueError,
         "max_query_len: expected an int that fits int64, got an int of 16610 bits"),
        (dict(sorted=-(10**5000)), TypeError, "sorted: expected a bool, got an int of 16610 bits"),
        (dict(query_precision=10**5000), ValueError, "query_precision: expected one of .*, got an int of 16610 bits"),
        (dict(backend=10**5000), TypeError, "backend: expected None or one of .*, got an int of 16610 bits"),
        (dict(sorted=1), TypeError, "sorted: expected a bool"),
        (dict(max_query_len=0), ValueError, "max_query_len: expected an int >= 1"),
        (dict(query_precision="fp8"), ValueError, r"query_precision: expected one of \('fp4', 'bf16'\)"),
        (dict(query_precision="bf16", backend="aiter"), ValueError, "query_precision: expected 'fp4' with backend"),
        (dict(slots=None), ValueError, "keys, slots: expected both or neither"),
        (dict(slots=case["slots"][:-1]), ValueError, "slots: expected"),
        (dict(q=case["q"][:, :, :64]), ValueError, "q: expected"),
        (dict(backend="cuda"), ValueError, "backend: expected None or one of"),
        (dict(backend="aiter"), RuntimeError, "backend='aiter'"),  # no ROCm GPU here
    ]


BAD_CALLS = 20


@pytest.mark.parametrize("index", range(BAD_CALLS))
def test_decode_step_refuses_bad_input_and_writes_nothing(gen, index):
    case = step_case(gen, "cpu")
    calls = bad_calls(case)
    assert len(calls) == BAD_CALLS  # each case runs
    changes, error, match = calls[index]
    before = case["buffer"].clone()
    args = dict(q=case["q"], cache=case["cache"], weights=case["weights"], block_table=case["block_table"],
                query_starts=case["query_starts"], row_ends=case["row_ends"], max_query_len=case["max_query_len"], k=K,
                keys=case["keys"], slots=case["slots"])
    args.update(changes)
    with pytest.raises(error, match=match):
        fp4.decode_step(**args)
    assert torch.equal(case["buffer"], before), "a refused call wrote to the cache"


def test_decode_step_refuses_a_k_past_the_topk_kernels_block_before_writing(triton_backend_device, gen):
    """A k that only the Triton top-k refuses (above 2**19 on rows wider than 2**20) is refused
    before this step's keys are stored, not after (the step used to store them and then fail in
    select_topk)."""
    backend, device = triton_backend_device
    case = step_case(gen, device)
    pages = case["block_table"].shape[1]
    wide = torch.cat([case["block_table"], case["block_table"][:, :1].expand(-1, 2**20 // 64 + 1 - pages)], dim=1)
    before = case["buffer"].clone()
    with pytest.raises(ValueError, match=r"k: expected at most 524288 for rows wider than 1048576 with the triton "
                                         r"backend \(backend='reference' takes any k\), got k=524289"):
        fp4.decode_step(case["q"], case["cache"], case["weights"], wide, case["query_starts"], case["row_ends"],
                        case["max_query_len"], 2**19 + 1, keys=case["keys"], slots=case["slots"], backend=backend)
    assert torch.equal(case["buffer"], before), "a refused call wrote to the cache"


def test_decode_step_reads_nothing_on_the_host(backend_device, gen):
    backend, device = backend_device
    case = step_case(gen, device)
    with forbid_host_sync():
        values, indices = fused(case, K, backend=backend)
    assert indices.shape == (case["q"].shape[0], K) and indices.dtype == torch.int32
