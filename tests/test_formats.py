"""Bit-exact FP4 quantization: every E2M1 code point, every rounding tie, the scale rule,
NaN/Inf groups, and agreement of every backend with the reference."""

import math

import pytest
import torch

import fp4_inductor as fp4
from fp4_inductor import formats as F
from fp4_inductor import reference

from conftest import GPU_MARKS, HAS_TRITON, INTERPRETER, KERNEL_DEVICES
from helpers import merged_cache, random_keys


def quantize_one(value: float, amax: float = 6.0):
    """Quantize a group whose largest magnitude is ``amax`` (scale byte 127 for amax=6) and
    return the code of element 1, which holds ``value``."""
    x = torch.zeros(1, F.HEAD_DIM)
    x[0, 0] = amax
    x[0, 1] = value
    payload, scales = reference.quantize_fp4(x)
    return (int(payload[0, 0]) >> 4), int(scales[0, 0])


@pytest.mark.parametrize("code", range(16))
def test_e2m1_code_point(code):
    value = F.E2M1_VALUES[code & 7] * (-1 if code & 8 else 1)
    if code == 8:
        value = -0.0
    got, scale = quantize_one(value)
    assert scale == 127
    assert got == code, f"value {value}: code {got:#x}, expected {code:#x}"
    x = torch.zeros(1, F.HEAD_DIM)
    x[0, 0], x[0, 1] = 6.0, value
    back = reference.dequantize_fp4(*reference.quantize_fp4(x))
    assert back[0, 1].item() == value and math.copysign(1, back[0, 1].item()) == math.copysign(1, value)


@pytest.mark.parametrize(
    "value, code",
    [(0.25, 0), (0.75, 2), (1.25, 2), (1.75, 4), (2.5, 4), (3.5, 6), (5.0, 6),
     (-0.25, 8), (-0.75, 10), (-1.25, 10), (-1.75, 12), (-2.5, 12), (-3.5, 14), (-5.0, 14)],
    ids=lambda v: str(v),
)
def test_rounding_tie_to_even(value, code):
    assert quantize_one(value)[0] == code


@pytest.mark.parametrize("value, code", [(0.2500001, 1), (0.7499999, 1), (1.2500001, 3), (4.9999, 6), (5.0001, 7)])
def test_rounding_off_tie(value, code):
    assert quantize_one(value)[0] == code


def test_sign_kept_on_zero_code():
    assert quantize_one(-0.1)[0] == 0x8
    assert quantize_one(0.1)[0] == 0x0


@pytest.mark.parametrize(
    "amax, scale",
    [(6.0, 127), (6.0000005, 128), (3.0, 126), (12.0, 128), (9.0, 128), (9.5, 128), (1.0, 125),
     (0.0, 5), (2.0**-130, 5), (448.0, 134), (6.0 * 2.0**100, 227), (3.0e38, 253)],
)
def test_scale_rule_round_up(amax, scale):
    x = torch.zeros(1, F.HEAD_DIM)
    x[0, 5] = amax
    payload, scales = reference.quantize_fp4(x)
    assert int(scales[0, 0]) == scale
    # No element saturates: amax / 2**(b - 127) <= 6.
    assert amax / 2.0 ** (scale - 127) <= 6.0


def test_scale_matches_log2_definition(gen):
    amax = torch.exp2(torch.empty(4096).uniform_(-100, 100, generator=gen))
    got = reference.scale_bytes(amax)
    want = [min(max(math.ceil(math.log2(max(a, 2.0**-120) / 6)) + 127, 0), 254) for a in amax.double().tolist()]
    assert got.tolist() == want


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_nonfinite_group_gets_nan_scale(bad):
    x = torch.randn(1, F.HEAD_DIM)
    x[0, 40] = bad  # group 1
    payload, scales = reference.quantize_fp4(x)
    assert scales[0].tolist()[1] == 255 and all(s != 255 for i, s in enumerate(scales[0].tolist()) if i != 1)
    assert payload[0, 16:32].eq(0).all()
    back = reference.dequantize_fp4(payload, scales)
    assert back[0, 32:64].isnan().all() and back[0, :32].isfinite().all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_quantize_roundtrip_error_bound(dtype, gen):
    x = random_keys(64, gen, dtype)
    back = reference.dequantize_fp4(*reference.quantize_fp4(x))
    groups = x.float().unflatten(-1, (4, 32))
    scale = torch.exp2(reference.quantize_fp4(x)[1].double() - 127).unsqueeze(-1)
    # Half a step of the largest E2M1 gap (2.0) at the group's scale, never more.
    assert ((back.unflatten(-1, (4, 32)) - groups).abs() <= scale * 1.0).all()


def store_by_offsets(buffer, section_start, pages, keys, slots):
    """Keys' bytes written where docs/layouts.md puts them, byte plane by byte plane, into the
    sections at ``section_start`` of the first ``pages`` rows of ``buffer`` (contiguous): an
    oracle that goes through neither backend's store. Slots outside [0, pages * 64) write nothing."""
    payload, scales = reference.quantize_fp4(keys)
    slots = slots.to(torch.int64)
    kept = (slots >= 0) & (slots < pages * F.PAGE_TOKENS)
    token = slots[kept] % F.PAGE_TOKENS
    base = (slots[kept] // F.PAGE_TOKENS) * buffer.shape[1] + section_start
    flat = buffer.view(-1)
    for g in range(F.GROUPS):
        for b in range(F.PAYLOAD_BYTES // F.GROUPS):
            flat[base + F.section_payload_offset(token, g, b)] = payload[kept][:, g * 16 + b]
        flat[base + F.section_scale_offset(token, g)] = scales[kept][:, g]


def test_store_keys_backend_bit_exact(backend_device, gen):
    """Two index sections interleaved in the first pages of one merged buffer: each gets exactly
    the bytes docs/layouts.md puts at its slots (written here without either backend's store);
    the other section, the bytes between them and the page after the cache are untouched
    (slots past the end and negative ones are skipped)."""
    backend, device = backend_device
    pages, page_bytes = 5, 2 * 4352 + 256
    buffer = torch.randint(0, 256, (pages + 1, page_bytes), generator=gen, dtype=torch.uint8)
    expected = buffer.clone()
    k1, k2 = random_keys(150, gen, torch.bfloat16), random_keys(90, gen, torch.float16)
    k1[7, 3] = float("nan")
    s1 = torch.randperm(pages * 64 - 1, generator=gen)[:150]
    s1 += s1 >= 5  # slot 5 stays free in the first section
    # Slots 3 and the last one stay free in the second section: a slot past the end that were
    # wrapped or clamped instead of skipped would land there, and one taken as given would land
    # in the page after the cache.
    s2 = 4 + torch.randperm(pages * 64 - 5, generator=gen)[:90].int()
    s1[::9] = -1
    s1[10] = 2**32 + 5  # int64 past int32: skipped, not narrowed to slot 5
    s2[5] = pages * 64 + 3  # past the end: skipped
    s2[6] = pages * 64  # the first slot past the end: skipped, not written into the page after
    store_by_offsets(expected, 0, pages, k1, s1)
    store_by_offsets(expected, 4352 + 128, pages, k2, s2)

    buffer = buffer.to(device)
    fp4.store_keys(k1.to(device), fp4.index_section(buffer[:pages], 0), s1.to(device), backend=backend)
    fp4.store_keys(k2.to(device), fp4.index_section(buffer[:pages], 4352 + 128), s2.to(device), backend=backend)
    diff = (buffer.cpu() != expected).nonzero()
    assert diff.numel() == 0, f"{len(diff)} bytes differ, first at [page, byte] {diff[0].tolist()}"


def test_reference_store_keeps_the_last_row_of_a_slot(gen):
    """Rows sharing a slot (and padding rows among them): the reference writes the last row's 68
    bytes, whatever the thread count. Its index_put_ split the payload write across threads, so
    a slot could get one row's payload and another's scales (keys 2**35 apart here)."""
    pages, n = 2, 200
    buffer = torch.randint(0, 256, (pages + 1, F.SECTION_BYTES), generator=gen, dtype=torch.uint8)
    expected = buffer.clone()
    keys = random_keys(n, gen) * torch.exp2(torch.arange(n) % 40 - 20.0)[:, None]
    slots = torch.randint(-2, 6, (n,), generator=gen)
    slots[::7] = pages * 64 + 1
    for r in range(n):  # one row at a time, in order: the last row of a slot wins
        store_by_offsets(expected, 0, pages, keys[r : r + 1], slots[r : r + 1])
    reference.store_keys(keys, fp4.index_section(buffer[:pages], 0), slots)
    assert torch.equal(buffer, expected)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_dequantize_rounds_once(dtype, gen):
    """Each value is the exact product rounded to ``dtype`` once: with the scale taken to float16
    first, a scale of 2**16 or more became inf (a zero element NaN) and one below 2**-24 zero."""
    pages, cache = fp4.allocate_merged_cache(1)
    keys = random_keys(4, gen) * torch.tensor([2.0**18, 2.0**-26, 1.0, 2.0**-140])[:, None]
    keys[:, :5] = 0.0
    reference.store_keys(keys, cache, torch.arange(4))
    exact = fp4.dequantize_pages(cache, torch.tensor([0]), torch.float64)
    got = fp4.dequantize_pages(cache, torch.tensor([0]), dtype)
    assert torch.equal(got, exact.to(dtype))


def test_store_keys_all_padding_writes_nothing(backend_device, gen):
    backend, device = backend_device
    buffer, cache = merged_cache(2, device, gen=gen)
    before = buffer.clone()
    fp4.store_keys(random_keys(4, gen).to(device), cache, torch.full((4,), -1, device=device), backend=backend)
    assert torch.equal(buffer, before)


def test_store_keys_lands_at_slot(gen):
    """The bytes of a key sit where docs/layouts.md puts them."""
    buffer, cache = merged_cache(3, "cpu", gen=gen)
    key = random_keys(1, gen)
    reference.store_keys(key, cache, torch.tensor([2 * 64 + 37]))
    payload, scales = reference.quantize_fp4(key)
    section = buffer[2, 1024 : 1024 + F.SECTION_BYTES]
    for g in range(4):
        for b in range(16):
            assert section[F.section_payload_offset(37, g, b)] == payload[0, g * 16 + b]
        assert section[F.section_scale_offset(37, g)] == scales[0, g]


@pytest.mark.parametrize("heads", [16, 32, 64])
def test_quantize_queries_layout_and_backends(heads, backend_device, gen):
    backend, device = backend_device
    q = random_keys(7 * heads, gen, torch.bfloat16).view(7, heads, F.HEAD_DIM)
    payload, scales = fp4.quantize_queries(q.to(device), backend=backend)
    want_payload, want_scales = reference.quantize_fp4(q)
    assert torch.equal(payload.cpu(), want_payload)
    for h in range(heads):
        for g in range(4):
            assert scales[0, 0, g, h % 16, h // 16] == want_scales[0, h, g]
    assert scales[:, :, :, :, heads // 16 :].eq(F.QUERY_SCALE_FILL).all()
    ref_payload, ref_scales = fp4.quantize_queries(q, backend="reference")
    assert torch.equal(scales.cpu(), ref_scales) and torch.equal(payload.cpu(), ref_payload)


def test_dequantize_queries_inverts_layout(gen):
    q = random_keys(3 * 32, gen).view(3, 32, F.HEAD_DIM)
    back = fp4.dequantize_queries(*fp4.quantize_queries(q))
    direct = reference.dequantize_fp4(*reference.quantize_fp4(q))
    assert torch.equal(back, direct)


def assert_store_matches_reference(keys, backend, device, pages=1, gen=None):
    """Keys stored at slots 0..n-1 by the backend into a copy of a noisy merged cache (a copy on
    the CPU too: .to("cpu") would alias it) equal the bytes docs/layouts.md puts there
    (``store_by_offsets``, not a store of either backend), the noise included."""
    buffer, _ = merged_cache(pages, "cpu", gen=gen)
    buffer_b = buffer.clone().to(device)
    store_by_offsets(buffer, 1024, pages, keys.cpu().contiguous(), torch.arange(keys.shape[0]))
    fp4.store_keys(keys.to(device), fp4.index_section(buffer_b, 1024), torch.arange(keys.shape[0], device=device),
                   backend=backend)
    diff = (buffer_b.cpu() != buffer).nonzero()
    assert diff.numel() == 0, f"bytes differ at [page, byte] {diff[:4].tolist()}"


def test_kernel_rounding_ties_and_code_points(backend_device):
    """Every code point and every tie, at several scales, through each backend's store path."""
    backend, device = backend_device
    values = [0.0, -0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 0.1, 5.5, 4.9]
    values += [-v for v in values]
    group = torch.tensor((values + [0.0] * 32)[:31] + [6.0])
    rows = []
    for exponent in (-20, -3, 0, 5, 40):
        rows.append(torch.cat([group * 2.0**exponent, group.flip(0) * 2.0**exponent, group, -group]))
    assert_store_matches_reference(torch.stack(rows), backend, device)


def test_store_keys_strided_keys(backend_device, gen):
    backend, device = backend_device
    wide = random_keys(40, gen, torch.bfloat16).repeat_interleave(2, dim=1)  # [40, 256]
    assert_store_matches_reference(wide[:, ::2], backend, device, pages=2, gen=gen)  # element stride 2


@pytest.mark.parametrize("device", [pytest.param("cuda", marks=GPU_MARKS)])
def test_kernels_take_element_strides_past_int32_offsets(device, gen):
    """Keys and queries whose 127 element strides (or 63 head strides) pass 2**31 elements: the
    offsets are int64 (with int32 ones the kernels read other memory). GPU only: the interpreter
    computes these offsets in 64 bits either way. Each view spans about 4.4 GB of float16."""
    stride = 2**24 + 2**18  # 127 strides: 2.16e9 elements
    base = torch.empty(127 * stride + 5, dtype=torch.float16, device=device)
    keys = base.as_strided((5, F.HEAD_DIM), (1, stride))
    keys.copy_(random_keys(5, gen, torch.float32).to(torch.float16))
    assert_store_matches_reference(keys, "triton", device)
    del base, keys
    head_stride = 2**25 + 2**21  # 63 strides: 2.25e9 elements
    base = torch.empty(63 * head_stride + 2 * F.HEAD_DIM, dtype=torch.float16, device=device)
    q = base.as_strided((2, 64, F.HEAD_DIM), (F.HEAD_DIM, head_stride, 1))
    q.copy_(random_keys(128, gen, torch.float32).view(2, 64, F.HEAD_DIM).to(torch.float16))
    payload, scales = fp4.quantize_queries(q, backend="triton")
    ref_payload, ref_scales = fp4.quantize_queries(q.cpu(), backend="reference")
    assert torch.equal(payload.cpu(), ref_payload) and torch.equal(scales.cpu(), ref_scales)


def test_kernel_rounding_at_float_neighbours_of_every_threshold(backend_device):
    """Each rounding threshold and code point, and the floats just below and above it, scaled
    into groups whose largest element is exactly 6 * 2**e, through each backend."""
    backend, device = backend_device
    points = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
    below = torch.nextafter(points, torch.zeros_like(points))
    above = torch.nextafter(points, torch.full_like(points, 7.0)).clamp(max=6.0)
    values = torch.cat([points, below, above, -points, -below, -above])  # 84 values
    values = torch.cat([values, torch.zeros(-len(values) % 124)]).view(-1, 31)  # whole keys of 4 groups
    groups = torch.cat([values, torch.full((values.shape[0], 1), 6.0)], dim=1)  # amax 6 -> scale 2**0
    keys = torch.cat([groups * 2.0**e for e in (-30, 0, 17)]).view(-1, 128)
    assert_store_matches_reference(keys, backend, device)


if HAS_TRITON:
    import triton
    import triton.language as tl

    from fp4_inductor.kernels.quantize import _e2m1_code

    @triton.jit
    def _codes_kernel(y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, _e2m1_code(tl.load(y_ptr + offs, mask=offs < n, other=0.0)), mask=offs < n)


def _code_points_under_test():
    """Every finite bf16 value below 2**100 in magnitude, and float32 values around the E2M1 grid:
    each threshold and code point with its float neighbours, and a dense random sample of [0, 16)."""
    bits = torch.arange(-(1 << 15), 1 << 15, dtype=torch.int32).to(torch.int16)
    bf16 = bits.view(torch.bfloat16).float()
    bf16 = bf16[bf16.abs() < 2.0**100]
    points = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0])
    near = torch.cat([points, torch.nextafter(points, torch.zeros_like(points)), torch.nextafter(points, points + 1)])
    dense = torch.rand(1 << 18, generator=torch.Generator().manual_seed(5)) * 16
    values = torch.cat([bf16, near, dense, 2.0**-140 * torch.arange(1, 9)])  # subnormals too
    return torch.cat([values, -values])


@pytest.mark.parametrize("device", KERNEL_DEVICES)
def test_kernel_code_function_matches_threshold_count(device):
    """The kernels' E2M1 rounding (one float add on an exponent-dependent magic number) against
    the reference's threshold count, value by value, sign in bit 3 (zeros included); on the GPU
    too, where the compiler's choices (contraction, flushing) could differ."""
    y = _code_points_under_test()
    out = torch.empty(y.shape, dtype=torch.int32, device=device)
    _codes_kernel[((y.numel() + 4095) >> 12,)](y.to(device), out, y.numel(), BLOCK=4096)
    out = out.cpu()
    want = reference.e2m1_codes(y) | (torch.signbit(y).to(torch.int32) << 3)
    bad = (out != want).nonzero().flatten()
    assert bad.numel() == 0, f"{bad.numel()} values differ, e.g. {y[bad[:4]].tolist()}: {out[bad[:4]].tolist()} vs {want[bad[:4]].tolist()}"


def edge_groups():
    """Keys whose groups are the quantizer's edge cases: all zero, all -0.0, largest magnitude
    below the 2**-120 floor, float32 subnormals only, +Inf, -Inf, -NaN, saturating values."""
    tiny = torch.full((32,), 2.0**-126) * torch.linspace(-1, 1, 32)
    groups = [
        torch.zeros(32), torch.full((32,), -0.0), torch.linspace(-1, 1, 32) * 2.0**-121, tiny * 2.0**-10,
        torch.cat([torch.ones(31), torch.tensor([float("inf")])]),
        torch.cat([torch.tensor([float("-inf")]), torch.ones(31)]),
        torch.cat([torch.tensor([-float("nan")]), torch.ones(31)]),
        torch.linspace(-7, 7, 32) * 2.0**100, torch.linspace(-3e38, 3e38, 32),
        torch.linspace(-1, 1, 32) * 2.0**-120,
    ]
    groups += [torch.randn(32, generator=torch.Generator().manual_seed(3))] * (-len(groups) % 4)
    return torch.stack(groups).view(-1, 128)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16-words", "fp32"])
def test_store_keys_edge_groups(dtype, backend_device):
    """Zero, -0.0, subnormal, Inf, NaN and floor-scale groups, bit-exact against the reference
    (bf16 keys take the kernel's word path, float32 keys the element path)."""
    backend, device = backend_device
    keys = edge_groups().to(dtype)
    assert_store_matches_reference(keys, backend, device)


def test_word_path_needs_four_byte_aligned_rows(gen):
    """bf16 keys are read as int32 words only where every row starts 4-byte aligned: unit element
    stride, even row stride and offset, and (for real tensors) an even address; an address at
    2 mod 4 takes the element path and stores the same bytes."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from fp4_inductor.kernels.quantize import _word_aligned

    keys = random_keys(6, gen, torch.bfloat16)
    assert _word_aligned(keys)
    assert not _word_aligned(random_keys(6, gen, torch.bfloat16).repeat(1, 2)[:, 1:129])  # odd offset
    assert not _word_aligned(torch.zeros(6, 129, dtype=torch.bfloat16)[:, :128])  # odd row stride
    assert not _word_aligned(torch.zeros(6, 256, dtype=torch.bfloat16)[:, ::2])
    raw = bytearray(4 + keys.numel() * 2)
    base = torch.frombuffer(raw, dtype=torch.uint8).data_ptr()
    shifted = torch.frombuffer(raw, dtype=torch.bfloat16, offset=(2 - base) % 4, count=keys.numel()).view(6, 128)
    shifted.copy_(keys)
    assert shifted.data_ptr() % 4 == 2 and shifted.storage_offset() == 0 and not _word_aligned(shifted)
    with FakeTensorMode():
        assert _word_aligned(torch.empty(6, 128, dtype=torch.bfloat16))
    if INTERPRETER:
        buffer, cache = merged_cache(1, "cpu")
        want = buffer.clone()
        reference.store_keys(keys, fp4.index_section(want, 1024), torch.arange(6))
        fp4.store_keys(shifted, cache, torch.arange(6), backend="triton")
        assert torch.equal(buffer, want)
