"""The written-out wgmma hot pass (``score_wgmma.py``'s ``wgmma_rows{2,4}_g{1,4}``, as
``kernels/wgmma_source.py`` writes them, at one warpgroup per program and at four) run on the CPU, so
that a change of the generator is checked end to end before a GPU runs it: the function's Triton
lines execute on numpy arrays (one element per thread, every thread in lockstep), global memory
is one flat byte array holding the case's tensors, shared memory another, and each inline asm
string is carried out by a stand-in that follows its PTX:

- the operand builder and the code tables through ``ptx_emulator`` (the same strings);
- ``wgmma.mma_async`` (m64nNk32, s8 x s8 -> s32): per warpgroup, the A fragment from the 16
  registers (warp w, lane 4g + t: register 4s + r holds row 16w + g + 8 (r & 1), K 32s + 16 (r >> 1)
  + 4t + byte) and B from the shared-memory descriptor (K-major, no swizzle: core matrices of 8
  columns x 16 bytes, the leading byte offset between the two K halves, the stride byte offset
  between groups of 8 columns), the accumulators in wgmma's D layout (register i: row 16w + g +
  8 ((i >> 1) & 1), column 8 (i >> 2) + 2t + (i & 1)), read from the parsed asm (N, the start of
  each K step, scale-d);
- waits pass the accumulators on; relu (mul.rn.sat.f32 by 2**127 of the bits) as the hardware
  rounds it; shuffles across lanes of a warp; shared loads and stores on the shared array.

``tl.fma`` rounds through float64 (one float32 product is exact there; the sum may round twice,
rarely), so logits are compared with float64 to 1e-5, and two forms of the pass bit for bit with
each other, not with a GPU's."""

from __future__ import annotations

import re

import numpy as np

from ptx_emulator import Block

M32 = (1 << 32) - 1
NUMPY = {"int8": np.int8, "uint8": np.uint8, "int32": np.int32, "uint32": np.uint32, "int64": np.int64,
         "float32": np.float32}
QUERIES_AT, WEIGHTS_AT, SHARED_BYTES = 1024, 64 * 1024, 96 * 1024


class Lanes(np.ndarray):
    """A Triton tensor (or scalar) of the written-out kernel: thread i holds element i."""

    def to(self, dtype, bitcast=False):
        if isinstance(dtype, tuple):  # a pointer type: not for values
            raise TypeError(f"a value cast to a pointer: {dtype}")
        kind = NUMPY[dtype]
        return lanes(self.view(kind) if bitcast else self.astype(kind))


def lanes(x, dtype=None):
    return np.asarray(x, dtype=dtype).view(Lanes)


class Memory:
    """A flat byte array with named tensors placed in it (``place``) and typed pointers into it."""

    def __init__(self):
        self.bytes = np.zeros(0, dtype=np.uint8)

    def place(self, array: np.ndarray, dtype: str) -> "Pointer":
        start = -(-len(self.bytes) // 256) * 256 + 256
        raw = np.ascontiguousarray(array).view(np.uint8).reshape(-1)
        self.bytes = np.concatenate([self.bytes, np.zeros(start - len(self.bytes), np.uint8), raw])
        return Pointer(self, lanes(np.int64(start)), dtype)

    def read(self, address, dtype: str, active=None):
        size = np.dtype(NUMPY[dtype]).itemsize
        address = np.asarray(address, dtype=np.int64)
        active = np.broadcast_to(True if active is None else np.asarray(active), address.shape)
        assert (address[active] % size == 0).all(), "a misaligned load"
        assert ((address[active] >= 0) & (address[active] + size <= len(self.bytes))).all(), "a load out of bounds"
        at = np.where(active, address, 0)[..., None] + np.arange(size)
        return np.ascontiguousarray(self.bytes[at]).view(NUMPY[dtype])[..., 0]

    def write(self, address, value, dtype: str, active):
        size = np.dtype(NUMPY[dtype]).itemsize
        address, active = np.broadcast_arrays(np.asarray(address, dtype=np.int64), np.asarray(active))
        value = np.broadcast_to(np.asarray(value, dtype=NUMPY[dtype]), address.shape)
        address, value = address[active], value[active]
        assert ((address >= 0) & (address + size <= len(self.bytes))).all(), "a store out of bounds"
        assert len(np.unique(address)) == len(address), "two threads store to one address"
        self.bytes[address[:, None] + np.arange(size)] = np.ascontiguousarray(value).view(np.uint8).reshape(-1, size)


class Pointer:
    """A typed pointer (one address per thread, or one for all) into a ``Memory``."""

    def __init__(self, memory: Memory, address, dtype: str):
        self.memory, self.address, self.dtype = memory, lanes(np.asarray(address, dtype=np.int64)), dtype

    def __add__(self, offset):
        step = np.dtype(NUMPY[self.dtype]).itemsize
        return Pointer(self.memory, self.address + np.asarray(offset).astype(np.int64) * step, self.dtype)

    __radd__ = __add__

    def to(self, dtype, bitcast=False):
        if isinstance(dtype, tuple):  # tl.pointer_type(...)
            return Pointer(self.memory, self.address, dtype[1])
        assert dtype == "int64", dtype
        return lanes(self.address)


class Shared:
    """Shared memory (32-bit words) and the stand-ins of the pass's asm strings (``asm``)."""

    def __init__(self, threads: int, constants: dict, memory: Memory):
        self.threads, self.memory, self.constants = threads, memory, constants
        self.words = np.zeros(SHARED_BYTES // 4, dtype=np.uint32)
        self.lane = np.arange(threads)

    def word(self, address):
        address = np.asarray(address, dtype=np.int64)
        assert (address % 4 == 0).all() and ((address >= 0) & (address < SHARED_BYTES)).all(), "a shared address"
        return address // 4

    def butterfly(self, x, mask):
        x = np.broadcast_to(np.asarray(x), (self.threads,))
        return x[self.lane ^ mask]

    def emulated(self, asm, args, outputs):
        values = Block(self.threads, 0).run(asm, [None] * outputs + [np.asarray(a).astype(np.int64) for a in args])
        return tuple(lanes(np.asarray(v, dtype=np.int64).astype(np.uint32).view(np.int32)) for v in values[:outputs])

    def asm(self, code, constraints, args, dtype, is_pure, pack):
        c = self.constants
        outputs = len(dtype) if isinstance(dtype, tuple) else 1
        out = None
        if "fp4_queries[" in code:
            out = lanes(np.full(self.threads, QUERIES_AT, np.int32))
        elif "fp4_weights[" in code:
            out = lanes(np.full(self.threads, WEIGHTS_AT, np.int32))
        elif code == c["BARRIER"]:
            out = (args[0], args[1])
        elif code == c["PUBLISH_BOTH"]:
            out = (args[1], args[2])
        elif code == c["LOAD4"]:
            address = np.asarray(args[0], dtype=np.int64)
            assert (address % 16 == 0).all(), "a 16-byte load not 16-byte aligned"
            out = tuple(lanes(self.memory.read(address + 4 * i, "int32")) for i in range(4))
        elif code in (c["KMAX"], c["QMAX"]):
            x = np.broadcast_to(np.asarray(args[0], dtype=np.int64), (self.threads,))
            for mask in (1, 2):
                y = self.butterfly(x, mask)
                if code == c["KMAX"]:  # max.u16x2
                    x = np.maximum(x & 0xFFFF, y & 0xFFFF) | (np.maximum((x >> 16) & 0xFFFF, (y >> 16) & 0xFFFF) << 16)
                else:  # max.s32
                    x = np.maximum(x, y)
            out = lanes(x.astype(np.int32))
        elif code in (c["TABLES"], c["PRMT"]):
            out = self.emulated(code, args, outputs)
        elif code in (c["STORE"], c["STORE_IF"]):
            active = np.broadcast_to(True if code == c["STORE"] else np.asarray(args[2]) != 0, (self.threads,))
            words = np.broadcast_to(self.word(args[0]), (self.threads,))[active]
            assert len(np.unique(words)) == len(words), "two threads store to one shared word"
            self.words[words] = np.broadcast_to(np.asarray(args[1]).astype(np.int64) & M32, (self.threads,))[active]
            out = lanes(np.zeros(self.threads, np.int32))
        elif code == c["LDSW"]:
            word = self.word(args[0])
            out = tuple(lanes(self.words[word + i].view(np.float32)) for i in range(2))
        elif code == c["RELU"]:  # mul.rn.sat.f32 of the bits by 2**127: relu(acc) * 2**-22, exact below 2**24
            acc = np.asarray(args[0], dtype=np.int64)
            out = lanes((np.maximum(acc, 0) * np.float64(2.0**-22)).astype(np.float32).view(np.int32))
        elif code in (c["SHFL1"], c["SHFL2"]):
            out = lanes(self.butterfly(np.asarray(args[0], dtype=np.float32), 1 if code == c["SHFL1"] else 2))
        elif "wgmma.mma_async" in code:
            out = self.mma(code, args, outputs)
        elif "wgmma.wait_group" in code:
            out = tuple(args[:outputs])
        else:
            raise AssertionError(f"no stand-in for {code!r}")
        if isinstance(out, tuple) and outputs == 1:
            (out,) = out
        return out

    def mma(self, code, args, outputs):
        """The dots of ``issue_asm``: four K=32 steps, each's descriptor the low word ($16 after the
        accumulators and A) plus its start, the high word the stride byte offset >> 4."""
        n = int(re.search(r"m64n(\d+)k32", code).group(1))
        assert outputs == n // 2 and len(args) == 17
        starts = [int(x) for x in re.findall(r"add\.u32 s, \$\d+, (\d+);", code)]
        scale_d = [int(x) for x in re.findall(r"setp\.ne\.u32 p, (\d), 0;", code)]
        stride = int(re.search(r"mov\.b32 h, (\d+);", code).group(1)) * 16
        assert len(starts) == 4 and scale_d == [0, 1, 1, 1], code
        regs = np.stack([np.broadcast_to(np.asarray(a, dtype=np.int64) & M32, (self.threads,)) for a in args[:16]])
        low = np.broadcast_to(np.asarray(args[16], dtype=np.int64) & M32, (self.threads,))
        shared = self.words.view(np.int8)
        acc = np.zeros((n // 2, self.threads), dtype=np.int64)
        lane = np.arange(128)
        warp, g, t = lane // 32, lane % 32 // 4, lane % 4
        for group in range(self.threads // 128):
            mine = slice(128 * group, 128 * group + 128)
            assert (low[mine] == low[mine][0]).all(), "a descriptor that is not the warpgroup's"
            a = np.zeros((64, 128), dtype=np.int64)
            for s in range(4):
                for r in range(4):
                    word = regs[4 * s + r, mine]
                    for byte in range(4):
                        value = ((word >> (8 * byte)) & 0xFF).astype(np.uint8).view(np.int8)
                        a[16 * warp + g + 8 * (r & 1), 32 * s + 16 * (r >> 1) + 4 * t + byte] = value
            b = np.zeros((128, n), dtype=np.int64)
            k, col = np.arange(32)[:, None], np.arange(n)[None, :]
            for s, start in enumerate(starts):
                descriptor = int(low[mine][0]) + start
                base, leading = (descriptor & 0x3FFF) << 4, ((descriptor >> 16) & 0x3FFF) << 4
                at = base + col // 8 * stride + col % 8 * 16 + k % 16 + k // 16 * leading
                assert (at >= 0).all() and (at < SHARED_BYTES).all()
                b[32 * s: 32 * s + 32] = shared[at]
            d = a @ b
            for i in range(n // 2):
                acc[i, mine] = d[16 * warp + g + 8 * ((i >> 1) & 1), 8 * (i >> 2) + 2 * t + (i & 1)]
        assert (np.abs(acc) < 2**31).all()
        return tuple(lanes(acc[i].astype(np.int32)) for i in range(n // 2))


class TL:
    """The ``tl`` that the written-out kernel names, on numpy."""

    int8, uint8, int32, uint32, int64, float32 = "int8", "uint8", "int32", "uint32", "int64", "float32"

    def __init__(self, shared: Shared):
        self.inline_asm_elementwise = shared.asm

    @staticmethod
    def constexpr(value):
        return value

    @staticmethod
    def pointer_type(dtype):
        return ("pointer", dtype)

    @staticmethod
    def arange(start, end):
        return lanes(np.arange(start, end, dtype=np.int32))

    @staticmethod
    def zeros(shape, dtype):
        return lanes(np.zeros(shape, dtype=NUMPY[dtype]))

    @staticmethod
    def load(pointer, mask=None, other=0):
        value = pointer.memory.read(pointer.address, pointer.dtype, mask)
        if mask is not None:
            value = np.where(mask, value, np.asarray(other).astype(value.dtype))
        return lanes(value)

    @staticmethod
    def store(pointer, value, mask=True):
        pointer.memory.write(pointer.address, np.asarray(value).astype(NUMPY[pointer.dtype]), pointer.dtype, mask)

    @staticmethod
    def where(condition, a, b):
        return lanes(np.where(condition, a, b))

    @staticmethod
    def minimum(a, b):
        return lanes(np.minimum(a, b))

    @staticmethod
    def fma(a, b, c):
        a, b, c = (np.asarray(x, dtype=np.float64) for x in (a, b, c))
        return lanes((a * b + c).astype(np.float32))

    @staticmethod
    def sum(x, axis):
        return lanes(np.sum(x, axis=axis).astype(np.asarray(x).dtype))

    @staticmethod
    def min(x, axis):
        return lanes(np.min(x, axis=axis))

    @staticmethod
    def static_assert(condition, message=""):
        assert condition, message


def power_of_two(byte, times):
    """score_math.power_of_two: 2**(byte - 127) * times; 255 -> NaN."""
    value = (np.asarray(byte, dtype=np.int32) << 23).view(np.float32) * np.float32(times)
    return lanes(np.where(np.asarray(byte) == 255, np.float32("nan"), value).astype(np.float32))


def load_pass(source: str, groups: int, memory: Memory) -> dict:
    """The functions of a ``score_wgmma.py`` source, run by ``128 * groups`` threads on numpy."""
    import triton  # noqa: F401 (the source's constants are built as Triton would see them)

    from fp4_inductor.kernels import wgmma_source

    constants = wgmma_source.constants((64, 128, 256))
    shared = Shared(128 * groups, constants, memory)
    body = "\n".join(line for line in source.splitlines() if not line.startswith(("import ", "from .")))
    names = {"triton": type("Triton", (), {"jit": staticmethod(lambda f: f)}), "tl": TL(shared),
             "power_of_two": power_of_two}
    exec(body, names)
    names["shared"] = shared
    return names


def run_pass(case: dict, query, rows: int, groups: int, request: int, page_begin: int, page_end: int,
             out=None, source: str | None = None):
    """``wgmma_rows{rows}_g{groups}`` (of ``source``, by default the generator's) on
    the first row block of ``request`` over pages [page_begin, page_end), as score_request calls
    it: writes into ``out`` (float32 [rows, width], NaN where not written; a new one by default)
    and returns (out, the returned fold: below 0 where a key or the query does not fold)."""
    from fp4_inductor.kernels import wgmma_source

    payload, scales = (np.ascontiguousarray(t.cpu().numpy()) for t in query)
    cache, block_table = case["cache"], case["block_table"].cpu().numpy().astype(np.int32)
    weights = case["weights"].cpu().numpy().astype(np.float32)
    width = block_table.shape[1] * 64
    if out is None:
        out = np.full((payload.shape[0], width), np.nan, dtype=np.float32)
    memory = Memory()
    buffer = memory.place(case["buffer"].cpu().numpy(), "uint8")
    cache_ptr = buffer + cache.storage_offset()
    out_ptr = memory.place(out, "float32")
    names = load_pass(source or wgmma_source.module_source(), groups, memory)
    starts, ends = case["query_starts"].cpu().numpy(), case["row_ends"].cpu().numpy()
    first_row, rows_here = int(starts[request]), min(int(starts[request + 1] - starts[request]), rows)
    row_ends = np.array([min(int(ends[first_row + r]), width) if r < rows_here else 0 for r in range(rows)], np.int32)
    scalar = lambda v: lanes(np.int32(v))  # noqa: E731
    fold = names[f"wgmma_rows{rows}_g{groups}"](
        scalar(3), out_ptr, out.shape[1], memory.place(payload, "uint8"), memory.place(scales, "uint8"), cache_ptr,
        cache.stride(0), memory.place(weights, "float32"), weights.shape[1], 1,
        memory.place(block_table, "int32") + request * block_table.shape[1], 1, scalar(first_row), scalar(rows_here),
        lanes(row_ends), scalar(page_begin), scalar(page_end))
    start = out_ptr.address.item()
    out[...] = memory.bytes[start: start + out.nbytes].view(np.float32).reshape(out.shape)
    return out, int(fold)
