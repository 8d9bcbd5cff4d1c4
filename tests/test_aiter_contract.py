"""Contract tests for the AITER adapter (not AMD coverage: no AMD GPU ran these).

A stand-in for AITER's FlyDSL FP4 wrapper (signature of ROCm/aiter 35cb4f64) is placed in
sys.modules. It checks every argument's shape, dtype and strides against that contract,
records the call, and computes the logits the way AITER's kernel reads its inputs (its own
decoding of the payload/scale views and of the pre-shuffled query scales, through the
views' strides), so a wrong view, offset or mapping of rows shows up as wrong scores.
"""

import importlib.machinery
import sys
import types

import pytest
import torch
from torch._inductor.utils import run_and_get_code

from fp4_inductor import ops, reference
from fp4_inductor import formats as F
from fp4_inductor.backends import aiter
from fp4_inductor.testing import forbid_host_sync

from helpers import float64_scores, scoring_case

E2M1 = torch.tensor(F.E2M1_VALUES, dtype=torch.float64)


def e2m1(codes: torch.Tensor) -> torch.Tensor:
    value = E2M1[(codes & 7).long()]
    return torch.where((codes & 8) != 0, -value, value)


def unpack(payload: torch.Tensor) -> torch.Tensor:
    """[..., 16] bytes -> [..., 32] values: element 2i in the low nibble."""
    return torch.stack([e2m1(payload & 15), e2m1(payload >> 4)], dim=-1).flatten(-2)


class StandIn:
    """AITER's ``flydsl_pa_mqa_logits_fp4`` as a contract checker."""

    def __init__(self, compute=True):
        self.compute = compute
        self.calls = []

    def __call__(self, q_fp4, q_scale, kv_cache, kv_scale, block_tables, weights, context_lens, max_seq_len, *,
                 weight_scale=1.0, next_n=1, block_k=None, kv_block_size=64, num_warps=None,
                 parallel_unit_num=None, out=None, cta_info=None, total_ctas=None, stream=None):
        self.calls.append(dict(locals()))
        batch, heads = q_fp4.shape[0], q_fp4.shape[2]
        assert q_fp4.dtype == torch.uint8 and q_fp4.shape == (batch, next_n, heads, 64) and q_fp4.is_contiguous()
        assert q_scale.dtype == torch.uint8 and q_scale.shape == (batch, next_n, 1, 4, 16, 4) and q_scale.is_contiguous()
        pages = kv_cache.shape[0]
        assert kv_cache.dtype == torch.uint8 and kv_cache.shape == (pages, 1, 4, kv_block_size, 16)
        assert kv_cache.stride()[1:] == (4096, 1024, 16, 1), "only stride(0) may differ from dense"
        assert kv_scale.dtype == torch.uint8 and kv_scale.shape == (pages, 1, 4, kv_block_size)
        assert kv_scale.stride()[1:] == (256, 64, 1)
        assert kv_cache.stride(0) % 16 == 0 and kv_scale.stride(0) % 16 == 0, "16-byte DMA loads"
        assert block_tables.dtype == torch.int32 and block_tables.shape[0] == batch and block_tables.stride(1) == 1
        assert weights.dtype == torch.bfloat16 and weights.shape == (batch * next_n, heads) and weights.is_contiguous()
        assert context_lens.dtype == torch.int32 and context_lens.shape == (batch,) and context_lens.is_contiguous()
        assert out is not None and out.dtype == torch.float32 and out.stride(1) == 1
        assert out.shape[0] == batch * next_n and out.shape[1] >= max_seq_len
        assert cta_info is None and total_ctas is None, "the internal (graph-safe) schedule"
        if not self.compute:
            return out
        out.fill_(-torch.inf)
        # Keys as the kernel reads them: page p of the table, group g, token t, 16 bytes.
        values = unpack(kv_cache[:, 0].double().long())  # [P, 4, 64, 32]
        t = torch.arange(kv_block_size)
        scales = kv_scale[:, 0][:, :, (t % 16) * 4 + t // 16].long()  # [P, 4, 64]
        keys = (values * torch.exp2(scales - 127.0).unsqueeze(-1)).permute(0, 2, 1, 3).flatten(2)  # [P, 64, 128]
        h = torch.arange(heads)
        q_exp = q_scale[:, :, 0][..., h % 16, h // 16].long().permute(0, 1, 3, 2)  # [B, n, H, 4]
        q = (unpack(q_fp4.view(batch, next_n, heads, 4, 16).long()) * torch.exp2(q_exp - 127.0).unsqueeze(-1))
        q = q.flatten(-2)  # [B, n, H, 128]
        for b in range(batch):
            rows_keys = keys[block_tables[b].long()].flatten(0, 1)
            for n in range(next_n):
                visible = max(0, int(context_lens[b]) - next_n + n + 1)
                s = (q[b, n] @ rows_keys[:visible].T).relu()
                out[b * next_n + n, :visible] = weight_scale * (weights[b * next_n + n].double() @ s).float()
        return out


def install(monkeypatch, scorer, strided=True):
    """The stand-in as ``aiter.ops.flydsl``; ``strided``: also the decode kernel module whose
    compiler takes ``kv_page_stride`` (ROCm/aiter 35cb4f64)."""
    monkeypatch.setattr(torch.version, "hip", "6.4.0")
    names = ["aiter", "aiter.ops", "aiter.ops.flydsl"]
    if strided:
        names += ["aiter.ops.flydsl.kernels", "aiter.ops.flydsl.kernels.mqa_logits", aiter.DECODE_MODULE]
    for name in names:
        module = types.ModuleType(name)
        package = name != aiter.DECODE_MODULE
        module.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=package)
        if package:
            module.__path__ = []
        monkeypatch.setitem(sys.modules, name, module)
    sys.modules[aiter.WRAPPER_MODULE].flydsl_pa_mqa_logits_fp4 = scorer
    if strided:
        def compile_pa_mqa_logits_fp4_decode(*, heads, head_dim, next_n, kv_block_size, kv_page_stride,
                                             kv_scale_page_stride, block_table_stride, block_k=128, num_warps=4):
            raise AssertionError("the adapter goes through the public wrapper")

        sys.modules[aiter.DECODE_MODULE].compile_pa_mqa_logits_fp4_decode = compile_pa_mqa_logits_fp4_decode


def case_and_query(gen):
    case = scoring_case(gen, "cpu", heads=64, query_lens=[1, 3, 2, 4], seq_lens=[70, 200, 64, 450])
    query = reference.quantize_queries(case["q"])
    return case, query


def test_contract_adapter_reads_merged_pages_in_place(monkeypatch, gen):
    stand_in = StandIn()
    install(monkeypatch, stand_in)
    case, query = case_and_query(gen)
    cache, block_table = case["cache"], case["block_table"]
    rows, width = query[0].shape[0], block_table.shape[1] * 64
    out = torch.full((rows, width), float("nan"))
    torch.ops.fp4.score_paged_aiter_out(out, *query, cache, case["weights"], block_table, case["query_starts"],
                                        case["row_ends"], case["max_query_len"])
    (call,) = stand_in.calls
    # The section is read in place: payload at its start, scales 4096 bytes in, page stride S.
    assert call["kv_cache"].data_ptr() == cache.data_ptr()
    assert call["kv_scale"].data_ptr() == cache.data_ptr() + F.SECTION_PAYLOAD_BYTES
    assert call["kv_cache"].stride(0) == call["kv_scale"].stride(0) == cache.stride(0) > F.SECTION_BYTES
    # Rows become requests of one row each: context = row_ends, the request's own table row.
    assert call["next_n"] == 1 and call["max_seq_len"] == width and call["out"] is out
    assert torch.equal(call["context_lens"], case["row_ends"].int())
    request = reference.row_requests(case["query_starts"], rows)
    assert torch.equal(call["block_tables"], block_table[request])
    assert torch.equal(call["weights"], case["weights"].bfloat16())
    # Scores as AITER computes them from those arguments equal the definition (with the weights
    # rounded to bf16, which is what AITER reads).
    weights = case["weights"].bfloat16().float()
    args = (query, cache, weights, block_table, case["query_starts"], case["row_ends"])
    want, scale = float64_scores(*args), float64_scores(*args, magnitude=True)
    valid = reference.valid_region(case["query_starts"], case["row_ends"], width)
    worst = ((out.double() - want).abs() / scale.clamp_min(1e-30))[valid].max()
    assert worst < 1e-5, f"elementwise relative error {worst:.2e}"


def test_contract_strided_inputs_reach_aiter_dense(monkeypatch, gen):
    """The ops take queries, weights and row ends with any strides; AITER addresses them
    densely, so the adapter hands it dense copies: the scores equal those of dense inputs."""
    stand_in = StandIn()
    install(monkeypatch, stand_in)
    case, query = case_and_query(gen)
    rows, width = query[0].shape[0], case["block_table"].shape[1] * 64
    payload = torch.zeros(rows, 2, *query[0].shape[1:], dtype=torch.uint8)[:, 1]
    payload.copy_(query[0])  # row stride twice the dense one
    weights = case["weights"].t().contiguous().t()  # column-major
    row_ends = torch.zeros(rows, 2, dtype=case["row_ends"].dtype)[:, 0]
    row_ends.copy_(case["row_ends"])  # stride 2
    assert not (payload.is_contiguous() or weights.is_contiguous() or row_ends.is_contiguous())
    outs = []
    for args in ((payload, weights, row_ends), (query[0], case["weights"], case["row_ends"])):
        out = torch.full((rows, width), float("nan"))
        torch.ops.fp4.score_paged_aiter_out(out, args[0], query[1], case["cache"], args[1], case["block_table"],
                                            case["query_starts"], args[2], case["max_query_len"])
        outs.append(out)
    valid = reference.valid_region(case["query_starts"], case["row_ends"], width)
    assert torch.equal(outs[0][valid], outs[1][valid]) and len(stand_in.calls) == 2


def test_contract_row_ends_reach_aiter_within_the_width(monkeypatch, gen):
    """Row ends past the block table's width (int64 past 2**31 too) reach AITER as the width,
    and negative ones as 0: the rows score as with the ends clamped."""
    stand_in = StandIn()
    install(monkeypatch, stand_in)
    case, query = case_and_query(gen)
    rows, width = query[0].shape[0], case["block_table"].shape[1] * 64
    ends = case["row_ends"].to(torch.int64)
    ends[0], ends[1], ends[2] = 2**32 + 5, width + 100, -(2**32) + 5
    outs = []
    for row_ends in (ends, ends.clamp(0, width)):
        out = torch.full((rows, width), float("nan"))
        torch.ops.fp4.score_paged_aiter_out(out, *query, case["cache"], case["weights"], case["block_table"],
                                            case["query_starts"], row_ends, case["max_query_len"])
        outs.append(out)
    assert torch.equal(stand_in.calls[0]["context_lens"], stand_in.calls[1]["context_lens"])
    assert stand_in.calls[0]["context_lens"][:3].tolist() == [width, width, 0]
    valid = reference.valid_region(case["query_starts"], ends.clamp(0, width), width)
    assert torch.equal(outs[0][valid], outs[1][valid])


def test_contract_dense_only_aiter_is_refused(monkeypatch, gen):
    """An AITER whose reader ignores page strides must not be handed merged pages."""
    stand_in = StandIn()
    install(monkeypatch, stand_in, strided=False)
    assert "ignores tensor strides" in aiter.unavailable_reason() and not aiter.available()
    assert ops.resolve_backend(None, torch.device("cuda"), "score_paged", offers_aiter=True) == "triton"
    with pytest.raises(ValueError, match="backend='aiter': the installed AITER's FP4 reader addresses pages densely"):
        ops.resolve_backend("aiter", torch.device("cuda"), "score_paged", offers_aiter=True)
    case, query = case_and_query(gen)
    out = torch.zeros(query[0].shape[0], case["block_table"].shape[1] * 64)
    with pytest.raises(ValueError, match="cache: backend='aiter' cannot read this cache"):
        aiter.score_paged_into(out, *query, case["cache"], case["weights"], case["block_table"],
                               case["query_starts"], case["row_ends"])
    assert stand_in.calls == [] and not out.any()


def test_dispatch_picks_aiter_for_scoring_on_rocm(monkeypatch):
    install(monkeypatch, StandIn())
    cuda = torch.device("cuda")
    assert aiter.available()
    assert ops.resolve_backend(None, cuda, "score_paged", offers_aiter=True) == "aiter"
    assert ops.resolve_backend(None, cuda, "store_keys") == "triton"
    with pytest.raises(ValueError, match="AITER provides only the scoring kernel"):
        ops.resolve_backend("aiter", cuda, "select_topk")


def test_no_aiter_without_rocm(monkeypatch):
    install(monkeypatch, StandIn())
    monkeypatch.setattr(torch.version, "hip", None)
    assert not aiter.available() and "ROCm" in aiter.unavailable_reason()


def test_contract_adapter_reads_nothing_on_the_host(monkeypatch, gen):
    stand_in = StandIn(compute=False)
    install(monkeypatch, stand_in)
    case, query = case_and_query(gen)
    out = torch.empty(query[0].shape[0], case["block_table"].shape[1] * 64)
    with forbid_host_sync():
        aiter.score_paged_into(out, *query, case["cache"], case["weights"], case["block_table"],
                               case["query_starts"], case["row_ends"])
    assert len(stand_in.calls) == 1


def test_contract_inductor_sees_one_extern_call(monkeypatch, gen):
    stand_in = StandIn()
    install(monkeypatch, stand_in)
    case, query = case_and_query(gen)

    def score(out, payload, scales, cache, weights, block_table, query_starts, row_ends):
        torch.ops.fp4.score_paged_aiter_out(out, payload, scales, cache, weights, block_table, query_starts,
                                            row_ends, 4)
        return out

    args = (query[0], query[1], case["cache"], case["weights"], case["block_table"], case["query_starts"],
            case["row_ends"])
    out = torch.zeros(query[0].shape[0], case["block_table"].shape[1] * 64)
    torch._dynamo.reset()
    _, (code, *_) = run_and_get_code(torch.compile(score, fullgraph=True), out, *args)
    assert code.count("torch.ops.fp4.score_paged_aiter_out.default(") == 1
    assert len(stand_in.calls) == 1 and stand_in.calls[0]["out"].data_ptr() == out.data_ptr()
