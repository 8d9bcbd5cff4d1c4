"""Compile the scorer and the top-k kernel for sm_90 on any machine: a Triton wheel carries
ptxas and cuobjdump, so the H200's code (Triton IR with layouts, PTX, cubin, SASS) can be read
without a GPU. Used by benchmarks/compile_sm90.py (registers, SASS), by the wgmma probes in
benchmarks/, by tests/test_prmt.py (the PTX builder's layouts, the hot loop's SASS) and by
tests/test_topk.py (the shared-memory histogram's order in the PTX)."""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import tempfile

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from .score import schedule_chunk

CUOBJDUMP = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")


def dump_cubin(cubin: bytes, what: str = "sass") -> str:
    """``cuobjdump --dump-<what>`` of a compiled kernel's cubin (``what``: "sass" or
    "resource-usage"), with the Triton wheel's own cuobjdump."""
    with tempfile.TemporaryDirectory() as scratch:
        path = os.path.join(scratch, "kernel.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        return subprocess.run([CUOBJDUMP, f"--dump-{what}", path], capture_output=True, text=True, check=True).stdout


def sass_instructions(sass: str) -> list[tuple[int, str]]:
    """(address, instruction without its ';') of every instruction in a cuobjdump listing."""
    found = re.findall(r"/\*([0-9a-f]{4,})\*/\s+([^;]*?)\s*;", sass)
    return [(int(address, 16), text) for address, text in found]


def wgmma_order(cubin: bytes, counts: bool = False) -> str:
    """A compiled kernel's wgmma groups (the GMMA that closes each) and waits, in SASS order; with
    ``counts``, each with the instructions since the one before it in brackets (what runs under
    a dot: the count before each wait)."""
    order, since = [], 0
    for _, text in sass_instructions(dump_cubin(cubin)):
        if "GMMA" in text and "gsb0" in text:
            entry = "group"
        elif "WARPGROUP.DEPBAR" in text:
            entry = "wait " + text.split("gsb0,")[1].strip()
        else:
            since += 1
            continue
        order.append(f"[{since}] {entry}" if counts else entry)
        since = 0
    return ", ".join(order)


def sass_loops(instructions: list[tuple[int, str]]) -> tuple[list[tuple[int, int]], tuple[int, int] | None]:
    """(the loops, the innermost loop holding a GMMA or None) of (address, instruction) pairs: a
    loop is the span (target, address) of a branch back to a listed address (a target in another
    form, where the addresses are not the SASS's own, is not taken as one)."""
    listed = {address for address, _ in instructions}
    loops = []
    for address, text in instructions:
        target = re.search(r"BRA (?:\S+, )?0x([0-9a-f]+)", text)
        if target and int(target.group(1), 16) < address and int(target.group(1), 16) in listed:
            loops.append((int(target.group(1), 16), address))
    dots = [(lo, hi) for lo, hi in loops if any("GMMA" in t for a, t in instructions if lo <= a <= hi)]
    return loops, min(dots, key=lambda span: span[1] - span[0]) if dots else None


def dot_loop_spills(cubin: bytes) -> tuple[int, int]:
    """(instructions, local-memory loads and stores) of the innermost loop that holds a GMMA
    (``sass_loops``): whether the tile loop spills, which a kernel's stack size alone does not
    say (its prologue may hold the stack words). (0, 0) without such a loop."""
    found = sass_instructions(dump_cubin(cubin))
    _, tile = sass_loops(found)
    if tile is None:
        return 0, 0
    body = [t for a, t in found if tile[0] <= a <= tile[1]]
    return len(body), sum(1 for t in body if re.search(r"\b(LDL|STL)\b", t))


def ptxas_verdict(ptx: str) -> tuple[str, list[str]]:
    """(ptxas -v's report, the codes of its serialization warnings: a wgmma that ptxas waits for
    at once, C7510-C7519) for ``ptx``, assembled again for sm_90a with the wheel's ptxas: Triton
    does not pass on ptxas's notes."""
    ptxas = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")
    with tempfile.TemporaryDirectory() as scratch:
        path = os.path.join(scratch, "k.ptx")
        with open(path, "w") as f:
            f.write(ptx)
        report = subprocess.run([ptxas, "-arch=sm_90a", "-v", path, "-o", os.path.join(scratch, "k.cubin")],
                                capture_output=True, text=True).stderr
    return report, [w.split(")")[0].split("(")[-1] for w in report.splitlines() if "(C75" in w]


def compile_scorer(kernel, rows: int, form: dict, query_float: bool = False, num_stages: int = 3,
                   maxnreg: int | None = None, heads: int = 64, lengths: str = "i32", int64: tuple = ()):
    """``kernel`` (score_paged_kernel or a variant of it) as the launcher specializes it for
    allocate_merged_cache's layouts (16-byte aligned pointers and strides), ``heads`` heads:
    ``form`` is one of ``launch_forms``' launches (its constexprs, and ``WARPS`` its num_warps;
    ``CHUNK`` too where it is not the launcher's at a large batch; ``PDL`` where it is True, as
    eager launches on sm_90 take it); ``lengths``: the element
    type of ``query_starts`` and ``row_ends`` ("i32" or "i64"); ``int64``: int arguments typed int64,
    as Triton's launcher types an int that does not fit int32 (e.g. a page stride of 2**31)."""
    params = list(inspect.signature(kernel.fn).parameters)
    if set(int64) - set(params):
        raise ValueError(f"int64: expected parameters of {kernel.fn.__name__}, got {sorted(set(int64) - set(params))}")
    query = "*bf16" if query_float else "*u8"
    pointers = {"out_ptr": "*fp32", "q_payload_ptr": query, "q_scales_ptr": query, "cache_ptr": "*u8",
                "weights_ptr": "*fp32", "block_table_ptr": "*i32", "query_starts_ptr": "*" + lengths,
                "row_ends_ptr": "*" + lengths, "flags_ptr": "*u8"}
    # The schedule's step as the launcher picks it for a large batch, unless ``form`` names one.
    chunk = schedule_chunk(form["WORDS"], form["WARPS"], None, form.get("WGMMA", 0))
    const = {"HEADS": heads, "ROWS": rows, "CHUNK": chunk, "QUERY_FLOAT": query_float, "DOT_DTYPE": tl.bfloat16,
             "PDL": False, "WGMMA": 0, "ROW_SPLIT": 1, **form}
    const = {k: v for k, v in const.items() if k in params}
    signature = {p: "constexpr" if p in const else pointers.get(p, "i64" if p in int64 else "i32") for p in params}
    aligned = set(pointers) | {"out_stride", "page_stride", "weights_stride"}
    attrs = {(i,): [["tt.divisibility", 16]] for i, p in enumerate(params) if p in aligned}
    options = {"num_warps": form["WARPS"], "num_stages": num_stages}
    if maxnreg:
        options["maxnreg"] = maxnreg
    return triton.compile(ASTSource(fn=kernel, signature=signature, constexprs=const, attrs=attrs),
                          target=GPUTarget("cuda", 90, 32), options=options)


def compile_topk(kernel, form: dict, num_warps: int, divisible_ints: bool = False):
    """``kernel`` (topk_segment_kernel) with one launch's constexprs ``form``, for sm_90, as the
    launcher specializes it (aligned pointers; strides not specialized), or with
    ``divisible_ints`` as Inductor's generated code may (every int argument divisible by 16)."""
    params = list(inspect.signature(kernel.fn).parameters)
    pointers = {"values_ptr": "*fp32", "indices_ptr": "*i32", "row_ends_ptr": "*i32", "out_values_ptr": "*fp32",
                "out_indices_ptr": "*i32"}
    signature = {p: "constexpr" if p in form else pointers.get(p, "i32") for p in params}
    aligned = {p for p in params if p in pointers or (divisible_ints and signature[p] == "i32")}
    attrs = {(i,): [["tt.divisibility", 16]] for i, p in enumerate(params) if p in aligned}
    return triton.compile(ASTSource(fn=kernel, signature=signature, constexprs=form, attrs=attrs),
                          target=GPUTarget("cuda", 90, 32), options={"num_warps": num_warps})
