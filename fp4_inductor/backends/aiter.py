"""The AMD AITER adapter: ROCm's FP4 paged MQA-logits kernel behind one small interface.

Not shipped yet: ``available()`` is False, so ``backend=None`` never picks it
and ``backend="aiter"`` raises a clear error. The cache bytes written by
``store_keys`` already follow the layout AITER's reader takes.
"""

from __future__ import annotations


def available() -> bool:
    """Whether ``backend="aiter"`` can run here. False until the adapter lands."""
    return False
