"""select_topk's shared-memory search steps (``_SMEM_ZERO``, ``_SMEM_ADD``, ``_SMEM_SEARCH``) run on
the CPU through a small PTX emulator of one thread block: every thread executes each instruction
in lockstep, shared memory is a byte array, ``shfl.sync.down`` moves values within each warp of
32. First the radix search is driven around the steps in Python and its threshold checked
against a sort, for 1 to 16 warps and 5- to 8-bit digits; then the Triton interpreter runs the
whole kernel's GPU path (``smem=True``) with the steps emulated, against the reference
selection. On its own the interpreter cannot run inline asm, so in CI this is what runs the GPU
path's PTX and the Triton code around it; the GPU tests check the compiled kernel end to end."""

import re

import numpy as np
import pytest

pytest.importorskip("triton")

from fp4_inductor.kernels import topk  # noqa: E402

M32 = (1 << 32) - 1


class Block:
    """One thread block: ``threads`` threads in warps of 32, ``smem`` bytes of shared memory at
    address 0 (``global_smem``), every register an int64 array of 32-bit values, one per thread."""

    def __init__(self, threads: int, smem: int):
        self.threads = threads
        self.smem = np.zeros(smem // 4, dtype=np.int64)  # 32-bit words
        self.smem_bytes = smem
        self.trapped = False

    def word(self, address):
        address = np.asarray(address)
        assert np.all(address % 4 == 0) and np.all(address >= 0) and np.all(address < self.smem_bytes), address
        return address // 4

    def run(self, asm: str, operands: list) -> list:
        """Execute inline asm ``asm`` ($0.. as in the constraint string: outputs first) with the
        given operand arrays (None for an output); returns the final operand values."""
        regs = {f"${i}": (None if v is None else np.broadcast_to(np.asarray(v, dtype=np.int64) & M32,
                                                                 (self.threads,)).copy())
                for i, v in enumerate(operands)}
        regs["%tid.x"] = np.arange(self.threads, dtype=np.int64)
        regs["%dynamic_smem_size"] = np.full(self.threads, self.smem_bytes, dtype=np.int64)
        regs["global_smem"] = np.zeros(self.threads, dtype=np.int64)
        body = asm.strip()[1:-1]
        for stmt in filter(None, (s.strip() for s in body.split(";"))):
            if stmt.startswith(".reg"):
                continue
            guard = np.ones(self.threads, dtype=bool)
            if stmt.startswith("@"):
                cond, stmt = stmt.split(None, 1)
                guard = ~regs[cond[2:]] if cond.startswith("@!") else regs[cond[1:]].copy()
            self.step(regs, stmt, guard)
        return [regs[f"${i}"] for i in range(len(operands))]

    def value(self, regs, text):
        text = text.strip()
        if re.fullmatch(r"-?(0x[0-9A-Fa-f]+|\d+)", text):
            return np.full(self.threads, int(text, 0) & M32, dtype=np.int64)
        return regs[text]

    def address(self, regs, text):
        m = re.fullmatch(r"\[\s*([^\]+]+?)\s*(?:\+\s*(\d+))?\s*\]", text.strip())
        return self.value(regs, m.group(1)) + int(m.group(2) or 0)

    def step(self, regs, stmt, guard):
        op, _, rest = stmt.partition(" ")
        args = [a.strip() for a in re.split(r",(?![^{]*})", rest)] if rest else []
        v = lambda i: self.value(regs, args[i])  # noqa: E731

        def put(name, value):
            old = regs.get(name)
            value = np.asarray(value, dtype=np.int64) & M32 if value.dtype != bool else value
            regs[name] = value if old is None else np.where(guard, value, old)

        if op == "bar.sync":
            return  # lockstep: every thread is already here
        if op == "trap":
            self.trapped |= bool(guard.any())
            return
        if op in ("mov.u32", "mov.b32"):
            put(args[0], v(1))
        elif op in ("add.u32",):
            put(args[0], v(1) + v(2))
        elif op == "sub.u32":
            put(args[0], v(1) - v(2))
        elif op == "and.b32":
            put(args[0], v(1) & v(2))
        elif op == "shl.b32":
            put(args[0], np.where(v(2) >= 32, 0, v(1) << np.minimum(v(2), 31)))
        elif op in ("shr.u32", "shr.b32"):
            put(args[0], np.where(v(2) >= 32, 0, v(1) >> np.minimum(v(2), 31)))
        elif op == "mad.lo.u32":
            put(args[0], v(1) * v(2) + v(3))
        elif op.startswith("setp.") and op.endswith(".u32"):
            compare = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
                       "eq": np.equal, "ne": np.not_equal}[op.split(".")[1]]
            put(args[0], compare(v(1), v(2)))
        elif op == "and.pred":
            put(args[0], regs[args[1]] & regs[args[2]])
        elif op == "ld.shared.u32":
            words = self.word(np.where(guard, self.address(regs, args[1]), 0))
            put(args[0], self.smem[words])
        elif op == "ld.shared.v4.u32":
            base = self.address(regs, args[1])
            for i, name in enumerate(args[0].strip("{}").split(",")):
                put(name.strip(), self.smem[self.word(np.where(guard, base + 4 * i, 0))])
        elif op == "st.shared.u32":
            words = self.word(self.address(regs, args[0])[guard])
            assert len(set(words.tolist())) == len(words), "threads store to the same word"
            self.smem[words] = v(1)[guard]
        elif op == "st.shared.v4.u32":
            base = self.address(regs, args[0])[guard]
            assert len(base) <= 1, "more than one thread writes the search's result"
            for i, name in enumerate(args[1].strip("{}").split(",")):
                self.smem[self.word(base + 4 * i)] = self.value(regs, name)[guard]
        elif op == "red.shared.add.u32":
            np.add.at(self.smem, self.word(self.address(regs, args[0])[guard]), v(1)[guard])
            self.smem &= M32
        elif op == "shfl.sync.down.b32":
            dst, pred = args[0].split("|")
            offset, clamp, mask = (int(v(i)[0]) for i in (2, 3, 4))
            assert (clamp, mask & M32) == (31, M32) and guard.all()
            lane = np.arange(self.threads) % 32
            source = np.arange(self.threads) + offset
            inside = lane + offset <= clamp
            src = v(1)
            put(dst, np.where(inside, src[np.minimum(source, self.threads - 1)], src))
            put(pred, inside)
        else:
            raise AssertionError(f"the emulator does not know {stmt!r}")


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
    base, *_ = block.run(topk._SMEM_ZERO.value, [None, 0, bins, 8 * threads])
    assert not block.trapped
    span = top - lo
    shift = max(int(np.frexp(np.float32(span))[1]) - radix_bits, 0) if span else 0
    need = np.full(threads, k, dtype=np.int64)
    while True:
        token = np.zeros(threads, dtype=np.int64)
        for row in grid:
            added, *_ = block.run(topk._SMEM_ADD.value, [None, row, lo, top, shift, base])
            token += added
        chosen, above, at, base = block.run(topk._SMEM_SEARCH.value, [None] * 4 + [need, token, bins, base])[:4]
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
    block.run(topk._SMEM_ZERO.value, [None, 0, 256, 8 * 512])
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
