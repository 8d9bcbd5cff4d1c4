"""The pre-grad pass: a reference BF16 indexer subgraph becomes the FP4 ops.

It runs on the graph Dynamo hands to a backend (torch-level IR, before
AOTAutograd), so it works for static and dynamic shapes alike. What it looks for,
from the top-k back to the cache:

    keys   = C[block_table][request]                # or C[block_table[request]], then
                                                    #   .flatten(1, 2) / .view / .reshape
    s      = einsum("rhd,rjd->rhj", q, keys)        # or q @ keys.transpose(1, 2)
    logits = (relu(s.float()) * w[..., None]).sum(1)
    top    = fp4.select_topk(logits, row_ends, k)   # any backend, or
    top    = torch.topk(logits.masked_fill(arange(width) >= row_ends[:, None], -inf), k)

``C`` is a float key cache ``[pages, 64, 128]`` that the graph receives as an
input (a module buffer). Every write to ``C`` in the graph must be one the pass
can mirror: ``C.view(-1, 128).index_put_((slots,), keys)`` (or ``index_copy_``
along dim 0, or ``C[page, token] = keys``). Anything else writing to ``C``
leaves the subgraph alone, with a log line saying why.

The rewrite gives ``C`` an FP4 shadow ``uint8 [pages, 64, 68]`` (a new graph
input), mirrors each write with ``fp4.store_keys``, and replaces the chain from
the einsum to the top-k with ``quantize_queries`` -> ``score_paged`` ->
``select_topk`` on the shadow. The BF16 writes stay: the model's own buffer
keeps its meaning; only the top-k's source changes.
"""

from __future__ import annotations

import logging
import math
import operator
from dataclasses import dataclass, field, fields
from typing import Any, Optional

import torch
from torch import fx

from .. import formats as F

log = logging.getLogger(__name__)

# Dynamo keeps method calls as call_method and functions under their own names.
_CASTS = {"long", "int", "to", "type"}
_RESHAPES = {"view", "reshape", "flatten"}


def _name(node: Any) -> Optional[str]:
    """The op a node runs: a method name, a function's __name__ or a torch.library op name."""
    if not isinstance(node, fx.Node):
        return None
    if node.op == "call_method":
        return node.target
    if node.op != "call_function":
        return None
    target = node.target
    if isinstance(target, torch._ops.OpOverload):
        return target._schema.name
    if isinstance(target, torch._ops.OpOverloadPacket):
        return target._qualified_op_name
    if target is operator.getitem:
        return "getitem"
    if target is operator.setitem:
        return "setitem"
    if target in (operator.mul, torch.mul):
        return "mul"
    if target is operator.matmul:
        return "matmul"
    return getattr(target, "__name__", None)


def _arg(node: fx.Node, index: int, keyword: str, default: Any = None) -> Any:
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(keyword, default)


def _value(node: Any) -> Any:
    """The fake value Dynamo recorded for a node (shapes, dtypes), or the constant itself."""
    return node.meta.get("example_value") if isinstance(node, fx.Node) else node


def _strip_casts(node: Any) -> Any:
    while _name(node) in _CASTS:
        node = node.args[0]
    return node


def _strip_reshapes(node: Any) -> Any:
    while _name(node) in _RESHAPES:
        node = node.args[0]
    return node


@dataclass
class Match:
    """One indexer subgraph: the nodes the FP4 ops need."""

    cache: fx.Node  # the float key cache C [pages, 64, 128] (a placeholder)
    topk: fx.Node
    queries: fx.Node  # [rows, H, 128]
    weights: fx.Node  # [rows, H]
    block_table: fx.Node
    request: fx.Node  # [rows] -> request index
    row_ends: fx.Node
    k: Any
    sorted: Any
    query_starts: Optional[fx.Node] = None
    writes: list[fx.Node] = field(default_factory=list)

    def mapped(self, env: dict[fx.Node, fx.Node]) -> "Match":
        """The same match in a copy of its graph (``env``: old node -> new node)."""
        def move(value: Any) -> Any:
            return fx.node.map_arg(value, lambda n: env[n])

        return Match(**{f.name: move(getattr(self, f.name)) for f in fields(self)})


def _match_gather(keys: fx.Node) -> Optional[tuple[fx.Node, fx.Node, fx.Node]]:
    """``C[bt][request]`` or ``C[bt[request]]`` (with reshapes and casts) -> (C, bt, request)."""
    outer = _strip_reshapes(keys)
    if _name(outer) != "getitem":
        return None
    base, index = outer.args
    inner = _strip_reshapes(base)
    if _name(inner) == "getitem" and isinstance(index, fx.Node):
        # C[bt].flatten(1, 2)[request]
        cache, table = inner.args
        if isinstance(table, fx.Node):
            return cache, _strip_casts(table), _strip_casts(index)
    if isinstance(index, fx.Node) and _name(_strip_casts(index)) == "getitem":
        # C[bt[request]].flatten(1, 2)
        table, request = _strip_casts(index).args
        if isinstance(request, fx.Node):
            return base, _strip_casts(table), _strip_casts(request)
    return None


def _match_scores(logits: Any) -> Optional[tuple[fx.Node, fx.Node, fx.Node]]:
    """``(relu(einsum(q, keys).float()) * w[..., None]).sum(1)`` -> (q, keys, w)."""
    if _name(logits) != "sum" or _arg(logits, 1, "dim") not in (1, (1,), [1]) or _arg(logits, 2, "keepdim", False):
        return None
    product = logits.args[0]
    if _name(product) != "mul" or len(product.args) != 2:
        return None
    for scores, weights in (product.args, product.args[::-1]):
        w = _unsqueezed_last(weights, 2)
        chain = _peel_relu(scores)
        if w is None or chain is None:
            continue
        q_keys = _match_product(chain)
        if q_keys is not None:
            return q_keys[0], q_keys[1], w
    return None


def _unsqueezed_last(node: Any, rank: int) -> Optional[fx.Node]:
    """A trailing axis added to a rank-``rank`` tensor -> the tensor: ``x.unsqueeze(-1)``,
    ``x.unsqueeze(rank)``, ``x[..., None]``, ``x[:, :, None]`` (``rank`` slices), and for
    rank 1 also ``x.view(-1, 1)`` / ``x.reshape(-1, 1)``."""
    if _name(node) == "unsqueeze" and _arg(node, 1, "dim") in (-1, rank):
        return node.args[0]
    if _name(node) == "getitem" and node.args[1] in ((Ellipsis, None), (slice(None),) * rank + (None,)):
        return node.args[0]
    if rank == 1 and _name(node) in ("view", "reshape") and tuple(node.args[1:]) == (-1, 1):
        return node.args[0]
    return None


def _peel_relu(node: Any) -> Optional[fx.Node]:
    """Exactly one relu, and float casts in any order around it -> the product under them."""
    relus = 0
    while True:
        name = _name(node)
        if name == "relu":
            relus += 1
        elif name == "float" or (name == "to" and torch.float32 in (*node.args[1:], *node.kwargs.values())):
            pass
        else:
            return node if relus == 1 else None
        node = node.args[0]


def _match_product(node: Any) -> Optional[tuple[fx.Node, fx.Node]]:
    """``einsum("rhd,rjd->rhj", q, keys)`` or ``q @ keys.transpose(1, 2)`` -> (q, keys)."""
    if _name(node) == "einsum" and len(node.args) == 3 and isinstance(node.args[0], str):
        inputs, _, output = node.args[0].replace(" ", "").partition("->")
        lhs, _, rhs = inputs.partition(",")
        letters = set(lhs + rhs)
        if (len(lhs) == len(rhs) == len(output) == 3 and len(letters) == 4 and lhs[0] == rhs[0] == output[0]
                and lhs[2] == rhs[2] and output[1:] == lhs[1] + rhs[1]):
            return node.args[1], node.args[2]
    if _name(node) in ("matmul", "bmm") and len(node.args) == 2:
        q, kt = node.args
        if _name(kt) == "transpose" and set(kt.args[1:3]) in ({1, 2}, {-1, -2}):
            return q, kt.args[0]
        if _name(kt) == "mT":
            return q, kt.args[0]
    return None


def _match_request(request: fx.Node) -> Optional[fx.Node]:
    """``searchsorted(query_starts[1:], arange(rows), right=True)`` (clamped) -> query_starts."""
    node = request
    while _name(node) in ("clamp", "clamp_max", "clamp_min", *_CASTS):
        node = node.args[0]
    if _name(node) != "searchsorted" or not _arg(node, 3, "right", False):
        return None
    boundaries = _strip_casts(node.args[0])
    if _name(boundaries) == "getitem" and node.args[1] is not None and boundaries.args[1] == slice(1, None, None):
        return boundaries.args[0]
    return None


_VIEWS = _RESHAPES | {
    "as_strided", "chunk", "detach", "diagonal", "expand", "expand_as", "movedim", "narrow", "permute", "select",
    "slice", "split", "squeeze", "swapaxes", "t", "transpose", "unbind", "unflatten", "unfold", "unsqueeze",
    "view_as", "mT", "T",
}


def _is_view(node: fx.Node, of: fx.Node) -> bool:
    """Whether ``node`` may share ``of``'s memory: a view op, basic indexing, or a piece of a split."""
    name = _name(node)
    if name == "getitem" and node.args[0] is of:
        # Indexing with a tensor gathers (a copy); ints, slices, None and Ellipsis give a view.
        index = node.args[1] if isinstance(node.args[1], tuple) else (node.args[1],)
        return not any(isinstance(i, fx.Node) and isinstance(_value(i), torch.Tensor) for i in index)
    return name in _VIEWS and node.args and node.args[0] is of


def _storage(node: Any) -> Any:
    """(storage id, first byte, end byte, layout) of the memory a node's fake value may touch, or
    None; with a size that has no hint (data-dependent) the whole storage, as it may touch any of it.
    ``layout`` is (first byte, [(size, byte stride)], element bytes) where every size is known, else None."""
    value = _value(node)
    if not isinstance(value, torch.Tensor):
        return None
    from torch.multiprocessing.reductions import StorageWeakRef

    ref = StorageWeakRef(value.untyped_storage()).cdata
    size = value.element_size()
    shape = [_size_hint(n) for n in value.shape]
    strides = [_size_hint(st) for st in value.stride()]
    offset = _size_hint(value.storage_offset())
    if 0 in shape:
        return None
    if None in shape or None in strides or offset is None:
        return ref, 0, math.inf, None
    start = offset * size
    span = sum((n - 1) * abs(st) for n, st in zip(shape, strides))
    return ref, start, start + (span + 1) * size, (start, [(n, st * size) for n, st in zip(shape, strides) if n > 1], size)


def _residues(layout: Any) -> tuple[int, list[int]]:
    """(dense inner run in bytes, byte strides of the other dims) of a strided layout."""
    _, dims, elem = layout
    run, rest = elem, []
    for n, st in sorted(dims, key=lambda d: d[1]):
        if st == run and not rest:
            run *= n
        else:
            rest.append(st)
    return run, rest


def _overlaps(a: Any, b: Any) -> bool:
    if a is None or b is None or a[0] != b[0] or not (a[1] < b[2] and b[1] < a[2]):
        return False
    if a[3] is None or b[3] is None:
        return True
    # Interleaved views (a section of merged pages, page-major per-layer caches): every byte of a
    # view is its first byte + (multiple of S) + (offset in its dense inner run), S the gcd of the
    # other strides; runs that fall in disjoint windows modulo S never meet.
    (run_a, rest_a), (run_b, rest_b) = _residues(a[3]), _residues(b[3])
    period = math.gcd(*rest_a, *rest_b)
    if period == 0:
        return True
    ra, rb = a[3][0] % period, b[3][0] % period
    if ra + run_a > period or rb + run_b > period:
        return True
    return ra < rb + run_b and rb < ra + run_a


def _aliases(cache: fx.Node) -> list[fx.Node]:
    """``cache`` and every node that may share its memory: view ops and basic indexing of it, and
    any node (another graph input included) whose fake value shares its storage (``contiguous()``,
    a no-op ``to``, a view made outside the graph and passed in as its own input)."""
    found = [cache]
    storage = _storage(cache)
    if storage is not None:
        found += [n for n in cache.graph.nodes if n is not cache and _overlaps(_storage(n), storage)]
    frontier = list(found)
    while frontier:
        node = frontier.pop()
        for user in node.users:
            if user not in found and _is_view(user, node):
                found.append(user)
                frontier.append(user)
    return found


def _whole_cache(alias: fx.Node, cache: fx.Node) -> bool:
    """Whether ``alias`` is ``cache`` or a chain of reshapes of all of it (view, reshape, flatten
    to as many elements), so that its rows are the cache's rows in order."""
    node = alias
    while node is not cache:
        if _name(node) not in _RESHAPES or not node.args or _value(node).dtype != _value(cache).dtype:
            return False  # a dtype view (cache.view(torch.float16)) reinterprets the bits
        node = node.args[0]
    return _size_hint(_value(alias).numel()) == _size_hint(_value(cache).numel())


def _mirrorable_writes(cache: fx.Node) -> tuple[list[fx.Node], Optional[str]]:
    """The writes to ``cache`` the pass can mirror, or the reason it cannot."""
    writes = []
    for alias in _aliases(cache):
        for user in alias.users:
            mutates = _writes_in_place(user)
            target = user.target
            if isinstance(target, torch._ops.OpOverloadPacket):
                target = getattr(target, "default", None)
            if isinstance(target, torch._ops.OpOverload) and target._schema.is_mutable:
                mutates = True
            if isinstance(target, torch._ops.HigherOrderOperator):
                # A user Triton kernel (triton_kernel_wrapper_mutation) or any other HOP taking the cache.
                return [], f"{user.format_node()} may write the cache (a higher-order op)"
            if not mutates:
                if "out" in user.kwargs:
                    return [], f"{user.format_node()} writes through out="
                continue
            if user.args[0] is not alias:
                return [], f"{user.format_node()} writes into the cache"
            if _write_slots(user, alias) is None:
                return [], f"{user.format_node()} is a write the pass cannot mirror"
            if not _whole_cache(alias, cache):
                # Slots of a slice or a permuted view are not the cache's slots.
                return [], f"{user.format_node()} writes through a view that is not the whole cache reshaped"
            writes.append(user)
    return writes, None


def _write_slots(write: fx.Node, alias: fx.Node) -> Optional[tuple[str, Any, fx.Node]]:
    """("flat", slots, keys) for a row write into [pages * 64, D]; ("paged", (page, token), keys) for
    a write into [pages, 64, D]; None for any other write."""
    shape = tuple(_value(alias).shape)
    name = _name(write)
    if name == "index_put_" and not _arg(write, 3, "accumulate", False):
        indices, values = _arg(write, 1, "indices"), _arg(write, 2, "values")
    elif name == "setitem":
        indices, values = write.args[1], write.args[2]
        indices = indices if isinstance(indices, tuple) else (indices,)
    elif name == "index_copy_" and _arg(write, 1, "dim") == 0:
        indices, values = (_arg(write, 2, "index"),), _arg(write, 3, "source")
    else:
        return None
    if not isinstance(values, fx.Node) or not all(isinstance(i, fx.Node) for i in indices):
        return None
    if not all(isinstance(_value(i), torch.Tensor) and _value(i).dtype in (torch.int32, torch.int64)
               and _value(i).dim() == 1 for i in indices):
        return None  # a boolean (or uint8) mask, or indices of another shape: not one slot per key
    if len(shape) == 2 and len(indices) == 1 and _value(values).dim() == 2:
        return "flat", indices[0], values
    if len(shape) == 3 and len(indices) == 2 and _value(values).dim() == 2:
        return "paged", tuple(indices), values
    return None


def _match_topk(node: fx.Node) -> Optional[tuple[Any, Any, Any, Any]]:
    """(logits, row_ends, k, sorted) of ``fp4.select_topk(logits, row_ends, k)`` or of
    ``torch.topk(logits.masked_fill(cols >= row_ends[:, None], -inf), k)`` (largest, last dim)."""
    name = _name(node)
    if name == "fp4::select_topk":
        logits, row_ends = _arg(node, 0, "logits"), _arg(node, 1, "row_ends")
        if logits is None or row_ends is None:
            return None
        return logits, row_ends, _arg(node, 2, "k"), _arg(node, 3, "sorted", False)
    if name != "topk" or _arg(node, 2, "dim", -1) not in (-1, 1) or not _arg(node, 3, "largest", True):
        return None
    masked = _arg(node, 0, "input")
    if not isinstance(masked, fx.Node) or not masked.args:
        return None
    if _name(masked) == "masked_fill" and _arg(masked, 2, "value") == float("-inf"):
        logits, row_ends = masked.args[0], _row_bound(_arg(masked, 1, "mask"), "ge")
    elif _name(masked) == "where" and len(masked.args) == 3 and masked.args[2] == float("-inf"):
        logits, row_ends = masked.args[1], _row_bound(masked.args[0], "lt")
    else:
        return None
    if row_ends is None:
        return None
    return logits, row_ends, _arg(node, 1, "k"), _arg(node, 4, "sorted", True)


def _row_bound(mask: Any, op: str) -> Optional[fx.Node]:
    """row_ends from ``cols >= row_ends[:, None]`` (op "ge") or ``cols < row_ends[:, None]`` ("lt"),
    cols an arange over the keys (either side may be unsqueezed or cast)."""
    flipped = {"ge": "le", "lt": "gt"}[op]
    name = _name(mask)
    if name in (op, flipped) and len(mask.args) == 2:
        cols, bound = mask.args if name == op else mask.args[::-1]
        cols = _strip_casts(_unsqueezed_first(cols) or cols)
        bound = _unsqueezed_last(bound, 1)
        if _name(cols) == "arange" and bound is not None and _counts_from_zero(cols):
            return _strip_casts(bound)
    return None


def _counts_from_zero(arange: fx.Node) -> bool:
    """``arange(end)`` or ``arange(0, end[, 1])``: column j is key j."""
    args = list(arange.args)
    start = arange.kwargs.get("start", args[0] if len(args) >= 2 else 0)
    step = arange.kwargs.get("step", args[2] if len(args) >= 3 else 1)
    return start == 0 and step == 1


def _unsqueezed_first(node: Any) -> Optional[fx.Node]:
    if _name(node) == "unsqueeze" and _arg(node, 1, "dim") == 0:
        return node.args[0]
    if _name(node) == "getitem" and node.args[1] in ((None, slice(None)), (None, Ellipsis), (None,)):
        return node.args[0]
    return None


def as_torch_topk(values: torch.Tensor, indices: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``select_topk``'s result in torch.topk's dtypes (indices int64; -1 where a row has fewer keys)."""
    return values, indices.to(torch.int64)


def find_indexers(graph: fx.Graph) -> tuple[list[Match], list[str]]:
    """Every reference indexer subgraph in ``graph`` the pass can rewrite, and why others were left."""
    matches, skipped = [], []
    for topk in graph.nodes:
        selection = _match_topk(topk)
        if selection is None:
            source = _arg(topk, 0, "input") if _name(topk) == "topk" else None
            if isinstance(source, fx.Node) and _reads_key_cache(source):
                skipped.append(f"{topk.name}: a top-k over logits that read a float [pages, 64, 128] input, but not "
                               f"of logits.masked_fill(arange(width) >= row_ends[:, None], -inf) (or the where form)")
            continue
        found = _match_scores(selection[0])
        if found is None:
            if _reads_key_cache(selection[0]):
                # It reads a float [pages, 64, 128] input: most likely an indexer in another spelling.
                skipped.append(f"{topk.name}: its logits read a float [pages, 64, 128] input but are not "
                               f"(relu(einsum(q, keys).float()) * w[..., None]).sum(1)")
            continue
        q, keys, w = found
        gather = _match_gather(keys)
        if gather is None:
            skipped.append(f"{topk.name}: keys do not come from a paged cache gather")
            continue
        cache, block_table, request = gather
        value = _value(cache)
        if cache.op != "placeholder" or value is None:
            skipped.append(f"{topk.name}: the key cache {cache.name} is not a graph input")
            continue
        if value.dim() != 3 or tuple(value.shape[1:]) != (F.PAGE_TOKENS, F.HEAD_DIM) or not value.is_floating_point():
            skipped.append(f"{topk.name}: the key cache is {value.dtype} {list(value.shape)}, not float [pages, 64, 128]")
            continue
        table_value, keys_value = _value(block_table), _value(keys)
        if (not isinstance(table_value, torch.Tensor) or table_value.dim() != 2 or not isinstance(keys_value, torch.Tensor)
                or [_size_hint(n) for n in keys_value.shape[1:]]
                != [_size_hint(table_value.shape[1]) * F.PAGE_TOKENS, F.HEAD_DIM]):
            skipped.append(f"{topk.name}: the gathered keys are {list(getattr(keys_value, 'shape', []))}, not "
                           f"[rows, block_table.shape[1] * 64, 128] from a 2-D block table")
            continue
        heads = _value(q).shape[1] if _value(q) is not None and _value(q).dim() == 3 else None
        if heads not in F.QUERY_HEADS:
            skipped.append(f"{topk.name}: queries have {heads} heads, the FP4 ops take {F.QUERY_HEADS}")
            continue
        w_value, q_value = _value(w), _value(q)
        if not isinstance(w_value, torch.Tensor) or w_value.dim() > 2 or any(
                _size_hint(a) not in (1, _size_hint(b))
                for a, b in zip(reversed(w_value.shape), reversed(q_value.shape[:2]))):
            shape = list(w_value.shape) if isinstance(w_value, torch.Tensor) else w_value
            skipped.append(f"{topk.name}: the head weights are {shape}, not [rows, H] or broadcastable to it")
            continue
        writes, reason = _mirrorable_writes(cache)
        if reason is not None:
            skipped.append(f"{topk.name}: {reason}")
            continue
        _, row_ends, k, sorted_ = selection
        matches.append(Match(
            cache=cache, topk=topk, queries=q, weights=w, block_table=block_table, request=request,
            row_ends=row_ends, k=k, sorted=sorted_, query_starts=_match_request(request), writes=writes,
        ))
    return matches, skipped


def _reads_key_cache(node: fx.Node) -> bool:
    """Whether ``node`` depends on a graph input shaped like a float key cache [pages, 64, 128]."""
    seen, frontier = set(), [node]
    while frontier:
        n = frontier.pop()
        if n in seen:
            continue
        seen.add(n)
        value = _value(n)
        if (n.op == "placeholder" and isinstance(value, torch.Tensor) and value.dim() == 3
                and value.is_floating_point() and tuple(value.shape[1:]) == (F.PAGE_TOKENS, F.HEAD_DIM)):
            return True
        if n is not node and _name(n) in ("topk", "fp4::select_topk"):
            continue  # downstream of another top-k (an indexer's selection): not this top-k's own logits
        frontier += n.all_input_nodes
    return False


def _size_hint(size: Any) -> Optional[int]:
    """A concrete value for a (possibly symbolic) size, without adding a guard; None for a
    data-dependent (unbacked) size, which has no hint."""
    if isinstance(size, int):
        return size
    hint = size.node.hint
    return None if hint is None else int(hint)


def rewrite(graph: fx.Graph, match: Match, shadow: fx.Node, max_query_len: Optional[int] = None) -> list[fx.Node]:
    """Rewrite one matched indexer onto the FP4 ``shadow`` cache (a graph input); returns the new nodes.

    max_query_len: the launch hint for ``score_paged`` (rows per request); by default the
    mean rows per request of the traced shapes. Requests with more rows are still scored in full.
    """
    fp4 = torch.ops.fp4
    new: list[fx.Node] = []

    def call(op: str, target: Any, *args: Any, **kwargs: Any) -> fx.Node:
        node = graph.create_node(op, target, args, kwargs)
        new.append(node)
        return node

    # The shadow is a static input [pages, 64, 68]: specialize (and guard) a symbolic page count,
    # so a cache of another size recompiles instead of meeting a shadow of the wrong shape.
    pages = int(_value(match.cache).shape[0])
    for write in match.writes:
        kind, index, values = _write_slots(write, write.args[0])
        with graph.inserting_before(write.next):
            # Python indexing wraps negative slots; store_keys skips them, so wrap them first.
            if kind == "flat":
                slots = _wrapped(call, index, pages * F.PAGE_TOKENS)
            else:
                page = _wrapped(call, index[0], pages)
                token = _wrapped(call, index[1], F.PAGE_TOKENS)
                slots = call("call_function", operator.add, call("call_function", operator.mul, page, F.PAGE_TOKENS), token)
            # Quantize what the cache now holds (the values cast to its dtype; Inductor would fuse a
            # plain cast away), as a refill or write_keys would: read the written rows back.
            if kind == "flat":
                stored = call("call_function", operator.getitem, write.args[0], slots)
            else:
                stored = call("call_function", operator.getitem, write.args[0], (page, token))
            call("call_function", fp4.store_keys.default, stored, shadow, slots, None)

    queries, table, request = match.queries, match.block_table, match.request
    if max_query_len is None:
        rows = _size_hint(_value(queries).shape[0]) or 1
        # The requests are query_starts' entries less one where the pass found it: a table padded
        # past the batch has more rows, which would make the hint too small.
        starts = _value(match.query_starts) if match.query_starts is not None else None
        counted = _size_hint(starts.shape[0]) if isinstance(starts, torch.Tensor) else None
        requests = (counted - 1 if counted else None) or _size_hint(_value(table).shape[0]) or 1
        max_query_len = max(1, -(-rows // max(1, requests)))
    with graph.inserting_before(match.topk):
        query_starts = match.query_starts
        if query_starts is not None:
            # A table padded past the batch (a captured batch size): the scorer takes one row per request.
            requests = call("call_function", operator.sub, call("call_method", "size", query_starts, 0), 1)
            table = call("call_method", "narrow", table, 0, 0, requests)
        else:
            # Nothing proves the rows are grouped by request in order: give each row its own
            # block-table row (one request per row; correct for any row -> request map).
            table = call("call_function", operator.getitem, table, request)
            rows = call("call_method", "size", queries, 0)
            query_starts = call("call_function", torch.arange, call("call_function", operator.add, rows, 1),
                                device=_value(request).device)
        quantized = call("call_function", fp4.quantize_queries.default, queries, None)
        payload = call("call_function", operator.getitem, quantized, 0)
        scales = call("call_function", operator.getitem, quantized, 1)
        weights = call("call_method", "float", match.weights)
        if tuple(_value(match.weights).shape) != tuple(_value(queries).shape[:2]):
            # w [H], [1, H] or [rows, 1] broadcast in the reference: give the scorer [rows, H].
            weights = call("call_method", "contiguous", call("call_method", "expand", weights,
                           call("call_method", "size", queries, 0), call("call_method", "size", queries, 1)))
        logits = call("call_function", fp4.score_paged.default, payload, scales, shadow, weights, table, query_starts,
                      match.row_ends, max_query_len, None)
        topk = call("call_function", fp4.select_topk.default, logits, match.row_ends, match.k, match.sorted, None)
        if _name(match.topk) == "topk":
            values = call("call_function", operator.getitem, topk, 0)
            indices = call("call_function", operator.getitem, topk, 1)
            original = _value(match.topk)
            if original is not None and original[0].dtype != torch.float32:
                values = call("call_method", "to", values, original[0].dtype)  # as torch.topk gave them
            topk = call("call_function", as_torch_topk, values, indices)
    match.topk.replace_all_uses_with(topk)
    graph.erase_node(match.topk)
    return new


def _wrapped(call, index: fx.Node, size: int) -> fx.Node:
    negative = call("call_function", operator.lt, index, 0)
    return call("call_function", torch.where, negative, call("call_function", operator.add, index, size), index)


# Python's in-place operators (``x += y`` on a local name): Dynamo keeps them as operator.iadd etc.
_INPLACE_OPERATORS = {
    "iadd", "isub", "imul", "itruediv", "ifloordiv", "imod", "ipow", "imatmul", "iand", "ior", "ixor",
    "ilshift", "irshift",
}


def _writes_in_place(node: fx.Node) -> bool:
    """In-place methods, in-place operators and setitem, which Dynamo graphs keep as plain calls."""
    name = _name(node) or ""
    return (name.endswith("_") and not name.startswith("__")) or name == "setitem" or name in _INPLACE_OPERATORS


def mutates(node: fx.Node) -> bool:
    """Whether ``node`` may have a side effect: impure by FX's rules, an in-place write
    (``_writes_in_place``), a write through ``out=``, or a higher-order op."""
    return (node.is_impure() or _writes_in_place(node) or "out" in node.kwargs
            or isinstance(node.target, torch._ops.HigherOrderOperator))


def ancestors(node: fx.Node) -> set[fx.Node]:
    """Every node ``node`` reads, directly or not."""
    found, frontier = set(), list(node.all_input_nodes)
    while frontier:
        n = frontier.pop()
        if n not in found:
            found.add(n)
            frontier += n.all_input_nodes
    return found


def erase_dead(graph: fx.Graph, candidates: set[fx.Node]) -> None:
    """Erase the ``candidates`` (the replaced chains) left without users; nothing else in the graph.
    One pass from the end: a node's inputs come before it, so erasing it is seen by theirs."""
    for node in reversed(list(graph.nodes)):
        if node in candidates and node.op in ("call_function", "call_method"):
            if not node.users and not mutates(node):
                candidates.discard(node)
                graph.erase_node(node)
