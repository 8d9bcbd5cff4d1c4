"""The scorer's hot pass on int8 wgmmas in inline PTX (``kernels/score_wgmma.py``, written by
``kernels/wgmma_source.py``; by default for blocks of 2 and 4 rows on sm_90, ``wgmma_default``):
the checked-in kernel is what its generator writes; compiled for sm_90 on any machine, at one
warpgroup per program (4 warps) and at four (16 warps, 128 registers with no cap), no wgmma is
serialized by ptxas, the tile loop's dots run as written (at 2 rows two half dots one after the
other, at 4 one dot per query row, two in flight) and the register caps hold with no spill in the
tile loop (a few stack words in the query prologue), and so for the dot each size does not take,
written out as a variant; the query prologue writes the operand and folded weights it should (run
on numpy, by one warpgroup and by four); the whole pass run on numpy (``wgmma_emulator``) matches
float64 at one warpgroup and at four, the two bit for bit, and marks what does not fold; the
launcher refuses what it cannot run, plans the pass's warpgroups by rows (eager and traced), and
takes the pass by default where its conditions hold; on an sm_90 GPU, its logits match float64 on
ragged, permuted batches, with keys and queries that do not fold (the exact pass after it), at
one warpgroup and at four bit for bit, nothing is written outside the valid region, the public op
takes it from 2 rows per request, and compiled models take it with eager's bits."""

import json
import os
import re

import numpy as np
import pytest
import torch

import fp4_inductor as fp4
from fp4_inductor import reference
from fp4_inductor.kernels import wgmma_source

from conftest import HAS_TRITON, INTERPRETER
from helpers import (NEEDS_SM90_TOOLS, float64_scores, random_keys, recorded_scorer_launches, run_sm90_script,
                     scoring_case)

pytestmark = pytest.mark.skipif(not HAS_TRITON, reason="needs triton")


def test_the_checked_in_kernel_is_what_the_generator_writes():
    path = os.path.join(os.path.dirname(wgmma_source.__file__), "score_wgmma.py")
    with open(path) as f:
        assert f.read() == wgmma_source.module_source(), "run: python -m fp4_inductor.kernels.wgmma_source"


def test_every_asm_string_is_one_line():
    """Inductor copies a kernel's constexpr globals into its generated code, where a string with a
    newline does not survive (ptx.py)."""
    for name, text in wgmma_source.constants().items():
        assert "\n" not in text, name


def names_read_before_set(source: str, module_names=()) -> dict[str, list[str]]:
    """Per function of ``source``: the names it reads before any statement above (in program
    order, a loop's body once, from the top) has set them, and that are not the module's (nor
    ``module_names``, where ``source`` holds the functions only). A name that a loop's body reads
    at its top and sets only further down (a value the loop carries) must be set before the loop
    too. Statements other than assignments, ``for`` and ``if`` count as reads only (the written-out
    kernels hold no others)."""
    import ast
    import builtins

    tree = ast.parse(source)
    module = set(dir(builtins)) | set(module_names)
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            module |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, ast.FunctionDef):
            module.add(node.name)
        elif isinstance(node, ast.Assign):
            module |= {t.id for t in node.targets if isinstance(t, ast.Name)}

    def reads(node) -> set[str]:
        return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}

    def sets(target) -> set[str]:
        return {n.id for n in ast.walk(target) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}

    def walk(statements, known: set, missing: list) -> set:
        for statement in statements:
            if isinstance(statement, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                value_reads = reads(statement.value) if statement.value is not None else set()
                if isinstance(statement, ast.AugAssign):
                    value_reads |= sets(statement.target)
                missing += sorted(value_reads - known - module)
                targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
                for target in targets:
                    known = known | sets(target)
            elif isinstance(statement, ast.For):
                missing += sorted(reads(statement.iter) - known - module)
                known = walk(statement.body, known | sets(statement.target), missing)
            elif isinstance(statement, ast.If):
                missing += sorted(reads(statement.test) - known - module)
                known = walk(statement.body, known, missing) & walk(statement.orelse, known, missing)
            else:
                missing += sorted(reads(statement) - known - module)
        return known

    found = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            missing = []
            walk(node.body, {a.arg for a in node.args.args}, missing)
            found[node.name] = missing
    return found


def test_every_written_out_name_is_set_before_it_is_read():
    """Triton reports a name read before it is set only when it compiles the kernel for a GPU.
    The package's kernels, and every form of the prototype (``benchmarks/wgmma_scorer.py``'s
    ALL_FORMS, which take the generator's loops with keys carried 0-2 steps, 1-3 dots in flight
    and the tile's dot whole or in halves) read nothing before setting it; the checker itself
    finds a value a loop carries but that is never set before the loop."""
    import importlib
    import sys

    # the package's, and every block with 2 or with 3, each at one and at four warpgroups per program
    functions = [f"wgmma_rows{rows}_g{groups}" for rows in (2, 4) for groups in wgmma_source.GROUPS]
    for halves in (None, 2, 3):
        assert names_read_before_set(wgmma_source.module_source(halves)) == {
            name: [] for name in functions + ["wgmma_request"]}, halves
    bench = os.path.join(os.path.dirname(__file__), "..", "benchmarks")
    sys.path.insert(0, bench)
    try:
        scorer = importlib.import_module("wgmma_scorer")
    finally:
        sys.path.remove(bench)
    header = {"triton", "tl", *wgmma_source.constants()}
    for form in scorer.ALL_FORMS:
        assert names_read_before_set(scorer.kernel_source(*form), header) == {scorer.form_name(*form): []}, form
    carried = "def f(n):\n    a = 0\n    for i in range(n):\n        c = a + b\n        b = c\n    return c\n"
    assert names_read_before_set(carried) == {"f": ["b"]}


@pytest.mark.parametrize("halves, rows", [(4, 4), (-1, 2), (3, 1)])
def test_the_generator_refuses_a_dot_it_cannot_write(halves, rows):
    with pytest.raises(ValueError, match=f"halves: expected 0-3 .*got {halves} at {rows} rows"):
        wgmma_source.tile_body(64 * rows, rows, 1, halves)


@pytest.mark.parametrize("n, groups", [(64, 4), (128, 8), (128, 0), (256, 3)])
def test_the_query_prologue_refuses_warpgroups_that_do_not_fill_its_steps(n, groups):
    with pytest.raises(ValueError, match=f"groups: expected warpgroups whose threads divide the {4 * n} units "
                                         f"of {n} columns, got {groups}"):
        wgmma_source.query_prologue(n, groups)


def test_a_variant_names_what_it_changes():
    assert [wgmma_source.variant_name(halves) for halves in (0, 2, 3)] == ["h0", "h2", "h3"]
    with pytest.raises(ValueError, match=r"variant: expected halves \(tile_body's dot at every block\), got None"):
        wgmma_source.variant_sources()


_COMPILE = NEEDS_SM90_TOOLS + """
import json, tempfile
from fp4_inductor.kernels import score, score_kernel, wgmma_source
from fp4_inductor.kernels.sm90 import compile_scorer, dot_loop_spills, dump_cubin, ptxas_verdict, wgmma_order
from helpers import import_wgmma_variant

out = {}
# The package's dots at 2 and 4 rows at one warpgroup per program and at four (``g1_``, ``g4_``),
# and at each size the dot of halves 2 and 3 that the package does not take there (``other``, a
# variant, at the warpgroups an eager launch takes there); each launched as the launcher plans it.
package = wgmma_source.PACKAGE_HALVES
other = {rows: ({2, 3} - {package[rows]}).pop() for rows in (2, 4)}
forms = [(f"g{groups}_", groups, rows) for groups in wgmma_source.GROUPS for rows in (2, 4)]
for which, groups, rows in forms + [("other", score.WGMMA_GROUPS[rows], rows) for rows in (2, 4)]:
    halves = other[rows] if which == "other" else package[rows]
    scorer = score_kernel.score_paged_kernel
    if which == "other":
        module, names = import_wgmma_variant(tempfile.mkdtemp(), halves)
        scorer = module.score_paged_kernel
    warps = 4 * groups
    plan = score.launch_plan(True, rows * 64, {}, 1, warps)
    hot = score.launch_forms("fixup", True, True, plan[0], plan[1], plan[3], plan[4], plan[5], 1)[0]
    # The launcher's cap where it passes one (one warpgroup per program); four pass none, as
    # Inductor's launches, which drop ``maxnreg``, compile them too.
    cap = score.WGMMA_REGISTERS[rows * 64] if warps == 4 else None
    kernel = compile_scorer(scorer, rows, hot, maxnreg=cap)
    usage = dump_cubin(kernel.asm["cubin"], "resource-usage")
    out[which + str(rows)] = dict(plan=plan, hot=hot, cap=cap or 128, halves=halves, warps=kernel.metadata.num_warps,
                                  warnings=ptxas_verdict(kernel.asm["ptx"])[1],
                                  registers=int(usage.split("REG:")[1].split()[0]),
                                  stack=int(usage.split("STACK:")[1].split()[0]),
                                  order=wgmma_order(kernel.asm["cubin"]), loop=dot_loop_spills(kernel.asm["cubin"]))
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def compiled():
    """The wgmma hot pass at 2 and 4 rows as the launcher plans it, compiled for sm_90 in a
    fresh process (the tests here may run Triton's interpreter, which cannot compile)."""
    return json.loads(run_sm90_script(_COMPILE))


def dot_order(halves: int, rows: int) -> str:
    """The tile loop's wgmmas and waits as written (``tile_body``'s ``halves`` 2 or 3)."""
    if halves == 2:  # the two half dots, one after the other
        return "group, wait 0x0, group, wait 0x0"
    # one dot per query row, two in flight
    return ", ".join(["group", "group"] + ["wait 0x1", "group"] * (rows - 2) + ["wait 0x1", "wait 0x0"])


def check_compiled(got: dict, rows: int) -> None:
    halves = got["halves"]
    # No wgmma serialized by ptxas; within the cap (one warpgroup per program), or the 128
    # registers that 512 threads leave each (four).
    assert got["warnings"] == [] and got["registers"] <= got["cap"]
    if got["warps"] == 4:
        # A few words of stack in the query prologue (Triton 3.6: 8 bytes at 4 rows with the halves
        # in turn, 16 with one dot per row, 16 at 2 rows; 3.7.1: 16 and 24, with PDL or without).
        # One dot per row at 2 rows spills more of the prologue (128 bytes on Triton 3.6)...
        assert got["stack"] <= (160 if (halves, rows) == (3, 2) else 24)
    else:
        # Four warpgroups: none at 2 rows with the halves in turn; elsewhere up to 136 bytes
        # (the package's 4-row form: 128 on Triton 3.6, 136 on 3.7.1; one dot per row at 2 rows:
        # 80 on 3.7.1)...
        assert got["stack"] <= (0 if (halves, rows) == (2, 2) else 160)
    # ... and none of it in the tile loop (a few hundred instructions per 64-key tile).
    instructions, spills = got["loop"]
    assert 300 < instructions < 700 and spills == 0, got["loop"]
    assert got["order"] == dot_order(halves, rows)


@pytest.mark.parametrize("groups", [1, 4])
@pytest.mark.parametrize("rows", [2, 4])
def test_the_hot_pass_compiles_for_sm90(compiled, rows, groups):
    """The package's dots (at 2 rows the tile's dot in two halves, one after the other; at 4 one
    dot per query row, two in flight), at one warpgroup per program and at four, as the launcher
    plans each: one warpgroup under its register cap, as many programs per SM as its registers
    allow; four (16 warps) with no ``maxnreg``, as Inductor's launches compile it too, one
    program per SM, the exact pass on four times the programs, the one-warpgroup pass's setup
    units."""
    got = compiled[f"g{groups}_{rows}"]
    assert got["hot"]["WGMMA"] == 1 and got["hot"]["TILE_PAGES"] == 1 and got["warps"] == got["hot"]["WARPS"]
    if groups == 1:
        assert got["hot"]["WARPS"] == 4 and got["plan"][4:] == [1, 6]
        # The programs per SM the launcher plans are what the compiled registers (allocated in
        # steps of 8) allow: a cap looser than the kernel needs would plan too few.
        assert got["plan"][2] == 65536 // (128 * -(-got["registers"] // 8) * 8)
    else:
        assert got["hot"]["WARPS"] == 16 and got["plan"] == [1, 16, 1, False, 4, 6]
    check_compiled(got, rows)


@pytest.mark.parametrize("rows", [2, 4])
def test_the_other_dot_compiles_for_sm90(compiled, rows):
    """The dot the package does not take at ``rows`` (one dot per query row at 2 rows, slower there;
    the halves in turn at 4, slower there), written out as a variant for ``score_ab.py``, at the
    warpgroups an eager launch takes there (``WGMMA_GROUPS``), as the launcher plans it: no wgmma
    serialized, no spill in the tile loop, its dots as written."""
    check_compiled(compiled[f"other{rows}"], rows)


def launch_args(gen, query_lens) -> tuple:
    """``launch_score_paged``'s arguments for a CPU case at 64 heads (requests of ``query_lens``
    rows over 300, 70 and 200 keys, permuted merged pages, queries from ``quantize_queries``),
    ``out`` all NaN: (out, q_payload, q_scales, cache, weights, block_table, query_starts,
    row_ends, max_query_len)."""
    case = scoring_case(gen, "cpu", heads=64, query_lens=query_lens, seq_lens=[300, 70, 200][:len(query_lens)])
    out = torch.full((case["q"].shape[0], case["block_table"].shape[1] * 64), float("nan"))
    return (out, *fp4.quantize_queries(case["q"]), case["cache"], case["weights"], case["block_table"],
            case["query_starts"], case["row_ends"], case["max_query_len"])


def test_the_launcher_refuses_what_it_cannot_run(gen):
    from fp4_inductor.kernels.score import launch_score_paged

    args = launch_args(gen, [2, 1])
    out = args[0]
    for bad in (5, 2, "1", 1.0, None):
        with pytest.raises(ValueError, match=re.escape(f"wgmma: expected 0 or 1, got {bad!r}")):
            launch_score_paged(*args, wgmma=bad)
    for bad in (3, 0, -2, "1", 1.0, True):
        with pytest.raises(ValueError, match=re.escape(f"exact_rows: expected a power of two dividing the hot pass's "
                                                       f"rows per block, got {bad!r}")):
            launch_score_paged(*args, exact_rows=bad)
    with pytest.raises(ValueError, match=re.escape("exact_rows: expected a power of two dividing the hot pass's 2 "
                                                   "rows per block, got 4")):  # 2-row blocks here
        launch_score_paged(*args, exact_rows=4)
    with pytest.raises(ValueError, match=r"exact_rows: the one-launch form \(exact='inline'\) has no exact pass"):
        launch_score_paged(*args, exact="inline", exact_rows=1)
    empty = list(args)
    empty[5] = args[5][:0]  # no requests: refused all the same, before the early return
    with pytest.raises(ValueError, match=re.escape("wgmma: expected 0 or 1, got 5")):
        launch_score_paged(*empty, wgmma=5)
    with pytest.raises(ValueError, match=re.escape("exact_rows: expected a power of two")):
        launch_score_paged(*empty, exact_rows="1")
    with pytest.raises(ValueError, match="wgmma: expected an sm_90 CUDA device, got cpu"):
        launch_score_paged(*args, wgmma=1)
    assert out.isnan().all()  # nothing written


def test_the_wgmma_conditions(monkeypatch):
    """Each condition of ``check_wgmma`` names what it expected and what came (the device check
    passed with a stand-in for the capability)."""
    from fp4_inductor.kernels import score

    monkeypatch.setattr(score, "capability_major", lambda device: 9)
    monkeypatch.setattr(score.torch.version, "hip", None)
    payload = torch.zeros(3, 64, 64, dtype=torch.uint8)
    kernel = score.score_paged_kernel
    score.check_wgmma(True, True, True, 64, "cuda:0", payload, kernel)  # all met
    with pytest.raises(ValueError, match="word_fed=False, asm=True"):
        score.check_wgmma(False, True, True, 64, "cuda:0", payload, kernel)
    with pytest.raises(ValueError, match="expected 64 heads, got 32"):
        score.check_wgmma(True, True, True, 32, "cuda:0", payload, kernel)
    # The query prologue loads the payload 16 bytes at a time: a row at a 4-byte offset is refused.
    shifted = payload.flatten()[4:].unflatten(0, (1, -1))[:, :64 * 64].view(1, 64, 64)
    with pytest.raises(ValueError, match=r"16-byte aligned, got a storage offset of 4 bytes, a row stride of 4096"):
        score.check_wgmma(True, True, True, 64, "cuda:0", shifted, kernel)
    old = type("OldKernel", (), {"arg_names": [n for n in kernel.arg_names if n != "WGMMA"]})()
    with pytest.raises(ValueError, match="expected a kernel that takes WGMMA"):
        score.check_wgmma(True, True, True, 64, "cuda:0", payload, old)
    monkeypatch.setattr(score, "capability_major", lambda device: 10)
    with pytest.raises(ValueError, match="expected an sm_90 CUDA device"):
        score.check_wgmma(True, True, True, 64, "cuda:0", payload, kernel)


def test_the_wgmma_default(monkeypatch):
    """``wgmma_default``: the wgmma hot pass for a longest request of 2 rows or more where
    ``check_wgmma``'s conditions hold, launched with real tensors or traced (fake tensors; not for
    a kernel copy whose pass runs one warpgroup per program only, which needs its register cap);
    each missing condition keeps the default hot pass (the device checks pass with stand-ins for
    the capability and the HIP version)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    from fp4_inductor.kernels import score

    monkeypatch.setattr(score, "capability_major", lambda device: 9)
    monkeypatch.setattr(score.torch.version, "hip", None)
    payload = torch.zeros(3, 64, 64, dtype=torch.uint8)
    kernel = score.score_paged_kernel
    out = torch.empty(3, 256)  # the device is the launcher's ``gpu`` and ``device``
    met = dict(word_fed=True, gpu=True, asm=True, heads=64, device="cuda:0", q_payload=payload, kernel=kernel,
               max_query_len=4, out=out)

    def default(**change):
        return score.wgmma_default(**{**met, **change})

    assert all(default(max_query_len=rows) is True for rows in (2, 3, 4, 8))
    with FakeTensorMode():
        fake_out = torch.empty(3, 256, device="cuda")
    shifted = payload.flatten()[4:].unflatten(0, (1, -1))[:, :64 * 64].view(1, 64, 64)
    old = type("OldKernel", (), {"arg_names": [n for n in kernel.arg_names if n != "WGMMA"]})()
    for change in (dict(max_query_len=1), dict(max_query_len=0), dict(max_query_len=ShapeEnv().create_unbacked_symint()),
                   dict(heads=32), dict(heads=128), dict(word_fed=False), dict(asm=False), dict(gpu=False),
                   dict(q_payload=shifted), dict(kernel=old)):
        assert default(**change) is False, change
    # Traced (fake tensors): the package's pass (four warpgroups per program need no register cap),
    # not a copy of one warpgroup only (``wgmma_warps`` (4,): from before the pass said its warps).
    assert default(out=fake_out) is True and default(out=fake_out, max_query_len=2) is True
    one_group = type("OneGroup", (), {"arg_names": kernel.arg_names})()
    assert default(kernel=one_group) is True and default(kernel=one_group, out=fake_out) is False
    # At 2-row blocks the default takes four warpgroups: a copy without them keeps the default hot pass.
    assert default(kernel=one_group, max_query_len=2) is False
    assert default(kernel=one_group, max_query_len=3) is True
    monkeypatch.setattr(score, "capability_major", lambda device: 10)
    assert default() is False
    monkeypatch.setattr(score, "capability_major", lambda device: 9)
    monkeypatch.setattr(score.torch.version, "hip", "6.4")
    assert default() is False


@pytest.mark.skipif(not INTERPRETER, reason="needs TRITON_INTERPRET=1 and triton")
def test_the_opaque_scorer_compiles_to_one_extern_call(gen, monkeypatch):
    """``fp4::score_paged_eager_out`` under ``torch.compile(fullgraph=True)``: Inductor's code
    makes one call of it and traces no kernel inside, and it launches as eager does, so the
    compiled logits equal eager's ``fp4.score_paged`` bit for bit (interpreter; keys whose
    group scales do not fold). It checks its arguments (and the backend, as ``score_paged_out``
    with ``backend="triton"``) and writes nothing when they are bad."""
    from torch._inductor.utils import run_and_get_code

    case = scoring_case(gen, "cpu", heads=64, query_lens=[4, 3], seq_lens=[300, 70], key_spread=9)
    query = fp4.quantize_queries(case["q"], backend="triton")
    layout = (case["cache"], case["weights"], case["block_table"], case["query_starts"], case["row_ends"])
    width = case["block_table"].shape[1] * 64

    def scores(payload, scales, cache, weights, block_table, query_starts, row_ends):
        out = torch.full((payload.shape[0], width), float("nan"), device=payload.device)
        torch.ops.fp4.score_paged_eager_out(out, payload, scales, cache, weights, block_table, query_starts,
                                            row_ends, 4)
        return out

    eager = fp4.score_paged(query, *layout, 4, backend="triton")
    torch._dynamo.reset()
    compiled, (code, *_) = run_and_get_code(torch.compile(scores, fullgraph=True), *query, *layout)
    assert code.count("torch.ops.fp4.score_paged_eager_out.default(") == 1 and "score_paged_kernel" not in code
    valid = reference.valid_region(case["query_starts"], case["row_ends"], width)
    assert torch.equal(compiled[valid], eager[valid]) and compiled[~valid].isnan().all()
    # Its schema (the mutation of ``out``), fake kernel and autograd/functionalization registrations.
    torch.library.opcheck(torch.ops.fp4.score_paged_eager_out.default,
                          (torch.full_like(compiled, float("nan")), *query, *layout, 4))
    out = torch.full((query[0].shape[0], width - 64), float("nan"))
    with pytest.raises(ValueError, match=re.escape("out: expected float32 [9, 384], got float32 [9, 320]")):
        torch.ops.fp4.score_paged_eager_out(out, *query, *layout, 4)
    right = torch.full((query[0].shape[0], width), float("nan"))
    with pytest.raises(ValueError, match="max_query_len"):
        torch.ops.fp4.score_paged_eager_out(right, *query, *layout, 0)
    assert out.isnan().all() and right.isnan().all()
    monkeypatch.setenv("TRITON_INTERPRET", "0")  # as score_paged_out(backend="triton"): no CPU launch without it
    with pytest.raises(RuntimeError, match="backend='triton' on CPU tensors runs the Triton interpreter"):
        torch.ops.fp4.score_paged_eager_out(right, *query, *layout, 4)
    assert right.isnan().all()


def test_the_launcher_takes_the_wgmma_default(gen, monkeypatch):
    """The launcher asks ``wgmma_default`` when the launch names neither ``wgmma`` nor a tuning
    that shapes the hot pass, and then launches the wgmma plan: at 4-row blocks a page per tile on
    one warpgroup (4 warps), the register cap on the hot pass only, the exact pass on 2-row blocks;
    at 2-row blocks on four warpgroups (16 warps, one program per SM, no cap), the exact pass on
    four times the programs; ``wgmma=0`` or a hot-pass tuning keeps the default hot pass without
    asking. Launches recorded, not run (the CPU has no wgmma)."""
    from fp4_inductor.kernels import score

    args = launch_args(gen, [4, 3])
    out = args[0]
    asked = []

    def answer(*given):
        asked.append(given)
        return True

    monkeypatch.setattr(score, "wgmma_default", answer)
    with recorded_scorer_launches() as launches:
        score.launch_score_paged(*args, asm=True)
        assert len(asked) == 1
        word_fed, gpu, asm, heads, device, q_payload, kernel, max_query_len, given_out = asked[0]
        assert (word_fed, gpu, asm, heads, device, kernel, max_query_len) == (
            True, False, True, 64, args[3].device, score.score_paged_kernel, 4)
        assert q_payload.data_ptr() == args[1].data_ptr() and given_out is out
        (hot_grid, hot_args, hot), (exact_grid, exact_args, exact) = launches
        # One warpgroup at 4 rows (4 "SMs" on the CPU): under its cap, three programs per SM.
        hot_programs, split = 65536 // (128 * 168) * 4, 1
        assert (hot["WGMMA"], hot["ROWS"], hot["TILE_PAGES"], hot["WARPS"], hot.get("maxnreg")) == (1, 4, 1, 4, 168)
        # The exact pass on 2-row blocks (each hot block cut in two), twice the programs along axis 1.
        assert (exact["MODE"], exact["WGMMA"], exact["ROWS"], exact["ROW_SPLIT"], exact["SPLIT"]) == (2, 0, 2, 2, split)
        assert "maxnreg" not in exact and hot["ROW_SPLIT"] == 1
        assert hot_grid == (hot_programs, 1) and exact_grid == (hot_programs * split, 2)
        # One flag byte per hot program, shared by both launches: exact program (i, j) reads flag
        # (i // SPLIT) * (grid1 // ROW_SPLIT) + j // ROW_SPLIT, inside it.
        flags = hot_args[17]
        assert exact_args[17] is flags and flags.numel() == hot_grid[0] * hot_grid[1]
        assert (exact_grid[0] // exact["SPLIT"]) * (exact_grid[1] // exact["ROW_SPLIT"]) == flags.numel()
        for exact_rows, split in ((4, 1), (2, 2), (1, 4)):  # the tuning sets it
            launches.clear()
            score.launch_score_paged(*args, asm=True, exact_rows=exact_rows)
            (hot_grid, _, hot), (exact_grid, _, exact) = launches
            assert (hot["ROWS"], hot["ROW_SPLIT"], exact["ROWS"], exact["ROW_SPLIT"]) == (4, 1, exact_rows, split)
            assert exact_grid == (hot_grid[0] * exact["SPLIT"], split * hot_grid[1])
        # 2-row blocks: four warpgroups, one program per SM with no cap, the exact pass on four
        # times the programs and the hot pass's rows.
        two = launch_args(gen, [2, 1, 2])
        launches.clear()
        score.launch_score_paged(*two, asm=True)
        (hot_grid, _, hot), (exact_grid, _, exact) = launches
        assert (hot["WGMMA"], hot["ROWS"], hot["TILE_PAGES"], hot["WARPS"], hot["num_warps"]) == (1, 2, 1, 16, 16)
        assert "maxnreg" not in hot and (hot["SETUP_UNITS"], hot["CHUNK"]) == (6, 32)
        assert (exact["MODE"], exact["WGMMA"], exact["ROWS"], exact["ROW_SPLIT"], exact["SPLIT"]) == (2, 0, 2, 1, 4)
        assert hot_grid == (4, 1) and exact_grid == (16, 1)
        assert asked[-1][7] == 2 and two[0].isnan().all()
        old = type("OldKernel", (), {"arg_names": [n for n in score.score_paged_kernel.arg_names if n != "ROW_SPLIT"]})()
        launches.clear()
        with pytest.raises(ValueError, match="exact_rows: expected a kernel that takes ROW_SPLIT, got .*OldKernel"):
            score.launch_score_paged(*args, asm=True, exact_rows=2, kernel=old)
        # Without the tuning a kernel copy without ROW_SPLIT launches, its exact pass on the hot pass's 4 rows
        # (a copy from before the pass said its warps: one warpgroup, three programs per SM).
        score.launch_score_paged(*args, asm=True, kernel=old)
        assert [(grid, named["ROWS"]) for grid, _, named in launches] == [((12, 1), 4), ((12, 1), 4)]
        assert all("ROW_SPLIT" not in named for _, _, named in launches)
        for tuning in (dict(wgmma=0), dict(tile_pages=2), dict(num_warps=8), dict(max_columns=128), dict(pairs=False),
                       dict(programs_per_sm=1), dict(maxnreg=255), dict(num_stages=2)):
            asked.clear(), launches.clear()
            score.launch_score_paged(*args, asm=True, **tuning)
            assert asked == [] and {named["WGMMA"] for _, _, named in launches} == {0}, tuning
            assert launches[0][2]["ROWS"] == 2 and launches[0][0][1] == 2, tuning
    assert out.isnan().all()  # recorded, not run


def test_the_launcher_plans_the_pass_warpgroups_by_rows(gen, monkeypatch):
    """The package's pass takes 4 or 16 warps (``wgmma_warps``: one warpgroup per program or four;
    a kernel copy that did not say takes 4, one that said its one ``WARPS`` that). By default
    (``wgmma_pass_warps``) an eager launch takes four warpgroups at 2 rows and one at 4
    (``WGMMA_GROUPS``), a traced one four at both (also through the launcher with fake tensors, as
    Inductor traces it: 16 warps, no ``maxnreg``, the exact pass on four times the programs), a
    copy what it has. The ``num_warps`` tuning
    picks either with ``wgmma=1``: 16 warps at 4 rows launch one program per SM of 16 warps with
    no ``maxnreg``, the one-warpgroup pass's setup units and schedule step, then the exact pass on
    four times its programs (2-row blocks); 4 warps at 2 rows their cap, four programs per SM. A
    tuning of warps the kernel's pass does not take, or of more than a page per tile, is refused
    before anything launches. Launches recorded, not run (the CPU has no wgmma; the device checks
    pass with stand-ins)."""
    from types import SimpleNamespace

    import triton.language as tl
    from torch._subclasses.fake_tensor import FakeTensorMode

    from fp4_inductor.kernels import score

    kernel = score.score_paged_kernel
    assert score.wgmma_warps(kernel) == (4, 16)
    old = type("OldKernel", (), {"arg_names": kernel.arg_names})()
    assert score.wgmma_warps(old) == (4,)  # a copy from before the pass said its warps
    four_only = type("FourGroups", (), {"arg_names": kernel.arg_names,
                                        "fn": SimpleNamespace(__globals__={"WGMMA_WARPS": tl.constexpr(16)})})()
    assert score.wgmma_warps(four_only) == (16,)
    pick = score.wgmma_pass_warps
    assert [pick(rows, traced, (4, 16)) for rows in (2, 4) for traced in (False, True)] == [16, 16, 4, 16]
    assert [pick(rows, traced, offered) for rows, traced, offered in ((2, False, (4,)), (4, True, (4,)),
                                                                     (4, False, (16,)))] == [4, 4, 16]
    args, two = launch_args(gen, [4, 3]), launch_args(gen, [2, 1])
    monkeypatch.setattr(score, "check_wgmma", lambda *given: None)  # the device's conditions, met
    with recorded_scorer_launches() as launches:
        score.launch_score_paged(*args, asm=True, wgmma=1, num_warps=16)
        (hot_grid, _, hot), (exact_grid, _, exact) = launches
        assert (hot["WGMMA"], hot["ROWS"], hot["TILE_PAGES"], hot["WARPS"], hot["num_warps"]) == (1, 4, 1, 16, 16)
        assert (hot["SETUP_UNITS"], hot["CHUNK"]) == (6, 32) and "maxnreg" not in hot
        assert (exact["MODE"], exact["WGMMA"], exact["ROWS"], exact["ROW_SPLIT"], exact["SPLIT"]) == (2, 0, 2, 2, 4)
        assert hot_grid == (4, 1) and exact_grid == (16, 2)  # one program per SM (4 "SMs" on the CPU)
        launches.clear()
        score.launch_score_paged(*args, asm=True, wgmma=1, kernel=four_only)  # the copy's only warps
        assert (launches[0][2]["WARPS"], launches[0][0]) == (16, (4, 1)) and "maxnreg" not in launches[0][2]
        launches.clear()
        score.launch_score_paged(*two, asm=True, wgmma=1, num_warps=4)  # 2-row blocks on one warpgroup
        (hot_grid, _, hot), (exact_grid, _, exact) = launches
        assert (hot["ROWS"], hot["WARPS"], hot["maxnreg"], hot_grid, exact["SPLIT"], exact_grid) == (
            2, 4, 128, (16, 1), 1, (16, 1))
        launches.clear()
        refused = ((kernel, "4 or 16", dict(num_warps=8)), (kernel, "4 or 16", dict(tile_pages=2)),
                   (old, "4", dict(num_warps=16)), (four_only, "16", dict(num_warps=4)))
        for kernel_, offered, tuning in refused:
            got = (tuning.get("tile_pages", 1), tuning.get("num_warps", 4))
            with pytest.raises(ValueError, match=re.escape(f"wgmma: the kernel's pass runs one page per tile on "
                                                           f"{offered} warps, got tile_pages={got[0]}, "
                                                           f"num_warps={got[1]}")):
                score.launch_score_paged(*args, asm=True, kernel=kernel_, wgmma=1, **tuning)
        assert launches == []
        for given, rows in ((args, 4), (two, 2)):  # traced: fake tensors, the launch's default
            mode = FakeTensorMode()
            fake = [mode.from_tensor(t) if isinstance(t, torch.Tensor) else t for t in given]
            launches.clear()
            with mode:
                score.launch_score_paged(*fake, asm=True)
            (hot_grid, _, hot), (exact_grid, _, exact) = launches
            assert (hot["WGMMA"], hot["ROWS"], hot["WARPS"], hot["num_warps"], hot_grid) == (1, rows, 16, 16, (4, 1))
            assert "maxnreg" not in hot and (exact["SPLIT"], exact_grid) == (4, (16, rows // 2))
    assert args[0].isnan().all() and two[0].isnan().all()  # recorded, not run


@pytest.mark.skipif(not INTERPRETER, reason="needs TRITON_INTERPRET=1 and triton")
@pytest.mark.parametrize("query_lens, exact_rows, programs", [([4, 3], None, None), ([4, 3], 2, None),
                                                               ([4, 3], 1, None), ([8, 3], 2, None), ([8, 3], 2, 4)])
def test_the_exact_pass_after_four_row_blocks(gen, query_lens, exact_rows, programs):
    """After 4-row blocks (the wgmma plan, by default from next_n=3 on sm_90) the exact pass runs
    on the hot pass's 4 rows (256 columns; ``exact_rows=4``, or a launch without the wgmma pass
    as here) or at 2 (the default after the wgmma pass) or 1 rows per block, each
    hot block cut in parts that find its flag: on the interpreter, the plan's launch shape (a page
    per tile, 4 warps, the exact pass on the hot pass's programs) with keys and a query head that
    do not fold, against float64; 8 rows: two row blocks of 4 in the hot pass, four of 2 in the
    exact pass; on 4 programs per row block with only row 5's query head not folding, so that
    one hot program marks its second row block and not its first. (The interpreter runs the
    default hot pass at 4-row blocks here: the wgmma pass after which the launcher plans them is
    in the GPU test below.)"""
    from fp4_inductor.kernels.score import launch_score_paged

    case = scoring_case(gen, "cpu", heads=64, query_lens=query_lens, seq_lens=[400, 150])
    q = case["q"].clone()
    if programs is None:
        pages = case["block_table"][:, [1, 3]].flatten().long()
        slots = (pages[:, None] * 64 + torch.arange(0, 64, 9)).flatten()
        fp4.store_keys(random_keys(slots.shape[0], gen, group_spread=9), case["cache"], slots)
        q[query_lens[0], 7, 32:64] *= 2.0**10  # a head of the second request's first row that does not fold
    q[5, 3, :32] *= 2.0**10  # one of row 5 (the second request's, or the first's second block of 4)
    query = fp4.quantize_queries(q)
    width = case["block_table"].shape[1] * 64
    out = torch.full((q.shape[0], width), float("nan"))
    launch_score_paged(out, *query, case["cache"], case["weights"], case["block_table"], case["query_starts"],
                       case["row_ends"], case["max_query_len"], max_columns=256, tile_pages=1, num_warps=4,
                       exact_split=1, setup_units=6, **({} if exact_rows is None else {"exact_rows": exact_rows}),
                       **({} if programs is None else {"programs": programs}))
    assert_matches_float64(out, query, case)


def unfolding_case(gen, query_lens, seq_lens):
    """A GPU scoring case (64 heads, permuted merged pages) whose keys in every fifth slot of each
    request's pages 1 and 3 have group scales that do not fold (the exact pass rewrites them), and
    its queries with one head of the first row that does not fold: (case, queries)."""
    case = scoring_case(gen, "cuda", heads=64, query_lens=query_lens, seq_lens=seq_lens)
    pages = case["block_table"].cpu()[:, [1, 3]].flatten().long()
    slots = (pages[:, None] * 64 + torch.arange(0, 64, 5)).flatten()
    fp4.store_keys(random_keys(slots.shape[0], gen, group_spread=9).cuda(), case["cache"], slots.cuda())
    q = case["q"].clone()
    q[0, 5, :32] *= 2.0**10
    return case, q


def passes(launches) -> list:
    """The (MODE, WGMMA, ROWS, ROW_SPLIT) of each of ``recorded_scorer_launches``' launches."""
    return [(named["MODE"], named["WGMMA"], named["ROWS"], named["ROW_SPLIT"]) for _, _, named in launches]


def assert_matches_float64(out, query, case):
    """Every logit of the valid region within 1e-5 of float64, relative to its own sum of
    |w_h| relu(s_h) (signed weights may cancel), and nothing written outside it."""
    args = (query, case["cache"], case["weights"], case["block_table"], case["query_starts"], case["row_ends"])
    want = float64_scores(*args)
    scale = float64_scores(*args, magnitude=True)
    valid = reference.valid_region(case["query_starts"].cpu(), case["row_ends"].cpu(), want.shape[1])
    got = out.cpu().double()
    assert got[~valid].isnan().all()
    worst = ((got - want).abs() / scale.clamp_min(1e-30))[valid].max()
    assert worst < 1e-5, f"elementwise relative error {worst:.2e}"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available() or torch.version.hip is not None
                    or torch.cuda.get_device_capability()[0] != 9, reason="needs an sm_90 NVIDIA GPU")
@pytest.mark.parametrize("query_lens, seq_lens", [([2, 2, 1, 2], [4096, 333, 1500, 64]),
                                                  ([4, 3, 1], [2100, 4096, 700]),
                                                  ([8, 5, 1], [1200, 4096, 90])])
@pytest.mark.parametrize("programs", [None, 1, 3, 7])
def test_logits_match_float64_on_the_gpu(gen, query_lens, seq_lens, programs):
    """Ragged verify rows (blocks of 2 or 4 rows, some short; 8 rows in two blocks), permuted
    merged pages, keys whose group scales do not fold in a few pages (the exact pass rewrites
    them) and a query head that does not fold in the first request; on the launcher's programs
    (one tile or none each, here) and on 1, 3 and 7 (many tiles and requests per program, each
    request's arrays written again): every logit of the valid region within 1e-5 of float64, as
    the default hot pass's, and nothing written outside it. The pass at four warpgroups per
    program (shares that start and end at every page offset of the warpgroups' turn) does each
    key's arithmetic as at one: their logits (``num_warps`` 16 and 4) equal bit for bit, and the
    default's (one of them)."""
    from fp4_inductor.kernels.score import launch_score_paged

    case, q = unfolding_case(gen, query_lens, seq_lens)
    query = fp4.quantize_queries(q)
    width = case["block_table"].shape[1] * 64
    args = (*query, case["cache"], case["weights"], case["block_table"], case["query_starts"], case["row_ends"],
            case["max_query_len"])
    extra = {} if programs is None else {"programs": programs}
    # wgmma=1 runs the exact pass on 2-row blocks after 4-row hot blocks; exact_rows 1 and 4 the other forms.
    other_rows = [{"wgmma": 1, "exact_rows": 1, **extra}] + ([{"wgmma": 1, "exact_rows": 4, **extra}]
                                                             if max(query_lens) > 2 else [])
    outs = []
    groups = [{"wgmma": 1, "num_warps": warps, **extra} for warps in (4, 16)]
    for tuning in ({"wgmma": 1, **extra}, *other_rows, {"wgmma": 0, **extra}, *groups):
        out = torch.full((q.shape[0], width), float("nan"), device="cuda")
        launch_score_paged(out, *args, **tuning)
        assert_matches_float64(out, query, case)
        outs.append(out)
    for other in outs[-2:]:
        assert torch.equal(other.isnan(), outs[0].isnan()) and torch.equal(other.nan_to_num(), outs[0].nan_to_num())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available() or torch.version.hip is not None
                    or torch.cuda.get_device_capability()[0] != 9, reason="needs an sm_90 NVIDIA GPU")
@pytest.mark.parametrize("query_lens, rows, warps", [([1, 1], 1, 0), ([2, 1], 2, 16), ([1, 2, 2], 2, 16),
                                                     ([3, 1, 2], 4, 4), ([4, 4], 4, 4), ([8, 2], 4, 4)])
def test_the_public_op_takes_the_wgmma_pass_by_default(gen, query_lens, rows, warps):
    """``fp4.score_paged`` on an sm_90 GPU (eager, quantized queries from ``quantize_queries``):
    the hot pass on wgmmas where the longest request has 2 rows or more: 2-row blocks on four
    warpgroups (16 warps), the exact pass on the same blocks; from 3 rows 4-row blocks on one
    (4 warps), then the exact pass on 2-row blocks; the default hot pass at one row; logits
    within 1e-5 of float64 either way."""
    case = scoring_case(gen, "cuda", heads=64, query_lens=query_lens, seq_lens=[1500, 700, 90][:len(query_lens)])
    query = fp4.quantize_queries(case["q"])
    with recorded_scorer_launches(run=True) as launches:
        out = fp4.score_paged(query, case["cache"], case["weights"], case["block_table"], case["query_starts"],
                              case["row_ends"], case["max_query_len"])
    wgmma = int(warps > 0)
    # The exact pass on 2-row blocks after the wgmma pass (4-row hot blocks each cut in two).
    assert passes(launches) == [(1, wgmma, rows, 1), (2, 0, min(2, rows), rows // 2 or 1)]
    if wgmma:
        assert launches[0][2]["num_warps"] == warps
    out[~reference.valid_region(case["query_starts"], case["row_ends"], out.shape[1])] = float("nan")
    assert_matches_float64(out, query, case)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available() or torch.version.hip is not None
                    or torch.cuda.get_device_capability()[0] != 9, reason="needs an sm_90 NVIDIA GPU")
@pytest.mark.parametrize("mode", [None, "reduce-overhead"])
def test_the_opaque_scorer_takes_the_wgmma_pass_compiled(gen, mode):
    """``torch.compile(fullgraph=True)`` of a step that scores through
    ``fp4::score_paged_eager_out`` at 64 heads with 4-row requests: Inductor's code calls it once
    and emits no scorer; its first call launches eager's plan (the wgmma hot pass on 4-row
    blocks, the exact pass on 2-row blocks) and its logits equal eager's ``fp4.score_paged``
    bit for bit (keys and a query head that do not fold, so the exact pass works); then new
    queries and weights are copied into the same tensors three times and each call (with
    ``mode="reduce-overhead"`` a replay of the captured CUDA graph, none skipped) equals eager
    on them."""
    from torch._dynamo.utils import counters
    from torch._inductor.utils import run_and_get_code

    case, q = unfolding_case(gen, [4, 3, 1], [2100, 4096, 700])
    payload, scales = fp4.quantize_queries(q)
    weights = case["weights"].clone()
    layout = (case["cache"], weights, case["block_table"], case["query_starts"], case["row_ends"])
    width = case["block_table"].shape[1] * 64
    valid = reference.valid_region(case["query_starts"], case["row_ends"], width)

    def scores(payload, scales, cache, weights, block_table, query_starts, row_ends):
        out = torch.empty((payload.shape[0], width), device=payload.device)
        torch.ops.fp4.score_paged_eager_out(out, payload, scales, cache, weights, block_table, query_starts,
                                            row_ends, 4)
        return out

    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(scores, fullgraph=True, mode=mode)
    with recorded_scorer_launches(run=True) as launches:
        got, (code, *_) = run_and_get_code(compiled, payload, scales, *layout)
    assert passes(launches)[:2] == [(1, 1, 4, 1), (2, 0, 2, 2)], passes(launches)
    assert code.count("torch.ops.fp4.score_paged_eager_out.default(") == 1 and "score_paged_kernel" not in code
    assert torch.equal(got[valid], fp4.score_paged((payload, scales), *layout, 4)[valid])
    for _ in range(3):
        new_payload, new_scales = fp4.quantize_queries(torch.randn(q.shape, generator=gen).cuda() * q.abs())
        payload.copy_(new_payload), scales.copy_(new_scales), weights.copy_(torch.randn(weights.shape, generator=gen))
        got = compiled(payload, scales, *layout)
        assert torch.equal(got[valid], fp4.score_paged((payload, scales), *layout, 4)[valid])
    if mode == "reduce-overhead":
        assert counters["inductor"]["cudagraph_skips"] == 0, dict(counters["inductor"])


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available() or torch.version.hip is not None
                    or torch.cuda.get_device_capability()[0] != 9, reason="needs an sm_90 NVIDIA GPU")
@pytest.mark.parametrize("mode", [None, "reduce-overhead"])
@pytest.mark.parametrize("query_lens", [[4, 3, 1], [2, 1, 2]])
def test_four_warpgroups_per_program_compile_to_eager_bits(gen, query_lens, mode):
    """``torch.compile(fullgraph=True)`` of ``fp4.score_paged`` at 64 heads with 4-row and with
    2-row requests: the traced launches take the wgmma pass at four warpgroups per program (16
    warps, no ``maxnreg``, which Inductor's launches would drop), on eager's blocks (4 rows, then
    the exact pass on 2-row blocks; or 2 rows both), Inductor's code launches the scorer itself
    (no extern call), and its logits equal eager's bit for bit (eager at 4 rows runs one
    warpgroup per program; keys and a query head that do not fold), also with new queries and
    weights copied into the same tensors, and with ``mode="reduce-overhead"`` as replays of a
    captured CUDA graph, none skipped. Inductor's and AOTAutograd's caches are off: a cached graph
    would skip the tracing that this test records."""
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config
    from torch._dynamo.utils import counters
    from torch._inductor.utils import run_and_get_code

    case, q = unfolding_case(gen, query_lens, [2100, 4096, 700])
    rows = 4 if max(query_lens) > 2 else 2
    payload, scales = fp4.quantize_queries(q)
    weights = case["weights"].clone()
    layout = (case["cache"], weights, case["block_table"], case["query_starts"], case["row_ends"])
    valid = reference.valid_region(case["query_starts"], case["row_ends"], case["block_table"].shape[1] * 64)

    def scores(payload, scales, cache, weights, block_table, query_starts, row_ends):
        return fp4.score_paged((payload, scales), cache, weights, block_table, query_starts, row_ends,
                               max(query_lens))

    torch._dynamo.reset()
    counters.clear()
    with inductor_config.patch(fx_graph_cache=False), functorch_config.patch(enable_autograd_cache=False):
        compiled = torch.compile(scores, fullgraph=True, mode=mode)
        with recorded_scorer_launches(run=True) as launches:
            got, (code, *_) = run_and_get_code(compiled, payload, scales, *layout)
    assert passes(launches)[:2] == [(1, 1, rows, 1), (2, 0, 2, rows // 2)], passes(launches)
    hot = launches[0][2]
    assert hot["num_warps"] == 16 and "maxnreg" not in hot
    assert "score_paged_kernel" in code and "score_paged_eager_out" not in code
    assert torch.equal(got[valid], scores(payload, scales, *layout)[valid])
    for _ in range(3):
        new_payload, new_scales = fp4.quantize_queries(torch.randn(q.shape, generator=gen).cuda() * q.abs())
        payload.copy_(new_payload), scales.copy_(new_scales), weights.copy_(torch.randn(weights.shape, generator=gen))
        got = compiled(payload, scales, *layout)
        assert torch.equal(got[valid], scores(payload, scales, *layout)[valid])
    if mode == "reduce-overhead":
        assert counters["inductor"]["cudagraph_skips"] == 0, dict(counters["inductor"])


def _emulated_case(gen, rows):
    """A CPU case for ``wgmma_emulator``: requests of ``rows`` and fewer rows over permuted merged
    pages, keys and queries that fold; with the float64 logits and their magnitudes."""
    case = scoring_case(gen, "cpu", heads=64, query_lens=[rows, rows - 1 or 1, 1], seq_lens=[700, 1000, 90])
    query = fp4.quantize_queries(case["q"])
    args = (query, case["cache"], case["weights"], case["block_table"], case["query_starts"], case["row_ends"])
    return case, query, float64_scores(*args).numpy(), float64_scores(*args, magnitude=True).numpy()


@pytest.mark.parametrize("rows", [2, 4])
def test_the_pass_run_on_numpy_matches_float64(gen, rows):
    """The written-out pass (``wgmma_rows{rows}``) run on numpy (``wgmma_emulator``: its Triton
    lines on arrays, its asm by stand-ins that follow the PTX, wgmma by its fragment layouts), at
    one warpgroup per program and at four (``wgmma_rows{rows}_g1``, ``_g4``), on a request's first
    row block over shares of its pages that start at every offset of the warpgroups' turn (one
    page, a few, all of them): every logit of the share's valid region within 1e-5 of float64,
    nothing written outside it, the fold returned; and the two forms' logits equal bit for bit."""
    from wgmma_emulator import run_pass

    case, query, want, scale = _emulated_case(gen, rows)
    starts, ends = case["query_starts"].tolist(), case["row_ends"].tolist()
    width = case["block_table"].shape[1] * 64
    for request, page_begin, page_end in ((0, 0, 11), (1, 1, 15), (1, 3, 16), (1, 5, 6), (1, 2, 9), (2, 0, 2)):
        got = [run_pass(case, query, rows, groups, request, page_begin, page_end) for groups in (1, 4)]
        for out, fold in got:
            assert fold >= 0  # every key and query folds here
            written = np.zeros(out.shape, dtype=bool)
            for row in range(starts[request], min(starts[request + 1], starts[request] + rows)):
                written[row, page_begin * 64: min(ends[row], page_end * 64, width)] = True
            assert written.sum() > 0 and np.isnan(out[~written]).all() and not np.isnan(out[written]).any()
            assert (np.abs(out[written] - want[written]) / scale[written]).max() < 1e-5
        assert np.array_equal(got[0][0], got[1][0], equal_nan=True), (request, page_begin, page_end)


@pytest.mark.parametrize("groups", [1, 4])
def test_the_pass_run_on_numpy_marks_what_does_not_fold(gen, groups):
    """On numpy as above: a share holding a key whose group scales do not fold, or a block whose
    query does not, returns a fold below 0 (the launch's flag, for the exact pass); a share
    without either returns 0 or more."""
    from wgmma_emulator import run_pass

    case, query, _, _ = _emulated_case(gen, 4)
    page = int(case["block_table"][1, 6])
    fp4.store_keys(random_keys(1, gen, group_spread=9), case["cache"], torch.tensor([page * 64 + 17]))
    assert run_pass(case, query, 4, groups, 1, 5, 8)[1] < 0 and run_pass(case, query, 4, groups, 1, 0, 6)[1] >= 0
    q = case["q"].clone()
    q[4, 9, :32] *= 2.0**10  # the second request's first row, one head
    assert run_pass(case, fp4.quantize_queries(q), 4, groups, 1, 0, 6)[1] < 0


def test_the_pass_run_on_numpy_can_fail(gen):
    """The check is not blind: with the query operand's second K half written 64 bytes off (the
    prologue's layout broken), the logits run on numpy no longer match float64."""
    from wgmma_emulator import run_pass

    case, query, want, scale = _emulated_case(gen, 4)
    source = wgmma_source.module_source()
    broken = source.replace("[q_at + 128, p1]", "[q_at + 64, p1]")
    assert broken != source
    out, _ = run_pass(case, query, 4, 4, 1, 0, 16, source=broken)
    written = ~np.isnan(out)
    assert written.any() and (np.abs(out[written] - want[written]) / scale[written]).max() > 1e-2


class _Lanes(np.ndarray):
    """A tensor of the written-out kernels (thread i holds element i), for ``_run_prologue``."""

    def to(self, dtype, bitcast=False):
        kind = {"int32": np.int32, "int64": np.int64, "float32": np.float32}[dtype]
        return (self.view(kind) if bitcast else self.astype(kind)).view(_Lanes)


def _lanes(x):
    return np.asarray(x).view(_Lanes)


class _Pointer:
    """A pointer into ``memory`` (a flat numpy array) plus lane offsets, in that array's elements."""

    def __init__(self, memory, offset=0):
        self.memory, self.offset = memory, offset

    def __add__(self, offset):
        return _Pointer(self.memory, self.offset + offset)

    def to(self, dtype, bitcast=False):
        return self


def _tables(shift):
    """The stand-in for the code tables of a fold (any function of it)."""
    return shift * 7919 + 13, shift * 104729 - 5


def _prmt(word, lo, hi):
    """The stand-in for the operand builder: any function of its inputs that keeps a zero word
    zero, as the builder does."""
    word, lo, hi = (np.asarray(a).astype(np.int64) for a in (word, lo, hi))
    return np.where(word != 0, (word * 31 + lo) & 0xFFFFFFFF, 0), np.where(word != 0, (word * 17 ^ hi) & 0xFFFFFFFF, 0)


def _expected_prologue(n, payload, scales, weights, first_row, rows_here):
    """What the query prologue must write, column by column: column c is head c % 64 of row
    first_row + c // 64; its group t's word s (payload word 4t + s of the head), through the
    operand builder at the group's fold (3 - (the column's largest scale - the group's)), goes to
    plane s (n * 32 bytes each), offset 4t of the column's 16 bytes at c // 8 * 256 + c % 8 * 16,
    the builder's second word 128 bytes further; the head weight times 2**(largest scale - 127) /
    16 goes to 4c. Columns past the block's rows: zero words and weight 0. Returns (shared words,
    weights' words, the smallest fold)."""
    shared, weight_words, fold = {}, {}, 3
    scales = scales.reshape(-1, 4, 16, 4)  # the queries' scale layout [rows, 1, 4, 16, 4], flattened
    for c in range(n):
        row, head, valid = first_row + c // 64, c % 64, c // 64 < rows_here
        exps = [int(scales[row, t, head % 16, head // 16]) if valid else 127 for t in range(4)]
        for t in range(4):
            shift = 3 - (max(exps) - exps[t])
            fold = min(fold, shift)
            for s in range(4):
                word = int(payload[(row * 64 + head) * 16 + 4 * t + s]) if valid else 0
                at = s * n * 32 + c // 8 * 256 + c % 8 * 16 + t * 4
                shared[at], shared[at + 128] = (int(x) for x in _prmt(word, *_tables(shift)))
        folded = np.float32(weights[row * 64 + head]) * np.float32(2.0 ** (max(exps) - 127) * 0.0625) if valid else 0
        weight_words[4 * c] = int(np.float32(folded).view(np.int32))
    return shared, weight_words, fold


def _run_prologue(n, payload, scales, weights, first_row, rows_here, groups=1):
    """A request's query prologue (``wgmma_source.query_prologue``) by ``groups`` warpgroups
    (128 * groups lanes) run on numpy: loads and asm
    replaced by stand-ins (a load or a 16-byte load must be in bounds where it is not masked
    off; a shared address is written once; the tables and the operand builder are ``_tables`` and
    ``_prmt``, as in ``_expected_prologue``). Returns (shared words, folded weights' words, the
    request's fold)."""
    from types import SimpleNamespace

    from fp4_inductor.kernels import wgmma_source

    lanes = 128 * groups
    thread = _lanes(np.arange(lanes))
    shared, weights_at_shared = {}, {}

    def load(pointer, mask=True, other=0):
        offset = np.broadcast_to(np.asarray(pointer.offset), (lanes,)).astype(np.int64)
        mask = np.broadcast_to(np.asarray(mask), (lanes,))
        assert ((0 <= offset[mask]) & (offset[mask] < pointer.memory.size)).all(), "a load out of bounds"
        return _lanes(np.where(mask, pointer.memory[np.clip(offset, 0, pointer.memory.size - 1)], other))

    def shuffled(x, lanes):
        x = np.asarray(x)
        out = x.copy()
        for k in lanes:
            out = np.maximum(out, out[(thread & ~31) | ((thread & 31) ^ k)])
        return _lanes(out)

    def store(table, address, value, where=True):
        for a, v, w in zip(np.asarray(address).tolist(), np.asarray(value).tolist(), np.broadcast_to(where, (lanes,))):
            if w:
                assert a not in table, f"shared address {a} written twice"
                table[a] = v
        return _lanes(np.zeros(lanes, np.int32))

    def asm(code, constraints, args, dtype, is_pure, pack):
        if code == "LOAD4":
            pointer = args[0]
            assert (np.asarray(pointer.offset) % 4 == 0).all(), "a 16-byte load not 16-byte aligned"
            return tuple(load(pointer + i) for i in range(4))
        if code == "QMAX":
            return shuffled(args[0], (1, 2))
        if code == "TABLES":
            return tuple(map(_lanes, _tables(np.asarray(args[0]))))
        if code == "PRMT":
            return tuple(map(_lanes, _prmt(*args)))
        if code == "STORE":
            return store(shared, args[0], args[1])
        if code == "STORE_IF":
            return store(weights_at_shared, args[0], args[1], np.asarray(args[2]) != 0)
        raise AssertionError(code)

    def static_range(count):
        return range(count)

    tl = SimpleNamespace(load=load, where=lambda c, a, b: _lanes(np.where(c, a, b)), minimum=np.minimum,
                         inline_asm_elementwise=asm, static_range=static_range, int32="int32", int64="int64",
                         float32="float32")
    names = dict(tl=tl, thread=thread, t=thread % 4, zero=_lanes(np.zeros(lanes, np.int32)),
                 query_fold=_lanes(np.full(lanes, 3)), stored=_lanes(np.zeros(lanes, np.int32)),
                 queries=0, weights_at=0, words=_Pointer(payload), q_scales_ptr=_Pointer(scales),
                 weights_ptr=_Pointer(weights), weights_stride=64, weights_head_stride=1, first_row=first_row,
                 rows_here=rows_here, power_of_two=lambda e, c: _lanes(np.exp2(np.asarray(e) - 127.0) * c)
                 .astype(np.float32))
    names |= {k: k for k in ("LOAD4", "LOAD4_C", "QMAX", "TABLES", "PRMT", "STORE", "STORE_IF")}
    exec("\n".join(wgmma_source.query_prologue(n, groups)), names)
    return shared, weights_at_shared, int(np.min(names["query_fold"]))


@pytest.mark.parametrize("rows, rows_here", [(2, 1), (2, 2), (4, 1), (4, 2), (4, 3), (4, 4)])
@pytest.mark.parametrize("folds", [True, False])
@pytest.mark.parametrize("groups", [1, 4])
def test_the_query_prologue_writes_the_operand(rows, rows_here, folds, groups):
    """The query prologue (16-byte loads, a group of a column per thread) by one warpgroup and by
    four, run on numpy stand-ins for its loads and asm, writes
    every operand word and folded weight where ``_expected_prologue`` puts them and nothing else,
    each address once, and finds the smallest fold, for a block's rows placed last in the payload
    (a column past them must read in bounds and take zeros)."""
    gen = np.random.default_rng(rows * 10 + rows_here)
    total_rows = 5
    payload = gen.integers(-2**31, 2**31, size=total_rows * 64 * 16, dtype=np.int64).astype(np.int32)
    scales = gen.integers(123, 127, size=total_rows * 256).astype(np.uint8)  # groups within 2**3: all fold
    if not folds:
        # Head 5 of the last row: groups 0 and 2 lie 2**8 apart ([r, 0, g, h % 16, h // 16]).
        grouped = scales.reshape(total_rows, 4, 16, 4)
        grouped[-1, 2, 5, 0], grouped[-1, 0, 5, 0] = 126, 118
    weights = gen.standard_normal(total_rows * 64).astype(np.float32)
    first_row = total_rows - rows_here
    n = 64 * rows
    got = _run_prologue(n, payload, scales, weights, first_row, rows_here, groups)
    want = _expected_prologue(n, payload, scales, weights, first_row, rows_here)
    assert len(want[0]) == n * 32 and len(want[1]) == n
    assert got[0] == want[0]
    assert got[1] == want[1]
    assert got[2] == want[2] and (got[2] >= 0) == folds
    # The stand-in takes QMAX's shuffles as the quad's (lanes ^1, then ^2): so must the asm.
    assert re.findall(r"shfl\.sync\.bfly\.b32 x, \S+, (\d+), 31", wgmma_source.QMAX) == ["1", "2"]
    # The case is not degenerate: words and weights inside the rows are not zero.
    assert sum(v != 0 for v in want[0].values()) > n * 16 * rows_here // rows
    assert all(want[1][4 * c] != 0 for c in range(64 * rows_here))
