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

DeepSeek-V3.2's indexer rotates its queries and keys this way before its FP8 quantization. A
model that does so already must not be rotated again (H is its own inverse: twice is none).
"""

from __future__ import annotations

import torch

from . import formats as F


def hadamard_matrix(device: torch.device | str | None = None, scale: float = F.HEAD_DIM**-0.5,
                    dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``dtype`` [128, 128]: the Sylvester Hadamard matrix (entries +-1, symmetric) times
    ``scale``; the default makes it orthonormal. Use it on both sides:
    ``quantize_queries(q.float() @ h)`` and ``store_keys(k.float() @ h, ...)``.

    In bf16 or fp16, take ``scale=2**-3`` on one side and ``2**-4`` on the other: the entries
    are then exact, the logits are unchanged all the same (8 * 16 = 128), and FP4's
    power-of-two scales take either factor without a rounding (``FP4Indexer`` does this)."""
    h = torch.ones(1, 1, device=device)
    while h.shape[0] < F.HEAD_DIM:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return (h * scale).to(dtype)
