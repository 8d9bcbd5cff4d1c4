"""score_paged: tight against a float64 definition on dequantized inputs, loose against full
precision, exact on what must stay unwritten; non-uniform rows, permuted pages, merged strides."""

import pytest
import torch

import fp4_inductor as fp4
from fp4_inductor import formats as F
from fp4_inductor import reference

from conftest import HAS_TRITON, INTERPRETER, KERNEL_DEVICES
from helpers import case_on, float64_scores, random_keys, run_programs_in_reverse, scoring_case

CASES = {
    "uniform-2": dict(query_lens=[2, 2, 2], seq_lens=[130, 64, 257]),
    "ragged": dict(query_lens=[1, 3, 2, 4, 1], seq_lens=[1, 200, 64, 450, 65]),
    "single": dict(query_lens=[1], seq_lens=[300]),
    "short-rows": dict(query_lens=[3, 1], seq_lens=[2, 0]),  # rows with no keys at all
    "long-verify": dict(query_lens=[8, 5], seq_lens=[190, 77]),
    # Group scales inside a key / a query head far apart: the kernels' exact slow path.
    "key-spread": dict(query_lens=[2, 1], seq_lens=[200, 130], key_spread=12),
    "query-spread": dict(query_lens=[1, 2], seq_lens=[100, 140], query_spread=12),
}


def run(case, backend, out=None):
    query = fp4.quantize_queries(case["q"], backend=backend)
    args = (query, case["cache"], case["weights"], case["block_table"], case["query_starts"], case["row_ends"])
    return query, fp4.score_paged(*args, case["max_query_len"], backend=backend, out=out)


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("heads", [16, 64])
def test_score_matches_float64(name, heads, backend_device, gen):
    backend, device = backend_device
    check_against_float64(scoring_case(gen, device, heads=heads, **CASES[name]), backend, device)


@pytest.mark.parametrize("hint", [1, 3])
def test_max_query_len_is_a_launch_hint(hint, backend_device, gen):
    """Requests with more rows than max_query_len still get every row scored."""
    backend, device = backend_device
    case = scoring_case(gen, device, heads=32, query_lens=[8, 5, 1], seq_lens=[190, 77, 300])
    check_against_float64(dict(case, max_query_len=hint), backend, device)


@pytest.mark.parametrize("name", ["ragged", "long-verify", "key-spread", "short-rows"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_bf16_query_mode_matches_float64(name, dtype, backend_device, gen):
    """The higher-recall mode: FP4 keys against unquantized queries (rounded to bf16)."""
    backend, device = backend_device
    case = scoring_case(gen, device, heads=32, dtype=dtype, **CASES[name])
    check_against_float64(case, backend, device, query=case["q"])


def test_bf16_query_mode_is_closer_to_full_precision(gen):
    """What the mode buys: the scores of FP4 keys with bf16 queries sit closer to the
    full-precision scores than those with FP4 queries."""
    case = scoring_case(gen, "cpu", heads=64, query_lens=[2, 2], seq_lens=[640, 500])
    layout = (case["cache"], case["weights"], case["block_table"], case["query_starts"], case["row_ends"])
    keys = case["q"]  # float32 queries (keys are FP4 in all three scores)
    full = float64_scores(keys, *layout, to_bf16=False)
    bf16_definition = float64_scores(keys, *layout)
    fp4_queries = fp4.score_paged(fp4.quantize_queries(keys), *layout, case["max_query_len"]).double()
    bf16_queries = fp4.score_paged(keys, *layout, case["max_query_len"]).double()
    valid = reference.valid_region(case["query_starts"], case["row_ends"], full.shape[1])
    err = lambda got, exact: ((got - exact)[valid].norm() / exact[valid].norm()).item()  # noqa: E731
    # Against full precision (CPU, this case: about 2e-3 against 0.12), and the bf16 mode exact to
    # its own definition.
    assert err(bf16_queries, full) < 0.1 * err(fp4_queries, full)
    assert err(bf16_queries, bf16_definition) < 1e-5 < 0.01 < err(fp4_queries, full)


def check_against_float64(case, backend, device, query=None):
    out = torch.full((case["q"].shape[0], case["block_table"].shape[1] * 64), float("nan"), device=device)
    writes_into_out = query is None
    if writes_into_out:
        query, got = run(case, backend, out=out)
    else:
        args = (case["cache"], case["weights"], case["block_table"], case["query_starts"], case["row_ends"])
        got = fp4.score_paged(query, *args, case["max_query_len"], backend=backend)
    inputs = (query, case["cache"], case["weights"], case["block_table"], case["query_starts"], case["row_ends"])
    want = float64_scores(*inputs)
    scale = float64_scores(*inputs, magnitude=True)
    valid = reference.valid_region(case["query_starts"].cpu(), case["row_ends"].cpu(), want.shape[1])
    got = got.cpu()
    assert not got[valid].isnan().any(), f"unwritten entry at {(got.isnan() & valid).nonzero()[0].tolist()}"
    if valid.any():
        err = (got[valid].double() - want[valid]).norm() / want[valid].norm()
        assert err < 1e-5, f"relative error {err:.2e}"
        # Per entry, relative to sum_h |w_h| relu(s_h): signed weights may cancel to ~0.
        worst = ((got.double() - want).abs() / scale.clamp_min(1e-30))[valid].max()
        assert worst < 1e-5, f"elementwise relative error {worst:.2e}"
    # What is outside the valid region stays as it was (poisoned with NaN).
    assert not writes_into_out or got[~valid].isnan().all(), f"wrote outside the valid region at {(~got.isnan() & ~valid).nonzero()[0].tolist()}"


@pytest.mark.parametrize("most_rows", [1, 3])
def test_shares_cross_requests(most_rows, backend_device, gen, monkeypatch):
    """The in-kernel schedule: more requests than one step of it takes (at most 128), short and empty
    ones first and longer ones after, so the equal shares of all requests' pages start and end
    inside requests, one program scores several, and the interpreter's last share starts past
    request 128. Every valid entry written once and right, nothing else touched; one-row blocks
    and row blocks of up to 3 rows. The interpreter runs the programs in reverse order, so a
    store into the next program's share is not hidden by that program's own."""
    backend, device = backend_device
    if backend == "triton" and device == "cpu":
        run_programs_in_reverse(monkeypatch)
    seq_lens = torch.cat([torch.randint(0, 64, (100,), generator=gen), torch.randint(1000, 1201, (50,), generator=gen)])
    seq_lens[[3, 70, 140]] = 0
    query_lens = torch.randint(1, most_rows + 1, (150,), generator=gen)
    case = scoring_case(gen, device, heads=16, query_lens=query_lens.tolist(), seq_lens=seq_lens.tolist())
    check_against_float64(case, backend, device)


def test_score_functional_matches_out_variant(backend_device, gen):
    backend, device = backend_device
    case = scoring_case(gen, device, **CASES["ragged"])
    _, a = run(case, backend)
    _, b = run(case, backend, out=torch.full_like(a, float("nan")))
    valid = reference.valid_region(case["query_starts"], case["row_ends"], a.shape[1])
    assert torch.equal(a[valid], b[valid])


@pytest.mark.parametrize("past_int32", [False, True])
def test_rows_longer_than_the_block_table(past_int32, backend_device, gen):
    """row_ends past the block table's width (a context longer than the pages given): the keys
    end at the width, exactly as with row_ends cut there; nothing is read past a request's
    block-table row and nothing is written past an output row (the rows after ``out`` stay
    untouched). Ten one-row requests, so that programs share requests and a schedule that
    counted the pages past the width would shift every later share. ``past_int32``: int64 ends
    of 2**32 + 1 (which an int32 narrowing reads as 1: one tile) and one below -2**31 (as 5), over
    9 pages (more than one tile of the schedule's units)."""
    backend, device = backend_device
    seq_lens = [330, 150, 100, 300, 20, 180, 330, 64, 129, 190]
    if past_int32:
        seq_lens = [700 if n > 150 else 3 * n for n in seq_lens]
    case = scoring_case(gen, device, heads=16, query_lens=[1] * 10, seq_lens=seq_lens,
                        pages_per_request=9 if past_int32 else 3)
    width = case["block_table"].shape[1] * 64
    assert case["row_ends"].max() > width  # the case is what it says
    if past_int32:
        ends = case["row_ends"].to(torch.int64)
        ends = torch.where(ends > width, 2**32 + 1, ends)
        ends[4] = -(2**32) + 5
        case["row_ends"] = ends
    query = fp4.quantize_queries(case["q"], backend=backend)
    rows = case["q"].shape[0]
    args = (query, case["cache"], case["weights"], case["block_table"], case["query_starts"])
    sheet = torch.full((rows + 4, width), float("nan"), device=device)
    fp4.score_paged(*args, case["row_ends"], 1, backend=backend, out=sheet[:rows])
    cut = torch.full((rows, width), float("nan"), device=device)
    fp4.score_paged(*args, case["row_ends"].clamp(max=width), 1, backend=backend, out=cut)
    valid = reference.valid_region(case["query_starts"], case["row_ends"], width)
    assert torch.equal(sheet[:rows][valid], cut[valid])
    assert sheet[:rows][~valid].isnan().all() and sheet[rows:].isnan().all()


def test_query_starts_past_the_rows(backend_device, gen):
    """query_starts that run past the rows (not from decode_layout): the rows end at the last
    one; nothing is written past it, and the rows there are score as with query_starts cut."""
    backend, device = backend_device
    case = scoring_case(gen, device, heads=16, query_lens=[2, 3], seq_lens=[150, 200])
    rows = case["q"].shape[0]  # 5 query rows and 2 padding rows: 7
    query = fp4.quantize_queries(case["q"], backend=backend)
    width = case["block_table"].shape[1] * 64
    args = (query, case["cache"], case["weights"], case["block_table"])
    over = torch.tensor([0, 2, rows + 3], dtype=torch.int32, device=device)
    row_ends = torch.full((rows,), 140, dtype=torch.int32, device=device)
    sheet = torch.full((rows + 4, width), float("nan"), device=device)
    fp4.score_paged(*args, over, row_ends, 3, backend=backend, out=sheet[:rows])
    cut = torch.full((rows, width), float("nan"), device=device)
    fp4.score_paged(*args, over.clamp(max=rows), row_ends, 3, backend=backend, out=cut)
    assert torch.equal(sheet[:rows, :140], cut[:, :140])
    assert sheet[rows:].isnan().all()


@pytest.mark.parametrize("dtype, low", [(torch.int32, -2), (torch.int64, -2), (torch.int64, -(2**32) + 2)])
def test_query_starts_below_the_rows(dtype, low, backend_device, gen):
    """query_starts below row 0 (not from decode_layout; an int64 one past -2**31 too): rows start
    at row 0; nothing is written before ``out`` (its rows sit after two rows of the same sheet),
    and the rows are scored as with query_starts clamped at 0. Before, the Triton kernel wrote
    the two rows before ``out``. Queries, weights and row ends are the last rows of larger
    tensors, so that what a read before them finds is defined (and would score)."""
    backend, device = backend_device
    case = scoring_case(gen, device, heads=16, query_lens=[2, 2, 1], seq_lens=[150, 100, 70])
    rows = case["q"].shape[0]
    payload, scales = fp4.quantize_queries(torch.cat([case["q"][:2], case["q"]]), backend=backend)
    query = (payload[2:], scales[2:])
    weights = torch.cat([case["weights"][:2], case["weights"]])[2:]
    width = case["block_table"].shape[1] * 64
    args = (query, case["cache"], weights, case["block_table"])
    under = torch.tensor([low, -1, 2, 5], dtype=dtype, device=device)
    row_ends = torch.full((rows + 2,), 100, dtype=torch.int32, device=device)[2:]
    sheet = torch.full((rows + 2, width), float("nan"), device=device)
    fp4.score_paged(*args, under, row_ends, 2, backend=backend, out=sheet[2:])
    cut = torch.full((rows, width), float("nan"), device=device)
    fp4.score_paged(*args, under.clamp(min=0), row_ends, 2, backend=backend, out=cut)
    assert sheet[:2].isnan().all(), "rows before out were written"
    assert torch.equal(sheet[2:][:5, :100], cut[:5, :100])
    assert not sheet[2:][:5, :100].isnan().any()


def test_score_is_deterministic(backend_device, gen):
    backend, device = backend_device
    case = scoring_case(gen, device, **CASES["ragged"])
    _, a = run(case, backend)
    _, b = run(case, backend)
    valid = reference.valid_region(case["query_starts"], case["row_ends"], a.shape[1])
    diff = (a != b) & valid
    assert not diff.any(), f"runs differ at {diff.nonzero()[0].tolist()}"


def test_score_close_to_full_precision(gen):
    """FP4 against the unquantized float computation: loose, by cosine."""
    case = scoring_case(gen, "cpu", query_lens=[2, 1], seq_lens=[500, 320], heads=32)
    query, got = run(case, "reference")
    # Full precision: the keys as stored dequantize to themselves only approximately, so compare
    # FP4 scores with float scores from float queries against the dequantized keys.
    keys = reference.dequantize_pages(case["cache"], case["block_table"].long()).flatten(1, 2)
    req = reference.row_requests(case["query_starts"], case["q"].shape[0])
    exact = torch.einsum("rhd,rjd->rhj", case["q"].float(), keys[req]).relu()
    exact = (exact * case["weights"].unsqueeze(-1)).sum(1)
    valid = reference.valid_region(case["query_starts"], case["row_ends"], got.shape[1])
    cosine = torch.nn.functional.cosine_similarity(got[valid].double(), exact[valid].double(), dim=0)
    assert cosine > 0.99


def test_score_nan_key_group_gives_nan_logit(backend_device, gen):
    backend, device = backend_device
    case = scoring_case(gen, "cpu", query_lens=[1], seq_lens=[100], heads=16)
    page = int(case["block_table"][0, 1])
    key = torch.randn(1, F.HEAD_DIM)
    key[0, 70] = float("inf")
    fp4.store_keys(key, case["cache"], torch.tensor([page * 64 + 5]))
    case = case_on(case, device)
    _, got = run(case, backend)
    got = got.cpu()
    assert got[0, 64 + 5].isnan()
    assert got[0, :100].isnan().sum() == 1


@pytest.mark.parametrize("query_lens", [[1, 1], [2, 3]])
def test_keys_of_every_scale_spread(query_lens, backend_device, gen):
    """Keys whose group scales make one to four classes (the groups within 2**3 of the largest
    one left), with all-zero groups and 40 binades between groups of one key: the exact pass
    gives each class its own dot, scaled before the relu."""
    backend, device = backend_device
    case = scoring_case(gen, "cpu", query_lens=query_lens, seq_lens=[150, 200], heads=16)
    factors = torch.tensor([[1, 1, 1, 1], [1, 2**5, 1, 1], [1, 2**4, 2**8, 2**12], [2**-20, 1, 0, 2**20],
                            [0, 0, 0, 2**6], [2**3, 1, 2**-1, 2**2]])
    keys = torch.randn(len(factors), F.HEAD_DIM, generator=gen)
    keys = (keys.view(-1, F.GROUPS, F.GROUP_SIZE) * factors[:, :, None]).view(-1, F.HEAD_DIM)
    pages = case["block_table"][[0, 0, 0, 1, 1, 1], [1, 1, 2, 0, 0, 3]]
    fp4.store_keys(keys, case["cache"], pages * 64 + torch.tensor([5, 63, 0, 17, 40, 2]))
    case = case_on(case, device)
    check_against_float64(case, backend, device)


@pytest.mark.parametrize("top, low, query", [(2.0**60, 2.0**-70, 1.0), (2.0**100, 1.0, 2.0**-107)])
def test_lower_class_survives_cancelling_higher_ones(top, low, query, backend_device, gen):
    """A key whose largest group cancels exactly against the query, with its other group 130
    binades lower (or the query scaled near the bottom of float32): the logit is that lower
    group's alone, and the exact pass must keep it."""
    backend, device = backend_device
    case = scoring_case(gen, "cpu", query_lens=[1], seq_lens=[100], heads=16)
    key = torch.zeros(1, F.HEAD_DIM)
    key[0, 0], key[0, 1], key[0, 32] = 6 * top, -6 * top, 6 * low
    fp4.store_keys(key, case["cache"], case["block_table"][0, 1:2] * 64 + 5)
    case["q"][0] = 0.0
    case["q"][0, :, [0, 1, 32, 64, 96]] = 6 * query
    case["weights"][0] = case["weights"][0].abs()
    case = case_on(case, device)
    query_fp4, got = run(case, backend)
    want = float64_scores(query_fp4, case["cache"], case["weights"], case["block_table"], case["query_starts"],
                          case["row_ends"])
    assert want[0, 64 + 5] > 0
    assert abs(got[0, 64 + 5].item() - want[0, 64 + 5].item()) <= 1e-5 * want[0, 64 + 5].item()
    check_against_float64(case, backend, device)


@pytest.mark.parametrize("heads, query_lens, seq_lens", [(16, [1], [3000]), (64, [2], [2000])])
def test_exact_pass_over_long_shares(heads, query_lens, seq_lens, backend_device, gen):
    """Wide scale spreads all along one long request: every share holds three or more tiles
    for the exact pass, each scanned and rescored (after the 16-warp hot kernel at one row of 16
    heads, after the two-row one at two rows of 64)."""
    backend, device = backend_device
    case = scoring_case(gen, device, heads=heads, query_lens=query_lens, seq_lens=seq_lens, key_spread=12)
    check_against_float64(case, backend, device)


def test_score_strided_inputs(backend_device, gen):
    """Weights and block table as strided views, queries cut out of a wider tensor."""
    backend, device = backend_device
    case = scoring_case(gen, device, **CASES["ragged"])
    wide = torch.randn(case["q"].shape[0], case["q"].shape[1], 256, generator=gen).to(device)
    case["q"] = wide[..., 64:192]
    query = fp4.quantize_queries(case["q"], backend=backend)
    assert torch.equal(query[0].cpu(), fp4.quantize_queries(case["q"].cpu().contiguous(), backend="reference")[0])
    weights = torch.stack([case["weights"], torch.full_like(case["weights"], float("nan"))], dim=2)[..., 0]
    block_table = case["block_table"].t().contiguous().t()
    args = (query, case["cache"], weights, block_table, case["query_starts"], case["row_ends"], case["max_query_len"])
    got = fp4.score_paged(*args, backend=backend)
    want = fp4.score_paged(query, case["cache"], case["weights"], case["block_table"].contiguous(), case["query_starts"],
                           case["row_ends"], case["max_query_len"], backend="reference")
    valid = reference.valid_region(case["query_starts"], case["row_ends"], got.shape[1])
    err = (got[valid] - want[valid]).double().norm() / want[valid].double().norm()
    assert err < 1e-5


def check_launch(case, query, device, **tuning):
    """launch_score_paged with ``tuning`` on a NaN-filled output, ``query`` quantized (payload,
    scales) or an unquantized tensor (the bf16-query mode): every valid entry within 1e-5 of
    the float64 definition, nothing else written."""
    from fp4_inductor.kernels.score import launch_score_paged

    layout = (case["cache"], case["weights"], case["block_table"], case["query_starts"], case["row_ends"])
    out = torch.full((case["q"].shape[0], case["block_table"].shape[1] * 64), float("nan"), device=device)
    launch_args = query if isinstance(query, tuple) else (query, None)
    launch_score_paged(out, *launch_args, *layout, case["max_query_len"], **tuning)
    want = float64_scores(query, *layout)
    valid = reference.valid_region(case["query_starts"].cpu(), case["row_ends"].cpu(), want.shape[1])
    got = out.cpu()
    assert not got[valid].isnan().any() and got[~valid].isnan().all()
    assert ((got[valid].double() - want[valid]).norm() / want[valid].norm()) < 1e-5
    return got, want


@pytest.mark.parametrize("name", ["ragged", "key-spread", "query-spread", "long-verify", "key-spread-1", "query-spread-1"])
@pytest.mark.parametrize("exact", ["inline", "fixup"])
@pytest.mark.parametrize("tile_pages", [1, 2, 4])
@pytest.mark.parametrize("query_kind", ["fp4", "bf16"])
def test_exact_path_launch_variants(name, exact, tile_pages, query_kind, triton_backend_device, gen):
    """The scorer's two launch forms for the exact path (in the hot loop, or a fix-up launch
    over the programs that flagged a tile) score the same entries, each exactly once: one, two
    and four pages per tile on 4, 8 and 16 warps (the word-fed loop's layouts), one-row blocks
    (the hot kernel's word-fed form), FP4 and bf16 queries."""
    backend, device = triton_backend_device
    spec = dict(CASES[name.removesuffix("-1")])
    if name.endswith("-1"):
        spec["query_lens"] = [1] * len(spec["query_lens"])  # max_query_len=1
    case = scoring_case(gen, device, heads=32, **spec)
    query = fp4.quantize_queries(case["q"], backend="triton") if query_kind == "fp4" else case["q"]
    check_launch(case, query, device, exact=exact, tile_pages=tile_pages, num_warps=4 * tile_pages)


@pytest.mark.parametrize("key_spread", [0, 5])
@pytest.mark.parametrize("pairs", [False, True])
@pytest.mark.parametrize("tile_pages", [1, 2])
def test_word_fed_tiles_in_pairs(pairs, tile_pages, key_spread, triton_backend_device, gen, monkeypatch):
    """The word-fed hot loop one tile or two per step: every valid entry scored once, nothing
    written past a row's end, with ragged rows and shares that hold an odd number of tiles, some
    ending mid-request: there the second tile of the last pair reads the share's last page again
    and must store nothing, which the interpreter sees only with its programs run in reverse
    order. Keys that all fold (the hot pass's values are the result) and keys that often do not
    (the exact pass rewrites their tiles)."""
    backend, device = triton_backend_device
    if device == "cpu":
        run_programs_in_reverse(monkeypatch)
    case = scoring_case(gen, device, heads=32, query_lens=[2, 1, 4, 3], seq_lens=[700, 64, 333, 1090],
                        key_spread=key_spread)
    query = fp4.quantize_queries(case["q"], backend="triton")
    check_launch(case, query, device, tile_pages=tile_pages, num_warps=4 * tile_pages, pairs=pairs)


@pytest.mark.parametrize("group_last", [False, True])
@pytest.mark.interpreter
@pytest.mark.skipif(not INTERPRETER, reason="needs TRITON_INTERPRET=1 and triton")
def test_word_fed_loads_in_either_arrangement(group_last, gen, monkeypatch):
    """The word-fed loads come in two arrangements (``GROUP_LAST``: the one each Triton version
    compiles into the dot operand's layout); both hand the loop the same keys. Run by the
    interpreter with each, the hot and exact passes score every valid entry right (keys that
    fold and keys that do not, one-row and two-row blocks, 16 warps x 4 pages, and 4 or 8 warps
    x 4 pages, where each warp holds rows of several pages). Keys that all fold as well: with
    keys that do not, the exact pass rescores most tiles and would hide a wrong hot pass. The
    GPU runs the arrangement its Triton compiles (test_prmt.py checks that it needs no shared
    memory)."""
    from fp4_inductor.kernels import score_tiles

    backend, device = "triton", "cpu"  # the interpreter only: a GPU runs its Triton's arrangement
    from triton.language import constexpr

    monkeypatch.setattr(score_tiles, "GROUP_LAST", constexpr(group_last))
    run_programs_in_reverse(monkeypatch)
    case = scoring_case(gen, device, heads=32, query_lens=[2, 1, 1, 2], seq_lens=[700, 64, 333, 1090], key_spread=5)
    query = fp4.quantize_queries(case["q"], backend="triton")
    check_launch(case, query, device, tile_pages=4, num_warps=16)
    for key_spread, warps in ((5, 16), (0, 16), (0, 4), (0, 8)):
        one_row = scoring_case(gen, device, heads=32, query_lens=[1, 1, 1], seq_lens=[530, 1024, 77],
                               key_spread=key_spread)
        check_launch(one_row, fp4.quantize_queries(one_row["q"], backend="triton"), device, tile_pages=4,
                     num_warps=warps)


@pytest.mark.parametrize("split", [2, 3])
@pytest.mark.parametrize("setup", [0, 3])
@pytest.mark.parametrize("query_kind", ["fp4", "bf16"])
def test_exact_pass_on_more_programs(split, setup, query_kind, triton_backend_device, gen, monkeypatch):
    """The exact pass on ``split`` times the hot pass's programs: each takes part of a hot
    program's share and reads that program's flag. Keys that do not fold in two pages only, so
    some programs are flagged and others not; ragged rows, one-row and two-row blocks; every
    valid entry right, nothing else written (programs in reverse order on the interpreter, so a
    store into a neighbour's part shows). With ``setup``, each request counted that many units
    more than its pages when the shares are cut (what starting on a request costs a program):
    the shares still cover every request's pages, also with an empty request among one-row ones.
    (A page scored twice writes the same values: only lost pages show here, overlap in timings.)"""
    backend, device = triton_backend_device
    if device == "cpu":
        run_programs_in_reverse(monkeypatch)
    case = scoring_case(gen, device, heads=32, query_lens=[2, 1, 4, 3, 1], seq_lens=[700, 64, 333, 1090, 5])
    pages = case["block_table"].cpu()[[3, 0], [12, 4]].long()
    slots = (pages[:, None] * 64 + torch.arange(0, 64, 9)).flatten()
    fp4.store_keys(random_keys(slots.shape[0], gen, group_spread=9).to(device), case["cache"], slots.to(device))
    query = fp4.quantize_queries(case["q"], backend="triton") if query_kind == "fp4" else case["q"]
    check_launch(case, query, device, exact_split=split, setup_units=setup)
    if setup and query_kind == "fp4":
        one_row = scoring_case(gen, device, heads=64, query_lens=[1] * 6, seq_lens=[530, 1024, 77, 0, 2000, 64])
        check_launch(one_row, fp4.quantize_queries(one_row["q"], backend="triton"), device, exact_split=split,
                     setup_units=setup)


def check_few_keys(case, gen, index, token, device, programs):
    """Keys that do not fold (one group 2**9 above the rest) at ``token`` of pages ``index`` of
    request 0, then a launch on ``programs`` hot programs: every valid entry right, nothing else
    written, and those keys' logits (but the last, past the row's end) each within 1e-5 of the
    float64 definition. (A scan that marks too many tiles costs time only; the benchmarks show
    it, not this check.)"""
    pages = case["block_table"].cpu()[0, index].long()
    keys = random_keys(len(index), gen).view(-1, F.GROUPS, F.GROUP_SIZE)
    keys[torch.arange(len(index)), torch.arange(len(index)) % F.GROUPS] *= 2.0**9  # one group 2**9 up: no fold
    fp4.store_keys(keys.view(-1, F.HEAD_DIM).to(device), case["cache"], (pages * 64 + token).to(device))
    query = fp4.quantize_queries(case["q"], backend="triton")
    got, want = check_launch(case, query, device, programs=programs)
    # Entry by entry at those keys: the hot pass alone keeps only their largest group, 2**-9 off.
    args = (query, case["cache"], case["weights"], case["block_table"], case["query_starts"], case["row_ends"])
    at = (index * 64 + token)[:-1]
    error = (got[:, at].double() - want[:, at]).abs() / float64_scores(*args, magnitude=True)[:, at].clamp_min(1e-30)
    assert error[~want[:, at].isnan()].max() < 1e-5


@pytest.mark.parametrize("programs", [1, 3])
@pytest.mark.parametrize("heads, query_lens", [(16, [1]), (64, [2])])
def test_exact_pass_finds_few_keys_in_long_shares(heads, query_lens, programs, triton_backend_device, gen, monkeypatch):
    """Long shares of one request (100 pages) on one or three hot programs (each with two
    exact-pass programs of 4 warps, 16 pages per scan step), with keys that do not fold in a few
    pages only: the first and last pages of scan steps, pages inside them, two in one step, the
    first page of an exact program's part (page 44 with one hot program at two rows of 64), and
    the request's last page, partly past the row's end; after the 16-warp hot kernel (one row of
    16 heads) and the two-row one (two rows of 64). The exact pass scans its share's scales a
    step at a time and rescores only the tiles that hold such a key (``check_few_keys``;
    programs in reverse order on the interpreter, so a store into a neighbour's part shows)."""
    backend, device = triton_backend_device
    if device == "cpu":
        run_programs_in_reverse(monkeypatch)
    case = scoring_case(gen, device, heads=heads, query_lens=query_lens, seq_lens=[99 * 64 + 14])
    index = torch.tensor([0, 15, 16, 40, 44, 63, 64, 81, 99, 99])
    token = torch.tensor([0, 63, 17, 5, 3, 62, 1, 33, 13, 40])  # the last is past the row's end
    check_few_keys(case, gen, index, token, device, programs)


@pytest.mark.parametrize("heads, query_lens", [(16, [1]), (64, [2])])
def test_exact_pass_scans_shares_longer_than_a_group(heads, query_lens, triton_backend_device, gen, monkeypatch):
    """The exact pass scans its share in groups of 32 steps (512 pages at 4 warps): first which
    steps hold a tile to rescore, one bit each, then those steps' tiles. One request of 1100
    pages on one hot program (two exact programs of about 550 pages each), with keys that do not
    fold in the last step of a group (its bit 31), on both sides of a group's edge, in the second
    part's groups and on the request's last page (``check_few_keys``)."""
    backend, device = triton_backend_device
    if device == "cpu":
        run_programs_in_reverse(monkeypatch)
    case = scoring_case(gen, device, heads=heads, query_lens=query_lens, seq_lens=[1099 * 64 + 30])
    index = torch.tensor([3, 495, 511, 512, 530, 549, 560, 1061, 1073, 1099, 1099])
    token = torch.tensor([7, 2, 63, 0, 40, 11, 61, 9, 30, 29, 50])  # the last is past the row's end
    check_few_keys(case, gen, index, token, device, 1)


@pytest.mark.parametrize("heads, query_lens, programs, pages", [
    (16, [1], 1, 100), (16, [1], 3, 100), (16, [1], 1, 200), (64, [2], 1, 100), (64, [2], 3, 100), (64, [2], 1, 200),
    (16, [1], 1, 1100),
])
def test_exact_pass_rescores_every_tile_for_a_query_that_does_not_fold(heads, query_lens, programs, pages,
                                                                       triton_backend_device, gen, monkeypatch):
    """A query block whose group scales do not fold marks every tile of the exact pass's scan,
    and only those of its share: long shares (100 or 200 pages on one or three hot programs)
    that end inside a scan step and inside the request, that step one whose page ids the scan
    loads inside its loop (the fourth step or later: with 200 pages, the first exact program's
    part ends at page 92 or 94), and parts longer than a group of 32 steps (1100 pages: every
    step of the first group marked, each with 16 tiles); every valid entry right, nothing else
    written (programs in reverse order on the interpreter)."""
    backend, device = triton_backend_device
    if device == "cpu":
        run_programs_in_reverse(monkeypatch)
    case = scoring_case(gen, device, heads=heads, query_lens=query_lens, seq_lens=[(pages - 1) * 64 + 14],
                        query_spread=12)
    check_launch(case, fp4.quantize_queries(case["q"], backend="triton"), device, programs=programs)


@pytest.mark.parametrize("chunk", [1, 8, None])
def test_schedule_in_steps(chunk, triton_backend_device, gen, monkeypatch):
    """The in-kernel schedule reads the requests ``chunk`` at a time (``schedule_chunk``: 32 to
    128 by launch form and batch); the step changes how the shares are computed, not which pages
    they hold. Twenty ragged requests (two empty, one- and two-row blocks, keys that fold and keys
    that do not), in steps of one request and of eight (a last step past the batch's end), and
    with the step the launcher picks: every valid entry right, nothing else written."""
    backend, device = triton_backend_device
    if device == "cpu":
        run_programs_in_reverse(monkeypatch)
    seq_lens = torch.randint(1, 400, (20,), generator=gen)
    seq_lens[[2, 11]] = 0
    for query_lens in ([1] * 20, torch.randint(1, 3, (20,), generator=gen).tolist()):
        case = scoring_case(gen, device, heads=64, query_lens=query_lens, seq_lens=seq_lens.tolist(), key_spread=4)
        query = fp4.quantize_queries(case["q"], backend="triton")
        check_launch(case, query, device, setup_units=2, **({} if chunk is None else {"chunk": chunk}))


def test_schedule_chunk_by_form_and_batch():
    """The schedule's step as measured best (docs/benchmarks.md): 32 for the two-row kernel, 32
    up to eight requests and 64 above for the 16-warp one, 128 for the byte-fed forms."""
    from fp4_inductor.kernels.score import schedule_chunk

    assert [schedule_chunk(True, 16, b) for b in (1, 8, 9, 64, 4096)] == [32, 32, 64, 64, 64]
    assert schedule_chunk(True, 16, None) == 64  # a batch not known as an int: the large-batch step
    assert [schedule_chunk(True, 8, b) for b in (1, 64, 4096)] == [32, 32, 32]
    # the wgmma hot pass, of 16 warps too, keeps the two-row kernel's step
    assert [schedule_chunk(True, 16, b, 1) for b in (1, 64, 4096, None)] == [32, 32, 32, 32]
    assert [schedule_chunk(False, 4, b) for b in (1, 64)] == [128, 128]


def test_exact_launch_form_is_checked(gen):
    from fp4_inductor.kernels.score import launch_score_paged

    case = scoring_case(gen, "cpu", heads=32, **CASES["single"])
    query = fp4.quantize_queries(case["q"])
    layout = (case["cache"], case["weights"], case["block_table"], case["query_starts"], case["row_ends"])
    out = torch.zeros(case["q"].shape[0], case["block_table"].shape[1] * 64)
    with pytest.raises(ValueError, match="exact"):
        launch_score_paged(out, *query, *layout, 1, exact="twice")
    # A misspelt tuning is an error, not a launch with the defaults; nothing is written.
    with pytest.raises(ValueError, match=r"tuning: expected keys among .*, got \['setup'\]"):
        launch_score_paged(out, *query, *layout, 1, setup=4)
    assert not out.any()


def test_unaligned_section(backend_device, gen):
    """A section at an odd byte offset with an odd page stride: the GPU scorer may not assume the
    16-byte alignment that allocate_merged_cache gives (its PTX operand builder needs it)."""
    backend, device = backend_device
    case = scoring_case(gen, device, heads=32, **CASES["ragged"])
    pages = case["cache"].shape[0]
    odd = torch.randint(0, 256, (pages * 4355 + 8,), generator=gen, dtype=torch.uint8).to(device)
    cache = odd.as_strided((pages, 64, 68), (4355, 68, 1), 3)
    cache.copy_(case["cache"])
    assert cache.data_ptr() % 4 and cache.stride(0) % 4
    check_against_float64(dict(case, cache=cache), backend, device)


def test_sixteen_byte_alignment_decides_the_operand_builder():
    """The PTX builder only for sections that start 16-byte aligned: storage offset, page
    stride, and (for real tensors) the address; fake tensors while tracing go by offset and
    stride."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from fp4_inductor.kernels.score import _sixteen_byte_aligned

    pages = torch.zeros(4, 8192, dtype=torch.uint8)
    assert _sixteen_byte_aligned(fp4.index_section(pages, offset=1024))
    assert not _sixteen_byte_aligned(fp4.index_section(torch.zeros(4, 4360, dtype=torch.uint8), offset=0))
    odd_offset = torch.zeros(4 * 8192, dtype=torch.uint8).as_strided((4, 64, 68), (8192, 68, 1), 1030)
    assert not _sixteen_byte_aligned(odd_offset)
    # Offset and stride aligned, the storage itself not (memory from outside torch).
    odd_address = torch.frombuffer(bytearray(4 * 8192 + 16), dtype=torch.uint8, offset=1)[: 4 * 8192]
    odd_address = odd_address.as_strided((4, 64, 68), (8192, 68, 1))
    assert odd_address.storage_offset() == 0 and odd_address.data_ptr() % 16
    assert not _sixteen_byte_aligned(odd_address)
    with FakeTensorMode() as mode:
        fake = mode.from_tensor(pages)
        assert _sixteen_byte_aligned(fp4.index_section(fake, offset=1024))
        assert not _sixteen_byte_aligned(fake.flatten().as_strided((4, 64, 68), (8192, 68, 1), 1030))


if HAS_TRITON:
    import triton
    import triton.language as tl

    from fp4_inductor.kernels.score_math import head_chain
    from helpers import page_offset_kernel

    @triton.jit
    def _head_chain_kernel(relu_ptr, w_ptr, out_ptr, M: tl.constexpr, ROWS: tl.constexpr, HEADS: tl.constexpr):
        m = tl.arange(0, M)[:, None]
        c = tl.arange(0, ROWS * HEADS)
        relu = tl.load(relu_ptr + m * (ROWS * HEADS) + c[None, :])
        total = tl.sum(head_chain(relu, tl.load(w_ptr + c), ROWS, HEADS), axis=2)
        tl.store(out_ptr + m * ROWS + tl.arange(0, ROWS)[None, :], total)


@pytest.mark.parametrize("device", KERNEL_DEVICES)
@pytest.mark.parametrize("rows,heads", [(1, 16), (8, 16), (1, 32), (4, 32), (1, 64), (2, 64), (1, 128)])
def test_head_chain_pairs_each_value_with_its_weight(rows, heads, device, gen):
    """The PTX path's head sum (``score_math.head_chain``: the columns split by lane of a quad,
    then one multiply and fused multiply-adds along each lane's columns) against a float64 sum:
    each row of the block sums its own heads, each value times its own weight. Row blocks as the
    launcher makes them (up to 128 columns), and 128 heads. Run as a small kernel (the scorer
    reaches it only with the PTX builder, on the GPU)."""
    m = 32
    relu = torch.rand(m, rows * heads, generator=gen).to(device)  # relu's output: >= 0
    w = (torch.rand(rows * heads, generator=gen) - 0.5).to(device)
    out = torch.empty(m, rows, device=device)
    _head_chain_kernel[(1,)](relu, w, out, M=m, ROWS=rows, HEADS=heads)
    expected = (relu.double() * w.double()).reshape(m, rows, heads).sum(-1)
    torch.testing.assert_close(out.double(), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device", KERNEL_DEVICES)
@pytest.mark.parametrize("stride", [1, 4352, 8192 // 4, 2**31 - 16, 2**31, 2**32 + 16, 3 * 2**32 + 1040])
@pytest.mark.parametrize("table_dtype", [torch.int32, torch.int64])
def test_page_offset_is_the_full_product(stride, table_dtype, device):
    """The key addresses' page offsets (``score_tiles.page_offset``) are page id times page stride
    in full, whichever way Triton passes the stride: a constexpr (1), an int32 (zero-extended to a
    32 x 32-bit product) or an int64 (2**31 and up: a 64-bit product; its low 32 bits alone would
    be wrong from 2**32 on). Page ids up to 2**31 - 1, from an int32 or int64 block table."""
    ids = [i for i in (0, 1, 3, 4097, 2**20 + 5, 2**31 - 1) if i * stride < 2**63]
    n = 8
    padded = torch.tensor(ids + [1] * (n - len(ids)), dtype=table_dtype, device=device)
    out = torch.empty(n, dtype=torch.int64, device=device)
    page_offset_kernel[(1,)](padded, out, stride, N=n)
    assert out.tolist() == [i * stride for i in padded.tolist()]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available() or torch.version.hip is not None
                    or torch.cuda.get_device_capability()[0] < 9, reason="needs an sm_90 or later NVIDIA GPU")
@pytest.mark.parametrize("heads, query_lens", [(64, [1, 1, 1]), (64, [2, 1, 2]), (32, [4, 3]), (64, [4, 3])])
def test_dependent_launch_in_a_cuda_graph(heads, query_lens, gen, monkeypatch):
    """On sm_90 the eager pair launches its exact pass as a programmatic dependent of the hot pass
    (``dependent_launch``; at 64 heads and 2 rows or more, after the wgmma hot pass). With keys that do not fold in a few pages (so the exact pass runs in
    some programs and not in others), an eager call and each replay of the call captured in a
    CUDA graph write, bit for bit, what the pair writes in two plain launches. The replays take
    turns at two caches whose keys that do not fold lie in other pages (other programs mark
    them): an exact pass that read its flags before the hot pass wrote them would read the last
    replay's, rescore the other cache's pages and leave this one's as the hot pass wrote them."""
    from fp4_inductor.kernels import score

    case = scoring_case(gen, "cuda", heads=heads, query_lens=query_lens, seq_lens=[900, 333, 1500][: len(query_lens)])
    base = case["cache"].clone()
    caches = []
    for columns in ([3, 1], [7, 4]):  # page indices of the first and the last request (333 keys: 6 pages)
        case["cache"].copy_(base)
        pages = case["block_table"].cpu()[[0, len(query_lens) - 1], columns].long()
        slots = (pages[:, None] * 64 + torch.arange(0, 64, 7)).flatten()
        fp4.store_keys(random_keys(slots.shape[0], gen, group_spread=9).cuda(), case["cache"], slots.cuda())
        caches.append(case["cache"].clone())
    query = fp4.quantize_queries(case["q"])
    args = (query, case["cache"], case["weights"], case["block_table"], case["query_starts"], case["row_ends"],
            case["max_query_len"])
    valid = reference.valid_region(case["query_starts"], case["row_ends"], case["block_table"].shape[1] * 64)
    plain = []
    with monkeypatch.context() as patch:
        patch.setattr(score, "dependent_launch", lambda *args: False)
        for cache in caches:
            case["cache"].copy_(cache)
            plain.append(fp4.score_paged(*args))
    assert not torch.equal(plain[0][valid], plain[1][valid])
    decided = []
    dependent_launch = score.dependent_launch
    monkeypatch.setattr(score, "dependent_launch", lambda *args: decided.append(dependent_launch(*args)) or decided[-1])
    for cache, expected in zip(caches, plain):
        case["cache"].copy_(cache)
        eager = fp4.score_paged(*args)
        assert torch.equal(eager[valid], expected[valid])
    assert decided == [True, True]
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fp4.score_paged(*args)  # warm before the capture
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = fp4.score_paged(*args)
    assert decided[-1] is True
    for turn in range(6):
        case["cache"].copy_(caches[turn % 2])
        captured.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(captured[valid], plain[turn % 2][valid]), f"replay {turn}"
