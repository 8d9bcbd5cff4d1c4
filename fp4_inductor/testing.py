"""Test helpers for users' decode loops: prove that a step never reads device data on the host,
and check the block-table entries a step reads (which the ops cannot check without reading the
device)."""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode

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
        "aten::repeat_interleave",
        "aten::allclose",
        "aten::_assert_async",
        "aten::bincount",
    ]
)

# Indexing ops, flagged when an index is a boolean (or uint8) mask: its nonzero runs inside the
# op, below this mode, and the result's shape depends on the data (``x[mask]``, ``x[mask] = v``).
INDEX_OPS = frozenset(["aten::index", "aten::index_put_", "aten::index_put", "aten::_index_put_impl_"])


def mask_indexed(name: str, args: tuple, kwargs: dict) -> bool:
    indices = args[1] if len(args) > 1 else kwargs.get("indices", ())
    if not any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in indices):
        return False
    if name == "aten::index":
        return True
    # A write of one CPU value without accumulate (``x[mask] = 0.0``) runs as masked_fill_: the
    # value is read on the host, no device data is, and no nonzero runs.
    value = args[2] if len(args) > 2 else kwargs.get("values")
    accumulate = args[3] if len(args) > 3 else kwargs.get("accumulate", False)
    one_host_value = isinstance(value, torch.Tensor) and value.numel() == 1 and value.device.type == "cpu"
    return bool(accumulate) or not one_host_value


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


class forbid_host_sync(TorchDispatchMode):
    """Raise ``HostSyncError`` on any op that reads device data on the host.

    ``fullgraph=True`` alone does not catch ``.item()`` in current PyTorch (it is
    captured as a scalar output), so decode paths are checked op by op here.
    The bodies of this library's ``fp4::`` ops are entered, so what they run
    inside is checked too. ``torch.repeat_interleave`` is flagged even with
    ``output_size`` given; use ``searchsorted`` layouts instead. Copies of a
    device tensor to the CPU are flagged (``.cpu()``, ``.tolist()``, ``.numpy()``);
    on CPU tensors ``.tolist()`` and ``.numpy()`` read memory directly, without an
    op to see, so run the check on the device to catch them.
    """

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func._schema.name
        if name in HOST_SYNC_OPS:
            raise HostSyncError(f"{name} reads device data on the host (or has a data-dependent shape)")
        if name in INDEX_OPS and mask_indexed(name, args, kwargs):
            raise HostSyncError(f"{name} with a boolean mask index has a data-dependent shape (a nonzero inside)")
        if name in COPY_OPS and copies_to_host(name, args, kwargs):
            raise HostSyncError(f"{name} copies device data to the host")
        if name.startswith("fp4::"):
            from torch._library.custom_ops import OPDEFS

            op = OPDEFS.get(name)
            if op is not None:
                with self:
                    return op._init_fn(*args, **kwargs)
        return func(*args, **kwargs)


def check_block_table(block_table: torch.Tensor, cache: torch.Tensor, query_starts: torch.Tensor,
                      row_ends: torch.Tensor) -> None:
    """Raise ``ValueError`` where a block-table entry that some row's keys need is not a page of
    ``cache``: the entries ``[i, 0 : ceil(longest row_ends of request i / 64))``. The scorer reads
    those pages without a check (it would read the device); the others may hold anything.

    This reads device data (a host sync): for tests and debugging, not inside a decode step."""
    check_cache(cache)
    check_paging(block_table, query_starts, row_ends, "rows", cache.device)
    requests, per_request = block_table.shape
    rows = row_ends.shape[0]
    if requests == 0 or rows == 0:
        return
    # The pages holding some key of a row's valid region (the scorer's), gathered per request.
    row_pages = valid_region(query_starts, row_ends, per_request * F.PAGE_TOKENS)
    row_pages = row_pages.view(rows, per_request, F.PAGE_TOKENS).any(-1).to(torch.int32)
    read = torch.zeros(requests, per_request, dtype=torch.int32, device=block_table.device)
    read = read.index_add_(0, row_requests(query_starts, rows), row_pages) > 0
    ids = block_table.to(torch.int64)
    bad = (read & ((ids < 0) | (ids >= cache.shape[0]))).nonzero()
    if bad.shape[0] > 0:
        i, slot = bad[0].tolist()
        raise ValueError(f"block_table: expected page ids in [0, {cache.shape[0]}) where rows read keys, got "
                         f"{int(ids[i, slot])} at [{i}, {slot}] (bad entries: {bad.shape[0]})")
