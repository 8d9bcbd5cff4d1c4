"""The scorer's PTX operand builder run on the CPU: through a small PTX emulator (every 16-bit
nibble pattern and random words, at every group shift and for a group left out, against the
E2M1 code table), and compiled for sm_90 to check the layout Triton gives each call (pack=4 is
right only where a call sees four consecutive columns of one row). The GPU tests check it again
end to end; these run in CI, where no GPU is."""

import json
import re

import numpy as np
import pytest

pytest.importorskip("triton")

from fp4_inductor.kernels import ptx  # noqa: E402
from fp4_inductor.kernels.sm90 import sass_instructions  # noqa: E402
from helpers import NEEDS_SM90_TOOLS, recorded_scorer_launches, run_sm90_script  # noqa: E402
from ptx_emulator import Block, prmt  # noqa: E402

U = np.uint64
MAGNITUDES = [0, 1, 2, 3, 4, 6, 8, 12]  # E2M1 magnitudes times 2, by the code's low three bits


def expected_elements(words, shift):
    """int8 elements (value * 2 << shift; 0 for a group left out) of each word, [n, 8]."""
    nib = np.stack([(words >> U(4 * i)) & U(0xF) for i in range(8)], 1).astype(np.int64)
    mag = np.array(MAGNITUDES)[nib & 7] << max(shift, 0)
    val = np.where(nib & 8, -mag, mag)
    return np.zeros_like(val) if shift < 0 else val


def test_emulator_knows_prmt():
    """The emulator's prmt against hand-worked values (PTX ISA's description)."""
    a, b = U(0x33221100), U(0x77665544)
    assert prmt(a, b, U(0x3210)) == 0x33221100
    assert prmt(a, b, U(0x4567)) == 0x44556677
    assert prmt(U(0x0080_7F00), b, U(0x8A9B)) == 0x00FF0000


def code_tables(shift: int) -> tuple:
    """The builder's code tables for a group's fold, as key_operands makes them: its table asm
    run on the int32 fold's register bits."""
    lo, hi, _ = Block(1, 0).run(str(ptx.CODE_TABLES_ASM.value), [None, None, shift])
    return U(lo[0]), U(hi[0])


@pytest.mark.parametrize("shift", [-40, -5, -1, 0, 1, 2, 3])
def test_code_tables(shift):
    """Magnitudes 0, 1, 2, 3 | 4, 6, 8, 12 (times 2, as bytes) shifted by the fold; a negative fold
    (a group left out) gives empty tables."""
    expected = [0] * 8 if shift < 0 else [m << shift for m in MAGNITUDES]
    lo, hi = code_tables(shift)
    assert [(int(t) >> (8 * i)) & 0xFF for t in (lo, hi) for i in range(4)] == expected


@pytest.mark.parametrize("form", ["bytes", "words"])
@pytest.mark.parametrize("shift", [-5, -1, 0, 1, 2, 3])
def test_operand_builder_matches_code_table(shift, form):
    rng = np.random.default_rng(shift + 7)
    low = np.arange(1 << 16, dtype=np.uint64)
    words = np.concatenate([low | (low << U(16)), low, low << U(16),
                            rng.integers(0, 1 << 32, 1 << 16, dtype=np.uint64)])
    lo, hi = code_tables(shift)
    asm, regs = {"bytes": (ptx.PRMT_ASM_BYTES, ("$2", "$3", "$7")),
                 "words": (ptx.PRMT_ASM_WORDS, ("$2", "$6", "$10"))}[form]
    # Every other pack=4 copy gets a different value, so reading the wrong one fails.
    operands = {f"${i}": np.full_like(words, U(0xDEADBEEF)) for i in range(2, 14)}
    operands.update(zip(regs, (words, np.full_like(words, lo), np.full_like(words, hi))))
    out = Block(len(words), 0).run(str(asm.value), [None, None] + [operands[f"${i}"] for i in range(2, 14)])
    got = np.concatenate([np.stack([(out[r] >> (8 * i)) & 0xFF for i in range(4)], 1) for r in (0, 1)], 1)
    got = np.where(got >= 128, got - 256, got)  # int8
    np.testing.assert_array_equal(got, expected_elements(words, shift))


def mul_sat_f32(bits, factor_bits):
    """PTX mul.sat.f32 (no .ftz) on float32 bit patterns: subnormals kept, the result clamped to
    [0, 1], NaN results flushed to +0."""
    a = np.asarray(bits, dtype=np.uint32).view(np.float32).astype(np.float64)
    b = np.asarray(factor_bits, dtype=np.uint32).view(np.float32).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        product = (a * b).astype(np.float32)  # exact in float64, one rounding to float32
    return np.where(np.isnan(product), np.float32(0), np.clip(product, 0, 1)).astype(np.float32)


def test_relu_asm_is_relu_undone_by_the_kernels_factor():
    """The epilogue's FMUL.SAT over every accumulator the folded dot can produce: operands are at
    most 12 << 3 = 96 in magnitude, so |acc| <= 128 * 96 * 96 < 2**21."""
    asm = str(ptx.RELU_ASM.value)
    m = re.fullmatch(r"mul\.rn\.sat\.f32 \$0, \$1, 0f([0-9A-F]{8});", asm)
    assert m, asm
    acc = np.arange(-(1 << 21), 1 << 21, dtype=np.int64)
    got = mul_sat_f32(acc.astype(np.uint32), int(m.group(1), 16))
    # The kernel multiplies the head sum back by RELU_UNSCALE: it must undo the asm's factor.
    unscale = float(ptx.RELU_UNSCALE.value)
    np.testing.assert_array_equal(got.astype(np.float64) * unscale, np.maximum(acc, 0).astype(np.float64))


def layout_aliases(ttgir: str) -> dict[str, str]:
    """A module's layout aliases (``#blocked3``) and what each stands for."""
    return dict(re.findall(r"^(#[\w]+) = (.*)$", ttgir, re.M))


def asm_layouts(ttgir: str) -> list[str]:
    """The layout of each inline-asm result in a module's Triton GPU IR, aliases resolved."""
    aliases = layout_aliases(ttgir)
    layouts = []
    for line in ttgir.splitlines():
        if "tt.elementwise_inline_asm" in line:
            for layout in re.findall(r"tensor<\d+x\d+xi8, (#[\w]+|#ttg\.dot_op<\{[^}]*\}>)>", line):
                layouts.append(aliases.get(layout, layout))
    return layouts


def four_columns_per_call(layout: str) -> bool:
    """Whether pack=4 groups four consecutive columns of one row in ``layout``."""
    if "dot_op" in layout:  # int8 dot operands: kWidth consecutive K per thread
        return int(re.search(r"kWidth = (\d+)", layout).group(1)) % 4 == 0
    size = re.search(r"sizePerThread = \[([\d, ]+)\]", layout)
    return size is not None and int(size.group(1).split(",")[-1]) % 4 == 0


def default_launches() -> list[tuple[int, bool, dict]]:
    """(rows per block, bf16 queries, form) of every launch with the PTX builder that the
    scorer makes on an aligned CUDA cache at 64 heads, next_n=1 and 2, both exact forms, and
    from next_n=2 the exact pass after the wgmma hot pass (``wgmma_exact_launches``; the wgmma pass
    itself is compiled in tests/test_wgmma.py); then a few
    tuning forms (one page per tile)."""
    from fp4_inductor.kernels.score import launch_forms, launch_plan, word_fed_pass

    launches = []
    for exact in ("fixup", "inline"):
        for query_float in (False, True):
            for rows in (1, 2):
                word_fed = word_fed_pass(exact, query_float)
                tile, warps, _, pairs, split, setup = launch_plan(word_fed, rows * 64, {})
                forms = launch_forms(exact, True, word_fed, tile, warps, pairs, split, setup)
                forms += launch_forms(exact, True, word_fed, 1, 4)
                launches += [(rows, query_float, form) for form in forms if form["ASM"]]
    launches += wgmma_exact_launches()
    unique = {json.dumps(launch, sort_keys=True): launch for launch in launches}
    return list(unique.values())


def wgmma_exact_launches() -> list[tuple[int, bool, dict]]:
    """The exact pass's launches after the wgmma hot pass at next_n=2 and 4, as
    ``launch_score_paged`` makes them by default and at next_n=4 with ``exact_rows=4`` too (its
    device checks stood down, launches recorded, not run), so the forms compiled here follow the
    launcher's defaults."""
    import torch

    from fp4_inductor.kernels import score

    form_keys = score.launch_forms("fixup", True, True, 1, 4, wgmma=1)[1].keys()
    check_wgmma, score.check_wgmma = score.check_wgmma, lambda *args: None
    try:
        with recorded_scorer_launches() as launches:
            cache = torch.zeros(8, 64, 68, dtype=torch.uint8)
            for next_n, tuning in ((2, {}), (4, {}), (4, {"exact_rows": 4})):
                rows = 2 * next_n
                score.launch_score_paged(torch.empty(rows, 256), torch.zeros(rows, 64, 64, dtype=torch.uint8),
                                         torch.zeros(rows, 64, 4, dtype=torch.uint8), cache, torch.randn(rows, 64),
                                         torch.arange(8, dtype=torch.int32).view(2, 4),
                                         torch.tensor([0, next_n, rows], dtype=torch.int32),
                                         torch.full((rows,), 200, dtype=torch.int32), next_n, asm=True, **tuning)
    finally:
        score.check_wgmma = check_wgmma
    recorded = [named for _, _, named in launches]
    assert [(named["MODE"], named["WGMMA"]) for named in recorded] == [(1, 1), (2, 0)] * 3, recorded
    return [(named["ROWS"], False, {k: named[k] for k in form_keys}) for named in recorded if named["MODE"] == 2]


LAUNCHES = default_launches()


def launch_id(launch) -> str:
    rows, query_float, form = launch
    return "mode{MODE}-tile{TILE_PAGES}-share{SHARE_PAGES}-w{WARPS}".format(**form) + f"-rows{rows}" + (
        f"-rowsplit{form['ROW_SPLIT']}" if form.get("ROW_SPLIT", 1) > 1 else "") + (
        "-bf16q" if query_float else "") + ("-words" if form["WORDS"] else "") + ("-pairs" if form.get("PAIRS") else "")


_COMPILE_ALL = NEEDS_SM90_TOOLS + """
import json
from fp4_inductor.kernels import score
from fp4_inductor.kernels.sm90 import compile_scorer
out = {}
for rows, query_float, form in json.loads(sys.argv[1]):
    kernel = compile_scorer(score.score_paged_kernel, rows, form, query_float=query_float)
    out[json.dumps([rows, query_float, form], sort_keys=True)] = [kernel.asm["ttgir"], kernel.asm["ptx"]]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def sm90_ttgir():
    """The scorer's Triton GPU IR for sm_90 per launch form, compiled by the installed Triton in
    one fresh process (the tests here run Triton's interpreter, which cannot compile)."""
    import json

    return json.loads(run_sm90_script(_COMPILE_ALL, json.dumps(LAUNCHES)))


@pytest.mark.parametrize("launch", LAUNCHES, ids=launch_id)
def test_builder_layouts_on_sm90(sm90_ttgir, launch):
    """Compiled for the H200 with the installed Triton: every call of the PTX builder sees four
    consecutive columns of one row. A Triton that moves the call into another layout (as it does
    into the bf16 dot operand's, two K per register, when fed from words) fails here instead of
    scoring wrong on the GPU."""
    layouts = asm_layouts(sm90_ttgir[json.dumps(list(launch), sort_keys=True)][0])
    assert layouts, "the PTX builder is missing from the compiled kernel"
    bad = [layout for layout in layouts if not four_columns_per_call(layout)]
    assert not bad, f"PTX builder calls in layouts that break pack=4: {bad}"


@pytest.mark.parametrize("launch", [launch for launch in LAUNCHES if launch[2]["WORDS"] and launch[2]["MODE"] == 1],
                         ids=launch_id)
def test_word_fed_stores_survive_compilation(sm90_ttgir, launch):
    """The word-fed loop stores its logits through an asm declared pure (st_f32), kept in the
    code only by its zero result reaching the flag: the compiled PTX still holds every store,
    one or two tiles per step."""
    rows, _, form = launch
    ptx = sm90_ttgir[json.dumps(list(launch), sort_keys=True)][1]
    stores = ptx.count("@p st.global.b32")
    assert stores >= (2 if form["PAIRS"] else 1), f"{stores} asm stores left in the PTX"


_COMPILE_INT64 = NEEDS_SM90_TOOLS + """
import json
from fp4_inductor.kernels import score
from fp4_inductor.kernels.sm90 import compile_scorer
failed = []
for rows, query_float, form in json.loads(sys.argv[1]):
    for int64 in ((), ("page_stride",)):
        try:
            compile_scorer(score.score_paged_kernel, rows, form, query_float=query_float, lengths="i64", int64=int64)
        except Exception as error:
            while error.__cause__ is not None:
                error = error.__cause__
            failed.append([rows, query_float, form, int64, str(error)[-300:]])
print(json.dumps(failed))
"""


def test_every_launch_compiles_with_int64_lengths_and_page_stride():
    """int64 query_starts and row_ends (decode_layout takes int64 lengths) for sm_90: in the
    16-warp ping-pong loop an int64 row end made the loop-carried flag int64 and the launch did
    not compile, on the GPU only (the interpreter takes no asm path). Each with the page stride
    an int32, and an int64 as Triton's launcher types a stride of 2**31 or more
    (``page_offset``'s 64-bit branch)."""
    import json

    failed = json.loads(run_sm90_script(_COMPILE_INT64, json.dumps(LAUNCHES)).splitlines()[-1])
    assert not failed, failed


_PAGE_OFFSET = NEEDS_SM90_TOOLS + """
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from helpers import page_offset_kernel

for typ in ("constexpr", "i32", "i64"):
    source = ASTSource(fn=page_offset_kernel, signature={"ids_ptr": "*i32", "out_ptr": "*i64", "stride": typ,
                                                          "N": "constexpr"},
                       constexprs={"N": 16, **({"stride": 1} if typ == "constexpr" else {})})
    ptx = triton.compile(source, target=GPUTarget("cuda", 90, 32)).asm["ptx"]
    print(typ, "mul.wide.u32" in ptx, "mul.lo.s64" in ptx)
"""


def test_page_offset_multiplies_32_bits_for_an_int32_stride():
    """``page_offset`` (the word-fed loop's key addresses) compiled for sm_90 for each way Triton's
    launcher passes the page stride: an int32 takes one 32 x 32 -> 64-bit multiply, an int64 (a
    stride of 2**31 or more) a 64-bit one, and the constexpr 1 compiles at all (``.to`` of a
    constexpr does not). Whether the int64 product is the full one is for the values to say
    (test_score.py::test_page_offset_is_the_full_product): a 64-bit multiply of the stride's
    low 32 bits would pass here. The kernel is the values test's (helpers.page_offset_kernel)."""
    lines = run_sm90_script(_PAGE_OFFSET).split("\n")
    assert lines[:3] == ["constexpr False False", "i32 True False", "i64 False True"], lines


_COMPILE_PDL = NEEDS_SM90_TOOLS + """
import json
from fp4_inductor.kernels import score
from fp4_inductor.kernels.sm90 import compile_scorer
out = []
for rows, query_float, form in json.loads(sys.argv[1]):
    for pdl in (False, True):
        ptx = compile_scorer(score.score_paged_kernel, rows, dict(form, PDL=pdl), query_float=query_float).asm["ptx"]
        body = ptx[ptx.index("score_paged_kernel("):]
        out.append([rows, form["MODE"], pdl, body.count("griddepcontrol.launch_dependents"),
                    body.count("griddepcontrol.wait"), body.find("griddepcontrol.wait"), body.find("ld.global")])
print(json.dumps(out))
"""


def test_dependent_launch_steps_on_sm90():
    """The word-fed pair as a programmatic dependent launch (``PDL``, eager launches on sm_90):
    compiled for sm_90 with the installed Triton, the hot pass lets its dependents start
    (one ``griddepcontrol.launch_dependents``), and the exact pass waits for the hot pass
    (one ``griddepcontrol.wait``) before its first global load, the flag that the hot pass
    wrote. Without PDL (the launches Inductor makes) neither step is in the code."""
    from fp4_inductor.kernels.score import launch_forms, launch_plan

    pairs = []
    for rows in (1, 2):  # the default pairs at 64 heads: next_n=1, and two-row blocks
        tile, warps, _, paired, split, setup = launch_plan(True, rows * 64, {})
        pairs += [(rows, False, form) for form in launch_forms("fixup", True, True, tile, warps, paired, split, setup)]
    found = json.loads(run_sm90_script(_COMPILE_PDL, json.dumps(pairs)).splitlines()[-1])
    for rows, mode, pdl, launches, waits, wait_at, load_at in found:
        if not pdl:
            assert (launches, waits) == (0, 0), (rows, mode)
        elif mode == 1:
            assert (launches, waits) == (1, 0), (rows, mode)
        else:
            assert (launches, waits) == (0, 1), (rows, mode)
            assert 0 <= wait_at < load_at, f"rows {rows}: the exact pass loads before it waits for the hot pass"


def test_dependent_launch_only_for_eager_launches_on_sm90(monkeypatch):
    """``dependent_launch``: for the word-fed pair with the PTX builder on a real CUDA tensor of
    an sm_90 or later GPU; never for CPU tensors (the interpreter), while tracing (fake tensors,
    even on a CUDA device), on ROCm or an older GPU, nor for the one-launch form or the
    non-word-fed pair. (No GPU here: a real sm_90 tensor is stood in for by the fake one with
    ``is_fake`` and the capability patched.)"""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from fp4_inductor.kernels import score

    cpu = torch.empty(4)
    with FakeTensorMode():
        cuda = torch.empty(4, device="cuda")
    assert cuda.is_cuda
    others = ((True, True, "inline"), (False, True, "fixup"), (True, False, "fixup"))
    for word_fed, asm, exact in ((True, True, "fixup"), *others):
        assert not score.dependent_launch(word_fed, asm, exact, cpu)
        assert not score.dependent_launch(word_fed, asm, exact, cuda)  # tracing
    monkeypatch.setattr(score, "is_fake", lambda t: False)  # as if eager
    for major, expected in ((9, True), (10, True), (8, False)):
        monkeypatch.setattr(score, "capability_major", lambda device: major)
        assert score.dependent_launch(True, True, "fixup", cuda) is expected, major
        assert not any(score.dependent_launch(*other, cuda) for other in others)
    monkeypatch.setattr(torch.version, "hip", "6.2", raising=False)
    assert not score.dependent_launch(True, True, "fixup", cuda)


QUERY_BYTE_LOAD = re.compile(r"tt\.load .*: tensor<(\d+)x(\d+)x!tt\.ptr<i8>, (#[\w]+)>")


def query_byte_load_layouts(ttgir: str) -> list[str]:
    """Layouts of the two-dimensional int8 loads of 32 rows and at least 64 columns: in a word-fed
    launch (keys loaded as int32 words, their scales in five dimensions) only the query operands'
    payload bytes ([32, N]: a head's 32 bytes of one operand half per column)."""
    aliases = layout_aliases(ttgir)
    found = (QUERY_BYTE_LOAD.search(line) for line in ttgir.splitlines())
    return [aliases.get(m.group(3), m.group(3)) for m in found if m and int(m.group(1)) == 32 and int(m.group(2)) >= 64]


@pytest.mark.parametrize("launch", [launch for launch in LAUNCHES if launch[2]["WORDS"]], ids=launch_id)
def test_query_bytes_load_along_a_head(sm90_ttgir, launch):
    """Compiled with the installed Triton, a warp's lanes read the query payload along a head's
    bytes (whole heads, one 128-byte line per load), not one byte of each of many heads (up to 16
    lines): for the former [64 K, N] pointers, which had no contiguous axis, Triton 3.7 chose the
    latter. The [32, N] pointers of query_operands are contiguous along a head."""
    layouts = query_byte_load_layouts(sm90_ttgir[json.dumps(list(launch), sort_keys=True)][0])
    assert layouts, "no query payload load found in the compiled kernel"
    for layout in layouts:
        lanes = re.search(r"threadsPerWarp = \[(\d+), (\d+)\]", layout)
        per_thread = re.search(r"sizePerThread = \[(\d+), (\d+)\]", layout)
        assert lanes is not None and per_thread is not None, layout
        along_head = int(lanes.group(1)) * int(per_thread.group(1))
        assert along_head == 32, f"query bytes loaded across heads: {layout}"


def test_layout_check_refuses_narrow_layouts():
    """The layout check itself: the layouts Triton picked in the failing cases are refused."""
    assert not four_columns_per_call("#ttg.blocked<{sizePerThread = [1, 1], threadsPerWarp = [1, 32]}>")
    assert not four_columns_per_call("#ttg.dot_op<{opIdx = 0, parent = #mma, kWidth = 2}>")
    assert four_columns_per_call("#ttg.blocked<{sizePerThread = [1, 16], threadsPerWarp = [8, 4]}>")
    assert four_columns_per_call("#ttg.dot_op<{opIdx = 0, parent = #mma, kWidth = 4}>")


_COMPILE_WIDE = NEEDS_SM90_TOOLS + """
import os
from fp4_inductor.kernels import score
from fp4_inductor.kernels.sm90 import CUOBJDUMP, compile_scorer, dump_cubin
if not os.path.exists(CUOBJDUMP):
    print("no cuobjdump in the Triton wheel", file=sys.stderr)
    sys.exit(3)
for rows in (1, 2):
    tile, warps, _, pairs, split, setup = score.launch_plan(True, rows * 64, {})
    hot = score.launch_forms("fixup", True, True, tile, warps, pairs, split, setup)[0]
    cubin = compile_scorer(score.score_paged_kernel, rows, hot).asm["cubin"]
    print(next(line for line in dump_cubin(cubin, "resource-usage").splitlines() if "REG:" in line))
    with open(os.path.join(sys.argv[1], f"hot{rows}.cubin.sass"), "w") as f:
        f.write(dump_cubin(cubin))
"""


@pytest.fixture(scope="module")
def hot_kernels(tmp_path_factory):
    """{rows per block: (resource usage line, SASS)} of the default word-fed hot kernels (next_n=1
    and two-row blocks) compiled for sm_90 with the installed Triton."""
    path = tmp_path_factory.mktemp("hot")
    lines = run_sm90_script(_COMPILE_WIDE, str(path)).strip().splitlines()
    kernels = {}
    for rows, line in zip((1, 2), lines):
        with open(path / f"hot{rows}.cubin.sass") as f:
            kernels[rows] = (line, f.read())
    return kernels


@pytest.fixture(scope="module")
def wide_hot_kernel(hot_kernels):
    """(resource usage line, SASS) of the default next_n=1 hot kernel."""
    return hot_kernels[1]


PREDICATE = r"(@!?U?P\w+\s+)?"  # an instruction's optional guard in a SASS listing


def tile_loop(instructions: list[tuple[int, str]]) -> tuple[int, int, list[str]]:
    """(first address, last address, instructions) of the innermost loop that holds the
    tensor-core dots."""
    dots = [address for address, text in instructions if "GMMA" in text and "WARPGROUP" not in text]
    loops = []
    for address, text in instructions:
        target = re.search(r"BRA (0x[0-9a-f]+)", text)
        if target and int(target.group(1), 16) < address:
            first = int(target.group(1), 16)
            if any(first <= dot <= address for dot in dots):
                loops.append((address - first, first, address))
    assert loops, "no loop around the dots"
    _, first, last = min(loops)
    return first, last, [text for address, text in instructions if first <= address <= last]


def test_launch_plan():
    """(tile pages, warps, programs per SM, pairs, exact-pass split, setup units): the word-fed
    hot kernel runs wide (16 warps x 4 pages, one program per SM, a tile per step, 4 setup
    units) with at most 64 columns, and on 8 warps x 2 pages, one per SM, tiles in pairs, 6
    setup units, with more; the exact pass after a word-fed hot pass on twice its programs;
    everything else on 4 warps x 2 pages, two programs per SM, the exact pass on as many;
    tuning values override each."""
    from fp4_inductor.kernels.score import launch_plan

    assert launch_plan(True, 64, {}) == (4, 16, 1, False, 2, 4)
    assert launch_plan(True, 32, {}) == (4, 16, 1, False, 2, 4)
    assert launch_plan(True, 128, {}) == (2, 8, 1, True, 2, 6)  # two rows of 64 heads
    assert launch_plan(True, 256, {}) == (2, 8, 1, True, 2, 6)  # one row of 256 heads
    assert launch_plan(False, 64, {}) == (2, 4, 2, False, 1, 0)  # bf16 queries, the byte-fed builder, the inline form
    assert launch_plan(True, 64, {"num_warps": 4, "tile_pages": 2}) == (2, 4, 1, False, 2, 6)
    assert launch_plan(True, 128, {"num_warps": 16, "tile_pages": 4, "pairs": False}) == (4, 16, 1, False, 2, 4)
    assert launch_plan(True, 128, {"pairs": False}) == (2, 8, 1, False, 2, 6)
    assert launch_plan(False, 128, {"programs_per_sm": 3}) == (2, 4, 3, False, 1, 0)
    assert launch_plan(True, 128, {"exact_split": 1}) == (2, 8, 1, True, 1, 6)
    assert launch_plan(True, 64, {"setup_units": 0})[5] == 0


def test_exact_pass_forms():
    """The fix-up pair cuts the same shares in both launches. After a word-fed hot pass, the
    exact pass is word-fed too, with the PTX builder for its fold classes, one page per tile on
    4 warps (also after the 16-warp hot kernel). Otherwise it builds with the
    portable integer builder (the byte-fed PTX builder's layout breaks pack=4 there on Triton
    3.7), at most two pages per tile on 4 warps."""
    from fp4_inductor.kernels.score import launch_forms

    hot, exact = launch_forms("fixup", True, True, 4, 16)
    assert (hot["MODE"], hot["ASM"], hot["WORDS"], hot["TILE_PAGES"], hot["WARPS"]) == (1, True, True, 4, 16)
    assert (exact["MODE"], exact["ASM"], exact["WORDS"], exact["TILE_PAGES"], exact["WARPS"]) == (2, True, True, 1, 4)
    assert hot["SHARE_PAGES"] == exact["SHARE_PAGES"] == 4
    assert not hot["PAIRS"]
    hot, exact = launch_forms("fixup", True, True, 2, 8, True)
    assert (hot["WORDS"], hot["PAIRS"], hot["WARPS"]) == (True, True, 8)
    assert (exact["ASM"], exact["WORDS"], exact["TILE_PAGES"], exact["WARPS"], exact["SHARE_PAGES"]) == (True, True, 1, 4, 2)
    hot, exact = launch_forms("fixup", True, False, 4, 8, True)
    assert not hot["PAIRS"]  # pairs are a form of the word-fed loop only
    assert (hot["WORDS"], exact["ASM"], exact["WORDS"], exact["TILE_PAGES"], exact["WARPS"]) == (False, False, False, 2, 4)
    (inline,) = launch_forms("inline", True, False, 2, 4)
    assert (inline["MODE"], inline["ASM"], inline["SHARE_PAGES"]) == (0, True, 2)


def test_wide_hot_kernel_needs_no_register_cap(wide_hot_kernel):
    """The default next_n=1 hot kernel runs one 512-thread program per SM without ``maxnreg``
    (which Inductor does not pass): 512 threads hold ptxas to 128 registers, and the kernel
    spills little under that. Compiled for sm_90 with the installed Triton (the launcher's step
    for a large batch): no stack on Triton 3.6 and 3.7.1, 72 bytes on 3.8 and 88 on 3.9, reloaded
    outside the loop over tiles. A change that makes it spill heavily, or spill in that loop,
    fails here before it slows the GPU."""
    line, sass = wide_hot_kernel
    usage = {k: int(v) for k, v in (f.split(":") for f in line.split()) if k in ("REG", "STACK")}
    assert usage["STACK"] <= 128, f"the wide hot kernel spills: {line}"
    _, _, loop = tile_loop(sass_instructions(sass))
    spills = [text for text in loop if re.match(PREDICATE + r"(LDL|STL)\b", text)]
    assert not spills, f"local memory in the loop over tiles: {spills}"


@pytest.mark.parametrize("rows", [1, 2])
def test_hot_loops_keep_keys_out_of_shared_memory(hot_kernels, rows):
    """The word-fed loads land in the dot operand's layout (``score_tiles.GROUP_LAST`` picks the arrangement
    the installed Triton compiles so): the hot loop over tiles, next_n=1 and two-row blocks,
    holds no shared-memory load or store, and no CTA barrier but those Triton 3.9 puts after each
    tensor-core wait (``wait_barriers``). With the other arrangement Triton converts the scales
    and words through shared memory, 14 loads, 12 stores and 16 CTA barriers per tile at
    next_n=1."""
    _, _, loop = tile_loop(sass_instructions(hot_kernels[rows][1]))
    shared = [text for text in loop if re.match(PREDICATE + r"(LDS|STS|LDSM|STSM)\b", text)]
    cta = [text for text in loop if re.fullmatch(PREDICATE + r"BAR\.SYNC(\.DEFER_BLOCKING)? 0x0", text)]
    assert not shared and len(cta) == wait_barriers(loop), (shared, cta)


def wait_barriers(loop: list[str]) -> int:
    """The CTA barriers that the installed Triton puts after the tensor-core waits of a loop in a
    program of more than one warpgroup: none up to 3.8; from 3.9 on one per wait (a wait there
    also orders the other warpgroups' reads of the shared operand)."""
    from fp4_inductor.kernels import TRITON_VERSION

    if TRITON_VERSION is not None and TRITON_VERSION < (3, 9):
        return 0
    return sum(1 for text in loop if "WARPGROUP.DEPBAR" in text)


@pytest.mark.parametrize("rows", [1, 2])
def test_hot_loops_sum_heads_in_fma_chains(hot_kernels, rows):
    """The head sum of the compiled hot loops (64 heads, next_n=1 and two-row blocks): each
    thread's 16 relu values of a row (one FMUL.SAT each) go into one chain of a multiply and 15
    FFMAs: ``score_math.head_chain``, whatever order the installed Triton gives ``tl.sum`` (a
    tree from Triton 3.8 on: 8 FMUL, 8 FFMA and 7 FADD per 16 values), or, for two-row blocks on
    Triton 3.6 and 3.7, ``tl.sum``, which compiles to that chain there (``TL_SUM_CHAINS``)."""
    _, _, loop = tile_loop(sass_instructions(hot_kernels[rows][1]))
    relu = [text for text in loop if re.match(PREDICATE + r"FMUL\.SAT\b", text)]
    ffma = [text for text in loop if re.match(PREDICATE + r"FFMA\b", text)]
    assert relu and len(relu) % 16 == 0, len(relu)
    assert len(ffma) == len(relu) // 16 * 15, (len(relu), len(ffma))


def pingpong_step(asm: str, first_half: bool) -> tuple[str, int] | None:
    """(``sync`` or ``arrive``, barrier) that one half of the CTA runs in a ping-pong step of
    the scorer's loop (ptx.py), or None."""
    assert "mov.u32 t, %tid.x; setp.lt.u32 p, t, 256;" in asm
    both = re.search(r"selp\.u32 b, (\d), (\d), p; barrier\.(sync|arrive) b, 512;", asm)
    if both:
        return both.group(3), int(both.group(1) if first_half else both.group(2))
    one = re.fullmatch(r".*@(!?)p barrier\.(sync|arrive) (\d), 512;.*", asm)
    assert one, asm
    return (one.group(2), int(one.group(3))) if (one.group(1) == "") == first_half else None


def run_pingpong(loops: list[int], prefer, steps: dict, cta_barriers: tuple = ()) -> list[int]:
    """The halves of a CTA through ``loops`` (tiles per loop, one loop after another, each
    after a CTA barrier as in the kernel) with the named barriers' semantics: a barrier completes
    when 512 threads, both halves, have arrived or wait there, and a half that waits blocks until
    then. ``cta_barriers``: where else each tile holds a CTA barrier (``before wait``, ``in
    window``: between the wait and the signal, ``after signal``). ``prefer(runnable)`` picks the
    half that moves next. Returns the halves in the order of their dots; fails on a deadlock, on
    both halves at their dots at once, on dots that do not alternate starting with the first
    half, and on a barrier left with arrivals after the last loop."""
    programs = []
    for half in (0, 1):
        program = []
        for tiles in loops:
            program += [("sync", 0), pingpong_step(steps["first"], half == 0)]
            for _ in range(tiles):
                program += [("sync", 0)] if "before wait" in cta_barriers else []
                program += [pingpong_step(steps["wait"], half == 0), ("dot", half), ("done", half)]
                program += [("sync", 0)] if "in window" in cta_barriers else []
                program += [pingpong_step(steps["signal"], half == 0)]
                program += [("sync", 0)] if "after signal" in cta_barriers else []
            program.append(pingpong_step(steps["last"], half == 0))
        programs.append([step for step in program if step is not None])
    at, waiting, arrived, in_dot, dots = [0, 0], [None, None], {}, [False, False], []
    while at[0] < len(programs[0]) or at[1] < len(programs[1]):
        runnable = [h for h in (0, 1) if at[h] < len(programs[h]) and waiting[h] is None]
        assert runnable, f"deadlock: the halves wait on {waiting}, arrivals {arrived}"
        half = prefer(runnable)
        op, value = programs[half][at[half]]
        at[half] += 1
        if op in ("dot", "done"):
            assert op == "done" or not in_dot[1 - half], "both halves at their dots"
            in_dot[half] = op == "dot"
            dots += [half] if op == "dot" else []
            continue
        arrived[value] = arrived.get(value, 0) + 1
        if op == "sync":
            waiting[half] = value
        if arrived[value] == 2:
            arrived[value] = 0
            waiting = [None if w == value else w for w in waiting]
    assert not any(arrived.values()), f"barriers left with arrivals: {arrived}"
    assert dots == [0, 1] * sum(loops), dots
    return dots


PINGPONG_STEPS = {"first": ptx.PINGPONG_FIRST.value, "wait": ptx.PINGPONG_WAIT.value,
                  "signal": ptx.PINGPONG_SIGNAL.value, "last": ptx.PINGPONG_LAST.value}
SCHEDULES = {"first half": lambda rng: lambda r: r[0], "second half": lambda rng: lambda r: r[-1],
             "random": lambda rng: lambda r: r[rng.integers(len(r))]}


@pytest.mark.parametrize("schedule", list(SCHEDULES))
@pytest.mark.parametrize("cta_barriers", [(), ("before wait",), ("after signal",), ("before wait", "after signal")])
def test_pingpong_protocol(schedule, cta_barriers):
    """The 16-warp hot loop's ping-pong, as its asm steps say it: over loops of 1 to 5 tiles,
    under any order of the two halves, with or without CTA barriers outside the window between
    a wait and its signal (Triton's layout conversions), it never deadlocks, the halves' dots
    never overlap and alternate starting with the first half, and every loop leaves both
    barriers as it found them (so the next loop, and the kernel's end, find them clean)."""
    prefer = SCHEDULES[schedule](np.random.default_rng(7))
    run_pingpong([1, 3, 2, 5, 1, 4], prefer, PINGPONG_STEPS, cta_barriers)


def test_pingpong_protocol_catches_wrong_barriers():
    """The check above fails for a half that signals the barrier it waits on, for a first
    signal on the wrong barrier, and for a CTA barrier inside the window (the deadlock that
    test_wide_hot_loop_pingpongs_on_sm90 rules out in the compiled loop)."""
    selfish = dict(PINGPONG_STEPS, signal=PINGPONG_STEPS["signal"].replace("selp.u32 b, 2, 1", "selp.u32 b, 1, 2"))
    wrong_first = dict(PINGPONG_STEPS, first=PINGPONG_STEPS["first"].replace("arrive 1,", "arrive 2,"))
    for steps, cta_barriers in ((selfish, ()), (wrong_first, ()), (PINGPONG_STEPS, ("in window",))):
        for schedule in SCHEDULES:
            with pytest.raises(AssertionError):
                run_pingpong([3, 2], SCHEDULES[schedule](np.random.default_rng(7)), steps, cta_barriers)


_COMPILE_HEADS = NEEDS_SM90_TOOLS + """
from fp4_inductor.kernels import score
from fp4_inductor.kernels.sm90 import compile_scorer
form = score.launch_forms("fixup", True, True, 4, 16, False, 2)[0]
for rows, heads in ((1, 16), (1, 32), (1, 64), (1, 128), (2, 32)):
    ptx = compile_scorer(score.score_paged_kernel, rows, form, heads=heads).asm["ptx"]
    wait, signal = ptx.find("barrier.sync b, 512;"), ptx.find("barrier.arrive b, 512;")
    # -1: a signal placed before its wait.
    window = (ptx[wait:signal].count("bar.sync") + ptx[wait:signal].count("barrier.sync 0") if wait < signal else -1
              ) if wait >= 0 else 0
    print(rows, heads, ptx.count("barrier.sync b, 512;"), ptx.count("barrier.arrive b, 512;"), window)
"""


def test_pingpong_only_where_its_packs_fit():
    """The 16-warp x 4-page hot loop ping-pongs only where each step is one asm call per thread:
    at most 64 columns (rows x heads), so at most 32 accumulator entries per thread. At 128
    columns the signal would run twice a tile (two packs), letting a half run ahead of the
    other; there the loop keeps Triton's lockstep. Compiled for sm_90 with the installed
    Triton, counting the steps in the PTX, and the CTA barriers between a wait and its signal,
    which would deadlock the halves (none; test_wide_hot_loop_pingpongs_on_sm90 checks the
    SASS at 64 heads). A Triton whose compiles were not checked for the ping-pong (``PINGPONG_TRITON``)
    keeps Triton's lockstep everywhere."""
    from fp4_inductor.kernels.ptx import PINGPONG_TRITON

    counts = {(int(r), int(h)): (int(w), int(s), int(c)) for r, h, w, s, c in
              (line.split() for line in run_sm90_script(_COMPILE_HEADS).strip().splitlines())}
    step = (1, 1, 0) if PINGPONG_TRITON else (0, 0, 0)
    assert counts == {(1, 16): step, (1, 32): step, (1, 64): step, (1, 128): (0, 0, 0), (2, 32): step}, counts


def test_wide_hot_loop_pingpongs_on_sm90(wide_hot_kernel):
    """In the compiled sm_90 hot kernel (installed Triton), the loop over tiles holds one wait on
    a barrier chosen per half before its first dot and one signal after its last tensor-core
    wait, and no CTA barrier (bar 0) between them, which would deadlock the halves
    (test_pingpong_protocol_catches_wrong_barriers). The second half's first signal comes
    before the loop, the first half's taking it back after. On a Triton that keeps the lockstep
    (``PINGPONG_TRITON``): no named barrier in the kernel, and no CTA barrier in the loop but
    Triton 3.9's after each tensor-core wait (``wait_barriers``)."""
    from fp4_inductor.kernels.ptx import PINGPONG_TRITON

    instructions = sass_instructions(wide_hot_kernel[1])
    first, last, loop = tile_loop(instructions)
    if not PINGPONG_TRITON:
        assert not [text for _, text in instructions if re.search(r"\bBAR\..*0x200", text)]
        assert len([text for text in loop if re.search(r"\bBAR\.", text)]) == wait_barriers(loop)
        return
    named = [i for i, text in enumerate(loop) if re.fullmatch(r"BAR\.(SYNC(\.DEFER_BLOCKING)?|ARV) R\d+, 0x200", text)]
    assert len(named) == 2, [loop[i] for i in named]
    wait, signal = named
    assert loop[wait].startswith("BAR.SYNC") and loop[signal].startswith("BAR.ARV")
    dots = [i for i, text in enumerate(loop) if "GMMA" in text and "WARPGROUP" not in text]
    depbars = [i for i, text in enumerate(loop) if "WARPGROUP.DEPBAR" in text]
    assert wait < min(dots) and signal > max(depbars)
    window = loop[wait + 1:signal]
    assert not [text for text in window if re.search(r"\bBAR\.", text)], "a CTA barrier between wait and signal"
    other = [text for text in loop if re.search(r"\bBAR\.", text) and "0x200" in text]
    assert len(other) == 2, other
    before = [text for address, text in instructions if address < first]
    assert any(re.fullmatch(r"@!?P\d BAR\.ARV 0x1, 0x200", text) for text in before)
    # The take-back runs in the first half only: a guarded barrier, or a barrier that a guarded
    # branch to the next instruction jumps over (Triton 3.8's ptxas, with the ping-pong forced on).
    take_back = [(address, text) for address, text in instructions if address > last
                 and re.fullmatch(r"(@!?P\d )?BAR\.SYNC(\.DEFER_BLOCKING)? 0x1, 0x200", text)]
    assert len(take_back) == 1, take_back
    address, text = take_back[0]
    over = [t for a, t in instructions
            if last < a < address and re.fullmatch(rf"@!?P\d BRA {address + 0x10:#x}", t)]
    assert text.startswith("@") or over, text


def test_dependent_launch_arguments(gen, monkeypatch):
    """Where ``dependent_launch`` says so, the launcher gives both launches ``PDL=True`` and only
    the second (the exact pass) ``launch_pdl``: a hot pass launched as a dependent would start
    before the kernels it reads from end, with no wait of its own. Where it says no, both take
    ``PDL=False`` and no ``launch_pdl``; a kernel copy without the constexpr takes neither.
    (The launches are recorded, not run.)"""
    import torch

    from fp4_inductor import quantize_queries
    from fp4_inductor.kernels import score
    from helpers import scoring_case

    case = scoring_case(gen, "cpu", query_lens=[2, 1], seq_lens=[70, 40], heads=16)
    query = quantize_queries(case["q"])
    out = torch.empty(3, case["block_table"].shape[1] * 64)
    args = (out, *query, case["cache"], case["weights"], case["block_table"], case["query_starts"], case["row_ends"],
            case["max_query_len"])

    def launches(kernel, pdl):
        seen = []

        def capture(k):
            class Grid:
                def __getitem__(self, grid):
                    return lambda *a, **kw: seen.append(kw)
            return Grid()

        monkeypatch.setattr(score, "wrapped", capture)
        monkeypatch.setattr(score, "dependent_launch", lambda *a: pdl)
        score.launch_score_paged(*args, kernel=kernel, exact="fixup")
        return [(kw["MODE"], kw.get("PDL"), kw.get("launch_pdl", False)) for kw in seen]

    assert launches(score.score_paged_kernel, True) == [(1, True, False), (2, True, True)]
    assert launches(score.score_paged_kernel, False) == [(1, False, False), (2, False, False)]
    old = type("OldKernel", (), {"arg_names": [n for n in score.score_paged_kernel.arg_names if n != "PDL"]})()
    assert launches(old, True) == [(1, None, False), (2, None, False)]
