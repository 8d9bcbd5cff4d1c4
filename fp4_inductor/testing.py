"""Test helpers for users' decode loops: prove that a step never reads device data on the host,
and check the block-table entries a step reads (which the ops cannot check without reading the
device)."""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.weak import WeakTensorKeyDictionary

from . import formats as F
from ._op_checks import check_paging
from .layout import check_cache
from .reference import row_requests, valid_region

# Ops that read device data on the host or whose output shape depends on data.
HOST_SYNC_OPS = frozenset(
    [
        "aten::_local_scalar_dense",
        "aten::item",
        "aten::nonzero",
        "aten::is_nonzero",
        "aten::equal",
        "aten::masked_select",
        "aten::unique_dim",
        "aten::_unique",
        "aten::_unique2",
        "aten::unique_consecutive",
        "aten::unique_dim_consecutive",
        "aten::allclose",
        "aten::bincount",
        "aten::_linalg_check_errors",  # linalg.inv/cholesky/solve read their info tensor on the host
    ]
)
# (``aten::_assert_async`` is not here: on CUDA it asserts on the device, without a sync.)


def syncs_inside(name: str, args: tuple, kwargs: dict) -> bool:
    """Ops that read device data on the host inside their CUDA kernel, only for some arguments."""
    if name == "aten::repeat_interleave":  # the Tensor overload reads cumsum[-1] without output_size
        return kwargs.get("output_size", args[1] if len(args) > 1 else None) is None
    if name == "aten::histc":  # min == max (the default 0, 0): the range is read from the data
        lo = args[2] if len(args) > 2 else kwargs.get("min", 0)
        hi = args[3] if len(args) > 3 else kwargs.get("max", 0)
        return lo == hi
    if name == "aten::multinomial":  # the validity check .item() of the fast path
        samples = args[1] if len(args) > 1 else kwargs.get("num_samples")
        replacement = args[2] if len(args) > 2 else kwargs.get("replacement", False)
        return (not replacement) or samples == 1
    return False

# Indexing ops, flagged when an index is a boolean (or uint8) mask: its nonzero runs inside the
# op, below this mode, and the result's shape depends on the data (``x[mask]``, ``x[mask] = v``).
INDEX_OPS = frozenset(["aten::index", "aten::index_put_", "aten::index_put", "aten::_index_put_impl_"])


def is_mask(i) -> bool:
    return isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8)


def mask_indexed(name: str, args: tuple, kwargs: dict, is_device_data=None) -> bool:
    indices = args[1] if len(args) > 1 else kwargs.get("indices", ())
    if not any(is_mask(i) for i in indices):
        return False
    if name == "aten::index":
        return True
    # A write of one host value without accumulate (``x[mask] = 0.0``) runs as masked_fill_ (no
    # nonzero), but only with exactly one mask, every other index None, the mask on self's device
    # (ATen's canDispatchToMaskedFill); ``x[m1, m2] = 0`` and ``x[mask, idx] = 0`` run a nonzero.
    value = args[2] if len(args) > 2 else kwargs.get("values")
    accumulate = args[3] if len(args) > 3 else kwargs.get("accumulate", False)
    tensors = [i for i in indices if i is not None]
    one_mask = len(tensors) == 1 and is_mask(tensors[0]) and tensors[0].device == args[0].device
    is_device_data = is_device_data or (lambda t: t.device.type != "cpu")
    one_host_value = isinstance(value, torch.Tensor) and value.numel() == 1 and not is_device_data(value)
    return bool(accumulate) or not (one_mask and one_host_value)


# Copies, flagged when they bring a tensor that is not on the CPU to the CPU (``.cpu()``,
# ``.to("cpu")``, ``.tolist()`` and ``.numpy()`` of a device tensor).
COPY_OPS = frozenset(["aten::_to_copy", "aten::copy_", "aten::_copy_from", "aten::_copy_from_and_resize"])


def copies_to_host(name: str, args: tuple, kwargs: dict) -> bool:
    if name == "aten::_to_copy":
        source, target = args[0], kwargs.get("device")
    elif name == "aten::copy_":  # copy_(self, src): self is the target
        source, target = args[1], args[0].device
    else:  # _copy_from(self, dst): self is the source
        source, target = args[0], args[1].device
    return (target is not None and torch.device(target).type == "cpu" and isinstance(source, torch.Tensor)
            and source.device.type != "cpu")


class HostSyncError(RuntimeError):
    """Raised by ``forbid_host_sync`` when a step reads device data on the host."""


# Python-level reads that dispatch no aten op on CPU tensors (and printing, which runs with the
# dispatch modes disabled even on the GPU): seen by a torch-function mode.
HOST_READ_METHODS = frozenset(["tolist", "numpy", "__array__", "__repr__", "__str__", "__format__"])


class _ForbidHostReads(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in HOST_READ_METHODS and args and isinstance(args[0], torch.Tensor) and args[0].device.type != "meta":
            raise HostSyncError(f"Tensor.{name} reads device data on the host")
        kwargs = kwargs or {}
        if func is torch.nn.functional.one_hot:
            classes = args[1] if len(args) > 1 else kwargs.get("num_classes", -1)
            if classes != -1:
                # On CUDA one_hot with num_classes checks its range on the device (scatter's
                # assert); the CPU kernel reads min/max on the host. Run what CUDA runs.
                x = args[0]
                return (x.unsqueeze(-1) == torch.arange(classes, device=x.device)).to(torch.int64)
        return func(*args, **kwargs)


class forbid_host_sync(TorchDispatchMode):
    """Raise ``HostSyncError`` on any op that reads device data on the host.

    ``fullgraph=True`` alone does not catch ``.item()`` in current PyTorch (it is
    captured as a scalar output), so decode paths are checked op by op here.
    The bodies of this library's ``fp4::`` ops are entered, so what they run
    inside is checked too. ``torch.repeat_interleave`` is flagged without
    ``output_size``. Copies of a device tensor to the CPU are flagged (``.cpu()``),
    and so are ``.tolist()``, ``.numpy()`` and printing a tensor, on any device.
    On the CPU every tensor is on the host: a one-element value written through a
    mask (``x[mask] = v``, ``masked_fill_(mask, v)``) counts as device data when an
    op under this mode computed it (it syncs on the GPU), as a host value otherwise.
    """

    def __init__(self):
        super().__init__()
        self._computed = WeakTensorKeyDictionary()
        self._depth = 0
        self._reads = None

    def __enter__(self):
        if self._depth == 0:
            self._reads = _ForbidHostReads()
            self._reads.__enter__()
        self._depth += 1
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            self._depth -= 1
            if self._depth == 0:
                self._reads.__exit__(*exc)

    def _is_device_data(self, t: torch.Tensor) -> bool:
        return t.device.type != "cpu" or t in self._computed

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func._schema.name
        if name in HOST_SYNC_OPS or syncs_inside(name, args, kwargs):
            raise HostSyncError(f"{name} reads device data on the host (or has a data-dependent shape)")
        if name in INDEX_OPS and mask_indexed(name, args, kwargs, self._is_device_data):
            raise HostSyncError(f"{name} with a boolean mask index has a data-dependent shape (a nonzero inside)")
        if (name in ("aten::masked_fill", "aten::masked_fill_") and len(args) > 2
                and isinstance(args[2], torch.Tensor) and self._is_device_data(args[2])):
            raise HostSyncError(f"{name} with a device tensor value reads it on the host (value.item())")
        if name in COPY_OPS and copies_to_host(name, args, kwargs):
            raise HostSyncError(f"{name} copies device data to the host")
        if name.startswith("fp4::"):
            from torch._library.custom_ops import OPDEFS

            op = OPDEFS.get(name)
            if op is not None:
                with self:
                    return op._init_fn(*args, **kwargs)
        out = func(*args, **kwargs)
        if name != "aten::lift_fresh":  # torch.tensor(literal) is a host constant
            for t in pytree.tree_leaves(out):
                if isinstance(t, torch.Tensor):
                    self._computed[t] = True
        return out


def check_block_table(block_table: torch.Tensor, cache: torch.Tensor, query_starts: torch.Tensor,
                      row_ends: torch.Tensor) -> None:
    """Raise ``ValueError`` where a block-table entry that some row's keys need is not a page of
    ``cache``: the entries ``[i, 0 : ceil(longest row_ends of request i / 64))``. The scorer reads
    those pages without a check (it would read the device); the others may hold anything.
    Before that, the layout values that ``decode_layout`` never makes: ``query_starts`` must
    start at 0, not decrease, and end at most at ``rows`` (the length of ``row_ends``);
    ``row_ends`` must not be negative. A row end past the block table's width is taken (the
    scorer cuts it there, and ``decode_layout`` saturates long ends at 2**31 - 1).

    This reads device data (a host sync): for tests and debugging, not inside a decode step."""
    check_cache(cache)
    check_paging(block_table, query_starts, row_ends, cache.device)
    requests, per_request = block_table.shape
    rows = row_ends.shape[0]
    # The kernels clamp starts into [0, rows] and ends into [0, width], so none of these faults;
    # but a first start other than 0 or a decreasing one gives rows to other requests in the
    # reference (which bisects query_starts) than in the scorer, and a start past the rows or a
    # negative end is a layout bug (decode_layout makes neither: it clamps both).
    starts, ends = query_starts.to(torch.int64), row_ends.to(torch.int64)
    if int(starts[0]) != 0:
        raise ValueError(f"query_starts: expected 0 at [0] (request 0 starts at row 0), got {int(starts[0])}")
    _refuse_entries("query_starts", starts, starts < starts.cummax(0).values,
                    "non-decreasing entries (a request starts where the one before it ends)")
    _refuse_entries("query_starts", starts, starts > rows, f"entries at most {rows} (the rows of row_ends)")
    _refuse_entries("row_ends", ends, ends < 0, "entries >= 0 (the keys each row sees)")
    if requests == 0 or rows == 0:
        return
    # The pages holding some key of a row's valid region (the scorer's), gathered per request.
    row_pages = valid_region(query_starts, row_ends, per_request * F.PAGE_TOKENS)
    row_pages = row_pages.view(rows, per_request, F.PAGE_TOKENS).any(-1).to(torch.int32)
    read = torch.zeros(requests, per_request, dtype=torch.int32, device=block_table.device)
    read = read.index_add_(0, row_requests(query_starts, rows), row_pages) > 0
    ids = block_table.to(torch.int64)
    _refuse_entries("block_table", ids, read & ((ids < 0) | (ids >= cache.shape[0])),
                    f"page ids in [0, {cache.shape[0]}) where rows read keys")


def _refuse_entries(name: str, values: torch.Tensor, bad: torch.Tensor, expected: str) -> None:
    """Raise naming the first entry of ``values`` where ``bad`` holds, its index and the count of
    such entries (reads device data)."""
    where = bad.nonzero()
    if where.shape[0] > 0:
        index = tuple(where[0].tolist())
        raise ValueError(f"{name}: expected {expected}, got {int(values[index])} at [{', '.join(map(str, index))}] "
                         f"(bad entries: {where.shape[0]})")
