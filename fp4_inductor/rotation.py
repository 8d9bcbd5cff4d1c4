"""The Hadamard rotation of indexer queries and keys, applied before FP4 quantization.

An orthonormal H (H @ H.T = I) leaves every dot product as it was, ``(q @ H) . (k @ H) = q . k``,
so the indexer's logits are unchanged in exact arithmetic; what changes is the FP4 rounding. A
key with a few outlier channels has one 32-element group whose UE8M0 scale follows the outlier:
the rest of that group rounds to few levels, and its scale lies far above the key's other
groups. After the rotation every channel carries a share of every input channel, so the four
group scales of a key come out close together:
- FP4 keeps more of the BF16 top-k (``python -m fp4_inductor.accuracy``, data ``outliers``);
- every key folds into the scorer's one-dot path: a key whose group scales span more than
  2**3 costs the scorer a second pass over its tile (docs/integration.md).

DeepSeek-V3.2's indexer rotates its queries and keys this way (a Hadamard transform, scale
128**-0.5) before its FP8 quantization. Code that feeds the ops queries and keys rotated
already must not rotate them again: H is its own inverse, so a second rotation undoes the first.
"""

from __future__ import annotations

import torch

from . import formats as F
from ._checks import FLOAT_DTYPES, check_dtype, check_positive_float


def hadamard_matrix(device: torch.device | str | None = None, *, scale: float = F.HEAD_DIM**-0.5,
                    dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``dtype`` [128, 128]: the Sylvester Hadamard matrix, entry (i, j) = (-1)**popcount(i & j)
    (symmetric, the natural order of a fast Walsh-Hadamard transform), times ``scale``. The
    default scale makes it orthonormal; use it on both sides:
    ``quantize_queries(q.float() @ h)`` and ``store_keys(k.float() @ h, ...)``.

    ``FP4Indexer(rotate=True)`` works in bf16 with ``scale=2**-3`` on the query side and
    ``2**-4`` on the key side: exact entries, the same logits (8 * 16 = 128), and FP4's
    power-of-two scales take either factor without a rounding. Keys must then be written with
    the key side's matrix everywhere (``FP4Indexer.rotate_keys``)."""
    check_dtype("dtype", dtype, FLOAT_DTYPES)
    scale = check_positive_float("scale", scale)
    info = torch.finfo(dtype)
    if not info.tiny <= scale <= info.max:  # the entries, +-scale, must be normal numbers of dtype
        raise ValueError(f"scale: expected a number in [{info.tiny}, {info.max}] (normal in {info.dtype}), "
                         f"got {scale!r}")
    h = torch.ones(1, 1, device=device)
    while h.shape[0] < F.HEAD_DIM:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return (h * scale).to(dtype)
