"""The ``fp4_inductor`` torch.compile backend: the reference-indexer rewrite, then Inductor.

    model = torch.compile(model, backend="fp4_inductor")                    # any mode:
    model = torch.compile(model, backend="fp4_inductor", mode="reduce-overhead")
    model = torch.compile(model, backend="fp4_inductor", options={"fp4_inductor.max_query_len": 2})

Each float key cache a rewritten indexer reads gets an FP4 shadow (68 B/token),
kept on the cache tensor itself (``fp4_inductor_shadow``) and passed to the
compiled graph as an extra, static input. The shadow is filled from the cache
when it is made and whenever the cache was written outside the compiled graph
(its version counter moved); inside the graph every write is mirrored.
"""

from __future__ import annotations

import copy
import logging
from typing import Any, Callable, Optional, Sequence

import torch
from torch import fx

from .. import formats as F
from .._checks import FLOAT_DTYPES, INDEX_DTYPES, check_bool, check_int, check_size, check_tensor
from ..ops import store_keys
from .rewrite import ancestors, erase_dead, find_indexers, rewrite

log = logging.getLogger(__name__)

OPTION_PREFIX = "fp4_inductor."
_SHADOW_ATTR = "fp4_inductor_shadow"
_SYNC_ROWS = 1 << 16  # keys quantized per launch when a shadow is filled from its cache


class IndexShadow:
    """The FP4 copy ``uint8 [pages, 64, 68]`` of a float key cache ``[pages, 64, 128]``."""

    def __init__(self, source: torch.Tensor):
        self.cache = torch.zeros(
            (source.shape[0], F.PAGE_TOKENS, F.BYTES_PER_TOKEN), dtype=torch.uint8, device=source.device
        )
        self.version: Optional[int] = None
        self.fills = 0  # whole-cache fills: the first when the shadow is made, any later is a refill

    @classmethod
    def of(cls, source: torch.Tensor) -> "IndexShadow":
        shadow = getattr(source, _SHADOW_ATTR, None)
        if shadow is None:
            shadow = cls(source)
            setattr(source, _SHADOW_ATTR, shadow)
        return shadow

    def sync(self, source: torch.Tensor) -> None:
        """Re-quantize all of ``source`` if it changed since this shadow last saw it."""
        if untracked(source):
            raise RuntimeError(
                "fp4_inductor: the key cache is an inference tensor (made under torch.inference_mode()): "
                "writes to it outside the compiled model cannot be seen, so its FP4 shadow cannot be kept "
                "current. Make the cache under torch.no_grad() instead."
            )
        if source._version == self.version:
            return
        if source.is_cuda and torch.cuda.is_current_stream_capturing():
            raise RuntimeError(
                "fp4_inductor: the key cache was written outside the compiled model since the last "
                "call; refilling its FP4 shadow cannot be captured in a CUDA graph. Call the compiled "
                "model once before capture, and write keys only through it while replaying."
            )
        if self.fills == 1:
            log.warning("fp4_inductor: a key cache [%d pages] was written outside the compiled model, so its whole "
                        "FP4 shadow is quantized again before this call (and after each such write). Write keys "
                        "outside the model with fp4_inductor.inductor.write_keys to mirror only those keys.",
                        source.shape[0])
        flat = source.reshape(-1, F.HEAD_DIM)
        for start in range(0, flat.shape[0], _SYNC_ROWS):
            rows = flat[start : start + _SYNC_ROWS]
            slots = torch.arange(start, start + rows.shape[0], device=flat.device)
            store_keys(rows, self.cache, slots)
        self.version = source._version
        self.fills += 1


def write_keys(cache: torch.Tensor, keys: torch.Tensor, slots: torch.Tensor) -> None:
    """``cache.view(-1, 128)[slots] = keys`` for a float key cache ``[pages, 64, 128]`` that the
    ``fp4_inductor`` backend shadows, with the keys mirrored into its FP4 shadow: an eager
    prefill's writes then cost only their own keys at the next compiled call, not a refill of
    the whole shadow. Slots index the flattened cache as that assignment does (a negative one
    counts from the end). Without a shadow yet it is the plain assignment."""
    check_tensor("cache", cache, dtypes=FLOAT_DTYPES, shape=("pages", F.PAGE_TOKENS, F.HEAD_DIM))
    check_tensor("keys", keys, dtypes=FLOAT_DTYPES, shape=("n", F.HEAD_DIM), device=cache.device)
    check_tensor("slots", slots, dtypes=INDEX_DTYPES, shape=("n",), device=cache.device)
    check_size("slots", slots, 0, keys.shape[0], "one slot per key")
    shadow = getattr(cache, _SHADOW_ATTR, None)
    current = shadow is not None and not untracked(cache) and shadow.version == cache._version
    keys = keys.to(cache.dtype)
    cache.view(-1, F.HEAD_DIM)[slots] = keys
    if current:
        # The assignment's wrap of a negative slot (store_keys would skip it), as the rewrite does.
        tokens = cache.shape[0] * F.PAGE_TOKENS
        store_keys(keys, shadow.cache, torch.where(slots < 0, slots + tokens, slots))
        shadow.version = cache._version


def untracked(cache: Any) -> bool:
    """Whether ``cache`` keeps no version counter (an inference tensor), so that writes to it
    outside the compiled graph cannot be detected."""
    return isinstance(cache, torch.Tensor) and cache.is_inference()


def rewrite_indexers(
    gm: fx.GraphModule, example_inputs: Sequence[Any], max_query_len: Optional[int] = None
) -> tuple[fx.GraphModule, list[int]]:
    """Rewrite every reference indexer of a Dynamo graph onto FP4 shadows.

    Returns ``(graph module, sources)``: ``gm`` itself when nothing matched (sources empty),
    otherwise a rewritten copy (Dynamo reads its own graph again after the backend returns)
    with one placeholder per distinct key cache after the existing ones; ``sources[i]`` is the
    position of that cache among ``example_inputs``, and the caller passes
    ``IndexShadow.of(inputs[sources[i]]).cache`` for each, in that order.
    """
    matches, skipped = find_indexers(gm.graph)
    inputs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    kept = []
    for match in matches:
        if untracked(example_inputs[inputs.index(match.cache)]):
            skipped.append(f"{match.topk.name}: the key cache {match.cache.name} is an inference tensor (made under "
                           f"torch.inference_mode()), whose writes outside the compiled model cannot be seen; "
                           f"make it under torch.no_grad() instead")
        else:
            kept.append(match)
    matches = kept
    for reason in skipped:
        log.warning("fp4_inductor: indexer left as is: %s", reason)
    if not matches:
        return gm, []
    gm, env = _copy_graph_module(gm)
    graph = gm.graph
    matches = [m.mapped(env) for m in matches]
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    # The mode Dynamo recorded the graph's values in (the tracing context may hold a copy).
    fake_mode = next(
        v.fake_mode for v in (n.meta.get("example_value") for n in placeholders)
        if isinstance(v, torch._subclasses.FakeTensor)
    )
    sources: list[int] = []
    shadows: dict[fx.Node, fx.Node] = {}
    new_nodes: list[fx.Node] = []
    replaced: set[fx.Node] = set()
    for match in matches:
        replaced |= ancestors(match.topk)
        if match.cache not in shadows:
            index = placeholders.index(match.cache)
            source = example_inputs[index]
            last = [n for n in graph.nodes if n.op == "placeholder"][-1]
            with graph.inserting_after(last):
                node = graph.placeholder(f"fp4_shadow_{len(sources)}")
            # What AOTAutograd reads to lift the input and keep it static (CUDA graphs).
            node._dynamo_source = None
            node.meta["tensor_dict"] = {"_dynamo_static_input_type": "unguarded"}
            shadow = IndexShadow.of(source).cache
            node.meta["example_value"] = fake_mode.from_tensor(shadow, static_shapes=True)
            shadows[match.cache] = node
            sources.append(index)
        new_nodes += rewrite(graph, match, shadows[match.cache], max_query_len)
    _propagate_fake_values(new_nodes, fake_mode)
    erase_dead(graph, replaced)  # only the replaced chains: graph-wide DCE drops side effects it cannot see
    gm.recompile()
    log.info("fp4_inductor: rewrote %d indexer(s) onto %d FP4 shadow cache(s)", len(matches), len(sources))
    return gm, sources


def _propagate_fake_values(nodes: list[fx.Node], fake_mode) -> None:
    """``example_value`` for the new nodes, as Dynamo would have recorded them."""
    def value(a: Any) -> Any:
        return a.meta["example_value"] if isinstance(a, fx.Node) else a

    with fake_mode:
        for node in nodes:
            args = fx.node.map_aggregate(node.args, value)
            kwargs = fx.node.map_aggregate(node.kwargs, value)
            if node.op == "call_method":
                node.meta["example_value"] = getattr(args[0], node.target)(*args[1:], **kwargs)
            else:
                node.meta["example_value"] = node.target(*args, **kwargs)


def _copy_graph_module(gm: fx.GraphModule) -> tuple[fx.GraphModule, dict[fx.Node, fx.Node]]:
    """A new graph over the same module attributes, keeping what AOTAutograd reads from Dynamo's;
    with the map from the old graph's nodes to the new one's."""
    graph = fx.Graph()
    graph._codegen = copy.deepcopy(gm.graph._codegen)
    env: dict[fx.Node, fx.Node] = {}
    graph.output(graph.graph_copy(gm.graph, env))
    copied = fx.GraphModule(gm, graph)
    copied.meta.update(gm.meta)
    if hasattr(gm, "_param_name_to_source"):
        copied._param_name_to_source = gm._param_name_to_source
    for old, new in env.items():
        if hasattr(old, "_dynamo_source"):
            new._dynamo_source = old._dynamo_source
    return copied, env


def fp4_inductor(
    gm: fx.GraphModule, example_inputs: Sequence[Any], mode: Optional[str] = None, options: Optional[dict] = None
) -> Callable:
    """The ``fp4_inductor`` backend: rewrite reference indexers, then compile with Inductor.

    mode / options: as for the Inductor backend; options starting with ``fp4_inductor.``
    are this backend's: ``max_query_len`` (int, the scorer's launch hint) and
    ``rewrite`` (bool, default True).
    """
    from torch._inductor.compile_fx import compile_fx

    options = dict(options or {})
    own = {key[len(OPTION_PREFIX):]: options.pop(key) for key in list(options) if key.startswith(OPTION_PREFIX)}
    unknown = set(own) - {"max_query_len", "rewrite"}
    if unknown:
        raise ValueError(f"options: unknown fp4_inductor options {sorted(unknown)}; known: max_query_len, rewrite")
    rewrite_on = check_bool(OPTION_PREFIX + "rewrite", own.get("rewrite", True))
    max_query_len = own.get("max_query_len")
    if max_query_len is not None:
        check_int(OPTION_PREFIX + "max_query_len", max_query_len, minimum=1)
    # Validated (names, types) and merged with the mode's as torch.compile's Inductor backend does.
    patches = dict(torch._TorchCompileInductorWrapper(mode, options, dynamic=None).config)
    sources: list[int] = []
    if rewrite_on:
        gm, sources = rewrite_indexers(gm, example_inputs, max_query_len)
    shadows = [IndexShadow.of(example_inputs[i]) for i in sources]
    for shadow, i in zip(shadows, sources):
        shadow.sync(example_inputs[i])
    # The shadows go in as fake tensors of the compile's own mode with static shapes: a real
    # tensor Dynamo never saw would be fakified with fresh symbols that have no guard source.
    tracing = torch._guards.TracingContext.try_get()
    fake_mode = tracing.fake_mode if tracing is not None else None
    extra = [fake_mode.from_tensor(s.cache, static_shapes=True) if fake_mode is not None else s.cache for s in shadows]
    compiled = compile_fx(gm, [*example_inputs, *extra], config_patches=patches)
    if not sources:
        return compiled

    def run(*args: Any) -> Any:
        caches = [args[i] for i in sources]
        shadows = [IndexShadow.of(cache) for cache in caches]
        for shadow, cache in zip(shadows, caches):
            shadow.sync(cache)
        out = compiled(*args, *(s.cache for s in shadows))  # Dynamo's convention: positional, not boxed
        for shadow, cache in zip(shadows, caches):
            # The graph's own writes were mirrored; only writes made elsewhere need a refill.
            shadow.version = cache._version
        return out

    return run


def register() -> None:
    """Make ``backend="fp4_inductor"`` resolve without the installed entry point (a source checkout)."""
    if "fp4_inductor" not in torch._dynamo.list_backends(exclude_tags=()):
        torch._dynamo.register_backend(fp4_inductor, name="fp4_inductor")
