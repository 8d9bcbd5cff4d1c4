"""The scorer's hot pass on int8 wgmmas in inline PTX (``kernels/score_wgmma.py``, written by
``kernels/wgmma_source.py``; the launcher's ``wgmma`` tuning, off by default): the checked-in
kernel is what its generator writes; compiled for sm_90 on any machine, no wgmma is serialized by
ptxas, the waits are where the form puts them and the register caps hold with no spill in the
tile loop (a few stack words outside it, in some forms); the
launcher refuses what it cannot run; on an sm_90 GPU, its logits match float64 on ragged,
permuted batches, with keys and queries that do not fold (the exact pass after it), and nothing
is written outside the valid region."""

import json
import os

import numpy as np
import pytest
import torch

import fp4_inductor as fp4
from fp4_inductor import reference
from fp4_inductor.kernels import wgmma_source

from conftest import HAS_TRITON, INTERPRETER
from helpers import NEEDS_SM90_TOOLS, float64_scores, random_keys, run_sm90_script, scoring_case

pytestmark = pytest.mark.skipif(not HAS_TRITON, reason="needs triton")


def test_the_checked_in_kernel_is_what_the_generator_writes():
    path = os.path.join(os.path.dirname(wgmma_source.__file__), "score_wgmma.py")
    with open(path) as f:
        assert f.read() == wgmma_source.module_source(), "run: python -m fp4_inductor.kernels.wgmma_source"


def test_every_asm_string_is_one_line():
    """Inductor copies a kernel's constexpr globals into its generated code, where a string with a
    newline does not survive (ptx.py)."""
    for name, text in wgmma_source.constants().items():
        assert "\n" not in text, name


_COMPILE = NEEDS_SM90_TOOLS + """
import json
from fp4_inductor.kernels import score
from fp4_inductor.kernels.sm90 import compile_scorer, dot_loop_spills, dump_cubin, ptxas_verdict, wgmma_order
out = {}
for rows, form in ((2, 1), (2, 2), (4, 1), (4, 2), (2, 3), (2, 4), (4, 3), (4, 4)):
    plan = score.launch_plan(True, rows * 64, {}, form)
    hot = score.launch_forms("fixup", True, True, plan[0], plan[1], plan[3], plan[4], plan[5], form)[0]
    cap = score.WGMMA_REGISTERS[rows * 64, form]
    kernel = compile_scorer(score.score_paged_kernel, rows, hot, maxnreg=cap)
    usage = dump_cubin(kernel.asm["cubin"], "resource-usage")
    out[f"{rows},{form}"] = dict(plan=plan, hot=hot, cap=cap, warnings=ptxas_verdict(kernel.asm["ptx"])[1],
                                 registers=int(usage.split("REG:")[1].split()[0]),
                                 stack=int(usage.split("STACK:")[1].split()[0]), order=wgmma_order(kernel.asm["cubin"]),
                                 loop=dot_loop_spills(kernel.asm["cubin"]))
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def compiled():
    """The wgmma hot pass of each (rows, form) as the launcher plans it, compiled for sm_90 in a
    fresh process (the tests here may run Triton's interpreter, which cannot compile)."""
    return json.loads(run_sm90_script(_COMPILE))


@pytest.mark.parametrize("rows, form", [(2, 1), (2, 2), (4, 1), (4, 2), (2, 3), (2, 4), (4, 3), (4, 4)])
def test_the_hot_pass_compiles_for_sm90(compiled, rows, form):
    got = compiled[f"{rows},{form}"]
    assert got["hot"]["WGMMA"] == form and got["hot"]["WARPS"] == 4 and got["hot"]["TILE_PAGES"] == 1
    # The programs per SM the launcher plans are what the compiled registers (allocated in steps
    # of 8) allow: a cap looser than the kernel needs would plan too few.
    assert got["plan"][2] == 65536 // (128 * -(-got["registers"] // 8) * 8)
    assert got["warnings"] == []  # no wgmma serialized by ptxas
    # Form 1 at 256 columns spills at the largest cap; form 2 a word or two on Triton 3.7.1
    # (score.WGMMA_REGISTERS); forms 3 and 4 a few words in their query prologue (Triton 3.6 and
    # 3.7.1: 160 bytes in form 3 at 256 columns, 16-24 in form 4), none in the tile loop.
    stack = {(4, 1): 128, (4, 3): 160}.get((rows, form), 8 if form == 2 else 24 if form == 4 else 0)
    assert got["stack"] <= stack
    # ... and none of it in the tile loop (a few hundred instructions per 64-key tile).
    instructions, spills = got["loop"]
    assert 300 < instructions < 700 and spills == 0, got["loop"]
    # The loop's two half dots: in flight together (forms 1 and 3), one after the other (2 and 4).
    loop = "group, group, wait 0x1, wait 0x0" if form in (1, 3) else "group, wait 0x0, group, wait 0x0"
    assert got["order"] == loop


def test_the_launcher_refuses_what_it_cannot_run(gen):
    from fp4_inductor.kernels.score import launch_score_paged

    case = scoring_case(gen, "cpu", heads=64, query_lens=[2, 1], seq_lens=[300, 70])
    query = fp4.quantize_queries(case["q"])
    out = torch.full((case["q"].shape[0], case["block_table"].shape[1] * 64), float("nan"))
    args = (out, *query, case["cache"], case["weights"], case["block_table"], case["query_starts"], case["row_ends"],
            case["max_query_len"])
    with pytest.raises(ValueError, match="wgmma: expected 0, 1, 2, 3 or 4, got 5"):
        launch_score_paged(*args, wgmma=5)
    with pytest.raises(ValueError, match="wgmma: expected an sm_90 CUDA device, got cpu"):
        launch_score_paged(*args, wgmma=1)
    assert out.isnan().all()  # nothing written


def test_the_wgmma_conditions(monkeypatch):
    """Each condition of ``check_wgmma`` names what it expected and what came (the device check
    passed with a stand-in for the capability)."""
    from fp4_inductor.kernels import score

    monkeypatch.setattr(score, "capability_major", lambda device: 9)
    monkeypatch.setattr(score.torch.version, "hip", None)
    payload = torch.zeros(3, 64, 64, dtype=torch.uint8)
    kernel = score.score_paged_kernel
    score.check_wgmma(2, True, True, True, 64, "cuda:0", payload, kernel)  # all met
    with pytest.raises(ValueError, match="word_fed=False, asm=True"):
        score.check_wgmma(1, False, True, True, 64, "cuda:0", payload, kernel)
    with pytest.raises(ValueError, match="expected 64 heads, got 32"):
        score.check_wgmma(1, True, True, True, 32, "cuda:0", payload, kernel)
    with pytest.raises(ValueError, match=r"4-byte aligned \(form 1\), got a storage offset of 2 bytes"):
        score.check_wgmma(1, True, True, True, 64, "cuda:0", payload.flatten()[2:].unflatten(0, (1, -1))[:, :64 * 64]
                          .view(1, 64, 64), kernel)
    # Forms 3 and 4 load the payload 16 bytes at a time: a row at a 4-byte offset is refused there.
    shifted = payload.flatten()[4:].unflatten(0, (1, -1))[:, :64 * 64].view(1, 64, 64)
    score.check_wgmma(1, True, True, True, 64, "cuda:0", shifted, kernel)
    for form in (3, 4):
        score.check_wgmma(form, True, True, True, 64, "cuda:0", payload, kernel)  # aligned: taken
        with pytest.raises(ValueError, match=rf"16-byte aligned \(form {form}\), got a storage offset of 4 bytes"):
            score.check_wgmma(form, True, True, True, 64, "cuda:0", shifted, kernel)
    old = type("OldKernel", (), {"arg_names": [n for n in kernel.arg_names if n != "WGMMA"]})()
    with pytest.raises(ValueError, match="expected a kernel that takes WGMMA"):
        score.check_wgmma(1, True, True, True, 64, "cuda:0", payload, old)
    monkeypatch.setattr(score, "capability_major", lambda device: 10)
    with pytest.raises(ValueError, match="expected an sm_90 CUDA device"):
        score.check_wgmma(1, True, True, True, 64, "cuda:0", payload, kernel)


@pytest.mark.skipif(not INTERPRETER, reason="needs TRITON_INTERPRET=1 and triton")
def test_the_exact_pass_at_four_rows(gen):
    """With 4-row blocks (the wgmma plan at next_n=3 or 4) the exact pass runs at 256 columns, which
    the default launches never do: on the interpreter, the plan's launch shape (a page per tile,
    4 warps, the exact pass on the hot pass's programs) with keys and a query head that do not
    fold, against float64."""
    from fp4_inductor.kernels.score import launch_score_paged

    case = scoring_case(gen, "cpu", heads=64, query_lens=[4, 3], seq_lens=[400, 150])
    pages = case["block_table"][:, [1, 3]].flatten().long()
    slots = (pages[:, None] * 64 + torch.arange(0, 64, 9)).flatten()
    fp4.store_keys(random_keys(slots.shape[0], gen, group_spread=9), case["cache"], slots)
    q = case["q"].clone()
    q[4, 7, 32:64] *= 2.0**10  # a head of the second request's first row that does not fold
    query = fp4.quantize_queries(q)
    width = case["block_table"].shape[1] * 64
    out = torch.full((q.shape[0], width), float("nan"))
    launch_score_paged(out, *query, case["cache"], case["weights"], case["block_table"], case["query_starts"],
                       case["row_ends"], case["max_query_len"], max_columns=256, tile_pages=1, num_warps=4,
                       exact_split=1, setup_units=6)
    assert_matches_float64(out, query, case)


def assert_matches_float64(out, query, case):
    """Every logit of the valid region within 1e-5 of float64, relative to its own sum of
    |w_h| relu(s_h) (signed weights may cancel), and nothing written outside it."""
    args = (query, case["cache"], case["weights"], case["block_table"], case["query_starts"], case["row_ends"])
    want = float64_scores(*args)
    scale = float64_scores(*args, magnitude=True)
    valid = reference.valid_region(case["query_starts"].cpu(), case["row_ends"].cpu(), want.shape[1])
    got = out.cpu().double()
    assert got[~valid].isnan().all()
    worst = ((got - want).abs() / scale.clamp_min(1e-30))[valid].max()
    assert worst < 1e-5, f"elementwise relative error {worst:.2e}"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available() or torch.version.hip is not None
                    or torch.cuda.get_device_capability()[0] != 9, reason="needs an sm_90 NVIDIA GPU")
@pytest.mark.parametrize("form", [1, 2, 3, 4], ids=lambda form: f"form{form}")
@pytest.mark.parametrize("query_lens, seq_lens", [([2, 2, 1, 2], [4096, 333, 1500, 64]),
                                                  ([4, 3, 1], [2100, 4096, 700]),
                                                  ([8, 5, 1], [1200, 4096, 90])])
@pytest.mark.parametrize("programs", [None, 1, 3, 7])
def test_logits_match_float64_on_the_gpu(gen, form, query_lens, seq_lens, programs):
    """Ragged verify rows (blocks of 2 or 4 rows, some short; 8 rows in two blocks), permuted
    merged pages, keys whose group scales do not fold in a few pages (the exact pass rewrites
    them) and a query head that does not fold in the first request; on the launcher's programs
    (one tile or none each, here) and on 1, 3 and 7 (many tiles and requests per program, each
    request's arrays written again): every logit of the valid region within 1e-5 of float64, as
    the default hot pass's, and nothing written outside it."""
    from fp4_inductor.kernels.score import launch_score_paged

    case = scoring_case(gen, "cuda", heads=64, query_lens=query_lens, seq_lens=seq_lens)
    pages = case["block_table"].cpu()[:, [1, 3]].flatten().long()
    slots = (pages[:, None] * 64 + torch.arange(0, 64, 5)).flatten()
    fp4.store_keys(random_keys(slots.shape[0], gen, group_spread=9).cuda(), case["cache"], slots.cuda())
    q = case["q"].clone()
    q[0, 5, :32] *= 2.0**10  # one head of the first row whose group scales do not fold
    query = fp4.quantize_queries(q)
    width = case["block_table"].shape[1] * 64
    args = (*query, case["cache"], case["weights"], case["block_table"], case["query_starts"], case["row_ends"],
            case["max_query_len"])
    extra = {} if programs is None else {"programs": programs}
    for tuning in ({"wgmma": form, **extra}, extra):
        out = torch.full((q.shape[0], width), float("nan"), device="cuda")
        launch_score_paged(out, *args, **tuning)
        assert_matches_float64(out, query, case)


class _Lanes(np.ndarray):
    """A [128] tensor of the written-out kernels (thread i holds element i), for ``_run_prologue``."""

    def to(self, dtype, bitcast=False):
        kind = {"int32": np.int32, "int64": np.int64, "float32": np.float32}[dtype]
        return (self.view(kind) if bitcast else self.astype(kind)).view(_Lanes)


def _lanes(x):
    return np.asarray(x).view(_Lanes)


class _Pointer:
    """A pointer into ``memory`` (a flat numpy array) plus lane offsets, in that array's elements."""

    def __init__(self, memory, offset=0):
        self.memory, self.offset = memory, offset

    def __add__(self, offset):
        return _Pointer(self.memory, self.offset + offset)

    def to(self, dtype, bitcast=False):
        return self


def _run_prologue(n, vector, payload, scales, weights, first_row, rows_here):
    """A request's query prologue (``wgmma_source.query_prologue``) run on numpy: loads and asm
    replaced by stand-ins (a load or a 16-byte load must be in bounds where it is not masked
    off; a shared address is written once; the tables and the permutation are arbitrary
    functions of their inputs, the same for both prologues). Returns (shared words, folded
    weights' words, the request's fold)."""
    from types import SimpleNamespace

    from fp4_inductor.kernels import wgmma_source

    thread = _lanes(np.arange(128))
    shared, weights_at_shared = {}, {}

    def load(pointer, mask=True, other=0):
        offset = np.broadcast_to(np.asarray(pointer.offset), (128,)).astype(np.int64)
        mask = np.broadcast_to(np.asarray(mask), (128,))
        assert ((0 <= offset[mask]) & (offset[mask] < pointer.memory.size)).all(), "a load out of bounds"
        return _lanes(np.where(mask, pointer.memory[np.clip(offset, 0, pointer.memory.size - 1)], other))

    def shuffled(x, lanes):
        x = np.asarray(x)
        out = x.copy()
        for k in lanes:
            out = np.maximum(out, out[(thread & ~31) | ((thread & 31) ^ k)])
        return _lanes(out)

    def store(table, address, value, where=True):
        for a, v, w in zip(np.asarray(address).tolist(), np.asarray(value).tolist(), np.broadcast_to(where, (128,))):
            if w:
                assert a not in table, f"shared address {a} written twice"
                table[a] = v
        return _lanes(np.zeros(128, np.int32))

    def asm(code, constraints, args, dtype, is_pure, pack):
        if code == "LOAD4":
            pointer = args[0]
            assert (np.asarray(pointer.offset) % 4 == 0).all(), "a 16-byte load not 16-byte aligned"
            return tuple(load(pointer + i) for i in range(4))
        if code in ("QMAX", "QMAX4"):
            return shuffled(args[0], (4, 8) if code == "QMAX" else (1, 2))
        if code == "TABLES":
            return _lanes(args[0] * 7919 + 13), _lanes(args[0] * 104729 - 5)
        if code == "PRMT":
            # Any function of its inputs that keeps a zero word zero, as the operand builder does.
            word, lo, hi = (np.asarray(a).astype(np.int64) for a in args)
            return (_lanes(np.where(word != 0, (word * 31 + lo) & 0xFFFFFFFF, 0)),
                    _lanes(np.where(word != 0, (word * 17 ^ hi) & 0xFFFFFFFF, 0)))
        if code == "STORE":
            return store(shared, args[0], args[1])
        if code == "STORE_IF":
            return store(weights_at_shared, args[0], args[1], np.asarray(args[2]) != 0)
        raise AssertionError(code)

    def static_range(count):
        return range(count)

    tl = SimpleNamespace(load=load, where=lambda c, a, b: _lanes(np.where(c, a, b)), minimum=np.minimum,
                         inline_asm_elementwise=asm, static_range=static_range, int32="int32", int64="int64",
                         float32="float32")
    names = dict(tl=tl, thread=thread, t=thread % 4, zero=_lanes(np.zeros(128, np.int32)),
                 query_fold=_lanes(np.full(128, 3)), stored=_lanes(np.zeros(128, np.int32)),
                 queries=0, weights_at=0, words=_Pointer(payload), q_scales_ptr=_Pointer(scales),
                 weights_ptr=_Pointer(weights), weights_stride=64, weights_head_stride=1, first_row=first_row,
                 rows_here=rows_here, power_of_two=lambda e, c: _lanes(np.exp2(np.asarray(e) - 127.0) * c)
                 .astype(np.float32))
    names |= {k: k for k in ("LOAD4", "LOAD4_C", "QMAX", "QMAX4", "TABLES", "PRMT", "STORE", "STORE_IF")}
    exec("\n".join(wgmma_source.query_prologue(n, vector)), names)
    return shared, weights_at_shared, int(np.min(names["query_fold"]))


@pytest.mark.parametrize("rows, rows_here", [(2, 1), (2, 2), (4, 1), (4, 2), (4, 3), (4, 4)])
@pytest.mark.parametrize("folds", [True, False])
def test_the_prologues_write_the_same_bytes(rows, rows_here, folds):
    """Forms 3 and 4 build a request's query operand with 16-byte loads (a group of a column per
    thread), forms 1 and 2 a word per thread: run on numpy stand-ins for their loads and asm, both
    write the same words at the same shared addresses, the same folded weights, and find the same
    fold, for a block's rows placed last in the payload (a column past them must read in bounds
    and take zeros)."""
    gen = np.random.default_rng(rows * 10 + rows_here)
    total_rows = 5
    payload = gen.integers(-2**31, 2**31, size=total_rows * 64 * 16, dtype=np.int64).astype(np.int32)
    scales = gen.integers(123, 127, size=total_rows * 256).astype(np.uint8)  # groups within 2**3: all fold
    if not folds:
        # Head 5 of the last row: groups 0 and 2 lie 2**8 apart ([r, 0, g, h % 16, h // 16]).
        scales[(total_rows - 1) * 256 + 2 * 64 + 5 * 4] = 126
        scales[(total_rows - 1) * 256 + 0 * 64 + 5 * 4] = 118
    weights = gen.standard_normal(total_rows * 64).astype(np.float32)
    first_row = total_rows - rows_here
    word = _run_prologue(64 * rows, False, payload, scales, weights, first_row, rows_here)
    vector = _run_prologue(64 * rows, True, payload, scales, weights, first_row, rows_here)
    assert len(word[0]) == 64 * rows * 32 and len(word[1]) == 64 * rows
    assert word[0] == vector[0]
    assert word[1] == vector[1]
    assert word[2] == vector[2] and (word[2] >= 0) == folds
    # Columns past the block's rows hold zeros, and their weights are 0.0 (plane s of n * 32 bytes:
    # column c's words at c // 8 * 256 + c % 8 * 16 and 128 further).
    n = 64 * rows
    column = {a: (a % (n * 32)) // 256 * 8 + (a % 128) // 16 for a in vector[0]}
    assert all(v == 0 for a, v in vector[0].items() if column[a] >= 64 * rows_here)
    assert any(v != 0 for a, v in vector[0].items() if column[a] < 64 * rows_here)
    assert all(vector[1][4 * c] == 0 for c in range(64 * rows_here, n))
