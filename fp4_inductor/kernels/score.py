"""Paged FP4 indexer scoring with shared-key row groups, on exact integer tensor cores.

A program scores a run of pages of a request for *all* of that request's rows
(up to ``ROWS``), so each key page is read once per request, not once per
verify row. Keys are the MMA's M side (64 * TILE_PAGES tokens), the request's
rows x heads its N side.

The work is balanced across requests in the kernel, with no host step: the
pages that each request's longest row needs are laid end to end (in whole
tiles, each request led by a few tiles' worth of what starting on it costs) and
cut into one equal share per program, so a long request is spread over many
programs and short ones share one; a ragged batch takes as long as its total of
keys says, not as its longest request. The hot pass of FP4 queries
loads the keys straight into the dot operand's layout (``tile_keys``); with at
most 64 columns (next_n=1 at 64 heads) it runs 16 warps per program, one program
per SM; with more (two-row blocks) 8 warps, one program per SM, two tiles per step
(``launch_plan``). On sm_90 at 64 heads, blocks of 2 and 4 rows take the hot pass on wgmmas in
inline PTX instead (``score_wgmma``, ``wgmma_default``).

The scorer is split by concern:
- ``score.py`` (here): the launch plan (tile, warps, passes) and the launcher;
- ``score_kernel.py``: the kernel, its in-kernel schedule and the per-request loop;
- ``score_math.py``: operands, dots, the exact paths and the epilogue (the arithmetic, with
  the group scales folded into one int8 dot);
- ``score_tiles.py``: where a tile's keys and logits live in memory;
- ``ptx.py``: the inline PTX of the hot loop.

A key whose group scales span more than 2**3 (or a query that does) takes the exact path. By
default (``exact="fixup"``) that is a second launch: the hot pass scores every key on the
folded path with no per-tile decision, and a key that does not fold keeps only its folding
groups and marks its program; the exact pass then rewrites the tiles holding such keys, in
marked programs only. ``exact="inline"`` keeps both paths in one loop with a block-wide vote
per tile (1.5-1.7x slower on the H200).
"""

from __future__ import annotations

import torch
import triton.language as tl
from torch.fx.experimental.symbolic_shapes import guard_or_false

from . import capability_major, cdiv, is_fake, next_power_of_2, rows_aligned, sm_count, wrapped
from .score_kernel import SCHEDULE_CHUNK, score_paged_kernel


def word_fed_pass(exact: str, query_float: bool) -> bool:
    """Whether a call's hot pass may take the word-fed loop (``tile_keys``: payload words loaded
    in the int8 dot operand's layout, four consecutive K per register): the fix-up form with
    integer scoring (FP4 queries). The launcher also needs the words aligned."""
    return exact == "fixup" and not query_float


def wide_hot_pass(word_fed: bool, num_warps: int, wgmma: int = 0) -> bool:
    """Whether a launch's hot pass is the 16-warp word-fed kernel, whose shares count 4 setup
    units (not a wgmma hot pass of 16 warps, which keeps the one-warpgroup pass's choices)."""
    return word_fed and num_warps >= 16 and not wgmma


def dependent_launch(word_fed: bool, asm: bool, exact: str, out: torch.Tensor) -> bool:
    """Whether the exact pass launches as a programmatic dependent of the hot pass (PDL, sm_90
    and later; the kernel's ``PDL``): for the word-fed pair with the PTX builder (FP4 queries,
    16-byte-aligned cache rows), launched with real tensors (also into a CUDA graph being
    captured). Not while tracing (fake tensors), which is what keeps it out of Inductor's
    generated code: torch's traced launches of a Triton kernel take warps, stages, CTAs and
    warp-specialization counts as launch options (torch 2.11 and 2.13), not ``launch_pdl``, and
    the PDL steps are asm that Inductor's analysis would take as writing every argument
    (tests/test_inductor_analysis.py). There the pair runs as before, in two plain launches."""
    if not (word_fed and asm and exact == "fixup" and out.is_cuda) or torch.version.hip or is_fake(out):
        return False
    return capability_major(out.device) >= 9


# The wgmma hot pass's register cap per block of columns, passed as ``maxnreg``: without one
# ptxas takes what it likes in the package's kernel (165-255 registers); with these, 4 and 3
# programs per SM, at one warpgroup per program. sm_90 compiles: 8-16 bytes of stack on Triton 3.6,
# 16-24 on 3.7.1, all of it in the query prologue, none in the tile loop (tests/test_wgmma.py). The
# cap is for eager launches: Inductor's launches of a user kernel drop ``maxnreg``, and traced
# launches take four warpgroups per program, which need none (``wgmma_pass_warps``). After its
# 4-row blocks the exact pass runs 2-row blocks (``launch_score_paged``: at 4 rows it holds 255
# registers and 2176 bytes of stack on Triton 3.6, against 176 at 2, and took up to 1.8x the time).
WGMMA_REGISTERS = {128: 128, 256: 168}


def wgmma_warps(kernel) -> tuple[int, ...]:
    """The warps that ``kernel``'s wgmma hot pass takes (its ``score_wgmma`` module's
    ``PASS_WARPS``): (4, 16), one warpgroup per program or four, for the package's; for a kernel
    copy from before (benchmarks/score_variants.py, with the ``score_wgmma`` module written with
    it), (4,) where it did not say and its one ``WARPS`` where it did (four warpgroups only: 16)."""
    warps = getattr(getattr(kernel, "fn", None), "__globals__", {}).get("WGMMA_WARPS", 4)
    warps = getattr(warps, "value", warps)
    return tuple(int(w) for w in warps) if isinstance(warps, tuple) else (int(warps),)


# Warpgroups per program of the wgmma pass by rows per block, in an eager launch: H100, A/B, the
# two forms bit-identical (docs/benchmarks.md, stop 61): at 2 rows four (next_n=2 101.9-102.7 us
# against 108.7-109.1 at one, and the default hot pass's 104.4-105.6; 16 x 131072 98.0-99.5 against
# 105.1-108.1 and 103.1-104.6), at 4 rows one (next_n=4 162.1-163.3 against 172.6-174.7 at four;
# next_n=3 159.0-159.4 against 172.2-172.4). A traced launch takes four at every size
# (``wgmma_pass_warps``).
WGMMA_GROUPS = {2: 4, 4: 1}


def wgmma_rows(max_query_len: int) -> int:
    """The wgmma hot pass's rows per block for a longest request of ``max_query_len`` rows: 2 or 4
    (128 or 256 columns at 64 heads)."""
    return 2 if max_query_len <= 2 else 4


def wgmma_wanted_warps(rows_per_block: int, traced: bool) -> int:
    """The warps (4 per warpgroup) a wgmma hot pass launch takes by default: ``WGMMA_GROUPS``' at
    ``rows_per_block`` in an eager launch, four warpgroups in a traced one (fake tensors: one
    warpgroup needs its register cap, a ``maxnreg`` that Inductor's launches drop; at 4 rows on an
    H100, traced, 172.3 us with four against 202.7 for one without its cap, stop 61 and 54)."""
    return 16 if traced else 4 * WGMMA_GROUPS[rows_per_block]


def wgmma_pass_warps(rows_per_block: int, traced: bool, offered: tuple[int, ...]) -> int:
    """The warps of a wgmma hot pass launch that names none: ``wgmma_wanted_warps`` where the
    kernel's pass takes them (``offered``, ``wgmma_warps``), its first where it does not."""
    want = wgmma_wanted_warps(rows_per_block, traced)
    return want if want in offered else offered[0]


# The exact pass after a wgmma hot pass of four warpgroups per program (one program per SM): on
# four times its programs, the shares of one-warpgroup programs (three or four per SM).
WGMMA_GROUPS_EXACT_SPLIT = 4


def launch_plan(word_fed: bool, columns: int, tuning: dict, wgmma: int = 0,
                pass_warps: int = 4) -> tuple[int, int, int, bool, int, int]:
    """(pages per tile, warps, programs per SM, tiles in pairs, exact-pass split, setup units) of
    one launch pair; ``word_fed``: its hot kernel takes the word-fed loop; ``columns``: rows per
    block x heads; ``pass_warps``: the warps of the launch's wgmma pass (``wgmma_pass_warps``).
    ``tuning`` (tile_pages, num_warps, programs_per_sm, pairs, exact_split, setup_units) overrides
    each.

    Measured on the H200 (docs/benchmarks.md), with equal shares, B=64 x 32768:
    - the word-fed hot kernel with at most 64 columns (next_n=1 at 64 heads): 16 warps x 4
      pages, one program per SM, one tile per step. 512 threads hold ptxas to 128 registers
      without a cap, so torch.compile (Inductor passes no ``maxnreg``) runs it as fast as eager:
      88.0-88.1 us, against 91.3-91.7 with tiles in pairs and 95.6 for 4 warps capped at 168
      registers (one run); its halves in ping-pong (score_request) take it from 94.2-94.4 to
      89.6-90.0 us in another.
    - the word-fed hot kernel with more columns (two-row blocks): 8 warps x 2 pages, one
      program per SM (254 registers, no spill), tiles in pairs: next_n=2 118.3 us, next_n=4
      215.1, B=16 x 131072 next_n=2 118.6, against 132.6 / 235.6 / 131 for the former 4 warps
      x 2 pages, two per SM, one tile per step (134.3 / 247.8 / 134.6 for 8 warps without pairs;
      pairs at 4 warps spill: 343 us at next_n=2).
    - everything else (bf16 queries, caches without 16-byte rows): 4 warps x 2 pages, two
      programs per SM.
    - after a word-fed hot kernel, the exact pass on twice its programs (``launch_forms``), of 4
      warps each: with 0.1 % of keys holding a group 2**6 above the rest, next_n=2 226.5 us
      against 298.9 on the hot pass's own programs, B=16 x 131072 223.4 against 291.0 (H200);
      after the 16-warp hot kernel (H100, A/B, docs/benchmarks.md stop 39), next_n=1 135.2-135.4
      us against 209.5-210.0 for an exact pass on its 16 warps x 4 pages and its own programs,
      141.7-141.8 on four times the programs; 104.0-104.3 against 118.5-120.8 with 0.01 % of such
      keys, 307.2-307.8 against 406.1-409.4 with 1 %; the same without such keys (75.5-75.6
      against 75.4).
    - setup units (``score_share``): 4 for the 16-warp hot kernel (64 x 32768: 80.8 us against
      84.3 with 0, 80.4 with 6, 83.8 with 12; 64 x 4096: 18.8 against 20.9, 22.9 with 12); 6
      for the two-row one (H100, Triton 3.6, A/B on this tree, docs/benchmarks.md stop 37:
      next_n=2 105.3-106.7 us against 108.4-111.8 with 0; 16 x 131072 102.7-104.3 against
      107.9-109.7; 16 x 32768 32.8-32.9 against 37.2-37.6; next_n=4 201.9-203.0 against
      203.6-206.6; nowhere slower). An older tree on the H200 gained nothing with 1-4 and lost 2 %
      at next_n=4; 6 was not tried there.
    """
    if wgmma:
        # The hot pass on wgmmas in inline PTX (``score_wgmma``), a page per tile. One warpgroup
        # per program: as many programs per SM as its register cap allows (``WGMMA_REGISTERS``).
        # H100, A/B against the default hot pass (docs/benchmarks.md, stops 53 and 54): next_n=4
        # 169.3-171.1 us against 201.6-204.5; next_n=3 166.1-166.3 against 200.7-200.8; next_n=2
        # 113.1 against 106.6-107.4; 16 x 131072 111.1 against 103.3-103.5 (so 2-row blocks take
        # four warpgroups: ``WGMMA_GROUPS``). Fewer or more programs per SM than planned:
        # slower (stop 51). The pass at four warpgroups per program (16 warps) runs one program per
        # SM, needing no cap: 512 threads hold ptxas to 128 registers (``WGMMA_GROUPS`` says which
        # rows take which).
        if pass_warps == 4:
            plan = (1, 4, 65536 // (128 * WGMMA_REGISTERS[columns]), False)
        else:
            plan = (1, pass_warps, 1, False)
    elif word_fed:
        plan = (4, 16, 1, False) if columns <= 64 else (2, 8, 1, True)
    else:
        plan = (2, 4, 2, False)
    keys = ("tile_pages", "num_warps", "programs_per_sm", "pairs")
    tile_pages, num_warps, per_sm, pairs = (tuning.get(key, default) for key, default in zip(keys, plan))
    wide = wide_hot_pass(word_fed, num_warps, wgmma)
    split = tuning.get("exact_split", (WGMMA_GROUPS_EXACT_SPLIT if pass_warps > 4 else 1) if wgmma
                       else 2 if word_fed else 1)
    setup = tuning.get("setup_units", 4 if wide else 6 if word_fed else 0)
    return tile_pages, num_warps, per_sm, pairs, split, setup


def schedule_chunk(word_fed: bool, num_warps: int, requests, wgmma: int = 0) -> int:
    """The schedule's step (``CHUNK``: requests per block-wide scan in ``score_share``) of one
    launch, from its form's ``WORDS`` and ``WARPS`` (each pass of a pair its own: after the
    16-warp hot kernel, the exact pass on 4 warps takes 32 where the hot pass may take 64).
    ``requests``: the batch (a symbolic batch takes the large-batch choice, with no guard). The
    step sets no share, only how the schedule is computed, and the compiled code around it.

    Measured on the H200 (docs/benchmarks.md, A/B runs, Triton 3.6), against the former 128 for all:
    - the 16-warp hot kernel: 32 up to 8 requests (1 x 8192: 8.2 us against 8.7; 4 x 8192: 9.6
      against 10.2; 1 x 32768: 8.3 against 8.8), 64 above (64 x 32768: 78.2 against 79.7; 16 x
      131072: 76.6 against 78.1-78.6; even at 128 x 16384: 82.2 against 82.1). 32 costs there
      (84.0 us at 128 x 16384), and 64 does at one to four requests (8.6-10.0 us). Nothing was
      measured between 4 and 16 requests;
    - a word-fed hot kernel below 16 warps (by default the two-row kernel's 8), or a wgmma hot
      pass (measured at one warpgroup per program; four take it too): 32 (1 x 8192,
      next_n=2: 9.5 against 10.2; 64 x 32768, next_n=4: 204.8-206.0 against 207.2-208.4;
      next_n=2 even); 256 was slower than 128 at every two-row shape, by 0.2-5.5 us;
    - every other form (not measured): 128, as before.
    The rule holds on Triton 3.7.1 too (A/B on the H200), although there the step of 64 costs the
    16-warp hot loop four instructions per tile against 32 and 128: 64 x 32768 81.7-81.8 us
    against 83.6 with 128 and 83.9-84.0 with 32; 16 x 131072 79.3-79.4 against 81.1-81.6; 1 x 8192
    10.3-10.4 against 10.9 with 128; the two-row kernel's 32 within 0.6 us of 128 and ahead of 64."""
    if not word_fed:
        return SCHEDULE_CHUNK
    if not wide_hot_pass(word_fed, num_warps, wgmma):
        return 32
    return 32 if isinstance(requests, int) and requests <= 8 else 64


def launch_forms(exact: str, asm: bool, word_fed: bool, tile_pages: int, num_warps: int,
                 pairs: bool = False, split: int = 1, setup: int = 0, wgmma: int = 0, row_split: int = 1) -> list[dict]:
    """The kernel launches of one call, in order, as their constexprs (``WARPS`` is also the
    launch's num_warps), all cutting their shares from the same units (``SHARE_PAGES``), the
    exact pass on ``split`` times the hot pass's programs (``SPLIT``: each hot share cut in
    ``split`` parts). Each form names every constexpr of the kernel beyond those the launcher
    passes, and the kernel gives none a default: Inductor's generated code (torch 2.11) passes
    None for a constexpr left to its default.

    ``exact="inline"``: one launch (MODE 0). ``"fixup"``: the hot pass (MODE 1, word-fed where
    ``word_fed``) and the exact pass (MODE 2), which only runs the tiles whose keys do not fold.
    - After a word-fed hot pass the exact pass is word-fed too: it scans the scales of its share 16
      pages a step, loads of later steps in flight, then reads the payload of only the tiles that
      need it (the next one's while one is scored; for one-row blocks also across a group's
      steps), and scores such a tile with one int8 dot per
      class of its keys' group scales (``fold_classes``), with the PTX builder, one page per tile on
      4 warps (the float32 sum of a two-row block fits; a tile of 64 keys holds a key that does not
      fold less often than one of 256). H200, B=64 x 32768 with 0.1 % of keys holding a group 2**6
      above the rest: 228 us at next_n=2 (split 2; 299 us with split 1, as the hot kernel there runs
      one 8-warp program per SM; 325 us for an exact pass of 8 warps x 2 pages; docs/benchmarks.md).
      A program whose hot share marked nothing leaves at once, so with no such key the exact pass
      costs about a launch (1.5 us at next_n=1, against 6 us when every program computed the
      schedule first).
    - Otherwise it builds with the portable integer builder, at most 2 pages per tile on 4
      warps: inside the loop over a share's requests, Triton 3.7 puts the byte-fed PTX builder
      in a layout that breaks pack=4 (tests/test_prmt.py compiles every default launch).
    ``wgmma`` (0 or 1; word-fed only): the hot pass on wgmmas in inline PTX (``score_wgmma``);
    the exact pass as after any word-fed hot pass. ``row_split``: the exact pass's row blocks are
    the hot pass's cut in that many (``ROW_SPLIT``: 2 after the wgmma pass's 4-row blocks, else 1;
    the launcher's ``exact_rows`` tuning sets it), on that many times the programs along axis 1."""
    if exact == "inline":
        return [dict(MODE=0, TILE_PAGES=tile_pages, SHARE_PAGES=tile_pages, SETUP_UNITS=setup, ASM=asm, WORDS=False,
                     WARPS=num_warps, PAIRS=False, SPLIT=1, WGMMA=0, ROW_SPLIT=1)]
    if word_fed:
        exact_pass = dict(TILE_PAGES=1, ASM=asm, WORDS=True, WARPS=4)
    else:
        exact_pass = dict(TILE_PAGES=min(tile_pages, 2), ASM=False, WORDS=False, WARPS=4)
    return [dict(MODE=1, TILE_PAGES=tile_pages, SHARE_PAGES=tile_pages, SETUP_UNITS=setup, ASM=asm, WORDS=word_fed,
                 WARPS=num_warps, PAIRS=word_fed and pairs, SPLIT=1, WGMMA=int(wgmma) if word_fed else 0, ROW_SPLIT=1),
            dict(MODE=2, SHARE_PAGES=tile_pages, SETUP_UNITS=setup, PAIRS=False, SPLIT=split, WGMMA=0,
                 ROW_SPLIT=row_split, **exact_pass)]


def check_wgmma(word_fed: bool, gpu: bool, asm: bool, heads: int, device, q_payload: torch.Tensor, kernel) -> None:
    """The ``wgmma=1`` tuning's conditions (a ValueError naming what is missing): an sm_90 GPU
    (CUDA), FP4 queries on the word-fed hot pass with the PTX builder (16-byte-aligned cache rows,
    exact="fixup"), 64 heads, query payload rows 16-byte aligned (the query prologue loads 16
    bytes at a time), a kernel that takes ``WGMMA`` (not a copy from before it)."""
    if not (gpu and torch.version.hip is None and capability_major(device) == 9):
        raise ValueError(f"wgmma: expected an sm_90 CUDA device, got {device}")
    if not (word_fed and asm):
        raise ValueError("wgmma: expected FP4 queries, exact='fixup' and 16-byte-aligned cache rows (the word-fed hot "
                         f"pass with the PTX builder), got word_fed={word_fed}, asm={asm}")
    if heads != 64:
        raise ValueError(f"wgmma: expected 64 heads, got {heads}")
    if not rows_aligned(q_payload, 16):
        size = q_payload.element_size()
        address = "" if is_fake(q_payload) else f", an address {q_payload.data_ptr() % 16} past a multiple"
        raise ValueError("wgmma: expected the query payload's rows 16-byte aligned, got a "
                         f"storage offset of {q_payload.storage_offset() * size} bytes, a row stride of "
                         f"{q_payload.stride(0) * size} bytes{address}")
    if "WGMMA" not in kernel.arg_names:
        raise ValueError(f"wgmma: expected a kernel that takes WGMMA, got {getattr(kernel, '__name__', kernel)}")


# The tunings that shape or compile the hot pass: a launch given any of them keeps the default
# hot pass unless it also sets ``wgmma`` (the others, e.g. ``programs`` or ``setup_units``, apply
# to either pass).
HOT_PASS_KEYS = frozenset(("tile_pages", "num_warps", "programs_per_sm", "pairs", "max_columns", "maxnreg",
                           "num_stages"))

# The fewest rows of the longest request (``max_query_len``) that take the wgmma hot pass by
# default: from 2, in blocks of 2 rows (four warpgroups per program) and of 4 (from 3 rows).
WGMMA_MIN_ROWS = 2


def wgmma_default(word_fed: bool, gpu: bool, asm: bool, heads: int, device, q_payload: torch.Tensor, kernel,
                  max_query_len, out: torch.Tensor) -> bool:
    """Whether a launch that names no ``wgmma`` takes the wgmma hot pass: where ``check_wgmma``'s
    conditions hold (an sm_90 CUDA device, FP4 queries on the word-fed pass with the PTX builder,
    64 heads, 16-byte-aligned query rows, a kernel that takes ``WGMMA``; the same check, so the
    two cannot drift apart), for a longest request of ``WGMMA_MIN_ROWS`` rows or more (blocks of
    2 or 4 rows), launched with real tensors, or while tracing (fake tensors) where the kernel's
    pass runs four warpgroups per program (``wgmma_warps``: it needs no register cap, and
    Inductor's launches of a user kernel drop ``maxnreg``). A kernel copy of one warpgroup only
    keeps the default hot pass while tracing and at 2-row blocks.

    H100, A/B (docs/benchmarks.md): 64 x 32768 next_n=4 162.1-163.3 us at one warpgroup per
    program (stop 61) against 201.6-204.5 with ``wgmma=0`` (stop 54); next_n=3 159.0-159.4
    against 200.7-200.8; next_n=2 at four warpgroups 101.9-102.7 against 104.4-105.6; 16 x
    131072 98.0-99.5 against 103.1-104.6. Traced at 4 rows (four warpgroups, no cap) 172.3 us
    with eager's bits, where the default hot pass compiled took 201.7 (stops 61 and 54)."""
    if not (isinstance(max_query_len, int) and max_query_len >= WGMMA_MIN_ROWS):
        return False
    # Where the default takes four warpgroups (``wgmma_wanted_warps``: 2-row blocks, traced
    # launches), a kernel copy without them keeps the default hot pass (one warpgroup is slower
    # than it at 2 rows, and needs the cap that traced launches drop).
    if wgmma_wanted_warps(wgmma_rows(max_query_len), is_fake(out)) == 16 and 16 not in wgmma_warps(kernel):
        return False
    try:
        check_wgmma(word_fed, gpu, asm, heads, device, q_payload, kernel)
    except ValueError:
        return False
    return True


def _sixteen_byte_aligned(cache: torch.Tensor) -> bool:
    """Whether every section starts 16-byte aligned. The PTX builder packs each thread's four
    consecutive payload bytes into one register; Triton keeps 16 consecutive bytes per thread
    only when it can prove 16-byte alignment, and with less the packs mix columns (measured:
    wrong scores at an odd offset). allocate_merged_cache keeps offsets and strides at
    multiples of 16; anything else takes the portable integer builder (same results)."""
    return rows_aligned(cache, 16)


# The launcher's tunings (``launch_score_paged``): for the benchmarks, not part of the API.
TUNING_KEYS = ("tile_pages", "num_warps", "num_stages", "programs_per_sm", "pairs", "exact_split", "setup_units",
               "maxnreg", "max_columns", "asm", "exact", "chunk", "programs", "wgmma", "exact_rows")


def launch_score_paged(
    out, q_payload, q_scales, cache, weights, block_table, query_starts, row_ends, max_query_len, *,
    kernel=score_paged_kernel, **tuning
) -> None:
    """Launch the scorer. ``kernel`` (a variant of ``score_paged_kernel``) and ``tuning``
    (``TUNING_KEYS``) are for the benchmarks (benchmarks/score_variants.py) and not part of the
    API; a tuning key outside TUNING_KEYS is an error, not a launch with the defaults.
    tile_pages and num_warps set the hot pass (and the shares); the exact pass takes its own, and
    exact_split times the hot pass's programs (``launch_forms``); programs sets the hot pass's
    programs per row block (by default programs_per_sm times the SMs, 4 SMs on the interpreter).

    ``q_scales=None``: ``q_payload`` holds unquantized queries float [rows, H, 128], scored as
    bf16 against the FP4 keys (the higher-recall mode)."""
    if tuning and not set(tuning) <= set(TUNING_KEYS):
        raise ValueError(f"tuning: expected keys among {TUNING_KEYS}, got {sorted(set(tuning) - set(TUNING_KEYS))}")
    if "wgmma" in tuning and not (isinstance(tuning["wgmma"], int) and tuning["wgmma"] in (0, 1)):
        raise ValueError(f"wgmma: expected 0 or 1, got {tuning['wgmma']!r}")
    exact_rows = tuning.get("exact_rows", 1)
    if isinstance(exact_rows, bool) or not (isinstance(exact_rows, int) and exact_rows >= 1
                                            and next_power_of_2(exact_rows) == exact_rows):
        raise ValueError(f"exact_rows: expected a power of two dividing the hot pass's rows per block, got "
                         f"{exact_rows!r}")
    rows, heads = q_payload.shape[:2]
    requests, pages_per_request = block_table.shape
    # An unbacked row count of 0 at run time launches programs that find no row and write nothing.
    if guard_or_false(rows == 0) or requests == 0 or pages_per_request == 0:
        return
    # The kernel reads entry i at ptr + i; other strides become a copy (a no-op when contiguous).
    query_starts, row_ends = query_starts.contiguous(), row_ends.contiguous()
    # A request has at most ``rows`` rows: a larger hint would only widen the launch. (Not with a
    # symbolic row count: the comparison would become a guard, a recompile per row bucket.)
    if isinstance(rows, int):
        max_query_len = min(max_query_len, rows)
    query_float = q_scales is None
    gpu = cache.device.type == "cuda"
    if query_float:
        # bf16 queries; the interpreter has no bf16 arithmetic and takes their exact float32 values.
        q_payload = q_payload.to(torch.bfloat16).contiguous()
        if not gpu:
            q_payload = q_payload.float()
        q_scales = q_payload
    else:
        # The kernel reads a row's heads at fixed offsets; other layouts are copied here, as the
        # reference backend takes them too (quantize_queries returns contiguous tensors).
        q_payload, q_scales = q_payload.contiguous(), q_scales.contiguous()
    # Rows of a request are scored together up to 128 columns (rows x heads);
    # longer verify groups are split into row blocks, each still sharing its key reads.
    rows_per_block = min(next_power_of_2(max_query_len), max(1, tuning.get("max_columns", 128) // heads))
    asm = tuning.get("asm", gpu and torch.version.hip is None and _sixteen_byte_aligned(cache))
    # "fixup" (the default): a hot kernel without the exact path and without a per-tile vote,
    # then the exact path in the programs that marked a key; 1.5-1.7x faster than "inline"
    # (both paths in one kernel) on the H200 (docs/benchmarks.md).
    exact = tuning.get("exact", "fixup")
    if exact not in ("inline", "fixup"):
        raise ValueError(f"exact: expected 'inline' or 'fixup', got {exact!r}")
    # The word-fed hot loop: on the GPU with the PTX builder; the interpreter takes it too (with
    # the integer builder) wherever the words are 4-byte aligned, so CPU runs execute it.
    word_fed = word_fed_pass(exact, query_float) and (asm if gpu else rows_aligned(cache, 4))
    if "wgmma" in tuning:
        wgmma = tuning["wgmma"]
        if wgmma:
            check_wgmma(word_fed, gpu, asm, heads, cache.device, q_payload, kernel)
    else:
        wgmma = int(not HOT_PASS_KEYS & set(tuning)
                    and wgmma_default(word_fed, gpu, asm, heads, cache.device, q_payload, kernel, max_query_len, out))
    if wgmma:
        rows_per_block = wgmma_rows(max_query_len)
    row_blocks = cdiv(max_query_len, rows_per_block)
    # The exact pass's rows per block: the hot pass's (``row_split`` 1), but 2 after the wgmma
    # pass's 4-row blocks, each hot block cut in two (``ROW_SPLIT``; a kernel copy without it keeps
    # 4). The 4-row exact pass holds 255 registers and a 2 KB stack: H100, 64 x 32768 next_n=4
    # (docs/benchmarks.md, stop 55), with 0.01 % of keys holding a group 2**6 above the rest
    # 223.9-224.2 us against 295.8-295.9, 0.1 % 306.7-306.8 against 444.7-445.1, 1 % 670.6-674.8
    # against 1086.4-1091.8, outlier channels 1028.5-1029.4 against 1845.1-1853.3; without such
    # keys 169.1-169.3 against 168.5-168.6 (twice the exact programs, each leaving at once). The
    # ``exact_rows`` tuning (for the benchmarks) sets it.
    row_split = 2 if wgmma and rows_per_block == 4 and "ROW_SPLIT" in kernel.arg_names else 1
    if "exact_rows" in tuning:  # ``exact_rows`` holds it, its type checked above
        if exact == "inline":
            raise ValueError(f"exact_rows: the one-launch form (exact='inline') has no exact pass of its own, got "
                             f"exact_rows={exact_rows!r}")
        if rows_per_block % exact_rows:
            raise ValueError(f"exact_rows: expected a power of two dividing the hot pass's {rows_per_block} rows "
                             f"per block, got {exact_rows!r}")
        row_split = rows_per_block // exact_rows
    pass_warps = 4
    if wgmma:
        # The pass's warps: the tuning's, else the default by rows (``wgmma_pass_warps``); either
        # among its kernel's (``wgmma_warps``), a page per tile.
        offered = wgmma_warps(kernel)
        pass_warps = tuning.get("num_warps", wgmma_pass_warps(rows_per_block, is_fake(out), offered))
        if pass_warps not in offered or tuning.get("tile_pages", 1) != 1:
            raise ValueError(f"wgmma: the kernel's pass runs one page per tile on {' or '.join(map(str, offered))} "
                             f"warps, got tile_pages={tuning.get('tile_pages', 1)}, num_warps={pass_warps}")
    tile_pages, num_warps, per_sm, pairs, split, setup = launch_plan(word_fed, rows_per_block * heads, tuning, wgmma,
                                                                     pass_warps)
    if word_fed and not wgmma and (64 * tile_pages) % (16 * num_warps):
        raise ValueError(f"tile_pages: the word-fed loop needs 64 * tile_pages to be a multiple of 16 * num_warps, "
                         f"got tile_pages={tile_pages} with num_warps={num_warps}")
    # One program per share of all requests' pages (the kernel computes the shares), per row block.
    sms = sm_count(cache.device) if gpu else 4
    grid = (max(1, tuning.get("programs", per_sm * sms // row_blocks)), row_blocks)
    forms = launch_forms(exact, asm, word_fed, tile_pages, num_warps, pairs, split, setup, wgmma, row_split)
    missing = {"WGMMA", "ROW_SPLIT"} - set(kernel.arg_names)
    if missing:
        # A kernel copy from before the wgmma hot pass or the exact pass's own rows
        # (benchmarks/score_variants.py): its exact pass takes the hot pass's rows.
        if "ROW_SPLIT" in missing and row_split != 1:
            raise ValueError("exact_rows: expected a kernel that takes ROW_SPLIT, got "
                             f"{getattr(kernel, '__name__', kernel)}")
        forms = [{k: v for k, v in form.items() if k not in missing} for form in forms]
    # The one-kernel form never touches the flags (query_starts is a read-only stand-in).
    flags = torch.empty(grid[0] * grid[1], dtype=torch.uint8, device=out.device) if exact == "fixup" else query_starts
    maxnreg = tuning.get("maxnreg")
    # The wgmma hot pass's cap, on its launch only (the exact pass keeps its own registers).
    hot_maxnreg = maxnreg or (WGMMA_REGISTERS[rows_per_block * heads] if wgmma and pass_warps == 4 else None)
    # A kernel copy from before PDL (benchmarks/score_variants.py) takes neither the constexpr nor
    # the launch option: a dependent launch of a kernel that does not wait would race.
    takes_pdl = "PDL" in kernel.arg_names
    pdl = takes_pdl and dependent_launch(word_fed, asm, exact, out)
    for form in forms:
        cap = hot_maxnreg if form["MODE"] == 1 else maxnreg
        parts = form.get("ROW_SPLIT", 1)
        wrapped(kernel)[(grid[0] * form["SPLIT"], grid[1] * parts)](
            out, out.stride(0), q_payload, q_scales, cache, cache.stride(0), weights, weights.stride(0), weights.stride(1),
            block_table, block_table.stride(0), block_table.stride(1), query_starts, row_ends, requests,
            pages_per_request * 64, rows, flags,
            HEADS=heads, ROWS=rows_per_block // parts, QUERY_FLOAT=query_float,
            DOT_DTYPE=tl.bfloat16 if gpu else tl.float32,
            CHUNK=tuning.get("chunk", schedule_chunk(form["WORDS"], form["WARPS"], requests, form.get("WGMMA", 0))),
            **form,
            num_warps=form["WARPS"],
            num_stages=tuning.get("num_stages", 3),
            **({"maxnreg": cap} if cap else {}),
            **({"PDL": pdl} if takes_pdl else {}),
            # Only with PDL (eager): a launch option that torch's traced launches do not take.
            **({"launch_pdl": form["MODE"] == 2} if pdl else {}),
        )
