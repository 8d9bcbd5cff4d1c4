"""A small PTX emulator for the kernels' inline asm, run on the CPU: one thread block whose threads
execute each instruction in lockstep (numpy arrays, an element per thread), shared memory as
32-bit words, ``shfl.sync.down`` within warps of 32. tests/test_prmt.py runs the scorer's operand
builder through it, tests/test_topk_asm.py select_topk's shared-memory search steps, and
tests/wgmma_emulator.py the wgmma pass's builder and code tables."""

import re

import numpy as np

U = np.uint64


def prmt(a, b, sel):
    """PTX prmt.b32, default mode: byte i of the result is byte (nibble i of sel) & 7 of {b, a};
    a set bit 3 in that nibble replicates the selected byte's sign bit instead."""
    a, b, sel = np.broadcast_arrays(a, b, sel)
    pool = np.stack([(v >> U(8 * i)) & U(0xFF) for v in (a, b) for i in range(4)])
    out = np.zeros(a.shape, dtype=np.uint64)
    for i in range(4):
        nib = (sel >> U(4 * i)) & U(0xF)
        byte = np.take_along_axis(pool, (nib & U(7)).astype(np.int64)[None], 0)[0]
        byte = np.where(nib & U(8), np.where(byte & U(0x80), U(0xFF), U(0)), byte)
        out = out | (byte << U(8 * i))
    return out


M32 = (1 << 32) - 1


class Block:
    """One thread block: ``threads`` threads in warps of 32, ``smem`` bytes of shared memory at
    address 0 (``global_smem``), every register an int64 array of 32-bit values, one per thread.
    Straight-line asm with no shared memory (the scorer's operand builder) runs the same way, a
    thread per input word."""

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
        elif op == "or.b32":
            put(args[0], v(1) | v(2))
        elif op == "xor.b32":
            put(args[0], v(1) ^ v(2))
        elif op == "not.b32":
            put(args[0], ~v(1))
        elif op == "prmt.b32":
            put(args[0], prmt(*(v(i).astype(np.uint64) for i in (1, 2, 3))).astype(np.int64))
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
