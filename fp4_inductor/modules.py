"""Indexer modules: a reference BF16 lightning indexer, its FP4 drop-in, and the swap.

``ReferenceIndexer`` follows DeepSeek-V3.2's lightning indexer without RoPE
(Kimi K3's No-RoPE indexer): queries from the low-rank query input through a
projection, one shared key per token through a projection and LayerNorm, and
per-head weights from a projection scaled by ``heads**-0.5 * softmax_scale``.
It keeps keys in a paged BF16 cache it owns and returns the top-k token
indices of every decode row. ``FP4Indexer`` has the same parameters and
forward signature and keeps its keys in an FP4 index section of merged pages.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Optional

import torch
from torch import nn
from torch.fx.experimental.symbolic_shapes import guard_or_false

from . import formats as F
from ._checks import (FLOAT_DTYPES, INDEX_DTYPES, check_bool, check_dtype, check_int, check_positive_float, check_size,
                      check_tensor, describe, dtype_name, dtype_names, quoted, size_below)
from .layout import allocate_merged_cache, check_cache, check_head_count, check_lengths, index_section
from ._op_checks import check_query_precision
from .ops import check_backend, decode_layout, decode_step, select_topk, store_keys
from .rotation import hadamard_matrix
from .reference import write_sources

# What from_reference reads of the module it replaces.
_REFERENCE_ATTRIBUTES = ("wq_b", "wk", "k_norm", "weights_proj", "key_cache", "heads", "head_dim", "topk",
                         "softmax_scale")
# The forward hooks a replacement takes over (torch.ao.quantization's module swap carries these too).
_FORWARD_HOOKS = ("_forward_pre_hooks", "_forward_pre_hooks_with_kwargs", "_forward_hooks",
                  "_forward_hooks_with_kwargs", "_forward_hooks_always_called")


class IndexerProjections(nn.Module):
    """The indexer's parameters: query, key (+ LayerNorm) and head-weight projections."""

    def __init__(self, hidden_size, q_lora_rank, heads, head_dim, topk, softmax_scale, device, dtype):
        super().__init__()
        for name, value in (("hidden_size", hidden_size), ("q_lora_rank", q_lora_rank), ("heads", heads),
                            ("topk", topk)):
            check_int(name, value, minimum=1)
        check_int("head_dim", head_dim)
        if head_dim != F.HEAD_DIM:
            raise ValueError(f"head_dim: expected {F.HEAD_DIM}, got {head_dim}")
        if softmax_scale is not None:
            check_positive_float("softmax_scale", softmax_scale)
        check_dtype("dtype", dtype, FLOAT_DTYPES)
        self.heads, self.head_dim, self.topk = heads, head_dim, topk
        self.softmax_scale = head_dim**-0.5 if softmax_scale is None else softmax_scale
        factory = dict(device=device, dtype=dtype)
        self.wq_b = nn.Linear(q_lora_rank, heads * head_dim, bias=False, **factory)
        self.wk = nn.Linear(hidden_size, head_dim, bias=False, **factory)
        self.k_norm = nn.LayerNorm(head_dim, **factory)
        self.weights_proj = nn.Linear(hidden_size, heads, bias=False, **factory)

    def project(self, x: torch.Tensor, q_lora: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(queries [rows, H, 128], keys [rows, 128], weights float32 [rows, H])."""
        q = self.wq_b(q_lora).view(-1, self.heads, self.head_dim)
        k = self.k_norm(self.wk(x))
        w = self.weights_proj(x).float() * (self.heads**-0.5 * self.softmax_scale)
        return q, k, w

    def check_step(self, x, q_lora, slots, block_table, seq_lens, query_lens, max_query_len, device) -> None:
        """A forward's arguments, with the messages decode_layout and decode_step give, for a cache on
        ``device``; run before anything is written. Shapes, dtypes, devices and Python ints only: no
        value is read on the host, so slots outside the cache are skipped (as store_keys skips them),
        not refused. x and q_lora take the dtype of the projections that read them, or, under
        autocast on the cache's device type, any float dtype (nn.Linear casts them there).
        The projections and k_norm themselves must be float32, bfloat16 or float16: a module after
        ``.double()`` is refused by the projection's name (autocast leaves float64 as it is)."""
        for projection in ("wq_b", "wk", "k_norm", "weights_proj"):
            # A LayerNorm may have no weight, and a model may put a module without one in its place.
            weight = getattr(getattr(self, projection), "weight", None)
            if weight is not None and weight.dtype not in FLOAT_DTYPES:
                raise ValueError(f"{projection}: expected {dtype_names(FLOAT_DTYPES)} weights (the dtypes the "
                                 f"indexers take, under autocast too), got {dtype_name(weight.dtype)}: convert the "
                                 f"module, e.g. .to(torch.bfloat16)")
        check_tensor("x", x, dtypes=FLOAT_DTYPES, shape=("rows", self.wk.in_features), device=device)
        check_tensor("q_lora", q_lora, dtypes=FLOAT_DTYPES, shape=("rows", self.wq_b.in_features), device=device)
        check_size("q_lora", q_lora, 0, x.shape[0], "one row per row of x")
        # Meta has no autocast: asking raises (torch.amp.is_autocast_available would tell, but
        # Dynamo does not trace it on torch 2.11).
        kind = x.device.type
        if not (kind != "meta" and torch.is_autocast_enabled(kind)):
            for name, t, projection in (("x", x, "wk"), ("x", x, "weights_proj"), ("q_lora", q_lora, "wq_b")):
                dtype = getattr(self, projection).weight.dtype
                if t.dtype != dtype:
                    raise ValueError(f"{name}: expected {dtype_name(dtype)} (the dtype of {projection}; "
                                     f"any float dtype under autocast on {kind}), got {describe(t)}")
        check_tensor("slots", slots, dtypes=INDEX_DTYPES, shape=("n",), device=device)
        check_size("slots", slots, 0, x.shape[0], "one slot per row of x")
        # Each on the cache's device first, so that a misplaced one is named (check_lengths
        # compares the two with each other).
        check_tensor("query_lens", query_lens, dtypes=INDEX_DTYPES, shape=("requests",), device=device)
        check_tensor("seq_lens", seq_lens, dtypes=INDEX_DTYPES, shape=("requests",), device=device)
        check_lengths(seq_lens, query_lens)
        check_tensor("block_table", block_table, dtypes=INDEX_DTYPES, shape=("requests", "pages_per_request"),
                     device=device)
        requests = query_lens.shape[0]
        # No guard on unbacked rows (a captured batch's table, its size from data): asserted at run time.
        if size_below(block_table.shape[0], requests):
            raise ValueError(f"block_table: expected at least {requests} rows (one per request, from query_lens), "
                             f"got {describe(block_table)}")
        check_int("max_query_len", max_query_len, minimum=1)


class ReferenceIndexer(IndexerProjections):
    """BF16 lightning indexer over a paged key cache.

    forward(x [rows, hidden], q_lora [rows, q_lora_rank], slots int [rows], block_table int
    [requests, pages_per_request], seq_lens int [requests], query_lens int [requests],
    max_query_len: int) -> int32 [rows, topk] token indices (-1 where a row has fewer keys).
    x and q_lora in the module's dtype (any float dtype under autocast).
    Stores this step's keys at ``slots`` (negative: padding rows) before scoring. Arguments are
    checked as FP4Indexer checks them, before a key is written; values are not (slots outside
    the cache are skipped; block-table entries past a request's pages may hold anything).
    """

    def __init__(
        self,
        hidden_size: int,
        q_lora_rank: int,
        num_pages: int,
        heads: int = 64,
        head_dim: int = F.HEAD_DIM,
        topk: int = 2048,
        softmax_scale: Optional[float] = None,
        device=None,
        dtype=torch.bfloat16,
    ):
        super().__init__(hidden_size, q_lora_rank, heads, head_dim, topk, softmax_scale, device, dtype)
        factory = dict(device=device, dtype=dtype)
        self.register_buffer("key_cache", torch.zeros(num_pages, F.PAGE_TOKENS, head_dim, **factory), persistent=False)

    def forward(self, x, q_lora, slots, block_table, seq_lens, query_lens, max_query_len: int):
        self.check_step(x, q_lora, slots, block_table, seq_lens, query_lens, max_query_len, self.key_cache.device)
        q, k, w = self.project(x, q_lora)
        rows = q.shape[0]
        if guard_or_false(rows == 0):  # an unbacked 0 at run time takes the path below
            return torch.full((0, self.topk), -1, dtype=torch.int32, device=q.device)
        flat = self.key_cache.view(-1, self.head_dim)
        valid = (slots >= 0) & (slots < flat.shape[0])
        # As reference.store_keys writes: every duplicate index carries the same value (the last
        # row of a slot, padding rows the first valid row's write), or slot 0 its own value when
        # no row is valid.
        source, any_valid = write_sources(slots.long(), valid)
        target = torch.where(any_valid, slots[source], 0).long()
        flat.index_put_((target,), torch.where(any_valid, k.to(flat.dtype)[source], flat[target]))
        if guard_or_false(query_lens.shape[0] == 0):
            # Graph padding only: keys stored, no row has a request (or a key).
            return torch.full((rows, self.topk), -1, dtype=torch.int32, device=q.device)
        query_starts, row_ends = decode_layout(seq_lens, query_lens, rows)
        request = torch.searchsorted(query_starts[1:].long(), torch.arange(rows, device=q.device), right=True)
        # A table padded past the batch is read for its first rows; entries past a request's pages
        # may hold anything: clamped into the cache, their keys masked by row_ends. (Entries that a
        # row needs must be pages of the cache: reference.score_paged gives NaN for others.)
        requests = query_lens.shape[0]
        request = request.clamp(max=requests - 1)
        pages = block_table[:requests].long().clamp(0, self.key_cache.shape[0] - 1)
        keys = self.key_cache[pages].flatten(1, 2)[request]  # [rows, width, 128]
        # In the cache's dtype: wq_b may hold another one than wk, which fills the cache.
        scores = torch.einsum("rhd,rjd->rhj", q.to(keys.dtype), keys).float().relu()
        logits = (scores * w.unsqueeze(-1)).sum(1)
        return select_topk(logits, row_ends, self.topk, backend="reference")[1]


class FP4Indexer(IndexerProjections):
    """The FP4 drop-in for ``ReferenceIndexer``: same parameters, same forward.

    Keys live in an FP4 index section (68 B/token) inside merged pages: its own
    (``num_pages`` pages of ``page_bytes`` with the section at ``index_offset``)
    or an external ``index_cache`` view ``uint8 [pages, 64, 68]``.
    ``query_precision="bf16"`` scores the same FP4 keys with unquantized (bf16) queries:
    higher top-k recall for a slower scorer (docs/benchmarks.md has both).
    ``rotate=True`` multiplies queries and keys by the Hadamard matrix before they are
    quantized, in the indexer's dtype (queries by ``hadamard_matrix(scale=2**-3)``, keys by
    ``scale=2**-4``: exact entries, and together orthonormal): the logits are the same in exact
    arithmetic, keys with outlier channels lose less to FP4 and all fold into the scorer's fast
    path (fp4_inductor.rotation). It is the rotation DeepSeek-V3.2's indexer makes. Keys written
    into ``index_cache`` outside ``forward`` (a prefill) go through ``rotate_keys`` first.
    """

    def __init__(
        self,
        hidden_size: int,
        q_lora_rank: int,
        num_pages: int,
        heads: int = 64,
        head_dim: int = F.HEAD_DIM,
        topk: int = 2048,
        softmax_scale: Optional[float] = None,
        device=None,
        dtype=torch.bfloat16,
        page_bytes: Optional[int] = None,
        index_offset: int = 0,
        index_cache: Optional[torch.Tensor] = None,
        backend: Optional[str] = None,
        query_precision: str = "fp4",
        rotate: bool = False,
    ):
        super().__init__(hidden_size, q_lora_rank, heads, head_dim, topk, softmax_scale, device, dtype)
        check_query_precision(query_precision)
        check_bool("rotate", rotate)
        check_head_count(heads)
        check_backend(backend)
        if backend == "aiter":
            # backend=None already scores with AITER on ROCm, where it can read the cache in place.
            raise ValueError("backend: expected None, 'reference' or 'triton' (the indexer also stores keys, quantizes "
                             "queries and selects the top-k, which AITER does not provide), got 'aiter'")
        self.backend = backend
        self.query_precision = query_precision
        self.index_offset = index_offset
        if index_cache is None:
            pages, index_cache = allocate_merged_cache(num_pages, page_bytes, index_offset, device=device)
            self.register_buffer("pages", pages, persistent=False)
        else:
            check_external_cache(index_cache, num_pages, page_bytes, index_offset)
        self.index_cache = index_cache
        self.rotate = rotate
        self.register_buffer("query_rotation", None, persistent=False)
        self.register_buffer("key_rotation", None, persistent=False)
        if rotate:
            self._build_rotations(index_cache.device, self.wk.weight.dtype)

    def _build_rotations(self, device, dtype) -> None:
        self.query_rotation = hadamard_matrix(device, scale=2.0**-3, dtype=dtype)
        self.key_rotation = hadamard_matrix(device, scale=2.0**-4, dtype=dtype)

    def _apply(self, fn, recurse=True):
        super()._apply(fn, recurse)
        # A view of the pages this module owns follows them when they move (an external
        # index_cache stays the engine's).
        if getattr(self, "pages", None) is not None:
            self.index_cache = index_section(self.pages, self.index_offset)
        # The matrices are no state (not in state_dict) and are rebuilt, never carried, after a
        # move: to_empty() after a construction on "meta" would leave them uninitialized.
        if self.rotate:
            self._build_rotations(self.query_rotation.device, self.query_rotation.dtype)
        return self

    def rotate_keys(self, k: torch.Tensor) -> torch.Tensor:
        """Keys [n, 128] as this indexer stores them: times ``key_rotation`` with ``rotate=True``,
        else as given. For keys written into ``index_cache`` outside ``forward``."""
        return k @ self.key_rotation.to(k.dtype) if self.rotate else k

    @classmethod
    def from_reference(cls, module: ReferenceIndexer, **kwargs) -> "FP4Indexer":
        """An FP4Indexer in place of ``module``: its weights (copied, with their ``requires_grad``),
        geometry, training mode and forward hooks (its own hook dicts, shared: the handles their
        registration returned still remove them), and the keys already in its BF16 cache (a swap
        after a prefill), quantized into the FP4 cache (through ``rotate_keys``). ``kwargs`` go
        to the constructor and may override any of it (``device``, ``dtype``, ``topk``, ...).
        Carrying the keys reads the host once (which slots hold a key); call it outside a
        captured region."""
        missing = [name for name in _REFERENCE_ATTRIBUTES if not hasattr(module, name)]
        if missing:
            raise TypeError(f"module: expected a ReferenceIndexer (or a module with its attributes), got "
                            f"{type(module).__name__} without {', '.join(missing)}")
        weight = module.wq_b.weight
        geometry = dict(
            hidden_size=module.wk.in_features,
            q_lora_rank=module.wq_b.in_features,
            num_pages=module.key_cache.shape[0],
            heads=module.heads,
            topk=module.topk,
            softmax_scale=module.softmax_scale,
            device=weight.device,
            dtype=weight.dtype,
        )
        fp4 = cls(**{**geometry, **kwargs})
        state = module.state_dict()
        unexpected = sorted(set(state) - set(fp4.state_dict()))
        if unexpected:
            raise ValueError(f"module: expected the parameters of a ReferenceIndexer, got {type(module).__name__} "
                             f"with {', '.join(unexpected)} as well, which an FP4Indexer would drop")
        # Strict about the indexer's own parameters only: a subclass (cls) may add state of its own.
        missing = [key for key in fp4.load_state_dict(state, strict=False).missing_keys
                   if key.split(".")[0] in ("wq_b", "wk", "k_norm", "weights_proj")]
        if missing:
            raise ValueError(f"module: expected the parameters of a ReferenceIndexer, got {type(module).__name__} "
                             f"without {', '.join(missing)}")
        fp4.train(module.training)
        own = dict(module.named_parameters())
        for name, parameter in fp4.named_parameters():
            if name in own:
                parameter.requires_grad_(own[name].requires_grad)
        # Hooks on the replaced module (profilers, debug taps) stay on the module that replaces it:
        # the same dicts, so that the handles their registration returned still remove them.
        for hooks in _FORWARD_HOOKS:
            if hasattr(module, hooks):
                object.__setattr__(fp4, hooks, getattr(module, hooks))
        fp4._carry_keys(module.key_cache)
        return fp4

    @torch.no_grad()
    def _carry_keys(self, key_cache: torch.Tensor) -> None:
        """Quantize the keys of a reference's cache [pages, 64, 128] into this indexer's cache,
        slot for slot. A slot counts as written when its key is not all zeros (an all-zero key
        scores 0 either way)."""
        if key_cache.device.type == "meta" or self.index_cache.device.type == "meta":
            return
        flat = key_cache.reshape(-1, self.head_dim)
        slots = flat.ne(0).any(1).nonzero().squeeze(1)  # host-ok: once, at swap time, not on the decode path
        if slots.numel() == 0:
            return
        if int(slots[-1]) >= self.index_cache.shape[0] * F.PAGE_TOKENS:  # host-ok: swap time; slots ascend
            raise ValueError(f"num_pages: expected at least the {key_cache.shape[0]} pages of the reference's cache "
                             f"to carry its keys, got {self.index_cache.shape[0]}")
        device = self.index_cache.device
        keys = self.rotate_keys(flat[slots].to(device=device, dtype=self.wk.weight.dtype))
        store_keys(keys, self.index_cache, slots.to(device))

    def forward(self, x, q_lora, slots, block_table, seq_lens, query_lens, max_query_len: int):
        # Every input checked before this step's keys are written (decode_step checks its own again).
        self.check_step(x, q_lora, slots, block_table, seq_lens, query_lens, max_query_len, self.index_cache.device)
        q, k, w = self.project(x, q_lora)
        if self.rotate:
            q, k = q @ self.query_rotation.to(q.dtype), self.rotate_keys(k)
        query_starts, row_ends = decode_layout(seq_lens, query_lens, q.shape[0])
        # A table padded past the batch (a captured batch size) is read for its first rows only.
        block_table = block_table[:query_lens.shape[0]]
        return decode_step(q, self.index_cache, w, block_table, query_starts, row_ends, max_query_len, self.topk,
                           keys=k, slots=slots, query_precision=self.query_precision, backend=self.backend)[1]


def check_external_cache(index_cache: object, num_pages: int, page_bytes: Optional[int], index_offset: int) -> None:
    """An external ``index_cache`` holds ``num_pages`` pages, and the arguments that would shape
    the module's own pages are left unset."""
    index_cache = check_cache(index_cache, "index_cache")
    check_int("num_pages", num_pages)
    check_int("index_offset", index_offset)
    if num_pages != index_cache.shape[0]:
        raise ValueError(f"num_pages: expected {index_cache.shape[0]} (the pages of index_cache), got {num_pages!r}")
    if page_bytes is not None or index_offset != 0:
        raise ValueError(f"page_bytes, index_offset: expected None and 0 with index_cache (they shape the pages the "
                         f"module allocates without one), got {quoted(page_bytes)} and {quoted(index_offset)}")


def swap_indexers(
    model: nn.Module,
    predicate: Optional[Callable[[str, nn.Module], bool]] = None,
    **fp4_kwargs,
) -> list[tuple[str, FP4Indexer]]:
    """Replace every ``ReferenceIndexer`` in ``model`` (or every module ``predicate(name, module)``
    accepts) by ``FP4Indexer.from_reference(module, **fp4_kwargs)``, in place. A module registered
    at several places gets one FP4Indexer at all of them.

    Returns the swapped ``(qualified name, new module)`` pairs, in module order, one per place.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model: expected an nn.Module, got {describe(model)}")
    if predicate is not None and not callable(predicate):
        raise TypeError(f"predicate: expected None or a callable (name, module) -> bool, got {describe(predicate)}")
    if predicate is None:
        predicate = lambda name, module: isinstance(module, ReferenceIndexer)  # noqa: E731
    if predicate("", model):
        # Replacing the root would need the caller's reference to it.
        raise ValueError(f"model: expected a module that contains indexers, got one that is itself replaced "
                         f"({type(model).__name__}); use FP4Indexer.from_reference(model) for a single indexer")
    # Every path to a module, so that a module registered at two places (shared) is replaced at
    # both, by one FP4Indexer.
    targets = [(name, module) for name, module in model.named_modules(remove_duplicate=False)
               if name and predicate(name, module)]
    first: dict[int, tuple[str, nn.Module]] = {}
    for name, module in targets:
        first.setdefault(id(module), (name, module))
    unique = list(first.values())
    if fp4_kwargs.get("index_cache") is not None and len(unique) > 1:
        # One cache for every layer: each layer's keys would overwrite the others' at the same slots.
        raise ValueError(f"index_cache: expected one cache per layer, got one for {len(unique)} indexers "
                         f"({', '.join(name for name, _ in unique)}); swap them one at a time with a predicate")
    # Every replacement is built before the first is put in, so a failure leaves the model as it was.
    built = {id(module): FP4Indexer.from_reference(module, **fp4_kwargs) for _, module in unique}
    swapped = [(name, built[id(module)]) for name, module in targets]
    for name, new in swapped:
        parent_name, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent_name), child, new)
    return swapped
