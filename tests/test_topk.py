"""select_topk: exact sets against the reference, ties to the lower index, NaN lowest,
short rows padded with -inf / -1, sorted order."""

import pytest
import torch

import fp4_inductor as fp4


def reference_sets(logits, row_ends, k):
    """Plain Python: sort each row's valid entries by (value desc, NaN last, index asc)."""
    out = []
    for r in range(logits.shape[0]):
        n = int(row_ends[r])
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
