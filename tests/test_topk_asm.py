"""select_topk's shared-memory search steps (``topk_search``'s ``SMEM_ZERO``, ``SMEM_ADD``,
``SMEM_SEARCH``) run on the CPU through the PTX emulator of one thread block
(tests/ptx_emulator.py: lockstep threads, shared memory as 32-bit words, ``shfl.sync.down``
within warps of 32). First the radix search is
driven around the steps in Python and its threshold checked against a sort, for 1 to 16 warps
and 5- to 8-bit digits; then the Triton interpreter runs the whole kernel's GPU path
(``smem=True``) with the steps emulated, against the reference selection. On its own the
interpreter cannot run inline asm, so in CI this is what runs the GPU path's PTX and the Triton
code around it; the GPU tests check the compiled kernel end to end."""

import numpy as np
import pytest

pytest.importorskip("triton")

from fp4_inductor.kernels import topk, topk_search  # noqa: E402
from ptx_emulator import Block  # noqa: E402

def search(keys: np.ndarray, k: int, threads: int, radix_bits: int):
    """``radix_select_shared`` over uint32 ``keys`` [rows * threads] (0: not valid), the steps
    emulated: (threshold, needed at threshold, keys at threshold, whether ties split)."""
    bins = 1 << radix_bits
    shared_words = 4 * threads if threads >= 64 else 256  # the kernel's SHARED_WORDS
    block = Block(threads, 4 * shared_words)
    block.smem[:] = 0xDEADBEEF  # whatever Triton's buffers left there
    grid = keys.reshape(-1, threads).astype(np.int64)
    valid = keys[keys != 0]
    lo, top = int(valid.min()), int(valid.max())
    base, *_ = block.run(topk_search.SMEM_ZERO.value, [None, 0, bins, 8 * threads])
    assert not block.trapped
    span = top - lo
    shift = max(int(np.frexp(np.float32(span))[1]) - radix_bits, 0) if span else 0
    need = np.full(threads, k, dtype=np.int64)
    while True:
        token = np.zeros(threads, dtype=np.int64)
        for row in grid:
            added, *_ = block.run(topk_search.SMEM_ADD.value, [None, row, lo, top, shift, base])
            token += added
        chosen, above, at, base = block.run(topk_search.SMEM_SEARCH.value, [None] * 4 + [need, token, bins, base])[:4]
        for value in (chosen, above, at, base):
            assert (value == value[0]).all(), "the search's outcome differs between threads"
        need = need - above
        more = at[0] > need[0]
        lo += int(chosen[0]) << shift
        top = lo + min(top - lo, (1 << shift) - 1)
        if not (more and shift > 0):
            return lo, int(need[0]), int(at[0]), bool(more)
        shift = max(shift - radix_bits, 0)


def check_threshold(keys, k, threshold, needed, at, split):
    """The search's reading: every key above the threshold is selected, and ``needed`` of the
    ``at`` keys at it; with no split, every key at or above it (it may be no key's value)."""
    valid = keys[keys != 0].astype(np.int64)
    kth = np.sort(valid)[::-1][k - 1]
    if split:
        assert threshold == kth and at == (valid == kth).sum() and needed < at
        assert (valid > threshold).sum() + needed == k
    else:
        assert needed == at and (valid >= threshold).sum() == k and threshold <= kth


@pytest.mark.parametrize("threads, radix_bits", [(512, 8), (256, 8), (128, 7), (64, 6), (32, 5)])
@pytest.mark.parametrize("kind", ["spread", "clustered", "ties"])
def test_shared_search_steps_find_the_threshold(threads, radix_bits, kind, gen):
    """Keys spread over the whole uint32 range, clustered in a narrow span (many passes), and
    with heavy ties at the threshold, with entries that are not valid (key 0) among them."""
    import torch

    rows = 4
    n = rows * threads
    if kind == "spread":
        keys = torch.randint(1, 2**32 - 1, (n,), generator=gen, dtype=torch.int64)
    elif kind == "clustered":
        keys = 0x9000_0000 + torch.randint(0, 5000, (n,), generator=gen, dtype=torch.int64)
    else:
        keys = 0x8000_0000 + torch.randint(0, 6, (n,), generator=gen, dtype=torch.int64) * 0x0100_0000
    keys = keys.numpy().astype(np.uint64)
    keys[torch.randperm(n, generator=gen)[: n // 5].numpy()] = 0
    for k in (1, 7, n // 10, int((keys != 0).sum())):
        check_threshold(keys, k, *search(keys, k, threads, radix_bits))


def test_zero_step_traps_without_room_for_the_region():
    """A launch whose shared memory cannot hold the gather's buffer and the region traps."""
    block = Block(512, 4096)
    block.run(topk_search.SMEM_ZERO.value, [None, 0, 256, 8 * 512])
    assert block.trapped


@pytest.fixture
def emulated_asm(monkeypatch):
    """The Triton interpreter running the shared-memory steps through ``Block``: one block per
    program (its shared memory filled with garbage when a program starts, sized as the launch's
    allocation), a [THREADS] tensor's element t in thread t, a [ROWS, THREADS] tensor's rows one
    after another (each thread's entries in program order)."""
    from triton.runtime import interpreter

    state = {"program": None, "block": None}

    def create_inline_asm(self, asm, constraints, values, types, is_pure, pack):
        shape = values[0].data.shape
        threads = shape[-1]
        if state["program"] != (self.grid_idx, threads):
            state["program"] = (self.grid_idx, threads)
            state["block"] = Block(threads, 16 * threads if threads > 32 else 1024)  # 4 * SHARED_WORDS
            state["block"].smem[:] = 0xDEADBEEF
        block = state["block"]
        outputs = constraints.count("=")
        data = [np.broadcast_to(v.data, shape).astype(np.int64).reshape(-1, threads) for v in values]
        rows = [block.run(asm, [None] * outputs + [d[r] for d in data])[:outputs] for r in range(data[0].shape[0])]
        assert not block.trapped

        class Results:
            def get_result(self, i):
                out = np.stack([row[i] for row in rows]).reshape(shape)
                return interpreter.TensorHandle(out.astype(np.uint32).view(np.int32), tl_int32)

        return Results()

    import triton.language as tl

    tl_int32 = tl.int32
    monkeypatch.setattr(interpreter.InterpreterBuilder, "create_inline_asm", create_inline_asm)


@pytest.mark.interpreter
@pytest.mark.parametrize("num_warps, segment, width, k", [(16, 8192, 20000, 700), (4, 512, 1500, 60),
                                                          (2, 256, 700, 9), (1, 128, 300, 5)])
def test_shared_search_through_the_kernel(emulated_asm, num_warps, segment, width, k, gen):
    """The kernel's GPU path (``smem=True``: radix_select_shared's loop, its gather, the tie search
    and the compaction) in the Triton interpreter with the asm steps emulated: rows wider than a
    segment (a candidate pass after), each a hard case, ragged ends, against the reference."""
    import os

    import torch

    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("needs the Triton interpreter")
    from test_topk import assert_same_selection, hard_rows

    rows = 8
    logits = hard_rows(gen, rows, width)
    row_ends = torch.randint(1, width + 1, (rows,), generator=gen, dtype=torch.int32)
    row_ends[:2] = width
    values, indices = topk.launch_select_topk(logits, row_ends, k, False, smem=True, num_warps=num_warps,
                                              segment=segment)
    assert_same_selection(logits, row_ends, k, values, indices)
