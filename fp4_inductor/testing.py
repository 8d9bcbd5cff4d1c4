"""Test helpers for users' decode loops: prove that a step never reads device data on the host."""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode

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
    ]
)


class HostSyncError(RuntimeError):
    """Raised by ``forbid_host_sync`` when a step reads device data on the host."""


class forbid_host_sync(TorchDispatchMode):
    """Raise ``HostSyncError`` on any op that reads device data on the host.

    ``fullgraph=True`` alone does not catch ``.item()`` in current PyTorch (it is
    captured as a scalar output), so decode paths are checked op by op here.
    The bodies of this library's ``fp4::`` ops are entered, so what they run
    inside is checked too. ``torch.repeat_interleave`` is flagged even with
    ``output_size`` given; use ``searchsorted`` layouts instead.
    """

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func._schema.name
        if name in HOST_SYNC_OPS:
            raise HostSyncError(f"{name} reads device data on the host (or has a data-dependent shape)")
        if name.startswith("fp4::"):
            from torch._library.custom_ops import OPDEFS

            op = OPDEFS.get(name)
            if op is not None:
                with self:
                    return op._init_fn(*args, **kwargs)
        return func(*args, **kwargs)
