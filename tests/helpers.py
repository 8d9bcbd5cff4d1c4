"""Input builders shared by the tests (fresh random data, permuted pages, merged-page strides), and
the scripts that compile the GPU kernels for sm_90 in a fresh process."""

import contextlib
import importlib.util
import os
import subprocess
import sys

import pytest
import torch

import fp4_inductor as fp4
from fp4_inductor import formats as F
from fp4_inductor import reference


def merged_cache(pages, device, page_bytes=8192, offset=1024, gen=None):
    """An index section inside merged pages, the other bytes of each page filled with noise."""
    buffer, cache = fp4.allocate_merged_cache(pages, page_bytes=page_bytes, index_offset=offset, device=device)
    buffer.copy_(torch.randint(0, 256, buffer.shape, generator=gen, dtype=torch.uint8).to(device))
    return buffer, cache


def random_keys(n, gen, dtype=torch.float32, device="cpu", group_spread=0):
    """Gaussian keys with per-row magnitudes over many binades; ``group_spread`` > 0 also scales
    each 32-element group by up to 2**group_spread (wide scale spreads inside one key)."""
    magnitude = torch.exp2(torch.randint(-12, 12, (n, 1), generator=gen).float())
    x = torch.randn(n, F.HEAD_DIM, generator=gen) * magnitude
    if group_spread:
        spread = torch.exp2(torch.randint(0, group_spread + 1, (n, F.GROUPS, 1), generator=gen).float())
        x = (x.view(n, F.GROUPS, -1) * spread).view(n, F.HEAD_DIM)
    return x.to(dtype).to(device)


def scoring_case(
    gen, device, query_lens, seq_lens, heads=32, pages_per_request=None, page_bytes=8192, dtype=torch.float32,
    key_spread=0, query_spread=0,
):
    """Requests with non-uniform verify rows over a cache in permuted merged pages; the spreads
    make group scales inside a key / a query head differ by up to 2**spread."""
    query_lens = torch.tensor(query_lens)
    seq_lens = torch.tensor(seq_lens)
    requests = len(query_lens)
    needed = int((seq_lens.max() + F.PAGE_TOKENS - 1) // F.PAGE_TOKENS)
    pages_per_request = pages_per_request or needed + 1
    total_pages = requests * pages_per_request + 3
    buffer, cache = merged_cache(total_pages, "cpu", page_bytes=page_bytes, gen=gen)
    keys = random_keys(total_pages * F.PAGE_TOKENS, gen, group_spread=key_spread)
    reference.store_keys(keys, cache, torch.arange(keys.shape[0]))
    buffer = buffer.to(device)
    cache = fp4.index_section(buffer, 1024)
    block_table = torch.randperm(total_pages, generator=gen)[: requests * pages_per_request].view(requests, -1).int()
    rows = int(query_lens.sum()) + 2  # two graph-padding rows
    q = random_keys(rows * heads, gen, group_spread=query_spread).view(rows, heads, F.HEAD_DIM).to(dtype)
    weights = torch.randn(rows, heads, generator=gen)
    query_starts, row_ends = fp4.decode_layout(seq_lens, query_lens, rows)
    to = lambda t: t.to(device)
    return dict(
        cache=cache, buffer=buffer, block_table=to(block_table), q=to(q), weights=to(weights),
        query_starts=to(query_starts), row_ends=to(row_ends), max_query_len=int(query_lens.max()),
    )


def case_on(case, device):
    """A scoring case built on the CPU (keys written into its cache there), moved to ``device``:
    its tensors, and its cache as the index section of the moved buffer."""
    moved = {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in case.items()}
    moved["cache"] = fp4.index_section(moved["buffer"], case["cache"].data_ptr() - case["buffer"].data_ptr())
    return moved


def clone_case(case):
    """The same case on its own copy of the merged pages."""
    copy = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in case.items()}
    copy["cache"] = fp4.index_section(copy["buffer"], case["cache"].data_ptr() - case["buffer"].data_ptr())
    return copy


def float64_scores(query, cache, weights, block_table, query_starts, row_ends, magnitude=False, to_bf16=True):
    """The scoring definition in float64 over dequantized inputs, one row at a time. ``query``:
    (payload, scales), or a float tensor for the bf16-query mode (rounded to bf16, unless not
    ``to_bf16``: the full-precision queries).

    ``magnitude=True`` sums ``|w| * relu(s)`` instead: the scale of the float32 rounding
    error of an entry, whatever cancellation the signed weights cause."""
    if magnitude:
        weights = weights.abs()
    if isinstance(query, torch.Tensor):  # the bf16-query mode
        q = (query.cpu().to(torch.bfloat16) if to_bf16 else query.cpu()).double()
    else:
        q = reference.dequantize_queries(*[t.cpu() for t in query], dtype=torch.float64)
    cache, block_table = cache.cpu(), block_table.cpu().long()
    starts, ends = query_starts.cpu().tolist(), row_ends.cpu().tolist()
    width = block_table.shape[1] * F.PAGE_TOKENS
    out = torch.full((q.shape[0], width), float("nan"), dtype=torch.float64)
    for i in range(len(starts) - 1):
        keys = reference.dequantize_pages(cache, block_table[i].clamp(0, cache.shape[0] - 1), torch.float64).flatten(0, 1)
        for r in range(starts[i], starts[i + 1]):
            s = (q[r] @ keys[: ends[r]].T).relu()
            out[r, : ends[r]] = weights[r].cpu().double() @ s
    return out


def run_programs_in_reverse(monkeypatch):
    """Make the Triton interpreter run a launch's programs from the last program_id(0) to the
    first. It runs them in ascending order, so a program that stores into the next program's
    share is overwritten by it and goes unseen; in reverse order the stray store comes last
    and shows (on the GPU the order is a race)."""
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    set_dim, set_idx = builder.set_grid_dim, builder.set_grid_idx

    def grid_dim(self, *dims):
        self._grid_dims = dims
        return set_dim(self, *dims)

    monkeypatch.setattr(builder, "set_grid_dim", grid_dim)
    monkeypatch.setattr(builder, "set_grid_idx", lambda self, x, y, z: set_idx(self, self._grid_dims[0] - 1 - x, y, z))


NEEDS_SM90_TOOLS = """
import sys
try:  # the NVIDIA backend's ptxas, which the Triton wheel carries
    from triton.backends.nvidia.compiler import get_ptxas
    get_ptxas(90)
except Exception as exc:
    print(f"no sm_90 tools: {type(exc).__name__}: {exc}", file=sys.stderr)
    sys.exit(3)
"""

# Defines ``capture(kernel)``, which stands in for ``kernels.wrapped``: every launch a launcher makes is
# recorded in ``launches`` as (kernel, its arguments by name, the launch options), not run.
CAPTURE_LAUNCHES = """
import inspect
launches = []

def capture(kernel):
    class Grid:
        def __getitem__(self, grid):
            def call(*args, **kwargs):
                named = dict(zip(inspect.signature(kernel.fn).parameters, args))
                options = {k: kwargs.pop(k) for k in ("num_warps", "num_stages", "maxnreg") if k in kwargs}
                named.update(kwargs)
                launches.append((kernel, named, options))
            return call
    return Grid()
"""


@contextlib.contextmanager
def recorded_scorer_launches(run: bool = False):
    """Inside it, each launch ``launch_score_paged`` makes is recorded as (grid, its arguments in
    order, by name): a list, yielded (``kernels.score.wrapped`` stood in for). ``run``: each
    launch runs too, and its record keeps each tensor argument as (shape, dtype) only: holding
    the tensors would keep alive memory that the caller expects freed (a CUDA graph pool's
    output, which cudagraph trees then refuse as untracked); else none runs."""
    from fp4_inductor.kernels import score

    launches, original = [], score.wrapped

    def shape_only(value):
        return (tuple(value.shape), value.dtype) if isinstance(value, torch.Tensor) else value

    class Recorder:
        def __init__(self, kernel):
            self.launcher = original(kernel) if run else None

        def __getitem__(self, grid):
            def launch(*args, **named):
                if run:
                    self.launcher[grid](*args, **named)
                    args, named = tuple(map(shape_only, args)), {k: shape_only(v) for k, v in named.items()}
                launches.append((grid, args, named))
            return launch

    score.wrapped = Recorder
    try:
        yield launches
    finally:
        score.wrapped = original


def import_wgmma_variant(folder, halves):
    """score_kernel.py on the wgmma pass written with ``halves`` at every block
    (``wgmma_source.variant_sources``), as modules of the kernels package kept in ``folder``
    (Triton reads a kernel's source from its file): (the kernel's module, the names it put in
    ``sys.modules``, for the caller to take out)."""
    from fp4_inductor.kernels import wgmma_source

    names = []
    for name, source in wgmma_source.variant_sources(halves).items():  # the pass's module first
        path = os.path.join(folder, name + ".py")
        with open(path, "w") as f:
            f.write(source)
        spec = importlib.util.spec_from_file_location(f"fp4_inductor.kernels.{name}", path)
        module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
        names.append(spec.name)
        spec.loader.exec_module(module)
    return module, names


def run_sm90_script(script: str, *args: str) -> str:
    """stdout of ``script`` run in a fresh process without the interpreter (which cannot
    compile). Exit code 3 means the installed Triton lacks the sm_90 tools: the test skips;
    any other failure fails it. The script may import this module."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    tests = os.path.dirname(os.path.abspath(__file__))
    # The package, and this module (its small kernels, whose source Triton reads from the file).
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(tests), tests, env.get("PYTHONPATH", "")])
    run = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=env, timeout=600)
    if run.returncode == 3:
        pytest.skip(run.stderr[-300:])
    if run.returncode != 0:
        raise AssertionError(run.stderr[-3000:])
    return run.stdout


if importlib.util.find_spec("triton") is not None:
    import triton
    import triton.language as tl

    from fp4_inductor.kernels.score_tiles import page_offset

    @triton.jit
    def page_offset_kernel(ids_ptr, out_ptr, stride, N: tl.constexpr):
        """``score_tiles.page_offset`` of N page ids, loaded as ``tile_page_ids`` loads them."""
        n = tl.arange(0, N)
        page = tl.load(ids_ptr + n).to(tl.uint32).to(tl.int64)
        tl.store(out_ptr + n, page_offset(page, stride))
