"""select_topk: exact sets against the reference, ties to the lower index, NaN lowest,
short rows padded with -inf / -1, sorted order."""

import pytest
import torch

import fp4_inductor as fp4
from conftest import gpu


def reference_sets(logits, row_ends, k):
    """Plain Python: sort each row's valid entries (below row_ends, cut to the width) by (value
    desc, NaN last, index asc)."""
    out = []
    for r in range(logits.shape[0]):
        n = max(0, min(int(row_ends[r]), logits.shape[1]))  # a negative end: no keys (not a slice from the end)
        entries = [(float(v), j) for j, v in enumerate(logits[r, :n].tolist())]
        entries.sort(key=lambda e: (e[0] != e[0], -e[0] if e[0] == e[0] else 0.0, e[1]))
        out.append([j for _, j in entries[:k]])
    return out


def make_logits(gen, rows, width):
    x = torch.randn(rows, width, generator=gen)
    x[0] = torch.randint(0, 4, (width,), generator=gen).float()  # heavy ties
    x[1, ::5] = float("nan")
    x[2, :20] = 0.0
    x[2, 1::2] = -0.0
    x[3, 7] = float("inf")
    x[3, 9] = float("-inf")
    return x


@pytest.mark.parametrize("k", [1, 5, 64, 300])
def test_topk_exact_sets(k, backend_device, gen):
    backend, device = backend_device
    rows, width = 7, 520
    logits = make_logits(gen, rows, width)
    row_ends = torch.tensor([520, 400, 20, 333, 0, 3, 519], dtype=torch.int32)
    values, indices = fp4.select_topk(logits.to(device), row_ends.to(device), k, backend=backend)
    values, indices = values.cpu(), indices.cpu()
    assert values.shape == (rows, k) and values.dtype == torch.float32 and indices.dtype == torch.int32
    want = reference_sets(logits, row_ends, k)
    for r in range(rows):
        got = indices[r][indices[r] >= 0].tolist()
        assert sorted(got) == sorted(want[r]), f"row {r}"
        filled = len(want[r])
        assert (indices[r] == -1).sum() == k - filled
        assert values[r][indices[r] < 0].eq(float("-inf")).all()
        picked = indices[r] >= 0
        assert torch.equal(values[r][picked].nan_to_num(7.5), logits[r, indices[r][picked].long()].nan_to_num(7.5))


@pytest.mark.parametrize("k", [3, 64])
def test_topk_sorted_order(k, backend_device, gen):
    backend, device = backend_device
    logits = make_logits(gen, 5, 200)
    row_ends = torch.tensor([200, 180, 20, 50, 2], dtype=torch.int32)
    values, indices = fp4.select_topk(logits.to(device), row_ends.to(device), k, sorted=True, backend=backend)
    want = reference_sets(logits, row_ends, k)
    for r in range(5):
        assert indices[r].cpu().tolist() == want[r] + [-1] * (k - len(want[r]))


def test_topk_k_larger_than_width(backend_device, gen):
    backend, device = backend_device
    logits = torch.randn(2, 64, generator=gen)
    values, indices = fp4.select_topk(logits.to(device), torch.tensor([64, 10], device=device), 100, backend=backend)
    assert sorted(indices[0, :64].cpu().tolist()) == list(range(64)) and indices[0, 64:].eq(-1).all()
    assert sorted(indices[1, :10].cpu().tolist()) == list(range(10)) and indices[1, 10:].eq(-1).all()


def test_topk_names_k_past_the_kernels_block(triton_backend_device):
    """k above 2**19 on rows wider than 2**20 needs a block past Triton's largest: refused by
    name (it was an error from inside Triton's block check), and the reference takes it."""
    backend, device = triton_backend_device
    logits = torch.zeros(1, 2**20 + 64, device=device)
    row_ends = torch.tensor([5], device=device)
    with pytest.raises(ValueError, match=r"k: expected at most 524288 for rows wider than 1048576 with the triton "
                                         r"backend \(backend='reference' takes any k\), got k=524289"):
        fp4.select_topk(logits, row_ends, 2**19 + 1, backend=backend)
    values, indices = fp4.select_topk(logits, row_ends, 2**19 + 1, backend="reference")
    assert indices[0, :5].tolist() == list(range(5)) and indices[0, 5:].eq(-1).all()


@pytest.mark.parametrize("k, match", [(2**31, "k: expected an int < 2147483648"),
                                      (2**63, "k: expected an int < 2147483648"),
                                      (-(2**64), "k: expected an int >= 1")])
def test_topk_names_a_k_no_op_takes(k, match):
    """k at or past 2**31 (indices are int32), also past int64 (what the op's schema holds), is
    refused by name, not by an allocation's overflow or the schema's type error."""
    logits = torch.zeros(2, 64)
    with pytest.raises(ValueError, match=match):
        fp4.select_topk(logits, torch.tensor([64, 3]), k)


def test_topk_is_deterministic(backend_device, gen):
    backend, device = backend_device
    logits = make_logits(gen, 4, 1000).to(device)
    row_ends = torch.tensor([1000, 900, 800, 10], device=device)
    a = fp4.select_topk(logits, row_ends, 50, backend=backend)
    b = fp4.select_topk(logits, row_ends, 50, backend=backend)
    assert torch.equal(a[1], b[1])


def test_topk_rejects_bad_input():
    with pytest.raises(ValueError, match="logits: expected float32"):
        fp4.select_topk(torch.zeros(2, 8, dtype=torch.float16), torch.zeros(2, dtype=torch.int32), 2)
    with pytest.raises(ValueError, match="row_ends"):
        fp4.select_topk(torch.zeros(2, 8), torch.zeros(3, dtype=torch.int32), 2)
    with pytest.raises(ValueError, match="k: expected an int >= 1"):
        fp4.select_topk(torch.zeros(2, 8), torch.zeros(2, dtype=torch.int32), 0)
    with pytest.raises(TypeError, match="k: expected a Python int"):
        fp4.select_topk(torch.zeros(2, 8), torch.zeros(2, dtype=torch.int32), 2.0)


# --------------------------------------------------------------------------- exact sets on hard inputs


def assert_same_selection(logits, row_ends, k, values, indices):
    """Same index set as plain Python's sort (``reference_sets``: the reference backend is checked
    too, so it is not the oracle), values bit-equal to the logits, -inf / -1 padding."""
    want_sets = reference_sets(logits.cpu(), row_ends.cpu(), k)
    values, indices = values.cpu(), indices.cpu()
    assert values.shape == (logits.shape[0], k) and indices.dtype == torch.int32
    for r in range(logits.shape[0]):
        got = indices[r][indices[r] >= 0]
        want = want_sets[r]
        assert sorted(got.tolist()) == sorted(want), f"row {r}"
        assert (indices[r] == -1).sum() == k - len(want), f"row {r}"
        assert values[r][indices[r] < 0].eq(float("-inf")).all(), f"row {r}"
        bits = values[r][indices[r] >= 0].view(torch.int32)
        assert torch.equal(bits, logits[r, got.long()].view(torch.int32)), f"row {r}: values are not the logits' bits"


def hard_rows(gen, rows, width):
    """Fresh random rows, each a different hard case for a bucket or radix threshold search."""
    x = torch.randn(rows, width, generator=gen)
    kinds = [
        lambda n: torch.randn(n, generator=gen),
        lambda n: torch.randint(0, 3, (n,), generator=gen).float(),  # many ties at the threshold
        lambda n: torch.full((n,), -1.75),  # all equal
        lambda n: torch.where(torch.rand(n, generator=gen) < 0.3, float("nan"), torch.randn(n, generator=gen)),
        lambda n: torch.tensor([float("nan"), float("-inf"), float("inf"), -0.0, 0.0, 1.0])[
            torch.randint(0, 6, (n,), generator=gen)
        ],
        lambda n: torch.where(torch.rand(n, generator=gen) < 0.5, -1e30, torch.randn(n, generator=gen)),  # outliers
        lambda n: torch.randn(n, generator=gen) * 1e-41,  # denormals
        lambda n: torch.where(torch.rand(n, generator=gen) < 0.01, 3e38, -3e38),  # span overflows float32
        lambda n: torch.randint(-2, 3, (n,), generator=gen).float() * 0.0,  # only -0.0 and +0.0
        lambda n: torch.randn(n, generator=gen).round(decimals=1),  # clusters of equal values
    ]
    for r in range(rows):
        x[r] = kinds[r % len(kinds)](width)
    x[0, width // 2] = 1e30  # one huge value stretches the keys' range
    return x


@pytest.mark.parametrize(
    "width, k",
    [(300, 1), (300, 17), (1000, 64), (777, 300), (3000, 40), (60, 100)],
    ids=["k1", "k17", "k64", "k300-odd-width", "multi-level", "k-over-width"],
)
def test_topk_hard_rows_exact_sets(width, k, backend_device, gen):
    backend, device = backend_device
    rows = 12
    logits = hard_rows(gen, rows, width)
    ends = torch.randint(0, width + 1, (rows,), generator=gen)
    ends[:4] = torch.tensor([width, 0, min(k, width), max(k - 1, 0)])  # full, empty, == k, < k
    ends[4] = width + 5  # past the width: the whole row
    row_ends = ends.to(torch.int64 if k == 17 else torch.int32)
    values, indices = fp4.select_topk(logits.to(device), row_ends.to(device), k, backend=backend)
    assert_same_selection(logits, row_ends, k, values, indices)


def test_topk_ties_go_to_lower_indices_across_segments(backend_device):
    """Equal values everywhere: the lowest indices win, also when the row spans segments."""
    backend, device = backend_device
    logits = torch.full((3, 3000), 0.5)
    logits[1, 2500:] = 0.75  # the top values sit in the last segment
    row_ends = torch.tensor([3000, 3000, 1234], dtype=torch.int32)
    values, indices = fp4.select_topk(logits.to(device), row_ends.to(device), 600, sorted=True, backend=backend)
    assert indices[0].cpu().tolist() == list(range(600))
    assert indices[1].cpu().tolist() == list(range(2500, 3000)) + list(range(100))
    assert indices[2].cpu().tolist() == list(range(600))


def test_topk_strided_rows(backend_device, gen):
    backend, device = backend_device
    big = hard_rows(gen, 10, 700)
    logits = big[:, 3:653]  # row stride 700, unit stride along keys
    row_ends = torch.randint(0, 651, (10,), generator=gen, dtype=torch.int32)
    values, indices = fp4.select_topk(logits.to(device), row_ends.to(device), 50, backend=backend)
    assert_same_selection(logits, row_ends, 50, values, indices)


def test_topk_logits_with_any_key_stride(backend_device, gen):
    """Logits whose keys are not at unit stride (every other column of a wider sheet, or a
    transposed one): the same selection on every backend (the Triton launcher copies them)."""
    backend, device = backend_device
    big = hard_rows(gen, 10, 1400)
    row_ends = torch.randint(0, 701, (10,), generator=gen, dtype=torch.int32)
    for logits in (big[:, ::2], big[:, :700].t().contiguous().t()):
        values, indices = fp4.select_topk(logits.to(device), row_ends.to(device), 40, backend=backend)
        assert_same_selection(logits, row_ends, 40, values, indices)


@pytest.mark.parametrize(
    "tuning, k",
    [(dict(segment=64, radix_bits=2), 5), (dict(segment=128, radix_bits=4), 30), (dict(segment=4096), 200),
     (dict(num_warps=1), 30), (dict(smem=False), 30), (dict(segment=256, num_warps=8, radix_bits=8), 30),
     (dict(segment=4096, num_warps=1), 200), (dict(segment=512, num_warps=2), 30),
     (dict(segment=512, num_warps=4), 30), (dict(segment=2048, num_warps=32), 100)],
    ids=["small-segments-and-digits", "segment128", "one-segment", "one-warp", "tl-histogram", "radix8",
         "one-warp-32-rows-per-thread", "two-warps", "four-warps", "32-warps"],
)
def test_topk_launch_tuning_variants(tuning, k, triton_backend_device, gen):
    """The launcher's knobs (segment size, warps, digits of the threshold search, where the
    histograms are counted) never change the selection. On the GPU the shared-memory histogram is
    the default; one warp takes 5-bit digits there (a thread per bin)."""
    backend, device = triton_backend_device
    from fp4_inductor.kernels.topk import launch_select_topk

    logits = hard_rows(gen, 10, 1000)
    row_ends = torch.randint(0, 1001, (10,), generator=gen, dtype=torch.int32)
    row_ends[0] = 1000
    values, indices = launch_select_topk(logits.to(device), row_ends.to(device), k, False, **tuning)
    assert_same_selection(logits, row_ends, k, values, indices)


@pytest.mark.parametrize("radix_bits", [3, 8])
def test_topk_refinement_over_adjacent_keys(radix_bits, triton_backend_device, gen):
    """Rows of adjacent floats (consecutive bit patterns, shuffled) and of a few equal runs:
    the threshold search over the keys' own range descends several levels, stops
    on a bucket needed whole or on a single key, and breaks ties by index."""
    backend, device = triton_backend_device
    from fp4_inductor.kernels.topk import launch_select_topk

    width = 1500
    base = torch.tensor([1.5, -3.25, 1e-30, 7.0]).view(torch.int32)
    rows = []
    for r in range(4):
        bits = base[r] + torch.randperm(width, generator=gen, dtype=torch.int32) * (r + 1)
        rows.append(bits.view(torch.float32))
    runs = torch.randint(0, 7, (width,), generator=gen).float() * 2.0**-20 + 1.0  # few values, long tie runs
    logits = torch.stack(rows + [runs, -runs])
    row_ends = torch.tensor([width, 1499, 1024, 777, width, 1001], dtype=torch.int32)
    for k in (1, 33, 100, 511):
        values, indices = launch_select_topk(logits.to(device), row_ends.to(device), k, False, segment=512,
                                             radix_bits=radix_bits)
        assert_same_selection(logits, row_ends, k, values, indices)


def float_bits(patterns):
    """float32 values with the given bit patterns (NaN payloads of either sign included)."""
    return torch.tensor(patterns, dtype=torch.int64).to(torch.int32).view(torch.float32)


def test_topk_nan_below_minus_inf_whatever_its_payload(backend_device, gen):
    """NaN ranks below -inf with either sign bit and any payload (not only torch's canonical
    NaN): k reaches past the finite values into the -inf entries and then the NaNs, and NaNs at
    the lowest indices are not taken before -inf."""
    backend, device = backend_device
    width = 300
    logits = torch.randn(3, width, generator=gen)
    logits[0, :100] = float("nan")
    logits[0, 100:200] = float("-inf")
    nans = [0x7FC00000, 0xFFC00000, 0xFFFFFFFF, 0x7F800001, 0xFF800001, 0x7FFFFFFF]
    logits[1, :120] = float_bits([nans[i % len(nans)] for i in range(120)])
    logits[1, 120:180] = float("-inf")
    logits[2, ::2] = float_bits([nans[(5 * i) % len(nans)] for i in range(width // 2)])
    logits[2, 1::4] = float("-inf")
    row_ends = torch.tensor([width, width, 290], dtype=torch.int32)
    tunings = [dict(), dict(segment=64, radix_bits=1), dict(segment=128, num_warps=1)] if backend == "triton" else [None]
    for k in (150, 250, 280):
        for tuning in tunings:
            if tuning is None:
                values, indices = fp4.select_topk(logits.to(device), row_ends.to(device), k, backend=backend)
            else:
                from fp4_inductor.kernels.topk import launch_select_topk

                values, indices = launch_select_topk(logits.to(device), row_ends.to(device), k, False, **tuning)
            assert_same_selection(logits, row_ends, k, values, indices)


@pytest.mark.parametrize(
    "ends, dtype, width, k",
    [
        # int64 ends at and past 2**31 (and far past the width) cover the whole row, and ends
        # below -2**31 none of it: the kernel clamps them to [0, width] before narrowing to int32.
        ([2**32 + 5, 2**31, 260 + 100, 2**40, -(2**32) + 5, -(2**31) - 1], torch.int64, 260, 20),
        # int32 ends at and near -2**31 select nothing in any segment: a later segment's
        # ``end - segment * length`` wrapped positive and selected uninitialized entries.
        ([-(2**31), -(2**31) + 100, -1, 150], torch.int32, 300, 4),
    ],
    ids=["int64-past-int32", "int32-near-the-lowest"],
)
def test_topk_row_ends_at_the_integer_limits(ends, dtype, width, k, backend_device, gen):
    backend, device = backend_device
    logits = torch.randn(len(ends), width, generator=gen)
    row_ends = torch.tensor(ends, dtype=dtype)
    values, indices = fp4.select_topk(logits.to(device), row_ends.to(device), k, backend=backend)
    assert_same_selection(logits, row_ends, k, values, indices)
    if backend == "triton":
        from fp4_inductor.kernels.topk import launch_select_topk

        values, indices = launch_select_topk(logits.to(device), row_ends.to(device), k, False, segment=64)
        assert_same_selection(logits, row_ends, k, values, indices)


def test_topk_compaction_over_many_rows_per_thread(triton_backend_device, gen):
    """One warp over 4096-entry blocks: 128 entries per thread, so the compaction walks four words
    of row bits per thread (bit 31 included); hard rows, ragged ends, k up to 1500."""
    backend, device = triton_backend_device
    from fp4_inductor.kernels.topk import launch_select_topk

    width = 3000
    logits = hard_rows(gen, 6, width)
    row_ends = torch.tensor([width, 2999, 2048, 1500, 100, 4000], dtype=torch.int32)
    for k in (700, 1500):
        values, indices = launch_select_topk(logits.to(device), row_ends.to(device), k, False, segment=4096,
                                             num_warps=1)
        assert_same_selection(logits, row_ends, k, values, indices)


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("smem", [True, False], ids=["shared-histogram", "tl-histogram"])
def test_topk_full_width_rows_on_gpu(smem, gen):
    """The GPU's launch (16 warps over 32768-entry segments, then a pass over the candidates) on
    rows wider than a segment, each a hard case, with ragged ends: both ways of counting the
    histograms select the reference's sets."""
    from fp4_inductor.kernels.topk import launch_select_topk

    width, k = 70000, 2048
    logits = hard_rows(gen, 12, width)
    row_ends = torch.randint(1, width + 1, (12,), generator=gen, dtype=torch.int32)
    row_ends[:3] = width
    values, indices = launch_select_topk(logits.cuda(), row_ends.cuda(), k, False, smem=smem)
    assert_same_selection(logits, row_ends, k, values, indices)


_TOPK_PTX = """
import json
import torch
from fp4_inductor.kernels import topk
from fp4_inductor.kernels.sm90 import compile_topk

topk.wrapped = capture  # the launcher's launches for the GPU (its defaults), not run
for rows, width, k in ((64, 32768, 2048), (4, 131072, 2048), (3, 5000, 300), (2, 20, 7)):
    topk.launch_select_topk(torch.randn(rows, width), torch.full((rows,), width, dtype=torch.int32), k, False,
                            smem=True, segment=32768, num_warps=16)
forms = {}
for _, named, options in launches:
    form = {k: v for k, v in named.items() if k.isupper()}
    forms[json.dumps([form, options["num_warps"]], sort_keys=True)] = (form, options["num_warps"])
out = []
for form, warps in forms.values():
    compiled = compile_topk(topk.topk_segment_kernel, form, warps)
    inductor = compile_topk(topk.topk_segment_kernel, form, warps, divisible_ints=True)
    out.append([form, warps, compiled.metadata.shared, compiled.asm["ptx"], inductor.asm["ptx"]])
print(json.dumps(out))
"""


def normalized_ptx(ptx: str) -> list[str]:
    """PTX instructions with register numbers and debug lines left out."""
    import re

    lines = (line.split("//")[0].strip() for line in ptx.splitlines())
    return [re.sub(r"%(r|rd|p|f|fd|rs)\d+", "%R", line) for line in lines if line and not line.startswith(".loc")]


def test_shared_histogram_order_in_sm90_ptx():
    """The GPU launches compiled for sm_90 by the installed Triton. Where the histograms are
    counted in shared memory, each search (the threshold's, the ties') is one zero step, then a
    loop of one counting ``red.shared.add`` per entry and one search step, with nothing else in
    shared memory between them; after the search step, until the loop's back edge, Triton's
    only buffer is the gather's, 8 bytes per thread from offset 0, and the launch's shared bytes
    hold the search's region above it. The zero and search steps use the launch's bin count,
    every add counts a key in [lo, top] at (key - lo) >> shift from the region's address. The
    asm steps are pure (for Inductor's analysis), so this order is the compiler's to keep; this
    test checks it does.

    Inductor's generated code may mark the strides divisible by 16, which vectorizes loads
    unless every address keeps one entry per thread; a vectorized segment broke the steps (four
    instances per thread, Triton's reductions between them). The kernel compiled that way must
    be the one the launcher runs, instruction for instruction."""
    import json

    import re

    from helpers import CAPTURE_LAUNCHES, NEEDS_SM90_TOOLS, run_sm90_script

    launches = json.loads(run_sm90_script(NEEDS_SM90_TOOLS + CAPTURE_LAUNCHES + _TOPK_PTX).splitlines()[-1])
    assert {form["SMEM"] for form, _, _, _, _ in launches} == {True, False}  # 20 keys: a block of 32, fewer entries than threads
    for form, warps, shared, ptx, inductor_ptx in launches:
        assert normalized_ptx(inductor_ptx) == normalized_ptx(ptx), form
        lines = ptx.splitlines()
        zero = [i for i, line in enumerate(lines) if "%dynamic_smem_size" in line]
        search = [i for i, line in enumerate(lines) if "shfl.sync.down" in line]
        if not form["SMEM"]:
            assert not zero and not search
            continue
        bins, threads = 1 << form["RADIX_BITS"], form["THREADS"]
        # The region: the bins, 40 words and 16 bytes of alignment, above the gather's buffer.
        assert shared >= 8 * threads + 4 * bins + 176, (form, shared)
        constants = dict(re.findall(r"mov\.b32\s+(%r\d+), (-?\d+);", ptx))
        labels = {m.group(1): i for i, line in enumerate(lines) if (m := re.match(r"(\$L__BB\w+):", line))}
        assert len(zero) == len(search) == 2, (form, len(zero), len(search))
        assert zero[0] < search[0] < zero[1] < search[1], form
        for z, s in zip(zero, search):
            zero_step = re.search(r"shl\.b32 o, (%r\d+), 2; add\.u32 o, o, 160; add\.u32 a, o, (%r\d+); add\.u32 a, a, 16; "
                                  r"setp\.lt\.u32 p, n, a; @p trap;.*mov\.u32 o, %tid\.x; setp\.lt\.u32 p, o, \1; "
                                  r"mad\.lo\.u32 a, o, 4, %r\d+; @p st\.shared\.u32 \[a\], 0; bar\.sync 0; }", lines[z])
            assert zero_step, (form, lines[z])
            assert int(constants[zero_step.group(1)]) == bins and int(constants[zero_step.group(2)]) == 8 * threads, form
            search_step = re.search(r"^\s*{ .*bar\.sync 0; sub\.u32 h, %r\d+, 160; mov\.u32 t, %tid\.x; shr\.u32 w, t, 5; "
                                    r"setp\.lt\.u32 p, t, (%r\d+);.*@p ld\.shared\.u32 c, \[a\]; @p st\.shared\.u32 \[a\], 0;"
                                    r".*bar\.sync 0;.*bar\.sync 0;.*}$", lines[s])
            assert search_step and int(constants[search_step.group(1)]) == bins, (form, lines[s])
            between = [line.strip() for line in lines[z + 1:s]]
            adds = [line for line in between if "red.shared.add.u32" in line]
            assert len(adds) == form["BLOCK"] // threads, (form, len(adds))
            counted = r"setp\.ge\.u32 p, (%r\d+), (%r\d+); setp\.le\.u32 q, \1, %r\d+; and\.pred p, p, q; " \
                      r"sub\.u32 d, \1, \2; shr\.u32 d, d, %r\d+; mad\.lo\.u32 a, d, 4, %r\d+; @p red\.shared\.add\.u32 \[a\], 1;"
            assert all(re.search(counted, line) for line in adds), (form, adds[0])
            other = [line for line in between if ".shared" in line and "red.shared.add.u32" not in line]
            assert not other, (form, other[:3])
            # From the search step to the loop's back edge (a branch to a label above the step).
            back = next(i for i in range(s, len(lines))
                        if (m := re.search(r"bra(?:\.uni)?\s+(\$L__BB\w+);", lines[i])) and labels[m.group(1)] < s)
            tail = [line.strip() for line in lines[s + 1:back] if ".shared" in line]
            # (Triton 3.8 spells the state space st.shared::cta.)
            assert len(tail) == 2 and re.match(r"st\.shared(::cta)?\.b64\s", tail[0]), (form, tail)
            assert re.fullmatch(r"ld\.shared(::cta)?\.b64\s+%rd\d+, \[global_smem\];", tail[1]), (form, tail)


def test_launcher_int_helpers_match_triton():
    """The launchers' host-side cdiv and next_power_of_2 give Triton's values for ints."""
    import triton

    from fp4_inductor.kernels import cdiv, next_power_of_2

    for n in [*range(-3, 70), 127, 128, 129, 2047, 2048, 2049, 32768, 32769, 2**31 - 1]:
        assert next_power_of_2(n) == triton.next_power_of_2(n), n
        for d in (1, 2, 3, 64, 256, 32768):
            if n >= 0:
                assert cdiv(n, d) == triton.cdiv(n, d), (n, d)
